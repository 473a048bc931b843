//! Fixed, clock-aligned windows.

use super::{validate, ConfigError, CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};

/// At most `limit` units per window; windows are aligned to multiples of `period` since the
/// epoch (a minute window starts on the minute), and each starts empty.
///
/// ```text
/// limit 3, period 10 s:
/// t(s)  0 1 2 9 | 10 11 12 13
///       ✓ ✓ ✓ ✗ |  ✓  ✓  ✓  ✗     (the 4th in 0–10 s waits until 10 s)
/// ```
///
/// Across a boundary up to `2 × limit` can pass within one period (3 at 9.9 s, 3 at 10 s);
/// use [`SlidingLog`](super::SlidingLog) where that matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    period: u64,
    start: Instant,
    count: u64,
}

impl FixedWindow {
    /// `limit` units per `period`.
    ///
    /// # Errors
    /// [`ConfigError`] for a zero limit or period.
    pub fn new(limit: u64, period: Span) -> Result<Self, ConfigError> {
        validate(limit, period)?;
        Ok(FixedWindow { limit, period: period.as_nanos(), start: Instant::ZERO, count: 0 })
    }

    fn window_of(&self, now: Instant) -> Instant {
        Instant::from_nanos(now.as_nanos() - now.as_nanos() % self.period)
    }

    /// The count in force at `now` and the start of its window. A clock that steps back
    /// into an earlier window stays in the latest one seen (never a fresh count).
    fn current(&self, now: Instant) -> (Instant, u64) {
        let start = self.window_of(now);
        if start <= self.start {
            (self.start, self.count)
        } else {
            (start, 0)
        }
    }

    fn evaluate(&self, now: Instant, cost: u32) -> Result<(Decision, Instant, u64), CostTooHigh> {
        if u64::from(cost) > self.limit {
            return Err(CostTooHigh { cost, capacity: self.limit });
        }
        let (start, count) = self.current(now);
        let end = start + Span::from_nanos(self.period);
        if count + u64::from(cost) > self.limit {
            return Ok((Decision::Deny { retry_after: end - now }, self.start, self.count));
        }
        let count = count + u64::from(cost);
        let reset = if count == 0 { Span::ZERO } else { end - now };
        Ok((Decision::Allow { remaining: self.limit - count, reset }, start, count))
    }
}

impl super::SaveState for FixedWindow {
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.extend([self.start.as_nanos(), self.count]);
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        let (start, count) = (words.next()?, words.next()?);
        (self.start, self.count) = (Instant::from_nanos(start), count);
        Some(())
    }
}

impl Limiter for FixedWindow {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, start, count) = self.evaluate(now, cost)?;
        self.start = start;
        self.count = count;
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.evaluate(now, cost).map(|(d, _, _)| d)
    }

    fn quota(&self) -> Quota {
        Quota { limit: self.limit, window: Span::from_nanos(self.period) }
    }

    fn full_at(&self) -> Instant {
        if self.count == 0 {
            Instant::ZERO
        } else {
            self.start + Span::from_nanos(self.period)
        }
    }

    fn reset(&mut self) {
        self.start = Instant::ZERO;
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_clock_aligned_and_start_empty() {
        let mut w = FixedWindow::new(2, Span::from_secs(10)).unwrap();
        let t = Instant::from_secs(19);
        assert!(w.check(t, 2).unwrap().is_allowed());
        assert_eq!(w.check(t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(1) });
        assert_eq!(
            w.check(Instant::from_secs(20), 1).unwrap(),
            Decision::Allow { remaining: 1, reset: Span::from_secs(10) }
        );
    }

    #[test]
    fn a_clock_stepping_back_does_not_forget_the_count() {
        let mut w = FixedWindow::new(1, Span::from_secs(10)).unwrap();
        assert!(w.check(Instant::from_secs(15), 1).unwrap().is_allowed());
        assert_eq!(w.check(Instant::from_secs(9), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(11) });
        assert!(!w.check(Instant::from_secs(15), 1).unwrap().is_allowed());
    }

    #[test]
    fn a_window_does_not_wrap_around_to_a_stale_count() {
        let mut w = FixedWindow::new(1, Span::from_secs(10)).unwrap();
        assert!(w.check(Instant::from_secs(5), 1).unwrap().is_allowed());
        // 100 windows later the old count must not be in force.
        assert!(w.check(Instant::from_secs(1_005), 1).unwrap().is_allowed());
    }
}
