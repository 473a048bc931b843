// What both Worker entries share: load the Rust module, check the configuration at start
// (a bad one throws here, so workerd refuses to start the Worker and a deploy fails), and
// hand every call to the module. The same code as sluicegate/worker, with ORIGIN_URL where
// admitted requests go.
import { env } from "cloudflare:workers";
import { edgeOver } from "../js/worker-core.js";

/**
 * The Worker's default export and Durable Object class over a built `glue` module.
 * `adaptEnv` and `adaptRequest` may change what the Worker's requests see of `env` and of
 * themselves (the development build injects faults with them).
 */
export function edge(glue, wasm, adaptEnv, adaptRequest) {
  const { RateLimiter, through, setUp } = edgeOver(glue, wasm, { adaptEnv, adaptRequest });
  setUp(() => glue.start(env));
  return { worker: { fetch: through() }, RateLimiter };
}
