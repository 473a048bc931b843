// The Open-Meteo mock served by the dev worker (worker/src/mock.rs), through startEdge.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";

const MOCK = "/mock/open-meteo";
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const DEFAULTS = {
  minute: { window_ms: 60_000, limit: 600 },
  hour: { window_ms: 3_600_000, limit: 5_000 },
  day: { window_ms: 86_400_000, limit: 10_000 },
  delay_ms: 0,
  max_concurrent: 5,
};
const MINUTELY = '{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}';
const HOURLY = '{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}';
const DAILY = '{"error":true,"reason":"Daily API request limit exceeded. Please try again tomorrow."}';
const CONCURRENT = '{"error":true,"reason":"Too many concurrent requests"}';

/** A forecast query: `n` locations, `vars` daily variables, and any extra parameters. */
function forecastPath({ n = 1, vars = 10, extra = "" } = {}) {
  const lat = Array.from({ length: n }, (_, i) => (52.52 - ((i * 0.17) % 140)).toFixed(2)).join(",");
  const lon = Array.from({ length: n }, (_, i) => (13.41 - ((i * 0.37) % 190)).toFixed(2)).join(",");
  const daily = Array.from({ length: vars }, (_, i) => `temperature_2m_v${i}`).join(",");
  return `${MOCK}/v1/forecast?latitude=${lat}&longitude=${lon}${vars ? `&daily=${daily}` : ""}${extra}`;
}

async function get(edge, path, ip = "203.0.113.1") {
  const res = await edge.fetch(path, { headers: { "cf-connecting-ip": ip } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function post(edge, path, body) {
  const res = await edge.fetch(path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function state(edge) {
  const res = await edge.fetch(`${MOCK}/state`);
  assert.equal(res.status, 200);
  return res.json();
}

/** The `window` usage of `ip` ("minute", "hour", "day"). */
async function used(edge, ip = "203.0.113.1", window = "minute") {
  return (await state(edge)).clients[ip]?.[window].used ?? 0;
}

/** Counters cleared and the default configuration with `overrides` merged in. */
async function fresh(edge, overrides = {}) {
  const config = await post(edge, `${MOCK}/config`, { ...DEFAULTS, ...overrides });
  assert.equal(config.status, 200, JSON.stringify(config.body));
  assert.equal((await post(edge, `${MOCK}/reset`, "")).status, 200);
}

/** Return at least `margin` ms before the next multiple of `windowMs` (waiting past it if need be). */
async function awayFromBoundary(windowMs, margin) {
  const left = windowMs - (Date.now() % windowMs);
  if (left < margin) await sleep(left + 25);
}

function assertError(r, status, pattern) {
  assert.equal(r.status, status, r.body);
  assert.equal(r.headers.get("content-type"), "application/json");
  const body = JSON.parse(r.body);
  assert.equal(body.error, true);
  assert.match(body.reason, pattern);
}

describe("the weight of a call", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });
  beforeEach(async () => {
    await fresh(edge, {
      minute: { window_ms: 60_000, limit: 100_000 },
      hour: { window_ms: 3_600_000, limit: 100_000 },
      day: { window_ms: 86_400_000, limit: 100_000 },
    });
    await awayFromBoundary(60_000, 3_000);
  });

  test("1 location × 10 variables × 7 days weighs 1, in all three windows", async () => {
    const r = await get(edge, forecastPath({ n: 1, vars: 10, extra: "&forecast_days=7" }));
    assert.equal(r.status, 200);
    const s = await state(edge);
    const client = s.clients["203.0.113.1"];
    assert.deepEqual([client.minute.used, client.hour.used, client.day.used], [1, 1, 1]);
    assert.equal(client.minute.limit, 100_000);
    assert.equal(client.in_flight, 0);
    assert.equal(s.calls, 1);
    assert.equal(s.rejected_429, 0);
  });

  test("100 locations × 3 variables weighs 100 (the weight is summed over locations)", async () => {
    await get(edge, forecastPath({ n: 1 }));
    const r = await get(edge, forecastPath({ n: 100, vars: 3 }));
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.body).length, 100);
    assert.equal(await used(edge), 101);
  });

  test("the worked values: 15 variables × 14 days → 1.5; × 28 days → 3.0 (past_days or start/end dates)", async () => {
    const steps = [
      [forecastPath({ vars: 15, extra: "&forecast_days=14" }), 1.5],
      [forecastPath({ vars: 15, extra: "&forecast_days=16&past_days=12" }), 3],
      [forecastPath({ vars: 15, extra: "&start_date=2026-02-01&end_date=2026-02-28" }), 3],
      [forecastPath({ vars: 10, extra: "&forecast_days=16&models=icon_seamless,gfs_seamless" }), 2 * (16 / 14)],
      [forecastPath({ vars: 0 }), 1],
      [forecastPath({ n: 3, vars: 30, extra: "&forecast_days=7" }), 9],
    ];
    let total = 0;
    for (const [path, weight] of steps) {
      const r = await get(edge, path);
      assert.equal(r.status, 200, `${path}: ${r.body}`);
      total += weight;
      assert.ok(Math.abs((await used(edge)) - total) < 1e-9, `after ${path}: used ${await used(edge)}, expected ${total}`);
    }
  });

  test("every value of a repeated &hourly= or &latitude= is answered and charged, as the server does", async () => {
    const ten = (prefix) => Array.from({ length: 10 }, (_, i) => `${prefix}${i}`).join(",");
    const twice = await get(edge, `${MOCK}/v1/forecast?latitude=52.5&longitude=13.4&hourly=${ten("a")}&hourly=${ten("b")}`);
    assert.equal(twice.status, 200, twice.body);
    assert.equal(Object.keys(JSON.parse(twice.body).hourly).length, 21, "the time and all 20 variables");
    assert.equal(await used(edge), 2, "20 variables weigh 2, not the first list's 1");
    const two = await get(edge, `${MOCK}/v1/forecast?latitude=52.5&latitude=48.8&longitude=13.4,2.3&hourly=${ten("a")}`);
    assert.equal(two.status, 200, two.body);
    assert.equal(JSON.parse(two.body).length, 2);
    assert.equal(await used(edge), 4);
  });

  test("a 1,000-location × 10-variable × 16-day call is answered, and weighs 1,000 × 16/14", async () => {
    const path = forecastPath({ n: 1000, vars: 10, extra: "&forecast_days=16" });
    const started = performance.now();
    const r = await get(edge, path);
    const took = performance.now() - started;
    assert.equal(r.status, 200);
    const body = JSON.parse(r.body);
    assert.equal(body.length, 1000);
    assert.equal(body[999].daily.time.length, 16);
    assert.equal(body[999].daily.temperature_2m_v9.length, 16);
    assert.ok(Math.abs((await used(edge)) - 1000 * (16 / 14)) < 1e-6);
    // ~7 ms in the worker; the rest is moving 1.3 MB through Miniflare.
    assert.ok(took < 1_000, `took ${took} ms`);
  });
});

describe("admission before the call, weight after it, and fixed windows", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });

  test("a call of weight 30 from usage 0 is admitted past a limit of 20; the next gets the minutely 429, which costs nothing", async () => {
    await fresh(edge, { minute: { window_ms: 2_000, limit: 20 } });
    await awayFromBoundary(2_000, 800);
    const first = await get(edge, forecastPath({ n: 30, vars: 1 }));
    assert.equal(first.status, 200);
    assert.equal(await used(edge), 30);
    for (let i = 0; i < 3; i++) {
      const r = await get(edge, forecastPath({ n: 1 }));
      assert.equal(r.status, 429);
      assert.equal(r.body, MINUTELY);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.equal(r.headers.get("retry-after"), null);
    }
    const s = await state(edge);
    assert.equal(s.clients["203.0.113.1"].minute.used, 30);
    assert.equal(s.clients["203.0.113.1"].hour.used, 30);
    assert.equal(s.calls, 4);
    assert.equal(s.rejected_429, 3);
  });

  test("the window resets at the next multiple of window_ms since the epoch", async () => {
    await fresh(edge, { minute: { window_ms: 2_000, limit: 20 } });
    await awayFromBoundary(2_000, 800);
    assert.equal((await get(edge, forecastPath({ n: 25, vars: 1 }))).status, 200);
    assert.equal((await get(edge, forecastPath())).status, 429);
    const { minute } = (await state(edge)).clients["203.0.113.1"];
    assert.equal(minute.resets_at_ms % 2_000, 0);
    assert.ok(minute.resets_at_ms > Date.now() - 50 && minute.resets_at_ms <= Date.now() + 2_000);
    // Still refused just before the boundary...
    await sleep(minute.resets_at_ms - Date.now() - 150);
    assert.equal((await get(edge, forecastPath())).status, 429);
    // ...and admitted just after it, counting from zero.
    await sleep(minute.resets_at_ms - Date.now() + 30);
    assert.equal((await get(edge, forecastPath())).status, 200);
    const after = (await state(edge)).clients["203.0.113.1"];
    assert.equal(after.minute.used, 1);
    assert.equal(after.minute.resets_at_ms, minute.resets_at_ms + 2_000);
    assert.equal(after.hour.used, 26, "the hour window kept counting");
  });

  test("the hourly and the daily 429 when those windows are exhausted", async () => {
    await fresh(edge, { minute: { window_ms: 60_000, limit: 1_000_000 }, hour: { window_ms: 3_600_000, limit: 10 } });
    await awayFromBoundary(3_600_000, 2_000);
    assert.equal((await get(edge, forecastPath({ n: 10, vars: 1 }))).status, 200);
    const hourly = await get(edge, forecastPath());
    assert.equal(hourly.status, 429);
    assert.equal(hourly.body, HOURLY);
    assert.equal(hourly.headers.get("retry-after"), null);

    await fresh(edge, {
      minute: { window_ms: 60_000, limit: 1_000_000 },
      hour: { window_ms: 3_600_000, limit: 1_000_000 },
      day: { window_ms: 86_400_000, limit: 5 },
    });
    await awayFromBoundary(86_400_000, 2_000);
    assert.equal((await get(edge, forecastPath({ n: 4, vars: 1 }))).status, 200);
    assert.equal((await get(edge, forecastPath())).status, 200, "usage 4 < 5: admitted");
    const daily = await get(edge, forecastPath());
    assert.equal(daily.status, 429);
    assert.equal(daily.body, DAILY);
  });

  test("with every window exhausted the minute is reported first, then the hour", async () => {
    await fresh(edge, { minute: { window_ms: 60_000, limit: 1 }, hour: { window_ms: 3_600_000, limit: 1 }, day: { window_ms: 86_400_000, limit: 1 } });
    await awayFromBoundary(60_000, 2_000);
    assert.equal((await get(edge, forecastPath())).status, 200);
    assert.equal((await get(edge, forecastPath())).body, MINUTELY);
    assert.equal((await post(edge, `${MOCK}/config`, { minute: { limit: 2 } })).status, 200);
    assert.equal((await get(edge, forecastPath())).body, HOURLY);
    assert.equal((await post(edge, `${MOCK}/config`, { hour: { limit: 2 } })).status, 200);
    assert.equal((await get(edge, forecastPath())).body, DAILY);
  });

  test("reset clears the counters and keeps the configuration", async () => {
    await fresh(edge, { minute: { window_ms: 60_000, limit: 3 } });
    await get(edge, forecastPath({ n: 5, vars: 1 }));
    assert.equal((await get(edge, forecastPath())).status, 429);
    assert.equal((await post(edge, `${MOCK}/reset`, "")).status, 200);
    const s = await state(edge);
    assert.deepEqual(s.clients, {});
    assert.equal(s.calls, 0);
    assert.equal(s.rejected_429, 0);
    assert.deepEqual(s.config.minute, { window_ms: 60_000, limit: 3 });
    assert.equal((await get(edge, forecastPath())).status, 200);
  });
});

describe("concurrency", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });

  test("6 concurrent calls of one client with delay_ms 200: exactly one 'Too many concurrent requests'", async () => {
    await fresh(edge, { delay_ms: 200 });
    await awayFromBoundary(60_000, 3_000);
    const calls = Array.from({ length: 6 }, () => get(edge, forecastPath()));
    await sleep(80);
    const during = await state(edge);
    assert.equal(during.clients["203.0.113.1"].in_flight, 5);
    // Another client is not affected.
    const other = await get(edge, forecastPath(), "203.0.113.2");
    assert.equal(other.status, 200);
    const results = await Promise.all(calls);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 429]);
    const refused = results.find((r) => r.status === 429);
    assert.equal(refused.body, CONCURRENT);
    assert.equal(refused.headers.get("retry-after"), null);
    const s = await state(edge);
    assert.equal(s.clients["203.0.113.1"].in_flight, 0);
    assert.equal(s.clients["203.0.113.1"].minute.used, 5, "the concurrency 429 costs nothing");
    assert.equal(s.rejected_429, 1);
  });

  test("concurrently admitted calls all pass admission before any weight is added (overshoot)", async () => {
    await fresh(edge, { minute: { window_ms: 60_000, limit: 3 }, delay_ms: 150 });
    await awayFromBoundary(60_000, 3_000);
    const results = await Promise.all(Array.from({ length: 5 }, () => get(edge, forecastPath({ n: 2, vars: 1 }))));
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200, 200, 200],
    );
    assert.equal(await used(edge), 10);
    assert.equal((await get(edge, forecastPath())).body, MINUTELY);
  });

  test("a slot is released after an error answer too", async () => {
    await fresh(edge, { delay_ms: 100, max_concurrent: 2 });
    const bad = `${MOCK}/v1/forecast?latitude=95&longitude=0`;
    const results = await Promise.all([get(edge, bad), get(edge, bad), get(edge, bad)]);
    assert.deepEqual(results.map((r) => r.status).sort(), [400, 400, 429]);
    const s = await state(edge);
    assert.equal(s.clients["203.0.113.1"].in_flight, 0);
    assert.equal((await get(edge, bad)).status, 400);
  });
});

describe("invalid calls", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });
  beforeEach(async () => {
    await fresh(edge);
    await awayFromBoundary(60_000, 3_000);
  });

  test("more than 5,000 weight, more than 1,000 locations, bad coordinates and days: 400 naming the problem, each costing 1", async () => {
    const cases = [
      [forecastPath({ n: 1000, vars: 60 }), /^Your API call requests too much data\. .*6000/],
      [forecastPath({ n: 1001, vars: 1 }), /up to 1000 locations.*1001/],
      [`${MOCK}/v1/forecast?latitude=abc&longitude=13.4`, /'latitude'.*'abc'/],
      [`${MOCK}/v1/forecast?latitude=91&longitude=13.4`, /'latitude'.*-90 to 90/],
      [`${MOCK}/v1/forecast?latitude=-90.5&longitude=13.4`, /'latitude'/],
      [`${MOCK}/v1/forecast?latitude=52.5&longitude=180.01`, /'longitude'.*-180 to 180/],
      [`${MOCK}/v1/forecast?latitude=52.5,48.8&longitude=13.4`, /'latitude' and 'longitude'.*same number/],
      [`${MOCK}/v1/forecast?longitude=13.4`, /'latitude' is required/],
      [`${MOCK}/v1/forecast?latitude=52.5`, /'longitude' is required/],
      [`${MOCK}/v1/forecast?latitude=52.5,&longitude=13.4,1`, /'latitude'/],
      [`${MOCK}/v1/forecast?latitude=Infinity&longitude=1`, /'latitude'/],
      [forecastPath({ extra: "&forecast_days=17" }), /'forecast_days'.*1 to 16/],
      [forecastPath({ extra: "&forecast_days=0" }), /'forecast_days'/],
      [forecastPath({ extra: "&forecast_days=2.5" }), /'forecast_days'/],
      [forecastPath({ extra: "&past_days=93" }), /'past_days'/],
      [forecastPath({ extra: "&start_date=2026-02-30&end_date=2026-03-01" }), /'start_date'/],
      [forecastPath({ extra: "&start_date=2026-02-01" }), /'end_date' is required/],
      [forecastPath({ extra: "&start_date=2026-02-02&end_date=2026-02-01" }), /'end_date'/],
      [forecastPath({ extra: "&start_date=2026-02-01&end_date=2026-02-02&forecast_days=3" }), /'forecast_days'.*exclusive/],
      [forecastPath({ extra: "&hourly=temp%22erature" }), /'hourly'/],
    ];
    for (const [i, [path, reason]] of cases.entries()) {
      const r = await get(edge, path);
      assertError(r, 400, reason);
      assert.equal(await used(edge), i + 1, `${path} costs 1`);
    }
    assert.equal((await state(edge)).rejected_429, 0);
  });

  test("exactly 5,000 weight and exactly 1,000 locations are allowed", async () => {
    await post(edge, `${MOCK}/config`, { minute: { limit: 100_000 }, hour: { limit: 100_000 }, day: { limit: 100_000 } });
    // 1,000 locations × 50 variables × 7 days: 1,000 × 5 = 5,000.
    const r = await get(edge, forecastPath({ n: 1000, vars: 50 }));
    assert.equal(r.status, 200);
    assert.equal(await used(edge), 5000);
  });

  test("the admin routes: unknown fields, bad values and wrong methods are 4xx with a JSON reason; nothing is applied", async () => {
    const before = (await state(edge)).config;
    for (const [body, reason] of [
      [{ minute: { window_ms: 0 } }, /'minute\.window_ms'/],
      [{ hour: { limit: 1.5 } }, /'hour\.limit'/],
      [{ day: { limit: "10" } }, /'day\.limit'/],
      [{ day: 5 }, /'day'/],
      [{ minute: { limit: 5 }, delay_ms: -1 }, /'delay_ms'/],
      [{ delay_ms: 600_000 }, /'delay_ms'/],
      [{ max_concurrent: 0 }, /'max_concurrent'/],
      [{ minute: { window: 5 } }, /'minute\.window'/],
      [{ burst: 1 }, /'burst'/],
      ["[1,2]", /JSON object/],
      ["not json", /JSON object/],
    ]) {
      const r = await post(edge, `${MOCK}/config`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error, true);
      assert.match(r.body.reason, reason);
    }
    assert.deepEqual((await state(edge)).config, before);
    const merged = await post(edge, `${MOCK}/config`, { hour: { limit: 7 } });
    assert.equal(merged.status, 200);
    assert.deepEqual(merged.body.hour, { window_ms: 3_600_000, limit: 7 });
    assert.deepEqual(merged.body.minute, DEFAULTS.minute);

    assertError(await get(edge, `${MOCK}/nothing-here`), 404, /Unknown mock route/);
    assertError(await get(edge, `${MOCK}/reset`), 405, /POST/);
    const postForecast = await edge.fetch(forecastPath(), { method: "POST", body: "x" });
    assert.equal(postForecast.status, 405);
    assert.equal((await postForecast.json()).error, true);
  });
});

describe("clients, determinism and the edge", () => {
  let edge;
  before(async () => {
    edge = await startEdge();
  });
  after(async () => {
    await edge?.close();
  });
  beforeEach(async () => {
    await fresh(edge);
  });

  test("two CF-Connecting-IP values have separate counters", async () => {
    await fresh(edge, { minute: { window_ms: 60_000, limit: 20 } });
    await awayFromBoundary(60_000, 3_000);
    assert.equal((await get(edge, forecastPath({ n: 30, vars: 1 }), "198.51.100.1")).status, 200);
    assert.equal((await get(edge, forecastPath(), "198.51.100.1")).status, 429);
    assert.equal((await get(edge, forecastPath(), "198.51.100.2")).status, 200);
    // An IPv6 client is counted by its /64, as the edge counts it.
    assert.equal((await get(edge, forecastPath(), "2001:db8:1:2::1")).status, 200);
    assert.equal((await get(edge, forecastPath(), "2001:db8:1:2::ffff")).status, 200);
    const { clients } = await state(edge);
    assert.equal(clients["198.51.100.1"].minute.used, 30);
    assert.equal(clients["198.51.100.2"].minute.used, 1);
    assert.equal(clients["2001:db8:1:2::/64"].minute.used, 2);
  });

  test("the same call twice returns byte-identical bodies shaped like the real API's", async () => {
    const path = `${MOCK}/v1/forecast?latitude=52.52,48.85&longitude=13.41,2.35&daily=temperature_2m_max,precipitation_sum&forecast_days=3`;
    const a = await get(edge, path);
    const b = await get(edge, path, "203.0.113.99");
    assert.equal(a.status, 200);
    assert.equal(a.headers.get("content-type"), "application/json");
    assert.equal(a.body, b.body);
    const body = JSON.parse(a.body);
    assert.ok(Array.isArray(body) && body.length === 2);
    assert.deepEqual([body[0].latitude, body[0].longitude, body[1].latitude, body[1].longitude], [52.52, 13.41, 48.85, 2.35]);
    assert.deepEqual(body[0].daily.time, ["2026-01-01", "2026-01-02", "2026-01-03"]);
    for (const loc of body) {
      for (const v of ["temperature_2m_max", "precipitation_sum"]) {
        assert.equal(loc.daily[v].length, 3);
        assert.ok(loc.daily[v].every(Number.isFinite));
      }
      assert.ok(loc.daily.precipitation_sum.every((x) => x >= 0));
    }
    assert.notDeepEqual(body[0].daily.temperature_2m_max, body[1].daily.temperature_2m_max);

    // One location: an object, not an array; hourly, current and several models too.
    const one = JSON.parse(
      (
        await get(
          edge,
          `${MOCK}/v1/forecast?latitude=52.52&longitude=13.41&hourly=temperature_2m&current=temperature_2m&forecast_days=1&past_days=1&models=icon_seamless,gfs_seamless`,
        )
      ).body,
    );
    assert.ok(!Array.isArray(one));
    assert.equal(one.hourly.time.length, 48);
    assert.equal(one.hourly.time[0], "2025-12-31T00:00");
    assert.equal(one.hourly.temperature_2m_icon_seamless.length, 48);
    assert.equal(one.hourly.temperature_2m_gfs_seamless.length, 48);
    assert.equal(typeof one.current.temperature_2m_icon_seamless, "number");
  });

  test("the mock is not counted by the edge's /api/ rule: 25 rapid calls, no rate headers, no edge 429", async () => {
    const results = [];
    for (let i = 0; i < 25; i++) results.push(await get(edge, forecastPath(), "198.51.100.50"));
    for (const r of results) {
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("ratelimit"), null);
      assert.equal(r.headers.get("ratelimit-policy"), null);
      assert.equal(r.headers.get("retry-after"), null);
    }
    for (let i = 0; i < 25; i++) {
      const r = await get(edge, `${MOCK}/state`, "198.51.100.50");
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("ratelimit"), null);
    }
    assert.equal(await used(edge, "198.51.100.50", "hour"), 25, "the mock counted all 25");
  });
});

describe("with ORIGIN_URL set", () => {
  test("the mock does not exist: its paths go to the origin", async () => {
    const origin = createServer((req, res) => res.end(`origin saw ${req.url}`));
    await new Promise((r) => origin.listen(0, "127.0.0.1", r));
    const edge = await startEdge({ origin: `http://127.0.0.1:${origin.address().port}` });
    try {
      const r = await get(edge, `${MOCK}/state`);
      assert.equal(r.status, 200);
      assert.equal(r.body, `origin saw ${MOCK}/state`);
    } finally {
      await edge.close();
      await new Promise((r) => origin.close(r));
    }
  });
});
