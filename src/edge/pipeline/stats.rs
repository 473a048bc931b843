//! The edge's operator routes, when the secret `SLUICEGATE_ADMIN_TOKEN` is set:
//! `GET /__sluicegate/stats?since=&rule=`, the decisions counted per minute
//! ([`crate::edge::analytics`]), behind the token; and the dashboard that charts them,
//! `/__sluicegate/dashboard` and the files beside it ([`ASSETS`]), static pages that ask for
//! the token themselves. Which path is which route, what a query asks and what each answers
//! are here; the Worker reads the counts from their store and the files from its bundle.
//!
//! Every path under [`PREFIX`] is the edge's while the token is set (`404` when no route
//! matches): none reaches the origin.

use super::reply::Reply;
use crate::edge::analytics::{Stats, MINUTE_MS, RETENTION_MINUTES};
use crate::edge::headers;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;

/// Where the edge's own operator routes live.
pub const PREFIX: &str = "/__sluicegate";
/// What a query covers when it says no `since`: the last hour.
pub const DEFAULT_SPAN_MS: u64 = 60 * MINUTE_MS;
/// What a `503` says when the stats cannot be read.
pub const CANNOT_READ: &str = "The stats store cannot be reached right now; the counts are kept, try again.";

/// The dashboard's files, by their name after `/__sluicegate/`.
pub const ASSETS: [&str; 5] = ["dashboard", "dashboard.js", "dashboard.css", "uplot.js", "uplot.css"];

/// An operator route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/__sluicegate/stats`.
    Stats,
    /// One of the dashboard's files ([`ASSETS`]).
    Asset(&'static str),
    /// Any other path under [`PREFIX`].
    Unknown,
}

/// The operator route of the normalised `path`, if it is under [`PREFIX`] (in any case).
pub fn route(path: &str) -> Option<Route> {
    let rest = strip_prefix_ignoring_case(path, PREFIX)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None; // `/__sluicegatex` is not ours
    }
    let name = rest.strip_prefix('/').unwrap_or(rest);
    let name = name.strip_suffix('/').unwrap_or(name);
    Some(if name.eq_ignore_ascii_case("stats") {
        Route::Stats
    } else if let Some(asset) = ASSETS.iter().find(|a| a.eq_ignore_ascii_case(name)) {
        Route::Asset(asset)
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
    /// Answer the dashboard's file of this name ([`asset`]).
    Asset(&'static str),
    /// Answer this.
    Answer(Reply),
}

/// What a `method` request to `route` does at `now_ms`, with the query's `since` (ms since
/// the epoch; default the last hour, and never before the retention) and `rule` (a subject's
/// name) as sent, each decoded.
pub fn action<'a>(route: Route, method: &str, since: Option<&str>, rule: Option<&'a str>, now_ms: u64) -> Action<'a> {
    let read = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    match route {
        Route::Unknown => Action::Answer(problem(
            404,
            "Not Found",
            "Not an operator route: the stats are at /__sluicegate/stats, the dashboard at /__sluicegate/dashboard.",
        )),
        Route::Stats | Route::Asset(_) if !read => {
            let mut reply = problem(405, "Method Not Allowed", "");
            reply.set("allow", "GET, HEAD".to_owned());
            Action::Answer(reply)
        }
        Route::Asset(name) => Action::Asset(name),
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

/// The answer with a dashboard file: `found` is its content type and text, `None` when this
/// build has no dashboard (`404`). The page may load only its own files and call only this
/// edge (its Content-Security-Policy), and is never framed.
pub fn asset(found: Option<(String, String)>) -> Reply {
    let Some((content_type, body)) = found else {
        return problem(404, "Not Found", "This build of the edge carries no dashboard.");
    };
    let mut reply = Reply::new(200, content_type, body);
    reply.set("cache-control", "no-cache".to_owned());
    reply.set("x-content-type-options", "nosniff".to_owned());
    reply.set(
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
            .to_owned(),
    );
    reply.set("referrer-policy", "no-referrer".to_owned());
    reply
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
        assert_eq!(route("/__sluicegate/dashboard"), Some(Route::Asset("dashboard")));
        assert_eq!(route("/__sluicegate/Dashboard/"), Some(Route::Asset("dashboard")));
        assert_eq!(route("/__sluicegate/uplot.js"), Some(Route::Asset("uplot.js")));
        assert_eq!(route("/__sluicegate/uplot.jsx"), Some(Route::Unknown));
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
            other => panic!("{other:?}"),
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
    fn the_dashboard_files_are_read_only_and_the_page_loads_nothing_from_elsewhere() {
        assert_eq!(action(Route::Asset("dashboard"), "GET", None, None, NOW), Action::Asset("dashboard"));
        let Action::Answer(post) = action(Route::Asset("dashboard"), "POST", None, None, NOW) else { panic!() };
        assert_eq!((post.status, post.header("allow")), (405, Some("GET, HEAD")));
        let page = asset(Some(("text/html; charset=utf-8".into(), "<!doctype html>".into())));
        assert_eq!((page.status, page.body.as_str()), (200, "<!doctype html>"));
        let csp = page.header("content-security-policy").unwrap();
        assert!(
            csp.contains("default-src 'none'")
                && csp.contains("connect-src 'self'")
                && csp.contains("frame-ancestors 'none'")
        );
        assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(asset(None).status, 404);
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
