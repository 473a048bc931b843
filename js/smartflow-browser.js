// sluicegate/smartflow (the Smart Flow limiter). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite users: optimizeDeps: { exclude: ["sluicegate"] }.
export * from "../pkg-smartflow/sluicegate.js";
export { default } from "../pkg-smartflow/sluicegate.js";
export { SmartFlow, fileStore, parseRetryAfter, smartFetch } from "./smartflow.js";
