//! The keyed limiter for JavaScript (`sluicegate/limit`): the core's [`Slots`] of limiters,
//! addressed by slot number. The string keys stay in JS (a `Map` from key to slot, in
//! js/limit.js): a key never crosses into wasm, and a decision is one call with numbers in
//! and a status out, its figures in a `Float64Array` over the core's own memory (see
//! `results`), so nothing is allocated per call on either side.

use super::{
    deny_unknown, field, figures_view, inputs, ms_to_nanos, nanos_to_ms, num, number_at, type_of, DecisionStatus,
};
use crate::core::keyed::{PackedGcra, Slots};
use crate::core::limit::{Blocking, Decision, FixedWindow, Gcra, Limiter, Quota, SlidingLog, SlidingWindow};
use crate::core::time::{Instant, Span};
use crate::edge::headers;
use crate::edge::rules::AnyLimiter;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
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

/// The options, read field by field ([`field`]): a required one missing, or one of the wrong
/// type (`null` counts as missing for the optional ones), is an error naming it.
fn options_from(value: JsValue) -> Result<Options, JsError> {
    if !value.is_object() {
        return Err(JsError::new(&format!(
            "{WHAT} must be an object {{ algorithm, limit, windowMs, burst?, blockMs?, maxKeys? }}"
        )));
    }
    deny_unknown(WHAT, &value, "", FIELDS)?;
    let missing = |key: &str| JsError::new(&format!("{WHAT}: {key} is required"));
    let number = |key: &str| match number_at(&value, WHAT, "", key)? {
        Some(Some(n)) => Ok(n),
        Some(None) => Err(JsError::new(&format!("{WHAT}: {key} must be a number, got null"))),
        None => Err(missing(key)),
    };
    let optional = |key: &str| number_at(&value, WHAT, "", key).map(Option::flatten);
    let algorithm = field(&value, "algorithm");
    if algorithm.is_undefined() {
        return Err(missing("algorithm"));
    }
    Ok(Options {
        algorithm: algorithm
            .as_string()
            .ok_or_else(|| JsError::new(&format!("{WHAT}: algorithm must be a string, got {}", type_of(&algorithm))))?,
        limit: number("limit")?,
        window_ms: number("windowMs")?,
        burst: optional("burst")?,
        block_ms: optional("blockMs")?,
        max_keys: optional("maxKeys")?,
    })
}

fn table(o: &Options, max_keys: usize) -> Result<Table, JsError> {
    let limit = whole(o.limit, "limit", 1.0)?;
    let window = span(o.window_ms, "windowMs", true)?;
    let block = span(o.block_ms.unwrap_or(0.0), "blockMs", false)?;
    let burst = o.burst.map(|b| whole(b, "burst", 1.0)).transpose()?;
    if burst.is_some() && o.algorithm != "token_bucket" {
        return Err(JsError::new(&format!("{WHAT}: burst applies to the token_bucket algorithm only")));
    }
    let config = |e: crate::core::limit::ConfigError| JsError::new(&format!("{WHAT}: {e}"));
    let inner = match o.algorithm.as_str() {
        "token_bucket" => {
            let gcra = Gcra::new(burst.unwrap_or(limit), window, limit).map_err(config)?;
            return Ok(Table::Gcra(Slots::with_packing(Blocking::new(gcra, block), max_keys)));
        }
        "sliding_log" => AnyLimiter::SlidingLog(SlidingLog::new(u64::from(limit), window).map_err(config)?),
        "fixed_window" => AnyLimiter::FixedWindow(FixedWindow::new(u64::from(limit), window).map_err(config)?),
        "sliding_window" => AnyLimiter::SlidingWindow(SlidingWindow::new(u64::from(limit), window).map_err(config)?),
        other => {
            return Err(JsError::new(&format!(
            "{WHAT}: algorithm must be one of token_bucket, sliding_log, fixed_window, sliding_window, got `{other}`"
        )))
        }
    };
    Ok(Table::Any(Slots::new(Blocking::new(inner, block), max_keys)))
}

/// The slots of a `LimiterCore`: token buckets packed in a table of their own (16 bytes a
/// slot rather than 72, and a decision without the other algorithms' dispatch: at a million
/// keys `limit(key)` spends most of its time waiting on memory, and a shorter decision lets
/// the next one's reads start sooner), every other algorithm whole behind [`AnyLimiter`].
enum Table {
    Gcra(Slots<Blocking<Gcra>, PackedGcra>),
    Any(Slots<Blocking<AnyLimiter>>),
}

/// `$body` with `$slots` bound to the table's slots, whichever kind they are.
macro_rules! each {
    ($table:expr, $slots:ident => $body:expr) => {
        match $table {
            Table::Gcra($slots) => $body,
            Table::Any($slots) => $body,
        }
    };
}

impl Table {
    fn quota(&self) -> Quota {
        each!(self, s => s.prototype().quota())
    }
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

/// The last decision's figures, in the order `results` gives them.
#[derive(Clone, Copy)]
enum Figure {
    Remaining,
    RetryAfterMs,
    ResetMs,
    Slot,
    Freed,
}

/// The state behind `Limiter` (js/limit.js): limiters in numbered slots, bounded, swept.
#[wasm_bindgen(js_name = LimiterCore)]
pub struct LimiterCoreJs {
    slots: Table,
    /// Slots freed by the last sweep, for JS to drop their keys.
    freed: Vec<u32>,
    /// The last decision's figures, read by JS through `results`: units remaining, the wait in
    /// whole ms (≥ 1 when refused), when the key is back at full quota (ms), the slot
    /// `checkNew` or `block` gave the key (−1: none), and how many freed slots await `takeFreed`.
    figures: [f64; 5],
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
        let max_keys = whole(o.max_keys.unwrap_or(100_000.0), "maxKeys", 1.0)?;
        Ok(LimiterCoreJs {
            slots: table(&o, max_keys as usize)?,
            freed: Vec::new(),
            figures: [0.0, 0.0, 0.0, -1.0, 0.0],
            last: Decision::Deny { retry_after: Span::ZERO },
        })
    }

    /// Units per window.
    #[wasm_bindgen(getter)]
    pub fn limit(&self) -> f64 {
        self.slots.quota().limit as f64
    }

    /// Keys holding state.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        each!(&self.slots, s => s.len()) as f64
    }

    /// The last decision's figures, as a `Float64Array` over this core's own memory (no copy):
    /// `[remaining, retryAfterMs, resetMs, slot, freed]` (see the struct). Every decision
    /// rewrites them in place; the view goes empty (`byteLength` 0) when the wasm memory grows,
    /// and is then asked for again.
    pub fn results(&self) -> js_sys::Float64Array {
        figures_view(&self.figures)
    }

    /// A request of `cost` for the key in `slot` at `nowMs`: `Allowed` or `Denied`, else
    /// `InvalidNow`, `InvalidCost` or `CostTooHigh` (nothing charged); its figures in `results`.
    pub fn check(&mut self, slot: u32, now_ms: f64, cost: f64) -> DecisionStatus {
        let (now, cost) = match inputs(now_ms, cost) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        match each!(&mut self.slots, s => s.check_until_full(slot, now, cost)) {
            Ok((decision, full_at)) => self.decided(decision, full_at),
            Err(_) => DecisionStatus::CostTooHigh,
        }
    }

    /// The first request of a key with no slot, answered as `check` does; the figures' `slot`
    /// says where the key went (−1: it left no trace, or the table is full), `freed` whether a
    /// full table's sweep freed slots (`takeFreed`: their keys are gone).
    #[wasm_bindgen(js_name = checkNew)]
    pub fn check_new(&mut self, now_ms: f64, cost: f64) -> DecisionStatus {
        self.put(Figure::Slot, -1.0);
        let (now, cost) = match inputs(now_ms, cost) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        let freed = &mut self.freed;
        let decided = each!(&mut self.slots, s => s.check_new(now, cost, &mut |slot| freed.push(slot)));
        self.put(Figure::Freed, self.freed.len() as f64);
        let Ok((decision, slot)) = decided else { return DecisionStatus::CostTooHigh };
        self.put(Figure::Slot, slot.map_or(-1.0, f64::from));
        let kept = slot.and_then(|slot| each!(&self.slots, s => s.with(slot, Limiter::full_at)));
        let full_at = match (kept, decision) {
            (Some(full_at), _) => full_at,
            (None, Decision::Deny { retry_after }) => now + retry_after,
            (None, Decision::Allow { .. }) => now,
        };
        self.decided(decision, full_at)
    }

    /// The response headers of the last decision, as the edge writes them, for a limit named
    /// `name`: `[RateLimit-Policy, RateLimit, Retry-After ("" when admitted)]`.
    #[wasm_bindgen(js_name = lastHeaders)]
    pub fn last_headers(&self, name: &str) -> Result<Vec<String>, JsError> {
        check_name(name)?;
        let quota = self.slots.quota();
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
        Ok(headers::rate_limited(429, name, self.slots.quota(), wait))
    }

    /// What a request would get, changing nothing (`slot` −1: a key with no slot): a status
    /// as `check` answers it, with `remaining` and `retryAfterMs` in `results` (and nothing
    /// else there changed).
    pub fn peek(&mut self, slot: i32, now_ms: f64, cost: f64) -> DecisionStatus {
        let (now, cost) = match inputs(now_ms, cost) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        let slot = u32::try_from(slot).ok();
        match each!(&self.slots, s => s.peek(slot, now, cost)) {
            Ok(decision) => self.figures_of(decision),
            Err(_) => DecisionStatus::CostTooHigh,
        }
    }

    /// Refuse the key in `slot` (−1: a key with no slot, given one) until `nowMs + ms`.
    /// Returns the slot, or −1 when the key has none and the table is full.
    pub fn block(&mut self, slot: i32, now_ms: f64, ms: f64) -> Result<i32, JsError> {
        let now = inputs(now_ms, 0.0).map_err(|_| bad("now", "a finite number of ms ≥ 0", now_ms))?.0;
        let until = now + span(ms, "ms", false)?;
        if let Ok(held) = u32::try_from(slot) {
            let imposed = each!(&mut self.slots, s => s.with_mut(held, |l| l.impose_block(until)));
            if imposed.is_some() {
                return Ok(slot);
            }
        }
        let freed = &mut self.freed;
        let claimed =
            each!(&mut self.slots, s => s.claim(now, |l| l.impose_block(until), &mut |slot| freed.push(slot)));
        self.put(Figure::Freed, self.freed.len() as f64);
        Ok(claimed.map_or(-1, |s| s as i32))
    }

    /// Forget the key in `slot`: it starts afresh.
    pub fn remove(&mut self, slot: u32) -> bool {
        each!(&mut self.slots, s => s.remove(slot))
    }

    /// Free the slots of keys back at full quota at `nowMs`; `takeFreed` lists them.
    pub fn sweep(&mut self, now_ms: f64) -> Result<f64, JsError> {
        let now = inputs(now_ms, 0.0).map_err(|_| bad("now", "a finite number of ms ≥ 0", now_ms))?.0;
        let freed = &mut self.freed;
        let count = each!(&mut self.slots, s => s.sweep(now, &mut |slot| freed.push(slot)));
        self.put(Figure::Freed, self.freed.len() as f64);
        Ok(count as f64)
    }

    /// The slots freed since the last call (their keys must be dropped), emptying the list.
    #[wasm_bindgen(js_name = takeFreed)]
    pub fn take_freed(&mut self) -> Vec<u32> {
        self.put(Figure::Freed, 0.0);
        core::mem::take(&mut self.freed)
    }
}

impl LimiterCoreJs {
    fn put(&mut self, figure: Figure, value: f64) {
        self.figures[figure as usize] = value;
    }

    /// A decision taken: kept for the headers, its figures written, its status answered.
    fn decided(&mut self, decision: Decision, full_at: Instant) -> DecisionStatus {
        self.last = decision;
        self.put(Figure::ResetMs, nanos_to_ms(full_at.as_nanos()));
        self.figures_of(decision)
    }

    /// `remaining` and `retryAfterMs` of `decision` written; its status.
    fn figures_of(&mut self, decision: Decision) -> DecisionStatus {
        match decision {
            Decision::Allow { remaining, .. } => {
                self.put(Figure::Remaining, remaining as f64);
                self.put(Figure::RetryAfterMs, 0.0);
                DecisionStatus::Allowed
            }
            Decision::Deny { retry_after } => {
                self.put(Figure::Remaining, 0.0);
                self.put(Figure::RetryAfterMs, retry_after.as_millis_ceil().max(1) as f64);
                DecisionStatus::Denied
            }
        }
    }
}

/// An `application/problem+json` body, as the edge writes them, for `status` (its title)
/// and `detail`: what the middleware answers a request it cannot key.
#[wasm_bindgen(js_name = problemJson)]
pub fn problem_json(status: u16, detail: &str) -> String {
    headers::problem(status, headers::status_title(status), detail, None, None)
}
