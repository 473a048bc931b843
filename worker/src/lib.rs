//! The sluicegate edge: validated rules enforced in a Cloudflare Worker.
//!
//! A thin layer over the core: it reads the clock once per request, reads the request's
//! facts, asks the counting key's Durable Object for the decision (exact counting), and
//! translates the decision into a response. An isolate-local cache remembers keys that are
//! blocked, so a flood from a blocked key is refused without a Durable Object round trip.
//!
//! The same module serves two ways. The standalone Worker (`entry.mjs`, or `entry-dev.mjs`
//! for the `dev-origin` build) reads its rules from `env`, checks them at start ([`start`])
//! and sends admitted requests to `ORIGIN_URL`. As a library (`sluicegate/worker`,
//! `sluicegate/hono`), the Worker's own code gives the rules ([`configure`]) and each
//! request brings the handler an admitted one goes to. Either way the JS only loads the
//! module and forwards `fetch` ([`handle`]) and the Durable Object's calls here.
//!
//! This file holds the exports only. A request's way through the edge is `pipeline`; the
//! edge's own answers are `respond`, its log lines `log`, its clock `clock`; `config` holds
//! the rules in force, `js` the runtime's JavaScript as extern declarations (and `runtime`
//! what is read from it beyond the bindings); `preread`, `tenancy`, `budgets`, `egress`,
//! `admin` and `proxy` are the layers a request meets (`auth` checks the edge's own tokens,
//! `body` reads bodies as they stream), `counter` and `fleet` the Durable Object that
//! counts, and `dev` (the development origin, its mock upstream and clock) is compiled into
//! the development build only.

mod admin;
mod auth;
mod body;
mod budgets;
mod clock;
mod config;
mod counter;
/// The development build's origin (the www pages, the mock upstream) and clock: feature
/// `dev-origin`, never in the deploy build.
#[cfg(feature = "dev-origin")]
mod dev;
mod egress;
mod fleet;
mod guard;
mod isolate;
mod js;
mod log;
mod panic;
mod pipeline;
mod preread;
mod proxy;
mod respond;
mod runtime;
mod stats;
mod tenancy;

use config::config;
use js::Env;
use log::{describe, log_error};
use pipeline::{serve, Failure};
use sluicegate::headers;
use sluicegate::pipeline::Reply;
use sluicegate::time::Span;
use wasm_bindgen::prelude::*;
use web_sys::{Request, Response};

pub use counter::Counter;

/// Check the configuration in `env` at the Worker's start (the entry calls it at module
/// scope): a bad one throws, so workerd refuses to start the Worker and a deploy of it
/// fails, naming every problem. A missing Durable Object binding that the rules count in is
/// one (see `config::check_binding`).
///
/// # Errors
/// Every problem with the rules or `ORIGIN_URL`, in one message; the missing binding.
#[wasm_bindgen]
pub fn start(env: JsValue) -> Result<(), JsError> {
    panic::install();
    #[cfg(feature = "dev-origin")]
    dev::clock::set_clock(&env).map_err(|problem| JsError::new(&format!("sluicegate: not starting: {problem}")))?;
    let env: Env = env.unchecked_into();
    let checked = match config(&env).as_ref() {
        Ok(setup) => config::check_binding(setup, &env, &config::binding()),
        Err(problems) => Err(problems.clone()),
    };
    checked.map_err(|problems| JsError::new(&format!("sluicegate: not starting: {problems}")))
}

/// Enforce `rules` (the rules file, as an object or as JSON text) in front of the Worker's
/// own handler, with the Durable Object binding `binding` (the library's `createEdge`, at
/// module scope): from now on [`handle`] and the Durable Objects use these rules, and
/// `ORIGIN_URL` is not read. `env` (the Worker's) is checked with them.
///
/// # Errors
/// Every problem with the rules or `env`, in one message, as [`start`] gives it; other
/// rules than those already in force.
#[wasm_bindgen]
pub fn configure(rules: JsValue, binding: String, env: JsValue) -> Result<(), JsError> {
    panic::install();
    let env: Env = env.unchecked_into();
    config::use_rules(&rules, &binding, &env)
        .map_err(|problems| JsError::new(&format!("sluicegate: not starting: {problems}")))
}

/// Serve one request: the Worker's `fetch` (`ctx` is its execution context, for
/// `waitUntil`). An admitted request goes to `handler(request)` when one is given (its
/// answer, a `Response` or a promise of one, gets the rate-limit headers), else to
/// `ORIGIN_URL`.
///
/// # Errors
/// Only what `handler` threw (or its promise rejected with), as it was; every other
/// failure is answered (a 502 or a 503).
#[wasm_bindgen]
pub async fn handle(
    request: Request,
    env: JsValue,
    ctx: JsValue,
    handler: Option<js_sys::Function>,
) -> Result<Response, JsValue> {
    panic::install();
    let env: Env = env.unchecked_into();
    let served = serve(&request, &env, &ctx, handler.as_ref()).await;
    // The decisions counted so far go to the stats object when a batch is due, off this
    // request's path (its answer does not wait for them).
    stats::flush_if_due(&env, &ctx);
    match served {
        Ok(response) => Ok(response),
        Err(Failure::Handler(error)) => Err(error),
        Err(Failure::Edge(error)) => {
            log_error(&format!("sluicegate: refusing with 503: {}", describe(&error)));
            Ok(respond::own(&sluicegate::pipeline::serve::unavailable()))
        }
    }
}

/// Call `listener()` whenever the module panics (a bug): its instance is then replaced at
/// the next call, and the requests in flight on it are answered by [`unavailable`].
#[wasm_bindgen(js_name = onPanic)]
pub fn on_panic(listener: js_sys::Function) {
    js::on_panic(&listener);
}

/// Serve the operator's dashboard from `assets(name)`, each file's `[content type, text]`
/// (the bundle's, js/dashboard-assets.js): called once per instance at module scope.
#[wasm_bindgen(js_name = useDashboard)]
pub fn use_dashboard(assets: js_sys::Function) {
    isolate::runtime(|rt| *rt.dashboard.borrow_mut() = Some(assets));
}

/// Nothing: a call into the module is what replaces an instance that panicked, and this is
/// the cheapest one (see [`on_panic`]).
#[wasm_bindgen]
pub fn renew() {}

/// The edge's `503` for a request it cannot serve (e.g. one in flight when the module panicked).
#[wasm_bindgen]
pub fn unavailable() -> Response {
    respond::own(&Reply::problem(503, headers::unavailable(), Some(Span::from_secs(1))))
}
