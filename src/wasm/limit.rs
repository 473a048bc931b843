//! The keyed limiter for JavaScript (`sluicegate/limit`): the core's [`Slots`] of limiters,
//! addressed by slot number. The string keys stay in JS (a `Map` from key to slot, in
//! js/limit.js): a key never crosses into wasm, and a decision is one call with numbers in
//! and one number out, so nothing is allocated per call on either side.

use super::{deny_unknown, encode, inputs, ms_to_nanos, nanos_to_ms, num};
use crate::core::keyed::Slots;
use crate::core::limit::{Blocking, Decision, FixedWindow, Gcra, Limiter, SlidingLog, SlidingWindow};
use crate::core::time::{Instant, Span};
use crate::edge::headers;
use crate::edge::rules::AnyLimiter;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Deserialize;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** How a `Limiter` counts; every algorithm admits `limit` per `windowMs`. */
export interface LimiterOptions {
  /** `token_bucket` (GCRA: `limit` per `windowMs`, at most `burst` back to back),
   * `sliding_log` (exact: `limit` in any `windowMs`), `fixed_window` (clock-aligned windows),
   * `sliding_window` (Cloudflare's weighted estimate of the previous window). */
  algorithm: "token_bucket" | "sliding_log" | "fixed_window" | "sliding_window";
  /** Units admitted per window: a whole number ≥ 1. */
  limit: number;
  /** The window, in ms (> 0). */
  windowMs: number;
  /** token_bucket only: the most units admitted back to back (default `limit`). */
  burst?: number;
  /** Block a key for this long (ms) from its first refusal, as the edge's count-then-block (default 0: no block). */
  blockMs?: number;
  /** The most keys holding state (default 100,000). A full table refuses new keys (fail closed) until one is back at full quota. */
  maxKeys?: number;
}
"#;

const FIELDS: &[&str] = &["algorithm", "limit", "windowMs", "burst", "blockMs", "maxKeys"];
const WHAT: &str = "limiter options";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Options {
    algorithm: String,
    limit: f64,
    window_ms: f64,
    burst: Option<f64>,
    block_ms: Option<f64>,
    max_keys: Option<f64>,
}

fn bad(field: &str, expected: &str, got: f64) -> JsError {
    JsError::new(&format!("{WHAT}: {field} must be {expected}, got {}", num(got)))
}

/// A whole number of `field` from `min` up to `u32::MAX`, or an error naming it.
fn whole(value: f64, field: &str, min: f64) -> Result<u32, JsError> {
    super::whole(value, &format!("{WHAT}: {field}"), min, f64::from(u32::MAX)).map(|n| n as u32)
}

fn span(value: f64, field: &str, min_exclusive: bool) -> Result<Span, JsError> {
    let ok = value.is_finite() && if min_exclusive { value > 0.0 } else { value >= 0.0 };
    if !ok {
        return Err(bad(
            field,
            if min_exclusive { "a finite number of ms above 0" } else { "a finite number of ms ≥ 0" },
            value,
        ));
    }
    Ok(Span::from_nanos(ms_to_nanos(value)))
}

fn options_from(value: JsValue) -> Result<Options, JsError> {
    if !value.is_object() {
        return Err(JsError::new(&format!(
            "{WHAT} must be an object {{ algorithm, limit, windowMs, burst?, blockMs?, maxKeys? }}"
        )));
    }
    deny_unknown(WHAT, &value, "", FIELDS)?;
    serde_wasm_bindgen::from_value(value.clone()).map_err(|e| {
        // serde names no field: name the one of the wrong type.
        for &key in FIELDS {
            let v = js_sys::Reflect::get(&value, &key.into()).unwrap_or(JsValue::UNDEFINED);
            let required = matches!(key, "algorithm" | "limit" | "windowMs");
            if v.is_undefined() && required {
                return JsError::new(&format!("{WHAT}: {key} is required"));
            }
            let fits = if key == "algorithm" { v.is_string() } else { v.is_undefined() || v.as_f64().is_some() };
            if !fits {
                let kind = if key == "algorithm" { "a string" } else { "a number" };
                return JsError::new(&format!("{WHAT}: {key} must be {kind}"));
            }
        }
        JsError::new(&format!("{WHAT}: {e}"))
    })
}

fn prototype(o: &Options) -> Result<Blocking<AnyLimiter>, JsError> {
    let limit = whole(o.limit, "limit", 1.0)?;
    let window = span(o.window_ms, "windowMs", true)?;
    let block = span(o.block_ms.unwrap_or(0.0), "blockMs", false)?;
    let burst = o.burst.map(|b| whole(b, "burst", 1.0)).transpose()?;
    if burst.is_some() && o.algorithm != "token_bucket" {
        return Err(JsError::new(&format!("{WHAT}: burst applies to the token_bucket algorithm only")));
    }
    let config = |e: crate::core::limit::ConfigError| JsError::new(&format!("{WHAT}: {e}"));
    let inner = match o.algorithm.as_str() {
        "token_bucket" => AnyLimiter::Gcra(Gcra::new(burst.unwrap_or(limit), window, limit).map_err(config)?),
        "sliding_log" => AnyLimiter::SlidingLog(SlidingLog::new(u64::from(limit), window).map_err(config)?),
        "fixed_window" => AnyLimiter::FixedWindow(FixedWindow::new(u64::from(limit), window).map_err(config)?),
        "sliding_window" => AnyLimiter::SlidingWindow(SlidingWindow::new(u64::from(limit), window).map_err(config)?),
        other => {
            return Err(JsError::new(&format!(
            "{WHAT}: algorithm must be one of token_bucket, sliding_log, fixed_window, sliding_window, got `{other}`"
        )))
        }
    };
    Ok(Blocking::new(inner, block))
}

/// A limit's name, as headers quote it: 1–64 of `A–Z a–z 0–9 _ . -`.
fn check_name(name: &str) -> Result<(), JsError> {
    let fits = (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if fits {
        Ok(())
    } else {
        Err(JsError::new(&format!("limit name must be 1 to 64 of A-Z a-z 0-9 _ . -, got `{name}`")))
    }
}

/// The state behind `Limiter` (js/limit.js): limiters in numbered slots, bounded, swept.
#[wasm_bindgen(js_name = LimiterCore)]
pub struct LimiterCoreJs {
    slots: Slots<Blocking<AnyLimiter>>,
    /// Slots freed by the last sweep, for JS to drop their keys.
    freed: Vec<u32>,
    last_slot: i32,
    /// When the key last decided is back at full quota (converted to ms only when read).
    reset: Instant,
    /// The last decision, for the middleware's headers.
    last: Decision,
}

#[wasm_bindgen(js_class = LimiterCore)]
impl LimiterCoreJs {
    /// `new LimiterCore(options)`; see `LimiterOptions`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "LimiterOptions")] options: JsValue,
    ) -> Result<LimiterCoreJs, JsError> {
        let o = options_from(options)?;
        let prototype = prototype(&o)?;
        let max_keys = whole(o.max_keys.unwrap_or(100_000.0), "maxKeys", 1.0)?;
        Ok(LimiterCoreJs {
            slots: Slots::new(prototype, max_keys as usize),
            freed: Vec::new(),
            last_slot: -1,
            reset: Instant::ZERO,
            last: Decision::Deny { retry_after: Span::ZERO },
        })
    }

    /// Units per window.
    #[wasm_bindgen(getter)]
    pub fn limit(&self) -> f64 {
        self.slots.prototype().quota().limit as f64
    }

    /// Keys holding state.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.slots.len() as f64
    }

    /// When the key last decided is back at full quota (ms, the clock of `now`).
    #[wasm_bindgen(getter, js_name = resetMs)]
    pub fn reset_ms(&self) -> f64 {
        nanos_to_ms(self.reset.as_nanos())
    }

    /// The slot `checkNew` or `block` gave the key, or −1 (none: it left no trace, or the table is full).
    #[wasm_bindgen(getter, js_name = lastSlot)]
    pub fn last_slot(&self) -> i32 {
        self.last_slot
    }

    /// A request of `cost` for the key in `slot` at `nowMs`; see `encode` for the answer.
    pub fn check(&mut self, slot: u32, now_ms: f64, cost: f64) -> f64 {
        let Some((now, cost)) = inputs(now_ms, cost) else { return f64::NAN };
        match self.slots.check_until_full(slot, now, cost) {
            Ok((decision, full_at)) => {
                self.reset = full_at;
                self.last = decision;
                encode(decision)
            }
            Err(_) => f64::INFINITY,
        }
    }

    /// The first request of a key with no slot; `lastSlot` then says where it went, and
    /// `takeFreed` which slots a full table's sweep freed (their keys are gone).
    #[wasm_bindgen(js_name = checkNew)]
    pub fn check_new(&mut self, now_ms: f64, cost: f64) -> f64 {
        self.last_slot = -1;
        let Some((now, cost)) = inputs(now_ms, cost) else { return f64::NAN };
        let freed = &mut self.freed;
        match self.slots.check_new(now, cost, &mut |s| freed.push(s)) {
            Ok((decision, slot)) => {
                self.last_slot = slot.map_or(-1, |s| s as i32);
                let full_at = match (slot.and_then(|s| self.slots.get(s)), decision) {
                    (Some(limiter), _) => limiter.full_at(),
                    (None, Decision::Deny { retry_after }) => now + retry_after,
                    (None, Decision::Allow { .. }) => now,
                };
                self.reset = full_at;
                self.last = decision;
                encode(decision)
            }
            Err(_) => f64::INFINITY,
        }
    }

    /// The response headers of the last decision, as the edge writes them, for a limit named
    /// `name`: `[RateLimit-Policy, RateLimit, Retry-After ("" when admitted)]`.
    #[wasm_bindgen(js_name = lastHeaders)]
    pub fn last_headers(&self, name: &str) -> Result<Vec<String>, JsError> {
        check_name(name)?;
        let quota = self.slots.prototype().quota();
        let retry = match self.last {
            Decision::Deny { retry_after } => headers::retry_after(retry_after),
            Decision::Allow { .. } => String::new(),
        };
        Ok(alloc::vec![headers::ratelimit_policy(name, quota), headers::ratelimit(name, &self.last), retry])
    }

    /// The `application/problem+json` body of a refusal by the limit named `name`, for the
    /// last decision.
    #[wasm_bindgen(js_name = refusalBody)]
    pub fn refusal_body(&self, name: &str) -> Result<String, JsError> {
        check_name(name)?;
        let wait = match self.last {
            Decision::Deny { retry_after } => retry_after,
            Decision::Allow { .. } => Span::ZERO,
        };
        Ok(headers::rate_limited(429, name, self.slots.prototype().quota(), wait))
    }

    /// What a request would get, changing nothing (`slot` −1: a key with no slot).
    pub fn peek(&self, slot: i32, now_ms: f64, cost: f64) -> f64 {
        let Some((now, cost)) = inputs(now_ms, cost) else { return f64::NAN };
        let slot = u32::try_from(slot).ok();
        self.slots.peek(slot, now, cost).map_or(f64::INFINITY, encode)
    }

    /// Refuse the key in `slot` (−1: a key with no slot, given one) until `nowMs + ms`.
    /// Returns the slot, or −1 when the key has none and the table is full.
    pub fn block(&mut self, slot: i32, now_ms: f64, ms: f64) -> Result<i32, JsError> {
        let now = inputs(now_ms, 0.0).ok_or_else(|| bad("now", "a finite number of ms ≥ 0", now_ms))?.0;
        let until = now + span(ms, "ms", false)?;
        if let Some(limiter) = u32::try_from(slot).ok().and_then(|s| self.slots.get_mut(s)) {
            limiter.impose_block(until);
            return Ok(slot);
        }
        let freed = &mut self.freed;
        let claimed = self.slots.claim(now, |l| l.impose_block(until), &mut |s| freed.push(s));
        self.last_slot = claimed.map_or(-1, |s| s as i32);
        Ok(self.last_slot)
    }

    /// Forget the key in `slot`: it starts afresh.
    pub fn remove(&mut self, slot: u32) -> bool {
        self.slots.remove(slot)
    }

    /// Free the slots of keys back at full quota at `nowMs`; `takeFreed` lists them.
    pub fn sweep(&mut self, now_ms: f64) -> Result<f64, JsError> {
        let now = inputs(now_ms, 0.0).ok_or_else(|| bad("now", "a finite number of ms ≥ 0", now_ms))?.0;
        let freed = &mut self.freed;
        Ok(self.slots.sweep(now, &mut |s| freed.push(s)) as f64)
    }

    /// The slots freed since the last call (their keys must be dropped), emptying the list.
    #[wasm_bindgen(js_name = takeFreed)]
    pub fn take_freed(&mut self) -> Vec<u32> {
        core::mem::take(&mut self.freed)
    }

    /// Whether slots were freed since the last `takeFreed`.
    #[wasm_bindgen(getter, js_name = hasFreed)]
    pub fn has_freed(&self) -> bool {
        !self.freed.is_empty()
    }
}

/// An `application/problem+json` body, as the edge writes them, for `status` (its title)
/// and `detail`: what the middleware answers a request it cannot key.
#[wasm_bindgen(js_name = problemJson)]
pub fn problem_json(status: u16, detail: &str) -> String {
    headers::problem(status, headers::status_title(status), detail, None, None)
}
