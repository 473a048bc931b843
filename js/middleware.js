// sluicegate/middleware: a keyed Limiter in front of an Express (or Connect) app or a Hono app
// on Node, one process. Admitted requests get the RateLimit-Policy and RateLimit headers the
// edge sends; refused ones a 429 with Retry-After and the edge's problem+json body.
/** @import { LimiterOptions } from "../pkg-limit/sluicegate.js" */
import { Limiter } from "./limit-node.js";
import { problemJson } from "../pkg-limit/sluicegate.js";

// `import("./limit.js").Limiter` rather than the Limiter imported above, so that the
// declarations name the module that declares it rather than the Node shim.
/**
 * What both middlewares take: a Limiter's options (or a `limiter` to share), and how to key and weigh a request.
 * @template Req
 * @typedef {(LimiterOptions | { limiter: import("./limit.js").Limiter }) & RateLimitRequestOptions<Req>} RateLimitOptions
 */

/**
 * The part of {@link RateLimitOptions} that is not the limit: how to key and weigh a request, and the limit's name.
 * @template Req
 * @typedef {object} RateLimitRequestOptions
 * @property {(request: Req) => string | undefined} [key] The client a request is counted against (default: see each middleware). A non-string answers 400.
 * @property {(request: Req) => number} [cost] Units a request takes (default 1).
 * @property {string} [name] The limit's name in the RateLimit headers and the refusal body (default "default"): 1–64 of A–Z a–z 0–9 _ . -
 */

/**
 * The parts of Node's IncomingMessage / Express's request the middleware reads.
 * @typedef {object} NodeRequestLike
 * @property {string} [ip]
 * @property {{ remoteAddress?: string }} [socket]
 */

/**
 * The parts of Node's ServerResponse the middleware writes.
 * @typedef {{ statusCode: number; setHeader(name: string, value: string): unknown; end(body?: string): unknown }} NodeResponseLike
 */

/**
 * The parts of Hono's context the middleware uses.
 * @typedef {{ env?: unknown; header(name: string, value: string): void }} HonoContextLike
 */

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

// `app.use(expressRateLimit({ algorithm, limit, windowMs, key }))`; `req.ip` is Express's,
// which honours its "trust proxy" setting.
/**
 * Express/Connect middleware; `key(req)` defaults to `req.ip`, else the socket's address.
 * @template {NodeRequestLike} [Req=NodeRequestLike]
 * @param {RateLimitOptions<Req>} options
 * @returns {(req: Req, res: NodeResponseLike, next: (error?: unknown) => void) => void}
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

// `app.use("/api/*", honoRateLimit({ … }))` (@hono/node-server passes `c.env.incoming`).
/**
 * Hono middleware for Hono on Node; `key(c)` defaults to the socket's address (`c.env.incoming`).
 * @template {HonoContextLike} [C=HonoContextLike]
 * @param {RateLimitOptions<C>} options
 * @returns {(c: C, next: () => Promise<void>) => Promise<Response | undefined>}
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
