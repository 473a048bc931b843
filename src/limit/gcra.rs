//! GCRA, the generic cell rate algorithm: a token bucket kept as one number.

use super::{ConfigError, CostTooHigh, Decision, Limiter, Quota};
use crate::time::{Instant, Span};

/// A token bucket of `burst` tokens refilled one every `T` (the emission interval), kept
/// as one theoretical arrival time (TAT).
///
/// A request of cost `c` is admitted when, after it, the bucket would not be more than
/// `burst × T` in debt: `max(TAT, now) + c·T − now ≤ burst·T`. The tolerance
/// `τ = (burst − 1)·T` is what lets `burst` requests through back to back; it is not the
/// capacity (`burst·T`), and confusing the two lets one extra request through after a long
/// idle.
///
/// ```text
/// burst 3, T = 1 s, one request per mark:
/// t(s)   0   0   0   0   1   2   2
///        ✓   ✓   ✓   ✗   ✓   ✓   ✗     (the 4th waits 1 s; idle refills one per second)
/// ```
///
/// In any window of length `W` it admits at most `burst + ⌊W/T⌋` units.
///
/// # Examples
/// ```
/// use sluicegate::limit::{Gcra, Limiter};
/// use sluicegate::{Decision, Instant, Span};
/// // 12 per minute, burst 6
/// let mut bucket = Gcra::new(6, Span::from_secs(60), 12).unwrap();
/// let t = Instant::ZERO;
/// for _ in 0..6 { assert!(bucket.check(t, 1).unwrap().is_allowed()); }
/// assert_eq!(bucket.check(t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(5) });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    tat: Instant,
    interval: u64,
    /// `burst × interval`, saturating: kept so that a check multiplies at most once (wasm32
    /// has no 64-bit multiply with overflow check; it calls a 128-bit one).
    capacity: u64,
    burst: u32,
}

impl Gcra {
    /// A bucket of `burst` that refills `count` units every `period` (`T = period / count`,
    /// rounded up to whole nanoseconds so the rate is never exceeded, and at least 1 ns).
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`] for a zero burst or count, [`ConfigError::ZeroPeriod`] for
    /// a zero period.
    pub fn new(burst: u32, period: Span, count: u32) -> Result<Self, ConfigError> {
        if burst == 0 || count == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        if period.is_zero() {
            return Err(ConfigError::ZeroPeriod);
        }
        Ok(Self::with_interval(burst, Span::from_nanos(period.as_nanos().div_ceil(u64::from(count)))))
    }

    /// A bucket of `burst` that refills one unit every `interval` (clamped to ≥ 1 ns).
    ///
    /// # Panics
    /// Never; a zero `burst` is raised to 1. Prefer [`Gcra::new`] for validated input.
    pub fn with_interval(burst: u32, interval: Span) -> Self {
        let (interval, burst) = (interval.as_nanos().max(1), burst.max(1));
        Gcra { tat: Instant::ZERO, interval, capacity: interval.saturating_mul(u64::from(burst)), burst }
    }

    /// Check one request of `cost` against a bucket of this quota whose state is `tat`
    /// alone (the TAT is updated on an admit; a denial changes nothing).
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds the burst.
    pub fn check_tat(&self, tat: &mut Instant, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, next) = self.evaluate_from(*tat, now, cost)?;
        *tat = next;
        Ok(decision)
    }

    /// The emission interval of `per_second` requests per second, rounded up to whole
    /// nanoseconds so the rate is never exceeded; `None` outside one per `slowest` to 1e9
    /// per second (a longer interval would overflow the bucket's arithmetic).
    ///
    /// # Examples
    /// ```
    /// use sluicegate::limit::Gcra;
    /// use sluicegate::Span;
    /// let year = Span::from_secs(366 * 86_400);
    /// assert_eq!(Gcra::interval_of_rate(0.5, year), Some(Span::from_secs(2)));
    /// assert_eq!(Gcra::interval_of_rate(3.0, year), Some(Span::from_nanos(333_333_334)));
    /// assert_eq!(Gcra::interval_of_rate(1e-10, year), None);
    /// ```
    pub fn interval_of_rate(per_second: f64, slowest: Span) -> Option<Span> {
        let fastest = 1e9;
        if !(per_second.is_finite() && per_second > 0.0 && per_second <= fastest) {
            return None;
        }
        // No `f64::ceil` without std: round up by hand.
        let nanos = 1e9 / per_second;
        let truncated = nanos as u64;
        let interval = Span::from_nanos(if (truncated as f64) < nanos { truncated + 1 } else { truncated }.max(1));
        (interval <= slowest).then_some(interval)
    }

    /// The emission interval `T`.
    pub fn interval(&self) -> Span {
        Span::from_nanos(self.interval)
    }

    /// The burst: the most units admitted back to back.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn evaluate(&self, now: Instant, cost: u32) -> Result<(Decision, Instant), CostTooHigh> {
        self.evaluate_from(self.tat, now, cost)
    }

    /// This bucket's decision for a bucket whose theoretical arrival time is `tat`: the
    /// decision and the TAT to keep. Lets a table of many buckets of one quota keep 8 bytes
    /// per bucket ([`Gcra::check_tat`]).
    fn evaluate_from(&self, tat: Instant, now: Instant, cost: u32) -> Result<(Decision, Instant), CostTooHigh> {
        if cost > self.burst {
            return Err(CostTooHigh { cost, capacity: u64::from(self.burst) });
        }
        let start = tat.max(now);
        // cost ≤ burst, so the charge is at most the capacity: it cannot overflow unless that saturated.
        let charge = if self.capacity < u64::MAX {
            self.interval * u64::from(cost)
        } else {
            self.interval.saturating_mul(u64::from(cost))
        };
        let new_tat = start + Span::from_nanos(charge);
        let debt = (new_tat - now).as_nanos();
        let capacity = self.capacity();
        if debt > capacity {
            return Ok((Decision::Deny { retry_after: Span::from_nanos(debt - capacity) }, tat));
        }
        let remaining = (capacity - debt) / self.interval;
        Ok((Decision::Allow { remaining, reset: new_tat - now }, new_tat))
    }
}

impl super::SaveState for Gcra {
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.push(self.tat.as_nanos());
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        self.tat = Instant::from_nanos(words.next()?);
        Some(())
    }
}

impl Limiter for Gcra {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, tat) = self.evaluate(now, cost)?;
        self.tat = tat;
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.evaluate(now, cost).map(|(d, _)| d)
    }

    fn quota(&self) -> Quota {
        Quota { limit: u64::from(self.burst), window: Span::from_nanos(self.capacity()) }
    }

    fn full_at(&self) -> Instant {
        self.tat
    }

    fn reset(&mut self) {
        self.tat = Instant::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn does_not_allow_one_extra_request_after_a_long_idle() {
        let mut g = Gcra::new(3, Span::from_secs(3), 3).unwrap();
        let t = Instant::from_secs(1_000);
        for _ in 0..3 {
            assert!(g.check(t, 1).unwrap().is_allowed());
        }
        assert!(!g.check(t, 1).unwrap().is_allowed());
    }

    #[test]
    fn a_denial_charges_nothing_and_says_exactly_when_to_return() {
        let mut g = Gcra::new(1, Span::from_secs(1), 1).unwrap();
        let t = Instant::from_secs(5);
        assert!(g.check(t, 1).unwrap().is_allowed());
        let before = g;
        let Decision::Deny { retry_after } = g.check(t + Span::from_millis(300), 1).unwrap() else {
            panic!("second request in the same second must be refused")
        };
        assert_eq!(g, before);
        assert_eq!(retry_after, Span::from_millis(700));
        assert!(g.check(t + Span::from_millis(300) + retry_after, 1).unwrap().is_allowed());
    }

    #[test]
    fn remaining_and_reset_describe_the_bucket_after_the_request() {
        let mut g = Gcra::new(5, Span::from_secs(5), 5).unwrap();
        assert_eq!(
            g.check(Instant::from_secs(10), 2).unwrap(),
            Decision::Allow { remaining: 3, reset: Span::from_secs(2) }
        );
    }

    #[test]
    fn a_cost_above_the_burst_is_an_error_not_a_denial() {
        let mut g = Gcra::new(4, Span::from_secs(1), 4).unwrap();
        assert_eq!(g.check(Instant::ZERO, 5), Err(CostTooHigh { cost: 5, capacity: 4 }));
    }

    #[test]
    fn extreme_rates_never_truncate_the_interval_to_zero() {
        let g = Gcra::new(1, Span::from_nanos(1), u32::MAX).unwrap();
        assert_eq!(g.interval(), Span::from_nanos(1));
        assert_eq!(Gcra::new(0, Span::from_secs(1), 1), Err(ConfigError::ZeroLimit));
        assert_eq!(Gcra::new(1, Span::ZERO, 1), Err(ConfigError::ZeroPeriod));
    }
}
