//! The browser client's policy, pure: the weighted multi-window pacer ([`pacer`]), the
//! per-location result cache ([`cache`]), abort-on-first-429 batches ([`batch`]), the Smart
//! Flow limiter ([`smartflow`]), and [`openmeteo`], the only code that knows Open-Meteo
//! (its call weights, its 429 bodies, its windows).

pub mod batch;
pub mod cache;
pub mod openmeteo;
pub mod pacer;
pub mod smartflow;
