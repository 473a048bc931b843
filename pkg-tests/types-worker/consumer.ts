// Compiled with `tsc --noEmit` by the test suite: the package as a Cloudflare Worker written
// in TypeScript sees it (@cloudflare/workers-types, no DOM, skipLibCheck off).
import { LocationCache, Pacer, runBatch } from "sluicegate";
import { TokenBucket, clientIdentity, validateRules } from "sluicegate/edge";
import { SmartFlow, smartFetch, type SmartFlowStore } from "sluicegate/smartflow";
import { simulate } from "sluicegate/sim";
import { Limiter } from "sluicegate/limit";

interface Env {
  ORGS: KVNamespace;
}

const bucket = new TokenBucket(10, 1_000, 10);
const limiter = new Limiter({ algorithm: "sliding_window", limit: 20, windowMs: 10_000 });
const pacer = new Pacer({ maxInFlight: 2 });
const cache = new LocationCache<unknown>();

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const id = clientIdentity({ cfConnectingIp: request.headers.get("cf-connecting-ip") ?? undefined });
    const decision = bucket.decide(Date.now(), 1);
    const perClient = limiter.limit(request.headers.get("cf-connecting-ip") ?? "unknown");
    if (!perClient.success) return new Response("slow down", { status: 429, headers: limiter.headers("api") });
    if (!decision.allowed) return new Response("slow down", { status: 429, headers: { "retry-after": String(Math.ceil(decision.retryAfterMs / 1000)) } });
    const store: SmartFlowStore = { load: () => env.ORGS.get("orgs"), save: (text) => env.ORGS.put("orgs", text) };
    const flow = new SmartFlow({ storage: store, fetch: (input, init) => fetch(input, init) });
    const upstream: Response = await flow.smartFetch(new Request("https://api.meraki.com/api/v1/organizations"), { signal: request.signal });
    const again: Response = await smartFetch("https://api.meraki.com/api/v1/organizations", { smartFlow: flow });
    ctx.waitUntil(flow.flush());
    const batch = await runBatch([{ url: "https://api.example.com/x", weight: 1 }], { pacer, fetch: (url, init) => fetch(url, init) });
    const rules = validateRules(JSON.stringify({ rules: [] }));
    const report = simulate({ clients: [{ name: "app", rps: 1 }] });
    return Response.json({
      id,
      status: upstream.status + again.status,
      fetches: batch.stats.fetches,
      rules: rules.length,
      requests: report.requests,
      cached: cache.size,
    });
  },
} satisfies ExportedHandler<Env>;
