//! The checks made before a request's body is read (`pre_read` in the rules file), carried
//! out: the pipeline decides them against this isolate's counts
//! ([`sluicegate::pipeline::preread`]); here the body is checked as it streams.

use crate::config::Config;
use crate::{isolate, js, tenancy};
use sluicegate::admission::LengthError;
use sluicegate::pipeline::preread::check_chunk;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

pub use sluicegate::pipeline::preread::{Check, Cut};

/// How a request body is checked as it streams, once its bytes are counted: a body that
/// declared its length was charged that length before it was read, so it may bring exactly
/// that many bytes; one that did not is charged as it streams, chunk by chunk, before each
/// chunk is passed on, as [`check_chunk`] orders it. Either way a body that fails its check
/// is cut: the upload made of it is aborted.
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
            let checked =
                check_chunk(|| tenant.as_mut().map(|t| t.take(bytes)), || source_admits(&config, &source, bytes))
                    .map(|charges| if charges { tenant.as_ref().and_then(|t| t.charge(bytes)) } else { None });
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
    isolate::with(|i| i.source_admits(&setup.rules, source, bytes, crate::clock::now()))
}
