// The progress line of `npx sluicegate sim` and `replay` (js/progress.mjs): drawn on a terminal only, from
// the first second of a run on, at most ten times a second, and blanked before the result.
import assert from "node:assert/strict";
import { test } from "node:test";
import { PROGRESS_AFTER_MS, PROGRESS_EVERY_MS, progressLine, progressMeter, progressText, replayProgressText } from "../js/progress.mjs";

const state = (over) => ({ tty: true, elapsedMs: PROGRESS_AFTER_MS, lastDrawMs: null, done: 65536, total: 100000, ...over });

test("nothing is drawn off a terminal or in the first second", () => {
  assert.equal(progressLine(state({ tty: false, elapsedMs: 10 * PROGRESS_AFTER_MS })), null);
  assert.equal(progressLine(state({ elapsedMs: PROGRESS_AFTER_MS - 1 })), null);
  assert.equal(progressLine(state()), "sim: 65,536 of 100,000 requests (65 %)");
});

test("the line is drawn at most ten times a second", () => {
  assert.equal(PROGRESS_EVERY_MS, 100);
  const lastDrawMs = PROGRESS_AFTER_MS + 50;
  assert.equal(progressLine(state({ elapsedMs: lastDrawMs + 99, lastDrawMs, total: null, done: 1 })), null);
  assert.equal(progressLine(state({ elapsedMs: lastDrawMs + 100, lastDrawMs, total: null, done: 1 })), "sim: 1 rows read");
  // a clock that went back draws nothing
  assert.equal(progressLine(state({ lastDrawMs: PROGRESS_AFTER_MS + 1 })), null);
});

test("the text says how far of how many, or the rows read, and which side of a comparison", () => {
  assert.equal(progressText(1234567, 3000000), "sim: 1,234,567 of 3,000,000 requests (41 %)");
  assert.equal(progressText(3000000, 3000000), "sim: 3,000,000 of 3,000,000 requests (100 %)");
  assert.equal(progressText(999, null), "sim: 999 rows read");
  assert.equal(progressText(131072, null, "after"), "sim (after): 131,072 rows read");
  assert.equal(progressText(65536, 200000, "before"), "sim (before): 65,536 of 200,000 requests (32 %)");
});

/** A stream that keeps what is written, and a clock the test moves. */
function terminal(isTTY) {
  const clock = { ms: 0 };
  const stream = { isTTY, written: [], write: (text) => stream.written.push(text) };
  return { stream, clock, now: () => clock.ms };
}

test("a meter draws in place on a terminal and blanks its widest line before the result", () => {
  const { stream, clock, now } = terminal(true);
  const meter = progressMeter(stream, now);
  assert.equal(typeof meter.onProgress, "function");
  clock.ms = 500;
  meter.onProgress(65536, null);
  assert.deepEqual(stream.written, [], "not in the first second");
  clock.ms = 1000;
  meter.onProgress(131072, null, "before");
  clock.ms = 1050;
  meter.onProgress(196608, null, "before");
  clock.ms = 1100;
  meter.onProgress(65536, null, "after");
  assert.deepEqual(stream.written, ["\rsim (before): 131,072 rows read", "\rsim (after): 65,536 rows read  "]);
  meter.clear();
  assert.equal(stream.written.at(-1), `\r${" ".repeat("sim (before): 131,072 rows read".length)}\r`);
  meter.clear();
  assert.equal(stream.written.length, 3, "blanked once");
});

test("a meter off a terminal does not watch the run and writes nothing", () => {
  for (const isTTY of [false, undefined]) {
    const { stream, now } = terminal(isTTY);
    const meter = progressMeter(stream, now);
    assert.equal(meter.onProgress, undefined);
    meter.clear();
    assert.deepEqual(stream.written, []);
  }
});

test("replay's line says how many of the trace's requests were sent", () => {
  assert.equal(replayProgressText(1234, 5000), "replay: 1,234 of 5,000 requests sent (24 %)");
  assert.equal(progressLine(state({ done: 20, total: 80 }), replayProgressText), "replay: 20 of 80 requests sent (25 %)");
  assert.equal(progressLine(state({ tty: false, done: 20, total: 80 }), replayProgressText), null);
});
