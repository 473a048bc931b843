// The rules file's JSON Schema (schema/rules.json, shipped as sluicegate/schema/rules.json)
// against the edge's own validator, both ways: every rules file the repository, the README and
// the guide show validates under both; files the validator refuses are refused by the schema wherever a
// schema can say so (a repeated key or a non-normal path it cannot).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import { documents } from "./support/readme.mjs";
import "../js/edge-node.js"; // instantiates the edge's build
import { checkRulesLines } from "../pkg-edge/sluicegate.js";
import { checkConfig } from "sluicegate/sim";

const ROOT = path.resolve(import.meta.dirname, "..");
const read = (rel) => readFileSync(path.join(ROOT, rel), "utf8");
const schema = JSON.parse(read("schema/rules.json"));
const validate = new Ajv2020({ allErrors: true, strict: false }).compile(schema);

/** Whether the edge's validator accepts `text`, and its problems. */
function edge(text) {
  const out = checkRulesLines(text);
  return "problems" in out ? out.problems : [];
}

/** The schema's problems with `text`, as `path: message`. */
function schemaProblems(text) {
  return validate(JSON.parse(text)) ? [] : validate.errors.map((e) => `${e.instancePath || "/"}: ${e.message}`);
}

/** The JSON objects README.md and the guide show (json blocks that are whole objects), with where. */
function shownObjects() {
  return documents(ROOT).flatMap(([file, text]) =>
    text
      .split("```json\n")
      .slice(1)
      .map((block) => block.split("\n```")[0])
      .flatMap((block, i) => {
        try {
          const value = JSON.parse(block);
          return value && typeof value === "object" && !Array.isArray(value) ? [{ where: `${file} json block ${i + 1}`, text: block, value }] : [];
        } catch {
          return []; // a fragment (`"egress": { … }`), an error body or an elided list
        }
      }),
  );
}

test("every rules file in the repository, the README and the guide validates under the schema and the edge alike", () => {
  const files = ["worker/rules.json", "worker/examples/traffic.json"].map((rel) => [rel, read(rel)]);
  const shown = shownObjects()
    .filter(({ value }) => Array.isArray(value.rules))
    .map(({ where, text }) => [where, text]);
  assert.ok(shown.length >= 4, `${shown.length} rules files shown`);
  for (const [name, text] of [...files, ...shown]) {
    assert.deepEqual(edge(text), [], `${name}: the edge accepts it`);
    assert.deepEqual(schemaProblems(text), [], `${name}: the schema accepts it`);
  }
  // the repository's own files name the schema, as a user's would
  for (const [name, text] of files) assert.equal(JSON.parse(text).$schema, "../schema/rules.json", name);
});

const rule = (fields) => JSON.stringify({ rules: [{ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], ...fields }] });
const windowed = { period: 10, requests_per_period: 20 };

test("files both accept: every store, algorithm and section", () => {
  for (const text of [
    rule(windowed),
    rule({ ...windowed, store: "isolate", mitigation_timeout: 10 }),
    rule({ store: "cloudflare", binding: "API_LIMITER", period: 60, requests_per_period: 100 }),
    rule({ store: "cloudflare", binding: "API_LIMITER", algorithm: "fixed_window", period: 10, requests_per_period: 100, mitigation_timeout: 30 }),
    rule({ algorithm: "token_bucket", rate: 0.5, burst: 10, store: "isolate" }),
    rule({ algorithm: "sliding_window", period: 60, requests_per_period: 50_000 }),
    JSON.stringify({
      $schema: "./node_modules/sluicegate/schema/rules.json",
      rules: [],
      capabilities: false,
      log: { decisions: "refusals", sample: 0.1 },
      analytics: { identities: "hashed", dataset: "DECISIONS" },
      trusted_proxies: ["10.0.0.0/8"],
      pre_read: { per_ip: { rate: 10, burst: 20 }, source_bytes_per_second: null },
      tenants: { match: { path: { starts_with: "/hooks/" } }, tenant_header: "x-tenant", default: { rate: 1, burst: 2 }, scope: "isolate" },
      upstreams: [{ id: "db", match: { path: { starts_with: "/" } }, max_in_flight: 4, scope: "fleet", lease: 30 }],
      egress: { providers: [{ id: "overpass", mirrors: ["https://overpass-api.de/api/"], min_interval_ms: 1000, cache: { ttl_s: 60, refresh: "behind" } }] },
    }),
  ]) {
    assert.deepEqual(edge(text), [], `the edge accepts ${text}`);
    assert.deepEqual(schemaProblems(text), [], `the schema accepts ${text}`);
  }
});

test("files the edge refuses, the schema refuses too", () => {
  const fixtures = readdirSync(path.join(ROOT, "tests/fixtures/rules"))
    // a repeated key is invisible once parsed: only the edge's strict reader sees it
    .filter((f) => f !== "duplicate-key.json")
    .map((f) => [f, read(`tests/fixtures/rules/${f}`)]);
  assert.ok(fixtures.length >= 8);
  const crafted = [
    ["an unknown field", rule({ ...windowed, perod: 10 })],
    ["an unknown store", rule({ ...windowed, store: "redis" })],
    ["a binding period of 30 s", rule({ store: "cloudflare", binding: "API_LIMITER", period: 30, requests_per_period: 20 })],
    ["an algorithm the binding does not count by", rule({ store: "cloudflare", binding: "API_LIMITER", algorithm: "sliding_log", ...windowed })],
    ["a cloudflare rule without its binding", rule({ store: "cloudflare", ...windowed })],
    ["a binding on another store", rule({ ...windowed, binding: "API_LIMITER" })],
    ["the Durable Object's binding name", rule({ store: "cloudflare", binding: "RATE_LIMITER", ...windowed })],
    ["a token bucket with a period", rule({ algorithm: "token_bucket", rate: 1, burst: 2, period: 10 })],
    ["a sliding log of 20,000", rule({ period: 10, requests_per_period: 20_000 })],
    ["no characteristics", JSON.stringify({ rules: [{ id: "api", match: {}, ...windowed }] })],
    ["capabilities: true", JSON.stringify({ rules: [], capabilities: true })],
    ["a sample of 0", JSON.stringify({ rules: [], log: { sample: 0 } })],
    ["analytics: true", JSON.stringify({ rules: [], analytics: true })],
    ["identities neither plain nor hashed", JSON.stringify({ rules: [], analytics: { identities: "sha256" } })],
    ["a dataset named like no binding", JSON.stringify({ rules: [], analytics: { dataset: "9lives" } })],
    ["tenants named by the sender without a default", JSON.stringify({ rules: [], tenants: { match: {}, tenant_header: "x-tenant" } })],
    ["tenants scope everywhere", JSON.stringify({ rules: [], tenants: { match: {}, key_header: "x-api-key", scope: "everywhere" } })],
    ["burst_bytes without bytes_per_second", JSON.stringify({ rules: [], tenants: { match: {}, tenant_header: "x-t", default: { rate: 1, burst: 1, burst_bytes: 10 } } })],
    ["a provider with nothing bounding its calls", JSON.stringify({ rules: [], egress: { providers: [{ id: "p", mirrors: ["https://example.com/"] }] } })],
    ["a lease on an isolate budget", JSON.stringify({ rules: [], upstreams: [{ id: "db", match: {}, max_in_flight: 2, lease: 30 }] })],
    ["$schema that is not a string", JSON.stringify({ $schema: 1, rules: [] })],
  ];
  for (const [name, text] of [...fixtures, ...crafted]) {
    assert.notDeepEqual(edge(text), [], `${name}: the edge refuses it`);
    assert.notDeepEqual(schemaProblems(text), [], `${name}: the schema refuses it`);
  }
});

// The simulator's configuration: schema/sim-config.json beside the simulator's own check.
const simSchema = JSON.parse(read("schema/sim-config.json"));
const simAjv = new Ajv2020({ allErrors: true, strict: false });
simAjv.addSchema(schema, "rules.json");
const validateSim = simAjv.compile(simSchema);
const simProblems = (value) => (validateSim(value) ? [] : validateSim.errors.map((e) => `${e.instancePath || "/"}: ${e.message}`));
const simChecks = (text) => {
  try {
    checkConfig(text);
    return [];
  } catch (error) {
    return [error.message];
  }
};

test("every simulator configuration the repository ships validates under its schema and the simulator alike", () => {
  const dirs = ["examples", "docs/examples", "www/examples"];
  const configs = dirs.flatMap((dir) =>
    readdirSync(path.join(ROOT, dir))
      .filter((f) => f.endsWith(".json"))
      .map((f) => `${dir}/${f}`),
  );
  const fixtures = readdirSync(path.join(ROOT, "tests/fixtures/sim/configs"))
    .filter((f) => !f.startsWith("bad-") && !PYTHON_READINGS.has(f))
    .map((f) => `tests/fixtures/sim/configs/${f}`);
  assert.ok(configs.length >= 10 && fixtures.length >= 10);
  // and the configurations the guide shows (objects with clients), as written there
  const shown = shownObjects().filter(({ value }) => Array.isArray(value.clients));
  assert.ok(shown.length >= 1, "the guide shows a configuration");
  for (const { where, text, value } of shown) {
    assert.deepEqual(simChecks(text), [], `${where}: the simulator accepts it`);
    assert.deepEqual(simProblems(value), [], `${where}: the schema accepts it`);
  }
  for (const rel of [...configs, ...fixtures]) {
    const value = JSON.parse(read(rel));
    // a path to a rules file is read by the command line and the playground: check the object here
    const inline = typeof value.edge_rules === "string" ? { ...value, edge_rules: JSON.parse(read(path.join(path.dirname(rel), value.edge_rules))) } : value;
    assert.deepEqual(simChecks(JSON.stringify(inline)), [], `${rel}: the simulator accepts it`);
    assert.deepEqual(simProblems(value), [], `${rel}: the schema accepts it`);
  }
});

/** Fixtures of the reference's Python readings (numbers as strings, a string as a list): the simulator reads them, the schema describes the documented format. */
const PYTHON_READINGS = new Set(["python-quirks.json", "reference-crash-quota.json"]);

test("configurations the simulator refuses, the schema refuses too", () => {
  // bad JSON never reaches a schema; a start after the end is arithmetic; a configuration with no clients is
  // refused only when no trace brings the traffic
  const unsayable = new Set(["bad-json-syntax.json", "bad-start-after-end.json", "bad-no-clients.json"]);
  const bad = readdirSync(path.join(ROOT, "tests/fixtures/sim/configs")).filter((f) => f.startsWith("bad-") && !unsayable.has(f));
  assert.ok(bad.length >= 15);
  const crafted = [
    ["an unknown field", { policies: [{ algorithm: "gcra", rate: 1 }], clients: [], durration_s: 1 }],
    ["an edge spread of 0 isolates", { edge_rules: { rules: [] }, edge_spread: { isolates: 0 } }],
    ["a rule the edge refuses", { edge_rules: { rules: [{ id: "api", match: {}, characteristics: ["ip.src"], store: "redis", period: 10, requests_per_period: 1 }] } }],
  ];
  for (const [name, value] of [...bad.map((f) => [f, JSON.parse(read(`tests/fixtures/sim/configs/${f}`))]), ...crafted]) {
    assert.notDeepEqual(simChecks(JSON.stringify(value)), [], `${name}: the simulator refuses it`);
    assert.notDeepEqual(simProblems(value), [], `${name}: the schema refuses it`);
  }
});
