//! The egress routes, when the secret `SLUICEGATE_EGRESS_TOKEN` is set and the rules file
//! has an `egress` section (see `sluicegate::egress`):
//!
//! - `<prefix><provider>/<path>?<query>`: the edge calls the provider's first free mirror
//!   (`<mirror base URL><path>?<query>`) under its budget, fails over to the next on a
//!   connection error, a 5xx, a 429 or no answer within the provider's `timeout_s`, and
//!   answers with the provider's status and body, `Sluicegate-Mirror` and
//!   `Sluicegate-Cache: hit | miss | stale`;
//! - `POST <prefix><provider>/permit` (`{"weight"?, "query"?}`): waits up to `max_wait`,
//!   then `{"id", "mirror", "lease_ms"}`: the app calls that mirror itself, then
//! - `DELETE <prefix><provider>/permit/<id>` (`{"failed": true}` when the call failed) gives
//!   the permit back; one never given back ends with its lease. An id is 128 random bits
//!   (`sluicegate::egress::permit`): it cannot be guessed, and a proxied call has none.
//!
//! Authorised by `Authorization: Bearer <token>`, compared in constant time, failed tries
//! counted per client (`crate::auth`). Without the secret the routes do not exist and those
//! paths go to the origin like any other.
//!
//! What is decided lives in `sluicegate::pipeline::egress` (the order of a call's steps, its
//! failover and the fleet → isolate fallback, what it carries and is cached as, every answer
//! of the edge's own) and `sluicegate::egress` (weights, the gate, the cache, permit ids), and
//! is only carried out here.
//!
//! A budget is kept in this isolate (`scope: "isolate"`, one per pod) or by the provider's
//! Durable Object (`scope: "fleet"`, one for every isolate: [`Gates`] there too, each call
//! leased). The cache is always this isolate's.

use crate::body::{request_body, request_text, take_up_to, Taken as Read};
use crate::clock::{now, timer_ms};
use crate::guard::{Guard, Scope};
use crate::js::{self, Env};
use crate::log::{describe, json_string, log, log_error};
use crate::respond;
use sluicegate::analytics::{Kind, Outcome};
use sluicegate::edge::body::ByteCap;
use sluicegate::egress::cache::{call_key, storable, ByteSize, CachePolicy, CallParts, Lookup, ResponseCache};
use sluicegate::egress::call::{Attempt, NoStart};
use sluicegate::egress::gate::{Ask, Gate, Grant, Refused, Ticket};
use sluicegate::egress::permit::PermitId;
use sluicegate::egress::{self as rules, Provider, Route};
use sluicegate::identity::Identity;
use sluicegate::pipeline::egress::{
    self as flow, after_failure, AfterFailure, Disposal, SendStep, Sending, Want, ANSWER_DROPS, MAX_PERMIT_BODY,
};
use sluicegate::pipeline::upstream::SlotStore;
use sluicegate::rules::RequestFacts;
use sluicegate::time::{Instant, Span};
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, RequestRedirect, Response, ResponseInit, Url};

// ─── Budgets ────────────────────────────────────────────────────────────────────────────

pub use crate::isolate::Shared;
use crate::isolate::{Cache, Kept, Local};

fn with_gate<T>(gates: &Shared, p: &Provider, f: impl FnOnce(&mut Local) -> T) -> T {
    f(&mut local(gates, p))
}

/// The gate of `p` (made on first use, and anew when the rules changed its limits).
fn local<'a>(gates: &'a Shared, p: &Provider) -> std::cell::RefMut<'a, Local> {
    let limits = flow::limits(p);
    std::cell::RefMut::map(gates.borrow_mut(), |gates| {
        let fresh = || Local {
            limits,
            // Numbered from a random start: a permit of an earlier gate is never this one's.
            gate: Gate::new(limits, crate::runtime::random_u64() >> 12),
            waiters: HashMap::new(),
            granted: HashMap::new(),
        };
        let local = gates.map.entry(p.id.clone()).or_insert_with(fresh);
        if local.limits != limits {
            *local = fresh();
        }
        local
    })
}

/// Start whoever can start now, and wake them. The first still waiting is woken too, to
/// set its timer again: a finish may leave it waiting on time alone (spacing, the minute's
/// weight), which the timer it set while every slot was taken does not cover.
fn pump(gates: &Shared, p: &Provider) {
    let now = now();
    let woken = with_gate(gates, p, |l| {
        let mut woken = Vec::new();
        while let Some((ticket, grant)) = l.gate.pump(now) {
            l.granted.insert(ticket, grant);
            woken.extend(l.waiters.remove(&ticket));
        }
        woken.extend(l.gate.first_waiting().and_then(|first| l.waiters.remove(&first)));
        woken
    });
    for resolve in woken {
        let _ = resolve.call1(&JsValue::NULL, &JsValue::TRUE);
    }
}

/// Give a permit back (`failed`: its mirror failed); `false` when it was not held.
pub fn finish(gates: &Shared, p: &Provider, permit: u64, failed: bool) -> bool {
    let finished = with_gate(gates, p, |l| l.gate.finish(permit, failed, now()));
    pump(gates, p);
    finished
}

/// Give back the permit sealed with `secret` (one handed to the app); `false` when no held
/// permit was.
pub fn finish_sealed(gates: &Shared, p: &Provider, secret: u128, failed: bool) -> bool {
    let finished = with_gate(gates, p, |l| l.gate.finish_sealed(secret, failed, now()));
    pump(gates, p);
    finished
}

/// Seal a granted permit with `secret` (drawn by the Worker) for the app to give it back
/// by; when that cannot be (the secret is in use: two draws of 128 bits alike), the permit
/// goes back and `false` is answered, as for a permit that never started.
pub fn seal_or_give_back(gates: &Shared, p: &Provider, permit: u64, secret: u128) -> bool {
    let sealed = with_gate(gates, p, |l| l.gate.seal(permit, secret));
    if !sealed {
        finish(gates, p, permit, false);
    }
    sealed
}

/// Keep a leased permit another lease; `false` when it already ended.
pub fn renew(gates: &Shared, p: &Provider, permit: u64) -> bool {
    with_gate(gates, p, |l| l.gate.renew(permit, now()))
}

/// A waiter that gives up: out of the queue, or, if it was started meanwhile, its permit
/// given back (a permit nobody collects would hold its slot for good).
fn leave(gates: &Shared, p: &Provider, ticket: Ticket) {
    match withdraw(gates, p, ticket) {
        Some(grant) => {
            finish(gates, p, grant.permit, false);
        }
        // The one behind it may be first in line now.
        None => pump(gates, p),
    }
}

/// `ticket` out of the queue: `None`, or its grant when it was started meanwhile (for the
/// caller to use or give back).
fn withdraw(gates: &Shared, p: &Provider, ticket: Ticket) -> Option<Grant> {
    with_gate(gates, p, |l| {
        l.waiters.remove(&ticket);
        if l.gate.leave(ticket) {
            None
        } else {
            l.granted.remove(&ticket)
        }
    })
}

/// Ask for a call of `weight` at a mirror not in `avoid`.
pub fn ask(gates: &Shared, p: &Provider, weight: u64, avoid: u32, lease: Option<Span>) -> Ask {
    with_gate(gates, p, |l| l.gate.ask(now(), weight, avoid, lease))
}

/// Wait, until `deadline`, for `ticket` to be started: its grant, or `None` (it left the
/// queue). Every waiter wakes when time alone may start the first in line and starts whoever
/// can; a finish starts them too.
pub async fn wait(gates: &Shared, p: &Provider, ticket: Ticket, deadline: Instant) -> Result<Option<Grant>, JsValue> {
    let mut place = Place { gates, p, ticket: Some(ticket) };
    loop {
        // A promise per round: a wake-up that starts nobody sends the waiter round again.
        let woken = js_sys::Promise::new(&mut |resolve, _reject| {
            with_gate(gates, p, |l| l.waiters.insert(ticket, resolve));
        });
        let now = now();
        let wake = with_gate(gates, p, |l| l.gate.wake_at(now)).map_or(deadline, |w| w.min(deadline));
        let ms = timer_ms(wake - now).max(1.0);
        JsFuture::from(js::within(&woken, ms, &JsValue::FALSE)?).await?;
        pump(gates, p);
        if let Some(grant) = with_gate(gates, p, |l| l.granted.remove(&ticket)) {
            place.ticket = None;
            return Ok(Some(grant));
        }
        if crate::clock::now() >= deadline {
            place.ticket = None;
            let grant = withdraw(gates, p, ticket);
            if grant.is_none() {
                pump(gates, p);
            }
            return Ok(grant);
        }
    }
}

/// A place in a queue; dropped while it still has its ticket (an error on the way out), it
/// leaves the queue (see [`leave`]).
struct Place<'a> {
    gates: &'a Shared,
    p: &'a Provider,
    ticket: Option<Ticket>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            leave(self.gates, self.p, ticket);
        }
    }
}

/// This isolate's gates.
fn here() -> Shared {
    crate::isolate::runtime(|rt| Rc::clone(&rt.gates))
}

/// A started call: its mirror, and what gives it back (marked failed or not).
struct Permit {
    grant: Grant,
    failed: Rc<Cell<bool>>,
    guard: Guard,
}

impl Permit {
    /// Give it back now, its mirror failed.
    fn fail(self) {
        self.failed.set(true);
    }
}

/// What asking for a start came to.
enum Taken {
    Permit(Permit),
    Refused(Refused),
    /// Nothing started within `max_wait` (or the client left).
    Late,
}

/// A start of `p` as `want` says, from the fleet's budget (an error: its Durable Object
/// failed); the permit is a hold of `scope` (given back if the client leaves) or, without
/// one, a plain guard.
async fn start_fleet(
    p: &Provider,
    env: &Env,
    ctx: &JsValue,
    want: Want,
    scope: Option<&Scope<'_>>,
) -> Result<Taken, JsValue> {
    let stub = stub_of(p, env)?;
    let Some(Grant { permit, mirror }) = ask_fleet(&stub, p, want, "").await? else {
        return Ok(Taken::Late);
    };
    let lease_ms = p.lease.as_millis_ceil() as f64;
    let give_back = js::keep_permit(&stub, &p.id, permit as f64, lease_ms, ctx)?;
    let failed = Rc::new(Cell::new(false));
    let seen = failed.clone();
    let action = move || {
        let _ = give_back.call1(&JsValue::NULL, &JsValue::from_bool(seen.get()));
    };
    Ok(Taken::Permit(Permit { grant: Grant { permit, mirror }, failed, guard: hold_in(scope, action) }))
}

/// A start of `p` as `want` says, from this isolate's budget (waiting for it on timers).
async fn start_here(p: &Provider, want: Want, scope: Option<&Scope<'_>>) -> Result<Taken, JsValue> {
    let Want { weight, avoid, deadline } = want;
    let gates = here();
    let failed = Rc::new(Cell::new(false));
    let hold = |action: Box<dyn FnOnce()>| hold_in(scope, action);
    let finish_on = |grant: Grant| {
        let (gates, p, failed) = (gates.clone(), p.clone(), failed.clone());
        move || {
            finish(&gates, &p, grant.permit, failed.get());
        }
    };
    let ticket = match ask(&gates, p, weight, avoid, None) {
        Ask::Granted(grant) => {
            let guard = hold(Box::new(finish_on(grant)));
            return Ok(Taken::Permit(Permit { grant, failed, guard }));
        }
        Ask::Refused(why) => return Ok(Taken::Refused(why)),
        Ask::Queued(ticket) => ticket,
    };
    let waiting = {
        let (gates, p) = (gates.clone(), p.clone());
        hold(Box::new(move || leave(&gates, &p, ticket)))
    };
    let Some(grant) = wait(&gates, p, ticket, deadline).await? else {
        waiting.hold().disarm();
        return Ok(Taken::Late);
    };
    if !waiting.hold().replace(finish_on(grant)) {
        // The client left as it was started: give it back.
        finish(&gates, p, grant.permit, false);
        return Ok(Taken::Late);
    }
    Ok(Taken::Permit(Permit { grant, failed, guard: waiting }))
}

/// The provider's Durable Object failed: this isolate's count stands in, logged.
fn store_failure(p: &Provider, error: &JsValue) {
    log_error(&format!(
        "{{\"sluicegate\":\"store-failure\",\"provider\":{},\"fails\":\"to the isolate's count\",\"error\":{}}}",
        json_string(&p.id),
        json_string(&describe(error))
    ));
}

fn stub_of(p: &Provider, env: &Env) -> Result<js::Stub, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    namespace.get(&namespace.id_from_name(&format!("egress\u{1f}{}", p.id))?)
}

/// A hold of `scope` (given back if its client leaves) or, for work that outlives any
/// request, a guard of its own.
fn hold_in(scope: Option<&Scope<'_>>, action: impl FnOnce() + 'static) -> Guard {
    match scope {
        Some(scope) => scope.hold(action),
        None => Guard::detached(action),
    }
}

// ─── Routes ─────────────────────────────────────────────────────────────────────────────

/// The egress routes' answer, when this request is one of them and they exist.
pub async fn serve(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    setup: &crate::config::Setup,
    path: &str,
    url: &Url,
    caller: Option<Identity>,
) -> Result<Option<Response>, JsValue> {
    let Some(egress) = setup.rules.egress() else { return Ok(None) };
    let Some(token) = env.egress_token().as_string().filter(|t| !t.is_empty()) else { return Ok(None) };
    let method = request.method().to_ascii_uppercase();
    let Some(route) = egress.route(&method, path) else { return Ok(None) };
    if let Some(refusal) = crate::auth::authorise(request, &token, caller, "egress")? {
        return Ok(Some(refusal));
    }
    let provider = match route {
        Route::Unknown => None,
        Route::Proxy { provider, .. } | Route::Permit { provider } | Route::GiveBack { provider, .. } => {
            egress.provider(provider)
        }
    };
    let answer = match (route, provider) {
        (Route::Permit { .. }, Some(p)) => permit(request, env, p).await?,
        (Route::GiveBack { permit, .. }, Some(p)) => give_back(request, env, p, permit).await?,
        (Route::Proxy { rest, .. }, Some(p)) => proxy(request, env, ctx, p, rest, url).await?,
        _ => out(&flow::no_provider()),
    };
    // A permit asked for or a call proxied is one decision of the provider's budget: shed or
    // refused as `shed` and `refused` said just before this (with no wait between), else
    // admitted. A client that left is no decision (the edge's answer goes nowhere).
    let said = crate::isolate::runtime(|rt| rt.egress_outcome.take());
    let left = Scope::of(request).gone();
    if let (Route::Permit { .. } | Route::Proxy { .. }, Some(p), false) = (route, provider, left) {
        let (host, colo) = (url.hostname(), crate::runtime::colo(request));
        let facts = RequestFacts { method: &method, host: &host, path, colo: colo.as_deref(), identity: caller };
        let outcome = said.unwrap_or(Outcome::Admitted);
        crate::stats::record(setup, env, &facts, (Kind::Budget, &p.id), outcome, Span::ZERO);
    }
    Ok(Some(answer))
}

use respond::own as out;

/// [`flow::shed`], logged with its provider.
fn shed(p: &Provider) -> Response {
    crate::isolate::runtime(|rt| rt.egress_outcome.set(Some(Outcome::Shed)));
    log(&format!("{{\"sluicegate\":\"egress-busy\",\"provider\":{}}}", json_string(&p.id)));
    out(&flow::shed(p))
}

/// [`flow::refused`] (a shed logged as one).
fn refused(p: &Provider, why: Refused) -> Response {
    match why {
        Refused::TooHeavy { .. } => {
            crate::isolate::runtime(|rt| rt.egress_outcome.set(Some(Outcome::Refused)));
            out(&flow::refused(p, why))
        }
        Refused::QueueFull | Refused::NoMirror => shed(p),
    }
}

/// `POST …/permit`: wait for a start, then hand it to the app.
async fn permit(request: &Request, env: &Env, p: &Provider) -> Result<Response, JsValue> {
    let text = match request_text(request, MAX_PERMIT_BODY).await? {
        Ok(text) => text,
        Err(over) => return Ok(out(&flow::too_large(over))),
    };
    let weight = match flow::open_permit(p, &text) {
        Ok(weight) => weight,
        Err(reply) => return Ok(out(&reply)),
    };
    let scope = Scope::of(request);
    let deadline = now() + p.max_wait;
    // As `SlotStore` says: the fleet's object, and when it fails, this isolate's count.
    let fleet = match SlotStore::first(p.scope) {
        SlotStore::Fleet => permit_fleet(p, env, weight, deadline).await.map_err(|error| store_failure(p, &error)).ok(),
        SlotStore::Isolate => None,
    };
    let taken = match fleet {
        Some(taken) => taken,
        None => permit_here(p, weight, deadline, &scope).await?,
    };
    match taken {
        Ok((id, mirror)) => Ok(out(&flow::permit_granted(p, &id, mirror, weight))),
        Err(Some(why)) => Ok(refused(p, why)),
        Err(None) => Ok(shed(p)),
    }
}

/// What asking for a permit came to: its id and mirror, or why not (`None`: nothing started
/// within `max_wait`, or the client left).
type PermitTaken = Result<(PermitId, usize), Option<Refused>>;

/// A permit from this isolate's budget, leased and sealed.
async fn permit_here(p: &Provider, weight: u64, deadline: Instant, scope: &Scope<'_>) -> Result<PermitTaken, JsValue> {
    let secret = crate::runtime::secret_u128()?;
    let gates = here();
    let grant = match ask(&gates, p, weight, 0, Some(p.lease)) {
        Ask::Granted(grant) => grant,
        Ask::Refused(why) => return Ok(Err(Some(why))),
        Ask::Queued(ticket) => {
            let waiting = {
                let (gates, p) = (gates.clone(), p.clone());
                scope.hold(move || leave(&gates, &p, ticket))
            };
            let grant = wait(&gates, p, ticket, deadline).await?;
            // Held by the app from here on (its lease ends it); the client that left gave it back.
            let kept = waiting.hold().is_held();
            waiting.hold().disarm();
            match grant {
                Some(grant) if kept => grant,
                Some(grant) => {
                    finish(&gates, p, grant.permit, false);
                    return Ok(Err(None));
                }
                None => return Ok(Err(None)),
            }
        }
    };
    if !seal_or_give_back(&gates, p, grant.permit, secret) {
        return Ok(Err(None));
    }
    Ok(Ok((PermitId { fleet: false, secret }, grant.mirror)))
}

/// A permit from the provider's Durable Object, which seals it with a secret drawn here.
async fn permit_fleet(p: &Provider, env: &Env, weight: u64, deadline: Instant) -> Result<PermitTaken, JsValue> {
    let secret = crate::runtime::secret_u128()?;
    let id = PermitId { fleet: true, secret };
    let stub = stub_of(p, env)?;
    Ok(match ask_fleet(&stub, p, Want { weight, avoid: 0, deadline }, &id.secret_hex()).await? {
        Some(grant) => Ok((id, grant.mirror)),
        None => Err(None),
    })
}

/// A leased permit from the provider's Durable Object, waiting there until `deadline` and
/// sealed there with `secret` unless it is empty; `None` when none started in time.
async fn ask_fleet(stub: &js::Stub, p: &Provider, want: Want, secret: &str) -> Result<Option<Grant>, JsValue> {
    let Want { weight, avoid, deadline } = want;
    let wait_ms = deadline.saturating_since(now()).as_millis_ceil() as f64;
    let call =
        js_sys::Promise::resolve(&stub.acquire_permit(&p.id, weight as f64, f64::from(avoid), wait_ms, secret)?);
    // The object answers within the wait; past that and a margin, it is not answering.
    let got = JsFuture::from(js::within(&call, wait_ms + 1_000.0, &JsValue::UNDEFINED)?).await?;
    if got.is_undefined() {
        return Err(JsValue::from_str("the provider's object did not answer in time"));
    }
    Ok(got.dyn_ref::<js_sys::Array>().map(|pair| Grant {
        permit: pair.get(0).as_f64().unwrap_or(0.0) as u64,
        mirror: (pair.get(1).as_f64().unwrap_or(0.0) as usize).min(p.mirrors.len() - 1),
    }))
}

/// `DELETE …/permit/<id>`: the app's call is over.
async fn give_back(request: &Request, env: &Env, p: &Provider, id: &str) -> Result<Response, JsValue> {
    let text = match request_text(request, MAX_PERMIT_BODY).await? {
        Ok(text) => text,
        Err(over) => return Ok(out(&flow::too_large(over))),
    };
    let failed = match rules::failed_from_json(&text) {
        Ok(failed) => failed,
        Err(why) => return Ok(out(&flow::bad_request(&why))),
    };
    let Some(id) = PermitId::parse(id) else {
        return Ok(out(&flow::bad_request("Not a permit id: give back the \"id\" that POST …/permit answered with.")));
    };
    let released = match flow::give_back_to(p, &id) {
        None => false,
        Some(SlotStore::Fleet) => {
            let stub = stub_of(p, env)?;
            let call = stub.release_sealed(&p.id, &id.secret_hex(), failed)?;
            JsFuture::from(js_sys::Promise::resolve(&call)).await?.is_truthy()
        }
        Some(SlotStore::Isolate) => finish_sealed(&here(), p, id.secret, failed),
    };
    Ok(out(&if released { flow::given_back() } else { flow::no_permit() }))
}

// ─── The proxy ──────────────────────────────────────────────────────────────────────────

/// Headers as `(lower-case name, value)`, in a fixed order of names.
type Carried = Vec<(&'static str, String)>;

/// One call as the app made it, to be made of a mirror (again, on failover).
struct Call {
    method: String,
    rest: String,
    query: String,
    headers: Headers,
    /// The headers it carries to the provider, as they are keyed.
    carried: Carried,
    body: Option<js_sys::Uint8Array>,
    /// The body's `Content-Type` (as carried).
    content_type: String,
    weight: u64,
}

impl Call {
    /// A copy to make again behind the request (a snapshot's refresh).
    fn copy(&self) -> Result<Call, JsValue> {
        Ok(Call {
            method: self.method.clone(),
            rest: self.rest.clone(),
            query: self.query.clone(),
            headers: Headers::new_with_headers(&self.headers)?,
            carried: self.carried.clone(),
            body: self.body.clone(),
            content_type: self.content_type.clone(),
            weight: self.weight,
        })
    }

    /// Its cache key ([`call_key`]); `None` when it is not to be cached.
    fn key(&self) -> Option<String> {
        let headers: Vec<(&str, &str)> = self.carried.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let body = self.body.as_ref().map(js_sys::Uint8Array::to_vec);
        call_key(&CallParts {
            method: &self.method,
            path: &self.rest,
            query: &self.query,
            headers: &headers,
            body: body.as_deref().map(|b| (b, self.content_type.as_str())),
        })
    }
}

async fn proxy(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rest: &str,
    url: &Url,
) -> Result<Response, JsValue> {
    let query = url.search().trim_start_matches('?').to_owned();
    let opened = match flow::open_proxy(p, &request.method(), rest, &query) {
        Ok(opened) => opened,
        Err(reply) => return Ok(out(&reply)),
    };
    let body = match opened.body_cap() {
        Some(cap) => match request_body(request, cap).await? {
            Ok(body) => body,
            Err(over) => return Ok(out(&flow::too_large(over))),
        },
        None => None,
    };
    let plan = opened.plan(p, body.as_ref().map(|b| u64::from(b.length())));
    let received = request.headers();
    let carried = plan.carried(p, |name| received.get(name).ok().flatten());
    let headers = Headers::new()?;
    for (name, value) in &carried {
        headers.set(name, value)?;
    }
    let content_type = carried.iter().find(|(n, _)| *n == "content-type").map(|(_, v)| v.clone()).unwrap_or_default();
    let method = plan.method.name().to_owned();
    let call =
        Call { method, rest: rest.to_owned(), query, headers, carried, body, content_type, weight: opened.weight };
    if let Some((rule, key)) = plan.cache.and_then(|rule| Some((rule, call.key()?))) {
        return cached_call(request, env, ctx, p, rule, call, &key).await;
    }
    let deadline = now() + p.max_wait;
    let scope = Scope::of(request);
    match send(p, env, ctx, &call, deadline, Some(&scope), Some(request)).await? {
        Sent::Answer { response, mirror, permit } => pass_on_held(&response, p, mirror, "miss", permit, request),
        Sent::Failed { response: Some((response, mirror)) } => passed_on(&response, p, mirror, "miss"),
        Sent::Failed { response: None } => Ok(out(&flow::unreachable(p))),
        Sent::Late => Ok(shed(p)),
        Sent::Refused(why) => Ok(refused(p, why)),
    }
}

enum Sent {
    /// A mirror answered (not a 5xx or 429); the permit is held until it is let go.
    Answer {
        response: Response,
        mirror: usize,
        permit: Permit,
    },
    /// Every mirror tried failed: the last failure's answer, or none (not reachable).
    Failed {
        response: Option<(Response, usize)>,
    },
    Late,
    Refused(Refused),
}

/// Make `call` as [`Sending`] says: a start from the provider's budget (its Durable Object
/// falling back to this isolate's), the mirror called until the attempt's deadline, failed
/// over on a connection error, a 5xx, a 429 or no answer in time (each failed mirror's slot
/// given back before the next is tried). `cancel_with`: the request whose client's leaving
/// cancels the call.
async fn send(
    p: &Provider,
    env: &Env,
    ctx: &JsValue,
    call: &Call,
    deadline: Instant,
    scope: Option<&Scope<'_>>,
    cancel_with: Option<&Request>,
) -> Result<Sent, JsValue> {
    let mut sending = Sending::new(p, call.weight, deadline);
    let mut last: Option<(Response, usize)> = None;
    let mut held: Option<Permit> = None;
    let signal = cancel_with.map_or(JsValue::UNDEFINED, crate::runtime::signal);
    loop {
        let (mirror, timeout) = match sending.next() {
            SendStep::Start { store, want } => {
                let taken = match store {
                    SlotStore::Isolate => start_here(p, want, scope).await?,
                    SlotStore::Fleet => match start_fleet(p, env, ctx, want, scope).await {
                        Ok(taken) => taken,
                        Err(error) => {
                            store_failure(p, &error);
                            sending.store_failed();
                            continue;
                        }
                    },
                };
                sending.started(match taken {
                    Taken::Permit(permit) => Ok(held.insert(permit).grant.mirror),
                    Taken::Refused(why) => Err(NoStart::Refused(why)),
                    Taken::Late => Err(NoStart::Late),
                });
                continue;
            }
            SendStep::Call { mirror, timeout } => (mirror, timeout),
            SendStep::Done(flow::Sent::Failed { .. }) => return Ok(Sent::Failed { response: last }),
            SendStep::Done(done) => {
                if let Some((old, _)) = last.take() {
                    cancel(&old);
                }
                return Ok(match done {
                    flow::Sent::Refused(why) => Sent::Refused(why),
                    _ => Sent::Late,
                });
            }
        };
        let (attempt, response) = attempt(p, call, mirror, timeout, &signal, scope).await?;
        match (sending.attempted(attempt), response) {
            (Disposal::PassOn, Some(response)) => {
                let permit = held.take().ok_or_else(|| JsValue::from_str("an answer without its permit"))?;
                return Ok(Sent::Answer { response, mirror, permit });
            }
            (Disposal::Failed { keep }, response) => {
                match attempt {
                    Attempt::Answered(status) => failover_line(p, mirror, &format!("\"status\":{status}")),
                    Attempt::TimedOut => {
                        failover_line(p, mirror, &format!("\"timeout_ms\":{}", timeout.as_millis_ceil()))
                    }
                    _ => {}
                }
                if let Some(permit) = held.take() {
                    permit.fail();
                }
                match response {
                    Some(response) if keep => {
                        if let Some((old, _)) = last.replace((response, mirror)) {
                            cancel(&old);
                        }
                    }
                    Some(response) => cancel(&response),
                    None => {}
                }
            }
            (_, response) => {
                held = None;
                if let Some(response) = response {
                    cancel(&response);
                }
            }
        }
    }
}

/// One attempt of `call` at `mirror`: what it came to, with the mirror's answer if there was
/// one.
async fn attempt(
    p: &Provider,
    call: &Call,
    mirror: usize,
    timeout: Span,
    signal: &JsValue,
    scope: Option<&Scope<'_>>,
) -> Result<(Attempt, Option<Response>), JsValue> {
    let target =
        rules::target(&p.mirrors[mirror], &call.rest, &call.query).map_err(|e| JsValue::from_str(&e.to_string()))?;
    let init = RequestInit::new();
    init.set_method(&call.method);
    init.set_headers(call.headers.as_ref());
    init.set_redirect(RequestRedirect::Manual);
    if let Some(body) = &call.body {
        init.set_body(body);
    }
    let outgoing = Request::new_with_str_and_init(&target, &init)?;
    let answered = match js::fetch_within(&outgoing, timer_ms(timeout), signal) {
        Ok(promise) => JsFuture::from(promise).await,
        Err(error) => Err(error),
    };
    Ok(match answered {
        Ok(answer) if answer.is_null() => (Attempt::TimedOut, None),
        Ok(answer) => match answer.dyn_into::<Response>() {
            Ok(response) => (Attempt::Answered(response.status()), Some(response)),
            Err(_) => (Attempt::Unreachable, None),
        },
        // The app went away and its call was cancelled with it: not the mirror's fault.
        Err(_) if scope.is_some_and(Scope::gone) => (Attempt::Left, None),
        Err(error) => {
            failover_line(p, mirror, &format!("\"error\":{}", json_string(&describe(&error))));
            (Attempt::Unreachable, None)
        }
    })
}

fn failover_line(p: &Provider, mirror: usize, what: &str) {
    log(&format!(
        "{{\"sluicegate\":\"egress-failover\",\"provider\":{},\"mirror\":{},{what}}}",
        json_string(&p.id),
        json_string(&p.mirrors[mirror].url())
    ));
}

fn cancel(response: &Response) {
    if let Some(body) = response.body() {
        let _ = body.cancel();
    }
}

/// The provider's answer as the app gets it: its status, its headers (without cookies
/// and framing) and body, and where it came from.
fn passed_on(response: &Response, p: &Provider, mirror: usize, cache: &str) -> Result<Response, JsValue> {
    passed_on_with(response, response.body().as_ref(), p, mirror, cache)
}

/// [`passed_on`] with `body` in place of the answer's own.
fn passed_on_with(
    response: &Response,
    body: Option<&web_sys::ReadableStream>,
    p: &Provider,
    mirror: usize,
    cache: &str,
) -> Result<Response, JsValue> {
    let set = format!("sluicegate-mirror\n{}\nsluicegate-cache\n{cache}\n", p.mirrors[mirror].url());
    let headers = js::rebuilt_headers(&response.headers(), ANSWER_DROPS, &set)?;
    let init = ResponseInit::new();
    init.set_status(response.status());
    init.set_status_text(&response.status_text());
    init.set_headers(&headers);
    Response::new_with_opt_readable_stream_and_init(body, &init)
}

/// [`passed_on`], its permit held until the body has gone to the app (or the app left).
fn pass_on_held(
    response: &Response,
    p: &Provider,
    mirror: usize,
    cache: &str,
    permit: Permit,
    request: &Request,
) -> Result<Response, JsValue> {
    let response = passed_on(response, p, mirror, cache)?;
    permit.guard.release_with(|done| js::when_body_done(&response, done, &crate::runtime::signal(request)))
}

// ─── The cache ──────────────────────────────────────────────────────────────────────────

impl ByteSize for Kept {
    fn byte_size(&self) -> usize {
        self.bytes
    }
}

fn policy_of(rule: rules::CacheRule) -> CachePolicy {
    CachePolicy {
        ttl: rule.ttl,
        stale_if_error: rule.stale_if_error,
        refresh_behind: rule.refresh_behind,
        retry_after_failure: rule.retry_after_failure,
        max_entries: rule.max_entries as usize,
        max_bytes: usize::try_from(rule.max_bytes).unwrap_or(usize::MAX),
    }
}

/// `p`'s cache (made anew when the rules changed it).
fn with_cache<T>(p: &Provider, rule: rules::CacheRule, f: impl FnOnce(&mut Cache) -> T) -> T {
    crate::isolate::runtime(|rt| {
        let caches = &rt.caches;
        let mut caches = caches.borrow_mut();
        let policy = policy_of(rule);
        let fresh = || Cache {
            answers: ResponseCache::new(policy).unwrap_or_else(|_| {
                unreachable!("the rules file checked the cache (ttl, max_entries, max_bytes above 0)")
            }),
            fetching: HashMap::new(),
        };
        let cache = caches.entry(p.id.clone()).or_insert_with(fresh);
        if *cache.answers.policy() != policy {
            *cache = fresh();
        }
        f(cache)
    })
}

/// What a lookup came to, with the kept answer copied out of the cache.
enum Found {
    Fresh(Kept),
    Stale(Kept, bool),
    Lead,
    Follow(js_sys::Promise),
    Failing(Instant),
}

fn look(p: &Provider, rule: rules::CacheRule, key: &str) -> Found {
    with_cache(p, rule, |c| match c.answers.lookup(key, now()) {
        Lookup::Fresh(kept) => Found::Fresh(kept.clone()),
        Lookup::Stale { value, refresh } => {
            let kept = value.clone();
            if refresh {
                open_fetch(c, key);
            }
            Found::Stale(kept, refresh)
        }
        Lookup::Miss { lead: true } => {
            open_fetch(c, key);
            Found::Lead
        }
        Lookup::Miss { lead: false } => match c.fetching.get(key) {
            Some((promise, _)) => Found::Follow(promise.clone()),
            None => Found::Failing(now()),
        },
        Lookup::Failing { retry_at } => Found::Failing(retry_at),
    })
}

fn open_fetch(c: &mut Cache, key: &str) {
    let mut resolve = None;
    let promise = js_sys::Promise::new(&mut |r, _| resolve = Some(r));
    if let Some(resolve) = resolve {
        c.fetching.insert(key.to_owned(), (promise, resolve));
    }
}

/// The lead of a key's fetch, closed once with its outcome, which wakes its followers:
/// by the fill that makes the call, or — abandoned — by whatever ends first (its request's
/// client leaving, its guard dropped on any way out).
#[derive(Clone)]
struct Lead {
    p: Rc<Provider>,
    rule: rules::CacheRule,
    key: Rc<str>,
    open: Rc<Cell<bool>>,
}

impl Lead {
    fn new(p: &Provider, rule: rules::CacheRule, key: &str) -> Self {
        Lead { p: Rc::new(p.clone()), rule, key: key.into(), open: Rc::new(Cell::new(true)) }
    }

    fn close<T: Default>(&self, outcome: impl FnOnce(&mut ResponseCache<Kept>, &str) -> T) -> T {
        if !self.open.replace(false) {
            return T::default();
        }
        let (out, resolve) = with_cache(&self.p, self.rule, |c| {
            let out = outcome(&mut c.answers, &self.key);
            (out, c.fetching.remove(&*self.key).map(|(_, resolve)| resolve))
        });
        if let Some(resolve) = resolve {
            let _ = resolve.call0(&JsValue::NULL);
        }
        out
    }

    /// No answer, and nobody's failure: the next caller leads.
    fn abandon(&self) {
        self.close(|answers, key| answers.abandon(key));
    }

    /// The provider failed: the answer to serve instead, if the cache serves one.
    fn fail(&self) -> Option<Kept> {
        self.close(|answers, key| answers.fail(key, now()).cloned())
    }

    fn complete(&self, kept: Kept) {
        self.close(|answers, key| {
            answers.complete(key, kept, now());
        });
    }

    /// A guard that abandons the lead unless it was closed first: a hold of `scope` (the
    /// client leaving abandons it at once) or, behind the request, a guard of its own.
    fn guard(&self, scope: Option<&Scope<'_>>) -> Guard {
        let lead = self.clone();
        hold_in(scope, move || lead.abandon())
    }
}

fn from_kept(kept: &Kept, p: &Provider, state: &str, head: bool) -> Result<Response, JsValue> {
    let age = (now() - kept.at).as_nanos() / 1_000_000_000;
    let set = format!("sluicegate-mirror\n{}\nsluicegate-cache\n{state}\nage\n{age}\n", p.mirrors[kept.mirror].url());
    let headers = js::rebuilt_headers(&kept.headers, "", &set)?;
    let init = ResponseInit::new();
    init.set_status(kept.status);
    init.set_headers(&headers);
    if head {
        return Response::new_with_opt_str_and_init(None, &init);
    }
    Response::new_with_opt_buffer_source_and_init(Some(&kept.body), &init)
}

/// A call answered through the cache under `key`: from what is kept, by waiting for the
/// call already in flight for it, or by making that call (in front of the request, or
/// behind it for a snapshot).
async fn cached_call(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rule: rules::CacheRule,
    call: Call,
    key: &str,
) -> Result<Response, JsValue> {
    let head = request.method().eq_ignore_ascii_case("HEAD");
    let deadline = now() + p.max_wait;
    loop {
        match look(p, rule, key) {
            Found::Fresh(kept) => return from_kept(&kept, p, "hit", head),
            Found::Stale(kept, refresh) => {
                if refresh {
                    refresh_behind(env, ctx, Lead::new(p, rule, key), call.copy()?);
                }
                return from_kept(&kept, p, "stale", head);
            }
            Found::Failing(retry_at) => return Ok(out(&flow::failing(p, retry_at, now()))),
            Found::Follow(promise) => {
                let left = deadline.saturating_since(now()).as_millis_ceil() as f64;
                if left <= 0.0 {
                    return Ok(shed(p));
                }
                let woken = JsFuture::from(js::within(&promise, left, &JsValue::FALSE)?).await?;
                if woken.as_bool() == Some(false) {
                    return Ok(shed(p));
                }
            }
            Found::Lead => {
                let scope = Scope::of(request);
                let lead = Lead::new(p, rule, key);
                // The client leaving cancels the call (`cancel_with`) and abandons the lead at
                // once, waking its followers: one of them leads the next call.
                let _closing = lead.guard(Some(&scope));
                let filled = fill(env, ctx, &call, &lead, deadline, Some(&scope), Some(request)).await?;
                return match filled {
                    Filled::Kept(kept) => from_kept(&kept, p, "miss", head),
                    Filled::Stale(kept) => from_kept(&kept, p, "stale", head),
                    Filled::Passed(response, mirror, _) if head => {
                        cancel(&response);
                        passed_on_with(&response, None, p, mirror, "miss")
                    }
                    Filled::Passed(response, mirror, Some(permit)) => {
                        pass_on_held(&response, p, mirror, "miss", permit, request)
                    }
                    Filled::Passed(response, mirror, None) => passed_on(&response, p, mirror, "miss"),
                    Filled::Shed => Ok(shed(p)),
                    Filled::Refused(why) => Ok(refused(p, why)),
                    Filled::Unreachable => Ok(out(&flow::unreachable(p))),
                };
            }
        }
    }
}

/// Refresh a snapshot behind the request that was answered from it (the work outlives the
/// request through `ctx.waitUntil`).
fn refresh_behind(env: &Env, ctx: &JsValue, lead: Lead, call: Call) {
    let (env, ctx2) = (JsValue::clone(env).unchecked_into::<Env>(), ctx.clone());
    let task = wasm_bindgen_futures::future_to_promise(async move {
        let _closing = lead.guard(None);
        let deadline = now() + lead.p.max_wait;
        if let Filled::Passed(response, _, _) = fill(&env, &ctx2, &call, &lead, deadline, None, None).await? {
            cancel(&response);
        }
        Ok(JsValue::UNDEFINED)
    });
    if let Ok(f) = js_sys::Reflect::get(ctx, &"waitUntil".into()) {
        if let Some(f) = f.dyn_ref::<js_sys::Function>() {
            let _ = f.call1(ctx, &task);
        }
    }
}

enum Filled {
    Kept(Kept),
    Stale(Kept),
    /// An answer not kept (not a 200, not to be shared, or too large), to pass on as it
    /// comes; with the permit its body holds until it has gone, unless it failed.
    Passed(Response, usize, Option<Permit>),
    Shed,
    Refused(Refused),
    Unreachable,
}

/// Make the one call for `lead`'s key and keep its answer when [`storable`] says so and it
/// fits in `max_entry_bytes` as it streams in; a larger one is passed on from where reading
/// stopped, never read whole.
async fn fill(
    env: &Env,
    ctx: &JsValue,
    call: &Call,
    lead: &Lead,
    deadline: Instant,
    scope: Option<&Scope<'_>>,
    cancel_with: Option<&Request>,
) -> Result<Filled, JsValue> {
    let (p, rule) = (&*lead.p, lead.rule);
    let (response, mirror, permit) = match send(p, env, ctx, call, deadline, scope, cancel_with).await? {
        Sent::Answer { response, mirror, permit } => (response, mirror, permit),
        Sent::Failed { response } => {
            let stale = lead.fail();
            return Ok(match (after_failure(stale.is_some(), response.is_some()), stale, response) {
                (AfterFailure::Stale, Some(stale), response) => {
                    if let Some((response, _)) = response {
                        cancel(&response);
                    }
                    Filled::Stale(stale)
                }
                (AfterFailure::PassKept, _, Some((response, mirror))) => Filled::Passed(response, mirror, None),
                _ => Filled::Unreachable,
            });
        }
        // Not a failure of the provider: nothing is recorded against it.
        Sent::Late => {
            lead.abandon();
            return Ok(Filled::Shed);
        }
        Sent::Refused(why) => {
            lead.abandon();
            return Ok(Filled::Refused(why));
        }
    };
    let got = response.headers();
    let declared = got.get("content-length")?.and_then(|v| v.trim().parse::<u64>().ok());
    let (cache_control, vary) = (got.get("cache-control")?, got.get("vary")?);
    if storable(response.status(), cache_control.as_deref(), vary.as_deref(), declared, rule.max_entry_bytes).is_err() {
        lead.abandon();
        return Ok(Filled::Passed(response, mirror, Some(permit)));
    }
    let mut cap = ByteCap::new(rule.max_entry_bytes);
    let read = match response.body() {
        None => Ok(Read::Whole(js_sys::Array::new())),
        Some(body) => take_up_to(&body, &mut cap, Some(now() + p.timeout)).await,
    };
    match read {
        Ok(Read::Whole(chunks)) => {
            drop(permit);
            let headers = js::rebuilt_headers(&got, ANSWER_DROPS, "")?;
            let body = js::joined(&chunks)?;
            let bytes = body.length() as usize + header_bytes(&headers)?;
            let kept = Kept { status: response.status(), headers, body, mirror, at: now(), bytes };
            lead.complete(kept.clone());
            Ok(Filled::Kept(kept))
        }
        Ok(Read::Over { read, reader }) => {
            lead.abandon();
            let rest = js::resumed(&read, &reader)?;
            let init = ResponseInit::new();
            init.set_status(response.status());
            init.set_status_text(&response.status_text());
            init.set_headers(&got);
            let whole = Response::new_with_opt_readable_stream_and_init(Some(&rest), &init)?;
            Ok(Filled::Passed(whole, mirror, Some(permit)))
        }
        Ok(Read::Late) | Err(_) => {
            log_error(&format!(
                "{{\"sluicegate\":\"egress-failed-read\",\"provider\":{},\"mirror\":{},\"read_bytes\":{}}}",
                json_string(&p.id),
                json_string(&p.mirrors[mirror].url()),
                cap.seen()
            ));
            permit.fail();
            Ok(match lead.fail() {
                Some(stale) => Filled::Stale(stale),
                None => Filled::Unreachable,
            })
        }
    }
}

/// The bytes of every name and value of `headers`.
fn header_bytes(headers: &Headers) -> Result<usize, JsValue> {
    let mut len = 0;
    for name in js::header_names(headers)?.lines() {
        len += name.len() + headers.get(name)?.map_or(0, |v| v.len());
    }
    Ok(len)
}
