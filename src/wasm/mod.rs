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
#[cfg(any(feature = "wasm-edge", feature = "wasm-limit"))]
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
pub use client::{
    choose_locations_per_call, classify_rate_limit, open_meteo_query_weight, open_meteo_weight, BatchPolicyJs,
    LocationCacheJs,
};
#[cfg(any(feature = "wasm", feature = "wasm-edge", feature = "wasm-limit"))]
pub use convert::DecisionStatus;
#[cfg(feature = "wasm-edge")]
pub use edge::{check_rules_lines, client_identity_js, validate_rules, TokenBucket};
#[cfg(any(feature = "wasm-edge", feature = "wasm-limit"))]
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

// The host's types that wasm-bindgen's glue names (`init`'s input, the module's memory and
// table), as small structural types, so that the declarations compile in a browser project
// (lib "dom"), a Node one (@types/node, no DOM) and a Worker one (@cloudflare/workers-types):
// scripts/portable-dts.mjs puts these names where the glue wrote the DOM's. They are the
// file's own (the `export {}` keeps a declaration file from exporting them).
#[wasm_bindgen(typescript_custom_section)]
const TS_HOST: &str = r#"
export {};
/** Bytes: an `ArrayBuffer` or a view of one (a `Uint8Array`, a Node `Buffer`). */
type BufferSourceLike = ArrayBuffer | ArrayBufferView;
/** What `fetch` takes as its first argument (the DOM's `RequestInfo | URL`). */
type FetchInput = string | URL | Request;
// The host's WebAssembly types where it declares them (the DOM, Workers), else the part the
// declarations need: Node's type definitions declare no WebAssembly namespace.
type Host = typeof globalThis;
/** A compiled WebAssembly module (`WebAssembly.Module`). */
type WasmModule = Host extends { WebAssembly: { Module: { prototype: infer M } } } ? M : object;
/** A WebAssembly memory (`WebAssembly.Memory`). */
type WasmMemory = Host extends { WebAssembly: { Memory: { prototype: infer M } } } ? M : { readonly buffer: ArrayBuffer; grow(delta: number): number };
/** A WebAssembly table (`WebAssembly.Table`). */
type WasmTable = Host extends { WebAssembly: { Table: { prototype: infer T } } }
  ? T
  : { readonly length: number; get(index: number): unknown; set(index: number, value?: unknown): void; grow(delta: number, value?: unknown): number };
// wasm-bindgen's classes are disposable (`using x = new PacerCore()`): `Symbol.dispose` as
// TypeScript 5.2's esnext.disposable library and @types/node declare it, for projects whose
// `lib` predates it (es2023, a Worker's).
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
}
"#;

/// Runs once when the module is instantiated: a panic (a bug here) then reaches the console
/// as its message and place (`console.error`), not as a bare `unreachable` trap.
#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// Panics with `message`: how the package's tests provoke a panic, to see it reach the
/// console as its message. No entry exports it (the shims export the named API only).
#[doc(hidden)]
#[wasm_bindgen(js_name = __panicForTests)]
pub fn panic_for_tests(message: &str) {
    panic!("{message}");
}

// The browser packages' allocator (feature `talc`: the client's and Smart Flow's builds):
// about 5 KB raw (1.6 KB gzip) smaller than Rust's default dlmalloc for the same code
// (scripts/wasm-size.mjs). The edge and the simulator, for servers, keep dlmalloc.
#[cfg(all(feature = "talc", target_arch = "wasm32"))]
#[global_allocator]
#[allow(unsafe_code)]
// SAFETY: wasm32 here is single-threaded, and nothing else claims the heap.
static ALLOCATOR: talc::TalckWasm = unsafe { talc::TalckWasm::new_global() };
