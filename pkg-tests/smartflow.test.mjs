// SmartFlow from the built package (sluicegate/smartflow, Node entry): the conformance
// runner, concurrent reservations with real timers, AIMD, persistence (the default cache
// file, a file, localStorage, a failing store), background resolves, and smartFetch against
// a local server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { packageWorker } from "./support/workerd.mjs";
import { SmartFlow, formatSavedAt, parseRetryAfter, smartFetch } from "sluicegate/smartflow";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const vectors = join(root, "tests/fixtures/smartflow-vectors.json");
const runner = join(root, "pkg-tests/smartflow-conformance.mjs");
const scratch = mkdtempSync(join(tmpdir(), "sluicegate-smartflow-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
// Under Node a SmartFlow keeps its cache in ~/.meraki/.cache by default: the tests' own go to
// a home of their own, never the real one.
process.env.HOME = join(scratch, "home");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quiet = { onError: () => {} };

/** Wait until `condition()` holds, at most `ms`. */
async function eventually(condition, ms = 3_000) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
}

/** A `{ load, save }` in memory that counts saves and fails the first `failures` of them. */
function memoryStore(initial = null, failures = 0) {
  const store = {
    text: initial,
    saves: 0,
    failed: 0,
    load: () => store.text,
    save(text) {
      store.saves++;
      if (store.failed < failures) {
        store.failed++;
        throw new Error("disk full");
      }
      store.text = text;
    },
  };
  return store;
}

const cacheFile = (savedAtUnix, networks = [], devices = []) =>
  JSON.stringify({
    saved_at: formatSavedAt(savedAtUnix),
    networks: networks.map(([id, org]) => ({ id, organization: { id: org } })),
    devices: devices.map(([serial, org]) => ({ serial, organization: { id: org } })),
  });

// ---------------------------------------------------------------- conformance runner

test("the conformance runner passes every official vector, one line per case", { timeout: 20_000 }, async () => {
  const file = JSON.parse(readFileSync(vectors, "utf8"));
  const cases = Object.values(file)
    .filter((s) => s && typeof s === "object" && Array.isArray(s.cases))
    .reduce((n, s) => n + s.cases.length, 0);
  const { stdout } = await run(process.execPath, [runner, vectors], { cwd: root, timeout: 15_000 });
  const lines = stdout.trim().split("\n");
  assert.equal(lines.at(-1), `${cases} passed, 0 failed`);
  assert.equal(lines.length, cases + 1);
  assert.ok(
    lines.slice(0, -1).every((l) => l.startsWith("PASS ")),
    stdout,
  );
  assert.ok(lines.includes("PASS token_bucket/burst_beyond_capacity_goes_negative"));
});

test("the runner fails a wrong expectation, an unknown section and an unknown field, and exits 1", { timeout: 20_000 }, async () => {
  const file = JSON.parse(readFileSync(vectors, "utf8"));
  file.token_bucket.cases[1].steps[10].wait = 0.25;
  file.aimd.cases[0].expected_rate = 6.9;
  file.resolve_org.cases[0].surprise = true;
  file.rate_limit_headers = { cases: [{ name: "x" }] };
  const tampered = join(scratch, "tampered.json");
  writeFileSync(tampered, JSON.stringify(file));
  const outcome = await run(process.execPath, [runner, tampered], { cwd: root, timeout: 15_000 }).then(
    () => assert.fail("the runner should exit with status 1"),
    (error) => error,
  );
  assert.equal(outcome.code, 1);
  const lines = outcome.stdout.trim().split("\n");
  assert.ok(lines.includes("FAIL token_bucket/burst_beyond_capacity_goes_negative: expected step 10 wait 0.25, got 0.1"), outcome.stdout);
  assert.ok(lines.includes("FAIL aimd/org_decrease: expected rate 6.9, got 7"), outcome.stdout);
  assert.ok(lines.some((l) => /^FAIL resolve_org\/explicit_org: .*field `surprise`/.test(l)));
  assert.ok(lines.some((l) => /^FAIL rate_limit_headers: .*not handled/.test(l)));
  assert.match(lines.at(-1), /^\d+ passed, 4 failed$/);
  const none = await run(process.execPath, [runner], { cwd: root, timeout: 15_000 }).catch((e) => e);
  assert.equal(none.code, 2, "no file: a usage error");
});

// ---------------------------------------------------------------- reservations

test("20 concurrent acquires on a fresh org (rate 10, burst 10) all resolve within about 1 s", { timeout: 5_000 }, async () => {
  const flow = new SmartFlow({ orgRate: 10, orgCapacity: 10 });
  const start = performance.now();
  const done = [];
  const waits = await Promise.all(
    Array.from({ length: 20 }, () =>
      flow.acquire("/organizations/O_1/networks").then((w) => {
        done.push(performance.now() - start);
        return w;
      }),
    ),
  );
  const elapsed = performance.now() - start;
  assert.ok(elapsed >= 950 && elapsed < 1_400, `all 20 done after ${elapsed.toFixed(0)} ms`);
  // Each got its own place: 10 at once, then one every 100 ms.
  // (Real time passes between the calls, refilling a little: hence the 10 ms of slack.)
  waits.forEach((w, i) => {
    assert.ok(Math.abs(w - Math.max(0, i - 9) * 100) < 10, `call ${i} waited ${w}`);
  });
  assert.ok(done.filter((t) => t < 50).length === 10, `resolved at ${done.map((t) => t.toFixed(0))}`);
});

test("another organization is not held up by a busy one; an unresolved URL pays only the global cost", { timeout: 5_000 }, async () => {
  const flow = new SmartFlow();
  for (let i = 0; i < 30; i++) flow.acquire("/organizations/O_busy/networks");
  assert.equal(await flow.acquire("/organizations/O_idle/networks"), 0);
  for (let i = 0; i < 30; i++) assert.equal(await flow.acquire("/networks/N_unknown/clients"), 0);
  assert.equal(flow.snapshot().orgs, 2);
});

test("an aborted acquire rejects with the signal's reason; bad arguments are refused by name", async () => {
  const flow = new SmartFlow({ orgRate: 1, orgCapacity: 1 });
  await flow.acquire("/organizations/O_1/x");
  const controller = new AbortController();
  const waiting = flow.acquire("/organizations/O_1/x", { signal: controller.signal });
  controller.abort(new Error("gone"));
  await assert.rejects(waiting, /gone/);
  await assert.rejects(flow.acquire("/x", { signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  await assert.rejects(flow.acquire(5), /url must be a string, got 5/);
  assert.throws(() => flow.registerNetwork("", "O_1"), /networkId must not be empty/);
  assert.throws(() => flow.registerDevice("Q2", undefined), /orgId must be a string, got undefined/);
  assert.throws(() => new SmartFlow({ orgRate: 0 }), /orgRate must be a finite number above 0, got 0/);
  assert.throws(() => new SmartFlow({ cacheTtlSeconds: -1 }), /cacheTtlSeconds/);
  assert.throws(() => new SmartFlow({ resolver: "yes" }), /resolver must be a function/);
  assert.throws(() => new SmartFlow({ storage: 42 }), /storage must be a localStorage key or \{ load, save \}/);
  assert.throws(() => new SmartFlow({ storage: "k" }), /needs localStorage/, "no localStorage in this Node");
});

// ---------------------------------------------------------------- AIMD

test("AIMD: a run of 429s reaches the 0.5 floor, a run of 2xxs recovers exactly the configured rate", () => {
  const flow = new SmartFlow({ orgRate: 9 });
  const url = "/organizations/O_1/networks";
  flow.registerOrg("O_1");
  let rate = 9;
  for (let i = 0; i < 12; i++) {
    assert.equal(flow.onRateLimited(url), "org");
    rate = Math.max(0.5, rate * 0.7);
    assert.ok(Math.abs(flow.orgRate("O_1") - rate) < 1e-9);
  }
  assert.equal(flow.orgRate("O_1"), 0.5);
  let successes = 0;
  while (flow.orgRate("O_1") < 9) {
    flow.onSuccess(url);
    successes++;
  }
  assert.equal(successes, Math.ceil((9 - 0.5) / 0.2 - 1e-9));
  assert.equal(flow.orgRate("O_1"), 9, "capped at the configured rate, not above");
  flow.onSuccess(url);
  assert.equal(flow.orgRate("O_1"), 9);
  assert.equal(flow.globalRate, 100, "org 429s never touched the global rate");
});

test("a 429 on an unresolved network or device URL leaves the global rate alone", () => {
  const flow = new SmartFlow();
  assert.equal(flow.onRateLimited("/networks/N_9/clients"), "skipped");
  assert.equal(flow.onRateLimited("/devices/Q2ZZ-ZZZZ-ZZZZ/clients"), "skipped");
  assert.equal(flow.globalRate, 100);
  // A URL naming no scope at all penalizes the global bucket, and successes restore it.
  assert.equal(flow.onRateLimited("/administered/identities/me"), "global");
  assert.ok(Math.abs(flow.globalRate - 70) < 1e-9);
  for (let i = 0; i < 60; i++) flow.onSuccess("/administered/identities/me");
  assert.equal(flow.globalRate, 100);
});

test("smartFetch drives AIMD: a 429 lowers the org's rate, a 2xx raises it, a POST is not learned from", async () => {
  const responses = [429, 200, 201];
  const flow = new SmartFlow({
    fetch: async (_input, init) =>
      new Response(JSON.stringify({ networkId: init?.method === "POST" ? "N_post" : "N_7" }), {
        status: responses.shift(),
        headers: { "content-type": "application/json" },
      }),
  });
  flow.registerOrg("O_1");
  assert.equal((await flow.smartFetch("https://api.test/api/v1/organizations/O_1/networks?perPage=5")).status, 429);
  assert.ok(Math.abs(flow.orgRate("O_1") - 7) < 1e-9);
  assert.equal(flow.cooldownMs("/organizations/O_1/networks"), 0, "no Retry-After, no cooldown");
  await flow.smartFetch("https://api.test/api/v1/organizations/O_1/networks");
  assert.ok(Math.abs(flow.orgRate("O_1") - 7.2) < 1e-9);
  await flow.smartFetch("https://api.test/api/v1/organizations/O_1/networks", { method: "POST", body: "{}" });
  assert.equal(flow.resolveOrg("/networks/N_7"), "O_1", "the GET learned N_7 under the URL's org");
  assert.equal(flow.resolveOrg("/networks/N_post"), undefined, "the POST taught nothing");
  assert.ok(Math.abs(flow.orgRate("O_1") - 7.4) < 1e-9, "a 201 is a success too");
});

// ---------------------------------------------------------------- smartFetch against a local server

async function startServer(handler) {
  const server = createServer(handler);
  server.requestTimeout = 5_000;
  server.headersTimeout = 5_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

test("smartFetch against a local server: learns from 2xx GETs, honours Retry-After in seconds and as an HTTP-date", { timeout: 15_000 }, async () => {
  const seen = [];
  const server = await startServer((req, res) => {
    const path = req.url.split("?")[0];
    seen.push([path, performance.now()]);
    const json = (status, body, headers = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    if (path === "/api/v1/networks/N_1") return json(200, { id: "N_1", organizationId: "O_1", name: "HQ" });
    if (path === "/api/v1/networks/N_1/clients") return json(200, [{ mac: "aa" }]);
    if (path === "/api/v1/organizations/O_1/limited") return json(429, { errors: ["Too many"] }, { "retry-after": "1" });
    if (path === "/api/v1/organizations/O_2/devices") return json(200, [], { "content-type": "text/plain" });
    if (path === "/api/v1/networks/N_9/limited") {
      return json(429, { errors: ["Too many"] }, { "retry-after": new Date(Date.now() + 1_600).toUTCString() });
    }
    if (path === "/api/v1/networks/N_9/clients") return json(200, []);
    return json(404, { errors: ["not found"] });
  });
  try {
    const flow = new SmartFlow();
    const api = (p) => `${server.url}/api/v1${p}`;

    // A 2xx GET teaches N_1 → O_1: its later requests are charged to O_1.
    const first = await flow.smartFetch(api("/networks/N_1"));
    assert.equal(first.status, 200);
    assert.equal((await first.json()).name, "HQ", "the caller still reads the body");
    assert.equal(flow.resolveOrg("/networks/N_1/clients"), "O_1");

    // Retry-After in seconds, on an org: that org (N_1 included) waits a second, others do not.
    const limited = await flow.smartFetch(api("/organizations/O_1/limited"));
    assert.equal(limited.status, 429);
    const limitedAt = seen.at(-1)[1];
    assert.ok(flow.cooldownMs("/networks/N_1/clients") > 900);
    const other = await flow.smartFetch(api("/organizations/O_2/devices"));
    assert.equal(other.status, 200);
    assert.ok(seen.at(-1)[1] - limitedAt < 500, "another organization went out at once");
    assert.equal((await flow.smartFetch(api("/networks/N_1/clients"))).status, 200);
    const gap = seen.at(-1)[1] - limitedAt;
    assert.ok(gap >= 950 && gap < 2_000, `N_1 (org O_1) waited ${gap.toFixed(0)} ms after the 429`);

    // Retry-After as an HTTP-date, on an unresolved network: the global rate is left alone,
    // and that network waits for the date (whole seconds: 0.6–1.6 s from now).
    const dated = await flow.smartFetch(api("/networks/N_9/limited"));
    assert.equal(dated.status, 429);
    const datedAt = seen.at(-1)[1];
    assert.equal(flow.globalRate, 100);
    assert.ok(flow.cooldownMs("/networks/N_9/clients") > 400);
    assert.equal(flow.cooldownMs("/networks/N_1/clients"), 0);
    await flow.smartFetch(api("/networks/N_9/clients"));
    const datedGap = seen.at(-1)[1] - datedAt;
    assert.ok(datedGap >= 500 && datedGap < 2_000, `N_9 waited ${datedGap.toFixed(0)} ms after the dated 429`);

    // The module-level smartFetch, through a given SmartFlow.
    assert.equal((await smartFetch(api("/networks/N_1"), { smartFlow: flow })).status, 200);
  } finally {
    await server.close();
  }
});

test("a cooldown in force is never shortened; Retry-After parses both forms", () => {
  const flow = new SmartFlow();
  flow.registerOrg("O_1");
  const url = "/organizations/O_1/networks";
  flow.onRateLimited(url, "5");
  flow.onRateLimited(url, "1");
  flow.onRateLimited(url, new Date(Date.now() - 10_000).toUTCString());
  assert.ok(flow.cooldownMs(url) > 4_500, `${flow.cooldownMs(url)} ms left`);
  flow.onRateLimited(url, 8);
  assert.ok(flow.cooldownMs(url) > 7_500, "a longer one extends it");
  const now = Date.parse("2026-07-08T12:00:00Z");
  assert.equal(parseRetryAfter("120", now), 120_000);
  assert.equal(parseRetryAfter("Wed, 08 Jul 2026 12:00:30 GMT", now), 30_000);
  assert.equal(parseRetryAfter("Wednesday, 08-Jul-26 12:00:30 GMT", now), 30_000);
  assert.equal(parseRetryAfter("Wed Jul  8 12:00:30 2026", now), 30_000);
  assert.equal(parseRetryAfter("Wed, 08 Jul 2026 11:00:00 GMT", now), 0, "a date past is no wait");
  for (const bad of [null, undefined, "", "soon", "-5", "1e3", "2026-07-08T12:00:30Z", "Wed, 08 Jul 2026 12:00:30 UTC", {}]) {
    assert.equal(parseRetryAfter(bad, now), null, String(bad));
  }
  assert.equal(parseRetryAfter(1.5, now), 1_500, "a number is seconds");
  assert.throws(() => parseRetryAfter("120", Number.NaN), /nowUnixMs must be a finite number/);
});

// ---------------------------------------------------------------- resolver and hydrator

test("background resolves: one per identifier, the org charged only once learned, hydrated once, drained by shutdown", { timeout: 5_000 }, async () => {
  const asked = [];
  const hydrated = [];
  const store = memoryStore();
  const flow = new SmartFlow({
    storage: store,
    resolver: async (kind, id) => {
      asked.push(`${kind}:${id}`);
      await sleep(50);
      return id === "N_nowhere" ? null : "O_1";
    },
    hydrator: async (org, f) => {
      hydrated.push(org);
      await sleep(20);
      f.registerNetwork("N_sibling", org);
      f.registerDevice("Q2-SIB", org);
    },
  });
  await Promise.all([flow.acquire("/networks/N_1/clients"), flow.acquire("/networks/N_1/devices")]);
  assert.deepEqual(asked, ["network:N_1"], "the same id is not resolved twice concurrently");
  assert.equal(flow.snapshot().orgs, 0, "the first calls paid only the global cost");
  await eventually(() => flow.resolveOrg("/networks/N_1") === "O_1");
  flow.acquire("/devices/Q2/x");
  flow.acquire("/networks/N_nowhere/x");
  await eventually(() => asked.length === 3);
  // shutdown drains the resolves under way (and their hydrations), then saves.
  await flow.shutdown();
  assert.deepEqual(hydrated, ["O_1"], "hydrated once per organization");
  assert.equal(flow.resolveOrg("/devices/Q2-SIB/x"), "O_1");
  assert.equal(flow.resolveOrg("/networks/N_nowhere/x"), undefined);
  const saved = JSON.parse(store.text);
  assert.deepEqual(saved.networks.map((n) => n.id).sort(), ["N_1", "N_sibling"]);
  assert.deepEqual(saved.devices.map((d) => d.serial).sort(), ["Q2", "Q2-SIB"]);
  assert.match(saved.saved_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test("a resolver or hydrator that throws is reported, and the limiter carries on", { timeout: 5_000 }, async () => {
  const errors = [];
  const flow = new SmartFlow({
    resolver: (_kind, id) => {
      if (id === "N_bad") throw new Error("lookup failed");
      return "O_2";
    },
    hydrator: () => {
      throw new Error("hydration failed");
    },
    onError: (error, context) => errors.push(`${context}: ${error.message}`),
  });
  await flow.acquire("/networks/N_bad/x");
  await flow.acquire("/networks/N_good/x");
  await flow.shutdown();
  assert.equal(flow.resolveOrg("/networks/N_good/x"), "O_2");
  assert.deepEqual(errors.sort(), ['hydrating the organization "O_2": hydration failed', 'resolving the network "N_bad": lookup failed']);
});

// ---------------------------------------------------------------- persistence

test("the file store survives a process restart (a child process reads what this one saved)", { timeout: 15_000 }, async () => {
  const path = join(scratch, "restart", "rate_limit_cache.json");
  const flow = new SmartFlow({ path });
  assert.equal(flow.cacheStatus, "missing");
  flow.learnFromResponse("/organizations/O_1/networks/N_1", {});
  flow.learnFromResponse("/networks/N_2/clients", { organization: { id: "O_2" }, serial: "Q2AA-AAAA-AAAA" });
  await flow.shutdown();
  const file = JSON.parse(readFileSync(path, "utf8"));
  assert.deepEqual(Object.keys(file), ["saved_at", "networks", "devices"]);
  assert.deepEqual(file.networks, [
    { id: "N_1", organization: { id: "O_1" } },
    { id: "N_2", organization: { id: "O_2" } },
  ]);
  assert.deepEqual(file.devices, [{ serial: "Q2AA-AAAA-AAAA", organization: { id: "O_2" } }]);

  const child = `
    import { SmartFlow } from "sluicegate/smartflow";
    const flow = new SmartFlow({ path: ${JSON.stringify(path)} });
    console.log(JSON.stringify({
      status: flow.cacheStatus, fresh: flow.cacheFresh,
      n1: flow.resolveOrg("/networks/N_1/clients"), q2: flow.resolveOrg("/devices/Q2AA-AAAA-AAAA/lldpCdp"),
    }));`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", child], { cwd: root, timeout: 10_000 });
  assert.deepEqual(JSON.parse(stdout), { status: "loaded", fresh: true, n1: "O_1", q2: "O_2" });

  // And a SmartFlow re-created from the same file in this process.
  const again = new SmartFlow({ path });
  assert.equal(again.resolveOrg("/networks/N_2"), "O_2");
  assert.equal(again.snapshot().dirty, 0, "loaded mappings are not changes");
});

/** Runs the ES module `source` in a child Node whose home directory is `home`: its stdout and stderr. */
function withHome(home, source) {
  return run(process.execPath, ["--input-type=module", "-e", source], { cwd: root, timeout: 10_000, env: { ...process.env, HOME: home } });
}

/** The specification's default cache file under `home`. */
const defaultCacheFile = (home) => join(home, ".meraki", ".cache", "rate_limit_cache.json");

test("under Node the cache goes to ~/.meraki/.cache/rate_limit_cache.json by default: saved when 50 mappings are learned, in the specification's format, and read by the next process", {
  timeout: 20_000,
}, async () => {
  const home = join(scratch, "home-default");
  mkdirSync(home);
  // no flush, no shutdown: the save at 50 changes, which the process waits for before it exits
  const learning = `
    import { SmartFlow } from "sluicegate/smartflow";
    const flow = new SmartFlow();
    console.log(flow.cacheStatus);
    for (let i = 0; i < 49; i++) flow.learnFromResponse("/organizations/O_1/networks/N_" + i, null);
    flow.learnFromResponse("/networks/N_49/clients", { organization: { id: "O_2" }, serial: "Q2AA-AAAA-AAAA" });`;
  assert.equal((await withHome(home, learning)).stdout, "missing\n", "a default file, not there yet");
  const file = JSON.parse(readFileSync(defaultCacheFile(home), "utf8"));
  assert.deepEqual(Object.keys(file), ["saved_at", "networks", "devices"]);
  assert.match(file.saved_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(file.networks.length, 50);
  assert.deepEqual(
    file.networks.find((n) => n.id === "N_49"),
    { id: "N_49", organization: { id: "O_2" } },
  );
  assert.deepEqual(file.devices, [{ serial: "Q2AA-AAAA-AAAA", organization: { id: "O_2" } }]);
  assert.deepEqual(readdirSync(join(home, ".meraki", ".cache")), ["rate_limit_cache.json"], "written through a temporary file, renamed over");

  const reading = `
    import { SmartFlow } from "sluicegate/smartflow";
    const flow = new SmartFlow();
    console.log(JSON.stringify({ status: flow.cacheStatus, fresh: flow.cacheFresh, q2: flow.resolveOrg("/devices/Q2AA-AAAA-AAAA/lldpCdp") }));`;
  assert.deepEqual(JSON.parse((await withHome(home, reading)).stdout), { status: "loaded", fresh: true, q2: "O_2" });
});

test("path moves the cache file, and path: false keeps none; neither writes under ~/.meraki", { timeout: 20_000 }, async () => {
  const home = join(scratch, "home-options");
  mkdirSync(home);
  const elsewhere = join(scratch, "elsewhere", "orgs.json");
  const source = `
    import { SmartFlow } from "sluicegate/smartflow";
    const moved = new SmartFlow({ path: ${JSON.stringify(elsewhere)} });
    moved.learnFromResponse("/organizations/O_1/networks/N_1", null);
    await moved.shutdown();
    const none = new SmartFlow({ path: false });
    for (let i = 0; i < 60; i++) none.learnFromResponse("/organizations/O_1/networks/N_" + i, null);
    const flushed = await none.flush();
    await none.shutdown();
    console.log(JSON.stringify({ flushed, status: none.cacheStatus, org: none.resolveOrg("/networks/N_59") }));`;
  const { stdout, stderr } = await withHome(home, source);
  assert.deepEqual(JSON.parse(stdout), { flushed: false, status: "none", org: "O_1" });
  assert.equal(stderr, "");
  assert.deepEqual(JSON.parse(readFileSync(elsewhere, "utf8")).networks, [{ id: "N_1", organization: { id: "O_1" } }]);
  assert.deepEqual(readdirSync(home), [], "nothing under the home directory");
  assert.throws(() => new SmartFlow({ path: true }), /path must be a non-empty string or false, got true/);
});

test("a default cache file that cannot be written: the mappings stay in memory, the failure is said once, and nothing rejects", { timeout: 20_000 }, async () => {
  const home = join(scratch, "home-is-a-file");
  writeFileSync(home, "not a directory"); // so ~/.meraki/.cache cannot be created
  const source = `
    import { SmartFlow } from "sluicegate/smartflow";
    let clock = 1_000_000;
    const flow = new SmartFlow({ now: () => clock });
    for (let i = 0; i < 50; i++) flow.learnFromResponse("/organizations/O_1/networks/N_" + i, null); // saving at 50: fails
    const first = await flow.flush(); // after that save, failing too
    clock += 60_000; // past the backoff
    flow.learnFromResponse("/organizations/O_1/networks/N_50", null); // saving again: fails
    const second = await flow.flush();
    await flow.shutdown(); // its final save fails: it resolves all the same
    console.log(JSON.stringify({ first, second, org: flow.resolveOrg("/networks/N_7"), dirty: flow.snapshot().dirty }));`;
  const { stdout, stderr } = await withHome(home, source);
  assert.deepEqual(JSON.parse(stdout), { first: false, second: false, org: "O_1", dirty: 51 });
  const warnings = stderr.split("\n").filter((line) => line.startsWith("sluicegate SmartFlow:"));
  assert.equal(warnings.length, 1, stderr);
  assert.equal(
    warnings[0],
    `sluicegate SmartFlow: saving the cache to ${defaultCacheFile(home)} (the default cache file: pass path to keep it elsewhere, or path: false for none; said once) failed: Error: ENOTDIR: not a directory, mkdir '${join(home, ".meraki", ".cache")}'`,
  );
  assert.equal(existsSync(defaultCacheFile(home)), false);
});

test("a corrupt, stale, missing or unreadable cache file means starting empty, never an exception", () => {
  const dir = join(scratch, "bad");
  mkdirSync(dir, { recursive: true });
  const now = Date.now() / 1000;
  const cases = [
    ["corrupt.json", "{ not json", "malformed"],
    ["wrong-shape.json", JSON.stringify({ saved_at: formatSavedAt(now), networks: [{ id: "N_1" }] }), "malformed"],
    ["stale.json", cacheFile(now - 8 * 86_400, [["N_1", "O_1"]]), "expired"],
    ["no-date.json", JSON.stringify({ networks: [{ id: "N_1", organization: { id: "O_1" } }] }), "expired"],
    ["missing.json", null, "missing"],
  ];
  for (const [name, text, status] of cases) {
    if (text !== null) writeFileSync(join(dir, name), text);
    const flow = new SmartFlow({ path: join(dir, name) });
    assert.equal(flow.cacheStatus, status, name);
    assert.equal(flow.cacheFresh, false, name);
    assert.equal(flow.resolveOrg("/networks/N_1"), undefined, name);
  }
  // A TTL of null never expires the stale file; a longer TTL keeps it fresh.
  assert.equal(new SmartFlow({ path: join(dir, "stale.json"), cacheTtlSeconds: null }).resolveOrg("/networks/N_1"), "O_1");
  assert.equal(new SmartFlow({ path: join(dir, "stale.json"), cacheTtlSeconds: 9 * 86_400 }).cacheStatus, "loaded");
  // A directory where the file should be: the read fails, reported, and the limiter starts empty.
  const errors = [];
  const flow = new SmartFlow({ path: dir, onError: (_e, context) => errors.push(context) });
  assert.equal(flow.cacheStatus, "failed");
  assert.deepEqual(errors, ["loading the cache"]);
  // An asynchronous store that rejects: the same, once ready.
  const rejecting = new SmartFlow({ storage: { load: async () => Promise.reject(new Error("EIO")), save() {} }, ...quiet });
  return rejecting.ready.then(() => assert.equal(rejecting.cacheStatus, "failed"));
});

test("an asynchronous store is loaded before the first reservation", async () => {
  const text = cacheFile(Date.now() / 1000, [["N_1", "O_1"]]);
  const flow = new SmartFlow({ storage: { load: () => sleep(30).then(() => text), save() {} } });
  assert.equal(flow.cacheStatus, "pending");
  await flow.acquire("/networks/N_1/clients");
  assert.equal(flow.cacheStatus, "loaded");
  assert.equal(flow.snapshot().orgs, 1, "the request was charged to O_1, learned from the cache");
});

test("the cache is saved when 50 mappings changed, not before", async () => {
  const store = memoryStore();
  const flow = new SmartFlow({ storage: store });
  for (let i = 0; i < 49; i++) flow.learnFromResponse(`/organizations/O_1/networks/N_${i}`, null);
  flow.registerNetwork("N_registered", "O_1"); // registrations are not counted
  await sleep(10);
  assert.equal(store.saves, 0);
  flow.learnFromResponse("/organizations/O_1/devices/Q_49", null);
  await eventually(() => store.saves === 1);
  assert.equal(JSON.parse(store.text).networks.length, 50);
  assert.equal(flow.snapshot().dirty, 0);
});

test("a failing save loses nothing: the changes stay counted, and the first change after the backoff saves them", { timeout: 10_000 }, async () => {
  const store = memoryStore(null, 1);
  const errors = [];
  let clock = 1_000_000; // ms
  const flow = new SmartFlow({ storage: store, now: () => clock, onError: (e, context) => errors.push(`${context}: ${e.message}`) });
  for (let i = 0; i < 50; i++) flow.learnFromResponse(`/organizations/O_1/networks/N_${i}`, null);
  await eventually(() => store.saves === 1);
  assert.deepEqual(errors, ["saving the cache: disk full"]);
  assert.equal(store.text, null);
  assert.equal(flow.snapshot().dirty, 50, "nothing was marked saved");
  clock += 999;
  flow.learnFromResponse("/organizations/O_2/devices/Q_1", null); // inside the first backoff (1 s)
  await sleep(20);
  assert.equal(store.saves, 1, "no save while backing off");
  clock += 1;
  flow.learnFromResponse("/organizations/O_2/devices/Q_2", null); // the first change after it
  await eventually(() => store.text !== null, 3_000);
  const saved = JSON.parse(store.text);
  assert.equal(saved.networks.length, 50);
  assert.deepEqual(
    saved.devices.map((d) => d.serial),
    ["Q_1", "Q_2"],
  );
  assert.equal(flow.snapshot().dirty, 0);

  // An explicit flush reports its failure, and still keeps the changes.
  const failing = memoryStore(null, 1);
  const other = new SmartFlow({ storage: failing, ...quiet });
  other.learnFromResponse("/organizations/O_1/networks/N_1", null);
  await assert.rejects(other.flush(), /disk full/);
  assert.equal(other.snapshot().dirty, 1);
  assert.equal(await other.flush(), true);
  assert.equal(other.snapshot().dirty, 0);
  assert.equal(await new SmartFlow({ path: false }).flush(), false, "no storage: nothing to save");
});

test("a string storage key uses localStorage: round trip, a corrupt entry and an expired one", async () => {
  const items = new Map();
  globalThis.localStorage = {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => items.set(k, String(v)),
  };
  try {
    const flow = new SmartFlow({ storage: "smartflow" });
    assert.equal(flow.cacheStatus, "missing");
    flow.learnFromResponse("/organizations/O_1/networks/N_1", null);
    await flow.shutdown();
    assert.match(items.get("smartflow"), /"networks":\[\{"id":"N_1","organization":\{"id":"O_1"\}\}\]/);
    assert.equal(new SmartFlow({ storage: "smartflow" }).resolveOrg("/networks/N_1"), "O_1");
    items.set("smartflow", "{ corrupt");
    assert.equal(new SmartFlow({ storage: "smartflow" }).cacheStatus, "malformed");
    items.set("smartflow", cacheFile(Date.now() / 1000 - 604_801, [["N_1", "O_1"]]));
    const stale = new SmartFlow({ storage: "smartflow" });
    assert.equal(stale.cacheStatus, "expired");
    assert.equal(stale.resolveOrg("/networks/N_1"), undefined);
  } finally {
    delete globalThis.localStorage;
  }
});

// ---------------------------------------------------------------- packaging

test("the browser and workerd entries never import node:fs; npm pack ships the smartflow build", { timeout: 30_000 }, async () => {
  for (const file of ["js/smartflow.js", "js/smartflow-browser.js", "js/smartflow-workerd.js"]) {
    const source = readFileSync(join(root, file), "utf8");
    assert.doesNotMatch(source, /from\s+["']node:/, file);
  }
  const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, timeout: 25_000 });
  const files = JSON.parse(stdout)[0].files.map((f) => f.path);
  for (const f of [
    "pkg-smartflow/sluicegate_bg.wasm",
    "pkg-smartflow/sluicegate.js",
    "pkg-smartflow/sluicegate.d.ts",
    "js/smartflow.js",
    "types/entries/smartflow.d.ts",
    "js/smartflow-file.js",
    "js/smartflow-node.js",
    "js/smartflow-browser.js",
    "js/smartflow-workerd.js",
  ]) {
    assert.ok(files.includes(f), `${f} in the package`);
  }
  const main = await import("sluicegate");
  assert.equal(main.SmartFlowCore, undefined, "the browser client's build leaves Smart Flow out");
});

test("the workerd entry runs in a real Worker: reservations, learning, and no file store there", { timeout: 30_000 }, async () => {
  const script = `
    import { SmartFlow, fileStore } from "../../js/smartflow-workerd.js";
    export default {
      async fetch() {
        const flow = new SmartFlow({ orgRate: 10, orgCapacity: 10 });
        const waits = [];
        for (let i = 0; i < 11; i++) flow.acquire("/organizations/O_1/networks").then((w) => waits.push(w));
        await flow.acquire("/organizations/O_2/networks");
        flow.learnFromResponse("/networks/N_1", { organizationId: "O_1" });
        let fileError = null;
        try { fileStore("/tmp/x.json"); } catch (e) { fileError = e.message; }
        return Response.json({ zeroWaits: waits.filter((w) => w === 0).length, org: flow.resolveOrg("/networks/N_1/clients"), fileError });
      },
    };`;
  // The path only resolves the script's imports; the module is `script`.
  const mf = packageWorker({ scriptPath: "pkg-tests/fixtures/smartflow-worker.mjs", script });
  try {
    const res = await mf.dispatchFetch("http://smartflow.test/");
    assert.equal(res.status, 200);
    const out = await res.json();
    assert.equal(out.zeroWaits, 10, "ten went at once, the eleventh was still waiting its 100 ms");
    assert.equal(out.org, "O_1");
    assert.match(out.fileError, /needs Node's file system/);
  } finally {
    await mf.dispose();
  }
});
