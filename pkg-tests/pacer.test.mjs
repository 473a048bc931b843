// Pacer from the built package, with real timers and windows compressed to fractions of a second.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Pacer } from "sluicegate";
import { maxWindowLoad, MemoryStorage } from "./support/budget.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("a burst of calls never lets any rolling window exceed its budget, nor the in-flight cap", async () => {
  const windows = [
    { lengthMs: 200, budget: 10 },
    { lengthMs: 600, budget: 24 },
  ];
  const pacer = new Pacer({ windows, maxInFlight: 3 });
  const weights = Array.from({ length: 30 }, (_, i) => 1 + ((i * 7) % 5) + (i % 3) * 0.5);
  const spends = [];
  let out = 0;
  let maxOut = 0;
  await Promise.all(
    weights.map(async (w) => {
      const permit = await pacer.acquire(w);
      spends.push([permit.dispatchedAtMs, w]);
      out++;
      maxOut = Math.max(maxOut, out);
      await sleep(5 + (permit.id % 4) * 10);
      out--;
      permit.release();
    }),
  );
  assert.equal(spends.length, 30);
  assert.ok(maxOut <= 3, `in flight ${maxOut}`);
  for (const { lengthMs, budget } of windows) {
    assert.ok(maxWindowLoad(spends, lengthMs) <= budget + 1e-9, `window ${lengthMs} ms held ${maxWindowLoad(spends, lengthMs)}`);
  }
  const total = weights.reduce((a, b) => a + b, 0);
  const snap = pacer.snapshot();
  assert.equal(snap.queued, 0);
  assert.equal(snap.inFlight, 0);
  assert.ok(total > 24, "the burst was bigger than the longest window's budget");
});

test("a call heavier than a window's budget or the per-call cap is refused at once, never queued", async () => {
  const uncapped = new Pacer({ windows: [{ lengthMs: 1000, budget: 10 }], maxWeight: null });
  await assert.rejects(uncapped.acquire(11), (e) => e.name === "PacerWeightError" && e.window === 0 && e.limit === 10);
  const pacer = new Pacer({ windows: [{ lengthMs: 1000, budget: 10 }], maxWeight: 8 });
  await assert.rejects(pacer.acquire(9), (e) => e.name === "PacerWeightError" && e.window === undefined && e.limit === 8);
  assert.equal(uncapped.snapshot().queued, 0);
  await assert.rejects(pacer.acquire(Number.NaN), /weight must be a finite number/);
  assert.equal(pacer.snapshot().queued, 0);
});

test("a heavy call waits only for its budget; lighter calls asked after it fill the gap beside it", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 300, budget: 10 }] });
  const first = await pacer.acquire(6);
  const heavy = pacer.acquire(6); // needs the first to leave the window
  const light = await pacer.acquire(4); // fits now, beside the first
  const h = await heavy;
  assert.ok(light.dispatchedAtMs < h.dispatchedAtMs, "the light call did not wait behind the heavy one");
  assert.ok(h.dispatchedAtMs - first.dispatchedAtMs >= 300);
  for (const p of [first, light, h]) p.release();
});

test("cancel before dispatch refunds the weight; after dispatch it does not", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 400, budget: 10 }] });
  const a = await pacer.acquire(10);
  const controller = new AbortController();
  const queued = pacer.acquire(10, { signal: controller.signal });
  assert.ok(pacer.etaMs(1) > 300, "the window is full until a leaves");
  controller.abort(new Error("user went elsewhere"));
  await assert.rejects(queued, /user went elsewhere/);
  assert.equal(pacer.snapshot().queued, 0);
  // a was dispatched: releasing or aborting later refunds nothing.
  a.release();
  assert.ok(pacer.etaMs(1) > 300);
  // An already aborted signal rejects without queueing.
  await assert.rejects(pacer.acquire(1, { signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
});

test("limits change at run time without losing the spent budget", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 500, budget: 10 }] });
  (await pacer.acquire(8)).release();
  await pacer.setLimits({ windows: [{ lengthMs: 500, budget: 20 }] });
  assert.equal(pacer.snapshot().windows[0].spent, 8);
  assert.equal(pacer.etaMs(12), 0);
  const queued = pacer.acquire(12);
  await queued.then((p) => p.release());
  await pacer.setLimits({ windows: [{ lengthMs: 500, budget: 9 }] });
  assert.ok(pacer.etaMs(1) > 0, "20 spent against a budget of 9: wait");
  await assert.rejects(pacer.setLimits({ maxInFlight: 0 }), /maxInFlight/);
});

test("a persisted ledger survives a reload and is shared: two pacers together never exceed the budget", async () => {
  const storage = new MemoryStorage();
  const windows = [{ lengthMs: 300, budget: 10 }];
  const tabA = new Pacer({ windows, persist: { key: "om", storage, locks: null } });
  const tabB = new Pacer({ windows, persist: { key: "om", storage, locks: null } });
  const spends = [];
  const run = async (pacer, w) => {
    const p = await pacer.acquire(w);
    spends.push([p.dispatchedAtMs, w]);
    p.release();
  };
  await Promise.all([3, 4, 2, 5, 1, 3].flatMap((w) => [run(tabA, w), run(tabB, w)]));
  assert.ok(maxWindowLoad(spends, 300) <= 10, `held ${maxWindowLoad(spends, 300)}`);
  // A "reload": a new pacer on the same storage sees what was spent.
  const t = Date.now();
  const reloaded = new Pacer({ windows, persist: { key: "om", storage, locks: null }, now: () => t });
  const spentNow = reloaded.snapshot().windows[0].spent;
  const expected = spends.filter(([at]) => at > t - 300 && at <= t).reduce((s, [, w]) => s + w, 0);
  assert.equal(spentNow, expected);
});

test("close() cancels and refunds every queued call", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 5_000, budget: 2 }] });
  (await pacer.acquire(2)).release();
  const waiting = [pacer.acquire(1), pacer.acquire(1)];
  await pacer.close();
  for (const w of waiting) await assert.rejects(w, (e) => e.name === "AbortError");
  assert.equal(pacer.snapshot().queued, 0);
});
