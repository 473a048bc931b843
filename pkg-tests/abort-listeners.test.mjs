// One AbortSignal shared by many calls: the package adds one "abort" listener per signal
// (however many calls wait on it), removes it when the last of them is done, and still
// rejects every waiting call when the signal fires. Eleven calls would otherwise pass Node's
// limit of ten listeners and print a MaxListenersExceededWarning.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { after, before, test } from "node:test";
import { LocationCache, Pacer, fetchForecasts, runBatch } from "sluicegate";
import { SmartFlow, smartFetch } from "sluicegate/smartflow";

const CALLS = 11;
const warnings = [];
const onWarning = (warning) => warnings.push(warning);
before(() => process.on("warning", onWarning));
after(() => process.off("warning", onWarning));

/** Let pending warnings (emitted on the next tick) arrive, then check none is a listener leak. */
async function assertNoLeakWarning() {
  await new Promise((resolve) => setImmediate(resolve));
  const leaks = warnings.filter((w) => w.name === "MaxListenersExceededWarning");
  assert.deepEqual(leaks.map(String), []);
}

const abortListeners = (signal) => getEventListeners(signal, "abort").length;

/**
 * A controller whose signal records the most "abort" listeners it ever held at once (Node 22
 * does not warn for AbortSignal listeners, Node 20 and other EventTargets do: count them).
 */
function trackedController() {
  const controller = new AbortController();
  const { signal } = controller;
  const add = signal.addEventListener.bind(signal);
  controller.most = 0;
  signal.addEventListener = (type, listener, options) => {
    add(type, listener, options);
    controller.most = Math.max(controller.most, abortListeners(signal));
  };
  return controller;
}

/** A fetch that answers JSON after a few milliseconds, and honours its own signal. */
async function slowFetch(_input, init = {}) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  if (init.signal?.aborted) throw init.signal.reason;
  return Response.json([{ ok: true }]);
}

const roomyPacer = () => new Pacer({ windows: [{ lengthMs: 60_000, budget: 10_000 }], maxInFlight: CALLS });

test("SmartFlow.acquire: eleven waits on one signal hold one listener, and its abort rejects them all", async () => {
  // One token per 50 ms and a bucket of one: every call but the first sleeps on the signal.
  const flow = new SmartFlow({ orgRate: 20, orgCapacity: 1 });
  const controller = trackedController();
  const { signal } = controller;
  const waits = Array.from({ length: CALLS }, () => flow.acquire("/organizations/O_1/networks", { signal }));
  assert.equal(controller.most, 1);
  await waits[3];
  controller.abort(new Error("stop"));
  const outcomes = await Promise.allSettled(waits);
  assert.equal(outcomes.filter((o) => o.status === "fulfilled").length >= 4, true);
  assert.ok(
    outcomes.slice(5).every((o) => o.status === "rejected" && o.reason.message === "stop"),
    JSON.stringify(outcomes),
  );
  assert.equal(abortListeners(signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});

test("SmartFlow.acquire: the listener goes once every wait on the signal is over", async () => {
  const flow = new SmartFlow({ orgRate: 200, orgCapacity: 1 });
  const controller = trackedController();
  const { signal } = controller;
  await Promise.all(Array.from({ length: CALLS }, () => flow.acquire("/organizations/O_2/networks", { signal })));
  assert.equal(abortListeners(signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});

test("smartFetch: eleven requests sharing one signal", async () => {
  const flow = new SmartFlow({ orgRate: 200, orgCapacity: 1, fetch: slowFetch });
  const controller = trackedController();
  const { signal } = controller;
  const responses = await Promise.all(
    Array.from({ length: CALLS }, (_, i) => smartFetch(`https://api.example.com/api/v1/organizations/O_3/networks?i=${i}`, { signal, smartFlow: flow })),
  );
  assert.ok(responses.every((r) => r.status === 200));
  assert.equal(abortListeners(signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});

test("runBatch: eleven batches sharing one signal, then one batch of eleven calls", async () => {
  const pacer = roomyPacer();
  const controller = trackedController();
  const { signal } = controller;
  const outs = await Promise.all(Array.from({ length: CALLS }, (_, i) => runBatch([{ url: `/x/${i}`, weight: 1 }], { pacer, fetch: slowFetch, signal })));
  assert.ok(outs.every((o) => o.state === "done"));
  const one = await runBatch(
    Array.from({ length: CALLS }, (_, i) => ({ url: `/y/${i}`, weight: 1 })),
    { pacer, fetch: slowFetch, signal },
  );
  assert.equal(one.state, "done");
  assert.equal(abortListeners(signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});

test("runBatch: aborting the shared signal ends every batch", async () => {
  const pacer = roomyPacer();
  const controller = trackedController();
  const runs = Array.from({ length: CALLS }, (_, i) => runBatch([{ url: `/z/${i}`, weight: 1 }], { pacer, fetch: slowFetch, signal: controller.signal }));
  controller.abort(new Error("stop"));
  const outs = await Promise.all(runs);
  assert.ok(
    outs.every((o) => o.state === "aborted" && o.abort.reason === "aborted by the caller"),
    JSON.stringify(outs.map((o) => o.abort)),
  );
  assert.equal(abortListeners(controller.signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});

test("fetchForecasts: eleven fan-outs sharing one signal and one cache", async () => {
  const pacer = roomyPacer();
  const cache = new LocationCache();
  const controller = trackedController();
  const { signal } = controller;
  const outs = await Promise.all(
    Array.from({ length: CALLS }, (_, i) =>
      fetchForecasts([{ latitude: i, longitude: i }], { daily: ["temperature_2m_max"] }, { pacer, cache, fetch: slowFetch, signal, baseUrl: "http://127.0.0.1:9/v1/forecast" }),
    ),
  );
  assert.ok(
    outs.every((o) => o.state === "done"),
    JSON.stringify(outs.map((o) => o.abort)),
  );
  assert.equal(abortListeners(signal), 0);
  assert.equal(controller.most, 1);
  await assertNoLeakWarning();
});
