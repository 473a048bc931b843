//! Upstream budgets, as the worker takes them: in this isolate (`scope: "isolate"`, the
//! core's [`InFlight`] per upstream, with the waiting done on JavaScript promises), or from the
//! upstream's Durable Object (`scope: "fleet"`, see `fleet.rs`), as a lease renewed while
//! the response streams. Whatever a request holds (a slot, its place in the queue, a lease)
//! is a hold of its [`Scope`]: given back once, however the request ends.

use crate::guard::{Guard, Scope};
use crate::isolate::Budget;
use crate::js::{self, Env};
use sluicegate::budget::{Acquire, InFlight, Ticket};
use sluicegate::pipeline::upstream::{SlotStore, MAX_QUEUE};
use sluicegate::rules::Upstream;
use std::collections::HashMap;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

fn with_budget<T>(upstream: &Upstream, f: impl FnOnce(&mut Budget) -> T) -> T {
    crate::isolate::runtime(|rt| {
        let budgets = &rt.budgets;
        let mut budgets = budgets.borrow_mut();
        let key = (upstream.id.clone(), upstream.max_in_flight);
        let budget = budgets.entry(key).or_insert_with(|| Budget {
            slots: InFlight::new(upstream.max_in_flight, MAX_QUEUE),
            waiters: HashMap::new(),
        });
        f(budget)
    })
}

/// A held slot of an upstream budget; dropping it gives the slot back (to the first waiter).
pub struct Slot {
    guard: Guard,
}

impl Slot {
    /// Give the slot back when `response`'s body is done (read to the end, failed, or
    /// cancelled) or the client of `request` goes away, not before.
    ///
    /// # Errors
    /// When the body cannot be watched (the slot is given back then).
    pub fn release_when_done(
        self,
        request: &web_sys::Request,
        response: &web_sys::Response,
    ) -> Result<web_sys::Response, JsValue> {
        self.guard.release_with(|done| js::when_body_done(response, done, &crate::runtime::signal(request)))
    }
}

/// Give a slot of `upstream` back: to the first waiter, else to the budget.
fn release(upstream: &Upstream) {
    let next = with_budget(upstream, |b| b.slots.release().and_then(|ticket| b.waiters.remove(&ticket)));
    if let Some(resolve) = next {
        let _ = resolve.call1(&JsValue::NULL, &JsValue::TRUE);
    }
}

/// A waiter leaves the queue; if a slot was already handed to it, that slot is given back.
fn leave(upstream: &Upstream, ticket: Ticket) {
    let handed = with_budget(upstream, |b| {
        b.waiters.remove(&ticket);
        !b.slots.leave(ticket)
    });
    if handed {
        release(upstream);
    }
}

/// A slot of `upstream`, waiting up to its `max_wait` (first come first served); `None`
/// when none freed in time, too many already wait, or the client went away meanwhile. The
/// stores are asked as [`SlotStore`] says: a fleet budget whose Durable Object cannot be
/// reached falls back to this isolate's count, logged.
pub async fn acquire(
    upstream: &Upstream,
    env: &Env,
    ctx: &JsValue,
    scope: &Scope<'_>,
) -> Result<Option<Slot>, JsValue> {
    let mut store = SlotStore::first(upstream.scope);
    loop {
        let error = match store {
            SlotStore::Isolate => return acquire_here(upstream, scope).await,
            SlotStore::Fleet => match acquire_fleet(upstream, env, ctx, scope).await {
                Ok(slot) => return Ok(slot),
                Err(error) => error,
            },
        };
        crate::log::log_error(&format!(
            "{{\"sluicegate\":\"store-failure\",\"upstream\":{},\"fails\":\"to the isolate's count\",\"error\":{}}}",
            crate::log::json_string(&upstream.id),
            crate::log::json_string(&crate::log::describe(&error))
        ));
        store = store.on_failure().ok_or(error)?;
    }
}

async fn acquire_here(upstream: &Upstream, scope: &Scope<'_>) -> Result<Option<Slot>, JsValue> {
    let slot_of = |guard: Guard| Slot { guard };
    let given = upstream.clone();
    let ticket = match with_budget(upstream, |b| b.slots.acquire()) {
        Acquire::Granted => return Ok(Some(slot_of(scope.hold(move || release(&given))))),
        Acquire::Refused => return Ok(None),
        Acquire::Queued(ticket) => ticket,
    };
    let granted = js_sys::Promise::new(&mut |resolve, _reject| {
        with_budget(upstream, |b| b.waiters.insert(ticket, resolve));
    });
    // Until the slot comes, what the request holds is its place in the queue.
    let waiting = scope.hold(move || leave(&given, ticket));
    let wait_ms = upstream.max_wait.as_nanos() as f64 / 1e6;
    let outcome = JsFuture::from(js::within(&granted, wait_ms, &JsValue::FALSE)?).await?;
    // Not handed a slot in time: leave the queue, unless one came in the same instant.
    let handed = outcome.is_truthy()
        || with_budget(upstream, |b| {
            b.waiters.remove(&ticket);
            !b.slots.leave(ticket)
        });
    let hold = waiting.hold();
    if !handed {
        // Out of the queue, holding nothing: leaving again would give back a slot not held.
        hold.disarm();
        return Ok(None);
    }
    let given = upstream.clone();
    // `false`: the client left while it waited, and what it held was given back then.
    Ok(hold.replace(move || release(&given)).then(|| slot_of(waiting)))
}

async fn acquire_fleet(
    upstream: &Upstream,
    env: &Env,
    ctx: &JsValue,
    scope: &Scope<'_>,
) -> Result<Option<Slot>, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    let stub = namespace.get(&namespace.id_from_name(&format!("upstream\u{1f}{}", upstream.id))?)?;
    let call = js_sys::Promise::resolve(&stub.acquire_slot(&upstream.id)?);
    // The object answers within max_wait; past that and a margin, it is not answering.
    let limit_ms = upstream.max_wait.as_nanos() as f64 / 1e6 + 1_000.0;
    let lease = JsFuture::from(js::within(&call, limit_ms, &JsValue::UNDEFINED)?).await?;
    let lease = lease.as_f64().ok_or_else(|| JsValue::from_str("the budget's object did not answer in time"))?;
    if lease <= 0.0 {
        return Ok(None);
    }
    let lease_ms = upstream.lease.as_nanos() as f64 / 1e6;
    let give_back = js::keep_lease(&stub, &upstream.id, lease, lease_ms, ctx)?;
    // A client that left while it waited gives the lease back at once (`hold` runs it), and
    // is not forwarded (the caller asks its scope).
    let guard = scope.hold(move || {
        let _ = give_back.call0(&JsValue::NULL);
    });
    Ok(Some(Slot { guard }))
}
