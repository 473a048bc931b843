// Compiled with `tsc --noEmit` by the test suite: the package as a Node-only TypeScript
// project sees it (lib es2023 and @types/node, no DOM). Every entry's declarations must
// compile without the DOM library, with skipLibCheck off.
import { readFileSync } from "node:fs";
import init, { LocationCache, Pacer, fetchForecasts, openMeteoWeight, runBatch, type BatchOutcome, type Permit } from "sluicegate";
import { TokenBucket, clientIdentity, validateRules } from "sluicegate/edge";
import { SmartFlow, fileStore, parseRetryAfter, smartFetch, type SmartFlowStore } from "sluicegate/smartflow";
import { SimulationError, runSimulation, simulate, type SimReport } from "sluicegate/sim";
import { Limiter, type LimitResult } from "sluicegate/limit";
import { expressRateLimit, honoRateLimit } from "sluicegate/middleware";
import { startEdge, type EdgeLog, type StartEdgeOptions } from "sluicegate/testing";

// A synchronous storage as Node code would write one: any { getItem, setItem } fits.
const memory = new Map<string, string>();
const storage = { getItem: (key: string) => memory.get(key) ?? null, setItem: (key: string, value: string) => void memory.set(key, value) };

export async function nodeUsage(): Promise<number> {
  await init();
  await init({ module_or_path: readFileSync(new URL("../../pkg/sluicegate_bg.wasm", import.meta.url)) });
  const pacer = new Pacer({ maxInFlight: 2, persist: { key: "om", storage, locks: null } });
  const permit: Permit = await pacer.acquire(1, { signal: AbortSignal.timeout(1_000) });
  permit.release();
  // The queue API: schedule, wrap, tryAcquire, queue limits, events, onIdle.
  const paced = new Pacer({ maxQueued: 100, maxQueuedWeight: 500, slackMs: null });
  const n: number = await paced.schedule(2, async (signal?: AbortSignal) => (signal ? 1 : 2), { priority: 1 });
  const twice = paced.wrap(
    async (x: number) => x * 2,
    (x) => x,
  );
  const doubled: number = await twice(3);
  const now = paced.tryAcquire(1);
  if ("release" in now) now.release();
  const retryAfter: number = "release" in now ? 0 : now.retryAfterMs;
  paced.addEventListener("dispatch", (e) => void e.type);
  await paced.onIdle();
  if (n + doubled + retryAfter < 0) return -1;
  const cache = new LocationCache<{ ok: boolean }>({ persist: { key: "cache", storage } });
  const out = await fetchForecasts<{ ok: boolean }>(
    [{ latitude: 52.52, longitude: 13.41 }],
    { daily: ["temperature_2m_max"] },
    {
      pacer,
      cache,
      baseUrl: "http://127.0.0.1:9/v1/forecast",
    },
  );
  const batch: BatchOutcome = await runBatch([{ url: "http://127.0.0.1:9/x", weight: 1, init: { headers: { accept: "application/json" } } }], {
    pacer,
    fetch: (url, init) => fetch(url, init),
  });

  const bucket = new TokenBucket(2, 1_000, 2);
  const id = clientIdentity({ xForwardedFor: "192.0.2.1" });
  const rules = validateRules(JSON.stringify({ rules: [] }));

  const file: SmartFlowStore = fileStore("/tmp/sluicegate-orgs.json");
  const flow = new SmartFlow({ path: "/tmp/sluicegate-orgs.json", fetch: (input, init) => fetch(input, init) });
  await new SmartFlow({ path: false }).shutdown(); // no cache file (the default is ~/.meraki/.cache/rate_limit_cache.json)
  // @ts-expect-error -- a path is a file name, or false for none
  new SmartFlow({ path: true });
  const res: Response = await flow.smartFetch("http://127.0.0.1:9/api/v1/networks/N_1/clients", { method: "GET" });
  const shared: Response = await smartFetch(new URL("http://127.0.0.1:9/api/v1/organizations"), { smartFlow: flow });
  const retry: number | null = parseRetryAfter(res.headers.get("retry-after"));
  await flow.shutdown();

  let report: SimReport | null = null;
  try {
    report = simulate({ clients: [{ name: "app", rps: 2 }], policies: [{ algorithm: "gcra", rate: 1 }] });
  } catch (e) {
    if (e instanceof SimulationError) return e.exitCode;
  }
  const run = runSimulation(JSON.stringify({ clients: [] }), "t,client\n0,a\n", { traceName: "trace.csv" });
  return (
    openMeteoWeight({ locations: 1, days: 1, variables: 1 }) +
    out.stats.fetches +
    batch.stats.fetches +
    ((d) => (d.allowed ? d.resetMs : d.retryAfterMs))(bucket.decide(0, 1)) +
    bucket.check(0, 1) +
    limited() +
    (id ? 1 : 0) +
    rules.length +
    (file ? 1 : 0) +
    shared.status +
    (retry ?? 0) +
    (report?.requests ?? 0) +
    run.exitCode
  );
}

/** The keyed limiter and the middlewares, as a Node server uses them. */
function limited(): number {
  const limiter = new Limiter({ algorithm: "sliding_log", limit: 20, windowMs: 10_000, blockMs: 10_000, maxKeys: 10_000 });
  const r: Readonly<LimitResult> = limiter.limit("203.0.113.7", { cost: 1 });
  const kept: LimitResult = { ...r };
  const headers: Record<string, string> = limiter.headers("api");
  const express = expressRateLimit({ limiter, key: (req) => req.ip, name: "api" });
  const hono = honoRateLimit({ algorithm: "token_bucket", limit: 5, windowMs: 1_000, burst: 2 });
  void express;
  void hono;
  return (
    (kept.success ? kept.remaining : kept.retryAfter) +
    kept.reset +
    limiter.peek("x").remaining +
    Object.keys(headers).length +
    (limiter.block("x", 1_000) ? 1 : 0) +
    limiter.sweep() +
    (limiter.reset("x") ? 1 : 0)
  );
}

// sluicegate/testing: a typed harness, its optional peers (miniflare, esbuild) not needed to compile.
export async function testingUsage(): Promise<number> {
  const options: StartEdgeOptions = { rules: { rules: [] }, origin: "http://127.0.0.1:9000", build: "deploy", vars: { A: "b" } };
  const edge = await startEdge(options);
  const res: Response = await edge.fetch("/api/ping", { headers: { "cf-connecting-ip": "198.51.100.7" }, cf: { colo: "AMS" } });
  const line: EdgeLog = await edge.waitForLog(/decision/, { timeout: 1_000 });
  const lines: string[] = edge.logLines();
  await edge.close();
  // @ts-expect-error -- a build is "dev" or "deploy"
  await startEdge({ build: "staging" });
  return res.status + line.timestamp + lines.length + edge.url.length;
}
