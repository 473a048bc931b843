// sluicegate/limit in Node: the edge build, instantiated synchronously on import (a later
// `await init()` is a no-op).
export { default } from "./edge-node.js";
export { Limiter } from "./limit.js";
