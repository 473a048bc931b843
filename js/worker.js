// sluicegate/worker: the edge's rules, identity, headers and Durable Object counting in
// front of a Worker's own handler. Workers only: wasm cannot be compiled from bytes there,
// so the module is imported (wrangler hands over a compiled WebAssembly.Module).
// @ts-expect-error -- a .wasm import is the bundler's (wrangler's), which TypeScript cannot resolve: `wasm` is a WebAssembly.Module
import wasm from "../worker/pkg/sluicegate_worker_bg.wasm";
import * as glue from "../worker/pkg/sluicegate_worker.js";
import { edgeOver } from "./worker-core.js";

/**
 * A rules file, as `worker/rules.json` is written: the parsed object, or its JSON text.
 * `createEdge` checks it and throws, naming every problem.
 * @typedef {string | { readonly rules: readonly unknown[]; readonly [section: string]: unknown }} RulesFile
 */

/**
 * @typedef {object} EdgeOptions
 * @property {RulesFile} rules The rules to enforce.
 * @property {string} [binding] The name in `env` of the Durable Object binding whose class is
 * {@link RateLimiter} (default `"RATE_LIMITER"`).
 */

/**
 * A Worker's `fetch`: what an admitted request is handed to.
 * @template [Env=unknown]
 * @template [Ctx=unknown]
 * @typedef {(request: Request, env: Env, ctx: Ctx) => Response | Promise<Response>} WorkerHandler
 */

/**
 * The rules, ready to run in front of handlers.
 * @typedef {object} Edge
 * @property {<Env, Ctx>(handler: WorkerHandler<Env, Ctx>) => (request: Request, env: Env, ctx: Ctx) => Promise<Response>} wrap
 * A Worker `fetch` that runs the rules, then hands an admitted request to `handler`
 * (whose response gets the rate-limit headers); a refused request gets the edge's
 * answer (a 429 with `Retry-After`, or a 503 from a rule that fails closed).
 * @property {<Env, Ctx>(request: Request, env: Env, ctx: Ctx, handler: WorkerHandler<Env, Ctx>) => Promise<Response>} handle
 * One request through the rules: `wrap(handler)(request, env, ctx)`.
 */

/**
 * The Durable Object class that counts (an object of it, as a type): export it from the
 * Worker's main module and bind it (SQLite-backed) as `RATE_LIMITER`, or as the `binding`
 * given to {@link createEdge}.
 * @typedef {object} RateLimiter
 * @property {never} __DURABLE_OBJECT_BRAND As Cloudflare's `DurableObject` base class declares it (`DurableObjectNamespace<RateLimiter>`).
 */

const edge = edgeOver(glue, wasm, { library: true });

/**
 * Check `rules` and enforce them in front of the Worker's own handlers. Call it at module
 * scope: the Worker's {@link RateLimiter} objects count by the same rules. One Worker
 * enforces one rules file; calling it again with the same rules is fine.
 *
 * @throws Error naming every problem with the rules (or the Worker's `env`), or when other
 * rules are already in force.
 * @type {(options: EdgeOptions) => Edge}
 */
export const createEdge = edge.createEdge;

/**
 * The Durable Object class that counts: export it from the Worker's main module and bind
 * it (SQLite-backed) as `RATE_LIMITER`, or as the `binding` given to {@link createEdge}.
 * @type {new (ctx: unknown, env: unknown) => RateLimiter}
 */
export const RateLimiter = edge.RateLimiter;
