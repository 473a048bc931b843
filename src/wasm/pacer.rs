//! `PacerCore` for JavaScript: the pure pacer with time passed in as milliseconds.

use super::{ms_to_nanos, nanos_to_ms, non_negative, num, set_prop};
use crate::pacer::{self, PacerError, Reservation, Window};
use crate::time::{Instant, Span};
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_PACER: &str = r#"
/** One rolling window: at most `budget` weighted calls in any `lengthMs`. */
export interface PacerWindow {
  lengthMs: number;
  budget: number;
}
export interface PacerOptions {
  /** Default: 550 per minute, 4,800 per hour, 9,500 per day (the Open-Meteo free tier, 8 % under). */
  windows?: PacerWindow[];
  /** The most one call may weigh; default 5,000 (the upstream's cap); `null` for none. */
  maxWeight?: number | null;
}
/** A committed reservation: the call may go out at `atMs` (`delayMs` after the asking time). */
export interface PacerReservation {
  id: number;
  atMs: number;
  delayMs: number;
}
export interface PacerSnapshot {
  windows: { lengthMs: number; budget: number; spent: number }[];
  queued: number;
  queuedWeight: number;
  inFlight: number;
  /** When the last queued call may go out, or null when nothing is queued. */
  drainsAtMs: number | null;
}
/** Thrown for a call that could never go out: `name` is "PacerWeightError". */
export interface PacerWeightError extends Error {
  name: "PacerWeightError";
  weight: number;
  /** The index of the window that can never hold it, when that is the reason. */
  window?: number;
  /** That window's budget, or the per-call cap. */
  limit: number;
}
"#;

const MILLI: f64 = 1000.0;

fn instant(ms: f64, what: &str) -> Result<Instant, JsError> {
    Ok(Instant::from_nanos(ms_to_nanos(non_negative(ms, what)?)))
}

fn ms(t: Instant) -> f64 {
    nanos_to_ms(t.as_nanos())
}

/// Weight in thousandths, rounded up so a fractional weight is never under-counted.
fn milli(weight: f64) -> Result<u64, JsError> {
    if !(weight.is_finite() && weight > 0.0) {
        return Err(JsError::new(&format!("weight must be a finite number above 0, got {}", num(weight))));
    }
    Ok((weight * MILLI).ceil() as u64)
}

fn weight_error(e: PacerError) -> JsValue {
    let error = js_sys::Error::new(&e.to_string());
    let (weight, window, limit) = match e {
        PacerError::ExceedsBudget { weight, window, budget } => (weight, Some(window), budget),
        PacerError::ExceedsCallCap { weight, cap } => (weight, None, cap),
        _ => return error.into(),
    };
    error.set_name("PacerWeightError");
    set_prop(&error, "weight", &(weight as f64 / MILLI).into());
    if let Some(window) = window {
        set_prop(&error, "window", &(window as f64).into());
    }
    set_prop(&error, "limit", &(limit as f64 / MILLI).into());
    error.into()
}

fn plain_error(e: PacerError) -> JsValue {
    js_sys::Error::new(&e.to_string()).into()
}

fn reservation(r: Reservation, now: Instant) -> JsValue {
    let out = Object::new();
    set_prop(&out, "id", &(r.id as f64).into());
    set_prop(&out, "atMs", &ms(r.at).into());
    set_prop(&out, "delayMs", &nanos_to_ms((r.at - now).as_nanos()).into());
    out.into()
}

fn number(obj: &JsValue, key: &str) -> Result<Option<f64>, JsError> {
    let v = Reflect::get(obj, &key.into()).map_err(|_| JsError::new(&format!("cannot read {key}")))?;
    if v.is_undefined() {
        return Ok(None);
    }
    v.as_f64().map(Some).ok_or_else(|| JsError::new(&format!("{key} must be a number")))
}

fn windows_from(value: &JsValue) -> Result<Vec<Window>, JsError> {
    if value.is_undefined() || value.is_null() {
        return Ok(pacer::open_meteo_windows());
    }
    let list: &Array =
        value.dyn_ref().ok_or_else(|| JsError::new("windows must be an array of { lengthMs, budget }"))?;
    let mut out = Vec::with_capacity(list.length() as usize);
    for (i, w) in list.iter().enumerate() {
        let length =
            number(&w, "lengthMs")?.ok_or_else(|| JsError::new(&format!("windows[{i}].lengthMs is missing")))?;
        let budget = number(&w, "budget")?.ok_or_else(|| JsError::new(&format!("windows[{i}].budget is missing")))?;
        if !(length.is_finite() && length > 0.0) {
            return Err(JsError::new(&format!("windows[{i}].lengthMs must be above 0, got {}", num(length))));
        }
        if !(budget.is_finite() && budget > 0.0) {
            return Err(JsError::new(&format!("windows[{i}].budget must be above 0, got {}", num(budget))));
        }
        out.push(Window { length: Span::from_nanos(ms_to_nanos(length)), budget: (budget * MILLI).floor() as u64 });
    }
    Ok(out)
}

fn cap_from(options: &JsValue) -> Result<Option<u64>, JsError> {
    let v = Reflect::get(options, &"maxWeight".into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_null() {
        return Ok(None);
    }
    match v.as_f64() {
        None if v.is_undefined() => Ok(Some(5_000_000)),
        Some(cap) if cap.is_finite() && cap > 0.0 => Ok(Some((cap * MILLI).floor() as u64)),
        _ => Err(JsError::new("maxWeight must be a number above 0, or null for no cap")),
    }
}

/// The pure pacer with time passed in (milliseconds on any clock): reservations over
/// several rolling windows; a reservation is committed at `atMs`.
#[wasm_bindgen(js_name = PacerCore)]
pub struct PacerCoreJs {
    core: pacer::PacerCore,
}

#[wasm_bindgen(js_class = PacerCore)]
impl PacerCoreJs {
    /// `new PacerCore({ windows?, maxWeight? })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "PacerOptions | undefined")] options: JsValue,
    ) -> Result<PacerCoreJs, JsError> {
        let options = if options.is_undefined() { Object::new().into() } else { options };
        let windows = windows_from(&Reflect::get(&options, &"windows".into()).unwrap_or(JsValue::UNDEFINED))?;
        let cap = cap_from(&options)?;
        let core = pacer::PacerCore::new(windows, cap).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(PacerCoreJs { core })
    }

    /// Commit a call of `weight` at the earliest instant from `nowMs` at which it fits
    /// every window. Throws a `PacerWeightError` for a call that could never go out.
    #[wasm_bindgen(unchecked_return_type = "PacerReservation")]
    pub fn reserve(&mut self, now_ms: f64, weight: f64) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let r = self.core.reserve(now, milli(weight)?).map_err(weight_error)?;
        Ok(reservation(r, now))
    }

    /// How long a call of `weight` asked at `nowMs` would wait, committing nothing.
    #[wasm_bindgen(js_name = etaMs)]
    pub fn eta_ms(&self, now_ms: f64, weight: f64) -> Result<f64, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let at = self.core.eta(now, milli(weight)?).map_err(weight_error)?;
        Ok(nanos_to_ms((at - now).as_nanos()))
    }

    /// The call went out: no refund from now on; it is in flight until `release`.
    pub fn dispatch(&mut self, id: f64) -> Result<(), JsValue> {
        self.core.dispatch(id as u64).map_err(plain_error)
    }

    /// The dispatched call answered. Returns whether it was in flight.
    pub fn release(&mut self, id: f64) -> bool {
        self.core.release(id as u64)
    }

    /// Cancel: `true` if refunded (not yet dispatched), `false` if it stays spent.
    pub fn cancel(&mut self, id: f64) -> bool {
        self.core.cancel(id as u64)
    }

    /// Move a reservation that could not go out at its instant to the earliest fit from
    /// `nowMs`.
    #[wasm_bindgen(unchecked_return_type = "PacerReservation")]
    pub fn reschedule(&mut self, now_ms: f64, id: f64) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let r = self.core.reschedule(now, id as u64).map_err(plain_error)?;
        Ok(reservation(r, now))
    }

    /// Replace the windows (and cap), keeping everything spent; queued reservations are
    /// planned again. Returns `{ moved: PacerReservation[], refused: { id, error }[] }`.
    #[wasm_bindgen(js_name = setLimits, unchecked_return_type = "{ moved: PacerReservation[]; refused: { id: number; error: PacerWeightError }[] }")]
    pub fn set_limits(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "PacerOptions")] options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let windows = windows_from(&Reflect::get(&options, &"windows".into()).unwrap_or(JsValue::UNDEFINED))?;
        let cap = cap_from(&options)?;
        let pacer::Replan { moved, refused } = self.core.set_windows(now, windows, cap).map_err(plain_error)?;
        let out = Object::new();
        set_prop(&out, "moved", &moved.into_iter().map(|r| reservation(r, now)).collect::<Array>());
        let refused: Array = refused
            .into_iter()
            .map(|(id, e)| {
                let item = Object::new();
                set_prop(&item, "id", &(id as f64).into());
                set_prop(&item, "error", &weight_error(e));
                JsValue::from(item)
            })
            .collect();
        set_prop(&out, "refused", &refused);
        Ok(out.into())
    }

    /// Spent weight per window at `nowMs`, and what is queued and in flight.
    #[wasm_bindgen(unchecked_return_type = "PacerSnapshot")]
    pub fn snapshot(&self, now_ms: f64) -> Result<JsValue, JsError> {
        let snap = self.core.snapshot(instant(now_ms, "nowMs")?);
        let windows: Array = snap
            .windows
            .iter()
            .map(|w| {
                let item = Object::new();
                set_prop(&item, "lengthMs", &nanos_to_ms(w.window.length.as_nanos()).into());
                set_prop(&item, "budget", &(w.window.budget as f64 / MILLI).into());
                set_prop(&item, "spent", &(w.spent as f64 / MILLI).into());
                JsValue::from(item)
            })
            .collect();
        let out = Object::new();
        set_prop(&out, "windows", &windows);
        set_prop(&out, "queued", &(snap.queued as f64).into());
        set_prop(&out, "queuedWeight", &(snap.queued_weight as f64 / MILLI).into());
        set_prop(&out, "inFlight", &(snap.in_flight as f64).into());
        set_prop(&out, "drainsAtMs", &snap.drains_at.map_or(JsValue::NULL, |t| ms(t).into()));
        Ok(out.into())
    }

    /// Every spend still inside a window as `[atMs, weight, dispatched]`, for persistence.
    #[wasm_bindgen(js_name = exportSpends, unchecked_return_type = "[number, number, boolean][]")]
    pub fn export_spends(&self) -> Array {
        self.core
            .export()
            .into_iter()
            .map(|(at, w, d)| JsValue::from(Array::of3(&ms(at).into(), &(w as f64 / MILLI).into(), &d.into())))
            .collect()
    }

    /// Count spends recorded elsewhere (another tab, an earlier page load), each
    /// `[atMs, weight]`, against every window.
    #[wasm_bindgen(js_name = importSpends)]
    pub fn import_spends(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "[number, number][]")] spends: Array,
    ) -> Result<(), JsError> {
        let now = instant(now_ms, "nowMs")?;
        let mut list = Vec::with_capacity(spends.length() as usize);
        for (i, item) in spends.iter().enumerate() {
            let pair: Array =
                item.dyn_into().map_err(|_| JsError::new(&format!("spends[{i}] must be [atMs, weight]")))?;
            let at = instant(pair.get(0).as_f64().unwrap_or(f64::NAN), &format!("spends[{i}][0]"))?;
            list.push((at, milli(pair.get(1).as_f64().unwrap_or(f64::NAN))?));
        }
        self.core.import(now, &list);
        Ok(())
    }
}
