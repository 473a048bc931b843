// The package's workerd entry (js/workerd.js) in a real Worker: the wasm is imported as a
// compiled module, never compiled from bytes (which workerd forbids).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { packageWorker } from "./support/workerd.mjs";

let mf;

before(async () => {
  mf = packageWorker({ scriptPath: "pkg-tests/fixtures/package-worker.mjs" });
  await mf.ready;
});

after(async () => {
  await mf?.dispose();
});

test("both packages (client and edge) run in workerd through their workerd entries", async () => {
  const rules = readFileSync(new URL("../worker/rules.json", import.meta.url), "utf8");
  const res = await mf.dispatchFetch("http://pkg.test/", {
    method: "POST",
    body: rules,
    headers: { "cf-connecting-ip": "2001:db8:5:6::1" },
  });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    policies: ['"api";q=20;w=10'],
    identity: { ip: "2001:db8:5:6::/64", source: "cf-connecting-ip" },
    weight: 100,
  });
});

test("a bad rules file is a 400 naming the field, from inside workerd", async () => {
  const res = await mf.dispatchFetch("http://pkg.test/", { method: "POST", body: '{"rules":[{"id":"a"}]}' });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error, /rules\[0\] \("a"\): field "match": missing/);
});
