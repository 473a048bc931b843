//! Limiters: one shape, several algorithms.
//!
//! Every limiter answers [`Limiter::check`] with a [`Decision`] for a request of some
//! cost at some `now`. An allowed request is charged; a denied one is not (a denial may
//! still change *when* the limiter will admit again: see [`Blocking`]). A request that can
//! never fit, because its cost exceeds the limiter's whole capacity, is an error
//! ([`CostTooHigh`]), not a denial: waiting would not help.
//!
//! | algorithm | type | admits at most |
//! |---|---|---|
//! | GCRA (token bucket) | [`Gcra`] | `burst + ⌊W/T⌋` in any window `W` |
//! | fixed window | [`FixedWindow`] | `limit` per aligned window (up to `2 × limit` across a boundary) |
//! | sliding log | [`SlidingLog`] | `limit` in any window of `period` (exact) |
//! | weighted rolling window | [`RollingWindow`] | `budget` in any window of `length` (exact; entries may be reserved ahead) |
//! | sliding-window counter | [`SlidingWindow`] | Cloudflare-style estimate: `prev × overlap + current ≤ limit` |
//! | count, then block | [`Blocking`] | its inner limiter's bound, then nothing for `timeout` |
//!
//! [`check_all`] checks several limits at once and charges none unless every one passes.

mod block;
mod fixed_window;
mod gcra;
mod rolling;
mod sliding_log;
mod sliding_window;
mod timeline;

pub use block::Blocking;
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use rolling::{RollingWindow, Window, WindowError, MAX_STRETCHES};
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;

use crate::core::time::{Instant, Span};
use core::fmt;

/// The answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted and charged.
    Allow {
        /// Units still available right after this request.
        remaining: u64,
        /// How long until the limiter is back at its full quota.
        reset: Span,
    },
    /// Refused; nothing was charged.
    Deny {
        /// How long until a request of the same cost can be admitted.
        retry_after: Span,
    },
}

impl Decision {
    /// Whether the request was admitted.
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }
}

/// What a limiter promises, for `RateLimit-Policy` headers: `limit` units per `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Units in one window (`q`).
    pub limit: u64,
    /// The window (`w`).
    pub window: Span,
}

/// A request whose cost exceeds the limiter's whole capacity: it can never be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostTooHigh {
    /// The cost asked for.
    pub cost: u32,
    /// The most one request may cost.
    pub capacity: u64,
}

impl fmt::Display for CostTooHigh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a request costing {} can never fit a capacity of {}", self.cost, self.capacity)
    }
}

/// One shape for every algorithm.
pub trait Limiter {
    /// Decide on a request of `cost` units at `now`. An allow charges `cost`; a deny
    /// charges nothing.
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds the whole capacity (never admissible).
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>;

    /// What [`check`](Limiter::check) would answer at `now`, changing nothing.
    ///
    /// # Errors
    /// As for `check`.
    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh>;

    /// The quota this limiter enforces, for headers.
    fn quota(&self) -> Quota;

    /// The instant from which this limiter is back at full quota with nothing to remember:
    /// its state may then be dropped and replaced by a fresh one.
    fn full_at(&self) -> Instant;

    /// Forget all history: the limiter becomes fresh.
    fn reset(&mut self);

    /// Whether the limiter holds nothing worth keeping at `now`.
    fn is_idle(&self, now: Instant) -> bool {
        self.full_at() <= now
    }
}

impl<L: Limiter + ?Sized> Limiter for &mut L {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        (**self).check(now, cost)
    }
    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        (**self).peek(now, cost)
    }
    fn quota(&self) -> Quota {
        (**self).quota()
    }
    fn full_at(&self) -> Instant {
        (**self).full_at()
    }
    fn reset(&mut self) {
        (**self).reset()
    }
}

/// Check one request against several limits at once: it is charged to all of them, or,
/// when any one refuses, to none.
///
/// An allow reports the smallest `remaining` and the longest `reset`; a deny the longest
/// `retry_after` among the limits that refused. A limit that refuses still records its own
/// refusal (a [`Blocking`] limit starts its block), which charges nothing.
///
/// # Errors
/// [`CostTooHigh`] from the first limit whose capacity is below `cost`; nothing is charged.
///
/// # Examples
/// ```
/// use sluicegate::limit::{check_all, FixedWindow, Limiter};
/// use sluicegate::{Instant, Span};
/// let mut per_sec = FixedWindow::new(2, Span::from_secs(1)).unwrap();
/// let mut per_min = FixedWindow::new(3, Span::from_secs(60)).unwrap();
/// let t = Instant::ZERO;
/// assert!(check_all(&mut [&mut per_sec, &mut per_min], t, 1).unwrap().is_allowed());
/// assert!(check_all(&mut [&mut per_sec, &mut per_min], t, 1).unwrap().is_allowed());
/// // per_sec refuses: per_min is not charged either.
/// assert!(!check_all(&mut [&mut per_sec, &mut per_min], t, 1).unwrap().is_allowed());
/// assert!(per_min.peek(t, 1).unwrap().is_allowed());
/// ```
pub fn check_all(limits: &mut [&mut dyn Limiter], now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
    let mut denied = false;
    for limit in limits.iter() {
        if !limit.peek(now, cost)?.is_allowed() {
            denied = true;
        }
    }
    let mut remaining = u64::MAX;
    let mut reset = Span::ZERO;
    let mut retry_after = Span::ZERO;
    for limit in limits.iter_mut() {
        if denied && limit.peek(now, cost)?.is_allowed() {
            continue;
        }
        match limit.check(now, cost)? {
            Decision::Allow { remaining: r, reset: t } => {
                remaining = remaining.min(r);
                reset = reset.max(t);
            }
            Decision::Deny { retry_after: t } => retry_after = retry_after.max(t),
        }
    }
    Ok(if denied { Decision::Deny { retry_after } } else { Decision::Allow { remaining, reset } })
}

/// A configuration value that no limiter can be built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A limit or burst of zero admits nothing.
    ZeroLimit,
    /// A window or interval of zero length.
    ZeroPeriod,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::ZeroLimit => "the limit must be at least 1",
            ConfigError::ZeroPeriod => "the period must be longer than zero",
        })
    }
}

/// The checks every windowed limiter makes of its configuration.
pub(crate) fn validate(limit: u64, period: Span) -> Result<(), ConfigError> {
    if limit == 0 {
        return Err(ConfigError::ZeroLimit);
    }
    if period.is_zero() {
        return Err(ConfigError::ZeroPeriod);
    }
    Ok(())
}

/// A limiter's counting state as plain words, so that a process that restarts (a Durable
/// Object evicted while idle) goes on counting exactly where it left off. The quota is not
/// part of it: it comes from the configuration.
pub trait SaveState {
    /// Append the state to `out`.
    fn save(&self, out: &mut alloc::vec::Vec<u64>);
    /// Take back a state that [`SaveState::save`] wrote; `None` (and nothing changed) when
    /// the words do not describe this kind of limiter.
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()>;
}
