// Shedding at a saturated upstream budget (traffic.md: "Saturation queues up to
// UPSTREAM_BUDGET_WAIT_S (30s), then sheds: 503 + Retry-After (the SSE stream reports it as
// an error event). A 500 is never the answer to load."): a plain request is shed 503 with a
// problem+json body; one that accepts text/event-stream gets the same problem as one
// `event: error` of a 200 event stream (what an EventSource can read); max_wait defaults to
// 30 s, so a request behind a busy slot waits rather than being shed at once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchChromium } from "../../pkg-tests/support/browser.mjs";
import { startEdge } from "../../js/testing.js";
import { originServer } from "./support/origin.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const budget = (extra = {}) => ({
  rules: [],
  upstreams: [{ id: "slow-api", match: { path: { starts_with: "/api/slow" } }, max_in_flight: 1, ...extra }],
});

/** An origin that answers `/api/slow/hold?ms=N` after N ms, `/page` with an empty HTML page
 * and anything else at once; `at` holds when each request arrived and was answered. */
async function slowOrigin() {
  const at = new Map();
  const origin = await originServer((req, res) => {
    const url = new URL(req.url, "http://origin");
    const arrived = Date.now();
    const done = (body, type = "text/plain") => {
      at.set(url.pathname, { arrived, answered: Date.now() });
      res.writeHead(200, { "content-type": type });
      res.end(body);
    };
    if (url.pathname === "/page") return done("<!doctype html><title>shedding</title>", "text/html");
    if (url.pathname.startsWith("/api/slow/hold")) return setTimeout(() => done("held"), Number(url.searchParams.get("ms")));
    done("quick");
  });
  return { ...origin, at };
}

async function call(edge, path, headers = {}) {
  const res = await fetch(`${edge.url}${path}`, { headers: { "accept-encoding": "identity", ...headers } });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/** The events and the last `retry` of an event stream, parsed as an EventSource does
 * (WHATWG HTML, "Interpreting an event stream"). */
function parseEventStream(text) {
  const events = [];
  let retry;
  let event = { type: "", data: [] };
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === "") {
      if (event.data.length) events.push({ type: event.type || "message", data: event.data.join("\n") });
      event = { type: "", data: [] };
      continue;
    }
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event.type = value;
    else if (field === "data") event.data.push(value);
    else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
  }
  return { events, retry };
}

/** Every status the edge answered in this file: none may be a 500. */
const statuses = [];
function record(answer) {
  statuses.push(answer.status);
  return answer;
}

/** Hold the only slot of `edge`'s budget for `ms`: resolves, once the origin has the
 * request, with `{ held }`, the promise of its answer. */
async function holdSlot(edge, origin, name, ms) {
  const path = `/api/slow/hold/${name}`;
  const held = call(edge, `${path}?ms=${ms}`).then(record);
  while (!origin.seen.some((r) => r.url.startsWith(path))) await sleep(10);
  return { held };
}

describe("a shed after a short max_wait (0.3 s, deploy build)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await slowOrigin();
    edge = await startEdge({ build: "deploy", rules: budget({ max_wait: 0.3 }), origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("a plain request: 503, Retry-After and a problem+json naming the upstream, after waiting max_wait", async () => {
    const { held } = await holdSlot(edge, origin, "a", 1_500);
    const started = Date.now();
    const shed = record(await call(edge, "/api/slow/plain", { accept: "application/json, */*" }));
    const waited = Date.now() - started;
    assert.equal(shed.status, 503, shed.body);
    assert.ok(waited >= 250, `it queued about max_wait first (answered after ${waited} ms)`);
    assert.equal(shed.headers.get("retry-after"), "1", "0.3 s rounded up, at least 1 s");
    assert.equal(shed.headers.get("content-type"), "application/problem+json");
    assert.equal(shed.headers.get("cache-control"), "no-store");
    assert.equal(shed.headers.get("sluicegate-shed"), "slow-api");
    const problem = JSON.parse(shed.body);
    assert.equal(problem.status, 503);
    assert.equal(problem.upstream, "slow-api");
    assert.equal(problem.retry_after, 1);
    assert.match(problem.detail, /"slow-api" is busy/);
    assert.equal(origin.seen.filter((r) => r.url === "/api/slow/plain").length, 0, "a shed request never reaches the origin");
    assert.equal((await held).status, 200);
    await edge.waitForLog(/"upstream-busy","upstream":"slow-api","event_stream":false/);
  });

  test("a request that accepts text/event-stream: 200 text/event-stream, one `event: error` with the problem, retry: the Retry-After", async () => {
    const { held } = await holdSlot(edge, origin, "b", 1_500);
    const [plain, stream] = await Promise.all([
      call(edge, "/api/slow/plain-b").then(record),
      call(edge, "/api/slow/stream", { accept: "text/html;q=0.5, Text/Event-Stream; charset=utf-8, */*;q=0.1" }).then(record),
    ]);
    assert.equal(plain.status, 503);
    assert.equal(stream.status, 200, "an EventSource dispatches events only from a 200");
    assert.equal(stream.headers.get("content-type"), "text/event-stream");
    assert.equal(stream.headers.get("cache-control"), "no-store");
    assert.equal(stream.headers.get("retry-after"), "1");
    assert.equal(stream.headers.get("sluicegate-shed"), "slow-api");
    const { events, retry } = parseEventStream(stream.body);
    assert.equal(events.length, 1, stream.body);
    assert.equal(events[0].type, "error");
    assert.ok(!events[0].data.includes("\n"), "the problem is one data line");
    assert.deepEqual(JSON.parse(events[0].data), JSON.parse(plain.body), "the same problem as the 503 carries");
    assert.equal(events[0].data, plain.body);
    assert.equal(retry, 1_000, "retry: is Retry-After in milliseconds");
    assert.equal(origin.seen.filter((r) => r.url === "/api/slow/stream").length, 0);
    assert.equal((await held).status, 200);
    await edge.waitForLog(/"upstream-busy","upstream":"slow-api","event_stream":true/);
  });

  test("an Accept that only looks like text/event-stream, or refuses it (q=0), gets the 503", async () => {
    const { held } = await holdSlot(edge, origin, "c", 1_500);
    const accepts = ["text/event-streamx", "text/event-stream;q=0, */*", "*/*", "text/*", 'application/json;profile="text/event-stream"'];
    const answers = await Promise.all(accepts.map((accept, i) => call(edge, `/api/slow/lookalike-${i}`, { accept }).then(record)));
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 503, accepts[i]);
      assert.equal(answer.headers.get("content-type"), "application/problem+json", accepts[i]);
      assert.equal(answer.headers.get("sluicegate-shed"), "slow-api", accepts[i]);
    }
    assert.equal((await held).status, 200);
  });

  test("a burst on one slot: the origin's answers and sheds of either form, never a 500", async () => {
    const { held } = await holdSlot(edge, origin, "d", 800);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => call(edge, `/api/slow/burst-${i}`, i % 2 ? { accept: "text/event-stream" } : {}).then(record)));
    for (const [i, answer] of answers.entries()) {
      const kind = answer.headers.get("content-type");
      if (i % 2) {
        assert.equal(answer.status, 200, `request ${i}`);
        assert.equal(kind, "text/event-stream", `request ${i}: shed as an event stream`);
      } else {
        assert.equal(answer.status, 503, `request ${i}`);
        assert.equal(kind, "application/problem+json");
      }
    }
    assert.equal((await held).status, 200);
    // The slot is whole again: a lone request goes through.
    assert.equal(record(await call(edge, "/api/slow/after-burst")).status, 200);
  });
});

describe("max_wait left out: 30 s, not 0 (deploy build)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await slowOrigin();
    edge = await startEdge({ build: "deploy", rules: budget(), origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("the capabilities answer says 30 s", async () => {
    const answer = record(await call(edge, "/api/capabilities"));
    assert.equal(answer.status, 200);
    assert.equal(JSON.parse(answer.body).upstreams[0].max_wait_s, 30);
  });

  test("requests queued behind a slot held ~1.5 s are admitted after it, not shed", async () => {
    const { held } = await holdSlot(edge, origin, "e", 1_500);
    const started = Date.now();
    const [plain, stream] = await Promise.all([call(edge, "/api/slow/queued").then(record), call(edge, "/api/slow/queued-stream", { accept: "text/event-stream" }).then(record)]);
    const waited = Date.now() - started;
    assert.equal(plain.status, 200, plain.body);
    assert.equal(plain.body, "quick", "the origin's answer");
    assert.equal(stream.status, 200);
    assert.equal(stream.body, "quick", "the origin's answer, not a shed");
    assert.equal(plain.headers.get("sluicegate-shed"), null);
    assert.ok(waited >= 1_000, `they waited for the slot (${waited} ms)`);
    const first = origin.at.get("/api/slow/hold/e");
    for (const path of ["/api/slow/queued", "/api/slow/queued-stream"]) {
      assert.ok(origin.at.get(path).arrived >= first.answered, `${path} reached the origin only after the slot came back`);
    }
    assert.equal((await held).status, 200);
  });
});

describe("an EventSource in Chromium reads the shed", () => {
  let origin;
  let edge;
  let browser;
  before(async () => {
    origin = await slowOrigin();
    edge = await startEdge({ build: "deploy", rules: budget({ max_wait: 0.3 }), origin: origin.url });
    browser = await launchChromium(15_000);
  });
  after(async () => {
    await browser?.close().catch(() => {});
    await edge?.close();
    await origin?.close();
  });

  test("its `error` listener gets the problem JSON as event.data", async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(15_000);
    const response = await page.goto(`${edge.url}/page`);
    assert.equal(response.status(), 200);
    const { held } = await holdSlot(edge, origin, "f", 3_000);
    const seen = await page.evaluate(
      () =>
        new Promise((resolve) => {
          const source = new EventSource("/api/slow/events");
          const errors = [];
          source.addEventListener("error", (event) => {
            errors.push({ kind: event.constructor.name, data: event.data ?? null });
            if (event.data !== undefined) {
              source.close();
              resolve({ errors, readyState: source.readyState });
            }
          });
          setTimeout(() => {
            source.close();
            resolve({ errors, readyState: source.readyState, timedOut: true });
          }, 10_000);
        }),
    );
    assert.ok(!seen.timedOut, JSON.stringify(seen));
    assert.equal(seen.errors.length, 1, "the shed's event comes first, before any connection error");
    assert.equal(seen.errors[0].kind, "MessageEvent");
    const problem = JSON.parse(seen.errors[0].data);
    assert.equal(problem.status, 503);
    assert.equal(problem.upstream, "slow-api");
    assert.equal(problem.retry_after, 1);
    assert.equal(origin.seen.filter((r) => r.url === "/api/slow/events").length, 0);
    statuses.push((await held).status);
    await page.close();
  });
});

test("never a 500", () => {
  assert.ok(statuses.length > 20, `${statuses.length} answers recorded`);
  assert.ok(!statuses.includes(500), `statuses: ${statuses}`);
  assert.ok(
    statuses.every((s) => s === 200 || s === 503),
    `statuses: ${statuses}`,
  );
});
