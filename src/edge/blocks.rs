//! The isolate's cache of blocked keys: a refusal remembered until its block ends, so a
//! blocked client is answered without another round trip to its counter.

use crate::core::time::{Instant, Span};
use crate::edge::redact::Digest;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// Counting keys known to be refused until some instant. Each key is held as its 128-bit
/// keyed hash ([`Digest`], from the same keyed hash as log lines), never as the key itself,
/// so every entry is [`ENTRY_BYTES`] bytes whatever the size of the key (a key read from a
/// header can be ~100 KB).
///
/// Bounded by count, and so in bytes: when full, expired entries are swept; if none has
/// expired the new block is simply not cached (the counter still refuses it). The table
/// behind it holds at most `max` entries in at most twice the slots that many need (it can
/// double once when removals leave tombstones), so it never takes more than
/// [`BlockCache::max_bytes`]: about 0.8 MB for 10,000 entries.
///
/// A cached block answers exactly what the counter would: a key's counter charges nothing
/// while it is blocked and refuses until the block's end, so the cache saves a round trip
/// and never changes a decision.
pub struct BlockCache {
    until: HashMap<Digest, Instant, FixedState>,
    max: usize,
}

/// The bytes of one entry: the key's digest and the end of its block.
pub const ENTRY_BYTES: usize = core::mem::size_of::<(Digest, Instant)>();

impl BlockCache {
    /// An empty cache of at most `max` entries.
    pub fn new(max: usize) -> Self {
        BlockCache { until: HashMap::with_hasher(FixedState::with_seed(0x5eed_b10c)), max }
    }

    /// The most bytes a cache of `max` entries takes, whatever its keys: twice the slots of
    /// the smallest table that holds `max` entries (one in eight slots stays free), each an
    /// entry and a control byte, and one group of control bytes more.
    pub const fn max_bytes(max: usize) -> usize {
        let slots = if max < 4 {
            4
        } else if max < 8 {
            8
        } else {
            (max * 8 / 7).next_power_of_two()
        };
        2 * slots * (ENTRY_BYTES + 1) + 16
    }

    /// How long the key of `digest` is still refused, if it is.
    pub fn blocked_for(&self, digest: Digest, now: Instant) -> Option<Span> {
        self.until.get(&digest).filter(|until| **until > now).map(|until| *until - now)
    }

    /// Remember that the key of `digest` is refused until `until`.
    pub fn insert(&mut self, digest: Digest, until: Instant, now: Instant) {
        if self.until.len() >= self.max && !self.until.contains_key(&digest) {
            self.until.retain(|_, u| *u > now);
            if self.until.len() >= self.max {
                return;
            }
        }
        self.until.insert(digest, until);
    }

    /// The entries held.
    pub fn len(&self) -> usize {
        self.until.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::redact::KeyedHash;

    const HASH: KeyedHash = KeyedHash::new(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);

    fn key(text: &str) -> Digest {
        HASH.digest(text.as_bytes())
    }

    #[test]
    fn a_block_is_found_by_its_key_until_it_ends() {
        let mut cache = BlockCache::new(2);
        let t = Instant::from_secs(100);
        cache.insert(key("api|http.request.headers[\"authorization\"]=Bearer a"), t + Span::from_secs(10), t);
        let found = |at| cache.blocked_for(key("api|http.request.headers[\"authorization\"]=Bearer a"), at);
        assert_eq!(found(t + Span::from_secs(4)), Some(Span::from_secs(6)));
        assert_eq!(found(t + Span::from_secs(10)), None);
        assert_eq!(cache.blocked_for(key("api|http.request.headers[\"authorization\"]=Bearer b"), t), None);
    }

    #[test]
    fn a_full_cache_sweeps_expired_blocks_and_never_grows_past_its_bound() {
        let mut cache = BlockCache::new(2);
        let t = Instant::from_secs(100);
        cache.insert(key("a"), t + Span::from_secs(1), t);
        cache.insert(key("b"), t + Span::from_secs(10), t);
        cache.insert(key("c"), t + Span::from_secs(10), t);
        assert_eq!(cache.blocked_for(key("c"), t), None, "full and nothing expired: not cached");
        let later = t + Span::from_secs(2);
        cache.insert(key("c"), later + Span::from_secs(10), later);
        assert!(cache.blocked_for(key("c"), later).is_some(), "the expired entry was swept for it");
        assert_eq!(cache.blocked_for(key("a"), t), None, "the swept entry is gone");
        assert!(cache.len() <= 2);
    }

    #[test]
    fn the_bound_for_the_edge_s_ten_thousand_entries_is_under_a_megabyte() {
        assert_eq!(ENTRY_BYTES, 24);
        assert_eq!(BlockCache::max_bytes(10_000), 2 * 16_384 * 25 + 16);
        assert!(BlockCache::max_bytes(10_000) < 1024 * 1024);
    }
}
