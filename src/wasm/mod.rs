//! JavaScript bindings (feature `wasm`): the only module that touches wasm-bindgen.
//! Each export validates what JS hands it (NaN, negatives, infinities and wrong types are
//! refused with an error naming the argument) and delegates to the core.

use alloc::format;
use alloc::string::String;
use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;

mod client;
#[cfg(feature = "wasm-edge")]
mod edge;
mod pacer;
pub use client::{classify_rate_limit, open_meteo_weight, BatchPolicyJs, LocationCacheJs};
#[cfg(feature = "wasm-edge")]
pub use edge::{client_identity_js, validate_rules, TokenBucket};
pub use pacer::PacerCoreJs;

#[wasm_bindgen(start)]
fn start() {
    #[cfg(debug_assertions)]
    console_error_panic_hook::set_once();
}

/// A JS number as JS writes it (keeps Rust's float formatting out of the wasm).
pub(crate) fn num(value: f64) -> String {
    js_sys::Number::from(value).to_string_with_radix(10).map(String::from).unwrap_or_default()
}

/// A number from JS that must be finite and ≥ 0, or an error naming `what`.
pub(crate) fn non_negative(value: f64, what: &str) -> Result<f64, JsError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(JsError::new(&format!("{what} must be a finite number ≥ 0, got {}", num(value))))
    }
}

/// Set a property on an object built here.
pub(crate) fn set_prop(target: &Object, key: &str, value: &JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(target, &key.into(), value);
}
