// sluicegate/middleware: a keyed Limiter in front of an Express (or Connect) app or a Hono app
// on Node, one process. Admitted requests get the RateLimit-Policy and RateLimit headers the
// edge sends; refused ones a 429 with Retry-After and the edge's problem+json body.
import { Limiter } from "./limit-node.js";
import { problemJson } from "../pkg-edge/sluicegate.js";

const PROBLEM_JSON = "application/problem+json";

function setup(options, defaultKey, what) {
  if (options === null || typeof options !== "object") throw new TypeError(`${what}(options): options must be an object`);
  const { key = defaultKey, cost = () => 1, name = "default", limiter, ...limits } = options;
  if (typeof key !== "function") throw new TypeError(`${what}: key must be a function of the request, returning a string`);
  if (typeof cost !== "function") throw new TypeError(`${what}: cost must be a function of the request, returning a whole number`);
  const table = limiter ?? new Limiter(limits);
  if (limiter !== undefined && Object.keys(limits).length) throw new TypeError(`${what}: give either limiter or its options (${Object.keys(limits).join(", ")}), not both`);
  table.headers(name); // a bad name refuses to start
  /** The decision for `input`: `{ status, headers, body }`; status 0 lets it through. */
  return (input) => {
    const id = key(input);
    if (typeof id !== "string") {
      return { status: 400, headers: { "Content-Type": PROBLEM_JSON }, body: problemJson(400, "The client could not be identified.") };
    }
    const admitted = table.limit(id, { cost: cost(input) }).success;
    const headers = table.headers(name);
    if (admitted) return { status: 0, headers, body: "" };
    return { status: 429, headers: { ...headers, "Content-Type": PROBLEM_JSON }, body: table.refusalBody(name) };
  };
}

/**
 * Express/Connect middleware: `app.use(expressRateLimit({ algorithm, limit, windowMs, key }))`.
 * `key(req)` defaults to `req.ip` (Express's, which honours its "trust proxy" setting), else
 * the socket's address.
 */
export function expressRateLimit(options) {
  const decide = setup(options, (req) => req.ip ?? req.socket?.remoteAddress, "expressRateLimit");
  return function rateLimit(req, res, next) {
    let verdict;
    try {
      verdict = decide(req);
    } catch (error) {
      return next(error);
    }
    for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);
    if (verdict.status === 0) return next();
    res.statusCode = verdict.status;
    res.end(verdict.body);
  };
}

/**
 * Hono middleware for Hono on Node (@hono/node-server): `app.use("/api/*", honoRateLimit({ … }))`.
 * `key(c)` defaults to the socket's address (`c.env.incoming`, as @hono/node-server passes it).
 */
export function honoRateLimit(options) {
  const decide = setup(options, (c) => c.env?.incoming?.socket?.remoteAddress, "honoRateLimit");
  return async function rateLimit(c, next) {
    const verdict = decide(c);
    if (verdict.status !== 0) return new Response(verdict.body, { status: verdict.status, headers: verdict.headers });
    for (const [name, value] of Object.entries(verdict.headers)) c.header(name, value);
    await next();
  };
}
