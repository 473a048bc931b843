// What both Worker entries share: load the Rust module, check the configuration at start
// (a bad one throws here, so workerd refuses to start the Worker and a deploy fails), and
// hand every call to the module.
import { DurableObject, env } from "cloudflare:workers";

/**
 * The Worker's default export and Durable Object class over a built `glue` module.
 * `adaptEnv` may change what the Worker's requests see of `env` (the development build
 * injects faults with it).
 */
export function edge(glue, wasm, adaptEnv = (env) => env) {
  glue.initSync({ module: wasm });
  glue.start(env);

  /** Exact counting for the counting keys routed to this object (one per key). */
  class RateLimiter extends DurableObject {
    constructor(ctx, env) {
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

  return {
    worker: {
      fetch(request, env, ctx) {
        return glue.handle(request, adaptEnv(env), ctx);
      },
    },
    RateLimiter,
  };
}
