// The egress routes under attack: what a caller holding the egress token (or guessing it)
// could do to the isolate, to the provider's budget and to other callers, and the answer the
// edge now gives. Each test names what it reproduces. The providers are servers on 127.0.0.1.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";
import { AUTH, assertProblem, call, givePermitBack, provider, sleep, TOKEN, takePermit } from "./support/providers.mjs";

const MIB = 1024 * 1024;
const ADMIN = "admin-token-0123456789";
const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * GET `path` at the edge and read its body until `enough` bytes came or `ms` passed:
 * `{ status, headers, bytes }` (the body is cancelled after).
 */
async function firstBytes(edge, path, enough, ms, headers = {}) {
  const response = await fetch(edge.url + path, { headers: { ...AUTH, ...headers }, signal: AbortSignal.timeout(ms + 2_000) });
  const reader = response.body.getReader();
  let bytes = 0;
  const deadline = Date.now() + ms;
  while (bytes < enough && Date.now() < deadline) {
    const next = await Promise.race([reader.read(), sleep(deadline - Date.now()).then(() => null)]);
    if (next === null || next.done) break;
    bytes += next.value.byteLength;
  }
  await reader.cancel().catch(() => {});
  return { status: response.status, headers: response.headers, bytes };
}

/**
 * Send `method path` with a chunked body that brings `chunks` × `size` bytes and then never
 * ends; resolve with the status the edge answers while the body is still open, or 0 when it
 * gives none within `ms`.
 */
function endlessBody(edge, method, path, { chunks, size, headers = {}, ms = 4_000 }) {
  const { hostname, port } = new URL(edge.url);
  return new Promise((resolve) => {
    const req = httpRequest({ hostname, port, path, method, headers: { ...headers, "transfer-encoding": "chunked" } });
    const timer = setTimeout(() => {
      req.destroy();
      resolve(0);
    }, ms);
    req.on("response", (res) => {
      clearTimeout(timer);
      res.resume();
      req.destroy();
      resolve(res.statusCode);
    });
    req.on("error", () => {});
    const chunk = Buffer.alloc(size, 120);
    for (let i = 0; i < chunks; i++) req.write(chunk);
  });
}

describe("attacks on the egress routes (deploy build)", () => {
  let p;
  let silent;
  let origin;
  let edge;
  before(async () => {
    p = await provider("p");
    silent = await provider("silent");
    silent.behave = () => {}; // never answers
    origin = await originServer();
    const at = (base) => `${p.url}/${base}/`;
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      egressToken: TOKEN,
      adminToken: ADMIN,
      rules: {
        rules: [],
        tenants: { match: { path: { starts_with: "/hooks/" } }, key_header: "x-api-key", default: { rate: 1, burst: 5 } },
        egress: {
          providers: [
            { id: "big", mirrors: at("big"), max_in_flight: 1, max_wait: 5, cache: { ttl_s: 600, max_entry_bytes: MIB } },
            { id: "bytes", mirrors: at("bytes"), max_in_flight: 4, cache: { ttl_s: 600, max_bytes: 8 * MIB, max_entry_bytes: 3 * MIB } },
            { id: "shared", mirrors: at("shared"), max_in_flight: 4, cache: { ttl_s: 600 } },
            { id: "held", mirrors: at("held"), max_in_flight: 1, max_wait: 1 },
            { id: "om", mirrors: at("om"), max_in_flight: 100, max_wait: 1, weight: "open-meteo", weight_per_minute: 20 },
            { id: "omwide", mirrors: at("om"), max_in_flight: 100, weight: "open-meteo", weight_per_minute: 1000 },
            { id: "omserver", mirrors: at("om"), max_in_flight: 100, weight: "open-meteo-server", weight_per_minute: 1000 },
            { id: "mute", mirrors: [`${silent.url}/`, at("mute")], max_in_flight: 1, timeout_s: 1, max_wait: 10 },
            { id: "overpass", mirrors: at("overpass"), max_in_flight: 2, cache: { ttl_s: 600, post: true } },
          ],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    await p?.close();
    await silent?.close();
  });

  test("an answer larger than max_entry_bytes reaches the caller as it streams, before the provider has finished, and is not kept", async () => {
    // Reproduces: the whole body was read into the isolate before the caller's first byte
    // (four 150 MiB answers raised workerd's memory by 1,176 MiB).
    for (const encoded of [false, true]) {
      p.reset();
      let release;
      const released = new Promise((resolve) => {
        release = resolve;
      });
      p.behave = async (_req, res) => {
        // 4 MiB now, the rest (another 4 MiB) only once the test has seen the first bytes.
        const part = Buffer.alloc(4 * MIB, 48);
        if (encoded) {
          // 8 MiB of zeros in 8 KiB of gzip: a small answer that inflates.
          res.writeHead(200, { "content-type": "application/octet-stream", "content-encoding": "gzip" });
          const whole = gzipSync(Buffer.concat([part, part]));
          res.write(whole.subarray(0, whole.length >> 1));
          await released;
          res.end(whole.subarray(whole.length >> 1));
        } else {
          res.writeHead(200, { "content-type": "application/octet-stream" });
          res.write(part);
          await released;
          res.end(part);
        }
      };
      const what = encoded ? "gzip" : "plain";
      const seen = await firstBytes(edge, `/egress/big/large-${what}`, 2 * MIB, 3_000);
      release();
      assert.equal(seen.status, 200, what);
      assert.ok(seen.bytes >= 2 * MIB, `${what}: ${seen.bytes} bytes reached the caller before the provider finished`);
      assert.equal(seen.headers.get("sluicegate-cache"), "miss");
      // Not kept: the same call goes to the provider again.
      p.behave = (_req, res) => res.end("small now");
      const again = await call(edge, `/egress/big/large-${what}`);
      assert.equal(again.body, "small now", `${what}: not kept`);
      assert.equal(p.calls.length, 2, what);
    }
  });

  test("the cache's bytes are bounded: the oldest answers make room, and 2 MiB answers never exceed max_bytes", async () => {
    // Reproduces: 100 distinct queries × 2 MiB stayed resident (+262 MiB) under max_entries alone.
    p.reset();
    p.behave = (req, res) => res.end(Buffer.alloc(2 * MIB, req.url.length));
    for (let i = 0; i < 10; i++) {
      const answer = await call(edge, `/egress/bytes/blob?n=${i}`);
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get("sluicegate-cache"), "miss");
    }
    const newest = await call(edge, "/egress/bytes/blob?n=9");
    assert.equal(newest.headers.get("sluicegate-cache"), "hit");
    const oldest = await call(edge, "/egress/bytes/blob?n=0");
    assert.equal(oldest.headers.get("sluicegate-cache"), "miss", "evicted: 10 × 2 MiB do not fit in 8 MiB");
    assert.equal(p.calls.length, 11);
  });

  test("an answer is kept per the headers the call carried, never when the provider says private or no-store", async () => {
    // Reproduces: a caller with another Accept-Language got the first caller's body as a hit,
    // and Cache-Control: private answers were shared.
    p.reset();
    p.behave = (req, res) => {
      if (req.url.includes("private")) res.setHeader("cache-control", "private, max-age=600");
      if (req.url.includes("nostore")) res.setHeader("cache-control", "no-store");
      res.setHeader("vary", "Accept-Language");
      res.end(`${req.url} in ${req.headers["accept-language"] ?? "none"}`);
    };
    const en = await call(edge, "/egress/shared/page", { headers: { "accept-language": "en" } });
    const de = await call(edge, "/egress/shared/page", { headers: { "accept-language": "de" } });
    assert.equal(en.body, "/shared/page in en");
    assert.equal(de.body, "/shared/page in de", "another language is another answer");
    assert.equal(de.headers.get("sluicegate-cache"), "miss");
    const enAgain = await call(edge, "/egress/shared/page", { headers: { "accept-language": "en" } });
    assert.equal(enAgain.headers.get("sluicegate-cache"), "hit");
    assert.equal(enAgain.body, "/shared/page in en");
    for (const kind of ["private", "nostore"]) {
      const first = await call(edge, `/egress/shared/${kind}`);
      const second = await call(edge, `/egress/shared/${kind}`);
      assert.equal(first.status, 200);
      assert.equal(second.headers.get("sluicegate-cache"), "miss", `${kind}: not kept`);
    }
    assert.equal(p.calls.length, 2 + 4);
  });

  test("one caller's headers that make the provider fail do not shut the call for callers without them", async () => {
    // Reproduces: a caller whose headers made the provider answer 500 shut the key for every
    // caller for 60 s (503, Retry-After: 60).
    p.reset();
    p.behave = (req, res) => {
      res.statusCode = req.headers["accept-language"] === "xx" ? 500 : 200;
      res.end(res.statusCode === 500 ? "boom" : "fine");
    };
    const attacker = await call(edge, "/egress/shared/report", { headers: { "accept-language": "xx" } });
    assert.equal(attacker.status, 500, "the provider's own failure, passed on to the caller that caused it");
    const other = await call(edge, "/egress/shared/report", { headers: { "accept-language": "en" } });
    assert.equal(other.status, 200, other.body);
    assert.equal(other.body, "fine");
  });

  test("query pairs are keyed in the order the provider reads them: `a` and `%61` are one name", async () => {
    // Reproduces: `?a=evil&%61=good` and `?%61=good&a=evil` shared one key, though the
    // provider answers them differently.
    p.reset();
    p.behave = (req, res) => res.end(`a is ${new URL(req.url, "http://x").searchParams.get("a")}`);
    const first = await call(edge, "/egress/shared/echo?a=evil&%61=good");
    const second = await call(edge, "/egress/shared/echo?%61=good&a=evil");
    assert.equal(first.body, "a is evil");
    assert.equal(second.body, "a is good");
    assert.equal(p.calls.length, 2);
  });

  test("permit ids cannot be guessed, and a proxied call's slot cannot be given back from outside", async () => {
    // Reproduces: ids were sequential (`i489`, `i490`), and a DELETE of the next one freed
    // another caller's slot, a proxied call's included.
    p.reset();
    const a = await takePermit(edge, "held");
    assert.equal(a.status, 200, a.body);
    assert.match(a.json.id, /^i[0-9a-f]{32}$/);
    assert.equal(await givePermitBack(edge, "held", a.json.id), 204);
    const b = await takePermit(edge, "held");
    assert.notEqual(b.json.id, a.json.id);
    assert.equal(await givePermitBack(edge, "held", b.json.id), 204);
    // A proxied call holds the only slot…
    let release;
    p.behave = (_req, res) => {
      release = () => res.end("done");
    };
    const running = call(edge, "/egress/held/slow");
    while (p.calls.length === 0) await sleep(10);
    // …and no id near a permit's frees it.
    for (const near of neighbours(b.json.id)) {
      assert.equal(await givePermitBack(edge, "held", near), 404, `DELETE ${near}`);
    }
    const next = await call(edge, "/egress/held/next");
    assert.equal(next.status, 503, "the slot is still the proxied call's: the next call waits out max_wait");
    assert.equal(p.peak, 1);
    release();
    assert.equal((await running).status, 200);
  });

  test("a query's weight counts every value and the real time range; a caller's number never lowers it", async () => {
    // Reproduces: 100 repeated `&hourly=` priced at 1 (the server charges 10): 25 proxied
    // calls under weight_per_minute 20 spent 200 at the provider in 3 s.
    p.reset();
    const hundred = Array.from({ length: 100 }, (_, i) => `hourly=v${i}`).join("&");
    const heavy = `latitude=1&longitude=2&${hundred}`;
    const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => call(edge, `/egress/om/forecast?${heavy}&n=${i}`)));
    assert.equal(answers.filter((a) => a.status === 200).length, 2, "each call weighs 10: two fit in the minute's 20");
    for (const a of answers.filter((a) => a.status !== 200)) assertProblem(a, 503);
    assert.equal(p.calls.length, 2);
    const weight = async (provider, body) => {
      const permit = await takePermit(edge, provider, body);
      assert.equal(permit.status, 200, permit.body);
      assert.equal(await givePermitBack(edge, provider, permit.json.id), 204);
      return permit.json.weight;
    };
    assert.equal(await weight("omwide", { weight: 0.001, query: heavy }), 10, "the query's weight, not the caller's 0.001");
    assert.equal(await weight("omwide", { weight: 12 }), 12, "a caller may weigh a call more");
    // 5 variables over 28 days: 2 by traffic.md's formula (the default), 1 by the server's.
    const sparse = "latitude=1&longitude=2&daily=a,b,c,d,e&forecast_days=14&past_days=14";
    assert.equal(await weight("omwide", { query: sparse }), 2);
    assert.equal(await weight("omserver", { query: sparse }), 1);
    // 28 days stated by the hour, and 50 locations given one by one.
    assert.equal(await weight("omwide", { query: "latitude=1&longitude=2&hourly=a&start_hour=2026-01-01T00:00&end_hour=2026-01-28T23:00" }), 2);
    const fifty = Array.from({ length: 50 }, (_, i) => `latitude=${i}&longitude=${i}`).join("&");
    assert.equal(await weight("omwide", { query: `${fifty}&hourly=a` }), 50);
  });

  test("a mirror that never answers is given up after timeout_s and the next mirror answers", async () => {
    // Reproduces: a provider that never answered held the slot past max_wait, with no
    // failover (the caller still waiting at 20 s).
    p.reset();
    silent.reset();
    silent.behave = () => {};
    const started = Date.now();
    const answer = await call(edge, "/egress/mute/x");
    const took = Date.now() - started;
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.headers.get("sluicegate-mirror"), `${p.url}/mute/`);
    assert.ok(took >= 900 && took < 4_000, `answered after ${took} ms`);
    for (let i = 0; silent.inFlight() > 0 && i < 100; i++) await sleep(10);
    assert.equal(silent.inFlight(), 0, "the silent mirror's call was cancelled");
  });

  test("POST answers are cached by their normalised body (Overpass's discovery cache)", async () => {
    p.reset();
    let n = 0;
    p.behave = (_req, res) => res.end(`answer ${++n}`);
    const post = (body) => call(edge, "/egress/overpass/interpreter", { method: "POST", body, headers: { "content-type": "application/x-www-form-urlencoded" } });
    const first = await post("data=node(1);out;&x=1");
    const same = await post("x=1&data=node(1);out;");
    const other = await post("data=node(2);out;");
    assert.equal(first.body, "answer 1");
    assert.equal(same.body, "answer 1");
    assert.equal(same.headers.get("sluicegate-cache"), "hit");
    assert.equal(other.body, "answer 2");
    assert.equal(p.calls.length, 2);
  });

  test("bodies are counted as they stream and refused at their cap, before they end", async () => {
    // Reproduces: a 200 MiB chunked body with a valid token was read whole (+130 to +392 MiB)
    // before the 400/413.
    const auth = { authorization: `Bearer ${TOKEN}` };
    assert.equal(await endlessBody(edge, "POST", "/egress/held/permit", { chunks: 3, size: 4096, headers: auth }), 413);
    assert.equal(await endlessBody(edge, "POST", "/egress/held/upload", { chunks: 3, size: 512 * 1024, headers: auth }), 413);
    const admin = { authorization: `Bearer ${ADMIN}` };
    assert.equal(await endlessBody(edge, "PUT", "/v1/tenants/acme/rate-limit", { chunks: 3, size: 32 * 1024, headers: admin }), 400);
  });

  test("a path segment escaping a backslash never reaches the mirror", async () => {
    // Reproduces: `%5C` in a segment reached the mirror as `..%5C`.
    p.reset();
    for (const path of ["/egress/shared/..%5C..%5Cx", "/egress/shared/a%5cb", "/egress/shared/x%00"]) {
      const answer = await call(edge, path);
      assertProblem(answer, 400);
    }
    assert.equal(p.calls.length, 0);
  });

  test("wrong tokens are counted per client: after ten, the client is answered 429 and its token is not compared", async () => {
    // Reproduces: wrong-token calls were answered 401 without limit.
    const from = (ip, token) => fetch(`${edge.url}/egress/shared/x`, { headers: { authorization: `Bearer ${token}`, "cf-connecting-ip": ip } });
    for (let i = 0; i < 10; i++) assert.equal((await from("198.51.100.7", `guess-${i}`)).status, 401);
    const blocked = await from("198.51.100.7", "guess-10");
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers.get("retry-after")) >= 1);
    assert.equal((await from("198.51.100.7", TOKEN)).status, 429, "even the right token, from a client that guessed");
    assert.equal((await from("198.51.100.8", TOKEN)).status, 200, "another client is not held back");
    const noToken = await fetch(`${edge.url}/egress/shared/x`, { headers: { "cf-connecting-ip": "198.51.100.9" } });
    assert.equal(noToken.status, 401);
  });
});

/** Ids next to `id` in every way an id could be counted: its digits read as a number, ±1 to ±3. */
function neighbours(id) {
  const scope = id[0];
  const digits = id.slice(1);
  const hex = digits.length === 32;
  const n = BigInt(hex ? `0x${digits}` : digits);
  const out = [];
  for (const d of [1n, 2n, 3n, -1n, -2n, -3n]) {
    const m = n + d;
    if (m < 0n) continue;
    out.push(scope + (hex ? m.toString(16).padStart(32, "0") : m.toString()));
  }
  return out;
}

describe("a cached call whose client leaves is cancelled (development build)", () => {
  let p;
  let edge;
  before(async () => {
    p = await provider("p");
    // The development build's fault makes the request's signal abort as Cloudflare's does.
    edge = await startEdge({
      build: "dev",
      egressToken: TOKEN,
      faults: { client: "leaves" },
      rules: { rules: [], egress: { providers: [{ id: "c", mirrors: `${p.url}/`, max_in_flight: 1, max_wait: 10, cache: { ttl_s: 60 } }] } },
    });
  });
  after(async () => {
    await edge?.close();
    await p?.close();
  });

  test("five callers that leave during their leads never put more than max_in_flight at the provider", async () => {
    // Reproduces: 5 in flight at max_in_flight 1 when the leading clients left.
    p.reset();
    p.behave = () => {}; // never answers
    const leaving = Array.from({ length: 5 }, (_, i) =>
      call(edge, `/egress/c/slow?n=${i}`, { headers: { "sluicegate-test-leave-after-ms": String(300 + 100 * i) } }).catch((e) => e),
    );
    await Promise.all(leaving);
    await sleep(300);
    assert.equal(p.peak, 1, `peak ${p.peak} calls in flight`);
    for (let i = 0; p.inFlight() > 0 && i < 100; i++) await sleep(10);
    assert.equal(p.inFlight(), 0, "every call of a caller that left was cancelled");
  });
});

describe("worker/examples/traffic.json as written", () => {
  const traffic = JSON.parse(readFileSync(path.join(here, "..", "examples", "traffic.json"), "utf8"));
  const local = {};
  let origin;
  let edge;
  before(async () => {
    origin = await originServer();
    const rules = structuredClone(traffic);
    // Its providers as written, each mirror moved to a server here.
    for (const p of rules.egress.providers) {
      local[p.id] = await provider(p.id);
      p.mirrors = [`${local[p.id].url}/`];
    }
    edge = await startEdge({ build: "deploy", origin: origin.url, egressToken: TOKEN, rules });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
    for (const p of Object.values(local)) await p.close();
  });

  test("Nominatim's identifying User-Agent reaches the provider, whatever the app sends", async () => {
    const expected = traffic.egress.providers.find((p) => p.id === "nominatim").user_agent;
    assert.match(expected, /\(\+https?:\/\//, "an identifying User-Agent with a contact");
    const answer = await call(edge, "/egress/nominatim/search?q=Berlin&format=json", { headers: { "user-agent": "node" } });
    assert.equal(answer.status, 200, answer.body);
    assert.equal(local.nominatim.calls.length, 1);
    assert.equal(local.nominatim.calls[0].headers["user-agent"], expected);
  });

  test("Overpass answers one discovery query per 10 minutes: a repeat POST is answered from the cache", async () => {
    const query = "data=[out:json];node(50.7,7.1,50.8,7.2)[natural=peak];out;";
    const post = () => call(edge, "/egress/overpass/interpreter", { method: "POST", body: query, headers: { "content-type": "application/x-www-form-urlencoded" } });
    const first = await post();
    const repeat = await post();
    assert.equal(first.status, 200, first.body);
    assert.equal(repeat.headers.get("sluicegate-cache"), "hit");
    assert.equal(local.overpass.calls.length, 1);
    assert.equal(Number(repeat.headers.get("age")) < 600, true);
  });
});

describe("a failed snapshot refresh is retried after 60 s (development build, clock ×60)", () => {
  const K = 60;
  let s;
  let edge;
  let virtual;
  before(async () => {
    s = await provider("nifc");
    const realStart = Date.now();
    const virtualStart = 1_800_000_000_000;
    virtual = (t) => virtualStart + (t - realStart) * K;
    edge = await startEdge({
      build: "dev",
      egressToken: TOKEN,
      vars: { SLUICEGATE_CLOCK: `${K},${realStart},${virtualStart}` },
      rules: {
        rules: [],
        egress: {
          providers: [{ id: "wildfires", mirrors: `${s.url}/`, max_in_flight: 1, cache: { ttl_s: 60, refresh: "behind", retry_after_failure_s: 60 } }],
        },
      },
    });
  });
  after(async () => {
    await edge?.close();
    await s?.close();
  });

  test("the last good snapshot is served meanwhile, and exactly one call is made after the 60 s", async () => {
    let status = 200;
    let version = 1;
    s.behave = (_req, res) => {
      res.statusCode = status;
      res.end(status === 200 ? `v${version}` : "down");
    };
    assert.equal((await call(edge, "/egress/wildfires/perimeters")).body, "v1");
    // Past the TTL, the provider down: the refresh behind the request fails.
    status = 503;
    await sleep(1_100);
    const stale = await call(edge, "/egress/wildfires/perimeters");
    assert.equal(stale.headers.get("sluicegate-cache"), "stale");
    while (s.calls.length < 2) await sleep(5);
    const failedAt = virtual(s.calls[1].t);
    // Up again: nothing is tried until 60 s of the edge's time after the failure.
    status = 200;
    version = 2;
    while (virtual(Date.now()) < failedAt + 45_000) {
      const answer = await call(edge, "/egress/wildfires/perimeters");
      assert.equal(answer.body, "v1");
      await sleep(50);
    }
    assert.equal(s.calls.length, 2, "no call within the 60 s");
    while (virtual(Date.now()) < failedAt + 62_000) await sleep(20);
    await call(edge, "/egress/wildfires/perimeters");
    for (let i = 0; s.calls.length < 3 && i < 100; i++) await sleep(10);
    assert.equal(s.calls.length, 3, "one call once the 60 s are over");
    const retriedAfter = virtual(s.calls[2].t) - failedAt;
    assert.ok(retriedAfter >= 60_000 - 3_000, `retried ${retriedAfter} ms after the failure`);
    let fresh;
    for (let i = 0; i < 100; i++) {
      fresh = await call(edge, "/egress/wildfires/perimeters");
      if (fresh.body === "v2") break;
      await sleep(10);
    }
    assert.equal(fresh.body, "v2");
  });
});

describe("a Worker deployed without its Durable Object binding", () => {
  const api = { id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 20 };
  let origin;
  before(async () => {
    origin = await originServer();
  });
  after(async () => {
    await origin?.close();
  });

  test("refuses to start, naming the binding and the wrangler.toml lines to add", async () => {
    // Reproduces: it started and failed open on every counted request, a log line each.
    await assert.rejects(startEdge({ build: "deploy", origin: origin.url, binding: "SOMETHING_ELSE", rules: { rules: [api] } }), (err) => {
      assert.match(err.message, /not starting: env has no Durable Object binding "RATE_LIMITER", which these count in: rule "api"/);
      assert.match(err.message, /\[\[durable_objects\.bindings\]\] name = "RATE_LIMITER" class_name = "RateLimiter"/);
      return true;
    });
  });

  test("starts, saying so once, when its only rules fail open by choice", async () => {
    const edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      binding: "SOMETHING_ELSE",
      rules: { rules: [{ ...api, on_store_failure: "open" }] },
    });
    try {
      await edge.waitForLog(/rule "api" say on_store_failure "open"/);
      for (let i = 0; i < 3; i++) assert.equal((await fetch(`${edge.url}/api/x`)).status, 200);
      assert.equal(edge.logLines().filter((l) => l.includes("on_store_failure")).length, 1, "said once, not per request");
    } finally {
      await edge.close();
    }
  });
});
