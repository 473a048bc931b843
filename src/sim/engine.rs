//! Traffic generation and the replay itself.
//!
//! The replay streams: initial requests arrive in the reference's order (time, then client,
//! endpoint and cost) and are merged with the queue of pending retries, and nothing is kept
//! per request once it is decided. Names are interned, each `(client, endpoint)` pair's
//! counting keys are worked out once, and every policy keeps its keys' state in a vector,
//! so a decision costs a hash lookup and a few array accesses whatever the trace's length.

use super::config::{nanos, secs, Algorithm, Config, Pattern, Retry};
use super::limiters::ReferenceLimiter;
use super::py::{round, PyValue};
use super::random::{PyRandom, Seed};
use super::SimError;
use crate::client::smartflow::TokenBucket as SmartFlowBucket;
use crate::core::limit::{Blocking, Decision, Limiter as _};
use crate::core::time::Instant;
use crate::edge::rules::AnyLimiter;
use core::cmp::Ordering;
use core::cmp::Reverse;
use core::hash::{BuildHasher, Hasher};
use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};
use std::collections::{BinaryHeap, VecDeque};

/// Names interned as numbers, in the order first seen.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// The numbers, found by the hash of a name's bytes.
    index: HashTable<u32>,
    names: Vec<Box<str>>,
}

impl Names {
    fn hash(name: &[u8]) -> u64 {
        let mut h = FixedState::default().build_hasher();
        h.write(name);
        h.finish()
    }

    /// The number of `name`, numbering it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        let hash = Names::hash(name.as_bytes());
        match self.index.find(hash, |&id| self.names[id as usize].as_bytes() == name.as_bytes()) {
            Some(&id) => id,
            None => self.add(hash, name),
        }
    }

    /// [`Names::intern`] for a name given as bytes; `None` when they are not UTF-8 text.
    pub fn intern_utf8(&mut self, name: &[u8]) -> Option<u32> {
        let hash = Names::hash(name);
        match self.index.find(hash, |&id| self.names[id as usize].as_bytes() == name) {
            Some(&id) => Some(id),
            None => Some(self.add(hash, core::str::from_utf8(name).ok()?)),
        }
    }

    fn add(&mut self, hash: u64, name: &str) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(name.into());
        let names = &self.names;
        self.index.insert_unique(hash, id, |&id| Names::hash(names[id as usize].as_bytes()));
        id
    }

    /// The name numbered `id`.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// One logical request: when, who (a number in [`Traffic::clients`]), where (in
/// [`Traffic::endpoints`]) and how many tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Seconds from the start.
    pub t: f64,
    /// Client number.
    pub client: u32,
    /// Endpoint number.
    pub endpoint: u32,
    /// Tokens it costs.
    pub cost: f64,
}

/// The replay's order of requests: time, then client and endpoint name (as ranks), cost.
type MergeKey = (u64, u64, u64);

/// The replay's order of requests, as a [`MergeKey`]: client and endpoint names compared
/// through their ranks in sorted order.
struct Order {
    clients: Vec<u32>,
    endpoints: Vec<u32>,
}

impl Order {
    fn new(clients: &Names, endpoints: &Names) -> Self {
        let ranks = |names: &Names| {
            let mut ids: Vec<u32> = (0..names.len() as u32).collect();
            ids.sort_unstable_by(|&a, &b| names.name(a).cmp(names.name(b)));
            let mut rank = vec![0u32; ids.len()];
            for (r, id) in ids.into_iter().enumerate() {
                rank[id as usize] = r as u32;
            }
            rank
        };
        Order { clients: ranks(clients), endpoints: ranks(endpoints) }
    }

    fn key(&self, r: &Request) -> MergeKey {
        let names = u64::from(self.clients[r.client as usize]) << 32 | u64::from(self.endpoints[r.endpoint as usize]);
        (time_key(r.t), names, time_key(r.cost))
    }
}

/// Merges runs that are each in order: `heads` holds the key of each run's first item and
/// the run's number; `take(j)` hands on run `j`'s current item and returns the key of its
/// next one (`None` at its end). Items of equal keys are interchangeable.
#[inline]
fn merge<E>(
    mut heads: Vec<(MergeKey, usize)>,
    mut take: impl FnMut(usize) -> Result<Option<MergeKey>, E>,
) -> Result<(), E> {
    if heads.len() > 16 {
        let mut heap: BinaryHeap<Reverse<(MergeKey, usize)>> = heads.into_iter().map(Reverse).collect();
        while let Some(Reverse((_, j))) = heap.pop() {
            if let Some(key) = take(j)? {
                heap.push(Reverse((key, j)));
            }
        }
        return Ok(());
    }
    // a few runs: the smallest head by a linear scan
    while !heads.is_empty() {
        let mut m = 0;
        for h in 1..heads.len() {
            if heads[h].0 < heads[m].0 {
                m = h;
            }
        }
        match take(heads[m].1)? {
            Some(key) => heads[m].0 = key,
            None => {
                heads.swap_remove(m);
            }
        }
    }
    Ok(())
}

/// [`Engine::sort_instant`] with the names numbered in `clients` and `endpoints` (a stable
/// sort: requests equal in all three stay in the order given).
pub(super) fn sort_instant(clients: &Names, endpoints: &Names, reqs: &mut [Request]) {
    reqs.sort_by(|a, b| {
        clients
            .name(a.client)
            .cmp(clients.name(b.client))
            .then_with(|| endpoints.name(a.endpoint).cmp(endpoints.name(b.endpoint)))
            .then_with(|| a.cost.partial_cmp(&b.cost).unwrap_or(Ordering::Equal))
    });
}

/// Requests held in memory (generated traffic, or a trace that is not in time order).
#[derive(Clone, Debug, Default)]
pub struct Traffic {
    /// Client names.
    pub clients: Names,
    /// Endpoint names.
    pub endpoints: Names,
    /// The requests.
    pub requests: Vec<Request>,
    /// Where each client's generated requests end in `requests` (ascending): runs that
    /// [`Traffic::sort`] merges instead of sorting everything.
    pub runs: Vec<usize>,
}

impl Traffic {
    /// Adds a request.
    pub fn push(&mut self, t: f64, client: &str, endpoint: &str, cost: f64) {
        let (client, endpoint) = (self.clients.intern(client), self.endpoints.intern(endpoint));
        self.requests.push(Request { t, client, endpoint, cost });
    }

    /// Sorts the requests into the order the replay takes them: by time, then client name,
    /// endpoint name and cost (the reference's `sorted()` of `(t, client, endpoint, cost)`).
    pub fn sort(&mut self) {
        let mut merged = Vec::with_capacity(self.requests.len());
        self.in_order(|r| {
            merged.push(r);
            Ok::<(), SimError>(())
        })
        .expect("pushing cannot fail");
        self.requests = merged;
        self.runs.clear();
    }

    /// Hands every request to `f` in the order of [`Traffic::sort`], without building the
    /// sorted copy. Each run (one client's generated requests) is put in order on its own,
    /// which is almost always already the case, then the runs are merged. Requests equal in
    /// all four sort keys are interchangeable.
    fn in_order<E>(&mut self, mut f: impl FnMut(Request) -> Result<(), E>) -> Result<(), E> {
        let order = Order::new(&self.clients, &self.endpoints);
        let key = |r: &Request| order.key(r);
        let mut bounds = self.runs.clone();
        if bounds.last() != Some(&self.requests.len()) {
            bounds.push(self.requests.len());
        }
        // per run: (next index, end)
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut heads = Vec::new();
        let mut start = 0;
        for &end in &bounds {
            let slice = &mut self.requests[start..end];
            if !slice.is_sorted_by_key(key) {
                slice.sort_by_cached_key(key);
            }
            if start < end {
                heads.push((key(&self.requests[start]), runs.len()));
                runs.push((start, end));
            }
            start = end;
        }
        let reqs = &self.requests;
        merge(heads, |j| {
            let (i, end) = &mut runs[j];
            f(reqs[*i])?;
            *i += 1;
            Ok((*i < *end).then(|| key(&reqs[*i])))
        })
    }

    /// The number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// The generator every Poisson client draws from in turn.
fn seeded(cfg: &Config) -> Result<PyRandom, SimError> {
    PyRandom::new(&cfg.seed).ok_or_else(|| {
        SimError::Input(match &cfg.seed {
            Seed::Unsupported(seed) => {
                format!("seed {seed} is not supported for poisson traffic (use an integer or a float)")
            }
            _ => unreachable!("integer and float seeds are supported"),
        })
    })
}

/// The configured clients' traffic, in config order (not sorted), with the seeded generator
/// shared by every Poisson client in turn.
pub fn generate(cfg: &Config) -> Result<Traffic, SimError> {
    let mut rng: Option<PyRandom> = None;
    let mut out = Traffic::default();
    let expected: f64 = cfg
        .clients
        .iter()
        .map(|c| match c.pattern {
            Pattern::Steady { rps } | Pattern::Poisson { rps } => c.duration * rps * 1.05,
            Pattern::Burst { burst, every_s } => (c.duration / every_s + 1.0) * burst.max(0) as f64,
        })
        .sum();
    out.requests.reserve(expected.clamp(0.0, 1e7) as usize);
    for c in &cfg.clients {
        let (client, endpoint) = (out.clients.intern(&c.name), out.endpoints.intern(&c.endpoint));
        let req = |t: f64| Request { t, client, endpoint, cost: c.cost };
        let reqs = &mut out.requests;
        let (t0, t1) = (c.start, c.start + c.duration);
        match c.pattern {
            Pattern::Steady { rps } => {
                let n = (c.duration * rps).round_ties_even();
                let n = if n > 0.0 { n as u64 } else { 0 };
                reqs.extend((0..n).map(|i| req(t0 + i as f64 / rps)));
            }
            Pattern::Poisson { rps } => {
                if rng.is_none() {
                    rng = Some(seeded(cfg)?);
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
        out.runs.push(out.requests.len());
    }
    Ok(out)
}

/// One configured client's traffic, produced in time order on demand (what [`generate`]
/// would store for it, one request at a time).
enum Source {
    Steady {
        i: u64,
        n: u64,
        t0: f64,
        rps: f64,
    },
    Poisson {
        rng: Box<PyRandom>,
        t: f64,
        t1: f64,
        rps: f64,
    },
    Burst {
        t: f64,
        k: i128,
        burst: i128,
        every_s: f64,
        t1: f64,
    },
    /// Bursts that overlap (1 ms apart, more of them than fit between bursts): merged here in
    /// the order a stable sort of every burst's times gives, holding only the bursts under
    /// way (one entry each), never the whole client's traffic.
    Overlapping(Box<Overlapping>),
}

/// The state of [`Source::Overlapping`].
struct Overlapping {
    /// The bursts under way: `(time's total order, burst number, request in it, burst start)`.
    heap: BinaryHeap<Reverse<(i64, u64, i128, u64)>>,
    /// The next burst's start and number.
    t: f64,
    b: u64,
    burst: i128,
    every_s: f64,
    t1: f64,
}

/// `t`'s place in `f64::total_cmp`'s order, as an integer.
fn total_key(t: f64) -> i64 {
    let bits = t.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

impl Overlapping {
    fn next(&mut self) -> Option<f64> {
        // every burst starting no later than the earliest request under way is under way
        while self.t < self.t1 && self.heap.peek().is_none_or(|Reverse(head)| total_key(self.t + 0.0) <= head.0) {
            self.heap.push(Reverse((total_key(self.t + 0.0), self.b, 0, self.t.to_bits())));
            self.b += 1;
            self.t += self.every_s;
        }
        let Reverse((_, b, k, start)) = self.heap.pop()?;
        let start_t = f64::from_bits(start);
        let t = start_t + k as f64 * 0.001;
        if k + 1 < self.burst {
            self.heap.push(Reverse((total_key(start_t + (k + 1) as f64 * 0.001), b, k + 1, start)));
        }
        Some(t)
    }
}

impl Source {
    fn next(&mut self) -> Option<f64> {
        match self {
            Source::Steady { i, n, t0, rps } => (*i < *n).then(|| {
                *i += 1;
                *t0 + (*i - 1) as f64 / *rps
            }),
            Source::Poisson { rng, t, t1, rps } => (*t < *t1).then(|| {
                let now = *t;
                *t += rng.expovariate(*rps);
                now
            }),
            Source::Burst { t, k, burst, every_s, t1 } => {
                if *k == *burst {
                    *t += *every_s;
                    *k = 0;
                }
                (*t < *t1).then(|| {
                    *k += 1;
                    *t + (*k - 1) as f64 * 0.001
                })
            }
            Source::Overlapping(bursts) => bursts.next(),
        }
    }
}

/// Replays the configured clients' traffic as [`generate`] and [`simulate_observed`] would,
/// without storing it: each client's requests are produced in time order and merged, so
/// memory stays flat however long the simulation.
pub fn simulate_generated(cfg: &Config, observer: Option<&mut dyn Observer>) -> Result<Outcome, SimError> {
    let (mut clients, mut endpoints) = (Names::default(), Names::default());
    let mut rng: Option<PyRandom> = None;
    let mut sources = Vec::new();
    for c in &cfg.clients {
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
                // This client draws from here; the next Poisson client from where it stops.
                let mut own = Box::new(shared.clone());
                let first = t0 + own.expovariate(rps);
                let mut t = t0 + shared.expovariate(rps);
                while t < t1 {
                    t += shared.expovariate(rps);
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
    let order = Order::new(&clients, &endpoints);
    // each source's next request, and its merge key
    let mut heads = Vec::new();
    for (j, (source, next)) in sources.iter_mut().enumerate() {
        if let Some(t) = source.next() {
            next.t = t;
            heads.push((order.key(next), j));
        }
    }
    let mut engine = Engine::with_names(cfg, observer, clients, endpoints);
    merge(heads, |j| {
        let (source, next) = &mut sources[j];
        engine.push_in_order(*next)?;
        Ok(source.next().map(|t| {
            next.t = t;
            order.key(next)
        }))
    })?;
    engine.finish()
}

/// An attempt to decide.
#[derive(Clone, Copy)]
struct Attempt {
    t: f64,
    /// The client's index in the outcome.
    slot: u32,
    /// Its `(client, endpoint)` pair's number (client and endpoint are in `pair_names`).
    pair: u32,
    cost: f64,
    attempt: u32,
    /// Through the client's pacers already (counted when it first came up).
    paced: bool,
}

/// `t` as an integer of the same order (`-0.0` and `0.0` are one instant).
pub(super) fn time_key(t: f64) -> u64 {
    let bits = (t + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// Attempts waiting to be decided (retries, paced requests), earliest first, then in the
/// order queued: the reference's heap of `(t, seq, ...)`.
///
/// A radix heap: the replay never queues an attempt earlier than the last one it took out,
/// so each queued key `(t, seq)` sits in the bucket of the highest bit in which it differs
/// from that last key, and taking the earliest out only redistributes one bucket. Pushes
/// are appends; every attempt moves down a few buckets in its life, in sequential memory,
/// instead of climbing a binary heap of random accesses.
struct Queue {
    /// Attempts queued a fixed delay after they were decided (immediate retries, backoff
    /// retries of one step) come out in the order they went in: one FIFO lane per delay,
    /// no sorting at all, each attempt read in sequence where it was queued.
    lanes: Vec<VecDeque<(u128, Attempt)>>,
    /// The key at the front of each lane (`u128::MAX` when it is empty), side by side: the
    /// next head is found without visiting every lane.
    fronts: Vec<u128>,
    buckets: Vec<Vec<(u128, u32)>>,
    /// The smallest key in each bucket (valid while it is not empty).
    mins: Vec<u128>,
    /// Which buckets hold something.
    nonempty: [u64; 3],
    /// The last key taken out; every key queued is at least this.
    last: u128,
    /// The bucketed attempts, where the buckets' `(key, index)` entries point.
    slab: Vec<Attempt>,
    free: Vec<u32>,
    seq: u64,
    /// The smallest key queued (`u128::MAX` when nothing is) and where it is: a lane, or
    /// the buckets (`None`). Asking for an attempt due before the next request is then one
    /// comparison when none is.
    head: (u128, Option<usize>),
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            lanes: Vec::new(),
            fronts: Vec::new(),
            buckets: vec![Vec::new(); 129],
            mins: vec![0; 129],
            nonempty: [0; 3],
            last: 0,
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            head: (u128::MAX, None),
        }
    }
}

impl Queue {
    fn bucket(&self, key: u128) -> usize {
        128 - (key ^ self.last).leading_zeros() as usize
    }

    fn put(&mut self, key: u128, i: u32) {
        let b = self.bucket(key);
        let (word, bit) = (b / 64, 1u64 << (b % 64));
        if self.nonempty[word] & bit == 0 {
            self.nonempty[word] |= bit;
            self.mins[b] = key;
        } else if key < self.mins[b] {
            self.mins[b] = key;
        }
        self.buckets[b].push((key, i));
    }

    fn lowest(&self) -> Option<usize> {
        self.nonempty.iter().enumerate().find(|(_, &w)| w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Queues `a`; `lane` for an attempt delayed by the same amount as every other attempt
    /// of that lane.
    fn push(&mut self, a: Attempt, lane: Option<usize>) {
        self.seq += 1;
        let key = u128::from(time_key(a.t)) << 64 | u128::from(self.seq);
        match lane {
            Some(lane) => {
                if self.lanes.len() <= lane {
                    self.add_lanes(lane);
                }
                debug_assert!(self.lanes[lane].back().is_none_or(|&(k, _)| k < key), "a lane stays in order");
                if self.lanes[lane].is_empty() {
                    self.fronts[lane] = key;
                }
                self.lanes[lane].push_back((key, a));
            }
            None => {
                debug_assert!(key >= self.last, "the replay never queues into the past");
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slab[i as usize] = a;
                        i
                    }
                    None => {
                        self.slab.push(a);
                        (self.slab.len() - 1) as u32
                    }
                };
                self.put(key, i);
            }
        }
        if key < self.head.0 {
            self.head = (key, lane);
        }
    }

    /// Makes lanes up to number `lane`.
    #[cold]
    fn add_lanes(&mut self, lane: usize) {
        self.lanes.resize_with(lane + 1, VecDeque::new);
        self.fronts.resize(lane + 1, u128::MAX);
    }

    /// Finds the smallest key queued again (after it was taken out).
    fn find_head(&mut self) {
        let mut head = (self.lowest().map_or(u128::MAX, |b| self.mins[b]), None);
        for (l, &key) in self.fronts.iter().enumerate() {
            if key < head.0 {
                head = (key, Some(l));
            }
        }
        self.head = head;
    }

    /// The earliest attempt, if it is due strictly before `t` (any, for `None`).
    #[inline]
    fn pop_before(&mut self, t: Option<f64>) -> Option<Attempt> {
        let min = self.head.0;
        if min == u128::MAX || t.is_some_and(|t| (min >> 64) as u64 >= time_key(t)) {
            return None;
        }
        Some(self.pop())
    }

    /// Takes the earliest attempt out (something is queued).
    #[inline(never)]
    fn pop(&mut self) -> Attempt {
        let (min, from_lane) = self.head;
        let a = match from_lane {
            Some(l) => {
                let lane = &mut self.lanes[l];
                let a = lane.pop_front().expect("the head is at its front").1;
                self.fronts[l] = lane.front().map_or(u128::MAX, |&(key, _)| key);
                a
            }
            None => {
                let i = self.pop_bucket(min);
                self.free.push(i);
                self.slab[i as usize]
            }
        };
        self.find_head();
        a
    }

    /// Takes the smallest key, `min`, out of the lowest bucket, spreading the rest of it
    /// over the buckets below; its attempt's index.
    fn pop_bucket(&mut self, min: u128) -> u32 {
        let b = self.lowest().expect("the minimum is in a bucket");
        self.nonempty[b / 64] &= !(1u64 << (b % 64));
        let mut items = core::mem::take(&mut self.buckets[b]);
        self.last = min;
        let mut taken = None;
        for (key, i) in items.drain(..) {
            if key == min {
                taken = Some(i);
            } else {
                self.put(key, i);
            }
        }
        self.buckets[b] = items;
        taken.expect("the bucket's minimum is in it")
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
    /// `blocked_by` while replaying: numbers of distinct policy names.
    blocked: Vec<(u32, u64)>,
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
}

/// Something that watches every decided attempt, in time order (the timeline; tests).
pub trait Observer {
    /// One attempt was decided.
    fn attempt(&mut self, event: &Event<'_>);
    /// The replay starts over (a trace turned out not to be in time order and is replayed
    /// sorted): forget what was seen.
    fn restart(&mut self) {}
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

/// A policy's counters, one per key.
enum State {
    /// The reference's four algorithms.
    Reference(ReferenceLimiter),
    /// The core's limiters: `gcra` and `count_then_block`.
    Core { prototype: Blocking<AnyLimiter>, keys: Vec<Blocking<AnyLimiter>> },
    /// The Smart Flow bucket as a client-side pacer.
    Pacer { prototype: SmartFlowBucket, keys: Vec<SmartFlowBucket> },
}

impl State {
    fn add_key(&mut self) {
        match self {
            State::Reference(l) => l.add_key(),
            State::Core { prototype, keys } => keys.push(prototype.clone()),
            State::Pacer { prototype, keys } => keys.push(*prototype),
        }
    }

    /// Charges an admitted attempt to `key` (checked as admitted just before, with the same
    /// `t` and `cost`). A pacer was charged when it reserved.
    fn charge(&mut self, key: usize, t: f64, cost: f64) {
        match self {
            State::Reference(lim) => lim.consume(key, t, cost),
            State::Core { keys, .. } => {
                // peeked as allowed above with the same now and cost: this charges it
                let _ = keys[key].check(Instant::from_nanos(nanos(t)), cost as u32);
            }
            State::Pacer { .. } => {}
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

/// [`State::refused`] for one of the core's limiters.
#[inline(never)]
fn refused_core(lim: &mut Blocking<AnyLimiter>, t: f64, cost: f64) -> bool {
    let now = Instant::from_nanos(nanos(t));
    let was_blocked = lim.blocked_until(now).is_some();
    let _ = lim.check(now, cost as u32);
    !was_blocked && lim.blocked_until(now).is_some()
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
/// says; `None` when it gives up (no retries, or `max_retries` spent).
fn retry_delay(mode: Retry, max_retries: i128, attempt: u32, wait: f64) -> Result<Option<f64>, SimError> {
    match mode {
        Retry::None => Ok(None),
        _ if i128::from(attempt) >= max_retries => Ok(None),
        // the reference evaluates `2.0 ** attempt` for every retry mode
        _ if attempt >= 1024 => Err(overflow(attempt)),
        Retry::Immediate => Ok(Some(0.1)),
        Retry::Backoff => Ok(Some(2f64.powi(attempt as i32))),
        Retry::Honor => Ok(Some(wait + 0.05)),
    }
}

/// The reference's `OverflowError` for a retry numbered `attempt` (1024 or more).
#[cold]
fn overflow(attempt: u32) -> SimError {
    SimError::Crash(format!(
        "2.0 ** {attempt} overflows (max_retries above 1024): the reference raises OverflowError here"
    ))
}

/// The queue's lane of a retry delayed by a constant ([`Queue::push`]): 0 for immediate
/// retries, 1 + k for backoff step k; `None` for a delay that varies.
fn retry_lane(mode: Retry, attempt: u32) -> Option<usize> {
    match mode {
        Retry::Immediate => Some(0),
        Retry::Backoff if attempt < 64 => Some(1 + attempt as usize),
        _ => None,
    }
}

const NO_KEY: u32 = u32::MAX;
const NO_SLOT: u32 = u32::MAX;

/// Numbers for `(client, endpoint)` pairs, in the order first seen.
#[derive(Default)]
pub(super) struct Pairs(HashMap<(u32, u32), u32, FixedState>);

impl Pairs {
    /// The number of a pair, and whether it is new.
    #[inline]
    pub(super) fn number(&mut self, client: u32, endpoint: u32) -> (u32, bool) {
        let next = self.0.len() as u32;
        match self.0.entry((client, endpoint)) {
            hashbrown::hash_map::Entry::Occupied(e) => (*e.get(), false),
            hashbrown::hash_map::Entry::Vacant(e) => (*e.insert(next), true),
        }
    }

    /// The number of a pair already numbered.
    fn get(&self, client: u32, endpoint: u32) -> Option<u32> {
        self.0.get(&(client, endpoint)).copied()
    }

    /// How many pairs are numbered.
    pub(super) fn len(&self) -> u32 {
        self.0.len() as u32
    }
}

/// The replay: feed it requests in order ([`Engine::push`]), then [`Engine::finish`].
pub struct Engine<'c, 'o> {
    cfg: &'c Config,
    observer: Option<&'o mut dyn Observer>,
    clients: Names,
    endpoints: Names,
    /// Per client number: index into `out.clients`, or `NO_SLOT`.
    slot: Vec<u32>,
    /// Per client slot: retry mode and retries allowed (the last config entry of a name).
    retry: Vec<(Retry, i128)>,
    /// `(client, endpoint)` → pair number; `pair_keys[pair * policies + j]` is the key of
    /// policy `j` for that pair, or `NO_KEY`.
    pairs: Pairs,
    /// Per pair: its client and endpoint numbers.
    pair_names: Vec<(u32, u32)>,
    pair_keys: Vec<u32>,
    /// The server policies that apply to each pair, as `(policy, key)`: pair `p`'s are
    /// `server_keys[server_from[p] as usize..server_from[p + 1] as usize]`.
    server_keys: Vec<(u32, u32)>,
    server_from: Vec<u32>,
    /// Per pair: attempts the server policies checked (each applying policy's `checks`).
    pair_checks: Vec<u64>,
    key_names: Vec<Names>,
    states: Vec<State>,
    /// Admission times in the last window, per policy and key.
    windows: Vec<Vec<VecDeque<f64>>>,
    /// Per policy: the window they are counted over, and whether in nanoseconds (the core's
    /// limiters) rather than seconds.
    window_of: Vec<(f64, bool)>,
    /// Per policy, per client slot: rejected at least once.
    rejected_clients: Vec<Vec<bool>>,
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
}

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
                Algorithm::TokenBucket { rate, burst } => State::Reference(ReferenceLimiter::token_bucket(rate, burst)),
                Algorithm::FixedWindow { limit } => State::Reference(ReferenceLimiter::fixed_window(limit, p.window_s)),
                Algorithm::SlidingLog { limit } => State::Reference(ReferenceLimiter::sliding_log(limit, p.window_s)),
                Algorithm::SlidingCounter { limit } => {
                    State::Reference(ReferenceLimiter::sliding_counter(limit, p.window_s))
                }
                Algorithm::Gcra { burst, interval, .. } => State::Core {
                    prototype: Blocking::new(
                        AnyLimiter::Gcra(crate::core::limit::Gcra::with_interval(burst, interval)),
                        crate::core::time::Span::ZERO,
                    ),
                    keys: Vec::new(),
                },
                Algorithm::CountThenBlock { counting, mitigation_timeout } => {
                    State::Core { prototype: Blocking::new(counting.limiter(), mitigation_timeout), keys: Vec::new() }
                }
                Algorithm::SmartFlow { rate, burst } => State::Pacer {
                    prototype: SmartFlowBucket::new(rate, burst).expect("rate and burst checked with the config"),
                    keys: Vec::new(),
                },
            })
            .collect();
        let n = cfg.policies.len();
        let pacers = (0..n).filter(|&j| cfg.policies[j].algorithm.is_pacer()).collect();
        Engine {
            cfg,
            observer,
            clients,
            endpoints,
            slot: Vec::new(),
            retry: Vec::new(),
            pairs: Pairs::default(),
            pair_names: Vec::new(),
            pair_keys: Vec::new(),
            server_keys: Vec::new(),
            server_from: vec![0],
            pair_checks: Vec::new(),
            key_names: vec![Names::default(); n],
            states,
            windows: vec![Vec::new(); n],
            window_of: cfg
                .policies
                .iter()
                .map(|p| {
                    let core = p.algorithm.is_core();
                    (if core { nanos(p.window_s) as f64 } else { p.window_s }, core)
                })
                .collect(),
            rejected_clients: vec![Vec::new(); n],
            pacers,
            rejecting: Vec::new(),
            name_of: {
                let mut names = Names::default();
                cfg.policies.iter().map(|p| names.intern(&p.name)).collect()
            },
            queue: Queue::default(),
            last: None,
            admit_order: 0,
            current: None,
            out: Outcome { policies: vec![PolicyStats::default(); n], ..Outcome::default() },
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
        for (p, &checked) in self.pair_checks.iter().enumerate() {
            let (from, to) = (self.server_from[p] as usize, self.server_from[p + 1] as usize);
            for &(j, _) in &self.server_keys[from..to] {
                self.out.policies[j as usize].checks += checked;
            }
        }
        for (_, s) in &mut self.out.clients {
            s.blocked_by = s
                .blocked
                .iter()
                .map(|&(name, n)| {
                    let j = self.name_of.iter().position(|&x| x == name).expect("a policy's name");
                    (self.cfg.policies[j].name.clone(), n)
                })
                .collect();
        }
        for (j, ps) in self.out.policies.iter_mut().enumerate() {
            ps.by_client = self.rejected_clients[j]
                .iter()
                .enumerate()
                .filter(|(_, &r)| r)
                .map(|(slot, _)| self.out.clients[slot].0.clone())
                .collect();
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
            for r in &mut self.rejected_clients {
                r.push(false);
            }
            // the last config entry of its name wins
            let mode = self.cfg.clients.iter().rev().find(|x| x.name == name);
            self.retry.push(mode.map_or((Retry::None, 3), |x| (x.retry, x.max_retries)));
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
        for (j, policy) in self.cfg.policies.iter().enumerate() {
            let key = match policy.key_for(cname, ename) {
                None => NO_KEY,
                Some(key) => {
                    let names = &mut self.key_names[j];
                    let before = names.len();
                    let id = names.intern(&key);
                    if names.len() > before {
                        self.states[j].add_key();
                        self.windows[j].push(VecDeque::new());
                    }
                    id
                }
            };
            self.pair_keys.push(key);
            if key != NO_KEY && !policy.algorithm.is_pacer() {
                self.server_keys.push((j as u32, key));
            }
        }
        self.server_from.push(self.server_keys.len() as u32);
        self.pair_checks.push(0);
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
        let wait = self.check_policies(a)?;
        if self.rejecting.is_empty() {
            self.admit(a);
            return Ok(());
        }
        self.record_refusal(a, wait);
        self.schedule_retry(a, wait)
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
    fn check_policies(&mut self, a: Attempt) -> Result<f64, SimError> {
        self.rejecting.clear();
        let mut wait = 0.0f64;
        let p = a.pair as usize;
        self.pair_checks[p] += 1;
        let (from, to) = (self.server_from[p] as usize, self.server_from[p + 1] as usize);
        for &(j, key) in &self.server_keys[from..to] {
            // the reference's limiters, which take any attempt, in line: the replay's hot path
            let (allowed, w) = match &mut self.states[j as usize] {
                State::Reference(lim) => {
                    let c = lim.check(key as usize, a.t, a.cost);
                    (c.allowed, c.wait)
                }
                State::Core { keys, .. } => {
                    let checked = check_core(&mut keys[key as usize], a.t, a.cost);
                    checked.map_err(|msg| self.cannot_take(j as usize, a, &msg))?
                }
                State::Pacer { .. } => unreachable!("pacers are not servers"),
            };
            if !allowed {
                self.rejecting.push((j, key));
                if w > wait {
                    wait = w;
                }
            }
        }
        Ok(wait)
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
        let p = a.pair as usize;
        let (from, to) = (self.server_from[p] as usize, self.server_from[p + 1] as usize);
        for &(j, key) in &self.server_keys[from..to] {
            self.states[j as usize].charge(key as usize, a.t, a.cost);
        }
        self.count_in_windows(a);
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
    /// A key's list may still hold times that left its window: they are dropped only when
    /// the list is as long as the most seen so far (before that the count in the window, at
    /// most the list's length, cannot be a new most), or when it is full (so it grows only
    /// when its own window needs the room: at most twice that, whatever the number of
    /// keys). The old times are dropped many at a time, in sequential memory, rather than an
    /// old time read for every admission.
    fn count_in_windows(&mut self, a: Attempt) {
        let n = self.cfg.policies.len();
        let keys = &self.pair_keys[a.pair as usize * n..][..n];
        let per_policy = self.windows.iter_mut().zip(&self.window_of).zip(self.out.policies.iter_mut());
        for (&key, ((windows, &(w, core)), ps)) in keys.iter().zip(per_policy) {
            if key == NO_KEY {
                continue;
            }
            let win = &mut windows[key as usize];
            // The core's limiters decide on whole nanoseconds: measure them the same way.
            let t = if core { nanos(a.t) as f64 } else { a.t };
            if win.len() as u64 >= ps.observed_max || win.len() == win.capacity() {
                while win.front().is_some_and(|&first| first <= t - w) {
                    win.pop_front();
                }
            }
            win.push_back(t);
            ps.observed_max = ps.observed_max.max(win.len() as u64);
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
    fn record_refusal(&mut self, a: Attempt, wait: f64) {
        let ci = a.slot as usize;
        for &(j, key) in &self.rejecting {
            if self.states[j as usize].refused(key as usize, a.t, a.cost) {
                let ps = &mut self.out.policies[j as usize];
                ps.blocks += 1;
                let name = &self.out.clients[ci].0;
                match ps.blocked_clients.iter_mut().find(|(n, _)| n == name) {
                    Some((_, k)) => *k += 1,
                    None => ps.blocked_clients.push((name.clone(), 1)),
                }
            }
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
        match s.blocked.iter_mut().find(|(name, _)| *name == first_name) {
            Some((_, n)) => *n += 1,
            None => s.blocked.push((first_name, 1)),
        }
        for &(j, _) in &self.rejecting {
            self.out.policies[j as usize].rejects += 1;
            self.rejected_clients[j as usize][ci] = true;
        }
        if self.out.sample.is_none() {
            self.sample(a, first, wait);
        }
        self.observe(a, false);
    }

    /// Keeps the first refusal, by policy `first` with `wait`, as the sample 429.
    #[cold]
    fn sample(&mut self, a: Attempt, first: usize, wait: f64) {
        let first = &self.cfg.policies[first];
        let (client, endpoint) = self.pair_names[a.pair as usize];
        self.out.sample = Some(Sample {
            t: round(a.t, 3),
            client: self.clients.name(client).into(),
            endpoint: self.endpoints.name(endpoint).into(),
            policy: first.name.clone(),
            retry_after: (wait.ceil() as i128).max(1),
            quota: first.quota.clone(),
            window_s: first.window_s,
        });
    }

    /// Queues the retry of a refused attempt as the client's retry mode says ([`retry_delay`]),
    /// or counts its logical request as failed when the client gives up.
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

    /// Hands a decided attempt to the observer, if any.
    #[inline]
    fn observe(&mut self, a: Attempt, admitted: bool) {
        if self.observer.is_some() {
            self.tell_observer(a, admitted);
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
    traffic.clients = clients;
    traffic.endpoints = endpoints;
    traffic.in_order(|r| engine.push_in_order(r))?;
    engine.finish()
}
