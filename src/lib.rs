//! sluicegate: one rate-limiting core for the browser, the edge and the policy simulator.
//!
//! The core is `#![no_std]` + `alloc` and never reads a clock: every limiter takes `now`
//! and returns a [`Decision`]. The outer layers (the `wasm` bindings, the Worker crate,
//! the `cli` binary) read the clock once per request and translate.
//!
//! Layers depend downward only: `wasm/`, `bin/`, the Worker → [`rules`], [`forward`], [`identity`],
//! [`headers`], [`keyed`] → [`limit`] → [`time`].
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod admission;
pub mod batch;
pub mod budget;
pub mod cache;
pub mod egress;
pub mod forward;
pub mod headers;
pub mod identity;
pub mod keyed;
pub mod limit;
pub mod openmeteo;
pub mod pacer;
pub mod redact;
pub mod rules;
#[cfg(feature = "std")]
pub mod sim;
pub mod smartflow;
mod sort;
pub mod tenants;
pub mod time;

#[cfg(feature = "wasm")]
pub mod wasm;

pub use limit::{CostTooHigh, Decision, Limiter, Quota};
pub use time::{Instant, Span};
