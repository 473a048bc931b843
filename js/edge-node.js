// sluicegate/edge (rules validation, client identity, token bucket). Node: read the .wasm beside the web build and instantiate it synchronously, so the
// exports work straight after import (a later `await init()` is a no-op).
import { readFileSync } from "node:fs";
import { initSync } from "../pkg-edge/sluicegate.js";

initSync({ module: readFileSync(new URL("../pkg-edge/sluicegate_bg.wasm", import.meta.url)) });

export * from "../pkg-edge/sluicegate.js";
export { TokenBucket } from "./token-bucket.js";
export { default } from "../pkg-edge/sluicegate.js";
