// sluicegate/hono: the edge's rules as Hono middleware, in a Hono app on Cloudflare Workers.
import type { MiddlewareHandler } from "hono";
import type { EdgeOptions } from "./worker.js";

export { RateLimiter, type EdgeOptions, type RulesFile } from "./worker.js";

/**
 * Middleware that runs the rules on every request it sees: a refused one gets the edge's
 * answer (a 429 with `Retry-After`) and never reaches the app; an admitted one goes on, and
 * the app's response gets the rate-limit headers. Call it at module scope.
 *
 * @throws Error naming every problem with the rules.
 */
export function rateLimit(options: EdgeOptions): MiddlewareHandler;
