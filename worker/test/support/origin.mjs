// An origin for the edge's tests: a server on 127.0.0.1 that reads each request's body,
// records it, then lets `handle` answer. `close()` also ends connections still open.
import { createServer } from "node:http";

/**
 * @param {(req, res) => void} [handle]  answers once the body has been read (default "ok")
 * @returns {Promise<{url: string, port: number, seen: Array<{method, url, headers, body, bytes}>, close: () => Promise<void>}>}
 */
export async function originServer(handle = (_req, res) => res.end("ok")) {
  const seen = [];
  const sockets = new Set();
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("error", () => {});
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method, url: req.url, headers: req.headers, body: body.toString(), bytes: body.length });
      handle(req, res);
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    close: () =>
      new Promise((r) => {
        server.close(r);
        for (const socket of sockets) socket.destroy();
      }),
  };
}
