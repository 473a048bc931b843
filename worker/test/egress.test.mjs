// The egress routes: the app calls its providers through the edge, under each provider's
// budget. The providers here are servers on 127.0.0.1 that record every call they get (when
// it arrived, its URL and headers, how many of their calls were in flight), so each test
// checks what a provider would see: never more calls at once than its slots, starts spaced
// as configured, no rolling minute over its weight, one call where the cache can answer, a
// failed mirror passed over, and nothing ever sent anywhere but a configured mirror.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";
import { AUTH, assertNoEdgeFailure, assertProblem, call, givePermitBack, later, mirror, provider, sleep, takePermit, TOKEN, closedPort } from "./support/providers.mjs";
import { raw } from "./support/raw.mjs";

const ADMIN_TOKEN = "egress-admin-token-0123456789";

describe("Overpass: mirrors with their own slots, failover (deploy build)", () => {
  const m = [];
  let origin;
  let edge;
  let refused;
  before(async () => {
    for (let i = 0; i < 3; i++) m.push(await provider(`m${i}`));
    origin = await originServer();
    refused = await closedPort();
    const two = (id, first = m[0].url, extra = {}) => ({ id, mirrors: [`${first}/api/`, `${m[1].url}/api/`], max_in_flight: 1, ...extra });
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      rules: {
        rules: [],
        egress: {
          providers: [
            { id: "overpass", mirrors: m.map((s) => `${s.url}/api/`), max_in_flight: 2 },
            two("ov503"),
            two("ov429"),
            two("ovdrop"),
            two("ovrefused", `http://127.0.0.1:${refused}`),
            two("ovall"),
            { id: "ovnone", mirrors: [`http://127.0.0.1:${refused}/api/`, `http://127.0.0.1:${refused}/b/`], max_in_flight: 1 },
          ],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    for (const s of m) await s.close();
  });
  const resetAll = () => {
    for (const s of m) s.reset();
  };

  test("12 concurrent calls never put more than 2 in flight at one mirror, and all are answered by the provider", async () => {
    resetAll();
    for (const s of m) s.behave = later(300, (req) => JSON.stringify({ provider: s.name, url: req.url }));
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => call(edge, `/egress/overpass/interpreter?data=q${i}`)));
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 200, answer.body);
      const body = JSON.parse(answer.body);
      assert.equal(body.url, `/api/interpreter?data=q${i}`);
      assert.equal(answer.headers.get("sluicegate-mirror"), mirror(m[Number(body.provider.slice(1))]), "names the mirror that answered");
      assert.equal(answer.headers.get("sluicegate-cache"), "miss");
    }
    assert.deepEqual(
      m.map((s) => s.peak <= 2),
      [true, true, true],
      `peaks ${m.map((s) => s.peak)}`,
    );
    assert.equal(
      m.reduce((n, s) => n + s.calls.length, 0),
      12,
      "one provider call per call",
    );
    assert.ok(
      m.every((s) => s.peak === 2),
      `every mirror's 2 slots were used: peaks ${m.map((s) => s.peak)}`,
    );
    for (const s of m) for (const c of s.calls) assert.equal(c.headers.authorization, undefined, "the edge's token stays at the edge");
  });

  test("a mirror that answers 503 is failed over, and its slot is free at once", async () => {
    resetAll();
    m[0].behave = (_req, res) => {
      res.statusCode = 503;
      res.end("m0 is down");
    };
    // m1 holds the failed-over call for 1.5 s: its one slot is taken meanwhile.
    m[1].behave = later(1_500, "m1 answered");
    const first = call(edge, "/egress/ov503/interpreter?data=1");
    while (m[1].calls.length === 0) await sleep(10);
    assert.equal(m[0].calls.length, 1);
    // m0 failed and m1 is full: a second call takes m0's slot, free again at once.
    m[0].behave = (_req, res) => res.end("m0 is back");
    const second = await call(edge, "/egress/ov503/interpreter?data=2");
    assert.equal(second.status, 200);
    assert.equal(second.body, "m0 is back");
    assert.equal(second.headers.get("sluicegate-mirror"), mirror(m[0]));
    assert.equal(m[1].calls.length, 1, "m1 was still busy with the first call");
    const answered = await first;
    assert.equal(answered.status, 200);
    assert.equal(answered.body, "m1 answered");
    assert.equal(answered.headers.get("sluicegate-mirror"), mirror(m[1]), "the mirror that answered, not the first one tried");
    assert.deepEqual(
      m[1].calls.map((c) => c.url),
      ["/api/interpreter?data=1"],
      "the same call, made again at the next mirror",
    );
  });

  test("a 429 is failed over too", async () => {
    resetAll();
    m[0].behave = (_req, res) => {
      res.statusCode = 429;
      res.setHeader("retry-after", "30");
      res.end("slow down");
    };
    const answer = await call(edge, "/egress/ov429/interpreter?data=1");
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get("sluicegate-mirror"), mirror(m[1]));
    assert.equal(JSON.parse(answer.body).provider, "m1");
    assert.equal(m[0].calls.length, 1);
  });

  test("a mirror that drops the connection or refuses it is failed over", async () => {
    resetAll();
    m[0].behave = (_req, res) => res.socket.destroy();
    const dropped = await call(edge, "/egress/ovdrop/interpreter?data=1");
    assert.equal(dropped.status, 200, dropped.body);
    assert.equal(dropped.headers.get("sluicegate-mirror"), mirror(m[1]));
    assert.equal(m[0].calls.length, 1, "m0 was tried first");
    const refusedAnswer = await call(edge, "/egress/ovrefused/interpreter?data=1");
    assert.equal(refusedAnswer.status, 200, refusedAnswer.body);
    assert.equal(refusedAnswer.headers.get("sluicegate-mirror"), mirror(m[1]));
  });

  test("when every mirror fails, the last failure's status and body are passed on; when none can be reached, 502", async () => {
    resetAll();
    m[0].behave = (_req, res) => {
      res.statusCode = 503;
      res.end("m0 down");
    };
    m[1].behave = (_req, res) => {
      res.statusCode = 504;
      res.setHeader("content-type", "text/plain");
      res.end("m1 timed out");
    };
    const answer = await call(edge, "/egress/ovall/interpreter?data=1");
    assert.equal(answer.status, 504);
    assert.equal(answer.body, "m1 timed out");
    assert.equal(answer.headers.get("sluicegate-mirror"), mirror(m[1]));
    assert.deepEqual([m[0].calls.length, m[1].calls.length], [1, 1], "each mirror tried once");
    const none = await call(edge, "/egress/ovnone/interpreter?data=1");
    assertProblem(none, 502, /ovnone/);
  });
});

describe("Open-Meteo: a rolling minute of weight, and the cache (dev build, clock ×30)", () => {
  const K = 30;
  const BUDGET = 20;
  let om;
  let edge;
  let clock;
  before(async () => {
    om = await provider("open-meteo");
    const realStart = Date.now();
    const virtualStart = 1_800_000_000_000;
    clock = { realStart, virtualStart, virtual: (t) => virtualStart + (t - realStart) * K };
    edge = await startEdge({
      build: "dev",
      egressToken: TOKEN,
      vars: { SLUICEGATE_CLOCK: `${K},${realStart},${virtualStart}` },
      rules: {
        rules: [],
        egress: {
          providers: [
            // max_wait in the edge's (virtual) seconds: the burst needs two more minutes.
            { id: "om", mirrors: `${om.url}/v1/`, max_in_flight: 100, weight: "open-meteo", weight_per_minute: BUDGET, max_wait: 300 },
            {
              id: "omcached",
              mirrors: `${om.url}/v1/`,
              max_in_flight: 100,
              weight: "open-meteo",
              weight_per_minute: BUDGET,
              max_wait: 300,
              cache: { ttl_s: 900 },
            },
          ],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await om?.close();
  });

  /** A forecast query for `n` locations: 1 variable, 7 days (each location weighs 1). */
  const forecast = (n, tag) => {
    const lat = Array.from({ length: n }, (_, i) => (40 + i / 10).toFixed(2)).join(",");
    const lon = Array.from({ length: n }, (_, i) => (10 + i / 10).toFixed(2)).join(",");
    return `/egress/om/forecast?latitude=${lat}&longitude=${lon}&hourly=temperature_2m&forecast_days=7&tag=${tag}`;
  };

  test("a burst of three minutes' weight is spread so that no rolling minute exceeds the budget", async () => {
    om.reset();
    // Weights 1 to 5, 60 in all: three whole minutes of a budget of 20.
    const weights = Array.from({ length: 20 }, (_, i) => 1 + (i % 5));
    assert.equal(
      weights.reduce((a, b) => a + b),
      3 * BUDGET,
    );
    const answers = await Promise.all(weights.map((w, i) => call(edge, forecast(w, i))));
    for (const answer of answers) assert.equal(answer.status, 200, answer.body);
    assert.equal(om.calls.length, weights.length);
    const arrivals = om.calls
      .map((c) => ({ v: clock.virtual(c.t), w: Number(new URL(c.url, "http://x").searchParams.get("latitude").split(",").length) }))
      .sort((a, b) => a.v - b.v);
    // The edge decides each start by its own clock; a call reaches the provider a moment
    // later, and that moment varies from call to call (connection set-up, scheduling). Up to
    // 50 ms of real time (1.5 s of the edge's time at ×30) is allowed for it: the window
    // checked is 60 s less that.
    const slack = 50 * K;
    const window = 60_000 - slack;
    for (const { v } of arrivals) {
      const load = arrivals.filter((a) => a.v >= v && a.v < v + window).reduce((n, a) => n + a.w, 0);
      assert.ok(load <= BUDGET, `${load} weighted calls in the minute from ${v - clock.virtualStart} ms`);
    }
    const span = arrivals.at(-1).v - arrivals[0].v;
    assert.ok(span >= 2 * 60_000 - slack, `three minutes' weight took ${span} ms of the edge's time, not two more minutes`);
  });

  test("a call heavier than a whole minute's budget is refused at once with 413, naming its weight", async () => {
    om.reset();
    const answer = await call(edge, forecast(21, "heavy"));
    assertProblem(answer, 413, /\b21\b/);
    assert.match(answer.body, /\bom\b/);
    assert.equal(om.calls.length, 0, "never sent");
  });

  test("a cached provider answers a repeat from the cache, without a call", async () => {
    om.reset();
    const path = forecast(2, "cached").replace("/egress/om/", "/egress/omcached/");
    const first = await call(edge, path);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("sluicegate-cache"), "miss");
    const repeat = await call(edge, path);
    assert.equal(repeat.status, 200);
    assert.equal(repeat.headers.get("sluicegate-cache"), "hit");
    assert.equal(repeat.body, first.body);
    assert.equal(om.calls.length, 1);
  });

  test("50 concurrent identical misses make exactly one provider call, and all 50 get its answer", async () => {
    om.reset();
    let n = 0;
    om.behave = later(300, () => JSON.stringify({ answer: ++n }));
    const path = forecast(3, "herd").replace("/egress/om/", "/egress/omcached/");
    const answers = await Promise.all(Array.from({ length: 50 }, () => call(edge, path)));
    assert.equal(om.calls.length, 1);
    for (const answer of answers) {
      assert.equal(answer.status, 200, answer.body);
      assert.equal(answer.body, '{"answer":1}');
    }
  });
});

describe("Nominatim: spacing, the User-Agent, permits with leases (deploy build)", () => {
  const UA = "sluicegate-tests/1.0 (ops@example.com)";
  let a;
  let b;
  let origin;
  let edge;
  before(async () => {
    a = await provider("a");
    b = await provider("b");
    origin = await originServer();
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      rules: {
        rules: [],
        egress: {
          providers: [
            { id: "nominatim", mirrors: `${a.url}/`, max_in_flight: 1, min_interval_ms: 3_500, user_agent: UA },
            { id: "nompermits", mirrors: `${a.url}/`, max_in_flight: 2, min_interval_ms: 3_500 },
            { id: "leased", mirrors: `${a.url}/`, max_in_flight: 1, lease: 1, max_wait: 5 },
            { id: "twomirrors", mirrors: [`${a.url}/`, `${b.url}/`], max_in_flight: 1 },
          ],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    await a?.close();
    await b?.close();
  });

  test("three calls reach the provider at least min_interval apart, each with exactly the configured User-Agent", async () => {
    a.reset();
    const answers = await Promise.all([1, 2, 3].map((i) => call(edge, `/egress/nominatim/search?q=${i}&format=json`, { headers: { "user-agent": "the-app/9.9" } })));
    for (const answer of answers) assert.equal(answer.status, 200, answer.body);
    const times = a.calls.map((c) => c.t);
    assert.equal(times.length, 3);
    // The edge spaces the starts by its clock; each call then takes a moment to reach the
    // provider, a moment that varies between calls by a few ms: 50 ms of it is allowed.
    for (let i = 1; i < times.length; i++) {
      assert.ok(times[i] - times[i - 1] >= 3_450, `calls ${i} and ${i + 1} arrived ${times[i] - times[i - 1]} ms apart`);
    }
    for (const c of a.calls) {
      assert.equal(c.headers["user-agent"], UA, "the provider's User-Agent, not the app's");
    }
  });

  test("two permits are granted at least min_interval apart", async () => {
    const started = Date.now();
    const granted = await Promise.all(
      [1, 2].map(async () => {
        const permit = await takePermit(edge, "nompermits");
        return { ...permit, at: Date.now() - started };
      }),
    );
    for (const permit of granted) {
      assert.equal(permit.status, 200, permit.body);
      assert.equal(permit.json.provider, "nompermits");
      assert.equal(permit.json.mirror, `${a.url}/`);
      assert.equal(permit.json.weight, 1);
      assert.ok(permit.json.lease_ms > 0);
    }
    const [first, second] = granted.map((p) => p.at).sort((x, y) => x - y);
    // Measured where the answers arrive; as above, 50 ms is allowed for the way there.
    assert.ok(second - first >= 3_450, `granted ${second - first} ms apart`);
    for (const permit of granted) assert.equal(await givePermitBack(edge, "nompermits", permit.json.id), 204);
  });

  test("a permit never given back frees its slot when its lease ends", async () => {
    const held = await takePermit(edge, "leased");
    assert.equal(held.status, 200, held.body);
    assert.equal(held.json.lease_ms, 1_000);
    const started = Date.now();
    const next = await takePermit(edge, "leased");
    const waited = Date.now() - started;
    assert.equal(next.status, 200, `granted when the lease ended, not refused: ${next.body}`);
    assert.ok(waited >= 900, `granted after ${waited} ms, while the first permit's lease still ran`);
    assert.equal(await givePermitBack(edge, "leased", held.json.id), 404, "the first permit ended with its lease");
    assert.equal(await givePermitBack(edge, "leased", next.json.id), 204);
  });

  test("a permit given back as failed sends the next permit to the next mirror", async () => {
    const first = await takePermit(edge, "twomirrors");
    assert.equal(first.json.mirror, `${a.url}/`);
    assert.equal(await givePermitBack(edge, "twomirrors", first.json.id, { failed: true }), 204);
    assert.equal(await givePermitBack(edge, "twomirrors", first.json.id), 404, "given back once only");
    const next = await takePermit(edge, "twomirrors");
    assert.equal(next.status, 200);
    assert.equal(next.json.mirror, `${b.url}/`, "the failed mirror goes after the healthy one");
    assert.equal(await givePermitBack(edge, "twomirrors", next.json.id), 204);
  });

  test("a permit request or give-back the edge cannot read is a 4xx, never a 500", async () => {
    for (const [method, path, body] of [
      ["POST", "/egress/nominatim/permit", "{not json"],
      ["POST", "/egress/nominatim/permit", '{"weight": -1}'],
      ["POST", "/egress/nominatim/permit", '{"colour": "red"}'],
      ["POST", "/egress/nominatim/permit", "x".repeat(10_000)],
      ["DELETE", "/egress/nominatim/permit/i12", '{"failed": "yes"}'],
      ["DELETE", "/egress/nominatim/permit/zzz", ""],
      ["DELETE", "/egress/nominatim/permit/i99999999999999999999", ""],
      ["DELETE", "/egress/nominatim/permit/f1", ""],
    ]) {
      const answer = await call(edge, path, { method, body: body || undefined });
      assert.ok(answer.status >= 400 && answer.status < 500, `${method} ${path} ${body.slice(0, 20)}: ${answer.status} ${answer.body}`);
    }
  });
});

describe("Snapshots: refreshed behind the request (deploy build)", () => {
  let s;
  let origin;
  let edge;
  before(async () => {
    s = await provider("snapshots");
    origin = await originServer();
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      rules: {
        rules: [],
        egress: {
          providers: [
            {
              id: "nifc",
              mirrors: `${s.url}/`,
              max_in_flight: 1,
              cache: { ttl_s: 1, refresh: "behind", retry_after_failure_s: 60 },
            },
          ],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    await s?.close();
  });

  test("one call per refresh, the old snapshot served at once meanwhile, the last good one while the provider is down", async () => {
    const PATH = "/egress/nifc/wildfires.json";
    let version = 1;
    let release;
    const held = () =>
      new Promise((resolve) => {
        release = resolve;
      });
    s.behave = async (_req, res) => {
      await held();
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ version }));
    };
    // 100 concurrent requests while the first snapshot is fetched: one call.
    const cold = Promise.all(Array.from({ length: 100 }, () => call(edge, PATH)));
    while (s.calls.length === 0) await sleep(10);
    await sleep(200);
    release();
    for (const answer of await cold) {
      assert.equal(answer.status, 200);
      assert.equal(answer.body, '{"version":1}');
    }
    assert.equal(s.calls.length, 1, "100 requests, one upstream call");

    // After the TTL: answered with the old snapshot at once, one refresh behind it.
    await sleep(1_100);
    version = 2;
    const stale = await call(edge, PATH);
    assert.equal(stale.status, 200);
    assert.equal(stale.headers.get("sluicegate-cache"), "stale");
    assert.equal(stale.body, '{"version":1}');
    while (s.calls.length < 2) await sleep(10);
    assert.equal(s.calls[1].answered, false, "answered before the refresh call was");
    const during = await Promise.all(Array.from({ length: 100 }, () => call(edge, PATH)));
    for (const answer of during) {
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get("sluicegate-cache"), "stale");
      assert.equal(answer.body, '{"version":1}');
    }
    release();
    let fresh;
    for (let i = 0; i < 100; i++) {
      fresh = await call(edge, PATH);
      if (fresh.headers.get("sluicegate-cache") === "hit") break;
      await sleep(20);
    }
    assert.equal(fresh.headers.get("sluicegate-cache"), "hit");
    assert.equal(fresh.body, '{"version":2}');
    assert.equal(s.calls.length, 2, "exactly one refresh call");

    // The provider goes down: the last good snapshot is served, and no new attempt for a while.
    s.behave = (_req, res) => {
      res.statusCode = 503;
      res.end("down");
    };
    await sleep(1_100);
    const first = await call(edge, PATH);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("sluicegate-cache"), "stale");
    assert.equal(first.body, '{"version":2}');
    while (s.calls.length < 3) await sleep(10);
    const failedAt = s.calls.length;
    for (let i = 0; i < 15; i++) {
      await sleep(200);
      const answer = await call(edge, PATH);
      assert.equal(answer.status, 200, answer.body);
      assert.equal(answer.headers.get("sluicegate-cache"), "stale");
      assert.equal(answer.body, '{"version":2}');
    }
    assert.equal(s.calls.length, failedAt, "no new attempt within retry_after_failure");
  });
});

/** A provider's faults, by the last path segment. */
function faulty(req, res) {
  const fault = req.url.split("/").at(-1);
  if (fault === "drop") return res.socket.destroy();
  if (fault === "garbage") return res.socket.end("THIS IS NOT HTTP\r\n\r\n");
  if (fault === "cut") {
    res.writeHead(200, { "content-length": "1000" });
    res.write("x".repeat(10));
    return setTimeout(() => res.socket.destroy(), 20);
  }
  if (fault === "badheader") return res.socket.end("HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\nhi");
  if (fault === "status") return res.socket.end("HTTP/1.1 999 Weird\r\nContent-Length: 2\r\n\r\nhi");
  res.end("ok");
}

describe("Shedding, faults, authorisation and hostile paths (deploy build; a leaving client on the development build)", () => {
  let good;
  let evil;
  let origin;
  let edge;
  let plain;
  let leaving;
  before(async () => {
    good = await provider("good");
    evil = await provider("evil");
    origin = await originServer();
    const providers = [
      { id: "p", mirrors: `${good.url}/base/`, max_in_flight: 4 },
      { id: "shed", mirrors: `${good.url}/base/`, max_in_flight: 1, max_wait: 0.5 },
      { id: "faults", mirrors: `${good.url}/base/`, max_in_flight: 2, max_wait: 1 },
      { id: "cachedfaults", mirrors: `${good.url}/base/`, max_in_flight: 2, max_wait: 1, cache: { ttl_s: 60 } },
    ];
    const rules = { rules: [], egress: { providers } };
    edge = await startEdge({ build: "deploy", origin: origin.url, egressToken: TOKEN, rules });
    plain = await startEdge({ build: "deploy", origin: origin.url, rules });
    // Local workerd notices a client that closed its connection only when it next writes to
    // it: the development build's fault makes the request's signal abort as Cloudflare's
    // does (Sluicegate-Test-Leave-After-Ms).
    leaving = await startEdge({ build: "dev", egressToken: TOKEN, adminToken: ADMIN_TOKEN, rules, faults: { client: "leaves" } });
  });
  after(async () => {
    await edge?.close();
    await plain?.close();
    await leaving?.close();
    await origin?.close();
    await good?.close();
    await evil?.close();
  });

  test("a call that cannot start within max_wait is answered 503 with Retry-After, naming the provider; the slot comes back when the client leaves", async () => {
    good.reset();
    good.behave = (req, res) => {
      if (req.url.includes("hang")) return; // never answers
      res.end("ok");
    };
    const hanging = call(leaving, "/egress/shed/hang", { headers: { "sluicegate-test-leave-after-ms": "1500" } }).catch((e) => e);
    while (good.calls.length === 0) await sleep(10);
    const started = Date.now();
    const shed = await call(leaving, "/egress/shed/x");
    assertProblem(shed, 503, /"shed"/);
    assert.ok(Number(shed.headers.get("retry-after")) >= 1, `Retry-After: ${shed.headers.get("retry-after")}`);
    assert.ok(Date.now() - started >= 450, "it waited its max_wait first");
    // The hanging call's client leaves at 1.5 s: its slot comes back at once, and the
    // provider's call is cancelled.
    const left = await hanging;
    assert.ok(!(left instanceof Error) && left.status !== 500, `the client that left: ${left.status ?? left}`);
    const after = await call(leaving, "/egress/shed/x");
    assert.equal(after.status, 200, `the hanging call's slot came back: ${after.body}`);
    for (let i = 0; good.inFlight() > 0 && i < 100; i++) await sleep(10);
    assert.equal(good.inFlight(), 0, "the provider's hanging call was cancelled");
    assert.equal(good.calls[0].answered, false);
    // The provider's budget in the stats: the shed call, and the calls it let through.
    const res = await fetch(`${leaving.url}/__sluicegate/stats?rule=shed`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const [budget] = (await res.json()).subjects;
    assert.equal(budget.kind, "budget");
    assert.equal(budget.total.shed, 1);
    assert.ok(budget.total.admitted >= 1, JSON.stringify(budget.total));
  });

  test("never a 500 under a provider's faults: dropped connections, garbage, a bad status, a body cut short", async () => {
    edge.clearLogs();
    for (const id of ["faults", "cachedfaults"]) {
      good.reset();
      good.behave = faulty;
      for (const fault of ["drop", "garbage", "cut", "badheader", "status"]) {
        const answer = await raw(edge.url, `GET /egress/${id}/${fault} HTTP/1.1\r\nHost: edge.test\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close`);
        const what = `${id} ${fault}: ${answer.raw.slice(0, 300)}`;
        // A body cut short by the provider after its 200 reaches the app as a 200 whose body
        // breaks off (or, cached, as the edge's 502): never a 500.
        assert.ok(answer.status > 0, what);
        assertNoEdgeFailure({ status: answer.status, body: answer.body, headers: new Headers(answer.headers) }, what);
      }
      // The budget is whole again: its 2 slots hold 2 calls at once.
      good.reset();
      good.behave = later(200, "ok");
      const both = await Promise.all([1, 2].map((i) => call(edge, `/egress/${id}/ok?${i}`)));
      for (const answer of both) assert.equal(answer.status, 200, `${id}: ${answer.body}`);
      assert.equal(good.peak, 2, `${id}: both slots free again`);
    }
    assert.deepEqual(
      edge.logLines().filter((l) => l.includes("refusing with")),
      [],
      "no request failed inside the edge",
    );
  });

  test("without the egress token, or with a wrong one, 401", async () => {
    good.reset();
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: `Basic ${TOKEN}` }, { authorization: TOKEN }]) {
      const response = await fetch(`${edge.url}/egress/p/x`, { headers });
      const body = await response.text();
      assert.equal(response.status, 401, body);
      assert.equal(response.headers.get("www-authenticate"), "Bearer");
    }
    const permit = await fetch(`${edge.url}/egress/p/permit`, { method: "POST", headers: { authorization: "Bearer nope" } });
    assert.equal(permit.status, 401);
    assert.equal(good.calls.length, 0);
  });

  test("without SLUICEGATE_EGRESS_TOKEN the egress paths go to the origin like any other", async () => {
    good.reset();
    const before = origin.seen.length;
    const response = await fetch(`${plain.url}/egress/p/interpreter?data=1`, { headers: AUTH });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "ok");
    assert.deepEqual(
      origin.seen.slice(before).map((r) => r.url),
      ["/egress/p/interpreter?data=1"],
    );
    assert.equal(good.calls.length, 0);
  });

  test("hostile paths never reach anything but the configured mirror", async () => {
    good.reset();
    origin.seen.length = 0;
    const host = `127.0.0.1:${evil.port}`;
    const paths = [
      "/egress/p/..%2f..%2fx",
      "/egress/p/..%2F..%2F..%2Fx",
      "/egress/p/%2e%2e/x",
      "/egress/p/%2e%2e/%2e%2e/x",
      "/egress/p/.%2e/.%2e/x",
      "/egress/p//evil.example/x",
      `/egress/p//${host}/x`,
      "/egress/p/http://evil.example/x",
      `/egress/p/http://${host}/x`,
      `/egress/p/http:%2f%2f${host}/x`,
      "/egress/p/@evil.example",
      `/egress/p/@${host}`,
      `/egress/p/%40${host}`,
      "/egress/p/%40evil.example",
      `/egress/p/x@${host}/y`,
      `/egress/p/\\\\${host}\\x`,
      `/egress/p/..\\..\\x`,
      `/egress/p/%5c%5c${host}%5cx`,
      `/egress/p/x?url=http://${host}/`,
      `/egress/p/x#@${host}`,
      `/egress/p/%0d%0aHost:%20${host}`,
      `/egress/p/%00/x`,
      `/egress/p;/x`,
      `/egress/p/;${host}`,
      `/egress/p/x/${"a".repeat(60 * 1024)}`,
    ];
    for (const path of paths) {
      const answer = await raw(edge.url, `GET ${path} HTTP/1.1\r\nHost: edge.test\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close`);
      const what = `${path.slice(0, 60)} → ${answer.status} ${answer.body.slice(0, 200)}`;
      assert.ok(answer.status > 0, `${what}: no answer`);
      const fromMirror = answer.headers["sluicegate-mirror"] === `${good.url}/base/`;
      const ok =
        (answer.status >= 400 && answer.status < 500) ||
        fromMirror ||
        // A path that normalises to one outside the prefix (`/egress/p/..%2f..%2fx` is `/x`).
        (answer.status === 200 && answer.body === "ok" && !answer.headers["sluicegate-mirror"]) ||
        ([502, 503].includes(answer.status) && /problem\+json/.test(answer.headers["content-type"] ?? ""));
      assert.ok(ok, what);
    }
    assert.deepEqual(
      evil.calls.map((c) => c.url),
      [],
      "nothing ever reached the other server",
    );
    for (const c of good.calls) assert.ok(c.url.startsWith("/base/"), `the mirror saw ${c.url.slice(0, 80)}`);
    for (const r of origin.seen) assert.ok(!r.url.includes(String(evil.port)) || r.url.startsWith("/egress"), r.url);
  });
});

describe("Fleet scope: one budget in the provider's Durable Object (deploy build)", () => {
  let s;
  let origin;
  let edge;
  before(async () => {
    s = await provider("fleet");
    origin = await originServer();
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      rules: {
        rules: [],
        egress: { providers: [{ id: "shared", mirrors: `${s.url}/`, max_in_flight: 2, scope: "fleet", lease: 5, max_wait: 10 }] },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    await s?.close();
  });

  test("proxied calls hold the provider's 2 slots between them", async () => {
    s.reset();
    s.behave = later(300, (req) => `answered ${req.url}`);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => call(edge, `/egress/shared/q${i}`)));
    answers.forEach((answer, i) => {
      assert.equal(answer.status, 200, answer.body);
      assert.equal(answer.body, `answered /q${i}`);
      assert.equal(answer.headers.get("sluicegate-mirror"), `${s.url}/`);
    });
    assert.equal(s.calls.length, 6);
    assert.equal(s.peak, 2);
  });

  test("permits and proxied calls share the same slots, through the Durable Object", async () => {
    s.reset();
    const permits = [await takePermit(edge, "shared"), await takePermit(edge, "shared")];
    for (const permit of permits) {
      assert.equal(permit.status, 200, permit.body);
      assert.match(permit.json.id, /^f[0-9a-f]{32}$/);
      assert.equal(permit.json.mirror, `${s.url}/`);
      assert.equal(permit.json.lease_ms, 5_000);
    }
    // Both slots are the permits': a proxied call waits for one to be given back.
    const waiting = call(edge, "/egress/shared/after-permit");
    await sleep(500);
    assert.equal(s.calls.length, 0, "the call waits while the permits hold both slots");
    assert.equal(await givePermitBack(edge, "shared", permits[0].json.id), 204);
    const answer = await waiting;
    assert.equal(answer.status, 200, answer.body);
    assert.equal(s.calls.length, 1);
    assert.equal(await givePermitBack(edge, "shared", permits[1].json.id), 204);
    assert.equal(await givePermitBack(edge, "shared", permits[1].json.id), 404, "given back once only");
  });

  test("a proxied call holds its lease for as long as it runs; a permit never given back ends with its lease", async () => {
    const one = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      rules: { rules: [], egress: { providers: [{ id: "one", mirrors: `${s.url}/`, max_in_flight: 1, scope: "fleet", lease: 1, max_wait: 10 }] } },
    });
    try {
      s.reset();
      s.behave = later(2_500, (req) => `answered ${req.url}`);
      // The first call outlives its 1 s lease three times over: renewed, it keeps the slot.
      const answers = await Promise.all([call(one, "/egress/one/long"), sleep(200).then(() => call(one, "/egress/one/next"))]);
      for (const answer of answers) assert.equal(answer.status, 200, answer.body);
      assert.equal(s.peak, 1, "the second call started only once the first was over");
      const [first, second] = s.calls;
      assert.ok(second.t - first.t >= 2_400, `the second call started ${second.t - first.t} ms after the first`);
      // A permit the app never gives back (its pod died) frees the slot when its lease ends.
      const lost = await takePermit(one, "one");
      assert.equal(lost.status, 200, lost.body);
      const started = Date.now();
      const next = await takePermit(one, "one");
      assert.equal(next.status, 200, next.body);
      assert.ok(Date.now() - started >= 800, "granted once the lost permit's lease ended");
      assert.equal(await givePermitBack(one, "one", lost.json.id), 404, "the lost permit ended with its lease");
      assert.equal(await givePermitBack(one, "one", next.json.id), 204);
    } finally {
      await one.close();
    }
  });

  test("when the provider's Durable Object cannot be reached, the isolate's own count stands in, logged", async () => {
    const down = await startEdge({
      build: "dev",
      egressToken: TOKEN,
      faults: { store: "unavailable" },
      rules: { rules: [], egress: { providers: [{ id: "shared", mirrors: `${s.url}/`, max_in_flight: 2, scope: "fleet", max_wait: 10 }] } },
    });
    try {
      s.reset();
      s.behave = later(200, (req) => `answered ${req.url}`);
      const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => call(down, `/egress/shared/d${i}`)));
      for (const answer of answers) assert.equal(answer.status, 200, answer.body);
      assert.equal(s.peak, 2, "the isolate's count holds the same 2 slots");
      const permit = await takePermit(down, "shared");
      assert.equal(permit.status, 200, permit.body);
      assert.match(permit.json.id, /^i[0-9a-f]{32}$/, "an isolate's permit");
      assert.equal(await givePermitBack(down, "shared", permit.json.id), 204);
      const failures = down.logLines().filter((line) => line.includes('"store-failure"') && line.includes('"provider":"shared"'));
      assert.ok(failures.length >= 1, "each fallback is logged as a store-failure of the provider");
    } finally {
      await down.close();
    }
  });
});
