//! Which requests a rule (or a tenants config, or a pre-read source) applies to: the facts a
//! rule reads about a request, and the path, method and host tests.

use crate::edge::identity::Identity;
use alloc::string::String;
use alloc::vec::Vec;

/// The facts about a request that rules read.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    /// The method, as sent.
    pub method: &'a str,
    /// The host name (no port; a trailing dot is ignored).
    pub host: &'a str,
    /// The URL path, normalised by [`normalise_path`](super::normalise_path): rules never see the path as sent.
    pub path: &'a str,
    /// The Cloudflare colo, when known.
    pub colo: Option<&'a str>,
    /// The counted client, when any source held an address.
    pub identity: Option<Identity>,
}

/// Which requests a rule applies to; every given part must match.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Match {
    /// The path tests (any may match); empty means any path.
    pub paths: Vec<PathMatch>,
    /// Upper-case methods; empty means any. A `HEAD` request is the `GET` it stands for:
    /// it meets a list that names `GET` (or `HEAD`).
    pub methods: Vec<String>,
    /// Lower-case host names without a trailing dot; empty means any.
    pub hosts: Vec<String>,
    /// Whether the path test and the `http.request.uri.path` characteristic tell `/API`
    /// from `/api` (default: no, as Express routes case-insensitively).
    pub case_sensitive: bool,
}

/// A path test on the normalised path ([`normalise_path`](super::normalise_path)); the text is stored normalised,
/// so `/café` is `/caf%C3%A9`.
#[derive(Clone, Debug, PartialEq)]
pub enum PathMatch {
    /// The path starts with this (`/api/` matches `/api/x`, not `/api` or `/apix`).
    StartsWith(String),
    /// The path is this, with or without one trailing `/` (routers treat `/a/` as `/a`).
    Equals(String),
}

impl PathMatch {
    /// Whether the normalised `path` passes this test.
    pub fn test(&self, path: &str, case_sensitive: bool) -> bool {
        let same = |a: &[u8], b: &[u8]| if case_sensitive { a == b } else { a.eq_ignore_ascii_case(b) };
        match self {
            PathMatch::StartsWith(prefix) => {
                path.len() >= prefix.len() && same(&path.as_bytes()[..prefix.len()], prefix.as_bytes())
            }
            PathMatch::Equals(exact) => same_path(path, exact, case_sensitive),
        }
    }
}

impl Match {
    /// Whether a request passes every part of this match.
    pub fn matches(&self, facts: &RequestFacts<'_>) -> bool {
        (self.paths.is_empty() || self.paths.iter().any(|p| p.test(facts.path, self.case_sensitive)))
            && (self.methods.is_empty() || self.methods.iter().any(|listed| method_meets(facts.method, listed)))
            && (self.hosts.is_empty() || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host_name(facts.host))))
    }
}

/// Whether a request's `method` meets a `listed` (upper-case) one. A `HEAD` also meets
/// `GET`: Express, Hono, Go's `net/http` and Flask answer a `HEAD` with the `GET` handler,
/// so a limit on `GET` that let `HEAD` past would leave that handler unguarded.
fn method_meets(method: &str, listed: &str) -> bool {
    listed.eq_ignore_ascii_case(method) || (listed == "GET" && method.eq_ignore_ascii_case("HEAD"))
}

/// A method as the `http.request.method` characteristic counts it: upper case, and a
/// `HEAD` as the `GET` it runs (one counter for both).
pub(super) fn counted_method(method: &str) -> impl Iterator<Item = char> + '_ {
    let method = if method.eq_ignore_ascii_case("HEAD") { "GET" } else { method };
    method.chars().map(|c| c.to_ascii_uppercase())
}

/// Whether two normalised paths are one as an `equals` test reads them: with or without one
/// trailing `/`, and ignoring ASCII case unless `case_sensitive`.
pub(super) fn same_path(a: &str, b: &str, case_sensitive: bool) -> bool {
    let (a, b) = (without_trailing_slash(a).as_bytes(), without_trailing_slash(b).as_bytes());
    if case_sensitive {
        a == b
    } else {
        a.eq_ignore_ascii_case(b)
    }
}

/// `path` without one trailing `/`, unless it is the root.
pub(super) fn without_trailing_slash(path: &str) -> &str {
    match path.strip_suffix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => path,
    }
}

/// A host name as rules compare it: without its trailing dot (`example.com.` is the fully
/// qualified spelling of `example.com`).
pub fn host_name(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}
