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

/// The real milliseconds of a timer that is to last `span` of the edge's clock (a
/// development clock that runs K times as fast: K times fewer).
pub(crate) fn timer_ms(span: Span) -> f64 {
    let ms = span.as_millis_ceil() as f64;
    #[cfg(feature = "dev-origin")]
    let ms = dev_clock::real_ms(ms);
    ms
}
