//! Upstream budgets, as the worker takes them: in this isolate (`scope: "isolate"`, the
//! core's [`Slots`] per upstream, with the waiting done on JavaScript promises), or from the
//! upstream's Durable Object (`scope: "fleet"`, see `fleet.rs`), as a lease renewed while
//! the response streams.

use crate::js::{self, Env};
use sluicegate::budget::{Acquire, Slots, Ticket};
use sluicegate::rules::{Scope, Upstream};
use std::cell::RefCell;
use std::collections::HashMap;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Waiters one upstream may queue in an isolate before new arrivals are refused at once.
const MAX_QUEUE: usize = 10_000;

struct Budget {
    slots: Slots,
    /// The `resolve` of each waiter's promise, by ticket.
    waiters: HashMap<Ticket, js_sys::Function>,
}

thread_local! {
    static BUDGETS: RefCell<HashMap<(String, u32), Budget>> = RefCell::new(HashMap::new());
}

fn with_budget<T>(upstream: &Upstream, f: impl FnOnce(&mut Budget) -> T) -> T {
    BUDGETS.with(|budgets| {
        let mut budgets = budgets.borrow_mut();
        let key = (upstream.id.clone(), upstream.max_in_flight);
        let budget = budgets.entry(key).or_insert_with(|| Budget {
            slots: Slots::new(upstream.max_in_flight, MAX_QUEUE),
            waiters: HashMap::new(),
        });
        f(budget)
    })
}

/// A held slot of an upstream budget; dropping it gives the slot back (to the first waiter).
pub struct Slot {
    held: Option<Held>,
}

enum Held {
    /// A slot of this isolate's budget.
    Isolate(Upstream),
    /// A fleet lease, given back by calling this function.
    Fleet(js_sys::Function),
}

impl Slot {
    /// Give the slot back when `response`'s body is done (read to the end, failed, or
    /// cancelled) or the client of `request` goes away, not before.
    pub fn release_when_done(mut self, request: &web_sys::Request, response: &web_sys::Response) -> web_sys::Response {
        let done = match self.held.take() {
            Some(Held::Isolate(upstream)) => Closure::once_into_js(move || release(&upstream)),
            Some(Held::Fleet(release)) => release.into(),
            None => return Clone::clone(response),
        };
        js::when_body_done(response, &done, &js::signal(request))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        match self.held.take() {
            Some(Held::Isolate(upstream)) => release(&upstream),
            Some(Held::Fleet(release)) => {
                let _ = release.call0(&JsValue::NULL);
            }
            None => {}
        }
    }
}

fn release(upstream: &Upstream) {
    let next = with_budget(upstream, |b| b.slots.release().and_then(|ticket| b.waiters.remove(&ticket)));
    if let Some(resolve) = next {
        let _ = resolve.call1(&JsValue::NULL, &JsValue::TRUE);
    }
}

/// A slot of `upstream`, waiting up to its `max_wait` (first come first served); `None`
/// when none freed in time or too many already wait. A fleet budget whose Durable Object
/// cannot be reached falls back to this isolate's count, logged.
pub async fn acquire(upstream: &Upstream, env: &Env, ctx: &JsValue) -> Result<Option<Slot>, JsValue> {
    if upstream.scope == Scope::Fleet {
        match acquire_fleet(upstream, env, ctx).await {
            Ok(slot) => return Ok(slot),
            Err(error) => crate::log_error(&format!(
                "{{\"sluicegate\":\"store-failure\",\"upstream\":{},\"fails\":\"to the isolate's count\",\"error\":{}}}",
                crate::json_string(&upstream.id),
                crate::json_string(&crate::describe(&error))
            )),
        }
    }
    acquire_here(upstream).await
}

async fn acquire_here(upstream: &Upstream) -> Result<Option<Slot>, JsValue> {
    let held = || Some(Slot { held: Some(Held::Isolate(upstream.clone())) });
    let ticket = match with_budget(upstream, |b| b.slots.acquire()) {
        Acquire::Granted => return Ok(held()),
        Acquire::Refused => return Ok(None),
        Acquire::Queued(ticket) => ticket,
    };
    let granted = js_sys::Promise::new(&mut |resolve, _reject| {
        with_budget(upstream, |b| b.waiters.insert(ticket, resolve));
    });
    let wait_ms = upstream.max_wait.as_nanos() as f64 / 1e6;
    let outcome = JsFuture::from(js::within(&granted, wait_ms, &JsValue::FALSE)).await?;
    if outcome.is_truthy() {
        return Ok(held());
    }
    // Too late: leave the queue, unless a slot was handed over in the same instant.
    let left = with_budget(upstream, |b| {
        b.waiters.remove(&ticket);
        b.slots.leave(ticket)
    });
    Ok(if left { None } else { held() })
}

async fn acquire_fleet(upstream: &Upstream, env: &Env, ctx: &JsValue) -> Result<Option<Slot>, JsValue> {
    let namespace = js::rate_limiter(env)?;
    let stub = namespace.get(&namespace.id_from_name(&format!("upstream\u{1f}{}", upstream.id))?)?;
    let call = js_sys::Promise::resolve(&stub.acquire_slot(&upstream.id)?);
    // The object answers within max_wait; past that and a margin, it is not answering.
    let limit_ms = upstream.max_wait.as_nanos() as f64 / 1e6 + 1_000.0;
    let lease = JsFuture::from(js::within(&call, limit_ms, &JsValue::UNDEFINED)).await?;
    let lease = lease.as_f64().ok_or_else(|| JsValue::from_str("the budget's object did not answer in time"))?;
    if lease <= 0.0 {
        return Ok(None);
    }
    let lease_ms = upstream.lease.as_nanos() as f64 / 1e6;
    let release = js::keep_lease(&stub, &upstream.id, lease, lease_ms, ctx);
    Ok(Some(Slot { held: Some(Held::Fleet(release)) }))
}
