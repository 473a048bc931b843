//! Bounded keyed state: one limiter per key, in a salted hash table with a hard ceiling.
//!
//! A key's limiter exists only while it remembers something: once it is back at full
//! quota it is identical to a fresh one, so [`Keyed::sweep`] drops it. The table never
//! holds more than `max_keys` entries, however many keys a flood invents; when it is full
//! and nothing can be swept, a *new* key is refused (fail closed) until an entry frees up,
//! while keys already present keep their own counts.

use crate::limit::{CostTooHigh, Decision, Limiter};
use crate::time::Instant;
use alloc::borrow::ToOwned;
use core::borrow::Borrow;
use core::hash::Hash;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// One limiter per key, each a fresh copy of a prototype on first use.
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
    max_keys: usize,
    /// No entry can be swept before this instant (a lower bound of every entry's
    /// `full_at`), so a full table is not rescanned on every new key.
    next_sweep: Instant,
}

impl<K: Hash + Eq, L: Limiter + Clone> Keyed<K, L> {
    /// A table of at most `max_keys` (at least 1) limiters, each starting as a copy of
    /// `prototype` (which should be fresh), hashed with `salt` (choose it at random per
    /// process so that keys colliding in one process do not collide in the next).
    pub fn new(prototype: L, max_keys: usize, salt: u64) -> Self {
        let max_keys = max_keys.max(1);
        let mut map = HashMap::with_hasher(FixedState::with_seed(salt));
        map.reserve(max_keys.min(1 << 16));
        Keyed { map, prototype, max_keys, next_sweep: Instant::ZERO }
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
            // window); keep `next_sweep` a lower bound of every entry's.
            self.next_sweep = self.next_sweep.min(limiter.full_at());
            return decision;
        }
        let mut fresh = self.prototype.clone();
        let decision = fresh.check(now, cost)?;
        if fresh.is_idle(now) {
            return Ok(decision);
        }
        if self.map.len() >= self.max_keys {
            self.sweep_if_useful(now);
            if self.map.len() >= self.max_keys {
                let wait = self.next_sweep - now;
                return Ok(Decision::Deny { retry_after: wait.max(crate::time::Span::from_nanos(1)) });
            }
        }
        self.next_sweep = self.next_sweep.min(fresh.full_at());
        self.map.insert(key.to_owned(), fresh);
        Ok(decision)
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
        let before = self.map.len();
        let mut earliest = Instant::from_nanos(u64::MAX);
        self.map.retain(|_, limiter| {
            let full_at = limiter.full_at();
            if full_at <= now {
                false
            } else {
                earliest = earliest.min(full_at);
                true
            }
        });
        self.next_sweep = earliest;
        before - self.map.len()
    }

    fn sweep_if_useful(&mut self, now: Instant) {
        if now >= self.next_sweep {
            self.sweep(now);
        }
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
        self.max_keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Gcra;
    use crate::time::Span;

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
