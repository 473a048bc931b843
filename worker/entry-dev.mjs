// The development Worker (`npm start`, the tests): without ORIGIN_URL it serves the
// built-in development origin (the www/ pages, GET /api/ping and the Open-Meteo mock).
import wasm from "./pkg-dev/sluicegate_worker_bg.wasm";
import * as glue from "./pkg-dev/sluicegate_worker.js";
import { edge } from "./edge.mjs";

const { worker, RateLimiter } = edge(glue, wasm);
export default worker;
export { RateLimiter };
