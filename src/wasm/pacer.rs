//! `PacerCore` for JavaScript: the pure pacer with time passed in as milliseconds.

use super::{
    deny_unknown, field, figures_view, id_of, ms_to_nanos, nanos_to_ms, non_negative, num, number_at, positive,
    set_prop, type_of, DecisionStatus,
};
use crate::client::pacer::{self, Busy, Due, LedgerEntry, PacerError, PacerLimits, Reservation, Window};
use crate::core::time::{Instant, Span};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use js_sys::{Array, Object};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_PACER: &str = r#"
/** One window: at most `budget` weighted calls in any `lengthMs` (or, with `fixedWindowMarginMs`, in each aligned `lengthMs`). */
export interface PacerWindow {
  lengthMs: number;
  budget: number;
}
export interface PacerOptions {
  /** Default: 550 per minute, 4,800 per hour, 9,500 per day (the Open-Meteo free tier, 8 % under). */
  windows?: PacerWindow[];
  /** The most one call may weigh; default 5,000 (the upstream's cap); `null` for none. */
  maxWeight?: number | null;
  /** At most this many calls out at once (PacerCore default: no cap). */
  maxInFlight?: number;
  /**
   * How late a call may go out after its instant and still count there; every window is
   * reserved this much longer. PacerCore default 0; `null`: 1 % of the shortest window, from
   * 100 ms to 1 s (Pacer's default).
   */
  slackMs?: number | null;
  /**
   * A number: plan against the upstream's fixed windows instead of rolling ones, window k of a
   * length L being [k·L, (k+1)·L) on the pacer's clock (ms since the Unix epoch, as `Date.now`),
   * and a call at t landing anywhere in [t − margin, t + margin] on the upstream's (clock error,
   * the upstream's own offset, the time a call takes to arrive and be counted): it counts in
   * every window that meets, so no window the upstream counts gets more than its budget. A
   * late call keeps its place while it lands in the windows it was counted in (`slackMs` is
   * not used). Default `null`: rolling windows, safe whatever the clocks say.
   */
  fixedWindowMarginMs?: number | null;
  /** At most this many calls queued; beyond, a `PacerQueueFullError` (default: no cap). */
  maxQueued?: number;
  /** At most this much weight queued; beyond, a `PacerQueueFullError` (default: no cap). */
  maxQueuedWeight?: number;
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
  /** The in-flight cap (Infinity: none). */
  maxInFlight: number;
  slackMs: number;
  /** The fixed windows' margin, or null for rolling windows. */
  fixedWindowMarginMs: number | null;
  /** When the last queued call may go out, or null when nothing is queued. */
  drainsAtMs: number | null;
}
/** Thrown beyond `maxQueued` or `maxQueuedWeight`: `name` is "PacerQueueFullError". */
export interface PacerQueueFullError extends Error {
  name: "PacerQueueFullError";
  /** Which limit was reached. */
  option: "maxQueued" | "maxQueuedWeight";
  limit: number;
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
    if let PacerError::QueueFull { limit, weight } = e {
        error.set_name("PacerQueueFullError");
        let (limit, key) = if weight { (limit as f64 / MILLI, "maxQueuedWeight") } else { (limit as f64, "maxQueued") };
        set_prop(&error, "limit", &limit.into());
        set_prop(&error, "option", &key.into());
        return error.into();
    }
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

/// The options of `new PacerCore(…)` and `setLimits(…)`, as JS gives them.
#[derive(Default)]
struct Options {
    windows: Option<Vec<WindowOption>>,
    /// Missing: the default (or, in `setLimits`, unchanged); `null`: no cap.
    max_weight: Option<Option<f64>>,
    max_in_flight: Option<f64>,
    /// Missing: unchanged (0 at first); `null`: 1 % of the shortest window, 100 ms to 1 s.
    slack_ms: Option<Option<f64>>,
    max_queued: Option<f64>,
    max_queued_weight: Option<f64>,
    /// Missing: unchanged (rolling at first); `null`: rolling; else the fixed windows' margin.
    fixed_window_margin_ms: Option<Option<f64>>,
}

struct WindowOption {
    length_ms: f64,
    budget: f64,
}

/// Whose options the errors name.
const WHAT: &str = "pacer options";

const OPTION_FIELDS: &[&str] =
    &["windows", "maxWeight", "maxInFlight", "slackMs", "maxQueued", "maxQueuedWeight", "fixedWindowMarginMs"];

/// `windows`: an array of `{ lengthMs, budget }`, each field a number and no other.
fn windows_at(value: &JsValue) -> Result<Option<Vec<WindowOption>>, JsError> {
    let v = field(value, "windows");
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    let Some(list) = v.dyn_ref::<Array>() else {
        return Err(JsError::new(&format!(
            "{WHAT}: windows must be an array of {{ lengthMs, budget }}, got {}",
            type_of(&v)
        )));
    };
    let mut out = Vec::new(); // not `list.length()` ahead: a sparse array says 2^32 − 1
    for (i, w) in list.iter().enumerate() {
        let at = format!("windows[{i}]");
        if !w.is_object() {
            return Err(JsError::new(&format!("{WHAT}: {at} must be {{ lengthMs, budget }}, got {}", type_of(&w))));
        }
        deny_unknown(WHAT, &w, &at, &["lengthMs", "budget"])?;
        let path = format!("{at}.");
        let field = |key: &str| match number_at(&w, WHAT, &path, key)? {
            Some(Some(n)) => Ok(n),
            _ => Err(JsError::new(&format!("{WHAT}: {path}{key} must be a number"))),
        };
        out.push(WindowOption { length_ms: field("lengthMs")?, budget: field("budget")? });
    }
    Ok(Some(out))
}

/// Options from JS, read field by field ([`field`]); an error names the field
/// (`windows[0].budget`), an unknown field is refused.
fn options_from(value: JsValue) -> Result<Options, JsError> {
    if value.is_undefined() || value.is_null() {
        return Ok(Options::default());
    }
    if !value.is_object() || Array::is_array(&value) {
        return Err(JsError::new(&format!("{WHAT} must be an object, got {}", type_of(&value))));
    }
    deny_unknown(WHAT, &value, "", OPTION_FIELDS)?;
    let number = |key: &str| number_at(&value, WHAT, "", key);
    Ok(Options {
        windows: windows_at(&value)?,
        max_weight: number("maxWeight")?,
        max_in_flight: number("maxInFlight")?.flatten(),
        slack_ms: number("slackMs")?,
        max_queued: number("maxQueued")?.flatten(),
        max_queued_weight: number("maxQueuedWeight")?.flatten(),
        fixed_window_margin_ms: number("fixedWindowMarginMs")?,
    })
}

fn count(value: f64, what: &str) -> Result<usize, JsError> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 {
        Ok(value as usize)
    } else {
        Err(JsError::new(&format!("{WHAT}: {what} must be a whole number ≥ 1, got {}", num(value))))
    }
}

fn windows_from(list: Vec<WindowOption>) -> Result<Vec<Window>, JsError> {
    let mut out = Vec::with_capacity(list.len());
    for (i, w) in list.into_iter().enumerate() {
        let length = positive(w.length_ms, &format!("{WHAT}: windows[{i}].lengthMs"))?;
        let budget = positive(w.budget, &format!("{WHAT}: windows[{i}].budget"))?;
        out.push(Window { length: Span::from_nanos(ms_to_nanos(length)), budget: (budget * MILLI).floor() as u64 });
    }
    Ok(out)
}

/// The windows and limits `options` give, over `windows` and `limits` for what they leave out.
fn apply(
    options: Options,
    windows: Vec<Window>,
    mut limits: PacerLimits,
) -> Result<(Vec<Window>, PacerLimits), JsError> {
    let windows = match options.windows {
        Some(list) => windows_from(list)?,
        None => windows,
    };
    if let Some(cap) = options.max_weight {
        limits.call_cap = match cap {
            Some(cap) => Some((positive(cap, "pacer options: maxWeight")? * MILLI).floor() as u64),
            None => None,
        };
    }
    if let Some(n) = options.max_in_flight {
        limits.max_in_flight = count(n, "maxInFlight")?;
    }
    match options.slack_ms {
        Some(Some(ms)) => limits.slack = Span::from_nanos(ms_to_nanos(non_negative(ms, "pacer options: slackMs")?)),
        Some(None) => {
            let shortest = windows.iter().map(|w| w.length.as_nanos()).min().unwrap_or(0);
            limits.slack = Span::from_nanos((shortest / 100).clamp(100_000_000, 1_000_000_000));
        }
        None => {}
    }
    if let Some(n) = options.max_queued {
        limits.max_queued = count(n, "maxQueued")?;
    }
    if let Some(w) = options.max_queued_weight {
        limits.max_queued_weight = (positive(w, "pacer options: maxQueuedWeight")? * MILLI).floor() as u64;
    }
    if let Some(margin) = options.fixed_window_margin_ms {
        limits.fixed_windows = match margin {
            Some(ms) => Some(Span::from_nanos(ms_to_nanos(non_negative(ms, "pacer options: fixedWindowMarginMs")?))),
            None => None,
        };
    }
    Ok((windows, limits))
}

/// The pacer's state machine with time passed in (milliseconds on any clock): reservations
/// over several rolling windows, slots for calls in flight, and the shared ledger. JS sees it
/// as `PacerMachine`, behind js/pacer-core.js's `PacerCore` and js/pacer.js's `Pacer`, which
/// map its decisions' statuses ([`DecisionStatus`]) to their results and errors.
#[wasm_bindgen(js_name = PacerMachine)]
pub struct PacerCoreJs {
    core: pacer::PacerCore,
    /// The last decision's figures, read by JS through `results`: `[atMs, id, retryAfterMs]`
    /// (the instant a call may go out, its id, the wait for budget).
    figures: [f64; 3],
    /// Why the last decision answered `CostTooHigh` or `QueueFull`, for `lastError`.
    refused: Option<PacerError>,
}

/// Where `results` holds each figure.
const AT_MS: usize = 0;
const ID: usize = 1;
const RETRY_AFTER_MS: usize = 2;

/// A JS id, or the error naming it.
fn id_arg(id: f64) -> Result<u64, JsError> {
    id_of(id).ok_or_else(|| JsError::new(&format!("id must be a whole number from 0 to 2^53 − 1, got {}", num(id))))
}

#[wasm_bindgen(js_class = PacerMachine)]
impl PacerCoreJs {
    /// `new PacerMachine({ windows?, maxWeight?, maxInFlight?, slackMs?, maxQueued?, maxQueuedWeight?, fixedWindowMarginMs? })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "PacerOptions | undefined")] options: JsValue,
    ) -> Result<PacerCoreJs, JsError> {
        let defaults = PacerLimits { call_cap: Some(5_000_000), ..PacerLimits::default() };
        let (windows, limits) = apply(options_from(options)?, crate::core::openmeteo::free_tier_windows(), defaults)?;
        let core = pacer::PacerCore::with_limits(windows, limits).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(PacerCoreJs { core, figures: [0.0; 3], refused: None })
    }

    /// The figures of the last decision, as a `Float64Array` over the wasm memory (no copy):
    /// `[atMs, id, retryAfterMs]`. Every decision rewrites those it answers; the view goes
    /// empty when the wasm memory grows, and is then asked for again.
    pub fn results(&self) -> js_sys::Float64Array {
        figures_view(&self.figures)
    }

    /// The error of the last decision that answered `CostTooHigh` (a `PacerWeightError`) or
    /// `QueueFull` (a `PacerQueueFullError`), with its fields.
    #[wasm_bindgen(js_name = lastError)]
    pub fn last_error(&mut self) -> JsValue {
        self.refused.take().map_or(JsValue::UNDEFINED, weight_error)
    }

    /// Commit a call of `weight` at the earliest instant from `nowMs` at which it fits
    /// every window; once due it goes before calls of lower `priority` waiting for a slot.
    /// Throws a `PacerWeightError` for a call that could never go out, a `PacerQueueFullError`
    /// beyond `maxQueued`/`maxQueuedWeight`.
    #[wasm_bindgen(unchecked_return_type = "PacerReservation")]
    pub fn reserve(&mut self, now_ms: f64, weight: f64, priority: Option<i32>) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let r = self.core.reserve_with_priority(now, milli(weight)?, priority.unwrap_or(0)).map_err(weight_error)?;
        Ok(reservation(r, now))
    }

    /// `reserve` as a decision: `Allowed` with the instant (ms) the call may go out and its
    /// id in `results`; else `InvalidNow`, `InvalidCost` (the weight), `CostTooHigh` or
    /// `QueueFull` (`lastError` says which limit).
    pub fn place(&mut self, now_ms: f64, weight: f64, priority: Option<i32>) -> DecisionStatus {
        let (now, weight) = match self.inputs(now_ms, weight) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        match self.core.reserve_with_priority(now, weight, priority.unwrap_or(0)) {
            Ok(r) => {
                self.figures[AT_MS] = ms(r.at);
                self.figures[ID] = r.id as f64;
                DecisionStatus::Allowed
            }
            Err(e) => self.refuse(e),
        }
    }

    /// A permit now or never: `Allowed` with the id of a call in flight (release it when it
    /// has answered), `Busy` when every slot is taken, `Denied` with the ms until the budget
    /// has room (`retryAfterMs`); errors as `place`.
    #[wasm_bindgen(js_name = tryAcquire)]
    pub fn try_acquire(&mut self, now_ms: f64, weight: f64) -> DecisionStatus {
        let (now, weight) = match self.inputs(now_ms, weight) {
            Ok(valid) => valid,
            Err(status) => return status,
        };
        match self.core.try_acquire(now, weight) {
            Ok(Ok(id)) => {
                self.figures[ID] = id as f64;
                DecisionStatus::Allowed
            }
            Ok(Err(Busy::InFlight)) => DecisionStatus::Busy,
            Ok(Err(Busy::Budget(at))) => {
                self.figures[RETRY_AFTER_MS] = nanos_to_ms((at - now).as_nanos());
                DecisionStatus::Denied
            }
            Err(e) => self.refuse(e),
        }
    }

    /// How long a call of `weight` asked at `nowMs` would wait, committing nothing.
    #[wasm_bindgen(js_name = etaMs)]
    pub fn eta_ms(&self, now_ms: f64, weight: f64) -> Result<f64, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let at = self.core.eta(now, milli(weight)?).map_err(weight_error)?;
        Ok(nanos_to_ms((at - now).as_nanos()))
    }

    /// The queued call `id` is due at `nowMs`: `Allowed` it went out (in flight until
    /// `release`), `Busy` every slot is taken (`nextInLine` hands it one), `Unknown` no such
    /// queued call, `Denied` the instant (ms) to wait for before asking again (`atMs`);
    /// `InvalidNow`, `InvalidId` for input it refuses.
    pub fn due(&mut self, now_ms: f64, id: f64) -> DecisionStatus {
        if !(now_ms.is_finite() && now_ms >= 0.0) {
            return DecisionStatus::InvalidNow;
        }
        let Some(id) = id_of(id) else { return DecisionStatus::InvalidId };
        match self.core.due(Instant::from_nanos(ms_to_nanos(now_ms)), id) {
            Due::Go => DecisionStatus::Allowed,
            Due::NoSlot => DecisionStatus::Busy,
            Due::Unknown => DecisionStatus::Unknown,
            Due::Wait(at) => {
                self.figures[AT_MS] = ms(at);
                DecisionStatus::Denied
            }
        }
    }

    /// The call went out at its planned instant (ignoring slots): no refund from now on.
    pub fn dispatch(&mut self, id: f64) -> Result<(), JsValue> {
        self.core.dispatch(id_arg(id)?).map_err(plain_error)
    }

    /// The dispatched call answered; its slot is free: `Allowed` when it was in flight, else
    /// `Unknown`; `InvalidId`.
    pub fn release(&mut self, id: f64) -> DecisionStatus {
        match id_of(id) {
            Some(id) if self.core.release(id) => DecisionStatus::Allowed,
            Some(_) => DecisionStatus::Unknown,
            None => DecisionStatus::InvalidId,
        }
    }

    /// The call that waited longest for a slot, once a slot is free: `Allowed` with its id in
    /// `results` (pass it to `due`), else `Unknown`.
    #[wasm_bindgen(js_name = nextInLine)]
    pub fn next_in_line(&mut self) -> DecisionStatus {
        match self.core.next_in_line() {
            Some(id) => {
                self.figures[ID] = id as f64;
                DecisionStatus::Allowed
            }
            None => DecisionStatus::Unknown,
        }
    }

    /// Cancel: `Allowed` if refunded (not yet dispatched), `Unknown` if it stays spent (or
    /// there is no such call); `InvalidId`.
    pub fn cancel(&mut self, id: f64) -> DecisionStatus {
        match id_of(id) {
            Some(id) if self.core.cancel(id) => DecisionStatus::Allowed,
            Some(_) => DecisionStatus::Unknown,
            None => DecisionStatus::InvalidId,
        }
    }

    /// Move a reservation that could not go out at its instant to the earliest fit from
    /// `nowMs`.
    #[wasm_bindgen(unchecked_return_type = "PacerReservation")]
    pub fn reschedule(&mut self, now_ms: f64, id: f64) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let r = self.core.reschedule(now, id_arg(id)?).map_err(plain_error)?;
        Ok(reservation(r, now))
    }

    /// Change any of the options, keeping everything spent; queued reservations are planned
    /// again. Returns `{ moved: PacerReservation[], refused: { id, error }[] }`.
    #[wasm_bindgen(js_name = setLimits, unchecked_return_type = "{ moved: PacerReservation[]; refused: { id: number; error: PacerWeightError }[] }")]
    pub fn set_limits(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "PacerOptions")] options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = instant(now_ms, "nowMs")?;
        let (windows, limits) = apply(options_from(options)?, self.core.windows().to_vec(), self.core.limits())?;
        let pacer::Replan { moved, refused } = self.core.set_limits(now, windows, limits).map_err(plain_error)?;
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
        let limits = self.core.limits();
        let out = Object::new();
        set_prop(&out, "windows", &windows);
        set_prop(&out, "queued", &(snap.queued as f64).into());
        set_prop(&out, "queuedWeight", &(snap.queued_weight as f64 / MILLI).into());
        set_prop(&out, "inFlight", &(snap.in_flight as f64).into());
        let max = if limits.max_in_flight == usize::MAX { f64::INFINITY } else { limits.max_in_flight as f64 };
        set_prop(&out, "maxInFlight", &max.into());
        set_prop(&out, "slackMs", &nanos_to_ms(limits.slack.as_nanos()).into());
        let fixed = limits.fixed_windows.map_or(JsValue::NULL, |margin| nanos_to_ms(margin.as_nanos()).into());
        set_prop(&out, "fixedWindowMarginMs", &fixed);
        set_prop(&out, "drainsAtMs", &snap.drains_at.map_or(JsValue::NULL, |t| ms(t).into()));
        Ok(out.into())
    }

    /// Name this pacer in a shared ledger.
    #[wasm_bindgen(js_name = setOwner)]
    pub fn set_owner(&mut self, name: &str) {
        self.core.set_owner(name);
    }

    /// The ledger as stored: `[atMs, weight, owner, seq, dispatched (0|1)]` per entry.
    #[wasm_bindgen(unchecked_return_type = "[number, number, string, number, 0 | 1][]")]
    pub fn entries(&self) -> Array {
        self.core
            .entries()
            .map(|e| {
                let row = Array::of3(&ms(e.at).into(), &(e.weight as f64 / MILLI).into(), &e.owner.into());
                row.push(&(e.seq as f64).into());
                row.push(&(e.dispatched as u8).into());
                JsValue::from(row)
            })
            .collect()
    }

    /// Take a stored ledger (as `entries()` writes it, shared with other pacers) as the
    /// truth. Malformed rows are skipped.
    pub fn sync(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "[number, number, string, number, 0 | 1][]")] stored: Array,
    ) -> Result<(), JsError> {
        let mut rows: Vec<(Instant, u64, String, u64, bool)> = Vec::new(); // not `length()` ahead: sparse arrays
        for row in stored.iter() {
            let Some(row) = row.dyn_ref::<Array>() else { continue };
            let (at, weight, seq) = (row.get(0).as_f64(), row.get(1).as_f64(), row.get(3).as_f64());
            let (Some(at), Some(weight), Some(owner), Some(seq)) = (at, weight, row.get(2).as_string(), seq) else {
                continue;
            };
            let (Ok(at), Ok(weight)) = (instant(at, "atMs"), milli(weight)) else { continue };
            rows.push((at, weight, owner, seq as u64, row.get(4).is_truthy()));
        }
        self.core.sync(rows.iter().map(|(at, weight, owner, seq, dispatched)| LedgerEntry {
            at: *at,
            weight: *weight,
            owner,
            seq: *seq,
            dispatched: *dispatched,
        }));
        Ok(())
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
        let mut list = Vec::new(); // not `length()` ahead: a sparse array says 2^32 − 1
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

impl PacerCoreJs {
    /// `nowMs` and `weight` as the core takes them, or the status naming the one refused.
    fn inputs(&self, now_ms: f64, weight: f64) -> Result<(Instant, u64), DecisionStatus> {
        if !(now_ms.is_finite() && now_ms >= 0.0) {
            return Err(DecisionStatus::InvalidNow);
        }
        if !(weight.is_finite() && weight > 0.0) {
            return Err(DecisionStatus::InvalidCost);
        }
        Ok((Instant::from_nanos(ms_to_nanos(now_ms)), (weight * MILLI).ceil() as u64))
    }

    /// A refusal of the limits, kept for `lastError`: its status.
    fn refuse(&mut self, e: PacerError) -> DecisionStatus {
        let status = if matches!(e, PacerError::QueueFull { .. }) {
            DecisionStatus::QueueFull
        } else {
            DecisionStatus::CostTooHigh
        };
        self.refused = Some(e);
        status
    }
}
