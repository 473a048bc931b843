//! What every layer stands on: time as an argument ([`time`]), one module per limiting
//! algorithm behind one shape ([`limit`]), limiters per key ([`keyed`]), in-flight slots
//! ([`budget`]) and the sorting helpers. `no_std`, no serde, and it imports nothing above it
//! (`tests/layers.rs` checks).

pub mod budget;
pub mod keyed;
pub mod limit;
pub(crate) mod sort;
pub mod time;
