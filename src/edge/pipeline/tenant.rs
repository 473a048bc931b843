//! The tenant stage: who a request's tenant is, the limit that applies, its buckets (in a
//! store per tenant and colo, or per tenant for the fleet; when that cannot answer, the
//! colo's, then this isolate's own table) and its share of what may be in flight.
//!
//! The order of the steps is the edge's: the tenant is named (a key is hashed and looked up:
//! an unknown one is refused with 401 before anything is charged), the runtime overrides are
//! read (this isolate's copy serves for [`OVERRIDES_FRESH`]; when they cannot be read, the
//! copy in hand), a body over the tenant's cap is refused (413) before its buckets are
//! charged, then the buckets (429 `tenant_rate_limited`), then its share in flight (429
//! `tenant_overload`). Like the rules stage it owns no I/O: [`TenantCheck::next`] says what
//! it needs, [`TenantCheck::answer`] takes it back.
//!
//! A limit that does not enforce its refusals for the tenant (`"enforce": false`, or the
//! tenant outside its enforced share) is charged exactly as if it did: a request its buckets
//! refuse is not charged and goes on, a request over its share in flight goes on without
//! holding a place in it; the refusal it would have made is [`TenantAdmitted::shadow`]. A
//! body that streams past such a limit's bytes is passed on. The cap on a body's size (413)
//! and an unknown tenant (401) are always enforced.

use super::reply::Reply;
use super::Isolate;
use crate::core::limit::Decision;
use crate::core::time::{Instant, Span};
use crate::edge::headers;
use crate::edge::rules::RequestFacts;
use crate::edge::tenants::{
    body_cap, effective, is_tenant_name, Clamped, Identify, LimitSource, Overrides, Placement, QueueShare,
    StreamedBody, TenantLimit, TenantScope, TenantTable, Tenants,
};
use alloc::borrow::ToOwned;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::rc::Rc;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// How long an isolate trusts its copy of the runtime overrides: a change reaches every
/// isolate within this.
pub const OVERRIDES_FRESH: Span = Span::from_secs(1);

/// The most buckets an isolate keeps (for when no store answers) of tenants under the
/// default limit; past it a new such tenant is charged to one shared overflow bucket (see
/// [`TenantTable`]). Tenants with a limit of their own always get theirs.
pub const MAX_LOCAL_TENANTS: usize = 10_000;

/// A limit as a tenant was admitted under it: the limit, where it came from, and its
/// generation (when its override was set; 0 for none).
pub type Applied = Rc<(TenantLimit, LimitSource, u64)>;

/// What an isolate keeps for tenants: its copy of the overrides, its own buckets (the
/// stores' stand-in), each tenant's share in flight, and the clamped overrides it logged.
pub struct TenantState {
    overrides: super::StoredCopy<Overrides>,
    local: TenantTable,
    /// An entry exists only while a request of its tenant is in flight (it is removed when
    /// the last one is given back): never more tenants than requests in flight.
    queues: HashMap<String, QueueShare, FixedState>,
    clamped: BTreeSet<(String, u64)>,
}

impl TenantState {
    /// An isolate's tenant state; `salt` keys its table's hash (draw it at random).
    pub fn new(salt: (u64, u64)) -> Self {
        TenantState {
            overrides: super::StoredCopy::new(),
            local: TenantTable::new(MAX_LOCAL_TENANTS, salt),
            queues: HashMap::with_hasher(FixedState::with_seed(salt.0)),
            clamped: BTreeSet::new(),
        }
    }

    /// Forget the copy of the overrides (after a change made through this isolate).
    pub fn forget_overrides(&mut self) {
        self.overrides.forget();
    }

    /// Give back one request of `bytes` of `tenant`'s share in flight.
    pub fn release(&mut self, tenant: &str, bytes: u64) {
        if let Some(share) = self.queues.get_mut(tenant) {
            share.release(bytes);
            if share.is_empty() {
                self.queues.remove(tenant);
            }
        }
    }

    /// Count `bytes` more of a body in flight of `tenant` (holding `held` so far) against its
    /// `max_queue_bytes`: `false`, counting nothing, past it.
    pub fn grow(&mut self, tenant: &str, limit: &TenantLimit, held: u64, bytes: u64) -> bool {
        self.queues.get_mut(tenant).is_some_and(|s| s.grow(limit, held, bytes))
    }

    /// The tenants with a request in flight.
    pub fn in_flight(&self) -> usize {
        self.queues.len()
    }
}

/// Something the stage did that a log may show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantNote {
    /// A store could not charge the tenant (the next one, or the isolate's table, did).
    StoreFailed {
        /// The tenant.
        tenant: String,
        /// The store's name.
        store: String,
        /// Why.
        error: String,
    },
    /// The isolate's table is full of buckets that still owe: new tenants under the default
    /// share one overflow bucket until buckets refill (noted once per tick).
    TableFull {
        /// The tenants it holds.
        tenants: usize,
    },
    /// The overrides could not be read: the copy in hand serves.
    OverridesUnreadable(String),
    /// An override's `max_body_bytes` was above the instance's and was lowered (noted once
    /// per isolate and override).
    Clamped(Clamped),
}

/// What a tenant is charged with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// One request of this many body bytes (declared, or 0).
    Request(u64),
    /// This many more bytes of a body whose request was charged (its bytes as they stream).
    More(u64),
}

/// A store to charge: the Durable Object named `store`.
#[derive(Debug, PartialEq)]
pub struct StoreCharge<'a> {
    /// The store's name.
    pub store: &'a str,
    /// The tenant.
    pub tenant: &'a str,
    /// The limit its buckets are of, and its generation.
    pub limit: &'a TenantLimit,
    /// When its override was set (0 for none): buckets of another generation start afresh.
    pub generation: u64,
    /// Requests (1, or 0 for more bytes of a body) and body bytes to charge.
    pub requests: u32,
    /// Body bytes to charge.
    pub bytes: u64,
}

/// One charge of a tenant's buckets: each of its stores in order until one answers, else the
/// isolate's own table.
pub struct ChargeWalk {
    stores: Vec<String>,
    next: usize,
    tenant: Rc<str>,
    limit: Applied,
    what: Charge,
    decision: Option<Decision>,
    notes: Vec<TenantNote>,
}

impl ChargeWalk {
    /// A charge of `tenant` under `limit` (its buckets counted per `scope`, from `colo`).
    pub fn new(scope: TenantScope, tenant: Rc<str>, colo: Option<&str>, limit: Applied, what: Charge) -> Self {
        // Fleet scope asks the tenant's one object; when it cannot answer, the colo's own
        // buckets (colo scope's object) do; when no store answers, the isolate's, which
        // isolate scope charges straight away.
        let mut stores = Vec::with_capacity(2);
        if scope == TenantScope::Fleet {
            stores.push(format!("tenant\u{1f}{tenant}"));
        }
        if scope != TenantScope::Isolate {
            stores.push(format!("tenant\u{1f}{tenant}\u{1f}{}", colo.unwrap_or("unknown")));
        }
        ChargeWalk { stores, next: 0, tenant, limit, what, decision: None, notes: Vec::new() }
    }

    /// The store to ask next, or `None` when the charge is decided ([`ChargeWalk::finish`]).
    pub fn next(&self) -> Option<StoreCharge<'_>> {
        if self.decision.is_some() {
            return None;
        }
        let store = self.stores.get(self.next)?;
        let (requests, bytes) = match self.what {
            Charge::Request(bytes) => (1, bytes),
            Charge::More(bytes) => (0, bytes),
        };
        Some(StoreCharge {
            store,
            tenant: &self.tenant,
            limit: &self.limit.0,
            generation: self.limit.2,
            requests,
            bytes,
        })
    }

    /// The answer of the store [`ChargeWalk::next`] named.
    pub fn answer(&mut self, answer: Result<Decision, String>) {
        let Some(store) = self.stores.get(self.next) else { return };
        match answer {
            Ok(decision) => self.decision = Some(decision),
            Err(error) => {
                self.notes.push(TenantNote::StoreFailed {
                    tenant: self.tenant.to_string(),
                    store: store.clone(),
                    error,
                });
                self.next += 1;
            }
        }
    }

    /// The decision: a store's, or, when none answered, the isolate's table's at `now`.
    pub fn finish(mut self, state: &mut TenantState, now: Instant) -> (Decision, Vec<TenantNote>) {
        let decision = match self.decision {
            Some(decision) => decision,
            None => {
                let (limit, source, generation) = (&self.limit.0, self.limit.1, self.limit.2);
                let table = &mut state.local;
                let (decision, placement) = match self.what {
                    Charge::Request(bytes) => table.charge(&self.tenant, limit, source, generation, bytes, now),
                    Charge::More(bytes) => table.charge_more(&self.tenant, limit, source, generation, bytes, now),
                };
                if placement == Placement::Overflow && table.overflowed() == 1 {
                    self.notes.push(TenantNote::TableFull { tenants: table.len() });
                }
                decision
            }
        };
        (decision, self.notes)
    }
}

/// Why a tenant request is refused (before its body is read, or as it streams).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantRefusal {
    /// No key, or one that names no tenant (401; nothing was charged).
    Unknown,
    /// The body is bigger than the tenant may send (413).
    TooLarge {
        /// The most it may send.
        max: u64,
    },
    /// Over the tenant's rate or bytes (429).
    Limited {
        /// The tenant.
        tenant: String,
        /// How long until it may send again.
        wait: Span,
    },
    /// Over the tenant's share of requests or bytes in flight (429 `tenant_overload`).
    Overloaded {
        /// The tenant.
        tenant: String,
    },
}

impl TenantRefusal {
    /// Its name in log lines.
    pub fn name(&self) -> &'static str {
        match self {
            TenantRefusal::Unknown => "unknown",
            TenantRefusal::TooLarge { .. } => "too_large",
            TenantRefusal::Limited { .. } => "tenant_rate_limited",
            TenantRefusal::Overloaded { .. } => "tenant_overload",
        }
    }

    /// Its entry in `Sluicegate-Shadow`, when its limit did not enforce it:
    /// `tenant:acme;retry-after=3` (the `Retry-After` it would have given) or
    /// `tenant:acme;overload` (over its share in flight). A rule's id cannot hold `:`, so
    /// the two never mix up.
    pub fn shadow_entry(&self) -> String {
        match self {
            TenantRefusal::Limited { tenant, wait } => {
                format!("tenant:{tenant};retry-after={}", wait.as_secs_ceil().max(1))
            }
            TenantRefusal::Overloaded { tenant } => format!("tenant:{tenant};overload"),
            // (never in shadow: always enforced)
            TenantRefusal::Unknown | TenantRefusal::TooLarge { .. } => String::new(),
        }
    }

    /// The answer: 401 (no hint of why, beyond the body's "a valid API key is required"), 413,
    /// or 429 with `Retry-After` in whole seconds (at least 1); each with
    /// `Sluicegate-Scope: tenant`, so a client (and `sluicegate replay`) can tell the tenant
    /// stage's refusals from the origin's own 401 and 413.
    pub fn reply(&self) -> Reply {
        let (status, body, wait) = match self {
            TenantRefusal::Unknown => {
                (401, headers::problem(401, "Unauthorized", "A valid API key is required.", None, None), None)
            }
            TenantRefusal::TooLarge { max } => {
                let detail = format!("The body is larger than the {max} bytes this tenant may send.");
                (413, headers::problem(413, "Content Too Large", &detail, None, None), None)
            }
            TenantRefusal::Limited { tenant, wait } => {
                let wait = Span::from_secs(wait.as_secs_ceil().max(1));
                (429, headers::tenant_limited(tenant, "tenant_rate_limited", wait), Some(wait))
            }
            TenantRefusal::Overloaded { tenant } => {
                let wait = Span::from_secs(1);
                (429, headers::tenant_limited(tenant, "tenant_overload", wait), Some(wait))
            }
        };
        // Every refusal of the stage names it, as a rule's names the rule.
        let mut reply = Reply::problem(status, body, wait);
        reply.set("sluicegate-scope", "tenant".into());
        reply
    }
}

/// A tenant request the stage admitted: what the Worker holds for it.
#[derive(Clone, Debug)]
pub struct TenantAdmitted {
    /// The tenant.
    pub tenant: Rc<str>,
    /// The limit it was admitted under (none: unlimited, only the instance's cap binds).
    pub limit: Option<Applied>,
    /// The biggest body it may send.
    pub max_body: Option<u64>,
    /// Whether its body bytes are counted: capped, charged, or held in flight.
    pub counts_bytes: bool,
    /// Whether its body, of no declared length, is charged as it streams.
    pub streams: bool,
    /// The bytes it holds of its tenant's share in flight (give them back with
    /// [`TenantState::release`] when the origin has answered), when its limit caps what is in
    /// flight.
    pub share: Option<u64>,
    /// The refusal its limit would have made, had it enforced it for this tenant (a shadow
    /// refusal: `tenant_rate_limited` or `tenant_overload`).
    pub shadow: Option<TenantRefusal>,
}

/// A tenant's body of no declared length, as it streams (its request was charged, with no
/// bytes, when admitted): each chunk is counted against the biggest body the tenant may send
/// (`413`), then its share of bytes in flight (`429 tenant_overload`), then charged to its byte
/// bucket in its stores ([`StreamedTenant::charge`]) before it is passed on.
#[derive(Clone, Debug)]
pub struct StreamedTenant {
    body: StreamedBody,
    tenant: Rc<str>,
    limit: Option<Applied>,
    scope: TenantScope,
    colo: Option<Rc<str>>,
}

impl StreamedTenant {
    /// The body check of a request `admitted` (when its body streams), whose tenant's stores
    /// are of `scope`, in `colo`.
    pub fn of(admitted: &TenantAdmitted, scope: TenantScope, colo: Option<&str>) -> Option<StreamedTenant> {
        admitted.streams.then(|| StreamedTenant {
            body: StreamedBody::new(admitted.max_body),
            tenant: Rc::clone(&admitted.tenant),
            limit: admitted.limit.clone(),
            scope,
            colo: colo.map(Rc::from),
        })
    }

    /// Whether the bytes it holds in flight grow with its body (its limit caps bytes in
    /// flight): then [`StreamedTenant::take`] is handed the count.
    pub fn holds_bytes(&self) -> bool {
        self.limit.as_ref().is_some_and(|l| l.0.max_queue_bytes.is_some())
    }

    /// Count `bytes` more: against the biggest body, then against the tenant's share in flight
    /// in `state`, when it still holds one (`held`: the bytes it holds there, grown here).
    ///
    /// # Errors
    /// The refusal, when these bytes are not to be passed on.
    pub fn take(&mut self, state: &mut TenantState, held: Option<&mut u64>, bytes: u64) -> Result<(), TenantRefusal> {
        self.body.take(bytes).map_err(|max| TenantRefusal::TooLarge { max })?;
        let (Some(limit), Some(held)) = (&self.limit, held) else { return Ok(()) };
        if !state.grow(&self.tenant, &limit.0, *held, bytes) {
            if self.enforced() {
                return Err(TenantRefusal::Overloaded { tenant: self.tenant.to_string() });
            }
            // (in shadow the bytes pass on without growing the share)
            return Ok(());
        }
        *held += bytes;
        Ok(())
    }

    /// The charge of `bytes` more to the tenant's byte bucket, when its limit counts bytes:
    /// to be carried out (and [`StreamedTenant::charged`]) before they are passed on.
    pub fn charge(&self, bytes: u64) -> Option<ChargeWalk> {
        let limit = self.limit.as_ref().filter(|l| l.0.bytes_per_second.is_some() && bytes > 0)?;
        let colo = self.colo.as_deref();
        Some(ChargeWalk::new(self.scope, Rc::clone(&self.tenant), colo, Rc::clone(limit), Charge::More(bytes)))
    }

    /// What the charge came to.
    ///
    /// # Errors
    /// `429 tenant_rate_limited` when its bytes are over its byte bucket.
    pub fn charged(&self, decision: Decision) -> Result<(), TenantRefusal> {
        match decision {
            Decision::Deny { retry_after } if self.enforced() => {
                Err(TenantRefusal::Limited { tenant: self.tenant.to_string(), wait: retry_after })
            }
            _ => Ok(()),
        }
    }

    /// Whether its limit enforces its refusals for its tenant.
    fn enforced(&self) -> bool {
        self.limit.as_ref().is_none_or(|l| l.0.enforce.applies(&self.tenant))
    }
}

/// The stage's verdict.
#[derive(Clone, Debug)]
pub enum TenantVerdict {
    /// The request carries no tenant (the section does not match it).
    NoTenant,
    /// Admitted.
    Admitted(TenantAdmitted),
    /// Refused.
    Refused(TenantRefusal),
}

/// What the stage needs next.
#[derive(Debug, PartialEq)]
pub enum TenantStep<'a> {
    /// The SHA-256 of this API key, in lower-case hex: then [`TenantAnswer::Hashed`].
    Hash {
        /// The key.
        key: &'a str,
    },
    /// The runtime overrides, from the store that keeps them: then [`TenantAnswer::Overrides`].
    ReadOverrides,
    /// Charge the tenant in a store: then [`TenantAnswer::Charged`].
    Charge(StoreCharge<'a>),
    /// Nothing: [`TenantCheck::finish`].
    Done,
}

/// An answer to a [`TenantStep`].
#[derive(Clone, Debug)]
pub enum TenantAnswer {
    /// The key's hash.
    Hashed(String),
    /// The overrides, or why they could not be read.
    Overrides(Result<Overrides, String>),
    /// The store's decision, or why it could not be asked.
    Charged(Result<Decision, String>),
}

enum Stage {
    Start,
    Hashing(String),
    Named(Rc<str>),
    Reading(Rc<str>),
    Charging(ChargeWalk),
    Done,
}

/// One request through the tenant stage: see the module's documentation.
pub struct TenantCheck<'s> {
    tenants: Option<&'s Tenants>,
    /// API key hashes → tenants besides the rules file's (a secret's).
    keys: &'s BTreeMap<String, String>,
    declared: Option<u64>,
    has_body: bool,
    colo: Option<String>,
    stage: Stage,
    overrides: Option<Rc<Overrides>>,
    pending: Option<(Rc<str>, Applied, Option<u64>)>,
    verdict: Option<TenantVerdict>,
    notes: Vec<TenantNote>,
}

impl<'s> TenantCheck<'s> {
    /// A request's way through `tenants` (none: it carries no tenant), `keys` the hashes of
    /// API keys given besides the rules file's; `declared` its `Content-Length`.
    pub fn new(
        tenants: Option<&'s Tenants>,
        keys: &'s BTreeMap<String, String>,
        facts: &RequestFacts<'_>,
        declared: Option<u64>,
        has_body: bool,
    ) -> Self {
        TenantCheck {
            tenants: tenants.filter(|t| t.matcher.matches(facts)),
            keys,
            declared,
            has_body,
            colo: facts.colo.map(ToOwned::to_owned),
            stage: Stage::Start,
            overrides: None,
            pending: None,
            verdict: None,
            notes: Vec::new(),
        }
    }

    /// What the stage needs next, at `now`; `header` looks a request header up by its
    /// lower-case name.
    pub fn next(
        &mut self,
        isolate: &mut Isolate,
        header: &dyn Fn(&str) -> Option<String>,
        now: Instant,
    ) -> TenantStep<'_> {
        loop {
            let Some(tenants) = self.tenants else {
                self.verdict.get_or_insert(TenantVerdict::NoTenant);
                return TenantStep::Done;
            };
            match core::mem::replace(&mut self.stage, Stage::Done) {
                Stage::Start => match &tenants.identify {
                    // A name no tenant can have (empty, or longer than any) names none: it
                    // never becomes a store's name or a key of the isolate's maps.
                    Identify::Named(name) => match header(name).map(|t| t.trim().to_owned()) {
                        Some(tenant) if is_tenant_name(&tenant) => self.stage = Stage::Named(tenant.into()),
                        _ => self.refuse(TenantRefusal::Unknown),
                    },
                    Identify::Key(name) => match header(name).filter(|k| !k.is_empty()) {
                        Some(key) => self.stage = Stage::Hashing(key),
                        None => self.refuse(TenantRefusal::Unknown),
                    },
                },
                Stage::Hashing(key) => {
                    self.stage = Stage::Hashing(key);
                    let Stage::Hashing(key) = &self.stage else { unreachable!() };
                    return TenantStep::Hash { key };
                }
                Stage::Named(tenant) => {
                    if let Some(overrides) = isolate.tenants.overrides.fresh(now) {
                        self.overrides = Some(overrides);
                        self.limit(isolate, tenant, now);
                    } else {
                        self.stage = Stage::Reading(tenant);
                        return TenantStep::ReadOverrides;
                    }
                }
                Stage::Reading(tenant) => {
                    self.stage = Stage::Reading(tenant);
                    return TenantStep::ReadOverrides;
                }
                Stage::Charging(walk) => {
                    if walk.next().is_some() {
                        self.stage = Stage::Charging(walk);
                        let Stage::Charging(walk) = &self.stage else { unreachable!() };
                        return TenantStep::Charge(walk.next().expect("a store to ask"));
                    }
                    let (decision, notes) = walk.finish(&mut isolate.tenants, now);
                    self.notes.extend(notes);
                    self.charged(isolate, decision);
                }
                Stage::Done => return TenantStep::Done,
            }
        }
    }

    /// The answer to the last [`TenantStep`].
    pub fn answer(&mut self, isolate: &mut Isolate, answer: TenantAnswer, now: Instant) {
        match (core::mem::replace(&mut self.stage, Stage::Done), answer) {
            (Stage::Hashing(_), TenantAnswer::Hashed(hash)) => {
                let tenant = self
                    .tenants
                    .and_then(|t| t.tenant_of_hash(&hash))
                    .or_else(|| self.keys.get(&hash).map(String::as_str));
                match tenant {
                    Some(tenant) => self.stage = Stage::Named(tenant.into()),
                    None => self.refuse(TenantRefusal::Unknown),
                }
            }
            (Stage::Reading(tenant), TenantAnswer::Overrides(read)) => {
                let state = &mut isolate.tenants;
                let read = read.map(|mut fresh| {
                    let instance_max = self.tenants.and_then(|t| t.max_body_bytes);
                    for clamped in fresh.clamp_bodies(instance_max) {
                        if state.clamped.len() >= Overrides::MAX {
                            state.clamped.clear();
                        }
                        if state.clamped.insert((clamped.tenant.clone(), clamped.set_at)) {
                            self.notes.push(TenantNote::Clamped(clamped));
                        }
                    }
                    fresh
                });
                let (overrides, error) = state.overrides.refreshed(now, read);
                self.notes.extend(error.map(TenantNote::OverridesUnreadable));
                self.overrides = Some(overrides);
                self.limit(isolate, tenant, now);
            }
            (Stage::Charging(mut walk), TenantAnswer::Charged(answer)) => {
                walk.answer(answer);
                self.stage = Stage::Charging(walk);
            }
            (stage, _) => self.stage = stage,
        }
    }

    /// The tenant is known and the overrides read: its limit, its body's cap, its charge.
    fn limit(&mut self, isolate: &mut Isolate, tenant: Rc<str>, now: Instant) {
        let Some(tenants) = self.tenants else { return };
        let overridden = self.overrides.as_ref().and_then(|o| o.get(&tenant).cloned());
        let found =
            effective(overridden.as_ref().map(|o| &o.limit), tenants.limits.get(&*tenant), tenants.default.as_ref());
        // The instance's cap binds every tenant, one with no limit at all too.
        let max_body = body_cap(found.map(|(limit, _)| limit), tenants.max_body_bytes);
        if let Some(max) = max_body.filter(|max| self.declared.is_some_and(|bytes| bytes > *max)) {
            return self.refuse(TenantRefusal::TooLarge { max });
        }
        let undeclared = self.has_body && self.declared.is_none();
        let Some((limit, source)) = found else {
            let counts_bytes = max_body.is_some();
            let admitted = TenantAdmitted {
                tenant,
                limit: None,
                max_body,
                counts_bytes,
                streams: undeclared && counts_bytes,
                share: None,
                shadow: None,
            };
            self.verdict = Some(TenantVerdict::Admitted(admitted));
            return;
        };
        let applied: Applied = Rc::new((limit.clone(), source, overridden.map_or(0, |o| o.set_at)));
        // Every tenant request ticks the isolate's table, so it is swept while stores answer too.
        isolate.tenants.local.tick(now);
        let what = Charge::Request(self.declared.unwrap_or(0));
        let walk = ChargeWalk::new(tenants.scope, Rc::clone(&tenant), self.colo.as_deref(), Rc::clone(&applied), what);
        self.pending = Some((tenant, applied, max_body));
        self.stage = Stage::Charging(walk);
    }

    /// The tenant's buckets decided: its share in flight, then the verdict.
    fn charged(&mut self, isolate: &mut Isolate, decision: Decision) {
        let Some((tenant, applied, max_body)) = self.pending.take() else { return };
        let limit = &applied.0;
        let enforced = limit.enforce.applies(&tenant);
        let mut shadow = None;
        if let Decision::Deny { retry_after } = decision {
            let refusal = TenantRefusal::Limited { tenant: tenant.to_string(), wait: retry_after };
            if enforced {
                return self.refuse(refusal);
            }
            // Not charged (a refused request never is), and on it goes.
            shadow = Some(refusal);
        }
        let counts_bytes = max_body.is_some() || limit.bytes_per_second.is_some() || limit.max_queue_bytes.is_some();
        let bytes = self.declared.unwrap_or(0);
        let share = if limit.max_queue.is_none() && limit.max_queue_bytes.is_none() {
            None
        } else {
            let queues = &mut isolate.tenants.queues;
            if queues.entry_ref(&*tenant).or_default().acquire(limit, bytes) {
                Some(bytes)
            } else {
                if queues.get(&*tenant).is_some_and(QueueShare::is_empty) {
                    queues.remove(&*tenant);
                }
                let refusal = TenantRefusal::Overloaded { tenant: tenant.to_string() };
                if enforced {
                    return self.refuse(refusal);
                }
                // On it goes, holding no place in the share.
                shadow.get_or_insert(refusal);
                None
            }
        };
        let streams = self.has_body && self.declared.is_none() && counts_bytes;
        let admitted = TenantAdmitted { tenant, limit: Some(applied), max_body, counts_bytes, streams, share, shadow };
        self.verdict = Some(TenantVerdict::Admitted(admitted));
    }

    fn refuse(&mut self, refusal: TenantRefusal) {
        self.stage = Stage::Done;
        self.verdict = Some(TenantVerdict::Refused(refusal));
    }

    /// What happened so far that a log may show (taken: each note is given once).
    pub fn take_notes(&mut self) -> Vec<TenantNote> {
        core::mem::take(&mut self.notes)
    }

    /// The verdict, once [`TenantCheck::next`] said [`TenantStep::Done`].
    ///
    /// # Panics
    /// Before then.
    pub fn finish(self) -> TenantVerdict {
        self.verdict.expect("TenantCheck::finish before TenantStep::Done")
    }
}
