//! A pure TTL cache of per-location responses, with single-flight bookkeeping.
//!
//! [`CacheKey`] normalises a request (coordinates rounded to a grid, parameters and their
//! values sorted) so that requests the upstream would answer identically share one entry.
//! [`LocationCache`] stores values for a fixed TTL counted from the *response*, holds at
//! most `max_entries` of them (least recently used evicted first), and remembers which keys
//! are being fetched so that a second identical request waits for the first instead of
//! spending upstream budget. Errors are never cached. It never reads a clock.

use crate::core::time::{Instant, Span};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// The most decimals a coordinate keeps (6 decimals ≈ 0.1 m).
pub const MAX_PRECISION: u8 = 6;

/// A normalised request: one grid cell and one canonical parameter set.
///
/// The canonical form is `lat,lon|name=v1,v2|…`: coordinates rounded to `precision`
/// decimals (half away from zero; `-0.0` and `0.0` are one key), parameters sorted by name,
/// and each parameter's comma-separated values sorted, so `"a,b"` and `"b,a"` are one key.
/// The characters `%`, `|`, `=` and `,` inside names and values are percent-escaped, so
/// distinct parameter sets never collide.
///
/// # Examples
/// ```
/// use sluicegate::cache::CacheKey;
/// let a = CacheKey::new(52.5200, 13.4071, &[("days", "16"), ("daily", "temperature_2m_max,precipitation_sum")], 2).unwrap();
/// let b = CacheKey::new(52.5249, 13.4149, &[("daily", "precipitation_sum,temperature_2m_max"), ("days", "16")], 2).unwrap();
/// assert_eq!(a, b);
/// assert_eq!(a.as_str(), "52.52,13.41|daily=precipitation_sum,temperature_2m_max|days=16");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheKey(String);

/// Why a [`CacheKey`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyError {
    /// The latitude is not a finite number in [-90, 90].
    Latitude,
    /// The longitude is not a finite number in [-180, 180].
    Longitude,
    /// More decimals than [`MAX_PRECISION`].
    Precision {
        /// The precision asked for.
        precision: u8,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Latitude => f.write_str("latitude must be a finite number in [-90, 90]"),
            KeyError::Longitude => f.write_str("longitude must be a finite number in [-180, 180]"),
            KeyError::Precision { precision } => {
                write!(f, "precision must be 0 to {MAX_PRECISION} decimals, not {precision}")
            }
        }
    }
}

impl CacheKey {
    /// The key of a request for the point (`lat`, `lon`) rounded to `precision` decimals,
    /// with query parameters `params` (name, comma-separated values).
    ///
    /// # Errors
    /// [`KeyError::Latitude`] or [`KeyError::Longitude`] for a coordinate out of range or
    /// not finite; [`KeyError::Precision`] above [`MAX_PRECISION`].
    pub fn new(lat: f64, lon: f64, params: &[(&str, &str)], precision: u8) -> Result<CacheKey, KeyError> {
        if !(-90.0..=90.0).contains(&lat) {
            return Err(KeyError::Latitude);
        }
        if !(-180.0..=180.0).contains(&lon) {
            return Err(KeyError::Longitude);
        }
        if precision > MAX_PRECISION {
            return Err(KeyError::Precision { precision });
        }
        let mut key = String::new();
        push_coordinate(&mut key, lat, precision);
        key.push(',');
        push_coordinate(&mut key, lon, precision);

        let mut pairs: Vec<(String, String)> = params
            .iter()
            .map(|(name, values)| {
                let mut parts: Vec<String> = values.split(',').map(escape).collect();
                crate::core::sort::sort_by(&mut parts, |a, b| a < b);
                (escape(name), parts.join(","))
            })
            .collect();
        crate::core::sort::sort_by(&mut pairs, |a, b| a < b);
        for (name, values) in pairs {
            key.push('|');
            key.push_str(&name);
            key.push('=');
            key.push_str(&values);
        }
        Ok(CacheKey(key))
    }

    /// A key from its canonical form, as [`CacheKey::as_str`] gave it (for bindings that
    /// hand the key out and back).
    #[cfg_attr(not(feature = "wasm"), allow(dead_code))]
    pub(crate) fn from_canonical(canonical: String) -> CacheKey {
        CacheKey(canonical)
    }

    /// The canonical form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Append `value` rounded half away from zero to `precision` decimals, in integers (no
/// `f64::round` in `core`).
fn push_coordinate(out: &mut String, value: f64, precision: u8) {
    let scale = 10_i64.pow(u32::from(precision));
    let scaled = value * scale as f64;
    // `as` truncates toward zero; the range checks keep |scaled| ≤ 1.8e8.
    let rounded = if scaled < 0.0 { (scaled - 0.5) as i64 } else { (scaled + 0.5) as i64 };
    let sign = if rounded < 0 { "-" } else { "" };
    let magnitude = rounded.unsigned_abs();
    let scale = scale.unsigned_abs();
    // Writing to a String cannot fail.
    let _ = if precision == 0 {
        write!(out, "{sign}{magnitude}")
    } else {
        write!(out, "{sign}{}.{:0width$}", magnitude / scale, magnitude % scale, width = usize::from(precision))
    };
}

/// Percent-escape the characters the canonical form uses as separators.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            ',' => out.push_str("%2C"),
            '=' => out.push_str("%3D"),
            '|' => out.push_str("%7C"),
            _ => out.push(c),
        }
    }
    out
}

/// What [`LocationCache::lookup`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<V> {
    /// A live value (a copy); its key is now the most recently used.
    Hit(V),
    /// An identical request is in flight: wait for it rather than fetch again.
    Pending,
    /// Nothing stored and nothing in flight: the caller must fetch, and must then call
    /// [`complete`](LocationCache::complete) or [`fail`](LocationCache::fail). The key is now
    /// marked in flight.
    Miss,
}

/// A [`LocationCache`] configuration that could hold nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheConfigError {
    /// A TTL of zero: every value would be expired when stored.
    ZeroTtl,
    /// Room for no entries.
    ZeroCapacity,
}

impl fmt::Display for CacheConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CacheConfigError::ZeroTtl => "the cache TTL must be longer than zero",
            CacheConfigError::ZeroCapacity => "the cache must hold at least 1 entry",
        })
    }
}

struct Entry<V> {
    value: V,
    expires: Instant,
    used: u64,
}

/// Values by [`CacheKey`], each alive for `ttl` from its response, at most `max_entries` of
/// them, with single-flight marks.
///
/// ```text
/// ttl 60 s:
/// t(s)   0       0.5       5            64.9    65
///        Miss    Pending   complete     Hit     Miss     (lives 60 s from the response at 5 s)
/// ```
///
/// Expired entries are dropped when looked up or when room is needed; the least recently
/// used live entry is evicted only when none has expired. Look-ups are O(1); making room in
/// a full cache scans it (O(n)), which keeps the code small for the browser.
///
/// # Examples
/// ```
/// use sluicegate::cache::{CacheKey, LocationCache, Lookup};
/// use sluicegate::{Instant, Span};
/// let mut cache: LocationCache<&str> = LocationCache::new(Span::from_secs(60), 1_000).unwrap();
/// let key = CacheKey::new(52.52, 13.41, &[("daily", "temperature_2m_max")], 2).unwrap();
/// let t = Instant::from_secs(100);
/// assert_eq!(cache.lookup(&key, t), Lookup::Miss);
/// assert_eq!(cache.lookup(&key, t), Lookup::Pending);
/// cache.complete(&key, "{…}", t + Span::from_secs(2));
/// assert_eq!(cache.lookup(&key, t + Span::from_secs(61)), Lookup::Hit("{…}"));
/// assert_eq!(cache.lookup(&key, t + Span::from_secs(62)), Lookup::Miss);
/// ```
pub struct LocationCache<V> {
    ttl: Span,
    max_entries: usize,
    /// Stored values and in-flight marks, in one table.
    slots: HashMap<CacheKey, Slot<V>, FixedState>,
    stored: usize,
    uses: u64,
}

enum Slot<V> {
    Pending,
    Ready(Entry<V>),
}

impl<V> LocationCache<V> {
    /// A cache whose values live `ttl` and which holds at most `max_entries` of them.
    ///
    /// # Errors
    /// [`CacheConfigError::ZeroTtl`] or [`CacheConfigError::ZeroCapacity`].
    pub fn new(ttl: Span, max_entries: usize) -> Result<Self, CacheConfigError> {
        if ttl.is_zero() {
            return Err(CacheConfigError::ZeroTtl);
        }
        if max_entries == 0 {
            return Err(CacheConfigError::ZeroCapacity);
        }
        let slots = HashMap::with_hasher(FixedState::with_seed(0x5eed_cace));
        Ok(LocationCache { ttl, max_entries, slots, stored: 0, uses: 0 })
    }

    /// Look `key` up at `now`: a live value, an identical request in flight, or a miss
    /// (which marks `key` in flight). A value is live until `stored + ttl`, exclusive.
    pub fn lookup(&mut self, key: &CacheKey, now: Instant) -> Lookup<V>
    where
        V: Clone,
    {
        self.uses += 1;
        let used = self.uses;
        match self.slots.get_mut(key) {
            Some(Slot::Pending) => return Lookup::Pending,
            Some(Slot::Ready(entry)) if now < entry.expires => {
                entry.used = used;
                return Lookup::Hit(entry.value.clone());
            }
            Some(Slot::Ready(_)) => self.stored -= 1,
            None => {}
        }
        self.slots.insert(key.clone(), Slot::Pending);
        Lookup::Miss
    }

    /// Store the response to `key` that arrived at `now`: it lives until `now + ttl`. Clears
    /// the in-flight mark. Makes room first by dropping expired entries, then the least
    /// recently used.
    pub fn complete(&mut self, key: &CacheKey, value: V, now: Instant) {
        self.insert(key.clone(), value, now + self.ttl, now);
    }

    /// The fetch of `key` failed: clear its in-flight mark and cache nothing, so the next
    /// lookup is a [`Miss`](Lookup::Miss).
    pub fn fail(&mut self, key: &CacheKey) {
        if matches!(self.slots.get(key), Some(Slot::Pending)) {
            self.slots.remove(key);
        }
    }

    /// Drop every entry expired at `now`; returns how many.
    pub fn purge(&mut self, now: Instant) -> usize {
        let before = self.stored;
        self.slots.retain(|_, slot| !matches!(slot, Slot::Ready(e) if e.expires <= now));
        self.stored = self.slots.values().filter(|s| matches!(s, Slot::Ready(_))).count();
        before - self.stored
    }

    /// Stored values, including expired ones not yet dropped (see [`purge`](Self::purge)).
    pub fn len(&self) -> usize {
        self.stored
    }

    /// Whether no value is stored.
    pub fn is_empty(&self) -> bool {
        self.stored == 0
    }

    /// Keys being fetched (they do not count toward `max_entries`).
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.stored
    }

    /// How long a value lives.
    pub fn ttl(&self) -> Span {
        self.ttl
    }

    /// The most values held at once.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The live entries at `now` as (canonical key, value, remaining TTL), least recently
    /// used first, for persisting. Feeding them to [`import`](Self::import) restores the
    /// same recency order.
    pub fn export(&self, now: Instant) -> Vec<(String, V, Span)>
    where
        V: Clone,
    {
        let mut live: Vec<(u64, &CacheKey, &Entry<V>)> = self
            .slots
            .iter()
            .filter_map(|(k, slot)| match slot {
                Slot::Ready(e) if now < e.expires => Some((e.used, k, e)),
                _ => None,
            })
            .collect();
        crate::core::sort::sort_by(&mut live, |a, b| a.0 < b.0);
        live.into_iter().map(|(_, k, e)| (k.0.clone(), e.value.clone(), e.expires - now)).collect()
    }

    /// Load persisted entries at `now`, each becoming the most recently used in turn. An
    /// entry with no time left is skipped; a remaining TTL longer than this cache's TTL is
    /// shortened to it. Existing entries for the same keys are replaced. Returns how many
    /// were loaded (the bound still applies: later ones may evict earlier ones).
    pub fn import<I>(&mut self, entries: I, now: Instant) -> usize
    where
        I: IntoIterator<Item = (String, V, Span)>,
    {
        let mut loaded = 0;
        for (key, value, remaining) in entries {
            if remaining.is_zero() {
                continue;
            }
            self.insert(CacheKey(key), value, now + remaining.min(self.ttl), now);
            loaded += 1;
        }
        loaded
    }

    fn insert(&mut self, key: CacheKey, value: V, expires: Instant, now: Instant) {
        if let Some(Slot::Ready(_)) = self.slots.remove(&key) {
            self.stored -= 1;
        }
        if self.stored >= self.max_entries {
            self.purge(now);
        }
        while self.stored >= self.max_entries {
            let oldest = self
                .slots
                .iter()
                .filter_map(|(k, slot)| match slot {
                    Slot::Ready(e) => Some((e.used, k)),
                    Slot::Pending => None,
                })
                .min_by_key(|(used, _)| *used)
                .map(|(_, k)| k.clone());
            let Some(oldest) = oldest else { break };
            self.slots.remove(&oldest);
            self.stored -= 1;
        }
        self.uses += 1;
        self.slots.insert(key, Slot::Ready(Entry { value, expires, used: self.uses }));
        self.stored += 1;
    }
}

impl<V> fmt::Debug for LocationCache<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocationCache")
            .field("ttl", &self.ttl)
            .field("max_entries", &self.max_entries)
            .field("len", &self.stored)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    const DAILY: (&str, &str) = ("daily", "temperature_2m_max");

    fn key(lat: f64, lon: f64) -> CacheKey {
        CacheKey::new(lat, lon, &[DAILY], 2).unwrap()
    }

    fn cache(max_entries: usize) -> LocationCache<u32> {
        LocationCache::new(Span::from_secs(60), max_entries).unwrap()
    }

    /// Store `value` under `key` through the normal Miss → complete path.
    fn store(c: &mut LocationCache<u32>, k: &CacheKey, value: u32, now: Instant) {
        assert_eq!(c.lookup(k, now), Lookup::Miss);
        c.complete(k, value, now);
    }

    #[test]
    fn a_slow_response_still_lives_a_full_ttl_from_its_arrival() {
        let mut c = cache(10);
        let k = key(52.52, 13.41);
        let asked = Instant::from_secs(1_000);
        assert_eq!(c.lookup(&k, asked), Lookup::Miss);
        let answered = asked + Span::from_secs(20);
        c.complete(&k, 7, answered);
        assert_eq!(c.lookup(&k, asked + Span::from_secs(79)), Lookup::Hit(7));
        assert_eq!(c.lookup(&k, asked + Span::from_secs(80)), Lookup::Miss);
    }

    #[test]
    fn an_entry_expires_at_exactly_stored_plus_ttl() {
        let mut c = cache(10);
        let k = key(1.0, 2.0);
        let t = Instant::from_secs(5);
        store(&mut c, &k, 1, t);
        let expiry = t + Span::from_secs(60);
        assert_eq!(c.lookup(&k, expiry - Span::from_nanos(1)), Lookup::Hit(1));
        assert_eq!(c.lookup(&k, expiry), Lookup::Miss);
        assert_eq!(c.len(), 0, "the expired value is dropped");
        assert_eq!(c.in_flight(), 1, "and the miss marks the key in flight");
    }

    #[test]
    fn coordinates_round_half_away_from_zero_to_the_grid() {
        assert_eq!(key(52.5249, 13.4051), key(52.5151, 13.4149));
        assert_ne!(key(52.5249, 13.41), key(52.5251, 13.41));
        assert_eq!(key(-33.8651, 151.2099).as_str(), "-33.87,151.21|daily=temperature_2m_max");
        assert_eq!(CacheKey::new(52.5, -0.5, &[], 0).unwrap().as_str(), "53,-1");
        assert_eq!(CacheKey::new(90.0, -180.0, &[], 6).unwrap().as_str(), "90.000000,-180.000000");
        assert_eq!(CacheKey::new(0.000_04, 0.0, &[], 4).unwrap().as_str(), "0.0000,0.0000");
    }

    #[test]
    fn negative_zero_and_zero_are_one_key() {
        assert_eq!(key(-0.0, -0.0), key(0.0, 0.0));
        assert_eq!(key(-0.001, 0.001), key(0.0, 0.0));
        assert_eq!(key(-0.0, 0.0).as_str(), "0.00,0.00|daily=temperature_2m_max");
    }

    #[test]
    fn parameter_order_and_value_order_do_not_matter() {
        let a = CacheKey::new(1.0, 2.0, &[("models", "icon,gfs"), ("daily", "b,a"), ("days", "16")], 2).unwrap();
        let b = CacheKey::new(1.0, 2.0, &[("days", "16"), ("daily", "a,b"), ("models", "gfs,icon")], 2).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "1.00,2.00|daily=a,b|days=16|models=gfs,icon");
        assert_ne!(a, CacheKey::new(1.0, 2.0, &[("daily", "a,b"), ("days", "7"), ("models", "gfs,icon")], 2).unwrap());
    }

    #[test]
    fn separators_inside_names_and_values_cannot_forge_another_key() {
        let smuggled = CacheKey::new(1.0, 2.0, &[("a", "x|b=y")], 2).unwrap();
        let honest = CacheKey::new(1.0, 2.0, &[("a", "x"), ("b", "y")], 2).unwrap();
        assert_ne!(smuggled, honest);
        assert_eq!(smuggled.as_str(), "1.00,2.00|a=x%7Cb%3Dy");
        assert_ne!(
            CacheKey::new(1.0, 2.0, &[("a", "%7C")], 2).unwrap(),
            CacheKey::new(1.0, 2.0, &[("a", "|")], 2).unwrap()
        );
    }

    #[test]
    fn invalid_coordinates_and_precisions_are_refused_naming_the_field() {
        assert_eq!(CacheKey::new(90.01, 0.0, &[], 2), Err(KeyError::Latitude));
        assert_eq!(CacheKey::new(f64::NAN, 0.0, &[], 2), Err(KeyError::Latitude));
        assert_eq!(CacheKey::new(0.0, -180.5, &[], 2), Err(KeyError::Longitude));
        assert_eq!(CacheKey::new(0.0, f64::INFINITY, &[], 2), Err(KeyError::Longitude));
        assert_eq!(CacheKey::new(0.0, 0.0, &[], 7), Err(KeyError::Precision { precision: 7 }));
        assert_eq!(KeyError::Longitude.to_string(), "longitude must be a finite number in [-180, 180]");
        assert_eq!(LocationCache::<u32>::new(Span::ZERO, 1).unwrap_err(), CacheConfigError::ZeroTtl);
        assert_eq!(LocationCache::<u32>::new(Span::from_secs(1), 0).unwrap_err(), CacheConfigError::ZeroCapacity);
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_used() {
        let mut c = cache(2);
        let t = Instant::from_secs(1);
        let (a, b, d) = (key(1.0, 1.0), key(2.0, 2.0), key(3.0, 3.0));
        store(&mut c, &a, 1, t);
        store(&mut c, &b, 2, t);
        store(&mut c, &d, 3, t);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(&b, t), Lookup::Hit(2));
        assert_eq!(c.lookup(&d, t), Lookup::Hit(3));
        assert_eq!(c.lookup(&a, t), Lookup::Miss);
    }

    #[test]
    fn a_hit_makes_its_entry_the_most_recently_used() {
        let mut c = cache(2);
        let t = Instant::from_secs(1);
        let (a, b, d) = (key(1.0, 1.0), key(2.0, 2.0), key(3.0, 3.0));
        store(&mut c, &a, 1, t);
        store(&mut c, &b, 2, t);
        assert_eq!(c.lookup(&a, t), Lookup::Hit(1));
        store(&mut c, &d, 3, t);
        assert_eq!(c.lookup(&a, t), Lookup::Hit(1));
        assert_eq!(c.lookup(&b, t), Lookup::Miss);
    }

    #[test]
    fn room_is_made_from_expired_entries_before_live_ones() {
        let mut c = cache(2);
        let (a, b, d) = (key(1.0, 1.0), key(2.0, 2.0), key(3.0, 3.0));
        let t = Instant::from_secs(100);
        store(&mut c, &a, 1, t);
        c.import([(b.as_str().to_string(), 2, Span::from_secs(5))], t);
        // b is the most recently used but expired at 105 s; a is older by use but live.
        let later = t + Span::from_secs(6);
        c.complete(&d, 3, later);
        assert_eq!(c.lookup(&a, later), Lookup::Hit(1));
        assert_eq!(c.lookup(&d, later), Lookup::Hit(3));
        assert_eq!(c.purge(Instant::from_secs(1_000)), 2);
        assert!(c.is_empty());
    }

    #[test]
    fn an_identical_request_in_flight_is_waited_for_not_refetched() {
        let mut c = cache(10);
        let k = key(1.0, 2.0);
        let t = Instant::from_secs(1);
        assert_eq!(c.lookup(&k, t), Lookup::Miss);
        assert_eq!(c.lookup(&k, t), Lookup::Pending);
        assert_eq!(c.lookup(&key(1.0, 2.001), t), Lookup::Pending, "the same grid cell");
        assert_eq!(c.lookup(&key(1.0, 3.0), t), Lookup::Miss, "another cell fetches on its own");
        c.complete(&k, 9, t);
        assert_eq!(c.lookup(&k, t), Lookup::Hit(9));
        assert_eq!(c.in_flight(), 1);
    }

    #[test]
    fn a_failed_fetch_caches_nothing_and_lets_the_next_caller_fetch() {
        let mut c = cache(10);
        let k = key(1.0, 2.0);
        let t = Instant::from_secs(1);
        assert_eq!(c.lookup(&k, t), Lookup::Miss);
        assert_eq!(c.lookup(&k, t), Lookup::Pending);
        c.fail(&k);
        assert_eq!(c.len(), 0);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.lookup(&k, t), Lookup::Miss);
    }

    #[test]
    fn in_flight_marks_do_not_count_toward_the_bound() {
        let mut c = cache(1);
        let t = Instant::from_secs(1);
        for lat in 1..=5 {
            assert_eq!(c.lookup(&key(f64::from(lat), 0.0), t), Lookup::Miss);
        }
        assert_eq!(c.in_flight(), 5);
        c.complete(&key(1.0, 0.0), 1, t);
        c.complete(&key(2.0, 0.0), 2, t);
        assert_eq!(c.len(), 1);
        assert_eq!(c.in_flight(), 3);
        assert_eq!(c.lookup(&key(2.0, 0.0), t), Lookup::Hit(2));
    }

    #[test]
    fn exported_entries_import_with_their_remaining_ttl_and_recency() {
        let mut c = cache(10);
        let (a, b, d) = (key(1.0, 1.0), key(2.0, 2.0), key(3.0, 3.0));
        store(&mut c, &a, 1, Instant::from_secs(0));
        store(&mut c, &b, 2, Instant::from_secs(30));
        store(&mut c, &d, 3, Instant::from_secs(40));
        assert_eq!(c.lookup(&b, Instant::from_secs(40)), Lookup::Hit(2));
        let saved = c.export(Instant::from_secs(60));
        assert_eq!(
            saved,
            vec![(d.as_str().to_string(), 3, Span::from_secs(40)), (b.as_str().to_string(), 2, Span::from_secs(30))],
            "a expired at 60 s; d was used before b"
        );

        let mut restored = cache(1);
        assert_eq!(restored.import(saved, Instant::from_secs(1_000)), 2);
        assert_eq!(restored.len(), 1, "the bound keeps the most recently used");
        assert_eq!(restored.lookup(&b, Instant::from_secs(1_029)), Lookup::Hit(2));
        assert_eq!(restored.lookup(&b, Instant::from_secs(1_030)), Lookup::Miss);
    }

    #[test]
    fn import_skips_spent_entries_and_caps_the_rest_at_the_ttl() {
        let mut c = cache(10);
        let t = Instant::from_secs(10);
        let entries = vec![("x".to_string(), 1, Span::ZERO), ("y".to_string(), 2, Span::from_secs(3_600))];
        assert_eq!(c.import(entries, t), 1);
        assert_eq!(c.export(t), vec![("y".to_string(), 2, Span::from_secs(60))]);
    }
}
