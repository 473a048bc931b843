//! Names interned as numbers, and `(client, endpoint)` pairs numbered, in the order first seen.

use core::hash::{BuildHasher, Hasher};
use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};

/// Names interned as numbers, in the order first seen.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// The numbers, found by the hash of a name's bytes.
    pub(super) index: HashTable<u32>,
    pub(super) names: Vec<Box<str>>,
}

impl Names {
    pub(super) fn hash(name: &[u8]) -> u64 {
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
        match self.index.find(hash, |&id| same(self.names[id as usize].as_bytes(), name)) {
            Some(&id) => Some(id),
            None => Some(self.add(hash, core::str::from_utf8(name).ok()?)),
        }
    }

    pub(super) fn add(&mut self, hash: u64, name: &str) -> u32 {
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
    pub(super) fn get(&self, client: u32, endpoint: u32) -> Option<u32> {
        self.0.get(&(client, endpoint)).copied()
    }

    /// How many pairs are numbered.
    pub(super) fn len(&self) -> u32 {
        self.0.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
