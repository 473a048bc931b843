//! Properties of the weighted multi-window pacer, over random weights and arrivals.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::pacer::{PacerCore, Window};
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
