//! The sliding-window counter: two fixed windows and a weighted estimate (Cloudflare's).

use super::{validate, ConfigError, CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};

/// Estimates the rolling count from the previous aligned window's count, weighted by how
/// much of it still overlaps the rolling window, plus the current window's count:
/// `estimate = previous × (period − elapsed) / period + current`. A request is admitted
/// while `estimate + cost ≤ limit`.
///
/// ```text
/// limit 10, period 60 s; previous window counted 8, current 3, 15 s into it:
/// estimate = 8 × 45/60 + 3 = 9   → one more fits, the second waits
/// ```
///
/// Two counters per key, whatever the limit; the estimate assumes the previous window's
/// requests were spread evenly, so bursts at a boundary can pass a little over `limit` in
/// a rolling window. Use [`SlidingLog`](super::SlidingLog) for an exact count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    limit: u64,
    period: u64,
    start: Instant,
    previous: u64,
    current: u64,
}

impl SlidingWindow {
    /// An estimated `limit` units per rolling `period`.
    ///
    /// # Errors
    /// [`ConfigError`] for a zero limit or period.
    pub fn new(limit: u64, period: Span) -> Result<Self, ConfigError> {
        validate(limit, period)?;
        Ok(SlidingWindow { limit, period: period.as_nanos(), start: Instant::ZERO, previous: 0, current: 0 })
    }

    /// The window start, previous and current counts in force at `now`. A clock that steps
    /// back into an earlier window stays in the latest one seen (never a fresh count).
    fn roll(&self, now: Instant) -> (Instant, u64, u64) {
        let start = Instant::from_nanos(now.as_nanos() - now.as_nanos() % self.period);
        if start <= self.start {
            (self.start, self.previous, self.current)
        } else if start == self.start + Span::from_nanos(self.period) {
            (start, self.current, 0)
        } else {
            (start, 0, 0)
        }
    }

    fn evaluate(&self, now: Instant, cost: u32) -> Result<(Decision, (Instant, u64, u64)), CostTooHigh> {
        let cost64 = u64::from(cost);
        if cost64 > self.limit {
            return Err(CostTooHigh { cost, capacity: self.limit });
        }
        let (start, previous, current) = self.roll(now);
        let p = u128::from(self.period);
        let elapsed = u128::from((now - start).as_nanos());
        let weighted_previous = u128::from(previous) * (p - elapsed);
        let budget = u128::from(self.limit) * p;
        let wanted = weighted_previous + u128::from(current + cost64) * p;
        if wanted <= budget {
            let current = current + cost64;
            let remaining = ((budget - wanted) / p) as u64;
            let period = Span::from_nanos(self.period);
            let reset = if current > 0 {
                (start + period + period) - now
            } else if previous > 0 {
                (start + period) - now
            } else {
                Span::ZERO
            };
            return Ok((Decision::Allow { remaining, reset }, (start, previous, current)));
        }
        let retry_after = if current + cost64 <= self.limit {
            // Only the previous window's weight is in the way: wait for it to fade.
            let room = u128::from(self.limit - current - cost64) * p;
            let fits_at = p - room / u128::from(previous);
            Span::from_nanos((fits_at - elapsed) as u64)
        } else {
            // Wait for the next window, where the current count becomes the previous one.
            let room = u128::from(self.limit - cost64) * p;
            let fits_at = p - room / u128::from(current);
            Span::from_nanos((p - elapsed + fits_at) as u64)
        };
        Ok((Decision::Deny { retry_after }, (self.start, self.previous, self.current)))
    }
}

impl super::SaveState for SlidingWindow {
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.extend([self.start.as_nanos(), self.previous, self.current]);
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        let (start, previous, current) = (words.next()?, words.next()?, words.next()?);
        (self.start, self.previous, self.current) = (Instant::from_nanos(start), previous, current);
        Some(())
    }
}

impl Limiter for SlidingWindow {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, (start, previous, current)) = self.evaluate(now, cost)?;
        self.start = start;
        self.previous = previous;
        self.current = current;
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.evaluate(now, cost).map(|(d, _)| d)
    }

    fn quota(&self) -> Quota {
        Quota { limit: self.limit, window: Span::from_nanos(self.period) }
    }

    fn full_at(&self) -> Instant {
        let period = Span::from_nanos(self.period);
        if self.current > 0 {
            self.start + period + period
        } else if self.previous > 0 {
            self.start + period
        } else {
            Instant::ZERO
        }
    }

    fn reset(&mut self) {
        self.start = Instant::ZERO;
        self.previous = 0;
        self.current = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_window_counts_by_its_overlap() {
        let mut w = SlidingWindow::new(10, Span::from_secs(60)).unwrap();
        for _ in 0..8 {
            assert!(w.check(Instant::from_secs(30), 1).unwrap().is_allowed());
        }
        for _ in 0..3 {
            assert!(w.check(Instant::from_secs(70), 1).unwrap().is_allowed());
        }
        // 75 s: 8 × 45/60 + 3 = 9
        assert_eq!(
            w.check(Instant::from_secs(75), 1).unwrap(),
            Decision::Allow { remaining: 0, reset: Span::from_secs(105) }
        );
        // 8 × 45/60 + 4 + 1 = 11 > 10: wait until 8 × (60−e)/60 ≤ 5, e ≥ 22.5 s
        assert_eq!(
            w.check(Instant::from_secs(75), 1).unwrap(),
            Decision::Deny { retry_after: Span::from_millis(7_500) }
        );
        assert!(w.check(Instant::from_millis(82_500), 1).unwrap().is_allowed());
    }

    #[test]
    fn a_clock_stepping_back_does_not_forget_the_count() {
        let mut w = SlidingWindow::new(2, Span::from_secs(10)).unwrap();
        assert!(w.check(Instant::from_secs(15), 2).unwrap().is_allowed());
        assert!(!w.check(Instant::from_secs(9), 1).unwrap().is_allowed());
        assert!(!w.check(Instant::from_secs(15), 1).unwrap().is_allowed());
    }

    #[test]
    fn a_full_current_window_waits_into_the_next_one() {
        let mut w = SlidingWindow::new(4, Span::from_secs(10)).unwrap();
        for _ in 0..4 {
            assert!(w.check(Instant::from_secs(2), 1).unwrap().is_allowed());
        }
        // next window from 10 s: 4 × (10−e)/10 + 1 ≤ 4 → e ≥ 2.5 s → 12.5 s
        let Decision::Deny { retry_after } = w.check(Instant::from_secs(5), 1).unwrap() else { panic!() };
        assert_eq!(retry_after, Span::from_millis(7_500));
        assert!(!w.check(Instant::from_millis(12_499), 1).unwrap().is_allowed());
        assert!(w.check(Instant::from_millis(12_500), 1).unwrap().is_allowed());
    }
}
