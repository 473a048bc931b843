// sluicegate/worker: the edge's rules, identity, headers and Durable Object counting in
// front of a Cloudflare Worker's own handler (Workers only).

/**
 * A rules file, as `worker/rules.json` is written: the parsed object, or its JSON text.
 * `createEdge` checks it and throws, naming every problem.
 */
export type RulesFile = string | { readonly rules: readonly unknown[]; readonly [section: string]: unknown };

export interface EdgeOptions {
  /** The rules to enforce. */
  rules: RulesFile;
  /**
   * The name in `env` of the Durable Object binding whose class is {@link RateLimiter}
   * (default `"RATE_LIMITER"`).
   */
  binding?: string;
}

/** A Worker's `fetch`: what an admitted request is handed to. */
export type WorkerHandler<Env = unknown, Ctx = unknown> = (request: Request, env: Env, ctx: Ctx) => Response | Promise<Response>;

/** The rules, ready to run in front of handlers. */
export interface Edge {
  /**
   * A Worker `fetch` that runs the rules, then hands an admitted request to `handler`
   * (whose response gets the rate-limit headers); a refused request gets the edge's
   * answer (a 429 with `Retry-After`, or a 503 from a rule that fails closed).
   */
  wrap<Env, Ctx>(handler: WorkerHandler<Env, Ctx>): (request: Request, env: Env, ctx: Ctx) => Promise<Response>;
  /** One request through the rules: `wrap(handler)(request, env, ctx)`. */
  handle<Env, Ctx>(request: Request, env: Env, ctx: Ctx, handler: WorkerHandler<Env, Ctx>): Promise<Response>;
}

/**
 * Check `rules` and enforce them in front of the Worker's own handlers. Call it at module
 * scope: the Worker's {@link RateLimiter} objects count by the same rules. One Worker
 * enforces one rules file; calling it again with the same rules is fine.
 *
 * @throws Error naming every problem with the rules (or the Worker's `env`), or when other
 * rules are already in force.
 */
export function createEdge(options: EdgeOptions): Edge;

/**
 * The Durable Object class that counts: export it from the Worker's main module and bind
 * it (SQLite-backed) as `RATE_LIMITER`, or as the `binding` given to {@link createEdge}.
 */
export declare class RateLimiter {
  constructor(ctx: unknown, env: unknown);
  /** As Cloudflare's `DurableObject` base class declares it (`DurableObjectNamespace<RateLimiter>`). */
  readonly __DURABLE_OBJECT_BRAND: never;
}
