//! The weighted rolling window: at most `budget` weight in any window of `length`, and the
//! earliest instant at which a weight fits, each question O(log n) in the entries held.
//!
//! An entry of weight `w` at `s` counts in the window up to `x` when `s ∈ (x − length, x]`:
//! it is `+w` at `s` and `−w` at `s + length` on a timeline of changes (a treap keeping every
//! subtree's sum and its highest and lowest running total), so the weight in the window up
//! to `x` is the sum of the changes at instants `≤ x`. Entries may be inserted at any instant,
//! future ones included (a reservation), and taken back ([`RollingWindow::remove`]).
//!
//! ```text
//! budget 10, length 10 s; entries 6 at 0 s and 6 at 10 s (a reservation):
//! t(s)      0         10        20
//! weight    [   6    )[   6    )
//! eta(3 s, 4) = 3 s: 6 + 4 ≤ 10 over [3 s, 13 s)
//! eta(3 s, 5) = 20 s: over [3 s, 13 s) 6 + 5 > 10, and every start before 20 s meets a 6
//! ```
//!
//! The browser client's pacer keeps one per window of its budget, the edge's egress gate one
//! for a provider's rolling minute; as a [`Limiter`] it admits requests at `now`.

use super::timeline::Timeline;
use super::{CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};
use core::fmt;

/// How many over-budget stretches [`RollingWindow::eta`] steps over at most before it places
/// the weight after the window's last rise (where the weight in the window only falls): a
/// fit exact up to this many stretches, and never one that overspends.
pub const MAX_STRETCHES: usize = 32;

/// One rolling window's bound: at most `budget` weight in any `length`, in the caller's unit
/// of weight (the browser client's pacer counts thousandths of a weighted call, and
/// [`free_tier_windows`](crate::core::openmeteo::free_tier_windows) gives Open-Meteo's in
/// that unit). A [`RollingWindow`] enforces one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The window length.
    pub length: Span,
    /// The most weight in any `length`.
    pub budget: u64,
}

/// A window or a weight that a [`RollingWindow`] cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// A window of zero length holds nothing.
    ZeroLength,
    /// A budget of 0 admits nothing.
    ZeroBudget,
    /// A budget above [`RollingWindow::MAX_BUDGET`].
    BudgetTooLarge {
        /// The budget asked for.
        budget: u64,
    },
    /// A weight above the whole budget: it could never fit, whatever the wait.
    TooHeavy {
        /// The weight asked for.
        weight: u64,
        /// The window's budget.
        budget: u64,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WindowError::ZeroLength => f.write_str("a rolling window must be longer than zero"),
            WindowError::ZeroBudget => f.write_str("a rolling window's budget must be at least 1"),
            WindowError::BudgetTooLarge { budget } => write!(
                f,
                "a rolling window's budget of {budget} is above the most it can count, {}",
                RollingWindow::MAX_BUDGET
            ),
            WindowError::TooHeavy { weight, budget } => {
                write!(f, "a weight of {weight} can never fit a rolling window whose whole budget is {budget}")
            }
        }
    }
}

/// At most `budget` weight started in any window of `length`: the weights inserted, the
/// weight in the window up to an instant ([`RollingWindow::used`]), and the earliest
/// instant at which a weight fits ([`RollingWindow::eta`]), each O(log n) expected.
///
/// Inserting does not check the budget: the caller asks [`RollingWindow::eta`] first (or
/// uses [`Limiter::check`], which does both). Memory grows with the entries until
/// [`RollingWindow::prune`] (which [`Limiter::check`] calls) folds away those that left the
/// window.
///
/// # Examples
/// ```
/// use sluicegate::limit::RollingWindow;
/// use sluicegate::{Instant, Span};
/// let mut w = RollingWindow::new(Span::from_secs(10), 10).unwrap();
/// let t = Instant::ZERO;
/// w.insert(t, 6);
/// assert_eq!(w.used(t), 6);
/// assert_eq!(w.eta(t, 4).unwrap(), t); // 6 + 4 fits now
/// assert_eq!(w.eta(t, 5).unwrap(), t + Span::from_secs(10)); // once the 6 has left
/// assert!(w.eta(t, 11).is_err()); // never
/// ```
#[derive(Clone, Debug)]
pub struct RollingWindow {
    length: Span,
    budget: u64,
    timeline: Timeline,
}

impl RollingWindow {
    /// The largest budget a window counts (the timeline's sums are signed 64-bit).
    pub const MAX_BUDGET: u64 = i64::MAX as u64;

    /// At most `budget` weight in any window of `length`.
    ///
    /// # Errors
    /// [`WindowError::ZeroLength`], [`WindowError::ZeroBudget`] or
    /// [`WindowError::BudgetTooLarge`].
    pub fn new(length: Span, budget: u64) -> Result<Self, WindowError> {
        if length.is_zero() {
            return Err(WindowError::ZeroLength);
        }
        if budget == 0 {
            return Err(WindowError::ZeroBudget);
        }
        if budget > Self::MAX_BUDGET {
            return Err(WindowError::BudgetTooLarge { budget });
        }
        Ok(RollingWindow { length, budget, timeline: Timeline::new() })
    }

    /// The window's length.
    pub fn length(&self) -> Span {
        self.length
    }

    /// The most weight any window of [`RollingWindow::length`] may hold.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Count `weight` at `at`: in every window up to an instant of `[at, at + length)`.
    pub fn insert(&mut self, at: Instant, weight: u64) {
        self.shift(at, signed(weight));
    }

    /// Take back a `weight` inserted at `at` (a refund).
    pub fn remove(&mut self, at: Instant, weight: u64) {
        self.shift(at, -signed(weight));
    }

    fn shift(&mut self, at: Instant, delta: i64) {
        self.timeline.add(at.as_nanos(), delta);
        self.timeline.add((at + self.length).as_nanos(), -delta);
    }

    /// The weight inserted at instants of `(now − length, now]`.
    pub fn used(&self, now: Instant) -> u64 {
        u64::try_from(self.timeline.load_at(now.as_nanos())).unwrap_or(0)
    }

    /// The earliest instant `t ≥ from` at which `weight` fits: no window up to an instant of
    /// `[t, t + length)` would hold more than the budget with it. Exact up to
    /// [`MAX_STRETCHES`] over-budget stretches between `from` and the answer; past them, the
    /// first instant after the last entry's start at which it fits (never one that overspends).
    ///
    /// # Errors
    /// [`WindowError::TooHeavy`] for a weight above the budget.
    pub fn eta(&self, from: Instant, weight: u64) -> Result<Instant, WindowError> {
        if weight > self.budget {
            return Err(WindowError::TooHeavy { weight, budget: self.budget });
        }
        Ok(Instant::from_nanos(self.fit(from.as_nanos(), weight, MAX_STRETCHES)))
    }

    /// [`RollingWindow::eta`] in nanoseconds, for a `weight` within the budget, stepping over
    /// at most `stretches` over-budget stretches (0: straight after the last rise).
    pub(crate) fn fit(&self, mut t: u64, weight: u64, stretches: usize) -> u64 {
        let tl = &self.timeline;
        let threshold = signed(self.budget.saturating_sub(weight));
        let length = self.length.as_nanos();
        for _ in 0..stretches {
            let over = if tl.load_at(t) > threshold { Some(t) } else { tl.first_after(t, threshold, true) };
            match over {
                // Past the last change the load is 0, so the window always falls back.
                Some(x) if x < t.saturating_add(length) => t = tl.first_after(x, threshold, false).unwrap_or(u64::MAX),
                _ => return t,
            }
        }
        // From the last rise on the load only falls: the first instant at or under the
        // threshold holds for a whole window after it.
        let s = t.max(tl.last_rise());
        if tl.load_at(s) <= threshold {
            s
        } else {
            tl.first_after(s, threshold, false).unwrap_or(u64::MAX)
        }
    }

    /// Fold away the entries that left the window by `now`: the answers for instants from
    /// `now − length` on stay exact, earlier ones are no longer kept. Only for a window whose
    /// entries are never removed afterwards (a folded entry cannot be taken back).
    pub fn prune(&mut self, now: Instant) {
        let cut = now - self.length;
        if cut > Instant::ZERO {
            self.timeline.fold_through(cut.as_nanos());
        }
    }

    /// The instant from which every entry has left the window (`Instant::ZERO` when empty).
    pub fn full_at(&self) -> Instant {
        self.timeline.last_key().map_or(Instant::ZERO, Instant::from_nanos)
    }

    /// Whether it holds no entry at all.
    pub fn is_empty(&self) -> bool {
        self.timeline.len() == 0
    }

    /// Forget every entry.
    pub fn clear(&mut self) {
        self.timeline.clear();
    }
}

/// A weight as a change of the timeline (weights above `i64::MAX` count as that).
fn signed(weight: u64) -> i64 {
    i64::try_from(weight).unwrap_or(i64::MAX)
}

/// Requests admitted at `now`, each an entry of its cost. A request that fits is inserted;
/// one that does not is told when it would ([`RollingWindow::eta`]). Instants may step back
/// by less than a window.
impl Limiter for RollingWindow {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.prune(now);
        let decision = self.peek(now, cost)?;
        if decision.is_allowed() {
            self.insert(now, u64::from(cost));
        }
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let weight = u64::from(cost);
        if weight > self.budget {
            return Err(CostTooHigh { cost, capacity: self.budget });
        }
        let at = Instant::from_nanos(self.fit(now.as_nanos(), weight, MAX_STRETCHES));
        if at > now {
            return Ok(Decision::Deny { retry_after: at - now });
        }
        let remaining = self.budget.saturating_sub(self.used(now).saturating_add(weight));
        let full = if weight > 0 { self.full_at().max(now + self.length) } else { self.full_at() };
        Ok(Decision::Allow { remaining, reset: full - now })
    }

    fn quota(&self) -> Quota {
        Quota { limit: self.budget, window: self.length }
    }

    fn full_at(&self) -> Instant {
        RollingWindow::full_at(self)
    }

    fn reset(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(budget: u64, secs: u64) -> RollingWindow {
        RollingWindow::new(Span::from_secs(secs), budget).unwrap()
    }

    #[test]
    fn a_configuration_that_holds_nothing_is_an_error_that_says_why() {
        assert_eq!(RollingWindow::new(Span::ZERO, 5).unwrap_err(), WindowError::ZeroLength);
        assert_eq!(RollingWindow::new(Span::from_secs(1), 0).unwrap_err(), WindowError::ZeroBudget);
        let huge = RollingWindow::MAX_BUDGET + 1;
        assert_eq!(
            RollingWindow::new(Span::from_secs(1), huge).unwrap_err(),
            WindowError::BudgetTooLarge { budget: huge }
        );
        assert_eq!(
            window(10, 1).eta(Instant::ZERO, 11).unwrap_err().to_string(),
            "a weight of 11 can never fit a rolling window whose whole budget is 10"
        );
        assert_eq!(WindowError::ZeroLength.to_string(), "a rolling window must be longer than zero");
        assert_eq!(WindowError::ZeroBudget.to_string(), "a rolling window's budget must be at least 1");
    }

    #[test]
    fn a_weight_fits_beside_a_reservation_only_where_the_whole_window_has_room() {
        let mut w = window(10, 10);
        let s = Instant::from_secs;
        w.insert(s(0), 6);
        w.insert(s(10), 6);
        assert_eq!(w.eta(s(3), 4).unwrap(), s(3));
        assert_eq!(w.eta(s(3), 5).unwrap(), s(20));
        assert_eq!((w.used(s(9)), w.used(s(10)), w.used(s(20))), (6, 6, 0));
        w.remove(s(10), 6);
        assert_eq!(w.eta(s(3), 5).unwrap(), s(10));
        assert_eq!(w.full_at(), s(10));
    }

    #[test]
    fn as_a_limiter_it_admits_exactly_what_fits_the_rolling_window() {
        let mut w = window(3, 10);
        for t in [0, 4, 5] {
            assert!(w.check(Instant::from_secs(t), 1).unwrap().is_allowed());
        }
        assert_eq!(w.check(Instant::from_secs(9), 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(1) });
        assert!(w.check(Instant::from_secs(10), 1).unwrap().is_allowed());
        assert_eq!(
            w.check(Instant::from_secs(14), 1).unwrap(),
            Decision::Allow { remaining: 0, reset: Span::from_secs(10) }
        );
        assert_eq!(w.check(Instant::ZERO, 4), Err(CostTooHigh { cost: 4, capacity: 3 }));
        assert_eq!(w.quota(), Quota { limit: 3, window: Span::from_secs(10) });
        assert!(w.is_idle(Instant::from_secs(24)) && !w.is_idle(Instant::from_secs(23)));
    }

    #[test]
    fn pruning_keeps_memory_to_the_last_windows_and_the_answers_unchanged() {
        let mut w = window(100, 1);
        let mut admitted = 0;
        for ms in 0..100_000u64 {
            let now = Instant::from_millis(ms);
            admitted += u64::from(w.check(now, 1).unwrap().is_allowed());
            assert!(w.used(now) <= 100);
            // Starts within the last window, ends within the last two, and one fold.
            assert!(w.timeline.len() <= 3 * 100 + 1, "{} changes kept at {ms} ms", w.timeline.len());
        }
        assert_eq!(admitted, 100 * 100, "100 in each of the 100 seconds");
    }
}
