//! §2–§8: the per-organization limiter that routes each request by its URL.

use super::bucket::TokenBucket;
use super::cache::{self, CacheLoad};
use super::cooldown::{Cooldowns, SaveBackoff, Target};
use super::response::{
    Field, ResponseBody, NETWORK_ID, NETWORK_NESTED_ID, ORGANIZATION_ID, ORGANIZATION_NESTED_ID, SERIAL,
};
use super::url::{self, IdKind};
use super::{
    check_time, SmartFlowError, DECREASE_FACTOR, DEFAULT_CACHE_TTL, DEFAULT_GLOBAL_RATE, DEFAULT_ORG_CAPACITY,
    DEFAULT_ORG_RATE, FLUSH_THRESHOLD, GLOBAL_INCREASE, ORG_INCREASE,
};
use crate::core::time::{Instant, Span};
use alloc::borrow::{Cow, ToOwned};
use alloc::string::String;
use alloc::vec::Vec;
use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashSet};
use serde_json::Value;

type Map<V> = HashMap<String, V, FixedState>;
type Set = HashSet<String, FixedState>;

/// The configured limits (§2) and cache TTL (§7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Each organization's rate, tokens per second; also the ceiling additive increase
    /// climbs back to.
    pub org_rate: f64,
    /// Each organization's capacity, tokens.
    pub org_capacity: f64,
    /// The global (per source IP) rate, tokens per second; its capacity is the whole part
    /// of this (see [`Config::global_capacity`]).
    pub global_rate: f64,
    /// How long a persisted cache stays fresh, seconds; `None`: it never expires.
    pub cache_ttl: Option<f64>,
}

impl Default for Config {
    /// Rate 10 and capacity 10 per organization, rate 100 (capacity 100) globally, a
    /// seven-day cache.
    fn default() -> Self {
        Config {
            org_rate: DEFAULT_ORG_RATE,
            org_capacity: DEFAULT_ORG_CAPACITY,
            global_rate: DEFAULT_GLOBAL_RATE,
            cache_ttl: Some(DEFAULT_CACHE_TTL),
        }
    }
}

impl Config {
    /// The global bucket's capacity: `int(global_rate)`, the rate's whole part.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::Config;
    /// assert_eq!(Config { global_rate: 99.9, ..Config::default() }.global_capacity(), 99.0);
    /// ```
    pub fn global_capacity(&self) -> f64 {
        // Truncation of a positive finite rate (`f64::trunc` is not in `core`); rates
        // beyond u64 saturate, far past any meaningful capacity.
        self.global_rate as u64 as f64
    }

    fn validate(&self) -> Result<(), SmartFlowError> {
        for rate in [self.org_rate, self.global_rate] {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(SmartFlowError::InvalidRate(rate));
            }
        }
        if !(self.org_capacity.is_finite() && self.org_capacity >= 0.0) {
            return Err(SmartFlowError::InvalidCapacity(self.org_capacity));
        }
        match self.cache_ttl {
            Some(ttl) if !(ttl.is_finite() && ttl >= 0.0) => Err(SmartFlowError::InvalidTtl(ttl)),
            _ => Ok(()),
        }
    }
}

/// Finds which organization owns a network or device the limiter has not learned (§8):
/// the reference's `resolver(id_type, identifier)`. Closures
/// `FnMut(IdKind, &str) -> Option<String>` are resolvers.
pub trait Resolver {
    /// The organization owning `identifier`, or `None` when it cannot be found (a failed
    /// lookup is a `None` too).
    fn resolve(&mut self, kind: IdKind, identifier: &str) -> Option<String>;
}

impl<F: FnMut(IdKind, &str) -> Option<String>> Resolver for F {
    fn resolve(&mut self, kind: IdKind, identifier: &str) -> Option<String> {
        self(kind, identifier)
    }
}

/// Registers every network and device of an organization at once (§8), through
/// [`OrgRateLimiter::register_network`] and [`OrgRateLimiter::register_device`]: the
/// reference's `hydrator(org_id)`. Called once per organization, after its first
/// resolution. Closures `FnMut(&str, &mut OrgRateLimiter)` are hydrators.
pub trait Hydrator {
    /// Register what `org_id` owns.
    fn hydrate(&mut self, org_id: &str, limiter: &mut OrgRateLimiter);
}

impl<F: FnMut(&str, &mut OrgRateLimiter)> Hydrator for F {
    fn hydrate(&mut self, org_id: &str, limiter: &mut OrgRateLimiter) {
        self(org_id, limiter)
    }
}

/// A lookup to run in the background (the async path, §4): which organization owns this
/// identifier? Report the answer with [`OrgRateLimiter::finish_lookup`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// Network or device.
    pub kind: IdKind,
    /// The network id or serial.
    pub identifier: String,
}

/// The answer of [`OrgRateLimiter::acquire_async`].
#[derive(Clone, Debug, PartialEq)]
pub struct Acquired {
    /// Seconds to wait before sending.
    pub wait: f64,
    /// A lookup to start in the background, when the request's organization is unknown and
    /// no lookup of its identifier is already pending.
    pub lookup: Option<Lookup>,
}

/// Which bucket a 429 tightened (§5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Penalty {
    /// The request's organization bucket.
    Org,
    /// None: the URL names a network or device of a not yet known organization, and
    /// punishing the global bucket would punish every other organization for it.
    SkippedUnresolved,
    /// The global bucket.
    Global,
}

/// How many mappings [`OrgRateLimiter::learn_from_response`] changed (§6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    /// Network → organization mappings added or changed.
    pub networks: u32,
    /// Serial → organization mappings added or changed.
    pub devices: u32,
}

impl Learned {
    /// All mappings changed.
    pub fn total(&self) -> u32 {
        self.networks + self.devices
    }
}

/// The Smart Flow limiter: a global bucket, one bucket per organization, and the learned
/// network → organization and serial → organization mappings that route requests to them.
///
/// Every request is charged to the global bucket first, then to its organization's bucket
/// when the organization can be resolved from the URL (§3, §4). An unresolved request pays
/// only the global cost until its organization is learned: from responses
/// ([`learn_from_response`](OrgRateLimiter::learn_from_response)), from a resolver (inline
/// in [`acquire_sync`](OrgRateLimiter::acquire_sync), in the background after
/// [`acquire_async`](OrgRateLimiter::acquire_async)), from a hydrator, or from a persisted
/// cache ([`load_cache`](OrgRateLimiter::load_cache)).
///
/// **Waits add up.** The reference sleeps for the global wait *and then* charges the
/// organization bucket, whose clock has moved on by that wait, and sleeps again. So the
/// organization is charged at `now + global_wait`, and the wait returned is
/// `global_wait + org_wait`. Both reservations are made at once (the caller sleeps outside
/// any lock, once, for the total).
///
/// Acquiring for an organization whose bucket exists does not allocate.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::{Config, OrgRateLimiter};
/// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
/// limiter.register_network("N_1", "O_1").unwrap();
/// for _ in 0..10 {
///     assert_eq!(limiter.acquire("/networks/N_1/clients", 0.0).unwrap(), 0.0);
/// }
/// // The eleventh call in the same instant waits for O_1's bucket (rate 10): 0.1 s.
/// assert!((limiter.acquire("/organizations/O_1/admins", 0.0).unwrap() - 0.1).abs() < 1e-9);
/// // Another organization is not held up.
/// assert_eq!(limiter.acquire("/organizations/O_2/admins", 0.0).unwrap(), 0.0);
/// ```
#[derive(Clone, Debug)]
pub struct OrgRateLimiter {
    config: Config,
    global: TokenBucket,
    /// A fresh organization bucket, copied for each new organization.
    org_prototype: TokenBucket,
    org_buckets: Map<TokenBucket>,
    network_to_org: Map<String>,
    serial_to_org: Map<String>,
    dirty: u64,
    cache_fresh: bool,
    pending_lookups: Set,
    hydrated_orgs: Set,
    cooldowns: Cooldowns,
    save_backoff: SaveBackoff,
}

impl OrgRateLimiter {
    /// A limiter with no organization known yet.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidRate`] for a rate that is not a finite number above zero,
    /// [`SmartFlowError::InvalidCapacity`] for a capacity that is not a finite number of at
    /// least zero, [`SmartFlowError::InvalidTtl`] for a TTL that is not a finite number of at
    /// least zero seconds.
    pub fn new(config: Config) -> Result<Self, SmartFlowError> {
        config.validate()?;
        Ok(OrgRateLimiter {
            global: TokenBucket::new(config.global_rate, config.global_capacity())?,
            org_prototype: TokenBucket::new(config.org_rate, config.org_capacity)?,
            config,
            org_buckets: Map::default(),
            network_to_org: Map::default(),
            serial_to_org: Map::default(),
            dirty: 0,
            cache_fresh: false,
            pending_lookups: Set::default(),
            hydrated_orgs: Set::default(),
            cooldowns: Cooldowns::default(),
            save_backoff: SaveBackoff::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The organization a request URL belongs to (§3): the one it names explicitly, else
    /// the one its network id is mapped to, else the one its serial is mapped to. Only the
    /// first identifier found is consulted: a URL naming an unmapped network is unresolved
    /// even if it also names a mapped device. An empty organization id counts as none.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, OrgRateLimiter};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// limiter.register_network("N_1", "O_2").unwrap();
    /// assert_eq!(limiter.resolve_org("/organizations/O_1/networks/N_1"), Some("O_1"));
    /// assert_eq!(limiter.resolve_org("/networks/N_1/clients"), Some("O_2"));
    /// assert_eq!(limiter.resolve_org("/networks/N_9/clients"), None);
    /// ```
    pub fn resolve_org<'a>(&'a self, url: &'a str) -> Option<&'a str> {
        resolve(&self.network_to_org, &self.serial_to_org, url)
    }

    /// Reserve a request to `url` at `now` (monotonic seconds) and return how many seconds
    /// to wait before sending it (§4), with no resolver: the global bucket is charged, and
    /// the organization's bucket (created on first use) when the URL resolves.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`; nothing is charged.
    pub fn acquire(&mut self, url: &str, now: f64) -> Result<f64, SmartFlowError> {
        let now = check_time(now)?;
        let global_wait = self.global.reserve(now);
        Ok(global_wait + self.charge_org(url, now + global_wait))
    }

    /// The synchronous path of §4: as [`acquire`](OrgRateLimiter::acquire), but a request
    /// whose organization is unknown has its network (else device) resolved **inline**,
    /// and a freshly resolved organization is charged in the same call.
    ///
    /// The lookup is skipped while one of the same identifier is pending. A resolved
    /// organization is mapped, gets a bucket, and counts one changed mapping (even when the
    /// mapping already held that value, as in the reference); the first resolution of an
    /// organization then runs `hydrator` (at most once per organization, see
    /// [`claim_hydration`](OrgRateLimiter::claim_hydration)). The organization is
    /// resolved again afterwards, so a hydrator's registrations win. The resolver and
    /// hydrator take no time in the injected clock: the organization is charged at
    /// `now + global_wait`. Saving is the caller's: check
    /// [`flush_due`](OrgRateLimiter::flush_due) afterwards.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`; nothing is charged and no
    /// resolver is called.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, IdKind, OrgRateLimiter};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// let mut resolver = |_kind: IdKind, _id: &str| Some(String::from("O_1"));
    /// let wait = limiter.acquire_sync("/networks/N_1/clients", 0.0, &mut resolver, None).unwrap();
    /// assert_eq!(wait, 0.0);
    /// assert_eq!(limiter.bucket("O_1").unwrap().tokens(), 9.0); // charged in the same call
    /// ```
    pub fn acquire_sync(
        &mut self,
        url: &str,
        now: f64,
        resolver: &mut dyn Resolver,
        hydrator: Option<&mut dyn Hydrator>,
    ) -> Result<f64, SmartFlowError> {
        let now = check_time(now)?;
        let global_wait = self.global.reserve(now);
        if let Some(lookup) = self.start_lookup(url) {
            let org = resolver.resolve(lookup.kind, &lookup.identifier);
            // The lookup was started just above, so it is pending.
            let recorded = self.finish_lookup(&lookup, org.as_deref()).unwrap_or(false);
            if let (true, Some(org), Some(hydrator)) = (recorded, org, hydrator) {
                if self.claim_hydration(&org) {
                    hydrator.hydrate(&org, self);
                }
            }
        }
        Ok(global_wait + self.charge_org(url, now + global_wait))
    }

    /// The asynchronous path of §4: as [`acquire`](OrgRateLimiter::acquire), and when the
    /// organization is unknown, the lookup to run in the background (unless one of the same
    /// identifier is pending). The request is not held up by the lookup: its organization is
    /// charged on *later* calls, once learned. Report the lookup's answer with
    /// [`finish_lookup`](OrgRateLimiter::finish_lookup); a caller with no resolver should
    /// call [`acquire`](OrgRateLimiter::acquire) instead, or lookups stay pending.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`; nothing is charged.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, OrgRateLimiter};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// let first = limiter.acquire_async("/devices/Q2/clients", 0.0).unwrap();
    /// let lookup = first.lookup.unwrap();
    /// assert_eq!(lookup.identifier, "Q2");
    /// // Still pending: a second request starts no second lookup.
    /// assert_eq!(limiter.acquire_async("/devices/Q2/clients", 0.0).unwrap().lookup, None);
    /// limiter.finish_lookup(&lookup, Some("O_1")).unwrap();
    /// limiter.acquire_async("/devices/Q2/clients", 0.0).unwrap();
    /// assert_eq!(limiter.bucket("O_1").unwrap().tokens(), 9.0); // charged from now on
    /// ```
    pub fn acquire_async(&mut self, url: &str, now: f64) -> Result<Acquired, SmartFlowError> {
        let now = check_time(now)?;
        let global_wait = self.global.reserve(now);
        let at = now + global_wait;
        match resolve(&self.network_to_org, &self.serial_to_org, url) {
            Some(org) => {
                let org_wait = charge(&mut self.org_buckets, &self.org_prototype, org, at);
                Ok(Acquired { wait: global_wait + org_wait, lookup: None })
            }
            None => Ok(Acquired { wait: global_wait, lookup: self.start_lookup(url) }),
        }
    }

    /// Begin a lookup of the identifier `url` names (its network id, else its serial), and
    /// mark it pending (§8): `None` when the URL already resolves, names neither, or a
    /// lookup of the same identifier is pending. The pending set is keyed by identifier
    /// alone, as in the reference.
    pub fn start_lookup(&mut self, url: &str) -> Option<Lookup> {
        if self.resolve_org(url).is_some() {
            return None;
        }
        let (kind, identifier) = url::scoped_id(url)?;
        if self.pending_lookups.contains(identifier) {
            return None;
        }
        self.pending_lookups.insert(String::from(identifier));
        Some(Lookup { kind, identifier: String::from(identifier) })
    }

    /// Report a lookup's answer (`None` when it found nothing or failed): the identifier is
    /// no longer pending, and an organization found is mapped, gets a bucket and counts one
    /// changed mapping. Returns whether a mapping was recorded. The caller with a hydrator
    /// then calls [`claim_hydration`](OrgRateLimiter::claim_hydration), and saves when
    /// [`flush_due`](OrgRateLimiter::flush_due).
    ///
    /// Decision: the reference keeps the identifier pending until its hydrator has run;
    /// here it is released at once. The difference is not observable: once mapped, the
    /// identifier resolves and starts no lookup.
    ///
    /// # Errors
    /// [`SmartFlowError::NoPendingLookup`] when no lookup of this identifier is pending
    /// (already finished, or never started); nothing changes.
    pub fn finish_lookup(&mut self, lookup: &Lookup, org_id: Option<&str>) -> Result<bool, SmartFlowError> {
        if !self.pending_lookups.remove(lookup.identifier.as_str()) {
            return Err(SmartFlowError::NoPendingLookup);
        }
        let Some(org) = org_id.filter(|o| !o.is_empty()) else { return Ok(false) };
        let map = match lookup.kind {
            IdKind::Network => &mut self.network_to_org,
            IdKind::Device => &mut self.serial_to_org,
        };
        set_mapping(map, &lookup.identifier, org);
        ensure_bucket(&mut self.org_buckets, &self.org_prototype, org);
        self.dirty += 1;
        Ok(true)
    }

    /// Whether a lookup of `identifier` is pending.
    pub fn is_pending(&self, identifier: &str) -> bool {
        self.pending_lookups.contains(identifier)
    }

    /// The identifiers being looked up, in no particular order.
    pub fn pending_lookups(&self) -> impl Iterator<Item = &str> {
        self.pending_lookups.iter().map(String::as_str)
    }

    /// Claim `org_id` for hydration: `true` the first time (run the hydrator now), `false`
    /// ever after. Claim only when a hydrator will run, as the reference records an
    /// organization as hydrated only when it has a hydrator.
    pub fn claim_hydration(&mut self, org_id: &str) -> bool {
        if self.hydrated_orgs.contains(org_id) {
            return false;
        }
        self.hydrated_orgs.insert(String::from(org_id))
    }

    /// Whether `org_id` was claimed for hydration.
    pub fn is_hydrated(&self, org_id: &str) -> bool {
        self.hydrated_orgs.contains(org_id)
    }

    /// A 429 on `url` (§5): multiply the rate of the request's organization bucket by 0.7
    /// (never below the 0.5 floor); when the organization has no bucket, skip a URL that
    /// names a network or device but no organization (its organization is specific, just
    /// unknown), and multiply the global rate by 0.7 otherwise. An explicit
    /// `/organizations/<id>` URL whose organization has no bucket yet penalizes the global
    /// bucket, as in the reference.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, OrgRateLimiter, Penalty};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// limiter.register_org("O_1").unwrap();
    /// assert_eq!(limiter.on_rate_limited("/organizations/O_1/networks"), Penalty::Org);
    /// assert!((limiter.bucket("O_1").unwrap().rate() - 7.0).abs() < 1e-9);
    /// assert_eq!(limiter.on_rate_limited("/networks/N_9/clients"), Penalty::SkippedUnresolved);
    /// assert_eq!(limiter.on_rate_limited("/administered/identities/me"), Penalty::Global);
    /// assert!((limiter.global_bucket().rate() - 70.0).abs() < 1e-9);
    /// ```
    pub fn on_rate_limited(&mut self, url: &str) -> Penalty {
        let org = resolve(&self.network_to_org, &self.serial_to_org, url);
        if let Some(bucket) = org.and_then(|org| self.org_buckets.get_mut(org)) {
            bucket.set_rate_clamped(bucket.rate() * DECREASE_FACTOR);
            Penalty::Org
        } else if url::is_unresolved_scoped_url(url) {
            Penalty::SkippedUnresolved
        } else {
            self.global.set_rate_clamped(self.global.rate() * DECREASE_FACTOR);
            Penalty::Global
        }
    }

    /// A 429 on `url` that may carry a `Retry-After`: [`on_rate_limited`](OrgRateLimiter::on_rate_limited),
    /// and when `retry_after` asks for a wait, the scope the 429 belongs to is held back
    /// until `now + retry_after` (a cooldown in force is never shortened). That scope is
    /// the global one when the global rate was lowered, else the request's own
    /// ([`scope`](OrgRateLimiter::scope); global for a URL in none). `now` is on the
    /// monotonic clock [`cooldown`](OrgRateLimiter::cooldown) is asked with.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, OrgRateLimiter, Penalty};
    /// use sluicegate::{Instant, Span};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// limiter.register_org("O_1").unwrap();
    /// limiter.register_network("N_1", "O_1").unwrap();
    /// let t = Instant::from_secs(100);
    /// let penalty = limiter.on_rate_limited_with_retry("/organizations/O_1/x", Some(Span::from_secs(5)), t);
    /// assert_eq!(penalty, Penalty::Org);
    /// assert_eq!(limiter.cooldown("/networks/N_1/clients", t + Span::from_secs(1)), Span::from_secs(4));
    /// assert_eq!(limiter.cooldown("/organizations/O_2/x", t), Span::ZERO);
    /// ```
    pub fn on_rate_limited_with_retry(&mut self, url: &str, retry_after: Option<Span>, now: Instant) -> Penalty {
        let penalty = self.on_rate_limited(url);
        if let Some(wait) = retry_after.filter(|wait| !wait.is_zero()) {
            let scope = match penalty {
                Penalty::Global => Target::Global,
                Penalty::Org | Penalty::SkippedUnresolved => self.scope(url).unwrap_or(Target::Global),
            };
            self.cooldowns.hold_back(scope, now + wait);
        }
        penalty
    }

    /// The scope a cooldown for `url` is kept under: its organization when known, else the
    /// network (else the device) it names; `None` for a URL naming none of them.
    pub fn scope(&self, url: &str) -> Option<Target> {
        if let Some(org) = self.resolve_org(url) {
            return Some(Target::Org(String::from(org)));
        }
        url::scoped_id(url).map(|(kind, id)| match kind {
            IdKind::Network => Target::Network(String::from(id)),
            IdKind::Device => Target::Device(String::from(id)),
        })
    }

    /// How long a `Retry-After` still holds requests to `url` back at `now`: until the
    /// later of the global cooldown and its scope's (zero when none is in force).
    pub fn cooldown(&mut self, url: &str, now: Instant) -> Span {
        if self.cooldowns.is_empty() {
            return Span::ZERO;
        }
        let scope = self.scope(url);
        self.cooldowns.hold(scope.as_ref(), now)
    }

    /// Whether a cooldown is recorded: until then, [`cooldown`](OrgRateLimiter::cooldown)
    /// is zero for every URL and need not be asked.
    pub fn cooling_down(&self) -> bool {
        !self.cooldowns.is_empty()
    }

    /// A success on `url` (§5): the request's organization bucket, when it has one and is
    /// below the configured rate, gains 0.2 (capped at the configured rate); the global
    /// bucket, when below the configured global rate, gains 0.5 (capped). Both happen on
    /// every success.
    pub fn on_success(&mut self, url: &str) {
        let org = resolve(&self.network_to_org, &self.serial_to_org, url);
        if let Some(bucket) = org.and_then(|org| self.org_buckets.get_mut(org)) {
            if bucket.rate() < self.config.org_rate {
                bucket.set_rate_clamped(self.config.org_rate.min(bucket.rate() + ORG_INCREASE));
            }
        }
        if self.global.rate() < self.config.global_rate {
            self.global.set_rate_clamped(self.config.global_rate.min(self.global.rate() + GLOBAL_INCREASE));
        }
    }

    /// Learn mappings from a successful response (§6) and return how many changed; each
    /// change counts towards [`dirty`](OrgRateLimiter::dirty).
    ///
    /// The governing organization is the URL's `/organizations/<id>`, else the body's
    /// `organizationId` (when that key is present, it decides, even if it is not a usable
    /// id), else `organization.id`. With none, nothing is learned. The organization gets a
    /// bucket; then the URL's network id and serial, and the body's `networkId`, `serial`
    /// and `network.id`, are mapped to it, counting only mappings that change.
    ///
    /// Decision: only string values are identifiers. A number, `null` or other non-string
    /// in any of these fields is ignored (the reference would store it as a key or an
    /// organization that no URL can ever match), and an empty organization id is no
    /// organization.
    ///
    /// # Examples
    /// ```
    /// use serde_json::json;
    /// use sluicegate::smartflow::{Config, OrgRateLimiter};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// let body = json!({ "organizationId": "O_5", "serial": "Q2BB" });
    /// let learned = limiter.learn_from_response("/networks/N_1/devices", &body);
    /// assert_eq!((learned.networks, learned.devices), (1, 1));
    /// assert_eq!(limiter.network_org("N_1"), Some("O_5"));
    /// assert_eq!(limiter.learn_from_response("/networks/N_1/devices", &body).total(), 0);
    /// ```
    pub fn learn_from_response(&mut self, url: &str, body: &Value) -> Learned {
        self.learn_from_body(url, body)
    }

    /// [`learn_from_response`](OrgRateLimiter::learn_from_response) for a body in any
    /// object model: only the fields in [`LEARNED_FIELDS`](super::LEARNED_FIELDS) are read.
    pub fn learn_from_body(&mut self, url: &str, body: &dyn ResponseBody) -> Learned {
        let org = match url::org_id(url) {
            Some(org) => Some(Cow::Borrowed(org)),
            None => org_from_body(body),
        };
        let Some(org) = org.filter(|o| !o.is_empty()) else {
            return Learned::default();
        };
        ensure_bucket(&mut self.org_buckets, &self.org_prototype, &org);
        let mut learned = Learned::default();
        let (network, nested_network, serial) =
            (body.field(NETWORK_ID), body.field(NETWORK_NESTED_ID), body.field(SERIAL));
        for network in [url::network_id(url), network.text(), nested_network.text()].into_iter().flatten() {
            learned.networks += u32::from(set_mapping(&mut self.network_to_org, network, &org));
        }
        for serial in [url::serial(url), serial.text()].into_iter().flatten() {
            learned.devices += u32::from(set_mapping(&mut self.serial_to_org, serial, &org));
        }
        self.dirty += u64::from(learned.total());
        learned
    }

    /// [`learn_from_response`](OrgRateLimiter::learn_from_response) for a body as text. A
    /// body that is not JSON is no object: only the URL is learned from.
    pub fn learn_from_response_text(&mut self, url: &str, body: &str) -> Learned {
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        self.learn_from_response(url, &body)
    }

    /// Make sure `org_id` has a bucket (§6).
    ///
    /// # Errors
    /// [`SmartFlowError::EmptyIdentifier`] for an empty id.
    pub fn register_org(&mut self, org_id: &str) -> Result<(), SmartFlowError> {
        non_empty(org_id, "organization id")?;
        ensure_bucket(&mut self.org_buckets, &self.org_prototype, org_id);
        Ok(())
    }

    /// Map a network to its organization (§6). Registrations do not count towards
    /// [`dirty`](OrgRateLimiter::dirty), as in the reference.
    ///
    /// # Errors
    /// [`SmartFlowError::EmptyIdentifier`] for an empty id; nothing changes.
    pub fn register_network(&mut self, network_id: &str, org_id: &str) -> Result<(), SmartFlowError> {
        non_empty(network_id, "network id")?;
        non_empty(org_id, "organization id")?;
        set_mapping(&mut self.network_to_org, network_id, org_id);
        Ok(())
    }

    /// Map a device serial to its organization (§6). Registrations do not count towards
    /// [`dirty`](OrgRateLimiter::dirty), as in the reference.
    ///
    /// # Errors
    /// [`SmartFlowError::EmptyIdentifier`] for an empty id; nothing changes.
    pub fn register_device(&mut self, serial: &str, org_id: &str) -> Result<(), SmartFlowError> {
        non_empty(serial, "serial")?;
        non_empty(org_id, "organization id")?;
        set_mapping(&mut self.serial_to_org, serial, org_id);
        Ok(())
    }

    /// The organization a network is mapped to.
    pub fn network_org(&self, network_id: &str) -> Option<&str> {
        self.network_to_org.get(network_id).map(String::as_str)
    }

    /// The organization a device serial is mapped to.
    pub fn device_org(&self, serial: &str) -> Option<&str> {
        self.serial_to_org.get(serial).map(String::as_str)
    }

    /// Every network → organization mapping, in no particular order.
    pub fn network_mappings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.network_to_org.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every serial → organization mapping, in no particular order.
    pub fn device_mappings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.serial_to_org.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// An organization's bucket, once it has one.
    pub fn bucket(&self, org_id: &str) -> Option<&TokenBucket> {
        self.org_buckets.get(org_id)
    }

    /// An organization's bucket, to inspect or set its rate.
    pub fn bucket_mut(&mut self, org_id: &str) -> Option<&mut TokenBucket> {
        self.org_buckets.get_mut(org_id)
    }

    /// How many organizations have a bucket.
    pub fn org_count(&self) -> usize {
        self.org_buckets.len()
    }

    /// The global (per source IP) bucket.
    pub fn global_bucket(&self) -> &TokenBucket {
        &self.global
    }

    /// The global bucket, to set its rate.
    pub fn global_bucket_mut(&mut self) -> &mut TokenBucket {
        &mut self.global
    }

    /// Mappings changed since the last save (§7).
    pub fn dirty(&self) -> u64 {
        self.dirty
    }

    /// Whether enough mappings changed (50) that the cache should be saved now.
    pub fn flush_due(&self) -> bool {
        self.dirty >= FLUSH_THRESHOLD
    }

    /// A save of the cache succeeded: subtract the `count` changes it covered (the value
    /// of [`dirty`](OrgRateLimiter::dirty) when it was taken), keeping any learned while
    /// it was being written. After a failed save, call nothing: the changes stay counted.
    pub fn mark_flushed(&mut self, count: u64) {
        self.dirty = self.dirty.saturating_sub(count);
        self.save_backoff.succeeded();
    }

    /// A save of the cache failed (the changes stay counted): how long to wait before
    /// trying again, 1 s after the first failure, doubling up to 60 s, and 1 s again after
    /// a save succeeds ([`SaveBackoff`](super::SaveBackoff)).
    pub fn save_failed(&mut self) -> Span {
        self.save_backoff.failed()
    }

    /// Whether a fresh cache was loaded (§7).
    pub fn cache_fresh(&self) -> bool {
        self.cache_fresh
    }

    /// The persisted cache (§7) as JSON, stamped `saved_at` from `now_unix` (Unix
    /// seconds). Decision: entries are sorted by id so that equal states write equal files;
    /// the JSON is compact (the reference's spacing carries no meaning).
    ///
    /// # Errors
    /// As for [`format_saved_at`](super::format_saved_at).
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{Config, OrgRateLimiter};
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// limiter.register_network("N_1", "O_1").unwrap();
    /// assert_eq!(
    ///     limiter.save_cache(1_783_512_000.0).unwrap(),
    ///     r#"{"saved_at":"2026-07-08T12:00:00Z","networks":[{"id":"N_1","organization":{"id":"O_1"}}],"devices":[]}"#
    /// );
    /// ```
    pub fn save_cache(&self, now_unix: f64) -> Result<String, SmartFlowError> {
        let saved_at = super::format_saved_at(now_unix)?;
        let (networks, devices) = (sorted(&self.network_to_org), sorted(&self.serial_to_org));
        Ok(cache::write_file(&saved_at, networks.into_iter(), devices.into_iter()))
    }

    /// Load a persisted cache (§7) at `now_unix` (Unix seconds). With a TTL, a file whose
    /// `saved_at` is missing, unparseable or older than the TTL is ignored; a fresh one has
    /// its mappings added (a later entry for the same id wins) and sets
    /// [`cache_fresh`](OrgRateLimiter::cache_fresh). A malformed file loads nothing (see
    /// [`CacheLoad::Malformed`]). Loading does not count towards `dirty`.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now_unix`; nothing is loaded.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::{CacheLoad, Config, OrgRateLimiter};
    /// let file = r#"{"saved_at":"2026-07-08T12:00:00Z","networks":[{"id":"N_1","organization":{"id":"O_1"}}]}"#;
    /// let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
    /// assert_eq!(limiter.load_cache(file, 1_783_512_000.0 + 60.0).unwrap(), CacheLoad::Loaded { networks: 1, devices: 0 });
    /// assert!(limiter.cache_fresh());
    /// assert_eq!(limiter.resolve_org("/networks/N_1/clients"), Some("O_1"));
    /// ```
    pub fn load_cache(&mut self, json: &str, now_unix: f64) -> Result<CacheLoad, SmartFlowError> {
        let now = check_time(now_unix)?;
        let entries = match cache::read_file(json, now, self.config.cache_ttl) {
            Ok(entries) => entries,
            Err(outcome) => return Ok(outcome),
        };
        let outcome = CacheLoad::Loaded { networks: entries.networks.len(), devices: entries.devices.len() };
        self.network_to_org.extend(entries.networks);
        self.serial_to_org.extend(entries.devices);
        self.cache_fresh = true;
        Ok(outcome)
    }

    /// Charge the organization `url` resolves to, if any, at `at`; its wait.
    fn charge_org(&mut self, url: &str, at: f64) -> f64 {
        match resolve(&self.network_to_org, &self.serial_to_org, url) {
            Some(org) => charge(&mut self.org_buckets, &self.org_prototype, org, at),
            None => 0.0,
        }
    }
}

/// A map's entries sorted by key.
fn sorted(map: &Map<String>) -> Vec<(&str, &str)> {
    let mut entries: Vec<(&str, &str)> = map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    entries.sort_unstable();
    entries
}

fn resolve<'a>(networks: &'a Map<String>, serials: &'a Map<String>, url: &'a str) -> Option<&'a str> {
    let org = if let Some(org) = url::org_id(url) {
        Some(org)
    } else if let Some(network) = url::network_id(url) {
        networks.get(network).map(String::as_str)
    } else if let Some(serial) = url::serial(url) {
        serials.get(serial).map(String::as_str)
    } else {
        None
    };
    org.filter(|o| !o.is_empty())
}

/// The body's organization: `organizationId` when present (even when it is no string),
/// else `organization.id`.
fn org_from_body(body: &dyn ResponseBody) -> Option<Cow<'_, str>> {
    let org = match body.field(ORGANIZATION_ID) {
        Field::Absent => body.field(ORGANIZATION_NESTED_ID),
        present => present,
    };
    match org {
        Field::Text(org) => Some(org),
        Field::Absent | Field::NotText => None,
    }
}

/// The bucket of `org`, created from the prototype on first use (no allocation after).
fn ensure_bucket<'m>(buckets: &'m mut Map<TokenBucket>, prototype: &TokenBucket, org: &str) -> &'m mut TokenBucket {
    buckets.entry_ref(org).or_insert_with(|| *prototype)
}

fn charge(buckets: &mut Map<TokenBucket>, prototype: &TokenBucket, org: &str, at: f64) -> f64 {
    ensure_bucket(buckets, prototype, org).reserve(at)
}

/// Map `key` to `org`; whether that changed anything. Allocates only on a change.
fn set_mapping(map: &mut Map<String>, key: &str, org: &str) -> bool {
    match map.get_mut(key) {
        Some(current) if current == org => false,
        Some(current) => {
            org.clone_into(current);
            true
        }
        None => {
            map.insert(String::from(key), String::from(org));
            true
        }
    }
}

fn non_empty(id: &str, field: &'static str) -> Result<(), SmartFlowError> {
    if id.is_empty() {
        Err(SmartFlowError::EmptyIdentifier(field))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn close(a: f64, b: f64) -> bool {
        let d = a - b;
        (-1e-9..=1e-9).contains(&d)
    }

    fn limiter() -> OrgRateLimiter {
        OrgRateLimiter::new(Config::default()).unwrap()
    }

    #[test]
    fn the_global_wait_is_paid_before_the_org_bucket_is_charged() {
        // Global 2/s (capacity 2), org 1/s (capacity 1): the third call at t=0 waits 0.5 s on
        // the global bucket, and reaches its organization's bucket 0.5 s later, half a token
        // refilled.
        let config = Config { global_rate: 2.0, org_rate: 1.0, org_capacity: 1.0, ..Config::default() };
        let mut limiter = OrgRateLimiter::new(config).unwrap();
        let url = "/organizations/O_1/networks";
        assert!(close(limiter.acquire(url, 0.0).unwrap(), 0.0));
        // Global: 0 left, no wait. Org (rate 1, capacity 1): charged at 0, now -1 → 1 s.
        assert!(close(limiter.acquire(url, 0.0).unwrap(), 1.0));
        // Global: -1 → 0.5 s. Org charged at 0.5: -1 + 0.5 − 1 = −1.5 → 1.5 s. Total 2 s.
        assert!(close(limiter.acquire(url, 0.0).unwrap(), 2.0));
        assert_eq!(limiter.bucket("O_1").unwrap().last(), Some(0.5));
    }

    #[test]
    fn an_unresolved_request_pays_only_the_global_cost() {
        let mut limiter = limiter();
        for _ in 0..20 {
            assert_eq!(limiter.acquire("/networks/N_9/clients", 0.0).unwrap(), 0.0);
        }
        assert_eq!(limiter.org_count(), 0);
        assert!(close(limiter.global_bucket().tokens(), 80.0));
    }

    #[test]
    fn acquiring_twenty_at_once_for_one_org_is_done_within_a_second() {
        let mut limiter = limiter();
        let waits: Vec<f64> = (0..20).map(|_| limiter.acquire("/organizations/O_1/networks", 100.0).unwrap()).collect();
        assert!(waits[..10].iter().all(|w| *w == 0.0));
        for (i, w) in waits[10..].iter().enumerate() {
            assert!(close(*w, (i + 1) as f64 * 0.1), "call {}: {w}", i + 10);
        }
    }

    #[test]
    fn the_sync_path_charges_a_freshly_resolved_org_in_the_same_call() {
        /// A resolver that records what it was asked.
        struct Recording(Vec<(IdKind, String)>);
        impl Resolver for Recording {
            fn resolve(&mut self, kind: IdKind, identifier: &str) -> Option<String> {
                self.0.push((kind, String::from(identifier)));
                Some(String::from("O_7"))
            }
        }
        let mut limiter = limiter();
        let mut resolver = Recording(Vec::new());
        limiter.acquire_sync("/devices/Q2/clients", 0.0, &mut resolver, None).unwrap();
        assert_eq!(resolver.0, vec![(IdKind::Device, String::from("Q2"))]);
        assert_eq!(limiter.device_org("Q2"), Some("O_7"));
        assert_eq!(limiter.bucket("O_7").unwrap().tokens(), 9.0);
        assert_eq!(limiter.dirty(), 1);
        assert!(!limiter.is_pending("Q2"));
        // Now known: the resolver is not asked again.
        limiter.acquire_sync("/devices/Q2/clients", 0.0, &mut resolver, None).unwrap();
        assert_eq!(resolver.0.len(), 1);
    }

    #[test]
    fn the_sync_path_looks_up_the_network_before_the_device() {
        let mut limiter = limiter();
        let mut resolver = |kind: IdKind, _: &str| (kind == IdKind::Network).then(|| String::from("O_1"));
        limiter.acquire_sync("/devices/Q2/x/networks/N_1", 0.0, &mut resolver, None).unwrap();
        assert_eq!(limiter.network_org("N_1"), Some("O_1"));
        assert_eq!(limiter.device_org("Q2"), None);
    }

    #[test]
    fn a_resolver_that_finds_nothing_leaves_the_request_on_the_global_bucket_and_is_asked_again_later() {
        let mut limiter = limiter();
        let mut calls = 0;
        let mut resolver = |_: IdKind, _: &str| {
            calls += 1;
            None
        };
        assert_eq!(limiter.acquire_sync("/networks/N_9", 0.0, &mut resolver, None).unwrap(), 0.0);
        limiter.acquire_sync("/networks/N_9", 0.0, &mut resolver, None).unwrap();
        assert_eq!(calls, 2);
        assert_eq!(limiter.org_count(), 0);
        assert_eq!(limiter.dirty(), 0);
        assert_eq!(limiter.pending_lookups().count(), 0);
    }

    #[test]
    fn a_hydrator_runs_once_per_org_and_its_registrations_are_used() {
        let mut limiter = limiter();
        let mut resolver = |_: IdKind, _: &str| Some(String::from("O_1"));
        let mut hydrated = Vec::new();
        let mut hydrator = |org: &str, limiter: &mut OrgRateLimiter| {
            hydrated.push(String::from(org));
            limiter.register_network("N_2", org).unwrap();
            limiter.register_device("Q2", org).unwrap();
        };
        limiter.acquire_sync("/networks/N_1", 0.0, &mut resolver, Some(&mut hydrator)).unwrap();
        assert!(limiter.is_hydrated("O_1"));
        // N_3 resolves to O_1 again: no second hydration.
        limiter.acquire_sync("/networks/N_3", 0.0, &mut resolver, Some(&mut hydrator)).unwrap();
        assert_eq!(hydrated, vec![String::from("O_1")]);
        // Hydrated mappings route without a lookup, and do not count as dirty.
        assert_eq!(limiter.resolve_org("/devices/Q2/clients"), Some("O_1"));
        assert_eq!(limiter.dirty(), 2);
        assert!(close(limiter.bucket("O_1").unwrap().tokens(), 8.0));
    }

    #[test]
    fn without_a_hydrator_no_org_is_recorded_as_hydrated() {
        let mut limiter = limiter();
        let mut resolver = |_: IdKind, _: &str| Some(String::from("O_1"));
        limiter.acquire_sync("/networks/N_1", 0.0, &mut resolver, None).unwrap();
        assert!(!limiter.is_hydrated("O_1"));
        assert!(limiter.claim_hydration("O_1"));
        assert!(!limiter.claim_hydration("O_1"));
    }

    #[test]
    fn the_async_path_charges_the_org_only_on_later_calls() {
        let mut limiter = limiter();
        let first = limiter.acquire_async("/networks/N_1/clients", 0.0).unwrap();
        let lookup = first.lookup.expect("a lookup to run");
        assert_eq!(lookup, Lookup { kind: IdKind::Network, identifier: String::from("N_1") });
        assert!(limiter.is_pending("N_1"));
        assert_eq!(limiter.org_count(), 0, "the first call pays only the global cost");
        assert_eq!(limiter.acquire_async("/networks/N_1/x", 0.0).unwrap().lookup, None, "already pending");
        assert_eq!(limiter.finish_lookup(&lookup, Some("O_1")), Ok(true));
        assert_eq!(limiter.bucket("O_1").unwrap().tokens(), 10.0);
        let later = limiter.acquire_async("/networks/N_1/clients", 0.0).unwrap();
        assert_eq!(later.lookup, None);
        assert_eq!(limiter.bucket("O_1").unwrap().tokens(), 9.0);
        assert_eq!(limiter.finish_lookup(&lookup, Some("O_1")), Err(SmartFlowError::NoPendingLookup));
    }

    #[test]
    fn a_failed_background_lookup_is_released_and_started_again_by_a_later_call() {
        let mut limiter = limiter();
        let lookup = limiter.acquire_async("/devices/Q2", 0.0).unwrap().lookup.unwrap();
        assert_eq!(limiter.finish_lookup(&lookup, None), Ok(false));
        assert_eq!(limiter.finish_lookup(&lookup, Some("")), Err(SmartFlowError::NoPendingLookup));
        assert_eq!(limiter.acquire_async("/devices/Q2", 0.0).unwrap().lookup, Some(lookup));
    }

    #[test]
    fn a_lookup_is_only_started_for_an_unresolved_scoped_url() {
        let mut limiter = limiter();
        limiter.register_network("N_1", "O_1").unwrap();
        assert_eq!(limiter.start_lookup("/networks/N_1"), None);
        assert_eq!(limiter.start_lookup("/organizations/O_1/networks/N_2"), None);
        assert_eq!(limiter.start_lookup("/administered/identities/me"), None);
    }

    #[test]
    fn aimd_decrease_reaches_the_floor_and_additive_increase_recovers_the_configured_rate() {
        let mut limiter = limiter();
        limiter.register_org("O_1").unwrap();
        let url = "/organizations/O_1/networks";
        for _ in 0..20 {
            assert_eq!(limiter.on_rate_limited(url), Penalty::Org);
        }
        assert_eq!(limiter.bucket("O_1").unwrap().rate(), 0.5);
        // (10 − 0.5) / 0.2 = 47.5: 48 successes climb back, capped at exactly 10.
        for _ in 0..47 {
            limiter.on_success(url);
        }
        assert!(limiter.bucket("O_1").unwrap().rate() < 10.0);
        limiter.on_success(url);
        assert_eq!(limiter.bucket("O_1").unwrap().rate(), 10.0);
        limiter.on_success(url);
        assert_eq!(limiter.bucket("O_1").unwrap().rate(), 10.0);
        // The global bucket was never penalized.
        assert_eq!(limiter.global_bucket().rate(), 100.0);
    }

    #[test]
    fn a_throttled_bucket_spaces_its_reservations_at_the_lower_rate() {
        let mut limiter = limiter();
        let url = "/organizations/O_1/networks";
        for _ in 0..10 {
            limiter.acquire(url, 0.0).unwrap();
        }
        limiter.on_rate_limited(url); // 7/s
        assert!(close(limiter.acquire(url, 0.0).unwrap(), 1.0 / 7.0));
    }

    #[test]
    fn a_429_on_an_explicit_org_without_a_bucket_penalizes_the_global_bucket() {
        let mut limiter = limiter();
        assert_eq!(limiter.on_rate_limited("/organizations/O_9/networks"), Penalty::Global);
        assert!(close(limiter.global_bucket().rate(), 70.0));
        // The structural rule decides when the org has no bucket: a network URL is skipped
        // even when the network is mapped.
        limiter.register_network("N_1", "O_8").unwrap();
        assert_eq!(limiter.on_rate_limited("/networks/N_1/clients"), Penalty::SkippedUnresolved);
    }

    #[test]
    fn success_raises_the_global_rate_even_for_an_unresolved_url() {
        let mut limiter = limiter();
        limiter.global_bucket_mut().set_rate(99.8).unwrap();
        limiter.on_success("/networks/N_9");
        assert_eq!(limiter.global_bucket().rate(), 100.0);
    }

    fn secs(s: u64) -> Span {
        Span::from_secs(s)
    }

    #[test]
    fn a_retry_after_on_an_org_holds_back_its_networks_and_devices_but_not_other_orgs() {
        let mut limiter = limiter();
        limiter.register_network("N_1", "O_1").unwrap();
        limiter.register_device("Q2", "O_1").unwrap();
        let t = Instant::from_secs(10);
        assert_eq!(
            limiter.on_rate_limited_with_retry("/networks/N_1/clients", Some(secs(5)), t),
            Penalty::SkippedUnresolved
        );
        // N_1 is mapped but O_1 had no bucket yet: the rate was left alone, the org is held.
        assert_eq!(limiter.cooldown("/organizations/O_1/admins", t), secs(5));
        assert_eq!(limiter.cooldown("/devices/Q2/lldpCdp", t + secs(2)), secs(3));
        assert_eq!(limiter.cooldown("/organizations/O_2/admins", t), Span::ZERO);
        assert_eq!(limiter.cooldown("/networks/N_2/clients", t), Span::ZERO);
        assert_eq!(limiter.cooldown("/administered/identities/me", t), Span::ZERO);
    }

    #[test]
    fn a_retry_after_on_an_unresolved_network_holds_back_that_network_only() {
        let mut limiter = limiter();
        let t = Instant::from_secs(10);
        let penalty = limiter.on_rate_limited_with_retry("/networks/N_9/x", Some(secs(2)), t);
        assert_eq!(penalty, Penalty::SkippedUnresolved);
        assert_eq!(limiter.cooldown("/networks/N_9/clients", t), secs(2));
        assert_eq!(limiter.cooldown("/devices/N_9", t), Span::ZERO, "a serial is not a network id");
        // Once N_9's organization is learned, the network's own cooldown no longer applies:
        // the request is in its organization's scope now.
        limiter.register_network("N_9", "O_1").unwrap();
        assert_eq!(limiter.cooldown("/networks/N_9/clients", t), Span::ZERO);
    }

    #[test]
    fn a_retry_after_that_lowered_the_global_rate_holds_back_everyone() {
        let mut limiter = limiter();
        let t = Instant::from_secs(10);
        assert_eq!(limiter.on_rate_limited_with_retry("/organizations/O_1/x", Some(secs(3)), t), Penalty::Global);
        for url in ["/organizations/O_2/x", "/networks/N_1", "/administered/identities/me"] {
            assert_eq!(limiter.cooldown(url, t), secs(3), "{url}");
        }
        assert_eq!(limiter.cooldown("/networks/N_1", t + secs(3)), Span::ZERO);
        assert!(!limiter.cooling_down(), "an ended cooldown is forgotten");
    }

    #[test]
    fn no_retry_after_or_a_zero_one_holds_nothing_back_but_still_lowers_the_rate() {
        let mut limiter = limiter();
        limiter.register_org("O_1").unwrap();
        let t = Instant::from_secs(10);
        limiter.on_rate_limited_with_retry("/organizations/O_1/x", None, t);
        limiter.on_rate_limited_with_retry("/organizations/O_1/x", Some(Span::ZERO), t);
        assert!(!limiter.cooling_down());
        assert!(close(limiter.bucket("O_1").unwrap().rate(), 10.0 * 0.7 * 0.7));
    }

    #[test]
    fn a_successful_save_resets_the_retry_backoff() {
        let mut limiter = limiter();
        assert_eq!(limiter.save_failed(), secs(1));
        assert_eq!(limiter.save_failed(), secs(2));
        limiter.mark_flushed(0);
        assert_eq!(limiter.save_failed(), secs(1));
    }

    #[test]
    fn learning_counts_towards_a_flush_every_fifty_changes() {
        let mut limiter = limiter();
        for i in 0..49 {
            let url = alloc::format!("/organizations/O_1/networks/N_{i}");
            assert_eq!(limiter.learn_from_response(&url, &Value::Null).networks, 1);
        }
        assert!(!limiter.flush_due());
        limiter.learn_from_response_text("/organizations/O_1/devices/Q2", "not json");
        assert_eq!(limiter.dirty(), 50);
        assert!(limiter.flush_due());
        // A save covering 50 succeeded while one more mapping was learned.
        limiter.learn_from_response_text("/x", r#"{"organization":{"id":"O_2"},"network":{"id":"N_0"}}"#);
        limiter.mark_flushed(50);
        assert_eq!(limiter.dirty(), 1);
        assert_eq!(limiter.network_org("N_0"), Some("O_2"));
    }

    #[test]
    fn a_present_organization_id_decides_even_when_unusable() {
        let mut limiter = limiter();
        let body = serde_json::json!({ "organizationId": null, "organization": { "id": "O_1" }, "networkId": "N_1" });
        assert_eq!(limiter.learn_from_response("/networks/N_1", &body), Learned::default());
        let body = serde_json::json!({ "organization": { "id": "O_1" }, "networkId": 5, "serial": "Q2" });
        assert_eq!(limiter.learn_from_response("/x", &body), Learned { networks: 0, devices: 1 });
        assert!(limiter.bucket("O_1").is_some(), "the governing org gets a bucket");
    }

    #[test]
    fn a_changed_mapping_counts_and_an_unchanged_one_does_not() {
        let mut limiter = limiter();
        limiter.register_network("N_1", "O_1").unwrap();
        assert_eq!(limiter.learn_from_response("/organizations/O_2/networks/N_1", &Value::Null).networks, 1);
        assert_eq!(limiter.network_org("N_1"), Some("O_2"));
        assert_eq!(limiter.learn_from_response("/organizations/O_2/networks/N_1", &Value::Null).networks, 0);
    }

    #[test]
    fn empty_identifiers_are_refused_naming_the_field() {
        let mut limiter = limiter();
        assert_eq!(limiter.register_org(""), Err(SmartFlowError::EmptyIdentifier("organization id")));
        assert_eq!(limiter.register_network("", "O_1"), Err(SmartFlowError::EmptyIdentifier("network id")));
        assert_eq!(limiter.register_device("Q2", ""), Err(SmartFlowError::EmptyIdentifier("organization id")));
        assert_eq!(limiter.network_mappings().count() + limiter.device_mappings().count(), 0);
    }

    #[test]
    fn invalid_configuration_and_times_are_refused() {
        let bad = |config: Config| OrgRateLimiter::new(config).unwrap_err();
        assert_eq!(bad(Config { org_rate: 0.0, ..Config::default() }), SmartFlowError::InvalidRate(0.0));
        assert_eq!(bad(Config { global_rate: -1.0, ..Config::default() }), SmartFlowError::InvalidRate(-1.0));
        assert_eq!(bad(Config { org_capacity: -1.0, ..Config::default() }), SmartFlowError::InvalidCapacity(-1.0));
        assert_eq!(bad(Config { cache_ttl: Some(-1.0), ..Config::default() }), SmartFlowError::InvalidTtl(-1.0));
        let mut limiter = limiter();
        assert!(limiter.acquire("/organizations/O_1", f64::INFINITY).is_err());
        assert!(limiter.acquire_async("/organizations/O_1", f64::NAN).is_err());
        assert_eq!(limiter.global_bucket().tokens(), 100.0, "nothing charged");
        assert_eq!(limiter.org_count(), 0);
    }

    #[test]
    fn the_global_capacity_is_the_whole_part_of_the_global_rate() {
        let limiter = OrgRateLimiter::new(Config { global_rate: 12.75, ..Config::default() }).unwrap();
        assert_eq!(limiter.global_bucket().capacity(), 12.0);
        assert_eq!(limiter.global_bucket().rate(), 12.75);
    }

    #[test]
    fn a_saved_cache_loads_back_into_a_fresh_limiter() {
        let mut limiter = limiter();
        limiter.register_network("N_2", "O_1").unwrap();
        limiter.register_network("N_1", "O_1").unwrap();
        limiter.register_device("Q2 \"quoted\"", "O_2").unwrap();
        let file = limiter.save_cache(1_000_000.0).unwrap();
        let mut other = OrgRateLimiter::new(Config::default()).unwrap();
        assert_eq!(other.load_cache(&file, 1_000_000.0 + 604_800.0), Ok(CacheLoad::Loaded { networks: 2, devices: 1 }));
        assert!(other.cache_fresh());
        assert_eq!(other.device_org("Q2 \"quoted\""), Some("O_2"));
        assert_eq!(other.dirty(), 0);
        assert_eq!(other.save_cache(1_000_000.0).unwrap(), file, "sorted, so the same file");
        let mut late = OrgRateLimiter::new(Config::default()).unwrap();
        assert_eq!(late.load_cache(&file, 1_000_000.0 + 604_801.0), Ok(CacheLoad::Expired));
        assert!(!late.cache_fresh());
    }

    #[test]
    fn a_malformed_cache_loads_nothing_at_all() {
        for file in [
            "not json",
            "[]",
            r#"{"saved_at":"2026-07-08T12:00:00Z","networks":{}}"#,
            r#"{"saved_at":"2026-07-08T12:00:00Z","networks":null}"#,
            r#"{"saved_at":"2026-07-08T12:00:00Z","networks":[{"id":"N_1","organization":{"id":"O_1"}},{"id":"N_2"}]}"#,
            r#"{"saved_at":"2026-07-08T12:00:00Z","devices":[{"serial":7,"organization":{"id":"O_1"}}]}"#,
        ] {
            let mut limiter = limiter();
            assert_eq!(limiter.load_cache(file, 1_783_512_000.0), Ok(CacheLoad::Malformed), "{file}");
            assert_eq!(limiter.network_mappings().count(), 0);
            assert!(!limiter.cache_fresh());
        }
    }

    #[test]
    fn without_a_ttl_saved_at_is_not_even_read() {
        let mut limiter = OrgRateLimiter::new(Config { cache_ttl: None, ..Config::default() }).unwrap();
        let file = r#"{"saved_at":42,"devices":[{"serial":"Q2","organization":{"id":"O_1"}}]}"#;
        assert_eq!(limiter.load_cache(file, 0.0), Ok(CacheLoad::Loaded { networks: 0, devices: 1 }));
        let mut strict = OrgRateLimiter::new(Config::default()).unwrap();
        assert_eq!(strict.load_cache(file, 0.0), Ok(CacheLoad::Expired));
        assert_eq!(strict.load_cache("{}", 0.0), Ok(CacheLoad::Expired), "saved_at missing");
    }
}
