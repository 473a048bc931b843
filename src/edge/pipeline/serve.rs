//! One request's way through the edge: the stages in the order it meets them ([`Way`]), and
//! the answers the edge gives between them.
//!
//! ```text
//! read ─▶ pre-read ─▶ admin ─▶ egress ─▶ capabilities ─▶ rules ─▶ tenant ─▶ upstream ─▶ origin
//! 400       429       (its routes, when they exist)  200 uncounted  429…  401/413/429  503    502/499
//! ```
//!
//! - **read** ([`read_request`]): a path the edge cannot normalise, or a body whose framing
//!   cannot be trusted, is answered `400` before anything is counted.
//! - **pre-read**: the isolate's checks before a body is read ([`super::preread`]).
//! - **admin**, **egress**: their routes, when their tokens are set (and, for egress, the rules
//!   file has providers); a request to them goes no further.
//! - **capabilities** ([`capabilities`]): a `GET` or `HEAD` of its path is answered by the
//!   edge, counted by no rule: reading the limits never spends them.
//! - **rules** ([`super::rules`]), then the **tenant** ([`super::tenant`]): a request the rules
//!   refuse spends none of its tenant's quota. Then its **upstream** slot
//!   ([`super::upstream`]): the budget is spent only on what the rules and tenant admitted.
//!   Then the **origin** (or the Worker's own handler).
//!
//! The Worker walks the [`Way`] and carries each stage out; the simulator walks the same one
//! over the stages it models.

use super::reply::Reply;
use crate::edge::admission::declared_length;
use crate::edge::headers;
use crate::edge::rules::{normalise_path, RequestFacts, RuleSet};
use alloc::borrow::Cow;
use alloc::format;

/// A stage of the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The isolate's checks before the body is read.
    PreRead,
    /// The admin API of tenant limits.
    Admin,
    /// The app's calls to its providers.
    Egress,
    /// The edge's capabilities answer.
    Capabilities,
    /// The rules file's rules.
    Rules,
    /// The request's tenant.
    Tenant,
    /// The upstream budget's slot.
    Upstream,
    /// The origin, or the Worker's handler.
    Origin,
}

impl Stage {
    /// Every stage, in the order a request meets them.
    pub const ORDER: [Stage; 8] = [
        Stage::PreRead,
        Stage::Admin,
        Stage::Egress,
        Stage::Capabilities,
        Stage::Rules,
        Stage::Tenant,
        Stage::Upstream,
        Stage::Origin,
    ];

    /// Its name, as logs and the simulator's report say it.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::PreRead => "pre-read",
            Stage::Admin => "admin",
            Stage::Egress => "egress",
            Stage::Capabilities => "capabilities",
            Stage::Rules => "rules",
            Stage::Tenant => "tenant",
            Stage::Upstream => "upstream",
            Stage::Origin => "origin",
        }
    }
}

/// Which of the optional routes exist: the admin API (its token set) and the egress routes
/// (their token set and the rules file's providers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// The admin API's token is set.
    pub admin: bool,
    /// The egress token is set.
    pub egress: bool,
}

/// The stages one request meets, in order (see the module's documentation): the next is
/// [`Way::next`]; a stage that answers ends the way.
///
/// # Examples
/// ```
/// use sluicegate::pipeline::serve::{Routes, Stage, Way};
/// use sluicegate::rules::RuleSet;
/// let rules = RuleSet::from_json(r#"{"rules": []}"#).unwrap();
/// let stages: Vec<Stage> = Way::new(&rules, Routes::default()).collect();
/// assert_eq!(stages, [Stage::PreRead, Stage::Capabilities, Stage::Rules, Stage::Tenant, Stage::Upstream, Stage::Origin]);
/// ```
#[derive(Clone, Debug)]
pub struct Way {
    at: usize,
    admin: bool,
    egress: bool,
}

impl Way {
    /// The way through the edge of `rules` with `routes`.
    pub fn new(rules: &RuleSet, routes: Routes) -> Way {
        Way { at: 0, admin: routes.admin, egress: routes.egress && rules.egress().is_some() }
    }

    /// The way through an edge without the admin and egress routes (what the simulator
    /// walks).
    pub fn without_routes() -> Way {
        Way { at: 0, admin: false, egress: false }
    }
}

impl Iterator for Way {
    type Item = Stage;

    fn next(&mut self) -> Option<Stage> {
        while let Some(&stage) = Stage::ORDER.get(self.at) {
            self.at += 1;
            let here = match stage {
                Stage::Admin => self.admin,
                Stage::Egress => self.egress,
                _ => true,
            };
            if here {
                return Some(stage);
            }
        }
        None
    }
}

/// What the edge reads of a request before any stage: the path the rules match (normalised;
/// the origin gets it as it was sent) and the body's declared length.
///
/// # Errors
/// The `400` instead, naming what is wrong: a malformed path, or framing a body cap could not
/// be checked against.
pub fn read_request<'p>(
    raw_path: &'p str,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Result<(Cow<'p, str>, Option<u64>), Reply> {
    let path =
        normalise_path(raw_path).map_err(|why| bad_request(&format!("The request path is malformed: {why}.")))?;
    let declared = declared_length(content_length, transfer_encoding)
        .map_err(|why| bad_request(&format!("The body's framing cannot be trusted: {why}.")))?;
    Ok((path, declared))
}

/// `400` with `detail`.
pub fn bad_request(detail: &str) -> Reply {
    Reply::problem(400, headers::problem(400, "Bad Request", detail, None, None), None)
}

/// `503` while the configuration is invalid (what is wrong goes to the log, not the client).
pub fn unavailable() -> Reply {
    Reply::problem(503, headers::unavailable(), None)
}

/// Whether `facts` asks for the capabilities answer: a `GET` or `HEAD` of its path.
#[inline(always)]
pub fn asks_capabilities(rules: &RuleSet, facts: &RequestFacts<'_>) -> bool {
    let head = facts.method.eq_ignore_ascii_case("HEAD");
    rules.is_capabilities_path(facts.path) && (head || facts.method.eq_ignore_ascii_case("GET"))
}

/// The capabilities answer, when `facts` asks for it ([`asks_capabilities`]): the rules'
/// limits as JSON (`degraded`: how often each rule failed open in this isolate), cacheable
/// for a minute, with no body for a `HEAD`.
pub fn capabilities(rules: &RuleSet, facts: &RequestFacts<'_>, degraded: impl Fn(&str) -> u64) -> Option<Reply> {
    if !asks_capabilities(rules, facts) {
        return None;
    }
    let head = facts.method.eq_ignore_ascii_case("HEAD");
    let body = if head { alloc::string::String::new() } else { rules.capabilities_json(degraded) };
    let mut reply = Reply::new(200, "application/json".into(), body);
    reply.set("cache-control", "public, max-age=60".into());
    Some(reply)
}

/// Whether a request of `method` carries no body the edge reads (`GET`, `HEAD`).
pub fn is_bodiless(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// Whether an admitted request's body is counted as it streams to the origin: it has one,
/// something counts its bytes (its tenant, or the source's bytes per second), and its length
/// is not already what was charged (`framed`: it declared it and the runtime frames the body
/// by it).
pub fn counts_as_it_streams(method: &str, has_body: bool, counts_bytes: bool, framed: bool) -> bool {
    has_body && counts_bytes && !framed && !is_bodiless(method)
}

/// `499`: the client went away before its request was forwarded (nobody reads it; nothing
/// was sent to the origin).
pub fn client_gone() -> Reply {
    Reply::problem(499, headers::problem(499, "Client Closed Request", "", None, None), None)
}

/// `502`: the origin could not be reached.
pub fn origin_failed() -> Reply {
    Reply::problem(502, headers::problem(502, "Bad Gateway", "The origin could not be reached.", None, None), None)
}

/// `502`: the origin answered with an interim `status` where a final answer was due.
pub fn interim(status: u16) -> Reply {
    let detail = format!("The origin answered with an interim {status} response where a final one was due.");
    Reply::problem(502, headers::problem(502, "Bad Gateway", &detail, None, None), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(json: &str) -> RuleSet {
        RuleSet::from_json(json).unwrap()
    }

    const EGRESS: &str = r#"{"rules": [], "egress": {"providers": [{"id": "p", "mirrors": ["https://m.example/"], "max_in_flight": 1}]}}"#;

    #[test]
    fn the_stages_come_in_the_edge_s_order_with_the_routes_that_exist() {
        let all: alloc::vec::Vec<Stage> = Way::new(&rules(EGRESS), Routes { admin: true, egress: true }).collect();
        assert_eq!(all, Stage::ORDER);
        let no_token: alloc::vec::Vec<Stage> =
            Way::new(&rules(EGRESS), Routes { admin: false, egress: false }).collect();
        assert!(!no_token.contains(&Stage::Admin) && !no_token.contains(&Stage::Egress));
        let no_providers: alloc::vec::Vec<Stage> =
            Way::new(&rules(r#"{"rules": []}"#), Routes { admin: false, egress: true }).collect();
        assert!(!no_providers.contains(&Stage::Egress), "a token without providers makes no routes");
        let bare: alloc::vec::Vec<Stage> = Way::without_routes().collect();
        assert_eq!(bare, Way::new(&rules(EGRESS), Routes::default()).collect::<alloc::vec::Vec<_>>());
        let position = |s| Stage::ORDER.iter().position(|&o| o == s).unwrap();
        assert!(position(Stage::Rules) < position(Stage::Tenant), "a refused request spends no tenant quota");
        assert!(position(Stage::Tenant) < position(Stage::Upstream), "nor an upstream slot");
        assert!(position(Stage::Capabilities) < position(Stage::Rules), "reading the limits spends none");
    }

    #[test]
    fn a_request_the_edge_cannot_read_is_400_naming_what_is_wrong() {
        assert_eq!(read_request("/a/../b", None, None).unwrap(), (Cow::Borrowed("/b"), None));
        assert_eq!(read_request("/x", Some("12"), None).unwrap().1, Some(12));
        let framing = read_request("/x", Some("12"), Some("chunked")).unwrap_err();
        assert_eq!(framing.status, 400);
        assert!(framing.body.contains("framing"), "{}", framing.body);
        let path = read_request("/%zz", None, None).unwrap_err();
        assert_eq!(path.status, 400);
        assert!(path.body.contains("path"), "{}", path.body);
    }

    #[test]
    fn the_capabilities_answer_is_a_get_or_head_of_its_path_and_a_head_has_no_body() {
        let set = rules(
            r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10, "requests_per_period": 5}]}"#,
        );
        let facts = |method, path| RequestFacts { method, host: "h", path, colo: None, identity: None };
        let path = set.capabilities_path().expect("served by default");
        let get = capabilities(&set, &facts("GET", path), |_| 0).unwrap();
        assert_eq!((get.status, get.header("cache-control")), (200, Some("public, max-age=60")));
        assert!(get.body.contains("\"api\""), "{}", get.body);
        assert!(capabilities(&set, &facts("HEAD", path), |_| 0).unwrap().body.is_empty());
        assert!(capabilities(&set, &facts("POST", path), |_| 0).is_none());
        assert!(capabilities(&set, &facts("GET", "/api/x"), |_| 0).is_none());
    }

    #[test]
    fn a_body_is_counted_as_it_streams_only_when_what_was_charged_is_not_its_length() {
        assert!(counts_as_it_streams("POST", true, true, false));
        assert!(!counts_as_it_streams("POST", true, true, true), "framed by its declared length");
        assert!(!counts_as_it_streams("POST", true, false, false), "nothing counts its bytes");
        assert!(!counts_as_it_streams("GET", true, true, false));
        assert!(!counts_as_it_streams("post", false, true, false));
        assert_eq!(
            (client_gone().status, origin_failed().status, interim(103).status, unavailable().status),
            (499, 502, 502, 503)
        );
    }
}
