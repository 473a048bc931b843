// sluicegate/hono: the edge's rules as Hono middleware, in a Hono app on Cloudflare Workers.
/** @import { MiddlewareHandler } from "hono" */
/**
 * @typedef {import("./worker.js").EdgeOptions} EdgeOptions
 * @typedef {import("./worker.js").RulesFile} RulesFile
 */
import { createEdge, RateLimiter } from "./worker.js";

export { RateLimiter };

/**
 * Middleware that runs the rules on every request it sees: a refused one gets the edge's
 * answer (a 429 with `Retry-After`) and never reaches the app; an admitted one goes on, and
 * the app's response gets the rate-limit headers. Call it at module scope.
 *
 * @throws Error naming every problem with the rules.
 * @param {EdgeOptions} options
 * @returns {MiddlewareHandler}
 */
export function rateLimit(options) {
  const edge = createEdge(options);
  return async function rateLimit(c, next) {
    let ctx;
    try {
      ctx = c.executionCtx;
    } catch {
      // Hono throws when the runtime gave no execution context.
    }
    const response = await edge.handle(c.req.raw, c.env, ctx, async (request) => {
      // A body the edge meters as it streams (one of no declared length) is read from here.
      if (request !== c.req.raw) c.req.raw = request;
      await next();
      return c.res;
    });
    // The edge's answer is the whole response (it carries the app's headers when the app
    // answered): replace, rather than merge into, what the app set.
    c.res = undefined;
    c.res = response;
    return response;
  };
}
