//! The decisions the JavaScript `Limiter` (sluicegate/limit) must reproduce: seeded arrivals
//! over a few keys for every algorithm, decided by the core's `Keyed` table, stored in
//! `pkg-tests/fixtures/limit-vectors.json` (pkg-tests/limit.test.mjs replays them through
//! the wasm build). This test fails when the core's decisions and the stored ones differ;
//! `SLUICEGATE_UPDATE_VECTORS=1 cargo test --test limit_vectors` rewrites the file.
#![cfg(not(target_arch = "wasm32"))]

use serde_json::{json, Value};
use sluicegate::keyed::Keyed;
use sluicegate::limit::{Blocking, FixedWindow, Gcra, SlidingLog, SlidingWindow};
use sluicegate::rules::AnyLimiter;
use sluicegate::{Decision, Instant, Span};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/pkg-tests/fixtures/limit-vectors.json");

/// The limiter `new Limiter(options)` builds (src/wasm/limit.rs), from the same numbers.
fn prototype(algorithm: &str, limit: u32, window_ms: u64, burst: Option<u32>, block_ms: u64) -> Blocking<AnyLimiter> {
    let window = Span::from_millis(window_ms);
    let inner = match algorithm {
        "token_bucket" => AnyLimiter::Gcra(Gcra::new(burst.unwrap_or(limit), window, limit).unwrap()),
        "sliding_log" => AnyLimiter::SlidingLog(SlidingLog::new(u64::from(limit), window).unwrap()),
        "fixed_window" => AnyLimiter::FixedWindow(FixedWindow::new(u64::from(limit), window).unwrap()),
        "sliding_window" => AnyLimiter::SlidingWindow(SlidingWindow::new(u64::from(limit), window).unwrap()),
        other => panic!("unknown algorithm {other}"),
    };
    Blocking::new(inner, Span::from_millis(block_ms))
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn vector(
    seed: u64,
    algorithm: &str,
    limit: u32,
    window_ms: u64,
    burst: Option<u32>,
    block_ms: u64,
    max_keys: usize,
) -> Value {
    let mut table = Keyed::new(prototype(algorithm, limit, window_ms, burst, block_ms), max_keys, seed);
    let mut rng = Rng(seed | 1);
    let mut now = 1_700_000_000_000_u64;
    let mut arrivals = Vec::new();
    let mut decisions = Vec::new();
    for _ in 0..300 {
        now += rng.below(window_ms / 8 + 1);
        let key = format!("client-{}", rng.below(5));
        let cost = [0, 1, 1, 1, 2][rng.below(5) as usize].min(burst.unwrap_or(limit));
        let decision = table.check(key.as_str(), Instant::from_nanos(now * 1_000_000), cost).unwrap();
        arrivals.push(json!([key, now, cost]));
        decisions.push(match decision {
            Decision::Allow { remaining, .. } => json!([true, remaining, 0]),
            Decision::Deny { retry_after } => json!([false, 0, retry_after.as_millis_ceil()]),
        });
    }
    let mut options = json!({ "algorithm": algorithm, "limit": limit, "windowMs": window_ms, "maxKeys": max_keys });
    if let Some(burst) = burst {
        options["burst"] = json!(burst);
    }
    if block_ms > 0 {
        options["blockMs"] = json!(block_ms);
    }
    json!({ "options": options, "arrivals": arrivals, "decisions": decisions })
}

fn vectors() -> Value {
    let mut all = Vec::new();
    for (i, algorithm) in ["token_bucket", "sliding_log", "fixed_window", "sliding_window"].into_iter().enumerate() {
        let seed = 0x5eed + i as u64;
        all.push(vector(seed, algorithm, 5, 1_000, None, 0, 100));
        all.push(vector(seed * 7, algorithm, 3, 10_000, (algorithm == "token_bucket").then_some(2), 2_000, 100));
        // A table of 3 keys for 5 clients: new keys refused while it is full, swept as keys idle.
        all.push(vector(seed * 13, algorithm, 4, 2_000, None, 0, 3));
    }
    json!({
        "about": "Decisions of the core's Keyed table for seeded arrivals ([key, nowMs, cost]); each decision is [success, remaining, retryAfterMs]. Written by tests/limit_vectors.rs.",
        "vectors": all,
    })
}

#[test]
fn the_stored_limiter_vectors_are_the_cores_decisions() {
    let fresh = serde_json::to_string(&vectors()).unwrap() + "\n";
    if std::env::var_os("SLUICEGATE_UPDATE_VECTORS").is_some() {
        std::fs::write(PATH, &fresh).unwrap();
    }
    let stored = std::fs::read_to_string(PATH)
        .expect("pkg-tests/fixtures/limit-vectors.json (SLUICEGATE_UPDATE_VECTORS=1 writes it)");
    assert!(stored == fresh, "pkg-tests/fixtures/limit-vectors.json differs from the core's decisions: rerun with SLUICEGATE_UPDATE_VECTORS=1 and review the diff");
}
