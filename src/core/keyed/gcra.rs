//! [`KeyedGcra`]: one GCRA bucket per key, as [`Keyed<K, Gcra>`](super::Keyed) decides them,
//! in a table of the key and its theoretical arrival time side by side.
//!
//! Every bucket of a keyed GCRA limit shares one quota, so a key's state is its TAT alone: 8
//! bytes beside the key (16 a slot for a `u64` key, against 40 for a key and a whole
//! [`Gcra`] in a general map). The slots are open-addressed with linear probing, at most
//! three quarters full, so a lookup of a million keys reads one or two neighbouring cache
//! lines from a table that fits a last-level cache, where a general map's reads more, and
//! further apart.

use super::Ceiling;
use crate::core::limit::{CostTooHigh, Decision, Gcra, Limiter};
use crate::core::time::Instant;
use alloc::borrow::ToOwned;
use alloc::vec;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use foldhash::fast::FixedState;

/// The fewest slots a table has.
const MIN_SLOTS: usize = 16;

/// One GCRA bucket per key, each starting as the quota's (fresh) bucket, at most `max_keys`
/// of them: [`Keyed<K, Gcra>`](super::Keyed)'s decisions, ceiling and sweep, decision for
/// decision, at a fraction of its memory and time for many keys.
///
/// # Examples
/// ```
/// use sluicegate::keyed::KeyedGcra;
/// use sluicegate::limit::Gcra;
/// use sluicegate::{Instant, Span};
/// let mut per_ip: KeyedGcra<u32> = KeyedGcra::new(Gcra::new(2, Span::from_secs(1), 2).unwrap(), 10_000, 0x5eed);
/// let t = Instant::ZERO;
/// assert!(per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(!per_ip.check(&1, t, 1).unwrap().is_allowed());
/// assert!(per_ip.check(&2, t, 1).unwrap().is_allowed()); // another key, its own bucket
/// ```
pub struct KeyedGcra<K> {
    /// Each slot's key and TAT; a TAT of zero is an empty slot (a kept bucket's TAT is
    /// always after the instant it was checked at, so never zero).
    slots: Vec<(K, Instant)>,
    /// `64 - log2(slots.len())`: a hash's top bits index the table.
    shift: u32,
    len: usize,
    quota: Gcra,
    hasher: FixedState,
    ceiling: Ceiling,
}

impl<K: Hash + Eq + Clone + Default> KeyedGcra<K> {
    /// A table of at most `max_keys` (at least 1) buckets of `quota`, each starting as
    /// `quota` does (which should be fresh), hashed with `salt` (choose it at random per
    /// process).
    pub fn new(quota: Gcra, max_keys: usize, salt: u64) -> Self {
        let ceiling = Ceiling::new(max_keys);
        let slots = slots_for(ceiling.max_keys.min(1 << 10));
        KeyedGcra {
            shift: 64 - slots.trailing_zeros(),
            slots: vec![(K::default(), Instant::ZERO); slots],
            len: 0,
            quota,
            hasher: FixedState::with_seed(salt),
            ceiling,
        }
    }

    /// Where `key` is (`Ok`), or the empty slot where it would go (`Err`).
    #[inline]
    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mask = self.slots.len() - 1;
        let mut i = index(self.hasher.hash_one(key), self.shift);
        loop {
            let (k, tat) = &self.slots[i];
            if *tat == Instant::ZERO {
                return Err(i);
            }
            if k.borrow() == key {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Check a request of `key`. A key with no bucket is checked against a fresh one, kept
    /// only if the request changed it.
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds the burst.
    #[inline]
    pub fn check<Q>(&mut self, key: &Q, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        // `find`'s probe, with the held key's check where it is found (one bounds check).
        let mask = self.slots.len() - 1;
        let mut i = index(self.hasher.hash_one(key), self.shift);
        loop {
            let (k, tat) = &mut self.slots[i];
            if *tat == Instant::ZERO {
                return self.check_new(key, now, cost);
            }
            if (*k).borrow() == key {
                // A check never moves a bucket's TAT back, so the ceiling's bound, at most
                // its TAT before, stays below it: nothing to note.
                return self.quota.check_tat(tat, now, cost);
            }
            i = (i + 1) & mask;
        }
    }

    /// [`KeyedGcra::check`] of a key with no bucket, out of line: a held key's check stays a
    /// few dozen instructions, so the processor has the next checks' lookups under way while
    /// one waits for its slot (a table of a million keys is mostly out of cache).
    #[inline(never)]
    fn check_new<Q>(&mut self, key: &Q, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut tat = self.quota.full_at();
        let decision = self.quota.check_tat(&mut tat, now, cost)?;
        if tat <= now {
            // idle: a fresh bucket holds nothing worth keeping
            return Ok(decision);
        }
        let (slots, len, shift, hasher) = (&mut self.slots, &mut self.len, self.shift, &self.hasher);
        if let Err(retry_after) = self.ceiling.room(*len, now, |now| sweep(slots, len, shift, hasher, now)) {
            return Ok(Decision::Deny { retry_after });
        }
        self.ceiling.note(tat);
        self.insert(key.to_owned(), tat);
        Ok(decision)
    }

    /// Keep a new key's bucket, growing the table past three quarters full.
    fn insert(&mut self, key: K, tat: Instant) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            let grown = self.slots.len() * 2;
            let old = core::mem::replace(&mut self.slots, vec![(K::default(), Instant::ZERO); grown]);
            self.shift = 64 - grown.trailing_zeros();
            for (k, t) in old.into_iter().filter(|(_, t)| *t != Instant::ZERO) {
                place(&mut self.slots, self.shift, &self.hasher, k, t);
            }
        }
        place(&mut self.slots, self.shift, &self.hasher, key, tat);
        self.len += 1;
    }

    /// `key`'s bucket, when it holds state.
    pub fn get<Q>(&self, key: &Q) -> Option<Gcra>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = self.find(key).ok()?;
        Some(self.quota.at_tat(self.slots[i].1))
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
        let mut tat = match self.find(key) {
            Ok(i) => self.slots[i].1,
            Err(_) => self.quota.full_at(),
        };
        self.quota.check_tat(&mut tat, now, cost)
    }

    /// Drop every bucket back at full quota at `now`; returns how many were dropped.
    /// O(slots): call it from a timer, or let a full table call it.
    pub fn sweep(&mut self, now: Instant) -> usize {
        let (dropped, earliest) = sweep(&mut self.slots, &mut self.len, self.shift, &self.hasher, now);
        self.ceiling.next_sweep = earliest;
        dropped
    }

    /// How many keys hold state.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key holds state.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ceiling on keys.
    pub fn max_keys(&self) -> usize {
        self.ceiling.max_keys
    }

    /// The quota every bucket follows.
    pub fn quota(&self) -> &Gcra {
        &self.quota
    }
}

/// The slot a hash starts its probe at: the top bits of the hash, mixed once more.
#[inline(always)]
fn index(hash: u64, shift: u32) -> usize {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The slots for `keys` keys: a power of two at most three quarters full.
fn slots_for(keys: usize) -> usize {
    (keys * 4 / 3 + 1).next_power_of_two().max(MIN_SLOTS)
}

/// Put `key` in the first empty slot from its own (the key is not in the table).
fn place<K: Hash>(slots: &mut [(K, Instant)], shift: u32, hasher: &FixedState, key: K, tat: Instant) {
    let mask = slots.len() - 1;
    let mut i = index(hasher.hash_one(&key), shift);
    while slots[i].1 != Instant::ZERO {
        i = (i + 1) & mask;
    }
    slots[i] = (key, tat);
}

/// Drop the buckets back at full quota at `now` (the rest placed anew, so that no probe
/// sequence is left broken): how many, and the earliest TAT of those left.
fn sweep<K: Hash + Clone + Default>(
    slots: &mut Vec<(K, Instant)>,
    len: &mut usize,
    shift: u32,
    hasher: &FixedState,
    now: Instant,
) -> (usize, Instant) {
    let mut earliest = Instant::from_nanos(u64::MAX);
    let kept = slots.iter().filter(|(_, t)| *t > now).count();
    let dropped = *len - kept;
    if dropped > 0 {
        let old = core::mem::replace(slots, vec![(K::default(), Instant::ZERO); slots.len()]);
        for (k, t) in old.into_iter().filter(|(_, t)| *t > now) {
            place(slots, shift, hasher, k, t);
        }
        *len = kept;
    }
    for (_, t) in slots.iter().filter(|(_, t)| *t != Instant::ZERO) {
        earliest = earliest.min(*t);
    }
    (dropped, earliest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::keyed::Keyed;
    use crate::core::time::Span;

    #[test]
    fn it_grows_past_its_first_slots_and_sweeps_deciding_as_a_keyed_table_throughout() {
        let quota = Gcra::new(3, Span::from_secs(1), 3).unwrap();
        let mut keyed: Keyed<u64, Gcra> = Keyed::new(quota, 50_000, 9);
        let mut table: KeyedGcra<u64> = KeyedGcra::new(quota, 50_000, 9);
        let first_slots = table.slots.len();
        let mut t = Instant::from_secs(10);
        for round in 0..3u64 {
            for i in 0..60_000u64 {
                // 20,000 keys in a scattered order, each several times a round
                let key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) % 20_000;
                t = t + Span::from_nanos(7_000);
                let (ours, theirs) = (table.check(&key, t, 1).unwrap(), keyed.check(&key, t, 1).unwrap());
                assert_eq!(ours, theirs, "round {round}, request {i}, key {key}");
            }
            assert_eq!(table.len(), keyed.len());
            assert!(table.len() > 15_000, "{}", table.len());
            // Half a second later some buckets are full again: a sweep drops them alike.
            t = t + Span::from_millis(700);
            assert_eq!(table.sweep(t), keyed.sweep(t));
            assert_eq!(table.len(), keyed.len());
            for key in 0..20_000 {
                assert_eq!(table.get(&key), keyed.get(&key).copied(), "key {key}");
            }
        }
        assert!(table.slots.len() >= first_slots * 16, "it grew: {} slots", table.slots.len());
        assert!(table.slots.len() * 3 >= table.len() * 4, "at most three quarters full");
    }

    #[test]
    fn a_full_table_refuses_a_new_key_until_a_bucket_is_full_again() {
        let quota = Gcra::new(1, Span::from_secs(1), 1).unwrap();
        let mut table: KeyedGcra<u32> = KeyedGcra::new(quota, 2, 0);
        let t = Instant::from_secs(1);
        assert!(table.check(&1, t, 1).unwrap().is_allowed());
        assert!(table.check(&2, t, 1).unwrap().is_allowed());
        assert_eq!(table.check(&3, t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(1) });
        assert!(table.check(&3, t + Span::from_secs(1), 1).unwrap().is_allowed(), "the sweep freed a slot");
        assert_eq!(table.len(), 1, "the two full buckets dropped, the new one kept");
        assert!(table.check(&4, t, 0).unwrap().is_allowed() && table.get(&4).is_none(), "a free request keeps nothing");
        assert!(table.check(&5, t, 2).is_err(), "a cost past the burst");
    }
}
