// Requests sent verbatim over a socket, for what `fetch` would not send: odd request-targets,
// hostile headers, bodies framed two ways, clients that leave.
import net from "node:net";

/**
 * Send `head` (the request line and headers, CRLF-separated, without the blank line) and
 * then `body` verbatim to `edgeUrl`; resolve with the final answer (interim 1xx answers are
 * skipped): `{ status, headers, body, raw }`, `body` de-chunked, `raw` all that came.
 *
 * Options: `length` (default true) adds a `Content-Length` for a non-empty `body`;
 * `bodyDelay` ms between the head and the body; `leaveAfter` ms: the client goes away then,
 * answered or not (resolving with what came, `status` 0 if nothing); `timeout` ms (10 s)
 * before it gives up the same way.
 *
 * @returns {Promise<{status: number, headers: Record<string, string>, body: string, raw: string}>}
 */
export function raw(edgeUrl, head, body = "", { length = true, bodyDelay = 0, leaveAfter, timeout = 10_000 } = {}) {
  const { hostname, port } = new URL(edgeUrl);
  const declared = length && body ? `\r\nContent-Length: ${Buffer.byteLength(body)}` : "";
  return new Promise((resolve) => {
    let out = "";
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(`${head}${declared}\r\n\r\n`);
      if (!body) return;
      if (bodyDelay) setTimeout(() => socket.writable && socket.write(body), bodyDelay);
      else socket.write(body);
    });
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parse(out));
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

/** The final answer in `raw`: its head and what follows it, once its head has arrived. */
function final(raw) {
  let rest = raw;
  for (;;) {
    const split = rest.indexOf("\r\n\r\n");
    if (split < 0) return null;
    if (!/^HTTP\/1\.1 1\d\d /.test(rest)) return { top: rest.slice(0, split), rest: rest.slice(split + 4) };
    rest = rest.slice(split + 4);
  }
}

/** Whether `raw` holds a whole final answer (by Content-Length or the last chunk). */
function complete(raw) {
  const answer = final(raw);
  if (!answer) return false;
  const length = /\r\ncontent-length: *(\d+)/i.exec(answer.top);
  if (length) return answer.rest.length >= Number(length[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(answer.top)) {
    return answer.rest === "0\r\n\r\n" || answer.rest.endsWith("\r\n0\r\n\r\n");
  }
  return false;
}

function parse(raw) {
  const answer = final(raw);
  if (!answer) return { status: 0, headers: {}, body: "", raw };
  const [statusLine, ...lines] = answer.top.split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  let body = answer.rest;
  if (headers["transfer-encoding"] === "chunked") {
    body = "";
    for (let at = 0; ; ) {
      const eol = answer.rest.indexOf("\r\n", at);
      const size = parseInt(answer.rest.slice(at, eol), 16);
      if (!size) break;
      body += answer.rest.slice(eol + 2, eol + 2 + size);
      at = eol + 2 + size + 2;
    }
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body, raw };
}
