//! The weighted multi-window pacer: when may a call of some weight go out, so that no
//! rolling window ever spends more than its budget?
//!
//! Every call is a *reservation*: a weight committed at an instant. A new reservation goes
//! to the earliest instant, from `now` on, at which it fits in **every** window, counting
//! both the calls already made and the reservations already committed for later. A lighter
//! call therefore fills a gap that an earlier, heavier reservation left, and never moves a
//! reservation already made: a heavy call waits only for the budget it needs, never behind
//! a stream of lighter ones, and a light call never waits behind a heavy one that cannot go
//! yet (the fairness rule: first committed, never displaced).
//!
//! ```text
//! budget 10 per 10 s; weights 6, 6, 3 asked at t = 0:
//! t(s)  0        10       20
//!       [6]      [6]              the second 6 must wait for the first to leave the window
//!       [3]                       the 3 fits beside the first 6 at once (a gap, not a queue)
//! ```
//!
//! Weights are integers in thousandths of a weighted call (Open-Meteo weights are
//! fractional, e.g. 1.5), so the arithmetic is exact. Time is passed in; a rolling window of
//! length `W` holds the reservations at instants in `(t − W, t]`.
//!
//! A reservation can be cancelled (its weight is refunded) until it is *dispatched*; after
//! that it stays spent. The in-flight count is tracked for snapshots; the cap itself is
//! applied by the caller, which moves a reservation to the instant it really goes out
//! ([`PacerCore::reschedule`]) when it had to wait for a free slot.

use crate::time::{Instant, Span};
use alloc::vec::Vec;
use core::fmt;

/// One rolling window: at most `budget` thousandths of weight in any `length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The window length.
    pub length: Span,
    /// The budget in thousandths of a weighted call.
    pub budget: u64,
}

/// The default windows for the Open-Meteo free tier, 8 % under its 600/min, 5,000/h and
/// 10,000/day: 550 per minute, 4,800 per hour, 9,500 per day.
pub fn open_meteo_windows() -> Vec<Window> {
    alloc::vec![
        Window { length: Span::from_secs(60), budget: 550_000 },
        Window { length: Span::from_secs(3_600), budget: 4_800_000 },
        Window { length: Span::from_secs(86_400), budget: 9_500_000 },
    ]
}

/// Why a pacer cannot be built or a call can never be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacerError {
    /// No windows were given.
    NoWindows,
    /// A window of zero length or zero budget (index given).
    EmptyWindow(usize),
    /// A weight of zero.
    ZeroWeight,
    /// The weight exceeds a window's whole budget: it could never go out.
    ExceedsBudget {
        /// The weight asked for (thousandths).
        weight: u64,
        /// The window that can never hold it.
        window: usize,
        /// That window's budget (thousandths).
        budget: u64,
    },
    /// The weight exceeds the most one call may weigh (the upstream's per-call cap).
    ExceedsCallCap {
        /// The weight asked for (thousandths).
        weight: u64,
        /// The cap (thousandths).
        cap: u64,
    },
    /// No reservation has this id, or it was already dispatched.
    UnknownReservation(u64),
}

impl fmt::Display for PacerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = Milli;
        match *self {
            PacerError::NoWindows => f.write_str("a pacer needs at least one window"),
            PacerError::EmptyWindow(i) => write!(f, "window {i} must have a length and a budget above 0"),
            PacerError::ZeroWeight => f.write_str("a call must weigh more than 0"),
            PacerError::ExceedsBudget { weight, window, budget } => write!(
                f,
                "a call weighing {} can never fit window {window}, whose whole budget is {}",
                w(weight),
                w(budget)
            ),
            PacerError::ExceedsCallCap { weight, cap } => {
                write!(f, "a call weighing {} exceeds the per-call cap of {}", w(weight), w(cap))
            }
            PacerError::UnknownReservation(id) => write!(f, "no pending reservation {id}"),
        }
    }
}

/// Thousandths shown as a decimal (`1500` → `1.5`) with integer arithmetic only.
struct Milli(u64);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let mut digits = alloc::format!("{frac:03}");
        while digits.ends_with('0') {
            digits.pop();
        }
        write!(f, "{whole}.{digits}")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spend {
    at: Instant,
    weight: u64,
    id: u64,
    dispatched: bool,
}

/// A committed reservation: its id and the instant it may go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// Pass it to [`PacerCore::dispatch`], [`PacerCore::cancel`] or
    /// [`PacerCore::reschedule`].
    pub id: u64,
    /// When the call may go out (≥ the `now` it was asked at).
    pub at: Instant,
}

/// What one window holds at an instant, for UIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowUse {
    /// The window.
    pub window: Window,
    /// Weight spent or reserved in `(now − length, now]` (thousandths).
    pub spent: u64,
}

/// The pacer's state at an instant, for UIs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Each window's use.
    pub windows: Vec<WindowUse>,
    /// Reservations not yet dispatched.
    pub queued: usize,
    /// Their total weight (thousandths).
    pub queued_weight: u64,
    /// Dispatched calls not yet released.
    pub in_flight: usize,
    /// When the last queued reservation may go out (`None` when nothing is queued).
    pub drains_at: Option<Instant>,
}

/// The pure pacer: reservations over several rolling windows, with time passed in.
///
/// # Examples
/// ```
/// use sluicegate::pacer::{PacerCore, Window};
/// use sluicegate::{Instant, Span};
/// let mut p = PacerCore::new(vec![Window { length: Span::from_secs(10), budget: 10_000 }], None).unwrap();
/// let t = Instant::ZERO;
/// assert_eq!(p.reserve(t, 6_000).unwrap().at, t);
/// assert_eq!(p.reserve(t, 6_000).unwrap().at, t + Span::from_secs(10)); // waits for the first to leave
/// assert_eq!(p.reserve(t, 3_000).unwrap().at, t); // fills the gap beside the first
/// ```
#[derive(Clone, Debug)]
pub struct PacerCore {
    windows: Vec<Window>,
    call_cap: Option<u64>,
    /// Sorted by `at` (then by id).
    spends: Vec<Spend>,
    in_flight: Vec<u64>,
    next_id: u64,
}

impl PacerCore {
    /// A pacer over `windows`, refusing single calls above `call_cap` (thousandths) when set.
    ///
    /// # Errors
    /// [`PacerError::NoWindows`] or [`PacerError::EmptyWindow`].
    pub fn new(windows: Vec<Window>, call_cap: Option<u64>) -> Result<Self, PacerError> {
        validate_windows(&windows)?;
        Ok(PacerCore { windows, call_cap, spends: Vec::new(), in_flight: Vec::new(), next_id: 1 })
    }

    /// The windows in force.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// Whether a call of `weight` could ever go out.
    ///
    /// # Errors
    /// The reason it never could.
    pub fn admissible(&self, weight: u64) -> Result<(), PacerError> {
        if weight == 0 {
            return Err(PacerError::ZeroWeight);
        }
        if let Some(cap) = self.call_cap {
            if weight > cap {
                return Err(PacerError::ExceedsCallCap { weight, cap });
            }
        }
        for (window, w) in self.windows.iter().enumerate() {
            if weight > w.budget {
                return Err(PacerError::ExceedsBudget { weight, window, budget: w.budget });
            }
        }
        Ok(())
    }

    /// Commit a call of `weight` at the earliest instant from `now` at which it fits every
    /// window. The delay is `reservation.at − now`.
    ///
    /// # Errors
    /// When the call could never go out ([`PacerCore::admissible`]); nothing is committed.
    pub fn reserve(&mut self, now: Instant, weight: u64) -> Result<Reservation, PacerError> {
        self.admissible(weight)?;
        self.forget_before(now);
        let at = self.earliest_fit(now, weight);
        let id = self.next_id;
        self.next_id += 1;
        self.insert(Spend { at, weight, id, dispatched: false });
        Ok(Reservation { id, at })
    }

    /// When a call of `weight` asked at `now` would go out, committing nothing.
    ///
    /// # Errors
    /// As for [`PacerCore::reserve`].
    pub fn eta(&self, now: Instant, weight: u64) -> Result<Instant, PacerError> {
        self.admissible(weight)?;
        Ok(self.earliest_fit(now, weight))
    }

    /// The call went out at `now`: it can no longer be refunded, and counts as in flight
    /// until [`PacerCore::release`].
    ///
    /// # Errors
    /// [`PacerError::UnknownReservation`] for an unknown or already dispatched id.
    pub fn dispatch(&mut self, id: u64) -> Result<(), PacerError> {
        let spend = self.spends.iter_mut().find(|s| s.id == id && !s.dispatched);
        let spend = spend.ok_or(PacerError::UnknownReservation(id))?;
        spend.dispatched = true;
        self.in_flight.push(id);
        Ok(())
    }

    /// The dispatched call `id` has answered. Its weight stays spent. Returns whether it
    /// was in flight.
    pub fn release(&mut self, id: u64) -> bool {
        match self.in_flight.iter().position(|x| *x == id) {
            Some(i) => {
                self.in_flight.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Cancel reservation `id`: refunded if it was not dispatched (returns `true`), kept
    /// spent if it was (returns `false`).
    pub fn cancel(&mut self, id: u64) -> bool {
        match self.spends.iter().position(|s| s.id == id && !s.dispatched) {
            Some(i) => {
                self.spends.remove(i);
                true
            }
            None => {
                self.release(id);
                false
            }
        }
    }

    /// Move a reservation that could not go out at its instant (no free slot) to the
    /// earliest fit from `now`, so the spend is recorded when the call really goes out.
    ///
    /// # Errors
    /// [`PacerError::UnknownReservation`] for an unknown or already dispatched id.
    pub fn reschedule(&mut self, now: Instant, id: u64) -> Result<Reservation, PacerError> {
        let i = self.spends.iter().position(|s| s.id == id && !s.dispatched);
        let i = i.ok_or(PacerError::UnknownReservation(id))?;
        let spend = self.spends.remove(i);
        let at = self.earliest_fit(now.max(spend.at), spend.weight);
        self.insert(Spend { at, ..spend });
        Ok(Reservation { id, at })
    }

    /// Replace the windows, keeping everything spent. Reservations not yet dispatched are
    /// planned again, in their order, from `now`; returns those whose instant changed.
    ///
    /// # Errors
    /// [`PacerError::NoWindows`] or [`PacerError::EmptyWindow`]; nothing changes. A queued
    /// reservation that can never fit the new windows is returned with
    /// `PacerError::ExceedsBudget`/`ExceedsCallCap` in the second list and cancelled.
    #[allow(clippy::type_complexity)]
    pub fn set_windows(
        &mut self,
        now: Instant,
        windows: Vec<Window>,
        call_cap: Option<u64>,
    ) -> Result<(Vec<Reservation>, Vec<(u64, PacerError)>), PacerError> {
        validate_windows(&windows)?;
        self.windows = windows;
        self.call_cap = call_cap;
        let (queued, kept): (Vec<Spend>, Vec<Spend>) = self.spends.iter().partition(|s| !s.dispatched);
        self.spends = kept;
        let mut moved = Vec::new();
        let mut refused = Vec::new();
        for spend in queued {
            if let Err(e) = self.admissible(spend.weight) {
                refused.push((spend.id, e));
                continue;
            }
            let at = self.earliest_fit(now, spend.weight);
            if at != spend.at {
                moved.push(Reservation { id: spend.id, at });
            }
            self.insert(Spend { at, ..spend });
        }
        Ok((moved, refused))
    }

    /// What each window holds at `now`, and what is queued.
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        let windows = self
            .windows
            .iter()
            .map(|w| WindowUse {
                window: *w,
                spent: self.spends.iter().filter(|s| s.at <= now && s.at + w.length > now).map(|s| s.weight).sum(),
            })
            .collect();
        let queued = self.spends.iter().filter(|s| !s.dispatched);
        Snapshot {
            windows,
            queued: queued.clone().count(),
            queued_weight: queued.clone().map(|s| s.weight).sum(),
            in_flight: self.in_flight.len(),
            drains_at: queued.map(|s| s.at).max(),
        }
    }

    /// Every spend and reservation still inside a window: `(at, weight, dispatched)`, for
    /// persistence (see [`PacerCore::import`]).
    pub fn export(&self) -> Vec<(Instant, u64, bool)> {
        self.spends.iter().map(|s| (s.at, s.weight, s.dispatched)).collect()
    }

    /// Add spends recorded elsewhere (another tab, a previous page load) as dispatched
    /// history: they count against every window but are nobody's to cancel.
    pub fn import(&mut self, now: Instant, spends: &[(Instant, u64)]) {
        for &(at, weight) in spends {
            if weight == 0 {
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.insert(Spend { at, weight, id, dispatched: true });
        }
        self.forget_before(now);
    }

    fn insert(&mut self, spend: Spend) {
        let i = self.spends.partition_point(|s| (s.at, s.id) <= (spend.at, spend.id));
        self.spends.insert(i, spend);
    }

    /// Drop dispatched spends that no window can see any more.
    fn forget_before(&mut self, now: Instant) {
        let longest = self.windows.iter().map(|w| w.length).max().unwrap_or(Span::ZERO);
        let in_flight = &self.in_flight;
        self.spends.retain(|s| !s.dispatched || s.at + longest > now || in_flight.contains(&s.id));
    }

    /// The earliest instant `t ≥ from` at which `weight` fits every window.
    fn earliest_fit(&self, from: Instant, weight: u64) -> Instant {
        let fits = |t: Instant| self.windows.iter().all(|w| self.max_load_covering(t, w.length) + weight <= w.budget);
        if fits(from) {
            return from;
        }
        // The load of the windows covering t only drops when a spend leaves a window, so
        // the candidates are `from` and each `spend + length` after it.
        let mut candidates: Vec<Instant> = Vec::with_capacity(1 + self.spends.len() * self.windows.len());
        candidates.push(from);
        for w in &self.windows {
            candidates.extend(self.spends.iter().map(|s| s.at + w.length).filter(|t| *t > from));
        }
        candidates.sort_unstable();
        candidates.dedup();
        for t in candidates {
            if fits(t) {
                return t;
            }
        }
        // Unreachable for an admissible weight: past the last spend every window is empty.
        self.spends.last().map_or(from, |s| s.at + self.windows.iter().map(|w| w.length).max().unwrap_or(Span::ZERO))
    }

    /// The largest load of any window `[s, s + length)` with `s ∈ (t − length, t]`, i.e. of
    /// every window a spend at `t` would fall in.
    fn max_load_covering(&self, t: Instant, length: Span) -> u64 {
        let lo = self.spends.partition_point(|s| s.at + length <= t); // first with at > t − length
        let hi = self.spends.partition_point(|s| s.at < t + length); // end of at < t + length
        let relevant = &self.spends[lo..hi];
        // Windows start from just after t − length (or the epoch) up to t. A window's load
        // only rises when its end passes a spend, so besides the first window only those
        // ending just past a spend at or after t can be the largest. Their starts rise
        // monotonically: two pointers keep the running sum.
        let first_start = if t < Instant::ZERO + length { Instant::ZERO } else { (t - length) + Span::from_nanos(1) };
        let (mut left, mut right, mut sum, mut best) = (0usize, 0usize, 0u64, 0u64);
        let mut window_at = |start: Instant| {
            let end = start + length;
            while right < relevant.len() && relevant[right].at < end {
                sum += relevant[right].weight;
                right += 1;
            }
            while left < right && relevant[left].at < start {
                sum -= relevant[left].weight;
                left += 1;
            }
            best = best.max(sum);
        };
        window_at(first_start);
        for spend in relevant.iter().filter(|s| s.at >= t) {
            let start = ((spend.at + Span::from_nanos(1)) - length).max(first_start);
            if start > t {
                break;
            }
            window_at(start);
        }
        best
    }
}

fn validate_windows(windows: &[Window]) -> Result<(), PacerError> {
    if windows.is_empty() {
        return Err(PacerError::NoWindows);
    }
    match windows.iter().position(|w| w.length.is_zero() || w.budget == 0) {
        Some(i) => Err(PacerError::EmptyWindow(i)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(budget: u64, secs: u64) -> PacerCore {
        PacerCore::new(alloc::vec![Window { length: Span::from_secs(secs), budget }], None).unwrap()
    }

    #[test]
    fn a_lighter_call_fills_the_gap_a_heavier_one_left() {
        let mut p = pacer(10, 10);
        let t = Instant::from_secs(100);
        assert_eq!(p.reserve(t, 6).unwrap().at, t);
        assert_eq!(p.reserve(t, 6).unwrap().at, t + Span::from_secs(10));
        assert_eq!(p.reserve(t, 4).unwrap().at, t);
        // The gap is now full: a 1 goes after the first 6 and 4 leave... but not beside the
        // second 6 earlier than that.
        assert_eq!(p.reserve(t, 1).unwrap().at, t + Span::from_secs(10));
    }

    #[test]
    fn a_future_reservation_is_never_displaced_by_a_later_request() {
        let mut p = pacer(10, 10);
        let t = Instant::ZERO;
        p.reserve(t, 10).unwrap();
        let heavy = p.reserve(t, 10).unwrap();
        assert_eq!(heavy.at, Instant::from_secs(10));
        // A light call asked at 5 s cannot go before the heavy one's window would overflow.
        let light = p.reserve(Instant::from_secs(5), 1).unwrap();
        assert_eq!(light.at, Instant::from_secs(20));
    }

    #[test]
    fn every_window_must_have_room() {
        let mut p = PacerCore::new(
            alloc::vec![
                Window { length: Span::from_secs(1), budget: 5 },
                Window { length: Span::from_secs(10), budget: 8 },
            ],
            None,
        )
        .unwrap();
        let t = Instant::ZERO;
        assert_eq!(p.reserve(t, 5).unwrap().at, t);
        assert_eq!(p.reserve(t, 3).unwrap().at, Instant::from_secs(1));
        assert_eq!(p.reserve(t, 1).unwrap().at, Instant::from_secs(10));
    }

    #[test]
    fn cancel_before_dispatch_refunds_and_after_does_not() {
        let mut p = pacer(10, 10);
        let t = Instant::ZERO;
        let a = p.reserve(t, 10).unwrap();
        assert!(p.cancel(a.id));
        let b = p.reserve(t, 10).unwrap();
        assert_eq!(b.at, t, "the refunded weight is available at once");
        p.dispatch(b.id).unwrap();
        assert!(!p.cancel(b.id), "cancel_after_dispatch_is_not_refunded");
        assert_eq!(p.reserve(t, 1).unwrap().at, Instant::from_secs(10));
    }

    #[test]
    fn an_impossible_weight_is_refused_at_once() {
        let mut p =
            PacerCore::new(alloc::vec![Window { length: Span::from_secs(60), budget: 550_000 }], Some(5_000_000))
                .unwrap();
        assert_eq!(
            p.reserve(Instant::ZERO, 550_001),
            Err(PacerError::ExceedsBudget { weight: 550_001, window: 0, budget: 550_000 })
        );
        assert_eq!(p.reserve(Instant::ZERO, 0), Err(PacerError::ZeroWeight));
        assert!(p.snapshot(Instant::ZERO).queued == 0);
    }

    #[test]
    fn limits_change_at_run_time_without_losing_the_spent_budget() {
        let mut p = pacer(10, 10);
        let t = Instant::ZERO;
        let a = p.reserve(t, 8).unwrap();
        p.dispatch(a.id).unwrap();
        let b = p.reserve(t, 2).unwrap();
        assert_eq!(b.at, t);
        let (moved, refused) =
            p.set_windows(t, alloc::vec![Window { length: Span::from_secs(10), budget: 9 }], None).unwrap();
        assert!(refused.is_empty());
        assert_eq!(moved, alloc::vec![Reservation { id: b.id, at: Instant::from_secs(10) }]);
        assert_eq!(p.snapshot(t).windows[0].spent, 8);
    }

    #[test]
    fn reschedule_records_the_spend_when_the_call_really_goes_out() {
        let mut p = pacer(10, 10);
        let t = Instant::ZERO;
        let a = p.reserve(t, 5).unwrap();
        let moved = p.reschedule(Instant::from_secs(3), a.id).unwrap();
        assert_eq!(moved.at, Instant::from_secs(3));
        p.dispatch(a.id).unwrap();
        assert_eq!(p.snapshot(Instant::from_secs(12)).windows[0].spent, 5);
        assert_eq!(p.snapshot(Instant::from_secs(13)).windows[0].spent, 0);
    }

    #[test]
    fn imported_history_counts_against_the_budget() {
        let mut p = pacer(10, 10);
        p.import(Instant::from_secs(5), &[(Instant::from_secs(1), 7), (Instant::from_secs(2), 3)]);
        assert_eq!(p.reserve(Instant::from_secs(5), 3).unwrap().at, Instant::from_secs(11));
        assert_eq!(p.snapshot(Instant::from_secs(5)).windows[0].spent, 10);
    }
}
