//! §7: the persisted mapping cache: its JSON format, `saved_at` timestamps and freshness.
//!
//! ```json
//! {"saved_at":"2026-07-08T12:00:00Z",
//!  "networks":[{"id":"N_1","organization":{"id":"O_1"}}],
//!  "devices":[{"serial":"Q2XX-XXXX-XXXX","organization":{"id":"O_1"}}]}
//! ```
//!
//! Dates are converted with the proleptic Gregorian calendar in integer arithmetic (days
//! from and to 1970-01-01), so no date library and no floating-point rounding is involved.

use super::{check_time, SmartFlowError};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;
use serde_json::Value;

/// What [`OrgRateLimiter::load_cache`](super::OrgRateLimiter::load_cache) did with a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLoad {
    /// The file was fresh: its mappings were added and `cache_fresh` is now true.
    Loaded {
        /// Network entries read.
        networks: usize,
        /// Device entries read.
        devices: usize,
    },
    /// `saved_at` was missing, unparseable or older than the TTL: nothing was loaded.
    Expired,
    /// Not JSON, not an object, or an entry without its string fields: nothing was loaded.
    Malformed,
}

/// Parse a `saved_at` value to Unix seconds: `None` unless it is a string in exactly the
/// format `%Y-%m-%dT%H:%M:%SZ` naming a real UTC instant (see [`parse_saved_at_str`]).
///
/// # Examples
/// ```
/// use serde_json::json;
/// use sluicegate::smartflow::parse_saved_at;
/// assert_eq!(parse_saved_at(&json!("2026-07-08T12:00:00Z")), Some(1_783_512_000.0));
/// assert_eq!(parse_saved_at(&json!(12345)), None);
/// ```
pub fn parse_saved_at(value: &Value) -> Option<f64> {
    value.as_str().and_then(parse_saved_at_str)
}

/// Parse `YYYY-MM-DDTHH:MM:SSZ` (UTC, trailing `Z`, no offset, no fraction) to Unix
/// seconds.
///
/// Decision: the format is read strictly, as written: ASCII digits, every field
/// zero-padded to its width, upper-case `T` and `Z`, years 0001–9999, and a real date and
/// time (no 30 February, no hour 24, no leap second 60). CPython's `strptime`, which the
/// reference uses, is more lenient (it also takes `2026-7-8T1:2:3Z`, a lower-case `t`/`z`
/// and a space-padded day); every writer of the format zero-pads, and the conformance
/// vectors only require refusing a missing `Z`, an offset and garbage.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::parse_saved_at_str;
/// assert_eq!(parse_saved_at_str("1970-01-01T00:00:00Z"), Some(0.0));
/// assert_eq!(parse_saved_at_str("2026-07-08T12:00:00+00:00"), None);
/// assert_eq!(parse_saved_at_str("2026-02-30T00:00:00Z"), None);
/// ```
pub fn parse_saved_at_str(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let field = |at: usize, width: usize| -> Option<i64> {
        b[at..at + width].iter().try_fold(0i64, |n, &c| c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0')))
    };
    let (year, month, day) = (field(0, 4)?, field(5, 2)?, field(8, 2)?);
    let (hour, minute, second) = (field(11, 2)?, field(14, 2)?, field(17, 2)?);
    let valid = (1..=9999).contains(&year)
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 59;
    if !valid {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(secs as f64)
}

/// The earliest Unix second `saved_at` can carry: 0001-01-01T00:00:00Z.
const MIN_SAVED_AT: i64 = -62_135_596_800;
/// The latest: 9999-12-31T23:59:59Z.
const MAX_SAVED_AT: i64 = 253_402_300_799;

/// Format Unix seconds as `saved_at` (`%Y-%m-%dT%H:%M:%SZ`, UTC). A fraction of a second is
/// dropped (rounded down, as `strftime` of a `datetime` does).
///
/// # Errors
/// [`SmartFlowError::InvalidTime`] for a non-finite time;
/// [`SmartFlowError::TimeOutOfRange`] outside the years 0001–9999.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::format_saved_at;
/// assert_eq!(format_saved_at(1_783_512_000.9).unwrap(), "2026-07-08T12:00:00Z");
/// assert_eq!(format_saved_at(-0.5).unwrap(), "1969-12-31T23:59:59Z");
/// ```
pub fn format_saved_at(unix_secs: f64) -> Result<String, SmartFlowError> {
    let t = check_time(unix_secs)?;
    if t < MIN_SAVED_AT as f64 || t >= (MAX_SAVED_AT + 1) as f64 {
        return Err(SmartFlowError::TimeOutOfRange(t));
    }
    // Floor without `f64::floor` (not in `core`): truncate, then step down for negatives.
    let whole = t as i64;
    let whole = if whole as f64 > t { whole - 1 } else { whole };
    let (days, secs) = (whole.div_euclid(86_400), whole.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    Ok(format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3_600, secs % 3_600 / 60, secs % 60))
}

/// Whether a cache saved at `saved_at` (Unix seconds; `None` when missing or unparseable)
/// is still fresh at `now` under `ttl` seconds (`None`: never expires).
///
/// Fresh means `now − saved_at ≤ ttl`: an age equal to the TTL is still fresh. With no TTL
/// the file is fresh whatever its `saved_at`, even a missing one. A `saved_at` in the
/// future (a clock set back) counts as fresh, as in the reference. Decision: a NaN age
/// (only reachable with non-finite inputs) counts as expired.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::is_fresh;
/// assert!(is_fresh(604_800.0, Some(0.0), Some(604_800.0)));
/// assert!(!is_fresh(604_801.0, Some(0.0), Some(604_800.0)));
/// assert!(!is_fresh(0.0, None, Some(604_800.0)));
/// assert!(is_fresh(1e12, None, None));
/// ```
pub fn is_fresh(now: f64, saved_at: Option<f64>, ttl: Option<f64>) -> bool {
    match (ttl, saved_at) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(ttl), Some(saved)) => now - saved <= ttl,
    }
}

/// A parsed cache file's mappings: `(id, org)` pairs in file order.
pub(super) struct Entries {
    pub(super) networks: Vec<(String, String)>,
    pub(super) devices: Vec<(String, String)>,
}

/// Read a cache file: `Err(CacheLoad)` says why nothing is loaded.
///
/// The TTL is checked before the entries, as in the reference: an expired file is
/// [`CacheLoad::Expired`] however malformed its entries. Decision: unlike the reference,
/// which adds entries one by one and keeps those read before a bad one, a file with any
/// malformed entry loads nothing ("start empty"). A missing `networks` or `devices` list is
/// an empty one; any other shape (`null`, a non-list, an entry whose ids are not strings)
/// is malformed.
pub(super) fn read_file(json: &str, now: f64, ttl: Option<f64>) -> Result<Entries, CacheLoad> {
    let data: Value = serde_json::from_str(json).map_err(|_| CacheLoad::Malformed)?;
    let object = data.as_object().ok_or(CacheLoad::Malformed)?;
    if ttl.is_some() {
        let saved_at = object.get("saved_at").and_then(parse_saved_at);
        if !is_fresh(now, saved_at, ttl) {
            return Err(CacheLoad::Expired);
        }
    }
    Ok(Entries {
        networks: read_list(object.get("networks"), "id")?,
        devices: read_list(object.get("devices"), "serial")?,
    })
}

fn read_list(list: Option<&Value>, key: &str) -> Result<Vec<(String, String)>, CacheLoad> {
    let Some(list) = list else { return Ok(Vec::new()) };
    let items = list.as_array().ok_or(CacheLoad::Malformed)?;
    items
        .iter()
        .map(|item| {
            let id = item.get(key).and_then(Value::as_str);
            let org = item.get("organization").and_then(|o| o.get("id")).and_then(Value::as_str);
            match (id, org) {
                (Some(id), Some(org)) => Ok((String::from(id), String::from(org))),
                _ => Err(CacheLoad::Malformed),
            }
        })
        .collect()
}

#[derive(Serialize)]
struct FileOut<'a> {
    saved_at: &'a str,
    networks: Vec<NetworkOut<'a>>,
    devices: Vec<DeviceOut<'a>>,
}

#[derive(Serialize)]
struct NetworkOut<'a> {
    id: &'a str,
    organization: OrgOut<'a>,
}

#[derive(Serialize)]
struct DeviceOut<'a> {
    serial: &'a str,
    organization: OrgOut<'a>,
}

#[derive(Serialize)]
struct OrgOut<'a> {
    id: &'a str,
}

/// Write a cache file. Entries are written in the order given.
pub(super) fn write_file<'a>(
    saved_at: &str,
    networks: impl Iterator<Item = (&'a str, &'a str)>,
    devices: impl Iterator<Item = (&'a str, &'a str)>,
) -> String {
    let file = FileOut {
        saved_at,
        networks: networks.map(|(id, org)| NetworkOut { id, organization: OrgOut { id: org } }).collect(),
        devices: devices.map(|(serial, org)| DeviceOut { serial, organization: OrgOut { id: org } }).collect(),
    };
    // Serializing plain structs of strings cannot fail.
    serde_json::to_string(&file).unwrap_or_default()
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub(super) fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (negative before it). Years are
/// counted from March, so the leap day ends a year and a 400-year era has a fixed length.
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400; // 0..=399
    let month_from_march = (month + 9) % 12; // March = 0 … February = 11
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1; // 0..=365
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468 // 719,468 days from 0000-03-01 to 1970-01-01
}

/// The date `days` after 1970-01-01: the inverse of [`days_from_civil`].
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097; // 0..=146,096
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_convert_both_ways() {
        for (text, secs) in [
            ("1970-01-01T00:00:00Z", 0i64),
            ("2000-02-29T23:59:59Z", 951_868_799),
            ("2000-03-01T00:00:00Z", 951_868_800),
            ("1900-03-01T00:00:00Z", -2_203_891_200),
            ("1969-12-31T23:59:59Z", -1),
            ("2026-07-08T12:00:00Z", 1_783_512_000),
            ("0001-01-01T00:00:00Z", MIN_SAVED_AT),
            ("9999-12-31T23:59:59Z", MAX_SAVED_AT),
        ] {
            assert_eq!(parse_saved_at_str(text), Some(secs as f64), "{text}");
            assert_eq!(format_saved_at(secs as f64).unwrap(), text);
        }
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        // 1600-03-01 to 2000-02-29: one full 400-year cycle, leap rules included.
        let start = days_from_civil(1600, 3, 1);
        for days in start..start + 146_097 {
            let (y, m, d) = civil_from_days(days);
            assert!(d >= 1 && d <= days_in_month(y, m));
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(start + 146_096), (2000, 2, 29));
    }

    #[test]
    fn impossible_or_loosely_written_timestamps_are_refused() {
        for text in [
            "2026-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-07-00T00:00:00Z",
            "2026-07-08T24:00:00Z",
            "2026-07-08T12:60:00Z",
            "2026-07-08T12:00:60Z",
            "0000-07-08T12:00:00Z",
            "2026-7-8T1:2:3Z",
            "2026-07-08t12:00:00z",
            "2026-07-08T12:00:00.5Z",
            "+026-07-08T12:00:00Z",
            "2026-07-08T12:00:00Z ",
            "",
        ] {
            assert_eq!(parse_saved_at_str(text), None, "{text:?}");
        }
        assert_eq!(parse_saved_at_str("2024-02-29T00:00:00Z"), Some(1_709_164_800.0));
    }

    #[test]
    fn formatting_refuses_times_saved_at_cannot_carry() {
        assert!(matches!(format_saved_at(f64::NAN), Err(SmartFlowError::InvalidTime(t)) if t.is_nan()));
        assert_eq!(format_saved_at(253_402_300_800.0), Err(SmartFlowError::TimeOutOfRange(253_402_300_800.0)));
        assert_eq!(format_saved_at(-62_135_596_800.5), Err(SmartFlowError::TimeOutOfRange(-62_135_596_800.5)));
        assert_eq!(format_saved_at(253_402_300_799.9).unwrap(), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn freshness_is_inclusive_at_the_ttl_and_a_missing_ttl_never_expires() {
        assert!(is_fresh(10.0, Some(0.0), Some(10.0)));
        assert!(!is_fresh(10.000_001, Some(0.0), Some(10.0)));
        assert!(is_fresh(0.0, Some(100.0), Some(10.0)), "saved in the future");
        assert!(is_fresh(0.0, None, None));
        assert!(!is_fresh(f64::NAN, Some(0.0), Some(10.0)));
    }
}
