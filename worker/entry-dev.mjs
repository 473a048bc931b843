// The development Worker (`npm start`, the tests): without ORIGIN_URL it serves the
// built-in development origin (the www/ pages, GET /api/ping and the Open-Meteo mock).
import wasm from "./pkg-dev/sluicegate_worker_bg.wasm";
import * as glue from "./pkg-dev/sluicegate_worker.js";
import { edge } from "./edge.mjs";

/**
 * Faults for tests (`SLUICEGATE_FAULTS`, set by startEdge's `faults`):
 * - `{"store": "unavailable"}`: every Durable Object call fails (rules', tenants', the
 *   tenant overrides object's, egress permits');
 * - `{"store": "slow"}`: every rule's Durable Object call answers after 5 s;
 * - `{"store": "fleet-tenants"}`: only the fleet-wide tenant objects fail (a colo's do not);
 * - `{"lease": "leak"}`: fleet budget leases are taken but never renewed nor given back, as
 *   by an isolate that died holding them;
 * - `{"client": "leaves"}`: a request with `Sluicegate-Test-Leave-After-Ms: N` has its
 *   client go away N ms after it arrives: its `signal` aborts, as Cloudflare's front end
 *   reports a client that closed its connection (local workerd only notices that when it
 *   next writes to the client, so before the response it never does).
 */
const unavailable = () => Promise.reject(new Error("the store is unavailable (injected fault)"));

function withFaults(env) {
  if (!env.SLUICEGATE_FAULTS) return env;
  const { store, lease } = JSON.parse(env.SLUICEGATE_FAULTS);
  const namespace = env.RATE_LIMITER;
  const names = new WeakMap();
  const faulty = {
    idFromName(name) {
      const id = namespace.idFromName(name);
      names.set(id, name);
      return id;
    },
    get: (id) => {
      const stub = namespace.get(id);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the unit separator is how the edge names a tenant's object
      const fleetTenant = /^tenant\u001f[^\u001f]*$/.test(names.get(id) ?? "");
      return {
        check(rule, key, atMs) {
          if (store === "unavailable") return Promise.reject(new Error("the store is unavailable (injected fault)"));
          if (store === "slow") return new Promise((resolve) => setTimeout(resolve, 5_000)).then(() => stub.check(rule, key, atMs));
          return stub.check(rule, key, atMs);
        },
        chargeTenant(tenant, limit, generation, bytes, requests, atMs) {
          if (store === "unavailable" || (store === "fleet-tenants" && fleetTenant)) {
            return Promise.reject(new Error("the store is unavailable (injected fault)"));
          }
          return stub.chargeTenant(tenant, limit, generation, bytes, requests, atMs);
        },
        acquireSlot: (upstream) => stub.acquireSlot(upstream),
        getOverrides: () => (store === "unavailable" ? unavailable() : stub.getOverrides()),
        putOverride: (tenant, limit, at) => (store === "unavailable" ? unavailable() : stub.putOverride(tenant, limit, at)),
        deleteOverride: (tenant) => (store === "unavailable" ? unavailable() : stub.deleteOverride(tenant)),
        getRuleOverrides: () => (store === "unavailable" ? unavailable() : stub.getRuleOverrides()),
        setRuleOverride: (rule, enforce, at) => (store === "unavailable" ? unavailable() : stub.setRuleOverride(rule, enforce, at)),
        mergeStats: (batch, nowMs) => (store === "unavailable" ? unavailable() : stub.mergeStats(batch, nowMs)),
        getStats: (sinceMs, untilMs, name) => (store === "unavailable" ? unavailable() : stub.getStats(sinceMs, untilMs, name)),
        renewSlot: (upstream, id) => (lease === "leak" ? Promise.resolve(true) : stub.renewSlot(upstream, id)),
        releaseSlot: (upstream, id) => (lease === "leak" ? Promise.resolve() : stub.releaseSlot(upstream, id)),
        acquirePermit(provider, weight, avoid, waitMs) {
          if (store === "unavailable") return Promise.reject(new Error("the store is unavailable (injected fault)"));
          return stub.acquirePermit(provider, weight, avoid, waitMs);
        },
        renewPermit: (provider, id) => (lease === "leak" ? Promise.resolve(true) : stub.renewPermit(provider, id)),
        releasePermit: (provider, id, failed) => (lease === "leak" ? Promise.resolve(true) : stub.releasePermit(provider, id, failed)),
      };
    },
  };
  return Object.create(env, { RATE_LIMITER: { value: faulty } });
}

function leavingClient(request, env) {
  if (!env.SLUICEGATE_FAULTS) return request;
  const header = request.headers.get("sluicegate-test-leave-after-ms");
  const after = Number(header);
  if (JSON.parse(env.SLUICEGATE_FAULTS).client !== "leaves" || header === null || !(after >= 0)) return request;
  const left = new AbortController();
  setTimeout(() => left.abort(new Error("the client went away (injected fault)")), after);
  return new Request(request, { signal: left.signal });
}

const { worker, RateLimiter } = edge(glue, wasm, withFaults, leavingClient);
export default worker;
export { RateLimiter };
