//! From a replay to the report: per-client and per-policy rows and the findings RL01-RL13.

use super::config::secs;
use super::config::{Algorithm, Config, KeyBy};
use super::engine::{simulate, Outcome, Sample, Traffic};
use super::py::{format_f, format_g, round, PyValue};
use super::SimError;
use std::collections::HashMap;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Legit clients hurt or the backend over capacity: exit status 1.
    High,
    /// Worth fixing.
    Medium,
    /// Worth knowing.
    Low,
    /// A reminder.
    Info,
}

impl Severity {
    /// `high`, `medium`, `low` or `info`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// `RL01` ... `RL10`.
    pub code: &'static str,
    /// What and what to do.
    pub message: String,
}

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
}

impl Report {
    /// The number of high findings.
    pub fn highs(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == Severity::High).count()
    }
}

/// A map that remembers insertion order, for Python's "first maximum in dict order".
struct Counter<K> {
    index: HashMap<K, usize>,
    items: Vec<(K, u64, u64)>,
}

impl<K: core::hash::Hash + Eq + Clone> Counter<K> {
    fn new() -> Self {
        Counter { index: HashMap::new(), items: Vec::new() }
    }
    fn add(&mut self, key: K, a: u64, b: u64) {
        let i = *self.index.entry(key.clone()).or_insert_with(|| {
            self.items.push((key, 0, 0));
            self.items.len() - 1
        });
        self.items[i].1 += a;
        self.items[i].2 += b;
    }
    /// The first key with the highest first count.
    fn first_max(&self) -> Option<&(K, u64, u64)> {
        self.items.iter().fold(None, |best: Option<&(K, u64, u64)>, item| match best {
            Some(b) if b.1 >= item.1 => Some(b),
            _ => Some(item),
        })
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

/// Judges a replay's outcome: the rows, the findings RL01-RL13 and the sample 429.
pub fn report(cfg: &Config, out: Outcome) -> Result<Report, SimError> {
    if out.requests == 0 {
        return Err(no_traffic());
    }
    let kinds: HashMap<&str, &PyValue> = cfg.clients.iter().map(|c| (c.name.as_str(), &c.kind)).collect();
    let unknown = PyValue::from("unknown");
    let kind_of = |name: &str| -> &PyValue { kinds.get(name).copied().unwrap_or(&unknown) };
    let is = |name: &str, want: &str| matches!(kind_of(name), PyValue::Str(k) if k == want);
    let mut findings = Vec::new();
    let mut add = |severity, code, message| findings.push(Finding { severity, code, message });

    let peak = out.peak.unwrap_or_default();
    let (peak_sec, peak_rps, peak_retries) = (peak.second, peak.admitted, peak.retries);

    let mut order: Vec<usize> = (0..out.clients.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, sa) = &out.clients[a];
        let (nb, sb) = &out.clients[b];
        sb.logical.cmp(&sa.logical).then_with(|| na.cmp(nb))
    });
    let mut clients = Vec::new();
    for i in order {
        let (name, s) = &out.clients[i];
        let logical = s.logical as f64;
        let pct = |n: u64| if s.logical > 0 { 100.0 * n as f64 / logical } else { 0.0 };
        let (fail_pct, hurt_pct) = (pct(s.failed), pct(s.failed + s.delayed));
        let top = s.blocked_by.iter().fold(None, |best: Option<&(String, u64)>, item| match best {
            Some(b) if b.1 >= item.1 => Some(b),
            _ => Some(item),
        });
        let top = top.map_or("", |(n, _)| n.as_str());
        clients.push(ClientRow {
            client: name.clone(),
            kind: kind_of(name).clone(),
            logical: s.logical,
            attempts: s.attempts,
            allowed: s.allowed,
            rejected: s.rejected,
            failed: s.failed,
            failed_pct: round(fail_pct, 1),
            delayed: s.delayed,
            amplification: if s.logical > 0 { round(s.attempts as f64 / logical, 2) } else { 0.0 },
            max_retry_after_s: round(s.max_retry_after, 1),
            top_policy: top.into(),
            first_reject_s: s.first_reject.map(|t| round(t, 1)),
            paced: s.paced,
            mean_pace_s: if s.paced > 0 { round(s.pace_total / s.paced as f64, 3) } else { 0.0 },
            max_pace_s: round(s.pace_max, 3),
            pacer: s.pace_policy.clone().unwrap_or_default(),
        });
        if s.paced > 0 {
            let pacer = s.pace_policy.as_deref().unwrap_or("");
            let (severity, advice) = if is(name, "legit") && s.pace_max > 1.0 {
                (
                    Severity::Medium,
                    "it sends faster than the pacer's rate, so its queue grows; raise the pacer's rate if the \
                     server allows it, or spread the work",
                )
            } else {
                (Severity::Low, "no 429s are spent on them; this is the pacer doing its job")
            };
            add(
                severity,
                "RL11",
                format!(
                    "Pacer '{pacer}' holds back {} of {name}'s {} attempts, by {}s on average and up to {}s; {advice}.",
                    s.paced,
                    s.attempts,
                    format_f(s.pace_total / s.paced as f64, 2),
                    format_f(s.pace_max, 2)
                ),
            );
        }
        if s.pacer_applies && s.rejected > 0 {
            let top = if top.is_empty() { "a server policy" } else { top };
            add(
                Severity::Medium,
                "RL13",
                format!(
                    "Client {name} paces itself yet still gets {} 429s, mostly from '{top}': the pacer's rate or burst \
                     is above that limit; set the pacer to at most the server's sustained rate and burst.",
                    s.rejected
                ),
            );
        }
        if is(name, "legit") && hurt_pct > 1.0 {
            add(
                Severity::High,
                "RL01",
                format!(
                    "Legit client {name} is throttled on {}% of its requests ({} failed, {} only after retrying, \
                     waits up to {}s), mostly by policy '{top}'; raise that limit or give this client its own tier.",
                    format_f(hurt_pct, 1),
                    s.failed,
                    s.delayed,
                    format_f(s.max_retry_after, 1)
                ),
            );
        } else if is(name, "legit") && s.rejected > 0 {
            add(
                Severity::Low,
                "RL01",
                format!(
                    "Legit client {name} sees {} 429s but its retries recover; check it handles Retry-After.",
                    s.rejected
                ),
            );
        }
        if is(name, "abusive") && s.logical > 0 {
            let share = pct(s.allowed);
            if share > 25.0 {
                add(
                    Severity::Medium,
                    "RL02",
                    format!(
                        "Abusive client {name} still gets {}% of its requests through ({}); tighten the per-client \
                         limit or add a stricter policy for its pattern.",
                        format_f(share, 0),
                        s.allowed
                    ),
                );
            }
        }
        let amp = if s.logical > 0 { s.attempts as f64 / logical } else { 0.0 };
        if amp >= 1.5 {
            add(
                Severity::Medium,
                "RL05",
                format!(
                    "Client {name} sends {}x attempts per logical request because it retries throttled calls; \
                     retries count against the limit and add load - require Retry-After or backoff with jitter.",
                    format_f(amp, 2)
                ),
            );
        }
    }

    if out.admitted > 0 && peak_retries as f64 > 0.5 * peak_rps as f64 && peak_rps >= 20 {
        add(
            Severity::Medium,
            "RL10",
            format!(
                "Retry herd: {peak_retries} of the {peak_rps} requests admitted in second {peak_sec} are retries \
                 released by the same Retry-After / window reset; add jitter to Retry-After (or client backoff) and \
                 prefer a token bucket or sliding window so capacity is not handed out all at once."
            ),
        );
    }
    if let Some(cap) = cfg.capacity_rps.filter(|&c| c != 0.0) {
        if peak_rps as f64 > cap {
            add(
                Severity::High,
                "RL03",
                format!(
                    "Admitted traffic peaks at {peak_rps} req/s (second {peak_sec}) over the backend capacity of {} \
                     req/s; add or lower a global limit.",
                    format_g(cap)
                ),
            );
        }
        if !cfg.policies.iter().any(|p| p.key == KeyBy::Global && !p.algorithm.is_pacer()) {
            let per_client = cfg
                .policies
                .iter()
                .filter(|p| !p.algorithm.is_pacer())
                .filter(|p| matches!(p.key, KeyBy::Client | KeyBy::ClientEndpoint))
                .filter(|p| p.endpoints.is_empty() && p.clients.is_empty())
                .map(|p| p.sustained_rps())
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| if x < m { x } else { m })));
            if let Some(min) = per_client {
                let n = out.clients.len();
                add(
                    Severity::Medium,
                    "RL03",
                    format!(
                        "No global policy: {n} clients x {} req/s per client = {} req/s possible vs capacity {}.",
                        format_g(min),
                        format_g(n as f64 * min),
                        format_g(cap)
                    ),
                );
            }
        }
    }

    let mut policies = Vec::new();
    let mut allowed_by: Option<Counter<usize>> = None;
    for (p, ps) in cfg.policies.iter().zip(&out.policies) {
        let obs = ps.observed_max;
        let theo = p.theoretical_max();
        let ctb = match p.algorithm {
            Algorithm::CountThenBlock { mitigation_timeout, .. } => Some(secs(mitigation_timeout)),
            _ => None,
        };
        policies.push(PolicyRow {
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
            worst_case_per_window: round(theo, 1),
            observed_max_per_window: obs,
            delayed: p.algorithm.is_pacer().then_some(ps.delayed),
            mitigation_timeout_s: ctb,
            blocks: ctb.map(|_| ps.blocks),
            blocked_clients: ps.blocked_clients.clone(),
        });
        match p.fixed_window_limit() {
            Some(limit) if obs as f64 > limit => add(
                Severity::Medium,
                "RL04",
                format!(
                    "{} '{}' let {obs} requests through in one rolling {}s window (limit {}, {}x) across a \
                     window boundary; use sliding_counter or a token bucket if the limit protects capacity.",
                    if matches!(p.algorithm, Algorithm::FixedWindow { .. }) {
                        "Fixed window"
                    } else {
                        "Count-then-block rule (fixed-window counting)"
                    },
                    p.name,
                    format_g(p.window_s),
                    format_g(limit),
                    format_f(obs as f64 / limit, 1)
                ),
            ),
            _ => {}
        }
        if let Some(timeout) = ctb.filter(|_| ps.blocks > 0) {
            let legit: Vec<String> =
                ps.blocked_clients.iter().filter(|(c, _)| is(c, "legit")).map(|(c, n)| format!("{c} ({n}x)")).collect();
            let all: Vec<String> = ps.blocked_clients.iter().map(|(c, n)| format!("{c} ({n}x)")).collect();
            if legit.is_empty() {
                add(
                    Severity::Low,
                    "RL12",
                    format!(
                        "Rule '{}' started {} block(s) of {}s: {}; each one refuses every request of the key until \
                         it ends.",
                        p.name,
                        ps.blocks,
                        format_g(timeout),
                        all.join(", ")
                    ),
                );
            } else {
                add(
                    Severity::High,
                    "RL12",
                    format!(
                        "Rule '{}' blocked legit client(s) {} for {}s each time: one burst over the limit costs \
                         them the whole mitigation timeout; raise requests_per_period above their peak, exempt them, \
                         or drop the block for this key.",
                        p.name,
                        legit.join(", "),
                        format_g(timeout)
                    ),
                );
            }
        }
        if p.key == KeyBy::Global && ps.rejects > 0 {
            let allowed_by = allowed_by.get_or_insert_with(|| {
                let mut order: Vec<usize> =
                    (0..out.clients.len()).filter(|&i| out.clients[i].1.first_admit.is_some()).collect();
                order.sort_by_key(|&i| out.clients[i].1.first_admit);
                let mut counter = Counter::new();
                for i in order {
                    counter.add(i, out.clients[i].1.allowed, 0);
                }
                counter
            });
            let Some(&(hog, hog_n, _)) = allowed_by.first_max() else {
                return Err(SimError::Crash(format!(
                    "global policy '{}' rejected requests but nothing was admitted: the reference raises \
                     \"ValueError: max() arg is an empty sequence\" here",
                    p.name
                )));
            };
            let total = out.admitted.max(1) as f64;
            let hog_name = out.clients[hog].0.as_str();
            let mut victims: Vec<&str> =
                ps.by_client.iter().map(String::as_str).filter(|c| is(c, "legit") && *c != hog_name).collect();
            let share = hog_n as f64 / total;
            if share > 0.5 && !victims.is_empty() {
                victims.sort_unstable();
                add(
                    if is(hog_name, "legit") { Severity::Medium } else { Severity::High },
                    "RL06",
                    format!(
                        "Noisy neighbour: {hog_name} holds {}% of admitted traffic while global policy '{}' rejects \
                         {}; add a per-client limit below the global one.",
                        format_f(100.0 * hog_n as f64 / total, 0),
                        p.name,
                        victims.join(", ")
                    ),
                );
            }
        }
        match p.sliding_log_limit() {
            Some(limit) if limit > 1000.0 => add(
                Severity::Low,
                "RL07",
                format!(
                    "Sliding log '{}' stores up to {} timestamps per key; prefer sliding_counter for large limits.",
                    p.name,
                    limit.trunc() as i128
                ),
            ),
            _ => {}
        }
        if !p.algorithm.is_pacer() && ps.checks > 0 && ps.rejects == 0 && obs > 0 && theo > 10.0 * obs as f64 {
            add(
                Severity::Low,
                "RL09",
                format!(
                    "Policy '{}' never triggered; its worst case ({} per {}s) is >10x the busiest key ({obs}). Fine \
                     as a safety net, but it will not stop a surge.",
                    p.name,
                    format_g(theo),
                    format_g(p.window_s)
                ),
            );
        }
    }
    if out.sample.is_some() {
        add(
            Severity::Info,
            "RL08",
            "Return 429 with Retry-After on every rejection (see the sample headers) and document the limits so \
             clients can pace themselves."
                .into(),
        );
    }
    findings.sort_by(|a, b| a.severity.cmp(&b.severity).then(a.code.cmp(b.code)));
    Ok(Report {
        service: cfg.service.clone(),
        duration_s: cfg.duration_s,
        requests: out.requests,
        admitted: out.admitted,
        peak_admitted_rps: peak_rps,
        peak_second: peak_sec,
        capacity_rps: cfg.capacity_rps,
        clients,
        policies,
        findings,
        sample_429: out.sample,
        pacers: cfg.policies.iter().any(|p| p.algorithm.is_pacer()),
    })
}
