//! The built-in development origin (feature `dev-origin`, built by `npm start` and the
//! tests, never deployed): the Open-Meteo mock, `GET /api/ping` and the `www/` pages.

pub mod clock;
mod mock;

use std::cell::{Cell, RefCell};

/// What the development build keeps in this isolate: its clock and the replay's turn
/// ([`clock`]), and the Open-Meteo mock's counters ([`mock`]). Never borrowed across an
/// `.await`.
#[derive(Default)]
struct DevState {
    /// `(scale, real start, virtual start)` in ms: see [`clock::set_clock`].
    clock: Cell<Option<(f64, f64, f64)>>,
    /// The last instant [`clock::clock`] gave (ms).
    last: Cell<Option<f64>>,
    /// The last request to take its turn at the rules ([`clock::take_turn`]).
    turn: RefCell<Option<js_sys::Promise>>,
    mock: RefCell<mock::Mock>,
}

thread_local! {
    static DEV: DevState = DevState::default();
}

fn state<T>(f: impl FnOnce(&DevState) -> T) -> T {
    DEV.with(f)
}

use crate::js::{Env, Fetcher};
use crate::log::json_string;
use crate::respond::own;
use sluicegate::headers;
use sluicegate::pipeline::Reply;
use sluicegate::rules::RequestFacts;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, Response, Url};

/// Answer an admitted request as the development origin.
pub async fn serve(request: &Request, env: &Env, url: &Url, facts: &RequestFacts<'_>) -> Result<Response, JsValue> {
    let path = url.pathname();
    if path.starts_with("/mock/open-meteo/") {
        return mock::serve(request, &path, url, facts.identity).await;
    }
    if facts.path.eq_ignore_ascii_case("/api/ping") {
        return ping(facts);
    }
    let assets = env.assets();
    if assets.is_undefined() {
        return Ok(own(&Reply::problem(
            404,
            headers::problem(404, "Not Found", "No origin is configured.", None, None),
            None,
        )));
    }
    let assets: Fetcher = assets.unchecked_into();
    JsFuture::from(assets.fetch(request)?).await?.dyn_into()
}

fn ping(facts: &RequestFacts<'_>) -> Result<Response, JsValue> {
    let body = format!(
        "{{\"pong\":true,\"time_ms\":{},\"colo\":{},\"identity\":{}}}",
        // the edge's clock (the development one when set), as `crate::clock::now` reads it
        clock::clock(js_sys::Date::now()).max(0.0) as u64,
        json_string(facts.colo.unwrap_or("unknown")),
        json_string(&facts.identity.map_or_else(|| "unknown".to_owned(), |id| id.ip.to_string()))
    );
    Ok(own(&Reply::json(200, body)))
}
