//! Names interned as numbers, and `(client, endpoint)` pairs numbered, in the order first seen.

use core::hash::{BuildHasher, Hasher};
use foldhash::fast::FixedState;
use hashbrown::HashTable;

/// Names interned as numbers, in the order first seen.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// The numbers of names of at most 16 bytes, found by those bytes packed in two words
    /// and the length ([`Short`]): a lookup reads one entry, never the name itself.
    short: Slots<Short>,
    /// The numbers of longer names, found by the hash of a name's bytes.
    long: HashTable<u32>,
    names: Vec<Box<str>>,
}

/// A name of at most 16 bytes as two words and its length, which together give back every
/// byte: eight or more, the first eight and the last eight (overlapping when fewer than
/// 16); four to seven, the first four and the last four; fewer, the first, middle and last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Short(u64, u64, usize);

impl Short {
    #[inline(always)]
    fn of(name: &[u8]) -> Option<Short> {
        let n = name.len();
        let word = |at: usize| u64::from_le_bytes(name[at..at + 8].try_into().expect("eight bytes"));
        let half = |at: usize| u64::from(u32::from_le_bytes(name[at..at + 4].try_into().expect("four bytes")));
        match n {
            8..=16 => Some(Short(word(0), word(n - 8), n)),
            4..=7 => Some(Short(half(0), half(n - 4), n)),
            1..=3 => Some(Short(u64::from(name[0]) | u64::from(name[n / 2]) << 8 | u64::from(name[n - 1]) << 16, 0, n)),
            0 => Some(Short(0, 0, 0)),
            _ => None,
        }
    }

    /// A hash of the three (a folded multiply, as foldhash's).
    #[inline(always)]
    fn hash(self) -> u64 {
        const SEED: u64 = 0x243f_6a88_85a3_08d3;
        const FOLD: u64 = 0x1319_8a2e_0370_7344;
        let product = u128::from(self.0 ^ SEED) * u128::from(self.1 ^ FOLD ^ self.2 as u64);
        product as u64 ^ (product >> 64) as u64
    }
}

impl Names {
    fn hash(name: &[u8]) -> u64 {
        let mut h = FixedState::default().build_hasher();
        h.write(name);
        h.finish()
    }

    /// The number of `name`, numbering it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        match self.find(name.as_bytes()) {
            Ok(id) => id,
            Err(hash) => self.add(hash, name),
        }
    }

    /// [`Names::intern`] for a name given as bytes; `None` when they are not UTF-8 text.
    #[inline(always)]
    pub fn intern_utf8(&mut self, name: &[u8]) -> Option<u32> {
        match self.find(name) {
            Ok(id) => Some(id),
            Err(hash) => Some(self.add(hash, core::str::from_utf8(name).ok()?)),
        }
    }

    /// The number of `name`, or the hash it is numbered under when new.
    #[inline(always)]
    fn find(&self, name: &[u8]) -> Result<u32, u64> {
        if let Some(key) = Short::of(name) {
            let hash = key.hash();
            return self.short.find(hash, key).ok_or(hash);
        }
        let hash = Names::hash(name);
        self.long.find(hash, |&id| same(self.names[id as usize].as_bytes(), name)).copied().ok_or(hash)
    }

    /// Numbers `name` (not numbered yet), `hash` being what [`Names::find`] returned.
    #[cold]
    fn add(&mut self, hash: u64, name: &str) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(name.into());
        match Short::of(name.as_bytes()) {
            Some(key) => self.short.insert(hash, key, id, Short::hash),
            None => {
                let names = &self.names;
                self.long.insert_unique(hash, id, |&id| Names::hash(names[id as usize].as_bytes()));
            }
        }
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

/// `a == b`, in line for the short names of a log (eight bytes at a time, the last eight
/// overlapping the ones before) rather than a call to `memcmp`.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if !(8..=32).contains(&n) {
        return a == b;
    }
    let word = |x: &[u8], at: usize| u64::from_le_bytes(x[at..at + 8].try_into().expect("eight bytes"));
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// Numbers found by a key: open addressing with linear probing, the slots at most half
/// full, so that a lookup mostly reads one slot and compares one key.
#[derive(Clone, Debug)]
struct Slots<K> {
    /// Each slot's key and number ([`NONE`]: empty); a power of two of them.
    slots: Vec<(K, u32)>,
    len: usize,
}

/// The number of an empty slot.
const NONE: u32 = u32::MAX;

impl<K: Copy + Default> Default for Slots<K> {
    fn default() -> Self {
        Slots { slots: vec![(K::default(), NONE); 16], len: 0 }
    }
}

impl<K: Copy + Default + Eq> Slots<K> {
    /// The number of `key` (whose hash is `hash`), if it has one.
    #[inline(always)]
    fn find(&self, hash: u64, key: K) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let (k, id) = self.slots[i];
            if id == NONE {
                return None;
            }
            if k == key {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Numbers `key` (not numbered yet) `id`; `hash` gives a key's hash, to move the keys
    /// to twice the slots when half are full.
    fn insert(&mut self, hash: u64, key: K, id: u32, rehash: impl Fn(K) -> u64) {
        if 2 * (self.len + 1) > self.slots.len() {
            let twice = vec![(K::default(), NONE); 2 * self.slots.len()];
            let old = core::mem::replace(&mut self.slots, twice);
            for (k, id) in old.into_iter().filter(|&(_, id)| id != NONE) {
                self.place(rehash(k), k, id);
            }
        }
        self.place(hash, key, id);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, key: K, id: u32) {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        while self.slots[i].1 != NONE {
            i = (i + 1) & mask;
        }
        self.slots[i] = (key, id);
    }
}

/// Numbers for `(client, endpoint)` pairs, in the order first seen.
#[derive(Default)]
pub(super) struct Pairs(Slots<u64>);

impl Pairs {
    /// A pair as one key, and its hash (a folded multiply, as foldhash's).
    #[inline(always)]
    fn key(client: u32, endpoint: u32) -> (u64, u64) {
        let key = u64::from(client) << 32 | u64::from(endpoint);
        (key, Pairs::hash(key))
    }

    #[inline(always)]
    fn hash(key: u64) -> u64 {
        let product = u128::from(key ^ 0x243f_6a88_85a3_08d3) * 0x1319_8a2e_0370_7345;
        product as u64 ^ (product >> 64) as u64
    }

    /// The number of a pair, and whether it is new.
    #[inline]
    pub(super) fn number(&mut self, client: u32, endpoint: u32) -> (u32, bool) {
        let (key, hash) = Pairs::key(client, endpoint);
        match self.0.find(hash, key) {
            Some(id) => (id, false),
            None => (self.add(hash, key), true),
        }
    }

    #[cold]
    fn add(&mut self, hash: u64, key: u64) -> u32 {
        let id = self.len();
        self.0.insert(hash, key, id, Pairs::hash);
        id
    }

    /// The number of a pair already numbered.
    pub(super) fn get(&self, client: u32, endpoint: u32) -> Option<u32> {
        let (key, hash) = Pairs::key(client, endpoint);
        self.0.find(hash, key)
    }

    /// How many pairs are numbered.
    pub(super) fn len(&self) -> u32 {
        self.0.len as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_every_length_are_numbered_in_the_order_first_seen_and_found_again() {
        // every length from 0 to 40, each with a byte changed at every place (and a
        // non-ASCII one): short names and long alike, and the lengths that pack alike
        let mut all: Vec<Vec<u8>> = Vec::new();
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            all.push(a.clone());
            for at in 0..n {
                let mut b = a.clone();
                b[at] = b'A' + (at % 26) as u8;
                all.push(b);
            }
            all.push("é".repeat(n / 2).into_bytes());
        }
        let mut names = Names::default();
        let mut want = std::collections::HashMap::new();
        for round in 0..2 {
            for name in &all {
                let next = want.len() as u32;
                let id = *want.entry(name.clone()).or_insert(next);
                assert_eq!(names.intern_utf8(name), Some(id), "round {round}: {name:?}");
                assert_eq!(names.name(id).as_bytes(), &name[..]);
                assert_eq!(names.intern(core::str::from_utf8(name).unwrap()), id);
            }
        }
        assert_eq!(names.len(), want.len());
        assert_eq!(names.intern_utf8(&[0xff, b'a']), None, "not UTF-8");
        assert_eq!(names.len(), want.len(), "nothing numbered for it");
    }

    #[test]
    fn pairs_are_numbered_in_the_order_first_seen_and_found_again() {
        // pairs that differ in one half or the other, many to a client, across many growths
        let mut all = Vec::new();
        for client in 0..120u32 {
            for endpoint in 0..(client % 37) {
                all.push((client * 0x0101_0101, endpoint << (client % 29)));
            }
        }
        all.extend([(0, 0), (1, 0), (0, 1 << 16), (1, 1 << 16), (u32::MAX - 1, 0), (0, u32::MAX), (1 << 31, 1 << 31)]);
        let mut pairs = Pairs::default();
        let mut want = std::collections::HashMap::new();
        for round in 0..2 {
            for (i, &(c, e)) in all.iter().enumerate() {
                // (each visited again at once, and again on the second round)
                for _ in 0..1 + i % 2 {
                    let next = want.len() as u32;
                    let id = *want.entry((c, e)).or_insert(next);
                    let new = round == 0 && pairs.get(c, e).is_none();
                    assert_eq!(pairs.number(c, e), (id, new), "{c} {e}");
                    assert_eq!(pairs.get(c, e), Some(id));
                }
            }
        }
        assert_eq!(pairs.len() as usize, want.len());
        assert!(want.len() > 2000, "{}", want.len());
        assert_eq!(pairs.get(7, 7), None);
        assert_eq!(pairs.get(0, 1), None);
    }

    #[test]
    fn same_is_equality_at_every_length_and_place() {
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same(&a, &a.clone()));
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(&a, &b), "{n} {at}");
            }
            assert!(!same(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }
}
