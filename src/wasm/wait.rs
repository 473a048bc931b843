//! `Wait`: the one timer of the JS layer (the pacer's waits, a batch's resume, Smart Flow's
//! cooldowns), on gloo-timers, cancellable so that an abort leaves no timer behind.

use super::non_negative;
use alloc::rc::Rc;
use core::cell::{Cell, RefCell};
use core::future::{poll_fn, Future};
use core::pin::Pin;
use core::task::{Poll, Waker};
use gloo_timers::future::TimeoutFuture;
use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// A wait on a timer (gloo-timers' futures API) that can be cancelled: `new Wait(ms)`,
/// `await wait.done` (true when it ran its time, false when cancelled), `wait.cancel()`
/// (clears the timer at once, so nothing keeps a process alive).
#[wasm_bindgen]
pub struct Wait {
    state: Rc<WaitState>,
    done: Promise,
}

#[derive(Default)]
struct WaitState {
    cancelled: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// The longest single timer (setTimeout fires at once beyond 2^31 − 1 ms): a longer wait
/// ends early and the pacer, asked again, waits the rest.
const MAX_TIMER_MS: f64 = 2_147_483_647.0;

#[wasm_bindgen]
impl Wait {
    /// Starts a timer of `ms` milliseconds (at most 2^31 − 1).
    #[wasm_bindgen(constructor)]
    pub fn new(ms: f64) -> Result<Wait, JsError> {
        let ms = non_negative(ms, "ms")?.min(MAX_TIMER_MS).ceil() as u32;
        let state = Rc::new(WaitState::default());
        let shared = state.clone();
        let done = future_to_promise(async move {
            let mut timer = TimeoutFuture::new(ms);
            let ran = poll_fn(|cx| {
                if shared.cancelled.get() {
                    return Poll::Ready(false);
                }
                *shared.waker.borrow_mut() = Some(cx.waker().clone());
                Pin::new(&mut timer).poll(cx).map(|()| true)
            })
            .await;
            Ok(JsValue::from_bool(ran))
        });
        Ok(Wait { state, done })
    }

    /// Resolves to `true` when the time has passed, `false` when cancelled first.
    #[wasm_bindgen(getter, unchecked_return_type = "Promise<boolean>")]
    pub fn done(&self) -> Promise {
        self.done.clone()
    }

    /// Stops the timer; `done` resolves to `false`.
    pub fn cancel(&self) {
        self.state.cancelled.set(true);
        if let Some(waker) = self.state.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}
