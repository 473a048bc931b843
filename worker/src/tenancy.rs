//! Tenant quotas at the edge (`tenants` in the rules file): who the tenant is, the limit
//! that applies, its buckets (in a Durable Object per tenant and colo, or per tenant for
//! the fleet; when that cannot answer, the colo's, then this isolate's own), and its share
//! of what may be in flight to the origin.

use crate::config::Setup;
use crate::guard::{Guard, Scope};
use crate::js::{self, Env};
use sluicegate::limit::Decision;
use sluicegate::rules::RequestFacts;
use sluicegate::tenants::{
    effective, Identify, LimitSource, Overrides, Placement, QueueShare, TenantLimit, TenantScope, TenantTable, Tenants,
};
use sluicegate::time::{Instant, Span};
use std::cell::RefCell;
use std::collections::HashMap;
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
}

/// Why a tenant request is refused.
pub enum Refusal {
    /// No key, or one that names no tenant (401; nothing was charged).
    Unknown,
    /// The body is bigger than the tenant may send (413).
    TooLarge { max: u64 },
    /// A body without `Content-Length` for a tenant whose limit counts bytes (411).
    LengthRequired,
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
    /// Whether the tenant's limit counts body bytes (the body is then checked as it streams
    /// against the length it declared and was charged).
    pub counts_bytes: bool,
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
/// carries no tenant (the section does not match it) or its tenant is unlimited.
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
    let Some((limit, _)) =
        effective(overridden.map(|o| &o.limit), tenants.limits.get(&tenant), tenants.default.as_ref())
    else {
        return Ok(Ok(Admitted::default()));
    };
    let generation = overridden.map_or(0, |o| o.set_at);
    let max_body = limit.max_body_bytes.or(tenants.max_body_bytes);
    // Bytes are counted before the body is read: a body of unknown length cannot be.
    let counts_bytes = max_body.is_some() || limit.bytes_per_second.is_some() || limit.max_queue_bytes.is_some();
    if has_body && declared.is_none() && counts_bytes {
        return Ok(Err(Refusal::LengthRequired));
    }
    let bytes = declared.unwrap_or(0);
    if let Some(max) = max_body.filter(|max| bytes > *max) {
        return Ok(Err(Refusal::TooLarge { max }));
    }
    let decision = charge(env, tenants, &tenant, facts.colo, (limit, generation), bytes, now).await;
    if let Decision::Deny { retry_after } = decision {
        return Ok(Err(Refusal::Limited { tenant, wait: retry_after }));
    }
    if limit.max_queue.is_none() && limit.max_queue_bytes.is_none() {
        return Ok(Ok(Admitted { share: None, counts_bytes }));
    }
    let admitted = QUEUES.with(|q| q.borrow_mut().entry(tenant.clone()).or_default().acquire(limit, bytes));
    if !admitted {
        return Ok(Err(Refusal::Overloaded { tenant }));
    }
    let share = scope.hold(move || release_share(&tenant, bytes));
    Ok(Ok(Admitted { share: Some(share), counts_bytes }))
}

/// The tenant a request names: by its API key's hash, or by the sender's header.
async fn identify(
    setup: &Setup,
    tenants: &Tenants,
    header: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, JsValue> {
    match &tenants.identify {
        Identify::Named(name) => Ok(header(name).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())),
        Identify::Key(name) => {
            let Some(key) = header(name).filter(|k| !k.is_empty()) else { return Ok(None) };
            let hash = JsFuture::from(js::sha256_hex(&key)?).await?.as_string().unwrap_or_default();
            Ok(setup.tenant_of_hash(&hash).map(str::to_owned))
        }
    }
}

/// Charge one request of `bytes` to the tenant's buckets in its Durable Object (per colo or
/// for the fleet), or, when the store cannot answer, to this isolate's own.
async fn charge(
    env: &Env,
    tenants: &Tenants,
    tenant: &str,
    colo: Option<&str>,
    (limit, generation): (&TenantLimit, u64),
    bytes: u64,
    now: Instant,
) -> Decision {
    // Every tenant request ticks this isolate's table, so it is swept while stores answer too.
    tick_local(now);
    let colo_name = format!("tenant\u{1f}{tenant}\u{1f}{}", colo.unwrap_or("unknown"));
    // Fleet scope asks the tenant's one object; when it cannot answer, the colo's own
    // buckets (colo scope's object) do; when no store answers, this isolate's.
    let mut stores = vec![];
    if tenants.scope == TenantScope::Fleet {
        stores.push(format!("tenant\u{1f}{tenant}"));
    }
    stores.push(colo_name);
    for name in &stores {
        match charge_in_store(env, name, tenant, (limit, generation), bytes).await {
            Ok(decision) => return decision,
            Err(error) => crate::log_error(&format!(
                "{{\"sluicegate\":\"store-failure\",\"tenant\":{},\"store\":{},\"error\":{}}}",
                crate::json_string(tenant),
                crate::json_string(name),
                crate::json_string(&crate::describe(&error))
            )),
        }
    }
    charge_here(tenants, tenant, (limit, generation), bytes, now)
}

async fn charge_in_store(
    env: &Env,
    name: &str,
    tenant: &str,
    (limit, generation): (&TenantLimit, u64),
    bytes: u64,
) -> Result<Decision, JsValue> {
    let namespace = js::rate_limiter(env)?;
    let stub = namespace.get(&namespace.id_from_name(name)?)?;
    let call =
        js_sys::Promise::resolve(&stub.charge_tenant(tenant, &limit.to_json(), generation as f64, bytes as f64)?);
    let answer = JsFuture::from(js::within(&call, f64::from(crate::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
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
        f(local.get_or_insert_with(|| TenantTable::new(MAX_LOCAL_TENANTS, (js::random_u64(), js::random_u64()))))
    })
}

/// Sweep the next shard of this isolate's table when a tick is due.
fn tick_local(now: Instant) {
    with_local(|table| table.tick(now));
}

/// Where the limit `charge` was handed came from: an override has a generation (when it
/// was set); otherwise the rules file's entry, else its default.
fn source_of(tenants: &Tenants, tenant: &str, generation: u64) -> LimitSource {
    if generation != 0 {
        LimitSource::Override
    } else if tenants.limits.contains_key(tenant) {
        LimitSource::Config
    } else {
        LimitSource::Default
    }
}

fn charge_here(
    tenants: &Tenants,
    tenant: &str,
    (limit, generation): (&TenantLimit, u64),
    bytes: u64,
    now: Instant,
) -> Decision {
    let source = source_of(tenants, tenant, generation);
    let (decision, placement, held, first) = with_local(|table| {
        let (decision, placement) = table.charge(tenant, limit, source, generation, bytes, now);
        (decision, placement, table.len(), table.overflowed() == 1)
    });
    if placement == Placement::Overflow && first {
        // Once per tick: the table is full of buckets that still owe.
        crate::log_error(&format!(
            "{{\"sluicegate\":\"tenant-table-full\",\"tenants\":{held},\"max_default\":{MAX_LOCAL_TENANTS},\
             \"detail\":\"new tenants under the default share one overflow bucket until buckets refill\"}}"
        ));
    }
    decision
}

/// The stub of the object that keeps the runtime overrides.
pub fn overrides_object(env: &Env) -> Result<js::Stub, JsValue> {
    let namespace = js::rate_limiter(env)?;
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
            crate::log_error(&format!("sluicegate: the tenant overrides cannot be read: {}", crate::describe(&error)));
            cached.map_or_else(|| Rc::new(Overrides::default()), |(_, o)| o)
        }
    }
}

async fn read_overrides(env: &Env) -> Result<Overrides, JsValue> {
    let call = js_sys::Promise::resolve(&overrides_object(env)?.get_overrides()?);
    let text = JsFuture::from(js::within(&call, f64::from(crate::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    let text = text.as_string().ok_or_else(|| JsValue::from_str("no answer in time"))?;
    Overrides::from_json(&text).map(|(o, _)| o).map_err(|e| JsValue::from_str(&e))
}

/// Forget this isolate's copy of the overrides (after a change made through it).
pub fn forget_overrides() {
    OVERRIDES.with(|c| *c.borrow_mut() = None);
}
