// PacerCore from the built package: the pure pacer with time passed in.
import assert from "node:assert/strict";
import { test } from "node:test";
import { PacerCore } from "sluicegate";

const MIN = 60_000;

test("the defaults are 550/min, 4,800/h and 9,500/day with a 5,000 per-call cap", () => {
  const p = new PacerCore();
  assert.deepEqual(
    p.snapshot(0).windows.map((w) => [w.lengthMs, w.budget]),
    [
      [MIN, 550],
      [60 * MIN, 4800],
      [24 * 60 * MIN, 9500],
    ],
  );
  assert.throws(
    () => p.reserve(0, 551),
    (e) => e.name === "PacerWeightError" && e.weight === 551 && e.window === 0 && e.limit === 550,
  );
  const uncapped = new PacerCore({ windows: [{ lengthMs: MIN, budget: 10_000 }] });
  assert.throws(
    () => uncapped.reserve(0, 5000.5),
    (e) => e.name === "PacerWeightError" && e.limit === 5000,
  );
  assert.equal(p.snapshot(0).queued, 0, "a refused call is never queued");
});

test("a reservation goes to the earliest instant it fits, filling gaps; fractional weights are exact", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  const t = 1_000_000;
  assert.deepEqual(p.reserve(t, 6), { id: 1, atMs: t, delayMs: 0 });
  assert.equal(p.reserve(t, 6).delayMs, 10_000);
  assert.equal(p.reserve(t, 2.5).delayMs, 0);
  assert.equal(p.reserve(t, 1.5).delayMs, 0);
  assert.equal(p.etaMs(t, 0.001), 10_000);
  const snap = p.snapshot(t);
  assert.equal(snap.windows[0].spent, 10);
  assert.equal(snap.queued, 4);
  assert.equal(snap.drainsAtMs, t + 10_000);
});

test("cancel before dispatch refunds; after dispatch it does not", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  const a = p.reserve(0, 10);
  assert.equal(p.cancel(a.id), true);
  const b = p.reserve(0, 10);
  assert.equal(b.delayMs, 0);
  p.dispatch(b.id);
  assert.equal(p.snapshot(0).inFlight, 1);
  assert.equal(p.cancel(b.id), false);
  assert.equal(p.etaMs(0, 1), 10_000);
});

test("limits change at run time without losing the spent budget", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  p.dispatch(p.reserve(0, 8).id);
  const queued = p.reserve(0, 2);
  const { moved, refused } = p.setLimits(1_000, { windows: [{ lengthMs: 10_000, budget: 9 }] });
  assert.deepEqual(refused, []);
  assert.deepEqual(moved, [{ id: queued.id, atMs: 10_000, delayMs: 9_000 }]);
  assert.equal(p.snapshot(1_000).windows[0].spent, 8);
});

test("spends exported by one pacer count in another (reloads and tabs)", () => {
  const a = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  a.dispatch(a.reserve(0, 7).id);
  const saved = JSON.parse(JSON.stringify(a.exportSpends()));
  assert.deepEqual(saved, [[0, 7, true]]);
  const b = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  b.importSpends(
    500,
    saved.map(([at, w]) => [at, w]),
  );
  assert.equal(b.reserve(500, 4).delayMs, 9_500);
});

test("bad numbers are refused with the argument named", () => {
  const p = new PacerCore();
  assert.throws(() => p.reserve(Number.NaN, 1), /nowMs/);
  assert.throws(() => p.reserve(0, -1), /weight must be a finite number above 0/);
  assert.throws(() => p.reserve(0, 0), /weight/);
  assert.throws(() => new PacerCore({ windows: [{ lengthMs: 0, budget: 1 }] }), /windows\[0\]\.lengthMs/);
  assert.throws(() => new PacerCore({ windows: [{ lengthMs: 1000 }] }), /windows\[0\]\.budget must be a number/);
});

test("at Unix-time magnitudes a spend placed to leave a window is never counted in it (exact ms ↔ ns)", () => {
  // 1.8e12 ms is 1.8e18 ns, past 2^53: a floating-point ms × 1e6 lands some ns off, and a
  // spend placed at now + etaMs could fall back inside the window it was placed to leave.
  for (let t = 1_796_000_000_000; t < 1_796_000_000_040; t += 1) {
    const p = new PacerCore({ windows: [{ lengthMs: 350, budget: 10 }] });
    p.importSpends(t, [[t, 6]]);
    const at = t + 1 + p.etaMs(t + 1, 6); // as the Pacer places a call
    assert.equal(at, t + 350);
    p.importSpends(t + 1, [[at, 6]]);
    assert.equal(p.etaMs(t + 1, 4), 0, `a 4 fits beside the first 6 at ${t}`);
    p.free();
  }
});

test("each decision's status reaches PacerCore as its documented answer: place and lastId, due, tryAcquire, nextInLine, release, cancel", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }], maxInFlight: 1 });
  assert.equal(p.place(1_000, 6), 1_000, "committed: the instant it may go out");
  const first = p.lastId;
  assert.equal(p.place(1_000, 6), 11_000, "the second 6 waits for the first to leave the window");
  const second = p.lastId;
  assert.ok(Number.isInteger(first) && second === first + 1);
  assert.equal(p.due(5_000, second), 11_000, "not yet: the instant to wait for");
  assert.equal(p.due(1_000, first), -1, "it went out");
  assert.equal(p.due(11_000, second), -2, "every slot is taken");
  assert.equal(p.due(11_000, 999), -3, "no such queued call");
  assert.equal(p.tryAcquire(11_000, 1), 0, "tryAcquire: every slot is taken");
  assert.equal(p.nextInLine(), undefined, "no slot is free yet");
  assert.equal(p.release(first), true);
  assert.equal(p.release(first), false, "it is no longer in flight");
  assert.equal(p.nextInLine(), second, "the call that waited for a slot");
  assert.equal(p.nextInLine(), undefined);
  assert.equal(p.cancel(second), true, "refunded: it had not gone out");
  assert.equal(p.cancel(second), false);
  const q = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  const permit = q.tryAcquire(0, 8);
  assert.ok(permit > 0, "a permit's id");
  assert.equal(q.tryAcquire(0, 5), -10_000, "minus the ms until the budget has room");
  assert.equal(q.release(permit), true);
});

test("an id that is not a whole number (NaN, a fraction, negative, past 2^53) is an error naming it, never cast to another call", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }] });
  const held = p.reserve(0, 2).id;
  for (const id of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY, 2 ** 53, undefined]) {
    const named = new RegExp(`^id must be a whole number from 0 to 2\\^53 − 1, got ${Number(id)}$`);
    for (const call of [() => p.due(0, id), () => p.release(id), () => p.cancel(id), () => p.dispatch(id), () => p.reschedule(0, id)]) {
      assert.throws(call, (e) => e instanceof Error && named.test(e.message), `${call} with ${id}`);
    }
  }
  assert.equal(p.snapshot(0).queued, 1, "the call held is untouched");
  assert.equal(p.cancel(held), true);
});

test("a refused input or limit is the same error as before, from place, tryAcquire and due", () => {
  const p = new PacerCore({ windows: [{ lengthMs: 10_000, budget: 10 }], maxQueued: 1 });
  assert.throws(() => p.place(Number.NaN, 1), /^Error: nowMs must be a finite number ≥ 0, got NaN$/);
  assert.throws(() => p.tryAcquire(-1, 1), /nowMs must be a finite number ≥ 0, got -1/);
  assert.throws(() => p.due(Number.NaN, 1), /nowMs must be a finite number ≥ 0, got NaN/);
  assert.throws(() => p.place(0, 0), /weight must be a finite number above 0, got 0/);
  assert.throws(() => p.tryAcquire(0, Number.NaN), /weight must be a finite number above 0, got NaN/);
  assert.throws(
    () => p.place(0, 11),
    (e) => e.name === "PacerWeightError" && e.weight === 11 && e.window === 0 && e.limit === 10,
  );
  assert.throws(
    () => p.tryAcquire(0, 11),
    (e) => e.name === "PacerWeightError" && e.weight === 11,
  );
  p.place(0, 1);
  assert.throws(
    () => p.place(0, 1),
    (e) => e.name === "PacerQueueFullError" && e.option === "maxQueued" && e.limit === 1,
  );
});

// Open-Meteo's windows with a minute compressed to 1 s, as the benchmark and the mock use them.
const FIXED = [
  { lengthMs: 1_000, budget: 550 },
  { lengthMs: 60_000, budget: 4_800 },
  { lengthMs: 1_440_000, budget: 9_500 },
];

/** The weight each fixed 1 s window gets when every call counts in each window it may land in (its instant ± margin). */
function perWindow(placed, marginMs, lengthMs = 1_000) {
  const loads = new Map();
  for (const [at, weight] of placed) {
    for (let k = Math.floor((at - marginMs) / lengthMs); k <= Math.floor((at + marginMs) / lengthMs); k++) loads.set(k, (loads.get(k) ?? 0) + weight);
  }
  return loads;
}

test("with fixedWindowMarginMs, a 1,500 × 16-day fan-out fills each upstream window from its start: four windows, never more than 550 in one", () => {
  const weights = [...Array(15).fill((96 * 16) / 14), (60 * 16) / 14]; // fetchForecasts' 16 calls
  for (const into of [0, 300, 940, 990]) {
    const now = 1_796_528_088_000 + into;
    const fixed = new PacerCore({ windows: FIXED, fixedWindowMarginMs: 50 });
    assert.equal(fixed.snapshot(now).fixedWindowMarginMs, 50);
    const placed = weights.map((w) => [fixed.place(now, w), w]);
    const windows = perWindow(placed, 50);
    assert.ok(Math.max(...windows.values()) <= 550, `${into} ms into a window: ${[...windows.values()]}`);
    const last = placed.at(-1)[0];
    const start = now - into;
    // the last call goes at the start of the fourth window (the fifth when the first calls
    // fall within the margin of a boundary and count in two), plus the margin
    const expected = start + (into + 50 >= 1_000 ? 4_000 : 3_000) + 50;
    assert.equal(last, expected, `${into} ms into a window`);
    // rolling windows send the last call three windows and three slacks after the first
    const rolling = new PacerCore({ windows: FIXED, slackMs: null });
    assert.equal(weights.map((w) => rolling.place(now, w)).at(-1), now + 3_300);
  }
});

test("with fixedWindowMarginMs, no fixed window gets more than its budget, counting each call in every window it may land in", () => {
  let seed = 0x2545f491;
  const random = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const core = new PacerCore({ windows: FIXED, fixedWindowMarginMs: 50 });
  const placed = [];
  let now = 1_796_528_088_000;
  for (let i = 0; i < 2_000; i++) {
    now += Math.floor(random() * 40);
    const weight = 1 + Math.floor(random() * 113);
    placed.push([core.place(now, weight), weight]);
  }
  const loads = [...perWindow(placed, 50).values()];
  assert.ok(Math.max(...loads) <= 550, `fullest window ${Math.max(...loads)}`);
  assert.ok(Math.max(...loads) > 540, "and windows are filled");
  assert.throws(() => new PacerCore({ fixedWindowMarginMs: -1 }), /fixedWindowMarginMs must be a finite number ≥ 0, got -1/);
  core.setLimits(now, { fixedWindowMarginMs: null });
  assert.equal(core.snapshot(now).fixedWindowMarginMs, null, "null in setLimits is back to rolling windows");
});
