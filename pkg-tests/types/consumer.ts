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

interface Daily {
  daily: { time: string[]; temperature_2m_max: number[] };
}

export async function main(): Promise<number> {
  await init();
  const w: number = openMeteoWeight({ locations: 1_500, days: 16, variables: 2 });
  const server: number = openMeteoWeight({ locations: 1, days: 7, variables: 6, models: 2, mode: "server" });
  const kind: RateLimitKind | null = classifyRateLimit(429, '{"error":true,"reason":"Hourly…"}');

  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 550 }], maxInFlight: 4, persist: "om" });
  const permit: Permit = await pacer.acquire(54.9, { signal: AbortSignal.timeout(10_000) });
  permit.release();
  const state: PacerState = pacer.snapshot();
  await pacer.setLimits({ maxInFlight: 3 });

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
  const d: LimitDecision = new TokenBucket(2, 1_000, 2).check(0, 1);
  const retry: number = d.allowed ? d.resetMs : d.retryAfterMs;
  const n: number = chooseLocationsPerCall({ weightOf: (x) => x * 1.14, budget: 550, max: 100 });
  validateRules("{}").forEach((rule) => rule.policy.toUpperCase());
  return w + server + (kind ? 1 : 0) + state.queued + (first?.daily.time.length ?? 0) + batch.stats.fetches + (id ? 1 : 0) + retry + n;
}
