//! Properties of every limiter, checked over random request schedules.
//!
//! Each property feeds a random schedule (sorted arrival times, random costs) through
//! `Limiter::check` and asserts the algorithm's promise over every window, or compares the
//! limiter with a plain reference model written out in the test.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::keyed::{Keyed, KeyedGcra, PackedGcra, Slots};
use sluicegate::limit::{check_all, Blocking, FixedWindow, Gcra, Limiter, SlidingLog, SlidingWindow};
use sluicegate::rules::AnyLimiter;
use sluicegate::{CostTooHigh, Decision, Instant, Span};
use std::collections::HashMap;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// Gaps between requests, in thousandths of a caller-chosen unit (a quarter of them zero:
/// simultaneous arrivals), each with a raw cost to be reduced to the limiter's range.
fn schedule(max_len: usize) -> impl Strategy<Value = Vec<(u64, u32)>> {
    prop::collection::vec((prop_oneof![1 => Just(0u64), 3 => 0u64..3_000], any::<u32>()), 1..max_len)
}

/// The arrival times of a schedule starting at `start`, one gap unit being `unit` ns.
fn arrivals(start: u64, unit: u64, gaps: &[(u64, u32)]) -> Vec<u64> {
    let mut t = start;
    gaps.iter()
        .map(|&(permille, _)| {
            t = t.saturating_add((u128::from(unit) * u128::from(permille) / 1000) as u64);
            t
        })
        .collect()
}

/// The heaviest window `[t, t + w)` over admitted `(time, cost)` pairs sorted by time; the
/// maximum is reached by a window that starts at an admitted request. Returns (t, sum).
fn heaviest_window(admitted: &[(u64, u64)], w: u64) -> (u64, u64) {
    let mut best = (0, 0);
    for (i, &(t, _)) in admitted.iter().enumerate() {
        let end = t.saturating_add(w);
        let sum: u64 = admitted[i..].iter().take_while(|(u, _)| *u < end).map(|(_, c)| *c).sum();
        if sum > best.1 {
            best = (t, sum);
        }
    }
    best
}

fn at(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn retry_after(d: Decision) -> Option<Span> {
    match d {
        Decision::Deny { retry_after } => Some(retry_after),
        Decision::Allow { .. } => None,
    }
}

/// A `Deny`'s `retry_after` is exact: with nothing in between, the same request is admitted
/// at `now + retry_after` and refused 1 ns earlier.
fn assert_retry_after_is_exact<L: Limiter + Clone + std::fmt::Debug>(
    limiter: &L,
    now: u64,
    cost: u32,
    retry: Span,
) -> Result<(), TestCaseError> {
    prop_assert!(!retry.is_zero(), "a refusal must not say 'retry now' ({limiter:?} at {now}, cost {cost})");
    let later = at(now) + retry;
    let mut on_time = limiter.clone();
    prop_assert!(
        on_time.check(later, cost).unwrap().is_allowed(),
        "refused at {now} with retry_after {retry:?}, but refused again then: {limiter:?}, cost {cost}"
    );
    let mut early = limiter.clone();
    prop_assert!(
        !early.check(later - Span::from_nanos(1), cost).unwrap().is_allowed(),
        "refused at {now} with retry_after {retry:?}, but admitted 1 ns earlier: {limiter:?}, cost {cost}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// GCRA
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gcra_never_admits_more_than_burst_plus_window_over_interval(
        burst in 1u32..=8,
        count in 1u32..=50,
        period_ms in 1u64..=1_000,
        extra_ns in 0u64..1_000,
        start in prop_oneof![Just(0u64), 0u64..1_000 * SEC],
        gaps in schedule(200),
    ) {
        let period = period_ms * MS + extra_ns;
        let interval = period.div_ceil(u64::from(count));
        let mut g = Gcra::new(burst, Span::from_nanos(period), count).unwrap();
        prop_assert_eq!(g.interval(), Span::from_nanos(interval));

        let times = arrivals(start, interval, &gaps);
        let mut admitted = Vec::new();
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = raw % (burst + 1);
            let before = g;
            let d = g.check(at(now), cost).unwrap();
            match d {
                Decision::Allow { .. } => admitted.push((now, u64::from(cost))),
                Decision::Deny { retry_after } => {
                    prop_assert_eq!(g, before, "a denial changed the bucket");
                    assert_retry_after_is_exact(&g, now, cost, retry_after)?;
                }
            }
        }
        for w in [interval, 10 * interval, period, 3 * period + interval / 2] {
            let (t, sum) = heaviest_window(&admitted, w);
            let bound = u64::from(burst) + w / interval;
            prop_assert!(sum <= bound, "{sum} admitted in [{t}, {t}+{w}), bound {bound} (T = {interval})");
        }
    }

    #[test]
    fn gcra_cost_zero_is_always_admitted_and_changes_nothing_that_matters(
        burst in 1u32..=5,
        period_ms in 1u64..=100,
        gaps in schedule(60),
    ) {
        let mut g = Gcra::new(burst, Span::from_millis(period_ms), burst).unwrap();
        let times = arrivals(SEC, period_ms * MS / u64::from(burst), &gaps);
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = raw % (burst + 1);
            let peeked = g.peek(at(now), cost).unwrap();
            prop_assert!(g.check(at(now), 0).unwrap().is_allowed());
            prop_assert_eq!(g.peek(at(now), cost).unwrap(), peeked);
            let _ = g.check(at(now), cost);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Fixed window
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fixed_window_admits_exactly_while_the_aligned_window_has_room_and_at_most_twice_the_limit_per_rolling_period(
        limit in 1u64..=20,
        period_ms in 1u64..=1_000,
        extra_ns in 0u64..1_000,
        start in prop_oneof![Just(0u64), 0u64..1_000 * SEC],
        gaps in schedule(200),
    ) {
        let period = period_ms * MS + extra_ns;
        let mut w = FixedWindow::new(limit, Span::from_nanos(period)).unwrap();
        let times = arrivals(start, period / limit, &gaps);
        let mut per_window: HashMap<u64, u64> = HashMap::new();
        let mut admitted = Vec::new();
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = u64::from(raw) % (limit + 1);
            let window = now - now % period;
            let used = per_window.get(&window).copied().unwrap_or(0);
            let before = w;
            let d = w.check(at(now), cost as u32).unwrap();
            if used + cost <= limit {
                prop_assert!(d.is_allowed(), "window {window} holds {used} of {limit}; cost {cost} refused at {now}");
                *per_window.entry(window).or_default() += cost;
                admitted.push((now, cost));
            } else {
                prop_assert_eq!(d, Decision::Deny { retry_after: Span::from_nanos(window + period - now) });
                prop_assert_eq!(w, before, "a denial changed the window");
            }
        }
        for (window, used) in &per_window {
            prop_assert!(*used <= limit, "window {window} admitted {used} > {limit}");
        }
        let (t, sum) = heaviest_window(&admitted, period);
        prop_assert!(sum <= 2 * limit, "{sum} admitted in [{t}, {t}+{period}) > 2 × {limit}");
    }
}

// ---------------------------------------------------------------------------------------
// Sliding log
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sliding_log_admits_exactly_the_requests_that_fit_the_rolling_period(
        limit in 1u64..=20,
        period_ms in 1u64..=1_000,
        extra_ns in 0u64..1_000,
        start in prop_oneof![Just(0u64), 0u64..1_000 * SEC],
        gaps in schedule(200),
    ) {
        let period = period_ms * MS + extra_ns;
        let mut log = SlidingLog::new(limit, Span::from_nanos(period)).unwrap();
        let times = arrivals(start, period / limit, &gaps);
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = u64::from(raw) % (limit + 1);
            // The exact rolling count: entries admitted at `a` with a > now − period.
            let rolling: u64 = admitted.iter().filter(|(a, _)| a + period > now).map(|(_, c)| c).sum();
            let d = log.check(at(now), cost as u32).unwrap();
            if rolling + cost <= limit {
                prop_assert!(d.is_allowed(), "rolling count {rolling} + cost {cost} ≤ {limit}, yet refused at {now}");
                admitted.push((now, cost));
            } else {
                let Some(retry) = retry_after(d) else {
                    return Err(TestCaseError::fail(format!("rolling count {rolling} + cost {cost} > {limit}, yet admitted at {now}")));
                };
                assert_retry_after_is_exact(&log, now, cost as u32, retry)?;
            }
        }
        let (t, sum) = heaviest_window(&admitted, period);
        prop_assert!(sum <= limit, "{sum} admitted in [{t}, {t}+{period}) > {limit}");
    }
}

// ---------------------------------------------------------------------------------------
// Sliding-window counter
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sliding_window_never_admits_more_than_the_limit_in_an_aligned_window_and_a_denial_charges_nothing(
        limit in 1u64..=20,
        period_ms in 1u64..=1_000,
        extra_ns in 0u64..1_000,
        start in prop_oneof![Just(0u64), 0u64..1_000 * SEC],
        gaps in schedule(200),
    ) {
        let period = period_ms * MS + extra_ns;
        let mut w = SlidingWindow::new(limit, Span::from_nanos(period)).unwrap();
        let times = arrivals(start, period / limit, &gaps);
        let mut per_window: HashMap<u64, u64> = HashMap::new();
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = u64::from(raw) % (limit + 1);
            let before = w;
            match w.check(at(now), cost as u32).unwrap() {
                Decision::Allow { .. } => *per_window.entry(now - now % period).or_default() += cost,
                Decision::Deny { retry_after } => {
                    prop_assert_eq!(w, before, "a denial changed the counters");
                    assert_retry_after_is_exact(&w, now, cost as u32, retry_after)?;
                }
            }
        }
        for (window, used) in &per_window {
            prop_assert!(*used <= limit, "aligned window {window} admitted {used} > {limit}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Count, then block
// ---------------------------------------------------------------------------------------

/// The reference semantics of `Blocking<SlidingLog>` for unit-cost requests, written out.
struct BlockModel {
    limit: usize,
    period: u64,
    timeout: u64,
    log: Vec<u64>,
    block_start: Option<u64>,
}

impl BlockModel {
    /// `Ok` for an admit, `Err(retry_after)` for a refusal.
    fn step(&mut self, u: u64) -> Result<(), u64> {
        if let Some(b) = self.block_start {
            if u < b + self.timeout {
                return Err(b + self.timeout - u);
            }
            self.block_start = None;
            self.log.clear();
        }
        let live = self.log.iter().filter(|&&a| a + self.period > u).count();
        if live < self.limit {
            self.log.push(u);
            Ok(())
        } else {
            self.block_start = Some(u);
            Err(self.timeout)
        }
    }
}

fn check_blocking_sliding_log(limit: u64, period: u64, timeout: u64, times: &[u64]) -> Result<(), TestCaseError> {
    let mut rule = Blocking::new(SlidingLog::new(limit, Span::from_nanos(period)).unwrap(), Span::from_nanos(timeout));
    let mut model = BlockModel { limit: limit as usize, period, timeout, log: Vec::new(), block_start: None };
    let mut admitted = Vec::new();
    let mut blocks: Vec<u64> = Vec::new();
    for &now in times {
        let was_blocked = rule.blocked_until(at(now)).is_some();
        let d = rule.check(at(now), 1).unwrap();
        let expected = model.step(now);
        match (d, expected) {
            (Decision::Allow { .. }, Ok(())) => admitted.push((now, 1)),
            (Decision::Deny { retry_after }, Err(want)) => {
                prop_assert_eq!(retry_after, Span::from_nanos(want), "refusal at {}", now);
                if !was_blocked {
                    // A refusal outside a block starts one, of exactly `timeout`.
                    prop_assert_eq!(rule.blocked_until(at(now)), Some(at(now + timeout)));
                    blocks.push(now);
                }
            }
            (d, expected) => {
                return Err(TestCaseError::fail(format!("at {now}: limiter said {d:?}, model {expected:?}")));
            }
        }
        // Every request inside a block is refused, and refusals never move its end.
        for &b in &blocks {
            if (b..b + timeout).contains(&now) {
                prop_assert_eq!(d, Decision::Deny { retry_after: Span::from_nanos(b + timeout - now) });
            }
        }
    }
    let (t, sum) = heaviest_window(&admitted, period);
    prop_assert!(sum <= limit, "{sum} admitted in [{t}, {t}+{period}) > {limit}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_reference_rule_never_admits_more_than_20_in_any_10_seconds_and_blocks_for_exactly_10_seconds(
        start_ms in 0u64..1_000_000,
        gaps in schedule(300),
    ) {
        // Gaps around 10 s / 20 = 500 ms: the rule is exceeded often.
        let times = arrivals(start_ms * MS, 500 * MS, &gaps);
        check_blocking_sliding_log(20, 10 * SEC, 10 * SEC, &times)?;
    }

    #[test]
    fn count_then_block_never_admits_more_than_the_limit_in_any_period_and_refusals_never_extend_a_block(
        limit in 1u64..30,
        period_s in 1u64..20,
        extra_timeout_ms in prop_oneof![Just(0u64), 0u64..20_000],
        start_ms in 0u64..1_000_000,
        gaps in schedule(300),
    ) {
        let period = period_s * SEC;
        let times = arrivals(start_ms * MS, period / limit, &gaps);
        check_blocking_sliding_log(limit, period, period + extra_timeout_ms * MS, &times)?;
    }
}

// ---------------------------------------------------------------------------------------
// Several limits at once
// ---------------------------------------------------------------------------------------

fn any_limiter() -> impl Strategy<Value = Blocking<AnyLimiter>> {
    (0u8..4, 1u64..=10, 1u64..=1_000, prop_oneof![2 => Just(0u64), 1 => 1u64..=2_000]).prop_map(
        |(kind, limit, period_ms, timeout_ms)| {
            let period = Span::from_millis(period_ms);
            let inner = match kind {
                0 => AnyLimiter::FixedWindow(FixedWindow::new(limit, period).unwrap()),
                1 => AnyLimiter::Gcra(Gcra::new(limit as u32, period, limit as u32).unwrap()),
                2 => AnyLimiter::SlidingLog(SlidingLog::new(limit, period).unwrap()),
                _ => AnyLimiter::SlidingWindow(SlidingWindow::new(limit, period).unwrap()),
            };
            Blocking::new(inner, Span::from_millis(timeout_ms))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn check_all_charges_every_limit_or_none_and_a_refusal_leaves_willing_limits_unchanged(
        mut limits in prop::collection::vec(any_limiter(), 2..=3),
        gaps in schedule(120),
    ) {
        let times = arrivals(SEC, 100 * MS, &gaps);
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let now = at(now);
            let cost = raw % 12; // sometimes above a limit's capacity
            let before = limits.clone();
            let peeks: Vec<Result<Decision, CostTooHigh>> = before.iter().map(|l| l.peek(now, cost)).collect();
            let result = {
                let mut refs: Vec<&mut dyn Limiter> = limits.iter_mut().map(|l| l as &mut dyn Limiter).collect();
                check_all(&mut refs, now, cost)
            };
            if let Some(Err(e)) = peeks.iter().find(|p| p.is_err()) {
                prop_assert_eq!(result, Err(*e));
                prop_assert_eq!(&limits, &before, "an error charged something");
                continue;
            }
            let peeks: Vec<Decision> = peeks.into_iter().map(Result::unwrap).collect();
            let denied = peeks.iter().any(|d| !d.is_allowed());
            let result = result.unwrap();
            prop_assert_eq!(result.is_allowed(), !denied);
            let mut remaining = u64::MAX;
            let mut reset = Span::ZERO;
            let mut retry = Span::ZERO;
            for (i, (l, peeked)) in before.iter().zip(&peeks).enumerate() {
                // What the limit would be had it been checked alone.
                let mut alone = l.clone();
                let own = alone.check(now, cost).unwrap();
                prop_assert_eq!(own, *peeked, "peek and check disagree for limit {}", i);
                match own {
                    Decision::Allow { remaining: r, reset: t } => {
                        remaining = remaining.min(r);
                        reset = reset.max(t);
                    }
                    Decision::Deny { retry_after } => retry = retry.max(retry_after),
                }
                let expected = if denied && own.is_allowed() { l } else { &alone };
                prop_assert_eq!(&limits[i], expected, "limit {} after a multi-check that {:?}", i, result);
            }
            if denied {
                prop_assert_eq!(result, Decision::Deny { retry_after: retry });
            } else {
                prop_assert_eq!(result, Decision::Allow { remaining, reset });
            }
        }
    }

    #[test]
    fn peek_always_agrees_with_check_for_every_algorithm(
        mut limiter in any_limiter(),
        gaps in schedule(150),
    ) {
        let times = arrivals(SEC, 50 * MS, &gaps);
        for (&now, &(_, raw)) in times.iter().zip(&gaps) {
            let cost = raw % 12;
            let peeked = limiter.peek(at(now), cost);
            prop_assert_eq!(limiter.check(at(now), cost), peeked, "at {}", now);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Keyed tables
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_keyed_table_with_room_answers_each_key_as_its_own_lone_gcra(
        burst in 1u32..=5,
        count in 1u32..=20,
        period_ms in 1u64..=1_000,
        salt in any::<u64>(),
        gaps in schedule(200),
        keys in prop::collection::vec(0u8..6, 200),
    ) {
        let period = Span::from_millis(period_ms);
        let prototype = Gcra::new(burst, period, count).unwrap();
        let interval = prototype.interval().as_nanos();
        let mut table: Keyed<u8, Gcra> = Keyed::new(prototype, 10_000, salt);
        let mut lone: HashMap<u8, Gcra> = HashMap::new();
        let mut admitted: HashMap<u8, Vec<(u64, u64)>> = HashMap::new();
        let times = arrivals(SEC, interval, &gaps);
        for ((&now, &(_, raw)), &key) in times.iter().zip(&gaps).zip(&keys) {
            let cost = raw % (burst + 1);
            let d = table.check(&key, at(now), cost).unwrap();
            let want = lone.entry(key).or_insert(prototype).check(at(now), cost).unwrap();
            prop_assert_eq!(d, want, "key {} at {}", key, now);
            if d.is_allowed() {
                admitted.entry(key).or_default().push((now, u64::from(cost)));
            }
            prop_assert!(table.len() <= 6);
        }
        for (key, list) in &admitted {
            for w in [interval, 10 * interval, period.as_nanos()] {
                let (t, sum) = heaviest_window(list, w);
                let bound = u64::from(burst) + w / interval;
                prop_assert!(sum <= bound, "key {key}: {sum} admitted in [{t}, {t}+{w}), bound {bound}");
            }
        }
    }

    #[test]
    fn a_full_keyed_table_never_exceeds_max_keys_and_only_refuses_more_than_a_lone_gcra_when_full(
        burst in 1u32..=3,
        period_ms in 1u64..=1_000,
        max_keys in 1usize..=4,
        salt in any::<u64>(),
        gaps in schedule(200),
        keys in prop::collection::vec(0u16..12, 200),
    ) {
        let prototype = Gcra::new(burst, Span::from_millis(period_ms), burst).unwrap();
        let interval = prototype.interval().as_nanos();
        let mut table: Keyed<u16, Gcra> = Keyed::new(prototype, max_keys, salt);
        let mut lone: HashMap<u16, Gcra> = HashMap::new();
        let times = arrivals(SEC, interval / 4, &gaps);
        for ((&now, &(_, raw)), &key) in times.iter().zip(&gaps).zip(&keys) {
            let cost = raw % (burst + 1);
            let full_before = table.len() >= max_keys;
            let d = table.check(&key, at(now), cost).unwrap();
            prop_assert!(table.len() <= max_keys, "{} keys held, max {}", table.len(), max_keys);
            let model = lone.entry(key).or_insert(prototype);
            let want = model.peek(at(now), cost).unwrap();
            if !d.is_allowed() && want.is_allowed() {
                // Fail closed: only a new key in a full table is refused beyond its quota.
                prop_assert!(full_before, "key {} refused at {} with room in the table", key, now);
            } else {
                prop_assert_eq!(d, want, "key {} at {}", key, now);
                model.check(at(now), cost).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `Slots` (behind the JavaScript `Limiter`, whose keys live in a JS `Map`) decides every
    /// request exactly as `Keyed` does, with its caller keeping key → slot by the freed slots
    /// it is told of: the same counts per key, the same full-table refusals, blocks included.
    #[test]
    fn a_slot_table_with_its_keys_kept_outside_decides_as_a_keyed_table(
        algorithm in 0u8..4,
        limit in 1u64..=4,
        period_ms in 1u64..=1_000,
        block_ms in prop_oneof![Just(0u64), 1u64..=1_000],
        max_keys in 1usize..=4,
        gaps in schedule(200),
        keys in prop::collection::vec(0u16..8, 200),
    ) {
        let period = Span::from_millis(period_ms);
        let inner = match algorithm {
            0 => AnyLimiter::Gcra(Gcra::new(limit as u32, period, limit as u32).unwrap()),
            1 => AnyLimiter::SlidingLog(SlidingLog::new(limit, period).unwrap()),
            2 => AnyLimiter::FixedWindow(FixedWindow::new(limit, period).unwrap()),
            _ => AnyLimiter::SlidingWindow(SlidingWindow::new(limit, period).unwrap()),
        };
        let prototype = Blocking::new(inner, Span::from_millis(block_ms));
        let mut keyed: Keyed<u16, _> = Keyed::new(prototype.clone(), max_keys, 7);
        let mut slots = Slots::new(prototype, max_keys);
        let mut index: HashMap<u16, u32> = HashMap::new();
        let times = arrivals(SEC, period.as_nanos() / 4, &gaps);
        for ((&now, &(_, raw)), &key) in times.iter().zip(&gaps).zip(&keys) {
            let cost = raw % (limit as u32 + 1);
            let want = keyed.check(&key, at(now), cost).unwrap();
            let got = match index.get(&key) {
                Some(&slot) => slots.check(slot, at(now), cost).unwrap(),
                None => {
                    let mut freed = Vec::new();
                    let (decision, slot) = slots.check_new(at(now), cost, &mut |s| freed.push(s)).unwrap();
                    index.retain(|_, s| !freed.contains(s));
                    if let Some(slot) = slot {
                        index.insert(key, slot);
                    }
                    decision
                }
            };
            prop_assert_eq!(got, want, "key {} at {}", key, now);
            prop_assert_eq!(slots.len(), keyed.len());
            prop_assert_eq!(index.len(), slots.len());
        }
    }

    /// `KeyedGcra` (keys and TATs side by side, open addressing) decides every request, peek
    /// and sweep exactly as `Keyed<_, Gcra>`: the same decisions, full-table refusals, keys
    /// held and buckets, across its growth and the sweeps that rebuild its probe sequences.
    #[test]
    fn a_gcra_table_of_keys_and_tats_decides_as_a_keyed_table_of_gcras(
        burst in 1u32..=4,
        period_ms in 1u64..=1_000,
        max_keys in prop_oneof![1usize..=4, 20usize..=200],
        salt in any::<u64>(),
        gaps in schedule(400),
        keys in prop::collection::vec(0u16..300, 400),
        sweeps in prop::collection::vec(any::<bool>(), 400),
    ) {
        let quota = Gcra::new(burst, Span::from_millis(period_ms), burst).unwrap();
        let mut keyed: Keyed<u16, Gcra> = Keyed::new(quota, max_keys, salt);
        let mut table: KeyedGcra<u16> = KeyedGcra::new(quota, max_keys, salt);
        let times = arrivals(SEC, quota.interval().as_nanos() / 8, &gaps);
        for (((&now, &(_, raw)), &key), &sweep) in times.iter().zip(&gaps).zip(&keys).zip(&sweeps) {
            let cost = raw % (burst + 2);
            prop_assert_eq!(table.peek(&key, at(now), cost), keyed.peek(&key, at(now), cost));
            prop_assert_eq!(table.check(&key, at(now), cost), keyed.check(&key, at(now), cost), "key {} at {}", key, now);
            prop_assert_eq!(table.len(), keyed.len());
            prop_assert_eq!(table.get(&key), keyed.get(&key).copied());
            if sweep && raw % 16 == 0 {
                prop_assert_eq!(table.sweep(at(now)), keyed.sweep(at(now)));
            }
        }
        for key in 0..300u16 {
            prop_assert_eq!(table.get(&key), keyed.get(&key).copied(), "key {}", key);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Token buckets with count-then-block packed 16 bytes a slot (`PackedGcra`, behind the
    /// JavaScript `Limiter`'s `token_bucket`) answer every operation exactly as the same
    /// limiters kept whole: checks (with when each is back at full quota), first requests,
    /// peeks, blocks imposed on held and new keys, removals and sweeps, the slots given and
    /// freed, and the full table's refusals.
    #[test]
    fn packed_token_buckets_answer_as_whole_ones(
        burst in 1u32..=4,
        count in 1u32..=4,
        period_ms in 1u64..=1_000,
        block_ms in prop_oneof![Just(0u64), 1u64..=1_000],
        max_keys in 1usize..=6,
        gaps in schedule(300),
        ops in prop::collection::vec((0u8..16, 0u32..8, 0u64..1_500), 300),
    ) {
        let quota = Gcra::new(burst, Span::from_millis(period_ms), count).unwrap();
        let prototype = Blocking::new(quota, Span::from_millis(block_ms));
        let mut whole = Slots::new(prototype.clone(), max_keys);
        let mut packed = Slots::<_, PackedGcra>::with_packing(prototype, max_keys);
        let times = arrivals(SEC, quota.interval().as_nanos() / 2, &gaps);
        for ((&now, &(_, raw)), &(op, slot, ms)) in times.iter().zip(&gaps).zip(&ops) {
            let (now, cost) = (at(now), raw % (burst + 2));
            let (mut freed_whole, mut freed_packed) = (Vec::new(), Vec::new());
            match op {
                0..=6 => prop_assert_eq!(
                    packed.check_until_full(slot, now, cost),
                    whole.check_until_full(slot, now, cost),
                    "check of slot {} at {:?}", slot, now
                ),
                7..=9 => prop_assert_eq!(
                    packed.check_new(now, cost, &mut |s| freed_packed.push(s)),
                    whole.check_new(now, cost, &mut |s| freed_whole.push(s)),
                    "first request at {:?}", now
                ),
                10 => {
                    let held = (slot % 2 == 0).then_some(slot);
                    prop_assert_eq!(packed.peek(held, now, cost), whole.peek(held, now, cost));
                }
                11 => {
                    let until = now + Span::from_millis(ms);
                    prop_assert_eq!(
                        packed.with_mut(slot, |l| l.impose_block(until)),
                        whole.with_mut(slot, |l| l.impose_block(until))
                    );
                }
                12 => {
                    let until = now + Span::from_millis(ms);
                    prop_assert_eq!(
                        packed.claim(now, |l| l.impose_block(until), &mut |s| freed_packed.push(s)),
                        whole.claim(now, |l| l.impose_block(until), &mut |s| freed_whole.push(s))
                    );
                }
                13 => prop_assert_eq!(packed.remove(slot), whole.remove(slot)),
                14 => prop_assert_eq!(
                    packed.sweep(now, &mut |s| freed_packed.push(s)),
                    whole.sweep(now, &mut |s| freed_whole.push(s))
                ),
                _ => prop_assert_eq!(packed.with(slot, Limiter::full_at), whole.with(slot, Limiter::full_at)),
            }
            prop_assert_eq!(freed_packed, freed_whole);
            prop_assert_eq!(packed.len(), whole.len());
        }
        for slot in 0..8 {
            prop_assert_eq!(
                packed.with(slot, |l| (l.full_at(), l.blocked_until(Instant::ZERO))),
                whole.with(slot, |l| (l.full_at(), l.blocked_until(Instant::ZERO)))
            );
        }
    }
}

/// The documented semantics of a `Keyed<_, Gcra>` table, without the sweep shortcut: a new
/// key that would leave state is stored if there is room, or if sweeping every entry back at
/// full quota makes room; otherwise it is refused until the earliest entry frees up.
struct TableModel {
    prototype: Gcra,
    max_keys: usize,
    entries: HashMap<u16, Gcra>,
}

/// What the model answers: the key's own decision, or a refusal for want of room in the
/// table (with the moment the earliest entry frees up).
#[derive(Debug)]
enum Answer {
    Own(Decision),
    TableFull { frees_up_in: Span },
}

impl TableModel {
    fn check(&mut self, key: u16, now: Instant, cost: u32) -> Answer {
        if let Some(g) = self.entries.get_mut(&key) {
            return Answer::Own(g.check(now, cost).unwrap());
        }
        let mut fresh = self.prototype;
        let d = fresh.check(now, cost).unwrap();
        if fresh.is_idle(now) {
            return Answer::Own(d);
        }
        if self.entries.len() >= self.max_keys {
            self.entries.retain(|_, g| g.full_at() > now);
            if self.entries.len() >= self.max_keys {
                let earliest = self.entries.values().map(|g| g.full_at()).min().unwrap();
                return Answer::TableFull { frees_up_in: earliest - now };
            }
        }
        self.entries.insert(key, fresh);
        Answer::Own(d)
    }
}

fn check_table_against_model(
    burst: u32,
    period_ms: u64,
    max_keys: usize,
    salt: u64,
    gaps: &[(u64, u32)],
    keys: &[u16],
) -> Result<(), TestCaseError> {
    let prototype = Gcra::new(burst, Span::from_millis(period_ms), burst).unwrap();
    let mut table: Keyed<u16, Gcra> = Keyed::new(prototype, max_keys, salt);
    let mut model = TableModel { prototype, max_keys, entries: HashMap::new() };
    let times = arrivals(SEC, prototype.interval().as_nanos() / 2, gaps);
    for ((&now, &(_, raw)), &key) in times.iter().zip(gaps).zip(keys) {
        let cost = raw % (burst + 1);
        let d = table.check(&key, at(now), cost).unwrap();
        match model.check(key, at(now), cost) {
            Answer::Own(want) => prop_assert_eq!(d, want, "key {} at {} cost {}", key, now, cost),
            Answer::TableFull { frees_up_in } => {
                // A hint no later than the moment room appears (a sooner one is harmless).
                let retry = retry_after(d);
                prop_assert!(
                    retry.is_some_and(|r| !r.is_zero() && r <= frees_up_in.max(Span::from_nanos(1))),
                    "key {} at {}: table full until {:?} from now, limiter said {:?}",
                    key,
                    now,
                    frees_up_in,
                    d
                );
            }
        }
        prop_assert_eq!(table.len(), model.entries.len());
    }
    Ok(())
}

#[test]
fn a_full_keyed_table_refuses_a_new_key_only_when_no_entry_can_be_swept() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    runner
        .run(
            &(1u32..=5, 1u64..=1_000, 1usize..=4, any::<u64>(), schedule(200), prop::collection::vec(0u16..12, 200)),
            |(burst, period_ms, max_keys, salt, gaps, keys)| {
                check_table_against_model(burst, period_ms, max_keys, salt, &gaps, &keys)
            },
        )
        .unwrap();
}

#[test]
fn a_full_keyed_table_sweeps_an_entry_that_went_idle_after_the_last_sweep() {
    // Gcra 5 per 5 s (T = 1 s), two keys at most.
    let mut table: Keyed<u8, Gcra> = Keyed::new(Gcra::new(5, Span::from_secs(5), 5).unwrap(), 2, 0);
    let s = Instant::from_secs;
    assert!(table.check(&b'A', s(0), 5).unwrap().is_allowed()); // full again at 5 s
    assert!(table.check(&b'B', s(0), 1).unwrap().is_allowed()); // full again at 1 s
    assert!(table.check(&b'C', s(2), 1).unwrap().is_allowed()); // sweeps B; C full again at 3 s
                                                                // At 4 s C holds nothing (idle since 3 s): D must get its entry, as a lone bucket would.
    assert!(table.check(&b'D', s(4), 1).unwrap().is_allowed());
}

#[test]
fn a_keyed_table_that_was_swept_empty_still_admits_new_keys_later() {
    // One key at most, 1 per second.
    let mut table: Keyed<u8, Gcra> = Keyed::new(Gcra::new(1, Span::from_secs(1), 1).unwrap(), 1, 0);
    let s = Instant::from_secs;
    assert!(table.check(&b'A', s(0), 1).unwrap().is_allowed()); // full again at 1 s
    assert!(table.check(&b'B', s(2), 1).unwrap().is_allowed()); // sweeps A, keeps nothing
                                                                // B has been idle since 3 s; C must not be refused "for 584 years".
    assert_eq!(table.check(&b'C', s(100), 1).unwrap(), Decision::Allow { remaining: 0, reset: Span::from_secs(1) });
}

// ---------------------------------------------------------------------------------------
// Extremes
// ---------------------------------------------------------------------------------------

#[test]
fn gcra_with_a_one_nanosecond_period_and_the_largest_count_keeps_a_positive_interval() {
    for burst in [1, 2, u32::MAX] {
        let mut g = Gcra::new(burst, Span::from_nanos(1), u32::MAX).unwrap();
        assert!(g.interval() >= Span::from_nanos(1));
        for now in [0, 1, 2, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
            for cost in [0, 1, burst] {
                let _ = g.check(at(now), cost).unwrap();
            }
        }
    }
    assert!(Gcra::with_interval(0, Span::ZERO).interval() >= Span::from_nanos(1));
}

fn extreme_span() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(u64::MAX), Just(u64::MAX / 2), 1u64..1_000, any::<u64>().prop_map(|n| n.max(1))]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn times_near_the_end_of_the_clock_saturate_without_panicking(
        start in prop_oneof![Just(u64::MAX), u64::MAX - 1_000..=u64::MAX, u64::MAX - 1_000 * SEC..=u64::MAX],
        steps in prop::collection::vec((prop_oneof![Just(0u64), 0u64..1_000, any::<u64>()], any::<u32>()), 1..40),
        limit in prop_oneof![Just(1u64), Just(u64::MAX), 1u64..100, any::<u64>().prop_map(|n| n.max(1))],
        burst in prop_oneof![Just(1u32), Just(u32::MAX), 1u32..100],
        count in prop_oneof![Just(1u32), Just(u32::MAX), 1u32..100],
        period in extreme_span(),
        timeout in prop_oneof![Just(0u64), extreme_span()],
    ) {
        let period = Span::from_nanos(period);
        let timeout = Span::from_nanos(timeout);
        let gcra = Gcra::new(burst, period, count).unwrap();
        let mut all: Vec<Blocking<AnyLimiter>> = vec![
            Blocking::new(AnyLimiter::Gcra(gcra), timeout),
            Blocking::new(AnyLimiter::FixedWindow(FixedWindow::new(limit, period).unwrap()), timeout),
            Blocking::new(AnyLimiter::SlidingLog(SlidingLog::new(limit, period).unwrap()), timeout),
            Blocking::new(AnyLimiter::SlidingWindow(SlidingWindow::new(limit, period).unwrap()), timeout),
        ];
        let mut table: Keyed<u32, Gcra> = Keyed::new(gcra, 2, 1);
        let mut t = Instant::from_nanos(start);
        for (i, &(gap, cost)) in steps.iter().enumerate() {
            t = t + Span::from_nanos(gap);
            for l in all.iter_mut() {
                let _ = l.peek(t, cost);
                let _ = l.check(t, cost);
                let _ = l.full_at();
                let _ = l.is_idle(t);
            }
            let _ = table.check(&(i as u32 % 5), t, cost);
            prop_assert!(table.len() <= 2);
            let mut refs: Vec<&mut dyn Limiter> = all.iter_mut().map(|l| l as &mut dyn Limiter).collect();
            let _ = check_all(&mut refs, t, cost % 4);
        }
        prop_assert_eq!(t.as_nanos() >= start, true);
    }
}

// ---------------------------------------------------------------------------------------
// Upstream budget slots
// ---------------------------------------------------------------------------------------

/// One step of a budget's life: a request arrives, a holder is answered, a waiter leaves.
#[derive(Clone, Debug)]
enum SlotStep {
    Arrive,
    Answer(usize),
    Leave(usize),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Over any sequence of arrivals, answers and departures: never more than
    /// `max_in_flight` hold a slot, slots are handed out in arrival order, and a request
    /// waits only while every slot is held.
    #[test]
    fn an_upstream_budget_never_exceeds_its_slots_and_serves_waiters_in_arrival_order(
        max in 1u32..5,
        steps in prop::collection::vec(prop_oneof![
            3 => Just(SlotStep::Arrive),
            2 => (0usize..8).prop_map(SlotStep::Answer),
            1 => (0usize..8).prop_map(SlotStep::Leave),
        ], 1..200),
    ) {
        use sluicegate::budget::{Acquire, InFlight};
        let mut slots = InFlight::new(max, 1_000);
        let mut holders: Vec<u64> = Vec::new(); // arrival numbers holding a slot
        let mut waiting: Vec<(u64, u64)> = Vec::new(); // (ticket, arrival number), in order
        let mut granted_order: Vec<u64> = Vec::new();
        for (arrival, step) in (0u64..).zip(steps) {
            match step {
                SlotStep::Arrive => match slots.acquire() {
                    Acquire::Granted => {
                        prop_assert!(waiting.is_empty(), "a new arrival never overtakes a waiter");
                        holders.push(arrival);
                        granted_order.push(arrival);
                    }
                    Acquire::Queued(ticket) => {
                        prop_assert_eq!(holders.len() as u32, max, "waits only while every slot is held");
                        waiting.push((ticket, arrival));
                    }
                    Acquire::Refused => prop_assert!(false, "the queue has room"),
                },
                SlotStep::Answer(i) if !holders.is_empty() => {
                    holders.remove(i % holders.len());
                    match slots.release() {
                        Some(ticket) => {
                            let (first, arrival) = waiting.remove(0);
                            prop_assert_eq!(ticket, first, "the first waiter gets the slot");
                            holders.push(arrival);
                            granted_order.push(arrival);
                        }
                        None => prop_assert!(waiting.is_empty()),
                    }
                }
                SlotStep::Leave(i) if !waiting.is_empty() => {
                    let (ticket, _) = waiting.remove(i % waiting.len());
                    prop_assert!(slots.leave(ticket));
                }
                _ => {}
            }
            prop_assert!(holders.len() as u32 <= max);
            prop_assert_eq!(slots.in_flight() as usize, holders.len());
            prop_assert_eq!(slots.waiting(), waiting.len());
        }
        prop_assert!(granted_order.windows(2).all(|w| w[0] < w[1]), "slots go out in arrival order");
    }
}

// ---------------------------------------------------------------------------------------
// Saved counters
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A counter saved and restored into a fresh one (a Durable Object evicted and recreated)
    /// decides every later request exactly as the counter that was never saved.
    #[test]
    fn a_restored_counter_decides_as_the_one_that_was_saved(
        limiter in any_limiter(),
        before in schedule(60),
        after in schedule(60),
    ) {
        use sluicegate::rules::{restore_counter, save_counter};
        let cap = limiter.quota().limit.min(u64::from(u32::MAX)) as u32;
        let mut kept = limiter.clone();
        let start = 1_700_000_000 * SEC;
        let times = arrivals(start, 50 * MS, &before);
        for (t, &(_, c)) in times.iter().zip(&before) {
            let _ = kept.check(at(*t), 1 + c % cap.max(1));
        }
        let mut restored = limiter.clone();
        prop_assert!(restore_counter(&mut restored, &save_counter(&kept)));
        let later = arrivals(times.last().copied().unwrap_or(start), 50 * MS, &after);
        for (t, &(_, c)) in later.iter().zip(&after) {
            let cost = 1 + c % cap.max(1);
            prop_assert_eq!(restored.check(at(*t), cost), kept.check(at(*t), cost));
        }
    }
}

#[test]
fn a_saved_counter_of_another_kind_is_not_restored() {
    use sluicegate::rules::{restore_counter, save_counter};
    let gcra = Blocking::new(AnyLimiter::Gcra(Gcra::new(3, Span::from_secs(3), 3).unwrap()), Span::ZERO);
    let mut log = Blocking::new(AnyLimiter::SlidingLog(SlidingLog::new(3, Span::from_secs(3)).unwrap()), Span::ZERO);
    let before = log.clone();
    assert!(!restore_counter(&mut log, &save_counter(&gcra)));
    assert!(!restore_counter(&mut log, &[1, 2, 3]));
    assert_eq!(log, before);
}

proptest! {
    /// The simulator reads a trace's plain decimals (timestamps, costs) by a shortcut: it
    /// must give exactly the float the full reading gives (Rust's, correctly rounded as
    /// Python's `float()` is), and refuse what it refuses.
    #[test]
    fn plain_decimals_read_exactly_as_the_full_float_reading(text in r"-?[0-9]{0,19}(\.[0-9]{0,24})?(\.[0-9]{0,2})?") {
        let full = text.parse::<f64>().ok();
        let read = sluicegate::sim::py::parse_float(&text);
        prop_assert_eq!(read.map(f64::to_bits), full.map(f64::to_bits), "{:?}", text);
    }
}
