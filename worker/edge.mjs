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
  }

  return {
    worker: {
      fetch(request, env) {
        return glue.handle(request, adaptEnv(env));
      },
    },
    RateLimiter,
  };
}
