//! What a request holds, given back exactly once however the request ends.
//!
//! A request may hold a slot of an upstream budget (or a place in its queue), a fleet
//! lease, and its tenant's share of what is in flight. Each is a [`Hold`]: an action that
//! gives it back, run once, by whichever of these comes first:
//!
//! - **the code that took it lets go**: its [`Guard`] is dropped, on every path out of the
//!   request (an answer, a refusal, an error returned with `?`);
//! - **the response body it went with is done** (read to its end, failed or cancelled):
//!   [`Guard::release_with`] hands the hold to that body;
//! - **the client goes away** (`request.signal` aborts). Cloudflare then cancels what is
//!   left of the request, so code after an `await` may never run: the [`Scope`]'s listener
//!   gives back everything the request holds at that moment, at once.
//!
//! A panic replaces the whole module instance, and with it every count this isolate kept
//! (see `crate::panic`).
//!
//! ```text
//! acquire ─┬─ answer ─────────────────── guard dropped ──────┐
//!          ├─ error / refusal / 1xx ──── guard dropped ──────┤
//!          ├─ body streams ── body done ─ release_with ──────┼─▶ released once
//!          └─ client gone (any time) ─── scope's listener ───┘
//! ```

use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use web_sys::{AbortSignal, Request};

type Action = Box<dyn FnOnce()>;

/// One thing a request holds: the action that gives it back, run at most once.
#[derive(Clone)]
pub struct Hold(Rc<Cell<Option<Action>>>);

impl Hold {
    fn new(action: impl FnOnce() + 'static) -> Self {
        Hold(Rc::new(Cell::new(Some(Box::new(action)))))
    }

    /// Give it back now; nothing if it already was.
    pub fn release(&self) {
        // Taken before it runs: the action may release other holds, never this one twice.
        if let Some(action) = self.0.take() {
            action();
        }
    }

    /// Whether it is still held.
    pub fn is_held(&self) -> bool {
        let action = self.0.take();
        let held = action.is_some();
        self.0.set(action);
        held
    }

    /// What giving it back does from now on (a place in a queue became a slot); `false`,
    /// and nothing changed, when it was already given back.
    pub fn replace(&self, action: impl FnOnce() + 'static) -> bool {
        if self.0.take().is_none() {
            return false;
        }
        self.0.set(Some(Box::new(action)));
        true
    }

    /// Forget it without running its action: it turned out to hold nothing.
    pub fn disarm(&self) {
        drop(self.0.take());
    }
}

/// The owner of a [`Hold`]: dropping it gives the hold back, unless it was handed on
/// ([`Guard::release_with`]).
#[must_use = "dropping a guard gives back what it holds"]
pub struct Guard {
    hold: Hold,
    handed: bool,
}

impl Guard {
    fn new(hold: Hold) -> Self {
        Guard { hold, handed: false }
    }

    /// A guard of its own, in no request's scope (work that outlives the request).
    pub fn detached(release: impl FnOnce() + 'static) -> Self {
        Guard::new(Hold::new(release))
    }

    /// The hold this guard owns.
    pub fn hold(&self) -> &Hold {
        &self.hold
    }

    /// Hand the hold to `owner`, which gives it back by calling the returned function
    /// (once; later calls do nothing). If `owner` fails, the guard still owns the hold and
    /// gives it back when dropped.
    ///
    /// # Errors
    /// What `owner` failed with.
    pub fn release_with<T>(mut self, owner: impl FnOnce(&JsValue) -> Result<T, JsValue>) -> Result<T, JsValue> {
        let hold = self.hold.clone();
        let handed = owner(&Closure::once_into_js(move || hold.release()))?;
        self.handed = true;
        Ok(handed)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.handed {
            self.hold.release();
        }
    }
}

/// Every hold of one request, given back if its client goes away.
pub struct Scope<'r> {
    request: &'r Request,
    holds: Rc<RefCell<Vec<Hold>>>,
    /// `request.signal` (compatibility flag `enable_request_signal`), when the runtime has
    /// one: read when first needed.
    signal: OnceCell<Option<AbortSignal>>,
    /// The signal's `abort` listener, added with the first hold.
    listener: RefCell<Option<Closure<dyn FnMut()>>>,
}

impl<'r> Scope<'r> {
    /// The scope of `request`.
    pub fn of(request: &'r Request) -> Self {
        Scope { request, holds: Rc::default(), signal: OnceCell::new(), listener: RefCell::new(None) }
    }

    fn signal(&self) -> Option<&AbortSignal> {
        self.signal.get_or_init(|| crate::runtime::signal(self.request).dyn_into::<AbortSignal>().ok()).as_ref()
    }

    /// Whether the client has gone away.
    pub fn gone(&self) -> bool {
        self.signal().is_some_and(AbortSignal::aborted)
    }

    /// Hold something that `release` gives back. A client already gone gets it back at once.
    pub fn hold(&self, release: impl FnOnce() + 'static) -> Guard {
        let hold = Hold::new(release);
        if self.gone() {
            hold.release();
            return Guard::new(hold);
        }
        self.listen();
        let mut holds = self.holds.borrow_mut();
        holds.retain(Hold::is_held);
        holds.push(hold.clone());
        Guard::new(hold)
    }

    fn listen(&self) {
        let Some(signal) = self.signal() else { return };
        let mut listener = self.listener.borrow_mut();
        if listener.is_some() {
            return;
        }
        let holds = Rc::clone(&self.holds);
        let gone = Closure::<dyn FnMut()>::new(move || {
            // Taken out first: releasing runs budget code that may take new holds.
            let taken = std::mem::take(&mut *holds.borrow_mut());
            for hold in taken {
                hold.release();
            }
        });
        if signal.add_event_listener_with_callback("abort", gone.as_ref().unchecked_ref()).is_ok() {
            *listener = Some(gone);
        }
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        if let (Some(Some(signal)), Some(listener)) = (self.signal.get(), self.listener.get_mut().take()) {
            let _ = signal.remove_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hold whose action counts how often it ran.
    fn counted() -> (Hold, Rc<Cell<u32>>) {
        let runs = Rc::new(Cell::new(0));
        let seen = Rc::clone(&runs);
        (Hold::new(move || seen.set(seen.get() + 1)), runs)
    }

    #[test]
    fn a_hold_is_given_back_once_whoever_gives_it_back_first() {
        let (hold, runs) = counted();
        let (by_body, by_client) = (hold.clone(), hold.clone());
        by_client.release();
        by_body.release();
        drop(Guard::new(hold));
        assert_eq!(runs.get(), 1);
        assert!(!by_body.is_held());
    }

    #[test]
    fn dropping_the_guard_gives_it_back() {
        let (hold, runs) = counted();
        let watcher = hold.clone();
        {
            let _guard = Guard::new(hold);
            assert!(watcher.is_held());
        }
        assert_eq!(runs.get(), 1);
    }

    #[test]
    fn a_place_in_the_queue_becomes_a_slot_only_while_still_held() {
        let (hold, left) = counted();
        let released = Rc::new(Cell::new(false));
        let flag = Rc::clone(&released);
        assert!(hold.replace(move || flag.set(true)));
        hold.release();
        assert_eq!((left.get(), released.get()), (0, true), "the new action ran, the old one never");

        let (gone, _) = counted();
        gone.release();
        assert!(!gone.replace(|| panic!("a hold given back is never taken again")));
    }

    #[test]
    fn a_disarmed_hold_gives_nothing_back() {
        let (hold, runs) = counted();
        hold.disarm();
        drop(Guard::new(hold));
        assert_eq!(runs.get(), 0);
    }

    #[test]
    fn an_action_that_releases_other_holds_runs_each_once() {
        let (inner, inner_runs) = counted();
        let chained = inner.clone();
        let outer = Hold::new(move || chained.release());
        outer.release();
        outer.release();
        inner.release();
        assert_eq!(inner_runs.get(), 1);
    }
}
