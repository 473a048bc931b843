//! The simulator's four limiters, on `f64` seconds with the reference's tolerances.
//!
//! These are deliberately not the integer-time limiters of [`crate::core::limit`]: the reference
//! simulator decides on floats with a `1e-9` slack and computes Retry-After with its own
//! formulas, and parity means the same admit/reject decision and the same wait for every
//! request. Each `check` updates the key's state (refill, window roll, log expiry) even
//! when another policy then rejects the request; `consume` charges an admitted request.
//! (The edge's and the client's own algorithms, `gcra`, `count_then_block` and
//! `smartflow`, run the core's code itself: see the engine.)

use std::collections::VecDeque;

/// The outcome of [`ReferenceLimiter::check`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Check {
    /// Whether this limiter admits the request.
    pub allowed: bool,
    /// Seconds until it would (0 when allowed).
    pub wait: f64,
}

impl Check {
    const ALLOW: Check = Check { allowed: true, wait: 0.0 };
    fn deny(wait: f64) -> Check {
        Check { allowed: false, wait }
    }
}

/// One policy's limiter of the reference simulator's kind (token bucket, fixed window,
/// sliding log, sliding counter on `f64` seconds), with the state of each key (keys are
/// numbered from 0 by the engine, in the order they are first seen;
/// [`ReferenceLimiter::add_key`]). Not a [`crate::core::limit::Limiter`]: see the module.
#[derive(Clone, Debug)]
pub enum ReferenceLimiter {
    /// Token bucket: `(tokens, last refill)` per key (`NaN` tokens: not seen yet).
    TokenBucket {
        /// Tokens per second.
        rate: f64,
        /// Bucket size.
        burst: f64,
        /// Per-key state.
        state: Vec<(f64, f64)>,
    },
    /// Fixed window: `(window index, count)` per key (`NaN` index: not seen yet).
    FixedWindow {
        /// Units per window.
        limit: f64,
        /// Window length in seconds.
        window: f64,
        /// Per-key state.
        state: Vec<(f64, f64)>,
        /// The times of the window index last worked out.
        at: WindowAt,
    },
    /// Sliding log: admitted timestamps per key.
    SlidingLog {
        /// Units per rolling window.
        limit: f64,
        /// Window length in seconds.
        window: f64,
        /// Per-key state.
        state: Vec<VecDeque<f64>>,
    },
    /// Sliding counter: `(window index, previous count, current count)` per key (`NaN`
    /// index: not seen yet).
    SlidingCounter {
        /// Units per (estimated) rolling window.
        limit: f64,
        /// Window length in seconds.
        window: f64,
        /// Per-key state.
        state: Vec<(f64, f64, f64)>,
        /// The times of the window index last worked out.
        at: WindowAt,
    },
}

/// The times `t` whose window index `floor(t / window)` is `index`: `from <= t < to` (empty
/// until one is worked out). A replay's times come in order, so its attempts meet the same
/// window many times over, and the index is then read here, without a division.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowAt {
    from: f64,
    to: f64,
    index: f64,
}

impl Default for WindowAt {
    fn default() -> Self {
        WindowAt { from: f64::INFINITY, to: f64::NEG_INFINITY, index: 0.0 }
    }
}

impl WindowAt {
    /// `floor(t / window)` as the reference computes it, `window` being this limiter's.
    #[inline(always)]
    pub fn index(&mut self, t: f64, window: f64) -> f64 {
        if self.from <= t && t < self.to {
            return self.index;
        }
        self.find(t, window)
    }

    /// [`WindowAt::index`] for a time outside the window known: worked out, and that
    /// window's times found.
    #[inline(never)]
    fn find(&mut self, t: f64, window: f64) -> f64 {
        let index = super::py::floor(t / window);
        let bounds = (index.abs() < 1.0e15 && window.is_finite() && window > 0.0)
            .then(|| Some((first_at_least(index, window)?, first_at_least(index + 1.0, window)?)))
            .flatten();
        *self = match bounds {
            Some((from, to)) if from <= t && t < to => WindowAt { from, to, index },
            _ => WindowAt::default(),
        };
        index
    }
}

/// The smallest `x` whose quotient `x / window` (rounded, as a float division is) is at least
/// `k`, a whole number: the first time of window `k`. The quotient never falls as `x`
/// grows, so the search steps from `k * window` one float at a time (a step or two; `None`
/// past 64).
fn first_at_least(k: f64, window: f64) -> Option<f64> {
    let mut x = k * window;
    if !x.is_finite() {
        return None;
    }
    for _ in 0..64 {
        if x / window >= k {
            let below = next_down(x);
            if below / window < k {
                return Some(x);
            }
            x = below;
        } else {
            x = next_up(x);
        }
    }
    None
}

/// The next float above finite `x` (`f64::next_up` is Rust 1.86's, past the crate's
/// rust-version).
fn next_up(x: f64) -> f64 {
    if x == 0.0 {
        f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        f64::from_bits(x.to_bits() - 1)
    }
}

/// The next float below finite `x`.
fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

impl ReferenceLimiter {
    /// A token bucket refilling `rate` per second up to `burst`.
    pub fn token_bucket(rate: f64, burst: f64) -> Self {
        ReferenceLimiter::TokenBucket { rate, burst, state: Vec::new() }
    }
    /// A fixed window of `limit` per `window` seconds.
    pub fn fixed_window(limit: f64, window: f64) -> Self {
        ReferenceLimiter::FixedWindow { limit, window, state: Vec::new(), at: WindowAt::default() }
    }
    /// A sliding log of `limit` per `window` seconds.
    pub fn sliding_log(limit: f64, window: f64) -> Self {
        ReferenceLimiter::SlidingLog { limit, window, state: Vec::new() }
    }
    /// A sliding counter of `limit` per `window` seconds.
    pub fn sliding_counter(limit: f64, window: f64) -> Self {
        ReferenceLimiter::SlidingCounter { limit, window, state: Vec::new(), at: WindowAt::default() }
    }

    /// Adds the state of a key not seen before; keys are numbered from 0.
    pub fn add_key(&mut self) {
        match self {
            ReferenceLimiter::TokenBucket { state, .. } | ReferenceLimiter::FixedWindow { state, .. } => {
                state.push((f64::NAN, 0.0))
            }
            ReferenceLimiter::SlidingLog { state, .. } => state.push(VecDeque::new()),
            ReferenceLimiter::SlidingCounter { state, .. } => state.push((f64::NAN, 0.0, 0.0)),
        }
    }

    /// Whether a request of `cost` for `key` at `t` fits, updating the key's state.
    #[inline(always)]
    pub fn check(&mut self, key: usize, t: f64, cost: f64) -> Check {
        match self {
            ReferenceLimiter::TokenBucket { rate, burst, state } => {
                token_bucket(*rate, *burst, &mut state[key], t, cost)
            }
            ReferenceLimiter::FixedWindow { limit, window, state, at } => {
                let w = at.index(t, *window);
                fixed_window(*limit, *window, w, &mut state[key], t, cost)
            }
            ReferenceLimiter::SlidingLog { limit, window, state } => {
                sliding_log(*limit, *window, &mut state[key], t, cost)
            }
            ReferenceLimiter::SlidingCounter { limit, window, state, at } => {
                let idx = at.index(t, *window);
                sliding_counter(*limit, *window, idx, &mut state[key], t, cost)
            }
        }
    }

    /// Charges an admitted request (call only after [`ReferenceLimiter::check`] for the same key).
    #[inline(always)]
    pub fn consume(&mut self, key: usize, t: f64, cost: f64) {
        match self {
            ReferenceLimiter::TokenBucket { state, .. } => take_tokens(&mut state[key], t, cost),
            ReferenceLimiter::FixedWindow { state, .. } => state[key].1 += cost,
            ReferenceLimiter::SlidingLog { state, .. } => log_admitted(&mut state[key], t, cost),
            ReferenceLimiter::SlidingCounter { state, .. } => state[key].2 += cost,
        }
    }
}

/// A token bucket's check of one key's `(tokens, last refill)` (see
/// [`ReferenceLimiter::TokenBucket`]). The four checks stand apart from the enum so that a
/// replay, which keeps each policy's kind as its own, reaches them in one step.
#[inline(always)]
pub(super) fn token_bucket(rate: f64, burst: f64, s: &mut (f64, f64), t: f64, cost: f64) -> Check {
    let (tokens, last) = if s.0.is_nan() { (burst, t) } else { *s };
    // Python's `min(burst, refilled)`: the first unless the second is smaller
    let refilled = tokens + (t - last) * rate;
    let tokens = if refilled < burst { refilled } else { burst };
    *s = (tokens, t);
    if tokens + 1e-9 >= cost {
        Check::ALLOW
    } else {
        Check::deny((cost - tokens) / rate)
    }
}

/// A token bucket's charge of an admitted request to one key's state.
#[inline(always)]
pub(super) fn take_tokens(s: &mut (f64, f64), t: f64, cost: f64) {
    *s = (s.0 - cost, t);
}

/// A fixed window's check of one key's `(window index, count)`, `w` being the index of
/// `t`'s window ([`WindowAt::index`]).
#[inline(always)]
pub(super) fn fixed_window(limit: f64, window: f64, w: f64, s: &mut (f64, f64), t: f64, cost: f64) -> Check {
    // a NaN index never equals `w`
    let count = if s.0 == w { s.1 } else { 0.0 };
    *s = (w, count);
    if count + cost <= limit + 1e-9 {
        Check::ALLOW
    } else {
        Check::deny((w + 1.0) * window - t)
    }
}

/// A sliding log's check of one key's log.
#[inline(always)]
pub(super) fn sliding_log(limit: f64, window: f64, log: &mut VecDeque<f64>, t: f64, cost: f64) -> Check {
    while log.front().is_some_and(|&first| first <= t - window) {
        log.pop_front();
    }
    let used = log.len() as f64;
    if used + cost <= limit + 1e-9 {
        return Check::ALLOW;
    }
    let wait = if log.is_empty() {
        window
    } else {
        // the entries that must expire before this request fits
        let need = super::py::trunc(used + cost - limit);
        let idx = (need - 1.0).max(0.0).min(used - 1.0) as usize;
        log[idx] + window - t
    };
    Check::deny(wait.max(0.001))
}

/// A sliding log's charge of an admitted request: its time logged.
#[inline(always)]
pub(super) fn log_admitted(log: &mut VecDeque<f64>, t: f64, cost: f64) {
    if cost == 1.0 {
        log.push_back(t);
    } else {
        log_cost(log, t, cost);
    }
}

/// A sliding counter's check of one key's `(window index, previous count, current count)`,
/// `idx` being the index of `t`'s window ([`WindowAt::index`]).
#[inline(always)]
pub(super) fn sliding_counter(lim: f64, w: f64, idx: f64, s: &mut (f64, f64, f64), t: f64, cost: f64) -> Check {
    let (start, prev, curr) = match *s {
        (start, ..) if start.is_nan() => (idx, 0.0, 0.0),
        (start, _, curr) if idx == start + 1.0 => (idx, curr, 0.0),
        (start, ..) if idx > start + 1.0 => (idx, 0.0, 0.0),
        s => s,
    };
    *s = (start, prev, curr);
    let e = t - start * w;
    let est = prev * (1.0 - e / w) + curr;
    if est + cost <= lim + 1e-9 {
        return Check::ALLOW;
    }
    let wait = if curr + cost <= lim && prev > 0.0 {
        w * (1.0 - (lim - curr - cost) / prev) - e
    } else {
        let x = if curr > 0.0 && lim - cost < curr { w * (1.0 - (lim - cost) / curr) } else { 0.0 };
        (w - e) + x.max(0.0)
    };
    Check::deny(wait.max(0.001))
}

/// [`ReferenceLimiter::consume`] of a sliding log for a cost other than 1: the time logged
/// once per unit, as Python's `for _ in range(int(round(cost)))` does.
#[inline(never)]
fn log_cost(log: &mut VecDeque<f64>, t: f64, cost: f64) {
    let n = cost.round_ties_even();
    if n >= 1.0 {
        log.extend(std::iter::repeat_n(t, n as usize));
    }
}

/// The most timestamps in any half-open window `(t - w, t]`, for sorted `times`.
pub fn max_in_window(times: &[f64], w: f64) -> usize {
    let mut best = 0;
    let mut first = 0;
    for (i, &t) in times.iter().enumerate() {
        while times[first] <= t - w {
            first += 1;
        }
        best = best.max(i + 1 - first);
    }
    best
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Times near the edges of windows (a few floats either side of `k * window`), most of
    /// them in a few windows from `k0`.
    fn time(window: f64, k0: i64) -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => (k0..k0 + 3, -3i64..4).prop_map(move |(k, ulps)| {
                let x = k as f64 * window;
                (0..ulps.abs()).fold(x, |x, _| if ulps > 0 { next_up(x) } else { next_down(x) })
            }),
            1 => (-1000i64..100_000, -3i64..4).prop_map(move |(k, ulps)| {
                let x = k as f64 * window;
                (0..ulps.abs()).fold(x, |x, _| if ulps > 0 { next_up(x) } else { next_down(x) })
            }),
            1 => -1.0e6..1.0e7f64,
            1 => prop_oneof![Just(0.0), Just(-0.0), Just(1.0e16), Just(-3.0e15), Just(f64::MIN_POSITIVE)],
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// The index read from the window known is the one the division gives, whatever the
        /// order of the times.
        #[test]
        fn the_window_index_is_the_divisions(
            (window, times) in prop_oneof![Just(60.0), Just(10.0), Just(0.1), Just(0.3), Just(7.7), 1.0e-3..1.0e4f64]
                .prop_flat_map(|w| (Just(w), prop_oneof![Just(0i64), -5i64..5, 1i64..1_000_000])
                    .prop_flat_map(|(w, k0)| (Just(w), proptest::collection::vec(time(w, k0), 1..60)))),
            sorted in any::<bool>(),
        ) {
            let mut times = times;
            if sorted {
                times.sort_by(f64::total_cmp);
            }
            let mut at = WindowAt::default();
            for &t in &times {
                let want = crate::sim::py::floor(t / window);
                prop_assert_eq!(at.index(t, window).to_bits(), want.to_bits(), "t={} window={}", t, window);
            }
        }
    }

    #[test]
    fn the_first_time_of_a_window_is_found_to_the_float() {
        for window in [60.0, 0.1, 0.3, 1.0 / 3.0, 7.7, 1e-3] {
            for k in [-5.0, 0.0, 1.0, 2.0, 3.0, 10.0, 1234.0, 1e9] {
                let x = first_at_least(k, window).unwrap();
                assert!(x / window >= k && next_down(x) / window < k, "window {window} k {k}: {x}");
            }
        }
    }
}
