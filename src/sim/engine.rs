//! The replay itself: every attempt through every policy, in order.
//!
//! The replay streams: initial requests arrive in the reference's order (time, then client,
//! endpoint and cost) and are merged with the queue of pending retries, and nothing is kept
//! per request once it is decided. Names are interned, each `(client, endpoint)` pair's
//! counting keys are worked out once, and every policy keeps its keys' state in a vector,
//! so a decision costs a hash lookup and a few array accesses whatever the trace's length.
//! Its parts: [`super::names`] (interning), [`super::traffic`] (the requests, generated or
//! read), [`super::queue`] (pending retries) and [`super::stats`] (what is counted).

use super::config::{nanos, secs, Config, Pattern, Policy, PolicyAlgorithm, Retry};
use super::edge::{host_of, EdgeFacts};
use super::limiters::{self, Check, ReferenceLimiter, WindowAt};
use super::names::{Names, Pairs};
use super::py::{round, PyValue};
use super::queue::{time_key, Attempt, Queue};
use super::random::PyRandom;
use super::spread::Placer;
use super::stats::{
    ClientStats, Event, Feed, Observer, Outcome, Peak, PolicyStats, Sample, TenantRefused, PROGRESS_EVERY,
};
use super::tenants::{self, TenantStage};
use super::traffic::{merge, seeded, sort_instant, Order, Overlapping, Request, Source, Traffic};
use super::SimError;
use crate::client::smartflow::TokenBucket as SmartFlowBucket;
use crate::core::limit::{Blocking, Decision, Limiter as _};
use crate::core::time::Instant;
use crate::edge::pipeline::serve::{self, Stage, Way};
use crate::edge::pipeline::{preread, Answer, Isolate, Note, Refusal, RulesCheck, Step, TenantRefusal, Verdict, Via};
use crate::edge::redact::KeyedHash;
use crate::edge::rules::{AnyLimiter, Enforce, RuleSet, Store};
use core::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// A policy's counters, one per key.
///
/// The reference's four algorithms are kinds of their own here (rather than one kind holding a
/// [`ReferenceLimiter`]): checking an attempt against a policy is then one dispatch on its
/// kind, straight to the key's state. They decide with [`ReferenceLimiter`]'s own checks.
/// (Its kind a tag of its own, rather than encoded in a core limiter's field: read as is.)
#[repr(u8)]
enum State {
    /// The reference's token bucket: `(tokens, last refill)` per key.
    TokenBucket { rate: f64, burst: f64, keys: Vec<(f64, f64)> },
    /// The reference's fixed window: `(window index, count)` per key.
    FixedWindow { limit: f64, window: f64, at: WindowAt, keys: Vec<(f64, f64)> },
    /// The reference's sliding log: admitted times per key.
    SlidingLog { limit: f64, window: f64, keys: Vec<VecDeque<f64>> },
    /// The reference's sliding counter: `(window index, previous count, current count)` per key.
    SlidingCounter { limit: f64, window: f64, at: WindowAt, keys: Vec<(f64, f64, f64)> },
    /// The core's limiters: `gcra` and `count_then_block`.
    Core { prototype: Blocking<AnyLimiter>, keys: Vec<Blocking<AnyLimiter>> },
    /// The Smart Flow bucket as a client-side pacer.
    Pacer { prototype: SmartFlowBucket, keys: Vec<SmartFlowBucket> },
    /// A stage of the edge that keeps its own counts: the tenant stage (its buckets are in its
    /// stores, [`TenantStage`]) or the checks before a body is read (in the colo's isolate).
    EdgeStage,
}

impl State {
    /// The state of one of the reference's algorithms (with no keys yet).
    fn reference(lim: ReferenceLimiter) -> Self {
        match lim {
            ReferenceLimiter::TokenBucket { rate, burst, state } => State::TokenBucket { rate, burst, keys: state },
            ReferenceLimiter::FixedWindow { limit, window, state, at } => {
                State::FixedWindow { limit, window, at, keys: state }
            }
            ReferenceLimiter::SlidingLog { limit, window, state } => State::SlidingLog { limit, window, keys: state },
            ReferenceLimiter::SlidingCounter { limit, window, state, at } => {
                State::SlidingCounter { limit, window, at, keys: state }
            }
        }
    }

    fn add_key(&mut self) {
        match self {
            State::TokenBucket { keys, .. } | State::FixedWindow { keys, .. } => keys.push((f64::NAN, 0.0)),
            State::SlidingLog { keys, .. } => keys.push(VecDeque::new()),
            State::SlidingCounter { keys, .. } => keys.push((f64::NAN, 0.0, 0.0)),
            State::Core { prototype, keys } => keys.push(prototype.clone()),
            State::Pacer { prototype, keys } => keys.push(*prototype),
            State::EdgeStage => {}
        }
    }

    /// Whether a server policy admits `cost` at `t` for `key`, and the wait when it does not
    /// (each key's state moves on, nothing is charged); an error when one of the core's
    /// limiters cannot take the attempt at all. The reference's limiters, which take any
    /// attempt, are checked in line: the replay's hot path.
    #[inline(always)]
    fn check(&mut self, key: usize, t: f64, cost: f64) -> Result<Check, String> {
        Ok(match self {
            State::TokenBucket { rate, burst, keys } => limiters::token_bucket(*rate, *burst, &mut keys[key], t, cost),
            State::FixedWindow { limit, window, at, keys } => {
                let w = at.index(t, *window);
                limiters::fixed_window(*limit, *window, w, &mut keys[key], t, cost)
            }
            State::SlidingLog { limit, window, keys } => {
                limiters::sliding_log(*limit, *window, &mut keys[key], t, cost)
            }
            State::SlidingCounter { limit, window, at, keys } => {
                let idx = at.index(t, *window);
                limiters::sliding_counter(*limit, *window, idx, &mut keys[key], t, cost)
            }
            State::Core { keys, .. } => {
                let (allowed, wait) = check_core(&mut keys[key], t, cost)?;
                Check { allowed, wait }
            }
            State::Pacer { .. } | State::EdgeStage => unreachable!("pacers and the edge's stages are not servers"),
        })
    }

    /// Charges an admitted attempt to `key` (checked as admitted just before, with the same
    /// `t` and `cost`). A pacer was charged when it reserved.
    #[inline(always)]
    fn charge(&mut self, key: usize, t: f64, cost: f64) {
        match self {
            State::TokenBucket { keys, .. } => limiters::take_tokens(&mut keys[key], t, cost),
            State::FixedWindow { keys, .. } => keys[key].1 += cost,
            State::SlidingLog { keys, .. } => limiters::log_admitted(&mut keys[key], t, cost),
            State::SlidingCounter { keys, .. } => keys[key].2 += cost,
            State::Core { keys, .. } => charge_core(&mut keys[key], t, cost),
            State::Pacer { .. } | State::EdgeStage => {}
        }
    }

    /// Tells the core's limiter of `key` that it refused an attempt: a refusal charges
    /// nothing, but a count-then-block rule starts its block on it. True when a block started.
    #[inline]
    fn refused(&mut self, key: usize, t: f64, cost: f64) -> bool {
        let State::Core { keys, .. } = self else { return false };
        refused_core(&mut keys[key], t, cost)
    }
}

/// Whether one of the core's limiters admits `cost` at `t`, and the wait when it does not
/// (peeking: nothing is charged); an error says why it cannot take the attempt at all. (Out
/// of line: the reference's limiters, checked in line, are the replay's hot path.)
#[inline(never)]
fn check_core(lim: &mut Blocking<AnyLimiter>, t: f64, cost: f64) -> Result<(bool, f64), String> {
    let (now, units) = (core_now(t)?, core_units(cost)?);
    match lim.peek(now, units).map_err(|e| format!("refuses forever: {e}"))? {
        Decision::Allow { .. } => Ok((true, 0.0)),
        Decision::Deny { retry_after } => Ok((false, secs(retry_after))),
    }
}

/// [`State::charge`] for one of the core's limiters (out of line, as [`check_core`]).
#[inline(never)]
fn charge_core(lim: &mut Blocking<AnyLimiter>, t: f64, cost: f64) {
    // peeked as allowed above with the same now and cost: this charges it
    let _ = lim.check(Instant::from_nanos(nanos(t)), cost as u32);
}

/// [`State::refused`] for one of the core's limiters.
#[inline(never)]
fn refused_core(lim: &mut Blocking<AnyLimiter>, t: f64, cost: f64) -> bool {
    let now = Instant::from_nanos(nanos(t));
    let was_blocked = lim.blocked_until(now).is_some();
    let _ = lim.check(now, cost as u32);
    !was_blocked && lim.blocked_until(now).is_some()
}

/// `t` in whole nanoseconds, as the core's limiters decide (out of line: only their windows
/// need it, and the reference's are counted on every admission).
#[inline(never)]
fn whole_nanos(t: f64) -> f64 {
    nanos(t) as f64
}

/// `t` as the core's limiters take it: they count time from 0.
fn core_now(t: f64) -> Result<Instant, String> {
    if t >= 0.0 {
        Ok(Instant::from_nanos(nanos(t)))
    } else {
        Err(format!("counts time from 0 and cannot take a request at t={}", super::py::float_repr(t)))
    }
}

/// `cost` as the core's limiters take it: whole units, at least one.
fn core_units(cost: f64) -> Result<u32, String> {
    // (no `fract()`: a libm call the compiler hoists to every attempt)
    let units = cost as u32;
    if cost >= 1.0 && f64::from(units) == cost {
        Ok(units)
    } else {
        Err(format!("counts whole units and cannot take a request costing {}", super::py::float_repr(cost)))
    }
}

/// How long after a refusal the client sends attempt number `attempt + 1`, as its retry mode
/// says; `None` when it gives up (no retries, or `max_retries` spent, as [`retries_allowed`]
/// gives it).
fn retry_delay(mode: Retry, max_retries: u32, attempt: u32, wait: f64) -> Result<Option<f64>, SimError> {
    match mode {
        Retry::None => Ok(None),
        _ if attempt >= max_retries => Ok(None),
        // the reference evaluates `2.0 ** attempt` for every retry mode
        _ if attempt >= 1024 => Err(overflow(attempt)),
        Retry::Immediate => Ok(Some(0.1)),
        // 2^attempt, exactly (below 2^1024): its exponent's bits, rather than a powi call
        Retry::Backoff => Ok(Some(f64::from_bits((1023 + u64::from(attempt)) << 52))),
        Retry::Honor => Ok(Some(wait + 0.05)),
    }
}

/// A client's `max_retries` as a count of attempts' numbers: none below 0, and any count
/// past `u32::MAX` is as good as it (an attempt numbered 1024 fails before).
fn retries_allowed(max_retries: i128) -> u32 {
    max_retries.clamp(0, u32::MAX.into()) as u32
}

/// The reference's `OverflowError` for a retry numbered `attempt` (1024 or more).
#[cold]
fn overflow(attempt: u32) -> SimError {
    SimError::Crash(format!(
        "2.0 ** {attempt} overflows (max_retries above 1024): the reference raises OverflowError here"
    ))
}

/// The queue's lane of a retry delayed by a constant ([`Queue::push`]): 0 for immediate
/// retries, 1 + k for backoff step k (64 lanes at most); `None` for a delay that varies.
fn retry_lane(mode: Retry, attempt: u32) -> Option<usize> {
    match mode {
        Retry::Immediate => Some(0),
        Retry::Backoff if attempt < 63 => Some(1 + attempt as usize),
        _ => None,
    }
}

/// A policy's rolling windows ([`Engine::count_in_windows`]).
struct Windows {
    /// Per key.
    keys: Vec<Window>,
    /// The window's length, in nanoseconds for the core's limiters (which decide on whole
    /// nanoseconds), in seconds otherwise.
    w: f64,
    /// Whether the policy is one of the core's limiters.
    core: bool,
    /// The most admissions any key had in one window.
    most: u64,
}

/// The admission times of one key that may still be in its rolling window, oldest first
/// (for [`Engine::count_in_windows`]): `times[first..]`.
///
/// A key's times are dropped only when it has as many as the most seen so far (before that
/// the count in the window, at most that many, cannot be a new most), or when its list is
/// full (so it grows only when its own window needs the room: at most twice that, whatever
/// the number of keys). The old times are passed over many at a time, in sequential memory,
/// rather than an old time read for every admission, and moved out of the way only when
/// they are at least half the list.
#[derive(Clone, Default)]
struct Window {
    times: Vec<f64>,
    first: usize,
}

impl Window {
    /// Counts an admission at `t` in a window of `w`, `most` being the most counted in one
    /// window so far (of any key of the policy); the new most.
    #[inline(always)]
    fn count(&mut self, t: f64, w: f64, most: u64) -> u64 {
        let full = self.times.len() == self.times.capacity();
        if (self.times.len() - self.first) as u64 >= most || full {
            let kept = &self.times[self.first..];
            self.first += kept.iter().take_while(|&&x| x <= t - w).count();
            if full && self.first * 2 >= self.times.len() {
                self.times.drain(..self.first);
                self.first = 0;
            }
        }
        self.times.push(t);
        most.max((self.times.len() - self.first) as u64)
    }
}

const NO_KEY: u32 = u32::MAX;
const NO_SLOT: u32 = u32::MAX;

/// The replay: feed it requests in order ([`Engine::push`]), then [`Engine::finish`].
pub struct Engine<'c, 'o> {
    cfg: &'c Config,
    observer: Option<&'o mut dyn Observer>,
    /// Whether the observer watches attempts ([`Observer::watches_attempts`]).
    watching: bool,
    /// The logical requests the replay will have, when known beforehand (see
    /// [`Observer::progress`]).
    total: Option<u64>,
    clients: Names,
    endpoints: Names,
    /// Per client number: index into `out.clients`, or `NO_SLOT`.
    slot: Vec<u32>,
    /// Per client slot: retry mode and retries allowed (the last config entry of a name; see
    /// [`retries_allowed`]).
    retry: Vec<(Retry, u32)>,
    /// `(client, endpoint)` → pair number; `pair_keys[pair * policies + j]` is the key of
    /// policy `j` for that pair, or `NO_KEY`.
    pairs: Pairs,
    /// Per pair: its client and endpoint numbers.
    pair_names: Vec<(u32, u32)>,
    pair_keys: Vec<u32>,
    /// The server policies that apply to each pair, as `(policy, key)`: pair `p`'s are
    /// `server_keys[from..to]`, `(from, to)` being `servers[p].0`.
    server_keys: Vec<(u32, u32)>,
    /// Per pair: where its server policies are in `server_keys`, and the attempts they
    /// checked (each applying policy's `checks`), side by side.
    servers: Vec<((u32, u32), u64)>,
    key_names: Vec<Names>,
    states: Vec<State>,
    /// Per policy: admission times in the last window of each key, and the most counted in
    /// one (the policy's `observed_max` when the replay is done).
    windows: Vec<Windows>,
    /// Per client slot and policy (`slot * policies + j`): the attempts the policy refused
    /// (summed into the policies' counts, and who they refused, when the replay is done).
    refusals: Vec<u64>,
    /// Per client slot and policy name (`slot * names + name`, see `name_of`): the refusals
    /// the client blames on it (the first rejecting policy's).
    blamed: Vec<u64>,
    /// The number of distinct policy names.
    names: usize,
    /// Whether a refusal may start a block: some policy counts in the core (where a
    /// count-then-block rule blocks on a refusal), or the edge's pipeline decides.
    blocks: bool,
    /// Per policy, per client slot: refused in shadow at least once (empty when every edge
    /// rule enforces all its refusals).
    shadowed_clients: Vec<Vec<bool>>,
    /// The edge rules' policies that refused the attempt being decided in shadow, in order.
    shadow: Vec<u32>,
    /// The tenant whose limit refused the attempt being decided in shadow.
    tenant_shadow: Option<String>,
    pacers: Vec<usize>,
    /// The policies rejecting the attempt being decided, with the attempt's key in each.
    rejecting: Vec<(u32, u32)>,
    /// Per policy: the number of its name (policies sharing a name share a count).
    name_of: Vec<u32>,
    queue: Queue,
    last: Option<Request>,
    admit_order: u64,
    current: Option<Peak>,
    out: Outcome,
    /// The edge's rules, when the config has them: decided by the edge's own pipeline.
    edge: Option<EdgeRun<'c>>,
    /// How the edge's tenant stage refused the attempt being recorded, and the burst of the
    /// tenant's limit (the sample 429's quota).
    tenant_refusal: Option<(TenantRefused, Option<u32>)>,
    /// Which of the edge's checks before the body is read refused the attempt being recorded.
    pre_read_refusal: Option<&'static str>,
}

/// What the edge's pipeline needs in the replay: the rules, each pair's request facts, and
/// an isolate per colo (its block cache, as the edge keeps one per isolate).
struct EdgeRun<'c> {
    set: &'c RuleSet,
    host: String,
    /// Per rule: its policy's index.
    policy_of: Vec<u32>,
    /// Per pair: what the edge reads of its requests (`None`: a path the edge refuses with
    /// 400 before any rule).
    facts: Vec<Option<EdgeFacts>>,
    /// Per pair: whether its requests ask for the capabilities answer (the edge's own).
    capabilities: Vec<bool>,
    /// The isolates by colo and place (location, isolate: see [`super::spread`]).
    isolates: Vec<((String, usize, usize), Isolate)>,
    /// Where the attempt being decided landed: `(location, isolate)`.
    place: (usize, usize),
    placer: Placer,
    /// The Workers Rate Limiting bindings' counts, by colo and location.
    bindings: Vec<((String, usize), BindingCounts)>,
    /// Whether the refusal being recorded started its rule's block.
    block_started: bool,
    /// The tenant stage, when the rules have `tenants`, and the policy that stands for it.
    tenants: Option<(usize, TenantStage<'c>)>,
    /// The policy that stands for the checks before a body is read, when the rules set
    /// per-address or per-isolate limits.
    pre_read: Option<usize>,
}

/// The value of `list` whose key `is`, made (the default, under `key()`) on first use.
fn made_on_first_use<K, V: Default>(
    list: &mut Vec<(K, V)>,
    is: impl Fn(&K) -> bool,
    key: impl FnOnce() -> K,
) -> &mut V {
    let i = list.iter().position(|(k, _)| is(k)).unwrap_or_else(|| {
        list.push((key(), V::default()));
        list.len() - 1
    });
    &mut list[i].1
}

/// The isolate of `colo` at `place` among `isolates` (made on first use).
fn isolate_of<'i>(
    isolates: &'i mut Vec<((String, usize, usize), Isolate)>,
    colo: &str,
    place: (usize, usize),
) -> &'i mut Isolate {
    made_on_first_use(isolates, |(c, l, i)| c == colo && (*l, *i) == place, || (colo.to_owned(), place.0, place.1))
}

/// A model of one location's Workers Rate Limiting binding: per key, `requests_per_period`
/// in each window of the period (clock-aligned fixed windows, as Miniflare's binding counts;
/// Cloudflare documents its own as approximate), with no block of its own.
#[derive(Default)]
struct BindingCounts {
    keys: hashbrown::HashMap<String, crate::core::limit::FixedWindow, foldhash::fast::FixedState>,
}

impl BindingCounts {
    /// Whether the binding admits one more request of `key` under `rule` at `now`.
    fn limit(&mut self, rule: &crate::edge::rules::Rule, key: &str, now: Instant) -> bool {
        let quota = rule.quota();
        let window = self.keys.entry_ref(key).or_insert_with(|| {
            crate::core::limit::FixedWindow::new(quota.limit, quota.window).expect("a valid rule's limit and period")
        });
        window.check(now, 1).is_ok_and(|d| matches!(d, Decision::Allow { .. }))
    }
}

/// The binding counts of `colo`'s `location` among `bindings` (made on first use).
fn binding_of<'b>(
    bindings: &'b mut Vec<((String, usize), BindingCounts)>,
    colo: &str,
    location: usize,
) -> &'b mut BindingCounts {
    made_on_first_use(bindings, |(c, l)| c == colo && *l == location, || (colo.to_owned(), location))
}

/// Whether an edge rule of `cfg` leaves some of its refusals unenforced (`"enforce": false`
/// or a share of its keys).
fn has_shadow_rules(cfg: &Config) -> bool {
    cfg.edge_rules.as_ref().is_some_and(|set| set.rules().iter().any(|r| r.enforce != Enforce::All))
}

/// The number of each policy's name (policies sharing a name share it), and how many names
/// there are.
fn name_numbers(cfg: &Config) -> (Vec<u32>, usize) {
    let mut names = Names::default();
    let name_of = cfg.policies.iter().map(|p| names.intern(&p.name)).collect();
    (name_of, names.len())
}

/// The keyed hash of the simulated isolates' block caches (any key does).
const SIM_HASH: KeyedHash = KeyedHash::new(0x5eed, 0x51de);

impl<'c, 'o> Engine<'c, 'o> {
    /// A replay of `cfg`'s policies, calling `observer` with every decided attempt.
    pub fn new(cfg: &'c Config, observer: Option<&'o mut dyn Observer>) -> Self {
        Engine::with_names(cfg, observer, Names::default(), Names::default())
    }

    /// [`Engine::new`] with client and endpoint numbers already given (a [`Traffic`]'s).
    pub fn with_names(
        cfg: &'c Config,
        observer: Option<&'o mut dyn Observer>,
        clients: Names,
        endpoints: Names,
    ) -> Self {
        let states = cfg
            .policies
            .iter()
            .map(|p| match p.algorithm {
                PolicyAlgorithm::TokenBucket { rate, burst } => {
                    State::reference(ReferenceLimiter::token_bucket(rate, burst))
                }
                PolicyAlgorithm::FixedWindow { limit } => {
                    State::reference(ReferenceLimiter::fixed_window(limit, p.window_s))
                }
                PolicyAlgorithm::SlidingLog { limit } => {
                    State::reference(ReferenceLimiter::sliding_log(limit, p.window_s))
                }
                PolicyAlgorithm::SlidingCounter { limit } => {
                    State::reference(ReferenceLimiter::sliding_counter(limit, p.window_s))
                }
                PolicyAlgorithm::Gcra { burst, interval, .. } => State::Core {
                    prototype: Blocking::new(
                        AnyLimiter::Gcra(crate::core::limit::Gcra::with_interval(burst, interval)),
                        crate::core::time::Span::ZERO,
                    ),
                    keys: Vec::new(),
                },
                PolicyAlgorithm::CountThenBlock { counting, mitigation_timeout } => {
                    State::Core { prototype: Blocking::new(counting.limiter(), mitigation_timeout), keys: Vec::new() }
                }
                PolicyAlgorithm::SmartFlow { rate, burst } => State::Pacer {
                    prototype: SmartFlowBucket::new(rate, burst).expect("rate and burst checked with the config"),
                    keys: Vec::new(),
                },
                PolicyAlgorithm::TenantQuota { .. } | PolicyAlgorithm::PreRead { .. } => State::EdgeStage,
            })
            .collect();
        let n = cfg.policies.len();
        let pacers = (0..n).filter(|&j| cfg.policies[j].algorithm.is_pacer()).collect();
        let (name_of, names) = name_numbers(cfg);
        Engine {
            cfg,
            watching: observer.as_deref().is_some_and(Observer::watches_attempts),
            observer,
            total: None,
            clients,
            endpoints,
            slot: Vec::new(),
            retry: Vec::new(),
            pairs: Pairs::default(),
            pair_names: Vec::new(),
            pair_keys: Vec::new(),
            server_keys: Vec::new(),
            servers: Vec::new(),
            key_names: vec![Names::default(); n],
            states,
            windows: cfg
                .policies
                .iter()
                .map(|p| {
                    let core = p.algorithm.is_core();
                    let w = if core { nanos(p.window_s) as f64 } else { p.window_s };
                    Windows { keys: Vec::new(), w, core, most: 0 }
                })
                .collect(),
            refusals: Vec::new(),
            blamed: Vec::new(),
            names,
            blocks: cfg.edge_rules.is_some() || cfg.policies.iter().any(|p| p.algorithm.is_core()),
            shadowed_clients: if has_shadow_rules(cfg) { vec![Vec::new(); n] } else { Vec::new() },
            shadow: Vec::new(),
            tenant_shadow: None,
            pacers,
            rejecting: Vec::new(),
            name_of,
            queue: Queue::default(),
            last: None,
            admit_order: 0,
            current: None,
            out: Outcome { policies: vec![PolicyStats::default(); n], ..Outcome::default() },
            edge: cfg.edge_rules.as_ref().map(|set| EdgeRun {
                set,
                host: host_of(set),
                policy_of: (0..set.rules().len())
                    .map(|r| {
                        cfg.policies.iter().position(|p| p.edge_rule == Some(r)).expect("a policy per rule") as u32
                    })
                    .collect(),
                facts: Vec::new(),
                capabilities: Vec::new(),
                isolates: Vec::new(),
                place: (0, 0),
                placer: Placer::new(&cfg.edge_spread),
                bindings: Vec::new(),
                block_started: false,
                tenants: set.tenants().map(|t| {
                    let policy = cfg.policies.iter().position(Policy::is_tenant_stage).expect("a policy for tenants");
                    (policy, TenantStage::new(t))
                }),
                pre_read: cfg.policies.iter().position(Policy::is_pre_read_stage),
            }),
            tenant_refusal: None,
            pre_read_refusal: None,
        }
    }

    /// The number of a client name.
    pub fn client(&mut self, name: &str) -> u32 {
        self.clients.intern(name)
    }

    /// The number of an endpoint.
    pub fn endpoint(&mut self, name: &str) -> u32 {
        self.endpoints.intern(name)
    }

    /// Sorts requests of one instant into the replay's order (client name, endpoint name,
    /// cost), as logs with coarse timestamps need.
    pub fn sort_instant(&self, reqs: &mut [Request]) {
        sort_instant(&self.clients, &self.endpoints, reqs);
    }

    /// Replays one logical request (with the retries due before it). Requests must come in
    /// the replay's order (see [`Traffic::sort`]); one that does not is refused with
    /// [`Feed::OutOfOrder`] and changes nothing.
    pub fn push(&mut self, r: Request) -> Result<(), Feed> {
        self.check_order(r)?;
        self.push_in_order(r)?;
        Ok(())
    }

    fn check_order(&mut self, r: Request) -> Result<(), Feed> {
        if let Some(last) = self.last {
            let order = last
                .t
                .partial_cmp(&r.t)
                .unwrap_or(Ordering::Equal)
                .then_with(|| self.clients.name(last.client).cmp(self.clients.name(r.client)))
                .then_with(|| self.endpoints.name(last.endpoint).cmp(self.endpoints.name(r.endpoint)))
                .then_with(|| last.cost.partial_cmp(&r.cost).unwrap_or(Ordering::Equal));
            if order == Ordering::Greater {
                return Err(Feed::OutOfOrder);
            }
        }
        self.last = Some(r);
        Ok(())
    }

    /// [`Engine::push`] for requests already put in the replay's order (a trace read through
    /// the reorder window, which lets rows out whole instants at a time, each sorted).
    /// `pair` is the request's [`Pairs`] number, found by the reader (numbering the pairs
    /// of the rows it hands on, in order, as the replay would).
    pub(super) fn push_sorted(&mut self, r: Request, pair: u32) -> Result<(), SimError> {
        debug_assert!(self.check_order(r).is_ok(), "rows come in the replay's order");
        self.last = Some(r);
        if pair == self.pairs.len() {
            self.new_pair(r.client, r.endpoint);
        }
        debug_assert_eq!(self.pairs.get(r.client, r.endpoint), Some(pair), "the reader's pair numbers");
        self.push_pair(r, pair)
    }

    /// [`Engine::push`] for a request known to come in order.
    fn push_in_order(&mut self, r: Request) -> Result<(), SimError> {
        let pair = self.pair(r.client, r.endpoint);
        self.push_pair(r, pair)
    }

    /// [`Engine::push_in_order`] of a request of pair number `pair`.
    fn push_pair(&mut self, r: Request, pair: u32) -> Result<(), SimError> {
        // Retries due strictly before it; at the same instant first attempts go first (the
        // reference numbers every first attempt before any retry).
        while let Some(a) = self.queue.pop_before(Some(r.t)) {
            self.decide(a)?;
        }
        self.out.requests += 1;
        if self.out.requests % PROGRESS_EVERY == 0 {
            self.tell_progress();
        }
        let slot = self.slot(r.client) as u32;
        self.decide(Attempt { t: r.t, slot, pair, cost: r.cost, attempt: 0, paced: false })?;
        Ok(())
    }

    /// Replays the retries still queued and returns the outcome.
    pub fn finish(mut self) -> Result<Outcome, SimError> {
        while let Some(a) = self.queue.pop_before(None) {
            self.decide(a)?;
        }
        if let Some(cur) = self.current.take() {
            self.close_second(cur);
        }
        if let Some((_, stage)) = self.edge.as_mut().and_then(|e| e.tenants.as_mut()) {
            self.out.tenants = stage.take_stats();
            self.out.no_tenant = stage.unknown;
        }
        for (ps, policy) in self.out.policies.iter_mut().zip(&self.windows) {
            ps.observed_max = policy.most;
        }
        for &((from, to), checked) in &self.servers {
            for &(j, _) in &self.server_keys[from as usize..to as usize] {
                self.out.policies[j as usize].checks += checked;
            }
        }
        let n = self.states.len();
        for (slot, (_, s)) in self.out.clients.iter_mut().enumerate() {
            let blamed = &self.blamed[slot * self.names..][..self.names];
            s.blocked_by = s
                .blocked
                .iter()
                .map(|&name| {
                    let j = self.name_of.iter().position(|&x| x == name).expect("a policy's name");
                    (self.cfg.policies[j].name.clone(), blamed[name as usize])
                })
                .collect();
            for (ps, &refused) in self.out.policies.iter_mut().zip(&self.refusals[slot * n..][..n]) {
                ps.rejects += refused;
            }
        }
        let clients = &self.out.clients;
        let named = |flags: &[bool]| -> Vec<String> {
            flags.iter().enumerate().filter(|(_, &r)| r).map(|(slot, _)| clients[slot].0.clone()).collect()
        };
        for (j, ps) in self.out.policies.iter_mut().enumerate() {
            ps.by_client = (0..clients.len())
                .filter(|&slot| self.refusals[slot * n + j] > 0)
                .map(|slot| clients[slot].0.clone())
                .collect();
            if let Some(shadowed) = self.shadowed_clients.get(j) {
                ps.shadow_clients = named(shadowed);
            }
        }
        Ok(self.out)
    }

    fn close_second(&mut self, cur: Peak) {
        if self.out.peak.is_none_or(|best| cur.admitted > best.admitted) {
            self.out.peak = Some(cur);
        }
    }

    /// The index in `out.clients` of client number `c`.
    fn slot(&mut self, c: u32) -> usize {
        match self.slot.get(c as usize) {
            Some(&slot) if slot != NO_SLOT => slot as usize,
            _ => self.new_slot(c),
        }
    }

    /// [`Engine::slot`] for a client not seen before.
    #[cold]
    fn new_slot(&mut self, c: u32) -> usize {
        let c = c as usize;
        if self.slot.len() <= c {
            self.slot.resize(c + 1, NO_SLOT);
        }
        if self.slot[c] == NO_SLOT {
            self.slot[c] = self.out.clients.len() as u32;
            let name = self.clients.name(c as u32);
            self.out.clients.push((name.into(), ClientStats::default()));
            self.refusals.resize(self.refusals.len() + self.states.len(), 0);
            self.blamed.resize(self.blamed.len() + self.names, 0);
            for r in &mut self.shadowed_clients {
                r.push(false);
            }
            // the last config entry of its name wins
            let mode = self.cfg.clients.iter().rev().find(|x| x.name == name);
            self.retry.push(mode.map_or((Retry::None, 3), |x| (x.retry, retries_allowed(x.max_retries))));
        }
        self.slot[c] as usize
    }

    /// The number of a `(client, endpoint)` pair (its policies' keys are found the first
    /// time it comes up).
    fn pair(&mut self, client: u32, endpoint: u32) -> u32 {
        match self.pairs.number(client, endpoint) {
            (p, false) => p,
            (p, true) => {
                self.add_pair(client, endpoint);
                p
            }
        }
    }

    /// [`Engine::push_in_order`] for a generated client's request, `pair` being the client's
    /// pair number (`NO_KEY` until its first request, when it is found).
    #[inline(never)]
    fn push_generated(&mut self, r: Request, pair: &mut u32) -> Result<(), SimError> {
        if *pair == NO_KEY {
            *pair = self.pair(r.client, r.endpoint);
        }
        self.push_pair(r, *pair)
    }

    /// [`Engine::pair`] for a pair not seen before (numbered here).
    fn new_pair(&mut self, client: u32, endpoint: u32) {
        self.pairs.number(client, endpoint);
        self.add_pair(client, endpoint);
    }

    /// Finds the key of each policy for a new pair (numbered [`Pairs::len`]` - 1`).
    #[cold]
    fn add_pair(&mut self, client: u32, endpoint: u32) {
        self.pair_names.push((client, endpoint));
        let (cname, ename) = (self.clients.name(client), self.endpoints.name(endpoint));
        let facts = self.edge.as_ref().and_then(|edge| EdgeFacts::of(cname, client, ename, &edge.host));
        for (j, policy) in self.cfg.policies.iter().enumerate() {
            let key = match policy.edge_rule {
                // The edge's key: the rule's counting key of the request, when it matches.
                Some(r) => facts.as_ref().and_then(|f| {
                    let rule = &self.cfg.edge_rules.as_ref()?.rules()[r];
                    rule.matches(&f.facts()).then(|| rule.counting_key(&f.facts(), |name| f.header(name)))
                }),
                None => policy.key_for(cname, ename),
            };
            let key = match key {
                None => NO_KEY,
                Some(key) => {
                    let names = &mut self.key_names[j];
                    let before = names.len();
                    let id = names.intern(&key);
                    if names.len() > before {
                        self.states[j].add_key();
                        self.windows[j].keys.push(Window::default());
                    }
                    id
                }
            };
            self.pair_keys.push(key);
            if key != NO_KEY && !policy.algorithm.is_pacer() && policy.edge_rule.is_none() {
                self.server_keys.push((j as u32, key));
            }
        }
        let from = self.servers.last().map_or(0, |&((_, to), _)| to);
        self.servers.push(((from, self.server_keys.len() as u32), 0));
        if let Some(edge) = &mut self.edge {
            let answered = facts.as_ref().is_some_and(|f| serve::asks_capabilities(edge.set, &f.facts()));
            edge.capabilities.push(answered);
            edge.facts.push(facts);
        }
    }

    /// Decides one attempt (a first attempt or a retry) in the replay's steps: a new attempt
    /// is counted and goes through the client's pacers, which may hold it back for later;
    /// then the server policies check it; it is admitted if they all agree, otherwise the
    /// refusal is recorded and the client's retry scheduled.
    fn decide(&mut self, a: Attempt) -> Result<(), SimError> {
        if !a.paced {
            self.count_attempt(a);
            if !self.pacers.is_empty() && self.pace(a)? {
                return Ok(());
            }
        }
        if self.edge.is_some() && self.through_edge(a)? {
            return Ok(());
        }
        let wait = self.check_policies(a)?;
        if self.rejecting.is_empty() {
            self.admit(a);
            return Ok(());
        }
        self.record_refusal(a, wait);
        self.schedule_retry(a, wait)
    }

    /// Takes an attempt through the edge's stages, when the config has edge rules; true when
    /// the edge answered it itself (its capabilities) or refused it (the refusal recorded and
    /// the retry scheduled), false when it goes on to the configuration's policies.
    #[inline(never)]
    fn through_edge(&mut self, a: Attempt) -> Result<bool, SimError> {
        // Each attempt lands in one location and one isolate of it.
        if let Some(edge) = &mut self.edge {
            edge.place = edge.placer.place();
            self.shadow.clear();
            self.tenant_shadow = None;
        }
        // The edge is in front, its stages in its own order (`Way`: the capabilities answer,
        // counted by no rule; the rules, then the tenant, so a request the rules refuse spends
        // none of its tenant's quota); the configuration's policies stand behind it, where
        // the origin is.
        for stage in Way::without_routes() {
            let refused = match stage {
                Stage::Capabilities if self.asks_capabilities(a) => {
                    self.count_admitted(a);
                    return Ok(true);
                }
                Stage::PreRead => self.edge_pre_read(a)?,
                Stage::Rules => self.edge_rules(a)?,
                Stage::Tenant => self.edge_tenants(a)?,
                // Not modelled: upstream budgets, which hold a request for a slot while the
                // simulator's requests take no time (the policies model the origin's limits).
                _ => None,
            };
            if let Some(wait) = refused {
                self.record_refusal(a, wait);
                self.schedule_retry(a, wait)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Counts an attempt the client makes (a logical request when it is the first).
    fn count_attempt(&mut self, a: Attempt) {
        let s = &mut self.out.clients[a.slot as usize].1;
        if a.attempt == 0 {
            s.logical += 1;
        }
        s.attempts += 1;
    }

    /// Takes a new attempt through the client's pacers (the `smartflow` policies that apply
    /// to it): each reserves the attempt's cost and says how long it must wait. When one
    /// must, the attempt is held back by the longest wait (queued, to be checked by the
    /// server policies then) and true is returned.
    #[inline(never)]
    fn pace(&mut self, a: Attempt) -> Result<bool, SimError> {
        let s = &mut self.out.clients[a.slot as usize].1;
        let mut wait = 0.0f64;
        let mut by = None;
        let keys = &self.pair_keys[a.pair as usize * self.cfg.policies.len()..];
        for &j in &self.pacers {
            let key = keys[j];
            if key == NO_KEY {
                continue;
            }
            let State::Pacer { keys, .. } = &mut self.states[j] else { unreachable!("pacers are pacers") };
            let w = keys[key as usize]
                .acquire_cost(a.t, a.cost)
                .map_err(|e| SimError::Input(format!("policy '{}': {e}", self.cfg.policies[j].name)))?;
            self.out.policies[j].checks += 1;
            s.pacer_applies = true;
            if w > 0.0 {
                self.out.policies[j].delayed += 1;
            }
            if w > wait {
                wait = w;
                by = Some(j);
            }
        }
        let Some(j) = by else { return Ok(false) };
        s.paced += 1;
        s.pace_total += wait;
        if wait > s.pace_max {
            s.pace_max = wait;
            s.pace_policy = Some(self.cfg.policies[j].name.clone());
        }
        self.queue.push(Attempt { t: a.t + wait, paced: true, ..a }, None);
        Ok(true)
    }

    /// Asks every server policy that applies to the attempt whether it fits. Each key's state
    /// moves on (refill, window roll, log expiry) but nothing is charged: the attempt is
    /// admitted only if every policy admits it. The policies that refuse it are left in
    /// `rejecting`; returns the longest wait they give (0 when none refuses), or an error
    /// when one of the core's limiters cannot take the attempt at all.
    ///
    /// The refusals are noted in a mask of the pair's server policies while they are asked
    /// (a pair with more than 64 goes through [`Engine::check_many`]), and listed after.
    fn check_policies(&mut self, a: Attempt) -> Result<f64, SimError> {
        self.rejecting.clear();
        let ((from, to), checks) = &mut self.servers[a.pair as usize];
        *checks += 1;
        let servers = &self.server_keys[*from as usize..*to as usize];
        if servers.len() > 64 {
            return self.check_many(a);
        }
        let (mut wait, mut refused) = (0.0f64, 0u64);
        for (i, &(j, key)) in servers.iter().enumerate() {
            let c = self.states[j as usize].check(key as usize, a.t, a.cost);
            let c = c.map_err(|msg| self.cannot_take(j as usize, a, &msg))?;
            if !c.allowed {
                refused |= 1 << i;
                if c.wait > wait {
                    wait = c.wait;
                }
            }
        }
        while refused != 0 {
            self.rejecting.push(servers[refused.trailing_zeros() as usize]);
            refused &= refused - 1;
        }
        Ok(wait)
    }

    /// [`Engine::check_policies`] for a pair with more than 64 server policies.
    #[cold]
    #[inline(never)]
    fn check_many(&mut self, a: Attempt) -> Result<f64, SimError> {
        let mut wait = 0.0f64;
        let ((from, to), _) = self.servers[a.pair as usize];
        for &(j, key) in &self.server_keys[from as usize..to as usize] {
            let c = self.states[j as usize].check(key as usize, a.t, a.cost);
            let c = c.map_err(|msg| self.cannot_take(j as usize, a, &msg))?;
            if !c.allowed {
                self.rejecting.push((j, key));
                if c.wait > wait {
                    wait = c.wait;
                }
            }
        }
        Ok(wait)
    }

    /// Takes the attempt through the edge's rules as the edge does ([`RulesCheck`]): each
    /// matching rule's counter asked in file order, and charged when it admits, until one
    /// refuses. `Some(wait)` when one did (it is left in `rejecting`); `None` when every
    /// matching rule admitted the attempt (or none matched, or there are no edge rules).
    #[inline(never)]
    fn edge_rules(&mut self, a: Attempt) -> Result<Option<f64>, SimError> {
        let Some(edge) = &mut self.edge else { return Ok(None) };
        let p = a.pair as usize;
        let Some(facts) = &edge.facts[p] else { return Ok(None) };
        let now = core_now(a.t).map_err(|msg| SimError::Input(format!("edge_rules: {msg}")))?;
        let n = self.cfg.policies.len();
        let isolate = isolate_of(&mut edge.isolates, self.cfg.edge_spread.colo_of(facts.colo()), edge.place);
        let header = |name: &str| facts.header(name);
        let request = facts.facts();
        let mut check = RulesCheck::new(edge.set, SIM_HASH).without_log_keys();
        let policy_of = |rule| {
            let r = edge.set.rules().iter().position(|x| core::ptr::eq(x, rule)).expect("a rule of the set");
            edge.policy_of[r] as usize
        };
        // The rule whose counter was asked last, and whether that began its key's block.
        let mut asked: Option<(usize, bool)> = None;
        loop {
            let answer = match check.next(isolate, &request, &header, now) {
                Step::Done => break,
                Step::ReadOverrides => unreachable!("the simulator runs the rules file's enforce"),
                Step::Ask { rule, key } if matches!(rule.store, Store::Cloudflare { .. }) => {
                    let binding =
                        binding_of(&mut edge.bindings, self.cfg.edge_spread.colo_of(facts.colo()), edge.place.0);
                    Answer::Outcome { admitted: binding.limit(rule, key, now), at: now }
                }
                Step::Ask { rule, .. } => {
                    let j = policy_of(rule);
                    let key = self.pair_keys[p * n + j] as usize;
                    let State::Core { keys, .. } = &mut self.states[j] else {
                        unreachable!("edge rules count in the core")
                    };
                    let counter = &mut keys[key];
                    let was_blocked = counter.blocked_until(now).is_some();
                    // The edge counts requests: one each, whatever the trace's cost.
                    let decision =
                        counter.check(now, 1).map_err(|e| SimError::Input(format!("edge rule '{}': {e}", rule.id)))?;
                    asked = Some((j, !was_blocked && counter.blocked_until(now).is_some()));
                    Answer::Decided { decision, at: now }
                }
            };
            check.answer(isolate, answer);
        }
        let (verdict, notes) = check.finish();
        // Every rule that decided (or whose store failed) checked the attempt, whatever its
        // store: a block the isolate remembered, the isolate's count, the binding, the object.
        let mut via = None;
        for note in &notes {
            let (Note::Decided { rule, .. } | Note::StoreFailed { rule, .. }) = note else { continue };
            self.out.policies[policy_of(*rule)].checks += 1;
            via = match note {
                Note::Decided { via, .. } => Some(*via),
                _ => None,
            };
        }
        // The rules that refused in shadow: counted apart, the attempt went on.
        let (Verdict::Admitted(checked) | Verdict::Refused { checked, .. }) = &verdict;
        for (rule, _) in checked.shadow() {
            let j = policy_of(*rule);
            self.out.policies[j].shadow_refusals += 1;
            self.shadowed_clients[j][a.slot as usize] = true;
            self.shadow.push(j as u32);
        }
        let Verdict::Refused { rule, refusal, .. } = verdict else { return Ok(None) };
        let j = policy_of(rule);
        // A block starts with the refusal that starts it: its whole mitigation_timeout ahead
        // (the Durable Object's counter says so itself; the isolate's count and the binding's
        // block cache are read from the refusal).
        let started = if via == Some(Via::Isolate) || via == Some(Via::Binding) {
            !rule.mitigation_timeout.is_zero() && refusal == Refusal::Limited { wait: rule.mitigation_timeout }
        } else {
            asked == Some((j, true))
        };
        let key = self.pair_keys[p * n + j];
        // (counters in memory are always there to ask: a refusal is the counter's, or a block
        // the isolate remembered, which ends when the counter's does)
        let wait = match refusal {
            Refusal::Limited { wait } => secs(wait),
            Refusal::Unavailable => 0.0,
        };
        edge.block_started = started;
        self.rejecting.clear();
        self.rejecting.push((j as u32, key));
        Ok(Some(wait))
    }

    /// Takes an attempt through the edge's checks before its body is read, in its colo's
    /// isolate ([`Isolate::check_pre_read`]), when the rules set per-address or per-isolate
    /// limits. `Some(wait)` when one refused it (the stage's policy is left in `rejecting`,
    /// keyed by the check: its address, its colo or its source).
    fn edge_pre_read(&mut self, a: Attempt) -> Result<Option<f64>, SimError> {
        let Some(edge) = &mut self.edge else { return Ok(None) };
        let Some(j) = edge.pre_read else { return Ok(None) };
        let p = a.pair as usize;
        let Some(facts) = &edge.facts[p] else { return Ok(None) };
        let now = core_now(a.t).map_err(|msg| SimError::Input(format!("edge_rules: {msg}")))?;
        let request = facts.facts();
        let source = edge.set.pre_read().source_of(&request);
        let isolate = isolate_of(&mut edge.isolates, self.cfg.edge_spread.colo_of(facts.colo()), edge.place);
        let checked = isolate.check_pre_read(edge.set, request.identity, source, facts.declared(), now);
        self.out.policies[j].checks += 1;
        let Err((check, wait)) = checked else { return Ok(None) };
        let key = match check {
            preread::Check::Ip => format!("ip {}", request.identity.map_or_else(String::new, |i| i.ip.to_string())),
            preread::Check::Node => format!("node {}", facts.colo()),
            preread::Check::Source => format!("source {source}"),
        };
        let names = &mut self.key_names[j];
        let before = names.len();
        let key = names.intern(&key);
        if names.len() > before {
            self.windows[j].keys.push(Window::default());
        }
        self.pre_read_refusal = Some(check.name());
        self.rejecting.clear();
        self.rejecting.push((j as u32, key));
        Ok(Some(secs(wait)))
    }

    /// Takes an attempt the rules admitted through the edge's tenant stage ([`TenantStage`]),
    /// in its colo's isolate. `Some(wait)` when it refused the attempt (the stage's policy is
    /// left in `rejecting`, and how it refused in `tenant_refusal`): the wait of its
    /// `Retry-After` for a 429, 0 for a 401 or 413. `None` when it admitted it, or the rules
    /// have no `tenants` or the section does not match it.
    #[inline(never)]
    fn edge_tenants(&mut self, a: Attempt) -> Result<Option<f64>, SimError> {
        let Some(edge) = &mut self.edge else { return Ok(None) };
        let Some((j, stage)) = &mut edge.tenants else { return Ok(None) };
        let j = *j;
        let p = a.pair as usize;
        let Some(facts) = &edge.facts[p] else { return Ok(None) };
        let now = core_now(a.t).map_err(|msg| SimError::Input(format!("edge_rules: {msg}")))?;
        let isolate = isolate_of(&mut edge.isolates, self.cfg.edge_spread.colo_of(facts.colo()), edge.place);
        let (tenant, refused) = match stage.decide(isolate, facts, now) {
            tenants::Decided::NoTenant => return Ok(None),
            tenants::Decided::Admitted(tenant, shadow) => {
                if shadow {
                    self.tenant_shadow = Some(tenant.clone());
                }
                (Some(tenant), None)
            }
            tenants::Decided::Refused { refusal, tenant, burst } => (tenant, Some((refusal, burst))),
        };
        self.out.policies[j].checks += 1;
        // The pair's key: its tenant (and colo), the same for every attempt of the pair.
        let n = self.cfg.policies.len();
        let slot = &mut self.pair_keys[p * n + j];
        if let (Some(tenant), NO_KEY) = (tenant, *slot) {
            let key = match stage.tenants().scope {
                crate::edge::tenants::TenantScope::Colo | crate::edge::tenants::TenantScope::Isolate => {
                    format!("{tenant} @ {}", facts.colo())
                }
                crate::edge::tenants::TenantScope::Fleet => tenant,
            };
            let names = &mut self.key_names[j];
            let before = names.len();
            *slot = names.intern(&key);
            if names.len() > before {
                self.windows[j].keys.push(Window::default());
            }
        }
        let Some((refusal, burst)) = refused else { return Ok(None) };
        let wait = match &refusal {
            TenantRefusal::Limited { wait, .. } => secs(*wait),
            TenantRefusal::Overloaded { .. } => 1.0,
            TenantRefusal::Unknown | TenantRefusal::TooLarge { .. } => 0.0,
        };
        self.tenant_refusal = Some((tenants::refused(&refusal), burst));
        self.rejecting.clear();
        self.rejecting.push((j as u32, *slot));
        Ok(Some(wait))
    }

    /// The error for an attempt policy `j` cannot take at all, `msg` saying why.
    #[cold]
    fn cannot_take(&self, j: usize, a: Attempt, msg: &str) -> SimError {
        let p = &self.cfg.policies[j];
        let client = self.clients.name(self.pair_names[a.pair as usize].0);
        SimError::Input(format!("policy '{}' ({}) {msg} (client '{client}')", p.name, p.algorithm.name()))
    }

    /// Admits an attempt every server policy let through: each one is charged, every
    /// policy's rolling window counts it, and so do the client and the second it falls in.
    fn admit(&mut self, a: Attempt) {
        let ((from, to), _) = self.servers[a.pair as usize];
        for &(j, key) in &self.server_keys[from as usize..to as usize] {
            self.states[j as usize].charge(key as usize, a.t, a.cost);
        }
        self.count_in_windows(a);
        self.count_admitted(a);
    }

    /// Whether the edge answers `a` itself with its capabilities (counted by no rule, never
    /// reaching the origin).
    fn asks_capabilities(&self, a: Attempt) -> bool {
        self.edge.as_ref().is_some_and(|edge| edge.capabilities[a.pair as usize])
    }

    /// Counts an admitted attempt for its client and the report (what the edge answered
    /// itself included).
    #[inline(always)]
    fn count_admitted(&mut self, a: Attempt) {
        let s = &mut self.out.clients[a.slot as usize].1;
        s.allowed += 1;
        if a.attempt != 0 {
            s.delayed += 1;
        }
        if s.first_admit.is_none() {
            s.first_admit = Some(self.admit_order);
            self.admit_order += 1;
        }
        self.out.admitted += 1;
        self.count_in_second(a);
        self.observe(a, true);
    }

    /// Counts an admitted attempt in each policy's rolling window for its key (pacers' too),
    /// keeping the most any key had in one window.
    ///
    /// A key's list may still hold times that left its window (see [`Window`]).
    fn count_in_windows(&mut self, a: Attempt) {
        let n = self.cfg.policies.len();
        let keys = &self.pair_keys[a.pair as usize * n..][..n];
        for (&key, policy) in keys.iter().zip(&mut self.windows) {
            if key == NO_KEY {
                continue;
            }
            // The core's limiters decide on whole nanoseconds: measure them the same way.
            let t = if policy.core { whole_nanos(a.t) } else { a.t };
            policy.most = policy.keys[key as usize].count(t, policy.w, policy.most);
        }
    }

    /// Counts an admitted attempt in its whole second; a second that is over competes for
    /// the busiest one.
    fn count_in_second(&mut self, a: Attempt) {
        let sec = super::py::trunc_int(a.t);
        let retry = u64::from(a.attempt != 0);
        match &mut self.current {
            Some(cur) if cur.second == sec => {
                cur.admitted += 1;
                cur.retries += retry;
            }
            _ => self.next_second(Peak { second: sec, admitted: 1, retries: retry }),
        }
    }

    /// Starts counting a new second; the one before competes for the busiest.
    #[cold]
    fn next_second(&mut self, next: Peak) {
        if let Some(done) = self.current.replace(next) {
            self.close_second(done);
        }
    }

    /// Records a refusal by the policies in `rejecting`, the longest of their waits being
    /// `wait`: the core's limiters among them are told (a count-then-block rule starts its
    /// block), the client and the policies count it, and the first refusal of the replay is
    /// kept as the sample 429.
    #[inline(always)]
    fn record_refusal(&mut self, a: Attempt, wait: f64) {
        let ci = a.slot as usize;
        let n = self.states.len();
        let refusals = &mut self.refusals[ci * n..][..n];
        for &(j, _) in &self.rejecting {
            refusals[j as usize] += 1;
        }
        if self.blocks {
            self.count_blocks(a);
        }
        let s = &mut self.out.clients[ci].1;
        s.rejected += 1;
        if wait > s.max_retry_after {
            s.max_retry_after = wait;
        }
        s.first_reject.get_or_insert(a.t);
        // the first rejecting policy, in config order, is the one the client blames
        let first = self.rejecting[0].0 as usize;
        let first_name = self.name_of[first];
        let blamed = &mut self.blamed[ci * self.names + first_name as usize];
        if *blamed == 0 {
            s.blocked.push(first_name);
        }
        *blamed += 1;
        // (the sample is a 429: a tenant's 401 or 413 is not one)
        if self.out.sample.is_none() && self.tenant_refusal.is_none_or(|(r, _)| r.status == 429) {
            self.sample(a, first, wait);
        }
        self.observe(a, false);
        self.tenant_refusal = None;
        self.pre_read_refusal = None;
    }

    /// Tells the core's limiters among the policies in `rejecting` of their refusal (for
    /// [`Engine::record_refusal`]), counting the blocks it started.
    #[inline(never)]
    fn count_blocks(&mut self, a: Attempt) {
        let ci = a.slot as usize;
        for &(j, key) in &self.rejecting {
            let started = match &mut self.edge {
                // The edge's pipeline charged its counter already, and saw whether a block began.
                Some(edge) if self.cfg.policies[j as usize].edge_rule.is_some() => {
                    core::mem::take(&mut edge.block_started)
                }
                _ => self.states[j as usize].refused(key as usize, a.t, a.cost),
            };
            if started {
                let ps = &mut self.out.policies[j as usize];
                ps.blocks += 1;
                let name = &self.out.clients[ci].0;
                match ps.blocked_clients.iter_mut().find(|(n, _)| n == name) {
                    Some((_, k)) => *k += 1,
                    None => ps.blocked_clients.push((name.clone(), 1)),
                }
            }
        }
    }

    /// Keeps the first refusal, by policy `first` with `wait`, as the sample 429 (a tenant's
    /// with its own limit's burst as the quota).
    #[cold]
    fn sample(&mut self, a: Attempt, first: usize, wait: f64) {
        let first = &self.cfg.policies[first];
        let quota = match self.tenant_refusal {
            Some((_, Some(burst))) => PyValue::Int(burst.into()),
            _ => first.quota.clone(),
        };
        let (client, endpoint) = self.pair_names[a.pair as usize];
        self.out.sample = Some(Sample {
            t: round(a.t, 3),
            client: self.clients.name(client).into(),
            endpoint: self.endpoints.name(endpoint).into(),
            policy: first.name.clone(),
            retry_after: (wait.ceil() as i128).max(1),
            quota,
            window_s: first.window_s,
        });
    }

    /// Queues the retry of a refused attempt as the client's retry mode says ([`retry_delay`]),
    /// or counts its logical request as failed when the client gives up.
    #[inline(always)]
    fn schedule_retry(&mut self, a: Attempt, wait: f64) -> Result<(), SimError> {
        let (mode, max_retries) = self.retry[a.slot as usize];
        match retry_delay(mode, max_retries, a.attempt, wait)? {
            Some(delay) => {
                let retry = Attempt { t: a.t + delay, attempt: a.attempt + 1, paced: false, ..a };
                self.queue.push(retry, retry_lane(mode, a.attempt));
            }
            None => self.out.clients[a.slot as usize].1.failed += 1,
        }
        Ok(())
    }

    /// Hands a decided attempt to the observer, if it watches attempts.
    #[inline]
    fn observe(&mut self, a: Attempt, admitted: bool) {
        if self.watching {
            self.tell_observer(a, admitted);
        }
    }

    /// Tells the observer, if any, how many logical requests have been replayed (every
    /// [`PROGRESS_EVERY`]).
    #[cold]
    #[inline(never)]
    fn tell_progress(&mut self) {
        let done = self.out.requests;
        if let Some(o) = self.observer.as_mut() {
            o.progress(done, self.total.map(|total| total.max(done)));
        }
    }

    /// [`Engine::observe`] when there is an observer.
    #[inline(never)]
    fn tell_observer(&mut self, a: Attempt, admitted: bool) {
        let (client, endpoint) = self.pair_names[a.pair as usize];
        if let Some(o) = self.observer.as_mut() {
            o.attempt(&Event {
                t: a.t,
                client: a.slot as usize,
                name: self.clients.name(client),
                endpoint: self.endpoints.name(endpoint),
                cost: a.cost,
                attempt: a.attempt,
                admitted,
                tenant_refusal: self.tenant_refusal.map(|(r, _)| r),
                pre_read: self.pre_read_refusal,
                shadow: &self.shadow,
                tenant_shadow: self.tenant_shadow.as_deref(),
            });
        }
    }
}

/// Replays in-memory traffic (sorted here) through every policy.
pub fn simulate(cfg: &Config, traffic: Traffic) -> Result<Outcome, SimError> {
    simulate_observed(cfg, traffic, None)
}

/// [`simulate`], calling `observer` with every decided attempt.
pub fn simulate_observed(
    cfg: &Config,
    mut traffic: Traffic,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    let clients = core::mem::take(&mut traffic.clients);
    let endpoints = core::mem::take(&mut traffic.endpoints);
    // the engine numbers names afresh in the same order: hand it copies of the names
    let mut engine = Engine::with_names(cfg, observer, clients.clone(), endpoints.clone());
    engine.total = Some(traffic.len() as u64);
    traffic.clients = clients;
    traffic.endpoints = endpoints;
    traffic.in_order(|r| engine.push_in_order(r))?;
    engine.finish()
}

/// Replays the configured clients' traffic as [`generate`](super::traffic::generate) and [`simulate_observed`] would,
/// without storing it: each client's requests are produced in time order and merged, so
/// memory stays flat however long the simulation.
pub fn simulate_generated(cfg: &Config, observer: Option<&mut dyn Observer>) -> Result<Outcome, SimError> {
    let (mut clients, mut endpoints) = (Names::default(), Names::default());
    let mut rng: Option<PyRandom> = None;
    let mut sources = Vec::new();
    let last_poisson = cfg.clients.iter().rposition(|c| matches!(c.pattern, Pattern::Poisson { .. }));
    for (i, c) in cfg.clients.iter().enumerate() {
        let (client, endpoint) = (clients.intern(&c.name), endpoints.intern(&c.endpoint));
        let (t0, t1) = (c.start, c.start + c.duration);
        let source = match c.pattern {
            Pattern::Steady { rps } => {
                let n = (c.duration * rps).round_ties_even();
                Source::Steady { i: 0, n: if n > 0.0 { n as u64 } else { 0 }, t0, rps }
            }
            Pattern::Poisson { rps } => {
                if rng.is_none() {
                    rng = Some(seeded(cfg)?);
                }
                let shared = rng.as_mut().expect("seeded above");
                // This client draws from here; the next Poisson client from where it stops
                // (drawn through here, unless none comes after it).
                let mut own = Box::new(shared.clone());
                let first = t0 + own.expovariate(rps);
                if Some(i) != last_poisson {
                    let mut t = t0 + shared.expovariate(rps);
                    while t < t1 {
                        t += shared.expovariate(rps);
                    }
                }
                Source::Poisson { rng: own, t: first, t1, rps }
            }
            Pattern::Burst { burst, every_s } if burst >= 2 && (burst - 1) as f64 * 0.001 >= every_s / 2.0 => {
                Source::Overlapping(Box::new(Overlapping { heap: BinaryHeap::new(), t: t0, b: 0, burst, every_s, t1 }))
            }
            Pattern::Burst { burst, every_s } => Source::Burst {
                t: t0,
                k: 0,
                burst: if burst > 0 { burst } else { 0 },
                every_s,
                t1: if burst > 0 { t1 } else { t0 },
            },
        };
        sources.push((source, Request { t: 0.0, client, endpoint, cost: c.cost }));
    }
    // each source's next request, and its merge key (of which only the time changes from one
    // of its requests to the next: names and cost are the source's)
    let order = Order::new(&clients, &endpoints);
    let mut heads = Vec::new();
    for (j, (source, next)) in sources.iter_mut().enumerate() {
        if let Some(t) = source.next() {
            next.t = t;
            heads.push((order.key(next), j));
        }
    }
    let mut engine = Engine::with_names(cfg, observer, clients, endpoints);
    // exact but for Poisson clients (an expected count); infinite only past any ceiling
    let estimate = cfg.estimated_requests().round();
    engine.total = estimate.is_finite().then_some(estimate as u64);
    // each source's pair number, found when its first request is replayed (so numbered in
    // the replay's order, as every request looking its pair up would)
    let mut pairs = vec![NO_KEY; sources.len()];
    merge(heads, |j, key| {
        let (source, next) = &mut sources[j];
        engine.push_generated(*next, &mut pairs[j])?;
        let Some(t) = source.next() else { return Ok(false) };
        next.t = t;
        key.0 = time_key(t);
        Ok(true)
    })?;
    engine.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_waits_two_to_the_attempt() {
        for attempt in 0..1024u32 {
            let got = retry_delay(Retry::Backoff, 2000, attempt, 0.0).unwrap();
            assert_eq!(got.map(f64::to_bits), Some(2f64.powi(attempt as i32).to_bits()), "attempt {attempt}");
        }
        assert!(retry_delay(Retry::Backoff, 2000, 1024, 0.0).is_err());
    }

    /// A config of `n` fixed windows per client on every endpoint, each of 1,000 a minute but
    /// those in `tight` (1 a minute), and one client sending 10 requests a second apart.
    fn many_policies(n: usize, tight: &[usize]) -> Outcome {
        let policies: Vec<String> = (0..n)
            .map(|j| {
                let limit = if tight.contains(&j) { 1 } else { 1_000 };
                format!(r#"{{"name": "p{j}", "algorithm": "fixed_window", "key": "client", "limit": {limit}, "window_s": 60}}"#)
            })
            .collect();
        let cfg = format!(
            r#"{{"service": "many", "duration_s": 10, "capacity_rps": 100, "policies": [{}],
                "clients": [{{"name": "c", "kind": "legit", "pattern": "steady", "rps": 1, "endpoint": "/x", "retry": "none"}}]}}"#,
            policies.join(",")
        );
        simulate_generated(&Config::from_json(&cfg).unwrap(), None).unwrap()
    }

    #[test]
    fn a_pair_with_more_than_64_policies_counts_every_refusal_and_blames_the_first_in_config_order() {
        for (n, tight) in [(70, &[67][..]), (70, &[2, 67][..]), (65, &[64][..]), (64, &[63][..])] {
            let out = many_policies(n, tight);
            let (name, client) = &out.clients[0];
            assert_eq!((name.as_str(), client.allowed, client.rejected), ("c", 1, 9), "{n} policies, {tight:?}");
            for (j, policy) in out.policies.iter().enumerate() {
                let want = if tight.contains(&j) { 9 } else { 0 };
                assert_eq!(policy.rejects, want, "{n} policies, {tight:?}: p{j}");
            }
            assert_eq!(client.blocked_by, [(format!("p{}", tight[0]), 9)], "{n} policies, {tight:?}");
        }
    }
}
