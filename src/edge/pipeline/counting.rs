//! One key's counter as the edge keeps it: what a Durable Object decides when the rules
//! stage asks it ([`super::rules::Step::Ask`]), and what the simulator's counters in memory
//! decide, with the same code.
//!
//! A key is counted by a fresh copy of its rule's limiter the first time it is asked (or by
//! what was stored for it, restored: a block still in force, a long rule's count), starts
//! afresh when its rule changed, and is forgotten once idle when the table is full.

use crate::core::limit::{Blocking, CostTooHigh, Decision, Limiter as _};
use crate::core::time::Instant;
use crate::edge::rules::{restore_counter, save_counter, AnyLimiter, Rule};
use alloc::string::String;
use alloc::vec::Vec;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// How many keys one table keeps before idle ones are forgotten (a Durable Object is named
/// by its key, so it holds one; the simulator holds every key of a replay).
pub const KEYS_KEPT: usize = 1_000;

/// What was stored for a key, read before its first check (nothing in the simulator).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// The end of a block it had.
    pub block: Option<Instant>,
    /// Its saved count (a rule that [`Rule::keeps_state`]).
    pub count: Option<Vec<u8>>,
}

/// A counter's decision, with what to write down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted {
    /// The decision (charged when it admits).
    pub decision: Decision,
    /// A block this check started: its end, to store so that a restart does not lift it.
    pub block_started: Option<Instant>,
    /// The key's count to store (a rule that [`Rule::keeps_state`]).
    pub count: Option<Vec<u8>>,
}

/// Counters by key.
pub struct Counts {
    keys: HashMap<String, (Rule, Blocking<AnyLimiter>), FixedState>,
    max: usize,
}

impl Default for Counts {
    fn default() -> Self {
        Counts::new(KEYS_KEPT)
    }
}

impl Counts {
    /// An empty table that forgets idle keys past `max` (keys still counting are kept).
    pub fn new(max: usize) -> Self {
        Counts { keys: HashMap::with_hasher(FixedState::with_seed(0xc0_0a75)), max }
    }

    /// Whether `key` has no counter here yet: the caller reads what was stored for it and
    /// passes it to [`Counts::check`].
    pub fn is_new(&self, key: &str) -> bool {
        !self.keys.contains_key(key)
    }

    /// Count one request of `key` under `rule` at `now`. `stored` is read for a new key
    /// ([`Counts::is_new`]) and ignored otherwise.
    ///
    /// # Errors
    /// A request the rule's limiter can never admit (not for a cost of 1 and a valid rule).
    pub fn check(&mut self, rule: &Rule, key: &str, now: Instant, stored: Stored) -> Result<Counted, CostTooHigh> {
        if self.keys.len() >= self.max && !self.keys.contains_key(key) {
            self.keys.retain(|_, (_, l)| !l.is_idle(now));
        }
        let fresh = !self.keys.contains_key(key);
        let entry = self.keys.entry_ref(key).or_insert_with(|| (rule.clone(), rule.limiter()));
        if entry.0 != *rule {
            // The rule changed since this key was counted: start it fresh under the new one.
            *entry = (rule.clone(), rule.limiter());
        }
        if fresh {
            if let Some(bytes) = stored.count.filter(|_| rule.keeps_state()) {
                restore_counter(&mut entry.1, &bytes);
            }
            if let Some(until) = stored.block {
                entry.1.impose_block(until);
            }
        }
        let blocked_before = entry.1.blocked_until(now);
        let decision = entry.1.check(now, 1)?;
        let block_started = entry.1.blocked_until(now).filter(|_| blocked_before.is_none());
        let count = rule.keeps_state().then(|| save_counter(&entry.1));
        Ok(Counted { decision, block_started, count })
    }

    /// The keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
