// runBatch with a scripted upstream: best-effort calls, concurrency refusals, failures, and
// the caller's own abort. (The Open-Meteo mock runs the real semantics in forecasts.test.mjs.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { Pacer, runBatch } from "sluicegate";

const CONCURRENT = '{"error":true,"reason":"Too many concurrent requests"}';
const HOURLY = '{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}';
const roomy = () => new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 4 });

/** A fetch answering each URL from `script` (a function of the URL and how often it was asked). */
function upstream(script) {
  const seen = [];
  const fetch = async (url, { signal } = {}) => {
    const n = seen.filter((u) => u === url).length;
    seen.push(url);
    await new Promise((r) => setTimeout(r, 5));
    if (signal?.aborted) throw signal.reason;
    const [status, body] = script(url, n);
    return new Response(body, { status, headers: { "content-type": "application/json" } });
  };
  return { fetch, seen };
}

test("a best-effort call's 429 skips the remaining best-effort calls; required calls carry on", async () => {
  const { fetch, seen } = upstream((url) => (url === "/aqi/1" ? [429, HOURLY] : [200, JSON.stringify({ url })]));
  const calls = [
    { url: "/req/0", weight: 1 },
    { url: "/aqi/1", weight: 1, bestEffort: true },
    { url: "/req/2", weight: 1 },
    { url: "/aqi/3", weight: 1, bestEffort: true },
    { url: "/aqi/4", weight: 1, bestEffort: true },
  ];
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 1 });
  const out = await runBatch(calls, { pacer, fetch });
  assert.equal(out.state, "done");
  assert.deepEqual(out.results, [{ url: "/req/0" }, null, { url: "/req/2" }, null, null]);
  assert.ok(!seen.includes("/aqi/3") && !seen.includes("/aqi/4"), `no best-effort call after the 429: ${seen}`);
});

test("a concurrency 429 lowers the in-flight cap by one and retries the call", async () => {
  const { fetch, seen } = upstream((url, n) => (url === "/c/2" && n === 0 ? [429, CONCURRENT] : [200, "{}"]));
  const pacer = roomy();
  const out = await runBatch(
    Array.from({ length: 6 }, (_, i) => ({ url: `/c/${i}`, weight: 1 })),
    { pacer, fetch },
  );
  assert.equal(out.state, "done");
  assert.equal(pacer.snapshot().maxInFlight, 3);
  assert.equal(seen.filter((u) => u === "/c/2").length, 2);
  assert.equal(out.stats.rateLimited, 1);
});

test("a 2xx that is not JSON ends the batch for a required call and is null for a best-effort one", async () => {
  const { fetch, seen } = upstream((url) => (url.startsWith("/html/") ? [200, "<html>captive portal</html>"] : [200, JSON.stringify({ url })]));
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 1 });
  const calls = [
    { url: "/ok/0", weight: 1 },
    { url: "/html/1", weight: 1, bestEffort: true },
    { url: "/ok/2", weight: 1, bestEffort: true },
    { url: "/html/3", weight: 1 },
    { url: "/ok/4", weight: 1 },
  ];
  const out = await runBatch(calls, { pacer, fetch });
  assert.equal(out.state, "aborted");
  assert.deepEqual(out.abort, { reason: "the upstream answered something other than JSON", kind: null, status: 200, retryAtMs: null });
  // one unreadable best-effort answer is that call's null only: the next best-effort call still went out
  assert.deepEqual(out.results, [{ url: "/ok/0" }, null, { url: "/ok/2" }, undefined, undefined]);
  assert.deepEqual(seen, ["/ok/0", "/html/1", "/ok/2", "/html/3"]);
});

test("chooseLocationsPerCall packs the budget, never past the API's 1,000 locations, and names a bad option", async () => {
  const { chooseLocationsPerCall } = await import("sluicegate");
  const sixteenDays = (n) => n * (16 / 14);
  assert.equal(chooseLocationsPerCall({ weightOf: sixteenDays, budget: 550, max: 50 }), 48);
  assert.equal(chooseLocationsPerCall({ weightOf: (n) => n, budget: 5_000, max: 4_000 }), 1_000);
  assert.equal(chooseLocationsPerCall({ weightOf: (n) => n * 1_000, budget: 550, max: 10 }), 1, "nothing fits: one per call");
  assert.throws(() => chooseLocationsPerCall({ weightOf: 3, budget: 550, max: 10 }), /weightOf must be a function/);
  assert.throws(() => chooseLocationsPerCall({ weightOf: sixteenDays, budget: 0, max: 10 }), /budget must be a finite number above 0/);
  assert.throws(() => chooseLocationsPerCall({ weightOf: sixteenDays, budget: 550, max: 2.5 }), /max must be a whole number ≥ 1, got 2.5/);
  assert.throws(
    () =>
      chooseLocationsPerCall({
        weightOf: () => {
          throw new RangeError("no such model");
        },
        budget: 550,
        max: 10,
      }),
    /no such model/,
  );
});

test("a failed required call ends the batch: nothing more is fetched and every call is settled", async () => {
  const { fetch, seen } = upstream((url) => (url === "/f/1" ? [500, "oops"] : [200, "{}"]));
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 1 });
  const out = await runBatch(
    Array.from({ length: 8 }, (_, i) => ({ url: `/f/${i}`, weight: 1 })),
    { pacer, fetch },
  );
  assert.equal(out.state, "aborted");
  assert.equal(out.abort.status, 500);
  assert.deepEqual(seen, ["/f/0", "/f/1"]);
  assert.equal(out.results.length, 8);
  assert.deepEqual(out.results.slice(2), [undefined, undefined, undefined, undefined, undefined, undefined]);
  assert.equal(pacer.snapshot().queued, 0, "queued calls were refunded");
});

test("the caller's signal aborts the batch, and no fetch is issued afterwards", async () => {
  const { fetch, seen } = upstream(() => [200, "{}"]);
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 3 }] });
  const controller = new AbortController();
  const running = runBatch(
    Array.from({ length: 6 }, (_, i) => ({ url: `/s/${i}`, weight: 1 })),
    { pacer, fetch, signal: controller.signal },
  );
  await new Promise((r) => setTimeout(r, 100));
  controller.abort(new Error("user left"));
  const out = await running;
  assert.equal(out.state, "aborted");
  assert.equal(seen.length, 3, "only the budget's three went out");
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(seen.length, 3);
  assert.equal(pacer.snapshot().queued, 0);
});

test("progress reports done/total, weight spent and an ETA while waiting for budget", async () => {
  const { fetch } = upstream(() => [200, "{}"]);
  const pacer = new Pacer({ windows: [{ lengthMs: 300, budget: 2 }] });
  const events = [];
  await runBatch(
    Array.from({ length: 4 }, (_, i) => ({ url: `/p/${i}`, weight: 1 })),
    { pacer, fetch, onProgress: (p) => events.push(p) },
  );
  assert.equal(events.at(-1).done, 4);
  assert.equal(events.at(-1).total, 4);
  assert.equal(events.at(-1).weightSpent, 4);
  assert.equal(events.at(-1).state, "done");
  assert.ok(
    events.some((e) => e.etaMs > 0 && e.state === "running"),
    "an ETA while the second pair waited",
  );
});
