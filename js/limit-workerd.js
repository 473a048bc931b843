// sluicegate/limit in Cloudflare Workers: the edge build, instantiated from the imported module.
import "./edge-workerd.js";

export { Limiter } from "./limit.js";
