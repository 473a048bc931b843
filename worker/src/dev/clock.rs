//! The development build's clock: `SLUICEGATE_CLOCK` starts it at a given instant and runs it
//! K times as fast (`sluicegate replay --speed K`).

use wasm_bindgen::prelude::*;

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
        super::state(|s| s.clock.set(None));
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
            if super::state(|s| s.clock.get()) != Some((scale, real, virtual_start)) {
                super::state(|s| s.clock.set(Some((scale, real, virtual_start))));
                super::state(|s| s.last.set(None));
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
    match super::state(|s| s.clock.get()) {
        Some((scale, real, virtual_start)) => {
            // (an isolate's clock can read a little behind the one that set the start)
            let ms = (virtual_start + (real_ms - real) * scale).floor().max(0.0);
            let ms = super::state(|s| s.last.get()).map_or(ms, |last| ms.max(last + 1.0));
            super::state(|s| s.last.set(Some(ms)));
            ms
        }
        None => real_ms,
    }
}

/// The real milliseconds in which `ms` pass on the edge's clock (see [`set_clock`]).
pub fn real_ms(ms: f64) -> f64 {
    match super::state(|s| s.clock.get()) {
        Some((scale, _, _)) => ms / scale,
        None => ms,
    }
}

/// Whether [`set_clock`] set a clock (responses then report it in `Sluicegate-Clock`).
pub fn is_set() -> bool {
    super::state(|s| s.clock.get()).is_some()
}

/// A request's turn at the rules under a set clock, held until dropped.
pub struct Turn(js_sys::Function);

impl Drop for Turn {
    fn drop(&mut self) {
        let _ = self.0.call0(&JsValue::UNDEFINED);
    }
}

/// Under a set clock (`sluicegate replay`), wait for the requests before this one to be done
/// with the rules, so that each request's rules are decided together, at its instant, with
/// no other request's decisions between them: the order and the instants the simulator
/// replays. `None` (no wait) with the real clock.
pub async fn take_turn() -> Option<Turn> {
    if !is_set() {
        return None;
    }
    let mut settle = None;
    let mine = js_sys::Promise::new(&mut |resolve, _| settle = Some(resolve));
    let turn = Turn(settle?);
    if let Some(before) = super::state(|s| s.turn.replace(Some(mine))) {
        let _ = wasm_bindgen_futures::JsFuture::from(before).await;
    }
    Some(turn)
}
