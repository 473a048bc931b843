//! The isolate's block cache stays within its bound in bytes, measured by an allocator that
//! counts what this thread holds (its own test binary, so the counting allocator is its own).
#![cfg(not(target_arch = "wasm32"))]
#![allow(unsafe_code)]

use sluicegate::edge::blocks::{BlockCache, ENTRY_BYTES};
use sluicegate::redact::KeyedHash;
use sluicegate::{Instant, Span};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write;

const HASH: KeyedHash = KeyedHash::new(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);

#[test]
fn the_cache_stays_within_its_bytes_whatever_the_size_of_its_keys() {
    const MAX: usize = 64;
    const KEY_BYTES: usize = 100 * 1024;
    let mut key_text = String::with_capacity(KEY_BYTES + 16);
    key_text.push_str(&"k".repeat(KEY_BYTES));
    let start = live_bytes();
    let mut cache = BlockCache::new(MAX);
    let mut now = Instant::from_secs(1_000);
    let mut peak = 0;
    for i in 0..400u32 {
        // A ~100 KB key, different each time; every 40 keys the clock moves on, so sweeps
        // find expired blocks and leave gaps in the table.
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
    assert!(cache.len() <= MAX);
    assert!(cache.blocked_for(HASH.digest(key_text.as_bytes()), now).is_some(), "the last key is found");
    drop(cache);
    assert_eq!(live_bytes(), start, "all it held was its own");
}

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
