// LocationCache from the built package: TTL from the response, normalised keys, one fetch for
// identical requests, errors never cached, persistence across page loads.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LocationCache } from "sluicegate";
import { MemoryStorage } from "./support/budget.mjs";

test("identical requests in flight share one load; the value lives its TTL from the response", async () => {
  let clock = 1_000;
  const cache = new LocationCache({ ttlMs: 15 * 60_000, now: () => clock });
  const key = cache.key(52.5249, 13.4149, { daily: ["precipitation_sum", "temperature_2m_max"], forecast_days: 16 });
  assert.equal(key, cache.key(52.52, 13.41, { forecast_days: 16, daily: "temperature_2m_max,precipitation_sum" }));
  let loads = 0;
  const load = () =>
    new Promise((r) => {
      loads++;
      setTimeout(() => {
        clock = 5_000; // the response arrives 4 s later
        r({ t: 1 });
      }, 20);
    });
  const [a, b] = await Promise.all([cache.get(key, load), cache.get(key, load)]);
  assert.equal(loads, 1);
  assert.deepEqual(a, b);
  clock = 5_000 + 15 * 60_000 - 1;
  assert.equal(cache.lookup(key).state, "hit", "alive until 15 minutes after the response");
  clock += 1;
  assert.equal(cache.lookup(key).state, "miss");
});

test("by default a result lives 15 minutes from its response: served at 14:59.999 after it, not at 15:00", async () => {
  let clock = 1_000_000;
  const cache = new LocationCache({ now: () => clock });
  const key = cache.key(52.52, 13.41, { daily: ["temperature_2m_max"] });
  const value = await cache.get(key, async () => {
    clock += 3_000; // the response arrives 3 s after the request
    return { forecast: [1] };
  });
  const respondedAt = clock;
  clock = respondedAt + 14 * 60_000 + 59_999;
  assert.deepEqual(cache.lookup(key), { state: "hit", value });
  clock = respondedAt + 15 * 60_000;
  assert.equal(cache.lookup(key).state, "miss");
});

test("an error is never cached: the next request loads again", async () => {
  const cache = new LocationCache();
  const key = cache.key(48.85, 2.35, { daily: ["temperature_2m_max"] });
  await assert.rejects(
    cache.get(key, async () => Promise.reject(new Error("upstream down"))),
    /upstream down/,
  );
  assert.equal(await cache.get(key, async () => "second try"), "second try");
  assert.equal(cache.size, 1);
});

test("bounded: the least recently used result goes first", async () => {
  const cache = new LocationCache({ maxEntries: 2 });
  const [a, b, c] = [1, 2, 3].map((i) => cache.key(i, i, {}));
  await cache.get(a, async () => "a");
  await cache.get(b, async () => "b");
  assert.equal(cache.lookup(a).state, "hit"); // a is now more recent than b
  await cache.get(c, async () => "c");
  assert.equal(cache.size, 2);
  assert.equal(cache.lookup(a).state, "hit");
  assert.equal(cache.lookup(b).state, "miss");
});

test("persisted results survive a page load, with what is left of their TTL", async () => {
  const storage = new MemoryStorage();
  let clock = 10_000;
  const first = new LocationCache({ ttlMs: 60_000, now: () => clock, persist: { key: "om-cache", storage } });
  const key = first.key(40.71, -74.01, { daily: ["temperature_2m_max"] });
  await first.get(key, async () => ({ forecast: [1, 2, 3] }));
  clock = 40_000;
  const reloaded = new LocationCache({ ttlMs: 60_000, now: () => clock, persist: { key: "om-cache", storage } });
  assert.deepEqual(reloaded.lookup(key), { state: "hit", value: { forecast: [1, 2, 3] } });
  clock = 70_000;
  const late = new LocationCache({ ttlMs: 60_000, now: () => clock, persist: { key: "om-cache", storage } });
  assert.equal(late.lookup(key).state, "miss", "expired 60 s after the response, across loads");
  storage.setItem("om-cache", "{not json");
  assert.equal(new LocationCache({ persist: { key: "om-cache", storage } }).size, 0, "a corrupt saved cache starts empty");
});

test("bad coordinates and settings are refused with the field named", () => {
  const cache = new LocationCache();
  assert.throws(() => cache.key(91, 0, {}), /latitude/);
  assert.throws(() => cache.key(0, Number.NaN, {}), /longitude/);
  assert.throws(() => new LocationCache({ precision: 7 }), /precision/);
  assert.throws(() => new LocationCache({ ttlMs: 0 }), /ttlMs/);
});
