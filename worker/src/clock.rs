//! The edge's clock: read once per request (the development build can run it faster).

#[cfg(feature = "dev-origin")]
use crate::dev::clock as dev_clock;
use sluicegate::time::{Instant, Span};

pub(crate) fn now() -> Instant {
    let ms = js_sys::Date::now();
    #[cfg(feature = "dev-origin")]
    let ms = dev_clock::clock(ms);
    Instant::from_millis(ms.max(0.0) as u64)
}

/// The instant a rule of a request that arrived at `started` is checked at: the clock as it
/// is checked (an earlier rule's counter may have taken a while). A development clock
/// (`SLUICEGATE_CLOCK`, set for `sluicegate replay`) decides every rule of a request at the
/// instant it arrived, as the simulator replays it: a request is one instant.
pub(crate) fn rules_now(started: Instant) -> Instant {
    #[cfg(feature = "dev-origin")]
    if dev_clock::is_set() {
        return started;
    }
    let _ = started;
    now()
}

/// The instant a counter decides at, asked by a request's rule at `asked_ms` by the Worker's
/// clock: its own clock (counters keep time themselves), or under a development clock the
/// request's instant ([`rules_now`]).
pub(crate) fn counter_now(asked_ms: f64) -> Instant {
    #[cfg(feature = "dev-origin")]
    if dev_clock::is_set() && asked_ms.is_finite() && asked_ms >= 0.0 {
        return Instant::from_millis(asked_ms as u64);
    }
    let _ = asked_ms;
    now()
}

/// A request's turn at the edge's decisions under a development clock (`sluicegate replay`):
/// held from its checks before the body is read through its tenant, so that no other
/// request's decisions come between them and each request is decided at its instant, in the
/// order the simulator replays. Nothing to hold with the real clock.
pub(crate) struct Turn {
    #[cfg(feature = "dev-origin")]
    _held: Option<dev_clock::Turn>,
}

/// Wait for this request's [`Turn`].
pub(crate) async fn turn() -> Turn {
    Turn {
        #[cfg(feature = "dev-origin")]
        _held: dev_clock::take_turn().await,
    }
}

/// The real milliseconds of a timer that is to last `span` of the edge's clock (a
/// development clock that runs K times as fast: K times fewer).
pub(crate) fn timer_ms(span: Span) -> f64 {
    let ms = span.as_millis_ceil() as f64;
    #[cfg(feature = "dev-origin")]
    let ms = dev_clock::real_ms(ms);
    ms
}
