//! One provider's outbound budget: which calls may start now, at which mirror.
//!
//! A call starts when all of these hold, first come first served:
//!
//! ```text
//! a mirror has a free slot      in_flight < max_in_flight at that mirror (each mirror its own)
//! spacing                       now ≥ the last start + min_interval
//! weight                        the weights started in the last 60 s + this one ≤ weight_milli_per_minute
//!                               (the core's weighted rolling window, 60 s long)
//! ```
//!
//! Mirrors are taken in their order, a healthy one before one that failed less than
//! `retry_after_failure` ago; a caller that fails over names the mirrors it already tried.
//! Every start is a *permit*: it holds its mirror's slot until it is finished (failed or
//! not) or, for a permit with a lease, until the lease ends unrenewed, so a holder that
//! died never keeps a slot.
//!
//! The state machine is pure: the caller waits (until [`Gate::wake_at`], or until a
//! [`Gate::finish`]), then calls [`Gate::pump`] to start whoever can start.
//!
//! A permit handed to the app (`POST …/permit`) is *sealed* with a secret the caller draws
//! from a cryptographic source ([`Gate::seal`]): the app gives it back by that secret alone
//! ([`Gate::finish_sealed`]). Permit numbers never leave the edge, and a permit that was not
//! sealed (a proxied call's) cannot be given back from outside at all.

use crate::core::limit::RollingWindow;
use crate::core::time::{Instant, Span};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// The rolling window `weight_milli_per_minute` counts in.
pub const MINUTE: Span = Span::from_secs(60);
/// The most mirrors a provider may have (one bit each in an avoid set).
pub const MAX_MIRRORS: usize = 16;

/// A waiter's place in the queue: the core's upstream budgets number their waiters the same way.
pub use crate::core::budget::Ticket;

/// The numbers a [`Gate`] enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How many mirrors, 1 to [`MAX_MIRRORS`]: [`Gate::new`] saturates to that range (0
    /// counts as 1, more as [`MAX_MIRRORS`]; the rules file refuses a provider outside it).
    pub mirrors: usize,
    /// Calls in flight at once, at each mirror.
    pub max_in_flight: u32,
    /// The least time between two starts (any mirror).
    pub min_interval: Span,
    /// Thousandths of weighted calls started in any rolling minute; `None`: unweighed.
    /// `Some(0)` admits no weight: every call that weighs anything is refused
    /// ([`Refused::TooHeavy`]) and calls of weight 0 start uncounted. A budget above
    /// [`RollingWindow::MAX_BUDGET`] (about 9.2 × 10¹⁵ weighted calls) counts as that.
    pub weight_milli_per_minute: Option<u64>,
    /// How long a mirror that failed is tried only after the others.
    pub retry_after_failure: Span,
    /// How many callers may wait before new ones are refused at once.
    pub max_queue: usize,
}

/// A started call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The permit's number (give it to [`Gate::finish`]).
    pub permit: u64,
    /// The mirror it goes to (an index into the provider's mirrors).
    pub mirror: usize,
}

/// Why a call can never start, whatever the wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// It weighs more than a whole minute's budget (both in thousandths).
    TooHeavy {
        /// The call's weight.
        weight: u64,
        /// `weight_milli_per_minute`.
        budget: u64,
    },
    /// Too many callers wait already.
    QueueFull,
    /// Every mirror is in the avoid set: nothing is left to try.
    NoMirror,
}

/// The answer to [`Gate::ask`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// The call may start now.
    Granted(Grant),
    /// Wait: [`Gate::pump`] names this ticket when it starts.
    Queued(Ticket),
    /// Answer at once.
    Refused(Refused),
}

#[derive(Clone, Copy, Debug)]
struct Mirror {
    in_flight: u32,
    /// Until when it counts as failed (tried after the healthy ones).
    failed_until: Instant,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    mirror: usize,
    /// When it ends unless renewed; `None`: held until finished.
    until: Option<Instant>,
    lease: Option<Span>,
    /// The secret it was sealed with, when it was handed to the app.
    sealed: Option<u128>,
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    ticket: Ticket,
    weight: u64,
    avoid: u32,
    lease: Option<Span>,
}

/// The budget of one provider.
#[derive(Clone, Debug)]
pub struct Gate {
    limits: Limits,
    mirrors: Vec<Mirror>,
    last_start: Option<Instant>,
    /// The weight started in the rolling minute (`None` when unweighed or a budget of 0).
    minute: Option<RollingWindow>,
    held: HashMap<u64, Held, FixedState>,
    queue: VecDeque<Waiter>,
    next_permit: u64,
    next_ticket: Ticket,
}

impl Gate {
    /// A gate enforcing `limits`, numbering permits from `first_permit` (start it at a random
    /// number so that a permit of an earlier gate is never mistaken for one of this; 0 counts
    /// as 1, as no permit is numbered 0).
    /// [`Gate::limits`] gives the limits as enforced: `mirrors` within 1 to [`MAX_MIRRORS`],
    /// `weight_milli_per_minute` at most [`RollingWindow::MAX_BUDGET`].
    pub fn new(limits: Limits, first_permit: u64) -> Self {
        let limits = Limits {
            mirrors: limits.mirrors.clamp(1, MAX_MIRRORS),
            weight_milli_per_minute: limits.weight_milli_per_minute.map(|budget| budget.min(RollingWindow::MAX_BUDGET)),
            ..limits
        };
        let minute = match limits.weight_milli_per_minute {
            // No weight fits a budget of 0: `ask` refuses every call that weighs anything.
            None | Some(0) => None,
            Some(budget) => Some(
                RollingWindow::new(MINUTE, budget)
                    .expect("a minute with a budget of 1 to MAX_BUDGET is a valid window"),
            ),
        };
        Gate {
            limits,
            mirrors: alloc::vec![Mirror { in_flight: 0, failed_until: Instant::ZERO }; limits.mirrors],
            last_start: None,
            minute,
            held: HashMap::with_hasher(FixedState::with_seed(0x9a7e)),
            queue: VecDeque::new(),
            next_permit: first_permit.max(1),
            next_ticket: 1,
        }
    }

    /// The limits it enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Start a call weighing `weight` thousandths at a mirror not in `avoid` (bit `i` is
    /// mirror `i`), or queue for one; a call heavier than `weight_milli_per_minute` is refused (a
    /// call of weight 0 is never held back by the minute's weight). `lease`: the permit ends by itself that long after its
    /// start unless renewed; `None`, it is held until [`Gate::finish`].
    pub fn ask(&mut self, now: Instant, weight: u64, avoid: u32, lease: Option<Span>) -> Ask {
        self.expire(now);
        if let Some(budget) = self.limits.weight_milli_per_minute {
            if weight > budget {
                return Ask::Refused(Refused::TooHeavy { weight, budget });
            }
        }
        if self.all_avoided(avoid) {
            return Ask::Refused(Refused::NoMirror);
        }
        if self.queue.is_empty() {
            if let Some(mirror) = self.can_start(now, weight, avoid) {
                return Ask::Granted(self.start(now, weight, mirror, lease));
            }
        }
        if self.queue.len() >= self.limits.max_queue {
            return Ask::Refused(Refused::QueueFull);
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queue.push_back(Waiter { ticket, weight, avoid, lease });
        Ask::Queued(ticket)
    }

    /// Start the first waiter if it can start now: its ticket and grant. Call it until it
    /// gives `None` after anything that may free room (a finish, a wake-up).
    pub fn pump(&mut self, now: Instant) -> Option<(Ticket, Grant)> {
        self.expire(now);
        let head = *self.queue.front()?;
        let mirror = self.can_start(now, head.weight, head.avoid)?;
        self.queue.pop_front();
        Some((head.ticket, self.start(now, head.weight, mirror, head.lease)))
    }

    /// A waiter gives up: `true` if it was still waiting; `false` if [`Gate::pump`] already
    /// started it (it holds a permit now) or it never waited.
    pub fn leave(&mut self, ticket: Ticket) -> bool {
        match self.queue.iter().position(|w| w.ticket == ticket) {
            Some(at) => {
                self.queue.remove(at);
                true
            }
            None => false,
        }
    }

    /// When waiting alone may let the first waiter start, or a lease end: the instant to
    /// wake and [`Gate::pump`]. `None`: only a finish can help (or nobody waits).
    pub fn wake_at(&self, now: Instant) -> Option<Instant> {
        let head = self.queue.front()?;
        let lease_end = self.held.values().filter_map(|h| h.until).min();
        let free_mirror = self.pick(now, head.avoid).is_some();
        let by_time = if free_mirror { self.earliest_start(now, head.weight) } else { None };
        match (by_time, lease_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The permit's call is over: its slot comes back. `failed`: its mirror failed (a
    /// connection error, a 5xx, a 429) and is tried after the others for
    /// `retry_after_failure`. `false` when no such permit is held (it ended with its lease,
    /// or was finished already).
    pub fn finish(&mut self, permit: u64, failed: bool, now: Instant) -> bool {
        let Some(held) = self.held.remove(&permit) else { return false };
        let mirror = &mut self.mirrors[held.mirror];
        mirror.in_flight = mirror.in_flight.saturating_sub(1);
        if failed {
            mirror.failed_until = now + self.limits.retry_after_failure;
        }
        true
    }

    /// Seal a held `permit` with `secret` (128 bits from a cryptographic source), so that
    /// [`Gate::finish_sealed`] can give it back by the secret. `false`, and nothing sealed,
    /// when the permit is not held, is sealed already, or the secret is in use (two draws
    /// alike: give the permit back rather than share a secret).
    pub fn seal(&mut self, permit: u64, secret: u128) -> bool {
        if self.sealed_with(secret).is_some() {
            return false;
        }
        match self.held.get_mut(&permit) {
            Some(held) if held.sealed.is_none() => {
                held.sealed = Some(secret);
                true
            }
            _ => false,
        }
    }

    /// [`Gate::finish`] for the permit sealed with `secret`; `false` when no held permit was
    /// sealed with it (it ended with its lease, was given back already, or never existed).
    /// A scan of the permits held (a rare call: the app giving a permit back).
    pub fn finish_sealed(&mut self, secret: u128, failed: bool, now: Instant) -> bool {
        self.expire(now);
        match self.sealed_with(secret) {
            Some(permit) => self.finish(permit, failed, now),
            None => false,
        }
    }

    fn sealed_with(&self, secret: u128) -> Option<u64> {
        self.held.iter().find(|(_, held)| held.sealed == Some(secret)).map(|(&permit, _)| permit)
    }

    /// Keep a leased permit for another lease from `now`; `false` when it already ended.
    pub fn renew(&mut self, permit: u64, now: Instant) -> bool {
        self.expire(now);
        match self.held.get_mut(&permit) {
            Some(held) => {
                if let Some(lease) = held.lease {
                    held.until = Some(now + lease);
                }
                true
            }
            None => false,
        }
    }

    /// Calls in flight at `mirror`.
    pub fn in_flight(&self, mirror: usize) -> u32 {
        self.mirrors.get(mirror).map_or(0, |m| m.in_flight)
    }

    /// The ticket first in line, if anyone waits.
    pub fn first_waiting(&self) -> Option<Ticket> {
        self.queue.front().map(|w| w.ticket)
    }

    /// Callers waiting.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Thousandths of weight started in the minute up to `now`.
    pub fn spent(&self, now: Instant) -> u64 {
        self.minute.as_ref().map_or(0, |m| m.used(now))
    }

    fn all_avoided(&self, avoid: u32) -> bool {
        (0..self.limits.mirrors).all(|i| avoid & (1 << i) != 0)
    }

    /// The mirror a call avoiding `avoid` would take now: the first healthy one with a free
    /// slot, else the first failed one with a free slot.
    fn pick(&self, now: Instant, avoid: u32) -> Option<usize> {
        let free = |i: &usize| avoid & (1 << i) == 0 && self.mirrors[*i].in_flight < self.limits.max_in_flight;
        let mut open = (0..self.mirrors.len()).filter(free);
        let first = open.next()?;
        if self.mirrors[first].failed_until <= now {
            return Some(first);
        }
        Some(open.find(|&i| self.mirrors[i].failed_until <= now).unwrap_or(first))
    }

    fn can_start(&self, now: Instant, weight: u64, avoid: u32) -> Option<usize> {
        let mirror = self.pick(now, avoid)?;
        (self.earliest_start(now, weight)? <= now).then_some(mirror)
    }

    /// The first instant from `now` at which spacing and the weight window allow a call of
    /// `weight` (slots aside); `None`: never (a weight above the budget, which `ask` refuses).
    fn earliest_start(&self, now: Instant, weight: u64) -> Option<Instant> {
        let spaced = self.last_start.map_or(now, |last| (last + self.limits.min_interval).max(now));
        match &self.minute {
            None if weight > 0 && self.limits.weight_milli_per_minute == Some(0) => None,
            None => Some(spaced),
            Some(minute) => match minute.eta(now, weight) {
                Ok(at) => Some(spaced.max(at)),
                Err(_too_heavy) => None,
            },
        }
    }

    fn start(&mut self, now: Instant, weight: u64, mirror: usize, lease: Option<Span>) -> Grant {
        self.mirrors[mirror].in_flight += 1;
        self.last_start = Some(now);
        if let Some(minute) = &mut self.minute {
            // `can_start` saw it fit at `now`; what left the minute is folded away.
            minute.prune(now);
            minute.insert(now, weight);
        }
        let permit = self.next_permit;
        self.next_permit += 1;
        self.held.insert(permit, Held { mirror, until: lease.map(|l| now + l), lease, sealed: None });
        Grant { permit, mirror }
    }

    /// End the leases that ran out.
    fn expire(&mut self, now: Instant) {
        let ended: Vec<u64> =
            self.held.iter().filter(|(_, h)| h.until.is_some_and(|u| u <= now)).map(|(id, _)| *id).collect();
        for id in ended {
            self.finish(id, false, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    fn limits() -> Limits {
        Limits {
            mirrors: 3,
            max_in_flight: 2,
            min_interval: Span::ZERO,
            weight_milli_per_minute: None,
            retry_after_failure: Span::from_secs(60),
            max_queue: 100,
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn granted(ask: Ask) -> Grant {
        match ask {
            Ask::Granted(g) => g,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    #[test]
    fn each_mirror_has_its_own_slots_taken_in_order() {
        let mut gate = Gate::new(limits(), 1);
        let mirrors: Vec<usize> = (0..6).map(|_| granted(gate.ask(at(0), 1000, 0, None)).mirror).collect();
        assert_eq!(mirrors, [0, 0, 1, 1, 2, 2]);
        assert!(matches!(gate.ask(at(0), 1000, 0, None), Ask::Queued(_)), "every mirror is full");
        assert_eq!((0..3).map(|m| gate.in_flight(m)).collect::<Vec<_>>(), [2, 2, 2]);
    }

    #[test]
    fn a_failed_mirror_frees_its_slot_at_once_and_is_tried_last_until_its_cooldown_ends() {
        let mut gate = Gate::new(limits(), 1);
        let first = granted(gate.ask(at(0), 1000, 0, None));
        assert_eq!(first.mirror, 0);
        assert!(gate.finish(first.permit, true, at(10)));
        assert_eq!(gate.in_flight(0), 0, "released before the next mirror is tried");
        let retry = granted(gate.ask(at(10), 1000, 1, None));
        assert_eq!(retry.mirror, 1, "the failover skips the mirror it tried");
        let fresh = granted(gate.ask(at(20), 1000, 0, None));
        assert_eq!(fresh.mirror, 1, "a failed mirror goes after the healthy ones");
        let later = granted(gate.ask(at(60_010), 1000, 0, None));
        assert_eq!(later.mirror, 0, "healthy again after retry_after_failure");
        assert_eq!(gate.ask(at(60_010), 1000, 0b111, None), Ask::Refused(Refused::NoMirror));
    }

    #[test]
    fn starts_are_spaced_by_min_interval_and_the_waiter_is_told_when_to_wake() {
        let mut gate = Gate::new(Limits { min_interval: Span::from_millis(3_500), max_in_flight: 5, ..limits() }, 1);
        granted(gate.ask(at(0), 1000, 0, None));
        let Ask::Queued(t) = gate.ask(at(100), 1000, 0, None) else { panic!("spaced") };
        assert_eq!(gate.wake_at(at(100)), Some(at(3_500)));
        assert_eq!(gate.pump(at(3_499)), None);
        let (ticket, _) = gate.pump(at(3_500)).expect("due");
        assert_eq!(ticket, t);
        assert!(!gate.leave(t), "started already");
    }

    #[test]
    fn no_rolling_minute_ever_holds_more_than_the_weight_budget() {
        let budget = 550_000;
        let mut gate = Gate::new(
            Limits {
                weight_milli_per_minute: Some(budget),
                max_in_flight: 1_000,
                mirrors: 1,
                max_queue: 10_000,
                ..limits()
            },
            1,
        );
        // A burst of 3 minutes' worth, weights 1 to 57.
        let weights: Vec<u64> = (0..200u64).map(|i| (1 + i * 7 % 57) * 1000).collect();
        let total: u64 = weights.iter().sum();
        assert!(total >= 3 * budget);
        let mut starts = Vec::new();
        let mut queued = BTreeMap::new();
        let mut now = at(0);
        for &w in &weights {
            match gate.ask(now, w, 0, Some(Span::from_secs(1))) {
                Ask::Granted(_) => starts.push((now, w)),
                Ask::Queued(ticket) => {
                    queued.insert(ticket, w);
                }
                Ask::Refused(r) => panic!("{r:?}"),
            }
        }
        let mut guard = 0;
        while gate.waiting() > 0 {
            guard += 1;
            assert!(guard < 10_000);
            now = gate.wake_at(now).expect("time frees weight");
            while let Some((ticket, _)) = gate.pump(now) {
                starts.push((now, queued[&ticket]));
            }
        }
        assert_eq!(starts.len(), weights.len());
        for (i, &(t, _)) in starts.iter().enumerate() {
            let load: u64 = starts[..=i].iter().filter(|(s, _)| *s + MINUTE > t).map(|(_, w)| w).sum();
            assert!(load <= budget, "{load} in the minute up to {t:?}");
        }
        assert!(now >= at(120_000), "three minutes' worth takes two more minutes");
    }

    #[test]
    fn a_call_heavier_than_a_minute_is_refused_at_once() {
        let mut gate = Gate::new(Limits { weight_milli_per_minute: Some(550_000), ..limits() }, 1);
        assert_eq!(
            gate.ask(at(0), 551_000, 0, None),
            Ask::Refused(Refused::TooHeavy { weight: 551_000, budget: 550_000 })
        );
    }

    #[test]
    fn a_lease_not_renewed_gives_its_slot_back_and_a_renewed_one_holds() {
        let mut gate = Gate::new(Limits { mirrors: 1, max_in_flight: 1, ..limits() }, 7);
        let lease = Some(Span::from_secs(2));
        let a = granted(gate.ask(at(0), 1000, 0, lease));
        assert_eq!(a.permit, 7);
        let Ask::Queued(b) = gate.ask(at(1), 1000, 0, lease) else { panic!("full") };
        assert_eq!(gate.wake_at(at(1)), Some(at(2_000)));
        assert!(gate.renew(a.permit, at(1_500)));
        assert_eq!(gate.pump(at(2_000)), None, "renewed until 3.5 s");
        let (ticket, grant) = gate.pump(at(3_500)).expect("the lease ended");
        assert_eq!(ticket, b);
        assert!(!gate.finish(a.permit, false, at(3_600)), "it ended with its lease");
        assert!(gate.finish(grant.permit, false, at(3_600)));
    }

    #[test]
    fn a_permit_is_given_back_by_its_secret_only_and_an_unsealed_one_not_at_all() {
        let mut gate = Gate::new(Limits { mirrors: 1, max_in_flight: 2, ..limits() }, 1);
        let app = granted(gate.ask(at(0), 1000, 0, Some(Span::from_secs(60))));
        let proxied = granted(gate.ask(at(0), 1000, 0, None));
        let secret = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;
        assert!(gate.seal(app.permit, secret));
        assert!(!gate.seal(proxied.permit, secret), "one secret, one permit");
        assert!(!gate.finish_sealed(secret + 1, false, at(1)), "a guessed secret frees nothing");
        assert!(!gate.finish_sealed(u128::from(proxied.permit), false, at(1)), "a number is not a secret");
        assert_eq!(gate.in_flight(0), 2);
        assert!(gate.finish_sealed(secret, false, at(1)));
        assert!(!gate.finish_sealed(secret, false, at(2)), "given back once");
        assert_eq!(gate.in_flight(0), 1, "the proxied call still holds its slot");
    }

    #[test]
    fn a_sealed_permit_that_ends_with_its_lease_forgets_its_secret() {
        let mut gate = Gate::new(Limits { mirrors: 1, max_in_flight: 1, ..limits() }, 1);
        let app = granted(gate.ask(at(0), 1000, 0, Some(Span::from_secs(2))));
        assert!(gate.seal(app.permit, 42));
        assert!(!gate.finish_sealed(42, false, at(2_000)), "its lease ended");
        let next = granted(gate.ask(at(2_000), 1000, 0, None));
        assert!(gate.seal(next.permit, 42), "the secret is free again");
    }

    #[test]
    fn waiters_start_first_come_first_served_and_a_full_queue_refuses() {
        let mut gate = Gate::new(Limits { mirrors: 1, max_in_flight: 1, max_queue: 2, ..limits() }, 1);
        let a = granted(gate.ask(at(0), 1000, 0, None));
        let Ask::Queued(b) = gate.ask(at(0), 1000, 0, None) else { panic!() };
        let Ask::Queued(c) = gate.ask(at(0), 1000, 0, None) else { panic!() };
        assert_eq!(gate.ask(at(0), 1000, 0, None), Ask::Refused(Refused::QueueFull));
        assert_eq!(gate.wake_at(at(0)), None, "only a finish helps");
        assert!(gate.leave(b));
        gate.finish(a.permit, false, at(1));
        assert_eq!(gate.pump(at(1)).map(|(t, _)| t), Some(c));
        assert_eq!(gate.pump(at(1)), None);
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use alloc::collections::BTreeMap;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            /// Ask for a call of this weight (thousandths), avoiding these mirrors.
            Ask(u64, u32),
            /// Finish the n-th held permit (modulo), failed or not.
            Finish(usize, bool),
            /// Let this many ms pass, then start whoever can.
            Wait(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (1_000u64..=12_000, 0u32..8).prop_map(|(w, a)| Op::Ask(w, a)),
                (0usize..16, any::<bool>()).prop_map(|(i, f)| Op::Finish(i, f)),
                (0u64..20_000).prop_map(Op::Wait),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// Whatever the callers do: no mirror ever has more than max_in_flight calls,
            /// no two starts are closer than min_interval, no rolling minute holds more
            /// than the weight budget, and queued callers start in the order they came.
            #[test]
            fn every_limit_holds_at_every_start(
                ops in proptest::collection::vec(op(), 1..200),
                max_in_flight in 1u32..4,
                spacing in 0u64..5_000,
                leased in any::<bool>(),
            ) {
                let limits = Limits {
                    mirrors: 3,
                    max_in_flight,
                    min_interval: Span::from_millis(spacing),
                    weight_milli_per_minute: Some(30_000),
                    retry_after_failure: Span::from_secs(60),
                    max_queue: 50,
                };
                let lease = leased.then(|| Span::from_secs(5));
                let mut gate = Gate::new(limits, 1);
                let mut now = Instant::from_secs(1_000);
                let mut held: Vec<Grant> = Vec::new();
                let mut starts: Vec<(Instant, u64)> = Vec::new();
                let mut weights = BTreeMap::new();
                let mut queued: Vec<Ticket> = Vec::new();
                let mut started: Vec<Ticket> = Vec::new();
                let mut record = |gate: &Gate, grant: Grant, weight: u64, now: Instant, held: &mut Vec<Grant>| {
                    prop_assert!(gate.in_flight(grant.mirror) <= max_in_flight);
                    if let Some(&(last, _)) = starts.last() {
                        prop_assert!(now >= last + Span::from_millis(spacing), "starts {last:?} and {now:?} too close");
                    }
                    starts.push((now, weight));
                    let load: u64 = starts.iter().filter(|(s, _)| *s + MINUTE > now).map(|(_, w)| w).sum();
                    prop_assert!(load <= 30_000, "{load} in the minute up to {now:?}");
                    held.push(grant);
                    Ok(())
                };
                for op in ops {
                    match op {
                        Op::Ask(weight, avoid) => match gate.ask(now, weight, avoid, lease) {
                            Ask::Granted(grant) => {
                                prop_assert_eq!(avoid & (1 << grant.mirror), 0, "an avoided mirror was given");
                                record(&gate, grant, weight, now, &mut held)?;
                            }
                            Ask::Queued(ticket) => {
                                weights.insert(ticket, weight);
                                queued.push(ticket);
                            }
                            Ask::Refused(_) => {}
                        },
                        Op::Finish(i, failed) if !held.is_empty() => {
                            let grant = held.remove(i % held.len());
                            gate.finish(grant.permit, failed, now);
                        }
                        Op::Finish(..) => {}
                        Op::Wait(ms) => {
                            now = now + Span::from_millis(ms);
                            // Leases that ended free their slots: forget those permits.
                            while let Some((ticket, grant)) = gate.pump(now) {
                                started.push(ticket);
                                record(&gate, grant, weights[&ticket], now, &mut held)?;
                            }
                        }
                    }
                }
                let order: Vec<Ticket> = queued.iter().copied().filter(|t| started.contains(t)).collect();
                prop_assert_eq!(order, started, "queued callers start first come first served");
            }
        }
    }
}
