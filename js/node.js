// Node: read the .wasm beside the web build and instantiate it synchronously, so the
// exports work straight after import (a later `await init()` is a no-op).
import { readFileSync } from "node:fs";
import { initSync } from "../pkg/sluicegate.js";

initSync({ module: readFileSync(new URL("../pkg/sluicegate_bg.wasm", import.meta.url)) });

export * from "../pkg/sluicegate.js";
export { default } from "../pkg/sluicegate.js";
export { Pacer } from "./pacer.js";
export { LocationCache } from "./cache.js";
export { runBatch } from "./batch.js";
export { fetchForecasts, chooseLocationsPerCall } from "./forecasts.js";
