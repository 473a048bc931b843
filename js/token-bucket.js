// TokenBucket: the edge build's token bucket, with check's refusals as errors. The core
// answers NaN for input it refuses rather than a Result (which would cost an array per
// call), and this turns NaN into the error it names.
import { TokenBucketCore } from "../pkg-edge/sluicegate.js";
import { notNumber } from "./numbers.js";

/** A token bucket (GCRA) with time passed in: `count` units per `periodMs`, at most `burst` back to back. */
export class TokenBucket {
  #core;

  constructor(burst, periodMs, count) {
    this.#core = new TokenBucketCore(burst, periodMs, count);
  }

  /** Units left (≥ 0) when admitted, else minus the wait in whole ms. */
  check(nowMs, cost = 1) {
    if (typeof nowMs !== "number" || typeof cost !== "number") throw notNumber(["nowMs", nowMs], ["cost", cost]);
    const r = this.#core.check(nowMs, cost);
    if (Number.isNaN(r)) this.#core.explain(nowMs, cost); // throws, naming the input
    return r;
  }

  /** The same decision as `{ allowed, remaining, resetMs }` or `{ allowed: false, retryAfterMs }`. */
  decide(nowMs, cost = 1) {
    if (typeof nowMs !== "number" || typeof cost !== "number") throw notNumber(["nowMs", nowMs], ["cost", cost]);
    return this.#core.decide(nowMs, cost);
  }

  /** Frees the wasm memory now (else it is freed when the bucket is collected). */
  free() {
    this.#core.free();
  }
}
