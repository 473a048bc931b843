//! Smart Flow for JavaScript (feature `wasm-smartflow`): the per-organization limiter of
//! the Smart Flow specification with time passed in, as the specification counts it:
//! `f64` seconds (monotonic seconds for the buckets, Unix seconds for the cache).
//!
//! `SmartFlowCore` only computes: an acquire *returns* how long to wait, a lookup to run is
//! handed out (`takeLookup`) and its answer handed back (`finishLookup`), and the cache is
//! JSON text in and out; a 429's `Retry-After` becomes a cooldown whose remaining length is
//! asked for (`cooldownMs`), and a failed save returns how long to wait before the next.
//! The timers, the resolver and hydrator callbacks and the storage are the JS layer's
//! (js/smartflow.js). Nothing here decides anything: each export converts JS values to the
//! core's types and back. `SmartFlowBucket` and the free functions expose
//! the rest of the specification's primitives, for conformance runners.

use super::{ms_to_nanos, nanos_to_ms, num, positive, set_prop};
use crate::client::smartflow::{
    self, url, CacheLoad, Config, Field, IdKind, Lookup, OrgRateLimiter, Penalty, Reaction, ResponseBody,
    SmartFlowError, TokenBucket,
};
use crate::core::time::{Instant, Span};
use alloc::format;
use alloc::string::{String, ToString};
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_SMARTFLOW: &str = r#"
/** The limits of a `SmartFlowCore` (Smart Flow specification §2, §7). */
export interface SmartFlowCoreOptions {
  /** Each organization's rate, requests per second; also the ceiling additive increase climbs back to. Default 10. */
  orgRate?: number;
  /** Each organization's burst, requests. Default 10. */
  orgCapacity?: number;
  /** The global (per source IP) rate, requests per second; its burst is the rate's whole part. Default 100. */
  globalRate?: number;
  /** How long a saved cache stays fresh, seconds; `null`: it never expires. Default 604,800 (7 days). */
  cacheTtlSeconds?: number | null;
}
/** Which kind of identifier a resolver is asked about. */
export type SmartFlowIdKind = "network" | "device";
/** A lookup to run: which organization owns this network or device? */
export interface SmartFlowLookup {
  kind: SmartFlowIdKind;
  id: string;
}
/** Which bucket a 429 tightened: the organization's, none (a network or device of a not yet known organization), or the global one. */
export type SmartFlowPenalty = "org" | "skipped" | "global";
/** What loading a saved cache did: only a fresh, well-formed file is loaded. */
export type SmartFlowCacheLoad =
  | { state: "loaded"; networks: number; devices: number }
  | { state: "expired" }
  | { state: "malformed" };
/** How many mappings a response changed. */
export interface SmartFlowLearned {
  networks: number;
  devices: number;
}
/** What a response means to Smart Flow: a 429, a 2xx to anything but a GET, a 2xx to a GET (learn from the URL, and from the body when `learnJson`), or nothing. */
export type SmartFlowReaction = "rateLimited" | "success" | "learn" | "learnJson" | "none";
/** The identifiers a request URL names (`/organizations/<id>`, `/networks/<id>`, `/devices/<serial>`). */
export interface SmartFlowUrlIdentifiers {
  organization: string | null;
  network: string | null;
  device: string | null;
}
"#;

fn finite(value: f64, what: &str) -> Result<f64, JsError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(JsError::new(&format!("{what} must be a finite number of seconds, got {}", num(value))))
    }
}

fn at_least_zero(value: f64, what: &str) -> Result<f64, JsError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(JsError::new(&format!("{what} must be a finite number ≥ 0, got {}", num(value))))
    }
}

fn non_empty(value: &str, what: &str) -> Result<(), JsError> {
    if value.is_empty() {
        Err(JsError::new(&format!("{what} must not be empty")))
    } else {
        Ok(())
    }
}

/// The core's refusal as a JS error. Written here, with `num`, rather than through the
/// error's `Display`, which would bring Rust's float formatting into the wasm.
fn error(e: SmartFlowError) -> JsError {
    let message = match e {
        SmartFlowError::InvalidRate(r) => format!("a rate must be a finite number above 0, got {}", num(r)),
        SmartFlowError::InvalidCapacity(c) => format!("a capacity must be a finite number ≥ 0, got {}", num(c)),
        SmartFlowError::InvalidTokens { tokens, capacity } => {
            format!("tokens must be a finite number ≤ capacity ({}), got {}", num(capacity), num(tokens))
        }
        SmartFlowError::InvalidTime(t) => format!("a time must be a finite number of seconds, got {}", num(t)),
        SmartFlowError::InvalidTtl(t) => format!("cacheTtlSeconds must be a finite number ≥ 0, got {}", num(t)),
        SmartFlowError::EmptyIdentifier(field) => format!("the {field} must not be empty"),
        SmartFlowError::NoPendingLookup => String::from("no lookup is pending for this identifier"),
        SmartFlowError::TimeOutOfRange(t) => {
            format!("the Unix time {} is outside the years 0001 to 9999 that saved_at can carry", num(t))
        }
    };
    JsError::new(&message)
}

/// An option that must be a number when present.
fn option_number(options: &JsValue, key: &str) -> Result<Option<f64>, JsError> {
    let v = Reflect::get(options, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_undefined() {
        return Ok(None);
    }
    v.as_f64().map(Some).ok_or_else(|| JsError::new(&format!("{key} must be a number")))
}

fn config_from(options: &JsValue) -> Result<Config, JsError> {
    let mut config = Config::default();
    if options.is_undefined() || options.is_null() {
        return Ok(config);
    }
    if !options.is_object() {
        return Err(JsError::new(
            "options must be an object { orgRate?, orgCapacity?, globalRate?, cacheTtlSeconds? }",
        ));
    }
    if let Some(rate) = option_number(options, "orgRate")? {
        config.org_rate = positive(rate, "orgRate")?;
    }
    if let Some(capacity) = option_number(options, "orgCapacity")? {
        config.org_capacity = at_least_zero(capacity, "orgCapacity")?;
    }
    if let Some(rate) = option_number(options, "globalRate")? {
        config.global_rate = positive(rate, "globalRate")?;
    }
    let ttl = Reflect::get(options, &"cacheTtlSeconds".into()).unwrap_or(JsValue::UNDEFINED);
    if ttl.is_null() {
        config.cache_ttl = None;
    } else if !ttl.is_undefined() {
        let seconds =
            ttl.as_f64().ok_or_else(|| JsError::new("cacheTtlSeconds must be a number, or null for never"))?;
        config.cache_ttl = Some(at_least_zero(seconds, "cacheTtlSeconds")?);
    }
    Ok(config)
}

fn kind_name(kind: IdKind) -> &'static str {
    kind.as_str()
}

fn kind_from(kind: &str) -> Result<IdKind, JsError> {
    match kind {
        "network" => Ok(IdKind::Network),
        "device" => Ok(IdKind::Device),
        other => Err(JsError::new(&format!("kind must be \"network\" or \"device\", got \"{other}\""))),
    }
}

/// A response body as the core's learning rules (§6) read it: a JS object (not an array),
/// read along the paths the core asks for (`undefined` is absent, as in `JSON.stringify`);
/// nothing else of the body is copied.
struct JsBody<'a>(&'a JsValue);

impl ResponseBody for JsBody<'_> {
    fn field(&self, path: &[&str]) -> Field<'_> {
        let mut at = self.0.clone();
        for key in path {
            if !at.is_object() || Array::is_array(&at) {
                return Field::Absent;
            }
            at = Reflect::get(&at, &(*key).into()).unwrap_or(JsValue::UNDEFINED);
            if at.is_undefined() {
                return Field::Absent;
            }
        }
        at.as_string().map_or(Field::NotText, |text| Field::Text(text.into()))
    }
}

/// An instant on a clock read in JS milliseconds (≥ 0).
fn instant_ms(ms: f64, what: &str) -> Result<Instant, JsError> {
    if ms.is_finite() && ms >= 0.0 {
        Ok(Instant::from_nanos(ms_to_nanos(ms)))
    } else {
        Err(JsError::new(&format!("{what} must be a finite number of milliseconds ≥ 0, got {}", num(ms))))
    }
}

/// A span in JS milliseconds.
fn span_ms(span: Span) -> f64 {
    nanos_to_ms(span.as_nanos())
}

/// A `Retry-After` from JS as the wait it asks for: a string is the header (read by the
/// core, dates against `now_unix_ms`), a number is seconds; `null`, `undefined`, a negative
/// or non-finite number and anything else ask for none.
fn retry_after_wait(value: &JsValue, now_unix_ms: Option<f64>) -> Result<Option<Span>, JsError> {
    if let Some(seconds) = value.as_f64() {
        let valid = seconds.is_finite() && seconds >= 0.0;
        return Ok(valid.then(|| Span::from_nanos(ms_to_nanos(seconds * 1000.0))));
    }
    match value.as_string() {
        Some(text) => {
            let now = instant_ms(now_unix_ms.unwrap_or(f64::NAN), "nowUnixMs")?;
            Ok(smartflow::retry_after_wait(&text, now))
        }
        None => Ok(None),
    }
}

fn mappings<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> JsValue {
    let out = Object::new();
    for (id, org) in entries {
        set_prop(&out, id, &org.into());
    }
    out.into()
}

/// The Smart Flow limiter with time passed in: a global bucket, one bucket per
/// organization, and the learned network → organization and serial → organization
/// mappings that route requests to them.
#[wasm_bindgen(js_name = SmartFlowCore)]
pub struct SmartFlowCoreJs {
    core: OrgRateLimiter,
    /// The lookup the last `acquireAsync` started, until `takeLookup`.
    started: Option<Lookup>,
}

#[wasm_bindgen(js_class = SmartFlowCore)]
impl SmartFlowCoreJs {
    /// `new SmartFlowCore({ orgRate?, orgCapacity?, globalRate?, cacheTtlSeconds? })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "SmartFlowCoreOptions | null")] options: Option<JsValue>,
    ) -> Result<SmartFlowCoreJs, JsError> {
        let core = OrgRateLimiter::new(config_from(&options.unwrap_or(JsValue::UNDEFINED))?).map_err(error)?;
        Ok(SmartFlowCoreJs { core, started: None })
    }

    /// Reserve a request to `url` at `nowSeconds` (any monotonic clock) and return how many
    /// seconds to wait before sending it: the global bucket is always charged, the
    /// organization's bucket when the URL resolves. Starts no lookup.
    pub fn acquire(&mut self, url: &str, now_seconds: f64) -> Result<f64, JsError> {
        self.core.acquire(url, finite(now_seconds, "nowSeconds")?).map_err(error)
    }

    /// As `acquire`, and when the URL's organization is unknown, start a lookup of its
    /// network (else device) unless one is pending: `takeLookup()` hands it out. The
    /// organization is charged on later calls, once `finishLookup` maps it.
    #[wasm_bindgen(js_name = acquireAsync)]
    pub fn acquire_async(&mut self, url: &str, now_seconds: f64) -> Result<f64, JsError> {
        let acquired = self.core.acquire_async(url, finite(now_seconds, "nowSeconds")?).map_err(error)?;
        if acquired.lookup.is_some() {
            self.started = acquired.lookup;
        }
        Ok(acquired.wait)
    }

    /// The lookup the last `acquireAsync` started, once; `undefined` when none.
    #[wasm_bindgen(js_name = takeLookup, unchecked_return_type = "SmartFlowLookup | undefined")]
    pub fn take_lookup(&mut self) -> JsValue {
        match self.started.take() {
            None => JsValue::UNDEFINED,
            Some(lookup) => {
                let out = Object::new();
                set_prop(&out, "kind", &kind_name(lookup.kind).into());
                set_prop(&out, "id", &lookup.identifier.into());
                out.into()
            }
        }
    }

    /// Start a lookup for `url` directly (as `acquireAsync` does, charging nothing);
    /// `undefined` when the URL resolves, names no network or device, or a lookup of the
    /// same identifier is pending.
    #[wasm_bindgen(js_name = startLookup, unchecked_return_type = "SmartFlowLookup | undefined")]
    pub fn start_lookup(&mut self, url: &str) -> JsValue {
        self.started = self.core.start_lookup(url);
        self.take_lookup()
    }

    /// Report a lookup's answer (`null` when nothing was found): the identifier is no
    /// longer pending, and a found organization is mapped, gets a bucket and counts one
    /// changed mapping. Returns whether a mapping was recorded. Throws when no lookup of
    /// this identifier is pending.
    #[wasm_bindgen(js_name = finishLookup)]
    pub fn finish_lookup(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "SmartFlowIdKind")] kind: &str,
        id: &str,
        org_id: Option<String>,
    ) -> Result<bool, JsError> {
        let lookup = Lookup { kind: kind_from(kind)?, identifier: String::from(id) };
        self.core.finish_lookup(&lookup, org_id.as_deref()).map_err(|e| match e {
            SmartFlowError::NoPendingLookup => JsError::new(&format!("no lookup of the {kind} \"{id}\" is pending")),
            other => error(other),
        })
    }

    /// Whether a lookup of `id` is pending.
    #[wasm_bindgen(js_name = isPending)]
    pub fn is_pending(&self, id: &str) -> bool {
        self.core.is_pending(id)
    }

    /// Claim `orgId` for hydration: `true` the first time (run the hydrator now), `false`
    /// ever after.
    #[wasm_bindgen(js_name = claimHydration)]
    pub fn claim_hydration(&mut self, org_id: &str) -> bool {
        self.core.claim_hydration(org_id)
    }

    /// The organization `url` belongs to: named in it, else its network's, else its
    /// device's; `undefined` when unknown.
    #[wasm_bindgen(js_name = resolveOrg)]
    pub fn resolve_org(&self, url: &str) -> Option<String> {
        self.core.resolve_org(url).map(String::from)
    }

    /// What a cooldown for `url` is keyed by: `org:<id>` when its organization is known,
    /// else `network:<id>` or `device:<serial>`, else `undefined`.
    #[wasm_bindgen(js_name = scopeKey)]
    pub fn scope_key(&self, url: &str) -> Option<String> {
        self.core.scope(url).map(|scope| scope.to_string())
    }

    /// A 429 on `url` (§5): the organization's rate × 0.7, or nothing for a network or
    /// device of an unknown organization, or the global rate × 0.7. Never below 0.5.
    /// `retryAfter` (the header's text, or seconds) holds the 429's scope back from
    /// `nowMs` (the monotonic clock `cooldownMs` is asked with), never shortening a
    /// cooldown in force; an HTTP-date is measured from `nowUnixMs` (`Date.now()`).
    #[wasm_bindgen(js_name = onRateLimited, unchecked_return_type = "SmartFlowPenalty")]
    pub fn on_rate_limited(
        &mut self,
        url: &str,
        #[wasm_bindgen(unchecked_param_type = "string | number | null")] retry_after: Option<JsValue>,
        now_ms: Option<f64>,
        now_unix_ms: Option<f64>,
    ) -> Result<JsValue, JsError> {
        let wait = match retry_after {
            Some(value) => retry_after_wait(&value, now_unix_ms)?,
            None => None,
        };
        let penalty = match wait {
            Some(wait) => {
                let now = instant_ms(now_ms.unwrap_or(f64::NAN), "nowMs")?;
                self.core.on_rate_limited_with_retry(url, Some(wait), now)
            }
            None => self.core.on_rate_limited(url),
        };
        Ok(match penalty {
            Penalty::Org => "org",
            Penalty::SkippedUnresolved => "skipped",
            Penalty::Global => "global",
        }
        .into())
    }

    /// How long a `Retry-After` still holds requests to `url` back at `nowMs`,
    /// milliseconds (0: not at all).
    #[wasm_bindgen(js_name = cooldownMs)]
    pub fn cooldown_ms(&mut self, url: &str, now_ms: f64) -> Result<f64, JsError> {
        Ok(span_ms(self.core.cooldown(url, instant_ms(now_ms, "nowMs")?)))
    }

    /// Whether a cooldown is recorded (until then `cooldownMs` is 0 for every URL).
    #[wasm_bindgen(getter, js_name = coolingDown)]
    pub fn cooling_down(&self) -> bool {
        self.core.cooling_down()
    }

    /// A save of the cache failed: milliseconds to wait before trying again (1 s,
    /// doubling up to 60 s; back to 1 s after a save succeeds, see `markFlushed`).
    #[wasm_bindgen(js_name = saveFailed)]
    pub fn save_failed(&mut self) -> f64 {
        span_ms(self.core.save_failed())
    }

    /// The milliseconds a `Retry-After` asks to wait: the header's text (delay-seconds or
    /// an HTTP-date, measured from `nowUnixMs`) or seconds; `undefined` when there is none
    /// or it is unreadable. A date in the past is 0.
    #[wasm_bindgen(js_name = retryAfterMs)]
    pub fn retry_after_ms(
        #[wasm_bindgen(unchecked_param_type = "unknown")] value: JsValue,
        now_unix_ms: f64,
    ) -> Result<Option<f64>, JsError> {
        Ok(retry_after_wait(&value, Some(now_unix_ms))?.map(span_ms))
    }

    /// What a response with `status` to a `method` request, with the `contentType` header
    /// (`null` when absent), means to the limiter.
    #[wasm_bindgen(unchecked_return_type = "SmartFlowReaction")]
    pub fn reaction(status: u16, method: &str, content_type: Option<String>) -> JsValue {
        match smartflow::reaction(status, method, content_type.as_deref()) {
            Reaction::RateLimited => "rateLimited",
            Reaction::Success => "success",
            Reaction::SuccessAndLearn { json: false } => "learn",
            Reaction::SuccessAndLearn { json: true } => "learnJson",
            Reaction::Nothing => "none",
        }
        .into()
    }

    /// `url` without its query and fragment: what requests are routed by.
    #[wasm_bindgen(js_name = withoutQuery)]
    pub fn without_query(url: &str) -> String {
        String::from(url::without_query(url))
    }

    /// A success on `url` (§5): + 0.2 to its organization's rate and + 0.5 to the global
    /// rate, each capped at the configured rate.
    #[wasm_bindgen(js_name = onSuccess)]
    pub fn on_success(&mut self, url: &str) {
        self.core.on_success(url);
    }

    /// Learn mappings from a successful response to `url` (§6). `body` is the parsed JSON
    /// (an object; anything else is no object), or its text (not JSON: only the URL is
    /// learned from).
    #[wasm_bindgen(js_name = learnFromResponse, unchecked_return_type = "SmartFlowLearned")]
    pub fn learn_from_response(
        &mut self,
        url: &str,
        #[wasm_bindgen(unchecked_param_type = "unknown")] body: JsValue,
    ) -> JsValue {
        let learned = match body.as_string() {
            Some(text) => self.core.learn_from_response_text(url, &text),
            None => self.core.learn_from_body(url, &JsBody(&body)),
        };
        let out = Object::new();
        set_prop(&out, "networks", &learned.networks.into());
        set_prop(&out, "devices", &learned.devices.into());
        out.into()
    }

    /// Make sure `orgId` has a bucket.
    #[wasm_bindgen(js_name = registerOrg)]
    pub fn register_org(&mut self, org_id: &str) -> Result<(), JsError> {
        non_empty(org_id, "orgId")?;
        self.core.register_org(org_id).map_err(error)
    }

    /// Map a network to its organization (not counted as a change to save).
    #[wasm_bindgen(js_name = registerNetwork)]
    pub fn register_network(&mut self, network_id: &str, org_id: &str) -> Result<(), JsError> {
        non_empty(network_id, "networkId")?;
        non_empty(org_id, "orgId")?;
        self.core.register_network(network_id, org_id).map_err(error)
    }

    /// Map a device serial to its organization (not counted as a change to save).
    #[wasm_bindgen(js_name = registerDevice)]
    pub fn register_device(&mut self, serial: &str, org_id: &str) -> Result<(), JsError> {
        non_empty(serial, "serial")?;
        non_empty(org_id, "orgId")?;
        self.core.register_device(serial, org_id).map_err(error)
    }

    /// Every network → organization mapping.
    #[wasm_bindgen(js_name = networkMappings, unchecked_return_type = "Record<string, string>")]
    pub fn network_mappings(&self) -> JsValue {
        mappings(self.core.network_mappings())
    }

    /// Every serial → organization mapping.
    #[wasm_bindgen(js_name = deviceMappings, unchecked_return_type = "Record<string, string>")]
    pub fn device_mappings(&self) -> JsValue {
        mappings(self.core.device_mappings())
    }

    /// How many networks are mapped.
    #[wasm_bindgen(getter, js_name = networkCount)]
    pub fn network_count(&self) -> usize {
        self.core.network_mappings().count()
    }

    /// How many devices are mapped.
    #[wasm_bindgen(getter, js_name = deviceCount)]
    pub fn device_count(&self) -> usize {
        self.core.device_mappings().count()
    }

    /// How many organizations have a bucket.
    #[wasm_bindgen(getter, js_name = orgCount)]
    pub fn org_count(&self) -> usize {
        self.core.org_count()
    }

    /// An organization's current rate, requests per second; `undefined` before it has a
    /// bucket.
    #[wasm_bindgen(js_name = orgRate)]
    pub fn org_rate(&self, org_id: &str) -> Option<f64> {
        self.core.bucket(org_id).map(TokenBucket::rate)
    }

    /// An organization's tokens as of its last refill (negative while reservations are
    /// outstanding); `undefined` before it has a bucket.
    #[wasm_bindgen(js_name = orgTokens)]
    pub fn org_tokens(&self, org_id: &str) -> Option<f64> {
        self.core.bucket(org_id).map(TokenBucket::tokens)
    }

    /// Set an organization's rate (raised to the 0.5 floor); returns the rate in force.
    /// Throws when the organization has no bucket yet.
    #[wasm_bindgen(js_name = setOrgRate)]
    pub fn set_org_rate(&mut self, org_id: &str, rate: f64) -> Result<f64, JsError> {
        let bucket = self.core.bucket_mut(org_id).ok_or_else(|| {
            JsError::new(&format!("the organization \"{org_id}\" has no bucket yet (registerOrg it first)"))
        })?;
        bucket.set_rate(rate).map_err(|_| JsError::new(&format!("rate must be a finite number, got {}", num(rate))))
    }

    /// The global rate, requests per second.
    #[wasm_bindgen(getter, js_name = globalRate)]
    pub fn global_rate(&self) -> f64 {
        self.core.global_bucket().rate()
    }

    /// The global tokens as of the last refill.
    #[wasm_bindgen(getter, js_name = globalTokens)]
    pub fn global_tokens(&self) -> f64 {
        self.core.global_bucket().tokens()
    }

    /// Set the global rate (raised to the 0.5 floor); returns the rate in force.
    #[wasm_bindgen(js_name = setGlobalRate)]
    pub fn set_global_rate(&mut self, rate: f64) -> Result<f64, JsError> {
        self.core
            .global_bucket_mut()
            .set_rate(rate)
            .map_err(|_| JsError::new(&format!("rate must be a finite number, got {}", num(rate))))
    }

    /// Mappings changed since the last successful save.
    #[wasm_bindgen(getter)]
    pub fn dirty(&self) -> f64 {
        self.core.dirty() as f64
    }

    /// Whether 50 or more mappings changed since the last save.
    #[wasm_bindgen(getter, js_name = flushDue)]
    pub fn flush_due(&self) -> bool {
        self.core.flush_due()
    }

    /// A save covering `count` changes (the `dirty` value when its text was taken)
    /// succeeded.
    #[wasm_bindgen(js_name = markFlushed)]
    pub fn mark_flushed(&mut self, count: f64) -> Result<(), JsError> {
        let count = at_least_zero(count, "count")?;
        self.core.mark_flushed(count as u64);
        Ok(())
    }

    /// Whether a fresh cache was loaded.
    #[wasm_bindgen(getter, js_name = cacheFresh)]
    pub fn cache_fresh(&self) -> bool {
        self.core.cache_fresh()
    }

    /// The cache file (§7) as JSON, stamped `saved_at` from `nowUnixSeconds`.
    #[wasm_bindgen(js_name = saveCache)]
    pub fn save_cache(&self, now_unix_seconds: f64) -> Result<String, JsError> {
        self.core.save_cache(finite(now_unix_seconds, "nowUnixSeconds")?).map_err(error)
    }

    /// Load a cache file (§7) at `nowUnixSeconds`: only a fresh, well-formed file is
    /// loaded; anything else loads nothing and never throws.
    #[wasm_bindgen(js_name = loadCache, unchecked_return_type = "SmartFlowCacheLoad")]
    pub fn load_cache(&mut self, json: &str, now_unix_seconds: f64) -> Result<JsValue, JsError> {
        let outcome = self.core.load_cache(json, finite(now_unix_seconds, "nowUnixSeconds")?).map_err(error)?;
        let out = Object::new();
        match outcome {
            CacheLoad::Loaded { networks, devices } => {
                set_prop(&out, "state", &"loaded".into());
                set_prop(&out, "networks", &networks.into());
                set_prop(&out, "devices", &devices.into());
            }
            CacheLoad::Expired => set_prop(&out, "state", &"expired".into()),
            CacheLoad::Malformed => set_prop(&out, "state", &"malformed".into()),
        }
        Ok(out.into())
    }
}

/// The specification's token bucket (§1) with time passed in (seconds): it reserves
/// instead of refusing, and tokens may go negative.
#[wasm_bindgen(js_name = SmartFlowBucket)]
pub struct SmartFlowBucketJs {
    inner: TokenBucket,
}

#[wasm_bindgen(js_class = SmartFlowBucket)]
impl SmartFlowBucketJs {
    /// `new SmartFlowBucket(rate, capacity)`: full; or
    /// `new SmartFlowBucket(rate, capacity, tokens, lastSeconds)`: in that state.
    #[wasm_bindgen(constructor)]
    pub fn new(
        rate: f64,
        capacity: f64,
        tokens: Option<f64>,
        last_seconds: Option<f64>,
    ) -> Result<SmartFlowBucketJs, JsError> {
        positive(rate, "rate")?;
        at_least_zero(capacity, "capacity")?;
        let inner = match (tokens, last_seconds) {
            (None, None) => TokenBucket::new(rate, capacity),
            (Some(tokens), Some(last)) => {
                if !(tokens.is_finite() && tokens <= capacity) {
                    return Err(JsError::new(&format!(
                        "tokens must be a finite number ≤ capacity ({}), got {}",
                        num(capacity),
                        num(tokens)
                    )));
                }
                TokenBucket::with_state(rate, capacity, tokens, finite(last, "lastSeconds")?)
            }
            _ => return Err(JsError::new("tokens and lastSeconds go together: give both or neither")),
        }
        .map_err(error)?;
        Ok(SmartFlowBucketJs { inner })
    }

    /// Reserve one token at `nowSeconds`; the seconds to wait (0 while tokens remain).
    pub fn acquire(&mut self, now_seconds: f64) -> Result<f64, JsError> {
        self.inner.acquire(finite(now_seconds, "nowSeconds")?).map_err(error)
    }

    /// The wait an `acquire` at `nowSeconds` would return, reserving nothing.
    pub fn peek(&self, now_seconds: f64) -> Result<f64, JsError> {
        self.inner.peek(finite(now_seconds, "nowSeconds")?).map_err(error)
    }

    /// Set the rate (raised to the 0.5 floor); returns the rate in force.
    #[wasm_bindgen(js_name = setRate)]
    pub fn set_rate(&mut self, rate: f64) -> Result<f64, JsError> {
        self.inner.set_rate(rate).map_err(|_| JsError::new(&format!("rate must be a finite number, got {}", num(rate))))
    }

    /// Tokens per second.
    #[wasm_bindgen(getter)]
    pub fn rate(&self) -> f64 {
        self.inner.rate()
    }

    /// The most tokens the bucket holds.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> f64 {
        self.inner.capacity()
    }

    /// Tokens as of the last refill (negative: reservations outstanding).
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> f64 {
        self.inner.tokens()
    }

    /// When the bucket was last refilled, seconds; `undefined` before its first acquire.
    #[wasm_bindgen(getter, js_name = lastSeconds)]
    pub fn last_seconds(&self) -> Option<f64> {
        self.inner.last()
    }
}

/// A cache file's `saved_at` as Unix seconds: `undefined` unless it is a string in exactly the
/// format `YYYY-MM-DDTHH:MM:SSZ` naming a real UTC instant.
#[wasm_bindgen(js_name = parseSavedAt)]
pub fn parse_saved_at(#[wasm_bindgen(unchecked_param_type = "unknown")] value: JsValue) -> Option<f64> {
    value.as_string().and_then(|text| smartflow::parse_saved_at_str(&text))
}

/// Unix seconds as a cache file's `saved_at` (`YYYY-MM-DDTHH:MM:SSZ`, UTC, fraction
/// dropped).
#[wasm_bindgen(js_name = formatSavedAt)]
pub fn format_saved_at(unix_seconds: f64) -> Result<String, JsError> {
    smartflow::format_saved_at(finite(unix_seconds, "unixSeconds")?).map_err(error)
}

/// Whether a cache saved at `savedAtSeconds` (`null`: missing or unparseable) is fresh at
/// `nowSeconds` under `ttlSeconds` (`null`: never expires): `now − savedAt ≤ ttl`.
#[wasm_bindgen(js_name = isCacheFresh)]
pub fn is_cache_fresh(now_seconds: f64, saved_at_seconds: Option<f64>, ttl_seconds: Option<f64>) -> bool {
    smartflow::is_fresh(now_seconds, saved_at_seconds, ttl_seconds)
}

/// Whether `url` names a network or device but no organization: a 429 on it belongs to
/// one specific, not yet known, organization.
#[wasm_bindgen(js_name = isUnresolvedScopedUrl)]
pub fn is_unresolved_scoped_url(url: &str) -> bool {
    url::is_unresolved_scoped_url(url)
}

/// The organization id, network id and serial `url` names (each the first match of
/// `/organizations/([^/]+)`, `/networks/([^/]+)`, `/devices/([^/]+)`), or `null`.
#[wasm_bindgen(js_name = urlIdentifiers, unchecked_return_type = "SmartFlowUrlIdentifiers")]
pub fn url_identifiers(url: &str) -> JsValue {
    let out = Object::new();
    let id = |v: Option<&str>| v.map_or(JsValue::NULL, JsValue::from);
    set_prop(&out, "organization", &id(url::org_id(url)));
    set_prop(&out, "network", &id(url::network_id(url)));
    set_prop(&out, "device", &id(url::serial(url)));
    out.into()
}
