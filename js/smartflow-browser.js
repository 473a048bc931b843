// sluicegate/smartflow (the Smart Flow limiter). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite 7 and older: optimizeDeps: { exclude: ["sluicegate"] }; esbuild: pass the URL of the .wasm imported from "…/wasm" (README, Bundlers).
import wasmInit from "../pkg-smartflow/sluicegate.js";
import { guardInit } from "./init.js";

export * from "../pkg-smartflow/sluicegate.js";
export default guardInit(wasmInit, "sluicegate/smartflow");
export { SmartFlow, fileStore, parseRetryAfter, smartFetch } from "./smartflow.js";
