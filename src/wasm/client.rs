//! The browser client's pure parts for JavaScript: Open-Meteo weights and 429
//! classification, the location cache's bookkeeping and the batch policy.

use super::{ms_to_nanos, nanos_to_ms, non_negative, num, positive, set_prop};
use crate::client::batch::{lower_concurrency, AbortReason, Action, BatchPolicy};
use crate::client::cache::{CacheKey, LocationCache, Lookup};
use crate::core::openmeteo::{self, RateLimitKind, UpstreamWindows, WeightMode, WeightQuery};
use crate::core::time::{Instant, Span};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_CLIENT: &str = r#"
/** One Open-Meteo call: how many locations, days, variables and models it asks for. */
export interface OpenMeteoCall {
  locations: number;
  days: number;
  variables: number;
  /** Default 1. */
  models?: number;
  /** "conservative" (default: an upper bound, never under-spends) or "server" (the server's own formula). */
  mode?: "conservative" | "server";
}
export type RateLimitKind = "minutely" | "hourly" | "daily" | "concurrency" | "overloaded" | "unknown";
export type CacheLookup<V> = { state: "hit"; value: V } | { state: "pending" } | { state: "miss" };
/** What the batch does after a response. */
export type BatchAction =
  | { action: "ok" }
  | { action: "null" }
  | { action: "resume"; atMs: number }
  | { action: "lowerConcurrency"; maxInFlight: number }
  | { action: "skipBestEffort" }
  | { action: "abort"; reason: string; kind: RateLimitKind | null; status: number | null; retryAtMs: number | null };
export interface UpstreamWindowsMs {
  minuteMs?: number;
  hourMs?: number;
  dayMs?: number;
}
"#;

fn whole(obj: &JsValue, key: &str, default: Option<u32>) -> Result<u32, JsError> {
    let v = Reflect::get(obj, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_undefined() {
        return default.ok_or_else(|| JsError::new(&format!("{key} is required")));
    }
    match v.as_f64() {
        Some(n) if n.is_finite() && n.fract() == 0.0 && n >= 1.0 && n <= f64::from(u32::MAX) => Ok(n as u32),
        _ => Err(JsError::new(&format!("{key} must be a whole number ≥ 1, got {}", js_text(&v)))),
    }
}

/// The weight of one Open-Meteo call, by the conservative formula (default) or the
/// server's (`mode: "server"`).
#[wasm_bindgen(js_name = openMeteoWeight)]
pub fn open_meteo_weight(
    #[wasm_bindgen(unchecked_param_type = "OpenMeteoCall")] call: JsValue,
) -> Result<f64, JsError> {
    if !call.is_object() {
        return Err(JsError::new("openMeteoWeight takes { locations, days, variables, models?, mode? }"));
    }
    let models = whole(&call, "models", Some(1))?;
    let query = WeightQuery::new(
        whole(&call, "locations", None)?,
        whole(&call, "days", None)?,
        whole(&call, "variables", None)?,
    )
    .and_then(|q| q.with_models(models))
    .map_err(|e| JsError::new(&e.to_string()))?;
    let mode = weight_mode(&Reflect::get(&call, &"mode".into()).unwrap_or(JsValue::UNDEFINED))?;
    Ok(openmeteo::weight(&query, mode))
}

/// `"conservative"` (or absent) or `"server"`.
fn weight_mode(mode: &JsValue) -> Result<WeightMode, JsError> {
    match mode.as_string().as_deref() {
        _ if mode.is_undefined() || mode.is_null() => Ok(WeightMode::Conservative),
        Some("conservative") => Ok(WeightMode::Conservative),
        Some("server") => Ok(WeightMode::Server),
        Some(other) => Err(JsError::new(&format!("mode must be \"conservative\" or \"server\", got \"{other}\""))),
        None => Err(JsError::new(&format!(
            "mode must be \"conservative\" or \"server\", got a {}",
            mode.js_typeof().as_string().unwrap_or_default()
        ))),
    }
}

#[wasm_bindgen]
extern "C" {
    /// The host's `URL` (browsers, Node, Workers).
    #[wasm_bindgen(js_name = URL)]
    type HostUrl;
    #[wasm_bindgen(method, getter)]
    fn href(this: &HostUrl) -> String;
}

/// The weight of the Open-Meteo call a URL or query string asks for, read as the edge and the
/// development mock read it (`sluicegate::openmeteo::read_url`): every `latitude` item a
/// location; the items of every `hourly`, `daily`, `current` and `minutely_15` its variables
/// (none: 1 per location on the server); `models`; and the longest range it states
/// (`forecast_days` + `past_days`, hours, dates…), in whole days. By the conservative formula
/// (default) or the server's (`mode: "server"`); a value it cannot read is an error naming the
/// parameter and what it takes.
#[wasm_bindgen(js_name = openMeteoQueryWeight)]
pub fn open_meteo_query_weight(
    #[wasm_bindgen(unchecked_param_type = "string | URL")] url: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "\"conservative\" | \"server\"")] mode: Option<JsValue>,
) -> Result<f64, JsError> {
    // a string as it is, a URL object by its text (its href)
    let text = url
        .as_string()
        .or_else(|| url.dyn_ref::<HostUrl>().map(HostUrl::href))
        .ok_or_else(|| JsError::new("openMeteoQueryWeight takes a URL or a query string (\"latitude=…&daily=…\")"))?;
    let mode = weight_mode(&mode.unwrap_or(JsValue::UNDEFINED))?;
    let call = openmeteo::read_url(&text).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(openmeteo::weight(&call, mode))
}

/// The number of locations per call for a fan-out: the largest (up to `max`, never more than
/// the API's 1,000) whose calls pack `budget` to at least 98 %, else the one that packs it
/// best. `weightOf(n)` is the weight of a call for `n` locations.
#[wasm_bindgen(js_name = chooseLocationsPerCall)]
pub fn choose_locations_per_call(
    #[wasm_bindgen(unchecked_param_type = "{ weightOf: (locations: number) => number; budget: number; max: number }")]
    options: JsValue,
) -> Result<u32, JsValue> {
    if !options.is_object() {
        return Err(JsError::new("chooseLocationsPerCall takes { weightOf, budget, max }").into());
    }
    let weight_of: js_sys::Function =
        Reflect::get(&options, &"weightOf".into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| JsError::new("weightOf must be a function from a number of locations to a weight"))?;
    let budget = Reflect::get(&options, &"budget".into()).ok().and_then(|b| b.as_f64()).unwrap_or(f64::NAN);
    let budget = positive(budget, "budget")?;
    let max = whole(&options, "max", None)?;
    let weigh = |n: u32| weight_of.call1(&JsValue::UNDEFINED, &n.into()).map(|w| w.as_f64().unwrap_or(f64::NAN));
    openmeteo::locations_per_call(weigh, budget, max)
}

fn kind_name(kind: RateLimitKind) -> &'static str {
    match kind {
        RateLimitKind::Minutely => "minutely",
        RateLimitKind::Hourly => "hourly",
        RateLimitKind::Daily => "daily",
        RateLimitKind::Concurrency => "concurrency",
        RateLimitKind::Overloaded => "overloaded",
        RateLimitKind::Unknown => "unknown",
    }
}

/// What kind of refusal an upstream response is (from a 429's body, or a 503), or `null`.
#[wasm_bindgen(js_name = classifyRateLimit, unchecked_return_type = "RateLimitKind | null")]
pub fn classify_rate_limit(status: u16, body: &str) -> JsValue {
    openmeteo::classify(status, body).map_or(JsValue::NULL, |k| kind_name(k).into())
}

fn instant(ms: f64, what: &str) -> Result<Instant, JsError> {
    Ok(Instant::from_nanos(ms_to_nanos(non_negative(ms, what)?)))
}

fn span_ms(ms: f64, what: &str) -> Result<Span, JsError> {
    let ms = non_negative(ms, what)?;
    if ms == 0.0 {
        return Err(JsError::new(&format!("{what} must be above 0")));
    }
    Ok(Span::from_nanos(ms_to_nanos(ms)))
}

/// The bookkeeping of a TTL cache of per-location results: normalised keys, expiry from
/// the response, LRU bound, and single flight (one fetch for identical requests).
#[wasm_bindgen(js_name = LocationCacheCore)]
pub struct LocationCacheJs {
    core: LocationCache<JsValue>,
    precision: u8,
}

#[wasm_bindgen(js_class = LocationCacheCore)]
impl LocationCacheJs {
    /// `new LocationCacheCore(ttlMs, maxEntries, precision)`.
    #[wasm_bindgen(constructor)]
    pub fn new(ttl_ms: f64, max_entries: f64, precision: f64) -> Result<LocationCacheJs, JsError> {
        let ttl = span_ms(ttl_ms, "ttlMs")?;
        if !(max_entries.is_finite() && max_entries >= 1.0 && max_entries.fract() == 0.0) {
            return Err(JsError::new(&format!("maxEntries must be a whole number ≥ 1, got {}", num(max_entries))));
        }
        if !(precision.is_finite() && (0.0..=6.0).contains(&precision) && precision.fract() == 0.0) {
            return Err(JsError::new(&format!(
                "precision must be a whole number of decimals from 0 to 6, got {}",
                num(precision)
            )));
        }
        let core = LocationCache::new(ttl, max_entries as usize).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(LocationCacheJs { core, precision: precision as u8 })
    }

    /// The normalised key of a point and its parameters (`{ name: value }`, arrays joined).
    pub fn key(
        &self,
        latitude: f64,
        longitude: f64,
        #[wasm_bindgen(unchecked_param_type = "Record<string, string | number | readonly (string | number)[]>")]
        params: JsValue,
    ) -> Result<String, JsError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if params.is_object() {
            for entry in Object::entries(params.unchecked_ref()).iter() {
                let entry: Array = entry.unchecked_into();
                let name = entry.get(0).as_string().unwrap_or_default();
                let value = entry.get(1);
                let text = if let Some(list) = value.dyn_ref::<Array>() {
                    list.iter().map(|v| js_text(&v)).collect::<Vec<_>>().join(",")
                } else {
                    js_text(&value)
                };
                pairs.push((name, text));
            }
        }
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let key =
            CacheKey::new(latitude, longitude, &borrowed, self.precision).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(key.as_str().to_string())
    }

    /// A hit (and its value), `pending` (an identical fetch is under way: wait for it) or
    /// `miss` (fetch it, then `complete` or `fail`; the key is now in flight).
    #[wasm_bindgen(unchecked_return_type = "CacheLookup<unknown>")]
    pub fn lookup(&mut self, key: String, now_ms: f64) -> Result<JsValue, JsError> {
        let now = instant(now_ms, "nowMs")?;
        let out = Object::new();
        match self.core.lookup(&CacheKey::from_canonical(key), now) {
            Lookup::Hit(value) => {
                set_prop(&out, "state", &"hit".into());
                set_prop(&out, "value", &value);
            }
            Lookup::Pending => set_prop(&out, "state", &"pending".into()),
            Lookup::Miss => set_prop(&out, "state", &"miss".into()),
        }
        Ok(out.into())
    }

    /// Store the value fetched for `key`; it lives for the TTL from `nowMs` (the response).
    pub fn complete(&mut self, key: String, value: JsValue, now_ms: f64) -> Result<(), JsError> {
        self.core.complete(&CacheKey::from_canonical(key), value, instant(now_ms, "nowMs")?);
        Ok(())
    }

    /// The fetch for `key` failed: nothing is cached.
    pub fn fail(&mut self, key: String) {
        self.core.fail(&CacheKey::from_canonical(key));
    }

    /// Stored values.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> usize {
        self.core.len()
    }

    /// Keys being fetched.
    #[wasm_bindgen(getter, js_name = inFlight)]
    pub fn in_flight(&self) -> usize {
        self.core.in_flight()
    }

    /// Live entries as `[key, value, remainingMs]`, least recently used first.
    #[wasm_bindgen(js_name = exportEntries, unchecked_return_type = "[string, unknown, number][]")]
    pub fn export_entries(&self, now_ms: f64) -> Result<Array, JsError> {
        let now = instant(now_ms, "nowMs")?;
        Ok(self
            .core
            .export(now)
            .into_iter()
            .map(|(k, v, left)| JsValue::from(Array::of3(&k.into(), &v, &nanos_to_ms(left.as_nanos()).into())))
            .collect())
    }

    /// Load entries saved by `exportEntries`; returns how many were live.
    #[wasm_bindgen(js_name = importEntries)]
    pub fn import_entries(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "[string, unknown, number][]")] entries: Array,
        now_ms: f64,
    ) -> Result<usize, JsError> {
        let now = instant(now_ms, "nowMs")?;
        let mut list = Vec::new();
        for item in entries.iter() {
            let item: Array =
                item.dyn_into().map_err(|_| JsError::new("each entry must be [key, value, remainingMs]"))?;
            let (Some(key), Some(left)) = (item.get(0).as_string(), item.get(2).as_f64()) else {
                return Err(JsError::new("each entry must be [key, value, remainingMs]"));
            };
            if left.is_finite() && left > 0.0 {
                list.push((key, item.get(1), Span::from_nanos(ms_to_nanos(left))));
            }
        }
        Ok(self.core.import(list, now))
    }
}

fn js_text(v: &JsValue) -> String {
    v.as_string().or_else(|| v.as_f64().map(num)).unwrap_or_default()
}

/// The batch policy: what to do after each upstream response (resume once after a
/// minutely 429, give up on an hourly or daily one, lower the concurrency, skip
/// best-effort calls).
#[wasm_bindgen(js_name = BatchPolicy)]
pub struct BatchPolicyJs {
    core: BatchPolicy,
}

#[wasm_bindgen(js_class = BatchPolicy)]
impl BatchPolicyJs {
    /// `new BatchPolicy({ minuteMs?, hourMs?, dayMs? }, jitterMinMs = 1000, jitterMaxMs = 3000)`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "UpstreamWindowsMs | undefined")] windows: JsValue,
        jitter_min_ms: Option<f64>,
        jitter_max_ms: Option<f64>,
    ) -> Result<BatchPolicyJs, JsError> {
        let mut w = UpstreamWindows::default();
        if windows.is_object() {
            for (key, slot) in [("minuteMs", &mut w.minute), ("hourMs", &mut w.hour), ("dayMs", &mut w.day)] {
                let v = Reflect::get(&windows, &key.into()).unwrap_or(JsValue::UNDEFINED);
                if !v.is_undefined() {
                    *slot = span_ms(v.as_f64().unwrap_or(f64::NAN), key)?;
                }
            }
        }
        let jitter = (
            non_negative(jitter_min_ms.unwrap_or(1_000.0), "jitterMinMs")? as u64,
            non_negative(jitter_max_ms.unwrap_or(3_000.0), "jitterMaxMs")? as u64,
        );
        let core = BatchPolicy::new(w, jitter).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(BatchPolicyJs { core })
    }

    /// Decide after one response (`status` 0 for a network failure) of a required or a
    /// best-effort call, at `nowMs` (Unix milliseconds: windows are clock-aligned), with
    /// `maxInFlight` the pacer's cap now (a `lowerConcurrency` answer carries the new one) and
    /// `readable` whether the body parsed as JSON (a 2xx that did not is `abort` for a
    /// required call, `null` for a best-effort one).
    #[wasm_bindgen(js_name = onResponse, unchecked_return_type = "BatchAction")]
    pub fn on_response(
        &mut self,
        status: u16,
        body: &str,
        now_ms: f64,
        best_effort: bool,
        max_in_flight: u32,
        readable: bool,
    ) -> Result<JsValue, JsError> {
        let now = instant(now_ms, "nowMs")?;
        let jitter = (js_sys::Math::random() * crate::client::batch::JITTER_SCALE as f64) as u64;
        let outcome = match self.core.on_response(status, body, now, best_effort, jitter) {
            Action::Ok if !readable => self.core.on_unreadable(status, best_effort),
            outcome => outcome,
        };
        Ok(action(outcome, max_in_flight))
    }

    /// Whether a required or best-effort call still goes out (false once the batch is
    /// aborted, and for best-effort calls once one of them failed).
    pub fn sends(&self, best_effort: bool) -> bool {
        self.core.sends(best_effort)
    }
}

/// An [`Action`] as the plain object `runBatch` reads.
fn action(outcome: Action, max_in_flight: u32) -> JsValue {
    let out = Object::new();
    let ms = |t: Instant| JsValue::from(nanos_to_ms(t.as_nanos()));
    match outcome {
        Action::Ok => set_prop(&out, "action", &"ok".into()),
        Action::Null => set_prop(&out, "action", &"null".into()),
        Action::ResumeAt(at) => {
            set_prop(&out, "action", &"resume".into());
            set_prop(&out, "atMs", &ms(at));
        }
        Action::LowerConcurrency => {
            set_prop(&out, "action", &"lowerConcurrency".into());
            set_prop(&out, "maxInFlight", &lower_concurrency(max_in_flight).into());
        }
        Action::SkipBestEffort => set_prop(&out, "action", &"skipBestEffort".into()),
        Action::Abort { reason, retry_at } => {
            set_prop(&out, "action", &"abort".into());
            set_prop(&out, "reason", &reason.to_string().into());
            let (kind, status) = match reason {
                AbortReason::Limited(kind) => (JsValue::from(kind_name(kind)), JsValue::NULL),
                AbortReason::Failed { status } | AbortReason::Unreadable { status } => {
                    (JsValue::NULL, JsValue::from(status))
                }
            };
            set_prop(&out, "kind", &kind);
            set_prop(&out, "status", &status);
            set_prop(&out, "retryAtMs", &retry_at.map_or(JsValue::NULL, ms));
        }
    }
    out.into()
}
