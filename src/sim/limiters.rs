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
    },
}

impl ReferenceLimiter {
    /// A token bucket refilling `rate` per second up to `burst`.
    pub fn token_bucket(rate: f64, burst: f64) -> Self {
        ReferenceLimiter::TokenBucket { rate, burst, state: Vec::new() }
    }
    /// A fixed window of `limit` per `window` seconds.
    pub fn fixed_window(limit: f64, window: f64) -> Self {
        ReferenceLimiter::FixedWindow { limit, window, state: Vec::new() }
    }
    /// A sliding log of `limit` per `window` seconds.
    pub fn sliding_log(limit: f64, window: f64) -> Self {
        ReferenceLimiter::SlidingLog { limit, window, state: Vec::new() }
    }
    /// A sliding counter of `limit` per `window` seconds.
    pub fn sliding_counter(limit: f64, window: f64) -> Self {
        ReferenceLimiter::SlidingCounter { limit, window, state: Vec::new() }
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
                let s = &mut state[key];
                let (tokens, last) = if s.0.is_nan() { (*burst, t) } else { *s };
                let tokens = burst.min(tokens + (t - last) * *rate);
                *s = (tokens, t);
                if tokens + 1e-9 >= cost {
                    Check::ALLOW
                } else {
                    Check::deny((cost - tokens) / *rate)
                }
            }
            ReferenceLimiter::FixedWindow { limit, window, state } => {
                let w = super::py::floor(t / *window);
                let s = &mut state[key];
                // a NaN index never equals `w`
                let count = if s.0 == w { s.1 } else { 0.0 };
                *s = (w, count);
                if count + cost <= *limit + 1e-9 {
                    Check::ALLOW
                } else {
                    Check::deny((w + 1.0) * *window - t)
                }
            }
            ReferenceLimiter::SlidingLog { limit, window, state } => {
                let log = &mut state[key];
                while log.front().is_some_and(|&first| first <= t - *window) {
                    log.pop_front();
                }
                let used = log.len() as f64;
                if used + cost <= *limit + 1e-9 {
                    return Check::ALLOW;
                }
                let wait = if log.is_empty() {
                    *window
                } else {
                    // the entries that must expire before this request fits
                    let need = (used + cost - *limit).trunc();
                    let idx = (need - 1.0).max(0.0).min(used - 1.0) as usize;
                    log[idx] + *window - t
                };
                Check::deny(wait.max(0.001))
            }
            ReferenceLimiter::SlidingCounter { limit, window, state } => {
                let (lim, w) = (*limit, *window);
                let idx = super::py::floor(t / w);
                let s = &mut state[key];
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
        }
    }

    /// Charges an admitted request (call only after [`ReferenceLimiter::check`] for the same key).
    #[inline]
    pub fn consume(&mut self, key: usize, t: f64, cost: f64) {
        match self {
            ReferenceLimiter::TokenBucket { state, .. } => state[key] = (state[key].0 - cost, t),
            ReferenceLimiter::FixedWindow { state, .. } => state[key].1 += cost,
            ReferenceLimiter::SlidingLog { state, .. } => {
                // Python: `for _ in range(int(round(cost)))`
                let n = if cost == 1.0 { 1.0 } else { cost.round_ties_even() };
                if n >= 1.0 {
                    state[key].extend(std::iter::repeat_n(t, n as usize));
                }
            }
            ReferenceLimiter::SlidingCounter { state, .. } => state[key].2 += cost,
        }
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
