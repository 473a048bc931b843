//! The simulator's configuration: a JSON object, checked and completed with the
//! reference's defaults, in the reference's order (so the first problem reported is the
//! one the reference reports).

use super::py::{self, PyValue};
use super::random::Seed;
use super::SimError;
use crate::core::limit::Limiter as _;
use crate::core::time::Span;
use crate::edge::rules::{self, Characteristic, PathMatch, RuleSet};
use serde_json::{Map, Value};

/// How a policy counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolicyAlgorithm {
    /// `token_bucket`: refills `rate` tokens per second up to `burst`.
    TokenBucket {
        /// Tokens per second.
        rate: f64,
        /// Bucket size.
        burst: f64,
    },
    /// `fixed_window`: `limit` per calendar window.
    FixedWindow {
        /// Units per window.
        limit: f64,
    },
    /// `sliding_log`: at most `limit` in any rolling window (exact).
    SlidingLog {
        /// Units per rolling window.
        limit: f64,
    },
    /// `sliding_counter`: previous window weighted by overlap plus the current one.
    SlidingCounter {
        /// Units per estimated rolling window.
        limit: f64,
    },
    /// `gcra`: the core's GCRA ([`crate::core::limit::Gcra`]), the token bucket the edge's
    /// `token_bucket` rules and the browser client count with: whole units, integer time.
    Gcra {
        /// Units per second.
        rate: f64,
        /// Units admitted back to back.
        burst: u32,
        /// One unit every `interval` (`1 / rate`, to the nanosecond).
        interval: Span,
    },
    /// `count_then_block`: the edge's rule ([`crate::core::limit::Blocking`] over the rule's
    /// counter): count `requests_per_period` per `period`, and the first refusal blocks the
    /// key for `mitigation_timeout`. Policies from `edge_rules` are of this kind.
    CountThenBlock {
        /// How the rule counts (sliding log, fixed or sliding window, token bucket).
        counting: rules::Algorithm,
        /// The block.
        mitigation_timeout: Span,
    },
    /// `smartflow`: the Smart Flow reservation bucket ([`crate::client::smartflow::TokenBucket`])
    /// as a client-side pacer. It never refuses: each request reserves `cost` tokens and is
    /// sent when its reservation falls due.
    SmartFlow {
        /// Tokens per second.
        rate: f64,
        /// Bucket size.
        burst: f64,
    },
    /// `tenant_quota`: the edge's tenant stage (the rules file's `tenants`), decided by the
    /// edge's own pipeline, each tenant under its own limit. Its figures are those of the
    /// most generous limit in the file (the most one tenant may send in a second); 0 when no
    /// tenant has a limit.
    TenantQuota {
        /// That limit's requests per second.
        rate: f64,
        /// That limit's burst.
        burst: u32,
    },
    /// `pre_read`: the edge's checks before a body is read (the rules file's `pre_read`:
    /// per address, per isolate — one per colo here — and each source's body bytes), decided
    /// by the edge's own pipeline. Its figures are the per-address limit's (else the
    /// isolate's).
    PreRead {
        /// That limit's requests per second.
        rate: f64,
        /// That limit's burst.
        burst: u32,
    },
}

/// Seconds as a [`Span`], to the nanosecond.
pub(crate) fn span(secs: f64) -> Span {
    Span::from_nanos(nanos(secs))
}

/// Non-negative seconds in whole nanoseconds, rounded half away from zero as `f64::round`
/// does (without its libm call, which the compiler would hoist to every attempt), saturating.
#[inline]
pub(crate) fn nanos(secs: f64) -> u64 {
    let x = secs * 1e9;
    if x.is_nan() || x < 0.0 {
        return 0;
    }
    if x >= 9.0e18 {
        // a whole number already (every f64 from 2^53 up is), saturating past u64::MAX
        return x as u64;
    }
    let whole = x as u64;
    whole + u64::from(x - whole as f64 >= 0.5)
}

/// Seconds from a [`Span`].
pub(crate) fn secs(span: Span) -> f64 {
    span.as_nanos() as f64 / 1e9
}

impl PolicyAlgorithm {
    /// The name used in configs and reports.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyAlgorithm::TokenBucket { .. } => "token_bucket",
            PolicyAlgorithm::FixedWindow { .. } => "fixed_window",
            PolicyAlgorithm::SlidingLog { .. } => "sliding_log",
            PolicyAlgorithm::SlidingCounter { .. } => "sliding_counter",
            PolicyAlgorithm::Gcra { .. } => "gcra",
            PolicyAlgorithm::CountThenBlock { .. } => "count_then_block",
            PolicyAlgorithm::SmartFlow { .. } => "smartflow",
            PolicyAlgorithm::TenantQuota { .. } => "tenant_quota",
            PolicyAlgorithm::PreRead { .. } => "pre_read",
        }
    }

    /// Whether this is a client-side pacer (delays, never refuses).
    pub fn is_pacer(&self) -> bool {
        matches!(self, PolicyAlgorithm::SmartFlow { .. })
    }

    /// Whether this runs the core's integer-time limiters (whole units, `t ≥ 0`).
    pub fn is_core(&self) -> bool {
        matches!(self, PolicyAlgorithm::Gcra { .. } | PolicyAlgorithm::CountThenBlock { .. })
    }
}

/// What a policy counts per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyBy {
    /// One counter per client.
    Client,
    /// One counter per endpoint.
    Endpoint,
    /// One counter per client and endpoint.
    ClientEndpoint,
    /// One counter for everything.
    Global,
    /// One count per tenant (the tenant stage's `fleet` scope); not a configuration's key.
    Tenant,
    /// One count per tenant and colo (the tenant stage's `colo` scope); not a
    /// configuration's key.
    TenantColo,
    /// The check of the edge's `pre_read` that counted it: its address, its colo's isolate or
    /// its source; not a configuration's key.
    PreReadCheck,
}

impl KeyBy {
    const ALL: [(&'static str, KeyBy); 4] = [
        ("client", KeyBy::Client),
        ("endpoint", KeyBy::Endpoint),
        ("client+endpoint", KeyBy::ClientEndpoint),
        ("global", KeyBy::Global),
    ];

    /// The name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            KeyBy::Tenant => "tenant",
            KeyBy::TenantColo => "tenant+colo",
            KeyBy::PreReadCheck => "ip/node/source",
            _ => KeyBy::ALL.iter().find(|(_, k)| *k == self).map_or("", |(n, _)| n),
        }
    }
}

/// One rate-limit policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Its name (default `policy-N`).
    pub name: String,
    /// How it counts.
    pub algorithm: PolicyAlgorithm,
    /// What it counts per.
    pub key: KeyBy,
    /// Window length in seconds (1 for token buckets unless given).
    pub window_s: f64,
    /// Endpoint prefixes it applies to (empty: all).
    pub endpoints: Vec<String>,
    /// Clients it applies to (empty: all).
    pub clients: Vec<String>,
    /// Clients it skips.
    pub exclude_clients: Vec<String>,
    /// The sample 429's quota: the config's `limit` as written when present, else the burst.
    pub quota: PyValue,
    /// For a rule from `edge_rules`: its place in [`Config::edge_rules`]. Such a policy is
    /// decided by the edge's own pipeline ([`super::edge`]), not by [`Policy::key_for`].
    pub edge_rule: Option<usize>,
}

impl Policy {
    /// The long-run admitted rate per key.
    pub fn sustained_rps(&self) -> f64 {
        match self.algorithm {
            PolicyAlgorithm::TokenBucket { rate, .. } => rate,
            PolicyAlgorithm::FixedWindow { limit }
            | PolicyAlgorithm::SlidingLog { limit }
            | PolicyAlgorithm::SlidingCounter { limit } => limit / self.window_s,
            PolicyAlgorithm::Gcra { rate, .. }
            | PolicyAlgorithm::SmartFlow { rate, .. }
            | PolicyAlgorithm::TenantQuota { rate, .. }
            | PolicyAlgorithm::PreRead { rate, .. } => rate,
            PolicyAlgorithm::CountThenBlock { counting, .. } => match counting {
                rules::Algorithm::TokenBucket { interval, .. } => 1.0 / secs(interval),
                rules::Algorithm::SlidingLog { requests_per_period, period }
                | rules::Algorithm::FixedWindow { requests_per_period, period }
                | rules::Algorithm::SlidingWindow { requests_per_period, period } => {
                    f64::from(requests_per_period) / secs(period)
                }
            },
        }
    }

    /// The most one key can get through in one window.
    pub fn theoretical_max(&self) -> f64 {
        match self.algorithm {
            PolicyAlgorithm::TokenBucket { rate, burst } => burst + rate * self.window_s,
            PolicyAlgorithm::FixedWindow { limit } => 2.0 * limit,
            PolicyAlgorithm::SlidingLog { limit } | PolicyAlgorithm::SlidingCounter { limit } => limit,
            PolicyAlgorithm::Gcra { rate, burst, .. }
            | PolicyAlgorithm::TenantQuota { rate, burst }
            | PolicyAlgorithm::PreRead { rate, burst } => f64::from(burst) + rate * self.window_s,
            PolicyAlgorithm::SmartFlow { rate, burst } => burst + rate * self.window_s,
            PolicyAlgorithm::CountThenBlock { counting, .. } => match counting {
                rules::Algorithm::TokenBucket { interval, burst } => f64::from(burst) + self.window_s / secs(interval),
                rules::Algorithm::FixedWindow { requests_per_period, .. } => 2.0 * f64::from(requests_per_period),
                rules::Algorithm::SlidingLog { requests_per_period, .. }
                | rules::Algorithm::SlidingWindow { requests_per_period, .. } => f64::from(requests_per_period),
            },
        }
    }

    /// The policy's limit per window for a windowed count (fixed windows, count-then-block
    /// rules counting in fixed windows), for RL04.
    pub fn fixed_window_limit(&self) -> Option<f64> {
        match self.algorithm {
            PolicyAlgorithm::FixedWindow { limit } => Some(limit),
            PolicyAlgorithm::CountThenBlock {
                counting: rules::Algorithm::FixedWindow { requests_per_period, .. },
                ..
            } => Some(f64::from(requests_per_period)),
            _ => None,
        }
    }

    /// The number of timestamps a sliding log keeps per key, for RL07.
    pub fn sliding_log_limit(&self) -> Option<f64> {
        match self.algorithm {
            PolicyAlgorithm::SlidingLog { limit } => Some(limit),
            PolicyAlgorithm::CountThenBlock {
                counting: rules::Algorithm::SlidingLog { requests_per_period, .. },
                ..
            } => Some(f64::from(requests_per_period)),
            _ => None,
        }
    }

    /// The policy's key for a request, or `None` when it does not apply (nor for a rule from
    /// `edge_rules` or its tenant stage: the edge's pipeline finds their keys).
    pub fn key_for(&self, client: &str, endpoint: &str) -> Option<String> {
        if self.edge_rule.is_some() || self.is_tenant_stage() || self.is_pre_read_stage() {
            return None;
        }
        if !self.endpoints.is_empty() && !self.endpoints.iter().any(|e| endpoint.starts_with(e.as_str())) {
            return None;
        }
        if (!self.clients.is_empty() && !self.clients.iter().any(|c| c == client))
            || self.exclude_clients.iter().any(|c| c == client)
        {
            return None;
        }
        Some(match self.key {
            KeyBy::Client => client.into(),
            KeyBy::Endpoint => endpoint.into(),
            KeyBy::ClientEndpoint => format!("{client} {endpoint}"),
            KeyBy::Global => "*".into(),
            KeyBy::Tenant | KeyBy::TenantColo | KeyBy::PreReadCheck => return None,
        })
    }

    /// Whether this is the edge's tenant stage (`tenants` in `edge_rules`).
    pub fn is_tenant_stage(&self) -> bool {
        matches!(self.algorithm, PolicyAlgorithm::TenantQuota { .. })
    }

    /// Whether this is the edge's checks before a body is read (`pre_read` in `edge_rules`).
    pub fn is_pre_read_stage(&self) -> bool {
        matches!(self.algorithm, PolicyAlgorithm::PreRead { .. })
    }
}

/// How a client's traffic is generated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// `rps` evenly spaced requests per second.
    Steady {
        /// Requests per second.
        rps: f64,
    },
    /// Exponential gaps with mean `1 / rps`, from the seeded generator.
    Poisson {
        /// Mean requests per second.
        rps: f64,
    },
    /// `burst` requests 1 ms apart every `every_s` seconds.
    Burst {
        /// Requests per burst.
        burst: i128,
        /// Seconds between bursts.
        every_s: f64,
    },
}

/// What a client does after a 429.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Gives up.
    None,
    /// Retries 0.1 s later.
    Immediate,
    /// Retries after 1, 2, 4 ... seconds.
    Backoff,
    /// Retries when Retry-After says (+ 50 ms).
    Honor,
}

impl Retry {
    const ALL: [(&'static str, Retry); 4] =
        [("none", Retry::None), ("immediate", Retry::Immediate), ("backoff", Retry::Backoff), ("honor", Retry::Honor)];
}

/// One traffic source.
#[derive(Clone, Debug, PartialEq)]
pub struct Client {
    /// Its name (default `client-N`).
    pub name: String,
    /// `legit`, `abusive` or `unknown`, as written (any JSON value).
    pub kind: PyValue,
    /// How its traffic is generated.
    pub pattern: Pattern,
    /// The endpoint it calls (default `/`).
    pub endpoint: String,
    /// What it does after a 429.
    pub retry: Retry,
    /// Retries per logical request (default 3).
    pub max_retries: i128,
    /// Tokens per request (default 1).
    pub cost: f64,
    /// First request, seconds from the start.
    pub start: f64,
    /// Seconds it sends for.
    pub duration: f64,
}

impl Client {
    /// Whether its kind is exactly `"legit"`.
    pub fn is_legit(&self) -> bool {
        matches!(&self.kind, PyValue::Str(k) if k == "legit")
    }
}

/// A checked configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The `service` value as written (default `"API"`).
    pub service: PyValue,
    /// Simulated seconds (default 300).
    pub duration_s: f64,
    /// Backend capacity in requests per second, if given.
    pub capacity_rps: Option<f64>,
    /// Seed for Poisson traffic (default 1).
    pub seed: Seed,
    /// The policies, in order.
    pub policies: Vec<Policy>,
    /// The clients, in order.
    pub clients: Vec<Client>,
    /// The rules of `edge_rules`, when given: the edge's pipeline decides them.
    pub edge_rules: Option<RuleSet>,
    /// How the edge's traffic is spread over locations and isolates (`edge_spread`).
    pub edge_spread: super::spread::Spread,
}

fn input(msg: String) -> SimError {
    SimError::Input(msg)
}

/// The fields of a configuration's top level. Anything else is refused: a misspelt field
/// would otherwise be ignored and its default used without a word.
const CONFIG_FIELDS: [&str; 9] =
    ["service", "notes", "duration_s", "capacity_rps", "seed", "policies", "clients", "edge_rules", "edge_spread"];
/// The fields of a policy (every algorithm's: those another algorithm reads are not read).
const POLICY_FIELDS: [&str; 15] = [
    "name",
    "notes",
    "algorithm",
    "key",
    "rate",
    "burst",
    "limit",
    "window_s",
    "endpoints",
    "clients",
    "exclude_clients",
    "requests_per_period",
    "period",
    "mitigation_timeout",
    "counting",
];
/// The fields of a client (every pattern's).
const CLIENT_FIELDS: [&str; 13] = [
    "name",
    "notes",
    "kind",
    "pattern",
    "rps",
    "burst",
    "every_s",
    "endpoint",
    "retry",
    "max_retries",
    "cost",
    "start",
    "duration",
];

/// A field of a configuration that is refused: one the simulator does not know, or a
/// required one left out.
///
/// ```
/// use sluicegate::sim::{Config, FieldProblem, SimError};
/// let text = r#"{"policies": [{"algorithm": "token_bucket", "rate": 1}], "clients": [{"rsp": 2}]}"#;
/// let Err(SimError::Field(e)) = Config::from_json(text) else { panic!() };
/// assert_eq!((e.at.as_str(), e.field.as_str()), ("clients[0]", "rsp"));
/// assert!(matches!(e.problem, FieldProblem::Unknown { suggestion: Some("rps"), .. }));
/// assert_eq!(e.to_string(), "clients[0].rsp: unknown field in client 'client-1' (did you mean \"rps\"?); a client \
///     has name, notes, kind, pattern, rps, burst, every_s, endpoint, retry, max_retries, cost, start, duration");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// What the input called the configuration file in a comparison (`examples/x.json`,
    /// `the after config`), else `None`.
    pub config: Option<String>,
    /// The object the field is in: `policies[1]`, `clients[0]`, or empty for the top level.
    pub at: String,
    /// That object's name (`api`, or its default `policy-2`); empty for the top level.
    pub name: String,
    /// The field.
    pub field: String,
    /// What is wrong with it.
    pub problem: FieldProblem,
}

/// What is wrong with a [`FieldError`]'s field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldProblem {
    /// The object has no such field: `allowed` are its fields, `suggestion` the one of them
    /// the name is closest to, if one is close (a typo, most likely).
    Unknown {
        /// The allowed name nearest to the field's, if one is close.
        suggestion: Option<&'static str>,
        /// The object's fields.
        allowed: &'static [&'static str],
    },
    /// The field is required here and left out: `expected` says what it takes (`a number > 0`).
    Missing {
        /// What the field takes.
        expected: &'static str,
    },
}

impl FieldError {
    /// The field's path in the configuration: `policies[1].rsp`, `durration_s`.
    pub fn path(&self) -> String {
        if self.at.is_empty() {
            self.field.clone()
        } else {
            format!("{}.{}", self.at, self.field)
        }
    }

    /// `policy 'api'`, `client 'app'` or `the config`.
    fn owner(&self) -> String {
        match self.kind() {
            "a policy" => format!("policy {}", py::str_repr(&self.name)),
            "a client" => format!("client {}", py::str_repr(&self.name)),
            _ => "the config".into(),
        }
    }

    /// `a policy`, `a client` or `the config`.
    fn kind(&self) -> &'static str {
        if self.at.starts_with("policies[") {
            "a policy"
        } else if self.at.starts_with("clients[") {
            "a client"
        } else {
            "the config"
        }
    }
}

impl core::fmt::Display for FieldError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if let Some(config) = &self.config {
            write!(f, "{config}: ")?;
        }
        match self.problem {
            FieldProblem::Unknown { suggestion, allowed } => {
                write!(f, "{}: unknown field in {}", self.path(), self.owner())?;
                if let Some(name) = suggestion {
                    write!(f, " (did you mean \"{name}\"?)")?;
                }
                write!(f, "; {} has {}", self.kind(), allowed.join(", "))
            }
            FieldProblem::Missing { expected } if self.name.is_empty() => {
                write!(f, "{} is required ({expected})", self.path())
            }
            FieldProblem::Missing { expected } => {
                write!(f, "{} is required ({}.{}: {expected})", self.path(), self.name, self.field)
            }
        }
    }
}

/// What a required number takes.
const A_NUMBER: &str = "a number > 0";
/// What a required count of whole units takes.
const A_WHOLE_NUMBER: &str = "a whole number > 0";
/// What a required length of time takes.
const SECONDS: &str = "a number of seconds > 0";

/// One object of a configuration as it is read: where it is and what it is called, to
/// name a field in an error.
struct Place<'a> {
    /// The list it is in (`policies`, `clients`), or empty for the top level.
    list: &'static str,
    /// Its index in that list.
    index: usize,
    /// Its name; empty for the top level.
    name: &'a str,
}

impl Place<'_> {
    /// The top level of a configuration.
    const TOP: Place<'static> = Place { list: "", index: 0, name: "" };

    #[cold]
    #[inline(never)]
    fn error(&self, field: &str, problem: FieldProblem) -> SimError {
        let at = if self.list.is_empty() { String::new() } else { format!("{}[{}]", self.list, self.index) };
        SimError::Field(Box::new(FieldError { config: None, at, name: self.name.into(), field: field.into(), problem }))
    }

    /// Refuses the first field of `obj` (in name order) that is not one of `allowed`.
    fn known_fields(&self, obj: &Map<String, Value>, allowed: &'static [&'static str]) -> Result<(), SimError> {
        // `"$schema"` at the top names the file's JSON Schema for editors; never read here.
        let schema = |k: &str| k == "$schema" && self.list.is_empty();
        match obj.keys().find(|k| !schema(k) && !allowed.contains(&k.as_str())) {
            None => Ok(()),
            Some(field) => {
                let suggestion = crate::core::suggest::nearest(field, allowed);
                Err(self.error(field, FieldProblem::Unknown { suggestion, allowed }))
            }
        }
    }

    /// The value of a field that must be given.
    fn required<'v>(
        &self,
        obj: &'v Map<String, Value>,
        field: &str,
        expected: &'static str,
    ) -> Result<Option<&'v Value>, SimError> {
        match obj.get(field) {
            None => Err(self.error(field, FieldProblem::Missing { expected })),
            v => Ok(v),
        }
    }
}

/// The reference's `num()`: `float(v)`, which must be > 0 when `positive`.
fn num(v: Option<&Value>, what: &str, positive: bool) -> Result<f64, SimError> {
    let raw = v.map_or(PyValue::None, PyValue::from_json);
    let x = raw.to_float().ok_or_else(|| input(format!("{what} must be a number, got {}", raw.repr())))?;
    if !x.is_finite() {
        return Err(input(format!("{what} must be a finite number, got {}", raw.repr())));
    }
    if positive && x <= 0.0 {
        return Err(input(format!("{what} must be > 0, got {}", raw.repr())));
    }
    Ok(x)
}

/// A name field: the reference concatenates it with text, so it must be a string.
fn name(obj: &Map<String, Value>, what: &str, default: String) -> Result<String, SimError> {
    match obj.get("name") {
        None => Ok(default),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(input(format!("{what} name must be a string, got {}", PyValue::from_json(other).repr()))),
    }
}

/// `list(q.get(field) or [])` for a list of strings (a string is its list of characters).
fn string_list(obj: &Map<String, Value>, field: &str, owner: &str) -> Result<Vec<String>, SimError> {
    let v = obj.get(field).map_or(PyValue::None, PyValue::from_json);
    if !v.is_truthy() {
        return Ok(Vec::new());
    }
    let bad = || input(format!("policy {}: {field} must be a list of strings", py::str_repr(owner)));
    match v {
        PyValue::Str(s) => Ok(s.chars().map(String::from).collect()),
        PyValue::List(items) => items
            .into_iter()
            .map(|item| match item {
                PyValue::Str(s) => Ok(s),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

fn seed(v: Option<&Value>) -> Seed {
    match v {
        None => Seed::Int(1),
        Some(Value::Bool(b)) => Seed::Int(i128::from(*b)),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), ..) => Seed::Int(i.into()),
            (_, Some(u), _) => Seed::Int(u.into()),
            (.., Some(f)) => Seed::Float(f),
            _ => Seed::Unsupported(n.to_string()),
        },
        Some(other) => Seed::Unsupported(PyValue::from_json(other).repr()),
    }
}

/// A rules file's JSON, or the error naming it.
fn rules_value(text: &str, shown: &str) -> Result<Value, SimError> {
    serde_json::from_str(text).map_err(|e| input(format!("edge_rules: {shown}: invalid JSON: {e}")))
}

impl Config {
    /// Parses and checks a configuration, filling in the reference's defaults.
    pub fn from_json(text: &str) -> Result<Config, SimError> {
        let value: Value = serde_json::from_str(text).map_err(|e| input(format!("invalid JSON: {e}")))?;
        Config::from_value(&value)
    }

    /// [`Config::from_json`] for a configuration file in `dir`: an `edge_rules` path is read
    /// relative to it, so a config can simulate the very rules file the edge worker loads.
    pub fn from_json_in(text: &str, dir: &std::path::Path) -> Result<Config, SimError> {
        let mut value: Value = serde_json::from_str(text).map_err(|e| input(format!("invalid JSON: {e}")))?;
        if let Some(path) = value.get("edge_rules").and_then(Value::as_str) {
            let full = dir.join(path);
            let shown = full.display().to_string();
            let text =
                std::fs::read_to_string(&full).map_err(|e| input(format!("edge_rules: {shown}: cannot read: {e}")))?;
            value["edge_rules"] = rules_value(&text, &shown)?;
        }
        Config::from_value(&value)
    }

    /// The `edge_rules` path of a configuration's JSON text: `None` without one, for the
    /// rules object itself, and for text that is not a JSON object (the simulator then says
    /// what is wrong with it).
    pub fn edge_rules_path(text: &str) -> Option<String> {
        let value: Value = serde_json::from_str(text).ok()?;
        value.get("edge_rules")?.as_str().map(str::to_owned)
    }

    /// The configuration's text with its `edge_rules` path replaced by `rules` (the rules
    /// file's JSON text; `shown` is what an error calls the file), as [`Config::from_json_in`]
    /// reads a path: for a configuration without a path, `text` as it is. Numbers keep the
    /// spelling the simulator reads them by (`20` and `20.0` stay apart).
    ///
    /// # Errors
    /// `edge_rules: <shown>: invalid JSON: …` for rules that are not JSON.
    pub fn inline_edge_rules(text: &str, rules: &str, shown: &str) -> Result<String, SimError> {
        let rules = rules_value(rules, shown)?;
        let Ok(mut value) = serde_json::from_str::<Value>(text) else { return Ok(text.into()) };
        if !value.get("edge_rules").is_some_and(Value::is_string) {
            return Ok(text.into());
        }
        value["edge_rules"] = rules;
        Ok(value.to_string())
    }

    /// Checks an already parsed configuration, filling in the reference's defaults.
    pub fn from_value(value: &Value) -> Result<Config, SimError> {
        let cfg = value.as_object().ok_or_else(|| input("config must be a JSON object".into()))?;
        Place::TOP.known_fields(cfg, &CONFIG_FIELDS)?;
        let rules_given = cfg.get("edge_rules").filter(|v| !v.is_null());
        let mut edge_rules = None;
        let pols = cfg.get("policies").map_or(PyValue::None, PyValue::from_json);
        let mut policies = if rules_given.is_some() && !pols.is_truthy() {
            Vec::new()
        } else {
            if !pols.is_truthy() {
                return Err(input("config needs a non-empty 'policies' list (or edge_rules)".into()));
            }
            let Some(Value::Array(pols)) = cfg.get("policies") else {
                return Err(input("config needs a non-empty 'policies' list (a JSON array)".into()));
            };
            pols.iter().enumerate().map(|(i, p)| policy(i + 1, p)).collect::<Result<Vec<_>, _>>()?
        };
        match rules_given {
            None => {}
            Some(Value::String(path)) => {
                return Err(input(format!(
                    "edge_rules: {} is a path; the CLI reads it relative to the config file, elsewhere pass \
                     the rules object itself",
                    py::str_repr(path)
                )))
            }
            Some(rules) => {
                let (set, from_rules) = edge_rule_policies(rules)?;
                policies.extend(from_rules);
                edge_rules = Some(set);
            }
        }
        let duration_s = num(Some(cfg.get("duration_s").unwrap_or(&Value::from(300))), "duration_s", true)?;
        let capacity_rps = match cfg.get("capacity_rps") {
            None | Some(Value::Null) => None,
            v => Some(num(v, "capacity_rps", true)?),
        };
        let clients = match cfg.get("clients") {
            Some(Value::Array(items)) => {
                items.iter().enumerate().map(|(i, c)| client(i + 1, c, duration_s)).collect::<Result<Vec<_>, _>>()?
            }
            v if !v.map_or(PyValue::None, PyValue::from_json).is_truthy() => Vec::new(),
            _ => return Err(input("config 'clients' must be a list".into())),
        };
        Ok(Config {
            service: cfg.get("service").map_or_else(|| "API".into(), PyValue::from_json),
            duration_s,
            capacity_rps,
            seed: seed(cfg.get("seed")),
            policies,
            clients,
            edge_rules,
            edge_spread: super::spread::Spread::from_value(cfg.get("edge_spread"))?,
        })
    }
}

fn policy(i: usize, p: &Value) -> Result<Policy, SimError> {
    let q = p.as_object().ok_or_else(|| input(format!("policy {i} must be a JSON object")))?;
    let name = name(q, "policy", format!("policy-{i}"))?;
    let place = Place { list: "policies", index: i - 1, name: &name };
    place.known_fields(q, &POLICY_FIELDS)?;
    let pname = py::str_repr(&name);
    let algo = q.get("algorithm").and_then(Value::as_str).unwrap_or("");
    if !["token_bucket", "fixed_window", "sliding_log", "sliding_counter", "gcra", "count_then_block", "smartflow"]
        .contains(&algo)
    {
        return Err(input(format!(
            "policy {pname}: algorithm must be one of token_bucket, fixed_window, sliding_log, sliding_counter \
             (or the edge's gcra, count_then_block, and the client pacer smartflow)"
        )));
    }
    let key = match q.get("key") {
        None => Some(KeyBy::Client),
        Some(v) => KeyBy::ALL.iter().find(|(n, _)| v.as_str() == Some(n)).map(|(_, k)| *k),
    };
    let key = key.ok_or_else(|| {
        input(format!("policy {pname}: key must be one of client, endpoint, client+endpoint, global"))
    })?;
    let field = |f: &str| format!("{name}.{f}");
    let raw_limit = q.get("limit").map(PyValue::from_json);
    let edge = match algo {
        "gcra" | "count_then_block" | "smartflow" => Some(edge_algorithm(algo, q, &place)?),
        _ => None,
    };
    let (algorithm, window_s) = if let Some(edge) = edge {
        edge
    } else if algo == "token_bucket" {
        let (rate, burst) = if q.contains_key("rate") {
            let rate = num(q.get("rate"), &field("rate"), true)?;
            let burst = match q.get("burst") {
                Some(b) => num(Some(b), &field("burst"), true)?,
                None => rate.max(1.0),
            };
            (rate, burst)
        } else if q.contains_key("limit") {
            let lim = num(q.get("limit"), &field("limit"), true)?;
            let win = num(Some(q.get("window_s").unwrap_or(&Value::from(1))), &field("window_s"), true)?;
            let burst = num(Some(q.get("burst").unwrap_or(&q["limit"])), &field("burst"), true)?;
            (lim / win, burst)
        } else {
            return Err(input(format!("policy {pname}: token_bucket needs rate (+burst) or limit + window_s")));
        };
        let window_s = num(Some(q.get("window_s").unwrap_or(&Value::from(1.0))), &field("window_s"), true)?;
        (PolicyAlgorithm::TokenBucket { rate, burst }, window_s)
    } else {
        let limit = num(place.required(q, "limit", A_NUMBER)?, &field("limit"), true)?;
        let window_s = num(place.required(q, "window_s", A_NUMBER)?, &field("window_s"), true)?;
        let algorithm = match algo {
            "fixed_window" => PolicyAlgorithm::FixedWindow { limit },
            "sliding_log" => PolicyAlgorithm::SlidingLog { limit },
            _ => PolicyAlgorithm::SlidingCounter { limit },
        };
        (algorithm, window_s)
    };
    let quota = match (algorithm, raw_limit) {
        (
            PolicyAlgorithm::Gcra { burst, .. }
            | PolicyAlgorithm::TenantQuota { burst, .. }
            | PolicyAlgorithm::PreRead { burst, .. },
            _,
        ) => PyValue::Int(burst.into()),
        (PolicyAlgorithm::SmartFlow { burst, .. }, _) => PyValue::Float(burst),
        (PolicyAlgorithm::CountThenBlock { counting, .. }, _) => counting_quota(counting),
        (PolicyAlgorithm::TokenBucket { .. }, Some(raw)) => raw,
        (PolicyAlgorithm::TokenBucket { burst, .. }, None) => PyValue::Float(burst),
        (
            PolicyAlgorithm::FixedWindow { limit }
            | PolicyAlgorithm::SlidingLog { limit }
            | PolicyAlgorithm::SlidingCounter { limit },
            _,
        ) => PyValue::Float(limit),
    };
    Ok(Policy {
        endpoints: string_list(q, "endpoints", &name)?,
        clients: string_list(q, "clients", &name)?,
        exclude_clients: string_list(q, "exclude_clients", &name)?,
        name,
        algorithm,
        key,
        window_s,
        quota,
        edge_rule: None,
    })
}

/// The quota a rule's counter advertises (`RateLimit-Policy`'s `q`, as the worker sends it).
fn counting_quota(counting: rules::Algorithm) -> PyValue {
    PyValue::Int(counting.limiter().quota().limit.into())
}

/// A whole number of units from 1 to `u32::MAX`.
fn whole(v: Option<&Value>, what: &str) -> Result<u32, SimError> {
    let x = num(v, what, true)?;
    if x.fract() != 0.0 || x > f64::from(u32::MAX) {
        return Err(input(format!(
            "{what} must be a whole number of units (the edge counts whole requests), got {}",
            v.map_or(PyValue::None, PyValue::from_json).repr()
        )));
    }
    Ok(x as u32)
}

/// A length of time in seconds that is at least a nanosecond (or zero when `zero_ok`).
fn duration(v: Option<&Value>, what: &str, zero_ok: bool) -> Result<Span, SimError> {
    let x = num(v, what, !zero_ok)?;
    if x < 0.0 {
        return Err(input(format!("{what} must be >= 0, got {}", v.map_or(PyValue::None, PyValue::from_json).repr())));
    }
    let s = span(x);
    if s.is_zero() && !zero_ok {
        return Err(input(format!("{what} must be at least a nanosecond, got {}", float_or_repr(v))));
    }
    Ok(s)
}

fn float_or_repr(v: Option<&Value>) -> String {
    v.map_or(PyValue::None, PyValue::from_json).repr()
}

/// `gcra`, `count_then_block` and `smartflow`: their fields, checked, and the window the
/// report measures them over.
fn edge_algorithm(algo: &str, q: &Map<String, Value>, place: &Place<'_>) -> Result<(PolicyAlgorithm, f64), SimError> {
    let name = place.name;
    let field = |f: &str| format!("{name}.{f}");
    let one = Value::from(1);
    let window = |q: &Map<String, Value>| num(Some(q.get("window_s").unwrap_or(&one)), &field("window_s"), true);
    match algo {
        "gcra" => {
            let rate = num(place.required(q, "rate", A_NUMBER)?, &field("rate"), true)?;
            let burst = match q.get("burst") {
                Some(b) => whole(Some(b), &field("burst"))?,
                None => rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32,
            };
            let interval = span(1.0 / rate);
            if interval.is_zero() {
                return Err(input(format!(
                    "{}: above 1e9 per second, got {}",
                    field("rate"),
                    float_or_repr(q.get("rate"))
                )));
            }
            Ok((PolicyAlgorithm::Gcra { rate, burst, interval }, window(q)?))
        }
        "count_then_block" => {
            let requests_per_period =
                whole(place.required(q, "requests_per_period", A_WHOLE_NUMBER)?, &field("requests_per_period"))?;
            let period = duration(place.required(q, "period", SECONDS)?, &field("period"), false)?;
            let mitigation_timeout = match q.get("mitigation_timeout") {
                None => Span::ZERO,
                v => duration(v, &field("mitigation_timeout"), true)?,
            };
            let counting = match q.get("counting").map(|v| v.as_str()) {
                None | Some(Some("sliding_log")) => rules::Algorithm::SlidingLog { requests_per_period, period },
                Some(Some("fixed_window")) => rules::Algorithm::FixedWindow { requests_per_period, period },
                Some(Some("sliding_window")) => rules::Algorithm::SlidingWindow { requests_per_period, period },
                _ => {
                    return Err(input(format!(
                        "policy {}: counting must be sliding_log (the default), fixed_window or sliding_window",
                        py::str_repr(name)
                    )))
                }
            };
            Ok((PolicyAlgorithm::CountThenBlock { counting, mitigation_timeout }, secs(period)))
        }
        _ => {
            let rate = num(place.required(q, "rate", A_NUMBER)?, &field("rate"), true)?;
            if rate < crate::client::smartflow::RATE_FLOOR {
                return Err(input(format!(
                    "{} must be >= {} (the Smart Flow bucket's floor), got {}",
                    field("rate"),
                    crate::client::smartflow::RATE_FLOOR,
                    float_or_repr(q.get("rate"))
                )));
            }
            let burst = match q.get("burst") {
                Some(b) => num(Some(b), &field("burst"), true)?,
                None => rate.max(1.0),
            };
            Ok((PolicyAlgorithm::SmartFlow { rate, burst }, window(q)?))
        }
    }
}

/// The rules of a rules file in the edge worker's format (`{"rules": [...]}`), and a
/// `count_then_block` policy named by each rule's id, for the report: the edge's pipeline
/// decides them ([`super::edge`]), each request with the method, colo, address and headers
/// its trace gives (a configuration's clients send GETs from one colo). With a `tenants`
/// section, a last policy, `tenants`, stands for the edge's tenant stage
/// (`sim::tenants`).
pub fn edge_rule_policies(rules: &Value) -> Result<(RuleSet, Vec<Policy>), SimError> {
    let set = RuleSet::from_json(&rules.to_string()).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        input(format!("edge_rules: {}", list.join("; ")))
    })?;
    let policies = set
        .rules()
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let by_client =
                rule.characteristics.iter().any(|c| matches!(c, Characteristic::IpSrc | Characteristic::Header(_)));
            let by_endpoint = rule.characteristics.contains(&Characteristic::Path);
            let key = match (by_client, by_endpoint) {
                (true, true) => KeyBy::ClientEndpoint,
                (true, false) => KeyBy::Client,
                (false, true) => KeyBy::Endpoint,
                (false, false) => KeyBy::Global,
            };
            let endpoints = rule
                .matcher
                .paths
                .iter()
                .map(|(PathMatch::StartsWith(path) | PathMatch::Equals(path))| path.clone())
                .collect();
            let window_s = match rule.algorithm {
                rules::Algorithm::TokenBucket { .. } => 1.0,
                rules::Algorithm::SlidingLog { period, .. }
                | rules::Algorithm::FixedWindow { period, .. }
                | rules::Algorithm::SlidingWindow { period, .. } => secs(period),
            };
            Policy {
                name: rule.id.clone(),
                algorithm: PolicyAlgorithm::CountThenBlock {
                    counting: rule.algorithm,
                    mitigation_timeout: rule.mitigation_timeout,
                },
                key,
                window_s,
                endpoints,
                clients: Vec::new(),
                exclude_clients: Vec::new(),
                quota: counting_quota(rule.algorithm),
                edge_rule: Some(i),
            }
        })
        .chain(set.tenants().map(tenant_stage_policy))
        .chain(pre_read_policy(&set))
        .collect();
    Ok((set, policies))
}

/// The policy that stands for the edge's checks before a body is read, when the rules file
/// sets a per-address or per-isolate limit (without one, only the default ceiling of body
/// bytes per source applies, and it is not simulated).
fn pre_read_policy(set: &RuleSet) -> Option<Policy> {
    let pre = set.pre_read();
    let limit = pre.per_ip.as_ref().or(pre.node.as_ref())?;
    let burst = limit.burst();
    Some(Policy {
        name: "pre_read".into(),
        algorithm: PolicyAlgorithm::PreRead { rate: 1e9 / limit.interval().as_nanos() as f64, burst },
        key: KeyBy::PreReadCheck,
        window_s: 1.0,
        endpoints: Vec::new(),
        clients: Vec::new(),
        exclude_clients: Vec::new(),
        quota: PyValue::Int(burst.into()),
        edge_rule: None,
    })
}

/// The policy that stands for the edge's tenant stage in the report: its figures are those
/// of the most generous limit (the most one tenant may send in a second).
fn tenant_stage_policy(tenants: &crate::edge::tenants::Tenants) -> Policy {
    let most = tenants.limits.values().chain(&tenants.default).map(|l| (l.rate, l.burst)).fold(
        None,
        |most: Option<(f64, u32)>, (rate, burst)| match most {
            Some((r, b)) if r + f64::from(b) >= rate + f64::from(burst) => most,
            _ => Some((rate, burst)),
        },
    );
    let (rate, burst) = most.unwrap_or((0.0, 0));
    Policy {
        name: "tenants".into(),
        algorithm: PolicyAlgorithm::TenantQuota { rate, burst },
        key: match tenants.scope {
            crate::edge::tenants::TenantScope::Colo | crate::edge::tenants::TenantScope::Isolate => KeyBy::TenantColo,
            crate::edge::tenants::TenantScope::Fleet => KeyBy::Tenant,
        },
        window_s: 1.0,
        endpoints: tenants
            .matcher
            .paths
            .iter()
            .map(|(PathMatch::StartsWith(path) | PathMatch::Equals(path))| path.clone())
            .collect(),
        clients: Vec::new(),
        exclude_clients: Vec::new(),
        quota: PyValue::Int(burst.into()),
        edge_rule: None,
    }
}

fn client(i: usize, c: &Value, duration_s: f64) -> Result<Client, SimError> {
    let c = c.as_object().ok_or_else(|| input(format!("client {i} must be a JSON object")))?;
    let name = name(c, "client", format!("client-{i}"))?;
    let place = Place { list: "clients", index: i - 1, name: &name };
    place.known_fields(c, &CLIENT_FIELDS)?;
    let cname = py::str_repr(&name);
    let field = |f: &str| format!("{name}.{f}");
    let retry = match c.get("retry") {
        None => Some(Retry::None),
        Some(v) => Retry::ALL.iter().find(|(n, _)| v.as_str() == Some(n)).map(|(_, r)| *r),
    }
    .ok_or_else(|| input(format!("client {cname}: retry must be none, immediate, backoff or honor")))?;
    let max_retries = match c.get("max_retries").map(PyValue::from_json) {
        None => 3,
        Some(PyValue::Bool(b)) => i128::from(b),
        Some(PyValue::Int(i)) => i,
        Some(PyValue::Float(x)) if x.is_finite() => x.trunc() as i128,
        Some(PyValue::Str(s)) if py::parse_int(&s).is_some() => py::parse_int(&s).unwrap_or(3),
        Some(other) => {
            return Err(input(format!("client {cname}: max_retries must be an integer, got {}", other.repr())));
        }
    };
    let cost = num(Some(c.get("cost").unwrap_or(&Value::from(1))), &field("cost"), true)?;
    let start = num(Some(c.get("start").unwrap_or(&Value::from(0))), &field("start"), false)?;
    let duration = match c.get("duration") {
        Some(d) => num(Some(d), &field("duration"), true)?,
        None => num(Some(&Value::from(duration_s - start)), &field("duration"), true)?,
    };
    let pattern = match c.get("pattern").map_or(Some("steady"), Value::as_str) {
        Some(p @ ("steady" | "poisson")) => {
            let rps = num(place.required(c, "rps", A_NUMBER)?, &field("rps"), true)?;
            if p == "steady" {
                Pattern::Steady { rps }
            } else {
                Pattern::Poisson { rps }
            }
        }
        Some("burst") => Pattern::Burst {
            burst: num(place.required(c, "burst", A_NUMBER)?, &field("burst"), true)?.trunc() as i128,
            every_s: num(Some(c.get("every_s").unwrap_or(&Value::from(60))), &field("every_s"), true)?,
        },
        _ => return Err(input(format!("client {cname}: pattern must be steady, poisson or burst"))),
    };
    let endpoint = match c.get("endpoint") {
        None => "/".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(input(format!(
                "client {cname}: endpoint must be a string, got {}",
                PyValue::from_json(other).repr()
            )));
        }
    };
    Ok(Client {
        kind: c.get("kind").map_or_else(|| "unknown".into(), PyValue::from_json),
        name,
        pattern,
        endpoint,
        retry,
        max_retries,
        cost,
        start,
        duration,
    })
}

#[cfg(test)]
mod tests {
    use super::{nanos, Config, FieldError, FieldProblem, CLIENT_FIELDS, CONFIG_FIELDS, POLICY_FIELDS};
    use crate::sim::SimError;

    /// The field error `text` is refused with (it must be one).
    fn field_error(text: &str) -> FieldError {
        match Config::from_json(text) {
            Err(SimError::Field(e)) => *e,
            other => panic!("expected a field error for {text}, got {other:?}"),
        }
    }

    /// A valid config with `extra` spliced into its top level, its second policy and its client.
    #[test]
    fn a_schema_reference_is_read_at_the_top_only() {
        let with = config_with(r#", "$schema": "./node_modules/sluicegate/schema/sim-config.json""#, "", "");
        assert!(Config::from_json(&with).is_ok());
        let in_policy = config_with("", r#", "$schema": "x""#, "");
        assert!(Config::from_json(&in_policy).is_err(), "a policy has no $schema");
    }

    fn config_with(top: &str, policy: &str, client: &str) -> String {
        format!(
            r#"{{"duration_s": 10{top}, "policies": [{{"algorithm": "token_bucket", "rate": 1}},
                {{"name": "api", "algorithm": "fixed_window", "limit": 5, "window_s": 1{policy}}}],
              "clients": [{{"name": "app", "rps": 2{client}}}]}}"#
        )
    }

    #[test]
    fn a_misspelt_field_is_refused_in_every_object_naming_where_it_is_and_the_name_meant() {
        // the config, then the field error's at, name, field, suggestion and allowed fields
        type Case = (String, &'static str, &'static str, &'static str, Option<&'static str>, &'static [&'static str]);
        let cases: [Case; 5] = [
            (config_with(r#", "durration_s": 20"#, "", ""), "", "", "durration_s", Some("duration_s"), &CONFIG_FIELDS),
            (config_with("", r#", "bursts": 3"#, ""), "policies[1]", "api", "bursts", Some("burst"), &POLICY_FIELDS),
            (config_with("", "", r#", "rsp": 3"#), "clients[0]", "app", "rsp", Some("rps"), &CLIENT_FIELDS),
            (config_with("", r#", "colour": "red""#, ""), "policies[1]", "api", "colour", None, &POLICY_FIELDS),
            (config_with(r#", "policy": []"#, "", ""), "", "", "policy", Some("policies"), &CONFIG_FIELDS),
        ];
        for (text, at, name, field, suggestion, allowed) in cases {
            let e = field_error(&text);
            let want = FieldError {
                config: None,
                at: at.into(),
                name: name.into(),
                field: field.into(),
                problem: FieldProblem::Unknown { suggestion, allowed },
            };
            assert_eq!(e, want, "{text}");
        }
    }

    #[test]
    fn an_unknown_field_says_where_it_is_what_was_meant_and_every_field_allowed() {
        let e = field_error(&config_with("", "", r#", "rsp": 3"#));
        assert_eq!(e.path(), "clients[0].rsp");
        assert_eq!(
            e.to_string(),
            "clients[0].rsp: unknown field in client 'app' (did you mean \"rps\"?); a client has name, notes, kind, \
             pattern, rps, burst, every_s, endpoint, retry, max_retries, cost, start, duration"
        );
        let e = field_error(&config_with("", r#", "colour": "red""#, ""));
        assert!(
            e.to_string().starts_with("policies[1].colour: unknown field in policy 'api'; a policy has name, "),
            "{e}"
        );
        let e = field_error(&config_with(r#", "durration_s": 20"#, "", ""));
        assert!(e.to_string().starts_with("durration_s: unknown field in the config (did you mean \"duration_s\"?)"));
        assert_eq!(SimError::Field(Box::new(e)).exit_code(), 2);
    }

    #[test]
    fn notes_are_allowed_in_every_object() {
        let text = config_with(r#", "notes": "today's""#, r#", "notes": ["tiers"]"#, r#", "notes": {"owner": "x"}"#);
        assert!(Config::from_json(&text).is_ok());
    }

    #[test]
    fn a_required_number_left_out_is_named_as_required_not_as_none() {
        let policy = |p: &str| format!(r#"{{"policies": [{p}], "clients": [{{"rps": 1}}]}}"#);
        let client = |c: &str| format!(r#"{{"policies": [{{"algorithm": "gcra", "rate": 1}}], "clients": [{c}]}}"#);
        let cases = [
            (policy(r#"{"name": "ml", "algorithm": "fixed_window", "window_s": 1}"#), "policies[0]", "ml", "limit"),
            (policy(r#"{"name": "ml", "algorithm": "sliding_log", "limit": 1}"#), "policies[0]", "ml", "window_s"),
            (policy(r#"{"algorithm": "gcra"}"#), "policies[0]", "policy-1", "rate"),
            (policy(r#"{"algorithm": "smartflow", "burst": 2}"#), "policies[0]", "policy-1", "rate"),
            (
                policy(r#"{"algorithm": "count_then_block", "period": 1}"#),
                "policies[0]",
                "policy-1",
                "requests_per_period",
            ),
            (
                policy(r#"{"algorithm": "count_then_block", "requests_per_period": 1}"#),
                "policies[0]",
                "policy-1",
                "period",
            ),
            (client(r#"{"name": "norate", "pattern": "poisson"}"#), "clients[0]", "norate", "rps"),
            (client(r#"{"name": "nb", "pattern": "burst"}"#), "clients[0]", "nb", "burst"),
        ];
        for (text, at, name, field) in cases {
            let e = field_error(&text);
            assert_eq!((e.at.as_str(), e.name.as_str(), e.field.as_str()), (at, name, field), "{text}");
            assert!(matches!(e.problem, FieldProblem::Missing { .. }), "{text}: {e:?}");
            assert!(!e.to_string().contains("None"), "{e}");
        }
        let e = field_error(&policy(r#"{"name": "ml", "algorithm": "fixed_window", "window_s": 1}"#));
        assert_eq!(e.to_string(), "policies[0].limit is required (ml.limit: a number > 0)");
    }

    #[test]
    fn nanos_round_as_f64_round_does() {
        let cases = [
            0.0,
            1e-9,
            0.5e-9,
            1.5e-9,
            2.5e-9,
            0.499_999_999_999_999_9e-9,
            22.000000000000004,
            3.3333333333,
            1e9,
            123456.789,
        ];
        for x in cases {
            assert_eq!(nanos(x), (x * 1e9).round() as u64, "{x}");
        }
        for i in 0..100_000u64 {
            let x = i as f64 * 0.000_123_456_7 + (i % 7) as f64 * 1e-10;
            assert_eq!(nanos(x), (x * 1e9).round() as u64, "{x}");
        }
        assert_eq!((nanos(-1.0), nanos(f64::NAN)), (0, 0));
    }

    #[test]
    fn an_edge_rules_path_is_found_and_inlined_keeping_how_numbers_are_written() {
        let text = r#"{"duration_s": 20.0, "edge_rules": "../worker/rules.json", "policies": []}"#;
        assert_eq!(Config::edge_rules_path(text).as_deref(), Some("../worker/rules.json"));
        assert_eq!(Config::edge_rules_path(r#"{"edge_rules": {"rules": []}}"#), None);
        assert_eq!(Config::edge_rules_path("not json"), None);
        let rules = r#"{"rules": [{"id": "api", "period": 10}]}"#;
        let inlined: serde_json::Value =
            serde_json::from_str(&Config::inline_edge_rules(text, rules, "rules.json").unwrap()).unwrap();
        assert_eq!(inlined["edge_rules"]["rules"][0]["id"], "api");
        // 20.0 stays a float, 10 an integer: the simulator reads them apart
        assert!(inlined["duration_s"].is_f64() && inlined["edge_rules"]["rules"][0]["period"].is_u64());
        // no path: the text as it is; rules that are not JSON: named
        let object = r#"{"edge_rules": {"rules": []}}"#;
        assert_eq!(Config::inline_edge_rules(object, rules, "x").unwrap(), object);
        let bad = Config::inline_edge_rules(text, "{", "worker/rules.json").unwrap_err();
        assert!(bad.to_string().starts_with("edge_rules: worker/rules.json: invalid JSON: "), "{bad}");
    }
}
