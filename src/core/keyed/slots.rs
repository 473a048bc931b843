//! [`Slots`]: limiters in numbered slots, for a caller that keeps its own key → slot index,
//! each slot kept whole ([`Whole`]: any limiter) or packed ([`PackedGcra`]: a token bucket
//! with count-then-block, 16 bytes, as every slot shares the prototype's quota).

use super::{first_check, Ceiling};
use crate::core::limit::{Blocking, CostTooHigh, Decision, Gcra, Limiter};
use crate::core::time::{Instant, Span};
use alloc::vec::Vec;
use core::marker::PhantomData;

/// How a [`Slots`] table keeps each slot's limiter `L`.
pub trait Packing<L> {
    /// A slot: a limiter, or nothing.
    type Slot;
    /// A slot holding nothing.
    const EMPTY: Self::Slot;
    /// `limiter`, as a slot.
    fn pack(limiter: L) -> Self::Slot;
    /// `f` on the limiter in `slot` (the table's `prototype` gives what a packed slot leaves
    /// out), the slot updated after; `None` when it holds nothing.
    fn with_mut<R>(prototype: &L, slot: &mut Self::Slot, f: impl FnOnce(&mut L) -> R) -> Option<R>;
    /// `f` on the limiter in `slot`; `None` when it holds nothing.
    fn with<R>(prototype: &L, slot: &Self::Slot, f: impl FnOnce(&L) -> R) -> Option<R>;
}

/// Each slot holds its limiter whole (`Option<L>`): any limiter, its quota repeated per slot.
pub struct Whole;

impl<L> Packing<L> for Whole {
    type Slot = Option<L>;
    const EMPTY: Option<L> = None;

    fn pack(limiter: L) -> Option<L> {
        Some(limiter)
    }

    fn with_mut<R>(_: &L, slot: &mut Option<L>, f: impl FnOnce(&mut L) -> R) -> Option<R> {
        slot.as_mut().map(f)
    }

    fn with<R>(_: &L, slot: &Option<L>, f: impl FnOnce(&L) -> R) -> Option<R> {
        slot.as_ref().map(f)
    }
}

/// Each slot holds a [`Blocking<Gcra>`]'s state alone, 16 bytes: the bucket's theoretical
/// arrival time and the end of its block; the quota and the block's length are the
/// prototype's. (A `Whole` slot of the same limiter is 56 bytes.) A block can end no later
/// than `u64::MAX − 2` ns (584 years from the clock's zero); one imposed later is kept as
/// ending then.
pub struct PackedGcra;

/// The block's end word of an empty slot (a block's end is stored plus one, at most
/// `u64::MAX − 1`; 0 is no block).
const NO_LIMITER: u64 = u64::MAX;

impl PackedGcra {
    fn unpack(prototype: &Blocking<Gcra>, [tat, until]: [u64; 2]) -> Blocking<Gcra> {
        let until = until.checked_sub(1).map(Instant::from_nanos);
        let inner = prototype.inner().at_tat(Instant::from_nanos(tat));
        Blocking::new(inner, prototype.timeout()).with_block_end(until)
    }

    fn words(limiter: &Blocking<Gcra>) -> [u64; 2] {
        let until = limiter.block_end().map_or(0, |t| t.as_nanos().min(NO_LIMITER - 2) + 1);
        [limiter.inner().full_at().as_nanos(), until]
    }
}

impl Packing<Blocking<Gcra>> for PackedGcra {
    type Slot = [u64; 2];
    const EMPTY: [u64; 2] = [0, NO_LIMITER];

    fn pack(limiter: Blocking<Gcra>) -> [u64; 2] {
        Self::words(&limiter)
    }

    #[inline]
    fn with_mut<R>(
        prototype: &Blocking<Gcra>,
        slot: &mut [u64; 2],
        f: impl FnOnce(&mut Blocking<Gcra>) -> R,
    ) -> Option<R> {
        if slot[1] == NO_LIMITER {
            return None;
        }
        let mut limiter = Self::unpack(prototype, *slot);
        let out = f(&mut limiter);
        *slot = Self::words(&limiter);
        Some(out)
    }

    #[inline]
    fn with<R>(prototype: &Blocking<Gcra>, slot: &[u64; 2], f: impl FnOnce(&Blocking<Gcra>) -> R) -> Option<R> {
        (slot[1] != NO_LIMITER).then(|| f(&Self::unpack(prototype, *slot)))
    }
}

/// Limiters in numbered slots, at most `max_keys` of them, each a fresh copy of a prototype
/// when claimed; slots of limiters back at full quota are freed by a sweep and reused. `P`
/// says how a slot keeps its limiter: [`Whole`] (the default), or [`PackedGcra`] for a
/// token bucket with count-then-block ([`Slots::with_packing`]), the same decisions in 16
/// bytes a slot.
///
/// # Examples
/// ```
/// use sluicegate::keyed::Slots;
/// use sluicegate::limit::Gcra;
/// use sluicegate::{Instant, Span};
/// let mut slots = Slots::new(Gcra::new(1, Span::from_secs(1), 1).unwrap(), 1);
/// let t = Instant::from_secs(5);
/// let (decision, slot) = slots.check_new(t, 1, &mut |_| {}).unwrap();
/// assert!(decision.is_allowed());
/// let slot = slot.expect("it remembers the request, so it holds a slot");
/// assert!(!slots.check(slot, t, 1).unwrap().is_allowed());
/// // The table is full: a new key is refused until the slot's limiter is back at full quota.
/// assert!(!slots.check_new(t, 1, &mut |_| {}).unwrap().0.is_allowed());
/// let mut freed = Vec::new();
/// assert!(slots.check_new(t + Span::from_secs(1), 1, &mut |s| freed.push(s)).unwrap().0.is_allowed());
/// assert_eq!(freed, [slot]);
/// ```
pub struct Slots<L, P: Packing<L> = Whole> {
    slots: Vec<P::Slot>,
    free: Vec<u32>,
    live: usize,
    prototype: L,
    ceiling: Ceiling,
    packing: PhantomData<P>,
}

impl<L: Limiter + Clone> Slots<L> {
    /// At most `max_keys` (at least 1, at most `u32::MAX`) limiters, each starting as a copy
    /// of `prototype` (which should be fresh), each slot holding its limiter whole.
    pub fn new(prototype: L, max_keys: usize) -> Self {
        Self::with_packing(prototype, max_keys)
    }

    /// The limiter in `slot`, if it holds one.
    pub fn get(&self, slot: u32) -> Option<&L> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }
}

impl<L: Limiter + Clone, P: Packing<L>> Slots<L, P> {
    /// At most `max_keys` (at least 1, at most `u32::MAX`) limiters, each starting as a copy
    /// of `prototype` (which should be fresh), kept as `P` keeps them
    /// (`Slots::<_, PackedGcra>::with_packing(..)`).
    pub fn with_packing(prototype: L, max_keys: usize) -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            prototype,
            ceiling: Ceiling::new(max_keys),
            packing: PhantomData,
        }
    }

    /// Check a request against the limiter in `slot`. A slot that holds none (never
    /// claimed, or freed) answers as a fresh limiter and keeps nothing.
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds a limiter's whole capacity.
    pub fn check(&mut self, slot: u32, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.check_until_full(slot, now, cost).map(|(decision, _)| decision)
    }

    /// [`check`](Slots::check), also returning when the slot's limiter is back at full
    /// quota after it (`now` for a slot that holds none).
    ///
    /// # Errors
    /// As for `check`.
    #[inline]
    pub fn check_until_full(&mut self, slot: u32, now: Instant, cost: u32) -> Result<(Decision, Instant), CostTooHigh> {
        let held = self.slots.get_mut(slot as usize).and_then(|slot| {
            P::with_mut(&self.prototype, slot, |limiter| limiter.check(now, cost).map(|d| (d, limiter.full_at())))
        });
        match held {
            Some(checked) => {
                let (decision, full_at) = checked?;
                // A check can bring an entry's idle time forward (a block shorter than its
                // window); keep the ceiling's bound below every entry's.
                self.ceiling.note(full_at);
                Ok((decision, full_at))
            }
            None => Ok((self.prototype.clone().check(now, cost)?, now)),
        }
    }

    /// Check the first request of a new key: against a fresh limiter, which is given a slot
    /// only if the request left a trace in it. A full table is swept first (each freed slot
    /// is passed to `freed`, so the caller drops its keys); if it is still full the request
    /// is refused until the earliest entry frees up, and gets no slot.
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds a limiter's whole capacity.
    pub fn check_new(
        &mut self,
        now: Instant,
        cost: u32,
        freed: &mut dyn FnMut(u32),
    ) -> Result<(Decision, Option<u32>), CostTooHigh> {
        let (decision, fresh) = first_check(&self.prototype, now, cost)?;
        let Some(fresh) = fresh else { return Ok((decision, None)) };
        match self.place(fresh, now, freed) {
            Ok(slot) => Ok((decision, Some(slot))),
            Err(retry_after) => Ok((Decision::Deny { retry_after }, None)),
        }
    }

    /// A slot for a fresh limiter changed by `change` (a block imposed from outside, say),
    /// on the terms of [`check_new`](Slots::check_new).
    ///
    /// # Errors
    /// How long until the earliest entry frees up, when the table is full.
    pub fn claim(
        &mut self,
        now: Instant,
        change: impl FnOnce(&mut L),
        freed: &mut dyn FnMut(u32),
    ) -> Result<u32, Span> {
        let mut fresh = self.prototype.clone();
        change(&mut fresh);
        self.place(fresh, now, freed)
    }

    fn place(&mut self, limiter: L, now: Instant, freed: &mut dyn FnMut(u32)) -> Result<u32, Span> {
        let (slots, free, live, prototype) = (&mut self.slots, &mut self.free, &mut self.live, &self.prototype);
        self.ceiling.room(*live, now, |now| {
            let (dropped, earliest) = sweep_slots::<L, P>(prototype, slots, free, now, freed);
            *live -= dropped;
            (dropped, earliest)
        })?;
        self.ceiling.note(limiter.full_at());
        self.live += 1;
        Ok(match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = P::pack(limiter);
                slot
            }
            None => {
                self.slots.push(P::pack(limiter));
                (self.slots.len() - 1) as u32
            }
        })
    }

    /// What `check` would answer for `slot` (`None`: a key with no slot), changing nothing.
    ///
    /// # Errors
    /// As for `check`.
    pub fn peek(&self, slot: Option<u32>, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        match slot.and_then(|s| self.with(s, |limiter| limiter.peek(now, cost))) {
            Some(decision) => decision,
            None => self.prototype.peek(now, cost),
        }
    }

    /// `f` on the limiter in `slot`, if it holds one.
    pub fn with<R>(&self, slot: u32, f: impl FnOnce(&L) -> R) -> Option<R> {
        P::with(&self.prototype, self.slots.get(slot as usize)?, f)
    }

    /// `f` on the limiter in `slot` to change it (e.g. impose a block), if it holds one.
    pub fn with_mut<R>(&mut self, slot: u32, f: impl FnOnce(&mut L) -> R) -> Option<R> {
        let out = P::with_mut(&self.prototype, self.slots.get_mut(slot as usize)?, f)?;
        // Whatever the caller changed, the ceiling's bound must stay below every entry's:
        // take the earliest possible (a sweep then finds the truth).
        self.ceiling.next_sweep = Instant::ZERO;
        Some(out)
    }

    /// Free `slot` (its key starts afresh); whether it held a limiter.
    pub fn remove(&mut self, slot: u32) -> bool {
        let Some(entry) = self.slots.get_mut(slot as usize) else { return false };
        if P::with(&self.prototype, entry, |_| ()).is_none() {
            return false;
        }
        *entry = P::EMPTY;
        self.free.push(slot);
        self.live -= 1;
        true
    }

    /// Free every slot whose limiter is back at full quota at `now`, passing each to
    /// `freed`; returns how many. O(slots): call it from a timer, or let a full table call it.
    pub fn sweep(&mut self, now: Instant, freed: &mut dyn FnMut(u32)) -> usize {
        let (dropped, earliest) = sweep_slots::<L, P>(&self.prototype, &mut self.slots, &mut self.free, now, freed);
        self.live -= dropped;
        self.ceiling.next_sweep = earliest;
        dropped
    }

    /// How many slots hold a limiter.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no slot holds a limiter.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The ceiling on slots.
    pub fn max_keys(&self) -> usize {
        self.ceiling.max_keys
    }

    /// The prototype every slot starts from.
    pub fn prototype(&self) -> &L {
        &self.prototype
    }
}

/// Free the slots of limiters back at full quota at `now`: how many, and the earliest
/// `full_at` of those left.
fn sweep_slots<L: Limiter, P: Packing<L>>(
    prototype: &L,
    slots: &mut [P::Slot],
    free: &mut Vec<u32>,
    now: Instant,
    freed: &mut dyn FnMut(u32),
) -> (usize, Instant) {
    let mut earliest = Instant::from_nanos(u64::MAX);
    let mut count = 0;
    for (slot, entry) in slots.iter_mut().enumerate() {
        let Some(full_at) = P::with(prototype, entry, Limiter::full_at) else { continue };
        if full_at <= now {
            *entry = P::EMPTY;
            free.push(slot as u32);
            freed(slot as u32);
            count += 1;
        } else {
            earliest = earliest.min(full_at);
        }
    }
    (count, earliest)
}
