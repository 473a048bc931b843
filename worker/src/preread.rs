//! The checks made before a request's body is read (`pre_read` in the rules file): per
//! client address, per isolate, per source's body bytes. They protect this isolate, so they
//! are counted here, never in a Durable Object.

use crate::config::Config;
use crate::js;
use sluicegate::admission::{BodyLength, ByteBucket, IpTable, LengthError};
use sluicegate::identity::{ClientIp, Identity};
use sluicegate::limit::{Decision, Gcra, Limiter};
use sluicegate::rules::{PreRead, RuleSet};
use sluicegate::time::{Instant, Span};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

/// Sources named by host (a request in no named source) counted at once; past this,
/// full buckets are swept, then the rest share one bucket.
const MAX_HOST_SOURCES: usize = 10_000;
/// The source that requests share when the host table is full of busy hosts.
const OVERFLOW_SOURCE: &str = "\u{1f}other-hosts";

/// Which check refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Ip,
    Node,
    Source,
}

impl Scope {
    /// The name in `Sluicegate-Scope` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Ip => "ip",
            Scope::Node => "node",
            Scope::Source => "source",
        }
    }
}

struct State {
    /// The checks these counters belong to (other checks start them afresh).
    pre: PreRead,
    ip: Option<IpTable>,
    node: Option<Gcra>,
    sources: HashMap<String, ByteBucket>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with_state<T>(rules: &RuleSet, f: impl FnOnce(&mut State, &PreRead) -> T) -> T {
    STATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let pre = rules.pre_read();
        if cell.as_ref().is_none_or(|s| s.pre != *pre) {
            *cell = Some(State {
                pre: pre.clone(),
                // The salt is drawn on first use, never at module scope.
                ip: pre.per_ip.map(|quota| IpTable::new(quota, js::random_u64())),
                node: pre.node,
                sources: HashMap::new(),
            });
        }
        f(cell.as_mut().expect("just set"), pre)
    })
}

/// Check a request before its body is read: its address, then the isolate, then its
/// source's declared body bytes (`declared`: `Content-Length`). The first refusal answers,
/// with how long to wait; a request refused per address charges nothing further.
pub fn check(
    rules: &RuleSet,
    identity: Option<Identity>,
    source: &str,
    declared: Option<u64>,
    now: Instant,
) -> Result<(), (Scope, Span)> {
    if rules.pre_read().is_empty() {
        return Ok(());
    }
    with_state(rules, |state, pre| {
        if let Some(table) = &mut state.ip {
            // Requests without an address share one bucket rather than go uncounted.
            let ip = identity.map_or(ClientIp::V4(Ipv4Addr::UNSPECIFIED), |id| id.ip);
            refused(table.check(ip, now), Scope::Ip)?;
        }
        if let Some(node) = &mut state.node {
            refused(node.check(now, 1).unwrap_or(Decision::Deny { retry_after: Span::ZERO }), Scope::Node)?;
        }
        match (declared, pre.source_bytes_per_second) {
            (Some(bytes), Some(rate)) if bytes > 0 => {
                refused(source_bucket(state, source, rate, now).check(bytes, now), Scope::Source)
            }
            _ => Ok(()),
        }
    })
}

fn refused(decision: Decision, scope: Scope) -> Result<(), (Scope, Span)> {
    match decision {
        Decision::Allow { .. } => Ok(()),
        Decision::Deny { retry_after } => Err((scope, retry_after)),
    }
}

/// The byte bucket of `source`: one second's worth back to back.
fn source_bucket<'s>(state: &'s mut State, source: &str, rate: u64, now: Instant) -> &'s mut ByteBucket {
    let sources = &mut state.sources;
    let mut key = source;
    if !sources.contains_key(key) && sources.len() >= MAX_HOST_SOURCES {
        sources.retain(|_, bucket| !bucket.is_full(now));
        if sources.len() >= MAX_HOST_SOURCES {
            key = OVERFLOW_SOURCE;
        }
    }
    sources.entry(key.to_owned()).or_insert_with(|| ByteBucket::new(rate, rate).expect("a validated rate"))
}

/// Why an upload was cut as it streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its source went over its body bytes per second (429).
    Source,
    /// It contradicted its `Content-Length` (400).
    Length(LengthError),
}

/// The checks of a request body as it streams, as the `charge(chunk size)` and `end()`
/// functions that `js::metered` calls: the body may not bring more (or less) than its
/// `declared` length, and a body of no declared length is charged to `source`'s bytes
/// (when those are counted). `cut` says why it was cut, once it was.
pub fn body_checks(
    config: &Config,
    source: String,
    declared: Option<u64>,
    cut: &Rc<Cell<Option<Cut>>>,
) -> (JsValue, JsValue) {
    let length = Rc::new(Cell::new(BodyLength::new(declared)));
    let config = Rc::clone(config);
    let (chunk_length, chunk_cut) = (Rc::clone(&length), Rc::clone(cut));
    let charge = move |bytes: f64| {
        let bytes = bytes.max(0.0) as u64;
        let mut body = chunk_length.get();
        let checked = body.chunk(bytes);
        chunk_length.set(body);
        let why = match checked {
            Err(error) => Some(Cut::Length(error)),
            Ok(()) if declared.is_none() && !source_admits(&config, &source, bytes) => Some(Cut::Source),
            Ok(()) => None,
        };
        chunk_cut.set(chunk_cut.get().or(why));
        why.is_none()
    };
    let end_cut = Rc::clone(cut);
    let end = move || match length.get().end() {
        Ok(()) => true,
        Err(error) => {
            end_cut.set(end_cut.get().or(Some(Cut::Length(error))));
            false
        }
    };
    (
        Closure::<dyn FnMut(f64) -> bool>::new(charge).into_js_value(),
        Closure::<dyn FnMut() -> bool>::new(end).into_js_value(),
    )
}

/// Whether `source` may bring `bytes` more now (always, when its bytes are not counted).
fn source_admits(config: &Config, source: &str, bytes: u64) -> bool {
    let Ok(setup) = config.as_ref().as_ref() else { return true };
    let Some(rate) = setup.rules.pre_read().source_bytes_per_second else { return true };
    let now = crate::now();
    with_state(&setup.rules, |state, _| source_bucket(state, source, rate, now).check(bytes, now).is_allowed())
}
