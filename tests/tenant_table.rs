//! A million invented tenant names through the table the edge keeps its tenants' buckets in
//! (`TenantTable::charge`, as the Worker calls it when no store answers), with the heap
//! measured by a counting allocator: memory stays under a stated bound, and a tenant in debt
//! stays refused throughout.
//!
//! One test in this file: the allocator counts the whole process.
#![cfg(not(target_arch = "wasm32"))]

use sluicegate::tenants::{LimitSource, Placement, TenantLimit, TenantTable};
use sluicegate::{Instant, Span};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The edge's bound on buckets of tenants under the default limit (worker/src/tenancy.rs).
const MAX_DEFAULT: usize = 10_000;
/// The stated bound on the table's heap, whatever the names: 4 MiB.
const HEAP_BOUND: usize = 4 << 20;
const NAMES: u64 = 1_000_000;

fn limit(json: &str) -> TenantLimit {
    TenantLimit::from_json_text(json, None).unwrap()
}

#[test]
fn a_million_invented_names_keep_the_table_bounded_and_a_tenant_in_debt_refused() {
    let default = limit(r#"{"rate": 1, "burst": 5}"#);
    // A configured tenant and an invented one, both deep in debt (one request per day).
    let slow = limit(r#"{"rate": 0.00001, "burst": 1}"#);
    let baseline = LIVE.load(Ordering::Relaxed);
    let mut table = TenantTable::new(MAX_DEFAULT, (0x5eed, 0xfeed));
    let mut now = Instant::from_secs(1_000_000);
    assert!(table.charge("debtor", &slow, LimitSource::Config, 0, 0, now).0.is_allowed());
    assert!(!table.charge("debtor", &slow, LimitSource::Config, 0, 0, now).0.is_allowed());
    for _ in 0..5 {
        assert!(table.charge("early", &default, LimitSource::Default, 0, 0, now).0.is_allowed());
    }
    let still_refused = |table: &mut TenantTable, now| {
        assert!(!table.charge("debtor", &slow, LimitSource::Config, 0, 0, now).0.is_allowed(), "debtor at {now:?}");
    };

    // 1. A flood: a million names in one second, far faster than buckets refill (5 s).
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut overflowed = 0u64;
    for i in 0..NAMES {
        now = now + Span::from_nanos(1_000);
        let (_, placement) = table.charge(&format!("invented-{i}"), &default, LimitSource::Default, 0, 0, now);
        overflowed += u64::from(placement == Placement::Overflow);
        if i % 10_000 == 0 {
            still_refused(&mut table, now);
            assert!(!table.charge("early", &default, LimitSource::Default, 0, 0, now).0.is_allowed(), "early owes");
            assert!(table.len() <= MAX_DEFAULT + 1, "{} buckets", table.len());
            assert!(table.capacity() <= 2 * MAX_DEFAULT, "room for {} buckets", table.capacity());
        }
    }
    let flood_peak = PEAK.load(Ordering::Relaxed) - baseline;
    assert!(overflowed > NAMES - MAX_DEFAULT as u64 - 10, "past the bound, new names share the overflow bucket");
    assert!(flood_peak < HEAP_BOUND, "the flood's peak heap: {flood_peak} bytes");

    // 2. Names invented slower than the sweep forgets them (100 a second, each refilled in
    //    a second after its one request, a shard swept every 3.75 s): the table holds a few
    //    thousand and never overflows.
    let gentle_start = now;
    now = now + Span::from_secs(120);
    table.charge("tick", &default, LimitSource::Default, 0, 0, now);
    for _ in 0..TenantTable::SHARDS {
        now = now + TenantTable::TICK;
        table.tick(now);
    }
    assert!(table.len() <= 2, "the flood's buckets refilled and were swept: {} left", table.len());
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut most = 0;
    for i in 0..NAMES {
        now = now + Span::from_millis(10);
        let (_, placement) = table.charge(&format!("gentle-{i}"), &default, LimitSource::Default, 0, 0, now);
        assert_eq!(placement, Placement::Own, "gentle-{i}");
        most = most.max(table.len());
        if i % 10_000 == 0 {
            still_refused(&mut table, now);
        }
    }
    let gentle_peak = PEAK.load(Ordering::Relaxed) - baseline;
    assert!(most < 7_000, "at most {most} buckets at 100 new names a second");
    assert!(gentle_peak < HEAP_BOUND, "peak heap: {gentle_peak} bytes");
    assert!(now.saturating_since(gentle_start) < Span::from_secs(86_400), "the debtor's day is not over");
    still_refused(&mut table, now);

    // 3. Once everything has refilled, a pass of the sweep gives the memory back.
    for _ in 0..TenantTable::SHARDS {
        now = now + TenantTable::TICK;
        table.tick(now);
    }
    let after = LIVE.load(Ordering::Relaxed) - baseline;
    assert_eq!(table.len(), 1, "only the debtor owes");
    assert!(after < 64 << 10, "heap after the sweep: {after} bytes");
    println!(
        "tenant table: {} bytes a bucket; peak heap {flood_peak} bytes in a flood of {NAMES} names ({overflowed} to the \
         overflow), {gentle_peak} bytes at 100 new names/s (at most {most} buckets), {after} bytes after the sweep",
        TenantTable::ENTRY_BYTES
    );
}
