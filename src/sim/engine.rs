//! Traffic generation and the replay itself.

use super::config::{Algorithm, Client, Config, Pattern, Retry};
use super::limiters::Limiter;
use super::py::{round, PyValue};
use super::random::{PyRandom, Seed};
use super::timeline::Timeline;
use super::SimError;
use core::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// One logical request: when, who, where and how many tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Seconds from the start.
    pub t: f64,
    /// Client name.
    pub client: String,
    /// Endpoint path.
    pub endpoint: String,
    /// Tokens it costs.
    pub cost: f64,
}

/// The configured clients' traffic, in config order (not sorted), with the seeded generator
/// shared by every Poisson client in turn.
pub fn generate(cfg: &Config) -> Result<Vec<Request>, SimError> {
    let mut rng: Option<PyRandom> = None;
    let mut reqs = Vec::new();
    for c in &cfg.clients {
        let req = |t: f64| Request { t, client: c.name.clone(), endpoint: c.endpoint.clone(), cost: c.cost };
        let (t0, t1) = (c.start, c.start + c.duration);
        match c.pattern {
            Pattern::Steady { rps } => {
                let n = (c.duration * rps).round_ties_even();
                let n = if n > 0.0 { n as u64 } else { 0 };
                reqs.extend((0..n).map(|i| req(t0 + i as f64 / rps)));
            }
            Pattern::Poisson { rps } => {
                if rng.is_none() {
                    let unsupported = || match &cfg.seed {
                        Seed::Unsupported(seed) => {
                            format!("seed {seed} is not supported for poisson traffic (use an integer or a float)")
                        }
                        _ => unreachable!("integer and float seeds are supported"),
                    };
                    rng = Some(PyRandom::new(&cfg.seed).ok_or_else(|| SimError::Input(unsupported()))?);
                }
                let rng = rng.as_mut().expect("seeded above");
                let mut t = t0 + rng.expovariate(rps);
                while t < t1 {
                    reqs.push(req(t));
                    t += rng.expovariate(rps);
                }
            }
            Pattern::Burst { burst, every_s } => {
                let mut t = t0;
                while t < t1 {
                    reqs.extend((0..burst.max(0)).map(|k| req(t + k as f64 * 0.001)));
                    t += every_s;
                }
            }
        }
    }
    Ok(reqs)
}

/// A queued attempt: ordered by time, then by sequence number (as the reference's heap).
struct Attempt {
    t: f64,
    seq: usize,
    req: usize,
    attempt: i128,
}

impl PartialEq for Attempt {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Attempt {}
impl PartialOrd for Attempt {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Attempt {
    /// Reversed, so that `BinaryHeap` pops the earliest attempt first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.t.partial_cmp(&self.t).unwrap_or(Ordering::Equal).then(other.seq.cmp(&self.seq))
    }
}

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
    /// When it was first rejected.
    pub first_reject: Option<f64>,
}

/// What one policy did.
#[derive(Clone, Debug, Default)]
pub struct PolicyStats {
    /// Attempts it applied to.
    pub checks: u64,
    /// Attempts it rejected.
    pub rejects: u64,
    /// Admission times per key, in order.
    pub allowed_times: HashMap<String, Vec<f64>>,
    /// Clients it rejected at least once.
    pub by_client: Vec<String>,
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

/// The raw outcome of a replay.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Per client, in first-seen order.
    pub clients: Vec<(String, ClientStats)>,
    /// Per policy, in config order.
    pub policies: Vec<PolicyStats>,
    /// Admitted attempts: time, client index into `clients`, attempt number (0 = first).
    pub admitted: Vec<(f64, usize, i128)>,
    /// The first rejection.
    pub sample: Option<Sample>,
}

/// Replays `reqs` (in time order, ties by client, endpoint, cost) through every policy,
/// re-queueing rejected attempts as each client's retry mode says.
pub fn simulate(cfg: &Config, reqs: &[Request]) -> Result<Outcome, SimError> {
    simulate_with(cfg, reqs, None)
}

/// [`simulate`], also counting every attempt into `timeline` when given.
pub fn simulate_with(cfg: &Config, reqs: &[Request], mut timeline: Option<&mut Timeline>) -> Result<Outcome, SimError> {
    let mut sorted: Vec<&Request> = reqs.iter().collect();
    sorted.sort_by(|a, b| {
        a.t.partial_cmp(&b.t)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.client.cmp(&b.client))
            .then_with(|| a.endpoint.cmp(&b.endpoint))
            .then_with(|| a.cost.partial_cmp(&b.cost).unwrap_or(Ordering::Equal))
    });
    let mut limiters: Vec<Limiter> = cfg
        .policies
        .iter()
        .map(|p| match p.algorithm {
            Algorithm::TokenBucket { rate, burst } => Limiter::token_bucket(rate, burst),
            Algorithm::FixedWindow { limit } => Limiter::fixed_window(limit, p.window_s),
            Algorithm::SlidingLog { limit } => Limiter::sliding_log(limit, p.window_s),
            Algorithm::SlidingCounter { limit } => Limiter::sliding_counter(limit, p.window_s),
        })
        .collect();
    // the last client of a name wins, as in the reference's dict
    let info: HashMap<&str, &Client> = cfg.clients.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut heap: BinaryHeap<Attempt> =
        (0..sorted.len()).map(|i| Attempt { t: sorted[i].t, seq: i, req: i, attempt: 0 }).collect();
    let mut seq = sorted.len();
    let mut out = Outcome { policies: vec![PolicyStats::default(); cfg.policies.len()], ..Outcome::default() };
    let mut client_index: HashMap<&str, usize> = HashMap::new();
    let mut keys_cache: HashMap<(&str, &str), Vec<Option<String>>> = HashMap::new();
    while let Some(Attempt { t, req, attempt, .. }) = heap.pop() {
        let r = sorted[req];
        let ci = *client_index.entry(&r.client).or_insert_with(|| {
            out.clients.push((r.client.clone(), ClientStats::default()));
            out.clients.len() - 1
        });
        let keys = keys_cache
            .entry((&r.client, &r.endpoint))
            .or_insert_with(|| cfg.policies.iter().map(|p| p.key_for(&r.client, &r.endpoint)).collect());
        let s = &mut out.clients[ci].1;
        if attempt == 0 {
            s.logical += 1;
        }
        s.attempts += 1;
        let mut rejecting = Vec::new();
        let mut wait = 0.0f64;
        for (j, (lim, key)) in limiters.iter_mut().zip(keys.iter()).enumerate() {
            let Some(key) = key else { continue };
            out.policies[j].checks += 1;
            let check = lim.check(key, t, r.cost);
            if !check.allowed {
                rejecting.push(j);
                if check.wait > wait {
                    wait = check.wait;
                }
            }
        }
        if rejecting.is_empty() {
            for (j, (lim, key)) in limiters.iter_mut().zip(keys.iter()).enumerate() {
                let Some(key) = key else { continue };
                lim.consume(key, t, r.cost);
                out.policies[j].allowed_times.entry(key.clone()).or_default().push(t);
            }
            s.allowed += 1;
            if attempt != 0 {
                s.delayed += 1;
            }
            out.admitted.push((t, ci, attempt));
            if let Some(tl) = timeline.as_deref_mut() {
                tl.record(ci, &r.client, t, true);
            }
            continue;
        }
        if let Some(tl) = timeline.as_deref_mut() {
            tl.record(ci, &r.client, t, false);
        }
        s.rejected += 1;
        if wait > s.max_retry_after {
            s.max_retry_after = wait;
        }
        s.first_reject.get_or_insert(t);
        let first = &cfg.policies[rejecting[0]];
        match s.blocked_by.iter_mut().find(|(name, _)| *name == first.name) {
            Some((_, n)) => *n += 1,
            None => s.blocked_by.push((first.name.clone(), 1)),
        }
        for &j in &rejecting {
            let ps = &mut out.policies[j];
            ps.rejects += 1;
            if !ps.by_client.contains(&r.client) {
                ps.by_client.push(r.client.clone());
            }
        }
        if out.sample.is_none() {
            out.sample = Some(Sample {
                t: round(t, 3),
                client: r.client.clone(),
                endpoint: r.endpoint.clone(),
                policy: first.name.clone(),
                retry_after: (wait.ceil() as i128).max(1),
                quota: first.quota.clone(),
                window_s: first.window_s,
            });
        }
        let (mode, max_retries) = info.get(r.client.as_str()).map_or((Retry::None, 3), |c| (c.retry, c.max_retries));
        let delay = match mode {
            Retry::None => None,
            _ if attempt >= max_retries => None,
            // the reference evaluates `2.0 ** attempt` for every retry mode
            _ if attempt >= 1024 => {
                return Err(SimError::Crash(format!(
                    "2.0 ** {attempt} overflows (max_retries above 1024): the reference raises OverflowError here"
                )));
            }
            Retry::Immediate => Some(0.1),
            Retry::Backoff => Some(2f64.powi(attempt as i32)),
            Retry::Honor => Some(wait + 0.05),
        };
        match delay {
            Some(delay) => {
                seq += 1;
                heap.push(Attempt { t: t + delay, seq, req, attempt: attempt + 1 });
            }
            None => s.failed += 1,
        }
    }
    Ok(out)
}
