//! The isolate-local cache of blocked keys.

use sluicegate::redact::Digest;
use sluicegate::time::{Instant, Span};
use std::collections::HashMap;

/// Counting keys known to be refused until some instant. Each key is held as its 128-bit
/// keyed hash ([`Digest`], from the same keyed hash as log lines), never as the key itself,
/// so every entry is [`ENTRY_BYTES`] bytes whatever the size of the key (a key read from a
/// header can be ~100 KB).
///
/// Bounded by count, and so in bytes: when full, expired entries are swept; if none has
/// expired the new block is simply not cached (the Durable Object still refuses it). The
/// table behind it holds at most `max` entries in at most twice the slots that many need
/// (it can double once when removals leave tombstones), so it never takes more than
/// [`BlockCache::max_bytes`]: about 0.8 MB for 10,000 entries.
pub struct BlockCache {
    until: HashMap<Digest, Instant>,
    max: usize,
}

/// The bytes of one entry: the key's digest and the end of its block.
pub const ENTRY_BYTES: usize = size_of::<(Digest, Instant)>();

impl BlockCache {
    pub fn new(max: usize) -> Self {
        BlockCache { until: HashMap::new(), max }
    }

    /// The most bytes a cache of `max` entries takes, whatever its keys: twice the slots of
    /// the smallest table that holds `max` entries (one in eight slots stays free), each an
    /// entry and a control byte, and one group of control bytes more.
    #[cfg_attr(not(test), allow(dead_code))]
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluicegate::redact::KeyedHash;

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
        assert!(cache.until.len() <= 2);
    }

    #[test]
    fn the_cache_stays_within_its_bytes_whatever_the_size_of_its_keys() {
        use std::fmt::Write;
        const MAX: usize = 64;
        const KEY_BYTES: usize = 100 * 1024;
        let mut key_text = String::with_capacity(KEY_BYTES + 16);
        key_text.push_str(&"k".repeat(KEY_BYTES));
        let start = live_bytes();
        let mut cache = BlockCache::new(MAX);
        let mut now = Instant::from_secs(1_000);
        let mut peak = 0;
        for i in 0..400u32 {
            // A ~100 KB key, different each time; every 40 keys the clock moves on, so
            // sweeps find expired blocks and leave gaps in the table.
            if i % 40 == 0 {
                now = now + Span::from_secs(2);
            }
            key_text.truncate(KEY_BYTES);
            let _ = write!(key_text, "{i}");
            cache.insert(HASH.digest(key_text.as_bytes()), now + Span::from_secs(u64::from(i % 3) + 1), now);
            let held = live_bytes() - start;
            assert!(held <= BlockCache::max_bytes(MAX) as isize, "after {i} keys the cache holds {held} bytes");
            peak = peak.max(held);
        }
        assert!(peak >= (MAX * ENTRY_BYTES) as isize, "the count sees the table: {peak} bytes at most");
        assert!(cache.until.len() <= MAX);
        assert!(cache.blocked_for(HASH.digest(key_text.as_bytes()), now).is_some(), "the last key is found");
        drop(cache);
        assert_eq!(live_bytes(), start, "all it held was its own");
    }

    #[test]
    fn the_bound_for_the_edge_s_ten_thousand_entries_is_under_a_megabyte() {
        assert_eq!(ENTRY_BYTES, 24);
        assert_eq!(BlockCache::max_bytes(10_000), 2 * 16_384 * 25 + 16);
        assert!(BlockCache::max_bytes(10_000) < 1024 * 1024);
    }

    // The heap bytes this thread holds, counted by a global allocator that wraps the
    // system's: what the cache takes, measured rather than assumed.
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    fn live_bytes() -> isize {
        LIVE.with(Cell::get)
    }

    fn count(delta: isize) {
        let _ = LIVE.try_with(|live| live.set(live.get() + delta));
    }

    struct Counting;

    // SAFETY: every call is passed to the system allocator unchanged; the count is a side effect.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as isize));
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size as isize - layout.size() as isize);
            // SAFETY: the caller's contract, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;
}
