//! Fleet-wide upstream budgets (`scope: "fleet"`), kept by one Durable Object per upstream:
//! a lease per held slot that the holder renews while it streams; a lease not renewed in
//! time (its isolate died holding it) gives its slot back. The slots, the queue and the
//! leases are the egress gate's ([`Gate`]: one mirror, no spacing, no weight), the one lease
//! machine of the edge; this module keeps the waiters' promises and wakes them.

use crate::js;
use sluicegate::egress::gate::{Ask, Gate, Ticket};
use sluicegate::time::{Instant, Span};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[derive(Default)]
pub struct Fleet {
    budgets: HashMap<(String, u32), FleetBudget>,
}

/// An upstream's slots across the fleet, in its Durable Object: the gate that holds its
/// leases and queue, and the promises of the calls waiting in it.
struct FleetBudget {
    gate: Gate,
    /// The `resolve` of each waiter's promise, by ticket.
    waiters: HashMap<Ticket, js_sys::Function>,
    /// Leases handed to waiters and not yet collected, by ticket.
    granted: HashMap<Ticket, u64>,
}

impl FleetBudget {
    fn new(max_in_flight: u32) -> Self {
        let limits = sluicegate::pipeline::upstream::fleet_limits(max_in_flight);
        FleetBudget { gate: Gate::new(limits, 1), waiters: HashMap::new(), granted: HashMap::new() }
    }

    /// Hand freed slots (given back, or of leases that ended by `now`) to the waiters in
    /// order, waking each; a slot whose waiter is gone is given back at once.
    fn pump(&mut self, now: Instant) {
        while let Some((ticket, grant)) = self.gate.pump(now) {
            match self.waiters.remove(&ticket) {
                Some(resolve) => {
                    self.granted.insert(ticket, grant.permit);
                    let _ = resolve.call1(&JsValue::NULL, &JsValue::TRUE);
                }
                None => {
                    self.gate.finish(grant.permit, false, now);
                }
            }
        }
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
    let ticket = match with_budget(&fleet, &upstream, max_in_flight, |b| b.gate.ask(now, 0, 0, Some(lease))) {
        Ask::Granted(grant) => return Ok(JsValue::from_f64(grant.permit as f64)),
        Ask::Refused(_) => return Ok(JsValue::from_f64(0.0)),
        Ask::Queued(ticket) => ticket,
    };
    let woken = js_sys::Promise::new(&mut |resolve, _reject| {
        with_budget(&fleet, &upstream, max_in_flight, |b| b.waiters.insert(ticket, resolve));
    });
    let mut place = Queued { fleet: &fleet, upstream: &upstream, max_in_flight, ticket: Some(ticket) };
    let deadline = now + max_wait;
    loop {
        // Wake at the deadline, or when a lease may have run out (its holder gone).
        let now = crate::clock::now();
        let wake = with_budget(&fleet, &upstream, max_in_flight, |b| b.gate.wake_at(now))
            .map_or(deadline, |at| at.min(deadline));
        let wait_ms = (wake - now).as_millis_ceil().max(1) as f64;
        JsFuture::from(js::within(&woken, wait_ms, &JsValue::FALSE)?).await?;
        let now = crate::clock::now();
        let granted = with_budget(&fleet, &upstream, max_in_flight, |b| {
            b.pump(now);
            b.granted.remove(&ticket)
        });
        if let Some(permit) = granted {
            place.ticket = None;
            return Ok(JsValue::from_f64(permit as f64));
        }
        if now >= deadline {
            place.ticket = None;
            let permit = with_budget(&fleet, &upstream, max_in_flight, |b| {
                b.waiters.remove(&ticket);
                // Not in the queue any more: a slot was handed over in the same instant.
                if b.gate.leave(ticket) {
                    0
                } else {
                    b.granted.remove(&ticket).unwrap_or(0)
                }
            });
            return Ok(JsValue::from_f64(permit as f64));
        }
    }
}

/// A place in a fleet budget's queue. Dropped while it still has its ticket (an error on the
/// way out), it leaves the queue, and gives back a slot that was handed to it meanwhile:
/// a slot handed to a waiter that never took it would be held until its lease ran out.
struct Queued<'a> {
    fleet: &'a Shared,
    upstream: &'a str,
    max_in_flight: u32,
    ticket: Option<Ticket>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let now = crate::clock::now();
            with_budget(self.fleet, self.upstream, self.max_in_flight, |b| {
                b.waiters.remove(&ticket);
                if !b.gate.leave(ticket) {
                    if let Some(permit) = b.granted.remove(&ticket) {
                        b.gate.finish(permit, false, now);
                        b.pump(now);
                    }
                }
            });
        }
    }
}

/// Keep `lease` for another lease length (the budget's, given when it was granted); `false`
/// when it has already ended.
pub fn renew(fleet: &Shared, upstream: &str, max_in_flight: u32, lease: u64) -> bool {
    let now = crate::clock::now();
    with_budget(fleet, upstream, max_in_flight, |b| b.gate.renew(lease, now))
}

/// Give `lease`'s slot back (nothing if it already ended).
pub fn release(fleet: &Shared, upstream: &str, max_in_flight: u32, lease: u64) {
    let now = crate::clock::now();
    with_budget(fleet, upstream, max_in_flight, |b| {
        if b.gate.finish(lease, false, now) {
            b.pump(now);
        }
    });
}
