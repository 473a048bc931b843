//! Validation of a rules file: JSON in, a [`RuleSet`] or every problem out.

mod egress;

pub use egress::{DEFAULT_PREFIX as DEFAULT_EGRESS_PREFIX, MAX_PROVIDERS};

use super::{
    normalise_path, Algorithm, Analytics, BudgetScope, Characteristic, DecisionLog, Enforce, LoggedDecisions, Match,
    PathMatch, PreRead, Response, Rule, RuleSet, Source, Store, StoreFailure, Upstream,
};
use crate::core::limit::Gcra;
use crate::core::time::Span;
use crate::edge::headers::is_token;
use crate::edge::identity::{Cidr, TrustedProxies};
use crate::edge::json::{brief, strict_json, RuleError};
use crate::edge::tenants::{Identify, TenantLimit, TenantScope, Tenants};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use serde_json::{Map, Value};

/// The longest period or timeout accepted: one year.
const MAX_SECONDS: u64 = 366 * 86_400;
/// The most rules a file may hold. Every rule that matches a request adds an entry to its
/// `RateLimit-Policy` and `RateLimit` headers, and HTTP clients refuse oversized headers
/// (undici's limit is 16 KiB for all of them).
pub const MAX_RULES: usize = 64;
/// The largest threshold of an exact sliding log (each counted request is remembered).
const MAX_LOG_REQUESTS: u32 = 10_000;
const RULE_FIELDS: &[&str] = &[
    "id",
    "description",
    "match",
    "characteristics",
    "algorithm",
    "period",
    "requests_per_period",
    "mitigation_timeout",
    "rate",
    "burst",
    "response",
    "on_store_failure",
    "store",
    "binding",
    "enforce",
    "public",
];
const UPSTREAM_FIELDS: &[&str] =
    &["id", "description", "match", "max_in_flight", "max_wait", "scope", "lease", "public"];
/// How long a request waits for an upstream's slot, or a call for its provider's start,
/// unless the file says otherwise: traffic.md's `UPSTREAM_BUDGET_WAIT_S` (a saturated budget
/// queues this long, then sheds).
pub const DEFAULT_MAX_WAIT_S: u32 = 30;
/// The longest an upstream's waiting request may wait for a slot.
const MAX_WAIT_SECONDS: u32 = 300;
/// The most upstream budgets a file may hold.
pub const MAX_UPSTREAMS: usize = 32;
const ROOT_FIELDS: &[&str] =
    &["rules", "upstreams", "capabilities", "pre_read", "tenants", "egress", "trusted_proxies", "log", "analytics"];

/// Body bytes per second per source unless the file says otherwise (`pre_read.
/// source_bytes_per_second`; `null` turns the ceiling off): 100 MB/s.
pub const DEFAULT_SOURCE_BYTES_PER_SECOND: u64 = 100_000_000;
/// The highest `pre_read.source_bytes_per_second`: 2^40 (about 1.1 TB/s).
const MAX_SOURCE_BYTES_PER_SECOND: u64 = 1 << 40;
/// The most ranges `trusted_proxies` may hold.
pub const MAX_TRUSTED_PROXIES: usize = 256;

/// The most named sources `pre_read` may hold.
pub const MAX_SOURCES: usize = 64;
/// The longest refusal body (`response.content`), in bytes: Cloudflare's limit for the
/// custom response of a rate limiting rule is 30 KB; this stays within it.
pub const MAX_RESPONSE_BYTES: usize = 30_000;
/// The longest `description` of a rule or upstream, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1_024;
/// The longest path in a path test or `capabilities.path`, in bytes, as written.
pub const MAX_PATH_BYTES: usize = 1_024;
/// The longest header name (`http.request.headers["name"]`, `tenants.key_header`,
/// `tenants.tenant_header`) and `response.content_type`, in bytes.
pub const MAX_HEADER_BYTES: usize = 256;
/// Where the capabilities answer is served unless the file says otherwise.
pub const DEFAULT_CAPABILITIES_PATH: &str = "/api/capabilities";
const ALGORITHMS: &str = "\"sliding_log\" (the default), \"fixed_window\", \"sliding_window\" or \"token_bucket\"";
const CHARACTERISTICS: &str = "\"ip.src\", \"cf.colo.id\", \"http.host\", \"http.request.method\", \
\"http.request.uri.path\" or http.request.headers[\"<name>\"]";
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"];

struct Errors {
    rule: Option<String>,
    list: Vec<RuleError>,
}

impl Errors {
    fn push(&mut self, field: &str, message: impl Into<String>) {
        self.list.push(RuleError { rule: self.rule.clone(), field: field.into(), message: message.into() });
    }
}

pub(super) fn rule_set(text: &str) -> Result<RuleSet, Vec<RuleError>> {
    let mut errors = Errors { rule: None, list: Vec::new() };
    let root = match strict_json(text) {
        Ok(v) => v,
        Err(error) => {
            errors.list.push(error);
            return Err(errors.list);
        }
    };
    let Some(root) = root.as_object() else {
        errors.push("", "must be an object with a \"rules\" array");
        return Err(errors.list);
    };
    for key in root.keys().filter(|k| *k != "$schema" && !ROOT_FIELDS.contains(&k.as_str())) {
        errors.push(key, format!("unknown field; the file has {}", ROOT_FIELDS.join(", ")));
    }
    // `"$schema"` names the JSON Schema an editor checks the file against (the package's
    // `schema/rules.json`): read by editors, never by the edge.
    if root.get("$schema").is_some_and(|v| !v.is_string()) {
        errors.push("$schema", "must be a string: the path or URL of the file's JSON Schema");
    }
    let Some(list) = root.get("rules") else {
        errors.push("rules", "missing; it must be an array of rules");
        return Err(errors.list);
    };
    let Some(list) = list.as_array() else {
        errors.push("rules", "must be an array of rules");
        return Err(errors.list);
    };
    if list.len() > MAX_RULES {
        errors.push(
            "rules",
            format!(
                "{} rules; at most {MAX_RULES} are allowed (each matching rule adds to the RateLimit headers)",
                list.len()
            ),
        );
        return Err(errors.list);
    }
    let capabilities = capabilities(root.get("capabilities"), &mut errors);
    let pre_read = pre_read(root.get("pre_read"), &mut errors);
    let trusted_proxies = trusted_proxies(root.get("trusted_proxies"), &mut errors);
    let log = decision_log(root.get("log"), &mut errors);
    let analytics = analytics(root.get("analytics"), &mut errors);
    let tenants = root.get("tenants").and_then(|t| tenants(t, &mut errors));
    let upstreams = upstreams(root.get("upstreams"), &mut errors);
    let egress = root.get("egress").and_then(|e| egress::egress(e, &mut errors));
    let mut rules = Vec::with_capacity(list.len());
    // The ids seen so far, valid rule or not: a repeated id is reported beside any other problem.
    let mut ids = Vec::with_capacity(list.len());
    for (index, value) in list.iter().enumerate() {
        let id = value.get("id").and_then(Value::as_str);
        errors.rule = Some(item_name("rules", index, id));
        if let Some(rule) = rule(value, &mut errors) {
            rules.push(rule);
        }
        if let Some(id) = id.filter(|id| is_name(id)) {
            if unique_id(id, ids.iter().copied(), "id", "rule", &mut errors) {
                ids.push(id);
            }
        }
    }
    same_limit_per_binding(&rules, &mut errors);
    share_isolate_memory(&mut rules);
    if errors.list.is_empty() {
        let headers_read = super::headers_read(&rules, tenants.as_ref());
        let open_by_choice = list
            .iter()
            .filter(|v| v.get("on_store_failure").and_then(Value::as_str) == Some("open"))
            .filter_map(|v| v.get("id").and_then(Value::as_str).map(String::from))
            .collect();
        Ok(RuleSet {
            rules,
            upstreams,
            capabilities,
            pre_read,
            tenants,
            headers_read,
            egress,
            trusted_proxies,
            log,
            analytics,
            open_by_choice,
        })
    } else {
        Err(errors.list)
    }
}

/// `"capabilities": {"path": "/p"}` moves the answer, `false` turns it off; absent, it is
/// served at [`DEFAULT_CAPABILITIES_PATH`].
fn capabilities(v: Option<&Value>, errors: &mut Errors) -> Option<String> {
    const HOW: &str = "must be {\"path\": \"/path\"} or false";
    match v {
        None => Some(DEFAULT_CAPABILITIES_PATH.into()),
        Some(Value::Bool(false)) => None,
        Some(Value::Object(obj)) if obj.len() == 1 && obj.contains_key("path") => {
            capabilities_path(&obj["path"], errors)
        }
        Some(other) => {
            errors.push("capabilities", format!("{HOW}, got {other}"));
            None
        }
    }
}

/// `capabilities.path`: a path already in normal form. Requests are compared by their
/// normalised path, so a path that normalising would change (`/api//caps`, `/%61pi/caps`,
/// one with `;`, `?` or `#`) could never be asked for; the problem names the form to write.
fn capabilities_path(v: &Value, errors: &mut Errors) -> Option<String> {
    const FIELD: &str = "capabilities.path";
    let Some(path) = v.as_str().filter(|p| p.starts_with('/')) else {
        errors.push(FIELD, format!("must be a path starting with \"/\", got {v}"));
        return None;
    };
    if !within(path, MAX_PATH_BYTES, FIELD, errors) {
        return None;
    }
    // A query or a fragment is not part of the path a request is matched on.
    let (bare, extra) = match path.find(['?', '#']) {
        Some(at) => (&path[..at], " without a query or fragment"),
        None => (path, ""),
    };
    match normalise_path(bare) {
        Ok(normal) if extra.is_empty() && normal == path => Some(normal.into_owned()),
        Ok(normal) => {
            errors.push(
                FIELD,
                format!(
                    "\"{path}\" is not a normalised path{extra}, so no request would ever reach it \
                     (requests are matched on their normalised path); write \"{normal}\""
                ),
            );
            None
        }
        Err(e) => {
            errors.push(FIELD, format!("cannot be normalised: {e}"));
            None
        }
    }
}

/// `"trusted_proxies": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]`: the proxies whose
/// `X-Forwarded-For` hops are believed ([`crate::edge::identity::client_identity_behind`]); each
/// problem names its item, `trusted_proxies[2]`.
fn trusted_proxies(v: Option<&Value>, errors: &mut Errors) -> TrustedProxies {
    const FIELD: &str = "trusted_proxies";
    let list = match v {
        None => return TrustedProxies::default(),
        Some(Value::Array(list)) if list.len() <= MAX_TRUSTED_PROXIES => list,
        Some(Value::Array(list)) => {
            errors.push(FIELD, format!("{} ranges; at most {MAX_TRUSTED_PROXIES} are allowed", list.len()));
            return TrustedProxies::default();
        }
        Some(other) => {
            errors.push(
                FIELD,
                format!(
                    "must be an array of addresses or CIDR ranges, e.g. [\"10.0.0.0/8\"], got {}",
                    brief(&other.to_string())
                ),
            );
            return TrustedProxies::default();
        }
    };
    let mut ranges = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let field = format!("{FIELD}[{i}]");
        let Some(text) = item.as_str() else {
            errors.push(&field, format!("must be a string such as \"10.0.0.0/8\", got {}", brief(&item.to_string())));
            continue;
        };
        match Cidr::parse(text) {
            Ok(range) => ranges.push(range),
            Err(e) => errors.push(&field, format!("\"{}\" {e}", brief(text))),
        }
    }
    TrustedProxies::new(ranges)
}

/// `"log": {"decisions": "all" | "refusals" | "none", "sample": share}`, both optional:
/// which decisions get a log line (default `"all"`) and the share of them written, at random
/// (default 1: every one). A `sample` beside `"none"` is refused: it would sample nothing.
fn decision_log(v: Option<&Value>, errors: &mut Errors) -> DecisionLog {
    const FIELDS: &[&str] = &["decisions", "sample"];
    const DECISIONS: &str = "\"all\" (the default), \"refusals\" or \"none\"";
    let mut log = DecisionLog::default();
    let Some(v) = v else { return log };
    let Some(obj) = v.as_object() else {
        errors.push("log", format!("must be an object with {}, got {}", FIELDS.join(", "), brief(&v.to_string())));
        return log;
    };
    for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        errors.push(&format!("log.{key}"), format!("unknown field; log has {}", FIELDS.join(", ")));
    }
    if let Some(d) = obj.get("decisions") {
        match d.as_str().and_then(LoggedDecisions::from_name) {
            Some(decisions) => log.decisions = decisions,
            None => errors.push("log.decisions", format!("must be {DECISIONS}, got {}", brief(&d.to_string()))),
        }
    }
    if let Some(s) = obj.get("sample") {
        match s.as_f64().filter(|share| *share > 0.0 && *share <= 1.0) {
            Some(_) if log.decisions == LoggedDecisions::None => errors
                .push("log.sample", "is not used when log.decisions is \"none\" (no decision is logged); leave it out"),
            Some(share) => log.sample = share,
            None => errors.push(
                "log.sample",
                format!(
                    "must be a number greater than 0 and at most 1, the share of decisions logged \
                     (e.g. 0.01 for one in a hundred), got {}",
                    brief(&s.to_string())
                ),
            ),
        }
    }
    log
}

/// `"analytics": {"identities": "plain" | "hashed", "dataset": binding}`, or `false` to count
/// nothing: whether the edge counts its decisions for the stats and the dashboard (it does by
/// default), whether the identities it refused are kept as counted (the default) or as keyed
/// hashes, and the Workers Analytics Engine binding that gets a data point per decision.
fn analytics(v: Option<&Value>, errors: &mut Errors) -> Analytics {
    const SHAPE: &str =
        "{\"identities\": \"plain\" | \"hashed\", \"dataset\": binding}, or false to count no decisions";
    let mut analytics = Analytics::default();
    match v {
        None => {}
        Some(Value::Bool(false)) => analytics.enabled = false,
        Some(Value::Object(obj)) => {
            for key in obj.keys().filter(|k| !["identities", "dataset"].contains(&k.as_str())) {
                errors.push(&format!("analytics.{key}"), "unknown field; analytics has identities, dataset");
            }
            match obj.get("dataset") {
                None => {}
                Some(Value::String(name)) if is_binding_name(name) && name != "RATE_LIMITER" => {
                    analytics.dataset = Some(name.clone());
                }
                Some(other) => errors.push(
                    "analytics.dataset",
                    format!(
                        "must name a Workers Analytics Engine binding (1–64 letters, digits or '_', not starting \
                         with a digit, not RATE_LIMITER), got {}",
                        brief(&other.to_string())
                    ),
                ),
            }
            match obj.get("identities").map(|i| i.as_str()) {
                None | Some(Some("plain")) => {}
                Some(Some("hashed")) => analytics.hashed = true,
                Some(_) => errors.push(
                    "analytics.identities",
                    format!(
                        "must be \"plain\" (the default: as counted) or \"hashed\" (keyed hashes), got {}",
                        brief(&obj["identities"].to_string())
                    ),
                ),
            }
        }
        Some(other) => errors.push("analytics", format!("must be {SHAPE}, got {}", brief(&other.to_string()))),
    }
    analytics
}

/// `"pre_read": {"per_ip": {"rate", "burst"}, "node": {"rate", "burst"},
/// "source_bytes_per_second": n, "sources": [{"id", "match"}]}`, every part optional.
/// `source_bytes_per_second` is [`DEFAULT_SOURCE_BYTES_PER_SECOND`] when the file does not
/// give it (with or without a `pre_read`), and `null` turns it off.
fn pre_read(v: Option<&Value>, errors: &mut Errors) -> PreRead {
    const FIELDS: &[&str] = &["per_ip", "node", "source_bytes_per_second", "sources"];
    let Some(v) = v else { return PreRead::default() };
    let Some(obj) = v.as_object() else {
        errors.push("pre_read", format!("must be an object with {}, got {v}", FIELDS.join(", ")));
        return PreRead::default();
    };
    for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        errors.push(&format!("pre_read.{key}"), format!("unknown field; pre_read has {}", FIELDS.join(", ")));
    }
    let bucket = |name: &str, errors: &mut Errors| -> Option<Gcra> {
        let v = obj.get(name)?;
        let field = format!("pre_read.{name}");
        match v.as_object() {
            Some(b) if b.len() == 2 && b.contains_key("rate") && b.contains_key("burst") => {
                rate_and_burst(&b["rate"], &b["burst"], &format!("{field}."), errors)
                    .map(|(interval, burst)| Gcra::with_interval(burst, interval))
            }
            _ => {
                errors.push(&field, format!("must be {{\"rate\": per second, \"burst\": n}}, got {v}"));
                None
            }
        }
    };
    let per_ip = bucket("per_ip", errors);
    let node = bucket("node", errors);
    let source_bytes_per_second = match obj.get("source_bytes_per_second") {
        None => Some(DEFAULT_SOURCE_BYTES_PER_SECOND),
        Some(Value::Null) => None,
        Some(v) => {
            let rate = v.as_u64().filter(|n| (1..=MAX_SOURCE_BYTES_PER_SECOND).contains(n));
            if rate.is_none() {
                errors.push(
                    "pre_read.source_bytes_per_second",
                    format!(
                        "must be a whole number of bytes per second from 1 to {MAX_SOURCE_BYTES_PER_SECOND}, or null \
                         to count no body bytes, got {v}"
                    ),
                );
            }
            rate
        }
    };
    let mut sources: Vec<Source> = Vec::new();
    match obj.get("sources") {
        None => {}
        Some(_) if obj.get("source_bytes_per_second").is_some_and(Value::is_null) => {
            errors.push("pre_read.sources", "names sources for source_bytes_per_second, which is null (not counted)");
        }
        Some(_) if source_bytes_per_second.is_none() => {}
        Some(Value::Array(list)) if list.len() <= MAX_SOURCES => {
            for (i, item) in list.iter().enumerate() {
                let field = format!("pre_read.sources[{i}]");
                let Some(item) = item.as_object().filter(|o| o.keys().all(|k| k == "id" || k == "match")) else {
                    errors.push(&field, format!("must be {{\"id\": name, \"match\": {{...}}}}, got {item}"));
                    continue;
                };
                let id = match item.get("id").and_then(Value::as_str) {
                    Some(id) if is_name(id) => id.to_string(),
                    _ => {
                        errors.push(
                            &format!("{field}.id"),
                            "must be a unique name of 1–64 letters, digits, '_', '-' or '.'",
                        );
                        continue;
                    }
                };
                if !unique_id(&id, sources.iter().map(|s| s.id.as_str()), &format!("{field}.id"), "source", errors) {
                    continue;
                }
                match item.get("match") {
                    Some(m) => {
                        errors.rule = Some(field);
                        if let Some(matcher) = matcher(m, errors) {
                            sources.push(Source { id, matcher });
                        }
                        errors.rule = None;
                    }
                    None => errors.push(&format!("{field}.match"), "missing; which requests belong to the source"),
                }
            }
        }
        Some(other) => errors.push(
            "pre_read.sources",
            format!("must be an array of at most {MAX_SOURCES} {{\"id\", \"match\"}} objects, got {other}"),
        ),
    }
    PreRead { per_ip, node, source_bytes_per_second, sources }
}

/// The `tenants` section (see [`Tenants`]).
fn tenants(v: &Value, errors: &mut Errors) -> Option<Tenants> {
    const FIELDS: &[&str] =
        &["match", "key_header", "tenant_header", "keys", "limits", "default", "max_body_bytes", "scope"];
    let Some(obj) = v.as_object() else {
        errors.push("tenants", format!("must be an object with {}, got {v}", FIELDS.join(", ")));
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        errors.push(&format!("tenants.{key}"), format!("unknown field; tenants has {}", FIELDS.join(", ")));
    }
    errors.rule = Some("tenants".into());
    let matcher = match obj.get("match") {
        Some(m) => matcher(m, errors),
        None => {
            errors.push(
                "match",
                "missing; which requests carry a tenant, e.g. {\"path\": {\"starts_with\": \"/hooks/\"}}",
            );
            None
        }
    };
    errors.rule = None;
    let header = |field: &str, errors: &mut Errors| match obj.get(field) {
        None => None,
        Some(Value::String(h)) if is_token(h) => {
            within(h, MAX_HEADER_BYTES, &format!("tenants.{field}"), errors).then(|| h.to_ascii_lowercase())
        }
        Some(other) => {
            errors.push(&format!("tenants.{field}"), format!("must be a header name, got {other}"));
            None
        }
    };
    let identify = match (header("key_header", errors), header("tenant_header", errors)) {
        (Some(h), None) => Some(Identify::Key(h)),
        (None, Some(h)) => Some(Identify::Named(h)),
        // One of them is given but was refused, naming its field.
        _ if obj.contains_key("key_header") != obj.contains_key("tenant_header") => None,
        _ => {
            errors.push(
                "tenants",
                "needs exactly one of key_header (API keys, verified) and tenant_header (named by the sender)",
            );
            None
        }
    };
    let max_body_bytes = obj
        .get("max_body_bytes")
        .and_then(|v| whole(v, 1, 1u64 << 40, "tenants.max_body_bytes", "a whole number of bytes", errors));
    let limit = |field: &str, v: &Value, errors: &mut Errors| match TenantLimit::from_json(v, max_body_bytes) {
        Ok(limit) => Some(limit),
        Err(e) => {
            let at = if e.field.is_empty() { field.to_string() } else { format!("{field}.{}", e.field) };
            errors.push(&at, e.message);
            None
        }
    };
    let default = obj.get("default").and_then(|v| limit("tenants.default", v, errors));
    let mut limits = alloc::collections::BTreeMap::new();
    match obj.get("limits") {
        None => {}
        Some(Value::Object(list)) => {
            for (tenant, v) in list {
                if !crate::edge::tenants::is_tenant_name(tenant) {
                    errors.push(
                        "tenants.limits",
                        format!(
                            "a tenant name is 1 to {} bytes, got {} ({} bytes)",
                            crate::edge::tenants::MAX_TENANT_BYTES,
                            brief(&format!("{tenant:?}")),
                            tenant.len()
                        ),
                    );
                    continue;
                }
                if let Some(l) = limit(&format!("tenants.limits.{tenant}"), v, errors) {
                    limits.insert(tenant.clone(), l);
                }
            }
        }
        Some(other) => errors.push("tenants.limits", format!("must be an object of tenant → limit, got {other}")),
    }
    let keys = tenant_keys(obj.get("keys"), errors);
    if matches!(identify, Some(Identify::Named(_))) && default.is_none() && errors.list.len() == before {
        errors.push(
            "tenants.default",
            "missing: with tenant_header the sender names its tenant, so every invented name would be unlimited",
        );
    }
    let scope = tenant_scope(obj.get("scope"), errors);
    if errors.list.len() > before {
        return None;
    }
    Some(Tenants { matcher: matcher?, identify: identify?, keys, limits, default, max_body_bytes, scope: scope? })
}

/// `tenants.scope`: where a tenant's buckets are counted.
fn tenant_scope(v: Option<&Value>, errors: &mut Errors) -> Option<TenantScope> {
    match v.map(|v| (v, v.as_str())) {
        None | Some((_, Some("colo"))) => Some(TenantScope::Colo),
        Some((_, Some("fleet"))) => Some(TenantScope::Fleet),
        Some((_, Some("isolate"))) => Some(TenantScope::Isolate),
        Some((v, _)) => {
            errors.push(
                "tenants.scope",
                format!("must be \"colo\" (the default), \"fleet\" or \"isolate\", got {}", brief(&v.to_string())),
            );
            None
        }
    }
}

/// `tenants.keys`: the SHA-256 (hex, lowercased) of each API key → its tenant
/// ([`Tenants::keys_from_object`]).
fn tenant_keys(v: Option<&Value>, errors: &mut Errors) -> alloc::collections::BTreeMap<String, String> {
    match v.map(|v| (v, v.as_object().map(Tenants::keys_from_object))) {
        None => alloc::collections::BTreeMap::new(),
        Some((_, Some(Ok(keys)))) => keys,
        Some((_, Some(Err(problems)))) => {
            for problem in problems {
                errors.push("tenants.keys", problem);
            }
            alloc::collections::BTreeMap::new()
        }
        Some((other, None)) => {
            errors.push("tenants.keys", format!("must be an object of SHA-256 (hex) → tenant, got {other}"));
            alloc::collections::BTreeMap::new()
        }
    }
}

fn upstreams(v: Option<&Value>, errors: &mut Errors) -> Vec<Upstream> {
    let Some(v) = v else { return Vec::new() };
    let Some(list) = v.as_array() else {
        errors.push("upstreams", format!("must be an array of upstream budgets, got {v}"));
        return Vec::new();
    };
    if list.len() > MAX_UPSTREAMS {
        errors.push("upstreams", format!("{} upstreams; at most {MAX_UPSTREAMS} are allowed", list.len()));
        return Vec::new();
    }
    let mut out: Vec<Upstream> = Vec::with_capacity(list.len());
    let mut ids = Vec::with_capacity(list.len());
    for (index, value) in list.iter().enumerate() {
        let id = value.get("id").and_then(Value::as_str);
        errors.rule = Some(item_name("upstreams", index, id));
        if let Some(upstream) = upstream(value, errors) {
            out.push(upstream);
        }
        if let Some(id) = id.filter(|id| is_name(id)) {
            if unique_id(id, ids.iter().copied(), "id", "upstream", errors) {
                ids.push(id);
            }
        }
    }
    errors.rule = None;
    out
}

fn upstream(value: &Value, errors: &mut Errors) -> Option<Upstream> {
    let Some(obj) = value.as_object() else {
        errors.push("", "must be an object");
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !UPSTREAM_FIELDS.contains(&k.as_str())) {
        errors.push(key, format!("unknown field; an upstream has {}", UPSTREAM_FIELDS.join(", ")));
    }
    let id = name_field(obj.get("id"), "upstream", errors);
    let description = description(obj.get("description"), errors);
    let matcher = match obj.get("match") {
        None => {
            errors.push("match", "missing; e.g. {\"path\": {\"starts_with\": \"/api/forecast\"}}");
            None
        }
        Some(m) => matcher(m, errors),
    };
    let max_in_flight = match obj.get("max_in_flight") {
        None => {
            errors.push("max_in_flight", "missing; how many requests may be at the upstream at once (1 or more)");
            None
        }
        Some(v) => whole(v, 1u32, 100_000, "max_in_flight", "a whole number of requests", errors),
    };
    let max_wait = seconds(obj.get("max_wait"), "max_wait", Some(DEFAULT_MAX_WAIT_S), MAX_WAIT_SECONDS, errors);
    let scope = budget_scope(obj.get("scope"), errors);
    let lease = match obj.get("lease") {
        None => Some(Span::from_secs(30)),
        Some(_) if scope == Some(BudgetScope::Isolate) => {
            errors.push(
                "lease",
                "lease is only used with scope \"fleet\" (an isolate's own count holds no lease); \
                 remove it or set \"scope\": \"fleet\"",
            );
            None
        }
        Some(v) => whole(v, 1, MAX_WAIT_SECONDS, "lease", "a whole number of seconds", errors)
            .map(|s| Span::from_secs(s.into())),
    };
    let public = flag(obj.get("public"), "public", true, errors);
    if errors.list.len() > before {
        return None;
    }
    Some(Upstream {
        id: id?,
        description,
        matcher: matcher?,
        max_in_flight: max_in_flight?,
        max_wait: max_wait?,
        scope: scope?,
        lease: lease?,
        public,
    })
}

/// A number of seconds in `0..=max` (fractions allowed), `default` when absent.
fn seconds(v: Option<&Value>, field: &str, default: Option<u32>, max: u32, errors: &mut Errors) -> Option<Span> {
    match v.map(|v| (v, v.as_f64())) {
        None => default.map(|s| Span::from_secs(s.into())),
        Some((_, Some(s))) if s.is_finite() && (0.0..=f64::from(max)).contains(&s) => {
            Some(Span::from_nanos((s * 1e9) as u64))
        }
        Some((v, _)) => {
            errors.push(field, format!("must be a number of seconds from 0 to {max}, got {v}"));
            None
        }
    }
}

/// Where a budget is counted: `"isolate"` (the default) or `"fleet"`.
fn budget_scope(v: Option<&Value>, errors: &mut Errors) -> Option<BudgetScope> {
    match v.map(|v| (v, v.as_str())) {
        None | Some((_, Some("isolate"))) => Some(BudgetScope::Isolate),
        Some((_, Some("fleet"))) => Some(BudgetScope::Fleet),
        Some((v, _)) => {
            errors.push("scope", format!("must be \"isolate\" (the default) or \"fleet\", got {v}"));
            None
        }
    }
}

fn name_field(v: Option<&Value>, what: &str, errors: &mut Errors) -> Option<String> {
    match v {
        None => {
            errors.push("id", format!("missing; give the {what} a name of letters, digits, '_', '-' or '.'"));
            None
        }
        Some(Value::String(id)) if is_name(id) => Some(id.clone()),
        Some(other) => {
            errors.push("id", format!("must be 1–64 letters, digits, '_', '-' or '.', got {other}"));
            None
        }
    }
}

fn description(v: Option<&Value>, errors: &mut Errors) -> Option<String> {
    match v {
        None => None,
        Some(Value::String(s)) => within(s, MAX_DESCRIPTION_BYTES, "description", errors).then(|| s.clone()),
        Some(other) => {
            errors.push("description", format!("must be a string, got {other}"));
            None
        }
    }
}

fn flag(v: Option<&Value>, field: &str, default: bool, errors: &mut Errors) -> bool {
    match v {
        None => default,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errors.push(field, format!("must be true or false, got {other}"));
            default
        }
    }
}

fn rule(value: &Value, errors: &mut Errors) -> Option<Rule> {
    let Some(obj) = value.as_object() else {
        errors.push("", "must be an object");
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !RULE_FIELDS.contains(&k.as_str())) {
        errors.push(key, format!("unknown field; a rule has {}", RULE_FIELDS.join(", ")));
    }
    let id = name_field(obj.get("id"), "rule", errors);
    let description = description(obj.get("description"), errors);
    let matcher = match obj.get("match") {
        None => {
            errors.push("match", "missing; e.g. {\"path\": {\"starts_with\": \"/api/\"}} ({} matches every request)");
            None
        }
        Some(m) => matcher(m, errors),
    };
    let characteristics = match obj.get("characteristics") {
        None => {
            errors.push("characteristics", format!("missing; a non-empty array of {CHARACTERISTICS}"));
            None
        }
        Some(c) => characteristics(c, errors),
    };
    let store = store(obj, errors);
    let algorithm = match &store {
        Some(Store::Cloudflare { .. }) => binding_algorithm(obj, errors),
        _ => algorithm(obj, "sliding_log", errors),
    };
    let mitigation_timeout = match obj.get("mitigation_timeout") {
        None => Some(Span::ZERO),
        Some(v) => {
            whole(v, 0, MAX_SECONDS, "mitigation_timeout", "a whole number of seconds", errors).map(Span::from_secs)
        }
    };
    let response = match obj.get("response") {
        None => Some(Response { status: 429, body: None }),
        Some(r) => response(r, errors),
    };
    let on_store_failure = match obj.get("on_store_failure").map(|v| (v, v.as_str())) {
        None => characteristics.as_ref().map(|c| StoreFailure::default_for(c)),
        Some((_, Some("open"))) => Some(StoreFailure::Open),
        Some((_, Some("closed"))) => Some(StoreFailure::Closed),
        Some((v, _)) => {
            errors.push(
                "on_store_failure",
                format!("must be \"open\" or \"closed\" (default: open when counted by ip.src), got {v}"),
            );
            None
        }
    };
    let enforce = match obj.get("enforce").map(Enforce::from_json) {
        None => Some(Enforce::All),
        Some(Ok(enforce)) => Some(enforce),
        Some(Err(why)) => {
            errors.push("enforce", why);
            None
        }
    };
    let public = flag(obj.get("public"), "public", true, errors);
    if errors.list.len() > before {
        return None;
    }
    Some(Rule {
        id: id?,
        description,
        matcher: matcher?,
        characteristics: characteristics?,
        algorithm: algorithm?,
        mitigation_timeout: mitigation_timeout?,
        response: response?,
        on_store_failure: on_store_failure?,
        store: store?,
        enforce: enforce?,
        public,
    })
}

/// A Workers Rate Limiting binding has one limit and one period (wrangler.toml's `simple`),
/// so every rule counted on it must say the same ones (their keys differ: each starts with
/// its rule's id).
fn same_limit_per_binding(rules: &[Rule], errors: &mut Errors) {
    for (i, rule) in rules.iter().enumerate() {
        let Store::Cloudflare { binding } = &rule.store else { continue };
        let first = rules[..i].iter().find(|r| matches!(&r.store, Store::Cloudflare { binding: b } if b == binding));
        let Some(first) = first.filter(|f| f.algorithm != rule.algorithm) else { continue };
        let quota = |r: &Rule| {
            let q = r.quota();
            format!("{} per {} s", q.limit, q.window.as_secs_ceil())
        };
        errors.rule = Some(item_name("rules", i, Some(&rule.id)));
        errors.push(
            "binding",
            format!(
                "\"{binding}\" counts rule \"{}\" at {}; a binding has one limit and period (its [[ratelimits]] \
                 simple), so this rule's {} needs a binding of its own",
                first.id,
                quota(first),
                quota(rule)
            ),
        );
    }
}

/// Each rule counted in the isolate gets an even share of [`super::ISOLATE_STORE_BYTES`],
/// as keys of its worst-case size ([`super::isolate_key_bytes`]).
fn share_isolate_memory(rules: &mut [Rule]) {
    let n = rules.iter().filter(|r| matches!(r.store, Store::Isolate { .. })).count().max(1);
    for rule in rules.iter_mut() {
        let bytes = super::isolate_key_bytes(&rule.algorithm);
        if let Store::Isolate { max_keys } = &mut rule.store {
            *max_keys = (super::ISOLATE_STORE_BYTES / n / bytes).clamp(1, super::MAX_ISOLATE_KEYS);
        }
    }
}

const STORES: &str = "\"durable_object\" (the default: exact everywhere, a round trip to the key's object), \
                      \"cloudflare\" (a Workers Rate Limiting binding: no round trip, approximate, per location) \
                      or \"isolate\" (this isolate's memory: no round trip, each isolate counts alone)";

/// `"store"` and, for `"cloudflare"`, `"binding"`. An isolate rule's table size is set once
/// the whole file is read ([`share_isolate_memory`]).
fn store(obj: &Map<String, Value>, errors: &mut Errors) -> Option<Store> {
    let store = match obj.get("store").map(|v| (v, v.as_str())) {
        None | Some((_, Some("durable_object"))) => Store::DurableObject,
        Some((_, Some("isolate"))) => Store::Isolate { max_keys: 0 },
        Some((_, Some("cloudflare"))) => Store::Cloudflare { binding: String::new() },
        Some((v, _)) => {
            errors.push("store", format!("must be {STORES}, got {}", brief(&v.to_string())));
            return None;
        }
    };
    match (store, obj.get("binding")) {
        (Store::Cloudflare { .. }, None) => {
            errors.push(
                "binding",
                "missing; a rule with \"store\": \"cloudflare\" names the Workers Rate Limiting binding that \
                 counts it, e.g. \"API_LIMITER\" ([[ratelimits]] name = \"API_LIMITER\" in wrangler.toml)",
            );
            None
        }
        (Store::Cloudflare { .. }, Some(v)) => match v.as_str() {
            Some("RATE_LIMITER") => {
                errors.push("binding", "\"RATE_LIMITER\" is the Durable Object binding's name; choose another");
                None
            }
            Some(name) if is_binding_name(name) => Some(Store::Cloudflare { binding: name.into() }),
            _ => {
                errors.push(
                    "binding",
                    format!(
                        "must be the binding's name in env: 1–64 letters, digits or '_', not starting with a digit \
                         (e.g. \"API_LIMITER\"), got {}",
                        brief(&v.to_string())
                    ),
                );
                None
            }
        },
        (store, Some(_)) => {
            errors.push(
                "binding",
                format!(
                    "only a rule with \"store\": \"cloudflare\" names a binding (this one's store is \"{}\"); \
                     remove \"binding\" or set \"store\": \"cloudflare\"",
                    store.name()
                ),
            );
            None
        }
        (store, None) => Some(store),
    }
}

fn is_binding_name(s: &str) -> bool {
    s.len() <= 64
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// How a rule on the Cloudflare binding counts: as the binding does, `requests_per_period`
/// in each `period` of 10 or 60 s, per location (modelled as fixed windows, which is what
/// the simulator and Miniflare's binding count). Any other algorithm is refused.
fn binding_algorithm(obj: &Map<String, Value>, errors: &mut Errors) -> Option<Algorithm> {
    match obj.get("algorithm") {
        None => {}
        Some(v) if v.as_str() == Some("fixed_window") => {}
        Some(v) => {
            errors.push(
                "algorithm",
                format!(
                    "a rule with \"store\": \"cloudflare\" counts as the binding does (requests_per_period in each \
                     period of 10 or 60 s, per Cloudflare location); remove \"algorithm\" (or write \"fixed_window\"), \
                     or keep {} with \"store\": \"durable_object\" or \"isolate\"",
                    brief(&v.to_string())
                ),
            );
            return None;
        }
    }
    let algorithm = algorithm(obj, "fixed_window", errors)?;
    match algorithm {
        Algorithm::FixedWindow { period, .. } if period == Span::from_secs(10) || period == Span::from_secs(60) => {
            Some(algorithm)
        }
        _ => {
            errors.push(
                "period",
                format!(
                    "the Cloudflare binding counts over 10 or 60 s only, got {}; use 10 or 60, or \
                     \"store\": \"durable_object\" or \"isolate\" for another period",
                    brief(&obj["period"].to_string())
                ),
            );
            None
        }
    }
}

/// How problems name the item `list[index]`: with its id when it has one (cut short when
/// long: an id is checked only later, and may be anything).
fn item_name(list: &str, index: usize, id: Option<&str>) -> String {
    match id {
        Some(id) => format!("{list}[{index}] (\"{}\")", brief(id)),
        None => format!("{list}[{index}]"),
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Whether `id` differs, ignoring ASCII case, from every earlier one; otherwise a problem
/// naming the earlier spelling. `API` beside `api` would be two policies that logs, headers
/// and the capabilities answer cannot tell apart.
fn unique_id<'a>(
    id: &str,
    mut earlier: impl Iterator<Item = &'a str>,
    field: &str,
    what: &str,
    errors: &mut Errors,
) -> bool {
    let Some(first) = earlier.find(|e| e.eq_ignore_ascii_case(id)) else { return true };
    let message = if first == id {
        format!("\"{id}\" is used by an earlier {what}; ids must be unique, ignoring ASCII case")
    } else {
        format!(
            "\"{id}\" is an earlier {what}'s id, \"{first}\", in other case; ids must be unique, ignoring ASCII case"
        )
    };
    errors.push(field, message);
    false
}

fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty() && label.len() <= 63 && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A media type as `Content-Type` carries it (RFC 9110 §8.3.1): `type/subtype` tokens, then
/// `; name=value` parameters whose value is a token or a quoted string of visible
/// characters. Anything else (a control character, a space in a token) would make the
/// header unsendable.
fn is_media_type(s: &str) -> bool {
    let mut parts = s.split(';');
    let Some((kind, subtype)) = parts.next().and_then(|t| t.split_once('/')) else { return false };
    is_token(kind)
        && is_token(subtype)
        && parts.all(|param| {
            let param = param.trim_matches([' ', '\t']);
            let Some((name, value)) = param.split_once('=') else { return false };
            let quoted = value.len() >= 2
                && value.starts_with('"')
                && value.ends_with('"')
                && value[1..value.len() - 1].bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b));
            is_token(name) && (is_token(value) || quoted)
        })
}

/// A whole number in `min..=max`, as the type the field is kept in (so no cast narrows it),
/// with a message naming the field otherwise.
fn whole<T>(v: &Value, min: T, max: T, field: &str, what: &str, errors: &mut Errors) -> Option<T>
where
    T: Copy + fmt::Display + Into<u64> + TryFrom<u64>,
{
    match v.as_u64().filter(|n| (min.into()..=max.into()).contains(n)).and_then(|n| T::try_from(n).ok()) {
        Some(n) => Some(n),
        None => {
            errors.push(field, format!("must be {what} from {min} to {max}, got {v}"));
            None
        }
    }
}

/// Whether `text` is at most `max` bytes; otherwise a problem naming `field`, its length
/// and the bound (never the text itself, which may be huge).
fn within(text: &str, max: usize, field: &str, errors: &mut Errors) -> bool {
    if text.len() <= max {
        return true;
    }
    errors.push(field, format!("is {} bytes long; at most {max} are allowed", text.len()));
    false
}

fn matcher(v: &Value, errors: &mut Errors) -> Option<Match> {
    let Some(obj) = v.as_object() else {
        errors.push("match", format!("must be an object with \"path\", \"methods\" and/or \"hosts\", got {v}"));
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !["path", "methods", "hosts", "case_sensitive"].contains(&k.as_str())) {
        errors.push(
            &format!("match.{key}"),
            "unknown field; match has \"path\", \"methods\", \"hosts\" and \"case_sensitive\"",
        );
    }
    let case_sensitive = match obj.get("case_sensitive") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errors.push("match.case_sensitive", format!("must be true or false, got {other}"));
            false
        }
    };
    let paths = match obj.get("path") {
        None => Vec::new(),
        Some(Value::Array(tests)) if !tests.is_empty() => tests.iter().filter_map(|p| path(p, errors)).collect(),
        Some(Value::Array(_)) => {
            errors.push("match.path", "an empty list matches nothing; leave \"path\" out to match every path");
            Vec::new()
        }
        Some(p) => path(p, errors).into_iter().collect(),
    };
    let methods = string_list(obj.get("methods"), "match.methods", errors)
        .into_iter()
        .filter_map(|m| {
            let upper = m.to_ascii_uppercase();
            if METHODS.contains(&upper.as_str()) {
                Some(upper)
            } else {
                errors.push("match.methods", format!("\"{}\" is not a method; use {}", brief(&m), METHODS.join(", ")));
                None
            }
        })
        .collect();
    let hosts = string_list(obj.get("hosts"), "match.hosts", errors)
        .into_iter()
        .filter_map(|h| {
            let name = super::host_name(&h);
            if is_host_name(name) {
                Some(name.to_ascii_lowercase())
            } else {
                errors.push(
                    "match.hosts",
                    format!(
                        "\"{}\" is not a host name (letters, digits, '-' and '.'; no scheme, port or path)",
                        brief(&h)
                    ),
                );
                None
            }
        })
        .collect();
    (errors.list.len() == before).then_some(Match { paths, methods, hosts, case_sensitive })
}

fn path(v: &Value, errors: &mut Errors) -> Option<PathMatch> {
    const HOW: &str =
        "must be {\"starts_with\": \"/prefix\"} or {\"equals\": \"/path\"}, or a list of them (any matches)";
    let Some(obj) = v.as_object() else {
        errors.push("match.path", format!("{HOW}, got {v}"));
        return None;
    };
    if obj.len() != 1 {
        errors.push("match.path", format!("{HOW} (exactly one of them)"));
        return None;
    }
    let (kind, value) = obj.iter().next()?;
    let field = format!("match.path.{kind}");
    let text = match value.as_str() {
        Some(s) if !within(s, MAX_PATH_BYTES, &field, errors) => return None,
        Some(s) if s.starts_with('/') => match normalise_path(s) {
            Ok(normal) => normal.into_owned(),
            Err(e) => {
                errors.push(&field, format!("cannot be normalised: {e}"));
                return None;
            }
        },
        _ => {
            errors.push(&field, format!("must be a path starting with \"/\", got {value}"));
            return None;
        }
    };
    match kind.as_str() {
        "starts_with" => Some(PathMatch::StartsWith(text)),
        "equals" => Some(PathMatch::Equals(text)),
        _ => {
            errors.push(&field, format!("unknown path test; {HOW}"));
            None
        }
    }
}

fn string_list(v: Option<&Value>, field: &str, errors: &mut Errors) -> Vec<String> {
    let Some(v) = v else { return Vec::new() };
    match v.as_array() {
        Some(items) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(String::from).collect()
        }
        _ => {
            errors.push(field, format!("must be an array of strings, got {v}"));
            Vec::new()
        }
    }
}

fn characteristics(v: &Value, errors: &mut Errors) -> Option<Vec<Characteristic>> {
    let items = match v.as_array() {
        Some(items) if !items.is_empty() => items,
        _ => {
            errors.push("characteristics", format!("must be a non-empty array of {CHARACTERISTICS}, got {v}"));
            return None;
        }
    };
    let before = errors.list.len();
    let mut out: Vec<Characteristic> = Vec::with_capacity(items.len());
    for item in items {
        let c = match item.as_str() {
            Some("ip.src") => Characteristic::IpSrc,
            Some("cf.colo.id") => Characteristic::ColoId,
            Some("http.host") => Characteristic::Host,
            Some("http.request.method") => Characteristic::Method,
            Some("http.request.uri.path") => Characteristic::Path,
            Some(s) => match s.strip_prefix("http.request.headers[\"").and_then(|r| r.strip_suffix("\"]")) {
                Some(name) if is_token(name) => {
                    if !within(name, MAX_HEADER_BYTES, "characteristics", errors) {
                        continue;
                    }
                    Characteristic::Header(name.to_ascii_lowercase())
                }
                _ => {
                    errors.push(
                        "characteristics",
                        format!("unknown characteristic \"{}\"; allowed: {CHARACTERISTICS}", brief(s)),
                    );
                    continue;
                }
            },
            None => {
                errors.push("characteristics", format!("each must be a string, got {item}"));
                continue;
            }
        };
        if out.contains(&c) {
            errors.push("characteristics", format!("\"{}\" is listed twice", c.name()));
        }
        out.push(c);
    }
    (errors.list.len() == before).then_some(out)
}

fn algorithm(obj: &Map<String, Value>, default: &'static str, errors: &mut Errors) -> Option<Algorithm> {
    let name = match obj.get("algorithm") {
        None => default,
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            errors.push("algorithm", format!("must be {ALGORITHMS}, got {other}"));
            return None;
        }
    };
    let (used, unused): (&[&str], &[&str]) = match name {
        "token_bucket" => (&["rate", "burst"], &["period", "requests_per_period"]),
        "sliding_log" | "fixed_window" | "sliding_window" => (&["period", "requests_per_period"], &["rate", "burst"]),
        _ => {
            errors.push("algorithm", format!("unknown algorithm \"{name}\"; use {ALGORITHMS}"));
            return None;
        }
    };
    let before = errors.list.len();
    for field in unused.iter().filter(|f| obj.contains_key(**f)) {
        errors.push(field, format!("is not used by \"{name}\", which takes {}", used.join(" and ")));
    }
    for field in used.iter().filter(|f| !obj.contains_key(**f)) {
        errors.push(field, format!("missing; \"{name}\" needs {}", used.join(" and ")));
    }
    if errors.list.len() > before {
        return None;
    }
    if name == "token_bucket" {
        let (interval, burst) = rate_and_burst(&obj["rate"], &obj["burst"], "", errors)?;
        return Some(Algorithm::TokenBucket { interval, burst });
    }
    let period = whole(&obj["period"], 1, MAX_SECONDS, "period", "a whole number of seconds", errors);
    let max = if name == "sliding_log" { MAX_LOG_REQUESTS } else { u32::MAX };
    let what = if name == "sliding_log" {
        "a whole number of requests (sliding_log remembers each one; use sliding_window above 10000)"
    } else {
        "a whole number of requests"
    };
    let requests = whole(&obj["requests_per_period"], 1, max, "requests_per_period", what, errors);
    let (requests_per_period, period) = (requests?, Span::from_secs(period?));
    Some(match name {
        "fixed_window" => Algorithm::FixedWindow { requests_per_period, period },
        "sliding_window" => Algorithm::SlidingWindow { requests_per_period, period },
        _ => Algorithm::SlidingLog { requests_per_period, period },
    })
}

/// A token bucket's `rate` (per second) and `burst`, as its emission interval and burst;
/// fields are named with `prefix` (e.g. `pre_read.per_ip.`).
fn rate_and_burst(rate: &Value, burst: &Value, prefix: &str, errors: &mut Errors) -> Option<(Span, u32)> {
    // One request per year is the slowest rate: a longer interval would overflow the
    // bucket's arithmetic and admit everything.
    let interval = match rate.as_f64().and_then(|r| Gcra::interval_of_rate(r, Span::from_secs(MAX_SECONDS))) {
        Some(interval) => interval,
        _ => {
            errors.push(
                &format!("{prefix}rate"),
                format!(
                    "must be a number of requests per second from one per {MAX_SECONDS} s (the longest \
                     period, about 3.2e-8 per second) to 1e9, got {rate}; a slower rate cannot be counted"
                ),
            );
            return None;
        }
    };
    let field = format!("{prefix}burst");
    let burst = whole(burst, 1, u32::MAX, &field, "a whole number of requests", errors)?;
    // The time an empty bucket takes to refill is its window (`w` in RateLimit-Policy).
    let refill = interval.as_nanos().saturating_mul(u64::from(burst));
    if refill > MAX_SECONDS * 1_000_000_000 {
        errors.push(
            &field,
            format!(
                "burst / rate is {} s, the time an empty bucket takes to refill; it must be at most {MAX_SECONDS} s",
                refill / 1_000_000_000
            ),
        );
        return None;
    }
    Some((interval, burst))
}

fn response(v: &Value, errors: &mut Errors) -> Option<Response> {
    let Some(obj) = v.as_object() else {
        errors.push("response", format!("must be an object with status_code, content_type, content; got {v}"));
        return None;
    };
    let before = errors.list.len();
    for key in obj.keys().filter(|k| !["status_code", "content_type", "content"].contains(&k.as_str())) {
        errors.push(&format!("response.{key}"), "unknown field; response has status_code, content_type and content");
    }
    let status = match obj.get("status_code") {
        None => Some(429),
        Some(s) => whole(s, 400u16, 599, "response.status_code", "an HTTP error status", errors),
    };
    let content = obj.get("content");
    let content_type = obj.get("content_type");
    let body = match (content, content_type) {
        (None, None) => None,
        (None, Some(_)) => {
            errors.push("response.content_type", "is given without response.content");
            None
        }
        (Some(Value::String(body)), _) if !within(body, MAX_RESPONSE_BYTES, "response.content", errors) => None,
        (Some(Value::String(body)), ct) => match ct {
            None => Some(("text/plain; charset=utf-8".to_string(), body.clone())),
            Some(Value::String(ct)) if !within(ct, MAX_HEADER_BYTES, "response.content_type", errors) => None,
            Some(Value::String(ct)) if is_media_type(ct) => Some((ct.clone(), body.clone())),
            Some(other) => {
                errors.push(
                    "response.content_type",
                    format!(
                        "must be a media type such as \"application/json\" or \"text/plain; charset=utf-8\" \
                         (tokens, no control characters), got {other}"
                    ),
                );
                None
            }
        },
        (Some(other), _) => {
            errors.push("response.content", format!("must be a string, got {other}"));
            None
        }
    };
    (errors.list.len() == before).then_some(Response { status: status?, body })
}
