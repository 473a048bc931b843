//! What the edge reads from the Workers runtime beyond its bindings: a request's abort
//! signal and colo, and random bits.

use crate::js::get_random_values;
use wasm_bindgen::prelude::*;
use web_sys::Request;

/// `request.signal`: aborted when the client goes away (compatibility flag
/// `enable_request_signal`); undefined where the runtime has none.
pub fn signal(request: &Request) -> JsValue {
    js_sys::Reflect::get(request, &"signal".into()).unwrap_or(JsValue::UNDEFINED)
}

/// `request.cf.colo`, when the runtime provides it.
pub fn colo(request: &Request) -> Option<String> {
    let cf = js_sys::Reflect::get(request, &"cf".into()).ok()?;
    if !cf.is_object() {
        return None;
    }
    js_sys::Reflect::get(&cf, &"colo".into()).ok()?.as_string().filter(|c| !c.is_empty())
}

/// 64 random bits from `crypto.getRandomValues` (only ever called while serving a request:
/// workerd refuses random values at module scope, and should it ever refuse them there,
/// `Math.random` stands in rather than an exception unwinding through the module).
pub fn random_u64() -> u64 {
    let words = js_sys::Uint32Array::new_with_length(2);
    if get_random_values(&words).is_err() {
        for i in 0..2 {
            words.set_index(i, (js_sys::Math::random() * 4_294_967_296.0) as u32);
        }
    }
    u64::from(words.get_index(0)) << 32 | u64::from(words.get_index(1))
}

/// 128 random bits from `crypto.getRandomValues`, for a secret (a permit's id): never from
/// `Math.random`.
///
/// # Errors
/// When the runtime refuses random values.
pub fn secret_u128() -> Result<u128, JsValue> {
    let words = js_sys::Uint32Array::new_with_length(4);
    get_random_values(&words)?;
    Ok((0..4).fold(0u128, |secret, i| secret << 32 | u128::from(words.get_index(i))))
}
