//! The checks made before a request's body is read (`pre_read` in the rules file): per
//! client address, per isolate, per source's body bytes. They protect this isolate, so they
//! are counted here, never in a Durable Object.

use crate::config::Config;
use crate::js;
use crate::tenancy;
use sluicegate::admission::{ByteBucket, IpTable, LengthError};
use sluicegate::identity::{ClientIp, Identity};
use sluicegate::limit::{Decision, Gcra, Limiter};
use sluicegate::rules::{PreRead, RuleSet};
use sluicegate::time::{Instant, Span};
use std::cell::RefCell;
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
pub enum Check {
    Ip,
    Node,
    Source,
}

impl Check {
    /// The name in `Sluicegate-Scope` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Check::Ip => "ip",
            Check::Node => "node",
            Check::Source => "source",
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
                ip: pre.per_ip.map(|quota| IpTable::new(quota, crate::runtime::random_u64())),
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
) -> Result<(), (Check, Span)> {
    if rules.pre_read().is_empty() {
        return Ok(());
    }
    with_state(rules, |state, pre| {
        if let Some(table) = &mut state.ip {
            // Requests without an address share one bucket rather than go uncounted.
            let ip = identity.map_or(ClientIp::V4(Ipv4Addr::UNSPECIFIED), |id| id.ip);
            refused(table.check(ip, now), Check::Ip)?;
        }
        if let Some(node) = &mut state.node {
            refused(node.check(now, 1).unwrap_or(Decision::Deny { retry_after: Span::ZERO }), Check::Node)?;
        }
        match (declared, pre.source_bytes_per_second) {
            (Some(bytes), Some(rate)) if bytes > 0 => {
                refused(source_bucket(state, source, rate, now).check(bytes, now), Check::Source)
            }
            _ => Ok(()),
        }
    })
}

fn refused(decision: Decision, scope: Check) -> Result<(), (Check, Span)> {
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its source went over its body bytes per second (429).
    Source,
    /// It contradicted its `Content-Length` (400).
    Length(LengthError),
    /// Its tenant's cap, byte budget or share in flight refused it (413 or 429).
    Tenant(tenancy::Refusal),
}

/// How a request body is checked as it streams, once its bytes are counted: a body that
/// declared its length was charged that length before it was read, so it may bring exactly
/// that many bytes; one that did not is charged as it streams, chunk by chunk, before each
/// chunk is passed on: to its tenant (the biggest body it may send, its share in flight),
/// to its source's bytes, then to its tenant's byte bucket. Either way a body that fails its
/// check is cut: the upload made of it is aborted.
pub enum BodyCheck {
    /// Exactly `length` bytes; the stream that checks them, once the body is under way.
    Exact { length: u64, checked: RefCell<Option<js::ExactLength>> },
    /// Each chunk charged by `charge`; `cut` once one was refused, saying why.
    Charged { charge: JsValue, cut: Rc<RefCell<Option<Cut>>> },
}

impl BodyCheck {
    /// The check of a body of `declared` length from `source`, of a request whose tenant
    /// (if any) charges a body of no declared length as `tenant` says.
    pub fn new(config: &Config, source: String, declared: Option<u64>, tenant: Option<tenancy::Streamed>) -> Self {
        if let Some(length) = declared {
            return BodyCheck::Exact { length, checked: RefCell::new(None) };
        }
        let cut = Rc::new(RefCell::new(None));
        let (config, refused, mut tenant) = (Rc::clone(config), Rc::clone(&cut), tenant);
        let charge = move |bytes: f64| -> JsValue {
            if refused.borrow().is_some() {
                return JsValue::FALSE;
            }
            let bytes = bytes.max(0.0) as u64;
            let checked = match tenant.as_mut().map_or(Ok(()), |t| t.take(bytes)) {
                Err(refusal) => Err(Cut::Tenant(refusal)),
                Ok(()) if !source_admits(&config, &source, bytes) => Err(Cut::Source),
                Ok(()) => Ok(tenant.as_ref().and_then(|t| t.charge(bytes))),
            };
            match checked {
                Err(why) => {
                    *refused.borrow_mut() = Some(why);
                    JsValue::FALSE
                }
                Ok(None) => JsValue::TRUE,
                // The tenant's bytes are charged in its store: the chunk waits for the answer.
                Ok(Some(charging)) => {
                    let refused = Rc::clone(&refused);
                    wasm_bindgen_futures::future_to_promise(async move {
                        let admitted = charging.await.map_err(|refusal| {
                            refused.borrow_mut().get_or_insert(Cut::Tenant(refusal));
                        });
                        Ok(JsValue::from_bool(admitted.is_ok()))
                    })
                    .into()
                }
            }
        };
        BodyCheck::Charged { charge: Closure::<dyn FnMut(f64) -> JsValue>::new(charge).into_js_value(), cut }
    }

    /// `body`, checked as it streams, and the signal to send it with: `signal` (the
    /// client's), or for a charged body one that also aborts when the body is cut, so that
    /// the upload made of it is aborted rather than ended short.
    ///
    /// # Errors
    /// When the stream cannot be made.
    pub fn apply(&self, body: &web_sys::ReadableStream, signal: &JsValue) -> Result<(JsValue, JsValue), JsValue> {
        match self {
            BodyCheck::Exact { length, checked } => {
                let exact = js::exact_length(body, *length as f64)?;
                let stream = exact.body();
                *checked.borrow_mut() = Some(exact);
                Ok((stream.into(), signal.clone()))
            }
            BodyCheck::Charged { charge, .. } => {
                let charged = js::charged(body, charge, signal)?;
                Ok((charged.body().into(), charged.signal()))
            }
        }
    }

    /// Why the body was cut, if it was.
    pub fn cut(&self) -> Option<Cut> {
        match self {
            BodyCheck::Exact { length, checked } => {
                let why = checked.borrow().as_ref()?.cut();
                match why.as_str() {
                    "longer" => Some(Cut::Length(LengthError::Longer { declared: *length })),
                    "shorter" => Some(Cut::Length(LengthError::Shorter { declared: *length })),
                    _ => None,
                }
            }
            BodyCheck::Charged { cut, .. } => cut.borrow().clone(),
        }
    }
}

/// Whether `source` may bring `bytes` more now (always, when its bytes are not counted).
fn source_admits(config: &Config, source: &str, bytes: u64) -> bool {
    let Ok(setup) = config.as_ref().as_ref() else { return true };
    let Some(rate) = setup.rules.pre_read().source_bytes_per_second else { return true };
    let now = crate::clock::now();
    with_state(&setup.rules, |state, _| source_bucket(state, source, rate, now).check(bytes, now).is_allowed())
}
