//! Count, then block: Cloudflare's mitigation timeout.

use super::{CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};

/// Counts with an inner limiter; the first request it refuses starts a block of `timeout`
/// during which every request is refused. Requests refused during a block neither count
/// nor extend it; when the block ends the inner limiter starts fresh.
///
/// ```text
/// 20 per 10 s (exact rolling count), then block 10 s:
/// t(s)   0.0 ×20   0.1   0.2   …   10.0   10.1 …
///        ✓ … ✓     ✗     ✗         ✓      ✓       (0.1: the 21st starts the block;
///                  ╰──── blocked 0.1 → 10.1 ────╯ wait, see below)
/// ```
/// The block runs from the refused request, `[t, t + timeout)`: a 21st request at 0.1 s
/// blocks until 10.1 s, and a request at 10.0 s is still refused (its `retry_after` says
/// 0.1 s). With a zero `timeout` this is the inner limiter unchanged.
///
/// With `timeout ≥ period` and an exact inner count ([`SlidingLog`](super::SlidingLog)),
/// no window of `period` ever holds more than `limit` admitted requests of one key.
///
/// # Examples
/// ```
/// use sluicegate::limit::{Blocking, Limiter, SlidingLog};
/// use sluicegate::{Decision, Instant, Span};
/// let mut rule = Blocking::new(SlidingLog::new(20, Span::from_secs(10)).unwrap(), Span::from_secs(10));
/// let t = Instant::from_secs(100);
/// for _ in 0..20 { assert!(rule.check(t, 1).unwrap().is_allowed()); }
/// assert_eq!(rule.check(t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(10) });
/// assert_eq!(rule.check(t + Span::from_secs(4), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(6) });
/// assert!(rule.check(t + Span::from_secs(10), 1).unwrap().is_allowed());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocking<L> {
    inner: L,
    timeout: Span,
    blocked_until: Option<Instant>,
}

impl<L: Limiter + Clone> Blocking<L> {
    /// Count with `inner`; block for `timeout` from the first refusal.
    pub fn new(inner: L, timeout: Span) -> Self {
        Blocking { inner, timeout, blocked_until: None }
    }

    /// The end of the block in force at `now`, if any.
    pub fn blocked_until(&self, now: Instant) -> Option<Instant> {
        self.blocked_until.filter(|until| *until > now)
    }

    /// Refuse everything until `until`, as a block begun elsewhere (e.g. one restored from
    /// storage after a restart). A block already in force that ends later is kept.
    pub fn impose_block(&mut self, until: Instant) {
        if self.blocked_until.is_none_or(|current| current < until) {
            self.blocked_until = Some(until);
        }
    }

    /// The end of the last block imposed, in force or not (a block that has ended is
    /// forgotten, and the inner limiter reset, at the next check).
    pub(crate) fn block_end(&self) -> Option<Instant> {
        self.blocked_until
    }

    /// This limiter with its block's end set to `until`, as [`block_end`](Self::block_end)
    /// reads it: a packed slot's state put back.
    pub(crate) fn with_block_end(mut self, until: Option<Instant>) -> Self {
        self.blocked_until = until;
        self
    }

    /// The inner limiter.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The mitigation timeout.
    pub fn timeout(&self) -> Span {
        self.timeout
    }
}

impl<L: super::SaveState> super::SaveState for Blocking<L> {
    /// The end of the block (0 for none), then the inner limiter's state.
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.push(self.blocked_until.map_or(0, Instant::as_nanos));
        self.inner.save(out);
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        let until = words.next()?;
        self.inner.restore(words)?;
        self.blocked_until = (until != 0).then(|| Instant::from_nanos(until));
        Some(())
    }
}

impl<L: Limiter + Clone> Limiter for Blocking<L> {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        match self.blocked_until {
            Some(until) if until > now => return Ok(Decision::Deny { retry_after: until - now }),
            Some(_) => {
                self.blocked_until = None;
                self.inner.reset();
            }
            None => {}
        }
        let decision = self.inner.check(now, cost)?;
        if !decision.is_allowed() && !self.timeout.is_zero() {
            self.blocked_until = Some(now + self.timeout);
            return Ok(Decision::Deny { retry_after: self.timeout });
        }
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let decision = match self.blocked_until {
            Some(until) if until > now => return Ok(Decision::Deny { retry_after: until - now }),
            Some(_) => {
                let mut fresh = self.inner.clone();
                fresh.reset();
                fresh.peek(now, cost)?
            }
            None => self.inner.peek(now, cost)?,
        };
        if !decision.is_allowed() && !self.timeout.is_zero() {
            return Ok(Decision::Deny { retry_after: self.timeout });
        }
        Ok(decision)
    }

    fn quota(&self) -> Quota {
        self.inner.quota()
    }

    fn full_at(&self) -> Instant {
        match self.blocked_until {
            // After the block the inner limiter is reset: nothing else to remember.
            Some(until) => until,
            None => self.inner.full_at(),
        }
    }

    fn reset(&mut self) {
        self.blocked_until = None;
        self.inner.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::{FixedWindow, SlidingLog};

    fn reference_rule() -> Blocking<SlidingLog> {
        Blocking::new(SlidingLog::new(20, Span::from_secs(10)).unwrap(), Span::from_secs(10))
    }

    #[test]
    fn blocked_requests_do_not_extend_the_block() {
        let mut rule = reference_rule();
        let t = Instant::from_secs(50);
        for _ in 0..20 {
            assert!(rule.check(t, 1).unwrap().is_allowed());
        }
        assert!(!rule.check(t + Span::from_millis(100), 1).unwrap().is_allowed());
        for ms in (200..10_100).step_by(100) {
            assert!(!rule.check(t + Span::from_millis(ms), 1).unwrap().is_allowed());
        }
        assert_eq!(rule.blocked_until(t), Some(t + Span::from_millis(10_100)));
        assert!(rule.check(t + Span::from_millis(10_100), 1).unwrap().is_allowed());
    }

    #[test]
    fn counting_starts_fresh_after_the_block() {
        let mut rule = Blocking::new(FixedWindow::new(2, Span::from_secs(60)).unwrap(), Span::from_secs(10));
        let t = Instant::from_secs(0);
        assert!(rule.check(t, 1).unwrap().is_allowed());
        assert!(rule.check(t, 1).unwrap().is_allowed());
        assert!(!rule.check(t, 1).unwrap().is_allowed());
        // Same 60 s window, but the block has ended: a fresh count.
        let after = t + Span::from_secs(10);
        assert_eq!(rule.check(after, 1).unwrap(), Decision::Allow { remaining: 1, reset: Span::from_secs(50) });
    }

    #[test]
    fn a_zero_timeout_is_the_inner_limiter_unchanged() {
        let mut rule = Blocking::new(FixedWindow::new(1, Span::from_secs(10)).unwrap(), Span::ZERO);
        assert!(rule.check(Instant::from_secs(1), 1).unwrap().is_allowed());
        assert_eq!(rule.check(Instant::from_secs(2), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(8) });
        assert!(rule.check(Instant::from_secs(10), 1).unwrap().is_allowed());
    }

    #[test]
    fn an_imposed_block_refuses_until_it_ends_then_counts_fresh() {
        let mut rule = reference_rule();
        let t = Instant::from_secs(3);
        rule.impose_block(t + Span::from_secs(6));
        rule.impose_block(t + Span::from_secs(2)); // an earlier end never shortens a block
        assert_eq!(rule.check(t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(6) });
        assert_eq!(
            rule.check(t + Span::from_secs(6), 1).unwrap(),
            Decision::Allow { remaining: 19, reset: Span::from_secs(10) }
        );
    }

    #[test]
    fn peek_agrees_with_check() {
        let mut rule = reference_rule();
        let t = Instant::from_secs(7);
        for i in 0..30u64 {
            let now = t + Span::from_millis(i * 450);
            let peeked = rule.peek(now, 1).unwrap();
            assert_eq!(rule.check(now, 1).unwrap(), peeked);
        }
    }
}
