//! A panic (a bug: request paths have no `unwrap`) must not lock what requests hold. In a
//! Worker a panic aborts: the instance traps, no destructor runs, and its state (every
//! `RefCell`, every count) can no longer be trusted. So the hook installed here:
//!
//! 1. logs the panic;
//! 2. schedules a fresh instance of the module for the next call into it, with every
//!    isolate count (upstream slots, tenant shares, blocks) starting afresh;
//! 3. tells the JavaScript side (`panicked` in `js/streams.mjs`), which gives back every
//!    fleet lease this isolate holds and answers the requests in flight on the old instance
//!    with a `503` (the Worker's `through`, `js/worker-core.js`).
//!
//! Durable Objects in the isolate make their counters anew from storage (blocks and long
//! counts survive, as after a restart).

use std::sync::Once;

/// Install the hook (once per isolate; a fresh instance installs it again).
pub fn install() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            crate::log::log_error(&format!("sluicegate: panicked, starting a fresh instance: {info}"));
            wasm_bindgen::handler::schedule_reinit();
            crate::js::panicked();
        }));
    });
}

/// A panic, on purpose: the development build's `faults: { panic: path }` (tests of the above).
#[cfg(feature = "dev-origin")]
pub fn on_purpose(env: &crate::js::Env, path: &str) {
    let faults = js_sys::Reflect::get(env, &"SLUICEGATE_FAULTS".into()).ok().and_then(|f| f.as_string());
    let target = faults
        .and_then(|text| js_sys::JSON::parse(&text).ok())
        .and_then(|faults| js_sys::Reflect::get(&faults, &"panic".into()).ok())
        .and_then(|p| p.as_string());
    if target.is_some_and(|target| target.eq_ignore_ascii_case(path)) {
        panic!("a panic on purpose (faults.panic) for {path}");
    }
}
