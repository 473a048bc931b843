//! What the edge keeps in this isolate between requests: one value
//! ([`sluicegate::pipeline::Isolate`]) the pipeline is handed, made on first use (its salt is
//! random, which workerd refuses at module scope).

use sluicegate::pipeline::Isolate;
use std::cell::RefCell;

thread_local! {
    static ISOLATE: RefCell<Option<Isolate>> = const { RefCell::new(None) };
}

/// Run `f` on this isolate's state (never across an `await`: the borrow ends with `f`).
pub(crate) fn with<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    ISOLATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let isolate =
            cell.get_or_insert_with(|| Isolate::new((crate::runtime::random_u64(), crate::runtime::random_u64())));
        f(isolate)
    })
}
