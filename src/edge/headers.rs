//! Response headers and bodies: `Retry-After`, IETF `RateLimit-Policy` / `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-11 syntax) and `application/problem+json`.

use crate::core::limit::{Decision, Quota};
use crate::core::time::Span;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// `Retry-After` in whole seconds, rounded up (a wait of 1 ms is a wait of 1 s).
pub fn retry_after(wait: Span) -> String {
    format!("{}", wait.as_secs_ceil())
}

/// `RateLimit-Policy: "name";q=20;w=10`.
///
/// # Examples
/// ```
/// use sluicegate::{headers, limit::Quota, Span};
/// let q = Quota { limit: 20, window: Span::from_secs(10) };
/// assert_eq!(headers::ratelimit_policy("api", q), "\"api\";q=20;w=10");
/// ```
pub fn ratelimit_policy(name: &str, quota: Quota) -> String {
    format!("\"{}\";q={};w={}", name, quota.limit, quota.window.as_secs_ceil())
}

/// `RateLimit: "name";r=3;t=7`: units remaining and seconds until the quota is full again
/// (for a refusal, `r=0` and `t` is the wait).
///
/// # Examples
/// ```
/// use sluicegate::{headers, Decision, Span};
/// let d = Decision::Allow { remaining: 3, reset: Span::from_millis(6_200) };
/// assert_eq!(headers::ratelimit("api", &d), "\"api\";r=3;t=7");
/// ```
pub fn ratelimit(name: &str, decision: &Decision) -> String {
    let (remaining, t) = match *decision {
        Decision::Allow { remaining, reset } => (remaining, reset),
        Decision::Deny { retry_after } => (0, retry_after),
    };
    format!("\"{}\";r={};t={}", name, remaining, t.as_secs_ceil())
}

/// The most bytes each of `RateLimit-Policy` and `RateLimit` may carry: HTTP clients refuse
/// oversized headers (undici allows 16 KiB for all of a response's headers together).
pub const MAX_RATELIMIT_FIELD_BYTES: usize = 2_048;

/// The `RateLimit-Policy` and `RateLimit` fields of one response, one entry per rule that
/// matched, in rule order, each field at most [`MAX_RATELIMIT_FIELD_BYTES`]. An entry that
/// would not fit is left out (and counted), except the refusing rule's, which always
/// appears: entries before it are dropped from the end until it fits.
///
/// # Examples
/// ```
/// use sluicegate::{headers::RateLimitFields, limit::Quota, Decision, Span};
/// let mut fields = RateLimitFields::default();
/// fields.push("api", Quota { limit: 20, window: Span::from_secs(10) }, &Decision::Allow { remaining: 19, reset: Span::from_secs(10) });
/// assert_eq!(fields.policy(), "\"api\";q=20;w=10");
/// assert_eq!(fields.state(), "\"api\";r=19;t=10");
/// ```
#[derive(Clone, Debug, Default)]
pub struct RateLimitFields {
    entries: Vec<(String, String)>,
    omitted: usize,
}

impl RateLimitFields {
    /// Add the entries of rule `name`; a refusal always gets in.
    pub fn push(&mut self, name: &str, quota: Quota, decision: &Decision) {
        self.push_entry(name, quota, Some(decision));
    }

    /// Add the entries of rule `name` whose state is known only when it refused (a rule on
    /// the Cloudflare binding, which says whether a request is within the limit and nothing
    /// more): its `RateLimit-Policy` entry, and a `RateLimit` entry for a refusal only.
    pub fn push_without_remaining(&mut self, name: &str, quota: Quota, decision: &Decision) {
        self.push_entry(name, quota, matches!(decision, Decision::Deny { .. }).then_some(decision));
    }

    fn push_entry(&mut self, name: &str, quota: Quota, decision: Option<&Decision>) {
        let entry = (ratelimit_policy(name, quota), decision.map(|d| ratelimit(name, d)).unwrap_or_default());
        let refusal = matches!(decision, Some(Decision::Deny { .. }));
        while refusal && !self.fits(&entry) && self.entries.pop().is_some() {
            self.omitted += 1;
        }
        if self.fits(&entry) {
            self.entries.push(entry);
        } else {
            self.omitted += 1;
        }
    }

    fn fits(&self, (policy, state): &(String, String)) -> bool {
        let len = |pick: fn(&(String, String)) -> usize, new: usize| {
            self.entries.iter().map(|e| pick(e) + 2).sum::<usize>() + new
        };
        len(|e| e.0.len(), policy.len()) <= MAX_RATELIMIT_FIELD_BYTES
            && len(|e| e.1.len(), state.len()) <= MAX_RATELIMIT_FIELD_BYTES
    }

    /// Whether no rule matched.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries were left out for size.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// The `RateLimit-Policy` value.
    pub fn policy(&self) -> String {
        self.join(|e| &e.0)
    }

    /// The `RateLimit` value.
    pub fn state(&self) -> String {
        self.join(|e| &e.1)
    }

    fn join(&self, pick: fn(&(String, String)) -> &String) -> String {
        let mut out = String::new();
        for entry in self.entries.iter().map(pick).filter(|e| !e.is_empty()) {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(entry);
        }
        out
    }
}

/// The media type of [`problem`] bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    title: &'a str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
}

/// An RFC 9457 problem body (`type` is `about:blank`, so `title` is the status phrase).
pub fn problem(status: u16, title: &str, detail: &str, rule: Option<&str>, retry_after: Option<Span>) -> String {
    let body = Problem {
        kind: "about:blank",
        title,
        status,
        detail,
        rule,
        upstream: None,
        tenant: None,
        code: None,
        retry_after: retry_after.map(Span::as_secs_ceil),
    };
    serde_json::to_string(&body).unwrap_or_default()
}

/// The `503` body of a request that found no free slot of upstream `upstream` within
/// `waited`, to retry after `retry_after`.
///
/// # Examples
/// ```
/// use sluicegate::{headers, Span};
/// let body = headers::upstream_busy("overpass", Span::from_secs(1), Span::from_secs(1));
/// assert!(body.contains("\"upstream\":\"overpass\""));
/// assert!(body.contains("\"status\":503"));
/// ```
pub fn upstream_busy(upstream: &str, waited: Span, retry_after: Span) -> String {
    let detail = format!(
        "The upstream \"{upstream}\" is busy: no request slot freed within {} ms. Retry in {} s.",
        waited.as_millis_ceil(),
        retry_after.as_secs_ceil()
    );
    let body = Problem {
        kind: "about:blank",
        title: "Service Unavailable",
        status: 503,
        detail: &detail,
        rule: None,
        upstream: Some(upstream),
        tenant: None,
        code: None,
        retry_after: Some(retry_after.as_secs_ceil()),
    };
    serde_json::to_string(&body).unwrap_or_default()
}

/// The body of a refusal by rule `rule`.
pub fn rate_limited(status: u16, rule: &str, quota: Quota, wait: Span) -> String {
    let detail = format!(
        "Rate limit \"{}\" exceeded ({} requests per {} s). Retry in {} s.",
        rule,
        quota.limit,
        quota.window.as_secs_ceil(),
        wait.as_secs_ceil()
    );
    problem(status, status_title(status), &detail, Some(rule), Some(wait))
}

/// The `429` body of a tenant over its limit (`code` `tenant_rate_limited`) or over its
/// share in flight (`code` `tenant_overload`).
///
/// # Examples
/// ```
/// use sluicegate::{headers, Span};
/// let body = headers::tenant_limited("acme", "tenant_overload", Span::from_secs(1));
/// assert!(body.contains("\"code\":\"tenant_overload\"") && body.contains("\"tenant\":\"acme\""));
/// ```
pub fn tenant_limited(tenant: &str, code: &str, retry_after: Span) -> String {
    let detail = if code == "tenant_overload" {
        format!("Tenant \"{tenant}\" has as much in flight as it may. Retry in {} s.", retry_after.as_secs_ceil())
    } else {
        format!("Tenant \"{tenant}\" is over its rate limit. Retry in {} s.", retry_after.as_secs_ceil())
    };
    let body = Problem {
        kind: "about:blank",
        title: "Too Many Requests",
        status: 429,
        detail: &detail,
        rule: None,
        upstream: None,
        tenant: Some(tenant),
        code: Some(code),
        retry_after: Some(retry_after.as_secs_ceil()),
    };
    serde_json::to_string(&body).unwrap_or_default()
}

/// An RFC 9457 problem body with a machine-readable `code` (e.g. `store_unavailable`).
///
/// # Examples
/// ```
/// use sluicegate::headers;
/// let body = headers::coded_problem(503, "The store cannot be reached.", "store_unavailable");
/// assert!(body.contains("\"code\":\"store_unavailable\"") && body.contains("\"title\":\"Service Unavailable\""));
/// ```
pub fn coded_problem(status: u16, detail: &str, code: &str) -> String {
    let body = Problem {
        kind: "about:blank",
        title: status_title(status),
        status,
        detail,
        rule: None,
        upstream: None,
        tenant: None,
        code: Some(code),
        retry_after: None,
    };
    serde_json::to_string(&body).unwrap_or_default()
}

/// The body answered while the configuration is invalid: it names nothing internal.
pub fn unavailable() -> String {
    problem(503, "Service Unavailable", "The service is not available right now. Try again later.", None, None)
}

/// Whether `s` is an RFC 9110 token (`tchar`s: letters, digits and `` !#$%&'*+-.^_`|~ ``),
/// as a header name or an unquoted parameter value must be.
///
/// # Examples
/// ```
/// use sluicegate::headers::is_token;
/// assert!(is_token("x-api-key") && is_token("edge.example"));
/// assert!(!is_token("") && !is_token("edge.example:8443") && !is_token("a b"));
/// ```
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The media type of a server-sent event stream.
pub const EVENT_STREAM: &str = "text/event-stream";

/// Whether an `Accept` field value lists `text/event-stream` (any case, with or without
/// parameters) as acceptable: a media range with `q=0` is "not acceptable", and wildcards
/// (`*/*`, `text/*`) do not count, since every `fetch` sends `*/*`.
///
/// # Examples
/// ```
/// use sluicegate::headers::accepts_event_stream;
/// assert!(accepts_event_stream("text/html, Text/Event-Stream;charset=utf-8;q=0.5"));
/// assert!(!accepts_event_stream("text/event-streamx, */*"));
/// assert!(!accepts_event_stream("text/event-stream;q=0"));
/// ```
pub fn accepts_event_stream(accept: &str) -> bool {
    split_outside_quotes(accept, b',').any(|range| {
        let mut parts = split_outside_quotes(range, b';');
        let media = parts.next().unwrap_or("").trim();
        media.eq_ignore_ascii_case(EVENT_STREAM)
            && !parts.any(|param| match param.split_once('=') {
                Some((name, value)) => name.trim().eq_ignore_ascii_case("q") && is_zero_qvalue(value.trim()),
                None => false,
            })
    })
}

/// A `qvalue` of zero: `0`, `0.`, `0.0` and so on.
fn is_zero_qvalue(value: &str) -> bool {
    match value.strip_prefix('0') {
        Some(rest) => rest.is_empty() || rest.strip_prefix('.').is_some_and(|zeros| zeros.bytes().all(|b| b == b'0')),
        None => false,
    }
}

/// The pieces of `s` between `separator`s that are not inside a quoted string (a quoted
/// parameter value may hold a `,` or a `;`).
fn split_outside_quotes(s: &str, separator: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    core::iter::from_fn(move || {
        let s = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, b) in s.bytes().enumerate() {
            match b {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                _ if b == separator && !quoted => {
                    rest = Some(&s[i + 1..]);
                    return Some(&s[..i]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(s)
    })
}

/// A server-sent event stream of one `event: error` whose data is `data` (each of its lines
/// a `data:` field, so a one-line JSON body is one field), after a `retry:` field of
/// `retry_after` in milliseconds, so that an `EventSource` reconnects no sooner.
///
/// # Examples
/// ```
/// use sluicegate::{headers, Span};
/// let stream = headers::event_stream_error("{\"status\":503}", Span::from_secs(2));
/// assert_eq!(stream, "retry: 2000\nevent: error\ndata: {\"status\":503}\n\n");
/// ```
pub fn event_stream_error(data: &str, retry_after: Span) -> String {
    let mut out = format!("retry: {}\nevent: error\n", retry_after.as_millis_ceil());
    // An event stream's lines end with CRLF, LF or CR.
    for line in data.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The reason phrase for the statuses a rule may answer with.
pub fn status_title(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        413 => "Content Too Large",
        420 => "Enhance Your Calm",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        s if s < 500 => "Client Error",
        _ => "Server Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_carries_zero_remaining_and_the_wait() {
        let d = Decision::Deny { retry_after: Span::from_millis(9_001) };
        assert_eq!(ratelimit("api", &d), "\"api\";r=0;t=10");
        assert_eq!(retry_after(Span::from_millis(9_001)), "10");
    }

    #[test]
    fn the_problem_body_names_the_rule_and_the_wait() {
        let q = Quota { limit: 20, window: Span::from_secs(10) };
        let body: serde_json::Value = serde_json::from_str(&rate_limited(429, "api", q, Span::from_secs(10))).unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(body["title"], "Too Many Requests");
        assert_eq!(body["rule"], "api");
        assert_eq!(body["retry_after"], 10);
        assert!(body["detail"].as_str().unwrap().contains("20 requests per 10 s"));
    }

    #[test]
    fn the_unavailable_body_names_nothing_internal() {
        let body: serde_json::Value = serde_json::from_str(&unavailable()).unwrap();
        assert_eq!(body["status"], 503);
        assert!(body.get("rule").is_none());
    }

    #[test]
    fn ratelimit_fields_stay_within_their_budget_and_always_name_the_refusing_rule() {
        let quota = Quota { limit: 4_294_967_295, window: Span::from_secs(31_622_400) };
        let allow = Decision::Allow { remaining: 4_294_967_294, reset: Span::from_secs(31_622_400) };
        let mut fields = RateLimitFields::default();
        let names: Vec<String> = (0..64).map(|i| alloc::format!("{i:0>64}")).collect();
        for name in &names[..63] {
            fields.push(name, quota, &allow);
        }
        assert!(fields.policy().len() <= MAX_RATELIMIT_FIELD_BYTES);
        assert!(fields.state().len() <= MAX_RATELIMIT_FIELD_BYTES);
        assert!(fields.omitted() > 0);
        let kept = 63 - fields.omitted();
        fields.push(&names[63], quota, &Decision::Deny { retry_after: Span::from_secs(10) });
        assert!(fields.policy().len() <= MAX_RATELIMIT_FIELD_BYTES);
        assert!(fields.state().ends_with(&alloc::format!("\"{}\";r=0;t=10", names[63])));
        assert_eq!(fields.omitted(), 63 - kept + 1, "one entry made room for the refusal");
        assert!(fields.policy().starts_with(&alloc::format!("\"{}\"", names[0])), "rule order is kept");
    }

    #[test]
    fn ratelimit_fields_join_entries_in_rule_order() {
        let mut fields = RateLimitFields::default();
        assert!(fields.is_empty());
        fields.push(
            "a",
            Quota { limit: 2, window: Span::from_secs(1) },
            &Decision::Allow { remaining: 1, reset: Span::from_secs(1) },
        );
        fields.push(
            "b",
            Quota { limit: 3, window: Span::from_secs(5) },
            &Decision::Deny { retry_after: Span::from_millis(4_001) },
        );
        assert_eq!(fields.policy(), "\"a\";q=2;w=1, \"b\";q=3;w=5");
        assert_eq!(fields.state(), "\"a\";r=1;t=1, \"b\";r=0;t=5");
        assert_eq!(fields.omitted(), 0);
    }

    #[test]
    fn accept_lists_the_event_stream_only_by_name_and_not_at_q_zero() {
        for yes in [
            "text/event-stream",
            "TEXT/Event-Stream",
            "text/html, text/event-stream",
            "application/json;q=0.9 , text/event-stream ; charset=utf-8",
            "text/event-stream;q=0.001",
            "text/event-stream;Q=1",
            "text/plain;x=\"a,b\", text/event-stream",
            "text/event-stream;q=0, text/event-stream;q=1",
        ] {
            assert!(accepts_event_stream(yes), "{yes:?}");
        }
        for no in [
            "",
            "*/*",
            "text/*",
            "text/event-streamx",
            "xtext/event-stream",
            "text/event-stream-x, application/json",
            "text/event-stream;q=0",
            "text/event-stream; Q = 0.000",
            "text/event-stream;q=0.",
            "text/plain;x=\"a, text/event-stream\"",
            "application/json;note=text/event-stream",
        ] {
            assert!(!accepts_event_stream(no), "{no:?}");
        }
    }

    #[test]
    fn the_event_stream_error_carries_the_problem_as_one_data_line() {
        let problem = upstream_busy("overpass", Span::from_millis(300), Span::from_secs(1));
        let stream = event_stream_error(&problem, Span::from_secs(1));
        assert_eq!(stream, alloc::format!("retry: 1000\nevent: error\ndata: {problem}\n\n"));
        let lines: Vec<&str> = stream.lines().collect();
        assert_eq!(lines.len(), 4, "retry, event, one data line, the blank line: {lines:?}");
        assert_eq!(
            event_stream_error("a\r\nb\rc\nd", Span::from_millis(1_500)),
            "retry: 1500\nevent: error\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
        );
    }
}
