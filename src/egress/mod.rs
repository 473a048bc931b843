//! Egress.
pub mod cache;
