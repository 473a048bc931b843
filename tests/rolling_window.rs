//! Properties of the core's weighted rolling window against a brute-force model: no window
//! of its length ever holds more than its budget of the entries placed where it said they
//! fit, and where it says a weight fits is the earliest instant that holds it.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::limit::{Limiter, RollingWindow, WindowError};
use sluicegate::{Decision, Instant, Span};

/// The weight of the entries that started in `(y − length, y]`.
fn load(entries: &[(u64, u64)], length: u64, y: u64) -> u64 {
    entries.iter().filter(|(s, _)| *s <= y && y < s + length).map(|(_, w)| w).sum()
}

/// Whether `weight` fits at `t`: every window up to an instant of `[t, t + length)` keeps
/// within `budget` with it. The load over that span is highest at `t` or at a start in it.
fn fits(entries: &[(u64, u64)], length: u64, budget: u64, weight: u64, t: u64) -> bool {
    std::iter::once(t)
        .chain(entries.iter().map(|(s, _)| *s).filter(|s| *s > t && *s < t + length))
        .all(|y| load(entries, length, y) + weight <= budget)
}

/// The earliest `t ≥ from` at which `weight` fits: it only becomes true where an entry
/// leaves (`s + length`), so `from` and those instants are the candidates.
fn brute_eta(entries: &[(u64, u64)], length: u64, budget: u64, weight: u64, from: u64) -> u64 {
    let mut candidates: Vec<u64> =
        std::iter::once(from).chain(entries.iter().map(|(s, _)| s + length).filter(|e| *e > from)).collect();
    candidates.sort_unstable();
    candidates.into_iter().find(|&t| fits(entries, length, budget, weight, t)).expect("past every entry it fits")
}

/// The heaviest window of `length` over the entries (the heaviest starts at an entry).
fn heaviest(entries: &[(u64, u64)], length: u64) -> u64 {
    entries.iter().map(|(s, _)| load(entries, length, *s)).max().unwrap_or(0)
}

#[derive(Clone, Debug)]
enum Op {
    /// Let this many ns pass, then place this weight where the window says it fits.
    Place(u64, u64),
    /// Take back the n-th entry still held (modulo), as a refund.
    Remove(usize),
}

fn ops(budget: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u64..8, 0..=budget).prop_map(|(gap, w)| Op::Place(gap, w)),
        1 => any::<usize>().prop_map(Op::Remove),
    ];
    // Few enough entries that the search never runs out of steps (MAX_STRETCHES): exact.
    prop::collection::vec(op, 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Entries placed at `eta` (some ahead of `now`, some taken back): no window of the
    /// length ever holds more than the budget, `eta` is the brute force's earliest instant,
    /// and `used` is the model's load.
    #[test]
    fn eta_is_the_earliest_instant_that_keeps_every_window_within_the_budget(
        (budget, length, ops) in (1u64..=12, 1u64..=20).prop_flat_map(|(b, l)| (Just(b), Just(l), ops(b))),
    ) {
        let mut window = RollingWindow::new(Span::from_nanos(length), budget).unwrap();
        let mut entries: Vec<(u64, u64)> = Vec::new();
        let mut now = 100u64;
        for op in ops {
            match op {
                Op::Place(gap, weight) => {
                    now += gap;
                    let at = window.eta(Instant::from_nanos(now), weight).unwrap().as_nanos();
                    prop_assert_eq!(at, brute_eta(&entries, length, budget, weight, now), "eta of {} at {}", weight, now);
                    window.insert(Instant::from_nanos(at), weight);
                    entries.push((at, weight));
                    prop_assert!(heaviest(&entries, length) <= budget);
                }
                Op::Remove(i) if !entries.is_empty() => {
                    let (at, weight) = entries.remove(i % entries.len());
                    window.remove(Instant::from_nanos(at), weight);
                }
                Op::Remove(_) => {}
            }
            for y in now.saturating_sub(length)..now + 2 * length {
                prop_assert_eq!(window.used(Instant::from_nanos(y)), load(&entries, length, y));
            }
        }
        prop_assert_eq!(window.eta(Instant::from_nanos(now), budget + 1), Err(WindowError::TooHeavy { weight: budget + 1, budget }));
    }

    /// As a limiter, requests at a clock that never steps back: a request is admitted exactly
    /// when the model fits it at `now`, a refusal waits exactly until it would, and pruning
    /// (every check) changes no answer.
    #[test]
    fn as_a_limiter_it_admits_exactly_what_fits_now(
        budget in 1u64..=12,
        length in 1u64..=20,
        requests in prop::collection::vec((0u64..6, 0u32..=13), 1..80),
    ) {
        let mut window = RollingWindow::new(Span::from_nanos(length), budget).unwrap();
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        let mut now = 0u64;
        for (gap, cost) in requests {
            now += gap;
            let weight = u64::from(cost);
            let decision = window.check(Instant::from_nanos(now), cost);
            if weight > budget {
                prop_assert!(decision.is_err());
                continue;
            }
            let eta = brute_eta(&admitted, length, budget, weight, now);
            match decision.unwrap() {
                Decision::Allow { remaining, .. } => {
                    prop_assert_eq!(eta, now);
                    admitted.push((now, weight));
                    prop_assert_eq!(remaining, budget - load(&admitted, length, now));
                }
                Decision::Deny { retry_after } => prop_assert_eq!(now + retry_after.as_nanos(), eta),
            }
            prop_assert!(heaviest(&admitted, length) <= budget);
        }
    }
}
