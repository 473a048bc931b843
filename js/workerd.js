// Cloudflare Workers: wasm cannot be compiled from bytes at run time there, so import the
// module (wrangler hands over a compiled WebAssembly.Module) and instantiate it.
import wasm from "../pkg/sluicegate_bg.wasm";
import { initSync } from "../pkg/sluicegate.js";

initSync({ module: wasm });

export * from "../pkg/sluicegate.js";
export { default } from "../pkg/sluicegate.js";
export { Pacer } from "./pacer.js";
export { LocationCache } from "./cache.js";
export { runBatch } from "./batch.js";
export { fetchForecasts, chooseLocationsPerCall } from "./forecasts.js";
