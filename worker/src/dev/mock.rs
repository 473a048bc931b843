//! A mock of the Open-Meteo forecast API's rate limiting, served by the built-in
//! development origin under `/mock/open-meteo/` (only when `ORIGIN_URL` is unset).
//!
//! **A development and test fixture, not a product feature.** Its configuration and
//! counters live in one isolate's memory (the development build's state): they are not shared between
//! isolates or colos and vanish when the isolate is recycled. Under Miniflare (tests,
//! `npm start`) there is one isolate, so the counts are exact there.
//!
//! It reproduces the real server's semantics:
//! - a quota per client (the counted identity, as the edge reads it; requests without one
//!   share the client `"unknown"`) in three fixed, clock-aligned windows: minute (600),
//!   hour (5,000) and day (10,000) weighted calls; a window resets at each multiple of its
//!   length since the Unix epoch;
//! - admission is checked **before** the call (usage >= limit → 429, minute first, then
//!   hour, then day, no `Retry-After`) and the call's weight is added **after** it was
//!   answered, so the last admitted call may overshoot; 429s cost nothing, any other error
//!   costs 1;
//! - the weight of a call, summed over its locations, is `max(1, v/10 · max(1, d/14))`
//!   with `v` = variables × models and `d` = days, read from the query string as the server
//!   reads it ([`openmeteo::read_query`]: every value of a repeated `&hourly=`, `&models=` or
//!   `&latitude=` counts, and the days are the longest range the query states), so a client
//!   that prices a call lower is caught here; more than 5,000 is refused (400);
//! - at most `max_concurrent` (5) calls of one client in flight; the next is a 429.
//!
//! Routes (every answer is JSON; every bad request a 4xx `{"error":true,"reason":…}`):
//! - `GET /mock/open-meteo/v1/forecast?latitude=…&longitude=…&daily=…&hourly=…&current=…`
//!   `&models=…&forecast_days=…&past_days=…` (or `start_date`/`end_date`): one object for
//!   one location, else an array; values are derived from (location, variable, step) and
//!   the days start at 2026-01-01, so the same call always gets the same bytes.
//! - `GET /mock/open-meteo/state`: `{config, clients: {"<client>": {minute: {used, limit,
//!   resets_at_ms}, hour, day, in_flight}}, calls, rejected_429, now_ms}`.
//! - `GET|POST /mock/open-meteo/config`: the configuration `{minute: {window_ms, limit},
//!   hour, day, delay_ms, max_concurrent}`; a POST merges the fields it names (all or none).
//! - `POST /mock/open-meteo/reset`: zero the counters (configuration and calls in flight
//!   are kept).
//!
//! `delay_ms` holds every admitted call that long (a global `setTimeout`), which makes the
//! concurrency limit observable.

use js_sys::Promise;
use sluicegate::identity::Identity;
use sluicegate::openmeteo::{self, WeightMode};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, Response, ResponseInit, Url, UrlSearchParams};

const PREFIX: &str = "/mock/open-meteo";
/// The client that requests without an identity share.
const UNKNOWN_CLIENT: &str = "unknown";
/// More weight than this in one call is refused.
const MAX_WEIGHT: f64 = 5_000.0;
const MAX_LOCATIONS: usize = 1_000;
/// Not the real API's: keeps an accidental huge hourly request from exhausting memory.
const MAX_VALUES: u64 = 5_000_000;
const MAX_DELAY_MS: u64 = 60_000;
/// 2^53 - 1: the largest integer a JSON number carries exactly.
const MAX_INTEGER: u64 = 9_007_199_254_740_991;
const MAX_CLIENTS: usize = 10_000;
const MAX_CONFIG_BODY: usize = 64 * 1024;
/// 2026-01-01, the first forecast day (fixed, so the output is deterministic).
const FIRST_DAY: i64 = 20_454;

const WINDOW_NAMES: [&str; 3] = ["minute", "hour", "day"];
const REFUSALS: [&str; 3] = [
    r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#,
    r#"{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}"#,
    r#"{"error":true,"reason":"Daily API request limit exceeded. Please try again tomorrow."}"#,
];
const TOO_MANY_CONCURRENT: &str = r#"{"error":true,"reason":"Too many concurrent requests"}"#;

#[wasm_bindgen]
extern "C" {
    /// The global `setTimeout` (never `window`'s).
    #[wasm_bindgen(catch, js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> Result<JsValue, JsValue>;
}

#[derive(Clone, Copy)]
struct Window {
    window_ms: u64,
    limit: u64,
}

#[derive(Clone, Copy)]
struct Config {
    windows: [Window; 3],
    delay_ms: u64,
    max_concurrent: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            windows: [
                Window { window_ms: 60_000, limit: 600 },
                Window { window_ms: 3_600_000, limit: 5_000 },
                Window { window_ms: 86_400_000, limit: 10_000 },
            ],
            delay_ms: 0,
            max_concurrent: 5,
        }
    }
}

impl Config {
    fn to_json(self) -> String {
        let mut out = String::from("{");
        for (name, w) in WINDOW_NAMES.iter().zip(self.windows) {
            let _ = write!(out, "\"{name}\":{{\"window_ms\":{},\"limit\":{}}},", w.window_ms, w.limit);
        }
        let _ = write!(out, "\"delay_ms\":{},\"max_concurrent\":{}}}", self.delay_ms, self.max_concurrent);
        out
    }
}

/// Weight used in one window: the window it belongs to is named by its length and start,
/// so a changed length starts it afresh.
#[derive(Clone, Copy, Default)]
struct Usage {
    window_ms: u64,
    start_ms: u64,
    used: f64,
}

fn window_start(now_ms: u64, window_ms: u64) -> u64 {
    now_ms - now_ms % window_ms.max(1)
}

impl Usage {
    /// The weight used in the window containing `now_ms`.
    fn current(&self, window_ms: u64, now_ms: u64) -> f64 {
        if self.window_ms == window_ms && self.start_ms == window_start(now_ms, window_ms) {
            self.used
        } else {
            0.0
        }
    }

    /// Add `weight` to the window containing `now_ms`. Windows only move forward: when a
    /// later request already started the next window, the weight is charged to it.
    fn add(&mut self, window_ms: u64, now_ms: u64, weight: f64) {
        let start = window_start(now_ms, window_ms);
        if self.window_ms != window_ms || start > self.start_ms {
            *self = Usage { window_ms, start_ms: start, used: 0.0 };
        }
        self.used += weight;
    }
}

#[derive(Default)]
struct Client {
    usage: [Usage; 3],
    in_flight: u64,
}

impl Client {
    fn is_idle(&self, config: &Config, now_ms: u64) -> bool {
        self.in_flight == 0 && self.usage.iter().zip(config.windows).all(|(u, w)| u.current(w.window_ms, now_ms) == 0.0)
    }
}

#[derive(Default)]
pub(super) struct Mock {
    config: Config,
    clients: HashMap<String, Client>,
    /// Forecast calls received, whatever the answer.
    calls: u64,
    /// Forecast calls answered 429 (quota or concurrency).
    rejected_429: u64,
}

impl Mock {
    fn client(&mut self, name: &str, now_ms: u64) -> &mut Client {
        if self.clients.len() >= MAX_CLIENTS && !self.clients.contains_key(name) {
            let config = self.config;
            self.clients.retain(|_, c| !c.is_idle(&config, now_ms));
        }
        self.clients.entry(name.to_owned()).or_default()
    }
}

/// Run `f` on the mock's counters (never across an `.await`).
fn with_mock<T>(f: impl FnOnce(&RefCell<Mock>) -> T) -> T {
    super::state(|s| f(&s.mock))
}

/// Serve a request under `/mock/open-meteo/`. Every bad request is a 4xx with a JSON
/// error; `Err` only when the runtime cannot build a response.
pub async fn serve(request: &Request, path: &str, url: &Url, identity: Option<Identity>) -> Result<Response, JsValue> {
    let now_ms = js_sys::Date::now().max(0.0) as u64;
    let method = request.method();
    let route = path.strip_prefix(PREFIX).unwrap_or(path);
    match (route, method.as_str()) {
        ("/v1/forecast", "GET") => {
            let client = identity.map_or_else(|| UNKNOWN_CLIENT.to_owned(), |id| id.ip.to_string());
            forecast(&url.search_params(), &url.search(), &client, now_ms).await
        }
        ("/state", "GET") => json(200, &state(now_ms), true),
        ("/config", "GET") => json(200, &with_mock(|m| m.borrow().config.to_json()), true),
        ("/config", "POST") => configure(request).await,
        ("/reset", "POST") => {
            reset();
            json(200, r#"{"reset":true}"#, true)
        }
        ("/v1/forecast" | "/state", _) => json(405, &error_body(&format!("{path} only answers GET")), true),
        ("/reset", _) => json(405, &error_body(&format!("{path} only answers POST")), true),
        ("/config", _) => json(405, &error_body(&format!("{path} only answers GET and POST")), true),
        _ => json(
            404,
            &error_body(&format!(
                "Unknown mock route {}; the mock serves {PREFIX}/v1/forecast, /state, /config and /reset",
                clip(path)
            )),
            true,
        ),
    }
}

fn json(status: u16, body: &str, no_store: bool) -> Result<Response, JsValue> {
    let headers = Headers::new()?;
    headers.set("content-type", "application/json")?;
    if no_store {
        headers.set("cache-control", "no-store")?;
    }
    let init = ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers);
    Response::new_with_opt_str_and_init(Some(body), &init)
}

fn error_body(reason: &str) -> String {
    format!("{{\"error\":true,\"reason\":{}}}", crate::log::json_string(reason))
}

/// At most 40 characters of a client-supplied value, for error messages.
fn clip(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(40).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// One in-flight call of a client; dropping it (however the call ends, even if the
/// request is cancelled) releases the slot.
struct InFlight(String);

impl Drop for InFlight {
    fn drop(&mut self) {
        with_mock(|m| {
            if let Ok(mut m) = m.try_borrow_mut() {
                if let Some(client) = m.clients.get_mut(&self.0) {
                    client.in_flight = client.in_flight.saturating_sub(1);
                }
            }
        });
    }
}

enum Admission {
    Refused(&'static str),
    Admitted { delay_ms: u64 },
}

async fn forecast(params: &UrlSearchParams, search: &str, client: &str, now_ms: u64) -> Result<Response, JsValue> {
    let admission = with_mock(|m| {
        let mut m = m.borrow_mut();
        m.calls += 1;
        let config = m.config;
        let entry = m.client(client, now_ms);
        let over = (0..3).find(|&i| {
            let w = config.windows[i];
            entry.usage[i].current(w.window_ms, now_ms) >= w.limit as f64
        });
        let admission = match over {
            Some(i) => Admission::Refused(REFUSALS[i]),
            None if entry.in_flight >= config.max_concurrent => Admission::Refused(TOO_MANY_CONCURRENT),
            None => {
                entry.in_flight += 1;
                Admission::Admitted { delay_ms: config.delay_ms }
            }
        };
        if let Admission::Refused(_) = admission {
            m.rejected_429 += 1;
        }
        admission
    });
    let delay_ms = match admission {
        Admission::Refused(body) => return json(429, body, false),
        Admission::Admitted { delay_ms } => delay_ms,
    };
    let _slot = InFlight(client.to_owned());
    if delay_ms > 0 {
        if let Err(e) = sleep(delay_ms).await {
            crate::log::log_error(&format!(
                "sluicegate mock: setTimeout failed, answering without delay: {}",
                crate::log::describe(&e)
            ));
        }
    }
    let (status, body, weight) = match answer(params, search) {
        Ok((body, weight)) => (200, body, weight),
        Err(reason) => (400, error_body(&reason), 1.0),
    };
    with_mock(|m| {
        let mut m = m.borrow_mut();
        let config = m.config;
        let entry = m.client(client, now_ms);
        for (usage, w) in entry.usage.iter_mut().zip(config.windows) {
            usage.add(w.window_ms, now_ms, weight);
        }
    });
    json(status, &body, false)
}

async fn sleep(ms: u64) -> Result<(), JsValue> {
    let mut failed = None;
    let promise = Promise::new(&mut |resolve, _reject| {
        if let Err(e) = set_timeout(&resolve, ms as f64) {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    JsFuture::from(promise).await.map(|_| ())
}

fn state(now_ms: u64) -> String {
    with_mock(|m| {
        let m = m.borrow();
        let mut out = format!("{{\"config\":{},\"clients\":{{", m.config.to_json());
        // In no particular order: sorting strings would add kilobytes of sort code.
        for (n, (name, client)) in m.clients.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{{", crate::log::json_string(name));
            for ((label, usage), w) in WINDOW_NAMES.iter().zip(&client.usage).zip(m.config.windows) {
                let _ = write!(
                    out,
                    "\"{label}\":{{\"used\":{},\"limit\":{},\"resets_at_ms\":{}}},",
                    number(usage.current(w.window_ms, now_ms)),
                    w.limit,
                    window_start(now_ms, w.window_ms).saturating_add(w.window_ms)
                );
            }
            let _ = write!(out, "\"in_flight\":{}}}", client.in_flight);
        }
        let _ = write!(out, "}},\"calls\":{},\"rejected_429\":{},\"now_ms\":{now_ms}}}", m.calls, m.rejected_429);
        out
    })
}

/// Zero every counter; the configuration and the calls in flight are kept.
fn reset() {
    with_mock(|m| {
        let mut m = m.borrow_mut();
        m.calls = 0;
        m.rejected_429 = 0;
        m.clients.retain(|_, c| c.in_flight > 0);
        for client in m.clients.values_mut() {
            client.usage = Default::default();
        }
    });
}

async fn configure(request: &Request) -> Result<Response, JsValue> {
    let text = match request.text() {
        Ok(promise) => JsFuture::from(promise).await.ok().and_then(|t| t.as_string()),
        Err(_) => None,
    };
    let Some(text) = text else {
        return json(400, &error_body("The request body could not be read"), true);
    };
    if text.len() > MAX_CONFIG_BODY {
        return json(400, &error_body("The configuration body is larger than 64 KiB"), true);
    }
    let current = with_mock(|m| m.borrow().config);
    match parse_config(&text, current) {
        Ok(config) => {
            with_mock(|m| m.borrow_mut().config = config);
            json(200, &config.to_json(), true)
        }
        Err(reason) => json(400, &error_body(&reason), true),
    }
}

/// `current` with the fields of `text` (a JSON object) merged in; every problem names its field.
fn parse_config(text: &str, current: Config) -> Result<Config, String> {
    let value = js_sys::JSON::parse(text).map_err(|_| "The configuration body must be a JSON object".to_owned())?;
    let fields = object_fields(&value).ok_or_else(|| "The configuration body must be a JSON object".to_owned())?;
    let mut next = current;
    for (key, field) in fields {
        if let Some(i) = WINDOW_NAMES.iter().position(|n| *n == key) {
            let inner =
                object_fields(&field).ok_or_else(|| format!("'{key}' must be an object with window_ms and limit"))?;
            for (name, v) in inner {
                let path = format!("{key}.{name}");
                match name.as_str() {
                    "window_ms" => next.windows[i].window_ms = integer(&v, &path, 1, MAX_INTEGER)?,
                    "limit" => next.windows[i].limit = integer(&v, &path, 1, MAX_INTEGER)?,
                    _ => return Err(format!("Unknown field '{}'; a window has window_ms and limit", clip(&path))),
                }
            }
        } else {
            match key.as_str() {
                "delay_ms" => next.delay_ms = integer(&field, "delay_ms", 0, MAX_DELAY_MS)?,
                "max_concurrent" => next.max_concurrent = integer(&field, "max_concurrent", 1, MAX_INTEGER)?,
                _ => {
                    return Err(format!(
                        "Unknown field '{}'; expected minute, hour, day, delay_ms or max_concurrent",
                        clip(&key)
                    ))
                }
            }
        }
    }
    Ok(next)
}

/// The own fields of a plain JSON object (not an array, not null).
fn object_fields(value: &JsValue) -> Option<Vec<(String, JsValue)>> {
    if !value.is_object() || js_sys::Array::is_array(value) {
        return None;
    }
    let object: &js_sys::Object = value.unchecked_ref();
    let entries = js_sys::Object::entries(object);
    Some(
        entries
            .iter()
            .map(|pair| {
                let pair = js_sys::Array::from(&pair);
                (pair.get(0).as_string().unwrap_or_default(), pair.get(1))
            })
            .collect(),
    )
}

fn integer(value: &JsValue, name: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= max as f64 => Ok(n as u64),
        _ => Err(format!(
            "'{name}' must be {} integer no larger than {max}",
            if min == 0 { "a non-negative" } else { "a positive" }
        )),
    }
}

// ---------------------------------------------------------------------------------------
// The forecast itself: validation, weight and a deterministic body.

struct Query {
    locations: Vec<(f64, f64)>,
    first_day: i64,
    days: i64,
    daily: Vec<String>,
    hourly: Vec<String>,
    current: Vec<String>,
    models: Vec<String>,
}

impl Query {
    fn parse(params: &UrlSearchParams) -> Result<Query, String> {
        let latitudes = coordinates(params, "latitude", 90)?;
        let longitudes = coordinates(params, "longitude", 180)?;
        if latitudes.len() != longitudes.len() {
            return Err(format!(
                "Parameter 'latitude' and 'longitude' must have the same number of elements ({} and {} given)",
                latitudes.len(),
                longitudes.len()
            ));
        }
        let (first_day, days) = days(params)?;
        Ok(Query {
            locations: latitudes.into_iter().zip(longitudes).collect(),
            first_day,
            days,
            daily: names(params, "daily")?,
            hourly: names(params, "hourly")?,
            current: names(params, "current")?,
            models: names(params, "models")?,
        })
    }

    fn model_count(&self) -> usize {
        self.models.len().max(1)
    }

    /// How many numbers the body holds.
    fn values(&self) -> u64 {
        let per_model = (self.daily.len() as u64 * self.days as u64)
            + (self.hourly.len() as u64 * self.days as u64 * 24)
            + self.current.len() as u64;
        per_model * self.model_count() as u64 * self.locations.len() as u64
    }
}

/// What the server charges for a call with the query string `search`: the server's formula
/// over the call as [`openmeteo::read_query`] reads it, or why it cannot be read.
fn charge(search: &str) -> Result<f64, String> {
    openmeteo::read_query(search)
        .map(|call| openmeteo::weight(&call, WeightMode::Server))
        .map_err(|why| format!("Cannot read the call's weight: {why}"))
}

/// Every non-blank value of `name`, joined by commas (the server reads `&name=a&name=b` as
/// `&name=a,b`); `None` without one.
fn joined(params: &UrlSearchParams, name: &str) -> Option<String> {
    let values: Vec<String> =
        params.get_all(name).iter().filter_map(|v| v.as_string()).filter(|v| !v.trim().is_empty()).collect();
    (!values.is_empty()).then(|| values.join(","))
}

fn coordinates(params: &UrlSearchParams, name: &str, bound: u32) -> Result<Vec<f64>, String> {
    let Some(text) = joined(params, name) else {
        return Err(format!("Parameter '{name}' is required"));
    };
    let count = text.split(',').count();
    if count > MAX_LOCATIONS {
        return Err(format!(
            "Only up to {MAX_LOCATIONS} locations can be requested at once; parameter '{name}' lists {count}"
        ));
    }
    text.split(',')
        .map(|item| {
            let item = item.trim();
            let value = parse_number(item).ok_or_else(|| {
                format!("Parameter '{name}' must be a list of numbers; '{}' is not a number", clip(item))
            })?;
            if value.abs() > f64::from(bound) {
                return Err(format!(
                    "Parameter '{name}' must be in range of -{bound} to {bound}; given {}",
                    number(value)
                ));
            }
            Ok(value)
        })
        .collect()
}

/// `(first day, number of days)`: `start_date`/`end_date`, or `past_days` before and
/// `forecast_days` from 2026-01-01.
fn days(params: &UrlSearchParams) -> Result<(i64, i64), String> {
    let get = |name: &str| params.get(name).filter(|t| !t.trim().is_empty());
    let (start, end) = (get("start_date"), get("end_date"));
    if start.is_some() || end.is_some() {
        for other in ["forecast_days", "past_days"] {
            if get(other).is_some() {
                return Err(format!("Parameter '{other}' is mutually exclusive with 'start_date' and 'end_date'"));
            }
        }
        let start = date(start.as_deref(), "start_date")?;
        let end = date(end.as_deref(), "end_date")?;
        if end < start {
            return Err("Parameter 'end_date' must not be before 'start_date'".to_owned());
        }
        return Ok((start, end - start + 1));
    }
    let forecast = small_integer(get("forecast_days"), "forecast_days", 7, 1, 16)?;
    let past = small_integer(get("past_days"), "past_days", 0, 0, 92)?;
    Ok((FIRST_DAY - past, forecast + past))
}

fn small_integer(text: Option<String>, name: &str, default: i64, min: i64, max: i64) -> Result<i64, String> {
    let Some(text) = text else { return Ok(default) };
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("Parameter '{name}' must be an integer from {min} to {max}; given '{}'", clip(&text)))
}

/// A decimal number (`-12.5`, `52`, `.5`, `1e2`): checked here, converted by JS (which
/// keeps Rust's float parsing and formatting out of the wasm).
fn parse_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let (mantissa, exponent) = match bytes.iter().position(|&b| b == b'e' || b == b'E') {
        Some(i) => (bytes.get(..i).unwrap_or_default(), bytes.get(i + 1..)),
        None => (bytes, None),
    };
    let unsigned = |part: &[u8]| -> usize { usize::from(matches!(part.first(), Some(b'+' | b'-'))) };
    let mantissa = mantissa.get(unsigned(mantissa)..).unwrap_or_default();
    let digits = mantissa.iter().filter(|b| b.is_ascii_digit()).count();
    let dots = mantissa.iter().filter(|&&b| b == b'.').count();
    if digits == 0 || dots > 1 || digits + dots != mantissa.len() {
        return None;
    }
    if let Some(exponent) = exponent {
        let exponent = exponent.get(unsigned(exponent)..).unwrap_or_default();
        if exponent.is_empty() || !exponent.iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    Some(js_sys::parse_float(text)).filter(|v| v.is_finite())
}

/// A number as JavaScript writes it (the shortest form that reads back the same).
fn number(value: f64) -> String {
    js_sys::Number::from(value).to_string_with_radix(10).map(String::from).unwrap_or_else(|_| "0".to_owned())
}

/// Days since the Unix epoch of a `YYYY-MM-DD` date from 1940 to 2100.
fn date(text: Option<&str>, name: &str) -> Result<i64, String> {
    let Some(text) = text else {
        return Err(format!("Parameter '{name}' is required with 'start_date' and 'end_date'"));
    };
    let invalid = || {
        format!("Parameter '{name}' must be a date YYYY-MM-DD from 1940-01-01 to 2100-12-31; given '{}'", clip(text))
    };
    let text = text.trim();
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return Err(invalid());
    }
    let number = |range: core::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(y), Some(m), Some(d)) = (number(0..4), number(5..7), number(8..10)) else {
        return Err(invalid());
    };
    if !(1940..=2100).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(invalid());
    }
    let days = days_from_civil(y, m, d);
    if civil_from_days(days) != (y, m, d) {
        return Err(invalid());
    }
    Ok(days)
}

/// Variable or model names: comma-separated identifiers of every `name` (empty items ignored).
fn names(params: &UrlSearchParams, name: &str) -> Result<Vec<String>, String> {
    let Some(text) = joined(params, name) else { return Ok(Vec::new()) };
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            if item.len() <= 64 && item.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                Ok(item.to_owned())
            } else {
                Err(format!("Parameter '{name}' lists an invalid name '{}'", clip(item)))
            }
        })
        .collect()
}

/// The body and weight of a valid call with the query string `search`, or the reason it is
/// invalid.
fn answer(params: &UrlSearchParams, search: &str) -> Result<(String, f64), String> {
    let query = Query::parse(params)?;
    let weight = charge(search)?;
    if weight > MAX_WEIGHT {
        return Err(format!(
            "Your API call requests too much data. Please reduce the number of locations, variables or days \
             (this call weighs {}, more than 5000)",
            number(weight)
        ));
    }
    if query.values() > MAX_VALUES {
        return Err(format!(
            "This mock generates at most {MAX_VALUES} values per response; reduce the locations, variables or days"
        ));
    }
    Ok((body(&query), weight))
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

fn date_string(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

/// One output series: its key, its hash and its range of values (in tenths).
struct Series {
    key: String,
    hash: u64,
    low: i64,
    span: u64,
}

fn series(variables: &[String], models: &[String], section: &str) -> Vec<Series> {
    let mut out = Vec::with_capacity(variables.len() * models.len().max(1));
    for variable in variables {
        let (low, high) = range_of(variable);
        let mut push = |key: String| {
            let hash = fnv(section) ^ mix(fnv(&key));
            out.push(Series { key, hash, low, span: (high - low + 1) as u64 });
        };
        if models.len() > 1 {
            for model in models {
                push(format!("{variable}_{model}"));
            }
        } else {
            push(variable.clone());
        }
    }
    out
}

/// A plausible range, in tenths, for a variable name.
fn range_of(variable: &str) -> (i64, i64) {
    // A byte search: `str::contains` would pull a substring searcher into the wasm.
    let has = |part: &str| variable.as_bytes().windows(part.len()).any(|w| w == part.as_bytes());
    if has("temperature") || has("dew_point") {
        (-150, 350)
    } else if has("probability") || has("humidity") || has("cloud") {
        (0, 1_000)
    } else if has("precipitation") || has("rain") || has("showers") || has("snow") {
        (0, 250)
    } else if has("wind") || has("gust") {
        (0, 600)
    } else {
        (0, 1_000)
    }
}

fn push_tenths(out: &mut String, value: i64) {
    if value < 0 {
        out.push('-');
    }
    let a = value.unsigned_abs();
    push_u64(out, a / 10);
    out.push('.');
    out.push(char::from(b'0' + (a % 10) as u8));
}

fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

fn push_values(out: &mut String, series: &Series, location: u64, count: u64) {
    let _ = write!(out, ",\"{}\":[", series.key);
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        let h = mix(location ^ series.hash ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        push_tenths(out, series.low + (h % series.span) as i64);
    }
    out.push(']');
}

/// The body: one object for one location, else an array with one per location.
fn body(query: &Query) -> String {
    let days = query.days.max(0) as u64;
    let dates: Vec<String> = (0..query.days).map(|i| date_string(query.first_day + i)).collect();
    let quoted = |times: &mut dyn Iterator<Item = String>| -> String {
        let mut out = String::from("\"time\":[");
        for (i, t) in times.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(&t);
            out.push('"');
        }
        out.push(']');
        out
    };
    let daily_times = quoted(&mut dates.iter().cloned());
    let hourly_times = if query.hourly.is_empty() {
        String::new()
    } else {
        quoted(&mut dates.iter().flat_map(|d| (0..24).map(move |h| format!("{d}T{h:02}:00"))))
    };
    let daily = series(&query.daily, &query.models, "daily");
    let hourly = series(&query.hourly, &query.models, "hourly");
    let current = series(&query.current, &query.models, "current");
    let current_time = format!("{}T00:00", date_string(FIRST_DAY));

    let several = query.locations.len() > 1;
    let estimate = query.values() as usize * 6 + query.locations.len() * (160 + daily_times.len() + hourly_times.len());
    let mut out = String::with_capacity(estimate);
    if several {
        out.push('[');
    }
    for (n, (lat, lon)) in query.locations.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let location = mix(lat.to_bits() ^ mix(lon.to_bits()));
        let (lat, lon) = (number(*lat), number(*lon));
        let _ = write!(
            out,
            "{{\"latitude\":{lat},\"longitude\":{lon},\"utc_offset_seconds\":0,\"timezone\":\"GMT\",\"timezone_abbreviation\":\"GMT\""
        );
        if !current.is_empty() {
            let _ = write!(out, ",\"current\":{{\"time\":\"{current_time}\",\"interval\":900");
            for s in &current {
                let h = mix(location ^ s.hash);
                let _ = write!(out, ",\"{}\":", s.key);
                push_tenths(&mut out, s.low + (h % s.span) as i64);
            }
            out.push('}');
        }
        if !hourly.is_empty() {
            out.push_str(",\"hourly\":{");
            out.push_str(&hourly_times);
            for s in &hourly {
                push_values(&mut out, s, location, days * 24);
            }
            out.push('}');
        }
        if !daily.is_empty() {
            out.push_str(",\"daily\":{");
            out.push_str(&daily_times);
            for s in &daily {
                push_values(&mut out, s, location, days);
            }
            out.push('}');
        }
        out.push('}');
    }
    if several {
        out.push(']');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` variable names, `v0,v1,…`.
    fn names(count: usize) -> String {
        (0..count).map(|i| format!("v{i}")).collect::<Vec<_>>().join(",")
    }

    /// What the mock charges for `locations` locations and `rest` of a query string.
    fn charged(locations: usize, rest: &str) -> Result<f64, String> {
        charge(&format!("?latitude={}&longitude={0}&{rest}", vec!["1"; locations].join(",")))
    }

    #[test]
    fn weights_follow_the_server_formula() {
        assert_eq!(charged(1, &format!("daily={}", names(10))), Ok(1.0));
        assert_eq!(charged(100, &format!("daily={}", names(3))), Ok(100.0));
        assert_eq!(charged(1, &format!("daily={}&forecast_days=14", names(15))), Ok(1.5));
        assert_eq!(charged(1, &format!("daily={}&forecast_days=16&past_days=12", names(15))), Ok(3.0));
        assert_eq!(charged(1, &format!("daily={}&models=a,b", names(10))), Ok(2.0));
        assert_eq!(charged(1, ""), Ok(1.0));
        assert_eq!(charged(1_000, &format!("daily={}&models=m", names(50))), Ok(5_000.0));
        // 5 variables over 28 days: 1.0 on the server (a conservative client spends 2.0)
        assert_eq!(charged(1, &format!("daily={}&start_date=2026-02-01&end_date=2026-02-28", names(5))), Ok(1.0));
    }

    #[test]
    fn every_value_a_client_might_undercount_is_charged() {
        let ten = names(10);
        assert_eq!(charged(1, &format!("hourly={ten}&hourly={ten}")), Ok(2.0));
        assert_eq!(charged(1, &format!("hourly={ten}&%68ourly={ten}&daily={ten}")), Ok(3.0));
        assert_eq!(charged(1, &format!("hourly={ten}&models=a&models=b&models=c")), Ok(3.0));
        let fifty: Vec<String> = (0..50).map(|i| format!("latitude={i}")).collect();
        assert_eq!(charge(&format!("{}&hourly=a", fifty.join("&"))), Ok(50.0));
        assert_eq!(charged(1, &format!("hourly={ten}&forecast_days=1&forecast_days=16")), Ok(16.0 / 14.0));
        assert_eq!(charged(1, &format!("hourly={ten}&forecast_hours=384&past_hours=288")), Ok(2.0));
        let span = "start_hour=2026-01-01T00:00&end_hour=2026-01-28T23:00";
        assert_eq!(charged(1, &format!("hourly={ten}&{span}")), Ok(2.0));
        assert_eq!(charged(1, &format!("minutely_15={ten}&forecast_minutely_15=2688")), Ok(2.0));
    }

    #[test]
    fn a_query_the_server_cannot_read_is_refused_naming_the_parameter() {
        assert_eq!(
            charged(1, "hourly=a&start_hour=2026-01-01"),
            Err(String::from(
                "Cannot read the call's weight: start_hour must be a time YYYY-MM-DDTHH:MM from \
                 1940-01-01T00:00 to 2100-12-31T23:59, got \"2026-01-01\""
            ))
        );
    }

    #[test]
    fn dates() {
        assert_eq!(days_from_civil(2026, 1, 1), FIRST_DAY);
        assert_eq!(date_string(FIRST_DAY - 1), "2025-12-31");
        assert_eq!(date_string(days_from_civil(2028, 2, 29)), "2028-02-29");
        for day in days_from_civil(1940, 1, 1)..=days_from_civil(2100, 12, 31) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }

    #[test]
    fn windows_are_clock_aligned_and_only_move_forward() {
        let mut usage = Usage::default();
        usage.add(2_000, 5_500, 3.0);
        assert_eq!(usage.current(2_000, 5_999), 3.0);
        assert_eq!(usage.current(2_000, 4_000), 3.0);
        assert_eq!(usage.current(2_000, 6_000), 0.0);
        assert_eq!(usage.current(1_000, 5_500), 0.0, "another window length is another window");
        usage.add(2_000, 6_100, 1.0);
        assert_eq!(usage.current(2_000, 6_100), 1.0);
        usage.add(2_000, 5_900, 1.0); // a call that arrived before the boundary, answered after
        assert_eq!(usage.current(2_000, 6_100), 2.0);
    }

    #[test]
    fn numbers_in_tenths() {
        let mut out = String::new();
        for v in [0, 5, -5, 123, -150, 1_000] {
            push_tenths(&mut out, v);
            out.push(' ');
        }
        assert_eq!(out, "0.0 0.5 -0.5 12.3 -15.0 100.0 ");
    }
}
