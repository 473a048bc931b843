// sluicegate/smartflow (the Smart Flow limiter). Node: read the .wasm beside the web build and instantiate it synchronously, so the
// exports work straight after import (a later `await init()` is a no-op). The cache file store
// (the `path` option, fileStore) is installed here: only this entry touches node:fs.
import { readFileSync } from "node:fs";
import { initSync } from "../pkg-smartflow/sluicegate.js";
import { installFileStore } from "./smartflow.js";
import { fileStore } from "./smartflow-file.js";

initSync({ module: readFileSync(new URL("../pkg-smartflow/sluicegate_bg.wasm", import.meta.url)) });
installFileStore(fileStore);

export * from "../pkg-smartflow/sluicegate.js";
export { default } from "../pkg-smartflow/sluicegate.js";
export { SmartFlow, fileStore, parseRetryAfter, smartFetch } from "./smartflow.js";
