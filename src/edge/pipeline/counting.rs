//! One key's counter as the edge keeps it: what a Durable Object decides when the rules
//! stage asks it ([`super::rules::Step::Ask`]), and what the simulator's counters in memory
//! decide, with the same code.
//!
//! A key is counted by a fresh copy of its rule's limiter the first time it is asked (or by
//! what was stored for it, restored: a block still in force, a long rule's count), starts
//! afresh when its rule changed, and is forgotten once idle when the table is full (the
//! core's [`Keyed`] table).

use crate::core::keyed::Keyed;
use crate::core::limit::{Blocking, CostTooHigh, Decision};
use crate::core::time::Instant;
use crate::edge::redact::Digest;
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

/// One rule's counters, by the key's digest (a key of any length takes the same room; the
/// isolate's tables are of the same kind).
type KeyTable = Keyed<Digest, Blocking<AnyLimiter>>;

/// The digest a [`Counts`] table knows a key by. A Durable Object is named by its key, so it
/// holds one: the hash needs no secret.
const KEY_DIGEST: crate::edge::redact::KeyedHash = crate::edge::redact::KeyedHash::new(0x636f_756e, 0x7473);

/// Each rule's table, by rule id, with the rule it counts for.
type RuleTables = HashMap<String, (Rule, KeyTable), FixedState>;

/// `rule`'s table in `tables`, of at most `max` keys: made on first use, and afresh when the
/// rule changed since its keys were counted (in more than its `enforce`: [`Rule::counts_like`]).
fn table_of<'t>(tables: &'t mut RuleTables, rule: &Rule, max: usize, salt: u64) -> &'t mut KeyTable {
    let fresh = || (rule.clone(), Keyed::new(rule.limiter(), max, salt));
    let entry = tables.entry_ref(rule.id.as_str()).or_insert_with(fresh);
    if !entry.0.counts_like(rule) {
        *entry = fresh();
    }
    &mut entry.1
}

/// The keys held in `tables`, over every rule.
fn keys_held(tables: &RuleTables) -> usize {
    tables.values().map(|(_, table)| table.len()).sum()
}

/// Counters by key: one [`Keyed`] table per rule (its limiter the prototype), so idle keys
/// are forgotten and a full table of busy keys refuses a new one, as the core's keyed
/// limits do.
pub struct Counts {
    rules: RuleTables,
    max: usize,
}

impl Default for Counts {
    fn default() -> Self {
        Counts::new(KEYS_KEPT)
    }
}

impl Counts {
    /// An empty set of tables of at most `max` keys each.
    pub fn new(max: usize) -> Self {
        Counts { rules: HashMap::with_hasher(FixedState::with_seed(0xc0_0a75)), max }
    }

    /// Whether `key` of `rule` has no counter here yet: the caller reads what was stored for
    /// it and passes it to [`Counts::check`].
    pub fn is_new(&self, rule: &Rule, key: &str) -> bool {
        let key = KEY_DIGEST.digest(key.as_bytes());
        self.rules.get(&rule.id).is_none_or(|(r, table)| r != rule || table.get(&key).is_none())
    }

    /// Count one request of `key` under `rule` at `now`. `stored` is read for a new key
    /// ([`Counts::is_new`]) and ignored otherwise. A rule that changed since its keys were
    /// counted starts them afresh.
    ///
    /// # Errors
    /// A request the rule's limiter can never admit (not for a cost of 1 and a valid rule).
    pub fn check(&mut self, rule: &Rule, key: &str, now: Instant, stored: Stored) -> Result<Counted, CostTooHigh> {
        let table = table_of(&mut self.rules, rule, self.max, 0x6b65_7973);
        let key = &KEY_DIGEST.digest(key.as_bytes());
        let blocked_before = match table.get(key) {
            Some(counter) => counter.blocked_until(now),
            // a new key's block restored from storage was started before, not by this check
            None => stored.block.filter(|until| *until > now),
        };
        let decision = table.check_from(key, now, 1, |fresh| {
            let mut start = fresh.clone();
            if let Some(bytes) = stored.count.filter(|_| rule.keeps_state()) {
                restore_counter(&mut start, &bytes);
            }
            if let Some(until) = stored.block {
                start.impose_block(until);
            }
            start
        })?;
        let counter = table.get(key);
        let block_started = counter.and_then(|l| l.blocked_until(now)).filter(|_| blocked_before.is_none());
        let count = rule.keeps_state().then(|| counter.map_or_else(|| save_counter(&rule.limiter()), save_counter));
        Ok(Counted { decision, block_started, count })
    }

    /// The keys held, over every rule.
    pub fn len(&self) -> usize {
        keys_held(&self.rules)
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The counts of the rules kept in the isolate (`"store": "isolate"`): one [`Keyed`] table
/// per rule, keyed by the counting key's 128-bit keyed digest (so a key of any length takes
/// the same room), of at most the rule's `max_keys` entries. Idle keys are forgotten; a
/// full table of keys still counting refuses a new one.
#[derive(Default)]
pub struct IsolateCounts {
    rules: RuleTables,
}

impl IsolateCounts {
    /// Count one request of the key whose digest is `key` under `rule` (at most `max_keys`
    /// keys) at `now`: the decision, or `None` when the key is new and the table is full of
    /// keys still counting. A rule that changed since its keys were counted starts them
    /// afresh.
    pub fn check(&mut self, rule: &Rule, max_keys: usize, key: Digest, now: Instant) -> Option<Decision> {
        let table = table_of(&mut self.rules, rule, max_keys, 0x6973_6f6c);
        let known = table.get(&key).is_some();
        // (a request of cost 1 is never too costly for a valid rule)
        let decision = table.check(&key, now, 1).ok()?;
        // A fresh counter admits its first request: a new key refused was refused for room.
        (known || matches!(decision, Decision::Allow { .. })).then_some(decision)
    }

    /// The keys held, over every rule.
    pub fn len(&self) -> usize {
        keys_held(&self.rules)
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
