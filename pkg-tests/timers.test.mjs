// No timer outlives an aborted wait: a Node process whose batch or Smart Flow acquire is
// aborted in the middle of a long wait exits at once, not when the wait would have ended.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("./support/leftover-timers.mjs", import.meta.url));

/** Runs the script with `what`; its output and how long the process lived. */
function run(what) {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [script, what], { timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${what}: ${error.message}\n${stderr}`));
      else resolve({ out: JSON.parse(stdout), ms: performance.now() - start });
    });
  });
}

test("a batch aborted while paused for the next upstream minute ends, and its process exits at once", { timeout: 40_000 }, async () => {
  const { out, ms } = await run("batch");
  assert.deepEqual(out, { state: "aborted", resumed: true });
  // the resume was a minute away (60 s and 1–3 s of jitter at the most)
  assert.ok(ms < 10_000, `the process lived ${ms.toFixed(0)} ms`);
});

test("a Smart Flow acquire aborted during a 120 s cooldown rejects, and its process exits at once", { timeout: 40_000 }, async () => {
  const { out, ms } = await run("smartflow");
  assert.deepEqual(out, { rejected: "gave up" });
  assert.ok(ms < 10_000, `the process lived ${ms.toFixed(0)} ms`);
});

test("a Smart Flow whose save failed, left alone or shut down, leaves no retry timer: its process exits at once", { timeout: 40_000 }, async () => {
  const { out, ms } = await run("smartflow-save");
  assert.deepEqual(out, { leftAlone: { saves: 1, dirty: 50 }, shutDown: { saves: 2, dirty: 0 } });
  // a retry would be a second away, doubling up to a minute
  assert.ok(ms < 900, `the process lived ${ms.toFixed(0)} ms`);
});
