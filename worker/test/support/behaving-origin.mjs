// An origin for tests of what requests hold at the edge: it behaves as the request path
// says (`/<anything>/<behaviour>/<id>`), records every request it saw and how far it got,
// and can hold requests until the test lets them go.
import { createServer } from "node:http";

/**
 * Behaviours (the second-to-last path segment):
 * - `ok`: `200 ok` once the body has been read;
 * - `slow`: `200` after 300 ms (`slow3`: after 3 s);
 * - `hold`: `200` once the test calls `release()` (or after 5 s);
 * - `stream`: `200` with 5 chunks, 60 ms apart;
 * - `fail`: the connection is destroyed without an answer;
 * - `hints`: `103 Early Hints`, then `200` after 50 ms;
 * - `continue`: an unasked-for `100 Continue`, then `200` after 50 ms.
 *
 * @returns {Promise<{url: string, seen: Array<{method, url, headers, bytes, closedEarly: boolean, ended: boolean}>,
 *   holding: () => number, working: () => number, release: () => void, close: () => Promise<void>}>}
 */
export async function behavingOrigin() {
  const seen = [];
  const held = new Set();
  const sockets = new Set();
  const server = createServer((req, res) => {
    const record = { method: req.method, url: req.url, headers: req.headers, bytes: 0, closedEarly: false, ended: false };
    seen.push(record);
    res.on("close", () => {
      record.ended = true;
      if (!res.writableFinished) record.closedEarly = true;
    });
    req.on("data", (chunk) => (record.bytes += chunk.length));
    req.on("error", () => {});
    req.on("end", () => behave(req.url.split("/").at(-2), req, res, held));
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    holding: () => held.size,
    /** Requests the origin has not finished answering (nor seen closed). */
    working: () => seen.filter((r) => !r.ended).length,
    release() {
      for (const answer of [...held]) answer();
    },
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        for (const socket of sockets) socket.destroy();
      }),
  };
}

function behave(behaviour, req, res, held) {
  const end = (ms) => setTimeout(() => !res.destroyed && res.end(`ok ${req.url}`), ms);
  switch (behaviour) {
    case "slow":
      return end(300);
    case "slow3":
      return end(3_000);
    case "hold": {
      const answer = () => {
        held.delete(answer);
        clearTimeout(timer);
        if (!res.destroyed) res.end(`ok ${req.url}`);
      };
      const timer = setTimeout(answer, 5_000);
      held.add(answer);
      res.on("close", () => held.delete(answer));
      return;
    }
    case "stream": {
      res.writeHead(200, { "content-type": "text/plain" });
      let n = 0;
      const timer = setInterval(() => {
        if (res.destroyed) return clearInterval(timer);
        res.write(`chunk ${n}\n`);
        if (++n === 5) {
          clearInterval(timer);
          res.end();
        }
      }, 60);
      return;
    }
    case "fail":
      return req.socket.destroy();
    case "hints":
      res.writeEarlyHints({ link: "</style.css>; rel=preload; as=style" });
      return end(50);
    case "continue":
      res.writeContinue();
      return end(50);
    default:
      return end(0);
  }
}

let probesSent = 0;

/**
 * Whether `slots` requests under `prefix` (to `<prefix>/hold/…`, with `headers`) reach
 * `origin` at the same time: the budget there, and any tenant share, has that many free
 * slots. The origin then lets them go. `{ whole, holding, statuses }`.
 */
export async function probeBudget(edge, origin, prefix, slots, headers = {}) {
  const before = origin.holding();
  const probes = Array.from({ length: slots }, (_, i) => edge.fetch(`${prefix}/hold/probe-${++probesSent}-${i}`, { headers: { "cf-connecting-ip": "203.0.113.9", ...headers } }));
  const deadline = Date.now() + 900;
  while (origin.holding() - before < slots && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const holding = origin.holding() - before;
  origin.release();
  const statuses = await Promise.all(
    probes.map((p) =>
      p.then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      }),
    ),
  );
  return { whole: holding === slots && statuses.every((status) => status === 200), holding, statuses };
}
