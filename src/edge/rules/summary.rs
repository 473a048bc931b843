//! What a valid rules file enforces, in words: the lines `sluicegate check-rules` prints
//! after "N rule(s) valid", from the native command line and from the package's (through
//! the edge's wasm build) alike.

use super::{
    Algorithm, DecisionLog, LoggedDecisions, PreRead, Rule, RuleSet, Store, StoreFailure,
    DEFAULT_SOURCE_BYTES_PER_SECOND,
};
use crate::edge::egress::Provider;
use crate::edge::identity::{TrustedProxies, MAX_FORWARDED_HOPS};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

impl RuleSet {
    /// One line per rule, upstream and egress provider, then the checks made before a body
    /// is read, whose address a request is counted against, the capabilities route, and
    /// which decisions are logged when that is not every one.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::rules::RuleSet;
    /// let set = RuleSet::from_json(r#"{ "rules": [ { "id": "api",
    ///     "match": { "path": { "starts_with": "/api/" } }, "characteristics": ["ip.src", "cf.colo.id"],
    ///     "period": 10, "requests_per_period": 20, "mitigation_timeout": 10 } ] }"#).unwrap();
    /// let lines = set.summary_lines();
    /// assert_eq!(lines[0], "api: 20 per 10 s (exact rolling count) per ip.src + cf.colo.id, then block 10 s, answering 429; \
    ///     store durable_object: exact in every isolate and location, one round trip to the \
    ///     key's Durable Object per request");
    /// ```
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .rules()
            .iter()
            .map(|rule| match rule.enforce {
                super::Enforce::All => format!("{}: {}; {}", rule.id, rule_line(rule), store_part(rule)),
                other => format!("{}: {}; {}; {}", rule.id, rule_line(rule), store_part(rule), other.describe()),
            })
            .collect();
        let how = |enforce: super::Enforce, of: &str| match enforce {
            super::Enforce::All => None,
            super::Enforce::Shadow => Some(String::from("shadow")),
            share @ super::Enforce::Share { .. } => Some(format!("{} of {of}", share.to_json())),
        };
        let mut rollout: Vec<String> =
            self.rules().iter().filter_map(|r| Some(format!("{} ({})", r.id, how(r.enforce, "keys")?))).collect();
        if let Some(tenants) = self.tenants() {
            let limits = tenants.limits.iter().map(|(name, limit)| (format!("tenant {name}"), limit));
            let default = tenants.default.iter().map(|limit| (String::from("the default tenant limit"), limit));
            for (name, limit) in limits.chain(default) {
                if let Some(how) = how(limit.enforce, "tenants") {
                    rollout.push(format!("{name} ({how})"));
                }
            }
        }
        if !rollout.is_empty() {
            lines.push(format!(
                "not enforced for every key: {}; their refusals are logged and counted as would-refuse, \
                 and named in Sluicegate-Shadow (the admin API may change a rule's enforce at runtime)",
                rollout.join(", ")
            ));
        }
        for (binding, quota, _) in self.rate_limit_bindings() {
            lines.push(format!("wrangler.toml for {binding}: {}", super::ratelimits_toml(binding, quota)));
        }
        for upstream in self.upstreams() {
            lines.push(format!(
                "upstream {}: at most {} in flight per {}, waiting up to {} ms for a slot",
                upstream.id,
                upstream.max_in_flight,
                upstream.scope.name(),
                upstream.max_wait.as_millis_ceil()
            ));
        }
        for (prefix, p) in self.egress().iter().flat_map(|e| e.providers.iter().map(|p| (&e.prefix, p))) {
            let mut limits = vec![in_flight_part(p)];
            if !p.min_interval.is_zero() {
                limits.push(format!("starts {} ms apart", p.min_interval.as_millis_ceil()));
            }
            if let Some(w) = p.weight_per_minute {
                limits.push(format!("{w} weighted calls per rolling minute"));
            }
            if let Some(how) = p.weight {
                limits.push(format!("weighed by {}", how.name()));
            }
            if let Some(c) = p.cache {
                let how = if c.refresh_behind { "refreshed behind" } else { "refreshed ahead" };
                let post = if c.post { " (GET and POST)" } else { "" };
                limits.push(format!(
                    "cached{post} {} s, {how}, {} KiB in all, answers of up to {} KiB",
                    c.ttl.as_secs_ceil(),
                    c.max_bytes / 1024,
                    c.max_entry_bytes / 1024
                ));
            }
            lines.push(format!(
                "egress {}: {prefix}{}/…: {}, per {}, waiting up to {} ms, each attempt up to {} ms",
                p.id,
                p.id,
                limits.join(", "),
                p.scope.name(),
                p.max_wait.as_millis_ceil(),
                p.timeout.as_millis_ceil()
            ));
        }
        lines.extend(pre_read_lines(self.pre_read()));
        lines.push(identity_line(self.trusted_proxies()));
        lines.push(match self.capabilities_path() {
            Some(path) => format!("capabilities: GET {path}"),
            None => String::from("capabilities: off"),
        });
        if !self.decision_log().is_default() {
            lines.push(log_line(self.decision_log()));
        }
        lines
    }
}

/// A provider's calls in flight per mirror, marked as the default when it is the one a
/// provider spaced by `min_interval_ms` gets without `max_in_flight` (1, the parser's
/// `SPACED_MAX_IN_FLIGHT`; `a_provider_spaced_alone_gets_one_call_in_flight_per_mirror`
/// holds the two together).
fn in_flight_part(p: &Provider) -> String {
    let default = p.max_in_flight == 1 && !p.min_interval.is_zero();
    format!(
        "{} in flight per mirror{} ({} mirror(s))",
        p.max_in_flight,
        if default { " (the default with min_interval_ms)" } else { "" },
        p.mirrors.len()
    )
}

/// The checks made before the body is read; the source ceiling always (the one in force).
fn pre_read_lines(pre: &PreRead) -> Vec<String> {
    let bucket = |g: &crate::core::limit::Gcra| {
        format!("{} requests per second, burst {},", 1e9 / g.interval().as_nanos() as f64, g.burst())
    };
    let mut lines = Vec::new();
    if let Some(g) = &pre.per_ip {
        lines.push(format!("pre_read per_ip: {} per client address", bucket(g)));
    }
    if let Some(g) = &pre.node {
        lines.push(format!("pre_read node: {} per isolate", bucket(g)));
    }
    lines.push(match pre.source_bytes_per_second {
        Some(rate) if rate == DEFAULT_SOURCE_BYTES_PER_SECOND => {
            format!("pre_read source_bytes_per_second: {rate} body bytes per second per source (the default)")
        }
        Some(rate) => format!("pre_read source_bytes_per_second: {rate} body bytes per second per source"),
        None => "pre_read source_bytes_per_second: off (null): body bytes are not counted per source".into(),
    });
    if !pre.sources.is_empty() {
        let ids: Vec<&str> = pre.sources.iter().map(|s| s.id.as_str()).collect();
        lines.push(format!("pre_read sources: {} (any other request's source is its host)", ids.join(", ")));
    }
    lines
}

/// Which decisions get a log line, and how they are sampled: `log: refusals only, 1 in 10
/// sampled at random (each line carries "sample":0.1)`.
fn log_line(log: &DecisionLog) -> String {
    let which = match log.decisions {
        LoggedDecisions::All => "every decision",
        LoggedDecisions::Refusals => "refusals only",
        LoggedDecisions::None => return "log: no decision lines (store failures and errors are still logged)".into(),
    };
    let (Some(sample), Some(text)) = (log.sampled(), log.sampled_text()) else { return format!("log: {which}") };
    // "1 in n" when the share is exactly 1/n, as written (0.1, 0.25, 0.001).
    let n = (1.0 / sample) as u64;
    let share = match [n, n + 1].into_iter().find(|&k| k > 0 && 1.0 / k as f64 == sample) {
        Some(k) => format!("1 in {k}"),
        None => format!("a share of {text}"),
    };
    format!("log: {which}, {share} sampled at random (each line carries \"sample\":{text})")
}

/// Whose address a request is counted against.
fn identity_line(trusted: &TrustedProxies) -> String {
    if trusted.is_empty() {
        return "identity: CF-Connecting-IP, else the rightmost X-Forwarded-For hop, else the peer".into();
    }
    let ranges: Vec<String> = trusted.ranges().iter().map(ToString::to_string).collect();
    format!(
        "identity: X-Forwarded-For walked from the right past the trusted proxies {} (at most {MAX_FORWARDED_HOPS} \
         hops), when CF-Connecting-IP (else the peer) is one of them",
        ranges.join(", ")
    )
}

/// Where a rule counts, and what that costs: the round trip and how exact it is.
fn store_part(rule: &Rule) -> String {
    let quota = rule.quota();
    let limit = format!("{} per {} s", quota.limit, quota.window.as_secs_ceil());
    match &rule.store {
        Store::DurableObject => "store durable_object: exact in every isolate and location, one round trip to the \
                                 key's Durable Object per request"
            .into(),
        Store::Cloudflare { binding } => {
            let block = if rule.mitigation_timeout.is_zero() {
                String::new()
            } else {
                "; the block is held by each isolate's cache (the binding has none)".into()
            };
            format!(
                "store cloudflare (binding {binding}): no round trip beyond the location, approximate: each \
                 Cloudflare location counts its own {limit}, so N locations admit up to N × that{block}"
            )
        }
        Store::Isolate { max_keys } => {
            let full = match rule.on_store_failure {
                StoreFailure::Open => "admitted uncounted, as on_store_failure \"open\" says",
                StoreFailure::Closed => "refused with 503, as on_store_failure \"closed\" says",
            };
            format!(
                "store isolate: no round trip, each isolate counts its own {limit}, so N isolates admit up to N × \
                 that; up to {max_keys} keys per isolate (a new key past them while all are counting is {full})"
            )
        }
    }
}

/// How a rule counts, by what, what it blocks and answers.
fn rule_line(rule: &Rule) -> String {
    let counting = match rule.algorithm {
        Algorithm::SlidingLog { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (exact rolling count)", period.as_secs_ceil())
        }
        Algorithm::FixedWindow { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (fixed windows)", period.as_secs_ceil())
        }
        Algorithm::SlidingWindow { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (sliding-window estimate)", period.as_secs_ceil())
        }
        Algorithm::TokenBucket { interval, burst } => {
            format!("token bucket, burst {burst}, one token every {} ms", interval.as_millis_ceil())
        }
    };
    let by: Vec<_> = rule.characteristics.iter().map(|c| c.name().into_owned()).collect();
    let block = rule.mitigation_timeout.as_secs_ceil();
    let block = if block == 0 { String::new() } else { format!(", then block {block} s") };
    format!("{counting} per {}{block}, answering {}", by.join(" + "), rule.response.status)
}
