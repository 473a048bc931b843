// sluicegate/middleware: a keyed limit in front of an Express (or Connect) app or a Hono app on Node.
import type { Limiter, LimiterOptions } from "./limit.js";

/** What both middlewares take: a Limiter's options (or a `limiter` to share), and how to key and weigh a request. */
export type RateLimitOptions<Req> = (LimiterOptions | { limiter: Limiter }) & {
  /** The client a request is counted against (default: see each middleware). A non-string answers 400. */
  key?: (request: Req) => string | undefined;
  /** Units a request takes (default 1). */
  cost?: (request: Req) => number;
  /** The limit's name in the RateLimit headers and the refusal body (default "default"): 1–64 of A–Z a–z 0–9 _ . - */
  name?: string;
};

/** The parts of Node's IncomingMessage / Express's request the middleware reads. */
export interface NodeRequestLike {
  ip?: string;
  socket?: { remoteAddress?: string };
}
/** The parts of Node's ServerResponse the middleware writes. */
export interface NodeResponseLike {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
}

/** Express/Connect middleware; `key(req)` defaults to `req.ip`, else the socket's address. */
export function expressRateLimit<Req extends NodeRequestLike = NodeRequestLike>(
  options: RateLimitOptions<Req>,
): (req: Req, res: NodeResponseLike, next: (error?: unknown) => void) => void;

/** The parts of Hono's context the middleware uses. */
export interface HonoContextLike {
  env?: unknown;
  header(name: string, value: string): void;
}

/** Hono middleware for Hono on Node; `key(c)` defaults to the socket's address (`c.env.incoming`). */
export function honoRateLimit<C extends HonoContextLike = HonoContextLike>(options: RateLimitOptions<C>): (c: C, next: () => Promise<void>) => Promise<Response | undefined>;
