// The edge over a built Worker module (`glue`, its wasm compiled by the bundler): the
// Durable Object class that counts, and requests through the rules, admitted ones to a
// handler. The standalone Worker (worker/edge.mjs) and sluicegate/worker both use it.
/** @import { Edge, EdgeOptions, RateLimiter as DurableObjectBranded, WorkerHandler } from "./worker.js" */
// @ts-expect-error -- workerd's own module: its types (@cloudflare/workers-types) declare the Workers' globals, which clash with the DOM library this is checked against
import { DurableObject, env as workerEnv } from "cloudflare:workers";
import { DASHBOARD } from "./dashboard-assets.js";

/**
 * `{ RateLimiter, through, createEdge, setUp }` over `glue`. `adaptEnv` and `adaptRequest` may
 * change what the rules see of `env` and of each request (the development build injects
 * faults with them). With `library`, the rules
 * are the ones given to `createEdge`, which the Worker must call at module scope (where its
 * Durable Objects run too), else they come from `env` (the standalone Worker).
 * @internal
 * @param {typeof import("../worker/pkg/sluicegate_worker.js")} glue
 * @param {WebAssembly.Module} wasm
 * @param {{ adaptEnv?: (env: any) => any; adaptRequest?: (request: Request, env: any) => Request; library?: boolean }} [options]
 */
export function edgeOver(glue, wasm, { adaptEnv = (env) => env, adaptRequest = (request) => request, library = false } = {}) {
  glue.initSync({ module: wasm });
  let created = false;
  // A panic (a bug) replaces the module's instance: `generation` counts them; the set-up
  // calls made at module scope are made again on the new instance; the requests in flight
  // on the old one are answered 503.
  let generation = 0;
  const setUps = [];
  const inFlight = new Set();
  glue.onPanic(() => {
    generation += 1;
    // Make the new instance now, inside the panic: from here on, a callback of the old
    // instance (a pending await, a stream's check) refuses to run instead of running
    // against the new instance's memory.
    glue.renew();
    for (const setUp of setUps) setUp();
    // After the new instance is made: their answer comes from it.
    for (const fail of [...inFlight]) {
      inFlight.delete(fail);
      fail();
    }
  });

  /**
   * Run `setUp()` now and again on every new instance of the module.
   * @param {() => void} call
   */
  function setUp(call) {
    call();
    setUps.push(call);
  }

  /**
   * `handle()`'s answer, or the edge's 503 if the module panics before it comes.
   * @param {() => Response | Promise<Response>} handle
   * @returns {Promise<Response>}
   */
  function guarded(handle) {
    return new Promise((resolve, reject) => {
      // Its answer is made in this request's own context, which a Response belongs to
      // (the panic runs in another request's).
      let fail;
      new Promise((failed) => {
        fail = failed;
      })
        .then(() => resolve(glue.unavailable()))
        .catch(reject);
      inFlight.add(fail);
      new Promise((answered) => answered(handle())).finally(() => inFlight.delete(fail)).then(resolve, reject);
    });
  }

  // `DurableObject` is untyped here (see its import): typed as what RateLimiter uses of it.
  /** Exact counting for the counting keys routed to this object (one per key). */
  class RateLimiter extends /** @type {new (ctx: unknown, env: unknown) => DurableObjectBranded & { ctx: { storage: unknown }; env: unknown }} */ (DurableObject) {
    constructor(ctx, env) {
      if (library && !created) {
        throw new Error("sluicegate: RateLimiter counts by the rules given to createEdge({ rules }): call createEdge at the Worker's module scope");
      }
      super(ctx, env);
      this.generation = generation;
      this.kept = new glue.Counter(env, ctx.storage);
    }

    /** The counter, made anew (from storage) when the module panicked since it was made. */
    get counter() {
      if (this.generation !== generation) {
        this.generation = generation;
        this.kept = new glue.Counter(this.env, this.ctx.storage);
      }
      return this.kept;
    }

    /** RPC from the Worker: `[allowed (1|0), remaining, wait_ms]`. */
    check(rule, key, atMs) {
      return this.counter.check(rule, key, atMs);
    }

    /** RPC from the Worker: a lease on a slot of fleet budget `upstream`, or 0 (busy). */
    acquireSlot(upstream) {
      return this.counter.acquireSlot(upstream);
    }

    /** RPC: keep `lease` for another lease length; false when it already ended. */
    renewSlot(upstream, lease) {
      return this.counter.renewSlot(upstream, lease);
    }

    /**
     * RPC from the Worker: charge `tenant` one request of `bytes` (`requests` 1), or `bytes`
     * more of a body streaming without a declared length (`requests` 0); 0 admits, else ms to wait.
     */
    chargeTenant(tenant, limit, generation, bytes, requests, atMs) {
      return this.counter.chargeTenant(tenant, limit, generation, bytes, requests, atMs);
    }

    /** RPC (the overrides object): every runtime override, as stored JSON. */
    getOverrides() {
      return this.counter.getOverrides();
    }

    /** RPC (the overrides object): set `tenant`'s override: `{before, changed}` or `{refused}`. */
    putOverride(tenant, limit, at) {
      return this.counter.putOverride(tenant, limit, at);
    }

    /** RPC (the overrides object): remove `tenant`'s override; its JSON or "". */
    deleteOverride(tenant) {
      return this.counter.deleteOverride(tenant);
    }

    /** RPC (the overrides object): every runtime override of a rule's `enforce`, as stored JSON. */
    getRuleOverrides() {
      return this.counter.getRuleOverrides();
    }

    /** RPC (the overrides object): set `rule`'s `enforce` (JSON), or remove its override (""): `{before, changed}` or `{refused}`. */
    setRuleOverride(rule, enforce, at) {
      return this.counter.setRuleOverride(rule, enforce, at);
    }

    /** RPC (the stats object): add an isolate's batch of counted decisions (JSON) at `nowMs`. */
    mergeStats(batch, nowMs) {
      return this.counter.mergeStats(batch, nowMs);
    }

    /** RPC (the stats object): the counts from `sinceMs` to `untilMs` (of `name` alone unless ""), as JSON. */
    getStats(sinceMs, untilMs, name) {
      return this.counter.getStats(sinceMs, untilMs, name);
    }

    /** RPC from the Worker: a permit of egress `provider` (sealed with `secret` unless ""), `[permit, mirror]`, or 0 (busy). */
    acquirePermit(provider, weight, avoid, waitMs, secret) {
      return this.counter.acquirePermit(provider, weight, avoid, waitMs, secret ?? "");
    }

    /** RPC: keep egress `permit` another lease; false when it already ended. */
    renewPermit(provider, permit) {
      return this.counter.renewPermit(provider, permit);
    }

    /** RPC: give egress `permit` back (`failed`: its mirror failed); false if not held. */
    releasePermit(provider, permit, failed) {
      return this.counter.releasePermit(provider, permit, failed);
    }

    /** RPC: give back the egress permit sealed with `secret` (`failed`: its mirror failed); false if none is held. */
    releaseSealed(provider, secret, failed) {
      return this.counter.releaseSealed(provider, secret, failed);
    }

    /** RPC: give `lease` back. */
    releaseSlot(upstream, lease) {
      return this.counter.releaseSlot(upstream, lease);
    }
  }

  /**
   * A Worker `fetch` that runs the rules, then sends an admitted request to
   * `handler(request, env, ctx)`; without a handler, to ORIGIN_URL.
   * @param {WorkerHandler<any, any>} [handler]
   * @returns {(request: Request, env: any, ctx: any) => Promise<Response>}
   */
  function through(handler) {
    if (handler === undefined) {
      return (request, env, ctx) => guarded(() => glue.handle(adaptRequest(request, env), adaptEnv(env), ctx));
    }
    return (request, env, ctx) => guarded(() => glue.handle(adaptRequest(request, env), adaptEnv(env), ctx, (admitted) => handler(admitted, env, ctx)));
  }

  /**
   * The rules given here (at module scope), in front of the Worker's own handlers.
   * @param {EdgeOptions} options
   * @returns {Edge}
   */
  function createEdge(options) {
    const { rules, binding = "RATE_LIMITER" } = options ?? {};
    if (typeof binding !== "string") throw new TypeError("sluicegate: createEdge: binding must be a string");
    setUp(() => glue.configure(rules, binding, workerEnv ?? {}));
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

  // The operator's dashboard (/__sluicegate/dashboard), served from this bundle.
  setUp(() => glue.useDashboard((/** @type {string} */ name) => (Object.hasOwn(DASHBOARD, name) ? DASHBOARD[name] : undefined)));

  return { RateLimiter, through, createEdge, setUp };
}
