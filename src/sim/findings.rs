//! The findings RL01-RL13: what the replay says about the policies, one function each.
//!
//! [`findings`] asks them in a fixed order (per client, most requests first: RL11, RL13,
//! RL01, RL02, RL05; then RL10 and RL03 over the whole traffic; per policy, in config
//! order: RL04, RL12, RL06, RL07, RL09; last RL08) and sorts the result by severity, then
//! code. The sort is stable, so findings of one severity and code keep that order, which
//! is the reference's.

use super::config::secs;
use super::config::{Config, KeyBy, Policy, PolicyAlgorithm};
use super::py::PyValue;
use super::py::{format_f, format_g};
use super::stats::{ClientStats, Outcome, Peak, PolicyStats};
use super::SimError;
use std::cell::OnceCell;
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
    /// `RL01` ... `RL13`.
    pub code: &'static str,
    /// What and what to do.
    pub message: String,
}

/// Each configured client's kind by name (the last entry of a name wins); `unknown` for a
/// client that only the trace names.
pub(super) struct Kinds<'c> {
    by_name: HashMap<&'c str, &'c PyValue>,
    unknown: PyValue,
}

impl<'c> Kinds<'c> {
    pub(super) fn new(cfg: &'c Config) -> Self {
        Kinds {
            by_name: cfg.clients.iter().map(|c| (c.name.as_str(), &c.kind)).collect(),
            unknown: PyValue::from("unknown"),
        }
    }

    /// The kind of client `name`, as configured.
    pub(super) fn of(&self, name: &str) -> &PyValue {
        self.by_name.get(name).copied().unwrap_or(&self.unknown)
    }

    /// Whether client `name` is configured with kind `kind` (`legit`, `abusive`).
    pub(super) fn is(&self, name: &str, kind: &str) -> bool {
        matches!(self.of(name), PyValue::Str(k) if k == kind)
    }
}

/// The first of the items with the highest count: Python's `max()` over a dict in insertion
/// order, which the reference uses to name a winner.
pub(super) fn first_max<T>(items: impl IntoIterator<Item = T>, count: impl Fn(&T) -> u64) -> Option<T> {
    items.into_iter().fold(None, |best, item| match best {
        Some(b) if count(&b) >= count(&item) => Some(b),
        _ => Some(item),
    })
}

/// The policy that rejected the client most (the first rejecting policy of each refusal
/// counts); empty when none did.
pub(super) fn top_policy(s: &ClientStats) -> &str {
    first_max(&s.blocked_by, |(_, n)| *n).map_or("", |(name, _)| name.as_str())
}

/// A `count_then_block` policy's mitigation timeout in seconds (`None`: another algorithm).
pub(super) fn mitigation_timeout_s(p: &Policy) -> Option<f64> {
    match p.algorithm {
        PolicyAlgorithm::CountThenBlock { mitigation_timeout, .. } => Some(secs(mitigation_timeout)),
        _ => None,
    }
}

/// Every finding of a replay, most severe first (see the module for the order). Fails only
/// where the reference crashes (RL06 with nothing admitted).
pub(super) fn findings(
    cfg: &Config,
    out: &Outcome,
    order: &[usize],
    kinds: &Kinds<'_>,
) -> Result<Vec<Finding>, SimError> {
    let mut found = Vec::new();
    for &i in order {
        let (name, s) = &out.clients[i];
        let client = ClientView { name, s, legit: kinds.is(name, "legit"), abusive: kinds.is(name, "abusive") };
        rl11_pacer_holds_back(&mut found, &client);
        rl13_paced_client_still_refused(&mut found, &client);
        rl01_legit_client_throttled(&mut found, &client);
        rl02_abusive_client_gets_through(&mut found, &client);
        rl05_retry_amplification(&mut found, &client);
    }
    let peak = out.peak.unwrap_or_default();
    rl10_retry_herd(&mut found, out, peak);
    rl03_backend_over_capacity(&mut found, cfg, out, peak);
    let busiest = OnceCell::new();
    for (p, ps) in cfg.policies.iter().zip(&out.policies) {
        rl04_fixed_window_boundary_burst(&mut found, p, ps);
        rl12_blocks_started(&mut found, p, ps, kinds);
        if p.key == KeyBy::Global && ps.rejects > 0 {
            let busiest = busiest.get_or_init(|| most_admitted(out));
            rl06_noisy_neighbour(&mut found, p, ps, out, *busiest, kinds)?;
        }
        rl07_large_sliding_log(&mut found, p);
        rl09_policy_never_triggered(&mut found, p, ps);
    }
    rl08_send_retry_after(&mut found, out);
    found.sort_by(|a, b| a.severity.cmp(&b.severity).then(a.code.cmp(b.code)));
    Ok(found)
}

/// One client as the per-client findings see it.
struct ClientView<'a> {
    name: &'a str,
    s: &'a ClientStats,
    /// Configured with kind `legit`.
    legit: bool,
    /// Configured with kind `abusive`.
    abusive: bool,
}

impl ClientView<'_> {
    /// `n` as a percentage of the client's logical requests (0 without any).
    fn percent(&self, n: u64) -> f64 {
        if self.s.logical > 0 {
            100.0 * n as f64 / self.s.logical as f64
        } else {
            0.0
        }
    }
}

/// RL01, a legit client throttled. High when more than 1% of its requests failed or got
/// through only after retrying: the limits hurt real users. Low when it saw 429s but every
/// retry recovered: harmless only if it honours Retry-After.
fn rl01_legit_client_throttled(found: &mut Vec<Finding>, c: &ClientView<'_>) {
    let (name, s, top) = (c.name, c.s, top_policy(c.s));
    let hurt_pct = c.percent(s.failed + s.delayed);
    if c.legit && hurt_pct > 1.0 {
        found.push(Finding {
            severity: Severity::High,
            code: "RL01",
            message: format!(
                "Legit client {name} is throttled on {}% of its requests ({} failed, {} only after retrying, \
                 waits up to {}s), mostly by policy '{top}'; raise that limit or give this client its own tier.",
                format_f(hurt_pct, 1),
                s.failed,
                s.delayed,
                format_f(s.max_retry_after, 1)
            ),
        });
    } else if c.legit && s.rejected > 0 {
        found.push(Finding {
            severity: Severity::Low,
            code: "RL01",
            message: format!(
                "Legit client {name} sees {} 429s but its retries recover; check it handles Retry-After.",
                s.rejected
            ),
        });
    }
}

/// RL02, an abusive client gets through (medium): more than a quarter of its requests were
/// admitted, so the limits barely slow it down.
fn rl02_abusive_client_gets_through(found: &mut Vec<Finding>, c: &ClientView<'_>) {
    let (name, s) = (c.name, c.s);
    if !c.abusive || s.logical == 0 {
        return;
    }
    let share = c.percent(s.allowed);
    if share > 25.0 {
        found.push(Finding {
            severity: Severity::Medium,
            code: "RL02",
            message: format!(
                "Abusive client {name} still gets {}% of its requests through ({}); tighten the per-client \
                 limit or add a stricter policy for its pattern.",
                format_f(share, 0),
                s.allowed
            ),
        });
    }
}

/// RL03, the backend can be overrun (only with a `capacity_rps`). High when the busiest
/// second admitted more than the capacity. Medium, as well, when no global policy caps the
/// total: the per-client limit times the number of clients is what could get through.
fn rl03_backend_over_capacity(found: &mut Vec<Finding>, cfg: &Config, out: &Outcome, peak: Peak) {
    let Some(cap) = cfg.capacity_rps.filter(|&c| c != 0.0) else { return };
    let (peak_sec, peak_rps) = (peak.second, peak.admitted);
    if peak_rps as f64 > cap {
        found.push(Finding {
            severity: Severity::High,
            code: "RL03",
            message: format!(
                "Admitted traffic peaks at {peak_rps} req/s (second {peak_sec}) over the backend capacity of {} \
                 req/s; add or lower a global limit.",
                format_g(cap)
            ),
        });
    }
    if cfg.policies.iter().any(|p| p.key == KeyBy::Global && !p.algorithm.is_pacer()) {
        return;
    }
    // the lowest sustained rate of the per-client policies that apply to every request
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
        found.push(Finding {
            severity: Severity::Medium,
            code: "RL03",
            message: format!(
                "No global policy: {n} clients x {} req/s per client = {} req/s possible vs capacity {}.",
                format_g(min),
                format_g(n as f64 * min),
                format_g(cap)
            ),
        });
    }
}

/// RL04, a fixed-window burst (medium): a fixed window (or a count-then-block rule counting
/// in fixed windows) let more than its limit through in one rolling window, as a burst at
/// the end of one window and the start of the next can.
fn rl04_fixed_window_boundary_burst(found: &mut Vec<Finding>, p: &Policy, ps: &PolicyStats) {
    let obs = ps.observed_max;
    let Some(limit) = p.fixed_window_limit().filter(|&limit| obs as f64 > limit) else { return };
    found.push(Finding {
        severity: Severity::Medium,
        code: "RL04",
        message: format!(
            "{} '{}' let {obs} requests through in one rolling {}s window (limit {}, {}x) across a window \
             boundary; use sliding_counter or a token bucket if the limit protects capacity.",
            if matches!(p.algorithm, PolicyAlgorithm::FixedWindow { .. }) {
                "Fixed window"
            } else {
                "Count-then-block rule (fixed-window counting)"
            },
            p.name,
            format_g(p.window_s),
            format_g(limit),
            format_f(obs as f64 / limit, 1)
        ),
    });
}

/// RL05, retry amplification (medium): the client sends at least 1.5 attempts per logical
/// request, because it retries refused calls; every retry counts against the limit too.
fn rl05_retry_amplification(found: &mut Vec<Finding>, c: &ClientView<'_>) {
    let (name, s) = (c.name, c.s);
    let amp = if s.logical > 0 { s.attempts as f64 / s.logical as f64 } else { 0.0 };
    if amp >= 1.5 {
        found.push(Finding {
            severity: Severity::Medium,
            code: "RL05",
            message: format!(
                "Client {name} sends {}x attempts per logical request because it retries throttled calls; \
                 retries count against the limit and add load - require Retry-After or backoff with jitter.",
                format_f(amp, 2)
            ),
        });
    }
}

/// The client that got the most attempts admitted, as an index into `out.clients`, with
/// that number: on a tie the one admitted first (`None`: nothing was admitted).
fn most_admitted(out: &Outcome) -> Option<(usize, u64)> {
    let mut order: Vec<usize> = (0..out.clients.len()).filter(|&i| out.clients[i].1.first_admit.is_some()).collect();
    order.sort_by_key(|&i| out.clients[i].1.first_admit);
    first_max(order.into_iter().map(|i| (i, out.clients[i].1.allowed)), |&(_, n)| n)
}

/// RL06, a noisy neighbour on a global policy that rejected something (`busiest` is
/// [`most_admitted`]): one client holds more than half of the admitted traffic while the
/// global limit refuses legit clients. High when that client is not legit, medium when it
/// is. A global policy that rejected while nothing was admitted is where the reference
/// crashes.
fn rl06_noisy_neighbour(
    found: &mut Vec<Finding>,
    p: &Policy,
    ps: &PolicyStats,
    out: &Outcome,
    busiest: Option<(usize, u64)>,
    kinds: &Kinds<'_>,
) -> Result<(), SimError> {
    let Some((hog, hog_n)) = busiest else {
        return Err(SimError::Crash(format!(
            "global policy '{}' rejected requests but nothing was admitted: the reference raises \
             \"ValueError: max() arg is an empty sequence\" here",
            p.name
        )));
    };
    let total = out.admitted.max(1) as f64;
    let hog_name = out.clients[hog].0.as_str();
    let mut victims: Vec<&str> =
        ps.by_client.iter().map(String::as_str).filter(|c| kinds.is(c, "legit") && *c != hog_name).collect();
    let share = hog_n as f64 / total;
    if share > 0.5 && !victims.is_empty() {
        victims.sort_unstable();
        found.push(Finding {
            severity: if kinds.is(hog_name, "legit") { Severity::Medium } else { Severity::High },
            code: "RL06",
            message: format!(
                "Noisy neighbour: {hog_name} holds {}% of admitted traffic while global policy '{}' rejects {}; \
                 add a per-client limit below the global one.",
                format_f(100.0 * hog_n as f64 / total, 0),
                p.name,
                victims.join(", ")
            ),
        });
    }
    Ok(())
}

/// RL07, a large sliding log (low): a sliding log of more than 1000 per window stores that
/// many timestamps per key.
fn rl07_large_sliding_log(found: &mut Vec<Finding>, p: &Policy) {
    let Some(limit) = p.sliding_log_limit().filter(|&limit| limit > 1000.0) else { return };
    found.push(Finding {
        severity: Severity::Low,
        code: "RL07",
        message: format!(
            "Sliding log '{}' stores up to {} timestamps per key; prefer sliding_counter for large limits.",
            p.name,
            limit.trunc() as i128
        ),
    });
}

/// RL08, a reminder (info) whenever anything was rejected: answer 429 with Retry-After and
/// document the limits.
fn rl08_send_retry_after(found: &mut Vec<Finding>, out: &Outcome) {
    if out.sample.is_some() {
        found.push(Finding {
            severity: Severity::Info,
            code: "RL08",
            message: "Return 429 with Retry-After on every rejection (see the sample headers) and document the \
                      limits so clients can pace themselves."
                .into(),
        });
    }
}

/// RL09, a policy that never triggered (low): a server policy that checked requests and
/// rejected none, with a worst case over 10 times its busiest key: a safety net that will
/// not stop a surge.
fn rl09_policy_never_triggered(found: &mut Vec<Finding>, p: &Policy, ps: &PolicyStats) {
    let (obs, theo) = (ps.observed_max, p.theoretical_max());
    if !p.algorithm.is_pacer() && ps.checks > 0 && ps.rejects == 0 && obs > 0 && theo > 10.0 * obs as f64 {
        found.push(Finding {
            severity: Severity::Low,
            code: "RL09",
            message: format!(
                "Policy '{}' never triggered; its worst case ({} per {}s) is >10x the busiest key ({obs}). Fine \
                 as a safety net, but it will not stop a surge.",
                p.name,
                format_g(theo),
                format_g(p.window_s)
            ),
        });
    }
}

/// RL10, a retry herd (medium): in the busiest second (at least 20 admitted) more than half
/// of the admitted attempts were retries, released together by one Retry-After or window
/// reset.
fn rl10_retry_herd(found: &mut Vec<Finding>, out: &Outcome, peak: Peak) {
    let (peak_sec, peak_rps, peak_retries) = (peak.second, peak.admitted, peak.retries);
    if out.admitted > 0 && peak_retries as f64 > 0.5 * peak_rps as f64 && peak_rps >= 20 {
        found.push(Finding {
            severity: Severity::Medium,
            code: "RL10",
            message: format!(
                "Retry herd: {peak_retries} of the {peak_rps} requests admitted in second {peak_sec} are retries \
                 released by the same Retry-After / window reset; add jitter to Retry-After (or client backoff) \
                 and prefer a token bucket or sliding window so capacity is not handed out all at once."
            ),
        });
    }
}

/// RL11, client-side pacing (a `smartflow` policy held some of the client's attempts back).
/// Low: the pacer doing its job, no 429 spent. Medium for a legit client made to wait more
/// than a second: it sends faster than the pacer's rate and its queue grows.
fn rl11_pacer_holds_back(found: &mut Vec<Finding>, c: &ClientView<'_>) {
    let (name, s) = (c.name, c.s);
    if s.paced == 0 {
        return;
    }
    let pacer = s.pace_policy.as_deref().unwrap_or("");
    let (severity, advice) = if c.legit && s.pace_max > 1.0 {
        (
            Severity::Medium,
            "it sends faster than the pacer's rate, so its queue grows; raise the pacer's rate if the server \
             allows it, or spread the work",
        )
    } else {
        (Severity::Low, "no 429s are spent on them; this is the pacer doing its job")
    };
    found.push(Finding {
        severity,
        code: "RL11",
        message: format!(
            "Pacer '{pacer}' holds back {} of {name}'s {} attempts, by {}s on average and up to {}s; {advice}.",
            s.paced,
            s.attempts,
            format_f(s.pace_total / s.paced as f64, 2),
            format_f(s.pace_max, 2)
        ),
    });
}

/// RL12, blocks started by a `count_then_block` rule: each refuses every request of the key
/// for the whole mitigation timeout. High when a legit client was blocked (one burst costs
/// it the timeout), low otherwise.
fn rl12_blocks_started(found: &mut Vec<Finding>, p: &Policy, ps: &PolicyStats, kinds: &Kinds<'_>) {
    let Some(timeout) = mitigation_timeout_s(p).filter(|_| ps.blocks > 0) else { return };
    let legit: Vec<String> =
        ps.blocked_clients.iter().filter(|(c, _)| kinds.is(c, "legit")).map(|(c, n)| format!("{c} ({n}x)")).collect();
    let all: Vec<String> = ps.blocked_clients.iter().map(|(c, n)| format!("{c} ({n}x)")).collect();
    if legit.is_empty() {
        found.push(Finding {
            severity: Severity::Low,
            code: "RL12",
            message: format!(
                "Rule '{}' started {} block(s) of {}s: {}; each one refuses every request of the key until it \
                 ends.",
                p.name,
                ps.blocks,
                format_g(timeout),
                all.join(", ")
            ),
        });
    } else {
        found.push(Finding {
            severity: Severity::High,
            code: "RL12",
            message: format!(
                "Rule '{}' blocked legit client(s) {} for {}s each time: one burst over the limit costs them \
                 the whole mitigation timeout; raise requests_per_period above their peak, exempt them, or \
                 drop the block for this key.",
                p.name,
                legit.join(", "),
                format_g(timeout)
            ),
        });
    }
}

/// RL13, a client that paces itself yet is still refused (medium): its pacer's rate or
/// burst is above a server policy's limit, so pacing does not spare it the 429s.
fn rl13_paced_client_still_refused(found: &mut Vec<Finding>, c: &ClientView<'_>) {
    let (name, s) = (c.name, c.s);
    if !s.pacer_applies || s.rejected == 0 {
        return;
    }
    let top = match top_policy(s) {
        "" => "a server policy",
        top => top,
    };
    found.push(Finding {
        severity: Severity::Medium,
        code: "RL13",
        message: format!(
            "Client {name} paces itself yet still gets {} 429s, mostly from '{top}': the pacer's rate or burst \
             is above that limit; set the pacer to at most the server's sustained rate and burst.",
            s.rejected
        ),
    });
}
