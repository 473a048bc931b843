//! Every conversion between JS values and the core's in one place: numbers checked and
//! named in errors, milliseconds to and from the core's nanoseconds, options objects read
//! strictly, result objects built. Each package uses the part its exports need.
#![cfg_attr(
    not(all(feature = "wasm", feature = "wasm-edge", feature = "wasm-smartflow", feature = "wasm-sim")),
    allow(dead_code)
)]

use alloc::format;
use alloc::string::String;
use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;

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

/// A number from JS that must be finite and above 0, or an error naming `what`.
pub(crate) fn positive(value: f64, what: &str) -> Result<f64, JsError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(JsError::new(&format!("{what} must be a finite number above 0, got {}", num(value))))
    }
}

/// Nanoseconds from JS milliseconds, exact for whole milliseconds: `ms × 1e6` in floating
/// point is not (above 2^53 ns, i.e. any Unix time), and a spend recorded a few ns early
/// would fall inside the window it was placed to leave.
pub(crate) fn ms_to_nanos(ms: f64) -> u64 {
    // Below 1.8e13 ms (570 years) the product fits: a plain multiply, not wasm32's 128-bit one.
    const FITS: f64 = (u64::MAX / 1_000_000) as f64;
    let whole = ms.trunc();
    let nanos = if whole < FITS { (whole as u64) * 1_000_000 } else { (whole as u64).saturating_mul(1_000_000) };
    if whole == ms {
        return nanos; // the usual case (Date.now()), without the software `round`
    }
    nanos.saturating_add(((ms - whole) * 1e6).round() as u64)
}

/// JS milliseconds from nanoseconds: the whole milliseconds exactly, plus the fraction.
pub(crate) fn nanos_to_ms(nanos: u64) -> f64 {
    (nanos / 1_000_000) as f64 + (nanos % 1_000_000) as f64 / 1e6
}

/// An error naming the first own key of `value` (an options object) not in `known`: serde-wasm-bindgen
/// reads a struct's own fields only, so `deny_unknown_fields` never fires. `path` says where
/// `value` sits (`windows[0]`), `what` whose options they are.
pub(crate) fn deny_unknown(what: &str, value: &JsValue, path: &str, known: &[&str]) -> Result<(), JsError> {
    if !value.is_object() {
        return Ok(()); // the deserializer names the wrong type
    }
    for key in Object::keys(value.unchecked_ref::<Object>()).iter() {
        let key = key.as_string().unwrap_or_default();
        if !known.contains(&key.as_str()) {
            let at = if path.is_empty() { String::new() } else { format!("{path}: ") };
            return Err(JsError::new(&format!(
                "{what}: {at}unknown field `{key}`, expected one of {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// `value[key]`, `undefined` when it is missing or cannot be read: options objects are read
/// field by field (no serde: its type errors would bring Rust's float and Unicode
/// formatting into the builds that read options), each error naming the field.
pub(crate) fn field(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &key.into()).unwrap_or(JsValue::UNDEFINED)
}

/// What JS's `typeof` says of `value` (`null` and `array` for those), for an error.
pub(crate) fn type_of(value: &JsValue) -> String {
    if value.is_null() {
        return String::from("null");
    }
    if js_sys::Array::is_array(value) {
        return String::from("array");
    }
    value.js_typeof().as_string().unwrap_or_default()
}

/// The number at `key` of an options object: missing (`undefined`) → `None`, `null` →
/// `Some(None)`, a number → `Some(Some(n))`; anything else is an error naming `what`'s
/// `path` + `key` and what it got.
pub(crate) fn number_at(value: &JsValue, what: &str, path: &str, key: &str) -> Result<Option<Option<f64>>, JsError> {
    let v = field(value, key);
    if v.is_undefined() {
        return Ok(None);
    }
    if v.is_null() {
        return Ok(Some(None));
    }
    match v.as_f64() {
        Some(n) => Ok(Some(Some(n))),
        None => Err(JsError::new(&format!("{what}: {path}{key} must be a number, got {}", type_of(&v)))),
    }
}

/// Set a property on an object built here.
pub(crate) fn set_prop(target: &Object, key: &str, value: &JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(target, &key.into(), value);
}

#[cfg(any(feature = "wasm-edge", feature = "wasm-limit"))]
/// `value` as a whole number from `min` to `max`, or an error naming `what`.
pub(crate) fn whole(value: f64, what: &str, min: f64, max: f64) -> Result<u64, JsError> {
    if value.is_finite() && value.fract() == 0.0 && value >= min && value <= max {
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!(
            "{what} must be a whole number from {} to {}, got {}",
            num(min),
            num(max),
            num(value)
        )))
    }
}

#[cfg(any(feature = "wasm-edge", feature = "wasm-limit"))]
/// `nowMs` and `cost` as the core takes them, or the status naming the one refused: `nowMs`
/// must be a finite number ≥ 0 ([`DecisionStatus::InvalidNow`]), `cost` a whole number that
/// fits in `u32` ([`DecisionStatus::InvalidCost`]).
pub(crate) fn inputs(now_ms: f64, cost: f64) -> Result<(crate::core::time::Instant, u32), DecisionStatus> {
    if !(now_ms.is_finite() && now_ms >= 0.0) {
        return Err(DecisionStatus::InvalidNow);
    }
    if !(cost >= 0.0 && cost <= f64::from(u32::MAX) && cost.trunc() == cost) {
        return Err(DecisionStatus::InvalidCost);
    }
    Ok((crate::core::time::Instant::from_nanos(ms_to_nanos(now_ms)), cost as u32))
}

/// What every decision call of the bindings answers (`TokenBucketCore.check`,
/// `LimiterCore.check`/`checkNew`/`peek`, the pacer's `place`/`tryAcquire`/`due`/`release`/
/// `cancel`/`nextInLine`): one small integer, its figures (remaining, waits, ids…) written into
/// the binding's own `Float64Array` (`results()`, a view over the wasm memory that the JS
/// wrapper keeps), so that a decision allocates nothing on either side. The JS wrappers map
/// each code to their documented result or error.
#[cfg(any(feature = "wasm", feature = "wasm-edge", feature = "wasm-limit"))]
#[wasm_bindgen]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionStatus {
    /// Admitted (the pacer: committed, goes out now, released, refunded).
    Allowed = 0,
    /// Refused for now: the wait is in the figures (the pacer's `due`: the instant to wait for).
    Denied = 1,
    /// The pacer: every in-flight slot is taken.
    Busy = 2,
    /// The pacer: no such call (or not in the state asked for); `nextInLine`: nobody waits.
    Unknown = 3,
    /// `nowMs` is not a finite number ≥ 0.
    InvalidNow = 4,
    /// `cost` is not a whole number that fits in `u32` (the pacer: `weight` not a finite number above 0).
    InvalidCost = 5,
    /// An id is not a whole number from 0 to 2^53 − 1.
    InvalidId = 6,
    /// `cost` (`weight`) exceeds the whole capacity: it could never be admitted.
    CostTooHigh = 7,
    /// The pacer: `maxQueued` or `maxQueuedWeight` is reached.
    QueueFull = 8,
}

#[cfg(any(feature = "wasm", feature = "wasm-edge", feature = "wasm-limit"))]
/// A binding's figures as a `Float64Array` over the wasm memory (no copy): every decision
/// rewrites them in place. The view goes empty (reads `undefined`) when the memory grows, and
/// is then asked for again. `figures` must not move: it lives in a struct wasm-bindgen boxed.
pub(crate) fn figures_view(figures: &[f64]) -> js_sys::Float64Array {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    // a wasm32 address fits in u32
    let at = figures.as_ptr() as usize as u32;
    js_sys::Float64Array::new_with_byte_offset_and_length(&memory.buffer(), at, figures.len() as u32)
}

#[cfg(feature = "wasm")]
/// An id from JS: a whole number from 0 to 2^53 − 1 (never a `NaN` or a fraction cast).
pub(crate) fn id_of(id: f64) -> Option<u64> {
    ((0.0..=9_007_199_254_740_991.0).contains(&id) && id.fract() == 0.0).then_some(id as u64)
}
