// Tenant bodies (ingest-admission.md: "a body with no declared length is charged when it has
// been read"), in workerd: the instance's max_body_bytes binds every tenant, a stored
// override is checked against it when read, and a body without Content-Length is charged as
// it streams (413 past the cap, 429 past the byte budget or the share in flight), from Node's
// fetch with a ReadableStream body and from curl -T - (a raw chunked request without curl).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { raw } from "./support/raw.mjs";

const sha256 = (key) => createHash("sha256").update(key).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const HAS_CURL = spawnSync("curl", ["--version"]).status === 0;

const KEYS = { free: "key-free-2", bytes: "key-bytes-2", small: "key-small-2", queue: "key-queue-2", over: "key-over-2" };
const CAP = 10_000;

function rules({ cap = CAP } = {}) {
  return {
    rules: [],
    tenants: {
      match: { path: { starts_with: "/hooks/" } },
      key_header: "x-api-key",
      keys: Object.fromEntries(Object.entries(KEYS).map(([t, k]) => [sha256(k), t])),
      // `free` and `over` have no limit of their own, and there is no default: unlimited.
      limits: {
        bytes: { rate: 100, burst: 100, bytes_per_second: 4_000 },
        small: { rate: 100, burst: 100, max_body_bytes: 2_000 },
        queue: { rate: 100, burst: 100, max_queue_bytes: 3_000 },
      },
      max_body_bytes: cap,
    },
  };
}

/**
 * An origin that counts every byte each request brings as it comes (an upload aborted
 * half-way is seen too, `complete: false`), and answers "ok" once a body has ended, after
 * `holdMs(url)` ms.
 */
async function countingOrigin(holdMs = () => 0) {
  const requests = [];
  const sockets = new Set();
  const server = createServer((req, res) => {
    const seen = { url: req.url, headers: req.headers, bytes: 0, chunks: [], complete: false };
    requests.push(seen);
    req.on("data", (c) => {
      seen.bytes += c.length;
      seen.chunks.push(c);
    });
    req.on("error", () => {});
    req.on("end", () => {
      seen.complete = true;
      setTimeout(() => res.end("ok"), holdMs(req.url));
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    to: (url) => requests.filter((r) => r.url === url),
    close: () =>
      new Promise((r) => {
        server.close(r);
        for (const socket of sockets) socket.destroy();
      }),
  };
}

/** A body of `sizes` chunks (each of one repeated letter, a, b, c…), `gapMs` apart. */
function chunks(sizes) {
  return sizes.map((n, i) => Buffer.alloc(n, 97 + (i % 26)));
}

function streamOf(sizes, gapMs) {
  const queue = chunks(sizes);
  return new ReadableStream({
    async pull(controller) {
      const next = queue.shift();
      if (!next) return controller.close();
      controller.enqueue(new Uint8Array(next));
      if (gapMs) await sleep(gapMs);
    },
  });
}

/**
 * What the origin saw of a body cut at `url`: at most `max` bytes, and never its end (an
 * unfinished upload, not a shorter whole one). A body cut at its second chunk may be cut
 * before the upload reached the origin at all; `reached`: it must have.
 */
function assertUnfinished(origin, url, max, { reached = false } = {}) {
  const got = origin.to(url).map(({ bytes, complete }) => ({ bytes, complete }));
  assert.ok(got.length === 1 || (!reached && got.length === 0), `uploads seen: ${JSON.stringify(got)}`);
  for (const seen of got) {
    assert.ok(seen.bytes <= max, `the origin received ${seen.bytes} bytes, more than ${max}`);
    assert.equal(seen.complete, false, "the origin saw an unfinished upload, not a shorter whole one");
  }
}

const answer = async (res) => ({ status: res.status, headers: res.headers, body: await res.text() });

/** POST with a declared body of `bytes` bytes. */
async function declared(edge, tenant, url, bytes) {
  const headers = { "x-api-key": KEYS[tenant], "cf-connecting-ip": "192.0.2.7", "content-length": String(bytes) };
  return answer(await fetch(`${edge.url}${url}`, { method: "POST", body: "x".repeat(bytes), headers }));
}

/** POST a body of no declared length from Node's fetch: a ReadableStream, `duplex: "half"`. */
async function streamed(edge, tenant, url, sizes, { gapMs = 20 } = {}) {
  const headers = { "x-api-key": KEYS[tenant], "cf-connecting-ip": "192.0.2.7" };
  const res = await fetch(`${edge.url}${url}`, { method: "POST", body: streamOf(sizes, gapMs), duplex: "half", headers });
  return answer(res);
}

/**
 * POST a body of no declared length as curl sends one from a pipe (`curl -T -`: chunked),
 * each chunk written `gapMs` after the last; without curl, the same chunks in a raw chunked
 * request. `{ status, body, client }`.
 */
async function chunkedUpload(edge, tenant, url, sizes, { gapMs = 20 } = {}) {
  if (!HAS_CURL) {
    const head = `POST ${url} HTTP/1.1\r\nHost: edge.test\r\nX-Api-Key: ${KEYS[tenant]}\r\nTransfer-Encoding: chunked`;
    const body = `${chunks(sizes)
      .map((c) => `${c.length.toString(16)}\r\n${c.toString("latin1")}\r\n`)
      .join("")}0\r\n\r\n`;
    const res = await raw(edge.url, head, body, { length: false });
    return { status: res.status, body: res.body, client: "raw" };
  }
  const args = ["-sS", "-T", "-", "-X", "POST", "-H", `x-api-key: ${KEYS[tenant]}`, "-w", "\n%{http_code}", `${edge.url}${url}`];
  const curl = spawn("curl", args, { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  curl.stdout.on("data", (d) => (out += d));
  curl.stdin.on("error", () => {}); // the edge may answer (and close) before the upload ends
  const exited = new Promise((r) => curl.on("close", r));
  for (const chunk of chunks(sizes)) {
    if (curl.exitCode !== null || curl.stdin.destroyed) break;
    curl.stdin.write(chunk);
    await sleep(gapMs);
  }
  curl.stdin.end();
  await exited;
  const split = out.lastIndexOf("\n");
  return { status: Number(out.slice(split + 1)), body: out.slice(0, split), client: "curl" };
}

describe("the instance's max_body_bytes binds every tenant", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await countingOrigin();
    edge = await startEdge({ build: "deploy", rules: rules(), origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("an unlimited tenant's declared body over the instance's cap is 413, and never read", async () => {
    assert.equal((await declared(edge, "free", "/hooks/free-at-cap", CAP)).status, 200);
    const r = await declared(edge, "free", "/hooks/free-over-cap", CAP + 1);
    assert.equal(r.status, 413);
    assert.match(JSON.parse(r.body).detail, new RegExp(`${CAP} bytes`));
    assert.equal(origin.to("/hooks/free-over-cap").length, 0, "the origin never saw it");
  });

  test("an unlimited tenant's body of no declared length is cut past the cap: 413, and the origin gets no more than the cap", async () => {
    const r = await streamed(edge, "free", "/hooks/free-stream", Array(14).fill(1_000));
    assert.equal(r.status, 413);
    assert.equal(JSON.parse(r.body).status, 413);
    await edge.waitForLog(/"sluicegate":"tenant","status":413,"refusal":"too_large"/);
    assertUnfinished(origin, "/hooks/free-stream", CAP, { reached: true });
  });

  test(`from ${HAS_CURL ? "curl -T -" : "a raw chunked request"}: cut past the cap with 413`, async () => {
    const r = await chunkedUpload(edge, "free", "/hooks/free-curl", Array(12).fill(1_000));
    assert.equal(r.status, 413, `${r.client}: ${r.body}`);
    assertUnfinished(origin, "/hooks/free-curl", CAP);
  });

  test("a tenant's own max_body_bytes below the instance's cuts a body of no declared length at its own", async () => {
    const r = await streamed(edge, "small", "/hooks/small-stream", [1_500, 1_500]);
    assert.equal(r.status, 413);
    assert.match(JSON.parse(r.body).detail, /2000 bytes/);
    assertUnfinished(origin, "/hooks/small-stream", 2_000);
  });
});

describe("a body of no declared length is charged as it streams", () => {
  let origin;
  let edge;
  before(async () => {
    origin = await countingOrigin((url) => (url === "/hooks/queue-slow" ? 1_000 : 0));
    edge = await startEdge({ build: "deploy", rules: rules(), origin: origin.url });
  });
  after(async () => {
    await edge?.close();
    await origin?.close();
  });

  test("within its limits it reaches the origin whole (Node fetch, ReadableStream body)", async () => {
    const sizes = [1_000, 700, 1_300];
    const r = await streamed(edge, "bytes", "/hooks/bytes-whole", sizes);
    assert.equal(r.status, 200, r.body);
    const [seen] = origin.to("/hooks/bytes-whole");
    assert.ok(seen.complete);
    assert.equal(seen.headers["content-length"], undefined, "forwarded without a declared length");
    assert.deepEqual(Buffer.concat(seen.chunks), Buffer.concat(chunks(sizes)), "every byte, in order");
  });

  test(`within its limits it reaches the origin whole (${HAS_CURL ? "curl -T -" : "a raw chunked request"})`, async () => {
    await sleep(1_000); // the byte bucket is full again
    const sizes = [900, 1_100, 1_000];
    const r = await chunkedUpload(edge, "bytes", "/hooks/bytes-curl", sizes);
    assert.equal(r.status, 200, `${r.client}: ${r.body}`);
    const [seen] = origin.to("/hooks/bytes-curl");
    assert.ok(seen.complete);
    assert.deepEqual(Buffer.concat(seen.chunks), Buffer.concat(chunks(sizes)));
  });

  test("over the byte budget: cut, 429 tenant_rate_limited with Retry-After, as a declared body gets", async () => {
    await sleep(1_000);
    assert.equal((await declared(edge, "bytes", "/hooks/bytes-declared", 3_000)).status, 200);
    const refused = await declared(edge, "bytes", "/hooks/bytes-declared", 3_000);
    assert.equal(refused.status, 429);
    await sleep(1_000);
    // 4,000 bytes back to back and 4,000 a second: 8 × 1,000 within about 0.2 s is over.
    const cut = await streamed(edge, "bytes", "/hooks/bytes-over", Array(8).fill(1_000), { gapMs: 25 });
    assert.equal(cut.status, 429, cut.body);
    const [a, b] = [JSON.parse(refused.body), JSON.parse(cut.body)];
    for (const field of ["type", "title", "status", "tenant", "code"]) assert.equal(b[field], a[field], field);
    assert.equal(b.code, "tenant_rate_limited");
    assert.ok(Number(cut.headers.get("retry-after")) >= 1);
    assert.equal(cut.headers.get("sluicegate-scope"), "tenant");
    assert.equal(cut.headers.get("content-type"), refused.headers.get("content-type"));
    assertUnfinished(origin, "/hooks/bytes-over", 7_000);
  });

  test("over the share in flight (max_queue_bytes): cut, 429 tenant_overload; alone it may pass it", async () => {
    const held = declared(edge, "queue", "/hooks/queue-slow", 2_500); // held for 1 s at the origin
    await sleep(200);
    const cut = await streamed(edge, "queue", "/hooks/queue-stream", [1_000, 1_000]);
    assert.equal(cut.status, 429, cut.body);
    assert.equal(JSON.parse(cut.body).code, "tenant_overload");
    assert.equal(cut.headers.get("retry-after"), "1");
    assert.equal((await held).status, 200);
    const alone = await streamed(edge, "queue", "/hooks/queue-alone", [2_000, 2_000]);
    assert.equal(alone.status, 200, "all the tenant holds: admitted although past max_queue_bytes");
  });

  test("a body of no declared length is never refused for that (no 411)", async () => {
    const r = await streamed(edge, "small", "/hooks/small-ok", [10]);
    assert.equal(r.status, 200);
  });
});

describe("in front of the Worker's own handler", () => {
  test("a body of no declared length that the handler forwards with fetch(url, request) is aborted there too when cut", async () => {
    const origin = await countingOrigin();
    const main = fileURLToPath(new URL("./fixtures/forwarding-app.mjs", import.meta.url));
    const edge = await startEdge({ main, vars: { APP_RULES: JSON.stringify(rules()), APP_ORIGIN: origin.url } });
    try {
      const cut = await streamed(edge, "free", "/hooks/app-stream", Array(14).fill(1_000));
      assert.equal(cut.status, 413, cut.body);
      assertUnfinished(origin, "/hooks/app-stream", CAP);
      const whole = await streamed(edge, "free", "/hooks/app-whole", [3_000, 3_000]);
      assert.equal(whole.status, 200, whole.body);
      assert.equal(origin.to("/hooks/app-whole")[0].bytes, 6_000);
    } finally {
      await edge.close();
      await origin.close();
    }
  });
});

describe("a stored override is checked against the instance's cap when read", () => {
  test("after a restart with a lower cap, an override above it is clamped (logged once, naming it)", async () => {
    const persist = mkdtempSync(path.join(tmpdir(), "sluicegate-clamp-"));
    const origin = await countingOrigin();
    const adminToken = "admin-token-clamp";
    const admin = (edge, method, body) =>
      fetch(`${edge.url}/v1/tenants/over/rate-limit`, {
        method,
        body: body && JSON.stringify(body),
        headers: { authorization: `Bearer ${adminToken}` },
      });
    try {
      const before = await startEdge({ build: "deploy", rules: rules({ cap: 100_000 }), origin: origin.url, adminToken, persist });
      try {
        const put = await admin(before, "PUT", { rate: 100, burst: 100, max_body_bytes: 50_000 });
        assert.equal(put.status, 200, await put.text());
        assert.equal((await declared(before, "over", "/hooks/over-before", 20_000)).status, 200);
      } finally {
        await before.close();
      }
      const edge = await startEdge({ build: "deploy", rules: rules({ cap: CAP }), origin: origin.url, adminToken, persist });
      try {
        const r = await declared(edge, "over", "/hooks/over-declared", 20_000);
        assert.equal(r.status, 413);
        assert.match(JSON.parse(r.body).detail, new RegExp(`${CAP} bytes`));
        const cut = await streamed(edge, "over", "/hooks/over-stream", Array(14).fill(1_000));
        assert.equal(cut.status, 413);
        assertUnfinished(origin, "/hooks/over-stream", CAP);
        assert.equal((await declared(edge, "over", "/hooks/over-at-cap", CAP)).status, 200);
        const line = await edge.waitForLog(/"override-clamped"/);
        const logged = JSON.parse(line.message);
        assert.deepEqual([logged.tenant, logged.max_body_bytes, logged.applied], ["over", 50_000, CAP]);
        await sleep(1_100); // the overrides are read again
        assert.equal((await declared(edge, "over", "/hooks/over-again", 20_000)).status, 413);
        const clamped = edge.logLines().filter((l) => l.includes('"override-clamped"'));
        assert.equal(clamped.length, 1, "logged once per isolate");
        const shown = await (await admin(edge, "GET")).json();
        assert.equal(shown.limit.max_body_bytes, CAP, "the limit that applies now");
      } finally {
        await edge.close();
      }
    } finally {
      await origin.close();
      rmSync(persist, { recursive: true, force: true });
    }
  });
});
