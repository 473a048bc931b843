// The development Worker (`npm start`, the tests): without ORIGIN_URL it serves the
// built-in development origin (the www/ pages, GET /api/ping and the Open-Meteo mock).
import wasm from "./pkg-dev/sluicegate_worker_bg.wasm";
import * as glue from "./pkg-dev/sluicegate_worker.js";
import { edge } from "./edge.mjs";

/**
 * Faults for tests (`SLUICEGATE_FAULTS`, set by startEdge's `faults`): `{"store": "unavailable"}`
 * makes every rule's Durable Object call fail, `{"store": "slow"}` answer after 5 s.
 */
function withFaults(env) {
  if (!env.SLUICEGATE_FAULTS) return env;
  const { store } = JSON.parse(env.SLUICEGATE_FAULTS);
  if (store !== "unavailable" && store !== "slow") return env;
  const namespace = env.RATE_LIMITER;
  const failing = {
    idFromName: (name) => namespace.idFromName(name),
    get: (id) => {
      const stub = namespace.get(id);
      return {
        check: (rule, key) =>
          store === "unavailable"
            ? Promise.reject(new Error("the store is unavailable (injected fault)"))
            : new Promise((resolve) => setTimeout(resolve, 5_000)).then(() => stub.check(rule, key)),
      };
    },
  };
  return Object.create(env, { RATE_LIMITER: { value: failing } });
}

const { worker, RateLimiter } = edge(glue, wasm, withFaults);
export default worker;
export { RateLimiter };
