// The Worker's JS entry: load the Rust module and hand every call to it.
import { DurableObject } from "cloudflare:workers";
import wasm from "./pkg/sluicegate_worker_bg.wasm";
import { initSync, handle, Counter } from "./pkg/sluicegate_worker.js";

initSync({ module: wasm });

export default {
  fetch(request, env) {
    return handle(request, env);
  },
};

/** Exact counting for the counting keys routed to this object (one per key). */
export class RateLimiter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.counter = new Counter(env, ctx.storage);
  }

  /** RPC from the Worker: `[allowed (1|0), remaining, wait_ms]`. */
  check(rule, key) {
    return this.counter.check(rule, key);
  }
}
