// sluicegate/limit in browsers and bundlers: `await init()` loads the edge build's .wasm first.
import wasmInit from "../pkg-edge/sluicegate.js";
import { guardInit } from "./init.js";

export { Limiter } from "./limit.js";
export default guardInit(wasmInit, "sluicegate/limit");
