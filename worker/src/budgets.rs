//! Upstream budgets in this isolate (`scope: "isolate"`): the core's [`Slots`] per upstream,
//! with the waiting done on JavaScript promises.

use crate::js;
use sluicegate::budget::{Acquire, Slots, Ticket};
use sluicegate::rules::Upstream;
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
    upstream: Upstream,
    held: bool,
}

impl Slot {
    /// Give the slot back when `response`'s body is done (read to the end, failed, or
    /// cancelled) or the client of `request` goes away, not before.
    pub fn release_when_done(mut self, request: &web_sys::Request, response: &web_sys::Response) -> web_sys::Response {
        self.held = false;
        let upstream = self.upstream.clone();
        let done = Closure::once_into_js(move || release(&upstream));
        js::when_body_done(response, &done, &js::signal(request))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held {
            release(&self.upstream);
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
/// when none freed in time or too many already wait.
pub async fn acquire(upstream: &Upstream) -> Result<Option<Slot>, JsValue> {
    let ticket = match with_budget(upstream, |b| b.slots.acquire()) {
        Acquire::Granted => return Ok(Some(Slot { upstream: upstream.clone(), held: true })),
        Acquire::Refused => return Ok(None),
        Acquire::Queued(ticket) => ticket,
    };
    let granted = js_sys::Promise::new(&mut |resolve, _reject| {
        with_budget(upstream, |b| b.waiters.insert(ticket, resolve));
    });
    let wait_ms = upstream.max_wait.as_nanos() as f64 / 1e6;
    let outcome = JsFuture::from(js::within(&granted, wait_ms, &JsValue::FALSE)).await?;
    if outcome.is_truthy() {
        return Ok(Some(Slot { upstream: upstream.clone(), held: true }));
    }
    // Too late: leave the queue, unless a slot was handed over in the same instant.
    let left = with_budget(upstream, |b| {
        b.waiters.remove(&ticket);
        b.slots.leave(ticket)
    });
    Ok(if left { None } else { Some(Slot { upstream: upstream.clone(), held: true }) })
}
