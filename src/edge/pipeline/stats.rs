//! The edge's stats route: `GET /__sluicegate/stats?since=&rule=`, the decisions counted per
//! minute ([`crate::edge::analytics`]), when the secret `SLUICEGATE_ADMIN_TOKEN` is set and
//! behind it. Which path is the route, what its query asks and what it answers are here; the
//! Worker reads the counts from their store.
//!
//! Every path under [`PREFIX`] is the edge's while the token is set (`404` when no route
//! matches): none reaches the origin.

use super::reply::Reply;
use crate::edge::analytics::{Stats, MINUTE_MS, RETENTION_MINUTES};
use crate::edge::headers;
use alloc::borrow::ToOwned;
use alloc::format;

/// Where the edge's own operator routes live.
pub const PREFIX: &str = "/__sluicegate";
/// What a query covers when it says no `since`: the last hour.
pub const DEFAULT_SPAN_MS: u64 = 60 * MINUTE_MS;
/// What a `503` says when the stats cannot be read.
pub const CANNOT_READ: &str = "The stats store cannot be reached right now; the counts are kept, try again.";

/// An operator route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/__sluicegate/stats`.
    Stats,
    /// Any other path under [`PREFIX`].
    Unknown,
}

/// The operator route of the normalised `path`, if it is under [`PREFIX`] (in any case).
pub fn route(path: &str) -> Option<Route> {
    let rest = strip_prefix_ignoring_case(path, PREFIX)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None; // `/__sluicegatex` is not ours
    }
    Some(if rest.eq_ignore_ascii_case("/stats") || rest.eq_ignore_ascii_case("/stats/") {
        Route::Stats
    } else {
        Route::Unknown
    })
}

fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let (head, rest) = (text.get(..prefix.len())?, text.get(prefix.len()..)?);
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

/// What a stats request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query<'a> {
    /// From (ms since the epoch).
    pub since_ms: u64,
    /// To (now).
    pub until_ms: u64,
    /// The subject named so alone (a rule's id, a tenant, a budget), when given.
    pub name: Option<&'a str>,
}

/// What a request to an operator route does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// Read the stats this query asks for from their store, and answer [`answer`].
    Stats(Query<'a>),
    /// Answer this.
    Answer(Reply),
}

/// What a `method` request to `route` does at `now_ms`, with the query's `since` (ms since
/// the epoch; default the last hour, and never before the retention) and `rule` (a subject's
/// name) as sent, each decoded.
pub fn action<'a>(route: Route, method: &str, since: Option<&str>, rule: Option<&'a str>, now_ms: u64) -> Action<'a> {
    match route {
        Route::Unknown => {
            Action::Answer(problem(404, "Not Found", "Not an operator route: the stats are at /__sluicegate/stats."))
        }
        Route::Stats if !method.eq_ignore_ascii_case("GET") && !method.eq_ignore_ascii_case("HEAD") => {
            let mut reply = problem(405, "Method Not Allowed", "");
            reply.set("allow", "GET, HEAD".to_owned());
            Action::Answer(reply)
        }
        Route::Stats => {
            let oldest = now_ms.saturating_sub(RETENTION_MINUTES * MINUTE_MS);
            let since_ms = match since.map(str::trim) {
                None | Some("") => now_ms.saturating_sub(DEFAULT_SPAN_MS),
                Some(text) => match text.parse::<u64>() {
                    Ok(ms) => ms,
                    Err(_) => {
                        return Action::Answer(bad_request(
                            "since",
                            &format!(
                                "must be a time in ms since the epoch (e.g. {}), got {}",
                                now_ms - DEFAULT_SPAN_MS,
                                brief(text)
                            ),
                        ))
                    }
                },
            };
            match rule {
                Some(name) if name.is_empty() || name.len() > 128 => {
                    Action::Answer(bad_request("rule", "must name a rule, tenant or budget: 1–128 bytes"))
                }
                name => Action::Stats(Query { since_ms: since_ms.max(oldest), until_ms: now_ms, name }),
            }
        }
    }
}

/// The answer to a stats request: `200` with the counts as JSON, never stored by a cache.
pub fn answer(stats: &Stats) -> Reply {
    Reply::json(200, stats.to_json())
}

/// The answer when the stats cannot be read: `503`, try again in a second.
pub fn unavailable() -> Reply {
    Reply::problem(
        503,
        headers::coded_problem(503, CANNOT_READ, "store_unavailable"),
        Some(crate::core::time::Span::from_secs(1)),
    )
}

fn problem(status: u16, title: &str, detail: &str) -> Reply {
    Reply::problem(status, headers::problem(status, title, detail, None, None), None)
}

fn bad_request(param: &str, message: &str) -> Reply {
    super::serve::bad_request(&format!("query parameter \"{param}\": {message}"))
}

/// At most 64 characters of `text`, for a message.
fn brief(text: &str) -> alloc::string::String {
    let mut out: alloc::string::String = text.chars().take(64).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    super::reply::quoted(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::analytics::{Kind, Minutes, Outcome, Recorder};

    const NOW: u64 = 1_780_000_000_000;

    #[test]
    fn the_route_is_under_its_prefix_in_any_case_and_nothing_else_is() {
        assert_eq!(route("/__sluicegate/stats"), Some(Route::Stats));
        assert_eq!(route("/__SluiceGate/STATS/"), Some(Route::Stats));
        assert_eq!(route("/__sluicegate"), Some(Route::Unknown));
        assert_eq!(route("/__sluicegate/stats/x"), Some(Route::Unknown));
        assert_eq!(route("/__sluicegatex/stats"), None);
        assert_eq!(route("/api/__sluicegate/stats"), None);
    }

    #[test]
    fn a_query_defaults_to_the_last_hour_and_never_reaches_past_the_retention() {
        let Action::Stats(q) = action(Route::Stats, "GET", None, None, NOW) else { panic!() };
        assert_eq!(q, Query { since_ms: NOW - DEFAULT_SPAN_MS, until_ms: NOW, name: None });
        let Action::Stats(q) = action(Route::Stats, "head", Some("0"), Some("api"), NOW) else { panic!() };
        assert_eq!((q.since_ms, q.name), (NOW - RETENTION_MINUTES * MINUTE_MS, Some("api")));
    }

    #[test]
    fn a_bad_query_or_method_is_answered_naming_what_was_wrong() {
        let refused = |since: Option<&str>, rule: Option<&str>, method: &str| match action(
            Route::Stats,
            method,
            since,
            rule,
            NOW,
        ) {
            Action::Answer(reply) => (reply.status, reply.body),
            Action::Stats(q) => panic!("{q:?}"),
        };
        let (status, body) = refused(Some("yesterday"), None, "GET");
        assert_eq!(status, 400);
        assert!(body.contains(r#"query parameter \"since\": must be a time in ms since the epoch"#), "{body}");
        assert!(body.contains(r#"got \"yesterday\""#), "{body}");
        let (status, body) = refused(None, Some(""), "GET");
        assert_eq!(status, 400);
        assert!(body.contains(r#"query parameter \"rule\""#), "{body}");
        assert_eq!(refused(None, None, "POST").0, 405);
        let Action::Answer(not_ours) = action(Route::Unknown, "GET", None, None, NOW) else { panic!() };
        assert_eq!(not_ours.status, 404);
    }

    #[test]
    fn the_answer_is_the_stats_as_json_not_stored_by_caches() {
        let mut recorder = Recorder::default();
        recorder.record(NOW, Kind::Rule, "api", Outcome::Refused, Some("203.0.113.7"));
        let mut store = Minutes::default();
        store.merge(&recorder.take(), NOW);
        let reply = answer(&store.query(NOW - MINUTE_MS, NOW, None));
        assert_eq!((reply.status, reply.header("cache-control")), (200, Some("no-store")));
        assert!(reply.body.contains(r#""name":"api""#) && reply.body.contains(r#""refused":1"#), "{}", reply.body);
        let down = unavailable();
        assert_eq!((down.status, down.header("retry-after")), (503, Some("1")));
        assert!(down.body.contains("store_unavailable"));
    }
}
