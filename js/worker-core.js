// The edge over a built Worker module (`glue`, its wasm compiled by the bundler): the
// Durable Object class that counts, and requests through the rules, admitted ones to a
// handler. The standalone Worker (worker/edge.mjs) and sluicegate/worker both use it.
import { DurableObject, env as workerEnv } from "cloudflare:workers";

/**
 * `{ RateLimiter, through, createEdge }` over `glue`. `adaptEnv` may change what the rules
 * see of `env` (the development build injects faults with it). With `library`, the rules
 * are the ones given to `createEdge`, which the Worker must call at module scope (where its
 * Durable Objects run too), else they come from `env` (the standalone Worker).
 */
export function edgeOver(glue, wasm, { adaptEnv = (env) => env, library = false } = {}) {
  glue.initSync({ module: wasm });
  let created = false;

  /** Exact counting for the counting keys routed to this object (one per key). */
  class RateLimiter extends DurableObject {
    constructor(ctx, env) {
      if (library && !created) {
        throw new Error(
          "sluicegate: RateLimiter counts by the rules given to createEdge({ rules }): call createEdge at the Worker's module scope",
        );
      }
      super(ctx, env);
      this.counter = new glue.Counter(env, ctx.storage);
    }

    /** RPC from the Worker: `[allowed (1|0), remaining, wait_ms]`. */
    check(rule, key) {
      return this.counter.check(rule, key);
    }

    /** RPC from the Worker: a lease on a slot of fleet budget `upstream`, or 0 (busy). */
    acquireSlot(upstream) {
      return this.counter.acquireSlot(upstream);
    }

    /** RPC: keep `lease` for another lease length; false when it already ended. */
    renewSlot(upstream, lease) {
      return this.counter.renewSlot(upstream, lease);
    }

    /** RPC from the Worker: charge `tenant` one request of `bytes`; 0 admits, else ms to wait. */
    chargeTenant(tenant, limit, generation, bytes) {
      return this.counter.chargeTenant(tenant, limit, generation, bytes);
    }

    /** RPC (the overrides object): every runtime override, as stored JSON. */
    getOverrides() {
      return this.counter.getOverrides();
    }

    /** RPC (the overrides object): set `tenant`'s override; the replaced one's JSON or "". */
    putOverride(tenant, limit, at) {
      return this.counter.putOverride(tenant, limit, at);
    }

    /** RPC (the overrides object): remove `tenant`'s override; its JSON or "". */
    deleteOverride(tenant) {
      return this.counter.deleteOverride(tenant);
    }

    /** RPC: give `lease` back. */
    releaseSlot(upstream, lease) {
      return this.counter.releaseSlot(upstream, lease);
    }
  }

  /**
   * A Worker `fetch` that runs the rules, then sends an admitted request to
   * `handler(request, env, ctx)`; without a handler, to ORIGIN_URL.
   */
  function through(handler) {
    if (handler === undefined) {
      return (request, env, ctx) => glue.handle(request, adaptEnv(env), ctx);
    }
    return (request, env, ctx) => glue.handle(request, adaptEnv(env), ctx, (admitted) => handler(admitted, env, ctx));
  }

  /** The rules given here (at module scope), in front of the Worker's own handlers. */
  function createEdge(options) {
    const { rules, binding = "RATE_LIMITER" } = options ?? {};
    if (typeof binding !== "string") throw new TypeError("sluicegate: createEdge: binding must be a string");
    glue.configure(rules, binding, workerEnv ?? {});
    created = true;
    return {
      handle(request, env, ctx, handler) {
        if (typeof handler !== "function") throw new TypeError("sluicegate: edge.handle needs a handler function");
        return through(handler)(request, env, ctx);
      },
      wrap(handler) {
        if (typeof handler !== "function") throw new TypeError("sluicegate: edge.wrap needs a handler function");
        return through(handler);
      },
    };
  }

  return { RateLimiter, through, createEdge };
}
