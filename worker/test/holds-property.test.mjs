// A property of the edge: no sequence of request outcomes (an answer, an origin that fails,
// an interim 1xx, a body that contradicts its length, a client that leaves before, while
// or after the origin answers, a refusal) leaves a budget or a tenant's share with fewer
// free slots than before, once every request has ended. Rounds of random outcomes, all at
// once, from a seed (SLUICEGATE_PROPERTY_SEED=n repeats a run; each failure names its seed).
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { startEdge } from "../../js/testing.js";
import { behavingOrigin, probeBudget } from "./support/behaving-origin.mjs";
import { raw } from "./support/raw.mjs";
import { mulberry32 } from "../../scripts/mulberry32.mjs";

const ROUNDS = Number(process.env.SLUICEGATE_PROPERTY_ROUNDS || 20);
const SLOTS = 3;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let origin;
let edge;
before(async () => {
  origin = await behavingOrigin();
  edge = await startEdge({
    origin: origin.url,
    faults: { client: "leaves" },
    rules: {
      rules: [],
      upstreams: [
        { id: "ingest", match: { path: { starts_with: "/hooks/" } }, max_in_flight: SLOTS, max_wait: 1 },
        { id: "partner", match: { path: { starts_with: "/fleet/" } }, max_in_flight: SLOTS, max_wait: 1, scope: "fleet", lease: 10 },
      ],
      tenants: {
        match: { path: { starts_with: "/hooks/" } },
        tenant_header: "x-tenant",
        default: { rate: 10_000, burst: 10_000, max_queue: SLOTS, max_body_bytes: 100_000 },
      },
    },
  });
});
after(async () => {
  await edge?.close();
  await origin?.close();
});

const HEAD = (method, path, extra = "") => `${method} ${path} HTTP/1.1\r\nHost: edge.test\r\nCF-Connecting-IP: 198.51.100.77\r\nX-Tenant: acme${extra}`;

/** The outcomes: one request each, under the budget of prefix `p`; each resolves when the
 * request has ended for its client. */
const OUTCOMES = {
  answer: (p, id) => edge.fetch(`${p}/ok/${id}`, { headers: { "x-tenant": "acme" } }).then((r) => r.text()),
  slow: (p, id) => edge.fetch(`${p}/slow/${id}`, { headers: { "x-tenant": "acme" } }).then((r) => r.text()),
  stream: (p, id) => edge.fetch(`${p}/stream/${id}`, { headers: { "x-tenant": "acme" } }).then((r) => r.text()),
  originFails: (p, id) => edge.fetch(`${p}/fail/${id}`, { headers: { "x-tenant": "acme" } }).then((r) => r.text()),
  earlyHints: (p, id) => edge.fetch(`${p}/hints/${id}`, { headers: { "x-tenant": "acme" } }).then((r) => r.text()),
  unaskedContinue: (p, id) => raw(edge.url, HEAD("POST", `${p}/continue/${id}`), "hello"),
  expectContinue: (p, id) => raw(edge.url, HEAD("POST", `${p}/ok/${id}`, "\r\nExpect: 100-continue"), "hello", { bodyDelay: 50 }),
  framedTwice: (p, id) =>
    raw(edge.url, HEAD("POST", `${p}/ok/${id}`, "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked"), "5\r\nhello\r\n0\r\n\r\n", {
      length: false,
    }),
  // Over the tenant's max_body_bytes under /hooks/ (413 before the body is read); forwarded
  // under /fleet/, where the client stops sending and leaves.
  stallsUpload: (p, id) => raw(edge.url, HEAD("POST", `${p}/ok/${id}`, "\r\nContent-Length: 200000"), "x", { length: false, leaveAfter: 300 }),
  unknownTenant: (p, id) => edge.fetch(`${p}/ok/${id}`).then((r) => r.text()),
  leavesEarly: (p, id, random) =>
    edge.fetch(`${p}/slow/${id}`, { headers: { "x-tenant": "acme", "sluicegate-test-leave-after-ms": String(Math.floor(random() * 400)) } }).then((r) => r.text()),
  leavesWhileQueued: (p, id, random) =>
    edge.fetch(`${p}/slow3/${id}`, { headers: { "x-tenant": "acme", "sluicegate-test-leave-after-ms": String(Math.floor(random() * 800)) } }).then((r) => r.text()),
  leavesMidBody: (p, id) =>
    new Promise((resolve) => {
      const { hostname, port } = new URL(edge.url);
      const req = http.get({ hostname, port, path: `${p}/stream/${id}`, headers: { "x-tenant": "acme" } }, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
        res.on("error", resolve);
        res.on("end", resolve);
      });
      req.on("error", resolve);
    }),
  leavesBeforeAnswer: (p, id) => raw(edge.url, HEAD("GET", `${p}/slow/${id}`), "", { leaveAfter: 100 }),
};
const NAMES = Object.keys(OUTCOMES);
/** An isolate budget with a tenant's share, and a fleet budget (leases from a Durable Object). */
const PREFIXES = ["/hooks", "/fleet"];

/** Once every request of a round has ended, the budget and the share are whole. A request
 * whose client left unnoticed (local workerd notices only when it writes) still runs to its
 * end first: the origin finishes it, and the edge lets go of it when its answer is done. */
async function assertWhole(seed, round, outcomes) {
  for (const prefix of PREFIXES) {
    for (let attempt = 0; ; attempt++) {
      const deadline = Date.now() + 5_000;
      while (origin.working() > 0 && Date.now() < deadline) await sleep(20);
      await sleep(150);
      const { whole, holding, statuses } = await probeBudget(edge, origin, prefix, SLOTS, { "x-tenant": "acme" });
      if (whole) break;
      if (attempt === 2) {
        assert.fail(`seed ${seed}, round ${round} (${outcomes}): ${prefix}: ${holding} of ${SLOTS} slots free after (${statuses})`);
      }
    }
  }
}

test(`no sequence of outcomes leaves a budget or a tenant's share with fewer free slots (${ROUNDS} rounds)`, async (t) => {
  const seed = Number(process.env.SLUICEGATE_PROPERTY_SEED || Math.floor(Math.random() * 2 ** 31));
  const random = mulberry32(seed);
  const tally = Object.fromEntries(NAMES.map((n) => [n, 0]));
  const times = [];
  for (let round = 0; round < ROUNDS; round++) {
    const started = Date.now();
    const count = 4 + Math.floor(random() * 7);
    const requests = [];
    const outcomes = [];
    for (let i = 0; i < count; i++) {
      const name = NAMES[Math.floor(random() * NAMES.length)];
      const prefix = PREFIXES[Math.floor(random() * PREFIXES.length)];
      tally[name] += 1;
      outcomes.push(`${prefix} ${name}`);
      const delay = Math.floor(random() * 200);
      requests.push(sleep(delay).then(() => OUTCOMES[name](prefix, `${seed}-${round}-${i}-${name}`, random)));
    }
    await Promise.all(requests.map((r) => r.catch(() => {})));
    await assertWhole(seed, round, outcomes.join(", "));
    times.push(Date.now() - started);
  }
  t.diagnostic(`seed ${seed}: ${JSON.stringify(tally)}; rounds took ${times.join(", ")} ms`);
});
