//! From a replay to the report: per-client and per-policy rows, with the findings RL01-RL13
//! from [`super::findings`].

use super::config::{Config, Policy};
use super::engine::simulate;
use super::findings::{self, mitigation_timeout_s, top_policy, Kinds};
pub use super::findings::{Finding, Severity};
use super::py::{round, PyValue};
use super::stats::{ClientStats, Outcome, PolicyStats, Sample};
use super::traffic::Traffic;
use super::SimError;
use crate::edge::rules::{Enforce, RuleSet};
use crate::edge::tenants::{body_cap, effective, LimitSource, TenantLimit, Tenants};

/// One client's row.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRow {
    /// Name.
    pub client: String,
    /// Kind as configured (`unknown` when not configured).
    pub kind: PyValue,
    /// Logical requests.
    pub logical: u64,
    /// Attempts, retries included.
    pub attempts: u64,
    /// Admitted attempts.
    pub allowed: u64,
    /// Rejected attempts.
    pub rejected: u64,
    /// Logical requests given up on.
    pub failed: u64,
    /// `failed / logical` in percent, rounded to 1 decimal.
    pub failed_pct: f64,
    /// Logical requests admitted only after retrying.
    pub delayed: u64,
    /// Attempts per logical request, rounded to 2 decimals.
    pub amplification: f64,
    /// Longest Retry-After, rounded to 1 decimal.
    pub max_retry_after_s: f64,
    /// The policy that rejected it most (empty: none).
    pub top_policy: String,
    /// First rejection, rounded to 1 decimal.
    pub first_reject_s: Option<f64>,
    /// Attempts a client-side pacer (`smartflow`) held back.
    pub paced: u64,
    /// Their mean wait, rounded to 3 decimals.
    pub mean_pace_s: f64,
    /// The longest, rounded to 3 decimals.
    pub max_pace_s: f64,
    /// The pacer that imposed it (empty: none).
    pub pacer: String,
}

/// One policy's row.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRow {
    /// Name.
    pub name: String,
    /// Algorithm name.
    pub algorithm: &'static str,
    /// Key name.
    pub key: &'static str,
    /// Endpoint prefixes.
    pub endpoints: Vec<String>,
    /// Only these clients.
    pub clients: Vec<String>,
    /// Not these clients.
    pub exclude_clients: Vec<String>,
    /// Attempts checked.
    pub checks: u64,
    /// Attempts rejected.
    pub rejects: u64,
    /// Long-run rate per key, rounded to 3 decimals.
    pub sustained_rps: f64,
    /// Window length.
    pub window_s: f64,
    /// Most one key can get through per window, rounded to 1 decimal.
    pub worst_case_per_window: f64,
    /// Most one key got through in any rolling window.
    pub observed_max_per_window: u64,
    /// For a pacer (`smartflow`): attempts it delayed.
    pub delayed: Option<u64>,
    /// For a `count_then_block` policy: its mitigation timeout, seconds.
    pub mitigation_timeout_s: Option<f64>,
    /// For a `count_then_block` policy: blocks started.
    pub blocks: Option<u64>,
    /// For a `count_then_block` policy: blocks started per client.
    pub blocked_clients: Vec<(String, u64)>,
    /// For a rule of the edge's: where it counts, and how many counters that makes.
    pub store: Option<StoreRow>,
    /// For a rule of the edge's that does not enforce all its refusals: its enforcement and
    /// the refusals it made in shadow.
    pub shadow: Option<ShadowRow>,
}

/// What an edge rule in shadow or partial enforcement (`"enforce": false` or a share of its
/// counting keys) would have refused beyond what it did.
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowRow {
    /// Its `enforce`.
    pub enforce: Enforce,
    /// Attempts it refused in shadow: counted as refused, let through (its `rejects` are the
    /// enforced ones).
    pub would_refuse: u64,
    /// The clients of those attempts, in the order first seen.
    pub clients: Vec<String>,
}

/// Where an edge rule counts in the simulated spread ([`super::spread`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StoreRow {
    /// Its `store`.
    pub store: &'static str,
    /// How many independent counters count one key: 1 for a Durable Object (exact), the
    /// locations for the binding, isolates × locations for the isolate.
    pub counters: usize,
    /// Those counters in words: `exact`, `3 locations`, `8 isolates × 1 location`.
    pub described: String,
    /// The most one key can get through per window with one counter (the exact limit).
    pub exact_per_window: f64,
}

/// The simulator's result: what `--json` prints and the Markdown report is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The config's `service`.
    pub service: PyValue,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Logical requests.
    pub requests: u64,
    /// Admitted attempts.
    pub admitted: u64,
    /// Most attempts admitted in one whole second.
    pub peak_admitted_rps: u64,
    /// That second (the first one, on a tie).
    pub peak_second: i128,
    /// Backend capacity.
    pub capacity_rps: Option<f64>,
    /// Clients, most requests first.
    pub clients: Vec<ClientRow>,
    /// Policies, in config order.
    pub policies: Vec<PolicyRow>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// The first rejection.
    pub sample_429: Option<Sample>,
    /// Whether any policy is a client-side pacer (the report then shows pacing).
    pub pacers: bool,
    /// Whether the edge's traffic is spread over several isolates or locations.
    pub spread: bool,
    /// What the edge's tenant stage did per tenant, when the rules have `tenants`.
    pub tenants: Option<Vec<TenantRow>>,
}

/// What the edge's tenant stage did to one tenant's attempts (those the rules admitted).
#[derive(Clone, Debug, PartialEq)]
pub struct TenantRow {
    /// The tenant; `None` for the attempts that named no known tenant (refused with 401).
    pub tenant: Option<String>,
    /// The limit it is under (`None`: unlimited).
    pub limit: Option<TenantLimit>,
    /// Where that limit comes from: `config` (its entry in `limits`) or `default`.
    pub source: Option<&'static str>,
    /// The biggest body it may send (its limit's, or the file's), if capped.
    pub max_body_bytes: Option<u64>,
    /// Attempts that reached the stage.
    pub checks: u64,
    /// Admitted.
    pub admitted: u64,
    /// Refused with 401: no known tenant.
    pub unauthorized: u64,
    /// Refused with 413: a body over its cap.
    pub too_large: u64,
    /// Refused with 429 `tenant_rate_limited`.
    pub rate_limited: u64,
    /// Refused with 429 `tenant_overload`.
    pub overloaded: u64,
    /// Admitted, refused in shadow by its limit (`"enforce"` not `true` for it).
    pub would_refuse: u64,
}

impl Report {
    /// The number of high findings.
    pub fn highs(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == Severity::High).count()
    }
}

/// Replays in-memory traffic and judges the result. No traffic at all is an input error.
pub fn analyse(cfg: &Config, traffic: Traffic) -> Result<Report, SimError> {
    if traffic.is_empty() {
        return Err(no_traffic());
    }
    report(cfg, simulate(cfg, traffic)?)
}

fn no_traffic() -> SimError {
    SimError::Input("no traffic: add clients to the config or pass --trace".into())
}

/// Judges a replay's outcome: the rows, the findings RL01-RL13 (see `findings.rs`) and
/// the sample 429.
pub fn report(cfg: &Config, out: Outcome) -> Result<Report, SimError> {
    if out.requests == 0 {
        return Err(no_traffic());
    }
    let kinds = Kinds::new(cfg);
    let order = most_requests_first(&out);
    let findings = findings::findings(cfg, &out, &order, &kinds)?;
    let peak = out.peak.unwrap_or_default();
    Ok(Report {
        service: cfg.service.clone(),
        duration_s: cfg.duration_s,
        requests: out.requests,
        admitted: out.admitted,
        peak_admitted_rps: peak.admitted,
        peak_second: peak.second,
        capacity_rps: cfg.capacity_rps,
        clients: order.iter().map(|&i| client_row(&out.clients[i], &kinds)).collect(),
        policies: cfg.policies.iter().zip(&out.policies).map(|(p, ps)| policy_row(cfg, p, ps)).collect(),
        findings,
        pacers: cfg.policies.iter().any(|p| p.algorithm.is_pacer()),
        spread: cfg.edge_spread.is_spread(),
        tenants: cfg.edge_rules.as_ref().and_then(RuleSet::tenants).map(|t| tenant_rows(t, &out)),
        sample_429: out.sample,
    })
}

/// The tenant stage's rows: each tenant that reached it, in the order first seen, then the
/// attempts that named none (when there were any).
fn tenant_rows(tenants: &Tenants, out: &Outcome) -> Vec<TenantRow> {
    let mut rows: Vec<TenantRow> = out
        .tenants
        .iter()
        .map(|(name, s)| {
            let found = effective(None, tenants.limits.get(name), tenants.default.as_ref());
            TenantRow {
                tenant: Some(name.clone()),
                limit: found.map(|(limit, _)| limit.clone()),
                source: found.map(|(_, source)| match source {
                    LimitSource::Override => "override",
                    LimitSource::Config => "config",
                    LimitSource::Default => "default",
                }),
                max_body_bytes: body_cap(found.map(|(limit, _)| limit), tenants.max_body_bytes),
                checks: s.checks,
                admitted: s.admitted,
                unauthorized: 0,
                too_large: s.too_large,
                rate_limited: s.rate_limited,
                overloaded: s.overloaded,
                would_refuse: s.would_refuse,
            }
        })
        .collect();
    if out.no_tenant > 0 {
        rows.push(TenantRow {
            tenant: None,
            limit: None,
            source: None,
            max_body_bytes: None,
            checks: out.no_tenant,
            admitted: 0,
            unauthorized: out.no_tenant,
            too_large: 0,
            rate_limited: 0,
            overloaded: 0,
            would_refuse: 0,
        });
    }
    rows
}

/// Indexes into `out.clients`, most logical requests first, then by name: the order of the
/// client rows and of the per-client findings.
fn most_requests_first(out: &Outcome) -> Vec<usize> {
    let mut order: Vec<usize> = (0..out.clients.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, sa) = &out.clients[a];
        let (nb, sb) = &out.clients[b];
        sb.logical.cmp(&sa.logical).then_with(|| na.cmp(nb))
    });
    order
}

/// One client's row, numbers rounded as the reference prints them.
fn client_row((name, s): &(String, ClientStats), kinds: &Kinds<'_>) -> ClientRow {
    let logical = s.logical as f64;
    let failed_pct = if s.logical > 0 { 100.0 * s.failed as f64 / logical } else { 0.0 };
    ClientRow {
        client: name.clone(),
        kind: kinds.of(name).clone(),
        logical: s.logical,
        attempts: s.attempts,
        allowed: s.allowed,
        rejected: s.rejected,
        failed: s.failed,
        failed_pct: round(failed_pct, 1),
        delayed: s.delayed,
        amplification: if s.logical > 0 { round(s.attempts as f64 / logical, 2) } else { 0.0 },
        max_retry_after_s: round(s.max_retry_after, 1),
        top_policy: top_policy(s).into(),
        first_reject_s: s.first_reject.map(|t| round(t, 1)),
        paced: s.paced,
        mean_pace_s: if s.paced > 0 { round(s.pace_total / s.paced as f64, 3) } else { 0.0 },
        max_pace_s: round(s.pace_max, 3),
        pacer: s.pace_policy.clone().unwrap_or_default(),
    }
}

/// One policy's row: its configuration, what it did, and its worst case beside the busiest
/// key's observed maximum.
fn policy_row(cfg: &Config, p: &Policy, ps: &PolicyStats) -> PolicyRow {
    let timeout = mitigation_timeout_s(p);
    let rule = p.edge_rule.and_then(|r| cfg.edge_rules.as_ref()?.rules().get(r));
    let store = rule.map(|rule| store_row(&rule.store, &cfg.edge_spread, p.theoretical_max()));
    let shadow = rule.filter(|rule| rule.enforce != Enforce::All).map(|rule| ShadowRow {
        enforce: rule.enforce,
        would_refuse: ps.shadow_refusals,
        clients: ps.shadow_clients.clone(),
    });
    PolicyRow {
        name: p.name.clone(),
        algorithm: p.algorithm.name(),
        key: p.key.name(),
        endpoints: p.endpoints.clone(),
        clients: p.clients.clone(),
        exclude_clients: p.exclude_clients.clone(),
        checks: ps.checks,
        rejects: ps.rejects,
        sustained_rps: round(p.sustained_rps(), 3),
        window_s: p.window_s,
        worst_case_per_window: round(p.theoretical_max() * store.as_ref().map_or(1.0, |s| s.counters as f64), 1),
        observed_max_per_window: ps.observed_max,
        delayed: p.algorithm.is_pacer().then_some(ps.delayed),
        mitigation_timeout_s: timeout,
        blocks: timeout.map(|_| ps.blocks),
        blocked_clients: ps.blocked_clients.clone(),
        store,
        shadow,
    }
}

/// How many counters count one key of a rule in `store`, spread as `spread` says.
fn store_row(store: &crate::edge::rules::Store, spread: &super::spread::Spread, exact: f64) -> StoreRow {
    use crate::edge::rules::Store;
    let locations = spread.locations.len();
    let (counters, described) = match store {
        Store::DurableObject => (1, "exact (one per key)".into()),
        Store::Cloudflare { .. } => (locations, super::spread::plural(locations, "location")),
        Store::Isolate { .. } => (spread.isolates.len() * locations, spread.describe()),
    };
    StoreRow { store: store.name(), counters, described, exact_per_window: round(exact, 1) }
}
