// The deployed Worker: admitted requests go to ORIGIN_URL (required).
import wasm from "./pkg/sluicegate_worker_bg.wasm";
import * as glue from "./pkg/sluicegate_worker.js";
import { edge } from "./edge.mjs";

const { worker, RateLimiter } = edge(glue, wasm);
export default worker;
export { RateLimiter };
