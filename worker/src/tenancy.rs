//! Tenant quotas at the edge (`tenants` in the rules file), carried out: the pipeline's
//! tenant stage ([`TenantCheck`]) decides who the tenant is, the limit that applies, where
//! its buckets are charged and its share in flight; this module hashes keys, reads the
//! overrides and charges the stores it names, and holds what an admitted request keeps.

use crate::config::Setup;
use crate::guard::{Guard, Hold, Scope};
use crate::isolate;
use crate::js::{self, Env};
use crate::log::{describe, json_string, log_error};
use sluicegate::limit::Decision;
use sluicegate::pipeline::tenant::{ChargeWalk, StoreCharge, StreamedTenant, MAX_LOCAL_TENANTS};
use sluicegate::pipeline::{TenantAnswer, TenantCheck, TenantNote, TenantStep, TenantVerdict};
use sluicegate::rules::RequestFacts;
use sluicegate::tenants::{Overrides, TenantScope};
use sluicegate::time::{Instant, Span};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Why a tenant request is refused (before its body is read, or as it streams).
pub use sluicegate::pipeline::TenantRefusal as Refusal;

/// What admitting a tenant request left it holding.
#[derive(Default)]
pub struct Admitted {
    /// Its tenant (none: the request carries no tenant).
    pub tenant: Option<Rc<str>>,
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
    /// The refusal its tenant's limit would have made, had it enforced it (shadow).
    pub shadow: Option<Refusal>,
}

/// A tenant's body of no declared length, charged as it streams, as the pipeline's
/// [`StreamedTenant`] decides: the first refusal cuts the body (the upload made of it is
/// aborted).
pub struct Streamed {
    check: StreamedTenant,
    /// Where its buckets are counted.
    env: Env,
    /// Its place in flight and the bytes it holds there, when the limit caps bytes in flight.
    share: Option<(Hold, Rc<Cell<u64>>)>,
}

impl Streamed {
    /// Count `bytes` more against what this isolate holds ([`StreamedTenant::take`]); a
    /// share given back (the origin answered first) is not grown again.
    ///
    /// # Errors
    /// The refusal, when these bytes are not to be passed on.
    pub fn take(&mut self, bytes: u64) -> Result<(), Refusal> {
        let share = self.share.as_ref().filter(|(hold, _)| hold.is_held()).map(|(_, held)| held);
        let mut held = share.map(|h| h.get());
        let taken = isolate::with(|i| self.check.take(&mut i.tenants, held.as_mut(), bytes));
        if let (Some(cell), Some(held)) = (share, held) {
            cell.set(held);
        }
        taken
    }

    /// The charge of `bytes` more to the tenant's byte bucket (in its store, as its request
    /// was charged), when its limit counts bytes: to be awaited before they are passed on.
    pub fn charge(&self, bytes: u64) -> Option<impl Future<Output = Result<(), Refusal>> + 'static> {
        let walk = self.check.charge(bytes)?;
        let env: Env = JsValue::clone(&self.env).unchecked_into();
        let check = self.check.clone();
        Some(async move { check.charged(charge(&env, walk, crate::clock::now()).await) })
    }
}

/// Admit a tenant request, or say why not, as the pipeline's tenant stage decides. Nothing
/// held (`Admitted::default()`): the request carries no tenant, or its tenant is unlimited
/// and no cap binds its body. A body of no declared length is charged as it streams
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
    let tenants = setup.rules.tenants();
    let mut check = TenantCheck::new(tenants, &setup.tenant_keys, facts, declared, has_body);
    loop {
        // The step borrows the check, not the isolate: it is carried out outside `with`.
        let answer = match isolate::with(|i| check.next(i, &header, now)) {
            TenantStep::Done => break,
            TenantStep::Hash { key } => {
                TenantAnswer::Hashed(JsFuture::from(js::sha256_hex(key)?).await?.as_string().unwrap_or_default())
            }
            TenantStep::ReadOverrides => TenantAnswer::Overrides(read_overrides(env).await.map_err(|e| describe(&e))),
            TenantStep::Charge(ask) => TenantAnswer::Charged(charge_in_store(env, &ask, now).await),
        };
        isolate::with(|i| check.answer(i, answer, now));
        log_notes(check.take_notes());
    }
    log_notes(check.take_notes());
    let admitted = match check.finish() {
        TenantVerdict::NoTenant => return Ok(Ok(Admitted::default())),
        TenantVerdict::Refused(refusal) => return Ok(Err(refusal)),
        TenantVerdict::Admitted(admitted) => admitted,
    };
    let tenant_scope = tenants.map_or(TenantScope::Colo, |t| t.scope);
    let mut streamed = StreamedTenant::of(&admitted, tenant_scope, facts.colo).map(|check| Streamed {
        check,
        env: JsValue::clone(env).unchecked_into(),
        share: None,
    });
    let share = admitted.share.map(|bytes| {
        // What it holds in flight: its declared bytes, or those its body has brought so far.
        let held = Rc::new(Cell::new(bytes));
        let guard = {
            let (tenant, held) = (Rc::clone(&admitted.tenant), Rc::clone(&held));
            scope.hold(move || isolate::with(|i| i.tenants.release(&tenant, held.get())))
        };
        if let Some(streamed) = streamed.as_mut().filter(|s| s.check.holds_bytes()) {
            streamed.share = Some((guard.hold().clone(), held));
        }
        guard
    });
    Ok(Ok(Admitted {
        tenant: Some(Rc::clone(&admitted.tenant)),
        share,
        counts_bytes: admitted.counts_bytes,
        streamed,
        shadow: admitted.shadow.clone(),
    }))
}

/// A charge of a tenant's buckets carried out: each store it names, then the isolate's table.
async fn charge(env: &Env, mut walk: ChargeWalk, now: Instant) -> Decision {
    while let Some(ask) = walk.next() {
        let answer = charge_in_store(env, &ask, now).await;
        walk.answer(answer);
    }
    let (decision, notes) = isolate::with(|i| walk.finish(&mut i.tenants, now));
    log_notes(notes);
    decision
}

/// `what` charged in its store, asked at `at` (the store keeps its own time, except under a
/// development clock: see `crate::clock::counter_now`).
async fn charge_in_store(env: &Env, what: &StoreCharge<'_>, at: Instant) -> Result<Decision, String> {
    let ask = async {
        let namespace = crate::config::rate_limiter(env)?;
        let stub = namespace.get(&namespace.id_from_name(what.store)?)?;
        let call = stub.charge_tenant(
            what.tenant,
            &what.limit.to_json(),
            what.generation as f64,
            what.bytes as f64,
            f64::from(what.requests),
            at.as_millis() as f64,
        )?;
        let call = js_sys::Promise::resolve(&call);
        JsFuture::from(js::within(&call, f64::from(crate::config::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await
    };
    let answer = ask.await.map_err(|e| describe(&e))?;
    let wait_ms = answer
        .as_f64()
        .filter(|w| w.is_finite() && *w >= 0.0)
        .ok_or_else(|| String::from("the tenant's store did not answer in time"))?;
    Ok(if wait_ms == 0.0 {
        Decision::Allow { remaining: 0, reset: Span::ZERO }
    } else {
        Decision::Deny { retry_after: Span::from_millis(wait_ms as u64) }
    })
}

fn log_notes(notes: Vec<TenantNote>) {
    for note in notes {
        let line = match note {
            TenantNote::StoreFailed { tenant, store, error } => format!(
                "{{\"sluicegate\":\"store-failure\",\"tenant\":{},\"store\":{},\"error\":{}}}",
                json_string(&tenant),
                json_string(&store),
                json_string(&error)
            ),
            TenantNote::TableFull { tenants } => format!(
                "{{\"sluicegate\":\"tenant-table-full\",\"tenants\":{tenants},\"max_default\":{MAX_LOCAL_TENANTS},\
                 \"detail\":\"new tenants under the default share one overflow bucket until buckets refill\"}}"
            ),
            TenantNote::OverridesUnreadable(error) => {
                format!("sluicegate: the tenant overrides cannot be read: {error}")
            }
            TenantNote::Clamped(clamped) => format!(
                "{{\"sluicegate\":\"override-clamped\",\"tenant\":{},\"set_at\":{},\"max_body_bytes\":{},\"applied\":{}}}",
                json_string(&clamped.tenant),
                clamped.set_at,
                clamped.was,
                clamped.to
            ),
        };
        log_error(&line);
    }
}

/// The stub of the object that keeps the runtime overrides.
pub fn overrides_object(env: &Env) -> Result<js::Stub, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    namespace.get(&namespace.id_from_name(crate::counter::OVERRIDES_OBJECT)?)
}

async fn read_overrides(env: &Env) -> Result<Overrides, JsValue> {
    read_stored(env, js::Stub::get_overrides, Overrides::from_json).await
}

/// A document the overrides object keeps (the tenants' overrides, the rules'), as it holds it
/// now: asked by `get` within the store's timeout, read by `read` (entries that no longer
/// validate left out).
pub async fn read_stored<T>(
    env: &Env,
    get: impl FnOnce(&js::Stub) -> Result<JsValue, JsValue>,
    read: impl FnOnce(&str) -> Result<(T, Vec<String>), String>,
) -> Result<T, JsValue> {
    let call = overrides_object(env).and_then(|o| get(&o));
    let text = js::store_answer(call, "the overrides store", crate::config::STORE_TIMEOUT_MS).await?;
    let text = text.as_string().ok_or_else(|| JsValue::from_str("the overrides store answered no text"))?;
    read(&text).map(|(found, _)| found).map_err(|e| JsValue::from_str(&e))
}

/// Forget this isolate's copy of the overrides (after a change made through it).
pub fn forget_overrides() {
    isolate::with(|i| i.tenants.forget_overrides());
}
