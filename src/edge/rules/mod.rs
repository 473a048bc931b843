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

mod binding;
mod log;
pub(crate) mod matching;
mod parse;
mod path;
mod summary;

pub use crate::edge::enforce::{Enforce, RuleOverride, RuleOverrides};
pub use crate::edge::scope::BudgetScope;
pub use binding::{ratelimits_toml, WithoutBinding};
pub use log::{Analytics, DecisionLog, LoggedDecisions};
use matching::{counted_method, same_path, without_trailing_slash};
pub use matching::{host_name, Match, PathMatch, RequestFacts};

pub use crate::edge::json::RuleError;
pub use parse::{
    DEFAULT_CAPABILITIES_PATH, DEFAULT_EGRESS_PREFIX, DEFAULT_SOURCE_BYTES_PER_SECOND, MAX_DESCRIPTION_BYTES,
    MAX_HEADER_BYTES, MAX_PATH_BYTES, MAX_PROVIDERS, MAX_RESPONSE_BYTES, MAX_RULES, MAX_SOURCES, MAX_TRUSTED_PROXIES,
    MAX_UPSTREAMS,
};
pub use path::{normalise_path, PathError};

use crate::core::limit::{
    Blocking, CostTooHigh, Decision, FixedWindow, Gcra, Limiter, Quota, SaveState, SlidingLog, SlidingWindow,
};
use crate::core::time::{Instant, Span};
use crate::edge::headers;
use crate::edge::identity::TrustedProxies;
use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// A validated rules file: the rules in evaluation order, the upstream budgets, and where
/// the capabilities answer is served.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    upstreams: Vec<Upstream>,
    capabilities: Option<String>,
    pre_read: PreRead,
    tenants: Option<crate::edge::tenants::Tenants>,
    headers_read: Vec<String>,
    egress: Option<crate::edge::egress::Egress>,
    trusted_proxies: TrustedProxies,
    log: DecisionLog,
    analytics: Analytics,
    /// The rules whose `on_store_failure` is `"open"` in the file (not by default).
    open_by_choice: Vec<String>,
}

/// The checks made before a request's body is read (`"pre_read"`), in this order; they
/// protect the edge itself, not a quota (see [`crate::edge::admission`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PreRead {
    /// Requests per client address (IPv6 by /64), in a fixed table of salted slots.
    pub per_ip: Option<Gcra>,
    /// Requests for the whole isolate.
    pub node: Option<Gcra>,
    /// Body bytes per second per source, up to one second's worth back to back:
    /// [`DEFAULT_SOURCE_BYTES_PER_SECOND`] unless the file says otherwise, `None` when it
    /// turns the ceiling off (`null`).
    pub source_bytes_per_second: Option<u64>,
    /// Named groups of requests, each a source; a request in none is its host's.
    pub sources: Vec<Source>,
}

/// A named group of requests whose body bytes are counted together.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// The source's name, in headers and logs.
    pub id: String,
    /// Which requests belong to it.
    pub matcher: Match,
}

impl Default for PreRead {
    /// What a file without `pre_read` gets: only the default ceiling of body bytes per source.
    fn default() -> Self {
        PreRead {
            per_ip: None,
            node: None,
            source_bytes_per_second: Some(DEFAULT_SOURCE_BYTES_PER_SECOND),
            sources: Vec::new(),
        }
    }
}

impl PreRead {
    /// Whether any check is configured.
    pub fn is_empty(&self) -> bool {
        self.per_ip.is_none() && self.node.is_none() && self.source_bytes_per_second.is_none()
    }

    /// The source a request's bytes are counted under: the first named source that matches,
    /// else the host (without a trailing dot).
    pub fn source_of<'a>(&'a self, facts: &RequestFacts<'a>) -> &'a str {
        self.sources.iter().find(|s| s.matcher.matches(facts)).map_or(host_name(facts.host), |s| s.id.as_str())
    }
}

/// A budget on what may be in flight at once against one upstream: requests it matches
/// wait for one of `max_in_flight` slots, first come first served, at most `max_wait`.
#[derive(Clone, Debug, PartialEq)]
pub struct Upstream {
    /// Its identifier, named in headers, bodies and logs.
    pub id: String,
    /// Free text.
    pub description: Option<String>,
    /// Which requests go to this upstream.
    pub matcher: Match,
    /// How many requests may be at the upstream at once.
    pub max_in_flight: u32,
    /// How long a request may wait for a slot before it is shed (default 30 s).
    pub max_wait: Span,
    /// Where the count is kept.
    pub scope: BudgetScope,
    /// For `fleet` scope: how long a slot is held without being renewed, so that a slot of
    /// an isolate that died holding it comes back.
    pub lease: Span,
    /// Whether the capabilities answer lists it.
    pub public: bool,
}

/// What a rule does when its count cannot be read (its Durable Object is unreachable or
/// answers an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFailure {
    /// Admit the request, marked as degraded.
    Open,
    /// Refuse it with 503.
    Closed,
}

impl StoreFailure {
    /// The default: open for a rule counted by `ip.src` (a per-client flood guard: failing
    /// closed would turn a store outage into a full outage for every client), closed
    /// otherwise (a rule keyed by an API key, a tenant or a route guards a budget that must
    /// not be overspent).
    pub fn default_for(characteristics: &[Characteristic]) -> Self {
        if characteristics.contains(&Characteristic::IpSrc) {
            StoreFailure::Open
        } else {
            StoreFailure::Closed
        }
    }

    /// The name in the rules file.
    pub const fn name(self) -> &'static str {
        match self {
            StoreFailure::Open => "open",
            StoreFailure::Closed => "closed",
        }
    }
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
    /// What happens when its count cannot be read.
    pub on_store_failure: StoreFailure,
    /// Where its counts are kept.
    pub store: Store,
    /// How much of its refusals are enforced (`true`, shadow, or a share of its keys);
    /// the admin API may override it at runtime.
    pub enforce: Enforce,
    /// Whether the capabilities answer lists it.
    pub public: bool,
}

/// Where a rule's counts are kept (`"store"`): the rules stage asks the key's Durable Object,
/// asks a Workers Rate Limiting binding, or counts in the isolate itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Store {
    /// `"durable_object"` (the default): one Durable Object per counting key. Exact across
    /// every isolate and location; each counted request pays a round trip to the object.
    DurableObject,
    /// `"cloudflare"`: the Workers Rate Limiting binding `binding` of the Worker's `env`,
    /// asked with the counting key. Decided in the request's location with no round trip
    /// beyond it, approximately (Cloudflare counts per location, eventually consistent); it
    /// answers only whether the request is within the limit, so no `remaining` is known.
    /// Its period is 10 or 60 s; a `mitigation_timeout` is held by each isolate's block
    /// cache, since the binding has no block.
    Cloudflare {
        /// The binding's name in `env` (`[[ratelimits]] name` in wrangler.toml).
        binding: String,
    },
    /// `"isolate"`: the core's keyed limiter in this isolate's memory. No round trip; each
    /// isolate counts alone, so N isolates admit up to N × the limit. Its table holds at
    /// most `max_keys` keys, its share of [`ISOLATE_STORE_BYTES`]: a flood of invented keys
    /// cannot grow it (a new key finds it full of busy keys only while they are counting,
    /// and is then answered as the rule's `on_store_failure` says).
    Isolate {
        /// The most keys its table holds.
        max_keys: usize,
    },
}

impl Store {
    /// Its name in the rules file.
    pub fn name(&self) -> &'static str {
        match self {
            Store::DurableObject => "durable_object",
            Store::Cloudflare { .. } => "cloudflare",
            Store::Isolate { .. } => "isolate",
        }
    }

    /// Where a key's count holds: `fleet` (every isolate and location), `location` (one
    /// Cloudflare location) or `isolate`.
    pub fn scope(&self) -> &'static str {
        match self {
            Store::DurableObject => "fleet",
            Store::Cloudflare { .. } => "location",
            Store::Isolate { .. } => "isolate",
        }
    }
}

/// The most memory one key of a rule counted in the isolate may take: its table entry (the
/// key's 128-bit digest and its counter, at a hash table's worst load) and, for an exact
/// rolling count, its log of requests at full capacity.
pub fn isolate_key_bytes(algorithm: &Algorithm) -> usize {
    let entry = 2 * (core::mem::size_of::<(crate::edge::redact::Digest, Blocking<AnyLimiter>)>() + 1);
    let log = match algorithm {
        Algorithm::SlidingLog { requests_per_period, .. } => {
            (*requests_per_period as usize).next_power_of_two() * core::mem::size_of::<(Instant, u32)>()
        }
        _ => 0,
    };
    entry + log
}

/// The memory the isolate store's tables may take in one isolate, shared evenly by the
/// rules counted there (an isolate has 128 MB in all).
pub const ISOLATE_STORE_BYTES: usize = 16 << 20;
/// The most keys one rule's isolate table holds, however small its counters.
pub const MAX_ISOLATE_KEYS: usize = 100_000;

/// A counting dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Characteristic {
    /// `ip.src`: the client identity (IPv6 by /64).
    IpSrc,
    /// `cf.colo.id`: the Cloudflare data center that received the request.
    ColoId,
    /// `http.host`.
    Host,
    /// `http.request.method` (a `HEAD` is counted as `GET`).
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

impl AnyLimiter {
    fn tag(&self) -> u64 {
        match self {
            AnyLimiter::SlidingLog(_) => 1,
            AnyLimiter::FixedWindow(_) => 2,
            AnyLimiter::SlidingWindow(_) => 3,
            AnyLimiter::Gcra(_) => 4,
        }
    }
}

impl SaveState for AnyLimiter {
    /// Which algorithm, then its state.
    fn save(&self, out: &mut Vec<u64>) {
        out.push(self.tag());
        dispatch!(self, l => l.save(out))
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        if words.next()? != self.tag() {
            return None;
        }
        dispatch!(self, l => l.restore(words))
    }
}

/// A rule's counter for one key as bytes (little-endian words), for storage.
pub fn save_counter(counter: &Blocking<AnyLimiter>) -> Vec<u8> {
    let mut words = Vec::new();
    counter.save(&mut words);
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Take a counter's state back from `bytes` (as [`save_counter`] wrote them); `false`, and
/// the counter unchanged, when they do not describe this rule's kind of counter.
pub fn restore_counter(counter: &mut Blocking<AnyLimiter>, bytes: &[u8]) -> bool {
    if bytes.len() % 8 != 0 {
        return false;
    }
    let mut words = bytes.chunks_exact(8).map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    let mut trial = counter.clone();
    if trial.restore(&mut words).is_some() && words.next().is_none() {
        *counter = trial;
        true
    } else {
        false
    }
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

    /// The upstream budgets, in file order.
    pub fn upstreams(&self) -> &[Upstream] {
        &self.upstreams
    }

    /// The first upstream budget a request goes to, if any.
    pub fn upstream_for(&self, facts: &RequestFacts<'_>) -> Option<&Upstream> {
        self.upstreams.iter().find(|u| u.matcher.matches(facts))
    }

    /// The checks made before the body is read.
    pub fn pre_read(&self) -> &PreRead {
        &self.pre_read
    }

    /// The proxies whose `X-Forwarded-For` hops are believed (`trusted_proxies`; empty when
    /// the file names none): pass them to
    /// [`client_identity_behind`](crate::edge::identity::client_identity_behind).
    pub fn trusted_proxies(&self) -> &TrustedProxies {
        &self.trusted_proxies
    }

    /// Which decisions get a log line, and the share of them written (`log`; every decision
    /// when the file has no `log`).
    pub fn decision_log(&self) -> &DecisionLog {
        &self.log
    }

    /// Whether decisions are counted for the stats, and how refused identities are kept
    /// (`analytics`; counted, as counted, when the file has no `analytics`).
    pub fn analytics(&self) -> &Analytics {
        &self.analytics
    }

    /// The tenant quotas, if the file has them.
    pub fn tenants(&self) -> Option<&crate::edge::tenants::Tenants> {
        self.tenants.as_ref()
    }

    /// The providers the app calls through the edge, if the file has them.
    pub fn egress(&self) -> Option<&crate::edge::egress::Egress> {
        self.egress.as_ref()
    }

    /// The (normalised) path of the capabilities answer, unless it is turned off.
    pub fn capabilities_path(&self) -> Option<&str> {
        self.capabilities.as_deref()
    }

    /// Whether a request for `path` (as sent, or already normalised) asks for the
    /// capabilities answer: its normalised path is the configured one, ignoring ASCII case
    /// and one trailing `/`, as an `equals` path test reads it. Never when the answer is
    /// turned off, nor for a path that cannot be normalised.
    pub fn is_capabilities_path(&self, path: &str) -> bool {
        self.capabilities
            .as_deref()
            .is_some_and(|answer| normalise_path(path).is_ok_and(|asked| same_path(&asked, answer, false)))
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

    /// The request headers the rules file reads (lower-case names, each once, in file
    /// order): every `http.request.headers["…"]` characteristic, then the tenants'
    /// `key_header` or `tenant_header`. Listed once, when the file is read.
    pub fn headers_read(&self) -> &[String] {
        &self.headers_read
    }
}

/// [`RuleSet::headers_read`] of these rules and tenants.
fn headers_read(rules: &[Rule], tenants: Option<&crate::edge::tenants::Tenants>) -> Vec<String> {
    let characteristics = rules.iter().flat_map(|r| &r.characteristics).filter_map(|c| match c {
        Characteristic::Header(name) => Some(name),
        _ => None,
    });
    let tenant = tenants.map(|t| match &t.identify {
        crate::edge::tenants::Identify::Key(name) | crate::edge::tenants::Identify::Named(name) => name,
    });
    let mut names: Vec<String> = Vec::new();
    for name in characteristics.chain(tenant) {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// A request's counting key under a rule, and the same key as log lines show it
/// ([`Rule::counting_key_and_log`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountingKey {
    /// What the request is counted by (and its Durable Object's name).
    pub key: String,
    /// The key with each header's value as its keyed hash: what log lines show.
    pub logged: String,
}

/// `|name=value`, one part of a counting key.
fn push_part(out: &mut String, name: &str, value: &str) {
    out.push('|');
    out.push_str(name);
    out.push('=');
    out.push_str(value);
}

/// A placeholder for a characteristic whose value the request does not carry; all such
/// requests share one counter (fail closed rather than uncounted).
pub const UNKNOWN: &str = "unknown";

impl Rule {
    /// Whether this rule applies to the request.
    pub fn matches(&self, facts: &RequestFacts<'_>) -> bool {
        self.matcher.matches(facts)
    }

    /// The counting key of a request: the rule id and the value of each characteristic,
    /// e.g. `api|ip.src=198.51.100.7|cf.colo.id=AMS`. `header` looks a request header up
    /// by its lower-case name.
    pub fn counting_key(&self, facts: &RequestFacts<'_>, header: impl Fn(&str) -> Option<String>) -> String {
        self.build_key(facts, header, None).key
    }

    /// The counting key of a request ([`Rule::counting_key`]) and the same key as log lines
    /// show it: each value read from a request header as its keyed hash
    /// ([`KeyedHash::tag`](crate::edge::redact::KeyedHash::tag)), since such a value is often a
    /// credential: `api|http.request.headers["authorization"]=#3f9a…`. An absent header is
    /// `unknown` in both.
    pub fn counting_key_and_log(
        &self,
        facts: &RequestFacts<'_>,
        header: impl Fn(&str) -> Option<String>,
        hash: &crate::edge::redact::KeyedHash,
    ) -> CountingKey {
        self.build_key(facts, header, Some(hash))
    }

    /// The counting key, and with `hash` its logged form (else that is left empty).
    fn build_key(
        &self,
        facts: &RequestFacts<'_>,
        header: impl Fn(&str) -> Option<String>,
        hash: Option<&crate::edge::redact::KeyedHash>,
    ) -> CountingKey {
        let mut key = String::with_capacity(64);
        let mut logged = String::new();
        key.push_str(&self.id);
        if hash.is_some() {
            logged.push_str(&self.id);
        }
        for c in &self.characteristics {
            let (value, from_header) = self.value_of(c, facts, &header);
            let name = c.name();
            push_part(&mut key, &name, &value);
            if let Some(hash) = hash {
                let shown = if from_header { Cow::Owned(hash.tag(&value)) } else { Cow::Borrowed(&*value) };
                push_part(&mut logged, &name, &shown);
            }
        }
        CountingKey { key, logged }
    }

    /// One characteristic's value in a counting key, and whether it was read from a header.
    fn value_of<'f>(
        &self,
        c: &Characteristic,
        facts: &RequestFacts<'f>,
        header: &impl Fn(&str) -> Option<String>,
    ) -> (Cow<'f, str>, bool) {
        let value: Cow<'f, str> = match c {
            Characteristic::IpSrc => match facts.identity {
                Some(id) => {
                    let mut ip = String::with_capacity(24);
                    let _ = write!(ip, "{}", id.ip);
                    ip.into()
                }
                None => UNKNOWN.into(),
            },
            Characteristic::ColoId => facts.colo.unwrap_or(UNKNOWN).into(),
            Characteristic::Host => host_name(facts.host).to_ascii_lowercase().into(),
            Characteristic::Method => counted_method(facts.method).collect::<String>().into(),
            Characteristic::Path => {
                // The path as the rule matches it: one counter for every spelling.
                let path = without_trailing_slash(facts.path);
                if self.matcher.case_sensitive {
                    path.into()
                } else {
                    path.to_ascii_lowercase().into()
                }
            }
            Characteristic::Header(name) => {
                return match header(name) {
                    Some(value) => (value.into(), true),
                    None => (UNKNOWN.into(), false),
                }
            }
        };
        (value, false)
    }

    /// A fresh limiter for one counting key of this rule.
    pub fn limiter(&self) -> Blocking<AnyLimiter> {
        Blocking::new(self.algorithm.limiter(), self.mitigation_timeout)
    }

    /// Whether `other` counts as this rule does: the same rule in every field but `enforce`.
    /// Its keys' counts go on when only its enforcement changes (a rollout from shadow to
    /// enforced keeps every client's count), and start afresh when anything else does.
    pub fn counts_like(&self, other: &Rule) -> bool {
        let Rule {
            id,
            description,
            matcher,
            characteristics,
            algorithm,
            mitigation_timeout,
            response,
            on_store_failure,
            store,
            enforce: _,
            public,
        } = self;
        *id == other.id
            && *algorithm == other.algorithm
            && *characteristics == other.characteristics
            && *mitigation_timeout == other.mitigation_timeout
            && *store == other.store
            && *matcher == other.matcher
            && *response == other.response
            && *on_store_failure == other.on_store_failure
            && *description == other.description
            && *public == other.public
    }

    /// Whether a key's count must survive its Durable Object being evicted while idle: the
    /// rule's period (or its bucket's refill time) is longer than a minute, longer than an
    /// idle object is kept in memory.
    pub fn keeps_state(&self) -> bool {
        let window = match self.algorithm {
            Algorithm::SlidingLog { period, .. }
            | Algorithm::FixedWindow { period, .. }
            | Algorithm::SlidingWindow { period, .. } => period,
            Algorithm::TokenBucket { interval, burst } => {
                Span::from_nanos(interval.as_nanos().saturating_mul(u64::from(burst)))
            }
        };
        window > Span::from_secs(60)
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

/// The capabilities answer: every public rule and budget, so that clients can pace
/// themselves (`GET /api/capabilities`).
mod capabilities {
    use super::{Algorithm, Match, PathMatch, RuleSet};
    use alloc::string::String;
    use alloc::vec::Vec;
    use serde::Serialize;

    #[derive(Serialize)]
    struct Answer<'a> {
        rules: Vec<RuleEntry<'a>>,
        upstreams: Vec<UpstreamEntry<'a>>,
        pre_read: PreReadEntry,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        egress: Vec<ProviderEntry<'a>>,
        /// Fail-open decisions per rule since this isolate started.
        degraded: Vec<Degraded<'a>>,
    }

    #[derive(Serialize)]
    struct RuleEntry<'a> {
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'a str>,
        matches: MatchEntry<'a>,
        algorithm: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        period_s: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        rate_per_s: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        burst: Option<u32>,
        block_s: u64,
        counted_by: Vec<String>,
        /// Where a key's count holds: `fleet` (a Durable Object per key, exact), `location`
        /// (the Cloudflare binding) or `isolate`.
        scope: &'static str,
        store: &'static str,
        on_store_failure: &'static str,
    }

    #[derive(Serialize)]
    struct UpstreamEntry<'a> {
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'a str>,
        matches: MatchEntry<'a>,
        max_in_flight: u32,
        max_wait_s: f64,
        scope: &'static str,
    }

    /// An egress provider's budget (its mirrors' addresses are the app's business: counted,
    /// not listed).
    #[derive(Serialize)]
    struct ProviderEntry<'a> {
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'a str>,
        mirrors: usize,
        max_in_flight_per_mirror: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        min_interval_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        weight: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        weight_per_minute: Option<u32>,
        max_wait_s: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_ttl_s: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_refresh: Option<&'static str>,
        scope: &'static str,
    }

    #[derive(Serialize)]
    struct MatchEntry<'a> {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        paths: Vec<PathEntry<'a>>,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        methods: &'a [String],
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        hosts: &'a [String],
        case_sensitive: bool,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum PathEntry<'a> {
        StartsWith(&'a str),
        Equals(&'a str),
    }

    /// The checks made before the body is read (per address, per isolate, per source). The
    /// source ceiling is always listed: the one in force (the default unless the file says
    /// otherwise), `null` when the file turned it off.
    #[derive(Serialize)]
    struct PreReadEntry {
        #[serde(skip_serializing_if = "Option::is_none")]
        per_ip: Option<Bucket>,
        #[serde(skip_serializing_if = "Option::is_none")]
        node: Option<Bucket>,
        source_bytes_per_second: Option<u64>,
    }

    #[derive(Serialize)]
    struct Bucket {
        rate_per_s: f64,
        burst: u32,
    }

    fn bucket(g: &crate::core::limit::Gcra) -> Bucket {
        Bucket { rate_per_s: 1e9 / g.interval().as_nanos() as f64, burst: g.burst() }
    }

    #[derive(Serialize)]
    struct Degraded<'a> {
        rule: &'a str,
        fail_open_decisions: u64,
    }

    fn matches(m: &Match) -> MatchEntry<'_> {
        MatchEntry {
            paths: m
                .paths
                .iter()
                .map(|p| match p {
                    PathMatch::StartsWith(p) => PathEntry::StartsWith(p),
                    PathMatch::Equals(p) => PathEntry::Equals(p),
                })
                .collect(),
            methods: &m.methods,
            hosts: &m.hosts,
            case_sensitive: m.case_sensitive,
        }
    }

    impl RuleSet {
        /// The capabilities answer as JSON: every public rule and upstream budget (id,
        /// description, what it matches, algorithm, limit and period or rate and burst,
        /// block time, what it counts by, scope), the checks made before the body is read
        /// (the source ceiling always, `null` when off), and `degraded(rule id)`, the
        /// fail-open decisions of each rule that has had any.
        pub fn capabilities_json(&self, degraded: impl Fn(&str) -> u64) -> String {
            let rules = self
                .rules
                .iter()
                .filter(|r| r.public)
                .map(|r| {
                    let (algorithm, limit, period_s, rate_per_s, burst) = match r.algorithm {
                        Algorithm::SlidingLog { requests_per_period, period } => {
                            ("sliding_log", Some(requests_per_period), Some(period.as_secs_ceil()), None, None)
                        }
                        Algorithm::FixedWindow { requests_per_period, period } => {
                            ("fixed_window", Some(requests_per_period), Some(period.as_secs_ceil()), None, None)
                        }
                        Algorithm::SlidingWindow { requests_per_period, period } => {
                            ("sliding_window", Some(requests_per_period), Some(period.as_secs_ceil()), None, None)
                        }
                        Algorithm::TokenBucket { interval, burst } => {
                            ("token_bucket", None, None, Some(1e9 / interval.as_nanos() as f64), Some(burst))
                        }
                    };
                    RuleEntry {
                        id: &r.id,
                        description: r.description.as_deref(),
                        matches: matches(&r.matcher),
                        algorithm,
                        limit,
                        period_s,
                        rate_per_s,
                        burst,
                        block_s: r.mitigation_timeout.as_secs_ceil(),
                        counted_by: r.characteristics.iter().map(|c| c.name().into_owned()).collect(),
                        scope: r.store.scope(),
                        store: r.store.name(),
                        on_store_failure: r.on_store_failure.name(),
                    }
                })
                .collect();
            let upstreams = self
                .upstreams
                .iter()
                .filter(|u| u.public)
                .map(|u| UpstreamEntry {
                    id: &u.id,
                    description: u.description.as_deref(),
                    matches: matches(&u.matcher),
                    max_in_flight: u.max_in_flight,
                    max_wait_s: u.max_wait.as_nanos() as f64 / 1e9,
                    scope: u.scope.name(),
                })
                .collect();
            let degraded = self
                .rules
                .iter()
                .map(|r| Degraded { rule: &r.id, fail_open_decisions: degraded(&r.id) })
                .filter(|d| d.fail_open_decisions > 0)
                .collect();
            let pre = &self.pre_read;
            let pre_read = PreReadEntry {
                per_ip: pre.per_ip.as_ref().map(bucket),
                node: pre.node.as_ref().map(bucket),
                source_bytes_per_second: pre.source_bytes_per_second,
            };
            let egress = self
                .egress
                .iter()
                .flat_map(|e| e.providers.iter())
                .filter(|p| p.public)
                .map(|p| ProviderEntry {
                    id: &p.id,
                    description: p.description.as_deref(),
                    mirrors: p.mirrors.len(),
                    max_in_flight_per_mirror: p.max_in_flight,
                    min_interval_ms: (!p.min_interval.is_zero()).then(|| p.min_interval.as_millis_ceil()),
                    weight: p.weight.map(crate::edge::egress::Weigh::name),
                    weight_per_minute: p.weight_per_minute,
                    max_wait_s: p.max_wait.as_nanos() as f64 / 1e9,
                    cache_ttl_s: p.cache.map(|c| c.ttl.as_secs_ceil()),
                    cache_refresh: p.cache.map(|c| if c.refresh_behind { "behind" } else { "ahead" }),
                    scope: p.scope.name(),
                })
                .collect();
            serde_json::to_string(&Answer { rules, upstreams, pre_read, egress, degraded }).unwrap_or_default()
        }
    }
}
