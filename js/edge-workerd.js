// sluicegate/edge (rules validation, client identity, token bucket). Cloudflare Workers: wasm cannot be compiled from bytes at run time there, so import the
// module (wrangler hands over a compiled WebAssembly.Module) and instantiate it.
import wasm from "../pkg-edge/sluicegate_bg.wasm";
import { initSync } from "../pkg-edge/sluicegate.js";

initSync({ module: wasm });

export * from "../pkg-edge/sluicegate.js";
export { TokenBucket } from "./token-bucket.js";
export { default } from "../pkg-edge/sluicegate.js";
