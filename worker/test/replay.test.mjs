// `sluicegate replay`: the simulator's answers against the real worker's, request by request.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { describe, replay, shadowRules } from "../../js/replay.mjs";
import { appTrace, replayTrace } from "../../pkg-tests/support/replay-trace.mjs";
import { startEdge } from "../../js/testing.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const RULES = readFileSync(path.join(ROOT, "worker/rules.json"), "utf8");
const CLI = path.join(ROOT, "js/cli.mjs");

test("a 10-minute trace of 5,000 requests (bursts that trip blocks, two colos, IPv4, IPv6 /64s) at 30×: the simulator agrees with the edge on every request", {
  timeout: 120_000,
}, async () => {
  const traceText = replayTrace({ count: 5_000, durationS: 600 });
  const report = await replay({ rulesText: RULES, traceText, speed: 30 });
  assert.equal(report.requests, 5_000);
  assert.ok(report.edge.refused > 300, `bursts trip the rule's blocks (${report.edge.refused} refused)`);
  assert.deepEqual(report.errors, [], "no request failed on the way");
  assert.equal(report.edge.other, 0, "no request failed");
  assert.ok(report.compared > report.requests / 2, `most requests are far from a boundary (${report.compared} compared)`);
  assert.deepEqual(report.disagreements, []);
  assert.equal(report.agree, report.compared, "100 % agreement outside the timing-limited");
  assert.deepEqual(report.simulator, { admitted: report.edge.admitted, refused: report.edge.refused });
});

/** The example app's rules (the /api/ rule over each route's bucket, POST routes), with a rule that counts by a header. */
function appRules() {
  const example = JSON.parse(readFileSync(path.join(ROOT, "worker/examples/traffic.json"), "utf8"));
  const perKey = {
    id: "per-key",
    description: "Requests that carry an API key: 15 per 10 s per key, then block 5 s",
    match: { path: { starts_with: "/api/" } },
    characteristics: ['http.request.headers["x-api-key"]'],
    period: 10,
    requests_per_period: 15,
    mitigation_timeout: 5,
  };
  return JSON.stringify({ rules: [...example.rules, perKey] });
}

test("the example app's rules (every route bucket under the /api/ rule, POST routes, a header-counted rule) over three colos: the simulator agrees on ≥ 99.9 % of requests", {
  timeout: 120_000,
}, async () => {
  const traceText = appTrace({ count: 2_000, durationS: 120 });
  const report = await replay({ rulesText: appRules(), traceText, speed: 10 });
  assert.equal(report.requests, 2_000);
  assert.deepEqual(report.errors, [], "no request failed on the way");
  assert.equal(report.edge.other, 0, "every answer came from past the rules or from a rule");
  assert.ok(report.edge.refused > 200 && report.edge.admitted > 200, `both answers are common: ${JSON.stringify(report.edge)}`);
  assert.ok(report.compared > report.requests / 2, `most requests are far from a boundary (${report.compared} compared)`);
  assert.ok(report.share >= 0.999, `agreement ${report.agree} of ${report.compared}: ${JSON.stringify(report.disagreements.slice(0, 5))}`);
});

test("two overlapping rules (20 per 10 s per address and colo over a 0.5/s bucket of 10) from two colos: each request decided alike", { timeout: 60_000 }, async () => {
  const rules = {
    rules: [
      { id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src", "cf.colo.id"], period: 10, requests_per_period: 20, mitigation_timeout: 10 },
      { id: "geocode", match: { path: { equals: "/api/geocode" }, methods: ["GET"] }, characteristics: ["ip.src"], algorithm: "token_bucket", rate: 0.5, burst: 10 },
    ],
  };
  const rows = [];
  for (let i = 0; i < 400; i++) {
    const t = (i * 0.15).toFixed(3);
    rows.push(`${t},198.51.100.${1 + (i % 2)},${i % 3 === 0 ? "FRA" : "AMS"},${i % 4 === 3 ? "/api/other" : "/api/geocode"}`);
  }
  const report = await replay({ rulesText: JSON.stringify(rules), traceText: `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.ok(report.edge.refused > 50, `the rules refuse (${report.edge.refused})`);
  assert.deepEqual(report.disagreements, []);
  assert.equal(report.agree, report.compared);
});

test("a rule per store (a Durable Object, the isolate, the Cloudflare binding) from two colos: the first two replay request for request, the binding's requests are reported apart", {
  timeout: 60_000,
}, async () => {
  const rule = (id, store) => ({
    id,
    match: { path: { starts_with: `/${id}/` } },
    characteristics: ["ip.src"],
    store,
    period: 10,
    requests_per_period: 8,
    ...(store === "cloudflare" ? { binding: "C_LIMITER" } : { mitigation_timeout: 5 }),
  });
  const rules = { rules: [rule("a", "durable_object"), rule("b", "isolate"), rule("c", "cloudflare")] };
  const rows = [];
  for (let i = 0; i < 300; i++) rows.push(`${(i * 0.1 + 0.013 * (i % 7)).toFixed(3)},198.51.100.${1 + (i % 2)},${i % 4 < 2 ? "AMS" : "FRA"},/${"abc"[i % 3]}/x`);
  const report = await replay({ rulesText: JSON.stringify(rules), traceText: `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.ok(report.edge.refused > 60, `the rules refuse (${report.edge.refused})`);
  assert.ok(report.timingLimited >= 100, `every request on the binding is reported apart (${report.timingLimited})`);
  assert.ok(report.compared >= 100, `the object's and the isolate's requests are compared (${report.compared})`);
  assert.deepEqual(report.disagreements, []);
  assert.equal(report.agree, report.compared);
});

test("a tenants section behind a rule (a key's tenant, an unknown key, bodies over the cap, a tenant over its rate) from two colos: each request decided alike", {
  timeout: 90_000,
}, async () => {
  const sha256 = (text) => createHash("sha256").update(text).digest("hex");
  const rules = {
    rules: [{ id: "hooks", match: { path: { starts_with: "/hooks/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 40, mitigation_timeout: 5 }],
    tenants: {
      match: { path: { starts_with: "/hooks/" } },
      key_header: "x-api-key",
      keys: { [sha256("k-alpha")]: "alpha", [sha256("k-beta")]: "beta" },
      limits: { alpha: { rate: 2, burst: 4, max_body_bytes: 2000 }, beta: { rate: 0.5, burst: 2 } },
      max_body_bytes: 4000,
    },
  };
  const clients = [
    ["198.51.100.7", "AMS", "k-alpha"],
    ["198.51.100.8", "FRA", "k-alpha"],
    ["203.0.113.9", "AMS", "k-beta"],
    ["203.0.113.10", "FRA", "k-nobody"],
  ];
  const rows = [];
  for (let i = 0; i < 500; i++) {
    const [ip, colo, key] = clients[i % 7 === 6 ? 3 : i % 3];
    const bytes = i % 11 === 5 ? 3000 : 200; // over alpha's cap of 2,000 now and then
    rows.push(`${(i * 0.07).toFixed(3)},${ip},${colo},POST,/hooks/in,${key},${bytes}`);
  }
  const traceText = `t,ip.src,cf.colo.id,method,endpoint,header:x-api-key,header:content-length\n${rows.join("\n")}\n`;
  const report = await replay({ rulesText: JSON.stringify(rules), traceText, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.equal(report.edge.other, 0, "no refusal before the rules");
  assert.ok(report.edge.refused > 100 && report.edge.admitted > 100, `both answers are common: ${JSON.stringify(report.edge)}`);
  assert.deepEqual(report.disagreements, [], "every request outside the timing-limited decided alike");
  assert.equal(report.timingLimitedAgree, report.timingLimited, "and those too");
});

test("a tenant limit in shadow beside an enforced one: each request decided alike, the same tenant named in Sluicegate-Shadow", {
  timeout: 60_000,
}, async () => {
  const sha256 = (text) => createHash("sha256").update(text).digest("hex");
  const rules = {
    rules: [],
    tenants: {
      match: { path: { starts_with: "/hooks/" } },
      key_header: "x-api-key",
      keys: { [sha256("k-alpha")]: "alpha", [sha256("k-beta")]: "beta" },
      limits: { alpha: { rate: 1, burst: 3, enforce: false }, beta: { rate: 1, burst: 3 } },
    },
  };
  const rows = [];
  for (let i = 0; i < 240; i++) {
    const [ip, colo, key] = i % 2 ? ["203.0.113.9", "FRA", "k-beta"] : ["198.51.100.7", "AMS", "k-alpha"];
    rows.push(`${(i * 0.2).toFixed(3)},${ip},${colo},POST,/hooks/in,${key}`);
  }
  const traceText = `t,ip.src,cf.colo.id,method,endpoint,header:x-api-key\n${rows.join("\n")}\n`;
  const report = await replay({ rulesText: JSON.stringify(rules), traceText, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.ok(report.edge.refused > 20, `beta's limit refuses: ${JSON.stringify(report.edge)}`);
  const { edge, simulator } = report.shadow;
  assert.ok(edge.byRule["tenant:alpha"] > 20, `alpha's limit refuses in shadow: ${JSON.stringify(edge)}`);
  assert.equal(edge.byRule["tenant:beta"], undefined, "an enforced limit names no shadow refusal");
  assert.deepEqual(simulator, edge, "the simulator names the same shadow refusals");
  assert.deepEqual(report.disagreements, [], "every request outside the timing-limited decided alike");
  assert.equal(report.timingLimitedAgree, report.timingLimited, "and those too");
});

test("the checks before the body is read (per address, per isolate) in front of a rule: each request decided alike", { timeout: 60_000 }, async () => {
  const rules = {
    pre_read: { per_ip: { rate: 2, burst: 4 }, node: { rate: 20, burst: 30 } },
    rules: [{ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 15, mitigation_timeout: 5 }],
  };
  const rows = [];
  for (let i = 0; i < 400; i++) {
    // bursts from a few addresses: over 2 a second each now and then, and over 20 a second together
    const t = (Math.floor(i / 8) * 0.4 + (i % 8) * 0.01).toFixed(3);
    rows.push(`${t},198.51.100.${1 + (i % 5)},AMS,${i % 6 === 5 ? "/static" : "/api/x"}`);
  }
  const report = await replay({ rulesText: JSON.stringify(rules), traceText: `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.equal(report.edge.other, 0, "every refusal is a rule's or a check's the simulator names");
  assert.ok(report.edge.refused > 50, `the checks and the rule refuse (${report.edge.refused})`);
  assert.deepEqual(report.disagreements, []);
  assert.equal(report.timingLimitedAgree, report.timingLimited);
});

test("rules in shadow and partly enforced around an enforced one: each request decided alike, with the same rules named in Sluicegate-Shadow", { timeout: 60_000 }, async () => {
  const api = { match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10 };
  const rules = {
    rules: [
      { id: "watch", ...api, requests_per_period: 5, mitigation_timeout: 5, enforce: false },
      { id: "api", ...api, requests_per_period: 12, mitigation_timeout: 10 },
      { id: "trial", ...api, requests_per_period: 8, enforce: 0.5 },
    ],
  };
  const rows = [];
  for (let i = 0; i < 360; i++) {
    // addresses 1 and 2 at 25 requests per 10 s, 3 to 8 at 12.5: over every rule's limit
    const address = [1, 1, 2, 2, 3, 4, 5, 6, 7, 8][i % 10];
    rows.push(`${(i * 0.08).toFixed(3)},198.51.100.${address},AMS,${i % 9 === 8 ? "/static" : "/api/x"}`);
  }
  const report = await replay({ rulesText: JSON.stringify(rules), traceText: `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`, speed: 10 });
  assert.deepEqual(report.errors, []);
  assert.equal(report.edge.other, 0);
  assert.ok(report.edge.refused > 30 && report.edge.admitted > 30, `both answers: ${JSON.stringify(report.edge)}`);
  const { edge, simulator } = report.shadow;
  assert.ok(edge.byRule.watch > 50 && edge.byRule.trial > 0, `shadow refusals by both rules: ${JSON.stringify(edge)}`);
  assert.equal(edge.byRule.api, undefined, "the enforced rule refuses for real");
  assert.deepEqual(simulator, edge, "the simulator names the same shadow refusals");
  assert.ok(report.compared > report.requests / 3, `most requests compared (${report.compared})`);
  assert.deepEqual(report.disagreements, []);
  assert.equal(report.agree, report.compared);
  assert.deepEqual(shadowRules("watch;retry-after=3, trial;unavailable"), ["watch", "trial"]);
  assert.deepEqual(shadowRules(null), []);
});

test("a running edge with other rules than the simulator's disagrees, and replay says where (exit 1)", { timeout: 60_000 }, async () => {
  const stricter = JSON.parse(RULES);
  stricter.rules[0].requests_per_period = 5;
  const edge = await startEdge({ rules: stricter });
  const dir = mkdtempSync(path.join(tmpdir(), "replay-"));
  try {
    const rows = Array.from({ length: 12 }, (_, i) => `${(i * 0.05).toFixed(2)},198.51.100.9,AMS,/api/ping`);
    writeFileSync(path.join(dir, "trace.csv"), `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`);
    writeFileSync(path.join(dir, "rules.json"), RULES);
    const run = await promisify(execFile)(process.execPath, [CLI, "replay", "--rules", "rules.json", "--trace", "trace.csv", "--edge", edge.url, "--json"], {
      cwd: dir,
    }).then(
      () => assert.fail("replay exits 1 when a request disagrees"),
      (error) => error,
    );
    assert.equal(run.code, 1, run.stderr);
    assert.ok(run.stdout.trim(), `replay printed its report: ${run.stderr}`);
    const report = JSON.parse(run.stdout);
    assert.deepEqual(report.edge, { admitted: 5, refused: 7, other: 0 });
    assert.deepEqual(report.simulator, { admitted: 12, refused: 0 });
    assert.equal(report.disagreements.length + (report.timingLimited - report.timingLimitedAgree), 7);
    for (const d of report.disagreements) assert.deepEqual([d.edge, d.simulator], [429, "admitted"]);
  } finally {
    await edge.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a running edge with a rule in shadow the simulator lacks: the decisions agree, the shadow sets do not, and replay says where", { timeout: 60_000 }, async () => {
  const watched = JSON.parse(RULES);
  const watch = { id: "watch", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 5, enforce: false };
  watched.rules.unshift(watch);
  const edge = await startEdge({ rules: watched });
  try {
    const rows = Array.from({ length: 12 }, (_, i) => `${(i * 0.05).toFixed(2)},198.51.100.9,AMS,/api/ping`);
    const report = await replay({ rulesText: RULES, traceText: `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`, edge: edge.url });
    assert.deepEqual(report.edge, { admitted: 12, refused: 0, other: 0 });
    assert.deepEqual(report.simulator, { admitted: 12, refused: 0 });
    assert.deepEqual(report.shadow, { edge: { requests: 7, byRule: { watch: 7 } }, simulator: { requests: 0, byRule: {} } });
    assert.equal(report.disagreements.length + (report.timingLimited - report.timingLimitedAgree), 7);
    for (const d of report.disagreements) assert.deepEqual([d.simulator, d.edgeShadow, d.simulatorShadow], ["admitted", ["watch"], []]);
    assert.match(describe(report), /edge 7 requests refused in shadow \(watch 7\); simulator 0 requests refused in shadow \(none\)/);
  } finally {
    await edge.close();
  }
});

test("bad input is refused before anything is sent, naming what is wrong (exit 2)", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "replay-"));
  const run = (args) =>
    promisify(execFile)(process.execPath, [CLI, "replay", ...args], { cwd: dir }).then(
      (r) => ({ code: 0, ...r }),
      (e) => e,
    );
  try {
    writeFileSync(path.join(dir, "rules.json"), RULES);
    writeFileSync(path.join(dir, "bad-rules.json"), '{"rules":[{"id":"x"}]}');
    writeFileSync(path.join(dir, "trace.csv"), "t,ip.src\n1,198.51.100.1\n");
    writeFileSync(path.join(dir, "no-ip.csv"), "t,client\n1,a\n");
    writeFileSync(path.join(dir, "bad-ip.csv"), "t,ip.src\n1,not-an-ip\n");
    writeFileSync(path.join(dir, "bad-t.csv"), "t,ip.src\n1,198.51.100.1\nsoon,198.51.100.1\n");
    const cases = [
      [["--trace", "trace.csv"], /--rules and --trace are required/],
      [["--rules", "rules.json", "--trace", "trace.csv", "--speed", "0"], /--speed must be a number above 0/],
      [["--rules", "rules.json", "--trace", "trace.csv", "--speed", "4", "--edge", "http://127.0.0.1:9"], /--speed needs the edge this command starts/],
      [["--rules", "bad-rules.json", "--trace", "trace.csv"], /rules: .*"x"/],
      [["--rules", "rules.json", "--trace", "no-ip.csv"], /the header needs t and ip.src columns/],
      [["--rules", "rules.json", "--trace", "bad-ip.csv"], /trace line 2: ip.src is not an IP address: "not-an-ip"/],
      [["--rules", "rules.json", "--trace", "bad-t.csv"], /trace line 3: t must be a number of seconds ≥ 0, got "soon"/],
      [["--rules", "missing.json", "--trace", "trace.csv"], /missing.json: cannot read: No such file or directory/],
      [["--rules", "rules.json", "--trace", "trace.csv", "--bogus"], /unknown argument --bogus/],
    ];
    for (const [args, message] of cases) {
      const result = await run(args);
      assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(" "));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a malformed SLUICEGATE_CLOCK refuses to start, naming it", async () => {
  for (const value of ["abc", "30,1,2,3", "0,1000,0", "30,,0", "12abc,1,0"]) {
    await assert.rejects(startEdge({ vars: { SLUICEGATE_CLOCK: value } }), /SLUICEGATE_CLOCK must be "K,realStartMs,virtualStartMs"/, value);
  }
});

test("a set clock never gives two decisions the same instant (a burst replays in the order the edge decided it)", async () => {
  const edge = await startEdge({ rules: RULES, vars: { SLUICEGATE_CLOCK: `1,${Date.now()},0` } });
  try {
    const answers = await Promise.all(
      Array.from({ length: 40 }, () =>
        edge.fetch("/api/ping", { headers: { "cf-connecting-ip": "198.51.100.20" }, cf: { colo: "AMS" } }).then(async (res) => {
          await res.arrayBuffer();
          return Number(res.headers.get("sluicegate-clock"));
        }),
      ),
    );
    assert.ok(
      answers.every((ms) => Number.isInteger(ms) && ms >= 0),
      `every answer reports the clock: ${answers}`,
    );
    assert.equal(new Set(answers).size, answers.length, `40 decisions at 40 instants: ${[...answers].sort((a, b) => a - b)}`);
  } finally {
    await edge.close();
  }
});
