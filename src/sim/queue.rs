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
/// A radix heap: the replay never queues an attempt earlier than the last one it took out,
/// so each queued key `(t, seq)` sits in the bucket of the highest bit in which it differs
/// from that last key, and taking the earliest out only redistributes one bucket. Pushes
/// are appends; every attempt moves down a few buckets in its life, in sequential memory,
/// instead of climbing a binary heap of random accesses.
pub(super) struct Queue {
    /// Attempts queued a fixed delay after they were decided (immediate retries, backoff
    /// retries of one step) come out in the order they went in: one FIFO lane per delay,
    /// no sorting at all, each attempt read in sequence where it was queued.
    pub(super) lanes: Vec<VecDeque<(u128, Attempt)>>,
    /// The key at the front of each lane (`u128::MAX` when it is empty), side by side: the
    /// next head is found without visiting every lane.
    pub(super) fronts: Vec<u128>,
    pub(super) buckets: Vec<Vec<(u128, u32)>>,
    /// The smallest key in each bucket (valid while it is not empty).
    pub(super) mins: Vec<u128>,
    /// Which buckets hold something.
    pub(super) nonempty: [u64; 3],
    /// The last key taken out; every key queued is at least this.
    pub(super) last: u128,
    /// The bucketed attempts, where the buckets' `(key, index)` entries point.
    pub(super) slab: Vec<Attempt>,
    pub(super) free: Vec<u32>,
    pub(super) seq: u64,
    /// The smallest key queued (`u128::MAX` when nothing is) and where it is: a lane, or
    /// the buckets (`None`). Asking for an attempt due before the next request is then one
    /// comparison when none is.
    pub(super) head: (u128, Option<usize>),
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
    pub(super) fn bucket(&self, key: u128) -> usize {
        128 - (key ^ self.last).leading_zeros() as usize
    }

    pub(super) fn put(&mut self, key: u128, i: u32) {
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

    pub(super) fn lowest(&self) -> Option<usize> {
        self.nonempty.iter().enumerate().find(|(_, &w)| w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Queues `a`; `lane` for an attempt delayed by the same amount as every other attempt
    /// of that lane.
    pub(super) fn push(&mut self, a: Attempt, lane: Option<usize>) {
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
    pub(super) fn add_lanes(&mut self, lane: usize) {
        self.lanes.resize_with(lane + 1, VecDeque::new);
        self.fronts.resize(lane + 1, u128::MAX);
    }

    /// Finds the smallest key queued again (after it was taken out).
    pub(super) fn find_head(&mut self) {
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
    pub(super) fn pop_bucket(&mut self, min: u128) -> u32 {
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
