//! Properties of the weighted multi-window pacer, over random weights and arrivals.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::pacer::{Busy, Due, LedgerEntry, PacerCore, PacerError, PacerLimits, Window};
use sluicegate::{Instant, Span};

const SEC: u64 = 1_000_000_000;

/// The largest load of any window of `length` over the exported spends.
fn max_window_load(spends: &[(Instant, u64, bool)], length: Span) -> u64 {
    let mut best = 0;
    for &(start, _, _) in spends {
        let load: u64 =
            spends.iter().filter(|(at, _, _)| *at >= start && *at < start + length).map(|(_, w, _)| *w).sum();
        best = best.max(load);
    }
    best
}

fn open_meteo_like() -> Vec<Window> {
    // 550/min and 4,800/h, in thousandths; the day window never binds in these runs.
    vec![
        Window { length: Span::from_secs(60), budget: 550_000 },
        Window { length: Span::from_secs(3_600), budget: 4_800_000 },
        Window { length: Span::from_secs(86_400), budget: 9_500_000 },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_rolling_window_ever_exceeds_its_budget(
        ops in prop::collection::vec((0u64..90, 1u64..=114_000, 0u8..10), 1..120),
    ) {
        let windows = open_meteo_like();
        let mut p = PacerCore::new(windows.clone(), Some(5_000_000)).unwrap();
        let mut now = Instant::from_secs(1_000);
        let mut pending = Vec::new();
        let mut history: Vec<(Instant, u64, bool)> = Vec::new();
        for (gap_s, weight, action) in ops {
            now = now + Span::from_secs(gap_s);
            let r = p.reserve(now, weight).unwrap();
            prop_assert!(r.at >= now);
            pending.push((r.id, r.at, weight));
            // Some reservations are cancelled before going out, some go out (at their instant).
            if action == 0 {
                let (id, _, _) = pending.remove(0);
                prop_assert!(p.cancel(id));
            } else if action < 4 {
                let (id, at, w) = pending.remove(0);
                p.dispatch(id).unwrap();
                history.push((at, w, true));
            }
        }
        let mut all = history;
        all.extend(p.export().into_iter().filter(|(_, _, d)| !*d));
        all.sort();
        for w in &windows {
            prop_assert!(max_window_load(&all, w.length) <= w.budget, "window {:?}", w.length);
        }
    }

    #[test]
    fn a_saturating_queue_keeps_the_minute_window_at_least_98_percent_used(
        weights in prop::collection::vec(1u64..=114, 250..400),
    ) {
        let mut p = PacerCore::new(vec![Window { length: Span::from_secs(60), budget: 550_000 }], None).unwrap();
        let t0 = Instant::from_secs(10_000);
        let mut spends = Vec::new();
        for w in &weights {
            let r = p.reserve(t0, w * 1_000).unwrap();
            spends.push((r.at, w * 1_000));
        }
        spends.sort();
        let last = spends.last().unwrap().0;
        // While the queue is saturated (the first third of the busy period: calls of every
        // weight are still waiting to fill gaps), every window holds at least 98 % of the
        // budget. The tail, where only leftovers remain, cannot pack that well under any
        // order: four calls of 114 leave 94 of 550 unused.
        let length = Span::from_secs(60);
        let last = t0 + Span::from_nanos((last - t0).as_nanos() / 3);
        let mut worst = u64::MAX;
        for &(at, _) in &spends {
            let start = at + Span::from_nanos(1);
            if start + length > last {
                break;
            }
            let load: u64 = spends.iter().filter(|(a, _)| *a >= start && *a < start + length).map(|(_, w)| *w).sum();
            worst = worst.min(load);
        }
        if worst != u64::MAX {
            prop_assert!(worst * 100 >= 98 * 550_000, "a window held only {} of 550", worst as f64 / 1000.0);
        }
    }

    #[test]
    fn eta_is_where_reserve_puts_the_call(
        weights in prop::collection::vec(1u64..=114_000, 1..60),
        probe in 1u64..=114_000,
    ) {
        let mut p = PacerCore::new(open_meteo_like(), None).unwrap();
        let now = Instant::from_secs(50);
        for w in weights {
            p.reserve(now, w).unwrap();
        }
        let eta = p.eta(now, probe).unwrap();
        prop_assert_eq!(p.reserve(now, probe).unwrap().at, eta);
    }

    #[test]
    fn a_heavy_call_is_never_overtaken_once_reserved(
        before in prop::collection::vec(1u64..=114_000, 5..30),
        after in prop::collection::vec(1u64..=20_000, 5..60),
    ) {
        let mut p = PacerCore::new(vec![Window { length: Span::from_secs(60), budget: 550_000 }], None).unwrap();
        let now = Instant::from_secs(50);
        for w in before {
            p.reserve(now, w).unwrap();
        }
        let heavy = p.reserve(now, 114_000).unwrap();
        for (i, w) in after.into_iter().enumerate() {
            p.reserve(now + Span::from_nanos(i as u64 * SEC), w).unwrap();
        }
        // Its instant is still the one it was given.
        let still = p.export().into_iter().any(|(at, w, _)| at == heavy.at && w == 114_000);
        prop_assert!(still);
    }
}

/// The earliest instant ≥ `from` at which `weight` fits every window, by trying every
/// instant where a window's load can drop: a slow, obviously right placement.
fn naive_fit(spends: &[(Instant, u64)], windows: &[Window], from: Instant, weight: u64) -> Instant {
    let fits = |t: Instant| {
        windows.iter().all(|w| {
            // Every window (x − L, x] with x ∈ [t, t + L) that a spend at t falls in.
            let mut xs: Vec<Instant> = vec![t];
            xs.extend(spends.iter().map(|(at, _)| *at).filter(|at| *at > t && *at < t + w.length));
            xs.iter().all(|&x| {
                let load: u64 = spends.iter().filter(|(at, _)| *at <= x && *at + w.length > x).map(|(_, w)| *w).sum();
                load + weight <= w.budget
            })
        })
    };
    let mut candidates = vec![from];
    for w in windows {
        candidates.extend(spends.iter().map(|(at, _)| *at + w.length).filter(|t| *t > from));
    }
    candidates.sort();
    candidates.into_iter().find(|t| fits(*t)).unwrap()
}

/// Each window's largest load over calls that went out at the given instants.
fn overspent(sent: &[(Instant, u64)], windows: &[Window]) -> Option<String> {
    for w in windows {
        for &(x, _) in sent {
            let load: u64 = sent.iter().filter(|(at, _)| *at <= x && *at + w.length > x).map(|(_, w)| *w).sum();
            if load > w.budget {
                return Some(format!("{load} in the window of {:?} ending at {x:?} (budget {})", w.length, w.budget));
            }
        }
    }
    None
}

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Reserve(u64),
    Cancel(usize),
    /// The oldest queued call of the tab becomes due this many ms after its instant.
    Due(u64),
    Release(usize),
    Reschedule(usize),
    SetSlots(usize),
    Switch,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..20_000).prop_map(Op::Wait),
        5 => (1u64..=4_000).prop_map(Op::Reserve),
        1 => (0usize..8).prop_map(Op::Cancel),
        5 => (0u64..400).prop_map(Op::Due),
        3 => (0usize..4).prop_map(Op::Release),
        1 => (0usize..8).prop_map(Op::Reschedule),
        1 => (1usize..4).prop_map(Op::SetSlots),
        2 => Just(Op::Switch),
    ]
}

type Stored = Vec<(Instant, u64, String, u64, bool)>;

fn store(p: &PacerCore) -> Stored {
    p.entries().map(|e| (e.at, e.weight, e.owner.to_string(), e.seq, e.dispatched)).collect()
}

fn load(p: &mut PacerCore, stored: &Stored) {
    p.sync(stored.iter().map(|(at, weight, owner, seq, dispatched)| LedgerEntry {
        at: *at,
        weight: *weight,
        owner,
        seq: *seq,
        dispatched: *dispatched,
    }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Two pacers (two tabs) sharing one ledger, each syncing before and storing after every
    /// operation: whatever they do, and however late within the slack their timers fire, the
    /// calls that went out never overspend a window.
    #[test]
    fn no_window_is_ever_over_budget_across_any_sequence_of_operations(
        ops in prop::collection::vec(op(), 1..160),
    ) {
        let windows = vec![
            Window { length: Span::from_secs(10), budget: 10_000 },
            Window { length: Span::from_secs(60), budget: 30_000 },
        ];
        let limits = PacerLimits { slack: Span::from_millis(400), max_in_flight: 2, ..PacerLimits::default() };
        let mut tabs = [
            PacerCore::with_limits(windows.clone(), limits).unwrap(),
            PacerCore::with_limits(windows.clone(), limits).unwrap(),
        ];
        tabs[0].set_owner("a");
        tabs[1].set_owner("b");
        let mut queued: [Vec<(u64, Instant)>; 2] = [Vec::new(), Vec::new()];
        let mut out: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let mut sent: Vec<(Instant, u64)> = Vec::new();
        let mut weights = std::collections::HashMap::new();
        let mut stored: Stored = Vec::new();
        let mut tab = 0;
        let mut now = Instant::from_secs(100);
        for op in ops {
            let acting = tab;
            let p = &mut tabs[tab];
            load(p, &stored);
            match op {
                Op::Wait(ms) => now = now + Span::from_millis(ms),
                Op::Reserve(w) => {
                    let r = p.reserve(now, w).unwrap();
                    prop_assert!(r.at >= now);
                    queued[tab].push((r.id, r.at));
                    weights.insert((tab, r.id), w);
                }
                Op::Cancel(i) if !queued[tab].is_empty() => {
                    let (id, _) = queued[tab].remove(i % queued[tab].len());
                    prop_assert!(p.cancel(id), "a queued call is refunded");
                }
                Op::Due(late_ms) if !queued[tab].is_empty() => {
                    queued[tab].sort_by_key(|(id, at)| (*at, *id));
                    let (id, at) = queued[tab][0];
                    now = now.max(at + Span::from_millis(late_ms));
                    match p.due(now, id) {
                        Due::Go => {
                            queued[tab].remove(0);
                            out[tab].push(id);
                            sent.push((now, weights[&(tab, id)]));
                        }
                        Due::Wait(next) => {
                            prop_assert!(next > now);
                            queued[tab][0].1 = next;
                        }
                        Due::NoSlot => prop_assert!(p.snapshot(now).in_flight >= p.limits().max_in_flight),
                        Due::Unknown => prop_assert!(false, "a queued call is known"),
                    }
                }
                Op::Release(i) if !out[tab].is_empty() => {
                    let id = out[tab].remove(i % out[tab].len());
                    prop_assert!(p.release(id));
                    prop_assert!(!p.release(id), "a second release does nothing");
                }
                Op::Reschedule(i) if !queued[tab].is_empty() => {
                    let k = i % queued[tab].len();
                    let r = p.reschedule(now, queued[tab][k].0).unwrap();
                    prop_assert!(r.at >= now);
                    queued[tab][k].1 = r.at;
                }
                Op::SetSlots(n) => {
                    let limits = PacerLimits { max_in_flight: n, ..p.limits() };
                    let replan = p.set_limits(now, windows.clone(), limits).unwrap();
                    prop_assert!(replan.refused.is_empty());
                    for r in replan.moved {
                        if let Some(q) = queued[tab].iter_mut().find(|(id, _)| *id == r.id) {
                            q.1 = r.at;
                        }
                    }
                }
                Op::Switch => tab = 1 - tab,
                _ => {}
            }
            stored = store(&tabs[acting]);
            // A pacer's own count of its queue agrees with the test's.
            let snap = tabs[acting].snapshot(now);
            prop_assert_eq!(snap.queued, queued[acting].len());
        }
        sent.sort();
        if let Some(what) = overspent(&sent, &windows) {
            prop_assert!(false, "overspent: {}", what);
        }
    }

    /// Placement (O(log n) per over-budget stretch skipped) finds exactly the instant a
    /// brute-force search over every candidate finds, over several windows, with gaps to
    /// fill: with fewer calls than MAX_STRETCHES its search bounds never bind.
    #[test]
    fn placement_agrees_with_a_brute_force_search(
        asks in prop::collection::vec((0u64..30, 1u64..=10_000), 1..30),
    ) {
        let windows = vec![
            Window { length: Span::from_secs(10), budget: 12_000 },
            Window { length: Span::from_secs(60), budget: 40_000 },
        ];
        let mut p = PacerCore::new(windows.clone(), None).unwrap();
        let mut spends = Vec::new();
        let t0 = Instant::from_secs(1_000);
        for (offset, w) in asks {
            let from = t0 + Span::from_secs(offset);
            let expected = naive_fit(&spends, &windows, from, w);
            let r = p.reserve(from, w).unwrap();
            prop_assert_eq!(r.at, expected);
            spends.push((r.at, w));
        }
    }

    /// A queue full by count or by weight refuses with a typed error, and a refund makes room.
    #[test]
    fn a_full_queue_refuses_and_a_refund_makes_room(max in 1usize..20, weight in 1u64..=1_000) {
        let windows = vec![Window { length: Span::from_secs(60), budget: 1_000 }];
        let limits = PacerLimits { max_queued: max, ..PacerLimits::default() };
        let mut p = PacerCore::with_limits(windows, limits).unwrap();
        let ids: Vec<u64> = (0..max).map(|_| p.reserve(Instant::ZERO, weight).unwrap().id).collect();
        prop_assert_eq!(p.reserve(Instant::ZERO, weight), Err(PacerError::QueueFull { limit: max as u64, weight: false }));
        prop_assert!(p.cancel(ids[0]));
        prop_assert!(p.reserve(Instant::ZERO, weight).is_ok());
    }
}

#[test]
fn a_call_late_beyond_the_slack_is_placed_again_where_it_goes_out() {
    let windows = vec![Window { length: Span::from_secs(10), budget: 2 }];
    let limits = PacerLimits { slack: Span::from_millis(100), ..PacerLimits::default() };
    let mut p = PacerCore::with_limits(windows, limits).unwrap();
    let t = Instant::from_secs(5);
    let a = p.reserve(t, 1).unwrap();
    let b = p.reserve(t, 1).unwrap();
    assert_eq!(p.due(t + Span::from_millis(50), a.id), Due::Go, "within the slack it goes at once");
    // b's timer fires 3 s late: a's spend still holds one unit, so b fits at once, counted now.
    let late = t + Span::from_secs(3);
    assert_eq!(p.due(late, b.id), Due::Go);
    let entry = p.entries().find(|e| e.seq == b.id).unwrap();
    assert_eq!(entry.at, late, "the ledger counts b where it went out");
}

#[test]
fn a_free_slot_goes_to_the_call_that_waited_longest() {
    let windows = vec![Window { length: Span::from_secs(10), budget: 100 }];
    let limits = PacerLimits { max_in_flight: 1, ..PacerLimits::default() };
    let mut p = PacerCore::with_limits(windows, limits).unwrap();
    let t = Instant::ZERO;
    let ids: Vec<u64> = (0..3).map(|_| p.reserve(t, 1).unwrap().id).collect();
    assert_eq!(p.due(t, ids[0]), Due::Go);
    assert_eq!(p.due(t, ids[2]), Due::NoSlot);
    assert_eq!(p.due(t, ids[1]), Due::NoSlot);
    assert_eq!(p.next_in_line(), None, "no slot is free yet");
    assert!(p.release(ids[0]));
    assert_eq!(p.next_in_line(), Some(ids[2]));
    assert_eq!(p.due(t, ids[2]), Due::Go);
}

#[test]
fn try_acquire_gives_a_permit_now_or_says_when() {
    let windows = vec![Window { length: Span::from_secs(10), budget: 2 }];
    let limits = PacerLimits { max_in_flight: 1, ..PacerLimits::default() };
    let mut p = PacerCore::with_limits(windows, limits).unwrap();
    let t = Instant::from_secs(1);
    let first = p.try_acquire(t, 1).unwrap().unwrap();
    assert_eq!(p.try_acquire(t, 1).unwrap(), Err(Busy::InFlight));
    assert!(p.release(first));
    p.try_acquire(t, 1).unwrap().unwrap();
    assert_eq!(p.try_acquire(t, 1).unwrap(), Err(Busy::Budget(t + Span::from_secs(10))));
    assert_eq!(p.snapshot(t).queued, 0, "nothing is ever queued");
}

#[test]
fn another_tabs_calls_count_and_a_dropped_entry_is_placed_again() {
    let windows = vec![Window { length: Span::from_secs(10), budget: 3 }];
    let mut a = PacerCore::new(windows.clone(), None).unwrap();
    let mut b = PacerCore::new(windows, None).unwrap();
    a.set_owner("a");
    b.set_owner("b");
    let t = Instant::ZERO;
    let ra = a.reserve(t, 2).unwrap();
    let shared = store(&a);
    load(&mut b, &shared);
    assert_eq!(b.reserve(t, 2).unwrap().at, t + Span::from_secs(10), "a's 2 leave room for 1 only");
    // The store is cleared (another tab reset it): a's queued call is placed again when due.
    load(&mut a, &Vec::new());
    assert_eq!(a.due(t, ra.id), Due::Go);
    assert_eq!(a.entries().count(), 1);
}

#[test]
fn a_higher_priority_gets_the_next_free_slot_and_keeps_its_instant() {
    let windows = vec![Window { length: Span::from_secs(10), budget: 100 }];
    let limits = PacerLimits { max_in_flight: 1, ..PacerLimits::default() };
    let mut p = PacerCore::with_limits(windows, limits).unwrap();
    let t = Instant::ZERO;
    let holder = p.reserve(t, 1).unwrap();
    let low = p.reserve_with_priority(t, 1, 0).unwrap();
    let high = p.reserve_with_priority(t, 1, 9).unwrap();
    assert_eq!((low.at, high.at), (t, t), "priority moves no reservation");
    assert_eq!(p.due(t, holder.id), Due::Go);
    assert_eq!(p.due(t, low.id), Due::NoSlot);
    assert_eq!(p.due(t, high.id), Due::NoSlot);
    assert!(p.release(holder.id));
    assert_eq!(p.next_in_line(), Some(high.id), "the higher priority goes first");
}

/// Calls asked one after another at scattered instants leave a schedule full of gaps shorter
/// than a window: the bounded search still places every call where it fits, at once.
#[test]
fn a_schedule_full_of_short_gaps_is_placed_within_the_budget() {
    let windows = vec![
        Window { length: Span::from_secs(1), budget: 10_000 },
        Window { length: Span::from_secs(5), budget: 30_000 },
    ];
    let mut p = PacerCore::new(windows.clone(), None).unwrap();
    let mut x: u64 = 1;
    let mut now = Instant::from_secs(1_000);
    let mut placed = Vec::new();
    for _ in 0..3_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        now = now + Span::from_millis((x >> 33) % 50);
        let weight = 1_000 * (1 + (x >> 40) % 5);
        let r = p.reserve(now, weight).unwrap();
        assert!(r.at >= now);
        placed.push((r.at, weight));
    }
    placed.sort();
    assert_eq!(overspent(&placed, &windows), None);
}
