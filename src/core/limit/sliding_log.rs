//! The exact rolling count: a log of admitted requests.
//!
//! The same bound as a [`RollingWindow`](super::RollingWindow) of budget `limit`, kept as a
//! plain log on purpose: its state is saved and restored entry by entry ([`SaveState`](super::SaveState),
//! a Durable Object's words), which the window's timeline cannot give back (it nets an entry
//! leaving against one starting at the same instant); it lives once per key in keyed
//! tables, where an entry costs 16 bytes here against two treap nodes (about 100 bytes)
//! there; and a decision scans at most `limit` entries.

use super::{validate, ConfigError, CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};
use alloc::collections::VecDeque;

/// At most `limit` units in any window of length `period`, counted exactly from a log of
/// the admitted requests (at most `limit` entries are ever kept).
///
/// A request at `now` sees the entries of `(now − period, now]`; an entry admitted at `a`
/// stops counting at `a + period`.
///
/// ```text
/// limit 3, period 10 s:
/// t(s)  0 4 5 9 | 10 13 14 15
///       ✓ ✓ ✓ ✗ |  ✓  ✗  ✓  ✓    (10 s: the entry of 0 s has left; 14 s: the one of 4 s)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    period: Span,
    log: VecDeque<(Instant, u32)>,
}

impl SlidingLog {
    /// `limit` units in any window of `period`.
    ///
    /// # Errors
    /// [`ConfigError`] for a zero limit or period.
    pub fn new(limit: u64, period: Span) -> Result<Self, ConfigError> {
        validate(limit, period)?;
        Ok(SlidingLog { limit, period, log: VecDeque::new() })
    }

    fn live(&self, now: Instant) -> impl Iterator<Item = &(Instant, u32)> + Clone {
        let period = self.period;
        self.log.iter().filter(move |(at, _)| *at + period > now)
    }

    fn evaluate(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        if u64::from(cost) > self.limit {
            return Err(CostTooHigh { cost, capacity: self.limit });
        }
        let live = self.live(now);
        let used: u64 = live.clone().map(|(_, c)| u64::from(*c)).sum();
        if used + u64::from(cost) <= self.limit {
            let newest = if cost > 0 { Some(now) } else { live.clone().last().map(|(at, _)| *at) };
            let reset = newest.map_or(Span::ZERO, |at| (at + self.period) - now);
            return Ok(Decision::Allow { remaining: self.limit - used - u64::from(cost), reset });
        }
        // Wait until enough of the oldest entries have left the window.
        let mut still_used = used;
        for (at, c) in live {
            still_used -= u64::from(*c);
            if still_used + u64::from(cost) <= self.limit {
                return Ok(Decision::Deny { retry_after: (*at + self.period) - now });
            }
        }
        // Unreachable with cost ≤ limit, but never claim "now" for a full log.
        Ok(Decision::Deny { retry_after: self.period })
    }
}

impl super::SaveState for SlidingLog {
    /// The number of entries, then each entry's instant and cost.
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.push(self.log.len() as u64);
        for (at, cost) in &self.log {
            out.extend([at.as_nanos(), u64::from(*cost)]);
        }
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        let n = usize::try_from(words.next()?).ok().filter(|n| *n as u64 <= self.limit)?;
        let mut log = VecDeque::with_capacity(n);
        for _ in 0..n {
            let (at, cost) = (words.next()?, u32::try_from(words.next()?).ok()?);
            log.push_back((Instant::from_nanos(at), cost));
        }
        self.log = log;
        Some(())
    }
}

impl Limiter for SlidingLog {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        while let Some((at, _)) = self.log.front() {
            if *at + self.period > now {
                break;
            }
            self.log.pop_front();
        }
        let decision = self.evaluate(now, cost)?;
        if decision.is_allowed() && cost > 0 {
            // Keep the log ordered even if the caller's clock steps back.
            let at = self.log.back().map_or(now, |(last, _)| now.max(*last));
            self.log.push_back((at, cost));
        }
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.evaluate(now, cost)
    }

    fn quota(&self) -> Quota {
        Quota { limit: self.limit, window: self.period }
    }

    fn full_at(&self) -> Instant {
        self.log.back().map_or(Instant::ZERO, |(at, _)| *at + self.period)
    }

    fn reset(&mut self) {
        self.log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entry_leaving_the_window_makes_room() {
        let mut log = SlidingLog::new(3, Span::from_secs(10)).unwrap();
        for s in [0, 4, 5] {
            assert!(log.check(Instant::from_secs(s), 1).unwrap().is_allowed());
        }
        assert_eq!(log.check(Instant::from_secs(9), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(1) });
        assert!(log.check(Instant::from_secs(10), 1).unwrap().is_allowed());
        assert_eq!(log.check(Instant::from_secs(13), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(1) });
        assert_eq!(
            log.check(Instant::from_secs(14), 1).unwrap(),
            Decision::Allow { remaining: 0, reset: Span::from_secs(10) }
        );
    }

    #[test]
    fn a_heavy_request_waits_for_enough_entries_to_leave() {
        let mut log = SlidingLog::new(4, Span::from_secs(10)).unwrap();
        for s in [0, 1, 2, 3] {
            assert!(log.check(Instant::from_secs(s), 1).unwrap().is_allowed());
        }
        assert_eq!(log.check(Instant::from_secs(5), 3).unwrap(), Decision::Deny { retry_after: Span::from_secs(7) });
    }

    #[test]
    fn the_log_never_holds_more_entries_than_the_limit() {
        let mut log = SlidingLog::new(5, Span::from_secs(1)).unwrap();
        for ms in 0..10_000 {
            let _ = log.check(Instant::from_millis(ms), 1);
            assert!(log.log.len() <= 5);
        }
    }
}
