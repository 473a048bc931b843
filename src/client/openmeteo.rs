//! What the Open-Meteo free tier charges and how it refuses: the weight of one call (from
//! its shape or its query string), the meaning of a 429 or 503, and when its clock-aligned
//! windows reopen.
//!
//! The free tier counts *weighted* calls per client IP: 600 a minute, 5,000 an hour and
//! 10,000 a day, in fixed windows aligned to the clock (the minute counter is cleared every
//! 60 s, the hourly one at the top of the UTC hour, the daily one at 00:00 UTC). Admission
//! is checked before a request (usage ≥ limit → 429) and the weight is added after the
//! response; its own 429s cost nothing, any other error response costs 1.
//!
//! Nothing here reads a clock or does I/O: the caller passes the status, the body and `now`.

use crate::client::pacer::Window;
use crate::core::time::{Instant, Span};
use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The pacer's windows for the Open-Meteo free tier, 8 % under its 600/min, 5,000/h and
/// 10,000/day: 550 per minute, 4,800 per hour, 9,500 per day.
pub fn free_tier_windows() -> Vec<Window> {
    alloc::vec![
        Window { length: Span::from_secs(60), budget: 550_000 },
        Window { length: Span::from_secs(3_600), budget: 4_800_000 },
        Window { length: Span::from_secs(86_400), budget: 9_500_000 },
    ]
}

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

/// How many locations to put in each call of a fan-out, given `weight_of(n)` (the weight of a
/// call for `n` locations), the tightest `budget` the calls are paced against, and at most
/// `max` locations per call (never more than [`MAX_LOCATIONS_PER_CALL`]): the largest count
/// whose calls pack the budget to at least 98 % (`⌊budget / w⌋ × w ≥ 0.98 × budget`), else
/// the count that packs it best. A count whose call's weight is not above 0, or above the
/// budget or [`MAX_WEIGHT_PER_CALL`], is never chosen; with none that fits, 1. The first
/// error `weight_of` returns is returned.
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{locations_per_call, weight, WeightMode, WeightQuery};
/// let days = |n| Ok::<_, ()>(weight(&WeightQuery::new(n, 16, 10).unwrap(), WeightMode::Conservative));
/// // 48 locations over 16 days weigh 54.86: ten such calls fill 548.6 of 550
/// assert_eq!(locations_per_call(days, 550.0, 50), Ok(48));
/// assert_eq!(locations_per_call(days, 550.0, 100), Ok(96));
/// assert_eq!(locations_per_call(|n| Ok::<_, ()>(f64::from(n)), 600.0, 5_000), Ok(600));
/// ```
pub fn locations_per_call<E>(
    mut weight_of: impl FnMut(u32) -> Result<f64, E>,
    budget: f64,
    max: u32,
) -> Result<u32, E> {
    let (mut best, mut best_use) = (1, -1.0);
    for n in (1..=max.min(MAX_LOCATIONS_PER_CALL)).rev() {
        let w = weight_of(n)?;
        // a weight that is not above 0 (or not a number) is never chosen either
        if w.is_nan() || w <= 0.0 || w > budget || w > f64::from(MAX_WEIGHT_PER_CALL) {
            continue;
        }
        // whole calls per budget: `as` truncates, which is the floor of a positive number
        // (f64::floor is not in `core`)
        let packed = (budget / w) as u64 as f64 * w / budget;
        if packed >= 0.98 {
            return Ok(n);
        }
        if packed > best_use {
            (best, best_use) = (n, packed);
        }
    }
    Ok(best)
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

/// The parameters whose comma-separated names are a call's variables.
const VARIABLE_PARAMETERS: [&str; 4] = ["hourly", "daily", "current", "minutely_15"];

/// Why [`query_weight_milli`] could not price a query string: the parameter, and what was
/// wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueryWeightError {
    /// A parameter the weight needs is absent or empty (`latitude`).
    Missing {
        /// The parameter.
        parameter: &'static str,
    },
    /// One of `start_date` and `end_date` without the other.
    Unpaired {
        /// The one given.
        given: &'static str,
        /// The one missing.
        missing: &'static str,
    },
    /// `forecast_days` or `past_days` together with `start_date`/`end_date`.
    Conflict {
        /// The parameter that conflicts with the dates.
        parameter: &'static str,
    },
    /// A value the parameter does not take.
    Invalid {
        /// The parameter.
        parameter: &'static str,
        /// What it takes.
        expected: &'static str,
        /// What it got (decoded, trimmed, cut after 40 characters).
        got: String,
    },
}

impl fmt::Display for QueryWeightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryWeightError::Missing { parameter } => write!(f, "{parameter} is required"),
            QueryWeightError::Unpaired { given, missing } => write!(f, "{given} is given without {missing}"),
            QueryWeightError::Conflict { parameter } => {
                write!(f, "{parameter} cannot be combined with start_date and end_date")
            }
            QueryWeightError::Invalid { parameter, expected, got } => {
                write!(f, "{parameter} must be {expected}, got {got:?}")
            }
        }
    }
}

/// The weight, in thousandths as [`weight_milli`] gives it, that the server charges
/// ([`WeightMode::Server`]) for a forecast or air-quality call with the raw query string
/// `query` (a leading `?` is skipped).
///
/// | weight input | from |
/// |---|---|
/// | locations | the items of `latitude` |
/// | variables | the names in `hourly`, `daily`, `current` and `minutely_15` together |
/// | models | the names in `models`; 1 without it |
/// | days | `forecast_days` (0 to 16, default 7) + `past_days` (0 to 92, default 0), or the days from `start_date` to `end_date` inclusive |
///
/// A call with no variables at all weighs 1 per location, whatever its days (the server's
/// `max(1, 0)`). Values are percent-decoded (`%2C` is a comma, `+` a space) and trimmed;
/// empty list items are skipped; a parameter given twice counts once, as first given; a
/// parameter given empty is taken as absent. Only what the weight depends on is checked:
/// a call priced here may still be refused by the server (a longitude list of another
/// length, a latitude out of range, more than [`MAX_LOCATIONS_PER_CALL`] locations or
/// [`MAX_WEIGHT_PER_CALL`]: see [`WeightQuery::fits_one_call`]), an error which costs 1,
/// never more than the weight given here.
///
/// # Errors
/// The [`QueryWeightError`] naming the first parameter that is missing or wrong.
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::query_weight_milli;
/// let query = "latitude=52.52%2C48.85&longitude=13.41%2C2.35&hourly=temperature_2m,rain&forecast_days=16";
/// assert_eq!(query_weight_milli(query), Ok(2_000));
/// // 15 variables over 14 days: 1.5 per location.
/// let heavy = "latitude=1&longitude=2&daily=a,b,c,d,e&hourly=f,g,h,i,j,k,l,m,n,o&past_days=7";
/// assert_eq!(query_weight_milli(heavy), Ok(1_500));
/// let wrong = query_weight_milli("latitude=1&longitude=2&forecast_days=abc").unwrap_err();
/// assert_eq!(wrong.to_string(), r#"forecast_days must be a whole number from 0 to 16, got "abc""#);
/// ```
pub fn query_weight_milli(query: &str) -> Result<u64, QueryWeightError> {
    let query = query.strip_prefix('?').unwrap_or(query);
    let locations = query_locations(query)?;
    let days = query_days(query)?;
    let variables =
        VARIABLE_PARAMETERS.iter().fold(0u32, |sum, name| sum.saturating_add(count_names(param(query, name))));
    let models = count_names(param(query, "models")).max(1);
    // No variables: max(1, 0 × …) = 1 per location, which is what 1 variable over 1 day weighs.
    let (variables, days) = if variables == 0 { (1, 1) } else { (variables, days.max(1)) };
    Ok(weight_milli(&WeightQuery { locations, days, variables, models }, WeightMode::Server))
}

/// The value of the first `name=…` pair of `query`, decoded; `None` when absent or blank.
fn param<'q>(query: &'q str, name: &str) -> Option<Cow<'q, str>> {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(key, _)| percent_decode(key) == name)
        .map(|(_, value)| percent_decode(value))
        .filter(|value| !value.trim().is_empty())
}

/// `+` as a space and `%XX` as its byte; a `%` without two hex digits stays as it is.
/// Borrows when there is nothing to decode.
fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains(['%', '+']) {
        return Cow::Borrowed(text);
    }
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = match (b, bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => u8::try_from(high * 16 + low).ok(),
            _ => None,
        };
        match (escaped, b) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// The non-empty items of a comma-separated list, trimmed.
fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|item| !item.is_empty())
}

fn count_names(value: Option<Cow<'_, str>>) -> u32 {
    value.map_or(0, |value| u32::try_from(list_items(&value).count()).unwrap_or(u32::MAX))
}

/// `text` trimmed and cut after 40 characters, for an error message.
fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(40) {
        Some((end, _)) => {
            let mut clipped = String::from(&text[..end]);
            clipped.push('…');
            clipped
        }
        None => String::from(text),
    }
}

/// The number of `latitude` items, each a decimal number.
fn query_locations(query: &str) -> Result<u32, QueryWeightError> {
    let value = param(query, "latitude").ok_or(QueryWeightError::Missing { parameter: "latitude" })?;
    let mut count = 0u32;
    for item in value.split(',') {
        if !is_decimal(item.trim()) {
            return Err(QueryWeightError::Invalid {
                parameter: "latitude",
                expected: "a comma-separated list of numbers",
                got: clip(item),
            });
        }
        count = count.saturating_add(1);
    }
    Ok(count)
}

/// `-12.5`, `52`, `.5`, `+1e2`: a sign, digits with at most one point, an exponent.
fn is_decimal(text: &str) -> bool {
    fn unsigned(part: &str) -> &str {
        part.strip_prefix(['+', '-']).unwrap_or(part)
    }
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(unsigned(exponent))),
        None => (text, None),
    };
    let mantissa = unsigned(mantissa);
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    digits(whole)
        && digits(fraction)
        && !(whole.is_empty() && fraction.is_empty())
        && exponent.is_none_or(|e| !e.is_empty() && digits(e))
}

/// Days asked for: `forecast_days` + `past_days`, or `start_date` to `end_date` inclusive.
fn query_days(query: &str) -> Result<u32, QueryWeightError> {
    let (start, end) = (param(query, "start_date"), param(query, "end_date"));
    if start.is_none() && end.is_none() {
        let forecast = whole_number(query, "forecast_days", 7, 16, "a whole number from 0 to 16")?;
        let past = whole_number(query, "past_days", 0, 92, "a whole number from 0 to 92")?;
        return Ok(forecast + past);
    }
    if let Some(parameter) = ["forecast_days", "past_days"].into_iter().find(|name| param(query, name).is_some()) {
        return Err(QueryWeightError::Conflict { parameter });
    }
    let (start, end) = match (start, end) {
        (Some(start), Some(end)) => (start, end),
        (Some(_), None) => return Err(QueryWeightError::Unpaired { given: "start_date", missing: "end_date" }),
        (None, _) => return Err(QueryWeightError::Unpaired { given: "end_date", missing: "start_date" }),
    };
    let first = day_number(&start, "start_date")?;
    let last = day_number(&end, "end_date")?;
    if last < first {
        let expected = "a date on or after start_date";
        return Err(QueryWeightError::Invalid { parameter: "end_date", expected, got: clip(&end) });
    }
    Ok(last - first + 1)
}

/// `name` as a whole number from 0 to `max`, or `default` without it.
fn whole_number(
    query: &str,
    parameter: &'static str,
    default: u32,
    max: u32,
    expected: &'static str,
) -> Result<u32, QueryWeightError> {
    let Some(value) = param(query, parameter) else { return Ok(default) };
    let text = value.trim();
    match text.parse::<u32>() {
        Ok(n) if n <= max && text.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(QueryWeightError::Invalid { parameter, expected, got: clip(text) }),
    }
}

/// A `YYYY-MM-DD` date from 1940-01-01 to 2100-12-31, as days since 1940-01-01.
fn day_number(value: &str, parameter: &'static str) -> Result<u32, QueryWeightError> {
    let text = value.trim();
    let invalid = || QueryWeightError::Invalid {
        parameter,
        expected: "a date YYYY-MM-DD from 1940-01-01 to 2100-12-31",
        got: clip(text),
    };
    let field = |range: core::ops::Range<usize>| -> Option<u32> {
        let part = text.get(range)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let dashes = text.len() == 10 && text.get(4..5) == Some("-") && text.get(7..8) == Some("-");
    let (Some(year), Some(month), Some(day), true) = (field(0..4), field(5..7), field(8..10), dashes) else {
        return Err(invalid());
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1940..=2100).contains(&year) || !(1..=12).contains(&month) || !(1..=month_days).contains(&day) {
        return Err(invalid());
    }
    // Days in the years since 1940 (469 leap years come before 1940), the months before
    // this one, and this month.
    let leap_days = (year - 1) / 4 - (year - 1) / 100 + (year - 1) / 400 - 469;
    let before_month =
        [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month as usize - 1] + u32::from(leap && month > 2);
    Ok((year - 1940) * 365 + leap_days + before_month + day - 1)
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
    fn locations_per_call_packs_the_budget_and_never_outweighs_it() {
        let ok = |f: fn(u32) -> f64| move |n| Ok::<_, ()>(f(n));
        // one per location: the budget itself, however large `max` is, up to the API's cap
        assert_eq!(locations_per_call(ok(f64::from), 600.0, 5_000), Ok(600));
        assert_eq!(locations_per_call(ok(f64::from), 5_000.0, 5_000), Ok(MAX_LOCATIONS_PER_CALL));
        assert_eq!(locations_per_call(ok(f64::from), 600.0, 7), Ok(7), "600 / 7 packs 85 × 7 = 595 (99 %)");
        // nothing packs to 98 %: the count that packs best (13 × 41 = 533 of 550, 96.9 %)
        let sparse = |n: u32| f64::from(n) * 41.0;
        assert_eq!(locations_per_call(ok(sparse), 550.0, 1), Ok(1));
        assert_eq!(locations_per_call(|n| Ok::<_, ()>(sparse(n)), 550.0, 3), Ok(1));
        // a call heavier than the budget or than one call may weigh is never chosen
        assert_eq!(locations_per_call(ok(|n| f64::from(n) * 1_000.0), 550.0, 10), Ok(1));
        assert_eq!(locations_per_call(ok(|n| f64::from(n) * 2_600.0), 100_000.0, 10), Ok(1));
        assert_eq!(locations_per_call(ok(|n| f64::from(n) * 2_500.0), 100_000.0, 10), Ok(2));
        assert_eq!(locations_per_call(ok(f64::from), 600.0, 0), Ok(1));
        assert_eq!(locations_per_call(ok(|n| if n > 3 { 0.0 } else { f64::from(n) }), 6.0, 10), Ok(3));
        assert_eq!(locations_per_call(ok(|_| f64::NAN), 600.0, 10), Ok(1));
        // the first error of the weight is the answer
        assert_eq!(locations_per_call(|n| if n < 50 { Err(n) } else { Ok(1e9) }, 550.0, 100), Err(49));
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

    /// `count` variable names, `a0,a1,…`.
    fn names(count: usize) -> alloc::string::String {
        (0..count).map(|i| alloc::format!("a{i}")).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn a_query_string_weighs_what_the_server_formula_gives() {
        let ten = names(10);
        assert_eq!(query_weight_milli(&alloc::format!("latitude=52.52&longitude=13.41&hourly={ten}")), Ok(1_000));
        let fifty: Vec<_> = (0..50).map(|i| alloc::format!("{i}.5")).collect();
        let fifty = fifty.join(",");
        let query = alloc::format!("latitude={fifty}&longitude={fifty}&daily={ten}&forecast_days=16");
        let expected = weight_milli(&q(50, 16, 10), WeightMode::Server);
        assert_eq!(query_weight_milli(&query), Ok(expected));
        // 50 × 10/10 × 16/14 = 57.142857… weighted calls, rounded up in thousandths.
        assert_eq!(expected, 57_143);
    }

    #[test]
    fn the_worked_weights_come_out_of_query_strings() {
        let weigh = |query: &str| query_weight_milli(&alloc::format!("latitude=1&longitude=2&{query}"));
        // 15 variables over 14 days: 1.5.
        assert_eq!(weigh(&alloc::format!("daily={}&forecast_days=7&past_days=7", names(15))), Ok(1_500));
        // 15 variables over 28 days: 3.0.
        let dates = "start_date=2026-02-01&end_date=2026-02-28";
        assert_eq!(weigh(&alloc::format!("hourly={}&{dates}", names(15))), Ok(3_000));
        // 6 variables from 2 models over 7 days: 1.2.
        assert_eq!(weigh(&alloc::format!("current={}&models=icon_seamless,gfs_seamless", names(6))), Ok(1_200));
        // 5 variables over 28 days: 1.0 on the server (2.0 conservatively).
        assert_eq!(weigh(&alloc::format!("daily={}&{dates}", names(5))), Ok(1_000));
        assert_eq!(query_weight_milli(&alloc::format!("latitude={}&hourly=a,b,c", ["1"; 100].join(","))), Ok(100_000));
    }

    #[test]
    fn variables_add_up_across_sections_and_models_multiply_them() {
        let base = "latitude=1&longitude=2&forecast_days=14";
        let weigh = |rest: &str| query_weight_milli(&alloc::format!("{base}&{rest}")).unwrap();
        assert_eq!(weigh("hourly=a,b,c&daily=d,e,f&current=g,h&minutely_15=i,j,k,l"), 1_200);
        assert_eq!(weigh("hourly=a,b,c&daily=d,e,f&current=g,h&minutely_15=i,j,k,l&models=x,y"), 2_400);
        assert_eq!(weigh("hourly=a,,b,%20,c,&models=,x,"), 1_000, "empty items are skipped");
        assert_eq!(weigh(&alloc::format!("hourly={}&models=x,y", names(10))), 2_000, "as the mock charges it");
        assert_eq!(weigh(&alloc::format!("hourly={}&hourly=a", names(20))), 2_000, "the first one counts");
    }

    #[test]
    fn a_call_without_variables_weighs_one_per_location_whatever_its_days() {
        assert_eq!(query_weight_milli("latitude=1,2,3&longitude=1,2,3"), Ok(3_000));
        assert_eq!(query_weight_milli("latitude=1&start_date=2025-01-01&end_date=2025-12-31"), Ok(1_000));
        assert_eq!(query_weight_milli("latitude=1&hourly=&daily=%2C"), Ok(1_000));
        // One variable over those 365 days does weigh more: 365/140.
        let one = query_weight_milli("latitude=1&hourly=a&start_date=2025-01-01&end_date=2025-12-31");
        assert_eq!(one, Ok(weight_milli(&q(1, 365, 1), WeightMode::Server)));
        assert_eq!(one, Ok(2_608));
    }

    #[test]
    fn encoded_commas_and_spaces_are_decoded() {
        assert_eq!(query_weight_milli("latitude=1%2C2%2c3&hourly=a%2Cb"), Ok(3_000));
        assert_eq!(query_weight_milli(&alloc::format!("?latitude=+1,%2B2&hourly={}", names(20))), Ok(4_000));
        assert_eq!(query_weight_milli(&alloc::format!("%6Catitude=1&hourly={}", names(20))), Ok(2_000));
        assert_eq!(query_weight_milli("latitude=1&forecast_days=%3116"), Err(invalid_forecast_days("116")));
        assert_eq!(percent_decode("%zz%4%"), "%zz%4%");
        assert_eq!(percent_decode("%ff"), "\u{fffd}", "bytes that are not UTF-8 are replaced");
    }

    #[test]
    fn the_days_are_counted_inclusively_between_valid_dates() {
        let days = |query: &str| query_days(query);
        assert_eq!(days(""), Ok(7));
        assert_eq!(days("forecast_days=0"), Ok(0));
        assert_eq!(days("forecast_days=16&past_days=92"), Ok(108));
        assert_eq!(days("forecast_days=&past_days= 2 "), Ok(9), "blank is absent; values are trimmed");
        assert_eq!(days("start_date=2026-01-01&end_date=2026-01-01"), Ok(1));
        assert_eq!(days("start_date=2024-02-28&end_date=2024-03-01"), Ok(3), "2024 is a leap year");
        assert_eq!(days("start_date=2100-02-28&end_date=2100-03-01"), Ok(2), "2100 is not");
        assert_eq!(days("start_date=2000-02-28&end_date=2000-03-01"), Ok(3), "2000 is");
        assert_eq!(days("start_date=1940-01-01&end_date=2100-12-31"), Ok(58_805), "161 years, 40 of them leap");
        assert_eq!(day_number("1940-01-01", "start_date"), Ok(0));
        assert_eq!(day_number("1970-01-01", "start_date"), Ok(10_958), "the Unix epoch");
        assert_eq!(day_number("2026-01-01", "start_date"), Ok(10_958 + 20_454), "the mock's first day");
    }

    fn invalid_forecast_days(got: &str) -> QueryWeightError {
        QueryWeightError::Invalid {
            parameter: "forecast_days",
            expected: "a whole number from 0 to 16",
            got: alloc::string::String::from(got),
        }
    }

    #[test]
    fn each_error_names_its_parameter_and_what_was_wrong() {
        let message = |query: &str| alloc::string::ToString::to_string(&query_weight_milli(query).unwrap_err());
        assert_eq!(message(""), "latitude is required");
        assert_eq!(message("longitude=1&latitude= "), "latitude is required");
        assert_eq!(message("latitude=1,,2"), r#"latitude must be a comma-separated list of numbers, got """#);
        assert_eq!(
            message("latitude=52.5,north"),
            r#"latitude must be a comma-separated list of numbers, got "north""#
        );
        assert_eq!(
            message("latitude=1&forecast_days=abc"),
            r#"forecast_days must be a whole number from 0 to 16, got "abc""#
        );
        assert_eq!(
            message("latitude=1&forecast_days=17"),
            r#"forecast_days must be a whole number from 0 to 16, got "17""#
        );
        assert_eq!(
            message("latitude=1&forecast_days=-0"),
            r#"forecast_days must be a whole number from 0 to 16, got "-0""#
        );
        assert_eq!(message("latitude=1&past_days=93"), r#"past_days must be a whole number from 0 to 92, got "93""#);
        assert_eq!(
            message("latitude=1&start_date=2026-01-01&end_date=2026-01-02&past_days=1"),
            "past_days cannot be combined with start_date and end_date"
        );
        assert_eq!(message("latitude=1&start_date=2026-01-01"), "start_date is given without end_date");
        assert_eq!(message("latitude=1&end_date=2026-01-01"), "end_date is given without start_date");
        assert_eq!(
            message("latitude=1&start_date=2026-02-30&end_date=2026-03-01"),
            r#"start_date must be a date YYYY-MM-DD from 1940-01-01 to 2100-12-31, got "2026-02-30""#
        );
        for bad in [
            "1939-12-31",
            "2101-01-01",
            "2026-1-01",
            "2026-13-01",
            "2026-00-10",
            "2026/01/01",
            "+026-01-01",
            "2026-01-1é",
        ] {
            let query = alloc::format!("latitude=1&start_date=2026-01-01&end_date={bad}");
            assert!(
                matches!(query_weight_milli(&query), Err(QueryWeightError::Invalid { parameter: "end_date", .. })),
                "{bad}"
            );
        }
        assert_eq!(
            message("latitude=1&start_date=2026-01-02&end_date=2026-01-01"),
            r#"end_date must be a date on or after start_date, got "2026-01-01""#
        );
        let long = alloc::format!("latitude=1&forecast_days={}", "9".repeat(100));
        assert_eq!(
            message(&long),
            alloc::format!(r#"forecast_days must be a whole number from 0 to 16, got "{}…""#, "9".repeat(40))
        );
    }

    #[test]
    fn numbers_in_the_latitude_list_are_checked_as_decimals() {
        for good in ["52", "-12.5", ".5", "5.", "+1e2", "1E-3", "0"] {
            assert!(is_decimal(good), "{good}");
        }
        for bad in ["", ".", "-", "e5", "1e", "1e+", "1.2.3", "0x10", "NaN", "inf", "1 2", "--1"] {
            assert!(!is_decimal(bad), "{bad}");
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// Query strings made of the parameters the weight reads, with values near and far
        /// from valid.
        fn plausible_query() -> impl Strategy<Value = alloc::string::String> {
            let name = prop_oneof![
                Just("latitude"),
                Just("hourly"),
                Just("daily"),
                Just("current"),
                Just("minutely_15"),
                Just("models"),
                Just("forecast_days"),
                Just("past_days"),
                Just("start_date"),
                Just("end_date"),
                Just("l%61titude"),
                Just(""),
            ];
            let value = prop_oneof![
                "[0-9,.%+eE-]{0,12}",
                "(19|20|21)[0-9]{2}-[01][0-9]-[0-3][0-9]",
                "[a-z_,]{0,30}",
                "(%2C|%2c|%|,|\\+|[0-9a-fA-F]){0,10}",
                ".{0,12}",
            ];
            prop::collection::vec((name, value), 0..10)
                .prop_map(|pairs| pairs.iter().map(|(n, v)| alloc::format!("{n}={v}")).collect::<Vec<_>>().join("&"))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4_000))]

            #[test]
            fn any_string_is_priced_or_refused_never_a_panic(query in prop_oneof![any::<alloc::string::String>(), plausible_query()]) {
                match query_weight_milli(&query) {
                    Ok(milli) => prop_assert!(milli >= 1_000, "{} for {:?}", milli, query),
                    Err(error) => prop_assert!(!alloc::string::ToString::to_string(&error).is_empty()),
                }
            }
        }
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
