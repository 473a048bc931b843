// The Pacer's queue API (schedule, wrap, tryAcquire, queue limits, onIdle, events, priority)
// from the built package, with real timers and windows of fractions of a second.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Pacer, PacerCore } from "sluicegate";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("schedule runs the function once it may go, releases the slot also when it throws, and passes its result on", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 200, budget: 5 }], maxInFlight: 1 });
  assert.equal(await pacer.schedule(1, async () => "answer"), "answer");
  await assert.rejects(
    pacer.schedule(1, () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  // The slot came back after the throw: with one slot, this would never settle otherwise.
  assert.equal(await pacer.schedule(1, () => 42), 42);
  assert.equal(pacer.snapshot().inFlight, 0);
});

test("wrap paces a function by the weight of its arguments", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 300, budget: 4 }], slackMs: 0 });
  const started = [];
  const fetchDays = pacer.wrap(
    async (days) => {
      started.push([Date.now(), days]);
      return days * 2;
    },
    (days) => days,
  );
  const t0 = Date.now();
  assert.deepEqual(await Promise.all([fetchDays(3), fetchDays(2)]), [6, 4]);
  // 3 + 2 > 4: the second waits for the first to leave the window.
  assert.ok(started[1][0] - t0 >= 290, `the second call waited ${started[1][0] - t0} ms`);
});

test("tryAcquire gives a permit now or says how long to wait, and never queues", () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 10_000, budget: 3 }], maxInFlight: 1, slackMs: 0 });
  const permit = pacer.tryAcquire(2);
  assert.equal(typeof permit.release, "function");
  assert.deepEqual(pacer.tryAcquire(1), { retryAfterMs: 0, reason: "inFlight" });
  permit.release();
  const busy = pacer.tryAcquire(2);
  assert.equal(busy.reason, "budget");
  assert.ok(busy.retryAfterMs > 9_000 && busy.retryAfterMs <= 10_000, `retry after ${busy.retryAfterMs}`);
  assert.equal(pacer.snapshot().queued, 0);
  pacer.tryAcquire(1).release(); // 1 still fits
});

test("maxQueued and maxQueuedWeight refuse with a typed error, and a refund makes room", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1 }], maxQueued: 2, maxQueuedWeight: 5 });
  const first = await pacer.acquire(1); // goes at once: not queued
  const ac = new AbortController();
  const waiting = [pacer.acquire(1, { signal: ac.signal }), pacer.acquire(1, { signal: ac.signal })];
  await assert.rejects(pacer.acquire(1), (e) => e.name === "PacerQueueFullError" && e.option === "maxQueued" && e.limit === 2);
  ac.abort();
  for (const w of waiting) await assert.rejects(w, (e) => e.name === "AbortError");
  const heavy = new Pacer({ windows: [{ lengthMs: 60_000, budget: 5 }], maxQueuedWeight: 5 });
  (await heavy.acquire(5)).release(); // went at once: nothing stays queued
  const held = heavy.acquire(4);
  await assert.rejects(heavy.acquire(2), (e) => e.name === "PacerQueueFullError" && e.option === "maxQueuedWeight");
  await heavy.close();
  await assert.rejects(held, (e) => e.name === "AbortError");
  first.release();
});

test("onIdle resolves once nothing is queued or in flight, and the events tell queued, dispatch and idle", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 150, budget: 2 }] });
  const seen = [];
  for (const type of ["queued", "dispatch", "idle"]) pacer.addEventListener(type, (e) => seen.push([type, e.detail?.id]));
  await pacer.onIdle(); // idle from the start
  const done = Promise.all([1, 1, 1].map((w) => pacer.schedule(w, () => sleep(5))));
  await pacer.onIdle();
  await done;
  assert.equal(seen.filter(([t]) => t === "queued").length, 3);
  assert.equal(seen.filter(([t]) => t === "dispatch").length, 3);
  assert.equal(seen.at(-1)[0], "idle");
  assert.equal(pacer.snapshot().queued + pacer.snapshot().inFlight, 0);
});

test("priority orders the calls waiting for a slot, and never moves a reservation", async () => {
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 100 }], maxInFlight: 1 });
  const holder = await pacer.acquire(1);
  const order = [];
  const low = pacer.schedule(1, () => order.push("low"), { priority: 0 });
  const high = pacer.schedule(1, () => order.push("high"), { priority: 5 });
  await sleep(20); // both are due and waiting for the slot
  holder.release();
  await Promise.all([low, high]);
  assert.deepEqual(order, ["high", "low"]);
});

test("eleven calls sharing one AbortSignal add one listener: no MaxListenersExceededWarning", async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on("warning", onWarning);
  try {
    const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1 }] });
    (await pacer.acquire(1)).release();
    const ac = new AbortController();
    const calls = Array.from({ length: 11 }, () => pacer.acquire(1, { signal: ac.signal }));
    ac.abort();
    for (const c of calls) await assert.rejects(c, (e) => e.name === "AbortError");
    await sleep(10);
    assert.equal(pacer.snapshot().queued, 0, "every aborted call was refunded");
  } finally {
    process.off("warning", onWarning);
  }
  assert.deepEqual(
    warnings.filter((w) => w.name === "MaxListenersExceededWarning"),
    [],
  );
});

test("every option of the wrong type is refused naming it, and so is an unknown field, at construction and in setLimits", async () => {
  for (const key of ["maxWeight", "maxInFlight", "slackMs", "maxQueued", "maxQueuedWeight", "fixedWindowMarginMs"]) {
    for (const bad of ["1", true, {}, [1]]) {
      assert.throws(() => new PacerCore({ [key]: bad }), new RegExp(`pacer options: ${key} must be a number, got ${Array.isArray(bad) ? "array" : typeof bad}`));
    }
  }
  assert.throws(() => new PacerCore({ windows: "1m" }), /pacer options: windows must be an array of \{ lengthMs, budget \}, got string/);
  assert.throws(() => new PacerCore({ windows: [5] }), /pacer options: windows\[0\] must be \{ lengthMs, budget \}, got number/);
  assert.throws(
    () =>
      new PacerCore({
        windows: [
          { lengthMs: 1000, budget: 1 },
          { lengthMs: "1h", budget: 1 },
        ],
      }),
    /windows\[1\]\.lengthMs must be a number, got string/,
  );
  assert.throws(() => new PacerCore({ windows: [{ lengthMs: 1000, budget: 1, burst: 2 }] }), /windows\[0\]: unknown field `burst`, expected one of lengthMs, budget/);
  assert.throws(() => new PacerCore({ maxInflight: 2 }), /unknown field `maxInflight`, expected one of windows, maxWeight, maxInFlight/);
  assert.throws(() => new PacerCore(7), /pacer options must be an object, got number/);
  assert.throws(() => new PacerCore([]), /pacer options must be an object, got array/);
  // a sparse array that says 2^32 − 1 windows is an error, not a panic of the whole module
  assert.throws(() => new PacerCore({ windows: new Array(2 ** 32 - 1) }), /windows\[0\] must be/);
  assert.throws(() => new PacerCore().importSpends(0, new Array(2 ** 32 - 1)), /spends\[0\] must be \[atMs, weight\]/);
  assert.equal(new PacerCore().etaMs(0, 1), 0, "the module still works");
  // null is "no cap" for maxWeight, "the default" for slackMs, and "unchanged" elsewhere
  const core = new PacerCore({ windows: [{ lengthMs: 1000, budget: 10 }], maxWeight: null, slackMs: null, maxInFlight: null });
  assert.equal(core.snapshot(0).slackMs, 100);
  assert.equal(core.snapshot(0).maxInFlight, Number.POSITIVE_INFINITY);
  const pacer = new Pacer();
  await assert.rejects(pacer.setLimits({ maxQueued: "3" }), /pacer options: maxQueued must be a number, got string/);
  await assert.rejects(pacer.setLimits({ window: [] }), /unknown field `window`/);
});

test("options are checked by name: an unknown one, or a bad value, is refused at construction", () => {
  assert.throws(() => new Pacer({ windowz: [] }), /unknown field `windowz`/);
  assert.throws(() => new Pacer({ windows: [{ lengthMs: "1m", budget: 1 }] }), /windows\[0\]\.lengthMs/);
  assert.throws(() => new Pacer({ maxInFlight: 0 }), /maxInFlight must be a whole number/);
  assert.throws(() => new Pacer({ maxQueued: 1.5 }), /maxQueued/);
});
