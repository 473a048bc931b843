// An origin for tests of what requests hold at the edge: it behaves as the request path
// says (`/<anything>/<behaviour>/<id>`), records every request it saw and how far it got,
// and can hold requests until the test lets them go.
import { createServer } from "node:http";
import net from "node:net";

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

/**
 * Send `head` (request line and headers, CRLF-separated, without the blank line) and then
 * `body` verbatim over a socket to `edgeUrl`; resolve with `{ status, text }` (the whole
 * raw answer as text) once the answer is complete or the edge closes, or `{ status: 0 }`
 * after `timeout` ms. `leaveAfter`: destroy the socket after that many ms instead.
 */
export function rawRequest(edgeUrl, head, body = "", { timeout = 10_000, leaveAfter, bodyDelay = 0 } = {}) {
  const { hostname, port } = new URL(edgeUrl);
  return new Promise((resolve) => {
    let out = "";
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(`${head}\r\n\r\n`);
      if (body) setTimeout(() => socket.writable && socket.write(body), bodyDelay);
    });
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0), text: out });
    };
    const timer = setTimeout(finish, leaveAfter ?? timeout);
    socket.setEncoding("latin1");
    socket.on("data", (data) => {
      out += data;
      if (leaveAfter === undefined && complete(out)) finish();
    });
    socket.on("error", finish);
    socket.on("end", finish);
  });
}

/** Whether `raw` holds a whole final answer (by Content-Length or the last chunk). */
function complete(raw) {
  // Interim answers (1xx) come before the final one.
  const final = raw.replace(/^(HTTP\/1\.1 1\d\d[^]*?\r\n\r\n)+/, "");
  const split = final.indexOf("\r\n\r\n");
  if (split < 0) return false;
  const head = final.slice(0, split).toLowerCase();
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  if (length) return final.length - split - 4 >= Number(length[1]);
  const body = final.slice(split + 4);
  if (head.includes("transfer-encoding: chunked")) return body === "0\r\n\r\n" || body.endsWith("\r\n0\r\n\r\n");
  return false;
}
