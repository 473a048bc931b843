//! What every layer stands on: time as an argument ([`time`]), one module per limiting
//! algorithm behind one shape ([`limit`]), limiters per key ([`keyed`]), in-flight slots
//! ([`budget`]), form decoding, the sorting helpers and the "did you mean" of error
//! messages. `no_std`,
//! no serde, and it imports nothing above it (`tests/layers.rs` checks).

pub mod budget;
pub(crate) mod form;
pub mod keyed;
pub mod limit;
pub(crate) mod sort;
pub(crate) mod suggest;
pub mod time;
