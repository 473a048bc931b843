//! Traffic: requests in the reference's order, generated from a configuration's clients
//! (steady, Poisson from the seeded generator, bursts) or read from a trace, and merged.

use super::config::{Config, Pattern};
use super::names::Names;
use super::queue::time_key;
use super::random::{PyRandom, Seed};
use super::SimError;
use core::cmp::Ordering;
use core::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// The replay's order of requests: time, then client and endpoint name (as ranks) in one
/// number, then cost. (Three words rather than a `u128` and a word: a `u128` just written is
/// compared as a vector, which waits for the two halves' stores.)
pub(super) type MergeKey = (u64, u64, u64);

/// The replay's order of requests, as a [`MergeKey`]: client and endpoint names compared
/// through their ranks in sorted order.
pub(super) struct Order {
    pub(super) clients: Vec<u32>,
    pub(super) endpoints: Vec<u32>,
}

impl Order {
    pub(super) fn new(clients: &Names, endpoints: &Names) -> Self {
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

    pub(super) fn key(&self, r: &Request) -> MergeKey {
        let names = u64::from(self.clients[r.client as usize]) << 32 | u64::from(self.endpoints[r.endpoint as usize]);
        (time_key(r.t), names, time_key(r.cost))
    }
}

/// Merges runs that are each in order: `heads` holds the key of each run's first item and
/// the run's number; `take(j, key)` hands on run `j`'s current item, sets `key` to its next
/// one's and says whether there is one (false at its end). Items of equal keys are
/// interchangeable. (The key is written in place rather than returned: a value returned
/// through memory and read back at once waits for its stores.)
#[inline]
pub(super) fn merge<E>(
    mut heads: Vec<(MergeKey, usize)>,
    mut take: impl FnMut(usize, &mut MergeKey) -> Result<bool, E>,
) -> Result<(), E> {
    if heads.len() > 16 {
        let mut heap: BinaryHeap<Reverse<(MergeKey, usize)>> = heads.into_iter().map(Reverse).collect();
        while let Some(Reverse((mut key, j))) = heap.pop() {
            if take(j, &mut key)? {
                heap.push(Reverse((key, j)));
            }
        }
        return Ok(());
    }
    // a few runs: kept in order, the smallest head last; the next key of the run taken from
    // moves towards the front to its place (most often a step or two)
    for n in 1..heads.len() {
        sift_back(&mut heads[..=n]);
    }
    while let Some((key, j)) = heads.last_mut() {
        if take(*j, key)? {
            sift_back(&mut heads);
        } else {
            heads.pop();
        }
    }
    Ok(())
}

/// Moves the last of `heads` towards the front past every head of a smaller key (the rest
/// being in order, smallest last): an insertion sort's step.
#[inline(always)]
fn sift_back<K: Ord>(heads: &mut [(K, usize)]) {
    let mut i = heads.len() - 1;
    while i > 0 && heads[i].0 > heads[i - 1].0 {
        heads.swap(i, i - 1);
        i -= 1;
    }
}

/// [`Engine::sort_instant`](super::engine::Engine::sort_instant) with the names numbered in `clients` and `endpoints` (a stable
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
    pub(super) fn in_order<E>(&mut self, mut f: impl FnMut(Request) -> Result<(), E>) -> Result<(), E> {
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
        merge(heads, |j, next| {
            let (i, end) = &mut runs[j];
            f(reqs[*i])?;
            *i += 1;
            if *i < *end {
                *next = key(&reqs[*i]);
            }
            Ok(*i < *end)
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
pub(super) fn seeded(cfg: &Config) -> Result<PyRandom, SimError> {
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
pub(super) enum Source {
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
pub(super) struct Overlapping {
    /// The bursts under way: `(time's total order, burst number, request in it, burst start)`.
    pub(super) heap: BinaryHeap<Reverse<(i64, u64, i128, u64)>>,
    /// The next burst's start and number.
    pub(super) t: f64,
    pub(super) b: u64,
    pub(super) burst: i128,
    pub(super) every_s: f64,
    pub(super) t1: f64,
}

/// `t`'s place in `f64::total_cmp`'s order, as an integer.
pub(super) fn total_key(t: f64) -> i64 {
    let bits = t.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

impl Overlapping {
    pub(super) fn next(&mut self) -> Option<f64> {
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
    pub(super) fn next(&mut self) -> Option<f64> {
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::merge;
    use proptest::prelude::*;

    proptest! {
        /// Merging runs that are each in order gives every item once, in order, with few runs
        /// (kept in order, the run taken from moved to its place) and many (a heap).
        #[test]
        fn merged_runs_come_out_in_order_each_item_once(
            runs in proptest::collection::vec(proptest::collection::vec((0u64..6, 0u64..3, 0u64..2), 0..12), 0..24),
        ) {
            let runs: Vec<Vec<(u64, u64, u64)>> = runs
                .into_iter()
                .map(|mut run| {
                    run.sort_unstable();
                    run
                })
                .collect();
            let mut next = vec![0usize; runs.len()];
            let heads = (runs.iter().enumerate())
                .filter(|(_, run)| !run.is_empty())
                .map(|(j, run)| (run[0], j))
                .collect();
            let mut out = Vec::new();
            merge(heads, |j, key| {
                out.push((runs[j][next[j]], j));
                next[j] += 1;
                let more = next[j] < runs[j].len();
                if more {
                    *key = runs[j][next[j]];
                }
                Ok::<bool, ()>(more)
            })
            .unwrap();
            prop_assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "in order: {:?}", out);
            let mut got: Vec<_> = out.iter().map(|&(item, j)| (j, item)).collect();
            got.sort_unstable();
            let mut want: Vec<_> = (runs.iter().enumerate()).flat_map(|(j, run)| run.iter().map(move |&item| (j, item))).collect();
            want.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }
}
