//! The edge's response cache for one provider, as a pure state machine: per normalised
//! request, answer from the cache, call the provider in front of the answer, refresh behind
//! it, or wait for a call already in flight. It never reads a clock and does no I/O.
//!
//! One [`CachePolicy`] serves both kinds of provider:
//!
//! - **Results** (Open-Meteo's server path: a result cache per normalised request, 15 minutes)
//!   are refreshed *in front of* the request: an expired result is a [`Miss`](Lookup::Miss),
//!   and with `stale_if_error` a failed call serves the old result instead of an error.
//! - **Snapshots** (NIFC wildfires, TTL 600 s; NOAA smoke, TTL 1800 s: one snapshot per pod)
//!   are refreshed *behind* the request: an expired snapshot is served as it is while one
//!   caller refreshes it, the last good snapshot is served when the refresh fails, and a
//!   failed refresh is retried only `retry_after_failure` (60 s) later.
//!
//! Either way concurrent misses share one upstream call (single flight): the first caller
//! *leads* (the key is marked in flight) and the others wait for its answer, then look up
//! again. The leader must end its call with exactly one of [`complete`](ResponseCache::complete),
//! [`fail`](ResponseCache::fail) or [`abandon`](ResponseCache::abandon) (from a drop guard, so
//! that a cancelled request still ends it): a mark never ended keeps the key in flight.
//!
//! [`key`] normalises a request (path, then the query's pairs sorted by name) so that
//! requests the provider answers identically share one entry; [`call_key`] adds what else
//! reaches the provider (the method, the headers passed on, a `POST`'s body), so that calls
//! the provider may answer differently never share one. [`storable`] says whether an answer
//! may be kept at all, and its bytes are counted as they arrive
//! ([`ByteCap`](crate::edge::body::ByteCap), after the runtime decompressed them), so that an
//! answer larger than an entry may be is passed on as it streams, never held whole.
//!
//! Memory is bounded twice: in entries (`max_entries`) and in bytes (`max_bytes`: every
//! key, and every kept value as [`ByteSize`] weighs it).

use crate::core::time::{Instant, Span};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// How long a failed snapshot refresh waits before it is retried (the wildfire service's
/// `WILDFIRE_RETRY_AFTER_FAILURE_S`).
pub const SNAPSHOT_RETRY_AFTER_FAILURE: Span = Span::from_secs(60);

/// How a [`ResponseCache`] keeps and refreshes values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CachePolicy {
    /// How long a value is fresh, counted from its response (must be longer than zero).
    pub ttl: Span,
    /// Without `refresh_behind`: an expired value is served when the call that would have
    /// replaced it fails, and until `retry_after_failure` after that failure.
    pub stale_if_error: bool,
    /// An expired value is served at once while one caller refreshes it behind the answer
    /// (and is served again when that refresh fails: `stale_if_error` is implied).
    pub refresh_behind: bool,
    /// After a failed call, how long no new call is made for the key.
    pub retry_after_failure: Span,
    /// The most keys held at once, in flight and failure records included (at least 1).
    pub max_entries: usize,
    /// The most bytes held at once: the keys, and the values as [`ByteSize`] weighs them.
    /// A value that would not fit alone is not kept.
    pub max_bytes: usize,
}

/// What a value kept by a [`ResponseCache`] weighs, in bytes of memory (its body and
/// headers, for an answer).
pub trait ByteSize {
    /// Its size in bytes.
    fn byte_size(&self) -> usize;
}

impl ByteSize for u32 {
    fn byte_size(&self) -> usize {
        4
    }
}

impl ByteSize for &str {
    fn byte_size(&self) -> usize {
        self.len()
    }
}

impl CachePolicy {
    /// A snapshot's policy: refreshed behind the request, the last good value served on
    /// failure, a failed refresh retried after [`SNAPSHOT_RETRY_AFTER_FAILURE`], and room for
    /// one key (a snapshot is looked up under one fixed key, whatever the request's query)
    /// of at most `max_bytes`.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::egress::cache::CachePolicy;
    /// use sluicegate::Span;
    /// let wildfires = CachePolicy::snapshot(Span::from_secs(600), 8 << 20);
    /// assert!(wildfires.refresh_behind && wildfires.max_entries == 1);
    /// ```
    pub const fn snapshot(ttl: Span, max_bytes: usize) -> Self {
        CachePolicy {
            ttl,
            stale_if_error: true,
            refresh_behind: true,
            retry_after_failure: SNAPSHOT_RETRY_AFTER_FAILURE,
            max_entries: 1,
            max_bytes,
        }
    }

    /// Whether a failed call serves the value it was to replace.
    const fn serves_stale_on_error(&self) -> bool {
        self.stale_if_error || self.refresh_behind
    }
}

/// A [`CachePolicy`] under which the cache could hold nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CachePolicyError {
    /// A TTL of zero: every value would be expired when stored.
    ZeroTtl,
    /// Room for no entries, or no bytes.
    ZeroCapacity,
}

impl fmt::Display for CachePolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CachePolicyError::ZeroTtl => "the cache TTL must be longer than zero",
            CachePolicyError::ZeroCapacity => "the cache must hold at least 1 entry of at least 1 byte",
        })
    }
}

/// What [`ResponseCache::lookup`] found, and what the caller is to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a, V> {
    /// A value stored less than `ttl` ago: answer with it.
    Fresh(&'a V),
    /// An expired value, to answer with as it is. With `refresh: true` *this* caller must
    /// refresh it behind the answer (the key is now in flight) and end the call with
    /// [`complete`](ResponseCache::complete), [`fail`](ResponseCache::fail) or
    /// [`abandon`](ResponseCache::abandon).
    Stale {
        /// The expired value.
        value: &'a V,
        /// Whether this caller refreshes it.
        refresh: bool,
    },
    /// No usable value. With `lead: true` this caller makes the one upstream call (the key
    /// is now in flight) and must end it as for [`Stale`](Lookup::Stale); with `lead: false`
    /// another caller's call is in flight: wait for it, then look up again.
    Miss {
        /// Whether this caller makes the call.
        lead: bool,
    },
    /// No value to serve, and the last call failed less than `retry_after_failure` ago:
    /// answer without calling.
    Failing {
        /// When a lookup may lead a call again.
        retry_at: Instant,
    },
}

impl<V> Clone for Lookup<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Lookup<'_, V> {}

/// What is known about one key.
struct Entry<V> {
    /// The last good value and when its response arrived.
    stored: Option<(V, Instant)>,
    /// A leader's call is running.
    in_flight: bool,
    /// When the last call failed (cleared by a success).
    failed_at: Option<Instant>,
}

/// The responses of one provider by normalised request ([`key`]), under one [`CachePolicy`].
///
/// ```text
/// results: ttl 900 s, stale_if_error, retry_after_failure 60 s
/// t (s)     0            0          1           901          901        902        962
///           Miss lead    Miss wait  complete A  Miss lead    Miss wait  fail → A   Miss lead
///                                               (A expired)             Stale A …  (60 s on)
///
/// snapshot: ttl 600 s, refresh behind, retry_after_failure 60 s
/// t (s)     0            0          2           602               602            620        680
///           Miss lead    Miss wait  complete A  Stale A refresh   Stale A        fail → A   Stale A refresh
///                                               (A expired)       (in flight)    Stale A …  (60 s on)
/// ```
///
/// The answer for a key, by what is stored (a failure counts for `retry_after_failure`):
///
/// | stored value | in flight | recent failure | answer |
/// |---|---|---|---|
/// | fresh | any | any | `Fresh` |
/// | expired, refresh behind | no | no | `Stale { refresh: true }` (now in flight) |
/// | expired, refresh behind | yes | any | `Stale { refresh: false }` |
/// | expired, refresh behind | no | yes | `Stale { refresh: false }` |
/// | expired | yes | any | `Miss { lead: false }` |
/// | expired, `stale_if_error` | no | yes | `Stale { refresh: false }` |
/// | expired, not `stale_if_error` | no | yes | `Failing` |
/// | none | yes | any | `Miss { lead: false }` |
/// | none | no | yes | `Failing` |
/// | expired or none | no | no | `Miss { lead: true }` (now in flight) |
///
/// Memory is bounded: at most `max_entries` keys, each with its value, in-flight mark or
/// failure record, and at most `max_bytes` of keys and values. A new key that leads when the
/// cache is full, or a value that does not fit, evicts entries not in flight: failure records
/// first, then the value stored longest ago. When every entry is in flight there is nothing
/// to evict: the new key still leads (`Miss { lead: true }`) but is not recorded, so its
/// [`complete`](Self::complete) stores nothing and a second caller for it leads a second
/// call; and an evicted failure record no longer holds calls back. A value that cannot fit
/// (larger than `max_bytes` with its key, or beside calls in flight) is not stored: the key
/// keeps what it had, as after [`abandon`](Self::abandon).
/// Look-ups are O(1) (a hash map: its keys come from the app, which holds the egress
/// token); making room scans the entries (O(n)).
///
/// # Examples
/// ```
/// use sluicegate::egress::cache::{key, CachePolicy, Lookup, ResponseCache};
/// use sluicegate::{Instant, Span};
/// let policy = CachePolicy {
///     ttl: Span::from_secs(900),
///     stale_if_error: true,
///     refresh_behind: false,
///     retry_after_failure: Span::from_secs(60),
///     max_entries: 1_000,
///     max_bytes: 8 << 20,
/// };
/// let mut cache: ResponseCache<&str> = ResponseCache::new(policy).unwrap();
/// let k = key("/v1/forecast", "longitude=13.41&latitude=52.52");
/// let t = Instant::from_secs(1_000);
/// assert_eq!(cache.lookup(&k, t), Lookup::Miss { lead: true });
/// assert_eq!(cache.lookup(&k, t), Lookup::Miss { lead: false });
/// cache.complete(&k, "{…}", t + Span::from_secs(1));
/// assert_eq!(cache.lookup(&k, t + Span::from_secs(900)), Lookup::Fresh(&"{…}"));
/// assert_eq!(cache.lookup(&k, t + Span::from_secs(901)), Lookup::Miss { lead: true });
/// assert_eq!(cache.fail(&k, t + Span::from_secs(902)), Some(&"{…}"));
/// assert_eq!(cache.lookup(&k, t + Span::from_secs(903)), Lookup::Stale { value: &"{…}", refresh: false });
/// ```
pub struct ResponseCache<V> {
    policy: CachePolicy,
    entries: HashMap<String, Entry<V>, FixedState>,
    /// The keys' and the values' bytes held.
    bytes: usize,
}

impl<V: ByteSize> ResponseCache<V> {
    /// An empty cache under `policy`.
    ///
    /// # Errors
    /// [`CachePolicyError::ZeroTtl`] or [`CachePolicyError::ZeroCapacity`].
    pub fn new(policy: CachePolicy) -> Result<Self, CachePolicyError> {
        if policy.ttl.is_zero() {
            return Err(CachePolicyError::ZeroTtl);
        }
        if policy.max_entries == 0 || policy.max_bytes == 0 {
            return Err(CachePolicyError::ZeroCapacity);
        }
        Ok(ResponseCache { policy, entries: HashMap::with_hasher(FixedState::with_seed(0x5eed_e9e5)), bytes: 0 })
    }

    /// Look `key` up at `now` (see the table on [`ResponseCache`]). A value is fresh until
    /// its response + `ttl`, exclusive; a failure counts until its time +
    /// `retry_after_failure`, exclusive.
    pub fn lookup(&mut self, key: &str, now: Instant) -> Lookup<'_, V> {
        let policy = self.policy;
        if !self.entries.contains_key(key) {
            self.lead_new(key);
            return Lookup::Miss { lead: true };
        }
        match self.entries.get_mut(key) {
            Some(entry) => answer(&policy, entry, now),
            None => Lookup::Miss { lead: true }, // not reached: held, as checked above
        }
    }

    /// Store the response to `key` that arrived at `now`: fresh until `now + ttl`. Clears the
    /// in-flight mark and any failure, and makes room in bytes (see [`ResponseCache`]).
    /// Stores nothing, and returns `false`, for a key the cache does not hold (a lead it
    /// could not record) or a value that cannot fit; the key is then no longer in flight.
    pub fn complete(&mut self, key: &str, value: V, now: Instant) -> bool {
        let Some(entry) = self.entries.get(key) else { return false };
        let (old, new) = (value_bytes(entry), value.byte_size());
        let max = self.policy.max_bytes;
        let fits_alone = new.checked_add(key.len()).is_some_and(|needed| needed <= max);
        // Others make room for it; the old value is replaced, so its bytes count as free.
        while fits_alone && self.bytes - old + new > max {
            if !self.evict_one(key) {
                break;
            }
        }
        let fits = fits_alone && self.bytes - old + new <= max;
        let Some(entry) = self.entries.get_mut(key) else { return false };
        if !fits {
            // Not kept: whatever was there stays as it was, no longer in flight.
            entry.in_flight = false;
            if entry.stored.is_none() && entry.failed_at.is_none() {
                self.forget(key);
            }
            return false;
        }
        *entry = Entry { stored: Some((value, now)), in_flight: false, failed_at: None };
        self.bytes = self.bytes - old + new;
        true
    }

    /// The call for `key` failed at `now`: clears the in-flight mark and records the failure
    /// (no call is led for `retry_after_failure`). Returns the value it was to replace when
    /// the policy serves it on failure (`stale_if_error` or `refresh_behind`), else `None`.
    pub fn fail(&mut self, key: &str, now: Instant) -> Option<&V> {
        let serve_stale = self.policy.serves_stale_on_error();
        let entry = self.entries.get_mut(key)?;
        entry.in_flight = false;
        entry.failed_at = Some(now);
        entry.stored.as_ref().filter(|_| serve_stale).map(|(value, _)| value)
    }

    /// The leader for `key` went away without an answer, which is not a failure: clears the
    /// in-flight mark only, so that the next lookup leads a new call.
    pub fn abandon(&mut self, key: &str) {
        let Some(entry) = self.entries.get_mut(key) else { return };
        entry.in_flight = false;
        if entry.stored.is_none() && entry.failed_at.is_none() {
            self.forget(key);
        }
    }

    /// The keys' and values' bytes held (at most `max_bytes`).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keys held: values, in-flight marks and failure records (at most `max_entries`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The policy the cache was built with.
    pub fn policy(&self) -> &CachePolicy {
        &self.policy
    }

    /// Record a new key as in flight, making room first; records nothing when every entry
    /// is in flight, or the key alone is larger than `max_bytes`.
    fn lead_new(&mut self, key: &str) {
        if key.len() > self.policy.max_bytes {
            return;
        }
        while self.entries.len() >= self.policy.max_entries || self.bytes + key.len() > self.policy.max_bytes {
            if !self.evict_one(key) {
                return;
            }
        }
        self.bytes += key.len();
        let entry = Entry { stored: None, in_flight: true, failed_at: None };
        self.entries.insert(String::from(key), entry);
    }

    /// Evict one entry that is not in flight and not `keep`: a failure record first, then
    /// the value stored longest ago. `false` when there is none.
    fn evict_one(&mut self, keep: &str) -> bool {
        let victim = self
            .entries
            .iter()
            .filter(|(key, entry)| !entry.in_flight && key.as_str() != keep)
            .min_by_key(|(_, entry)| match &entry.stored {
                None => (false, entry.failed_at.unwrap_or(Instant::ZERO)),
                Some((_, stored_at)) => (true, *stored_at),
            })
            .map(|(victim, _)| victim.clone());
        match victim {
            Some(victim) => {
                self.forget(&victim);
                true
            }
            None => false,
        }
    }

    /// Remove `key` and its bytes.
    fn forget(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= key.len() + value_bytes(&entry);
        }
    }
}

/// What an entry's value weighs ([`ByteSize`]), 0 without one.
fn value_bytes<V: ByteSize>(entry: &Entry<V>) -> usize {
    entry.stored.as_ref().map_or(0, |(value, _)| value.byte_size())
}

/// The answer for a key the cache holds, marking it in flight when the caller is to call.
fn answer<'a, V>(policy: &CachePolicy, entry: &'a mut Entry<V>, now: Instant) -> Lookup<'a, V> {
    let Entry { stored, in_flight, failed_at, .. } = entry;
    let retry_at = failed_at.map(|at| at + policy.retry_after_failure).filter(|&retry_at| now < retry_at);
    match (stored.as_ref(), retry_at) {
        (Some((value, stored_at)), _) if now.saturating_since(*stored_at) < policy.ttl => Lookup::Fresh(value),
        (Some((value, _)), None) if policy.refresh_behind && !*in_flight => {
            *in_flight = true;
            Lookup::Stale { value, refresh: true }
        }
        (Some((value, _)), _) if policy.refresh_behind => Lookup::Stale { value, refresh: false },
        _ if *in_flight => Lookup::Miss { lead: false },
        (Some((value, _)), Some(_)) if policy.stale_if_error => Lookup::Stale { value, refresh: false },
        (_, Some(retry_at)) => Lookup::Failing { retry_at },
        (_, None) => {
            *in_flight = true;
            Lookup::Miss { lead: true }
        }
    }
}

impl<V> fmt::Debug for ResponseCache<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseCache")
            .field("policy", &self.policy)
            .field("len", &self.entries.len())
            .field("bytes", &self.bytes)
            .field("in_flight", &self.entries.values().filter(|e| e.in_flight).count())
            .finish()
    }
}

/// The normalised form of a request for [`ResponseCache`]: the path, a newline, then the
/// query's `&`-separated pairs (no leading `?`) sorted by name in byte order, pairs with the
/// same name keeping their order (a provider may read only the first), empty pairs dropped.
///
/// Pairs are sorted by their *decoded* names (`%61` and `a` are one name to the provider, so
/// their order among each other is kept), but written as they came: two spellings of one
/// value are two keys (a missed share, never a wrong answer). A newline or backslash inside
/// the path is escaped (`\n`, `\\`), so the first newline always ends the path and no
/// path/query split can forge another key.
///
/// # Examples
/// ```
/// use sluicegate::egress::cache::key;
/// assert_eq!(key("/v1/forecast", "b=2&a=1"), key("/v1/forecast", "a=1&&b=2"));
/// assert_eq!(key("/v1/forecast", "b=2&a=1"), "/v1/forecast\na=1&b=2");
/// assert_ne!(key("/v1/forecast", "a=1"), key("/v1/forecast", "a=2"));
/// assert_ne!(key("/x", "a=1&a=2"), key("/x", "a=2&a=1"));
/// // `%61` is `a`: which of the two comes first is what the provider reads.
/// assert_ne!(key("/x", "a=evil&%61=good"), key("/x", "%61=good&a=evil"));
/// ```
pub fn key(path: &str, query: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1 + query.len());
    for c in path.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out.push('\n');
    push_sorted_pairs(&mut out, query);
    out
}

/// `pairs` (`&`-separated, empty ones dropped) written to `out` sorted by decoded name,
/// pairs of one name in their order.
fn push_sorted_pairs(out: &mut String, pairs: &str) {
    // (decoded name, position, pair): the position keeps pairs of one name in their order.
    let mut sorted: Vec<(Vec<u8>, usize, &str)> = pairs
        .split('&')
        .filter(|pair| !pair.is_empty())
        .enumerate()
        .map(|(at, pair)| (decoded_name(pair), at, pair))
        .collect();
    crate::core::sort::sort_by(&mut sorted, |a, b| (&a.0, a.1) < (&b.0, b.1));
    for (i, (_, _, pair)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(pair);
    }
}

/// The name of a `name=value` pair as a form decoder reads it: `+` a space, `%XX` a byte.
fn decoded_name(pair: &str) -> Vec<u8> {
    crate::core::form::decode(pair.split('=').next().unwrap_or_default()).into_owned()
}

/// A call as far as the provider's answer may depend on it: what [`call_key`] keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallParts<'a> {
    /// `GET` or `POST` (a `HEAD` is answered from what a `GET` keeps).
    pub method: &'a str,
    /// The path below the provider.
    pub path: &'a str,
    /// The query string, without its `?`.
    pub query: &'a str,
    /// Every header the call carries to the provider, as `(lower-case name, value)`, in a
    /// fixed order of names (the edge passes on a fixed list).
    pub headers: &'a [(&'a str, &'a str)],
    /// A `POST`'s body and its `Content-Type`.
    pub body: Option<(&'a [u8], &'a str)>,
}

/// The key of a whole call: its method, its [`key`], every header it carries to the provider
/// (a provider may vary its answer by any of them — `Accept-Language`, `Accept` — and one
/// caller's headers must never choose another caller's answer), and a `POST`'s body:
/// a form (`application/x-www-form-urlencoded`) normalised as a query is, any other body
/// as it came. `None` for a body that is not UTF-8 (such a call is not cached).
///
/// # Examples
/// ```
/// use sluicegate::egress::cache::{call_key, CallParts};
/// let key = |language: &str, body: &[u8]| {
///     call_key(&CallParts {
///         method: "POST",
///         path: "interpreter",
///         query: "",
///         headers: &[("accept-language", language)],
///         body: Some((body, "application/x-www-form-urlencoded")),
///     })
/// };
/// let overpass = key("en", b"data=node(1);out;").unwrap();
/// assert_eq!(overpass, "POST interpreter\n\naccept-language: en\n\ndata=node(1);out;");
/// assert_ne!(key("de", b"data=node(1);out;").unwrap(), overpass);
/// assert!(key("en", b"\xff").is_none());
/// ```
pub fn call_key(call: &CallParts<'_>) -> Option<String> {
    let body = match call.body {
        Some((bytes, content_type)) => Some((core::str::from_utf8(bytes).ok()?, content_type)),
        None => None,
    };
    let mut out = String::with_capacity(call.method.len() + call.path.len() + call.query.len() + 64);
    out.push_str(call.method);
    out.push(' ');
    out.push_str(&key(call.path, call.query));
    out.push('\n');
    for (name, value) in call.headers {
        // Neither a name nor a value can hold a newline (the runtime refuses one).
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value);
        out.push('\n');
    }
    out.push('\n');
    if let Some((text, content_type)) = body {
        let form = content_type
            .split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"));
        if form {
            push_sorted_pairs(&mut out, text);
        } else {
            out.push_str(text);
        }
    }
    Some(out)
}

/// Why an answer is not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotKept {
    /// Only a `200` is kept.
    Status(u16),
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: private`: meant for one caller.
    Private,
    /// `Vary: *`: the answer depends on more than the call.
    VaryAll,
    /// Its `Content-Length` is over `max_entry_bytes`.
    TooLarge,
}

/// Whether an answer with `status`, `Cache-Control` and `Vary` (the headers' values, if
/// any) and a declared `Content-Length` may be kept under `max_entry_bytes`. A `Vary` naming
/// headers is no obstacle: [`call_key`] keys every header the call carried.
///
/// # Errors
/// Why it is not kept: pass it on as it comes.
///
/// # Examples
/// ```
/// use sluicegate::egress::cache::{storable, NotKept};
/// assert_eq!(storable(200, Some("public, max-age=600"), Some("Accept-Language"), Some(10), 1 << 20), Ok(()));
/// assert_eq!(storable(200, Some("private, max-age=60"), None, None, 1 << 20), Err(NotKept::Private));
/// assert_eq!(storable(200, Some("No-Store"), None, None, 1 << 20), Err(NotKept::NoStore));
/// assert_eq!(storable(200, None, Some("accept, *"), None, 1 << 20), Err(NotKept::VaryAll));
/// assert_eq!(storable(404, None, None, None, 1 << 20), Err(NotKept::Status(404)));
/// ```
pub fn storable(
    status: u16,
    cache_control: Option<&str>,
    vary: Option<&str>,
    declared: Option<u64>,
    max_entry_bytes: u64,
) -> Result<(), NotKept> {
    if status != 200 {
        return Err(NotKept::Status(status));
    }
    for directive in cache_control.unwrap_or_default().split(',') {
        let name = directive.split('=').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("no-store") {
            return Err(NotKept::NoStore);
        }
        if name.eq_ignore_ascii_case("private") {
            return Err(NotKept::Private);
        }
    }
    if vary.unwrap_or_default().split(',').any(|name| name.trim() == "*") {
        return Err(NotKept::VaryAll);
    }
    if declared.is_some_and(|length| length > max_entry_bytes) {
        return Err(NotKept::TooLarge);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    const TTL: Span = Span::from_secs(900);
    const RETRY: Span = Span::from_secs(60);

    /// Open-Meteo's server path: refreshed in front of the request.
    fn results(stale_if_error: bool, max_entries: usize) -> ResponseCache<u32> {
        let policy = CachePolicy {
            ttl: TTL,
            stale_if_error,
            refresh_behind: false,
            retry_after_failure: RETRY,
            max_entries,
            max_bytes: 1 << 20,
        };
        ResponseCache::new(policy).unwrap()
    }

    /// A wildfire snapshot: refreshed behind the request.
    fn snapshot() -> ResponseCache<u32> {
        ResponseCache::new(CachePolicy::snapshot(Span::from_secs(600), 1 << 20)).unwrap()
    }

    fn at(s: u64) -> Instant {
        Instant::from_secs(s)
    }

    /// Store `value` under `key` through the normal lead → complete path.
    fn store(c: &mut ResponseCache<u32>, key: &str, value: u32, now: Instant) {
        assert_eq!(c.lookup(key, now), Lookup::Miss { lead: true });
        c.complete(key, value, now);
    }

    #[test]
    fn a_value_is_fresh_for_ttl_from_its_response_then_expired() {
        let mut c = results(false, 10);
        assert_eq!(c.lookup("k", at(100)), Lookup::Miss { lead: true });
        c.complete("k", 7, at(130));
        let expiry = at(130) + TTL;
        assert_eq!(c.lookup("k", expiry - Span::from_nanos(1)), Lookup::Fresh(&7));
        assert_eq!(c.lookup("k", expiry), Lookup::Miss { lead: true }, "refreshed in front of the request");
        assert_eq!(c.lookup("k", expiry), Lookup::Miss { lead: false });
        c.complete("k", 8, expiry + Span::from_secs(1));
        assert_eq!(c.lookup("k", expiry + Span::from_secs(1)), Lookup::Fresh(&8));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn the_timelines_drawn_on_response_cache_hold() {
        let mut c = results(true, 10);
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: false });
        c.complete("k", 1, at(1));
        assert_eq!(c.lookup("k", at(901)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("k", at(901)), Lookup::Miss { lead: false });
        assert_eq!(c.fail("k", at(902)), Some(&1));
        assert_eq!(c.lookup("k", at(961)), Lookup::Stale { value: &1, refresh: false });
        assert_eq!(c.lookup("k", at(962)), Lookup::Miss { lead: true });

        let mut s = snapshot();
        assert_eq!(s.lookup("k", at(0)), Lookup::Miss { lead: true });
        assert_eq!(s.lookup("k", at(0)), Lookup::Miss { lead: false });
        s.complete("k", 1, at(2));
        assert_eq!(s.lookup("k", at(601)), Lookup::Fresh(&1));
        assert_eq!(s.lookup("k", at(602)), Lookup::Stale { value: &1, refresh: true });
        assert_eq!(s.lookup("k", at(602)), Lookup::Stale { value: &1, refresh: false });
        assert_eq!(s.fail("k", at(620)), Some(&1));
        assert_eq!(s.lookup("k", at(679)), Lookup::Stale { value: &1, refresh: false });
        assert_eq!(s.lookup("k", at(680)), Lookup::Stale { value: &1, refresh: true });
    }

    #[test]
    fn fifty_concurrent_lookups_of_a_missing_key_make_exactly_one_lead() {
        for mut c in [results(false, 10), results(true, 10), snapshot()] {
            let leads: Vec<bool> = (0..50)
                .map(|_| match c.lookup("k", at(5)) {
                    Lookup::Miss { lead } => lead,
                    other => panic!("{other:?} for a missing key"),
                })
                .collect();
            assert_eq!(leads.iter().filter(|&&lead| lead).count(), 1);
            assert!(leads[0], "the first caller leads, the 49 others wait");
            c.complete("k", 1, at(6));
            assert_eq!(c.lookup("k", at(6)), Lookup::Fresh(&1), "the waiters look up again and find it");
        }
    }

    #[test]
    fn an_expired_value_is_refreshed_in_front_by_one_caller_while_the_others_wait() {
        let mut c = results(true, 10);
        store(&mut c, "k", 1, at(0));
        let later = at(0) + TTL;
        assert_eq!(c.lookup("k", later), Lookup::Miss { lead: true });
        for _ in 0..10 {
            assert_eq!(c.lookup("k", later), Lookup::Miss { lead: false }, "wait rather than serve stale");
        }
        c.complete("k", 2, later);
        assert_eq!(c.lookup("k", later), Lookup::Fresh(&2));
    }

    #[test]
    fn a_snapshot_is_refreshed_behind_the_request_while_the_stale_one_is_served() {
        let mut c = snapshot();
        store(&mut c, "fires", 1, at(0));
        assert_eq!(c.lookup("fires", at(599)), Lookup::Fresh(&1));
        assert_eq!(c.lookup("fires", at(600)), Lookup::Stale { value: &1, refresh: true });
        for _ in 0..10 {
            assert_eq!(
                c.lookup("fires", at(601)),
                Lookup::Stale { value: &1, refresh: false },
                "one refresh at a time"
            );
        }
        c.complete("fires", 2, at(603));
        assert_eq!(c.lookup("fires", at(603)), Lookup::Fresh(&2));
        assert_eq!(c.lookup("fires", at(1_202)), Lookup::Fresh(&2), "fresh for 600 s from its response");
        assert_eq!(c.lookup("fires", at(1_203)), Lookup::Stale { value: &2, refresh: true });
    }

    #[test]
    fn a_failed_snapshot_refresh_serves_the_last_good_one_and_is_retried_after_60_s() {
        let mut c = snapshot();
        store(&mut c, "fires", 1, at(0));
        assert_eq!(c.lookup("fires", at(700)), Lookup::Stale { value: &1, refresh: true });
        assert_eq!(c.fail("fires", at(710)), Some(&1), "the last good snapshot is served on failure");
        for s in [710, 740, 769] {
            assert_eq!(c.lookup("fires", at(s)), Lookup::Stale { value: &1, refresh: false }, "no new call at {s} s");
        }
        let retry = at(710) + SNAPSHOT_RETRY_AFTER_FAILURE;
        assert_eq!(c.lookup("fires", retry), Lookup::Stale { value: &1, refresh: true });
        assert_eq!(c.lookup("fires", retry), Lookup::Stale { value: &1, refresh: false }, "exactly one lead");
        c.complete("fires", 2, retry);
        assert_eq!(c.lookup("fires", retry), Lookup::Fresh(&2));
    }

    #[test]
    fn a_first_fetch_that_fails_answers_failing_until_the_retry_then_leads_once() {
        for mut c in [snapshot(), results(true, 10), results(false, 10)] {
            assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
            assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: false });
            assert_eq!(c.fail("k", at(3)), None, "nothing to serve");
            let retry_at = at(3) + RETRY;
            assert_eq!(c.lookup("k", at(3)), Lookup::Failing { retry_at }, "the waiters do not call again");
            assert_eq!(c.lookup("k", retry_at - Span::from_nanos(1)), Lookup::Failing { retry_at });
            assert_eq!(c.lookup("k", retry_at), Lookup::Miss { lead: true });
            assert_eq!(c.lookup("k", retry_at), Lookup::Miss { lead: false });
        }
    }

    #[test]
    fn stale_if_error_serves_the_expired_result_for_the_retry_period_after_a_failure() {
        let mut c = results(true, 10);
        store(&mut c, "k", 1, at(0));
        let expired = at(0) + TTL;
        assert_eq!(c.lookup("k", expired), Lookup::Miss { lead: true });
        assert_eq!(c.fail("k", expired), Some(&1));
        assert_eq!(c.lookup("k", expired), Lookup::Stale { value: &1, refresh: false });
        assert_eq!(c.lookup("k", expired + RETRY - Span::from_nanos(1)), Lookup::Stale { value: &1, refresh: false });
        assert_eq!(c.lookup("k", expired + RETRY), Lookup::Miss { lead: true }, "then one call in front again");
        assert_eq!(c.lookup("k", expired + RETRY), Lookup::Miss { lead: false });
    }

    #[test]
    fn without_stale_if_error_a_failure_serves_nothing_and_holds_calls_back() {
        let mut c = results(false, 10);
        store(&mut c, "k", 1, at(0));
        let expired = at(0) + TTL;
        assert_eq!(c.lookup("k", expired), Lookup::Miss { lead: true });
        assert_eq!(c.fail("k", expired), None);
        let retry_at = expired + RETRY;
        assert_eq!(c.lookup("k", expired), Lookup::Failing { retry_at });
        assert_eq!(c.lookup("k", retry_at), Lookup::Miss { lead: true });
    }

    #[test]
    fn a_success_clears_the_failure_and_a_zero_retry_period_holds_nothing_back() {
        let mut c = results(false, 10);
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        c.fail("k", at(0));
        assert_eq!(c.lookup("k", at(61)), Lookup::Miss { lead: true });
        c.complete("k", 3, at(61));
        assert_eq!(c.lookup("k", at(61) + TTL), Lookup::Miss { lead: true }, "the old failure no longer counts");

        let policy = CachePolicy { retry_after_failure: Span::ZERO, ..*results(true, 10).policy() };
        let mut c: ResponseCache<u32> = ResponseCache::new(policy).unwrap();
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        c.fail("k", at(0));
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
    }

    #[test]
    fn an_abandoned_call_is_no_failure_and_lets_the_next_caller_lead() {
        let mut c = results(true, 10);
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        c.abandon("k");
        assert!(c.is_empty(), "nothing is remembered about a key that never had an answer");
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        c.complete("k", 1, at(0));

        let mut s = snapshot();
        store(&mut s, "fires", 1, at(0));
        assert_eq!(s.lookup("fires", at(600)), Lookup::Stale { value: &1, refresh: true });
        s.abandon("fires");
        assert_eq!(s.lookup("fires", at(600)), Lookup::Stale { value: &1, refresh: true }, "no retry wait");
        assert_eq!(s.len(), 1);
        s.abandon("missing");
        assert_eq!(s.fail("missing", at(0)), None);
        s.complete("missing", 9, at(0));
        assert_eq!(s.len(), 1, "a key the cache does not hold is not stored by complete");
    }

    #[test]
    fn a_full_cache_evicts_failure_records_first_then_the_value_stored_longest_ago() {
        let mut c = results(true, 3);
        store(&mut c, "a", 1, at(10));
        store(&mut c, "b", 2, at(5));
        assert_eq!(c.lookup("failed", at(20)), Lookup::Miss { lead: true });
        c.fail("failed", at(20));
        assert_eq!(c.len(), 3);

        // The failure record is the newest entry, but it goes first.
        assert_eq!(c.lookup("d", at(30)), Lookup::Miss { lead: true });
        assert_eq!(c.len(), 3);
        assert_eq!(c.lookup("a", at(30)), Lookup::Fresh(&1));
        assert_eq!(c.lookup("b", at(30)), Lookup::Fresh(&2));
        // Then b, stored at 5 s, before a, stored at 10 s, though a was looked up first.
        assert_eq!(c.lookup("failed", at(30)), Lookup::Miss { lead: true }, "no failure left to hold it back");
        assert_eq!(c.lookup("a", at(30)), Lookup::Fresh(&1));
        assert_eq!(c.lookup("b", at(30)), Lookup::Miss { lead: true }, "b made room for failed, a for b");
        assert_eq!(c.len(), 3);
        assert_eq!(c.lookup("a", at(30)), Lookup::Miss { lead: true }, "evicted");
    }

    #[test]
    fn a_full_cache_of_calls_in_flight_leads_a_new_key_without_recording_it() {
        let mut c = results(true, 2);
        assert_eq!(c.lookup("a", at(0)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("b", at(0)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("new", at(0)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("new", at(0)), Lookup::Miss { lead: true }, "not recorded: no single flight for it");
        assert_eq!(c.len(), 2);
        c.complete("new", 3, at(1));
        assert_eq!(c.len(), 2, "complete stores nothing for it");
        c.complete("a", 1, at(1));
        c.complete("b", 2, at(1));
        assert_eq!(c.lookup("a", at(1)), Lookup::Fresh(&1), "calls in flight are never evicted");
        assert_eq!(c.lookup("b", at(1)), Lookup::Fresh(&2));
    }

    #[test]
    fn the_bound_holds_under_a_hundred_thousand_distinct_keys() {
        let mut c = results(true, 100);
        for i in 0..100_000u32 {
            let k = key("/v1/forecast", &format!("latitude={i}"));
            let now = at(u64::from(i));
            match c.lookup(&k, now) {
                Lookup::Miss { lead: true } => {}
                other => panic!("{other:?} for a new key"),
            }
            match i % 3 {
                0 => drop(c.complete(&k, i, now)),
                1 => drop(c.fail(&k, now)),
                _ => {} // still in flight
            }
            assert!(c.len() <= 100, "{} entries after {i}", c.len());
        }
        assert_eq!(c.len(), 100);
    }

    #[test]
    fn keys_normalise_the_query_and_never_collide_across_the_path() {
        let k = |path, query| key(path, query);
        assert_eq!(k("/v1/forecast", "a=1&b=2"), k("/v1/forecast", "b=2&a=1"));
        assert_eq!(k("/v1/forecast", "&b=2&&a=1&"), "/v1/forecast\na=1&b=2");
        assert_ne!(k("/v1/forecast", "a=1"), k("/v1/forecast", "a=2"));
        assert_ne!(k("/v1/forecast", "a=1"), k("/v1/air-quality", "a=1"));
        assert_eq!(k("/x", "a=2&b=0&a=1"), "/x\na=2&a=1&b=0", "one name keeps its order");
        assert_ne!(k("/x", "a=1&a=2"), k("/x", "a=2&a=1"));
        assert_eq!(k("/x", "ab=1&a=2&a_=3&a"), "/x\na=2&a&a_=3&ab=1", "sorted by name, then by position");
        assert_ne!(k("x", ""), k("x?", ""));
        assert_ne!(k("x\na=1", ""), k("x", "a=1"));
        assert_ne!(k("x\\n", "a=1"), k("x\n", "a=1"));
        assert_eq!(k("x\n", "").to_string(), "x\\n\n");
        assert_eq!(k("", ""), "\n");
    }

    #[test]
    fn pairs_are_ordered_by_the_name_the_provider_decodes() {
        // The provider reads `a` twice in both, but in another order: not one key.
        assert_eq!(key("/x", "a=evil&%61=good"), "/x\na=evil&%61=good");
        assert_eq!(key("/x", "%61=good&a=evil"), "/x\n%61=good&a=evil");
        assert_eq!(key("/x", "b=1&%61=2"), "/x\n%61=2&b=1", "sorted as `a`, not as `%`");
        assert_eq!(key("/x", "a+b=1&a%20b=2&a=3"), "/x\na=3&a+b=1&a%20b=2", "`+` and `%20` are one name");
        assert_eq!(key("/x", "%zz=1&%=2"), "/x\n%=2&%zz=1", "a stray `%` is itself");
    }

    /// A value that weighs its number of bytes.
    #[derive(Debug, PartialEq)]
    struct Body(usize);

    impl ByteSize for Body {
        fn byte_size(&self) -> usize {
            self.0
        }
    }

    fn sized(max_entries: usize, max_bytes: usize) -> ResponseCache<Body> {
        ResponseCache::new(CachePolicy { max_entries, max_bytes, ..*results(true, 1).policy() }).unwrap()
    }

    #[test]
    fn the_bytes_held_never_pass_max_bytes_and_the_oldest_answers_make_room() {
        let mut c = sized(1_000, 10_000);
        for (i, k) in ["k1", "k2", "k3"].iter().enumerate() {
            assert_eq!(c.lookup(k, at(i as u64)), Lookup::Miss { lead: true });
            assert!(c.complete(k, Body(4_000), at(i as u64)));
            assert!(c.bytes() <= 10_000, "{} bytes", c.bytes());
        }
        assert_eq!(c.len(), 2, "k1 made room for k3");
        assert_eq!(c.bytes(), 2 * (4_000 + 2));
        assert_eq!(c.lookup("k1", at(3)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("k3", at(3)), Lookup::Fresh(&Body(4_000)));
    }

    #[test]
    fn an_answer_larger_than_the_whole_cache_is_not_kept_and_keeps_what_was_there() {
        let mut c = sized(10, 1_000);
        assert_eq!(c.lookup("k", at(0)), Lookup::Miss { lead: true });
        assert!(c.complete("k", Body(500), at(0)));
        assert_eq!(c.lookup("k", at(0) + TTL), Lookup::Miss { lead: true });
        assert!(!c.complete("k", Body(1_000), at(0) + TTL), "1,000 bytes and the key's 1 do not fit in 1,000");
        assert_eq!(c.bytes(), 501, "the old answer is still held");
        assert_eq!(c.lookup("k", at(0) + TTL), Lookup::Miss { lead: true }, "no longer in flight");
        assert_eq!(c.lookup("new", at(0)), Lookup::Miss { lead: true });
        assert!(!c.complete("new", Body(2_000), at(0)));
        assert_eq!(c.lookup("new", at(0)), Lookup::Miss { lead: true }, "forgotten, as if abandoned");
    }

    #[test]
    fn a_hundred_answers_of_2_mib_stay_within_the_bytes_of_the_cache() {
        const MIB: usize = 1 << 20;
        let mut c = sized(1_000, 32 * MIB);
        for i in 0..100u64 {
            let k = key("/v1/forecast", &format!("latitude={i}"));
            assert_eq!(c.lookup(&k, at(i)), Lookup::Miss { lead: true });
            assert!(c.complete(&k, Body(2 * MIB), at(i)));
            assert!(c.bytes() <= 32 * MIB);
        }
        assert_eq!(c.len(), 15, "15 answers of 2 MiB and their keys fit in 32 MiB");
    }

    #[test]
    fn calls_in_flight_are_never_evicted_to_make_room_for_bytes() {
        let mut c = sized(10, 100);
        assert_eq!(c.lookup("a", at(0)), Lookup::Miss { lead: true });
        assert_eq!(c.lookup("b", at(0)), Lookup::Miss { lead: true });
        assert!(!c.complete("b", Body(99), at(0)), "99 + b's key + a's key do not fit while a is in flight");
        assert!(c.complete("a", Body(50), at(0)));
        assert_eq!(c.lookup("b", at(1)), Lookup::Miss { lead: true });
        assert!(c.complete("b", Body(99), at(1)), "a, stored, makes room");
        assert_eq!(c.bytes(), 100);
        assert_eq!(c.lookup("a", at(1)), Lookup::Miss { lead: true });
    }

    #[test]
    fn an_answer_is_kept_only_when_the_provider_lets_it_be_shared() {
        let max = 1 << 20;
        assert_eq!(storable(200, None, None, None, max), Ok(()));
        assert_eq!(storable(200, Some("max-age=0, must-revalidate"), Some("Accept-Encoding"), None, max), Ok(()));
        assert_eq!(storable(500, None, None, None, max), Err(NotKept::Status(500)));
        assert_eq!(storable(429, None, None, None, max), Err(NotKept::Status(429)));
        assert_eq!(storable(200, Some("public, no-store"), None, None, max), Err(NotKept::NoStore));
        assert_eq!(storable(200, Some("private=\"set-cookie\""), None, None, max), Err(NotKept::Private));
        assert_eq!(storable(200, Some(" PRIVATE "), None, None, max), Err(NotKept::Private));
        assert_eq!(storable(200, None, Some(" * "), None, max), Err(NotKept::VaryAll));
        assert_eq!(storable(200, None, None, Some(max + 1), max), Err(NotKept::TooLarge));
        assert_eq!(storable(200, None, None, Some(max), max), Ok(()));
    }

    #[test]
    fn whole_call_keys_tell_apart_what_the_provider_may_answer_differently() {
        let get = |headers: &'static [(&'static str, &'static str)]| CallParts {
            method: "GET",
            path: "search",
            query: "q=berlin",
            headers,
            body: None,
        };
        let en = call_key(&get(&[("accept-language", "en")])).unwrap();
        assert_eq!(en, "GET search\nq=berlin\naccept-language: en\n\n");
        assert_ne!(en, call_key(&get(&[("accept-language", "de")])).unwrap());
        assert_ne!(en, call_key(&get(&[])).unwrap());
        let post = |body: &'static [u8], content_type| CallParts {
            method: "POST",
            path: "interpreter",
            query: "",
            headers: &[],
            body: Some((body, content_type)),
        };
        let form = "application/x-www-form-urlencoded; charset=UTF-8";
        assert_eq!(call_key(&post(b"b=2&data=x", form)), call_key(&post(b"data=x&b=2", form)), "a form is sorted");
        assert_ne!(
            call_key(&post(b"b=2&data=x", "text/plain")),
            call_key(&post(b"data=x&b=2", "text/plain")),
            "any other body is kept as it came"
        );
        assert_ne!(call_key(&post(b"", form)), call_key(&get(&[])), "a POST is never a GET");
        assert_eq!(call_key(&post(&[0xc3, 0x28], form)), None, "not UTF-8: not cached");
    }

    #[test]
    fn policies_that_could_hold_nothing_are_refused() {
        let policy = *results(true, 1).policy();
        let zero_ttl = CachePolicy { ttl: Span::ZERO, ..policy };
        let zero_room = CachePolicy { max_entries: 0, ..policy };
        let zero_bytes = CachePolicy { max_bytes: 0, ..policy };
        assert_eq!(ResponseCache::<u32>::new(zero_ttl).unwrap_err(), CachePolicyError::ZeroTtl);
        assert_eq!(ResponseCache::<u32>::new(zero_room).unwrap_err(), CachePolicyError::ZeroCapacity);
        assert_eq!(ResponseCache::<u32>::new(zero_bytes).unwrap_err(), CachePolicyError::ZeroCapacity);
        assert_eq!(CachePolicyError::ZeroTtl.to_string(), "the cache TTL must be longer than zero");
        assert_eq!(
            CachePolicyError::ZeroCapacity.to_string(),
            "the cache must hold at least 1 entry of at least 1 byte"
        );
        assert_eq!(
            format!("{:?}", snapshot()),
            format!(
                "ResponseCache {{ policy: {:?}, len: 0, bytes: 0, in_flight: 0 }}",
                CachePolicy::snapshot(Span::from_secs(600), 1 << 20)
            )
        );
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use alloc::collections::BTreeSet;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Lookup(u8),
            /// End the outstanding call at this index (modulo their number).
            Complete(usize),
            Fail(usize),
            Abandon(usize),
            Advance(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0u8..6).prop_map(Op::Lookup),
                2 => any::<usize>().prop_map(Op::Complete),
                2 => any::<usize>().prop_map(Op::Fail),
                1 => any::<usize>().prop_map(Op::Abandon),
                2 => (0u64..200).prop_map(Op::Advance),
            ]
        }

        fn policy() -> impl Strategy<Value = CachePolicy> {
            (1u64..100, any::<bool>(), any::<bool>(), 0u64..100, 1usize..8).prop_map(
                |(ttl, stale_if_error, refresh_behind, retry, max_entries)| CachePolicy {
                    ttl: Span::from_secs(ttl),
                    stale_if_error,
                    refresh_behind,
                    retry_after_failure: Span::from_secs(retry),
                    max_entries,
                    max_bytes: usize::MAX,
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1_000))]

            /// Leads of one key never overlap, except after a lead the cache could not record
            /// (possible only while more keys are led than it holds); a waiter always has a call
            /// to wait for; the bound holds.
            #[test]
            fn one_lead_per_key_and_the_bound_holds(policy in policy(), ops in prop::collection::vec(op(), 0..200)) {
                let mut cache: ResponseCache<u32> = ResponseCache::new(policy).unwrap();
                let mut now = at(1_000);
                // The calls led and not yet ended, by key; keys whose leads may overlap.
                let mut outstanding: Vec<u8> = Vec::new();
                let mut unrecorded: BTreeSet<u8> = BTreeSet::new();
                for op in ops {
                    let mut end = |i: usize| -> Option<u8> {
                        (!outstanding.is_empty()).then(|| outstanding.swap_remove(i % outstanding.len()))
                    };
                    match op {
                        Op::Lookup(k) => {
                            let name = [b'k', b'0' + k];
                            let name = core::str::from_utf8(&name).unwrap();
                            let answer = cache.lookup(name, now);
                            let leads = matches!(answer, Lookup::Miss { lead: true } | Lookup::Stale { refresh: true, .. });
                            if matches!(answer, Lookup::Miss { lead: false }) {
                                prop_assert!(outstanding.contains(&k), "told to wait for no call: k{}", k);
                            }
                            if leads {
                                prop_assert!(
                                    !outstanding.contains(&k) || unrecorded.contains(&k),
                                    "a second lead for k{}", k
                                );
                                outstanding.push(k);
                                // More keys led than the cache holds: this lead may be one it
                                // could not record, which a later lookup does not know of.
                                let busy: BTreeSet<u8> = outstanding.iter().copied().collect();
                                if busy.len() > policy.max_entries {
                                    unrecorded.insert(k);
                                }
                            }
                        }
                        Op::Complete(i) => if let Some(k) = end(i) {
                            let _ = cache.complete(core::str::from_utf8(&[b'k', b'0' + k]).unwrap(), u32::from(k), now);
                        },
                        Op::Fail(i) => if let Some(k) = end(i) {
                            let _ = cache.fail(core::str::from_utf8(&[b'k', b'0' + k]).unwrap(), now);
                        },
                        Op::Abandon(i) => if let Some(k) = end(i) {
                            cache.abandon(core::str::from_utf8(&[b'k', b'0' + k]).unwrap());
                        },
                        Op::Advance(s) => now = now + Span::from_secs(s),
                    }
                    unrecorded.retain(|k| outstanding.contains(k));
                    prop_assert!(cache.len() <= policy.max_entries, "{} entries", cache.len());
                }
            }
        }
    }
}
