//! `"egress"`: the providers the app calls through the edge (see [`crate::edge::egress`]).

use super::{
    brief, budget_scope, description, flag, is_name, item_name, name_field, normalise_path, seconds, unique_id, whole,
    Errors, DEFAULT_MAX_WAIT_S,
};
use crate::core::time::Span;
use crate::edge::egress::{
    gate::MAX_MIRRORS, CacheRule, Egress, Mirror, Provider, Weigh, DEFAULT_MAX_ENTRY_BYTES, ISOLATE_CACHE_BYTES,
};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::Value;

const FIELDS: &[&str] = &["prefix", "providers"];
const PROVIDER_FIELDS: &[&str] = &[
    "id",
    "description",
    "mirrors",
    "max_in_flight",
    "min_interval_ms",
    "weight",
    "weight_per_minute",
    "max_wait",
    "user_agent",
    "cache",
    "retry_after_failure_s",
    "scope",
    "lease",
    "timeout_s",
    "public",
];
const CACHE_FIELDS: &[&str] = &[
    "ttl_s",
    "stale_if_error",
    "refresh",
    "retry_after_failure_s",
    "max_entries",
    "max_entry_bytes",
    "max_bytes",
    "post",
];
/// The most providers a file may hold.
pub const MAX_PROVIDERS: usize = 32;
/// Where the egress routes are unless the file says otherwise.
pub const DEFAULT_PREFIX: &str = "/egress/";
const MAX_WAIT_S: u32 = 300;
/// How long an attempt at a mirror waits for its answer unless `timeout_s` says otherwise.
const DEFAULT_TIMEOUT_S: u32 = 30;
/// The longest a `User-Agent` may be.
const MAX_USER_AGENT_BYTES: usize = 256;
/// `max_in_flight` of a provider whose policy is spacing alone (`min_interval_ms`, no
/// `max_in_flight`): one call at a time at each mirror.
///
/// Spacing bounds when calls *start*, not how many are open: with no cap, a mirror that
/// answers slower than `min_interval_ms` gets a new call every interval while the earlier
/// ones still hang, and the calls open at once grow as latency / interval. Policies stated as
/// spacing mean one request at a time: Nominatim's is "an absolute maximum of 1 request per
/// second", long worded "limit your requests to a single thread and an absolute maximum of 1
/// request per second". So the default is 1: a slow answer delays the next start instead of
/// stacking beside it, and calls start at most once per `min_interval_ms` and once per
/// answer, whichever is slower. A provider that takes several at once says so with
/// `max_in_flight`.
///
/// ```text
/// min_interval_ms 3500, every answer taking 5 s (┤: the answer):
/// t (s)      0             3.5   5       7     8.5   10      12
/// default 1  A───────────────────┤B──────────────────┤C──────…   B starts at A's answer
/// no cap     A───────────────────┤
///                          B───────────────────┤
///                                        C───────────────────┤   two open at once from 3.5 s on
/// ```
pub const SPACED_MAX_IN_FLIGHT: u32 = 1;

pub(super) fn egress(v: &Value, errors: &mut Errors) -> Option<Egress> {
    errors.rule = Some("egress".into());
    let out = section(v, errors);
    errors.rule = None;
    out
}

fn section(v: &Value, errors: &mut Errors) -> Option<Egress> {
    let Some(obj) = v.as_object() else {
        errors.push("", format!("must be an object with {}, got {v}", FIELDS.join(", ")));
        return None;
    };
    for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        errors.push(key, format!("unknown field; egress has {}", FIELDS.join(", ")));
    }
    let prefix = match obj.get("prefix") {
        None => Some(DEFAULT_PREFIX.into()),
        Some(v) => prefix(v, errors),
    };
    let Some(list) = obj.get("providers").and_then(Value::as_array) else {
        errors.push("providers", "missing or not an array; e.g. [{\"id\": \"overpass\", \"mirrors\": [\"https://overpass-api.de/api/\"], \"max_in_flight\": 2}]");
        return None;
    };
    if list.len() > MAX_PROVIDERS {
        errors.push("providers", format!("{} providers; at most {MAX_PROVIDERS} are allowed", list.len()));
        return None;
    }
    let before = errors.list.len();
    let mut providers: Vec<Provider> = Vec::with_capacity(list.len());
    let mut ids = Vec::with_capacity(list.len());
    for (index, value) in list.iter().enumerate() {
        let id = value.get("id").and_then(Value::as_str);
        errors.rule = Some(format!("egress.{}", item_name("providers", index, id)));
        if let Some(p) = provider(value, errors) {
            providers.push(p);
        }
        if let Some(id) = id.filter(|id| is_name(id)) {
            if id.eq_ignore_ascii_case("permit") {
                errors.push("id", "\"permit\" is the name of the permit route; choose another");
            }
            if unique_id(id, ids.iter().copied(), "id", "provider", errors) {
                ids.push(id);
            }
        }
    }
    errors.rule = Some("egress".into());
    share_cache_bytes(&mut providers, errors);
    (errors.list.len() == before).then_some(Egress { prefix: prefix?, providers })
}

/// Settle each cache's `max_bytes` and `max_entry_bytes`: the `max_bytes` given add up to at
/// most [`ISOLATE_CACHE_BYTES`], and a cache without one gets an equal share of the rest;
/// `max_entry_bytes` is [`DEFAULT_MAX_ENTRY_BYTES`] unless given, never more than `max_bytes`.
fn share_cache_bytes(providers: &mut [Provider], errors: &mut Errors) {
    let caches = || providers.iter().filter_map(|p| p.cache.as_ref());
    let given: u64 = caches().map(|c| c.max_bytes).sum();
    let unset = caches().filter(|c| c.max_bytes == 0).count() as u64;
    if given > ISOLATE_CACHE_BYTES || (unset > 0 && given == ISOLATE_CACHE_BYTES) {
        errors.push(
            "providers",
            format!(
                "the caches' max_bytes add up to {given} bytes{}; every cache of an isolate holds at most \
                 {ISOLATE_CACHE_BYTES} bytes together (a Worker has 128 MB): lower them",
                if unset > 0 { ", leaving nothing for the caches that give none" } else { "" }
            ),
        );
        return;
    }
    let share = (ISOLATE_CACHE_BYTES - given).checked_div(unset).unwrap_or(0);
    for p in providers.iter_mut() {
        let Some(cache) = p.cache.as_mut() else { continue };
        if cache.max_bytes == 0 {
            cache.max_bytes = share;
        }
        if cache.max_entry_bytes == 0 {
            cache.max_entry_bytes = DEFAULT_MAX_ENTRY_BYTES.min(cache.max_bytes);
        } else if cache.max_entry_bytes > cache.max_bytes {
            errors.push(
                &format!("providers.{}.cache.max_entry_bytes", p.id),
                format!(
                    "{} bytes is more than the cache's max_bytes ({} bytes{}): an answer that large could never be kept",
                    cache.max_entry_bytes,
                    cache.max_bytes,
                    if unset > 0 { ", its share of the isolate's" } else { "" }
                ),
            );
        }
    }
}

/// A path prefix in normal form that starts and ends with `/` and is not `/` itself.
fn prefix(v: &Value, errors: &mut Errors) -> Option<String> {
    let Some(p) = v.as_str().filter(|p| p.len() > 2 && p.starts_with('/') && p.ends_with('/')) else {
        errors.push("prefix", format!("must be a path that starts and ends with \"/\", like \"/egress/\", got {v}"));
        return None;
    };
    match normalise_path(p) {
        Ok(normal) if normal == p && p.len() <= 256 => Some(p.into()),
        _ => {
            errors.push(
                "prefix",
                format!("\"{}\" is not a plain path in normal form (no '//', '.', '..', escapes or ';')", brief(p)),
            );
            None
        }
    }
}

fn provider(value: &Value, errors: &mut Errors) -> Option<Provider> {
    let Some(obj) = value.as_object() else {
        errors.push("", "must be an object");
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !PROVIDER_FIELDS.contains(&k.as_str())) {
        errors.push(key, format!("unknown field; a provider has {}", PROVIDER_FIELDS.join(", ")));
    }
    let id = name_field(obj.get("id"), "provider", errors);
    let description = description(obj.get("description"), errors);
    let mirrors = mirrors(obj.get("mirrors"), errors);
    let min_interval = match obj.get("min_interval_ms") {
        None => Some(Span::ZERO),
        Some(v) => whole(v, 0u32, 3_600_000, "min_interval_ms", "a whole number of milliseconds", errors)
            .map(|ms| Span::from_millis(ms.into())),
    };
    let max_in_flight =
        max_in_flight(obj.get("max_in_flight"), obj.contains_key("min_interval_ms"), min_interval, errors);
    let weight = obj.get("weight").and_then(|v| weigh(v, errors));
    let weight_per_minute = match obj.get("weight_per_minute") {
        None => None,
        Some(v) => whole(v, 1u32, 10_000_000, "weight_per_minute", "a whole number of weighted calls", errors),
    };
    if weight.is_some() && weight_per_minute.is_none() && !obj.contains_key("weight_per_minute") {
        errors.push("weight_per_minute", "missing; a weighed provider needs the weighted calls allowed per minute");
    }
    let max_wait = seconds(obj.get("max_wait"), "max_wait", Some(DEFAULT_MAX_WAIT_S), MAX_WAIT_S, errors);
    let user_agent = match obj.get("user_agent") {
        None => None,
        Some(Value::String(s))
            if !s.trim().is_empty()
                && s.len() <= MAX_USER_AGENT_BYTES
                && s.bytes().all(|b| (b' '..=b'~').contains(&b)) =>
        {
            Some(s.clone())
        }
        Some(v) => {
            errors.push(
                "user_agent",
                format!("must be printable ASCII of 1 to {MAX_USER_AGENT_BYTES} bytes, e.g. \"myapp/1.0 (ops@example.com)\", got {}", brief(&v.to_string())),
            );
            None
        }
    };
    let cache = obj.get("cache").and_then(|v| cache(v, errors));
    let retry_after_failure =
        seconds(obj.get("retry_after_failure_s"), "retry_after_failure_s", Some(60), 86_400, errors);
    let scope = budget_scope(obj.get("scope"), errors);
    let lease = match obj.get("lease") {
        None => Some(Span::from_secs(60)),
        Some(v) => {
            whole(v, 1, MAX_WAIT_S, "lease", "a whole number of seconds", errors).map(|s| Span::from_secs(s.into()))
        }
    };
    let timeout = match seconds(obj.get("timeout_s"), "timeout_s", Some(DEFAULT_TIMEOUT_S), MAX_WAIT_S, errors) {
        Some(t) if t.is_zero() => {
            errors.push("timeout_s", "must be above 0: how long one attempt at a mirror waits for its answer");
            None
        }
        t => t,
    };
    let public = flag(obj.get("public"), "public", true, errors);
    if errors.list.len() > before {
        return None;
    }
    Some(Provider {
        id: id?,
        description,
        mirrors: mirrors?,
        max_in_flight: max_in_flight?,
        min_interval: min_interval?,
        weight,
        weight_per_minute,
        max_wait: max_wait?,
        user_agent,
        cache,
        retry_after_failure: retry_after_failure?,
        scope: scope?,
        lease: lease?,
        timeout: timeout?,
        public,
    })
}

/// How a provider's calls are weighed: `"open-meteo"` (conservatively) or
/// `"open-meteo-server"` (by the server's formula).
fn weigh(v: &Value, errors: &mut Errors) -> Option<Weigh> {
    let how = Weigh::ALL.into_iter().find(|how| v.as_str() == Some(how.name()));
    if how.is_none() {
        errors.push(
            "weight",
            format!(
                "must be \"{}\" (the query's weight as Open-Meteo counts it, conservatively: never below what \
                 its server charges) or \"{}\" (by the server's own formula), got {}",
                Weigh::OpenMeteo.name(),
                Weigh::OpenMeteoServer.name(),
                brief(&v.to_string())
            ),
        );
    }
    how
}

/// A provider's `max_in_flight`: as given, or [`SPACED_MAX_IN_FLIGHT`] for a provider
/// spaced by `min_interval_ms` alone. `interval_given`: `min_interval_ms` is in the file (when
/// it is wrong, its own problem is reported and this one is not); `min_interval`: as read.
fn max_in_flight(
    v: Option<&Value>,
    interval_given: bool,
    min_interval: Option<Span>,
    errors: &mut Errors,
) -> Option<u32> {
    match (v, min_interval) {
        (Some(v), _) => whole(v, 1u32, 10_000, "max_in_flight", "a whole number of calls per mirror", errors),
        (None, Some(interval)) if !interval.is_zero() => Some(SPACED_MAX_IN_FLIGHT),
        (None, None) if interval_given => None,
        (None, _) => {
            errors.push(
                "max_in_flight",
                "missing; a provider needs max_in_flight or min_interval_ms: without either nothing bounds its \
                 calls (max_in_flight: how many may be in flight at once at each mirror, 1 or more; \
                 min_interval_ms: the least time between two starts, above 0)",
            );
            None
        }
    }
}

fn mirrors(v: Option<&Value>, errors: &mut Errors) -> Option<Vec<Mirror>> {
    let list = match v {
        Some(Value::String(one)) => alloc::vec![Value::String(one.clone())],
        Some(Value::Array(list)) if (1..=MAX_MIRRORS).contains(&list.len()) => list.clone(),
        other => {
            errors.push(
                "mirrors",
                format!(
                    "must be 1 to {MAX_MIRRORS} base URLs, tried in order, e.g. [\"https://overpass-api.de/api/\"], got {}",
                    other.map_or_else(|| String::from("nothing"), |v| brief(&v.to_string()))
                ),
            );
            return None;
        }
    };
    let mut out: Vec<Mirror> = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let field = format!("mirrors[{i}]");
        match v.as_str().map(Mirror::parse) {
            Some(Ok(m)) if out.contains(&m) => errors.push(&field, format!("{} is listed twice", m.url())),
            Some(Ok(m)) => out.push(m),
            Some(Err(why)) => errors.push(&field, why),
            None => errors.push(&field, format!("must be a URL string, got {v}")),
        }
    }
    (out.len() == list.len()).then_some(out)
}

fn cache(v: &Value, errors: &mut Errors) -> Option<CacheRule> {
    let Some(obj) = v.as_object() else {
        errors.push("cache", format!("must be an object with {}, got {v}", CACHE_FIELDS.join(", ")));
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !CACHE_FIELDS.contains(&k.as_str())) {
        errors.push(&format!("cache.{key}"), format!("unknown field; a cache has {}", CACHE_FIELDS.join(", ")));
    }
    let ttl = match obj.get("ttl_s") {
        None => {
            errors.push("cache.ttl_s", "missing; how many seconds an answer stays fresh");
            None
        }
        Some(v) => whole(v, 1u32, 31 * 86_400, "cache.ttl_s", "a whole number of seconds", errors)
            .map(|s| Span::from_secs(s.into())),
    };
    let stale_if_error = flag(obj.get("stale_if_error"), "cache.stale_if_error", false, errors);
    let refresh_behind = match obj.get("refresh") {
        None => false,
        Some(Value::String(s)) if s == "ahead" => false,
        Some(Value::String(s)) if s == "behind" => true,
        Some(v) => {
            errors.push(
                "cache.refresh",
                format!("must be \"ahead\" (the default: an expired answer is fetched before answering) or \"behind\" (served while it is refreshed), got {v}"),
            );
            false
        }
    };
    let retry_after_failure =
        seconds(obj.get("retry_after_failure_s"), "cache.retry_after_failure_s", Some(60), 86_400, errors);
    let max_entries = match obj.get("max_entries") {
        None => Some(1_000),
        Some(v) => whole(v, 1u32, 100_000, "cache.max_entries", "a whole number of answers", errors),
    };
    // 0: not given, settled by `share_cache_bytes` once every provider is read.
    let max_entry_bytes = match obj.get("max_entry_bytes") {
        None => Some(0),
        Some(v) => whole(v, 1u64, ISOLATE_CACHE_BYTES, "cache.max_entry_bytes", "a whole number of bytes", errors),
    };
    let max_bytes = match obj.get("max_bytes") {
        None => Some(0),
        Some(v) => whole(v, 1u64, ISOLATE_CACHE_BYTES, "cache.max_bytes", "a whole number of bytes", errors),
    };
    let post = flag(obj.get("post"), "cache.post", false, errors);
    if errors.list.len() > before {
        return None;
    }
    Some(CacheRule {
        ttl: ttl?,
        stale_if_error,
        refresh_behind,
        retry_after_failure: retry_after_failure?,
        max_entries: max_entries?,
        max_entry_bytes: max_entry_bytes?,
        max_bytes: max_bytes?,
        post,
    })
}
