//! `Retry-After` (RFC 9110 §10.2.3) as a server sends it with a 429: delay-seconds, or an
//! HTTP-date (§5.6.7) in any of the three forms a recipient must accept.
//!
//! ```text
//! Retry-After: 120                              delay-seconds
//! Retry-After: Wed, 08 Jul 2026 12:00:30 GMT    IMF-fixdate (what servers send today)
//! Retry-After: Wednesday, 08-Jul-26 12:00:30 GMT  obsolete RFC 850 form (two-digit year)
//! Retry-After: Wed Jul  8 12:00:30 2026         obsolete asctime form (GMT implied)
//! ```
//!
//! Decisions:
//! - anything else is *no* `Retry-After` ([`RetryAfterError`]): the 429 still lowers the
//!   rate, but holds nothing back. That covers dates in other formats (ISO 8601, a zone
//!   other than `GMT`, a day of month that does not exist), negative or exponent numbers
//!   (`-5`, `1e3`) and the empty string;
//! - delay-seconds may carry a decimal fraction (`1.5`: 1.5 s; digits past the ninth are
//!   dropped), a leniency kept from earlier releases; a delay beyond [`Span::MAX`]
//!   saturates;
//! - names (day, month, `GMT`) are matched case-insensitively, the day name is not
//!   checked against the date, and surrounding (ASCII) whitespace is ignored; everything else is
//!   the grammar's exact spacing;
//! - a second of 60 (a leap second, which the grammar allows) is the next minute's 0;
//! - a date in the past (or at `now`) means a wait of zero; a date before 1970 is the Unix
//!   epoch, in the past for any `now`; a date after 2554 (the end of [`Instant`]'s range)
//!   saturates, as far in the future as an `Instant` goes.

use super::cache::{civil_from_days, days_from_civil, days_in_month};
use crate::core::time::{Instant, Span};
use core::fmt;

/// A parsed `Retry-After`: how long to wait, or until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// delay-seconds: wait this long from the moment the response arrived.
    Delay(Span),
    /// An HTTP-date, as Unix time (an [`Instant`] since 1970-01-01T00:00:00Z).
    At(Instant),
}

/// Why a `Retry-After` value was not read: in either case the response asks for no wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfterError {
    /// The value is empty (or only whitespace).
    Empty,
    /// The value is neither delay-seconds nor an HTTP-date.
    Malformed,
}

impl fmt::Display for RetryAfterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryAfterError::Empty => f.write_str("Retry-After is empty"),
            RetryAfterError::Malformed => f.write_str("Retry-After is neither delay-seconds nor an HTTP-date"),
        }
    }
}

impl RetryAfter {
    /// Parse a `Retry-After` value. `now` is the Unix time the response arrived: an RFC 850
    /// date's two-digit year is the one within 50 years of `now`'s year (RFC 9110: a date
    /// that appears more than 50 years in the future is in the past century).
    ///
    /// # Errors
    /// [`RetryAfterError::Empty`] for an empty value, [`RetryAfterError::Malformed`] for
    /// anything that is neither delay-seconds nor an HTTP-date.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::RetryAfter;
    /// use sluicegate::{Instant, Span};
    /// let now = Instant::from_secs(1_783_512_000); // 2026-07-08T12:00:00Z
    /// assert_eq!(RetryAfter::parse("120", now), Ok(RetryAfter::Delay(Span::from_secs(120))));
    /// let dated = RetryAfter::parse("Wed, 08 Jul 2026 12:00:30 GMT", now).unwrap();
    /// assert_eq!(dated.wait(now), Span::from_secs(30));
    /// assert!(RetryAfter::parse("soon", now).is_err());
    /// ```
    pub fn parse(value: &str, now: Instant) -> Result<RetryAfter, RetryAfterError> {
        let text = value.trim_ascii();
        if text.is_empty() {
            return Err(RetryAfterError::Empty);
        }
        let parsed = if text.as_bytes()[0].is_ascii_digit() {
            parse_delay(text).map(RetryAfter::Delay)
        } else {
            parse_http_date(text, now).map(|secs| RetryAfter::At(unix_instant(secs)))
        };
        parsed.ok_or(RetryAfterError::Malformed)
    }

    /// How long to wait from `now` (Unix time): the delay itself, or the time left until the
    /// date (zero once it has passed).
    pub fn wait(self, now: Instant) -> Span {
        match self {
            RetryAfter::Delay(delay) => delay,
            RetryAfter::At(at) => at - now,
        }
    }
}

/// The wait a `Retry-After` value asks for at `now` (Unix time); `None` when the value is
/// empty or unreadable (see the module's decisions).
///
/// # Examples
/// ```
/// use sluicegate::smartflow::retry_after_wait;
/// use sluicegate::{Instant, Span};
/// let now = Instant::from_secs(1_783_512_000); // 2026-07-08T12:00:00Z
/// assert_eq!(retry_after_wait("Wed Jul  8 12:00:30 2026", now), Some(Span::from_secs(30)));
/// assert_eq!(retry_after_wait("Wed, 08 Jul 2026 11:00:00 GMT", now), Some(Span::ZERO));
/// assert_eq!(retry_after_wait("-5", now), None);
/// ```
pub fn retry_after_wait(value: &str, now: Instant) -> Option<Span> {
    RetryAfter::parse(value, now).ok().map(|retry| retry.wait(now))
}

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// `1*DIGIT [ "." 1*DIGIT ]` as a span, saturating.
fn parse_delay(text: &str) -> Option<Span> {
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (text, None),
    };
    let secs = digits(whole)?.iter().fold(0u64, |n, &d| n.saturating_mul(10).saturating_add(u64::from(d - b'0')));
    let mut nanos = 0;
    if let Some(fraction) = fraction {
        let fraction = digits(fraction)?;
        let mut unit = NANOS_PER_SEC;
        for &d in fraction.iter().take(9) {
            unit /= 10;
            nanos += u64::from(d - b'0') * unit;
        }
    }
    Some(Span::from_secs(secs) + Span::from_nanos(nanos))
}

/// The bytes of `text` when it is one or more ASCII digits.
fn digits(text: &str) -> Option<&[u8]> {
    let b = text.as_bytes();
    (!b.is_empty() && b.iter().all(u8::is_ascii_digit)).then_some(b)
}

/// Unix seconds as an [`Instant`] since the Unix epoch; before the epoch is the epoch.
fn unix_instant(secs: i64) -> Instant {
    Instant::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// The UTC year of a Unix instant.
fn year_of(now: Instant) -> i64 {
    let days = (now.as_nanos() / NANOS_PER_SEC / 86_400) as i64;
    civil_from_days(days).0
}

/// A fixed-layout reader over the bytes of a date.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    /// The literal `lit` (ASCII, matched case-insensitively).
    fn expect(&mut self, lit: &str) -> Option<()> {
        self.take(lit.len())?.eq_ignore_ascii_case(lit.as_bytes()).then_some(())
    }

    /// Exactly `n` ASCII digits as a number.
    fn number(&mut self, n: usize) -> Option<i64> {
        self.take(n)?.iter().try_fold(0i64, |v, &c| c.is_ascii_digit().then(|| v * 10 + i64::from(c - b'0')))
    }

    /// One of `names` (case-insensitively), as its index.
    fn name(&mut self, names: &[&str]) -> Option<usize> {
        names
            .iter()
            .position(|name| {
                self.rest.len() >= name.len() && self.rest[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            })
            .inspect(|&i| self.rest = &self.rest[names[i].len()..])
    }

    /// `hour ":" minute ":" second`, as seconds into the day.
    fn time_of_day(&mut self) -> Option<i64> {
        let hour = self.number(2)?;
        self.expect(":")?;
        let minute = self.number(2)?;
        self.expect(":")?;
        let second = self.number(2)?;
        (hour <= 23 && minute <= 59 && second <= 60).then_some(hour * 3_600 + minute * 60 + second)
    }

    fn done(&self) -> bool {
        self.rest.is_empty()
    }
}

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAY_NAMES: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// An HTTP-date as Unix seconds: IMF-fixdate, else RFC 850, else asctime.
fn parse_http_date(text: &str, now: Instant) -> Option<i64> {
    let b = text.as_bytes();
    imf_fixdate(b).or_else(|| rfc850_date(b, now)).or_else(|| asctime_date(b))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(b: &[u8]) -> Option<i64> {
    let mut c = Cursor { rest: b };
    c.name(&DAY_NAMES)?;
    c.expect(", ")?;
    let day = c.number(2)?;
    c.expect(" ")?;
    let month = c.name(&MONTHS)? as i64 + 1;
    c.expect(" ")?;
    let year = c.number(4)?;
    c.expect(" ")?;
    let time = c.time_of_day()?;
    c.expect(" GMT")?;
    c.done().then_some(())?;
    unix_seconds(year, month, day, time)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850_date(b: &[u8], now: Instant) -> Option<i64> {
    let mut c = Cursor { rest: b };
    c.name(&LONG_DAY_NAMES)?;
    c.expect(", ")?;
    let day = c.number(2)?;
    c.expect("-")?;
    let month = c.name(&MONTHS)? as i64 + 1;
    c.expect("-")?;
    let two_digits = c.number(2)?;
    c.expect(" ")?;
    let time = c.time_of_day()?;
    c.expect(" GMT")?;
    c.done().then_some(())?;
    unix_seconds(full_year(two_digits, year_of(now)), month, day, time)
}

/// `Sun Nov  6 08:49:37 1994` (the day of month space-padded or zero-padded).
fn asctime_date(b: &[u8]) -> Option<i64> {
    let mut c = Cursor { rest: b };
    c.name(&DAY_NAMES)?;
    c.expect(" ")?;
    let month = c.name(&MONTHS)? as i64 + 1;
    c.expect(" ")?;
    let day = match c.take(2)? {
        [b' ', d] if d.is_ascii_digit() => i64::from(d - b'0'),
        [t, d] if t.is_ascii_digit() && d.is_ascii_digit() => i64::from(t - b'0') * 10 + i64::from(d - b'0'),
        _ => return None,
    };
    c.expect(" ")?;
    let time = c.time_of_day()?;
    c.expect(" ")?;
    let year = c.number(4)?;
    c.done().then_some(())?;
    unix_seconds(year, month, day, time)
}

/// The year a two-digit RFC 850 year names: the one in (`this_year` − 50, `this_year` + 50].
fn full_year(two_digits: i64, this_year: i64) -> i64 {
    let year = this_year - this_year.rem_euclid(100) + two_digits;
    if year > this_year + 50 {
        year - 100
    } else if year <= this_year - 50 {
        year + 100
    } else {
        year
    }
}

/// A calendar date and a time of day (seconds) as Unix seconds; `None` for a day the month
/// does not have.
fn unix_seconds(year: i64, month: i64, day: i64, time: i64) -> Option<i64> {
    (day >= 1 && day <= days_in_month(year, month)).then(|| days_from_civil(year, month, day) * 86_400 + time)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-07-08T12:00:00Z, a Wednesday.
    const NOW: Instant = Instant::from_secs(1_783_512_000);

    fn wait(value: &str) -> Option<u64> {
        retry_after_wait(value, NOW).map(Span::as_nanos)
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn delay_seconds_are_read_as_seconds_with_an_optional_fraction() {
        assert_eq!(wait("120"), Some(120 * S));
        assert_eq!(wait("0"), Some(0));
        assert_eq!(wait(" 7 "), Some(7 * S), "surrounding whitespace is ignored");
        assert_eq!(wait("1.5"), Some(1_500_000_000));
        assert_eq!(wait("0.0000000019"), Some(1), "digits past the ninth are dropped");
        assert_eq!(wait("99999999999999999999999"), Some(u64::MAX), "a huge delay saturates");
    }

    #[test]
    fn the_three_http_date_forms_name_the_same_instant() {
        for text in ["Wed, 08 Jul 2026 12:00:30 GMT", "Wednesday, 08-Jul-26 12:00:30 GMT", "Wed Jul  8 12:00:30 2026"] {
            assert_eq!(wait(text), Some(30 * S), "{text}");
        }
        assert_eq!(wait("Wed Jul 08 12:00:30 2026"), Some(30 * S), "asctime with a zero-padded day");
        assert_eq!(wait("wed, 08 jul 2026 12:00:30 gmt"), Some(30 * S), "names in any case");
    }

    #[test]
    fn a_date_in_the_past_is_no_wait() {
        assert_eq!(wait("Wed, 08 Jul 2026 11:00:00 GMT"), Some(0));
        assert_eq!(wait("Wed, 08 Jul 2026 12:00:00 GMT"), Some(0), "now itself");
        assert_eq!(wait("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(wait("Mon, 01 Jan 0001 00:00:00 GMT"), Some(0), "before the Unix epoch");
    }

    #[test]
    fn a_date_past_the_end_of_instant_saturates() {
        assert_eq!(wait("Fri, 31 Dec 9999 23:59:59 GMT"), Some(u64::MAX - NOW.as_nanos()));
    }

    #[test]
    fn garbage_is_no_retry_after() {
        for bad in [
            "",
            "   ",
            "soon",
            "-5",
            "1e3",
            "1.",
            ".5",
            "+5",
            "5 s",
            "2026-07-08T12:00:30Z",
            "Wed, 08 Jul 2026 12:00:30 UTC",
            "Wed, 08 Jul 2026 12:00:30 +0000",
            "Wed, 8 Jul 2026 12:00:30 GMT",
            "Wed, 08 Jul 2026 12:00 GMT",
            "Wed, 08 Jul 2026 24:00:00 GMT",
            "Wed, 31 Jun 2026 12:00:30 GMT",
            "Thu, 29 Feb 2026 12:00:30 GMT",
            "Wed, 08 Jul 2026 12:00:30 GMT trailing",
            "Wed, 08-Jul-26 12:00:30 GMT",
            "Wednesday, 08 Jul 2026 12:00:30 GMT",
            "Wed Jul 8 12:00:30 2026",
            "Wed Jul  8 12:00:30 2026 GMT",
        ] {
            assert_eq!(wait(bad), None, "{bad:?}");
        }
        assert_eq!(RetryAfter::parse(" ", NOW), Err(RetryAfterError::Empty));
        assert_eq!(RetryAfter::parse("soon", NOW), Err(RetryAfterError::Malformed));
    }

    #[test]
    fn leap_days_and_leap_seconds_are_accepted() {
        let leap = RetryAfter::parse("Thu, 29 Feb 2028 00:00:00 GMT", NOW).unwrap();
        assert_eq!(leap, RetryAfter::At(Instant::from_secs(1_835_395_200)));
        let sixty = RetryAfter::parse("Wed, 08 Jul 2026 12:00:60 GMT", NOW).unwrap();
        assert_eq!(sixty.wait(NOW), Span::from_secs(60), "second 60 is the next minute's 0");
    }

    #[test]
    fn an_rfc_850_year_is_the_one_within_fifty_years_of_now() {
        assert_eq!(full_year(26, 2026), 2026);
        assert_eq!(full_year(76, 2026), 2076, "exactly 50 years ahead is still ahead");
        assert_eq!(full_year(77, 2026), 1977, "more than 50 years ahead is the past century");
        assert_eq!(full_year(94, 2026), 1994);
        assert_eq!(full_year(1, 2099), 2101);
        assert_eq!(full_year(49, 2099), 2149);
        assert_eq!(full_year(50, 2099), 2050);
        assert_eq!(wait("Sunday, 06-Nov-94 08:49:37 GMT"), Some(0), "1994: long past");
    }

    #[test]
    fn errors_say_what_was_wrong() {
        use alloc::string::ToString;
        assert_eq!(RetryAfterError::Empty.to_string(), "Retry-After is empty");
        assert_eq!(RetryAfterError::Malformed.to_string(), "Retry-After is neither delay-seconds nor an HTTP-date");
    }
}
