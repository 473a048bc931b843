// sluicegate/limit in Node: the edge build, instantiated synchronously on import.
import "./edge-node.js";

export { Limiter } from "./limit.js";
