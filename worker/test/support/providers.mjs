// Providers for the egress tests: servers on 127.0.0.1 that record every call they get, and
// the calls an app makes to the edge's egress routes.
import assert from "node:assert/strict";
import { createServer } from "node:http";

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const TOKEN = "egress-test-token";
export const AUTH = { authorization: `Bearer ${TOKEN}` };

/**
 * A provider (one mirror): a server that records each call as it arrives
 * (`{t, method, url, headers, inFlight, answered}`: `t` is Date.now() at arrival, `inFlight`
 * counts this call) and answers with `behave(req, res, call)` (set by each test; the default
 * answers 200 JSON naming the server and the URL). `peak` is the most calls in flight at once
 * since the last `reset()`.
 */
export async function provider(name) {
  const sockets = new Set();
  let inFlight = 0;
  const state = {
    name,
    calls: [],
    peak: 0,
    behave: answerJson,
    reset() {
      state.calls.length = 0;
      state.peak = 0;
      state.behave = answerJson;
    },
    inFlight: () => inFlight,
  };
  const server = createServer((req, res) => {
    inFlight += 1;
    state.peak = Math.max(state.peak, inFlight);
    const call = { t: Date.now(), method: req.method, url: req.url, headers: req.headers, inFlight, answered: false };
    state.calls.push(call);
    res.on("finish", () => (call.answered = true));
    res.on("close", () => (inFlight -= 1));
    req.on("error", () => {});
    req.resume();
    req.on("end", () => state.behave(req, res, call));
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.port = server.address().port;
  state.url = `http://127.0.0.1:${state.port}`;
  state.close = () =>
    new Promise((resolve) => {
      server.close(resolve);
      for (const socket of sockets) socket.destroy();
    });
  function answerJson(req, res) {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ provider: name, url: req.url }));
  }
  return state;
}

/** Answer 200 after `ms` with `body` (a string, or made from the request), unless the
 * connection went away. */
export const later = (ms, body) => (req, res) =>
  setTimeout(() => {
    if (!res.destroyed) res.end(typeof body === "function" ? body(req) : body);
  }, ms);

/** A port nothing listens on (a mirror that refuses connections). */
export async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `method` (GET) `path` at the edge with the egress token (and `headers`, `body`). */
export async function call(edge, path, { headers = {}, method = "GET", body } = {}) {
  const response = await fetch(edge.url + path, { method, body, headers: { ...AUTH, ...headers } });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** `POST <prefix><id>/permit` with `body`; the parsed answer. */
export async function takePermit(edge, id, body) {
  const response = await fetch(`${edge.url}/egress/${id}/permit`, {
    method: "POST",
    headers: { ...AUTH, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: response.status === 200 ? JSON.parse(text) : undefined, body: text };
}

export async function givePermitBack(edge, id, permit, body) {
  const response = await fetch(`${edge.url}/egress/${id}/permit/${permit}`, {
    method: "DELETE",
    headers: { ...AUTH, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await response.text();
  return response.status;
}

export function assertProblem(answer, status, pattern) {
  assert.equal(answer.status, status, answer.body);
  assert.match(answer.headers.get("content-type") ?? "", /application\/problem\+json/);
  if (pattern) assert.match(answer.body, pattern);
}

/** An answer the edge may give under any fault: never a 500, and a 5xx only as the
 * egress's own 502/503 problem answer (or a provider's own status, passed on with the mirror
 * that gave it). */
export function assertNoEdgeFailure(answer, what) {
  assert.notEqual(answer.status, 500, `${what}: ${answer.body}`);
  if (answer.status >= 500 && !answer.headers.get("sluicegate-mirror")) {
    assert.ok([502, 503].includes(answer.status), `${what}: ${answer.status} ${answer.body}`);
    assert.match(answer.headers.get("content-type") ?? "", /problem\+json/, `${what}: ${answer.body}`);
  }
}

/** A mirror's base URL for `server` as the edge names it (Sluicegate-Mirror). */
export const mirror = (server, base = "/api/") => `${server.url}${base}`;
