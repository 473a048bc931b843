// The built npm package, imported by its name as a user would (Node entry).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import init, { TokenBucket, clientIdentity, validateRules } from "sluicegate/edge";

const defaultRules = readFileSync(new URL("../worker/rules.json", import.meta.url), "utf8");

test("the browser client entry leaves the edge tooling out; sluicegate/edge exports its named API only", async () => {
  const client = await import("sluicegate");
  assert.equal(client.validateRules, undefined);
  assert.equal(typeof client.Pacer, "function");
  assert.equal(typeof client.fetchForecasts, "function");
  const edge = await import("sluicegate/edge");
  assert.equal(typeof edge.validateRules, "function");
  // the wasm's own classes are not public API: the entries name what they export
  assert.deepEqual(Object.keys(edge).sort(), ["TokenBucket", "clientIdentity", "default", "validateRules"]);
  assert.equal(edge.PacerCore, undefined);
});

test("the package loads in Node without a fetch of the .wasm, and init() is a no-op after", async () => {
  await init();
  assert.equal(typeof validateRules, "function");
});

test("validateRules accepts the worker's default rules and reports their policies", () => {
  assert.deepEqual(validateRules(defaultRules), [{ id: "api", policy: '"api";q=20;w=10' }]);
});

test("validateRules throws one line per problem, naming the rule and the field", () => {
  const bad = JSON.stringify({
    rules: [{ id: "api", match: {}, characteristics: ["ip.src", "asn"], period: 0, requests_per_period: -1 }],
  });
  assert.throws(
    () => validateRules(bad),
    (e) => {
      const lines = e.message.split("\n");
      assert.equal(lines.length, 3, e.message);
      assert.ok(lines.every((l) => l.includes('rules[0] ("api")')));
      assert.match(e.message, /field "characteristics": unknown characteristic "asn"/);
      assert.match(e.message, /field "period"/);
      assert.match(e.message, /field "requests_per_period".*got -1/);
      return true;
    },
  );
});

test("clientIdentity counts the rightmost forwarded hop and IPv6 by its /64", () => {
  assert.deepEqual(clientIdentity({ xForwardedFor: "1.2.3.4, 198.51.100.7" }), {
    ip: "198.51.100.7",
    source: "x-forwarded-for",
  });
  assert.deepEqual(clientIdentity({ cfConnectingIp: "2001:db8:1:2:dead:beef::1", xForwardedFor: "9.9.9.9" }), {
    ip: "2001:db8:1:2::/64",
    source: "cf-connecting-ip",
  });
  assert.equal(clientIdentity({ peer: "not an address" }), undefined);
  assert.throws(() => clientIdentity({ peer: 42 }), /peer must be a string/);
});

test("TokenBucket takes time in, refuses NaN, and says exactly when to come back", () => {
  const bucket = new TokenBucket(2, 1000, 2);
  assert.deepEqual(bucket.decide(0, 1), { allowed: true, remaining: 1, resetMs: 500 });
  assert.deepEqual(bucket.decide(0, 1), { allowed: true, remaining: 0, resetMs: 1000 });
  assert.deepEqual(bucket.decide(100, 1), { allowed: false, retryAfterMs: 400 });
  assert.equal(bucket.decide(500, 1).allowed, true);
  assert.throws(() => bucket.decide(Number.NaN, 1), /nowMs must be a finite number/);
  // check: the same decisions as one number (units left, or minus the wait in ms).
  const fast = new TokenBucket(2, 1000, 2);
  assert.deepEqual([fast.check(0, 1), fast.check(0, 1), fast.check(100, 1), fast.check(500, 1)], [1, 0, -400, 0]);
  assert.throws(() => fast.check(Number.NaN, 1), /nowMs must be a finite number/);
  assert.throws(() => fast.check(600, 1.5), /cost must be a whole number/);
  assert.throws(() => fast.check(600, 3), /cost/);
  assert.throws(() => fast.check(null, 1), /nowMs must be a number, got null/);
  assert.throws(() => fast.check(600, "1"), /cost must be a number, got string/);
  assert.throws(() => new TokenBucket(0, 1000, 1), /burst must be a whole number/);
  bucket.free();
});

test("TokenBucket maps each status of its core to its documented answer or error, in check and decide alike", () => {
  const bucket = new TokenBucket(2, 1000, 2);
  // Allowed: the units left; Denied: minus the wait (check), { allowed: false, retryAfterMs } (decide)
  assert.equal(bucket.check(0, 2), 0);
  assert.equal(bucket.check(0, 0), 0, "a cost of 0 is admitted and charges nothing");
  assert.deepEqual(bucket.decide(0, 1), { allowed: false, retryAfterMs: 500 });
  assert.equal(bucket.check(1, 1), -499);
  // InvalidNow, InvalidCost, CostTooHigh: errors naming the input, nothing charged
  for (const decide of [(now, cost) => bucket.check(now, cost), (now, cost) => bucket.decide(now, cost)]) {
    assert.throws(() => decide(-1, 1), /^Error: nowMs must be a finite number ≥ 0, got -1$/);
    assert.throws(() => decide(Number.POSITIVE_INFINITY, 1), /^Error: nowMs must be a finite number ≥ 0, got Infinity$/);
    assert.throws(() => decide(0, -1), /^Error: cost must be a whole number from 0 to 4294967295, got -1$/);
    assert.throws(() => decide(0, 2 ** 32), /^Error: cost must be a whole number from 0 to 4294967295, got 4294967296$/);
    assert.throws(() => decide(0, 3), /^Error: a request costing 3 can never fit a capacity of 2$/);
  }
  assert.deepEqual(bucket.decide(1000, 2), { allowed: true, remaining: 0, resetMs: 1000 }, "the refusals charged nothing");
  // a decision still reads its figures after the wasm memory has grown (the view is taken again)
  const many = Array.from({ length: 20_000 }, () => new TokenBucket(1e6, 1000, 1e6));
  assert.equal(bucket.check(2000, 1), 1);
  for (const b of many) b.free();
});

test("npm pack ships the .wasm (the web build's .gitignore is removed)", () => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: new URL("..", import.meta.url),
    encoding: "utf8",
  });
  const files = JSON.parse(out)[0].files.map((f) => f.path);
  for (const f of [
    "pkg/sluicegate_bg.wasm",
    "pkg/sluicegate.js",
    "pkg/sluicegate.d.ts",
    "pkg-edge/sluicegate_bg.wasm",
    "js/node.js",
    "js/browser.js",
    "js/workerd.js",
    "js/edge-node.js",
    "types/entries/index.d.ts",
    "pkg-sim/sluicegate_bg.wasm",
    "pkg-sim/sluicegate.js",
    "js/sim-node.js",
    "types/entries/sim.d.ts",
    "js/cli.mjs",
    "js/worker.js",
    "js/worker-core.js",
    "types/worker.d.ts",
    "js/hono.js",
    "types/hono.d.ts",
    "worker/pkg/sluicegate_worker.js",
    "worker/pkg/sluicegate_worker_bg.wasm",
  ]) {
    assert.ok(files.includes(f), `${f} in ${files.join(", ")}`);
  }
  // every file the exports map names, the declarations included, is in the package
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  // and the licences its `license` names, and the Node it runs on
  assert.equal(pkg.license, "MIT OR Apache-2.0");
  for (const licence of ["LICENSE-MIT", "LICENSE-APACHE"]) assert.ok(files.includes(licence), `${licence} in the package`);
  assert.equal(pkg.engines?.node, ">=20", "the runtime entries are tested on Node 20 (the system Node run below)");
  const targets = (value) => (typeof value === "string" ? [value] : Object.values(value).flatMap(targets));
  for (const target of [pkg.types, ...targets(pkg.exports)]) {
    assert.ok(files.includes(target.replace(/^\.\//, "")), `${target} (package.json) in the package`);
  }
  // the guide's pages (the README links them) and the example files they run ship too
  const pages = readdirSync(new URL("../docs", import.meta.url)).filter((f) => f.endsWith(".md"));
  for (const page of pages) assert.ok(files.includes(`docs/${page}`), `docs/${page} in the package`);
  for (const f of ["examples/orders-api.json", "docs/examples/token-bucket.json", "worker/rules.json", "schema/rules.json"]) assert.ok(files.includes(f), `${f} in the package`);
  // and nothing a user does not need: no sources, tests, build scripts or the book's settings
  const shipped =
    /^(js|types|pkg(-edge|-limit|-smartflow|-sim)?|worker\/pkg(-dev)?|schema|docs|examples)\/|^(worker\/(entry|entry-dev|edge)\.mjs|worker\/rules\.json|LICENSE-MIT|LICENSE-APACHE|README\.md|package\.json)$/;
  assert.deepEqual(
    files.filter((f) => !shipped.test(f) || f === "docs/book.toml"),
    [],
    "files in the package that no entry, page or example needs",
  );
});
