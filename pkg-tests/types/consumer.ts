// Compiled with `tsc --noEmit` by the test suite: the package's public surface as a
// TypeScript user sees it. A wrong or missing declaration fails the build.
import init, {
  LocationCache,
  Pacer,
  PacerCore,
  chooseLocationsPerCall,
  classifyRateLimit,
  fetchForecasts,
  openMeteoWeight,
  runBatch,
  type BatchOutcome,
  type ForecastOutcome,
  type PacerReservation,
  type PacerState,
  type Permit,
  type RateLimitKind,
} from "sluicegate";
import { TokenBucket, clientIdentity, validateRules, type ClientIdentity, type LimitDecision } from "sluicegate/edge";
import wasmUrl from "sluicegate/wasm";

interface Daily {
  daily: { time: string[]; temperature_2m_max: number[] };
}

export async function main(): Promise<number> {
  await init();
  await init({ module_or_path: new URL(wasmUrl, import.meta.url) }); // a bundler's file loader (esbuild)
  const w: number = openMeteoWeight({ locations: 1_500, days: 16, variables: 2 });
  const server: number = openMeteoWeight({ locations: 1, days: 7, variables: 6, models: 2, mode: "server" });
  const kind: RateLimitKind | null = classifyRateLimit(429, '{"error":true,"reason":"Hourly…"}');

  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 550 }], maxInFlight: 4, persist: "om" });
  const permit: Permit = await pacer.acquire(54.9, { signal: AbortSignal.timeout(10_000) });
  permit.release();
  const state: PacerState = pacer.snapshot();
  await pacer.setLimits({ maxInFlight: 3 });
  // The browser's own storage, IndexedDB and Web Locks fit the persistence options.
  const tabs = new Pacer({ persist: { key: "om", indexedDB } });
  const local = new Pacer({ persist: { key: "om", storage: localStorage, locks: navigator.locks } });
  const session = new LocationCache({ persist: { key: "cache", storage: sessionStorage } });
  await tabs.close();
  await local.close();

  const core = new PacerCore({ maxWeight: null });
  const r: PacerReservation = core.reserve(Date.now(), 1.5);
  core.cancel(r.id);

  const cache = new LocationCache<Daily>({ ttlMs: 15 * 60_000, precision: 2 });
  const key: string = cache.key(52.52, 13.41, { daily: ["temperature_2m_max"], forecast_days: 16 });
  const entry = cache.lookup(key);
  if (entry.state === "miss") entry.reject(new Error("not now"));

  const out: ForecastOutcome<Daily> = await fetchForecasts<Daily>(
    [{ latitude: 52.52, longitude: 13.41 }],
    { daily: ["temperature_2m_max"], forecast_days: 16 },
    { pacer, cache, onProgress: (p) => console.log(p.done, p.total, p.etaMs, p.cacheHits) },
  );
  const first: Daily | undefined = out.results[0];
  const batch: BatchOutcome = await runBatch([{ url: "/x", weight: 1, bestEffort: true }], { pacer });

  const id: ClientIdentity | undefined = clientIdentity({ xForwardedFor: "1.2.3.4, 5.6.7.8" });
  const d: LimitDecision = new TokenBucket(2, 1_000, 2).decide(0, 1);
  const left: number = new TokenBucket(2, 1_000, 2).check(0, 1);
  const retry: number = (d.allowed ? d.resetMs : d.retryAfterMs) + left;
  const n: number = chooseLocationsPerCall({ weightOf: (x) => x * 1.14, budget: 550, max: 100 });
  for (const rule of validateRules("{}")) rule.policy.toUpperCase();
  return session.size + w + server + (kind ? 1 : 0) + state.queued + (first?.daily.time.length ?? 0) + batch.stats.fetches + (id ? 1 : 0) + retry + n;
}

// sluicegate/smartflow: the Smart Flow limiter.
import initSmartFlow, {
  SmartFlow,
  SmartFlowBucket,
  SmartFlowCore,
  fileStore,
  formatSavedAt,
  parseRetryAfter,
  parseSavedAt,
  smartFetch,
  type SmartFlowCacheLoad,
  type SmartFlowIdKind,
  type SmartFlowLearned,
  type SmartFlowPenalty,
  type SmartFlowSnapshot,
  type SmartFlowStore,
} from "sluicegate/smartflow";

export async function smartFlowUsage(): Promise<number> {
  await initSmartFlow();
  const store: SmartFlowStore = { load: () => localStorage.getItem("k"), save: (text) => localStorage.setItem("k", text) };
  const flow = new SmartFlow({
    orgRate: 9,
    cacheTtlSeconds: null,
    storage: store,
    resolver: async (kind: SmartFlowIdKind, id: string) => (kind === "network" ? `O_for_${id}` : null),
    hydrator: async (orgId, f) => f.registerNetwork("N_1", orgId),
    onError: (error, context) => console.warn(context, error),
  });
  await flow.ready;
  const waited: number = await flow.acquire("/networks/N_1/clients", { signal: AbortSignal.timeout(5_000) });
  const penalty: SmartFlowPenalty = flow.onRateLimited("/networks/N_1/clients", "Wed, 21 Oct 2026 07:28:00 GMT");
  flow.onSuccess("/organizations/O_1/networks");
  const learned: SmartFlowLearned = flow.learnFromResponse("/networks/N_2", { organizationId: "O_1" });
  flow.registerOrg("O_1");
  flow.registerDevice("Q2XX-XXXX-XXXX", "O_1");
  const org: string | undefined = flow.resolveOrg("/devices/Q2XX-XXXX-XXXX/lldpCdp");
  const snap: SmartFlowSnapshot = flow.snapshot();
  const response: Response = await flow.smartFetch("https://api.meraki.com/api/v1/organizations/O_1/networks");
  const shared: Response = await smartFetch(new URL("https://api.meraki.com/api/v1/networks/N_1"), { smartFlow: flow });
  const saved: boolean = await flow.flush();
  await flow.shutdown();
  const fromFile = new SmartFlow({ path: "/tmp/rate_limit_cache.json" });
  const file: SmartFlowStore = fileStore("/tmp/other.json");
  const retry: number | null = parseRetryAfter(response.headers.get("retry-after"));

  const core = new SmartFlowCore({ orgRate: 10, orgCapacity: 10, globalRate: 100 });
  const wait: number = core.acquireAsync("/networks/N_9/clients", performance.now() / 1000);
  const lookup = core.takeLookup();
  if (lookup) core.finishLookup(lookup.kind, lookup.id, null);
  const loaded: SmartFlowCacheLoad = core.loadCache(core.saveCache(Date.now() / 1000), Date.now() / 1000);
  const bucket = new SmartFlowBucket(10, 10, -5, 0);
  const epoch: number | undefined = parseSavedAt(formatSavedAt(0));
  return (
    waited +
    penalty.length +
    learned.networks +
    (org?.length ?? 0) +
    snap.dirty +
    shared.status +
    (saved ? 1 : 0) +
    fromFile.globalRate +
    (file ? 1 : 0) +
    (retry ?? 0) +
    wait +
    (loaded.state === "loaded" ? loaded.networks : 0) +
    bucket.acquire(1) +
    (epoch ?? 0)
  );
}

// sluicegate/sim: the policy simulator.
import initSim, {
  SimulationError,
  checkConfig,
  compareSimulations,
  runSimulation,
  selfTest,
  simulate,
  type SimBlockedClient,
  type SimClientRow,
  type SimConfig,
  type SimEdgeRules,
  type SimFinding,
  type SimPolicyRow,
  type SimReport,
  type SimRunText,
  type SimSeverity,
  type SimTimeline,
  type SimulationRun,
  type SimComparison,
  type SimulationComparison,
} from "sluicegate/sim";

export async function simUsage(): Promise<number> {
  await initSim();
  const config: SimConfig = {
    service: "Orders API",
    duration_s: 60,
    capacity_rps: 80,
    seed: 7,
    policies: [{ name: "per-key", algorithm: "token_bucket", key: "client", rate: 5, burst: 20, endpoints: ["/v2/"] }],
    clients: [{ name: "app", kind: "legit", pattern: "poisson", rps: 6, retry: "honor" }],
    edge_rules: { rules: [] },
  };
  const report: SimReport = simulate(config);
  const fromText: SimReport = simulate(JSON.stringify(config), "t,client\n0.5,app\n", { traceName: "trace.csv" });
  const run: SimulationRun = runSimulation(config);
  const pair: SimulationComparison = compareSimulations(config, { ...config, service: "tuned" }, undefined, { afterName: "tuned.json" });
  const comparison: SimComparison = pair.comparison;
  const verdict: "ship" | "ship with changes" | "do not ship" = comparison.verdict;
  const delayedAfter: number = comparison.clients[0]?.after?.delayed ?? 0;
  const reviewText: string = pair.review + verdict + delayedAfter + pair.before.reportJson;
  const markdown: string = run.markdown ?? run.markdownError?.message ?? "";
  const exit: 0 | 1 = run.exitCode;
  const timeline: SimTimeline = run.timeline;
  const admitted: number = timeline.clients.reduce((n, c) => n + c.admitted.reduce((a, b) => a + b, 0), 0);
  const cap: number | null = timeline.capacity_rps ?? report.capacity_rps;
  const top: SimClientRow | undefined = report.clients[0];
  const first: number | null = top?.first_reject_s ?? null;
  const highs: SimFinding[] = report.findings.filter((f) => f.severity === "high");
  const severity: SimSeverity | undefined = highs[0]?.severity;
  const retryAfter: number = report.sample_429?.retry_after ?? 0;
  let code: 1 | 2 = 2;
  try {
    checkConfig({ policies: [{ algorithm: "leaky" }] });
  } catch (e) {
    if (e instanceof SimulationError) code = e.exitCode;
  }
  const rules: SimEdgeRules = {
    rules: [
      {
        id: "api",
        match: { path: { starts_with: "/api/" } },
        characteristics: ["ip.src", "cf.colo.id"],
        period: 10,
        requests_per_period: 20,
        mitigation_timeout: 10,
      },
    ],
  };
  const edge: SimReport = simulate({
    policies: [{ name: "export pacer", algorithm: "smartflow", rate: 1.5, burst: 5, clients: ["job"] }],
    clients: [{ name: "job", kind: "legit", pattern: "burst", burst: 30, every_s: 30, endpoint: "/api/export" }],
    edge_rules: rules,
  });
  const fromFile: SimConfig = { edge_rules: "../worker/rules.json" }; // the command line reads the path
  const paced: number = edge.clients.reduce((n, c) => n + (c.paced ?? 0) + (c.mean_pace_s ?? 0) + (c.max_pace_s ?? 0), 0);
  const pacers: string[] = edge.clients.map((c) => c.pacer ?? "").filter((p) => p !== "");
  const blocker: SimPolicyRow | undefined = edge.policies.find((p) => p.blocks !== undefined);
  const blocked: SimBlockedClient[] = blocker?.blocked_clients ?? [];
  const held: number = (edge.policies.find((p) => p.algorithm === "smartflow")?.delayed ?? 0) + (blocker?.mitigation_timeout_s ?? 0);
  const raw: Pick<SimRunText, "report"> = { report: run.reportJson };
  const self: { output: string; ok: boolean } = selfTest();
  return (
    fromText.requests +
    markdown.length +
    exit +
    admitted +
    (cap ?? 0) +
    (first ?? 0) +
    (severity ? 1 : 0) +
    retryAfter +
    code +
    raw.report.length +
    (self.ok ? 1 : 0) +
    run.reportJson.length +
    paced +
    pacers.length +
    reviewText.length +
    blocked.reduce((n, b) => n + b.blocks + b.client.length, 0) +
    held +
    (typeof fromFile.edge_rules === "string" ? 1 : 0)
  );
}
