//! Tenant quotas at the edge (`tenants` in the rules file): who the tenant is, the limit
//! that applies, its buckets (in a Durable Object per tenant and colo, or per tenant for
//! the fleet; when that cannot answer, the colo's, then this isolate's own), and its share
//! of what may be in flight to the origin.

use crate::config::Setup;
use crate::guard::{Guard, Hold, Scope};
use crate::js::{self, Env};
use sluicegate::limit::Decision;
use sluicegate::rules::RequestFacts;
use sluicegate::tenants::{
    body_cap, effective, Identify, LimitSource, Overrides, Placement, QueueShare, StreamedBody, TenantLimit,
    TenantScope, TenantTable, Tenants,
};
use sluicegate::time::{Instant, Span};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// The most buckets this isolate keeps (for when no store answers) of tenants under the
/// default limit; past it a new such tenant is charged to one shared overflow bucket (see
/// [`TenantTable`]). Tenants with a limit of their own always get theirs.
const MAX_LOCAL_TENANTS: usize = 10_000;

/// How long an isolate trusts its copy of the runtime overrides: a change reaches every
/// isolate within this.
const OVERRIDES_FRESH: Span = Span::from_secs(1);

thread_local! {
    /// This isolate's copy of the runtime overrides, and when it was read.
    static OVERRIDES: RefCell<Option<(Instant, Rc<Overrides>)>> = const { RefCell::new(None) };
    /// This isolate's buckets per tenant (the store's stand-in), bounded and swept a shard a
    /// tick; made on first use (its salt is random, which workerd refuses at module scope).
    static LOCAL: RefCell<Option<TenantTable>> = const { RefCell::new(None) };
    /// What each tenant has in flight from this isolate: an entry exists only while a
    /// request of it is in flight (it is removed when its last one is given back), so the
    /// map never holds more tenants than this isolate has requests in flight.
    static QUEUES: RefCell<HashMap<String, QueueShare>> = RefCell::new(HashMap::new());
    /// The overrides (tenant, when set) this isolate has logged as clamped to the
    /// instance's `max_body_bytes`: each is logged once.
    static CLAMPED: RefCell<HashSet<(String, u64)>> = RefCell::new(HashSet::new());
}

/// Why a tenant request is refused (before its body is read, or as it streams).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No key, or one that names no tenant (401; nothing was charged).
    Unknown,
    /// The body is bigger than the tenant may send (413).
    TooLarge { max: u64 },
    /// Over the tenant's rate or bytes (429).
    Limited { tenant: String, wait: Span },
    /// Over the tenant's share of requests or bytes in flight (429 `tenant_overload`).
    Overloaded { tenant: String },
}

/// What admitting a tenant request left it holding.
#[derive(Default)]
pub struct Admitted {
    /// Its tenant's place in flight (given back when dropped: when the origin has answered),
    /// when the tenant's limit caps what is in flight.
    pub share: Option<Guard>,
    /// Whether the tenant's body bytes are counted: capped (the instance's `max_body_bytes`
    /// binds every tenant), charged, or held in flight. A body that declared its length is
    /// then checked as it streams against that length, which was charged; one that did not
    /// is charged as it streams ([`Admitted::streamed`]).
    pub counts_bytes: bool,
    /// How a body of no declared length is charged as it streams (its request was charged,
    /// with no bytes, when admitted).
    pub streamed: Option<Streamed>,
}

/// A tenant's body of no declared length, charged as it streams: each chunk counted against
/// the biggest body the tenant may send, its share in flight and its byte bucket before it
/// is passed on. The first refusal cuts the body (the upload made of it is aborted).
pub struct Streamed {
    body: StreamedBody,
    /// The tenant, and the limit (with where it came from and its generation) it was
    /// admitted under; no limit: only the instance's cap binds.
    tenant: Rc<str>,
    limit: Option<Rc<(TenantLimit, LimitSource, u64)>>,
    /// Where its buckets are counted.
    env: Env,
    scope: TenantScope,
    colo: Option<Rc<str>>,
    /// Its place in flight and the bytes it holds there, when the limit caps bytes in flight.
    share: Option<(Hold, Rc<Cell<u64>>)>,
}

impl Streamed {
    /// Count `bytes` more against what this isolate holds: the biggest body the tenant may
    /// send (413), then its share of bytes in flight (429 `tenant_overload`).
    ///
    /// # Errors
    /// The refusal, when these bytes are not to be passed on.
    pub fn take(&mut self, bytes: u64) -> Result<(), Refusal> {
        self.body.take(bytes).map_err(|max| Refusal::TooLarge { max })?;
        let (Some(limit), Some((hold, held))) = (&self.limit, &self.share) else { return Ok(()) };
        // A share given back (the origin answered first) is not grown again.
        if !hold.is_held() {
            return Ok(());
        }
        let grown =
            QUEUES.with(|q| q.borrow_mut().get_mut(&*self.tenant).is_some_and(|s| s.grow(&limit.0, held.get(), bytes)));
        if !grown {
            return Err(Refusal::Overloaded { tenant: self.tenant.to_string() });
        }
        held.set(held.get() + bytes);
        Ok(())
    }

    /// The charge of `bytes` more to the tenant's byte bucket (in its store, as its request
    /// was charged), when its limit counts bytes: to be awaited before they are passed on.
    pub fn charge(&self, bytes: u64) -> Option<impl Future<Output = Result<(), Refusal>> + 'static> {
        let limit = Rc::clone(self.limit.as_ref().filter(|l| l.0.bytes_per_second.is_some() && bytes > 0)?);
        let env: Env = JsValue::clone(&self.env).unchecked_into();
        let (scope, tenant, colo) = (self.scope, Rc::clone(&self.tenant), self.colo.clone());
        Some(async move {
            let what = Charge::More(bytes);
            let (limit, source, generation) = (&limit.0, limit.1, limit.2);
            match charge(&env, scope, &tenant, colo.as_deref(), (limit, source, generation), what, crate::clock::now())
                .await
            {
                Decision::Deny { retry_after } => {
                    Err(Refusal::Limited { tenant: tenant.to_string(), wait: retry_after })
                }
                Decision::Allow { .. } => Ok(()),
            }
        })
    }
}

/// What a tenant is charged with.
#[derive(Clone, Copy, Debug)]
enum Charge {
    /// One request of this many body bytes (declared, or 0).
    Request(u64),
    /// This many more bytes of a body whose request was charged (its bytes as they stream).
    More(u64),
}

/// Give back `bytes` and one request of `tenant`'s place in flight.
fn release_share(tenant: &str, bytes: u64) {
    QUEUES.with(|q| {
        let mut q = q.borrow_mut();
        if let Some(share) = q.get_mut(tenant) {
            share.release(bytes);
            if share.is_empty() {
                q.remove(tenant);
            }
        }
    });
}

/// Admit a tenant request, or say why not. Nothing held (`Admitted::default()`): the request
/// carries no tenant (the section does not match it), or its tenant is unlimited and no cap
/// binds its body. A body of no declared length is charged as it streams
/// ([`Admitted::streamed`]): its request is charged here with no bytes.
#[allow(clippy::too_many_arguments)]
pub async fn admit(
    setup: &Setup,
    env: &Env,
    facts: &RequestFacts<'_>,
    header: impl Fn(&str) -> Option<String>,
    declared: Option<u64>,
    has_body: bool,
    now: Instant,
    scope: &Scope<'_>,
) -> Result<Result<Admitted, Refusal>, JsValue> {
    let Some(tenants) = setup.rules.tenants().filter(|t| t.matcher.matches(facts)) else {
        return Ok(Ok(Admitted::default()));
    };
    let Some(tenant) = identify(setup, tenants, &header).await? else { return Ok(Err(Refusal::Unknown)) };
    let overrides = overrides(env, now).await;
    let overridden = overrides.get(&tenant);
    let found = effective(overridden.map(|o| &o.limit), tenants.limits.get(&tenant), tenants.default.as_ref());
    // The instance's cap binds every tenant, one with no limit at all too.
    let max_body = body_cap(found.map(|(limit, _)| limit), tenants.max_body_bytes);
    if let Some(max) = max_body.filter(|max| declared.is_some_and(|bytes| bytes > *max)) {
        return Ok(Err(Refusal::TooLarge { max }));
    }
    let undeclared = has_body && declared.is_none();
    let tenant: Rc<str> = tenant.into();
    let streaming = |limit: Option<Rc<(TenantLimit, LimitSource, u64)>>| Streamed {
        body: StreamedBody::new(max_body),
        tenant: Rc::clone(&tenant),
        limit,
        env: JsValue::clone(env).unchecked_into(),
        scope: tenants.scope,
        colo: facts.colo.map(Rc::from),
        share: None,
    };
    let Some((limit, source)) = found else {
        let counts_bytes = max_body.is_some();
        let streamed = (undeclared && counts_bytes).then(|| streaming(None));
        return Ok(Ok(Admitted { share: None, counts_bytes, streamed }));
    };
    let generation = overridden.map_or(0, |o| o.set_at);
    let counts_bytes = max_body.is_some() || limit.bytes_per_second.is_some() || limit.max_queue_bytes.is_some();
    let bytes = declared.unwrap_or(0);
    let what = Charge::Request(bytes);
    let decision = charge(env, tenants.scope, &tenant, facts.colo, (limit, source, generation), what, now).await;
    if let Decision::Deny { retry_after } = decision {
        return Ok(Err(Refusal::Limited { tenant: tenant.to_string(), wait: retry_after }));
    }
    let mut streamed =
        (undeclared && counts_bytes).then(|| streaming(Some(Rc::new((limit.clone(), source, generation)))));
    if limit.max_queue.is_none() && limit.max_queue_bytes.is_none() {
        return Ok(Ok(Admitted { share: None, counts_bytes, streamed }));
    }
    let admitted = QUEUES.with(|q| q.borrow_mut().entry(tenant.to_string()).or_default().acquire(limit, bytes));
    if !admitted {
        return Ok(Err(Refusal::Overloaded { tenant: tenant.to_string() }));
    }
    // What it holds in flight: its declared bytes, or those its body has brought so far.
    let held = Rc::new(Cell::new(bytes));
    let share = {
        let (tenant, held) = (Rc::clone(&tenant), Rc::clone(&held));
        scope.hold(move || release_share(&tenant, held.get()))
    };
    if let Some(streamed) = streamed.as_mut().filter(|_| limit.max_queue_bytes.is_some()) {
        streamed.share = Some((share.hold().clone(), held));
    }
    Ok(Ok(Admitted { share: Some(share), counts_bytes, streamed }))
}

/// The tenant a request names: by its API key's hash, or by the sender's header.
async fn identify(
    setup: &Setup,
    tenants: &Tenants,
    header: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, JsValue> {
    match &tenants.identify {
        // A name no tenant can have (empty, or longer than any tenant name) names none: it
        // never becomes a Durable Object's name or a key of this isolate's maps.
        Identify::Named(name) => {
            Ok(header(name).map(|t| t.trim().to_owned()).filter(|t| sluicegate::tenants::is_tenant_name(t)))
        }
        Identify::Key(name) => {
            let Some(key) = header(name).filter(|k| !k.is_empty()) else { return Ok(None) };
            let hash = JsFuture::from(js::sha256_hex(&key)?).await?.as_string().unwrap_or_default();
            Ok(setup.tenant_of_hash(&hash).map(str::to_owned))
        }
    }
}

/// Charge the tenant's buckets in its Durable Object (per colo or for the fleet), or, when
/// the store cannot answer, this isolate's own. `limit` came from `source`; `generation`
/// tells one override of it from the next (0 for none).
async fn charge(
    env: &Env,
    scope: TenantScope,
    tenant: &str,
    colo: Option<&str>,
    (limit, source, generation): (&TenantLimit, LimitSource, u64),
    what: Charge,
    now: Instant,
) -> Decision {
    // Every tenant request ticks this isolate's table, so it is swept while stores answer too.
    tick_local(now);
    let colo_name = format!("tenant\u{1f}{tenant}\u{1f}{}", colo.unwrap_or("unknown"));
    // Fleet scope asks the tenant's one object; when it cannot answer, the colo's own
    // buckets (colo scope's object) do; when no store answers, this isolate's.
    let mut stores = vec![];
    if scope == TenantScope::Fleet {
        stores.push(format!("tenant\u{1f}{tenant}"));
    }
    stores.push(colo_name);
    for name in &stores {
        match charge_in_store(env, name, tenant, (limit, generation), what).await {
            Ok(decision) => return decision,
            Err(error) => crate::log::log_error(&format!(
                "{{\"sluicegate\":\"store-failure\",\"tenant\":{},\"store\":{},\"error\":{}}}",
                crate::log::json_string(tenant),
                crate::log::json_string(name),
                crate::log::json_string(&crate::log::describe(&error))
            )),
        }
    }
    charge_here(tenant, (limit, source, generation), what, now)
}

async fn charge_in_store(
    env: &Env,
    name: &str,
    tenant: &str,
    (limit, generation): (&TenantLimit, u64),
    what: Charge,
) -> Result<Decision, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    let stub = namespace.get(&namespace.id_from_name(name)?)?;
    let (requests, bytes) = match what {
        Charge::Request(bytes) => (1.0, bytes as f64),
        Charge::More(bytes) => (0.0, bytes as f64),
    };
    let call =
        js_sys::Promise::resolve(&stub.charge_tenant(tenant, &limit.to_json(), generation as f64, bytes, requests)?);
    let answer =
        JsFuture::from(js::within(&call, f64::from(crate::config::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    let wait_ms = answer
        .as_f64()
        .filter(|w| w.is_finite() && *w >= 0.0)
        .ok_or_else(|| JsValue::from_str("the tenant's store did not answer in time"))?;
    Ok(if wait_ms == 0.0 {
        Decision::Allow { remaining: 0, reset: Span::ZERO }
    } else {
        Decision::Deny { retry_after: Span::from_millis(wait_ms as u64) }
    })
}

/// Run `f` on this isolate's table of tenant buckets, making it on first use.
fn with_local<T>(f: impl FnOnce(&mut TenantTable) -> T) -> T {
    LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        f(local.get_or_insert_with(|| {
            TenantTable::new(MAX_LOCAL_TENANTS, (crate::runtime::random_u64(), crate::runtime::random_u64()))
        }))
    })
}

/// Sweep the next shard of this isolate's table when a tick is due.
fn tick_local(now: Instant) {
    with_local(|table| table.tick(now));
}

fn charge_here(
    tenant: &str,
    (limit, source, generation): (&TenantLimit, LimitSource, u64),
    what: Charge,
    now: Instant,
) -> Decision {
    let (decision, placement, held, first) = with_local(|table| {
        let (decision, placement) = match what {
            Charge::Request(bytes) => table.charge(tenant, limit, source, generation, bytes, now),
            Charge::More(bytes) => table.charge_more(tenant, limit, source, generation, bytes, now),
        };
        (decision, placement, table.len(), table.overflowed() == 1)
    });
    if placement == Placement::Overflow && first {
        // Once per tick: the table is full of buckets that still owe.
        crate::log::log_error(&format!(
            "{{\"sluicegate\":\"tenant-table-full\",\"tenants\":{held},\"max_default\":{MAX_LOCAL_TENANTS},\
             \"detail\":\"new tenants under the default share one overflow bucket until buckets refill\"}}"
        ));
    }
    decision
}

/// The stub of the object that keeps the runtime overrides.
pub fn overrides_object(env: &Env) -> Result<js::Stub, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    namespace.get(&namespace.id_from_name(crate::counter::OVERRIDES_OBJECT)?)
}

/// The runtime overrides, as this isolate last read them (at most [`OVERRIDES_FRESH`] ago).
/// When they cannot be read, the copy in hand serves (none at first), logged.
pub async fn overrides(env: &Env, now: Instant) -> Rc<Overrides> {
    let cached = OVERRIDES.with(|c| c.borrow().clone());
    if let Some((read_at, overrides)) = &cached {
        if now < *read_at + OVERRIDES_FRESH {
            return Rc::clone(overrides);
        }
    }
    match read_overrides(env).await {
        Ok(fresh) => {
            let fresh = Rc::new(fresh);
            OVERRIDES.with(|c| *c.borrow_mut() = Some((now, Rc::clone(&fresh))));
            fresh
        }
        Err(error) => {
            crate::log::log_error(&format!(
                "sluicegate: the tenant overrides cannot be read: {}",
                crate::log::describe(&error)
            ));
            cached.map_or_else(|| Rc::new(Overrides::default()), |(_, o)| o)
        }
    }
}

async fn read_overrides(env: &Env) -> Result<Overrides, JsValue> {
    let call = js_sys::Promise::resolve(&overrides_object(env)?.get_overrides()?);
    let text =
        JsFuture::from(js::within(&call, f64::from(crate::config::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    let text = text.as_string().ok_or_else(|| JsValue::from_str("no answer in time"))?;
    let mut overrides = Overrides::from_json(&text).map(|(o, _)| o).map_err(|e| JsValue::from_str(&e))?;
    clamp(env, &mut overrides);
    Ok(overrides)
}

/// Lower every override's `max_body_bytes` to the instance's, where it is above it: it was
/// checked when it was set, but the cap may have been lowered since (a deploy). Each
/// override clamped is logged once per isolate.
fn clamp(env: &Env, overrides: &mut Overrides) {
    let config = crate::config::config(env);
    let instance_max = config.as_ref().as_ref().ok().and_then(|setup| setup.rules.tenants()?.max_body_bytes);
    for clamped in overrides.clamp_bodies(instance_max) {
        let first = CLAMPED.with(|seen| {
            let mut seen = seen.borrow_mut();
            if seen.len() >= Overrides::MAX {
                seen.clear();
            }
            seen.insert((clamped.tenant.clone(), clamped.set_at))
        });
        if first {
            crate::log::log_error(&format!(
                "{{\"sluicegate\":\"override-clamped\",\"tenant\":{},\"set_at\":{},\"max_body_bytes\":{},\"applied\":{}}}",
                crate::log::json_string(&clamped.tenant),
                clamped.set_at,
                clamped.was,
                clamped.to
            ));
        }
    }
}

/// Forget this isolate's copy of the overrides (after a change made through it).
pub fn forget_overrides() {
    OVERRIDES.with(|c| *c.borrow_mut() = None);
}
