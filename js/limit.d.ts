// sluicegate/limit: keyed limits for JavaScript (browsers, Node, Workers) over the core.
import type { LimiterOptions } from "../pkg-edge/sluicegate.js";
export type { LimiterOptions } from "../pkg-edge/sluicegate.js";

/** A decision of `Limiter.limit`. Times are in ms, on the clock of `now` (default `Date.now()`). */
export interface LimitResult {
  /** Whether the request is admitted (and charged). */
  success: boolean;
  /** Units per window. */
  limit: number;
  /** Units left right after this request (0 when refused). */
  remaining: number;
  /** When the key is back at its full quota. */
  reset: number;
  /** How long until a request of the same cost can be admitted (0 when admitted). */
  retryAfter: number;
}

/** Per-request options of `limit` and `peek`. */
export interface LimitOptions {
  /** Units this request takes: a whole number ≥ 0 (default 1). */
  cost?: number;
  /** The time of the request in ms (default `Date.now()`). */
  now?: number;
}

/**
 * Limits per string key (a user, an IP, an API key), each key with its own counter, in a
 * bounded table of at most `maxKeys` keys. Keys back at their full quota are dropped when the
 * table fills (or by `sweep()`); a full table with nothing to drop refuses *new* keys (fail
 * closed, `retryAfter` until the earliest frees up) while keys it holds keep their counts.
 */
export class Limiter {
  constructor(options: LimiterOptions);
  /** Keys holding state. */
  readonly size: number;
  /**
   * Decide on a request of `key`. The result object is the limiter's own and is overwritten
   * by its next `limit` call (nothing is allocated per decision): read it at once, or copy it
   * (`{ ...limiter.limit(key) }`) to keep it.
   */
  limit(key: string, options?: LimitOptions): Readonly<LimitResult>;
  /** What `limit` would answer, changing nothing (a new object, without `reset`). */
  peek(key: string, options?: LimitOptions): Omit<LimitResult, "reset">;
  /** Forget `key`: its next request starts afresh. Whether it held state. */
  reset(key: string): boolean;
  /** Refuse `key` for `ms` from `now`. False when the key holds no state and the table is full. */
  block(key: string, ms: number, options?: { now?: number }): boolean;
  /** Drop the keys back at full quota at `now`; how many. */
  sweep(options?: { now?: number }): number;
  /**
   * The response headers of the last `limit` decision, as the edge writes them, for a limit
   * named `name` (default "default"; 1–64 of A–Z a–z 0–9 _ . -): `RateLimit-Policy`,
   * `RateLimit` and, when refused, `Retry-After`.
   */
  headers(name?: string): Record<string, string>;
  /** The `application/problem+json` body of the last decision's refusal, for a limit named `name`. */
  refusalBody(name?: string): string;
}

/** Browsers: `await init()` loads the .wasm first (Node and Workers need no call). */
export { default } from "../pkg-edge/sluicegate.js";
