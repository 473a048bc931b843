//! sluicegate: one rate-limiting core for the browser, the edge and the policy simulator.
//!
//! The core is `#![no_std]` + `alloc` and never reads a clock: every limiter takes `now`
//! and returns a [`Decision`]. The outer layers (the `wasm` bindings, the Worker crate,
//! the `cli` binary) read the clock once per request and translate.
//!
//! The folders are the layers, each importing only those before it: [`core`] (time, the
//! limiters, keyed limiters, budgets, Open-Meteo's rules) → [`client`] (the browser client's
//! pacer, cache, batches and Smart Flow) → [`edge`] (rules, identity, forwarding,
//! admission, tenants, egress) → `sim` (the policy simulator) → `wasm` (the bindings). The
//! modules are re-exported here where users have always found them (`sluicegate::limit`,
//! `sluicegate::rules`, …).
#![cfg_attr(not(feature = "std"), no_std)]
// No unsafe code but the browser builds' global allocator (src/wasm/mod.rs), allowed there alone.
#![deny(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod client;
pub mod core;
pub mod edge;
#[cfg(feature = "std")]
pub mod sim;

#[cfg(feature = "wasm-bindings")]
pub mod wasm;

/// The guide's page on the Rust core (`docs/rust-core.md`), whose samples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/rust-core.md")]
pub struct RustCoreGuide;

// Each module where users have always found it: the public paths do not show the folders.
pub use self::client::{batch, cache, pacer, smartflow};
pub use self::core::{budget, keyed, limit, milli, openmeteo, time};
pub use self::edge::{admission, analytics, egress, forward, headers, identity, pipeline, redact, rules, tenants};

pub use self::core::limit::{CostTooHigh, Decision, Limiter, Quota};
pub use self::core::time::{Instant, Span};
