//! Response headers and bodies: `Retry-After`, IETF `RateLimit-Policy` / `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-11 syntax) and `application/problem+json`.

use crate::limit::{Decision, Quota};
use crate::time::Span;
use alloc::format;
use alloc::string::String;
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
    retry_after: Option<u64>,
}

/// An RFC 9457 problem body (`type` is `about:blank`, so `title` is the status phrase).
pub fn problem(status: u16, title: &str, detail: &str, rule: Option<&str>, retry_after: Option<Span>) -> String {
    let body =
        Problem { kind: "about:blank", title, status, detail, rule, retry_after: retry_after.map(Span::as_secs_ceil) };
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

/// The body answered while the configuration is invalid: it names nothing internal.
pub fn unavailable() -> String {
    problem(503, "Service Unavailable", "The service is not available right now. Try again later.", None, None)
}

/// The reason phrase for the statuses a rule may answer with.
pub fn status_title(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
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
}
