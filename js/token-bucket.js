// TokenBucket: the edge build's token bucket, with check's refusals as errors. The core
// answers NaN for input it refuses rather than a Result (which would cost an array per
// call), and this turns NaN into the error it names.
/** @import { LimitDecision } from "../pkg-edge/sluicegate.js" */
import { TokenBucketCore } from "../pkg-edge/sluicegate.js";
import { notNumber } from "./numbers.js";

/** A token bucket (GCRA) with time passed in: `count` units per `periodMs`, at most `burst` back to back. */
export class TokenBucket {
  #core;

  /**
   * Throws when `burst` or `count` is not a whole number ≥ 1, or `periodMs` not above 0.
   * @param {number} burst
   * @param {number} periodMs
   * @param {number} count
   */
  constructor(burst, periodMs, count) {
    this.#core = new TokenBucketCore(burst, periodMs, count);
  }

  /**
   * Decide on a request of `cost` (default 1) at `nowMs` (any clock, in ms), as one number:
   * the units left (≥ 0) when admitted, else minus the wait in whole ms (≤ −1). Nothing is
   * allocated. Throws, naming it, for a `nowMs` that is not a finite number ≥ 0 or a `cost`
   * that is not a whole number that fits the burst.
   * @param {number} nowMs
   * @param {number} [cost]
   * @returns {number}
   */
  check(nowMs, cost = 1) {
    if (typeof nowMs !== "number" || typeof cost !== "number") throw notNumber(["nowMs", nowMs], ["cost", cost]);
    const r = this.#core.check(nowMs, cost);
    if (Number.isNaN(r)) this.#core.explain(nowMs, cost); // throws, naming the input
    return r;
  }

  /**
   * The same decision as an object.
   * @param {number} nowMs
   * @param {number} [cost]
   * @returns {LimitDecision} `{ allowed, remaining, resetMs }` or `{ allowed: false, retryAfterMs }`
   */
  decide(nowMs, cost = 1) {
    if (typeof nowMs !== "number" || typeof cost !== "number") throw notNumber(["nowMs", nowMs], ["cost", cost]);
    return this.#core.decide(nowMs, cost);
  }

  /** Frees the wasm memory now (else it is freed when the bucket is collected). */
  free() {
    this.#core.free();
  }
}
