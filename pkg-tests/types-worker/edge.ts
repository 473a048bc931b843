// Compiled with `tsc --noEmit` by the test suite: a Worker in TypeScript with the edge in
// front of its own handler (sluicegate/worker), its Durable Object bound as
// `wrangler types` declares it.
import { RateLimiter, createEdge, type RulesFile } from "sluicegate/worker";

interface Env {
  RATE_LIMITER: DurableObjectNamespace<RateLimiter>;
  GREETING: string;
}

const rules: RulesFile = {
  rules: [{ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 20 }],
};
const edge = createEdge({ rules });
const other = createEdge({ rules: JSON.stringify(rules), binding: "RATE_LIMITER" });

async function app(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  ctx.waitUntil(Promise.resolve());
  return new Response(`${env.GREETING} ${new URL(request.url).pathname}`);
}

export default {
  fetch: edge.wrap(app),
} satisfies ExportedHandler<Env>;

export const direct: ExportedHandlerFetchHandler<Env> = (request, env, ctx) => other.handle(request, env, ctx, () => Response.json({ ok: true }));

export { RateLimiter };
