//! Many tenants' buckets in one bounded table, kept by a sharded sweep.
//!
//! A bucket that has refilled is the same as no bucket, so it can be forgotten; one that
//! still owes must never be, or a limited tenant could reset its debt by crowding the table
//! with invented names. The table therefore
//!
//! - keeps each tenant's buckets under a 128-bit keyed hash of its name (16 bytes however
//!   long the name), in [`TenantTable::SHARDS`] shards;
//! - sweeps one shard per tick ([`TenantTable::TICK`], so a full pass takes a minute and no
//!   tick ever scans the whole table), dropping the buckets that are full again;
//! - never drops a bucket that is not full, whatever happens;
//! - holds at most `max_default` buckets of tenants under the default limit: past that, a
//!   *new* name under the default is charged to one shared overflow bucket of the default
//!   limit (the seed's answer to invented keys: `per_ip` addresses share a fixed table's
//!   slots). A flood of invented names then drains that one bucket and is refused with
//!   `429` and its `Retry-After`, while every tenant already in the table keeps its own
//!   count. Tenants with a limit of their own (an override or the rules file's entry) always
//!   get their own buckets: they are a bounded set (the file's, and at most
//!   [`Overrides::MAX`](super::Overrides::MAX) overrides).
//!
//! So the table never holds more than `max_default` + the tenants with a limit of their own
//! buckets, each [`TenantTable::ENTRY_BYTES`] bytes of table.

use super::{LimitSource, TenantBuckets, TenantLimit};
use crate::core::limit::{Decision, Limiter, SaveState};
use crate::core::time::{Instant, Span};
use crate::edge::admission::ByteBucket;
use crate::edge::redact::{Digest, KeyedHash};
use alloc::vec::Vec;
use core::hash::{BuildHasher, Hasher};
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// One tenant's buckets and the limit (and generation) they are of, as a fingerprint.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    version: u64,
    buckets: TenantBuckets,
}

/// Where a charge went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The tenant's own buckets.
    Own,
    /// The shared overflow bucket: the table was full of default-limited tenants' buckets
    /// that still owe, and this name had none.
    Overflow,
}

/// What one tick did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swept {
    /// The shard swept.
    pub shard: usize,
    /// How many full buckets were dropped from it.
    pub dropped: usize,
    /// How many tenants hold buckets after it.
    pub len: usize,
    /// How many charges went to the overflow bucket since the tick before.
    pub overflowed: u64,
}

/// Tenants' buckets, bounded; see [`crate::tenants`] for how they are kept.
///
/// # Examples
/// ```
/// use sluicegate::tenants::{LimitSource, Placement, TenantLimit, TenantTable};
/// use sluicegate::{Instant, Span};
/// let default = TenantLimit::from_json(&serde_json::json!({"rate": 1, "burst": 1}), None).unwrap();
/// let mut table = TenantTable::new(1, (7, 11));
/// let t = Instant::from_secs(100);
/// let charge = |table: &mut TenantTable, name: &str, t| table.charge(name, &default, LimitSource::Default, 0, 0, t);
/// assert!(charge(&mut table, "a", t).0.is_allowed());
/// assert!(!charge(&mut table, "a", t).0.is_allowed(), "a owes");
/// // Full: a new name is charged to the shared overflow bucket; "a" keeps its own count.
/// assert_eq!(charge(&mut table, "b", t).1, Placement::Overflow);
/// assert!(!charge(&mut table, "a", t).0.is_allowed());
/// // Once "a" has refilled, a sweep forgets it.
/// assert_eq!(table.sweep_all(t + Span::from_secs(1)), 1);
/// assert!(table.is_empty());
/// ```
pub struct TenantTable {
    hash: KeyedHash,
    shards: Vec<HashMap<Digest, Entry, FixedState>>,
    len: usize,
    max_default: usize,
    overflow: Option<Entry>,
    overflowed: u64,
    next_shard: usize,
    next_tick: Instant,
}

impl TenantTable {
    /// How many shards the table is split into; a tick sweeps one.
    pub const SHARDS: usize = 16;
    /// How often a tick sweeps the next shard: every shard once a minute.
    pub const TICK: Span = Span::from_millis(3_750);
    /// The bytes of table one tenant's buckets take (key, fingerprint, buckets), before the
    /// hash table's spare room.
    pub const ENTRY_BYTES: usize = core::mem::size_of::<(Digest, Entry)>();

    /// A table holding at most `max_default` (at least 1) buckets of tenants under the
    /// default limit, hashing names with the 128-bit key `salt` (draw it at random per
    /// process: nobody outside can then aim names at one shard).
    pub fn new(max_default: usize, salt: (u64, u64)) -> Self {
        let hasher = FixedState::with_seed(salt.0 ^ salt.1.rotate_left(32));
        TenantTable {
            hash: KeyedHash::new(salt.0, salt.1),
            shards: (0..Self::SHARDS).map(|_| HashMap::with_hasher(hasher)).collect(),
            len: 0,
            max_default: max_default.max(1),
            overflow: None,
            overflowed: 0,
            next_shard: 0,
            next_tick: Instant::ZERO,
        }
    }

    fn key(&self, tenant: &str) -> (usize, Digest) {
        let digest = self.hash.digest(tenant.as_bytes());
        // The top bits pick the shard; the map hashes the whole digest again with its own seed.
        ((digest.1 >> 60) as usize % Self::SHARDS, digest)
    }

    /// Charge one request of `body_bytes` to `tenant`'s buckets of `limit` (from `source`;
    /// `generation` tells one override of it from the next, 0 for none): buckets of another
    /// limit or generation start afresh. Ticks first (see [`TenantTable::tick`]).
    pub fn charge(
        &mut self,
        tenant: &str,
        limit: &TenantLimit,
        source: LimitSource,
        generation: u64,
        body_bytes: u64,
        now: Instant,
    ) -> (Decision, Placement) {
        self.charge_by(tenant, (limit, source, generation), now, |buckets| buckets.charge(now, body_bytes))
    }

    /// Charge `bytes` more of the body of a request of `tenant` charged before (a body of no
    /// declared length, as it streams: [`TenantBuckets::charge_more`]), as
    /// [`TenantTable::charge`] charges a request.
    pub fn charge_more(
        &mut self,
        tenant: &str,
        limit: &TenantLimit,
        source: LimitSource,
        generation: u64,
        bytes: u64,
        now: Instant,
    ) -> (Decision, Placement) {
        self.charge_by(tenant, (limit, source, generation), now, |buckets| buckets.charge_more(now, bytes))
    }

    fn charge_by(
        &mut self,
        tenant: &str,
        (limit, source, generation): (&TenantLimit, LimitSource, u64),
        now: Instant,
        charge: impl FnOnce(&mut TenantBuckets) -> Decision,
    ) -> (Decision, Placement) {
        self.tick(now);
        let version = fingerprint(limit, generation);
        let (shard, key) = self.key(tenant);
        if let Some(entry) = self.shards[shard].get_mut(&key) {
            return (entry.charge(limit, version, charge), Placement::Own);
        }
        if source == LimitSource::Default && self.len >= self.max_default {
            self.overflowed += 1;
            let overflow = self.overflow.get_or_insert_with(|| Entry { version, buckets: limit.buckets() });
            return (overflow.charge(limit, version, charge), Placement::Overflow);
        }
        let mut fresh = Entry { version, buckets: limit.buckets() };
        let decision = charge(&mut fresh.buckets);
        // A charge that left no trace (refused at once) keeps nothing.
        if !fresh.buckets.is_full(now) {
            self.shards[shard].insert(key, fresh);
            self.len += 1;
        }
        (decision, Placement::Own)
    }

    /// Sweep the next shard, in turn, when a tick is due (one [`TenantTable::TICK`] after
    /// the last): call it on every request, or from a timer. `None` when none was due.
    pub fn tick(&mut self, now: Instant) -> Option<Swept> {
        if now < self.next_tick {
            return None;
        }
        self.next_tick = now + Self::TICK;
        let shard = self.next_shard;
        self.next_shard = (shard + 1) % Self::SHARDS;
        let dropped = self.sweep_shard(shard, now);
        let overflowed = core::mem::take(&mut self.overflowed);
        Some(Swept { shard, dropped, len: self.len, overflowed })
    }

    /// Drop shard `shard`'s buckets that are full at `now`; how many. The shard gives back
    /// room it no longer needs.
    pub fn sweep_shard(&mut self, shard: usize, now: Instant) -> usize {
        let Some(map) = self.shards.get_mut(shard) else { return 0 };
        let before = map.len();
        map.retain(|_, entry| !entry.buckets.is_full(now));
        let dropped = before - map.len();
        if map.capacity() > 64 && map.capacity() > 4 * map.len() {
            map.shrink_to(2 * map.len());
        }
        self.len -= dropped;
        if self.overflow.as_ref().is_some_and(|o| o.buckets.is_full(now)) {
            self.overflow = None;
        }
        dropped
    }

    /// Sweep every shard at once; how many buckets were dropped. O(tenants): for tests and
    /// for a caller with nothing better to do.
    pub fn sweep_all(&mut self, now: Instant) -> usize {
        (0..Self::SHARDS).map(|shard| self.sweep_shard(shard, now)).sum()
    }

    /// `tenant`'s own buckets, if the table holds them.
    pub fn buckets_of(&self, tenant: &str) -> Option<&TenantBuckets> {
        let (shard, key) = self.key(tenant);
        self.shards[shard].get(&key).map(|e| &e.buckets)
    }

    /// How many tenants hold buckets (the overflow bucket not counted).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no tenant holds buckets.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many buckets the shards have room for without growing.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(HashMap::capacity).sum()
    }

    /// How many charges went to the overflow bucket since the last tick.
    pub fn overflowed(&self) -> u64 {
        self.overflowed
    }

    /// The most buckets of tenants under the default limit.
    pub fn max_default(&self) -> usize {
        self.max_default
    }
}

impl Entry {
    /// Charge these buckets, first starting them afresh when they are of another limit or
    /// generation than `version`.
    fn charge(
        &mut self,
        limit: &TenantLimit,
        version: u64,
        charge: impl FnOnce(&mut TenantBuckets) -> Decision,
    ) -> Decision {
        if self.version != version {
            *self = Entry { version, buckets: limit.buckets() };
        }
        charge(&mut self.buckets)
    }
}

/// A fingerprint of `limit` and `generation`: equal for the same limit of the same
/// generation (every field counts, as a changed limit starts fresh buckets).
fn fingerprint(limit: &TenantLimit, generation: u64) -> u64 {
    let mut h = FixedState::with_seed(0x7465_6e61_6e74_7321).build_hasher();
    h.write_u64(limit.rate.to_bits());
    h.write_u32(limit.burst);
    for field in [limit.bytes_per_second, limit.burst_bytes, limit.max_body_bytes, limit.max_queue_bytes] {
        h.write_u64(field.map_or(u64::MAX, |v| v));
    }
    h.write_u64(limit.max_queue.map_or(u64::MAX, u64::from));
    h.write_u64(generation);
    h.finish()
}

impl TenantBuckets {
    /// Whether every bucket is full at `now`: holding them is then the same as holding
    /// none, and they may be forgotten.
    pub fn is_full(&self, now: Instant) -> bool {
        self.count.is_idle(now) && self.bytes.as_ref().is_none_or(|b| b.is_full(now))
    }
}

impl SaveState for TenantBuckets {
    fn save(&self, out: &mut Vec<u64>) {
        self.count.save(out);
        if let Some(bytes) = &self.bytes {
            bytes.save(out);
        }
    }

    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        let mut count = self.count;
        count.restore(words)?;
        let mut bytes: Option<ByteBucket> = self.bytes;
        if let Some(b) = &mut bytes {
            b.restore(words)?;
        }
        (self.count, self.bytes) = (count, bytes);
        Some(())
    }
}

impl TenantLimit {
    /// How long this limit's emptied buckets take to refill: the longer of `burst` requests
    /// and `burst_bytes`.
    pub fn refill(&self) -> Span {
        let count = Span::from_nanos(self.interval.as_nanos().saturating_mul(u64::from(self.burst)));
        let bytes = match (self.bytes_per_second, self.burst_bytes) {
            (Some(bps), Some(burst)) => {
                let nanos = (u128::from(burst) * 1_000_000_000).div_ceil(u128::from(bps));
                Span::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
            }
            _ => Span::ZERO,
        };
        count.max(bytes)
    }

    /// Whether a store that may forget its memory while idle (a Durable Object evicted after
    /// a minute or so) should write this limit's buckets down: their refill is longer than
    /// a minute, as for a rule ([`Rule::keeps_state`](crate::edge::rules::Rule::keeps_state)).
    pub fn keeps_state(&self) -> bool {
        self.refill() > Span::from_secs(60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use serde_json::json;

    fn limit(v: serde_json::Value) -> TenantLimit {
        TenantLimit::from_json(&v, None).unwrap()
    }

    #[test]
    fn a_bucket_that_still_owes_is_kept_and_a_refilled_one_is_swept() {
        let l = limit(json!({"rate": 1, "burst": 2}));
        let mut table = TenantTable::new(100, (1, 2));
        let t = Instant::from_secs(1_000);
        table.charge("owes", &l, LimitSource::Default, 0, 0, t);
        table.charge("owes", &l, LimitSource::Default, 0, 0, t);
        table.charge("light", &l, LimitSource::Default, 0, 0, t);
        assert_eq!(table.len(), 2);
        assert_eq!(table.sweep_all(t + Span::from_millis(1_500)), 1, "light refilled after 1 s");
        assert!(table.buckets_of("light").is_none());
        assert!(table.buckets_of("owes").is_some(), "owes until 2 s");
        assert!(!table.charge("owes", &l, LimitSource::Default, 0, 0, t + Span::from_millis(900)).0.is_allowed());
        assert_eq!(table.sweep_all(t + Span::from_secs(2)), 1);
        assert!(table.is_empty());
    }

    #[test]
    fn a_tick_sweeps_one_shard_in_turn_every_tick() {
        let l = limit(json!({"rate": 1000, "burst": 1}));
        let mut table = TenantTable::new(10_000, (3, 4));
        let t = Instant::from_secs(10);
        for i in 0..1_000 {
            table.charge(&format!("t{i}"), &l, LimitSource::Default, 0, 0, t);
        }
        // The first charge ticked (shard 0, nothing to drop yet); the next tick is due a TICK later.
        assert_eq!(table.tick(t + Span::from_secs(1)), None);
        let mut later = t + TenantTable::TICK;
        let mut dropped = 0;
        for shard in 1..TenantTable::SHARDS {
            let swept = table.tick(later).expect("due");
            assert_eq!(swept.shard, shard);
            assert!(swept.dropped < 1_000 / 4, "one shard, not the table: {}", swept.dropped);
            dropped += swept.dropped;
            later = later + TenantTable::TICK;
        }
        assert_eq!(table.tick(later).unwrap().shard, 0, "round again");
        assert_eq!(table.len(), 0);
        assert!(dropped > 800);
    }

    #[test]
    fn at_the_bound_new_default_names_share_the_overflow_bucket_and_own_limits_still_get_theirs() {
        let default = limit(json!({"rate": 0.01, "burst": 2}));
        let own = limit(json!({"rate": 0.01, "burst": 1}));
        let mut table = TenantTable::new(3, (5, 6));
        let t = Instant::from_secs(10);
        for name in ["a", "b", "c"] {
            assert_eq!(table.charge(name, &default, LimitSource::Default, 0, 0, t).1, Placement::Own);
        }
        let over = |table: &mut TenantTable, name: &str| table.charge(name, &default, LimitSource::Default, 0, 0, t);
        assert_eq!(
            over(&mut table, "x"),
            (Decision::Allow { remaining: 1, reset: Span::from_secs(100) }, Placement::Overflow)
        );
        assert!(over(&mut table, "y").0.is_allowed());
        assert!(!over(&mut table, "z").0.is_allowed(), "the overflow's burst of 2 is spent by all newcomers together");
        assert_eq!(table.len(), 3);
        assert!(table.buckets_of("x").is_none());
        // A tenant with its own limit is a bounded set: it always gets its own buckets.
        assert_eq!(table.charge("vip", &own, LimitSource::Config, 0, 0, t).1, Placement::Own);
        assert_eq!(table.charge("ovr", &own, LimitSource::Override, 9, 0, t).1, Placement::Own);
        assert_eq!(table.len(), 5);
        // Names already held keep their own counts.
        assert!(table.charge("a", &default, LimitSource::Default, 0, 0, t).0.is_allowed());
        assert!(!table.charge("a", &default, LimitSource::Default, 0, 0, t).0.is_allowed());
    }

    #[test]
    fn another_limit_or_generation_starts_fresh_buckets() {
        let l = limit(json!({"rate": 0.01, "burst": 1}));
        let raised = limit(json!({"rate": 0.01, "burst": 3}));
        let mut table = TenantTable::new(10, (7, 8));
        let t = Instant::from_secs(10);
        assert!(table.charge("a", &l, LimitSource::Override, 1, 0, t).0.is_allowed());
        assert!(!table.charge("a", &l, LimitSource::Override, 1, 0, t).0.is_allowed());
        assert!(table.charge("a", &l, LimitSource::Override, 2, 0, t).0.is_allowed(), "a new override");
        assert!(table.charge("a", &raised, LimitSource::Config, 0, 0, t).0.is_allowed(), "another limit");
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn buckets_are_saved_and_restored_as_words_and_refill_is_the_longer_bucket() {
        let l = limit(json!({"rate": 1, "burst": 2, "bytes_per_second": 10, "burst_bytes": 1000}));
        assert_eq!(l.refill(), Span::from_secs(100));
        assert!(l.keeps_state());
        assert!(!limit(json!({"rate": 1, "burst": 60})).keeps_state());
        assert!(limit(json!({"rate": 0.01, "burst": 1})).keeps_state());
        let mut b = l.buckets();
        let t = Instant::from_secs(50);
        assert!(b.charge(t, 600).is_allowed());
        let mut words = Vec::new();
        b.save(&mut words);
        assert_eq!(words.len(), 2);
        let mut back = l.buckets();
        assert_eq!(back.restore(&mut words.iter().copied()), Some(()));
        assert_eq!(back, b);
        let mut fresh = l.buckets();
        assert_eq!(fresh.restore(&mut [1u64].into_iter()), None, "too few words: nothing changed");
        assert_eq!(fresh, l.buckets());
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use alloc::collections::BTreeMap;
        use proptest::prelude::*;

        /// One step: a charge of name `name` (of 8) after `after_ms`, of `bytes`, or a tick.
        #[derive(Clone, Debug)]
        enum Step {
            Charge { name: usize, after_ms: u64, bytes: u64 },
            Tick { after_ms: u64 },
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => (0..8usize, 0..3_000u64, prop_oneof![Just(0u64), 0..3_000u64])
                    .prop_map(|(name, after_ms, bytes)| Step::Charge { name, after_ms, bytes }),
                1 => (0..5_000u64).prop_map(|after_ms| Step::Tick { after_ms }),
            ]
        }

        /// What a bucket remembers at `now`: a time past is the same as any other.
        fn state(b: &TenantBuckets, now: Instant) -> Vec<u64> {
            let mut words = Vec::new();
            b.save(&mut words);
            words.into_iter().map(|w| w.max(now.as_nanos())).collect()
        }

        proptest! {
            /// Against an unbounded map of buckets (charged when the table says a charge
            /// went to the tenant's own): the table holds exactly the reference's buckets
            /// that still owe (and perhaps some full ones), so every decision on a tenant's
            /// own buckets is the reference's, a name sent to the overflow had nothing owed,
            /// and the table never holds more than its bound.
            #[test]
            fn nothing_that_owes_is_forgotten_and_the_table_stays_bounded(
                steps in prop::collection::vec(step(), 1..200),
                max_default in 1..5usize,
                salt in any::<(u64, u64)>(),
            ) {
                let default = limit(json!({"rate": 1, "burst": 2, "bytes_per_second": 1000}));
                let own = limit(json!({"rate": 0.5, "burst": 1}));
                // Names 6 and 7 have a limit of their own.
                let of = |name: usize| if name >= 6 { (&own, LimitSource::Config) } else { (&default, LimitSource::Default) };
                let mut table = TenantTable::new(max_default, salt);
                let mut reference: BTreeMap<usize, TenantBuckets> = BTreeMap::new();
                let mut now = Instant::from_secs(1_000);
                for s in steps {
                    match s {
                        Step::Charge { name, after_ms, bytes } => {
                            now = now + Span::from_millis(after_ms);
                            let (l, source) = of(name);
                            let (decision, placement) = table.charge(&format!("tenant-{name}"), l, source, 0, bytes, now);
                            let held = reference.get(&name).is_some_and(|b| !b.is_full(now));
                            match placement {
                                Placement::Own => {
                                    let mine = reference.entry(name).or_insert_with(|| l.buckets());
                                    prop_assert_eq!(decision, mine.charge(now, bytes));
                                }
                                Placement::Overflow => {
                                    prop_assert!(!held, "tenant-{} owed, yet went to the overflow", name);
                                    prop_assert_eq!(source, LimitSource::Default);
                                }
                            }
                        }
                        Step::Tick { after_ms } => {
                            now = now + Span::from_millis(after_ms);
                            table.tick(now);
                        }
                    }
                    for (name, mine) in &reference {
                        let theirs = table.buckets_of(&format!("tenant-{name}"));
                        if !mine.is_full(now) {
                            prop_assert_eq!(theirs.map(|b| state(b, now)), Some(state(mine, now)), "tenant-{} owes", name);
                        }
                    }
                    prop_assert!(table.len() <= max_default + 2, "{} > {} + 2", table.len(), max_default);
                }
            }
        }
    }
}
