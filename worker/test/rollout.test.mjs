// Rolling a rule out through the admin API (`/v1/rules/:rule/enforce`), in workerd: a change
// takes effect on the next request, keeps the rule's counts, is audited, and survives a restart.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const TOKEN = "admin-token-0123456789";
// Two per minute per address, then blocked a minute; no tenants section (the rules routes need none).
const RULES = {
  rules: [
    {
      id: "api",
      match: { path: { starts_with: "/api/" } },
      characteristics: ["ip.src"],
      period: 60,
      requests_per_period: 2,
      mitigation_timeout: 60,
    },
  ],
};

const admin = async (edge, method, route, { token = TOKEN, body } = {}) => {
  const res = await fetch(`${edge.url}${route}`, { method, headers: { authorization: `Bearer ${token}` }, body });
  const text = await res.text();
  return { status: res.status, text, json: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : null };
};
const call = async (edge, ip) => {
  const res = await fetch(`${edge.url}/api/x`, { headers: { "cf-connecting-ip": ip } });
  await res.arrayBuffer();
  return { status: res.status, shadow: res.headers.get("sluicegate-shadow") };
};
const put = (edge, rule, enforce) => admin(edge, "PUT", `/v1/rules/${rule}/enforce`, { body: JSON.stringify({ enforce }) });

describe("rolling a rule out through the admin API", () => {
  let backend;
  let edge;
  let dir;
  before(async () => {
    backend = await originServer((_req, res) => res.end("origin"));
    dir = mkdtempSync(path.join(tmpdir(), "sluicegate-rollout-"));
    edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
  });
  after(async () => {
    await edge?.close();
    await backend?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a change takes effect on the next request, keeps the rule's counts and is audited", async () => {
    assert.deepEqual((await admin(edge, "GET", "/v1/rules")).json, {
      rules: [{ rule: "api", enforce: true, source: "rules file", rules_file: true }],
      stale_overrides: [],
    });
    const ip = "198.51.100.21";
    assert.deepEqual([(await call(edge, ip)).status, (await call(edge, ip)).status, (await call(edge, ip)).status], [200, 200, 429]);

    const shadow = await put(edge, "api", false);
    assert.equal(shadow.status, 200, shadow.text);
    assert.equal(shadow.json.enforce, false);
    assert.equal(shadow.json.source, "override");
    // The next request: the key is still blocked (its count went on), now in shadow.
    const next = await call(edge, ip);
    assert.equal(next.status, 200);
    assert.match(next.shadow ?? "", /^api;retry-after=\d+$/);
    const audit = JSON.parse((await edge.waitForLog(/"sluicegate":"admin","action":"put","rule":"api"/)).message);
    assert.deepEqual([audit.before, audit.after, audit.changed], [null, false, true]);
    assert.ok(audit.by && audit.at_ms > 0);

    // The same again changes nothing, and says so.
    assert.equal((await put(edge, "api", false)).status, 200);
    await edge.waitForLog(/"action":"put","rule":"api","before":false,"after":false,"changed":false/);

    // Enforced again: refused on the very next request.
    assert.equal((await put(edge, "api", true)).status, 200);
    assert.equal((await call(edge, ip)).status, 429);
  });

  test("what is wrong is named: the field, the rule, the method", async () => {
    for (const [body, field] of [
      [{ enforce: 1 }, "enforce"],
      [{ enforce: 0 }, "enforce"],
      [{ enforce: "0.5" }, "enforce"],
      [{ enforce: 0.5, rule: "api" }, "rule"],
      [{}, "enforce"],
    ]) {
      const r = await admin(edge, "PUT", "/v1/rules/api/enforce", { body: JSON.stringify(body) });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(JSON.parse(r.text).detail, new RegExp(`field "${field}"`));
    }
    const unknown = await put(edge, "nope", false);
    assert.equal(unknown.status, 404);
    assert.match(JSON.parse(unknown.text).detail, /no rule "nope".*GET \/v1\/rules/);
    assert.equal((await admin(edge, "POST", "/v1/rules/api/enforce", { body: "{}" })).status, 405);
    assert.equal((await admin(edge, "GET", "/v1/rules", { token: "wrong" })).status, 401);
    assert.equal((await admin(edge, "DELETE", "/v1/rules/nope/enforce")).status, 404, "no override to delete");
  });

  test("the last setting survives a restart", async () => {
    const fresh = "203.0.113.9";
    assert.equal((await put(edge, "api", 0.5)).status, 200);
    await edge.close();
    edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
    const entry = (await admin(edge, "GET", "/v1/rules/api/enforce")).json;
    assert.deepEqual([entry.enforce, entry.source, entry.rules_file], [0.5, "override", true]);
    assert.equal((await put(edge, "api", false)).status, 200);
    await edge.close();
    edge = await startEdge({ build: "deploy", rules: RULES, origin: backend.url, adminToken: TOKEN, persist: dir });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await call(edge, fresh));
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200],
      "still in shadow after the restart",
    );
    assert.deepEqual(
      answers.map((a) => a.shadow !== null),
      [false, false, true, true],
    );
    const gone = await admin(edge, "DELETE", "/v1/rules/api/enforce");
    assert.deepEqual([gone.status, gone.json.enforce, gone.json.source], [200, true, "rules file"]);
    assert.equal((await call(edge, fresh)).status, 429, "the rules file's enforce again");
  });
});
