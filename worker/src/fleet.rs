//! Fleet-wide upstream budgets (`scope: "fleet"`), kept by one Durable Object per upstream:
//! the core's [`InFlight`], and a lease per held slot that the holder renews while it streams.
//! A lease not renewed in time (its isolate died holding it) gives its slot back.

use crate::js;
use sluicegate::budget::{Acquire, InFlight, Ticket};
use sluicegate::time::{Instant, Span};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Waiters one upstream may queue across the fleet before new arrivals are refused.
const MAX_QUEUE: usize = 10_000;

#[derive(Default)]
pub struct Fleet {
    budgets: HashMap<(String, u32), FleetBudget>,
}

/// An upstream's slots across the fleet, in its Durable Object: what an isolate keeps for its
/// own budget (`isolate::Budget`), and a lease per held slot.
struct FleetBudget {
    slots: InFlight,
    /// When each held lease ends unless renewed.
    leases: HashMap<u64, Instant>,
    /// The `resolve` of each waiter's promise, by ticket.
    waiters: HashMap<Ticket, js_sys::Function>,
    next_lease: u64,
}

impl FleetBudget {
    fn new(max_in_flight: u32) -> Self {
        FleetBudget {
            slots: InFlight::new(max_in_flight, MAX_QUEUE),
            leases: HashMap::new(),
            waiters: HashMap::new(),
            next_lease: 1,
        }
    }

    fn lease(&mut self, until: Instant) -> u64 {
        let id = self.next_lease;
        self.next_lease += 1;
        self.leases.insert(id, until);
        id
    }

    /// Hand a freed slot on; the waiter it goes to, if any, is woken.
    fn release_slot(&mut self) {
        if let Some(resolve) = self.slots.release().and_then(|ticket| self.waiters.remove(&ticket)) {
            let _ = resolve.call1(&JsValue::NULL, &JsValue::TRUE);
        }
    }

    /// Give back the slots of leases that ended before `now`.
    fn expire(&mut self, now: Instant) {
        let ended: Vec<u64> = self.leases.iter().filter(|(_, until)| **until <= now).map(|(id, _)| *id).collect();
        for id in ended {
            self.leases.remove(&id);
            self.release_slot();
        }
    }

    fn first_expiry(&self) -> Option<Instant> {
        self.leases.values().min().copied()
    }
}

/// The fleet budgets of one Durable Object, shared by its concurrent calls.
pub type Shared = Rc<RefCell<Fleet>>;

fn with_budget<T>(fleet: &Shared, upstream: &str, max_in_flight: u32, f: impl FnOnce(&mut FleetBudget) -> T) -> T {
    let mut fleet = fleet.borrow_mut();
    let budget =
        fleet.budgets.entry((upstream.to_owned(), max_in_flight)).or_insert_with(|| FleetBudget::new(max_in_flight));
    f(budget)
}

/// A lease on a slot of `upstream` (a positive number), waiting up to `max_wait` first come
/// first served; 0 when none came free in time or too many wait.
pub async fn acquire(
    fleet: Shared,
    upstream: String,
    max_in_flight: u32,
    max_wait: Span,
    lease: Span,
) -> Result<JsValue, JsValue> {
    let now = crate::clock::now();
    let granted = with_budget(&fleet, &upstream, max_in_flight, |b| {
        b.expire(now);
        match b.slots.acquire() {
            Acquire::Granted => Ok(b.lease(now + lease)),
            other => Err(other),
        }
    });
    let ticket = match granted {
        Ok(id) => return Ok(JsValue::from_f64(id as f64)),
        Err(Acquire::Queued(ticket)) => ticket,
        Err(_) => return Ok(JsValue::from_f64(0.0)),
    };
    let woken = js_sys::Promise::new(&mut |resolve, _reject| {
        with_budget(&fleet, &upstream, max_in_flight, |b| b.waiters.insert(ticket, resolve));
    });
    let mut place = Queued { fleet: &fleet, upstream: &upstream, max_in_flight, ticket: Some(ticket) };
    let deadline = now + max_wait;
    loop {
        // Wake at the deadline, or when a lease may have run out (its holder gone).
        let now = crate::clock::now();
        let wake =
            with_budget(&fleet, &upstream, max_in_flight, |b| b.first_expiry()).map_or(deadline, |e| e.min(deadline));
        let wait_ms = (wake - now).as_millis_ceil().max(1) as f64;
        let outcome = JsFuture::from(js::within(&woken, wait_ms, &JsValue::FALSE)?).await?;
        let now = crate::clock::now();
        let id = with_budget(&fleet, &upstream, max_in_flight, |b| {
            if outcome.is_truthy() {
                return Some(b.lease(now + lease));
            }
            b.expire(now);
            None
        });
        if let Some(id) = id {
            place.ticket = None;
            return Ok(JsValue::from_f64(id as f64));
        }
        if now >= deadline {
            place.ticket = None;
            let left = with_budget(&fleet, &upstream, max_in_flight, |b| {
                b.waiters.remove(&ticket);
                b.slots.leave(ticket)
            });
            // Not in the queue any more: a slot was handed over in the same instant.
            let id = if left { 0 } else { with_budget(&fleet, &upstream, max_in_flight, |b| b.lease(now + lease)) };
            return Ok(JsValue::from_f64(id as f64));
        }
    }
}

/// A place in a fleet budget's queue. Dropped while it still has its ticket (an error on the
/// way out), it leaves the queue, and gives back a slot that was handed to it meanwhile:
/// a slot handed to a waiter that never took it would be lost for good (no lease ends it).
struct Queued<'a> {
    fleet: &'a Shared,
    upstream: &'a str,
    max_in_flight: u32,
    ticket: Option<Ticket>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            with_budget(self.fleet, self.upstream, self.max_in_flight, |b| {
                b.waiters.remove(&ticket);
                if !b.slots.leave(ticket) {
                    b.release_slot();
                }
            });
        }
    }
}

/// Keep `lease` for another `lease_length`; `false` when it has already ended.
pub fn renew(fleet: &Shared, upstream: &str, max_in_flight: u32, lease: u64, lease_length: Span) -> bool {
    let now = crate::clock::now();
    with_budget(fleet, upstream, max_in_flight, |b| match b.leases.get_mut(&lease) {
        Some(until) if *until > now => {
            *until = now + lease_length;
            true
        }
        _ => false,
    })
}

/// Give `lease`'s slot back (nothing if it already ended).
pub fn release(fleet: &Shared, upstream: &str, max_in_flight: u32, lease: u64) {
    with_budget(fleet, upstream, max_in_flight, |b| {
        if b.leases.remove(&lease).is_some() {
            b.release_slot();
        }
    });
}
