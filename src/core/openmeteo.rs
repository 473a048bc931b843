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

use crate::core::limit::Window;
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
/// to price a fan-out before it is split) but see [`WeightQuery::fits_one_call`]. One read
/// from a query string by [`read_query`] may ask for 0 variables or 0 days, as such a query
/// does; [`WeightQuery::new`] refuses both.
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
    /// Whole days asked for (0 only from [`read_query`]).
    pub const fn days(&self) -> u32 {
        self.days
    }
    /// Variables asked for (0 only from [`read_query`]).
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

/// Minutes in a day, the unit every range of a query is measured in before it is rounded up
/// to whole days.
const DAY_MINUTES: u64 = 1_440;
/// Minutes in an hour (`forecast_hours`, `start_hour`).
const HOUR_MINUTES: u64 = 60;
/// Minutes in one `minutely_15` step.
const QUARTER_MINUTES: u64 = 15;

/// Why [`read_query`] could not read a query string: the parameter, and what was wrong
/// with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueryWeightError {
    /// A parameter the weight needs is absent or empty (`latitude`).
    Missing {
        /// The parameter.
        parameter: &'static str,
    },
    /// One end of a range without the other (`start_date` without `end_date`, `end_hour`
    /// without `start_hour`, …).
    Unpaired {
        /// The one given.
        given: &'static str,
        /// The one missing.
        missing: &'static str,
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
            QueryWeightError::Invalid { parameter, expected, got } => {
                write!(f, "{parameter} must be {expected}, got \"")?;
                // Quoted as `{:?}` quotes it where it matters (a quote, a backslash, a control
                // character), without the Unicode tables `{:?}` brings into the browser build.
                for c in got.chars() {
                    if matches!(c, '"' | '\\') || c.is_control() {
                        write!(f, "{}", c.escape_default())?;
                    } else {
                        fmt::Write::write_char(f, c)?;
                    }
                }
                f.write_str("\"")
            }
        }
    }
}

/// The call a forecast or air-quality query string asks for (a leading `?` is skipped),
/// read so that no weight priced from it is ever below what the server charges.
///
/// | weight input | from |
/// |---|---|
/// | locations | every item of every `latitude` |
/// | variables | every item of every `hourly`, `daily`, `current` and `minutely_15`, a name listed twice counted twice |
/// | models | every item of every `models`; 1 without any |
/// | days | the largest of the ranges below that the query states, rounded up to whole days |
///
/// | range | read as |
/// |---|---|
/// | `forecast_days` (0 to 16, default 7) + `past_days` (0 to 92, default 0) | days; the default only when no start/end pair below is given, as on the server |
/// | `forecast_hours` + `past_hours` (whole numbers) | ⌈hours / 24⌉ |
/// | `forecast_minutely_15` + `past_minutely_15` (whole numbers of 15-minute steps) | ⌈steps / 96⌉ |
/// | `start_date` to `end_date` (`YYYY-MM-DD`, 1940 to 2100) | the days from one to the other, both included |
/// | `start_hour` to `end_hour` (`YYYY-MM-DDTHH:MM`) | the hours from one to the other, both included, ⌈/ 24⌉ |
/// | `start_minutely_15` to `end_minutely_15` (`YYYY-MM-DDTHH:MM`) | the 15-minute steps from one to the other, both included, ⌈/ 96⌉ |
///
/// Open-Meteo takes a list "comma separated, or multiple &hourly= parameters", so every
/// pair counts, under any spelling of its name that decodes to it (`%68ourly=` is
/// `hourly=`). A number given twice takes its largest value (`forecast_days=1&
/// forecast_days=16` is 16 days), a start given twice its earliest and an end its latest.
/// Values are percent-decoded (`%2C` is a comma, `+` a space) and trimmed; empty list items
/// are skipped; a pair with an empty value is taken as absent.
///
/// Ranges that conflict (`forecast_days` with `start_date` and `end_date`) are not an
/// error: the largest is taken. The server refuses such a call and charges 1 for the
/// refusal, and the largest range prices it at 1 or more per location; were the server to
/// answer it, it could only answer for one of the ranges read here, no longer than the
/// largest. So the larger range can never under-price the call, where an error would leave
/// its price to whoever handles the error.
///
/// A call for no variables has `variables` 0 (the server charges it 1 per location, its
/// `max(1, 0)`; the conservative formula `max(1, d/14)` per location), one for
/// `forecast_days=0` has `days` 0; [`weight`] and [`weight_milli`] price both.
/// Only what the weight depends on is checked: a call read here may still be refused by
/// the server (a longitude list of another length, a latitude out of range, more than
/// [`MAX_LOCATIONS_PER_CALL`] locations or [`MAX_WEIGHT_PER_CALL`]: see
/// [`WeightQuery::fits_one_call`]), an error which costs 1, never more than its weight.
///
/// # Errors
/// The [`QueryWeightError`] naming the first parameter that is missing or unreadable. A
/// value that cannot be read is an error even when another range would price the call.
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{read_query, weight_milli, WeightMode};
/// let query = "latitude=52.52%2C48.85&longitude=13.41,2.35&hourly=temperature_2m&hourly=rain&forecast_days=16";
/// let call = read_query(query).unwrap();
/// assert_eq!((call.locations(), call.variables(), call.days()), (2, 2, 16));
/// assert_eq!(weight_milli(&call, WeightMode::Server), 2_000);
/// // 2 locations × 16/14
/// assert_eq!(weight_milli(&call, WeightMode::Conservative), 2_286);
/// // the larger of 7 days and 24 × 28 hours
/// assert_eq!(read_query("latitude=1&hourly=a&forecast_days=7&forecast_hours=672").unwrap().days(), 28);
/// ```
pub fn read_query(query: &str) -> Result<WeightQuery, QueryWeightError> {
    let query = query.strip_prefix('?').unwrap_or(query);
    let locations = query_locations(query)?;
    let days = query_days(query)?;
    let variables = VARIABLE_PARAMETERS.iter().fold(0u32, |sum, name| sum.saturating_add(count_items(query, name)));
    let models = count_items(query, "models").max(1);
    Ok(WeightQuery { locations, days, variables, models })
}

/// The call a URL asks for: [`read_query`] over its query, the part after its first `?` up to
/// a `#` (none: no query, so `latitude` is missing). A text that does not start with
/// `http://` or `https://` (in any case) is read as a query string itself, a leading `?`
/// skipped, whatever `?` or `#` its values hold.
///
/// # Errors
/// The [`QueryWeightError`] of [`read_query`].
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{read_query, read_url};
/// let url = "https://api.open-meteo.com/v1/forecast?latitude=52.52,48.85&daily=a&forecast_days=16&past_days=7#top";
/// assert_eq!(read_url(url).unwrap().days(), 23);
/// assert_eq!(read_url(url), read_query("latitude=52.52,48.85&daily=a&forecast_days=16&past_days=7"));
/// assert_eq!(read_url("?latitude=1&daily=a").unwrap().locations(), 1);
/// ```
pub fn read_url(text: &str) -> Result<WeightQuery, QueryWeightError> {
    let has_scheme = |scheme: &str| text.get(..scheme.len()).is_some_and(|head| head.eq_ignore_ascii_case(scheme));
    if !(has_scheme("http://") || has_scheme("https://")) {
        return read_query(text);
    }
    let url = text.split_once('#').map_or(text, |(url, _)| url);
    read_query(url.split_once('?').map_or("", |(_, query)| query))
}

/// The weight of a call with the query string `query` by `mode`, in thousandths as
/// [`weight_milli`] gives it: [`read_query`], then [`weight_milli`].
///
/// # Errors
/// The [`QueryWeightError`] of [`read_query`].
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::{weigh_query, WeightMode};
/// // 5 variables over 28 days
/// let sparse = "latitude=1&longitude=2&daily=a,b,c,d,e&start_date=2026-02-01&end_date=2026-02-28";
/// assert_eq!(weigh_query(sparse, WeightMode::Conservative), Ok(2_000));
/// assert_eq!(weigh_query(sparse, WeightMode::Server), Ok(1_000));
/// // every &hourly= counts: 20 variables
/// let twice = "latitude=1&hourly=a,b,c,d,e,f,g,h,i,j&hourly=k,l,m,n,o,p,q,r,s,t";
/// assert_eq!(weigh_query(twice, WeightMode::Server), Ok(2_000));
/// let wrong = weigh_query("latitude=1&longitude=2&forecast_days=abc", WeightMode::Server).unwrap_err();
/// assert_eq!(wrong.to_string(), r#"forecast_days must be a whole number from 0 to 16, got "abc""#);
/// ```
pub fn weigh_query(query: &str, mode: WeightMode) -> Result<u64, QueryWeightError> {
    read_query(query).map(|call| weight_milli(&call, mode))
}

/// The weight of a call with the query string `query` in thousandths by the default,
/// conservative formula: [`weigh_query`] with [`WeightMode::Conservative`].
///
/// # Errors
/// The [`QueryWeightError`] of [`read_query`].
///
/// # Examples
/// ```
/// use sluicegate::openmeteo::query_weight_milli;
/// // 15 variables over 14 days: 1.5 per location.
/// let heavy = "latitude=1&longitude=2&daily=a,b,c,d,e&hourly=f,g,h,i,j,k,l,m,n,o&past_days=7";
/// assert_eq!(query_weight_milli(heavy), Ok(1_500));
/// ```
pub fn query_weight_milli(query: &str) -> Result<u64, QueryWeightError> {
    weigh_query(query, WeightMode::Conservative)
}

/// Every `name=…` pair of `query` (its name decoded), its value decoded, in order; pairs
/// with a blank value are left out.
fn values<'q>(query: &'q str, name: &'q str) -> impl Iterator<Item = Cow<'q, str>> + 'q {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .filter(move |(key, _)| percent_decode(key) == name)
        .map(|(_, value)| percent_decode(value))
        .filter(|value| !value.trim().is_empty())
}

/// `text` form-decoded ([`crate::core::form::decode`]), as UTF-8: a decoded value that is not
/// UTF-8 has each of its bytes above 127 replaced by U+FFFD (what the weight reads of a value,
/// its commas and ASCII digits, is kept; `String::from_utf8_lossy` weighs more in the browser
/// build). Borrows when there is nothing to decode.
fn percent_decode(text: &str) -> Cow<'_, str> {
    match crate::core::form::decode(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(bytes) => Cow::Owned(String::from_utf8(bytes).unwrap_or_else(|not_utf8| {
            not_utf8.as_bytes().iter().map(|&b| if b.is_ascii() { char::from(b) } else { '\u{fffd}' }).collect()
        })),
    }
}

/// The non-empty items of a comma-separated list, trimmed.
fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|item| !item.is_empty())
}

/// The items of every `name` list together.
fn count_items(query: &str, name: &str) -> u32 {
    values(query, name)
        .fold(0u32, |sum, value| sum.saturating_add(u32::try_from(list_items(&value).count()).unwrap_or(u32::MAX)))
}

/// `text` trimmed and cut after 40 characters, for an error message.
fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(40) {
        Some((end, _)) => {
            // `get`, not `[..end]`: no slicing panic (and its formatting) in the browser build
            let mut clipped = String::from(text.get(..end).unwrap_or(text));
            clipped.push('…');
            clipped
        }
        None => String::from(text),
    }
}

/// The number of items of every `latitude`, each a decimal number.
fn query_locations(query: &str) -> Result<u32, QueryWeightError> {
    let mut count = None::<u32>;
    for value in values(query, "latitude") {
        for item in value.split(',') {
            if !is_decimal(item.trim()) {
                return Err(QueryWeightError::Invalid {
                    parameter: "latitude",
                    expected: "a comma-separated list of numbers",
                    got: clip(item),
                });
            }
            count = Some(count.unwrap_or(0).saturating_add(1));
        }
    }
    count.ok_or(QueryWeightError::Missing { parameter: "latitude" })
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

/// One way a query states its range by a start and an end, and how it writes them.
struct RangeForm {
    start: &'static str,
    end: &'static str,
    /// What each end takes.
    expected: &'static str,
    /// What the end takes beside its start.
    after_start: &'static str,
    /// Whether a time of day (`THH:MM`) follows the date.
    with_time: bool,
    /// The minutes one step of the range covers (its last step is included).
    step: u64,
}

const DATES: RangeForm = RangeForm {
    start: "start_date",
    end: "end_date",
    expected: "a date YYYY-MM-DD from 1940-01-01 to 2100-12-31",
    after_start: "a date on or after start_date",
    with_time: false,
    step: DAY_MINUTES,
};

const HOURS: RangeForm = RangeForm {
    start: "start_hour",
    end: "end_hour",
    expected: "a time YYYY-MM-DDTHH:MM from 1940-01-01T00:00 to 2100-12-31T23:59",
    after_start: "a time on or after start_hour",
    with_time: true,
    step: HOUR_MINUTES,
};

const QUARTERS: RangeForm = RangeForm {
    start: "start_minutely_15",
    end: "end_minutely_15",
    expected: "a time YYYY-MM-DDTHH:MM from 1940-01-01T00:00 to 2100-12-31T23:59",
    after_start: "a time on or after start_minutely_15",
    with_time: true,
    step: QUARTER_MINUTES,
};

/// Days asked for: the largest of every range the query states, in minutes, rounded up to
/// whole days (the table of [`read_query`]).
fn query_days(query: &str) -> Result<u32, QueryWeightError> {
    let forecast_days = largest(query, "forecast_days", 16, "a whole number from 0 to 16")?;
    let past_days = largest(query, "past_days", 92, "a whole number from 0 to 92")?;
    let by_hours = counted(query, ["forecast_hours", "past_hours"], "a whole number of hours", HOUR_MINUTES)?;
    let by_quarters = counted(
        query,
        ["forecast_minutely_15", "past_minutely_15"],
        "a whole number of 15-minute steps",
        QUARTER_MINUTES,
    )?;
    let spans = [range_minutes(query, &DATES)?, range_minutes(query, &HOURS)?, range_minutes(query, &QUARTERS)?];
    // The server's default range (7 days from today) is what a start/end pair replaces.
    let by_days = (forecast_days.is_some() || past_days.is_some() || spans.iter().all(Option::is_none))
        .then(|| (u64::from(forecast_days.unwrap_or(7)) + u64::from(past_days.unwrap_or(0))) * DAY_MINUTES);
    let minutes = [by_days, by_hours, by_quarters].into_iter().chain(spans).flatten().max().unwrap_or(0);
    Ok(u32::try_from(minutes.div_ceil(DAY_MINUTES)).unwrap_or(u32::MAX))
}

/// The largest value of every `parameter`, each a whole number from 0 to `max`; `None`
/// without one.
fn largest(
    query: &str,
    parameter: &'static str,
    max: u32,
    expected: &'static str,
) -> Result<Option<u32>, QueryWeightError> {
    let mut largest = None;
    for value in values(query, parameter) {
        let text = value.trim();
        match whole_number(text) {
            Some(n) if n <= max => largest = largest.max(Some(n)),
            _ => return Err(QueryWeightError::Invalid { parameter, expected, got: clip(text) }),
        }
    }
    Ok(largest)
}

/// The minutes of a `forecast` + `past` count of `step`-minute steps (each the largest of
/// its values); `None` when neither is given.
fn counted(
    query: &str,
    [forecast, past]: [&'static str; 2],
    expected: &'static str,
    step: u64,
) -> Result<Option<u64>, QueryWeightError> {
    let forecast = largest(query, forecast, u32::MAX, expected)?;
    let past = largest(query, past, u32::MAX, expected)?;
    Ok((forecast.is_some() || past.is_some())
        .then(|| (u64::from(forecast.unwrap_or(0)) + u64::from(past.unwrap_or(0))) * step))
}

/// The minutes from the earliest start of `form` to its latest end, the end's step
/// included; `None` when neither end is given.
fn range_minutes(query: &str, form: &RangeForm) -> Result<Option<u64>, QueryWeightError> {
    let first = instant(query, form.start, form, false)?;
    let last = instant(query, form.end, form, true)?;
    match (first, last) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(QueryWeightError::Unpaired { given: form.start, missing: form.end }),
        (None, Some(_)) => Err(QueryWeightError::Unpaired { given: form.end, missing: form.start }),
        (Some((first, _)), Some((last, got))) if last < first => {
            Err(QueryWeightError::Invalid { parameter: form.end, expected: form.after_start, got })
        }
        (Some((first, _)), Some((last, _))) => Ok(Some(last - first + form.step)),
    }
}

/// The earliest (or, with `latest`, the latest) value of every `parameter`, as minutes since
/// 1940-01-01T00:00, with its text for an error message; `None` without one.
fn instant(
    query: &str,
    parameter: &'static str,
    form: &RangeForm,
    latest: bool,
) -> Result<Option<(u64, String)>, QueryWeightError> {
    let mut found: Option<(u64, String)> = None;
    for value in values(query, parameter) {
        let text = value.trim();
        let Some(at) = minute_number(text, form.with_time) else {
            return Err(QueryWeightError::Invalid { parameter, expected: form.expected, got: clip(text) });
        };
        if found.as_ref().is_none_or(|(best, _)| if latest { at > *best } else { at < *best }) {
            found = Some((at, clip(text)));
        }
    }
    Ok(found)
}

/// `YYYY-MM-DD` (or, `with_time`, `YYYY-MM-DDTHH:MM`) from 1940 to 2100, as minutes since
/// 1940-01-01T00:00.
fn minute_number(text: &str, with_time: bool) -> Option<u64> {
    let day = u64::from(day_number(text.get(..10)?)?);
    if !with_time {
        return (text.len() == 10).then_some(day * DAY_MINUTES);
    }
    let time = text.get(10..)?.strip_prefix('T')?;
    let (hour, minute) = time.split_once(':')?;
    let two_digits = |part: &str| if part.len() == 2 { whole_number(part).map(u64::from) } else { None };
    let (hour, minute) = (two_digits(hour).filter(|h| *h < 24)?, two_digits(minute).filter(|m| *m < 60)?);
    Some(day * DAY_MINUTES + hour * HOUR_MINUTES + minute)
}

/// `text` as a whole number if it is one: ASCII digits only (no sign, no space), at least one,
/// at most `u32::MAX`. (`str::parse` would take a `+` and weigh more in the browser build.)
fn whole_number(text: &str) -> Option<u32> {
    if text.is_empty() {
        return None;
    }
    text.bytes().try_fold(0u32, |n, b| {
        let digit = char::from(b).to_digit(10)?;
        n.checked_mul(10)?.checked_add(digit)
    })
}

/// A `YYYY-MM-DD` date from 1940-01-01 to 2100-12-31, as days since 1940-01-01.
fn day_number(text: &str) -> Option<u32> {
    let field = |range: core::ops::Range<usize>| text.get(range).and_then(whole_number);
    let dashes = text.len() == 10 && text.get(4..5) == Some("-") && text.get(7..8) == Some("-");
    let (Some(year), Some(month), Some(day), true) = (field(0..4), field(5..7), field(8..10), dashes) else {
        return None;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1940..=2100).contains(&year) || !(1..=12).contains(&month) || !(1..=month_days).contains(&day) {
        return None;
    }
    // Days in the years since 1940 (469 leap years come before 1940), the months before
    // this one, and this month.
    let leap_days = (year - 1) / 4 - (year - 1) / 100 + (year - 1) / 400 - 469;
    let before_month =
        [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month as usize - 1] + u32::from(leap && month > 2);
    Some((year - 1940) * 365 + leap_days + before_month + day - 1)
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

    fn server(query: &str) -> Result<u64, QueryWeightError> {
        weigh_query(query, WeightMode::Server)
    }

    fn conservative(query: &str) -> Result<u64, QueryWeightError> {
        weigh_query(query, WeightMode::Conservative)
    }

    #[test]
    fn a_query_string_weighs_what_the_server_formula_gives() {
        let ten = names(10);
        assert_eq!(server(&alloc::format!("latitude=52.52&longitude=13.41&hourly={ten}")), Ok(1_000));
        let fifty: Vec<_> = (0..50).map(|i| alloc::format!("{i}.5")).collect();
        let fifty = fifty.join(",");
        let query = alloc::format!("latitude={fifty}&longitude={fifty}&daily={ten}&forecast_days=16");
        let expected = weight_milli(&q(50, 16, 10), WeightMode::Server);
        assert_eq!(server(&query), Ok(expected));
        // 50 × 10/10 × 16/14 = 57.142857… weighted calls, rounded up in thousandths.
        assert_eq!(expected, 57_143);
        assert_eq!(conservative(&query), Ok(expected), "equal from 10 variables on");
    }

    #[test]
    fn upstreams_worked_values_come_out_of_query_strings_in_both_modes() {
        let at = |rest: &str| alloc::format!("latitude=1&longitude=2&{rest}");
        let dates = "start_date=2026-02-01&end_date=2026-02-28";
        // (query, server, conservative): UPSTREAM.md's worked values, equal in both modes
        // from 10 variables (× models) on.
        let cases = [
            (at(&alloc::format!("hourly={}&forecast_days=7", names(10))), 1_000, 1_000),
            (at(&alloc::format!("daily={}&forecast_days=7&past_days=7", names(15))), 1_500, 1_500),
            (at(&alloc::format!("hourly={}&{dates}", names(15))), 3_000, 3_000),
            (at(&alloc::format!("current={}&models=icon_seamless,gfs_seamless", names(6))), 1_200, 1_200),
            (alloc::format!("latitude={}&hourly=a,b,c", ["1"; 100].join(",")), 100_000, 100_000),
            // 5 variables over 28 days: 1.0 on the server, 2.0 conservatively.
            (at(&alloc::format!("daily={}&{dates}", names(5))), 1_000, 2_000),
        ];
        for (query, by_server, by_conservative) in cases {
            assert_eq!(server(&query), Ok(by_server), "{query}");
            assert_eq!(conservative(&query), Ok(by_conservative), "{query}");
        }
    }

    #[test]
    fn the_one_argument_reader_weighs_conservatively() {
        let sparse = alloc::format!("latitude=1&daily={}&forecast_days=16&past_days=12", names(5));
        assert_eq!(query_weight_milli(&sparse), Ok(2_000));
        assert_eq!(query_weight_milli(&sparse), conservative(&sparse));
        assert_eq!(server(&sparse), Ok(1_000));
    }

    #[test]
    fn variables_add_up_across_sections_and_models_multiply_them() {
        let base = "latitude=1&longitude=2&forecast_days=14";
        let weigh = |rest: &str| server(&alloc::format!("{base}&{rest}")).unwrap();
        assert_eq!(weigh("hourly=a,b,c&daily=d,e,f&current=g,h&minutely_15=i,j,k,l"), 1_200);
        assert_eq!(weigh("hourly=a,b,c&daily=d,e,f&current=g,h&minutely_15=i,j,k,l&models=x,y"), 2_400);
        assert_eq!(weigh("hourly=a,,b,%20,c,&models=,x,"), 1_000, "empty items are skipped");
        assert_eq!(weigh(&alloc::format!("hourly={}&models=x,y", names(10))), 2_000, "as the mock charges it");
        assert_eq!(weigh(&alloc::format!("hourly={}&hourly=a", names(20))), 2_100, "every hourly counts");
    }

    #[test]
    fn every_value_of_a_repeated_list_parameter_counts() {
        let ten = names(10);
        // Each of these was once read from its first pair only, at 1.0.
        let cases = [
            (alloc::format!("latitude=1&hourly={ten}&hourly={ten}"), 2_000),
            (alloc::format!("latitude=1&daily={ten}&daily={ten}&daily={ten}"), 3_000),
            (alloc::format!("latitude=1&current={ten}&current={ten}"), 2_000),
            (alloc::format!("latitude=1&minutely_15={ten}&minutely_15={ten}"), 2_000),
            (alloc::format!("latitude=1&hourly={ten}&models=icon_seamless&models=gfs_seamless"), 2_000),
            (alloc::format!("latitude=1&hourly={ten}&%68ourly={ten}"), 2_000),
            (alloc::format!("latitude=1&hourly={ten}&%6dodels=a&m%6Fdels=b,c"), 3_000),
            (alloc::string::String::from("latitude=1&hourly=a,a,a,a,a,a,a,a,a,a&hourly=a,a,a,a,a,a,a,a,a,a"), 2_000),
        ];
        for (query, expected) in &cases {
            assert_eq!(server(query), Ok(*expected), "{query}");
        }
        let fifty: Vec<_> = (0..50).map(|i| alloc::format!("latitude={i}")).collect();
        let fifty = alloc::format!("{}&hourly=a", fifty.join("&"));
        assert_eq!(read_query(&fifty).unwrap().locations(), 50);
        assert_eq!(server(&fifty), Ok(50_000));
        assert_eq!(read_query("latitude=1,2&latitude=&l%61titude=3").unwrap().locations(), 3);
    }

    #[test]
    fn the_days_are_the_largest_range_the_query_states() {
        let days = |query: &str| query_days(query);
        assert_eq!(days("forecast_days=1&forecast_days=16"), Ok(16), "a number given twice is its largest");
        assert_eq!(days("forecast_days=16&forecast_days=1"), Ok(16));
        assert_eq!(days("past_days=2&past_days=92&forecast_days=0"), Ok(92));
        // hours, rounded up to days; the default 7 days stays, as on the server
        assert_eq!(days("forecast_hours=24"), Ok(7));
        assert_eq!(days("forecast_hours=385"), Ok(17));
        assert_eq!(days("forecast_hours=384&past_hours=1"), Ok(17));
        assert_eq!(days("past_hours=2208&forecast_hours=384"), Ok(108));
        assert_eq!(days("forecast_days=16&forecast_hours=24"), Ok(16));
        // 15-minute steps: 96 a day
        assert_eq!(days("forecast_minutely_15=1920"), Ok(20));
        assert_eq!(days("forecast_minutely_15=1920&past_minutely_15=1"), Ok(21));
        // start_hour..end_hour, both hours included
        assert_eq!(days("start_hour=2026-01-01T00:00&end_hour=2026-01-01T23:00"), Ok(1), "24 hours, no default");
        assert_eq!(days("start_hour=2026-01-01T00:00&end_hour=2026-01-02T00:00"), Ok(2), "25 hours");
        assert_eq!(days("start_hour=2026-01-01T00:00&end_hour=2026-01-28T23:00"), Ok(28));
        assert_eq!(days("start_minutely_15=2026-01-01T00:00&end_minutely_15=2026-01-01T23:45"), Ok(1));
        assert_eq!(days("start_minutely_15=2026-01-01T00:00&end_minutely_15=2026-01-02T00:00"), Ok(2));
        // ranges that conflict: the largest
        assert_eq!(days("forecast_days=16&start_date=2026-01-01&end_date=2026-01-28"), Ok(28));
        assert_eq!(days("forecast_days=16&start_date=2026-01-01&end_date=2026-01-01"), Ok(16));
        assert_eq!(
            days("past_days=3&start_date=2026-01-01&end_date=2026-01-01"),
            Ok(10),
            "past_days with the default 7"
        );
        assert_eq!(
            days("start_date=2026-01-01&end_date=2026-01-03&start_hour=2026-01-01T00:00&end_hour=2026-01-10T23:00"),
            Ok(10)
        );
        // a start given twice is its earliest, an end its latest
        assert_eq!(days("start_date=2026-01-10&start_date=2026-01-01&end_date=2026-01-02&end_date=2026-01-28"), Ok(28));
    }

    #[test]
    fn ranges_the_server_charges_many_times_over_are_priced_so() {
        let ten = names(10);
        // 108 days in hours: 7.7 per location, once priced 1.0
        assert_eq!(server(&alloc::format!("latitude=1&hourly={ten}&forecast_hours=384&past_hours=2208")), Ok(7_715));
        let span = "start_hour=2026-01-01T00:00&end_hour=2026-02-25T23:00";
        assert_eq!(server(&alloc::format!("latitude=1&hourly={ten}&{span}")), Ok(4_000));
        let steps = "start_minutely_15=2026-01-01T00:00&end_minutely_15=2026-02-25T23:45";
        assert_eq!(server(&alloc::format!("latitude=1&minutely_15={ten}&{steps}")), Ok(4_000));
        // the minutely_15 counts of 56 days, with the variables of two sections
        let counts = "forecast_minutely_15=1536&past_minutely_15=3840";
        assert_eq!(server(&alloc::format!("latitude=1&minutely_15={ten}&hourly={ten}&{counts}")), Ok(8_000));
    }

    #[test]
    fn a_call_without_variables_weighs_one_per_location_on_the_server_whatever_its_days() {
        assert_eq!(server("latitude=1,2,3&longitude=1,2,3"), Ok(3_000));
        let year = "latitude=1&start_date=2025-01-01&end_date=2025-12-31";
        assert_eq!(server(year), Ok(1_000));
        assert_eq!(conservative(year), Ok(26_072), "max(1, 365/14): the formula with its variable factor at 1");
        assert_eq!(server("latitude=1&hourly=&daily=%2C"), Ok(1_000));
        assert_eq!(read_query("latitude=1&hourly=&daily=%2C").unwrap().variables(), 0);
        // One variable over those 365 days does weigh more: 365/140.
        let one = server("latitude=1&hourly=a&start_date=2025-01-01&end_date=2025-12-31");
        assert_eq!(one, Ok(weight_milli(&q(1, 365, 1), WeightMode::Server)));
        assert_eq!(one, Ok(2_608));
        assert_eq!(server("latitude=1&hourly=a&forecast_days=0"), Ok(1_000), "0 days");
    }

    #[test]
    fn a_url_is_read_by_its_query_and_a_query_string_as_itself() {
        let query = "latitude=1,2&hourly=a,b&forecast_days=16&past_days=7";
        for url in [
            alloc::format!("https://api.open-meteo.com/v1/forecast?{query}"),
            alloc::format!("HTTP://127.0.0.1:8787/mock/open-meteo/v1/forecast?{query}#daily"),
            alloc::format!("?{query}"),
            alloc::string::String::from(query),
        ] {
            let call = read_url(&url).unwrap();
            assert_eq!((call.locations(), call.days(), call.variables()), (2, 23, 2), "{url}");
        }
        // the fragment is not the query; a URL without a query asks for no location
        assert_eq!(
            read_url("https://x.example/v1/forecast#?latitude=1"),
            Err(QueryWeightError::Missing { parameter: "latitude" })
        );
        assert_eq!(read_url("https://x.example/?"), Err(QueryWeightError::Missing { parameter: "latitude" }));
        // a query string is not cut at a `?` or `#` in its values
        assert_eq!(read_url("latitude=1&x=a?b&daily=c#d").unwrap().variables(), 1);
        assert_eq!(read_url("latitude=1&daily=a,b&x=?&daily=c").unwrap().variables(), 3);
        assert_eq!(read_url("https://x.example/?latitude=1&forecast_days=17"), Err(invalid_forecast_days("17")));
        assert_eq!(read_url("http:/"), Err(QueryWeightError::Missing { parameter: "latitude" }));
    }

    #[test]
    fn whole_numbers_are_ascii_digits_that_fit_in_32_bits() {
        assert_eq!(whole_number("0"), Some(0));
        assert_eq!(whole_number("007"), Some(7));
        assert_eq!(whole_number("4294967295"), Some(u32::MAX));
        for bad in ["", "+1", "-0", " 1", "1 ", "1.5", "1e2", "4294967296", "99999999999", "\u{661}"] {
            assert_eq!(whole_number(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_value_in_an_error_is_quoted_its_quotes_backslashes_and_controls_escaped() {
        let error = QueryWeightError::Invalid {
            parameter: "forecast_days",
            expected: "a whole number from 0 to 16",
            got: alloc::string::String::from("a\"b\\c\u{1}\té"),
        };
        assert_eq!(
            alloc::string::ToString::to_string(&error),
            r#"forecast_days must be a whole number from 0 to 16, got "a\"b\\c\u{1}\té""#
        );
        assert_eq!(query_weight_milli("latitude=1&forecast_days=%22"), Err(invalid_forecast_days("\"")));
        // a decoded value that is not UTF-8 keeps its ASCII; each other byte is U+FFFD
        assert_eq!(percent_decode("%C3%A9"), "é");
        assert_eq!(percent_decode("1%C3%A9%ff"), "1\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(
            alloc::string::ToString::to_string(&query_weight_milli("latitude=1%ff").unwrap_err()),
            "latitude must be a comma-separated list of numbers, got \"1\u{fffd}\""
        );
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
        assert_eq!(day_number("1940-01-01"), Some(0));
        assert_eq!(day_number("1970-01-01"), Some(10_958), "the Unix epoch");
        assert_eq!(day_number("2026-01-01"), Some(10_958 + 20_454), "the mock's first day");
        assert_eq!(minute_number("1940-01-02T01:30", true), Some(1_440 + 90));
        assert_eq!(minute_number("1940-01-02", false), Some(1_440));
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
        assert_eq!(message("latitude=1&end_hour=2026-01-01T00:00"), "end_hour is given without start_hour");
        assert_eq!(
            message("latitude=1&start_minutely_15=2026-01-01T00:00"),
            "start_minutely_15 is given without end_minutely_15"
        );
        assert_eq!(
            message("latitude=1&start_hour=2026-01-02T00:00&end_hour=2026-01-01T23:00"),
            r#"end_hour must be a time on or after start_hour, got "2026-01-01T23:00""#
        );
        assert_eq!(
            message("latitude=1&forecast_hours=-1"),
            r#"forecast_hours must be a whole number of hours, got "-1""#
        );
        assert_eq!(
            message("latitude=1&past_minutely_15=1.5"),
            r#"past_minutely_15 must be a whole number of 15-minute steps, got "1.5""#
        );
        let long = alloc::format!("latitude=1&forecast_days={}", "9".repeat(100));
        assert_eq!(
            message(&long),
            alloc::format!(r#"forecast_days must be a whole number from 0 to 16, got "{}…""#, "9".repeat(40))
        );
    }

    #[test]
    fn an_unreadable_value_is_an_error_naming_it_even_beside_a_readable_one() {
        let parameter_of = |query: &str| match read_query(query) {
            Err(QueryWeightError::Invalid { parameter, .. }) => Some(parameter),
            _ => None,
        };
        assert_eq!(parameter_of("latitude=1&forecast_days=16&forecast_days=abc"), Some("forecast_days"));
        assert_eq!(parameter_of("latitude=1&past_days=1&past_days=93"), Some("past_days"));
        assert_eq!(parameter_of("latitude=1&latitude=north"), Some("latitude"));
        assert_eq!(parameter_of("latitude=1&forecast_hours=24&forecast_hours=x"), Some("forecast_hours"));
        assert_eq!(parameter_of("latitude=1&forecast_minutely_15=99999999999"), Some("forecast_minutely_15"));
        let hours = "start_hour=2026-01-01T00:00&end_hour=2026-01-02T00:00";
        for bad in [
            "2026-01-01",
            "2026-01-01T24:00",
            "2026-01-01T00:60",
            "2026-01-01 00:00",
            "2026-01-01T00:00:00",
            "2026-01-01T0:00",
        ] {
            assert_eq!(
                parameter_of(&alloc::format!("latitude=1&{hours}&start_hour={bad}")),
                Some("start_hour"),
                "{bad}"
            );
        }
        let dates = "start_date=2026-01-01&end_date=2026-01-02";
        assert_eq!(parameter_of(&alloc::format!("latitude=1&{dates}&end_date=2026-02-30")), Some("end_date"));
        assert_eq!(
            parameter_of("latitude=1&start_minutely_15=x&end_minutely_15=2026-01-01T00:00"),
            Some("start_minutely_15")
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
                Just("forecast_hours"),
                Just("past_hours"),
                Just("start_hour"),
                Just("end_hour"),
                Just("forecast_minutely_15"),
                Just("past_minutely_15"),
                Just("start_minutely_15"),
                Just("end_minutely_15"),
                Just("l%61titude"),
                Just(""),
            ];
            let value = prop_oneof![
                "[0-9,.%+eE-]{0,12}",
                "(19|20|21)[0-9]{2}-[01][0-9]-[0-3][0-9]",
                "(19|20|21)[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-6][0-9]",
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
                match read_query(&query) {
                    Ok(call) => {
                        let (by_server, by_conservative) =
                            (weight_milli(&call, WeightMode::Server), weight_milli(&call, WeightMode::Conservative));
                        prop_assert!(by_server >= 1_000, "{} for {:?}", by_server, query);
                        prop_assert!(by_conservative >= by_server, "{:?}", query);
                    }
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
