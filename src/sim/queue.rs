//! The queue of pending retries, in time order.

use std::collections::VecDeque;

/// An attempt to decide.
#[derive(Clone, Copy)]
pub(super) struct Attempt {
    pub(super) t: f64,
    /// The client's index in the outcome.
    pub(super) slot: u32,
    /// Its `(client, endpoint)` pair's number (client and endpoint are in `pair_names`).
    pub(super) pair: u32,
    pub(super) cost: f64,
    pub(super) attempt: u32,
    /// Through the client's pacers already (counted when it first came up).
    pub(super) paced: bool,
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
/// A radix heap on the time: the replay never queues an attempt earlier than the last one it
/// took out, so each queued attempt sits in the bucket of the highest bit in which its time
/// differs from that last time (bucket 0: the same time), and taking the earliest out only
/// redistributes one bucket. Each bucket keeps the order queued (pushes are appends, and a
/// bucket is spread only over empty ones), so bucket 0, all of one instant, is taken from
/// its front: the many retries a window's end sends at one instant are spread once, not
/// once per bit of their sequence numbers. Every attempt moves down a few buckets in its
/// life, in sequential memory, instead of climbing a binary heap of random accesses.
pub(super) struct Queue {
    /// Attempts queued a fixed delay after they were decided (immediate retries, backoff
    /// retries of one step) come out in the order they went in: one FIFO lane per delay,
    /// no sorting at all, each attempt read in sequence where it was queued.
    pub(super) lanes: Vec<VecDeque<(u128, Attempt)>>,
    /// The key at the front of each lane (`u128::MAX` when it is empty), side by side: the
    /// next head is found without visiting every lane (one for each of the 64 lanes there
    /// may be, so that a lane's number indexes it unchecked).
    pub(super) fronts: [u128; 64],
    /// Which lanes hold something (bit l: lane l; there are at most 64, see the engine's
    /// `retry_lane`): the next head is found among those only.
    pub(super) filled: u64,
    /// `(key, index into slab)` by the highest bit in which the key's time differs from
    /// `last`'s, each in the order queued.
    pub(super) buckets: Vec<Vec<(u128, u32)>>,
    /// The smallest key in each bucket (valid while it is not empty).
    pub(super) mins: Vec<u128>,
    /// Which buckets hold something (bit b: bucket b).
    pub(super) nonempty: u64,
    /// Bucket 0's entries before this one were taken out.
    pub(super) zero_from: usize,
    /// The time key of the last attempt taken out; every time queued is at least this.
    pub(super) last: u64,
    /// The bucketed attempts, where the buckets' `(key, index)` entries point.
    pub(super) slab: Vec<Attempt>,
    pub(super) free: Vec<u32>,
    pub(super) seq: u64,
    /// The smallest key queued (`u128::MAX` when nothing is) and where it is: a lane, or
    /// the buckets (`None`). Asking for an attempt due before the next request is then one
    /// comparison when none is.
    pub(super) head: (u128, Option<usize>),
    /// The smallest key queued in any place other than the head's (`u128::MAX` when there
    /// is none): when the head's place has a smaller key next, it is the next head, found
    /// without visiting the other places.
    pub(super) second: u128,
}

/// Buckets: one for the same time as the last taken out, one per bit of a time key below
/// the highest, and one for keys that differ from it in either of the two highest bits (only
/// a time of the other sign differs in the highest: rare enough to share a bucket, which
/// still holds keys above every lower bucket's).
const BUCKETS: usize = 64;

impl Default for Queue {
    fn default() -> Self {
        Queue {
            lanes: Vec::new(),
            fronts: [u128::MAX; 64],
            filled: 0,
            buckets: vec![Vec::new(); BUCKETS],
            mins: vec![0; BUCKETS],
            nonempty: 0,
            zero_from: 0,
            last: 0,
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            head: (u128::MAX, None),
            second: u128::MAX,
        }
    }
}

impl Queue {
    pub(super) fn bucket(&self, key: u128) -> usize {
        (64 - (((key >> 64) as u64) ^ self.last).leading_zeros() as usize).min(BUCKETS - 1)
    }

    #[inline(always)]
    pub(super) fn put(&mut self, key: u128, i: u32) {
        let b = self.bucket(key);
        let bit = 1u64 << b;
        if self.nonempty & bit == 0 {
            self.nonempty |= bit;
            self.mins[b] = key;
        } else if key < self.mins[b] {
            self.mins[b] = key;
        }
        self.buckets[b].push((key, i));
    }

    pub(super) fn lowest(&self) -> Option<usize> {
        (self.nonempty != 0).then(|| self.nonempty.trailing_zeros() as usize)
    }

    /// Queues `a`; `lane` for an attempt delayed by the same amount as every other attempt
    /// of that lane.
    #[inline(always)]
    pub(super) fn push(&mut self, a: Attempt, lane: Option<usize>) {
        self.seq += 1;
        let key = u128::from(time_key(a.t)) << 64 | u128::from(self.seq);
        match lane {
            Some(lane) => {
                if self.lanes.len() <= lane {
                    self.add_lanes(lane);
                }
                let queued = &mut self.lanes[lane];
                debug_assert!(queued.back().is_none_or(|&(k, _)| k < key), "a lane stays in order");
                if queued.is_empty() {
                    self.fronts[lane] = key;
                    self.filled |= 1 << lane;
                }
                queued.push_back((key, a));
            }
            None => {
                debug_assert!((key >> 64) as u64 >= self.last, "the replay never queues into the past");
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
        if lane == self.head.1 {
            // (a lane's keys only grow: a smaller one can only be the buckets')
            if key < self.head.0 {
                self.head.0 = key;
            }
        } else if key < self.head.0 {
            self.second = self.head.0;
            self.head = (key, lane);
        } else if key < self.second {
            self.second = key;
        }
    }

    /// Makes lanes up to number `lane`.
    #[cold]
    pub(super) fn add_lanes(&mut self, lane: usize) {
        assert!(lane < 64, "at most 64 lanes");
        self.lanes.resize_with(lane + 1, VecDeque::new);
    }

    /// Finds the smallest key queued again (after it was taken out): the buckets' smallest,
    /// or the front of a lane that holds something.
    #[inline(always)]
    pub(super) fn find_head(&mut self) {
        let mut head = (self.lowest().map_or(u128::MAX, |b| self.mins[b]), None);
        let mut second = u128::MAX;
        let mut filled = self.filled;
        while filled != 0 {
            let l = filled.trailing_zeros() as usize;
            filled &= filled - 1;
            let key = self.fronts[l & 63];
            if key < head.0 {
                second = head.0;
                head = (key, Some(l));
            } else if key < second {
                second = key;
            }
        }
        self.head = head;
        self.second = second;
    }

    /// The earliest attempt, if it is due strictly before `t` (any, for `None`).
    #[inline]
    pub(super) fn pop_before(&mut self, t: Option<f64>) -> Option<Attempt> {
        let min = self.head.0;
        if min == u128::MAX || t.is_some_and(|t| (min >> 64) as u64 >= time_key(t)) {
            return None;
        }
        Some(self.pop())
    }

    /// Takes the earliest attempt out (something is queued).
    #[inline(never)]
    pub(super) fn pop(&mut self) -> Attempt {
        let (min, from_lane) = self.head;
        // the smallest key left where the head was taken from
        let (a, next) = match from_lane {
            Some(l) => {
                let lane = &mut self.lanes[l];
                let a = lane.pop_front().expect("the head is at its front").1;
                let next = match lane.front() {
                    Some(&(key, _)) => key,
                    None => {
                        self.filled &= !(1 << l);
                        u128::MAX
                    }
                };
                self.fronts[l & 63] = next;
                (a, next)
            }
            None => {
                let i = self.pop_bucket(min);
                self.free.push(i);
                (self.slab[i as usize], self.lowest().map_or(u128::MAX, |b| self.mins[b]))
            }
        };
        if next < self.second {
            self.head.0 = next;
        } else {
            self.find_head();
        }
        a
    }

    /// Takes the smallest key, `min`, out of the buckets; its attempt's index. When bucket 0
    /// is empty, the lowest bucket is first spread over the buckets below it, from the time
    /// of `min` (its attempts of that time, `min` first, landing in bucket 0).
    pub(super) fn pop_bucket(&mut self, min: u128) -> u32 {
        let b = self.lowest().expect("the minimum is in a bucket");
        if b != 0 {
            self.nonempty &= !(1u64 << b);
            let mut items = core::mem::take(&mut self.buckets[b]);
            self.last = (min >> 64) as u64;
            for &(key, i) in &items {
                self.put(key, i);
            }
            // (the top bucket's keys may land in it again, in a list of their own)
            if self.buckets[b].is_empty() {
                items.clear();
                self.buckets[b] = items;
            }
        }
        let zero = &mut self.buckets[0];
        let (key, i) = zero[self.zero_from];
        debug_assert_eq!(key, min, "the minimum is first in bucket 0");
        self.zero_from += 1;
        if self.zero_from == zero.len() {
            zero.clear();
            self.zero_from = 0;
            self.nonempty &= !1;
        } else {
            self.mins[0] = zero[self.zero_from].0;
        }
        i
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;

    /// One step: queue an attempt `delay` after the last time taken out (in `lane`, whose
    /// delay is fixed), or take out what is due before the last time plus `delay` (any,
    /// for `None`).
    #[derive(Clone, Debug)]
    enum Op {
        Push { delay: f64, lane: Option<usize> },
        PopBefore(Option<f64>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let delay = prop_oneof![Just(0.0), Just(0.05), Just(0.1), Just(1.0), Just(60.0), 0.0..100.0f64];
        prop_oneof![
            3 => (delay.clone(), proptest::option::of(0..3usize))
                .prop_map(|(delay, lane)| Op::Push { delay: lane.map_or(delay, |l| [0.1, 2.0, 4.0][l]), lane }),
            2 => proptest::option::of(delay).prop_map(Op::PopBefore),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The queue gives what a binary heap of `(time, order queued)` gives.
        #[test]
        fn takes_out_what_a_heap_of_time_and_order_queued_does(
            start in prop_oneof![Just(0.0), -5.0..5.0f64, 0.0..1e6f64],
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            let mut queue = Queue::default();
            let mut heap = BinaryHeap::new();
            let (mut now, mut n) = (start, 0u32);
            let attempt = |t: f64, n: u32| Attempt { t, slot: n, pair: 0, cost: 1.0, attempt: 0, paced: false };
            for op in ops.iter().cloned().chain([Op::PopBefore(None)]) {
                match op {
                    Op::Push { delay, lane } => {
                        n += 1;
                        let t = now + delay;
                        queue.push(attempt(t, n), lane);
                        heap.push(core::cmp::Reverse((time_key(t), n)));
                    }
                    Op::PopBefore(until) => loop {
                        let until = until.map(|d| now + d);
                        let got = queue.pop_before(until);
                        let want = heap.peek().filter(|r| until.is_none_or(|u| r.0 .0 < time_key(u))).map(|r| r.0 .1);
                        prop_assert_eq!(got.map(|a| a.slot), want);
                        let Some(a) = got else { break };
                        heap.pop();
                        now = a.t;
                        if until.is_some() {
                            break;
                        }
                    },
                }
            }
            prop_assert!(heap.is_empty());
        }
    }
}
