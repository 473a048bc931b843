// sluicegate/smartflow (the Smart Flow limiter). Cloudflare Workers: wasm cannot be compiled from bytes at run time there, so import the
// module (wrangler hands over a compiled WebAssembly.Module) and instantiate it.
import wasm from "../pkg-smartflow/sluicegate_bg.wasm";
import { initSync } from "../pkg-smartflow/sluicegate.js";

initSync({ module: wasm });

export * from "../pkg-smartflow/sluicegate.js";
export { default } from "../pkg-smartflow/sluicegate.js";
export { SmartFlow, fileStore, parseRetryAfter, smartFetch } from "./smartflow.js";
