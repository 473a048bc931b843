// sluicegate/limit: keyed limits from JavaScript, as a user calls them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Limiter } from "sluicegate/limit";

const { vectors } = JSON.parse(readFileSync(new URL("./fixtures/limit-vectors.json", import.meta.url), "utf8"));

test("every algorithm decides the core's seeded arrivals exactly as the core's Keyed table does", () => {
  assert.equal(vectors.length, 12);
  for (const { options, arrivals, decisions } of vectors) {
    const limiter = new Limiter(options);
    const got = arrivals.map(([key, now, cost]) => {
      const r = limiter.limit(key, { now, cost });
      return [r.success, r.remaining, r.retryAfter];
    });
    assert.deepEqual(got, decisions, `${JSON.stringify(options)}`);
    assert.ok(limiter.size <= options.maxKeys);
  }
});

test("limit answers success, limit, remaining, reset and retryAfter, in ms on the clock of now", () => {
  const limiter = new Limiter({ algorithm: "sliding_log", limit: 2, windowMs: 10_000 });
  const first = { ...limiter.limit("ip:1", { now: 1_000 }) };
  assert.deepEqual(first, { success: true, limit: 2, remaining: 1, retryAfter: 0, reset: 11_000 });
  assert.deepEqual({ ...limiter.limit("ip:1", { now: 4_000 }) }, { success: true, limit: 2, remaining: 0, retryAfter: 0, reset: 14_000 });
  assert.deepEqual({ ...limiter.limit("ip:1", { now: 5_000 }) }, { success: false, limit: 2, remaining: 0, retryAfter: 6_000, reset: 14_000 });
  assert.equal(limiter.limit("ip:2", { now: 5_000 }).success, true, "another key has its own count");
  assert.equal(limiter.limit("ip:1", { now: 11_000 }).success, true, "the first request has left the window");
  // Without `now`, Date.now().
  const clock = new Limiter({ algorithm: "fixed_window", limit: 1, windowMs: 60_000 });
  const before = Date.now();
  const r = clock.limit("k");
  assert.ok(r.success && r.reset > before && r.reset <= Date.now() + 60_000);
});

test("the result object is reused; a spread or JSON keeps a copy with reset", () => {
  const limiter = new Limiter({ algorithm: "token_bucket", limit: 1, windowMs: 1_000 });
  const a = limiter.limit("a", { now: 0 });
  const copy = { ...a };
  const b = limiter.limit("a", { now: 0 });
  assert.equal(a, b, "one object per limiter: nothing is allocated per decision");
  assert.equal(copy.success, true);
  assert.equal(b.success, false);
  assert.deepEqual(JSON.parse(JSON.stringify(b)), { success: false, limit: 1, remaining: 0, retryAfter: 1_000, reset: 1_000 });
});

test("a limiter decides right after the wasm memory grows under it (its figures are read afresh)", () => {
  const limiter = new Limiter({ algorithm: "sliding_log", limit: 5, windowMs: 60_000 });
  assert.deepEqual({ ...limiter.limit("k", { now: 1_000 }) }, { success: true, limit: 5, remaining: 4, retryAfter: 0, reset: 61_000 });
  // Another limiter's keys grow the build's memory: the first one's view of its figures goes empty.
  const big = new Limiter({ algorithm: "sliding_log", limit: 50, windowMs: 60_000, maxKeys: 400_000 });
  for (let i = 0; i < 400_000; i++) big.limit(`key:${i}`, { now: 1_000, cost: 50 });
  assert.equal(big.size, 400_000);
  assert.deepEqual({ ...limiter.limit("k", { now: 2_000 }) }, { success: true, limit: 5, remaining: 3, retryAfter: 0, reset: 62_000 });
  assert.deepEqual(limiter.peek("k", { now: 2_000, cost: 4 }), { success: false, limit: 5, remaining: 0, retryAfter: 59_000 });
});

test("a full table refuses new keys until one is back at full quota, while its keys keep counting (fail closed)", () => {
  const limiter = new Limiter({ algorithm: "sliding_log", limit: 2, windowMs: 1_000, maxKeys: 2 });
  assert.equal(limiter.limit("a", { now: 0 }).success, true);
  assert.equal(limiter.limit("b", { now: 500 }).success, true);
  const refused = { ...limiter.limit("c", { now: 600 }) };
  assert.deepEqual([refused.success, refused.retryAfter], [false, 400], "until a's entry leaves, at 1,000 ms");
  assert.equal(limiter.limit("a", { now: 700 }).success, true, "a key in the table keeps its own count");
  assert.equal(limiter.limit("a", { now: 800 }).success, false);
  assert.equal(limiter.size, 2);
  // At 1,600 ms b is back at full quota (a is not: its request of 700 ms is in the window).
  assert.equal(limiter.limit("c", { now: 1_600 }).success, true);
  assert.equal(limiter.size, 2);
  assert.equal(limiter.limit("c", { now: 1_600 }).remaining, 0, "c holds b's slot, with its own count");
  const b = { ...limiter.limit("b", { now: 1_600 }) };
  assert.deepEqual([b.success, b.retryAfter], [false, 100], "b was swept; a new key again, refused until a frees up at 1,700 ms");
  // A request that leaves no trace (cost 0) is answered without a slot.
  assert.equal(limiter.limit("e", { now: 1_600, cost: 0 }).success, true);
  assert.equal(limiter.size, 2);
});

test("a flood of distinct keys never grows the table beyond maxKeys", () => {
  const limiter = new Limiter({ algorithm: "token_bucket", limit: 10, windowMs: 60_000, maxKeys: 1_000 });
  let admitted = 0;
  for (let i = 0; i < 20_000; i++) if (limiter.limit(`flood:${i}`, { now: 1_000 }).success) admitted++;
  assert.equal(admitted, 1_000);
  assert.equal(limiter.size, 1_000);
});

test("peek changes nothing; reset forgets a key; block refuses it for a while; sweep drops idle keys", () => {
  const limiter = new Limiter({ algorithm: "fixed_window", limit: 3, windowMs: 1_000 });
  assert.deepEqual(limiter.peek("k", { now: 100 }), { success: true, limit: 3, remaining: 2, retryAfter: 0 });
  assert.equal(limiter.size, 0, "peek stores nothing");
  limiter.limit("k", { now: 100, cost: 3 });
  assert.equal(limiter.peek("k", { now: 200 }).success, false);
  assert.equal(limiter.reset("k"), true);
  assert.equal(limiter.reset("k"), false);
  assert.equal(limiter.limit("k", { now: 200 }).remaining, 2, "afresh after reset");

  assert.equal(limiter.block("k", 5_000, { now: 300 }), true);
  assert.deepEqual([limiter.limit("k", { now: 2_000 }).success, limiter.limit("k", { now: 2_000 }).retryAfter], [false, 3_300]);
  assert.equal(limiter.block("new", 1_000, { now: 300 }), true, "a key with no state can be blocked");
  assert.equal(limiter.limit("new", { now: 1_200 }).retryAfter, 100);
  assert.equal(limiter.limit("k", { now: 5_300 }).success, true, "the block is over");

  limiter.limit("idle", { now: 5_300 });
  assert.equal(limiter.sweep({ now: 100_000 }), 3);
  assert.equal(limiter.size, 0);
  assert.equal(limiter.limit("k", { now: 100_000 }).remaining, 2);
});

test("count then block: blockMs refuses a key from its first refusal", () => {
  const limiter = new Limiter({ algorithm: "sliding_log", limit: 20, windowMs: 10_000, blockMs: 10_000 });
  for (let i = 0; i < 20; i++) assert.equal(limiter.limit("ip", { now: 0 }).success, true);
  assert.equal(limiter.limit("ip", { now: 100 }).retryAfter, 10_000);
  assert.equal(limiter.limit("ip", { now: 10_000 }).success, false, "blocked until 10,100 ms");
  assert.equal(limiter.limit("ip", { now: 10_100 }).success, true);
});

test("bad options and bad requests are refused with an error naming what was wrong", () => {
  const ok = { algorithm: "token_bucket", limit: 5, windowMs: 1_000 };
  const refuses = (options, pattern) => assert.throws(() => new Limiter(options), pattern);
  refuses(undefined, /limiter options must be an object/);
  refuses({ ...ok, algorithm: "leaky" }, /algorithm must be one of token_bucket, sliding_log, fixed_window, sliding_window, got `leaky`/);
  refuses({ ...ok, windowSize: 1 }, /unknown field `windowSize`/);
  refuses({ ...ok, limit: "5" }, /limit must be a number/);
  refuses({ algorithm: "token_bucket", windowMs: 1_000 }, /limit is required/);
  for (const key of ["limit", "windowMs", "burst", "blockMs", "maxKeys"]) {
    refuses({ ...ok, [key]: "5" }, new RegExp(`limiter options: ${key} must be a number, got string`));
    refuses({ ...ok, [key]: [5] }, new RegExp(`limiter options: ${key} must be a number, got array`));
  }
  refuses({ ...ok, limit: null }, /limiter options: limit must be a number, got null/);
  refuses({ ...ok, algorithm: 5 }, /limiter options: algorithm must be a string, got number/);
  refuses({ ...ok, limit: 0 }, /limit must be a whole number from 1/);
  refuses({ ...ok, limit: 2.5 }, /limit must be a whole number/);
  refuses({ ...ok, windowMs: 0 }, /windowMs must be a finite number of ms above 0/);
  refuses({ ...ok, windowMs: Infinity }, /windowMs must be a finite number/);
  refuses({ ...ok, maxKeys: 0 }, /maxKeys must be a whole number from 1/);
  refuses({ ...ok, blockMs: -1 }, /blockMs must be a finite number of ms ≥ 0/);
  refuses({ ...ok, algorithm: "sliding_log", burst: 3 }, /burst applies to the token_bucket algorithm only/);

  const limiter = new Limiter(ok);
  assert.throws(() => limiter.limit(42), /limiter key must be a string, got number/);
  assert.throws(() => limiter.limit(undefined), /limiter key must be a string, got undefined/);
  assert.throws(() => limiter.limit("k", { cost: -1 }), /cost must be a whole number from 0/);
  assert.throws(() => limiter.limit("k", { cost: 1.5 }), /cost must be a whole number/);
  assert.throws(() => limiter.limit("k", { cost: 6 }), /cost 6 exceeds the limit of 5/);
  assert.throws(() => limiter.limit("k", { now: Number.NaN }), /now must be a finite number of ms ≥ 0, got NaN/);
  // each refusing status of the core (InvalidNow, InvalidCost, CostTooHigh) is its RangeError, from limit and peek, for a new key and a known one
  const known = new Limiter(ok);
  assert.equal(known.limit("k", { now: 0 }).success, true);
  for (const key of ["fresh", "k"]) {
    for (const call of [(o) => known.limit(key, o), (o) => known.peek(key, o)]) {
      assert.throws(
        () => call({ now: -1 }),
        (e) => e instanceof RangeError && e.message === "now must be a finite number of ms ≥ 0, got -1",
      );
      assert.throws(
        () => call({ now: 0, cost: 0.5 }),
        (e) => e instanceof RangeError && e.message === "cost must be a whole number from 0 to 4294967295, got 0.5",
      );
      assert.throws(
        () => call({ now: 0, cost: 6 }),
        (e) => e instanceof RangeError && e.message === "cost 6 exceeds the limit of 5: it could never be admitted",
      );
    }
  }
  assert.throws(() => limiter.limit("k", { now: -5 }), /now must be a finite number/);
  assert.throws(() => limiter.block("k", -1), /ms must be a finite number of ms ≥ 0/);
  // JS would turn these into numbers (null → 0: a free request); they are refused instead.
  assert.throws(() => limiter.limit("k", { cost: null }), /cost must be a number, got null/);
  assert.throws(() => limiter.limit("k", { cost: "2" }), /cost must be a number, got string/);
  assert.throws(() => limiter.limit("k", { now: null }), /now must be a number, got null/);
  assert.throws(() => limiter.limit("k", 5), /limit options must be an object/);
  assert.throws(() => limiter.peek("k", { now: "0" }), /now must be a number, got string/);
  assert.equal(limiter.size, 0, "nothing refused as input was stored");
  // Odd but valid keys are keys like any other.
  for (const key of ["", "ключ", "a\u0000b", "x".repeat(10_000)]) assert.equal(limiter.limit(key, { now: 0 }).success, true);
  assert.equal(limiter.size, 4);
});
