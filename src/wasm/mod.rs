//! JavaScript bindings (feature `wasm`): the only module that touches wasm-bindgen.
//! Each export validates what JS hands it (NaN, negatives, infinities and wrong types are
//! refused with an error naming the argument) and delegates to the core.

use wasm_bindgen::prelude::*;

#[cfg(feature = "wasm")]
mod client;
mod convert;
pub(crate) use convert::*;
#[cfg(feature = "wasm-edge")]
mod edge;
#[cfg(feature = "wasm-edge")]
mod limit;
#[cfg(feature = "wasm")]
mod pacer;
#[cfg(feature = "wasm-sim")]
mod sim;
#[cfg(feature = "wasm-smartflow")]
mod smartflow;
#[cfg(any(feature = "wasm", feature = "wasm-smartflow"))]
mod wait;
#[cfg(feature = "wasm")]
pub use client::{choose_locations_per_call, classify_rate_limit, open_meteo_weight, BatchPolicyJs, LocationCacheJs};
#[cfg(feature = "wasm-edge")]
pub use edge::{client_identity_js, validate_rules, TokenBucket};
#[cfg(feature = "wasm-edge")]
pub use limit::{problem_json, LimiterCoreJs};
#[cfg(feature = "wasm")]
pub use pacer::PacerCoreJs;
#[cfg(feature = "wasm-sim")]
pub use sim::{
    sim_check_config, sim_compare, sim_csv_records, sim_decisions, sim_edge_rules_path, sim_help,
    sim_inline_edge_rules, sim_parse_args, sim_run, sim_self_test, sim_usage,
};
#[cfg(feature = "wasm-smartflow")]
pub use smartflow::{
    format_saved_at, is_cache_fresh, is_unresolved_scoped_url, parse_saved_at, url_identifiers, SmartFlowBucketJs,
    SmartFlowCoreJs,
};
#[cfg(any(feature = "wasm", feature = "wasm-smartflow"))]
pub use wait::Wait;

#[wasm_bindgen(start)]
fn start() {
    #[cfg(debug_assertions)]
    console_error_panic_hook::set_once();
}
