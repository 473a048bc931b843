// sluicegate/edge (rules validation, client identity, token bucket). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite 7 and older: optimizeDeps: { exclude: ["sluicegate"] }; esbuild: pass the URL of the .wasm imported from "…/wasm" (README, Bundlers).
import wasmInit from "../pkg-edge/sluicegate.js";
import { guardInit } from "./init.js";

export * from "../pkg-edge/sluicegate.js";
export { TokenBucket } from "./token-bucket.js";
export default guardInit(wasmInit, "sluicegate/edge");
