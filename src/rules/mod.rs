//! Edge rules, shaped like Cloudflare's rate limiting rules: which requests a rule
//! matches, what it counts them by (`characteristics`), and what it allows.
//!
//! A rules file is JSON, validated once by [`RuleSet::from_json`]; every problem is
//! reported with the rule, the field and what is allowed. Past that step a [`RuleSet`]
//! cannot be invalid.
//!
//! ```json
//! { "rules": [ {
//!     "id": "api",
//!     "match": { "path": { "starts_with": "/api/" } },
//!     "characteristics": ["ip.src", "cf.colo.id"],
//!     "period": 10, "requests_per_period": 20, "mitigation_timeout": 10
//! } ] }
//! ```

mod parse;
mod path;

pub use parse::{RuleError, MAX_RULES};
pub use path::{normalise_path, PathError};

use crate::headers;
use crate::identity::Identity;
use crate::limit::{Blocking, CostTooHigh, Decision, FixedWindow, Gcra, Limiter, Quota, SlidingLog, SlidingWindow};
use crate::time::{Instant, Span};
use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// A validated set of rules, in evaluation order.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

/// One validated rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Its identifier: the policy name in headers, bodies and logs.
    pub id: String,
    /// Free text.
    pub description: Option<String>,
    /// Which requests it applies to.
    pub matcher: Match,
    /// What requests are counted by; one counter per distinct combination.
    pub characteristics: Vec<Characteristic>,
    /// How they are counted.
    pub algorithm: Algorithm,
    /// How long a key is blocked after its first refusal (zero: no block).
    pub mitigation_timeout: Span,
    /// What a refusal answers.
    pub response: Response,
}

/// Which requests a rule applies to; every given part must match.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Match {
    /// The path test, if any.
    pub path: Option<PathMatch>,
    /// Upper-case methods; empty means any.
    pub methods: Vec<String>,
    /// Lower-case host names without a trailing dot; empty means any.
    pub hosts: Vec<String>,
    /// Whether the path test and the `http.request.uri.path` characteristic tell `/API`
    /// from `/api` (default: no, as Express routes case-insensitively).
    pub case_sensitive: bool,
}

/// A path test on the normalised path ([`normalise_path`]); the text is stored normalised,
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
            PathMatch::Equals(exact) => {
                same(without_trailing_slash(path).as_bytes(), without_trailing_slash(exact).as_bytes())
            }
        }
    }
}

/// `path` without one trailing `/`, unless it is the root.
fn without_trailing_slash(path: &str) -> &str {
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

/// A counting dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Characteristic {
    /// `ip.src`: the client identity (IPv6 by /64).
    IpSrc,
    /// `cf.colo.id`: the Cloudflare data center that received the request.
    ColoId,
    /// `http.host`.
    Host,
    /// `http.request.method`.
    Method,
    /// `http.request.uri.path`.
    Path,
    /// `http.request.headers["name"]` (name lower-cased).
    Header(String),
}

impl Characteristic {
    /// The Cloudflare field name.
    pub fn name(&self) -> Cow<'_, str> {
        match self {
            Characteristic::IpSrc => "ip.src".into(),
            Characteristic::ColoId => "cf.colo.id".into(),
            Characteristic::Host => "http.host".into(),
            Characteristic::Method => "http.request.method".into(),
            Characteristic::Path => "http.request.uri.path".into(),
            Characteristic::Header(name) => alloc::format!("http.request.headers[\"{name}\"]").into(),
        }
    }
}

/// How a rule counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// Exact rolling count ([`SlidingLog`]): `requests_per_period` in any `period`.
    SlidingLog {
        /// Requests allowed per period.
        requests_per_period: u32,
        /// The period.
        period: Span,
    },
    /// Clock-aligned windows ([`FixedWindow`]).
    FixedWindow {
        /// Requests allowed per window.
        requests_per_period: u32,
        /// The window.
        period: Span,
    },
    /// Cloudflare's weighted estimate ([`SlidingWindow`]).
    SlidingWindow {
        /// Requests allowed per period.
        requests_per_period: u32,
        /// The period.
        period: Span,
    },
    /// A token bucket ([`Gcra`]): `rate` per second, at most `burst` back to back.
    TokenBucket {
        /// One token every `interval`.
        interval: Span,
        /// Bucket size.
        burst: u32,
    },
}

impl Algorithm {
    /// A fresh counter of this kind (one per counting key).
    pub fn limiter(&self) -> AnyLimiter {
        let inner = match *self {
            Algorithm::SlidingLog { requests_per_period, period } => {
                SlidingLog::new(u64::from(requests_per_period), period).map(AnyLimiter::SlidingLog)
            }
            Algorithm::FixedWindow { requests_per_period, period } => {
                FixedWindow::new(u64::from(requests_per_period), period).map(AnyLimiter::FixedWindow)
            }
            Algorithm::SlidingWindow { requests_per_period, period } => {
                SlidingWindow::new(u64::from(requests_per_period), period).map(AnyLimiter::SlidingWindow)
            }
            Algorithm::TokenBucket { interval, burst } => Ok(AnyLimiter::Gcra(Gcra::with_interval(burst, interval))),
        };
        // Validation guarantees non-zero limits and periods; a token bucket of one is the
        // conservative stand-in should that ever not hold.
        inner.unwrap_or_else(|_| AnyLimiter::Gcra(Gcra::with_interval(1, Span::from_secs(1))))
    }
}

/// What a refusal answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The status code (429 unless configured).
    pub status: u16,
    /// A configured body and its content type; `None` for the default problem+json body.
    pub body: Option<(String, String)>,
}

/// A rule's limiter for one counting key.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyLimiter {
    /// See [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// See [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// See [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
    /// See [`Gcra`].
    Gcra(Gcra),
}

macro_rules! dispatch {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            AnyLimiter::SlidingLog($l) => $e,
            AnyLimiter::FixedWindow($l) => $e,
            AnyLimiter::SlidingWindow($l) => $e,
            AnyLimiter::Gcra($l) => $e,
        }
    };
}

impl Limiter for AnyLimiter {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        dispatch!(self, l => l.check(now, cost))
    }
    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        dispatch!(self, l => l.peek(now, cost))
    }
    fn quota(&self) -> Quota {
        dispatch!(self, l => l.quota())
    }
    fn full_at(&self) -> Instant {
        dispatch!(self, l => l.full_at())
    }
    fn reset(&mut self) {
        dispatch!(self, l => l.reset())
    }
}

/// The facts about a request that rules read.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    /// The method, as sent.
    pub method: &'a str,
    /// The host name (no port; a trailing dot is ignored).
    pub host: &'a str,
    /// The URL path, normalised by [`normalise_path`]: rules never see the path as sent.
    pub path: &'a str,
    /// The Cloudflare colo, when known.
    pub colo: Option<&'a str>,
    /// The counted client, when any source held an address.
    pub identity: Option<Identity>,
}

impl RuleSet {
    /// Parse and validate a rules file.
    ///
    /// # Errors
    /// Every problem found, each naming the rule, the field and what is allowed.
    pub fn from_json(text: &str) -> Result<RuleSet, Vec<RuleError>> {
        parse::rule_set(text)
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with this id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The rules that apply to a request, in order.
    pub fn matching<'s, 'r>(&'s self, facts: &'r RequestFacts<'r>) -> impl Iterator<Item = &'s Rule> + 'r
    where
        's: 'r,
    {
        self.rules.iter().filter(move |rule| rule.matches(facts))
    }
}

/// A placeholder for a characteristic whose value the request does not carry; all such
/// requests share one counter (fail closed rather than uncounted).
pub const UNKNOWN: &str = "unknown";

impl Rule {
    /// Whether this rule applies to the request.
    pub fn matches(&self, facts: &RequestFacts<'_>) -> bool {
        let m = &self.matcher;
        m.path.as_ref().is_none_or(|p| p.test(facts.path, m.case_sensitive))
            && (m.methods.is_empty() || m.methods.iter().any(|x| x.eq_ignore_ascii_case(facts.method)))
            && (m.hosts.is_empty() || m.hosts.iter().any(|h| h.eq_ignore_ascii_case(host_name(facts.host))))
    }

    /// The counting key of a request: the rule id and the value of each characteristic,
    /// e.g. `api|ip.src=198.51.100.7|cf.colo.id=AMS`. `header` looks a request header up
    /// by its lower-case name.
    pub fn counting_key(&self, facts: &RequestFacts<'_>, header: impl Fn(&str) -> Option<String>) -> String {
        let mut key = String::with_capacity(64);
        key.push_str(&self.id);
        for c in &self.characteristics {
            key.push('|');
            key.push_str(&c.name());
            key.push('=');
            match c {
                Characteristic::IpSrc => match facts.identity {
                    Some(id) => {
                        let _ = write!(key, "{}", id.ip);
                    }
                    None => key.push_str(UNKNOWN),
                },
                Characteristic::ColoId => key.push_str(facts.colo.unwrap_or(UNKNOWN)),
                Characteristic::Host => key.extend(host_name(facts.host).chars().map(|c| c.to_ascii_lowercase())),
                Characteristic::Method => key.extend(facts.method.chars().map(|c| c.to_ascii_uppercase())),
                Characteristic::Path => {
                    // The path as the rule matches it: one counter for every spelling.
                    let path = without_trailing_slash(facts.path);
                    if self.matcher.case_sensitive {
                        key.push_str(path);
                    } else {
                        key.extend(path.chars().map(|c| c.to_ascii_lowercase()));
                    }
                }
                Characteristic::Header(name) => key.push_str(header(name).as_deref().unwrap_or(UNKNOWN)),
            }
        }
        key
    }

    /// A fresh limiter for one counting key of this rule.
    pub fn limiter(&self) -> Blocking<AnyLimiter> {
        Blocking::new(self.algorithm.limiter(), self.mitigation_timeout)
    }

    /// The quota this rule advertises.
    pub fn quota(&self) -> Quota {
        self.limiter().quota()
    }

    /// `RateLimit-Policy` for this rule.
    pub fn policy_header(&self) -> String {
        headers::ratelimit_policy(&self.id, self.quota())
    }

    /// The status, content type and body of a refusal that must wait `wait`.
    pub fn refusal(&self, wait: Span) -> (u16, String, String) {
        match &self.response.body {
            Some((content_type, body)) => (self.response.status, content_type.clone(), body.clone()),
            None => (
                self.response.status,
                String::from(headers::PROBLEM_JSON),
                headers::rate_limited(self.response.status, &self.id, self.quota(), wait),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
