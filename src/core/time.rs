//! Integer time: an [`Instant`] on some caller-chosen clock and a [`Span`] between two,
//! both in nanoseconds, with saturating arithmetic. The core never reads a clock.
//!
//! 2^64 ns is about 584 years, so any epoch (Unix, page load, test zero) fits.

use core::fmt;
use core::ops::{Add, Sub};

/// A point in time, in nanoseconds since an epoch the caller chooses.
///
/// # Examples
/// ```
/// use sluicegate::{Instant, Span};
/// let t = Instant::from_millis(1_500);
/// assert_eq!(t + Span::from_secs(1), Instant::from_millis(2_500));
/// assert_eq!(Instant::from_millis(2_500) - t, Span::from_secs(1));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A length of time in nanoseconds. Never negative: subtraction saturates at zero.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(u64);

const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Instant {
    /// The epoch itself.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }
    /// An instant `ms` milliseconds after the epoch (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(NANOS_PER_MILLI))
    }
    /// An instant `s` seconds after the epoch (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Instant(s.saturating_mul(NANOS_PER_SEC))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole milliseconds since the epoch (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / NANOS_PER_MILLI
    }
    /// The span from `earlier` to `self`, or zero when `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Span {
        Span(self.0.saturating_sub(earlier.0))
    }
}

impl Span {
    /// No time at all.
    pub const ZERO: Span = Span(0);
    /// The longest representable span.
    pub const MAX: Span = Span(u64::MAX);

    /// A span of `nanos` nanoseconds.
    pub const fn from_nanos(nanos: u64) -> Self {
        Span(nanos)
    }
    /// A span of `ms` milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Span(ms.saturating_mul(NANOS_PER_MILLI))
    }
    /// A span of `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Span(s.saturating_mul(NANOS_PER_SEC))
    }
    /// Nanoseconds in this span.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole milliseconds, rounded up: a wait of 1 ns is a wait of 1 ms.
    pub const fn as_millis_ceil(self) -> u64 {
        self.0.div_ceil(NANOS_PER_MILLI)
    }
    /// Whole seconds, rounded up: what `Retry-After` and `t=` carry.
    pub const fn as_secs_ceil(self) -> u64 {
        self.0.div_ceil(NANOS_PER_SEC)
    }
    /// `self * n`, saturating.
    pub const fn saturating_mul(self, n: u64) -> Span {
        Span(self.0.saturating_mul(n))
    }
    /// `self - other`, or zero.
    pub const fn saturating_sub(self, other: Span) -> Span {
        Span(self.0.saturating_sub(other.0))
    }
    /// Whether this span is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Span> for Instant {
    type Output = Instant;
    fn add(self, rhs: Span) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Span> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Span) -> Instant {
        Instant(self.0.saturating_sub(rhs.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Span;
    fn sub(self, rhs: Instant) -> Span {
        self.saturating_since(rhs)
    }
}

impl Add for Span {
    type Output = Span;
    fn add(self, rhs: Span) -> Span {
        Span(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Span {
    type Output = Span;
    fn sub(self, rhs: Span) -> Span {
        self.saturating_sub(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({}ns)", self.0)
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Span({}ns)", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtraction_saturates_instead_of_wrapping() {
        assert_eq!(Instant::from_secs(1) - Instant::from_secs(2), Span::ZERO);
        assert_eq!(Instant::ZERO - Span::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::from_nanos(u64::MAX) + Span::from_secs(1), Instant::from_nanos(u64::MAX));
    }

    #[test]
    fn retry_after_seconds_round_up() {
        assert_eq!(Span::from_nanos(1).as_secs_ceil(), 1);
        assert_eq!(Span::from_secs(10).as_secs_ceil(), 10);
        assert_eq!((Span::from_secs(9) + Span::from_nanos(1)).as_secs_ceil(), 10);
        assert_eq!(Span::ZERO.as_secs_ceil(), 0);
        assert_eq!(Span::from_nanos(1).as_millis_ceil(), 1);
    }
}
