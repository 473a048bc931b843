//! What the edge keeps in this isolate between requests, in one place: the pipeline's state
//! ([`sluicegate::pipeline::Isolate`]: blocks, tenants, pre-read counts, failed tries), and
//! beside it what only the runtime can hold (the promises of requests waiting for an upstream
//! slot or a provider's answer, the egress caches of JS responses). Made on first use (its
//! salt is random, which workerd refuses at module scope). Each part is borrowed on its own,
//! never across an `await`.

use sluicegate::budget::{InFlight, Ticket};
use sluicegate::egress::cache::ResponseCache;
use sluicegate::egress::gate::{self, Gate, Grant, Limits};
use sluicegate::pipeline::Isolate;
use sluicegate::redact::KeyedHash;
use sluicegate::time::Instant;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use web_sys::Headers;

/// An upstream's slots in flight in this isolate, and its waiters.
pub(crate) struct Budget {
    pub(crate) slots: InFlight,
    /// The `resolve` of each waiter's promise, by ticket.
    pub(crate) waiters: HashMap<Ticket, js_sys::Function>,
}

/// The egress gates of one isolate or one Durable Object, by provider.
#[derive(Default)]
pub struct Gates {
    pub(crate) map: HashMap<String, Local>,
}

/// Gates shared by the concurrent calls that use them.
pub type Shared = Rc<RefCell<Gates>>;

/// One provider's gate, and its waiters.
pub(crate) struct Local {
    pub(crate) limits: Limits,
    pub(crate) gate: Gate,
    /// The `resolve` of each waiter's promise, by ticket.
    pub(crate) waiters: HashMap<gate::Ticket, js_sys::Function>,
    /// Grants made to waiters not yet collected.
    pub(crate) granted: HashMap<gate::Ticket, Grant>,
}

/// An answer kept: what the provider said, which mirror said it, when, and what it weighs.
#[derive(Clone)]
pub(crate) struct Kept {
    pub(crate) status: u16,
    pub(crate) headers: Headers,
    pub(crate) body: js_sys::Uint8Array,
    pub(crate) mirror: usize,
    pub(crate) at: Instant,
    /// Its body's and headers' bytes.
    pub(crate) bytes: usize,
}

/// A provider's cache of answers, and the calls being fetched.
pub(crate) struct Cache {
    pub(crate) answers: ResponseCache<Kept>,
    /// For each key being fetched: the promise its followers wait on, and its resolve.
    pub(crate) fetching: HashMap<String, (js_sys::Promise, js_sys::Function)>,
}

/// This isolate's state.
#[derive(Default)]
pub(crate) struct Runtime {
    isolate: RefCell<Option<Isolate>>,
    /// Each upstream's slots in flight and its waiters.
    pub(crate) budgets: RefCell<HashMap<(String, u32), Budget>>,
    /// Each provider's cache of answers, and the calls being fetched.
    pub(crate) caches: RefCell<HashMap<String, Cache>>,
    /// The egress gates.
    pub(crate) gates: Shared,
    /// The keyed hash of log lines and of the block cache.
    pub(crate) log_hash: OnceCell<KeyedHash>,
    /// The decisions counted since the last batch went to the stats object.
    pub(crate) recorder: RefCell<sluicegate::analytics::Recorder>,
    /// Whether a batch is on its way (one at a time).
    pub(crate) flushing: Cell<bool>,
    /// Whether the recorder holds a batch that failed once already.
    pub(crate) retried: Cell<bool>,
    /// What an egress route decided about the request it is answering (shed or refused), read
    /// as it answers (`crate::egress::serve`).
    pub(crate) egress_outcome: Cell<Option<sluicegate::analytics::Outcome>>,
    /// The dashboard's files: `name → [content type, text]` (`useDashboard`).
    pub(crate) dashboard: RefCell<Option<js_sys::Function>>,
}

thread_local! {
    static RUNTIME: Runtime = Runtime::default();
}

/// Run `f` on the pipeline's state of this isolate (the borrow ends with `f`).
pub(crate) fn with<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    RUNTIME.with(|rt| {
        let mut cell = rt.isolate.borrow_mut();
        let isolate =
            cell.get_or_insert_with(|| Isolate::new((crate::runtime::random_u64(), crate::runtime::random_u64())));
        f(isolate)
    })
}

/// Run `f` on this isolate's state.
pub(crate) fn runtime<T>(f: impl FnOnce(&Runtime) -> T) -> T {
    RUNTIME.with(f)
}
