//! One proxied call's way through a provider's mirrors, decided here and carried out by the
//! Worker: which mirrors it may still go to, how long an attempt may take, and what each
//! attempt's outcome means.
//!
//! ```text
//! ask the gate (avoiding the mirrors tried) ─▶ granted ─▶ call the mirror, until the attempt's deadline
//!      │                                                    │
//!      ├─ refused / nothing started in max_wait ─▶ end      ├─ answered, not 5xx or 429 ─▶ pass it on
//!      │    (after a failed attempt: the last failure)      ├─ 5xx, 429 ─▶ keep it, mirror failed ─▶ next
//!      └─ every mirror tried ─▶ end with the last failure   ├─ no connection, or no answer by the
//!                                                           │   deadline ─▶ mirror failed ─▶ next
//!                                                           └─ the app went away ─▶ end, nobody's fault
//! ```
//!
//! An attempt's deadline ([`Provider::timeout`](super::Provider::timeout)) runs from its start
//! to the provider's status line: a mirror that never answers holds its slot that long, then
//! is failed over like one that refused the connection.

use super::gate::Refused;
use crate::core::time::{Instant, Span};

/// How long an attempt may wait for the provider's answer unless the rules say otherwise.
pub const DEFAULT_TIMEOUT: Span = Span::from_secs(30);

/// What became of one attempt at a mirror.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The mirror answered with this status.
    Answered(u16),
    /// No connection, or it broke before an answer.
    Unreachable,
    /// No answer by the attempt's deadline (the call is cancelled).
    TimedOut,
    /// The app went away, and its call was cancelled with it.
    Left,
}

/// Why no attempt could start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoStart {
    /// The gate refused the call.
    Refused(Refused),
    /// Nothing started within `max_wait`, or the app left while it waited.
    Late,
}

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Pass this answer on to the app.
    PassOn,
    /// The mirror failed (give its permit back marked failed); try the next. `keep`: this
    /// attempt's answer replaces the failure kept so far (what the app gets if every mirror
    /// fails); otherwise any kept one stays.
    TryNext {
        /// Whether to keep this answer as the last failure.
        keep: bool,
    },
    /// Stop: nothing more is tried.
    End(End),
}

/// How a call ends without an answer to pass on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Mirrors were tried and failed: pass on the last failure kept, or, with none, the
    /// provider could not be reached (`502`).
    Failed,
    /// It can never start (`413` too heavy, or `503` the queue is full).
    Refused(Refused),
    /// Nothing started in time, or the app left: `503` busy (nothing counts against the
    /// provider).
    Late,
}

/// The mirrors one call has tried, and whether it has tried any.
///
/// # Examples
/// ```
/// use sluicegate::egress::call::{Attempt, End, Failover, Next};
/// let mut call = Failover::default();
/// call.started(0);
/// assert_eq!(call.after(Attempt::Answered(503)), Next::TryNext { keep: true });
/// assert_eq!(call.avoid(), 0b1, "mirror 0 is not tried again");
/// call.started(1);
/// assert_eq!(call.after(Attempt::TimedOut), Next::TryNext { keep: false });
/// call.started(2);
/// assert_eq!(call.after(Attempt::Answered(200)), Next::PassOn);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failover {
    avoid: u32,
    tried: bool,
}

impl Failover {
    /// The mirrors not to start at (bit `i` is mirror `i`).
    pub const fn avoid(&self) -> u32 {
        self.avoid
    }

    /// An attempt started at `mirror`.
    pub fn started(&mut self, mirror: usize) {
        self.tried = true;
        if mirror < 32 {
            self.avoid |= 1 << mirror;
        }
    }

    /// No attempt could start: how the call ends. After a failed attempt any refusal is the
    /// end of the failover (the app gets the last failure); before one, the refusal itself.
    pub fn no_start(&self, why: NoStart) -> End {
        match why {
            NoStart::Refused(Refused::NoMirror) => End::Failed,
            _ if self.tried => End::Failed,
            NoStart::Refused(refused) => End::Refused(refused),
            NoStart::Late => End::Late,
        }
    }

    /// What the attempt just made means.
    pub fn after(&self, attempt: Attempt) -> Next {
        match attempt {
            Attempt::Answered(status) if passes(status) => Next::PassOn,
            // A status no response can carry on (above 599) is kept as no answer at all.
            Attempt::Answered(status) => Next::TryNext { keep: status <= 599 },
            Attempt::Unreachable | Attempt::TimedOut => Next::TryNext { keep: false },
            Attempt::Left => Next::End(End::Late),
        }
    }
}

/// Whether an answer with `status` is the provider's answer to pass on, rather than a
/// failure of its mirror: anything but a 5xx or a 429.
pub const fn passes(status: u16) -> bool {
    status < 500 && status != 429
}

/// When an attempt started at `now` gives up waiting for its answer.
pub fn attempt_deadline(now: Instant, timeout: Span) -> Instant {
    now + timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_that_never_answers_is_failed_over_like_one_that_refused() {
        let mut call = Failover::default();
        call.started(0);
        assert_eq!(call.after(Attempt::TimedOut), call.after(Attempt::Unreachable));
        assert_eq!(call.after(Attempt::TimedOut), Next::TryNext { keep: false });
        assert_eq!(call.avoid(), 1);
        assert_eq!(attempt_deadline(Instant::from_secs(5), DEFAULT_TIMEOUT), Instant::from_secs(35));
    }

    #[test]
    fn statuses_pass_on_unless_the_mirror_failed() {
        let call = Failover::default();
        for status in [200, 204, 301, 304, 400, 404, 499] {
            assert_eq!(call.after(Attempt::Answered(status)), Next::PassOn, "{status}");
        }
        for status in [429, 500, 502, 503, 599] {
            assert_eq!(call.after(Attempt::Answered(status)), Next::TryNext { keep: true }, "{status}");
        }
        assert_eq!(call.after(Attempt::Answered(600)), Next::TryNext { keep: false });
        assert_eq!(call.after(Attempt::Left), Next::End(End::Late), "the app leaving is no mirror's fault");
    }

    #[test]
    fn a_refusal_after_a_failed_attempt_ends_with_the_failure_before_one_with_itself() {
        let heavy = Refused::TooHeavy { weight: 2, budget: 1 };
        let fresh = Failover::default();
        assert_eq!(fresh.no_start(NoStart::Refused(heavy)), End::Refused(heavy));
        assert_eq!(fresh.no_start(NoStart::Refused(Refused::QueueFull)), End::Refused(Refused::QueueFull));
        assert_eq!(fresh.no_start(NoStart::Late), End::Late);
        assert_eq!(fresh.no_start(NoStart::Refused(Refused::NoMirror)), End::Failed);
        let mut tried = Failover::default();
        tried.started(1);
        assert_eq!(tried.avoid(), 0b10);
        for why in [NoStart::Late, NoStart::Refused(Refused::QueueFull), NoStart::Refused(heavy)] {
            assert_eq!(tried.no_start(why), End::Failed, "{why:?}");
        }
    }
}
