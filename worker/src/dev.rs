//! The built-in development origin (feature `dev-origin`, built by `npm start` and the
//! tests, never deployed): the Open-Meteo mock, `GET /api/ping` and the `www/` pages.

use crate::js::{Env, Fetcher};
use crate::{json_string, now, problem};
use core::cell::Cell;
use sluicegate::headers;
use sluicegate::rules::RequestFacts;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, Response, Url};

/// Answer an admitted request as the development origin.
pub async fn serve(request: &Request, env: &Env, url: &Url, facts: &RequestFacts<'_>) -> Result<Response, JsValue> {
    let path = url.pathname();
    if path.starts_with("/mock/open-meteo/") {
        return crate::mock::serve(request, &path, url, facts.identity).await;
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
    crate::answer(200, "application/json", "no-store", Some(&body), &[])
}

thread_local! {
    /// `(scale, real start, virtual start)` in ms: see [`set_clock`].
    static CLOCK: Cell<Option<(f64, f64, f64)>> = const { Cell::new(None) };
    /// The last instant [`clock`] gave (ms).
    static LAST: Cell<Option<f64>> = const { Cell::new(None) };
}

/// `SLUICEGATE_CLOCK` = `"K,realStartMs,virtualStartMs"`: from the real instant
/// `realStartMs` on, the edge's clock reads `virtualStartMs` and runs K times as fast, so every
/// period, block and window passes K times sooner (`sluicegate replay --speed K`). Unset: real
/// time. A malformed value refuses to start.
///
/// # Errors
/// A value that is not three finite numbers with K > 0.
pub fn set_clock(env: &JsValue) -> Result<(), String> {
    let value = js_sys::Reflect::get(env, &"SLUICEGATE_CLOCK".into()).unwrap_or(JsValue::UNDEFINED);
    let Some(text) = value.as_string() else {
        CLOCK.set(None);
        return Ok(());
    };
    // Parsed by JS's Number (Rust's float parsing would add 16 KB to the build).
    let number = |part: &str| {
        let plain = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
        if plain {
            js_sys::Number::parse_float(part)
        } else {
            f64::NAN
        }
    };
    let numbers: Vec<f64> = text.split(',').map(|part| number(part.trim())).collect();
    match numbers[..] {
        [scale, real, virtual_start]
            if scale > 0.0 && scale.is_finite() && real.is_finite() && virtual_start.is_finite() =>
        {
            if CLOCK.get() != Some((scale, real, virtual_start)) {
                CLOCK.set(Some((scale, real, virtual_start)));
                LAST.set(None);
            }
            Ok(())
        }
        _ => Err(format!("SLUICEGATE_CLOCK must be \"K,realStartMs,virtualStartMs\" (K > 0), got \"{text}\"")),
    }
}

/// The edge's clock in ms for the real time `real_ms` (see [`set_clock`]). A set clock is
/// also strictly increasing, in whole ms: two decisions of this isolate never share an instant,
/// so replaying them in the order of their instants is replaying them in the order they were
/// made (a tie would leave the order of a burst's requests to chance).
pub fn clock(real_ms: f64) -> f64 {
    match CLOCK.get() {
        Some((scale, real, virtual_start)) => {
            let ms = (virtual_start + (real_ms - real) * scale).floor();
            let ms = LAST.get().map_or(ms, |last| ms.max(last + 1.0));
            LAST.set(Some(ms));
            ms
        }
        None => real_ms,
    }
}

/// The real milliseconds in which `ms` pass on the edge's clock (see [`set_clock`]).
pub fn real_ms(ms: f64) -> f64 {
    match CLOCK.get() {
        Some((scale, _, _)) => ms / scale,
        None => ms,
    }
}

/// Whether [`set_clock`] set a clock (responses then report it in `Sluicegate-Clock`).
pub fn clock_is_set() -> bool {
    CLOCK.get().is_some()
}
