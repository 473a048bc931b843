// sluicegate/limit in Cloudflare Workers: the edge build, instantiated from the imported
// module on import (a later `await init()` is a no-op).
export { default } from "./edge-workerd.js";
export { Limiter } from "./limit.js";
