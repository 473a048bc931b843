//! What the Open-Meteo free tier charges and how it refuses: the weight of one call, the
//! meaning of a 429 or 503, and when its clock-aligned windows reopen.
//!
//! The free tier counts *weighted* calls per client IP: 600 a minute, 5,000 an hour and
//! 10,000 a day, in fixed windows aligned to the clock (the minute counter is cleared every
//! 60 s, the hourly one at the top of the UTC hour, the daily one at 00:00 UTC). Admission
//! is checked before a request (usage ≥ limit → 429) and the weight is added after the
//! response; its own 429s cost nothing, any other error response costs 1.
//!
//! Nothing here reads a clock or does I/O: the caller passes the status, the body and `now`.

use crate::time::{Instant, Span};
use core::fmt;

/// Weighted calls the free tier admits per minute.
pub const FREE_CALLS_PER_MINUTE: u32 = 600;
/// Weighted calls the free tier admits per hour.
pub const FREE_CALLS_PER_HOUR: u32 = 5_000;
/// Weighted calls the free tier admits per day.
pub const FREE_CALLS_PER_DAY: u32 = 10_000;
/// The most locations one call may ask for; a longer list must be split.
pub const MAX_LOCATIONS_PER_CALL: u32 = 1_000;
/// The heaviest call the upstream accepts ("Your API call requests too much data…" above it).
pub const MAX_WEIGHT_PER_CALL: u32 = 5_000;

/// Which formula [`weight`] uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WeightMode {
    /// `locations × max(1, d/14) × max(1, v/10)`: never less than what the server charges,
    /// so a budget spent by it is never overspent.
    #[default]
    Conservative,
    /// The server's own formula, summed over locations: `max(1, v/10 × max(1, d/14))`.
    Server,
}

/// The shape of one forecast call, as far as its weight is concerned.
///
/// `v = variables × models` and `d` is the number of whole days asked for. More than
/// [`MAX_LOCATIONS_PER_CALL`] locations is accepted here (the formula still applies, e.g.
/// to price a fan-out before it is split) but see [`WeightQuery::fits_one_call`].
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{weight, WeightMode, WeightQuery};
/// let q = WeightQuery::new(1, 28, 15).unwrap();
/// assert_eq!(weight(&q, WeightMode::Server), 3.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightQuery {
    locations: u32,
    days: u32,
    variables: u32,
    models: u32,
}

/// A [`WeightQuery`] field that is zero: a call asking for nothing is not a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightQueryError {
    /// `locations` was 0.
    ZeroLocations,
    /// `days` was 0.
    ZeroDays,
    /// `variables` was 0.
    ZeroVariables,
    /// `models` was 0.
    ZeroModels,
}

impl fmt::Display for WeightQueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WeightQueryError::ZeroLocations => "locations must be at least 1",
            WeightQueryError::ZeroDays => "days must be at least 1",
            WeightQueryError::ZeroVariables => "variables must be at least 1",
            WeightQueryError::ZeroModels => "models must be at least 1",
        })
    }
}

impl WeightQuery {
    /// A call for `variables` variables over `days` whole days at `locations` locations,
    /// from one model.
    ///
    /// # Errors
    /// The [`WeightQueryError`] naming the first field that is zero.
    pub const fn new(locations: u32, days: u32, variables: u32) -> Result<Self, WeightQueryError> {
        if locations == 0 {
            return Err(WeightQueryError::ZeroLocations);
        }
        if days == 0 {
            return Err(WeightQueryError::ZeroDays);
        }
        if variables == 0 {
            return Err(WeightQueryError::ZeroVariables);
        }
        Ok(WeightQuery { locations, days, variables, models: 1 })
    }

    /// The same call asked of `models` models at once (each variable counts once per model).
    ///
    /// # Errors
    /// [`WeightQueryError::ZeroModels`] for 0.
    pub const fn with_models(self, models: u32) -> Result<Self, WeightQueryError> {
        if models == 0 {
            return Err(WeightQueryError::ZeroModels);
        }
        Ok(WeightQuery { models, ..self })
    }

    /// Locations in the call.
    pub const fn locations(&self) -> u32 {
        self.locations
    }
    /// Whole days asked for.
    pub const fn days(&self) -> u32 {
        self.days
    }
    /// Variables asked for.
    pub const fn variables(&self) -> u32 {
        self.variables
    }
    /// Models asked for.
    pub const fn models(&self) -> u32 {
        self.models
    }

    /// Whether the upstream would accept this as one call: at most
    /// [`MAX_LOCATIONS_PER_CALL`] locations and a weight (by `mode`) of at most
    /// [`MAX_WEIGHT_PER_CALL`].
    ///
    /// # Examples
    /// ```
    /// use sluicegate::openmeteo::{WeightMode, WeightQuery};
    /// assert!(WeightQuery::new(1_000, 14, 10).unwrap().fits_one_call(WeightMode::Conservative));
    /// assert!(!WeightQuery::new(1_001, 1, 1).unwrap().fits_one_call(WeightMode::Server));
    /// ```
    pub fn fits_one_call(&self, mode: WeightMode) -> bool {
        self.locations <= MAX_LOCATIONS_PER_CALL && weight_milli(self, mode) <= u64::from(MAX_WEIGHT_PER_CALL) * 1_000
    }

    fn vars_times_models(&self) -> u64 {
        u64::from(self.variables) * u64::from(self.models)
    }
}

/// The weight of one call.
///
/// | mode | formula (`v = variables × models`, `d` whole days) |
/// |---|---|
/// | [`Server`](WeightMode::Server) | `locations × max(1, v/10 × max(1, d/14))` |
/// | [`Conservative`](WeightMode::Conservative) | `locations × max(1, d/14) × max(1, v/10)` |
///
/// Conservative is never below Server (equal unless `v < 10` and `d > 14`: 5 variables
/// over 28 days weigh 1.0 on the server, 2.0 conservatively).
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{weight, WeightMode, WeightQuery};
/// let two_models = WeightQuery::new(1, 7, 6).unwrap().with_models(2).unwrap();
/// assert_eq!(weight(&two_models, WeightMode::Server), 1.2);
/// let sparse = WeightQuery::new(1, 28, 5).unwrap();
/// assert_eq!(weight(&sparse, WeightMode::Server), 1.0);
/// assert_eq!(weight(&sparse, WeightMode::Conservative), 2.0);
/// ```
pub fn weight(query: &WeightQuery, mode: WeightMode) -> f64 {
    let per_variables = query.vars_times_models() as f64 / 10.0;
    let per_days = f64::max(1.0, f64::from(query.days) / 14.0);
    let locations = f64::from(query.locations);
    // Both products are formed in the same order (variables × days first) so that float
    // rounding can never put Conservative below Server.
    match mode {
        WeightMode::Server => locations * f64::max(1.0, per_variables * per_days),
        WeightMode::Conservative => locations * (f64::max(1.0, per_variables) * per_days),
    }
}

/// The weight of one call in thousandths, rounded up, computed exactly in integers: what a
/// budget counting whole milli-weights should charge (rounding up never under-spends).
/// Saturates at `u64::MAX`.
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{weight_milli, WeightMode, WeightQuery};
/// assert_eq!(weight_milli(&WeightQuery::new(1, 14, 15).unwrap(), WeightMode::Server), 1_500);
/// // 1,500 locations × 16/14 = 1,714.2857…
/// assert_eq!(weight_milli(&WeightQuery::new(1_500, 16, 10).unwrap(), WeightMode::Conservative), 1_714_286);
/// ```
pub fn weight_milli(query: &WeightQuery, mode: WeightMode) -> u64 {
    // Per location, in units of 1/140 (the common denominator of v/10 and d/14):
    //   server:       max(1, v/10 × max(1, d/14)) = max(140, v × max(14, d)) / 140
    //   conservative: max(1, d/14) × max(1, v/10) = max(14, d) × max(10, v) / 140
    let v = u128::from(query.vars_times_models());
    let d = u128::from(query.days.max(14));
    let per_location = match mode {
        WeightMode::Server => (v * d).max(140),
        WeightMode::Conservative => d * v.max(10),
    };
    // milli = ceil(locations × per_location × 1000 / 140) = ceil(locations × per_location × 50 / 7)
    let numerator = u128::from(query.locations).saturating_mul(per_location).saturating_mul(50);
    u64::try_from(numerator.div_ceil(7)).unwrap_or(u64::MAX)
}

/// Why the upstream refused a call, from its status and body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateLimitKind {
    /// 429, "Minutely API request limit exceeded": clears at the next minute boundary.
    Minutely,
    /// 429, "Hourly API request limit exceeded": clears at the top of the next UTC hour.
    Hourly,
    /// 429, "Daily API request limit exceeded": clears at the next 00:00 UTC.
    Daily,
    /// 429, "Too many concurrent requests": more than 5 in flight from one IP.
    Concurrency,
    /// 503, "The service is overloaded": the whole server is saturated, not this client.
    Overloaded,
    /// A 429 whose body is not JSON or names no reason known here.
    Unknown,
}

impl fmt::Display for RateLimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RateLimitKind::Minutely => "minutely limit exceeded",
            RateLimitKind::Hourly => "hourly limit exceeded",
            RateLimitKind::Daily => "daily limit exceeded",
            RateLimitKind::Concurrency => "too many concurrent requests",
            RateLimitKind::Overloaded => "the service is overloaded",
            RateLimitKind::Unknown => "rate limited for an unknown reason",
        })
    }
}

/// Classify an upstream response: `None` unless the status is 429 or 503.
///
/// A 503 is [`Overloaded`](RateLimitKind::Overloaded) whatever its body. A 429 body is read
/// as JSON and its `reason` matched case-insensitively for "minutely", "hourly", "daily" or
/// "concurrent"; a body that is not JSON, or has no such reason, is
/// [`Unknown`](RateLimitKind::Unknown).
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{classify, RateLimitKind};
/// let body = r#"{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}"#;
/// assert_eq!(classify(429, body), Some(RateLimitKind::Hourly));
/// assert_eq!(classify(429, "<html>"), Some(RateLimitKind::Unknown));
/// assert_eq!(classify(503, ""), Some(RateLimitKind::Overloaded));
/// assert_eq!(classify(500, body), None);
/// ```
pub fn classify(status: u16, body: &str) -> Option<RateLimitKind> {
    match status {
        503 => Some(RateLimitKind::Overloaded),
        429 => Some(reason_of(body).map_or(RateLimitKind::Unknown, kind_of_reason)),
        _ => None,
    }
}

/// The `reason` string of a `{"error":true,"reason":"…"}` body, as written (escapes kept,
/// which is enough to find the words that classify it). A small scan over bytes rather than
/// a JSON parser keeps the browser build small; it allocates nothing.
fn reason_of(body: &str) -> Option<&[u8]> {
    let body = body.as_bytes().trim_ascii();
    if body.first() != Some(&b'{') {
        return None;
    }
    let key = b"\"reason\"";
    let after_key = &body[find(body, key)? + key.len()..];
    let value = after_key.trim_ascii_start().strip_prefix(b":")?.trim_ascii_start().strip_prefix(b"\"")?;
    let mut escaped = false;
    let end = value.iter().position(|&c| match c {
        _ if escaped => {
            escaped = false;
            false
        }
        b'\\' => {
            escaped = true;
            false
        }
        c => c == b'"',
    })?;
    Some(&value[..end])
}

/// Where `needle` first occurs in `hay`, ASCII case-insensitively.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

fn kind_of_reason(reason: &[u8]) -> RateLimitKind {
    [
        (&b"minutely"[..], RateLimitKind::Minutely),
        (b"hourly", RateLimitKind::Hourly),
        (b"daily", RateLimitKind::Daily),
        (b"concurrent", RateLimitKind::Concurrency),
    ]
    .into_iter()
    .find(|(word, _)| find(reason, word).is_some())
    .map_or(RateLimitKind::Unknown, |(_, kind)| kind)
}

/// The next boundary of a clock-aligned window of length `window`: the first multiple of
/// `window` since the epoch strictly after `now` (saturating at the end of time). A zero
/// window is taken as 1 ns.
///
/// ```text
/// window 60 s:
/// now (s)        0     59.9   60     61
/// next_boundary  60    60     120    120     (a boundary is never "next" at itself)
/// ```
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::next_boundary;
/// use sluicegate::{Instant, Span};
/// let minute = Span::from_secs(60);
/// assert_eq!(next_boundary(minute, Instant::from_secs(61)), Instant::from_secs(120));
/// assert_eq!(next_boundary(minute, Instant::from_secs(120)), Instant::from_secs(180));
/// ```
pub fn next_boundary(window: Span, now: Instant) -> Instant {
    let w = window.as_nanos().max(1);
    let start = now.as_nanos() - now.as_nanos() % w;
    Instant::from_nanos(start.saturating_add(w))
}

/// The lengths of the upstream's three windows. The default is the real 60 s / 1 h / 24 h;
/// tests and simulations compress them. `now` must be on a clock whose epoch is a UTC
/// midnight (Unix time is) for the hour and day boundaries to fall where the upstream's do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamWindows {
    /// The minutely window.
    pub minute: Span,
    /// The hourly window.
    pub hour: Span,
    /// The daily window.
    pub day: Span,
}

impl Default for UpstreamWindows {
    fn default() -> Self {
        UpstreamWindows { minute: Span::from_secs(60), hour: Span::from_secs(3_600), day: Span::from_secs(86_400) }
    }
}

impl UpstreamWindows {
    /// The window a refusal of `kind` waits out, if it waits one out at all.
    pub fn window(&self, kind: RateLimitKind) -> Option<Span> {
        match kind {
            RateLimitKind::Minutely => Some(self.minute),
            RateLimitKind::Hourly => Some(self.hour),
            RateLimitKind::Daily => Some(self.day),
            RateLimitKind::Concurrency | RateLimitKind::Overloaded | RateLimitKind::Unknown => None,
        }
    }

    /// When a refusal of `kind` at `now` clears: the next boundary of its window
    /// ([`next_boundary`]); `None` for refusals that no window boundary clears
    /// (concurrency, overload, unknown).
    ///
    /// # Examples
    /// ```
    /// use sluicegate::openmeteo::{RateLimitKind, UpstreamWindows};
    /// use sluicegate::Instant;
    /// let w = UpstreamWindows::default();
    /// let now = Instant::from_secs(3_600 * 5 + 59 * 60 + 30); // 05:59:30
    /// assert_eq!(w.resume_at(RateLimitKind::Minutely, now), Some(Instant::from_secs(3_600 * 6)));
    /// assert_eq!(w.resume_at(RateLimitKind::Hourly, now), Some(Instant::from_secs(3_600 * 6)));
    /// assert_eq!(w.resume_at(RateLimitKind::Daily, now), Some(Instant::from_secs(86_400)));
    /// assert_eq!(w.resume_at(RateLimitKind::Overloaded, now), None);
    /// ```
    pub fn resume_at(&self, kind: RateLimitKind, now: Instant) -> Option<Instant> {
        self.window(kind).map(|window| next_boundary(window, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(locations: u32, days: u32, variables: u32) -> WeightQuery {
        WeightQuery::new(locations, days, variables).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        let d = a - b;
        -1e-9 < d && d < 1e-9
    }

    #[test]
    fn the_server_formula_reproduces_every_worked_value() {
        assert_eq!(weight(&q(1, 7, 10), WeightMode::Server), 1.0);
        assert_eq!(weight(&q(1, 14, 15), WeightMode::Server), 1.5);
        assert_eq!(weight(&q(1, 28, 15), WeightMode::Server), 3.0);
        assert_eq!(weight(&q(1, 7, 6).with_models(2).unwrap(), WeightMode::Server), 1.2);
        assert_eq!(weight(&q(100, 7, 3), WeightMode::Server), 100.0);
        assert_eq!(weight_milli(&q(1, 7, 10), WeightMode::Server), 1_000);
        assert_eq!(weight_milli(&q(1, 14, 15), WeightMode::Server), 1_500);
        assert_eq!(weight_milli(&q(1, 28, 15), WeightMode::Server), 3_000);
        assert_eq!(weight_milli(&q(1, 7, 6).with_models(2).unwrap(), WeightMode::Server), 1_200);
        assert_eq!(weight_milli(&q(100, 7, 3), WeightMode::Server), 100_000);
    }

    #[test]
    fn few_variables_over_many_days_weigh_double_conservatively() {
        let sparse = q(1, 28, 5);
        assert_eq!(weight(&sparse, WeightMode::Server), 1.0);
        assert_eq!(weight(&sparse, WeightMode::Conservative), 2.0);
        assert_eq!(weight_milli(&sparse, WeightMode::Server), 1_000);
        assert_eq!(weight_milli(&sparse, WeightMode::Conservative), 2_000);
        assert_eq!(WeightMode::default(), WeightMode::Conservative);
    }

    #[test]
    fn fifteen_hundred_locations_over_sixteen_days_weigh_about_1714() {
        let fan_out = q(1_500, 16, 10);
        assert!(close(weight(&fan_out, WeightMode::Conservative), 1_500.0 * 16.0 / 14.0));
        assert_eq!(weight_milli(&fan_out, WeightMode::Conservative), 1_714_286);
        assert!(!fan_out.fits_one_call(WeightMode::Conservative), "1,500 locations is more than one call may carry");
    }

    #[test]
    fn conservative_is_never_below_server_and_milli_weights_round_up() {
        for locations in [1, 2, 7, 100, 1_000, 1_500] {
            for days in [1, 2, 7, 13, 14, 15, 16, 28, 29, 92] {
                for variables in [1, 3, 5, 9, 10, 11, 15, 31] {
                    for models in [1, 2, 3] {
                        let query = q(locations, days, variables).with_models(models).unwrap();
                        let server = weight(&query, WeightMode::Server);
                        let conservative = weight(&query, WeightMode::Conservative);
                        assert!(conservative >= server, "{query:?}: {conservative} < {server}");
                        for mode in [WeightMode::Server, WeightMode::Conservative] {
                            let milli = weight_milli(&query, mode);
                            let exact = weight(&query, mode) * 1_000.0;
                            assert!(milli as f64 >= exact - 1e-6 && (milli as f64) < exact + 1.0, "{query:?} {mode:?}");
                        }
                        assert!(
                            weight_milli(&query, WeightMode::Conservative) >= weight_milli(&query, WeightMode::Server)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_call_weighs_at_least_one_per_location() {
        assert_eq!(weight(&q(1, 1, 1), WeightMode::Server), 1.0);
        assert_eq!(weight(&q(3, 1, 1), WeightMode::Conservative), 3.0);
        assert_eq!(weight_milli(&q(3, 1, 1), WeightMode::Server), 3_000);
    }

    #[test]
    fn a_query_for_nothing_is_refused_naming_the_field() {
        assert_eq!(WeightQuery::new(0, 1, 1), Err(WeightQueryError::ZeroLocations));
        assert_eq!(WeightQuery::new(1, 0, 1), Err(WeightQueryError::ZeroDays));
        assert_eq!(WeightQuery::new(1, 1, 0), Err(WeightQueryError::ZeroVariables));
        assert_eq!(q(1, 1, 1).with_models(0), Err(WeightQueryError::ZeroModels));
        assert_eq!(alloc::string::ToString::to_string(&WeightQueryError::ZeroDays), "days must be at least 1");
        let big = q(u32::MAX, u32::MAX, u32::MAX).with_models(u32::MAX).unwrap();
        assert_eq!(weight_milli(&big, WeightMode::Conservative), u64::MAX);
    }

    #[test]
    fn one_call_may_carry_a_thousand_locations_and_weigh_five_thousand() {
        assert!(q(1_000, 7, 10).fits_one_call(WeightMode::Server));
        assert!(!q(1_001, 7, 10).fits_one_call(WeightMode::Server));
        assert!(q(1_000, 70, 10).fits_one_call(WeightMode::Server)); // 1,000 × 5 = 5,000
        assert!(!q(1_000, 71, 10).fits_one_call(WeightMode::Server));
    }

    #[test]
    fn each_upstream_429_body_is_classified_by_its_reason() {
        let minutely =
            r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#;
        let hourly =
            r#"{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}"#;
        let daily = r#"{"error":true,"reason":"Daily API request limit exceeded. Please try again tomorrow."}"#;
        let concurrent = r#"{"error":true,"reason":"Too many concurrent requests"}"#;
        assert_eq!(classify(429, minutely), Some(RateLimitKind::Minutely));
        assert_eq!(classify(429, hourly), Some(RateLimitKind::Hourly));
        assert_eq!(classify(429, daily), Some(RateLimitKind::Daily));
        assert_eq!(classify(429, concurrent), Some(RateLimitKind::Concurrency));
        assert_eq!(classify(429, r#"{"reason":"MINUTELY limit"}"#), Some(RateLimitKind::Minutely));
    }

    #[test]
    fn garbage_429_bodies_are_unknown() {
        for body in
            ["", "Too Many Requests", "<html>minutely</html>", "{", "[]", r#"{"reason":42}"#, r#"{"error":true}"#]
        {
            assert_eq!(classify(429, body), Some(RateLimitKind::Unknown), "{body:?}");
        }
        assert_eq!(classify(429, r#"{"error":true,"reason":"Something else"}"#), Some(RateLimitKind::Unknown));
    }

    #[test]
    fn only_429_and_503_are_rate_limits() {
        let minutely = r#"{"error":true,"reason":"Minutely API request limit exceeded."}"#;
        assert_eq!(classify(503, "The service is overloaded"), Some(RateLimitKind::Overloaded));
        assert_eq!(classify(503, minutely), Some(RateLimitKind::Overloaded));
        for status in [0, 200, 204, 400, 404, 500, 502, 504] {
            assert_eq!(classify(status, minutely), None, "{status}");
        }
    }

    #[test]
    fn the_next_boundary_is_strictly_after_now_and_aligned() {
        let minute = Span::from_secs(60);
        assert_eq!(next_boundary(minute, Instant::ZERO), Instant::from_secs(60));
        assert_eq!(next_boundary(minute, Instant::from_millis(59_999)), Instant::from_secs(60));
        assert_eq!(next_boundary(minute, Instant::from_secs(60)), Instant::from_secs(120));
        assert_eq!(next_boundary(Span::ZERO, Instant::from_nanos(5)), Instant::from_nanos(6));
        assert_eq!(next_boundary(minute, Instant::from_nanos(u64::MAX)), Instant::from_nanos(u64::MAX));
    }

    #[test]
    fn refusals_resume_at_their_own_window_boundary() {
        let w = UpstreamWindows { minute: Span::from_secs(1), hour: Span::from_secs(10), day: Span::from_secs(100) };
        let now = Instant::from_millis(12_345);
        assert_eq!(w.resume_at(RateLimitKind::Minutely, now), Some(Instant::from_secs(13)));
        assert_eq!(w.resume_at(RateLimitKind::Hourly, now), Some(Instant::from_secs(20)));
        assert_eq!(w.resume_at(RateLimitKind::Daily, now), Some(Instant::from_secs(100)));
        for kind in [RateLimitKind::Concurrency, RateLimitKind::Overloaded, RateLimitKind::Unknown] {
            assert_eq!(w.resume_at(kind, now), None);
        }
        let real = UpstreamWindows::default();
        assert_eq!(real.day, Span::from_secs(86_400));
        // 2024-01-01T23:30:00Z → the daily counter clears at 2024-01-02T00:00:00Z.
        assert_eq!(
            real.resume_at(RateLimitKind::Daily, Instant::from_secs(1_704_151_800)),
            Some(Instant::from_secs(1_704_153_600))
        );
    }
}
