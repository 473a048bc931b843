//! Edge tooling for JavaScript (feature `wasm-edge`): rules validation, client identity
//! and a token bucket with time passed in. Kept out of the browser client's build.

use super::{figures_view, inputs, ms_to_nanos, non_negative, set_prop, whole, DecisionStatus};
use crate::core::limit::{Decision, Gcra, Limiter};
use crate::core::time::Span;
use crate::edge::identity::{client_identity, Sources};
use crate::edge::rules::RuleSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** The sources a client identity is read from, as a proxy or server sees them. */
export interface IdentitySources {
  /** The `CF-Connecting-IP` header. */
  cfConnectingIp?: string | null;
  /** The whole `X-Forwarded-For` header; only its rightmost hop is trusted. */
  xForwardedFor?: string | null;
  /** The socket peer (`ip` or `ip:port`). */
  peer?: string | null;
}
/** Who a request is counted against. IPv6 is reduced to its /64 (`2001:db8::/64`). */
export interface ClientIdentity {
  ip: string;
  source: "cf-connecting-ip" | "x-forwarded-for" | "peer";
}
/** A limiter's answer: allowed with what is left, or refused with how long to wait. */
export type LimitDecision =
  | { allowed: true; remaining: number; resetMs: number }
  | { allowed: false; retryAfterMs: number };
/** One validated rule: its id and the `RateLimit-Policy` it advertises. */
export interface RuleSummary {
  id: string;
  policy: string;
}
"#;

/// Validate a rules file (JSON text). Returns each rule's id and policy header.
///
/// Throws an `Error` whose message lists every problem, one per line, each naming the
/// rule and the field.
#[wasm_bindgen(js_name = validateRules, unchecked_return_type = "RuleSummary[]")]
pub fn validate_rules(text: &str) -> Result<Array, JsError> {
    let set = RuleSet::from_json(text).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        JsError::new(&lines.join("\n"))
    })?;
    let out = Array::new();
    for rule in set.rules() {
        let item = Object::new();
        set_prop(&item, "id", &rule.id.as_str().into());
        set_prop(&item, "policy", &rule.policy_header().into());
        out.push(&item);
    }
    Ok(out)
}

/// `sluicegate check-rules` for the package's command line (js/cli.mjs): `{ rules, lines }`
/// for a valid file (its rule count and what the native command line prints of it), else
/// `{ problems }`, every one. Not part of any entry's API.
#[doc(hidden)]
#[wasm_bindgen(js_name = checkRulesLines, unchecked_return_type = "{ rules: number; lines: string[] } | { problems: string[] }")]
pub fn check_rules_lines(text: &str) -> JsValue {
    let out = Object::new();
    let strings = |items: Vec<String>| items.iter().map(|s| JsValue::from_str(s)).collect::<Array>();
    match RuleSet::from_json(text) {
        Ok(set) => {
            set_prop(&out, "rules", &(set.rules().len() as f64).into());
            set_prop(&out, "lines", &strings(set.summary_lines()));
        }
        Err(errors) => set_prop(&out, "problems", &strings(errors.iter().map(ToString::to_string).collect())),
    }
    out.into()
}

fn optional_string(obj: &JsValue, key: &str) -> Result<Option<String>, JsError> {
    let value = Reflect::get(obj, &key.into()).map_err(|_| JsError::new(&format!("cannot read {key}")))?;
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    value.as_string().map(Some).ok_or_else(|| JsError::new(&format!("{key} must be a string")))
}

/// Who to count a request against: `CF-Connecting-IP`, else the rightmost
/// `X-Forwarded-For` hop, else the peer; `undefined` when none holds an address.
#[wasm_bindgen(js_name = clientIdentity, unchecked_return_type = "ClientIdentity | undefined")]
pub fn client_identity_js(
    #[wasm_bindgen(unchecked_param_type = "IdentitySources")] sources: JsValue,
) -> Result<JsValue, JsError> {
    if !sources.is_object() {
        return Err(JsError::new("clientIdentity takes an object { cfConnectingIp?, xForwardedFor?, peer? }"));
    }
    let cf = optional_string(&sources, "cfConnectingIp")?;
    let xff = optional_string(&sources, "xForwardedFor")?;
    let peer = optional_string(&sources, "peer")?;
    let found = client_identity(&Sources {
        cf_connecting_ip: cf.as_deref(),
        x_forwarded_for: xff.as_deref(),
        peer: peer.as_deref(),
    });
    Ok(match found {
        None => JsValue::UNDEFINED,
        Some(id) => {
            let out = Object::new();
            set_prop(&out, "ip", &id.ip.to_string().into());
            set_prop(&out, "source", &id.source.as_str().into());
            out.into()
        }
    })
}

/// A token bucket (GCRA) with time passed in: `count` units per `periodMs`, at most
/// `burst` back to back. Plain data: dropping it needs no `free()` beyond wasm-bindgen's.
/// JS sees it as `TokenBucketCore`, behind js/token-bucket.js's `TokenBucket`, which maps
/// `check`'s status to its number, object or error.
#[wasm_bindgen(js_name = TokenBucketCore)]
pub struct TokenBucket {
    inner: Gcra,
    /// The last decision's figures, read by JS through `results`: the units left when admitted
    /// (on `CostTooHigh`: the capacity), the wait in whole ms when refused, and when admitted
    /// how long until the bucket is full again (whole ms); 0 where a figure does not apply.
    figures: [f64; 3],
}

#[wasm_bindgen(js_class = TokenBucketCore)]
impl TokenBucket {
    /// `new TokenBucketCore(burst, periodMs, count)`.
    #[wasm_bindgen(constructor)]
    pub fn new(burst: f64, period_ms: f64, count: f64) -> Result<TokenBucket, JsError> {
        let burst = whole(burst, "burst", 1.0, u32::MAX as f64)? as u32;
        let count = whole(count, "count", 1.0, u32::MAX as f64)? as u32;
        let period = non_negative(period_ms, "periodMs")?;
        if period == 0.0 {
            return Err(JsError::new("periodMs must be above 0"));
        }
        let period = Span::from_nanos(ms_to_nanos(period));
        let inner = Gcra::new(burst, period, count).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(TokenBucket { inner, figures: [0.0; 3] })
    }

    /// The figures of the last decision, as a `Float64Array` over the wasm memory (no copy):
    /// `[remaining, retryAfterMs, resetMs]`. Every decision rewrites them in place; the view
    /// goes empty when the wasm memory grows, and is then asked for again.
    pub fn results(&self) -> js_sys::Float64Array {
        figures_view(&self.figures)
    }

    /// Decide on a request of `cost` at `nowMs` (any clock, in milliseconds): `Allowed`
    /// (charged) or `Denied`, else `InvalidNow`, `InvalidCost` or `CostTooHigh` (nothing
    /// charged); the figures in `results`. Nothing is allocated.
    pub fn check(&mut self, now_ms: f64, cost: f64) -> DecisionStatus {
        let (now, cost) = match inputs(now_ms, cost) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        let (status, figures) = match self.inner.check(now, cost) {
            Ok(Decision::Allow { remaining, reset }) => {
                (DecisionStatus::Allowed, [remaining as f64, 0.0, reset.as_millis_ceil() as f64])
            }
            Ok(Decision::Deny { retry_after }) => {
                (DecisionStatus::Denied, [0.0, retry_after.as_millis_ceil() as f64, 0.0])
            }
            Err(e) => (DecisionStatus::CostTooHigh, [e.capacity as f64, 0.0, 0.0]),
        };
        self.figures = figures;
        status
    }
}
