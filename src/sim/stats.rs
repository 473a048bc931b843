//! What a replay counts: per client, per policy, the busiest second and the first refusal,
//! and the observer that sees each decided attempt.

use super::py::PyValue;
use super::SimError;

/// What happened to one client's requests.
#[derive(Clone, Debug, Default)]
pub struct ClientStats {
    /// Logical requests (first attempts).
    pub logical: u64,
    /// Attempts, retries included.
    pub attempts: u64,
    /// Attempts admitted.
    pub allowed: u64,
    /// Attempts rejected.
    pub rejected: u64,
    /// Logical requests given up on.
    pub failed: u64,
    /// Logical requests admitted only on a retry.
    pub delayed: u64,
    /// The longest Retry-After it was given.
    pub max_retry_after: f64,
    /// Rejections per policy name (the first rejecting policy), in first-seen order.
    pub blocked_by: Vec<(String, u64)>,
    /// `blocked_by`'s names while replaying: numbers of distinct policy names, in the order
    /// first blamed (the engine counts them).
    pub(super) blocked: Vec<u32>,
    /// When it was first rejected.
    pub first_reject: Option<f64>,
    /// The order of its first admission among all clients (for "first maximum" ties).
    pub first_admit: Option<u64>,
    /// Attempts held back by a client-side pacer (`smartflow` policies).
    pub paced: u64,
    /// Their total wait, seconds.
    pub pace_total: f64,
    /// The longest, seconds.
    pub pace_max: f64,
    /// The pacer that imposed the longest wait.
    pub pace_policy: Option<String>,
    /// Whether any pacer applies to it.
    pub pacer_applies: bool,
}

/// What one policy did.
#[derive(Clone, Debug, Default)]
pub struct PolicyStats {
    /// Attempts it applied to (for a pacer: reservations made).
    pub checks: u64,
    /// Attempts it rejected.
    pub rejects: u64,
    /// The most attempts one key had admitted in any rolling window of the policy's length.
    pub observed_max: u64,
    /// Clients it rejected at least once, in the order first seen.
    pub by_client: Vec<String>,
    /// For a pacer: attempts it delayed.
    pub delayed: u64,
    /// For a count-then-block policy: blocks started.
    pub blocks: u64,
    /// Blocks started per client, in first-seen order.
    pub blocked_clients: Vec<(String, u64)>,
    /// For an edge rule whose refusals are not all enforced (`"enforce": false` or a share):
    /// attempts it refused in shadow (counted as if refused, let through). `rejects` counts
    /// only its enforced refusals.
    pub shadow_refusals: u64,
    /// Clients it refused in shadow at least once, in the order first seen.
    pub shadow_clients: Vec<String>,
}

/// The first rejection, for the sample 429.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// When (rounded to 3 decimals).
    pub t: f64,
    /// Who.
    pub client: String,
    /// Where.
    pub endpoint: String,
    /// The first rejecting policy.
    pub policy: String,
    /// Whole seconds to wait, at least 1.
    pub retry_after: i128,
    /// The policy's quota as configured.
    pub quota: PyValue,
    /// The policy's window.
    pub window_s: f64,
}

/// The admitted attempts of the busiest second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// The second (`trunc(t)`), the first one on a tie.
    pub second: i128,
    /// Attempts admitted in it.
    pub admitted: u64,
    /// Of which retries.
    pub retries: u64,
}

/// The raw outcome of a replay.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Logical requests replayed.
    pub requests: u64,
    /// Per client, in first-seen order.
    pub clients: Vec<(String, ClientStats)>,
    /// Per policy, in config order.
    pub policies: Vec<PolicyStats>,
    /// Attempts admitted.
    pub admitted: u64,
    /// The busiest second, if anything was admitted.
    pub peak: Option<Peak>,
    /// The first rejection.
    pub sample: Option<Sample>,
    /// What the edge's tenant stage did, per tenant in the order first seen (when the rules
    /// have `tenants`).
    pub tenants: Vec<(String, TenantStats)>,
    /// Attempts the tenant stage refused for naming no tenant (401).
    pub no_tenant: u64,
}

/// What the edge's tenant stage did to one tenant's attempts (those the rules admitted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantStats {
    /// Attempts that reached the stage as this tenant.
    pub checks: u64,
    /// Admitted by it.
    pub admitted: u64,
    /// Refused with 413: a body bigger than the tenant may send.
    pub too_large: u64,
    /// Refused with 429 `tenant_rate_limited`: over its rate or bytes.
    pub rate_limited: u64,
    /// Refused with 429 `tenant_overload`: over its share in flight.
    pub overloaded: u64,
    /// Admitted, but refused in shadow by a limit that does not enforce its refusals for
    /// this tenant (`"enforce"`): over its rate, bytes or share in flight.
    pub would_refuse: u64,
}

/// How the edge's tenant stage refused an attempt: what the edge answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantRefused {
    /// The status: 401 (no known tenant), 413 (a body over the tenant's cap) or 429.
    pub status: u16,
    /// The refusal's name in the edge's log line: `unknown`, `too_large`,
    /// `tenant_rate_limited` or `tenant_overload`.
    pub name: &'static str,
}

/// One decided attempt, as handed to an observer.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// When it was sent (after any pacing).
    pub t: f64,
    /// The client's index in [`Outcome::clients`].
    pub client: usize,
    /// The client's name.
    pub name: &'a str,
    /// The endpoint.
    pub endpoint: &'a str,
    /// Its cost.
    pub cost: f64,
    /// 0 for the first attempt, then 1, 2 ... for retries.
    pub attempt: u32,
    /// Whether every policy admitted it.
    pub admitted: bool,
    /// When the edge's tenant stage refused it: how.
    pub tenant_refusal: Option<TenantRefused>,
    /// When the edge's checks before the body is read refused it: which (`ip`, `node` or
    /// `source`, as `Sluicegate-Scope` names it).
    pub pre_read: Option<&'static str>,
    /// The edge rules that refused it in shadow (their refusal not enforced for its key: it
    /// went on), as indexes into the configuration's policies, in the rules' order (what the
    /// edge names in `Sluicegate-Shadow`).
    pub shadow: &'a [u32],
    /// The tenant whose limit refused it in shadow (the edge names it `tenant:<name>` in
    /// `Sluicegate-Shadow`).
    pub tenant_shadow: Option<&'a str>,
}

/// How often a replay reports how far it has got ([`Observer::progress`]): every this many
/// logical requests.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Something that watches every decided attempt, in time order (the timeline; tests), and
/// how far the replay has got (a command line's progress line).
pub trait Observer {
    /// One attempt was decided.
    fn attempt(&mut self, event: &Event<'_>);
    /// The replay starts over (a trace turned out not to be in time order and is replayed
    /// sorted): forget what was seen.
    fn restart(&mut self) {}
    /// Every [`PROGRESS_EVERY`] logical requests: `done` replayed so far, of `total` when the
    /// replay knows it beforehand (generated traffic: the estimate, which for Poisson
    /// clients is an expected count, never given below `done`; traffic held in memory: its
    /// length). `None` for a trace that streams: its length is known once it is read.
    fn progress(&mut self, _done: u64, _total: Option<u64>) {}
    /// Whether it watches attempts: false for an observer of the progress alone, which the
    /// replay then tells nothing per attempt.
    fn watches_attempts(&self) -> bool {
        true
    }
}

/// An [`Observer`] that hands the progress to `report` (a closure taking `done` and
/// `total`, see [`Observer::progress`]), and the attempts to `observer`, if any: with none,
/// the replay runs as unobserved (nothing per attempt).
///
/// ```
/// use sluicegate::sim::{simulate_generated, Config, Progress};
/// let cfg = Config::from_json(r#"{"duration_s": 100, "policies": [
///     {"algorithm": "token_bucket", "rate": 1000}], "clients": [{"rps": 2000}]}"#).unwrap();
/// let mut seen = Vec::new();
/// let mut progress = Progress { observer: None, report: |done, total| seen.push((done, total)) };
/// simulate_generated(&cfg, Some(&mut progress)).unwrap();
/// assert_eq!(seen, [(65_536, Some(200_000)), (131_072, Some(200_000)), (196_608, Some(200_000))]);
/// ```
pub struct Progress<'o, F> {
    /// What watches the attempts, if anything.
    pub observer: Option<&'o mut dyn Observer>,
    /// Called with the progress.
    pub report: F,
}

impl<F: FnMut(u64, Option<u64>)> Observer for Progress<'_, F> {
    fn attempt(&mut self, event: &Event<'_>) {
        if let Some(o) = self.observer.as_deref_mut() {
            o.attempt(event);
        }
    }
    fn restart(&mut self) {
        if let Some(o) = self.observer.as_deref_mut() {
            o.restart();
        }
    }
    fn progress(&mut self, done: u64, total: Option<u64>) {
        if let Some(o) = self.observer.as_deref_mut() {
            o.progress(done, total);
        }
        (self.report)(done, total);
    }
    fn watches_attempts(&self) -> bool {
        self.observer.as_deref().is_some_and(Observer::watches_attempts)
    }
}

/// A request fed out of the replay's order.
#[derive(Clone, Debug, PartialEq)]
pub enum Feed {
    /// The request sorts before the previous one: the traffic must be sorted first.
    OutOfOrder,
    /// The replay cannot go on.
    Error(SimError),
}

impl From<SimError> for Feed {
    fn from(e: SimError) -> Self {
        Feed::Error(e)
    }
}
