//! The built-in development origin (feature `dev-origin`, built by `npm start` and the
//! tests, never deployed): the Open-Meteo mock, `GET /api/ping` and the `www/` pages.

pub mod clock;
mod mock;

use crate::clock::now;
use crate::js::{Env, Fetcher};
use crate::log::json_string;
use crate::respond::problem;
use sluicegate::headers;
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
        return Ok(problem(404, &headers::problem(404, "Not Found", "No origin is configured.", None, None), None));
    }
    let assets: Fetcher = assets.unchecked_into();
    JsFuture::from(assets.fetch(request)?).await?.dyn_into()
}

fn ping(facts: &RequestFacts<'_>) -> Result<Response, JsValue> {
    let body = format!(
        "{{\"pong\":true,\"time_ms\":{},\"colo\":{},\"identity\":{}}}",
        now().as_millis(),
        json_string(facts.colo.unwrap_or("unknown")),
        json_string(&facts.identity.map_or_else(|| "unknown".to_owned(), |id| id.ip.to_string()))
    );
    crate::respond::answer(200, "application/json", "no-store", Some(&body), &[])
}
