// sluicegate/worker: the edge's rules, identity, headers and Durable Object counting in
// front of a Worker's own handler. Workers only: wasm cannot be compiled from bytes there,
// so the module is imported (wrangler hands over a compiled WebAssembly.Module).
import wasm from "../worker/pkg/sluicegate_worker_bg.wasm";
import * as glue from "../worker/pkg/sluicegate_worker.js";
import { edgeOver } from "./worker-core.js";

const edge = edgeOver(glue, wasm, { library: true });

/**
 * The rules (the rules file, as an object or as JSON text) in front of the Worker's own
 * handlers: `edge.wrap(handler)` is a Worker `fetch`. Throws, naming every problem, when the
 * rules or the Worker's configuration are invalid. Call it at module scope.
 */
export const createEdge = edge.createEdge;

/** The Durable Object class that counts: export it from the Worker, bound as RATE_LIMITER. */
export const RateLimiter = edge.RateLimiter;
