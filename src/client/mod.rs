//! The browser client's policy, pure: the weighted multi-window pacer ([`pacer`]), the
//! per-location result cache ([`cache`]), abort-on-first-429 batches ([`batch`]) and the
//! Smart Flow limiter ([`smartflow`]). What Open-Meteo charges and how it refuses is the
//! core's [`openmeteo`](crate::core::openmeteo), shared with the edge.

pub mod batch;
pub mod cache;
pub mod pacer;
pub mod smartflow;
