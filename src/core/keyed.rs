//! Bounded keyed state: one limiter per key, in a salted hash table with a hard ceiling.
//!
//! A key's limiter exists only while it remembers something: once it is back at full
//! quota it is identical to a fresh one, so a sweep drops it. The table never holds more
//! than `max_keys` entries, however many keys a flood invents; when it is full and nothing
//! can be swept, a *new* key is refused (fail closed) until an entry frees up, while keys
//! already present keep their own counts.
//!
//! [`Keyed`] holds the keys, in a salted hash table. [`Slots`] is the same table without
//! them: limiters in numbered slots, for a caller that keeps its own key → slot index (the
//! JavaScript `Limiter` keeps a `Map` of strings, so a key never crosses into wasm). Both
//! decide a new key and a full table the same way; a slot holds its limiter whole, or, for a
//! token bucket with count-then-block, packed in 16 bytes ([`PackedGcra`]). [`KeyedGcra`] is
//! `Keyed<K, Gcra>`'s decisions in a table of keys and their GCRA state side by side, for
//! many keys.

use crate::core::limit::{CostTooHigh, Decision, Limiter};
use crate::core::time::{Instant, Span};
use alloc::borrow::ToOwned;
use core::borrow::Borrow;
use core::hash::Hash;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

mod gcra;
mod slots;
pub use gcra::KeyedGcra;
pub use slots::{PackedGcra, Packing, Slots, Whole};

/// What both tables share: the ceiling on entries, and when a sweep could free one.
struct Ceiling {
    max_keys: usize,
    /// No entry can be swept before this instant (a lower bound of every entry's
    /// `full_at`), so a full table is not rescanned on every new key.
    next_sweep: Instant,
}

impl Ceiling {
    fn new(max_keys: usize) -> Self {
        Ceiling { max_keys: max_keys.clamp(1, u32::MAX as usize), next_sweep: Instant::ZERO }
    }

    /// An entry was checked or stored: its `full_at` may be the earliest.
    fn note(&mut self, full_at: Instant) {
        self.next_sweep = self.next_sweep.min(full_at);
    }

    /// Room for one more entry in a table holding `len`. A full table is swept first when a
    /// sweep can free something (`sweep` drops the idle entries, returning how many and the
    /// earliest `full_at` left); `Err` with the wait until the earliest entry frees up.
    fn room(&mut self, len: usize, now: Instant, sweep: impl FnOnce(Instant) -> (usize, Instant)) -> Result<(), Span> {
        if len < self.max_keys {
            return Ok(());
        }
        if now >= self.next_sweep {
            let (dropped, earliest) = sweep(now);
            self.next_sweep = earliest;
            if len - dropped < self.max_keys {
                return Ok(());
            }
        }
        Err((self.next_sweep - now).max(Span::from_nanos(1)))
    }
}

/// A new key's first request, as both tables decide it: against a fresh copy of the
/// prototype, which is worth keeping only if the request left a trace in it.
fn first_check<L: Limiter + Clone>(
    prototype: &L,
    now: Instant,
    cost: u32,
) -> Result<(Decision, Option<L>), CostTooHigh> {
    let mut fresh = prototype.clone();
    let decision = fresh.check(now, cost)?;
    let keep = !fresh.is_idle(now);
    Ok((decision, keep.then_some(fresh)))
}

/// One limiter per key, each a fresh copy of a prototype on first use, in a salted hash
/// table.
///
/// # Examples
/// ```
/// use sluicegate::keyed::Keyed;
/// use sluicegate::limit::Gcra;
/// use sluicegate::{Instant, Span};
/// let mut per_ip: Keyed<u32, Gcra> = Keyed::new(Gcra::new(2, Span::from_secs(1), 2).unwrap(), 10_000, 0x5eed);
/// let t = Instant::ZERO;
/// assert!(per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(!per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(per_ip.check(&2, t, 1).unwrap().is_allowed()); // another key, its own bucket
/// ```
pub struct Keyed<K, L> {
    map: HashMap<K, L, FixedState>,
    prototype: L,
    ceiling: Ceiling,
}

impl<K: Hash + Eq, L: Limiter + Clone> Keyed<K, L> {
    /// A table of at most `max_keys` (at least 1) limiters, each starting as a copy of
    /// `prototype` (which should be fresh), hashed with `salt` (choose it at random per
    /// process so that keys colliding in one process do not collide in the next).
    pub fn new(prototype: L, max_keys: usize, salt: u64) -> Self {
        let ceiling = Ceiling::new(max_keys);
        let mut map = HashMap::with_hasher(FixedState::with_seed(salt));
        map.reserve(ceiling.max_keys.min(1 << 16));
        Keyed { map, prototype, ceiling }
    }

    /// Check a request of `key`. A key with no entry is checked against a fresh limiter,
    /// and stored only if the request changed it.
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds a limiter's whole capacity.
    pub fn check<Q>(&mut self, key: &Q, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(limiter) = self.map.get_mut(key) {
            let decision = limiter.check(now, cost);
            // A check can bring an entry's idle time forward (a block shorter than its
            // window); keep the ceiling's bound below every entry's.
            self.ceiling.note(limiter.full_at());
            return decision;
        }
        let first = first_check(&self.prototype, now, cost)?;
        Ok(self.keep_new(key, now, first))
    }

    /// [`Keyed::check`] for keys whose state may be kept elsewhere: a key with no entry
    /// starts from `start(prototype)` (say, a fresh copy with a count restored from storage)
    /// instead of a fresh copy, and is stored, as in `check`, only if the request left a
    /// trace in it; the ceiling on keys applies as in `check`.
    ///
    /// # Errors
    /// As for `check`.
    pub fn check_from<Q>(
        &mut self,
        key: &Q,
        now: Instant,
        cost: u32,
        start: impl FnOnce(&L) -> L,
    ) -> Result<Decision, CostTooHigh>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if self.map.contains_key(key) {
            return self.check(key, now, cost);
        }
        let first = first_check(&start(&self.prototype), now, cost)?;
        Ok(self.keep_new(key, now, first))
    }

    /// A new key's first decision, its limiter kept when it left a trace and the table has
    /// room (a full table of busy keys refuses the key until one frees up).
    fn keep_new<Q>(&mut self, key: &Q, now: Instant, (decision, fresh): (Decision, Option<L>)) -> Decision
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let Some(fresh) = fresh else { return decision };
        let map = &mut self.map;
        if let Err(retry_after) = self.ceiling.room(map.len(), now, |now| sweep_map(map, now)) {
            return Decision::Deny { retry_after };
        }
        self.ceiling.note(fresh.full_at());
        self.map.insert(key.to_owned(), fresh);
        decision
    }

    /// The limiter of `key`, when it holds state.
    pub fn get<Q>(&self, key: &Q) -> Option<&L>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key)
    }

    /// What `check` would answer, changing nothing.
    ///
    /// # Errors
    /// As for `check`.
    pub fn peek<Q>(&self, key: &Q, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self.map.get(key) {
            Some(limiter) => limiter.peek(now, cost),
            None => self.prototype.peek(now, cost),
        }
    }

    /// Drop every limiter that is back at full quota at `now`; returns how many were
    /// dropped. O(entries): call it from a timer, or let a full table call it.
    pub fn sweep(&mut self, now: Instant) -> usize {
        let (dropped, earliest) = sweep_map(&mut self.map, now);
        self.ceiling.next_sweep = earliest;
        dropped
    }

    /// How many keys hold state.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key holds state.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The ceiling on keys.
    pub fn max_keys(&self) -> usize {
        self.ceiling.max_keys
    }
}

/// Drop the limiters back at full quota at `now`: how many, and the earliest `full_at` of
/// those left.
fn sweep_map<K, L: Limiter>(map: &mut HashMap<K, L, FixedState>, now: Instant) -> (usize, Instant) {
    let before = map.len();
    let mut earliest = Instant::from_nanos(u64::MAX);
    map.retain(|_, limiter| {
        let full_at = limiter.full_at();
        if full_at <= now {
            false
        } else {
            earliest = earliest.min(full_at);
            true
        }
    });
    (before - map.len(), earliest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::Gcra;
    use crate::core::time::Span;

    fn one_per_second() -> Gcra {
        Gcra::new(1, Span::from_secs(1), 1).unwrap()
    }

    #[test]
    fn a_full_table_refuses_new_keys_but_keeps_counting_old_ones() {
        let mut table: Keyed<u32, Gcra> = Keyed::new(one_per_second(), 2, 7);
        let t = Instant::from_secs(10);
        assert!(table.check(&1, t, 1).unwrap().is_allowed());
        assert!(table.check(&2, t, 1).unwrap().is_allowed());
        let Decision::Deny { retry_after } = table.check(&3, t, 1).unwrap() else { panic!("table is full") };
        assert_eq!(retry_after, Span::from_secs(1));
        assert!(!table.check(&1, t, 1).unwrap().is_allowed());
        assert_eq!(table.len(), 2);
        // Once the old entries are back at full quota they are swept and room appears.
        assert!(table.check(&3, t + Span::from_secs(1), 1).unwrap().is_allowed());
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn a_request_that_leaves_no_trace_stores_nothing() {
        let mut table: Keyed<u32, Gcra> = Keyed::new(one_per_second(), 10, 7);
        assert!(table.check(&1, Instant::from_secs(1), 0).unwrap().is_allowed());
        assert!(table.is_empty());
    }

    #[test]
    fn a_new_key_may_start_from_state_kept_elsewhere() {
        let mut table: Keyed<u32, Gcra> = Keyed::new(Gcra::new(2, Span::from_secs(1), 2).unwrap(), 10, 7);
        let t = Instant::from_secs(10);
        // Restored with one of its two spent: one more passes, then it is refused.
        let restored = |p: &Gcra| {
            let mut g = *p;
            g.check(t, 1).unwrap();
            g
        };
        assert!(table.check_from(&1, t, 1, restored).unwrap().is_allowed());
        assert!(!table.check_from(&1, t, 1, |_| unreachable!("1 holds state")).unwrap().is_allowed());
        assert!(table.get(&1).is_some() && table.get(&2).is_none());
    }

    #[test]
    fn sweep_drops_only_idle_entries() {
        let mut table: Keyed<u32, Gcra> = Keyed::new(Gcra::new(5, Span::from_secs(5), 5).unwrap(), 100, 7);
        let t = Instant::from_secs(100);
        table.check(&1, t, 1).unwrap();
        table.check(&2, t, 5).unwrap();
        assert_eq!(table.sweep(t + Span::from_secs(1)), 1);
        assert_eq!(table.len(), 1);
        assert!(!table.check(&2, t + Span::from_secs(1), 2).unwrap().is_allowed());
    }
}
