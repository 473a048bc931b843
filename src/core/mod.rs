//! What every layer stands on: time as an argument ([`time`]), one module per limiting
//! algorithm behind one shape ([`limit`]), limiters per key ([`keyed`]), in-flight slots
//! ([`budget`]), weights in thousandths ([`milli`]), [`openmeteo`] (the only code that knows
//! Open-Meteo: its call weights, its 429 bodies, its windows; the browser client, the edge's
//! egress and the development mock all read it), form decoding, the sorting helpers and the
//! "did you mean" of error messages. `no_std`, no serde, and it imports nothing above it
//! (`tests/layers.rs` checks).

pub mod budget;
pub(crate) mod form;
pub mod keyed;
pub mod limit;
pub mod milli;
pub mod openmeteo;
pub(crate) mod sort;
pub(crate) mod suggest;
pub mod time;
