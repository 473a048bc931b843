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
//! An upstream whose windows are fixed and clock-aligned (Open-Meteo's) can be planned
//! against as it counts ([`PacerLimits::fixed_windows`]): window `k` of a length `L` is
//! `[k·L, (k+1)·L)`, and a call counts in every window it may land in within a margin of its
//! instant. A fan-out then spends each window's budget from its start instead of a whole
//! rolling window after its first call:
//!
//! ```text
//! budget 10 per 10 s, margin 1 s; weights 6, 6 asked at t = 7 s:
//! rolling windows: the second 6 goes at 17 s, once the first has left the window
//! fixed windows:   the second 6 goes at 11 s, from where it can only land in [10 s, 20 s)
//! ```
//!
//! A reservation can be cancelled (its weight is refunded) until it is *dispatched*; after
//! that it stays spent. The in-flight count is tracked for snapshots; the cap itself is
//! applied by the caller, which moves a reservation to the instant it really goes out
//! ([`PacerCore::reschedule`]) when it had to wait for a free slot.

use crate::core::limit::RollingWindow;
use crate::core::milli::Milli;
use crate::core::time::{Instant, Span};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One window of the pacer's budget: at most `budget` thousandths of a weighted call in any
/// `length` (the core's `limit::Window`, here in thousandths).
pub use crate::core::limit::Window;

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
    /// The queue is full: `limit` calls (or, when `weight`, thousandths of weight) are queued.
    QueueFull {
        /// The limit reached.
        limit: u64,
        /// Whether it is the weight limit (else the count).
        weight: bool,
    },
    /// An in-flight cap of 0: no call could ever go out.
    NoSlots,
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
            PacerError::QueueFull { limit, weight: false } => {
                write!(f, "the queue is full: {limit} calls are waiting (maxQueued)")
            }
            PacerError::QueueFull { limit, weight: true } => {
                write!(f, "the queue is full: a weight of {} is waiting (maxQueuedWeight)", w(limit))
            }
            PacerError::NoSlots => f.write_str("maxInFlight must be at least 1"),
        }
    }
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

/// The limits a pacer enforces besides its windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacerLimits {
    /// The most one call may weigh (thousandths); `None` for no cap.
    pub call_cap: Option<u64>,
    /// How late a call may go out after its planned instant and still count there (timers
    /// fire late; a free slot takes a moment). Placements reserve every window this much
    /// longer than it is, so lateness within the slack never overspends a window.
    pub slack: Span,
    /// The most calls out at once (dispatched, not yet released).
    pub max_in_flight: usize,
    /// The most calls of this pacer queued (reserved, not yet out); beyond, `reserve` refuses.
    pub max_queued: usize,
    /// The most weight (thousandths) of this pacer queued; beyond, `reserve` refuses.
    pub max_queued_weight: u64,
    /// `Some(margin)`: the windows are the upstream's fixed ones, window `k` of a length `L`
    /// being `[k·L, (k+1)·L)` on this pacer's clock, and a call at `t` may land anywhere in
    /// `[t − margin, t + margin]` on the upstream's (its clock's error, the upstream's own
    /// offset, the time a call takes to arrive and be counted): each call counts in every
    /// window that stretch meets, so no window the upstream counts gets
    /// more than its budget, and a budget that a window's start leaves is spent then, not a
    /// whole window after the first call. A late call keeps its place while it lands in the
    /// windows it was counted in (the slack is not used). `None`: rolling windows.
    pub fixed_windows: Option<Span>,
}

impl Default for PacerLimits {
    /// No call cap, no slack, no cap on calls in flight or queued.
    fn default() -> Self {
        PacerLimits {
            call_cap: None,
            slack: Span::ZERO,
            max_in_flight: usize::MAX,
            max_queued: usize::MAX,
            max_queued_weight: u64::MAX,
            fixed_windows: None,
        }
    }
}

/// The index of an owner of ledger entries; this pacer is always 0.
type OwnerIndex = u32;
const ME: OwnerIndex = 0;

/// An entry of the ledger that is not one of this pacer's live calls: another owner's, or
/// one of this pacer's calls that went out and was released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    at: Instant,
    weight: u64,
    owner: OwnerIndex,
    seq: u64,
    dispatched: bool,
}

/// One of this pacer's own calls, from its reservation until it is refunded or released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    weight: u64,
    /// Its planned instant while it is in the ledger (`None`: pruned or dropped by another
    /// tab; it is placed again when it is due).
    at: Option<Instant>,
    dispatched: bool,
    /// Orders the calls waiting for a slot (higher first); never moves a reservation.
    priority: i32,
}

/// This pacer's calls by id. Ids only grow, so they index a vector from the oldest live one.
#[derive(Clone, Debug, Default)]
struct Calls {
    /// The id of `slots[0]`.
    base: u64,
    slots: Vec<Option<Call>>,
    /// Every slot before this one is empty.
    head: usize,
}

impl Calls {
    fn get(&self, id: u64) -> Option<&Call> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        self.slots.get(i)?.as_ref()
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Call> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        self.slots.get_mut(i)?.as_mut()
    }

    fn insert(&mut self, id: u64, call: Call) {
        if self.slots.is_empty() {
            self.base = id;
        }
        let i = (id - self.base) as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(call);
    }

    fn remove(&mut self, id: u64) -> Option<Call> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        let call = self.slots.get_mut(i)?.take();
        // The gone calls in front are dropped once they are most of the vector: each slot is
        // stepped over once, so this costs O(1) per call over time.
        if i == self.head {
            while self.slots.get(self.head).is_some_and(Option::is_none) {
                self.head += 1;
            }
        }
        if self.head == self.slots.len() {
            self.slots.clear();
            self.head = 0;
        } else if self.head >= 64 && self.head * 2 >= self.slots.len() {
            self.slots.drain(..self.head);
            self.base += self.head as u64;
            self.head = 0;
        }
        call
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &Call)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, c)| c.as_ref().map(|c| (self.base + i as u64, c)))
    }

    fn values(&self) -> impl Iterator<Item = &Call> + '_ {
        self.slots.iter().flatten()
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Call> + '_ {
        self.slots.iter_mut().flatten()
    }
}

/// A committed reservation: its id and the instant it may go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// Pass it to [`PacerCore::due`], [`PacerCore::cancel`] and [`PacerCore::release`].
    pub id: u64,
    /// When the call may go out (≥ the `now` it was asked at).
    pub at: Instant,
}

/// What a queued call should do when its instant comes ([`PacerCore::due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// It went out now: it is in flight until [`PacerCore::release`].
    Go,
    /// Not yet: wait until this instant and ask again (early timer, or placed again).
    Wait(Instant),
    /// Every slot is taken: it is next in line and [`PacerCore::release`] hands it a slot.
    NoSlot,
    /// No queued call has this id (refunded, or already out).
    Unknown,
}

/// Why [`PacerCore::try_acquire`] gave no permit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// The budget has room for it at this instant, not before.
    Budget(Instant),
    /// The budget has room now, but every in-flight slot is taken.
    InFlight,
}

/// One entry of the ledger as stored: shared by every pacer (tab) of a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerEntry<'a> {
    /// The planned instant (a late call is placed again; the ledger keeps where it counts).
    pub at: Instant,
    /// Its weight (thousandths).
    pub weight: u64,
    /// The pacer that placed it.
    pub owner: &'a str,
    /// Its number within that pacer.
    pub seq: u64,
    /// Whether it went out (no refund any more).
    pub dispatched: bool,
}

/// What a change of limits did to the queued calls ([`PacerCore::set_limits`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replan {
    /// Calls whose instant changed.
    pub moved: Vec<Reservation>,
    /// Calls that can never fit the new limits: refunded and gone.
    pub refused: Vec<(u64, PacerError)>,
}

/// The pacer's state machine over a shared ledger, with time passed in.
///
/// Every call is an entry of the ledger (instant, weight, owner, sequence, dispatched): this
/// pacer's own, and those of other pacers sharing the budget ([`PacerCore::sync`]). A call
/// is reserved ([`PacerCore::reserve`]), goes out when it is due and a slot is free
/// ([`PacerCore::due`]), and is released when it has answered ([`PacerCore::release`]);
/// until it goes out it can be cancelled and its weight refunded ([`PacerCore::cancel`]).
/// Placement costs O(log n) in the number of entries: each window keeps its load as a
/// [`RollingWindow`] (a timeline of changes with running maxima and minima).
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
    limits: PacerLimits,
    /// One per window: over the window's length plus the slack; with fixed windows, over the
    /// window's length, each entry counted at the start of every window it may land in (the
    /// load over `[k·L, (k+1)·L)` is then window `k`'s).
    loads: Vec<RollingWindow>,
    /// Other owners' entries and this pacer's released calls (unordered).
    history: Vec<Entry>,
    /// This pacer's calls by id, from reservation to refund or release.
    calls: Calls,
    owners: Vec<String>,
    in_flight: usize,
    /// Queued calls that were due while every slot was taken: by priority, then first come.
    slot_line: Vec<(i32, u64)>,
    /// Entries that no window can see any more are dropped from this instant on.
    next_prune: Instant,
    queued: usize,
    queued_weight: u64,
    next_id: u64,
}

impl PacerCore {
    /// A pacer over `windows`, refusing single calls above `call_cap` (thousandths) when set.
    ///
    /// # Errors
    /// [`PacerError::NoWindows`] or [`PacerError::EmptyWindow`].
    pub fn new(windows: Vec<Window>, call_cap: Option<u64>) -> Result<Self, PacerError> {
        Self::with_limits(windows, PacerLimits { call_cap, ..PacerLimits::default() })
    }

    /// A pacer over `windows` with every limit given.
    ///
    /// # Errors
    /// [`PacerError::NoWindows`], [`PacerError::EmptyWindow`] or [`PacerError::NoSlots`].
    pub fn with_limits(windows: Vec<Window>, limits: PacerLimits) -> Result<Self, PacerError> {
        let loads = validate(&windows, &limits)?;
        Ok(PacerCore {
            windows,
            limits,
            loads,
            history: Vec::new(),
            calls: Calls::default(),
            owners: alloc::vec![String::new()],
            in_flight: 0,
            slot_line: Vec::new(),
            next_prune: Instant::ZERO,
            queued: 0,
            queued_weight: 0,
            next_id: 1,
        })
    }

    /// The windows in force.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// The other limits in force.
    pub fn limits(&self) -> PacerLimits {
        self.limits
    }

    /// Name this pacer in the ledger (before its entries are shared; see [`PacerCore::sync`]).
    pub fn set_owner(&mut self, name: &str) {
        self.owners[ME as usize] = String::from(name);
    }

    /// Whether a call of `weight` could ever go out.
    ///
    /// # Errors
    /// The reason it never could.
    pub fn admissible(&self, weight: u64) -> Result<(), PacerError> {
        admissible(&self.windows, self.limits.call_cap, weight)
    }

    /// The longest time an entry can still matter to a placement.
    fn horizon(&self) -> Span {
        let longest = self.loads.iter().map(RollingWindow::length).max().unwrap_or(Span::ZERO);
        longest + self.limits.fixed_windows.unwrap_or(Span::ZERO)
    }

    /// Commit a call of `weight` at the earliest instant from `now` at which it fits every
    /// window. The delay is `reservation.at − now`.
    ///
    /// # Errors
    /// When the call could never go out ([`PacerCore::admissible`]) or the queue is full;
    /// nothing is committed.
    pub fn reserve(&mut self, now: Instant, weight: u64) -> Result<Reservation, PacerError> {
        self.reserve_with_priority(now, weight, 0)
    }

    /// [`PacerCore::reserve`] for a call that, once due, goes before calls of lower
    /// `priority` waiting for a slot. Priority never moves a committed reservation.
    ///
    /// # Errors
    /// As for [`PacerCore::reserve`].
    pub fn reserve_with_priority(
        &mut self,
        now: Instant,
        weight: u64,
        priority: i32,
    ) -> Result<Reservation, PacerError> {
        self.admissible(weight)?;
        if self.queued >= self.limits.max_queued {
            return Err(PacerError::QueueFull { limit: self.limits.max_queued as u64, weight: false });
        }
        if self.queued_weight.saturating_add(weight) > self.limits.max_queued_weight {
            return Err(PacerError::QueueFull { limit: self.limits.max_queued_weight, weight: true });
        }
        self.prune(now);
        let at = self.earliest_fit(now, weight);
        let id = self.next_id;
        self.next_id += 1;
        self.put(at, weight);
        self.calls.insert(id, Call { weight, at: Some(at), dispatched: false, priority });
        self.queued += 1;
        self.queued_weight += weight;
        Ok(Reservation { id, at })
    }

    /// A permit now or never: the call goes out at once (it is in flight; release it when it
    /// has answered) if the budget has room at `now` and a slot is free. Nothing is queued.
    ///
    /// # Errors
    /// As for [`PacerCore::reserve`]; `Ok(Err(busy))` says why there is no permit now.
    pub fn try_acquire(&mut self, now: Instant, weight: u64) -> Result<Result<u64, Busy>, PacerError> {
        self.admissible(weight)?;
        self.prune(now);
        let at = self.earliest_fit(now, weight);
        if at > now {
            return Ok(Err(Busy::Budget(at)));
        }
        if self.in_flight >= self.limits.max_in_flight {
            return Ok(Err(Busy::InFlight));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.put(now, weight);
        self.calls.insert(id, Call { weight, at: Some(now), dispatched: true, priority: 0 });
        self.in_flight += 1;
        Ok(Ok(id))
    }

    /// When a call of `weight` asked at `now` would go out, committing nothing.
    ///
    /// # Errors
    /// As for [`PacerCore::reserve`].
    pub fn eta(&self, now: Instant, weight: u64) -> Result<Instant, PacerError> {
        self.admissible(weight)?;
        Ok(self.earliest_fit(now, weight))
    }

    /// The queued call `id` reached its instant at `now`: it goes out if a slot is free,
    /// waits its turn for one, or (when it is later than the slack covers, or its entry was
    /// dropped) is placed again from `now`.
    pub fn due(&mut self, now: Instant, id: u64) -> Due {
        let Some(call) = self.calls.get(id).copied() else { return Due::Unknown };
        if call.dispatched {
            return Due::Unknown;
        }
        let at = match call.at {
            Some(at) if self.keeps_place(at, now) => at,
            stale => {
                // Too late for its instant to hold the spend: count it where it goes out.
                if let Some(at) = stale {
                    self.take(at, call.weight);
                }
                let at = self.earliest_fit(now, call.weight);
                self.put(at, call.weight);
                self.calls.insert(id, Call { at: Some(at), ..call });
                at
            }
        };
        if at > now {
            return Due::Wait(at);
        }
        if self.in_flight >= self.limits.max_in_flight {
            if !self.slot_line.iter().any(|(_, x)| *x == id) {
                let i = self.slot_line.partition_point(|(p, _)| *p >= call.priority);
                self.slot_line.insert(i, (call.priority, id));
            }
            return Due::NoSlot;
        }
        self.go_out(id, Call { at: Some(at), ..call });
        Due::Go
    }

    /// Whether a call planned at `at` and going out at `now` still counts where it was
    /// planned: within the slack (rolling windows), or landing in the windows it was counted
    /// in (fixed ones).
    fn keeps_place(&self, at: Instant, now: Instant) -> bool {
        let Some(margin) = self.limits.fixed_windows else { return now <= at + self.limits.slack };
        self.loads.iter().all(|load| {
            let last = |t: Instant| reach(t, load.length(), margin).1;
            last(now) <= last(at)
        })
    }

    /// The queued `call` goes out: no longer queued, in flight until released.
    fn go_out(&mut self, id: u64, call: Call) {
        self.slot_line.retain(|(_, x)| *x != id);
        self.calls.insert(id, Call { dispatched: true, ..call });
        self.queued -= 1;
        self.queued_weight -= call.weight;
        self.in_flight += 1;
    }

    /// Mark a queued call as gone out at its planned instant (the pure form of
    /// [`PacerCore::due`], ignoring slots and lateness).
    ///
    /// # Errors
    /// [`PacerError::UnknownReservation`] for an unknown or already dispatched id.
    pub fn dispatch(&mut self, id: u64) -> Result<(), PacerError> {
        match self.calls.get(id).copied() {
            Some(call @ Call { at: Some(_), dispatched: false, .. }) => {
                self.go_out(id, call);
                Ok(())
            }
            _ => Err(PacerError::UnknownReservation(id)),
        }
    }

    /// The call `id` has answered: its weight stays spent and its slot is free. Returns
    /// whether it was in flight. The next call waiting for a slot is [`PacerCore::next_in_line`].
    pub fn release(&mut self, id: u64) -> bool {
        match self.calls.get(id).copied() {
            Some(Call { at: Some(at), weight, dispatched: true, .. }) => {
                self.calls.remove(id);
                self.history.push(Entry { at, weight, owner: ME, seq: id, dispatched: true });
                self.in_flight -= 1;
                true
            }
            _ => false,
        }
    }

    /// The call that waited longest for a slot, when a slot is free (call
    /// [`PacerCore::due`] with it).
    pub fn next_in_line(&mut self) -> Option<u64> {
        if self.in_flight >= self.limits.max_in_flight {
            return None;
        }
        (!self.slot_line.is_empty()).then(|| self.slot_line.remove(0).1)
    }

    /// Cancel call `id`: refunded if it had not gone out (returns `true`); a call that went
    /// out stays spent and is released (returns `false`).
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(call) = self.calls.get(id).copied() else { return false };
        if call.dispatched {
            self.release(id);
            return false;
        }
        self.calls.remove(id);
        if let Some(at) = call.at {
            self.take(at, call.weight);
        }
        self.slot_line.retain(|(_, x)| *x != id);
        self.queued -= 1;
        self.queued_weight -= call.weight;
        true
    }

    /// Move a queued call to the earliest fit from `now` (or from its instant, if later).
    ///
    /// # Errors
    /// [`PacerError::UnknownReservation`] for an unknown or already dispatched id.
    pub fn reschedule(&mut self, now: Instant, id: u64) -> Result<Reservation, PacerError> {
        let call = match self.calls.get(id) {
            Some(call) if !call.dispatched => *call,
            _ => return Err(PacerError::UnknownReservation(id)),
        };
        let from = call.at.map_or(now, |at| now.max(at));
        if let Some(at) = call.at {
            self.take(at, call.weight);
        }
        let at = self.earliest_fit(from, call.weight);
        self.put(at, call.weight);
        self.calls.insert(id, Call { at: Some(at), ..call });
        Ok(Reservation { id, at })
    }

    /// Replace the windows and limits, keeping everything spent. This pacer's queued calls
    /// are planned again, in their order, from `now`; a call that can never fit the new
    /// limits is refunded and listed in [`Replan::refused`].
    ///
    /// # Errors
    /// [`PacerError::NoWindows`], [`PacerError::EmptyWindow`] or [`PacerError::NoSlots`];
    /// nothing changes.
    pub fn set_limits(
        &mut self,
        now: Instant,
        windows: Vec<Window>,
        limits: PacerLimits,
    ) -> Result<Replan, PacerError> {
        self.loads = validate(&windows, &limits)?;
        self.windows = windows;
        self.limits = limits;
        // Take this pacer's queued calls out, in their order, and rebuild the windows.
        let mut queued: Vec<(Instant, u64)> =
            self.calls.iter().filter(|(_, c)| !c.dispatched).map(|(id, c)| (c.at.unwrap_or(now), id)).collect();
        crate::core::sort::sort_by(&mut queued, |a, b| a < b);
        for &(_, id) in &queued {
            if let Some(call) = self.calls.get_mut(id) {
                call.at = None;
            }
        }
        self.rebuild_loads();
        let mut replan = Replan::default();
        for (before, id) in queued {
            let Some(&call) = self.calls.get(id) else { continue };
            if let Err(e) = self.admissible(call.weight) {
                self.calls.remove(id);
                self.slot_line.retain(|(_, x)| *x != id);
                self.queued -= 1;
                self.queued_weight -= call.weight;
                replan.refused.push((id, e));
                continue;
            }
            let at = self.earliest_fit(now, call.weight);
            if call.at != Some(at) || before != at {
                replan.moved.push(Reservation { id, at });
            }
            self.put(at, call.weight);
            self.calls.insert(id, Call { at: Some(at), ..call });
        }
        Ok(replan)
    }

    /// Replace the windows and the per-call cap, keeping the other limits.
    ///
    /// # Errors
    /// As for [`PacerCore::set_limits`].
    pub fn set_windows(
        &mut self,
        now: Instant,
        windows: Vec<Window>,
        call_cap: Option<u64>,
    ) -> Result<Replan, PacerError> {
        self.set_limits(now, windows, PacerLimits { call_cap, ..self.limits })
    }

    /// What each window holds at `now` (the rolling window up to `now`, or the fixed window
    /// holding it), and what is queued.
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        let fixed = self.limits.fixed_windows.is_some();
        let windows = self
            .windows
            .iter()
            .map(|w| {
                // The first instant counted: the fixed window's start, or just after `now − length`.
                let from = if fixed {
                    reach(now, w.length, Span::ZERO).0
                } else {
                    (now.as_nanos() + 1).saturating_sub(w.length.as_nanos())
                };
                WindowUse {
                    window: *w,
                    spent: self
                        .spends()
                        .filter(|(at, _)| *at <= now && at.as_nanos() >= from)
                        .map(|(_, weight)| weight)
                        .sum(),
                }
            })
            .collect();
        Snapshot {
            windows,
            queued: self.queued,
            queued_weight: self.queued_weight,
            in_flight: self.in_flight,
            drains_at: self.calls.values().filter(|c| !c.dispatched).map(|c| c.at.unwrap_or(now)).max(),
        }
    }

    /// Every spend and reservation in the ledger: `(at, weight)`.
    fn spends(&self) -> impl Iterator<Item = (Instant, u64)> + '_ {
        let live = self.calls.values().filter_map(|c| c.at.map(|at| (at, c.weight)));
        self.history.iter().map(|e| (e.at, e.weight)).chain(live)
    }

    /// Every entry of the ledger (in no particular order).
    pub fn entries(&self) -> impl Iterator<Item = LedgerEntry<'_>> + '_ {
        let history = self.history.iter().map(|e| LedgerEntry {
            at: e.at,
            weight: e.weight,
            owner: &self.owners[e.owner as usize],
            seq: e.seq,
            dispatched: e.dispatched,
        });
        let live = self.calls.iter().filter_map(|(seq, c)| {
            c.at.map(|at| LedgerEntry {
                at,
                weight: c.weight,
                owner: &self.owners[ME as usize],
                seq,
                dispatched: c.dispatched,
            })
        });
        history.chain(live)
    }

    /// Every spend and reservation still inside a window: `(at, weight, dispatched)`.
    pub fn export(&self) -> Vec<(Instant, u64, bool)> {
        self.entries().map(|e| (e.at, e.weight, e.dispatched)).collect()
    }

    /// Take the ledger as stored (shared with other pacers of the budget) as the truth:
    /// every other owner's entries are replaced by these; this pacer's queued calls take the
    /// stored instant, and those missing from the store are placed again when due. Entries of
    /// weight 0, and queued entries under this pacer's name that it no longer holds, are
    /// skipped.
    pub fn sync<'a>(&mut self, stored: impl IntoIterator<Item = LedgerEntry<'a>>) {
        self.history.clear();
        for call in self.calls.values_mut() {
            if !call.dispatched {
                call.at = None;
            }
        }
        for e in stored {
            if e.weight == 0 {
                continue;
            }
            let owner = self.owner_index(e.owner);
            if owner == ME {
                if let Some(call) = self.calls.get_mut(e.seq) {
                    // A live call: its state is this pacer's; a queued one takes the stored instant.
                    if !call.dispatched && !e.dispatched {
                        call.at = Some(e.at);
                    }
                    continue;
                }
                if !e.dispatched {
                    continue;
                }
            }
            self.history.push(Entry { at: e.at, weight: e.weight, owner, seq: e.seq, dispatched: e.dispatched });
        }
        self.rebuild_loads();
        // Entries out of every window are dropped at the next reservation, as always.
        self.next_prune = Instant::ZERO;
    }

    /// Add spends recorded elsewhere (another tab, a previous page load) as dispatched
    /// history: they count against every window but are nobody's to cancel.
    pub fn import(&mut self, now: Instant, spends: &[(Instant, u64)]) {
        let owner = self.owner_index("\u{0}history");
        for &(at, weight) in spends {
            if weight == 0 {
                continue;
            }
            let seq = self.next_id;
            self.next_id += 1;
            self.put(at, weight);
            self.history.push(Entry { at, weight, owner, seq, dispatched: true });
        }
        self.next_prune = Instant::ZERO;
        self.prune(now);
    }

    fn owner_index(&mut self, name: &str) -> OwnerIndex {
        match self.owners.iter().position(|o| o == name) {
            Some(i) => i as OwnerIndex,
            None => {
                self.owners.push(String::from(name));
                (self.owners.len() - 1) as OwnerIndex
            }
        }
    }

    /// Count `weight` at `at` in every window.
    fn put(&mut self, at: Instant, weight: u64) {
        self.count(at, weight, true);
    }

    /// Take `weight` at `at` out of every window.
    fn take(&mut self, at: Instant, weight: u64) {
        self.count(at, weight, false);
    }

    /// Add or take back `weight` at `at`: at `at`, or at the start of every fixed window it
    /// may land in.
    fn count(&mut self, at: Instant, weight: u64, add: bool) {
        let margin = self.limits.fixed_windows;
        for load in &mut self.loads {
            let length = load.length();
            let mut count = |k: u64| {
                if add {
                    load.insert(Instant::from_nanos(k), weight);
                } else {
                    load.remove(Instant::from_nanos(k), weight);
                }
            };
            match margin {
                Some(margin) => starts(at, length, margin).for_each(count),
                None => count(at.as_nanos()),
            }
        }
    }

    fn rebuild_loads(&mut self) {
        for load in &mut self.loads {
            load.clear();
        }
        let spends: Vec<(Instant, u64)> = self.spends().collect();
        for (at, weight) in spends {
            self.put(at, weight);
        }
    }

    /// Drop entries no window can see any more (every eighth of the longest window, so the
    /// cost is spread thin). This pacer's queued calls among them are placed again when due.
    fn prune(&mut self, now: Instant) {
        if now < self.next_prune {
            return;
        }
        let horizon = self.horizon();
        self.next_prune = now + Span::from_nanos(horizon.as_nanos() / 8);
        let mut i = 0;
        while i < self.history.len() {
            let e = self.history[i];
            if e.at + horizon <= now {
                self.take(e.at, e.weight);
                self.history.swap_remove(i);
            } else {
                i += 1;
            }
        }
        let stale: Vec<(u64, Instant, u64)> = self
            .calls
            .iter()
            .filter_map(|(id, c)| c.at.filter(|at| !c.dispatched && *at + horizon <= now).map(|at| (id, at, c.weight)))
            .collect();
        for (id, at, weight) in stale {
            self.take(at, weight);
            if let Some(call) = self.calls.get_mut(id) {
                call.at = None;
            }
        }
    }

    /// The earliest instant `t ≥ from` at which `weight` fits every window, searched in
    /// bounded steps: each window skips at most [`MAX_STRETCHES`] stretches where it is over
    /// budget, and the windows take turns at most [`MAX_ROUNDS`] times. Past either bound the
    /// call goes after the last instant that could hold it back, where every window's load
    /// only falls: still an instant where it fits, never one that overspends, though a gap
    /// further away than the bounds reach stays unfilled.
    fn earliest_fit(&self, from: Instant, weight: u64) -> Instant {
        let mut t = from.as_nanos();
        for round in 0.. {
            let mut moved = false;
            // In a hurry, each window goes straight past its last rise.
            let stretches = if round >= MAX_ROUNDS { 0 } else { MAX_STRETCHES };
            for load in &self.loads {
                let fit = match self.limits.fixed_windows {
                    Some(margin) => fixed_fit(load, t, weight, margin, stretches),
                    None => load.fit(t, weight, stretches),
                };
                if fit != t {
                    t = fit;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        Instant::from_nanos(t)
    }
}

/// The starts (ns) of the first and last fixed window of `length` that a call at `at` may land
/// in, `margin` either way.
fn reach(at: Instant, length: Span, margin: Span) -> (u64, u64) {
    let length = length.as_nanos().max(1);
    let start = |t: u64| t - t % length;
    (start(at.as_nanos().saturating_sub(margin.as_nanos())), start(at.as_nanos().saturating_add(margin.as_nanos())))
}

/// The starts (ns) of every fixed window of `length` that a call at `at` may land in, `margin`
/// either way, in order (none past the clock's end).
fn starts(at: Instant, length: Span, margin: Span) -> impl Iterator<Item = u64> {
    let (first, last) = reach(at, length, margin);
    let length = length.as_nanos().max(1);
    core::iter::successors(Some(first), move |k| k.checked_add(length).filter(|&k| k <= last))
}

/// The earliest `t' ≥ t` at which `weight` fits every fixed window a call at `t'` may land in.
/// `load` holds each entry at the starts of its windows, so its load over `[k·L, (k+1)·L)` is
/// window `k`'s and every change is on a boundary: the rolling search from a window's start
/// answers that start when the window has room, else the start of the first window after it
/// that has; the call then goes `margin` after it, where it can only land from there on.
fn fixed_fit(load: &RollingWindow, mut t: u64, weight: u64, margin: Span, stretches: usize) -> u64 {
    'search: loop {
        for k in starts(Instant::from_nanos(t), load.length(), margin) {
            let room = load.fit(k, weight, stretches);
            if room != k {
                if room == u64::MAX {
                    return room;
                }
                t = room.saturating_add(margin.as_nanos());
                continue 'search;
            }
        }
        return t;
    }
}

/// How many over-budget stretches one window's search for a gap skips at most.
pub use crate::core::limit::MAX_STRETCHES;
/// How many times the windows take turns moving a placement at most.
pub const MAX_ROUNDS: usize = 16;

fn admissible(windows: &[Window], call_cap: Option<u64>, weight: u64) -> Result<(), PacerError> {
    if weight == 0 {
        return Err(PacerError::ZeroWeight);
    }
    if let Some(cap) = call_cap {
        if weight > cap {
            return Err(PacerError::ExceedsCallCap { weight, cap });
        }
    }
    for (window, w) in windows.iter().enumerate() {
        if weight > w.budget {
            return Err(PacerError::ExceedsBudget { weight, window, budget: w.budget });
        }
    }
    Ok(())
}

/// The checks of a configuration, and the windows placements count in: each window's length
/// plus the slack, with its budget, or the fixed windows with their margin.
fn validate(windows: &[Window], limits: &PacerLimits) -> Result<Vec<RollingWindow>, PacerError> {
    if windows.is_empty() {
        return Err(PacerError::NoWindows);
    }
    let mut loads = Vec::with_capacity(windows.len());
    for (i, w) in windows.iter().enumerate() {
        // Fixed windows have no slack: a late call keeps its place only in its windows.
        let slack = if limits.fixed_windows.is_some() { Span::ZERO } else { limits.slack };
        match RollingWindow::new(w.length + slack, w.budget) {
            // The window's own length decides: a slack never makes an empty window long enough.
            Ok(load) if !w.length.is_zero() => loads.push(load),
            _ => return Err(PacerError::EmptyWindow(i)),
        }
    }
    if limits.max_in_flight == 0 {
        return Err(PacerError::NoSlots);
    }
    Ok(loads)
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
        let Replan { moved, refused } =
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

    /// Open-Meteo's three windows, a minute compressed to 1 s, planned as fixed windows with a
    /// margin of 50 ms and the Pacer's default slack (100 ms, unused by fixed windows).
    fn fixed(margin_ms: u64) -> PacerCore {
        let windows = alloc::vec![
            Window { length: Span::from_secs(1), budget: 550_000 },
            Window { length: Span::from_secs(60), budget: 4_800_000 },
            Window { length: Span::from_secs(1_440), budget: 9_500_000 },
        ];
        let limits = PacerLimits {
            slack: Span::from_millis(100),
            max_in_flight: 4,
            fixed_windows: Some(Span::from_millis(margin_ms)),
            ..PacerLimits::default()
        };
        PacerCore::with_limits(windows, limits).unwrap()
    }

    #[test]
    fn with_fixed_windows_a_fan_out_fills_each_window_from_its_start() {
        // The 1,500-location × 16-day analysis: 15 calls of 96 locations and one of 60, asked
        // 300 ms into a window. Rolling windows send the calls 6–10 a window and the slack after
        // the first; fixed ones at the next boundary plus the margin.
        let mut p = fixed(50);
        let now = Instant::from_millis(1_796_528_088_300);
        let boundary = Instant::from_millis(1_796_528_089_000);
        let margin = Span::from_millis(50);
        let mut ats = alloc::vec::Vec::new();
        for i in 0..16 {
            ats.push(p.reserve(now, if i < 15 { 109_715 } else { 68_572 }).unwrap().at);
        }
        let second = Span::from_secs(1);
        let expected: alloc::vec::Vec<Instant> = (0..16)
            .map(|i| match i / 5 {
                0 => now,
                k => boundary + second.saturating_mul(k - 1) + margin,
            })
            .collect();
        assert_eq!(ats, expected);
        // finished within four windows: the last call 2.75 s after the first
        assert_eq!(ats[15] - now, Span::from_millis(2_750));

        let mut rolling = fixed(50);
        rolling
            .set_limits(now, rolling.windows().to_vec(), PacerLimits { fixed_windows: None, ..rolling.limits() })
            .unwrap();
        let last = (0..16).map(|i| rolling.reserve(now, if i < 15 { 109_715 } else { 68_572 }).unwrap().at).last();
        assert_eq!(last, Some(now + Span::from_millis(3_300)), "rolling: three windows and three slacks");
    }

    #[test]
    fn with_fixed_windows_no_window_the_upstream_counts_gets_more_than_its_budget() {
        // Calls of 1–114 asked at scattered instants; every call counted in each 1 s window it
        // may land in (its instant ± the margin) holds at most 550 there.
        let mut p = fixed(50);
        let mut seed = 0x2545_F491u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        let mut now = Instant::from_millis(1_796_528_088_000);
        let mut placed = alloc::vec::Vec::new();
        for _ in 0..3_000 {
            now = now + Span::from_millis(u64::from(next() % 40));
            let weight = 1_000 + u64::from(next() % 113_000);
            placed.push((p.reserve(now, weight).unwrap().at, weight));
        }
        let mut per_window = alloc::collections::BTreeMap::<u64, u64>::new();
        for (at, weight) in placed {
            let lo = (at.as_nanos() - 50_000_000) / 1_000_000_000;
            let hi = (at.as_nanos() + 50_000_000) / 1_000_000_000;
            for k in lo..=hi {
                *per_window.entry(k).or_default() += weight;
            }
        }
        let fullest = per_window.values().copied().max().unwrap();
        assert!(fullest <= 550_000, "a window holds {fullest}");
        assert!(fullest > 540_000, "and they are well used: {fullest}");
    }

    #[test]
    fn with_fixed_windows_a_late_call_keeps_its_place_while_it_lands_in_the_same_window() {
        let mut p = fixed(50);
        let t = Instant::from_millis(10_300);
        let a = p.reserve(t, 100_000).unwrap();
        // 600 ms late, far past the 100 ms slack, and still 50 ms before the boundary: it goes
        assert_eq!(p.due(Instant::from_millis(10_900), a.id), Due::Go);
        let b = p.reserve(t, 100_000).unwrap();
        // One that may land in the next window is placed again where it goes out (both
        // windows have room, so at once), counted in both.
        assert_eq!(p.due(Instant::from_millis(10_960), b.id), Due::Go);
        assert_eq!(p.snapshot(Instant::from_millis(10_999)).windows[0].spent, 200_000);
        assert_eq!(p.reserve(Instant::from_millis(10_960), 450_000).unwrap().at, Instant::from_millis(11_050));
        assert_eq!(p.reserve(Instant::from_millis(10_960), 1_000).unwrap().at, Instant::from_millis(12_050));
    }

    #[test]
    fn the_fixed_windows_a_call_may_land_in_end_at_the_clock_s_end() {
        // 5 ns divides 2^64 − 1, so the last window starts at the clock's very end.
        let at = Instant::from_nanos(u64::MAX - 3);
        let got: alloc::vec::Vec<u64> = starts(at, Span::from_nanos(5), Span::from_nanos(10)).collect();
        assert_eq!(got, [u64::MAX - 15, u64::MAX - 10, u64::MAX - 5, u64::MAX]);
        let got: alloc::vec::Vec<u64> = starts(Instant::from_secs(10), Span::from_secs(1), Span::ZERO).collect();
        assert_eq!(got, [10_000_000_000]);
    }

    #[test]
    fn with_fixed_windows_a_call_within_the_margin_of_a_boundary_counts_in_both_windows() {
        let mut p = fixed(50);
        let near = Instant::from_millis(10_970);
        p.reserve(near, 500_000).unwrap();
        // neither window has room for 100 more: after the next boundary and the margin
        assert_eq!(p.reserve(Instant::from_millis(10_000), 100_000).unwrap().at, Instant::from_millis(12_050));
        // 50 more fit beside it in either window: at once
        assert_eq!(p.reserve(Instant::from_millis(10_000), 50_000).unwrap().at, Instant::from_millis(10_000));
        // Now 550 in the first window, 500 in the second, 100 in the third: 1 more goes in the
        // second; the search in a hurry (no stretch stepped over) goes past the last rise, to
        // the third, which has room too.
        let fit = |stretches| {
            let t = fixed_fit(
                &p.loads[0],
                Instant::from_millis(10_000).as_nanos(),
                1_000,
                Span::from_millis(50),
                stretches,
            );
            Instant::from_nanos(t)
        };
        assert_eq!(fit(MAX_STRETCHES), Instant::from_millis(11_050));
        assert_eq!(fit(0), Instant::from_millis(12_050));
    }

    #[test]
    fn imported_history_counts_against_the_budget() {
        let mut p = pacer(10, 10);
        p.import(Instant::from_secs(5), &[(Instant::from_secs(1), 7), (Instant::from_secs(2), 3)]);
        assert_eq!(p.reserve(Instant::from_secs(5), 3).unwrap().at, Instant::from_secs(11));
        assert_eq!(p.snapshot(Instant::from_secs(5)).windows[0].spent, 10);
    }
}
