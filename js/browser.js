// Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite users: optimizeDeps: { exclude: ["sluicegate"] }.
export * from "../pkg/sluicegate.js";
export { default } from "../pkg/sluicegate.js";
export { Pacer } from "./pacer.js";
export { LocationCache } from "./cache.js";
export { runBatch } from "./batch.js";
export { fetchForecasts, chooseLocationsPerCall } from "./forecasts.js";
