//! The isolate-local cache of blocked keys.

use sluicegate::time::{Instant, Span};
use std::collections::HashMap;

/// Keys known to be refused until some instant. Bounded: when full, expired entries are
/// swept; if none has expired the new block is simply not cached (the Durable Object still
/// refuses it).
pub struct BlockCache {
    until: HashMap<String, Instant>,
    max: usize,
}

impl BlockCache {
    pub fn new(max: usize) -> Self {
        BlockCache { until: HashMap::new(), max }
    }

    /// How long `key` is still refused, if it is.
    pub fn blocked_for(&self, key: &str, now: Instant) -> Option<Span> {
        self.until.get(key).filter(|until| **until > now).map(|until| *until - now)
    }

    pub fn insert(&mut self, key: &str, until: Instant, now: Instant) {
        if self.until.len() >= self.max && !self.until.contains_key(key) {
            self.until.retain(|_, u| *u > now);
            if self.until.len() >= self.max {
                return;
            }
        }
        self.until.insert(key.to_owned(), until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_remembered_until_it_ends() {
        let mut cache = BlockCache::new(2);
        let t = Instant::from_secs(100);
        cache.insert("a", t + Span::from_secs(10), t);
        assert_eq!(cache.blocked_for("a", t + Span::from_secs(4)), Some(Span::from_secs(6)));
        assert_eq!(cache.blocked_for("a", t + Span::from_secs(10)), None);
        assert_eq!(cache.blocked_for("b", t), None);
    }

    #[test]
    fn a_full_cache_sweeps_expired_blocks_and_never_grows_past_its_bound() {
        let mut cache = BlockCache::new(2);
        let t = Instant::from_secs(100);
        cache.insert("a", t + Span::from_secs(1), t);
        cache.insert("b", t + Span::from_secs(10), t);
        cache.insert("c", t + Span::from_secs(10), t);
        assert_eq!(cache.blocked_for("c", t), None, "full and nothing expired: not cached");
        let later = t + Span::from_secs(2);
        cache.insert("c", later + Span::from_secs(10), later);
        assert!(cache.blocked_for("c", later).is_some());
        assert!(cache.until.len() <= 2);
    }
}
