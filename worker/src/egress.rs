//! The egress routes, when the secret `SLUICEGATE_EGRESS_TOKEN` is set and the rules file
//! has an `egress` section (see `sluicegate::egress`):
//!
//! - `<prefix><provider>/<path>?<query>`: the edge calls the provider's first free mirror
//!   (`<mirror base URL><path>?<query>`) under its budget, fails over to the next on a
//!   connection error, a 5xx or a 429, and answers with the provider's status and body,
//!   `Sluicegate-Mirror` and `Sluicegate-Cache: hit | miss | stale`;
//! - `POST <prefix><provider>/permit` (`{"weight"?, "query"?}`): waits up to `max_wait`,
//!   then `{"id", "mirror", "lease_ms"}`: the app calls that mirror itself, then
//! - `DELETE <prefix><provider>/permit/<id>` (`{"failed": true}` when the call failed) gives
//!   the permit back; one never given back ends with its lease.
//!
//! Authorised by `Authorization: Bearer <token>`, compared in constant time. Without the
//! secret the routes do not exist and those paths go to the origin like any other.
//!
//! A budget is kept in this isolate (`scope: "isolate"`, one per pod) or by the provider's
//! Durable Object (`scope: "fleet"`, one for every isolate: [`Gates`] there too, each call
//! leased). The cache is always this isolate's.

use crate::clock::now;
use crate::guard::{Guard, Scope};
use crate::js::{self, Env};
use crate::log::{describe, json_string, log, log_error};
use crate::respond::{answer, problem};
use sluicegate::egress::cache::{CachePolicy, Lookup, ResponseCache};
use sluicegate::egress::gate::{Ask, Gate, Grant, Limits, Refused, Ticket};
use sluicegate::egress::{self as rules, PermitAsk, Provider, Route, Weigh};
use sluicegate::headers;
use sluicegate::openmeteo::query_weight_milli;
use sluicegate::rules::Scope as BudgetScope;
use sluicegate::time::{Instant, Span};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, RequestRedirect, Response, ResponseInit, Url};

/// Callers one provider may queue before new ones are refused at once.
const MAX_QUEUE: usize = 10_000;
/// The largest request body a proxied call may carry (it is kept to fail over with).
const MAX_REQUEST_BODY: u32 = 1024 * 1024;
/// The largest permit request body.
const MAX_PERMIT_BODY: u32 = 4096;
/// Headers of a provider's answer that are not passed on: the body is re-framed here, and
/// the provider's cookies are not the app's.
const ANSWER_DROPS: &str =
    "set-cookie\nset-cookie2\nconnection\nkeep-alive\ntransfer-encoding\ncontent-length\ncontent-encoding\n";
/// Headers of the app's call that go on to the provider; every other one stays here (the
/// edge's token above all).
const CALL_HEADERS: &[&str] =
    &["accept", "accept-language", "content-type", "user-agent", "if-none-match", "if-modified-since"];

/// Thousandths of a weighted call, written as a decimal with integers only (`1500` →
/// `1.5`): formatting a float would weigh 16 KB of wasm.
struct Milli(u64);

impl std::fmt::Display for Milli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        match frac {
            0 => write!(f, "{whole}"),
            _ if frac % 100 == 0 => write!(f, "{whole}.{}", frac / 100),
            _ if frac % 10 == 0 => write!(f, "{whole}.{:02}", frac / 10),
            _ => write!(f, "{whole}.{frac:03}"),
        }
    }
}

// ─── Budgets ────────────────────────────────────────────────────────────────────────────

/// The gates of one isolate or one Durable Object, by provider.
#[derive(Default)]
pub struct Gates {
    map: HashMap<String, Local>,
}

/// Gates shared by the concurrent calls that use them.
pub type Shared = Rc<RefCell<Gates>>;

struct Local {
    limits: Limits,
    gate: Gate,
    /// The `resolve` of each waiter's promise, by ticket.
    waiters: HashMap<Ticket, js_sys::Function>,
    /// Grants made to waiters not yet collected.
    granted: HashMap<Ticket, Grant>,
}

fn limits_of(p: &Provider) -> Limits {
    Limits {
        mirrors: p.mirrors.len(),
        max_in_flight: p.max_in_flight,
        min_interval: p.min_interval,
        weight_per_minute: p.weight_per_minute.map(|w| u64::from(w) * 1000),
        retry_after_failure: p.retry_after_failure,
        max_queue: MAX_QUEUE,
    }
}

fn with_gate<T>(gates: &Shared, p: &Provider, f: impl FnOnce(&mut Local) -> T) -> T {
    f(&mut local(gates, p))
}

/// The gate of `p` (made on first use, and anew when the rules changed its limits).
fn local<'a>(gates: &'a Shared, p: &Provider) -> std::cell::RefMut<'a, Local> {
    let limits = limits_of(p);
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
        let ms = crate::clock::timer_ms(wake - now).max(1.0);
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

thread_local! {
    /// This isolate's gates.
    static HERE: Shared = Shared::default();
}

fn here() -> Shared {
    HERE.with(Rc::clone)
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

/// What a call asks of a provider: its weight, the mirrors it has already tried (a bit
/// each), and by when it must start.
#[derive(Clone, Copy)]
struct Want {
    weight: u64,
    avoid: u32,
    deadline: Instant,
}

/// A start of `p` as `want` says, from this isolate's budget or the fleet's; the permit
/// is a hold of `scope` (given back if the client leaves) or, without one, a plain guard.
async fn start(
    p: &Provider,
    env: &Env,
    ctx: &JsValue,
    want: Want,
    scope: Option<&Scope<'_>>,
) -> Result<Taken, JsValue> {
    let Want { weight, avoid, deadline } = want;
    if p.scope == BudgetScope::Fleet {
        let fleet = match stub_of(p, env) {
            Ok(stub) => start_fleet(p, &stub, ctx, want, scope).await,
            Err(error) => Err(error),
        };
        match fleet {
            Ok(taken) => return Ok(taken),
            Err(error) => store_failure(p, &error),
        }
    }
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

/// A fleet permit (`[permit, mirror]` from the provider's object, `stub`, or 0), leased
/// and renewed until given back.
async fn start_fleet(
    p: &Provider,
    stub: &js::Stub,
    ctx: &JsValue,
    want: Want,
    scope: Option<&Scope<'_>>,
) -> Result<Taken, JsValue> {
    let Some(Grant { permit, mirror }) = ask_fleet(stub, p, want).await? else {
        return Ok(Taken::Late);
    };
    let lease_ms = p.lease.as_millis_ceil() as f64;
    let give_back = js::keep_permit(stub, &p.id, permit as f64, lease_ms, ctx)?;
    let failed = Rc::new(Cell::new(false));
    let seen = failed.clone();
    let action = move || {
        let _ = give_back.call1(&JsValue::NULL, &JsValue::from_bool(seen.get()));
    };
    Ok(Taken::Permit(Permit { grant: Grant { permit, mirror }, failed, guard: hold_in(scope, action) }))
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
) -> Result<Option<Response>, JsValue> {
    let Some(egress) = setup.rules.egress() else { return Ok(None) };
    let Some(token) = env.egress_token().as_string().filter(|t| !t.is_empty()) else { return Ok(None) };
    let method = request.method().to_ascii_uppercase();
    let Some(route) = egress.route(&method, path) else { return Ok(None) };
    if let Some(refusal) = crate::respond::unauthorised(request, &token)? {
        return Ok(Some(refusal));
    }
    let provider = match route {
        Route::Unknown => None,
        Route::Proxy { provider, .. } | Route::Permit { provider } | Route::GiveBack { provider, .. } => {
            egress.provider(provider)
        }
    };
    Ok(Some(match (route, provider) {
        (Route::Permit { .. }, Some(p)) => permit(request, env, p).await?,
        (Route::GiveBack { permit, .. }, Some(p)) => give_back(request, env, p, permit).await?,
        (Route::Proxy { rest, .. }, Some(p)) => proxy(request, env, ctx, p, rest, url).await?,
        _ => {
            let body = headers::problem(404, "Not Found", "No egress provider has this name.", None, None);
            problem(404, &body, None)
        }
    }))
}

fn bad_request(detail: &str) -> Response {
    problem(400, &headers::problem(400, "Bad Request", detail, None, None), None)
}

/// `503` for a provider that could not start a call within its `max_wait`.
fn shed(p: &Provider) -> Response {
    let retry = Span::from_secs(p.max_wait.as_secs_ceil().max(1));
    log(&format!("{{\"sluicegate\":\"egress-busy\",\"provider\":{}}}", json_string(&p.id)));
    let detail = format!(
        "No call to the provider \"{}\" could start within {} s (its budget is in use); retry after {} s.",
        p.id,
        p.max_wait.as_secs_ceil(),
        retry.as_secs_ceil()
    );
    problem(503, &headers::problem(503, "Service Unavailable", &detail, Some(&p.id), Some(retry)), Some(retry))
}

/// The answer to a call that can never start.
fn refused(p: &Provider, why: Refused) -> Response {
    match why {
        Refused::TooHeavy { weight, budget } => {
            let detail = format!(
                "The call weighs {} weighted calls, more than the provider \"{}\" allows in a whole minute ({}); split it.",
                Milli(weight),
                p.id,
                budget / 1000
            );
            problem(413, &headers::problem(413, "Content Too Large", &detail, Some(&p.id), None), None)
        }
        Refused::QueueFull | Refused::NoMirror => shed(p),
    }
}

/// The weight of a call with `query`, in thousandths; a problem when it cannot be read.
fn weight_of(p: &Provider, query: &str) -> Result<u64, Response> {
    match p.weight {
        None => Ok(1000),
        Some(Weigh::OpenMeteo) => query_weight_milli(query)
            .map_err(|e| bad_request(&format!("The call's weight cannot be read from its query: {e}."))),
    }
}

/// A body of at most `max` bytes (`None`: none sent).
async fn small_body(request: &Request, max: u32) -> Result<Result<Option<js_sys::Uint8Array>, Response>, JsValue> {
    if request.body().is_none() {
        return Ok(Ok(None));
    }
    let declared = request.headers().get("content-length")?.and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::from(max)) {
        let detail = format!("The body may be at most {max} bytes.");
        return Ok(Err(problem(413, &headers::problem(413, "Content Too Large", &detail, None, None), None)));
    }
    let bytes = js_sys::Uint8Array::new(&JsFuture::from(request.array_buffer()?).await?);
    if bytes.length() > max {
        let detail = format!("The body may be at most {max} bytes.");
        return Ok(Err(problem(413, &headers::problem(413, "Content Too Large", &detail, None, None), None)));
    }
    Ok(Ok(Some(bytes)))
}

/// A permit route's body as text (empty when there is none), or the answer to a body over
/// [`MAX_PERMIT_BODY`].
async fn permit_body(request: &Request) -> Result<Result<String, Response>, JsValue> {
    let body = small_body(request, MAX_PERMIT_BODY).await?;
    Ok(body.map(|b| b.map(|b| String::from_utf8_lossy(&b.to_vec()).into_owned()).unwrap_or_default()))
}

/// `POST …/permit`: wait for a start, then hand it to the app.
async fn permit(request: &Request, env: &Env, p: &Provider) -> Result<Response, JsValue> {
    let read = |text: String| PermitAsk::from_json(&text).map_err(|why| bad_request(&why));
    let asked = match permit_body(request).await?.and_then(read) {
        Ok(asked) => asked,
        Err(answer) => return Ok(answer),
    };
    let weight = match (asked.weight, asked.query.as_deref()) {
        (Some(w), _) => w,
        (None, Some(query)) => match weight_of(p, query) {
            Ok(w) => w,
            Err(answer) => return Ok(answer),
        },
        (None, None) if p.weight.is_some() => {
            return Ok(bad_request(&format!(
                "The provider \"{}\" is weighed: give \"weight\" or the call's \"query\".",
                p.id
            )))
        }
        (None, None) => 1000,
    };
    let scope = Scope::of(request);
    let deadline = now() + p.max_wait;
    let (permit, fleet) = if p.scope == BudgetScope::Fleet {
        match permit_fleet(p, env, weight, deadline).await {
            Ok(got) => (got, true),
            Err(error) => {
                store_failure(p, &error);
                (permit_here(p, weight, deadline, &scope).await?, false)
            }
        }
    } else {
        (permit_here(p, weight, deadline, &scope).await?, false)
    };
    let grant = match permit {
        Ok(grant) => grant,
        Err(Some(why)) => return Ok(refused(p, why)),
        Err(None) => return Ok(shed(p)),
    };
    let id = format!("{}{}", if fleet { 'f' } else { 'i' }, grant.permit);
    let body = format!(
        "{{\"id\":{},\"provider\":{},\"mirror\":{},\"lease_ms\":{},\"weight\":{}}}",
        json_string(&id),
        json_string(&p.id),
        json_string(&p.mirrors[grant.mirror].url()),
        p.lease.as_millis_ceil(),
        Milli(weight)
    );
    answer(200, "application/json", "no-store", Some(&body), &[])
}

/// A permit from this isolate's budget, leased.
async fn permit_here(
    p: &Provider,
    weight: u64,
    deadline: Instant,
    scope: &Scope<'_>,
) -> Result<Result<Grant, Option<Refused>>, JsValue> {
    let gates = here();
    let ticket = match ask(&gates, p, weight, 0, Some(p.lease)) {
        Ask::Granted(grant) => return Ok(Ok(grant)),
        Ask::Refused(why) => return Ok(Err(Some(why))),
        Ask::Queued(ticket) => ticket,
    };
    let waiting = {
        let (gates, p) = (gates.clone(), p.clone());
        scope.hold(move || leave(&gates, &p, ticket))
    };
    let grant = wait(&gates, p, ticket, deadline).await?;
    // Held by the app from here on (its lease ends it); the client that left gave it back.
    let kept = waiting.hold().is_held();
    waiting.hold().disarm();
    Ok(match grant {
        Some(grant) if kept => Ok(grant),
        Some(grant) => {
            finish(&gates, p, grant.permit, false);
            Err(None)
        }
        None => Err(None),
    })
}

async fn permit_fleet(
    p: &Provider,
    env: &Env,
    weight: u64,
    deadline: Instant,
) -> Result<Result<Grant, Option<Refused>>, JsValue> {
    if let Some(budget) = p.weight_per_minute.map(|w| u64::from(w) * 1000).filter(|b| weight > *b) {
        return Ok(Err(Some(Refused::TooHeavy { weight, budget })));
    }
    let stub = stub_of(p, env)?;
    Ok(ask_fleet(&stub, p, Want { weight, avoid: 0, deadline }).await?.ok_or(None))
}

/// A leased permit from the provider's Durable Object, waiting there until `deadline`;
/// `None` when none started in time.
async fn ask_fleet(stub: &js::Stub, p: &Provider, want: Want) -> Result<Option<Grant>, JsValue> {
    let Want { weight, avoid, deadline } = want;
    let wait_ms = deadline.saturating_since(now()).as_millis_ceil() as f64;
    let call = js_sys::Promise::resolve(&stub.acquire_permit(&p.id, weight as f64, f64::from(avoid), wait_ms)?);
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
    let read = |text: String| rules::failed_from_json(&text).map_err(|why| bad_request(&why));
    let failed = match permit_body(request).await?.and_then(read) {
        Ok(failed) => failed,
        Err(answer) => return Ok(answer),
    };
    let (fleet, number) = match (id.get(..1), id.get(1..).and_then(|n| n.parse::<u64>().ok())) {
        (Some("f"), Some(n)) => (true, n),
        (Some("i"), Some(n)) => (false, n),
        _ => return Ok(bad_request("Not a permit id.")),
    };
    // Only a fleet provider's object holds `f` permits: asking another provider's (which it
    // does not keep) would fail.
    let released = if fleet && p.scope != BudgetScope::Fleet {
        false
    } else if fleet {
        let stub = stub_of(p, env)?;
        JsFuture::from(js_sys::Promise::resolve(&stub.release_permit(&p.id, number as f64, failed)?)).await?.is_truthy()
    } else {
        finish(&here(), p, number, failed)
    };
    if released {
        return answer(204, "text/plain", "no-store", None, &[]);
    }
    let body = headers::problem(
        404,
        "Not Found",
        "No such permit is held: it was given back already, its lease ended, or another isolate holds it.",
        None,
        None,
    );
    Ok(problem(404, &body, None))
}

// ─── The proxy ──────────────────────────────────────────────────────────────────────────

/// One call as the app made it, to be made of a mirror (again, on failover).
struct Call {
    method: String,
    rest: String,
    query: String,
    headers: Headers,
    body: Option<js_sys::Uint8Array>,
    weight: u64,
}

async fn proxy(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rest: &str,
    url: &Url,
) -> Result<Response, JsValue> {
    let method = request.method().to_ascii_uppercase();
    if !matches!(method.as_str(), "GET" | "HEAD" | "POST") {
        let body = headers::problem(405, "Method Not Allowed", "A proxied call is GET, HEAD or POST.", None, None);
        let response = problem(405, &body, None);
        response.headers().set("allow", "GET, HEAD, POST")?;
        return Ok(response);
    }
    let query = url.search().trim_start_matches('?').to_owned();
    if let Err(why) = rules::target(&p.mirrors[0], rest, &query) {
        return Ok(bad_request(&format!("{why}.")));
    }
    let weight = match weight_of(p, &query) {
        Ok(w) => w,
        Err(answer) => return Ok(answer),
    };
    if let Some(budget) = p.weight_per_minute.map(|w| u64::from(w) * 1000).filter(|b| weight > *b) {
        return Ok(refused(p, Refused::TooHeavy { weight, budget }));
    }
    let body = if method == "POST" {
        match small_body(request, MAX_REQUEST_BODY).await? {
            Ok(body) => body,
            Err(answer) => return Ok(answer),
        }
    } else {
        None
    };
    let call = Call { method, rest: rest.to_owned(), query, headers: call_headers(request, p)?, body, weight };
    let deadline = now() + p.max_wait;
    if let (Some(rule), "GET" | "HEAD") = (p.cache, call.method.as_str()) {
        return cached(request, env, ctx, p, rule, call, deadline).await;
    }
    let scope = Scope::of(request);
    match send(p, env, ctx, &call, deadline, Some(&scope), Some(request)).await? {
        Sent::Answer { response, mirror, permit } => {
            let response = passed_on(&response, p, mirror, "miss")?;
            // The slot is held until the answer has gone to the app.
            permit.guard.release_with(|done| js::when_body_done(&response, done, &crate::runtime::signal(request)))
        }
        Sent::Failed { response: Some((response, mirror)) } => passed_on(&response, p, mirror, "miss"),
        Sent::Failed { response: None } => Ok(unreachable_provider(p)),
        Sent::Late => Ok(shed(p)),
        Sent::Refused(why) => Ok(refused(p, why)),
    }
}

fn unreachable_provider(p: &Provider) -> Response {
    let detail = format!("No mirror of the provider \"{}\" could be reached.", p.id);
    problem(502, &headers::problem(502, "Bad Gateway", &detail, Some(&p.id), None), None)
}

/// The headers a call carries to the provider: a few of the app's, and the provider's
/// `User-Agent`.
fn call_headers(request: &Request, p: &Provider) -> Result<Headers, JsValue> {
    let received = request.headers();
    let out = Headers::new()?;
    for name in CALL_HEADERS {
        if let Some(value) = received.get(name)? {
            out.set(name, &value)?;
        }
    }
    if let Some(agent) = &p.user_agent {
        out.set("user-agent", agent)?;
    }
    Ok(out)
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

/// Make `call` of the first free mirror, failing over to the next on a connection error,
/// a 5xx or a 429 (each failed mirror's slot given back before the next is tried).
async fn send(
    p: &Provider,
    env: &Env,
    ctx: &JsValue,
    call: &Call,
    deadline: Instant,
    scope: Option<&Scope<'_>>,
    cancel_with: Option<&Request>,
) -> Result<Sent, JsValue> {
    let mut avoid = 0u32;
    let mut last: Option<(Response, usize)> = None;
    let mut tried = false;
    loop {
        let permit = match start(p, env, ctx, Want { weight: call.weight, avoid, deadline }, scope).await? {
            Taken::Permit(permit) => permit,
            Taken::Refused(Refused::NoMirror) => return Ok(Sent::Failed { response: last }),
            _ if tried => return Ok(Sent::Failed { response: last }),
            Taken::Refused(why) => return Ok(Sent::Refused(why)),
            Taken::Late => return Ok(Sent::Late),
        };
        tried = true;
        let mirror = permit.grant.mirror.min(p.mirrors.len() - 1);
        avoid |= 1 << mirror;
        let target = rules::target(&p.mirrors[mirror], &call.rest, &call.query)
            .map_err(|e| JsValue::from_str(&e.to_string()))?;
        let init = RequestInit::new();
        init.set_method(&call.method);
        init.set_headers(call.headers.as_ref());
        init.set_redirect(RequestRedirect::Manual);
        if let Some(body) = &call.body {
            init.set_body(body);
        }
        if let Some(request) = cancel_with {
            let signal = crate::runtime::signal(request);
            if signal.is_object() {
                js_sys::Reflect::set(&init, &"signal".into(), &signal)?;
            }
        }
        let outgoing = Request::new_with_str_and_init(&target, &init)?;
        let answered = match js::fetch(&outgoing) {
            Ok(promise) => JsFuture::from(promise).await.and_then(|r| r.dyn_into::<Response>()),
            Err(error) => Err(error),
        };
        match answered {
            Ok(response) if response.status() < 500 && response.status() != 429 => {
                return Ok(Sent::Answer { response, mirror, permit });
            }
            Ok(response) => {
                log(&format!(
                    "{{\"sluicegate\":\"egress-failover\",\"provider\":{},\"mirror\":{},\"status\":{}}}",
                    json_string(&p.id),
                    json_string(&p.mirrors[mirror].url()),
                    response.status()
                ));
                permit.fail();
                // A status above 599 cannot be passed on (no Response carries it): no answer,
                // as for a connection error.
                if response.status() > 599 {
                    cancel(&response);
                } else if let Some((old, _)) = last.replace((response, mirror)) {
                    cancel(&old);
                }
            }
            // The app went away and its call was cancelled with it: not the mirror's fault.
            Err(_) if scope.is_some_and(Scope::gone) => return Ok(Sent::Late),
            Err(error) => {
                log(&format!(
                    "{{\"sluicegate\":\"egress-failover\",\"provider\":{},\"mirror\":{},\"error\":{}}}",
                    json_string(&p.id),
                    json_string(&p.mirrors[mirror].url()),
                    json_string(&describe(&error))
                ));
                permit.fail();
            }
        }
    }
}

fn cancel(response: &Response) {
    if let Some(body) = response.body() {
        let _ = body.cancel();
    }
}

/// The provider's answer as the app gets it: its status, its headers (without cookies
/// and framing) and body, and where it came from.
fn passed_on(response: &Response, p: &Provider, mirror: usize, cache: &str) -> Result<Response, JsValue> {
    let set = format!("sluicegate-mirror\n{}\nsluicegate-cache\n{cache}\n", p.mirrors[mirror].url());
    let headers = js::rebuilt_headers(&response.headers(), ANSWER_DROPS, &set)?;
    let init = ResponseInit::new();
    init.set_status(response.status());
    init.set_status_text(&response.status_text());
    init.set_headers(&headers);
    Response::new_with_opt_readable_stream_and_init(response.body().as_ref(), &init)
}

// ─── The cache ──────────────────────────────────────────────────────────────────────────

/// An answer kept: what the provider said, and which mirror said it.
#[derive(Clone)]
struct Kept {
    status: u16,
    headers: Headers,
    body: js_sys::Uint8Array,
    mirror: usize,
    at: Instant,
}

struct Cache {
    answers: ResponseCache<Kept>,
    /// For each key being fetched: the promise its followers wait on, and its resolve.
    fetching: HashMap<String, (js_sys::Promise, js_sys::Function)>,
}

thread_local! {
    static CACHES: RefCell<HashMap<String, Cache>> = RefCell::new(HashMap::new());
}

fn with_cache<T>(p: &Provider, rule: rules::CacheRule, f: impl FnOnce(&mut Cache) -> T) -> T {
    CACHES.with(|caches| {
        let mut caches = caches.borrow_mut();
        let cache = caches.entry(p.id.clone()).or_insert_with(|| Cache {
            answers: ResponseCache::new(CachePolicy {
                ttl: rule.ttl,
                stale_if_error: rule.stale_if_error,
                refresh_behind: rule.refresh_behind,
                retry_after_failure: rule.retry_after_failure,
                max_entries: rule.max_entries as usize,
            })
            .unwrap_or_else(|_| unreachable!("the rules file checked the cache (ttl and max_entries above 0)")),
            fetching: HashMap::new(),
        });
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

/// The lead of a key's fetch: however it ends, its followers are woken, and a lead that
/// never finished leaves the key to the next caller.
struct Lead {
    p: Provider,
    rule: rules::CacheRule,
    key: String,
    open: bool,
}

impl Lead {
    fn close(&mut self, outcome: impl FnOnce(&mut ResponseCache<Kept>)) {
        if !std::mem::replace(&mut self.open, false) {
            return;
        }
        let resolve = with_cache(&self.p, self.rule, |c| {
            outcome(&mut c.answers);
            c.fetching.remove(&self.key).map(|(_, resolve)| resolve)
        });
        if let Some(resolve) = resolve {
            let _ = resolve.call0(&JsValue::NULL);
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        let key = self.key.clone();
        self.close(|answers| answers.abandon(&key));
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

async fn cached(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rule: rules::CacheRule,
    call: Call,
    deadline: Instant,
) -> Result<Response, JsValue> {
    let head = call.method == "HEAD";
    // A HEAD is answered from what a GET would keep.
    let call = Call { method: "GET".into(), ..call };
    let key = sluicegate::egress::cache::key(&call.rest, &call.query);
    loop {
        match look(p, rule, &key) {
            Found::Fresh(kept) => return from_kept(&kept, p, "hit", head),
            Found::Stale(kept, refresh) => {
                if refresh {
                    let lead = Lead { p: p.clone(), rule, key: key.clone(), open: true };
                    let (env, p, call) = (JsValue::clone(env).unchecked_into::<Env>(), p.clone(), call_copy(&call));
                    let ctx2 = ctx.clone();
                    let task = wasm_bindgen_futures::future_to_promise(async move {
                        fill(&env, &ctx2, &p, rule, &call, lead, now() + p.max_wait).await?;
                        Ok(JsValue::UNDEFINED)
                    });
                    wait_until(ctx, &task);
                }
                return from_kept(&kept, p, "stale", head);
            }
            Found::Failing(retry_at) => {
                let retry = Span::from_secs((retry_at - now()).as_secs_ceil().max(1));
                let detail = format!(
                    "The provider \"{}\" failed and has no answer kept for this call; the next attempt is in {} s.",
                    p.id,
                    retry.as_secs_ceil()
                );
                let body = headers::problem(503, "Service Unavailable", &detail, Some(&p.id), Some(retry));
                return Ok(problem(503, &body, Some(retry)));
            }
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
                let lead = Lead { p: p.clone(), rule, key: key.clone(), open: true };
                let scope = Scope::of(request);
                return Ok(match fill_with(env, ctx, p, rule, &call, lead, deadline, Some(&scope)).await? {
                    Filled::Kept(kept) => from_kept(&kept, p, "miss", head)?,
                    Filled::Stale(kept) => from_kept(&kept, p, "stale", head)?,
                    Filled::Passed(response, mirror) => passed_on(&response, p, mirror, "miss")?,
                    Filled::Shed => shed(p),
                    Filled::Refused(why) => refused(p, why),
                    Filled::Unreachable => unreachable_provider(p),
                });
            }
        }
    }
}

fn call_copy(call: &Call) -> Call {
    Call {
        method: call.method.clone(),
        rest: call.rest.clone(),
        query: call.query.clone(),
        headers: Headers::new_with_headers(&call.headers).unwrap_or_else(|_| call.headers.clone()),
        body: call.body.clone(),
        weight: call.weight,
    }
}

fn wait_until(ctx: &JsValue, task: &js_sys::Promise) {
    if let Ok(f) = js_sys::Reflect::get(ctx, &"waitUntil".into()) {
        if let Some(f) = f.dyn_ref::<js_sys::Function>() {
            let _ = f.call1(ctx, task);
        }
    }
}

enum Filled {
    Kept(Kept),
    Stale(Kept),
    /// An answer not kept (not a 200, or too large), passed on as it came.
    Passed(Response, usize),
    Shed,
    Refused(Refused),
    Unreachable,
}

/// Refresh a snapshot behind the request that was answered from it.
async fn fill(
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rule: rules::CacheRule,
    call: &Call,
    lead: Lead,
    deadline: Instant,
) -> Result<(), JsValue> {
    if let Filled::Passed(response, _) = fill_with(env, ctx, p, rule, call, lead, deadline, None).await? {
        cancel(&response);
    }
    Ok(())
}

/// Make the one call for a key and keep its answer: a 200 of at most `max_entry_bytes`.
#[allow(clippy::too_many_arguments)]
async fn fill_with(
    env: &Env,
    ctx: &JsValue,
    p: &Provider,
    rule: rules::CacheRule,
    call: &Call,
    mut lead: Lead,
    deadline: Instant,
    scope: Option<&Scope<'_>>,
) -> Result<Filled, JsValue> {
    let key = lead.key.clone();
    let failed = |lead: &mut Lead| {
        let mut stale = None;
        lead.close(|answers| stale = answers.fail(&key, now()).cloned());
        stale
    };
    let sent = send(p, env, ctx, call, deadline, scope, None).await?;
    let (response, mirror, permit) = match sent {
        Sent::Answer { response, mirror, permit } => (response, mirror, permit),
        Sent::Failed { response } => {
            return Ok(match (failed(&mut lead), response) {
                (Some(stale), Some((response, _))) => {
                    cancel(&response);
                    Filled::Stale(stale)
                }
                (Some(stale), None) => Filled::Stale(stale),
                (None, Some((response, mirror))) => Filled::Passed(response, mirror),
                (None, None) => Filled::Unreachable,
            });
        }
        // Not a failure of the provider: nothing is recorded against it.
        Sent::Late => return Ok(Filled::Shed),
        Sent::Refused(why) => return Ok(Filled::Refused(why)),
    };
    let length = response.headers().get("content-length")?.and_then(|v| v.parse::<u64>().ok());
    if response.status() != 200 || length.is_some_and(|n| n > rule.max_entry_bytes) {
        drop(lead);
        return Ok(Filled::Passed(response, mirror));
    }
    let bytes = match JsFuture::from(response.array_buffer()?).await {
        Ok(buffer) => js_sys::Uint8Array::new(&buffer),
        Err(error) => {
            log_error(&format!(
                "{{\"sluicegate\":\"egress-failed-read\",\"provider\":{},\"error\":{}}}",
                json_string(&p.id),
                json_string(&describe(&error))
            ));
            permit.fail();
            return Ok(match failed(&mut lead) {
                Some(stale) => Filled::Stale(stale),
                None => Filled::Unreachable,
            });
        }
    };
    drop(permit);
    let headers = js::rebuilt_headers(&response.headers(), ANSWER_DROPS, "")?;
    let kept = Kept { status: 200, headers, body: bytes, mirror, at: now() };
    if u64::from(kept.body.length()) <= rule.max_entry_bytes {
        let stored = kept.clone();
        lead.close(|answers| answers.complete(&key, stored, now()));
    }
    Ok(Filled::Kept(kept))
}
