//! One window's load over time, as an ordered map from instant to the change of load there,
//! with every subtree's sum and its highest and lowest running total: a treap in an arena.
//! [`RollingWindow`](super::RollingWindow) is built on it.
//!
//! A spend of `w` at `s` in a window of length `L` is `+w` at `s` and `−w` at `s + L`, so
//! the load at `x` (the spends in `(x − L, x]`) is the sum of the changes at instants `≤ x`.
//! Every operation is O(log n) expected: adding a change, the load at an instant, and the
//! two searches placement needs — the first instant after `t` where the load rises above a
//! threshold, and the first where it falls back to it.

use alloc::vec::Vec;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    delta: i64,
    priority: u32,
    left: u32,
    right: u32,
    /// Sum of the subtree's changes.
    sum: i64,
    /// Highest and lowest running total within the subtree (over non-empty prefixes).
    high: i64,
    low: i64,
}

#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    /// A xorshift state for priorities: deterministic, so two runs build the same tree.
    seed: u32,
    /// No change after this instant raised the load (it may be later than the last rise
    /// still present, never earlier): from here on the load only falls.
    last_rise: u64,
}

impl Timeline {
    pub(crate) fn new() -> Self {
        Timeline { nodes: Vec::new(), free: Vec::new(), root: NIL, seed: 0x9E37_79B9, last_rise: 0 }
    }

    /// How many instants carry a change.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Forget every change (the arena keeps its memory).
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.root = NIL;
        self.seed = Timeline::new().seed;
        self.last_rise = 0;
    }

    /// The earliest instant with a change, and the change there.
    fn first(&self) -> Option<(u64, i64)> {
        let mut i = self.root;
        let mut found = None;
        while i != NIL {
            let n = self.node(i);
            found = Some((n.key, n.delta));
            i = n.left;
        }
        found
    }

    /// The latest instant with a change: from there on the load is the sum of every change.
    pub(crate) fn last_key(&self) -> Option<u64> {
        let mut i = self.root;
        let mut found = None;
        while i != NIL {
            let n = self.node(i);
            found = Some(n.key);
            i = n.right;
        }
        found
    }

    /// Replace every change at an instant `≤ cut` by one change at `cut` of their sum: the
    /// load at every instant `≥ cut` stays what it was (earlier instants are no longer
    /// answered). O(log n) per change folded.
    pub(crate) fn fold_through(&mut self, cut: u64) {
        let mut sum = 0i64;
        while let Some((key, delta)) = self.first().filter(|(key, _)| *key <= cut) {
            self.root = self.add_in(self.root, key, -delta);
            sum += delta;
        }
        self.add(cut, sum);
    }

    fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn sum(&self, i: u32) -> i64 {
        if i == NIL {
            0
        } else {
            self.node(i).sum
        }
    }

    fn update(&mut self, i: u32) {
        let n = *self.node(i);
        let (mut sum, mut high, mut low) = (0i64, i64::MIN, i64::MAX);
        if n.left != NIL {
            let l = self.node(n.left);
            (sum, high, low) = (l.sum, l.high, l.low);
        }
        sum += n.delta;
        high = high.max(sum);
        low = low.min(sum);
        if n.right != NIL {
            let r = self.node(n.right);
            high = high.max(sum + r.high);
            low = low.min(sum + r.low);
            sum += r.sum;
        }
        let n = &mut self.nodes[i as usize];
        (n.sum, n.high, n.low) = (sum, high, low);
    }

    /// Joins two trees whose keys are ordered (all of `a` before all of `b`).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.node(a).priority > self.node(b).priority {
            let right = self.merge(self.node(a).right, b);
            self.nodes[a as usize].right = right;
            self.update(a);
            a
        } else {
            let left = self.merge(a, self.node(b).left);
            self.nodes[b as usize].left = left;
            self.update(b);
            b
        }
    }

    fn alloc(&mut self, key: u64, delta: i64) -> u32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        let node = Node { key, delta, priority: self.seed, left: NIL, right: NIL, sum: delta, high: delta, low: delta };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Adds `delta` to the change at `key` (an instant whose change becomes 0 is dropped).
    pub(crate) fn add(&mut self, key: u64, delta: i64) {
        if delta > 0 {
            self.last_rise = self.last_rise.max(key);
        }
        if delta != 0 {
            self.root = self.add_in(self.root, key, delta);
        }
    }

    /// [`Timeline::add`] within subtree `t`: one descent, a new leaf rotated up to its
    /// priority, or an emptied node replaced by its children; returns the subtree's root.
    fn add_in(&mut self, t: u32, key: u64, delta: i64) -> u32 {
        if t == NIL {
            return self.alloc(key, delta);
        }
        let n = *self.node(t);
        if key == n.key {
            let sum = n.delta + delta;
            if sum == 0 {
                self.free.push(t);
                return self.merge(n.left, n.right);
            }
            self.nodes[t as usize].delta = sum;
        } else if key < n.key {
            let left = self.add_in(n.left, key, delta);
            self.nodes[t as usize].left = left;
            if left != NIL && self.node(left).priority > n.priority {
                // Rotate right: the new child rises above `t`.
                self.nodes[t as usize].left = self.node(left).right;
                self.update(t);
                self.nodes[left as usize].right = t;
                self.update(left);
                return left;
            }
        } else {
            let right = self.add_in(n.right, key, delta);
            self.nodes[t as usize].right = right;
            if right != NIL && self.node(right).priority > n.priority {
                self.nodes[t as usize].right = self.node(right).left;
                self.update(t);
                self.nodes[right as usize].left = t;
                self.update(right);
                return right;
            }
        }
        self.update(t);
        t
    }

    /// An instant after which the load never rises.
    pub(crate) fn last_rise(&self) -> u64 {
        self.last_rise
    }

    /// The load at `t`: the sum of the changes at instants `≤ t`.
    pub(crate) fn load_at(&self, t: u64) -> i64 {
        let (mut i, mut acc) = (self.root, 0i64);
        while i != NIL {
            let n = self.node(i);
            if n.key <= t {
                acc += self.sum(n.left) + n.delta;
                i = n.right;
            } else {
                i = n.left;
            }
        }
        acc
    }

    /// The first instant `> t` at which the load is above `threshold` (when `above`) or at
    /// most `threshold` (when not).
    pub(crate) fn first_after(&self, t: u64, threshold: i64, above: bool) -> Option<u64> {
        self.after(self.root, t, 0, threshold, above)
    }

    fn hit(&self, value: i64, threshold: i64, above: bool) -> bool {
        if above {
            value > threshold
        } else {
            value <= threshold
        }
    }

    /// Whether some prefix of subtree `i` (entered with running total `acc`) hits.
    fn may_hit(&self, i: u32, acc: i64, threshold: i64, above: bool) -> bool {
        let n = self.node(i);
        if above {
            acc + n.high > threshold
        } else {
            acc + n.low <= threshold
        }
    }

    fn after(&self, i: u32, t: u64, acc: i64, threshold: i64, above: bool) -> Option<u64> {
        if i == NIL {
            return None;
        }
        let n = *self.node(i);
        let through = acc + self.sum(n.left) + n.delta;
        if n.key <= t {
            return self.after(n.right, t, through, threshold, above);
        }
        if let Some(k) = self.after(n.left, t, acc, threshold, above) {
            return Some(k);
        }
        if self.hit(through, threshold, above) {
            return Some(n.key);
        }
        self.first_in(n.right, through, threshold, above)
    }

    /// The first key of subtree `i` whose running total hits (all its keys qualify).
    fn first_in(&self, mut i: u32, mut acc: i64, threshold: i64, above: bool) -> Option<u64> {
        if i == NIL || !self.may_hit(i, acc, threshold, above) {
            return None;
        }
        loop {
            let n = *self.node(i);
            if n.left != NIL && self.may_hit(n.left, acc, threshold, above) {
                i = n.left;
                continue;
            }
            acc += self.sum(n.left) + n.delta;
            if self.hit(acc, threshold, above) {
                return Some(n.key);
            }
            // The subtree hits somewhere, and not in the left part nor here: on the right.
            i = n.right;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    /// The same questions answered by scanning a plain ordered map.
    fn naive_first(map: &BTreeMap<u64, i64>, t: u64, threshold: i64, above: bool) -> Option<u64> {
        let mut acc = 0;
        for (&k, &d) in map {
            acc += d;
            if k > t && (if above { acc > threshold } else { acc <= threshold }) {
                return Some(k);
            }
        }
        None
    }

    #[test]
    fn agrees_with_a_scan_of_an_ordered_map() {
        let mut tl = Timeline::new();
        let mut map = BTreeMap::new();
        let mut x: u64 = 12345;
        for step in 0..3_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 33) % 200;
            let delta = ((x >> 20) % 7) as i64 - 3;
            tl.add(key, delta);
            let e = map.entry(key).or_insert(0);
            *e += delta;
            if *e == 0 {
                map.remove(&key);
            }
            assert_eq!(tl.len(), map.len());
            if step % 7 == 0 {
                let t = (x >> 40) % 210;
                let threshold = ((x >> 10) % 20) as i64 - 10;
                let naive_load: i64 = map.range(..=t).map(|(_, d)| d).sum();
                assert_eq!(tl.load_at(t), naive_load);
                for above in [true, false] {
                    assert_eq!(tl.first_after(t, threshold, above), naive_first(&map, t, threshold, above));
                }
            }
        }
    }

    #[test]
    fn folding_the_past_keeps_every_answer_from_the_cut_on() {
        let mut tl = Timeline::new();
        let mut map = BTreeMap::new();
        let mut x: u64 = 777;
        for _ in 0..400u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (key, delta) = ((x >> 33) % 300, ((x >> 20) % 9) as i64 - 4);
            tl.add(key, delta);
            *map.entry(key).or_insert(0) += delta;
        }
        map.retain(|_, d| *d != 0);
        for cut in [0, 57, 150, 299, 400] {
            tl.fold_through(cut);
            assert!(tl.len() <= map.range(cut + 1..).count() + 1);
            for t in (cut..320).step_by(7) {
                let naive_load: i64 = map.range(..=t).map(|(_, d)| d).sum();
                assert_eq!(tl.load_at(t), naive_load, "load at {t} after folding through {cut}");
                for threshold in [-3, 0, 4] {
                    for above in [true, false] {
                        assert_eq!(tl.first_after(t, threshold, above), naive_first(&map, t, threshold, above));
                    }
                }
            }
        }
        // Past every change: at most one is left, at the cut, holding their sum.
        let total: i64 = map.values().sum();
        assert_eq!(tl.last_key(), (total != 0).then_some(400));
        assert_eq!(tl.load_at(400), total);
    }
}
