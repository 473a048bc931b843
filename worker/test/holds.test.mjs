// What a request holds at the edge (an upstream slot, its place in the queue, a fleet lease,
// its tenant's share in flight) comes back however the request ends: an answer, an origin
// that fails, an interim 1xx, a client that leaves at any point, a body that contradicts its
// length, a panic. Each test checks afterwards that the budget is whole again: as many
// requests as it has slots reach the origin at once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startEdge } from "../../js/testing.js";
import { behavingOrigin, probeBudget } from "./support/behaving-origin.mjs";
import { raw } from "./support/raw.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition, ms, what) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(10);
  }
}

/** `slots` requests under `prefix` reach `origin` at the same time: the budget (and any
 * tenant share) has that many free slots. `headers` go with each probe. */
async function assertWhole(edge, origin, prefix, slots, headers = {}) {
  const { whole, holding, statuses } = await probeBudget(edge, origin, prefix, slots, headers);
  assert.ok(whole, `${holding} of ${slots} probes at the origin at once; answered ${statuses}`);
}

const budget = (extra = {}) => ({
  id: "ingest",
  match: { path: { starts_with: "/hooks/" } },
  max_in_flight: 2,
  max_wait: 2,
  ...extra,
});

const expectContinue = (path) =>
  `POST ${path} HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.1\r\nX-Tenant: acme\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nExpect: 100-continue`;

describe("Expect: 100-continue and interim answers (deploy build)", () => {
  let origin;
  const edges = {};
  before(async () => {
    origin = await behavingOrigin();
    const tenants = {
      match: { path: { starts_with: "/hooks/" } },
      tenant_header: "x-tenant",
      default: { rate: 1000, burst: 1000, max_queue: 2 },
    };
    const start = (rules) => startEdge({ build: "deploy", origin: origin.url, rules });
    edges.isolate = await start({ rules: [], upstreams: [budget()] });
    edges.fleet = await start({ rules: [], upstreams: [budget({ scope: "fleet", lease: 5 })] });
    edges.tenant = await start({ rules: [], tenants });
    edges.rule = await start({
      rules: [{ id: "hooks", match: { path: { starts_with: "/hooks/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 100 }],
      upstreams: [budget()],
    });
  });
  after(async () => {
    for (const edge of Object.values(edges)) await edge.close();
    await origin?.close();
  });

  for (const kind of ["isolate", "fleet", "tenant", "rule"]) {
    test(`${kind}: Expect: 100-continue is answered by the edge, the origin's final answer comes through, nothing stays held`, async () => {
      const edge = edges[kind];
      const seenBefore = origin.seen.length;
      const answers = await Promise.all([1, 2].map((i) => raw(edge.url, expectContinue(`/hooks/ok/${kind}-${i}`), "hello", { length: false, bodyDelay: 100 })));
      for (const answer of answers) {
        assert.equal(answer.status, 200, answer.raw);
        assert.match(answer.body, new RegExp(`ok /hooks/ok/${kind}-`));
      }
      const forwarded = origin.seen.slice(seenBefore).filter((r) => r.url.includes("/ok/"));
      assert.equal(forwarded.length, 2);
      for (const request of forwarded) {
        assert.equal(request.headers.expect, undefined, "the expectation is the edge's to answer, never forwarded");
        assert.equal(request.bytes, 5);
      }
      await assertWhole(edge, origin, "/hooks", 2, { "x-tenant": "acme" });
    });
  }

  for (const [behaviour, status] of [
    ["hints", 103],
    ["continue", 100],
  ]) {
    test(`an origin's unasked-for ${status} is answered 502, never passed on as the answer, and frees the slot`, async () => {
      for (const kind of ["isolate", "fleet", "tenant", "rule"]) {
        const edge = edges[kind];
        // Three requests on two slots (the third waits for one of the first two); two for
        // the tenant, whose share of two in flight is not a queue.
        const answers = await Promise.all(
          (kind === "tenant" ? [1, 2] : [1, 2, 3]).map((i) => edge.fetch(`/hooks/${behaviour}/${kind}-${i}`, { method: "POST", body: "hello", headers: { "x-tenant": "acme" } })),
        );
        for (const answer of answers) {
          const text = await answer.text();
          assert.equal(answer.status, 502, `${kind}: ${text}`);
          assert.match(answer.headers.get("content-type"), /problem\+json/);
          assert.ok(!text.includes("HTTP/1.1"), `${kind}: the rest of the origin's stream never reaches the client`);
          assert.match(text, new RegExp(`interim ${status}`));
        }
        await assertWhole(edge, origin, "/hooks", 2, { "x-tenant": "acme" });
      }
    });
  }
});

describe("a body's framing and length (deploy build)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await behavingOrigin();
    edge = await startEdge({
      build: "deploy",
      origin: origin.url,
      rules: {
        rules: [],
        pre_read: { source_bytes_per_second: 10_000 },
        tenants: {
          match: { path: { starts_with: "/hooks/" } },
          tenant_header: "x-tenant",
          max_body_bytes: 1_000,
          default: { rate: 100, burst: 100, bytes_per_second: 1_000, max_queue: 2 },
        },
        upstreams: [budget()],
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  /** A chunked body of `n` chunks of 10,000 bytes. */
  const chunked = (n) => `${`${`2710\r\n${"x".repeat(10_000)}\r\n`}`.repeat(n)}0\r\n\r\n`;

  test("Content-Length with Transfer-Encoding: chunked is refused 400 before a byte is charged or forwarded", async () => {
    const seenBefore = origin.seen.length;
    const head = "POST /hooks/ok/smuggled HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.2\r\nX-Tenant: acme\r\nContent-Length: 10\r\nTransfer-Encoding: chunked";
    const answer = await raw(edge.url, head, chunked(20), { length: false });
    assert.equal(answer.status, 400, answer.raw);
    assert.match(answer.body, /both Content-Length and Transfer-Encoding/);
    assert.equal(origin.seen.length, seenBefore, "nothing reached the origin");
    // Nothing was charged: the tenant's next 900-byte body and the source's bytes are whole.
    const fine = "POST /hooks/ok/after HTTP/1.1\r\nHost: edge.test\r\nX-Tenant: acme\r\nContent-Length: 900";
    const ok = await raw(edge.url, fine, "y".repeat(900), { length: false });
    assert.equal(ok.status, 200, ok.raw);
    assert.equal(origin.seen.at(-1).bytes, 900);
    await assertWhole(edge, origin, "/hooks", 2, { "x-tenant": "acme" });
  });

  test("no spelling of Transfer-Encoding gets a body past its Content-Length to the origin", async () => {
    const chunkedBody = "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
    const spellings = [
      "Transfer-Encoding: chunked",
      "Transfer-Encoding : chunked",
      "Transfer-Encoding:\tchunked",
      "Transfer-Encoding:chunked",
      "Transfer-Encoding: CHUNKED",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
      "Transfer-Encoding: chunked, identity",
      "Transfer-Encoding: gzip, chunked",
      "Transfer-Encoding: identity",
      "X-Folded: a\r\n Transfer-Encoding: chunked",
    ];
    for (const [i, spelling] of spellings.entries()) {
      const seenBefore = origin.seen.length;
      const head = `POST /hooks/ok/te-${i} HTTP/1.1\r\nHost: edge.test\r\nX-Tenant: acme\r\nContent-Length: 3\r\n${spelling}`;
      const answer = await raw(edge.url, head, chunkedBody, { length: false, timeout: 2_000 });
      const forwarded = origin.seen.slice(seenBefore);
      // Refused by the edge (400) or by workerd's own parser; or, where workerd does not
      // read the header as one, framed by Content-Length: never more than 3 bytes go on.
      assert.ok(
        forwarded.every((r) => r.bytes <= 3),
        `${JSON.stringify(spelling)}: ${forwarded.map((r) => r.bytes)}`,
      );
      if (answer.status === 200) assert.equal(forwarded.length, 1, JSON.stringify(spelling));
      else assert.equal(forwarded.length, 0, `${JSON.stringify(spelling)}: ${answer.status}`);
    }
  });

  test("a chunked body of no declared length is charged as it streams and cut over its source's bytes", async () => {
    // No tenant here (outside /hooks/): the source's 10,000 bytes a second alone cap it.
    const head = "POST /upload/ok/chunked HTTP/1.1\r\nHost: edge.test\r\nTransfer-Encoding: chunked";
    const answer = await raw(edge.url, head, chunked(20), { length: false });
    assert.equal(answer.status, 429, answer.raw);
    assert.equal(answer.headers["sluicegate-scope"], "source");
    const forwarded = origin.seen.filter((r) => r.url === "/upload/ok/chunked");
    assert.ok(
      forwarded.every((r) => r.bytes <= 20_000),
      "the upload was cut, not delivered whole",
    );
  });
});

describe("a body that contradicts the length it declared (the edge inside a Worker of one's own)", () => {
  let edge;
  before(async () => {
    const rules = {
      rules: [],
      tenants: {
        match: { path: { starts_with: "/hooks/" } },
        tenant_header: "x-tenant",
        default: { rate: 100, burst: 100, bytes_per_second: 100_000, max_body_bytes: 10_000, max_queue: 1 },
      },
    };
    const main = fileURLToPath(new URL("./fixtures/declared-body-app.mjs", import.meta.url));
    edge = await startEdge({ main, vars: { APP_RULES: JSON.stringify(rules) } });
  });
  after(async () => {
    await edge?.close();
  });

  const post = (declare, bytes) => edge.fetch("/hooks/in", { method: "POST", body: "x".repeat(bytes), headers: { "x-tenant": "acme", "x-declare": String(declare) } });

  for (const [declare, bytes, what] of [
    [10, 5_000, "longer"],
    [5_000, 10, "shorter"],
  ]) {
    test(`a body ${what} than its Content-Length is cut and answered 400, and its tenant's place comes back`, async () => {
      const answer = await post(declare, bytes);
      const text = await answer.text();
      assert.equal(answer.status, 400, text);
      assert.match(text, what === "longer" ? /longer than its Content-Length of 10 bytes/ : /ended before its Content-Length of 5000 bytes/);
      const fine = await post(100, 100);
      assert.equal(fine.status, 200, "the tenant's one place in flight came back");
      assert.equal(await fine.text(), "the app read 100 bytes");
    });
  }
});

describe("a client that leaves (development build: the client's signal, as Cloudflare reports it)", () => {
  let origin;
  let isolate;
  let fleet;
  before(async () => {
    origin = await behavingOrigin();
    const start = (rules) => startEdge({ origin: origin.url, faults: { client: "leaves" }, rules });
    const tenants = {
      match: { path: { starts_with: "/hooks/" } },
      tenant_header: "x-tenant",
      default: { rate: 1000, burst: 1000, max_queue: 1 },
    };
    isolate = await start({ rules: [], upstreams: [budget({ max_in_flight: 1, max_wait: 10 })], tenants });
    fleet = await start({ rules: [], upstreams: [budget({ max_in_flight: 1, max_wait: 10, scope: "fleet", lease: 30 })] });
  });
  after(async () => {
    await isolate?.close();
    await fleet?.close();
    await origin?.close();
  });

  const leaving = (edge, path, ms) => edge.fetch(path, { headers: { "sluicegate-test-leave-after-ms": String(ms), "x-tenant": "acme" } }).then((r) => r.status);

  for (const kind of ["isolate", "fleet"]) {
    test(`${kind}: leaving while the origin works cancels the origin request and hands the slot on at once`, async () => {
      const edge = kind === "isolate" ? isolate : fleet;
      const started = Date.now();
      const left = leaving(edge, `/hooks/slow3/${kind}-left`, 300);
      await until(() => origin.seen.some((r) => r.url.endsWith(`${kind}-left`)), 2_000, "the first request at the origin");
      // Queued behind it (the tenant's one place in flight is taken until the client leaves).
      const next = edge.fetch(`/hooks/ok/${kind}-next`, { headers: { "x-tenant": "other" } });
      assert.equal(await left, 499);
      const after = await edge.fetch(`/hooks/ok/${kind}-after`, { headers: { "x-tenant": "acme" } });
      assert.equal(after.status, 200, `the tenant's place came back: ${await after.text()}`);
      assert.equal((await next).status, 200);
      // Not after the origin's 3 s: the slot came back when the client left.
      assert.ok(Date.now() - started < 2_000, `done after ${Date.now() - started} ms`);
      assert.ok(origin.seen.find((r) => r.url.endsWith(`${kind}-left`)).closedEarly, "the origin request was cancelled");
    });
  }

  test("a queued client that leaves is never forwarded, and the one behind it gets the slot", async () => {
    const first = isolate.fetch("/hooks/slow/q-first", { headers: { "x-tenant": "other" } });
    await until(() => origin.seen.some((r) => r.url.endsWith("q-first")), 2_000, "the first request at the origin");
    const gone = leaving(isolate, "/hooks/ok/q-gone", 100);
    await sleep(20);
    const behind = isolate.fetch("/hooks/ok/q-behind", { headers: { "x-tenant": "third" } });
    assert.equal((await first).status, 200);
    assert.equal((await behind).status, 200);
    assert.equal(await gone, 499);
    assert.ok(!origin.seen.some((r) => r.url.endsWith("q-gone")), "the client that left was never forwarded");
    await assertWhole(isolate, origin, "/hooks", 1, { "x-tenant": "acme" });
  });
});

describe("a panic (development build: a panic on purpose for one path)", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await behavingOrigin();
    edge = await startEdge({
      origin: origin.url,
      faults: { panic: "/hooks/ok/boom" },
      rules: {
        rules: [{ id: "hooks", match: { path: { starts_with: "/hooks/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 1000 }],
        upstreams: [budget({ max_wait: 5 })],
      },
    });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("frees every slot: the requests in flight are answered 503, and the edge serves on with the whole budget", async () => {
    const held = edge.fetch("/hooks/hold/before-panic");
    await until(() => origin.holding() === 1, 2_000, "a request holding a slot");
    const boom = await edge.fetch("/hooks/ok/boom");
    assert.equal(boom.status, 503);
    assert.match(await boom.text(), /Service Unavailable/);
    assert.equal((await held).status, 503, "in flight on the instance that panicked");
    origin.release();
    await edge.waitForLog("panicked, starting a fresh instance");
    await assertWhole(edge, origin, "/hooks", 2);
    const after = await edge.fetch("/hooks/ok/after");
    assert.equal(after.status, 200);
    assert.match(after.headers.get("ratelimit-policy") ?? "", /"hooks"/, "the rules are in force on the new instance");
  });
});
