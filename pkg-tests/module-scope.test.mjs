// The package's objects built at a Worker's top level: workerd forbids random values, timers
// and I/O there, so construction must leave all of them to first use.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { packageWorker } from "./support/workerd.mjs";

let mf;
let firstAnswer;

before(async () => {
  mf = packageWorker({ scriptPath: "pkg-tests/fixtures/module-scope-worker.mjs" });
  await mf.ready;
});

after(async () => {
  await mf?.dispose();
});

async function ask() {
  const res = await mf.dispatchFetch("http://module-scope.test/");
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

test("a Pacer, a LocationCache, a SmartFlow, a TokenBucket and a Limiter built at module scope start in workerd and work", async () => {
  const out = await ask();
  firstAnswer = out;
  assert.deepEqual(out.atModuleScope, { pacerReads: 0, cacheReads: 0, smartFlowLoads: 0 }, "no storage read at construction");
  assert.deepEqual(out.afterUse, { pacerReads: true, cacheReads: true, smartFlowLoads: 1 }, "storage read at first use, once");

  const { owner, ...pacer } = out.pacer;
  assert.match(owner, /^[0-9a-f-]{36}$/, "the pacer's owner id is a random UUID, made at first use");
  assert.deepEqual(pacer, { weight: 3, inFlight: 1, afterRelease: 0, spent: 3, ledger: [[3, true, 1]] });

  assert.deepEqual(out.cache, {
    sizeBefore: 0,
    first: { forecast: [21.5, 19] },
    second: { state: "hit", value: { forecast: [21.5, 19] } },
    loads: 1,
    size: 1,
  });

  assert.deepEqual(out.smartFlow, { waitedMs: 0, org: "O_1", cacheStatus: "missing", orgs: 1 });

  const [first, second, third] = out.bucket;
  assert.deepEqual([first.allowed, second.allowed, third.allowed], [true, true, false], "a burst of 2, then refused");
  assert.deepEqual([first.remaining, second.remaining], [1, 0]);
  assert.equal(third.retryAfterMs, 30_000, "the next token comes after one 30 s emission interval");

  assert.deepEqual(
    out.limited.map((r) => [r.success, r.remaining, r.limit]),
    [
      [true, 1, 2],
      [true, 0, 2],
      [false, 0, 2],
    ],
  );
  assert.ok(out.limited[2].retryAfter > 59_000 && out.limited[2].retryAfter <= 60_000, "refused until the first leaves the window");
  assert.ok(Math.abs(out.limited[1].reset - (Date.now() + 60_000)) < 5_000, "full again a window after the last admitted request");
  assert.equal(out.keys, 1);
});

test("the module-scope objects keep their state from one request to the next", async () => {
  assert.ok(firstAnswer, "the first request was answered");
  const out = await ask();
  assert.equal(out.pacer.owner, firstAnswer.pacer.owner, "one pacer, one owner id");
  assert.equal(out.pacer.spent, 6, "both requests' permits are spent in the window");
  assert.equal(out.cache.sizeBefore, 1);
  assert.equal(out.cache.loads, 0, "the cached result is served without a second load");
  assert.equal(out.afterUse.smartFlowLoads, 1, "the SmartFlow store is loaded once");
  assert.ok(
    out.bucket.every((d) => !d.allowed),
    "the bucket's burst stays spent",
  );
  assert.ok(
    out.limited.every((r) => !r.success),
    "the key's two requests per minute stay spent",
  );
});
