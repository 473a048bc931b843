//! What the edge writes to the log: one JSON line per decision (those the rules file's `log`
//! picks) and per failure, with header values and query values never shown as sent (a keyed
//! hash, or left out).

use crate::js::Env;
use sluicegate::headers;
use sluicegate::identity::Identity;
use sluicegate::limit::Decision;
use sluicegate::redact::url_for_log;
pub(crate) use sluicegate::redact::KeyedHash;
use sluicegate::rules::{DecisionLog, Rule};
use wasm_bindgen::prelude::*;
use web_sys::Request;

/// The keyed hash that log lines show header values as (and that names the block cache's
/// keys): keyed by the secret `SLUICEGATE_LOG_KEY`, so hashes agree across isolates and
/// deploys, else by 128 random bits drawn once per isolate (on first use: workerd refuses
/// random values at module scope).
pub(crate) fn log_hash(env: &Env) -> KeyedHash {
    crate::isolate::runtime(|rt| {
        *rt.log_hash.get_or_init(|| match env.log_key().as_string().filter(|k| !k.is_empty()) {
            Some(secret) => KeyedHash::from_secret(secret.as_bytes()),
            None => KeyedHash::new(crate::runtime::random_u64(), crate::runtime::random_u64()),
        })
    })
}

/// The request's URL as log lines show it: without its query's values.
pub(crate) fn logged_url(request: &Request) -> String {
    url_for_log(&request.url())
}

pub(crate) fn log(line: &str) {
    web_sys::console::log_1(&JsValue::from_str(line));
}

pub(crate) fn log_error(line: &str) {
    web_sys::console::error_1(&JsValue::from_str(line));
}

/// `logged_key`: the counting key as logs show it ([`Rule::counting_key_and_log`]). When the
/// rule's refusals are not `enforced` for the key, the line says `"enforced":false` (a rule
/// that fails closed let the request on: a shadow refusal).
pub(crate) fn log_store_failure(rule: &Rule, logged_key: &str, error: &str, enforced: bool) {
    let line = format!(
        "{{\"sluicegate\":\"store-failure\",\"rule\":{},\"key\":{},\"fails\":\"{}\"{},\"error\":{}}}",
        json_string(&rule.id),
        json_string(logged_key),
        rule.on_store_failure.name(),
        shadow_field(enforced),
        json_string(error)
    );
    log_error(&line);
}

/// What a value is, for an error message: `undefined`, `null`, or its type.
pub(crate) fn describe_kind(value: &JsValue) -> String {
    if value.is_undefined() {
        "undefined".into()
    } else if value.is_null() {
        "null".into()
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

pub(crate) fn log_omitted(omitted: usize, request: &Request) {
    if omitted > 0 {
        log(&format!(
            "sluicegate: {} RateLimit entries left out of the response to {} (the headers are capped at {} bytes)",
            omitted,
            logged_url(request),
            headers::MAX_RATELIMIT_FIELD_BYTES
        ));
    }
}

/// A decision's line, when the rules file's `log` setting picks it ([`DecisionLog::logs`],
/// drawing with `Math.random()` when lines are sampled); a sampled line carries the share it
/// stands for, `"sample":0.1`. `logged_key`: the counting key as logs show it
/// ([`Rule::counting_key_and_log`]); `enforced`: whether the rule's refusals are enforced for
/// the key. A line of a key they are not enforced for says `"enforced":false`, so that a
/// refusal in shadow reads `"decision":"deny",…,"enforced":false` (logged whenever a refusal
/// is: it is a refusal the counter made).
pub(crate) fn log_decision(
    setting: &DecisionLog,
    (rule, logged_key, enforced): (&Rule, &str, bool),
    identity: Option<Identity>,
    decision: &Decision,
    via: &str,
) {
    if !setting.logs(decision, js_sys::Math::random) {
        return;
    }
    let (ip, source) = identity_fields(identity);
    let outcome = match decision {
        // (the Cloudflare binding says whether a request is within the limit, nothing more)
        Decision::Allow { .. } if via == "cloudflare" => "\"allow\"".to_owned(),
        Decision::Allow { remaining, .. } => format!("\"allow\",\"remaining\":{remaining}"),
        Decision::Deny { retry_after } => format!("\"deny\",\"retry_after_ms\":{}", retry_after.as_millis_ceil()),
    };
    let sample = setting.sampled_text().map(|share| format!(",\"sample\":{share}")).unwrap_or_default();
    log(&format!(
        "{{\"sluicegate\":\"decision\",\"rule\":{},\"identity\":{},\"identity_source\":\"{source}\",\"key\":{},\"decision\":{outcome},\"via\":\"{via}\"{}{sample}}}",
        json_string(&rule.id),
        json_string(&ip),
        json_string(logged_key),
        shadow_field(enforced),
    ));
}

/// What a line of a key whose refusals are not enforced adds: `,"enforced":false` (nothing
/// when they are).
fn shadow_field(enforced: bool) -> &'static str {
    if enforced {
        ""
    } else {
        ",\"enforced\":false"
    }
}

/// A log line's `identity` (the counted address, IPv6 by /64) and `identity_source` (where
/// it was read: `cf-connecting-ip`, `x-forwarded-for` or `peer`; `none` without one).
pub(crate) fn identity_fields(identity: Option<Identity>) -> (String, &'static str) {
    match identity {
        Some(id) => (id.ip.to_string(), id.source.as_str()),
        None => ("unknown".to_owned(), "none"),
    }
}

pub(crate) fn json_string(s: &str) -> String {
    js_sys::JSON::stringify(&JsValue::from_str(s)).ok().and_then(|v| v.as_string()).unwrap_or_else(|| "\"\"".into())
}

pub(crate) fn describe(error: &JsValue) -> String {
    error
        .as_string()
        .or_else(|| js_sys::Reflect::get(error, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| format!("{error:?}"))
}
