//! What log lines show in place of what may be secret.
//!
//! - **A header value that counts a client** (an `Authorization` bearer token, an API key)
//!   is logged as its keyed hash, `#` and 32 hex digits ([`KeyedHash::tag`]): the same value
//!   always logs the same hash, so one client's lines can still be followed, but the value
//!   cannot be read back, nor guessed and checked without the key.
//! - **A URL** is logged without its query's values ([`url_for_log`]): `?apikey=…` is a
//!   secret as often as a header is.
//!
//! The key is the edge's `SLUICEGATE_LOG_KEY` ([`KeyedHash::from_secret`], so hashes agree
//! across isolates and deploys), else 128 random bits drawn once per isolate. The same keyed
//! hash names the keys of the edge's block cache, so that cache holds 16 bytes per key
//! whatever the key's size, in a table a client cannot aim collisions at.

use alloc::string::String;
use core::fmt::Write;
use siphasher::sip128::SipHasher24;

/// SipHash-2-4 with a 128-bit output and a 128-bit secret key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyedHash {
    k0: u64,
    k1: u64,
}

impl core::fmt::Debug for KeyedHash {
    /// The key stays out of debug output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("KeyedHash { .. }")
    }
}

/// A 128-bit keyed hash: a fixed-size stand-in for a value of any size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digest(pub u64, pub u64);

impl KeyedHash {
    /// The hash keyed by 128 bits (random ones, drawn once: see [`KeyedHash::from_secret`]
    /// for a key given as text).
    pub const fn new(k0: u64, k1: u64) -> Self {
        KeyedHash { k0, k1 }
    }

    /// The hash keyed by a secret given as text (any length; 32 or more random characters
    /// keep the hashes of short values from being guessed): the secret's own SipHash under a
    /// fixed key is the 128-bit key. The same secret gives the same hashes everywhere.
    pub fn from_secret(secret: &[u8]) -> Self {
        // "sluicega", "te log k": a fixed, public key; the secret is what is hashed.
        let fixed = SipHasher24::new_with_keys(0x736c_7569_6365_6761, 0x7465_206c_6f67_206b);
        let key = fixed.hash(secret);
        KeyedHash { k0: key.h1, k1: key.h2 }
    }

    /// The 128-bit hash of `bytes`.
    pub fn digest(&self, bytes: &[u8]) -> Digest {
        let h = SipHasher24::new_with_keys(self.k0, self.k1).hash(bytes);
        Digest(h.h1, h.h2)
    }

    /// What a log line shows for `value`: `#` and its hash in 32 lower-case hex digits.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::redact::KeyedHash;
    /// let hash = KeyedHash::from_secret(b"a log key of thirty-two characters");
    /// let tag = hash.tag("Bearer secret-token");
    /// assert!(tag.starts_with('#') && tag.len() == 33 && !tag.contains("secret"));
    /// assert_eq!(tag, hash.tag("Bearer secret-token"));
    /// ```
    pub fn tag(&self, value: &str) -> String {
        let Digest(h1, h2) = self.digest(value.as_bytes());
        let mut out = String::with_capacity(33);
        let _ = write!(out, "#{h1:016x}{h2:016x}");
        out
    }
}

/// `url` as log lines show it: its path and its query's parameter names, without their
/// values (`https://edge.example/api/x?apikey=s3cret&q=1` → `https://edge.example/api/x?apikey&q`).
/// A query part without `=` is a value with no name, and is left out; so is any fragment.
///
/// # Examples
/// ```
/// use sluicegate::redact::url_for_log;
/// assert_eq!(url_for_log("http://edge.test/api/x?apikey=s3cret&q=1"), "http://edge.test/api/x?apikey&q");
/// assert_eq!(url_for_log("http://edge.test/api/x?s3cret"), "http://edge.test/api/x");
/// assert_eq!(url_for_log("http://edge.test/api/x"), "http://edge.test/api/x");
/// ```
pub fn url_for_log(url: &str) -> String {
    let url = url.split('#').next().unwrap_or_default();
    let Some((before, query)) = url.split_once('?') else { return url.into() };
    let mut out = String::with_capacity(url.len());
    out.push_str(before);
    let names = query.split('&').filter_map(|part| part.split_once('=').map(|(name, _)| name));
    for (i, name) in names.enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_logs_the_same_hash_under_the_same_key_and_another_under_another() {
        let a = KeyedHash::from_secret(b"first log key, thirty-two chars");
        let b = KeyedHash::from_secret(b"second log key, thirty-two char");
        let tag = a.tag("Bearer abc");
        assert_eq!(tag, a.tag("Bearer abc"));
        assert_eq!(tag, KeyedHash::from_secret(b"first log key, thirty-two chars").tag("Bearer abc"));
        assert_ne!(tag, b.tag("Bearer abc"), "another key, another hash");
        assert_ne!(tag, a.tag("Bearer abd"), "another value, another hash");
        assert_eq!(tag.len(), 33);
        assert!(tag[1..].bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(KeyedHash::new(1, 2).digest(b"x"), KeyedHash::new(1, 3).digest(b"x"));
    }

    #[test]
    fn the_key_is_never_in_debug_output() {
        assert_eq!(alloc::format!("{:?}", KeyedHash::new(0x1234_5678, 9)), "KeyedHash { .. }");
    }

    #[test]
    fn a_logged_url_keeps_its_path_and_parameter_names_and_loses_every_value() {
        let cases = [
            ("https://e.test/api/x?apikey=s3cret&q=1", "https://e.test/api/x?apikey&q"),
            ("https://e.test/api/x?token=s3cret#frag", "https://e.test/api/x?token"),
            ("https://e.test/api/x?s3cret&page=2", "https://e.test/api/x?page"),
            ("https://e.test/api/x?a=1=2&&b=", "https://e.test/api/x?a&b"),
            ("https://e.test/api/x?", "https://e.test/api/x"),
            ("https://e.test/a?b", "https://e.test/a"),
            ("https://e.test/", "https://e.test/"),
        ];
        for (url, logged) in cases {
            assert_eq!(url_for_log(url), logged, "{url}");
            assert!(!url_for_log(url).contains("s3cret"), "{url}");
        }
    }
}
