// TokenBucket: the edge build's token bucket. The core answers each decision as a status
// (DecisionStatus, src/wasm/convert.rs) and leaves its figures in a Float64Array over the wasm
// memory (TokenBucketCore.results), so that a decision allocates nothing; this maps the status
// to check's number, decide's object or the error naming the input.
/** @import { LimitDecision } from "../pkg-edge/sluicegate.js" */
import { DecisionStatus, TokenBucketCore } from "../pkg-edge/sluicegate.js";
import { notNumber } from "./numbers.js";

const { Allowed, Denied, InvalidNow, InvalidCost } = DecisionStatus;
// Where TokenBucketCore.results() holds each figure.
const REMAINING = 0; // on CostTooHigh: the capacity
const RETRY_AFTER_MS = 1;
const RESET_MS = 2;

/** A token bucket (GCRA) with time passed in: `count` units per `periodMs`, at most `burst` back to back. */
export class TokenBucket {
  #core;
  #figures; // the core's figures, a view over its memory (empty once the memory grows)

  /**
   * Throws when `burst` or `count` is not a whole number ≥ 1, or `periodMs` not above 0.
   * @param {number} burst
   * @param {number} periodMs
   * @param {number} count
   */
  constructor(burst, periodMs, count) {
    this.#core = new TokenBucketCore(burst, periodMs, count);
    this.#figures = this.#core.results();
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
    const status = this.#core.check(nowMs, cost);
    if (status === Allowed) return this.#read()[REMAINING];
    if (status === Denied) return -Math.max(1, this.#read()[RETRY_AFTER_MS]);
    throw this.#error(status, nowMs, cost);
  }

  /**
   * The same decision as an object.
   * @param {number} nowMs
   * @param {number} [cost]
   * @returns {LimitDecision} `{ allowed, remaining, resetMs }` or `{ allowed: false, retryAfterMs }`
   */
  decide(nowMs, cost = 1) {
    if (typeof nowMs !== "number" || typeof cost !== "number") throw notNumber(["nowMs", nowMs], ["cost", cost]);
    const status = this.#core.check(nowMs, cost);
    const figures = this.#read();
    if (status === Allowed) return { allowed: true, remaining: figures[REMAINING], resetMs: figures[RESET_MS] };
    if (status === Denied) return { allowed: false, retryAfterMs: figures[RETRY_AFTER_MS] };
    throw this.#error(status, nowMs, cost);
  }

  /** Frees the wasm memory now (else it is freed when the bucket is collected). */
  free() {
    this.#core.free();
  }

  /**
   * The core's figures, the view taken again when the wasm memory has grown (a view over a
   * detached buffer reads `undefined`).
   */
  #read() {
    if (this.#figures[REMAINING] === undefined) this.#figures = this.#core.results();
    return this.#figures;
  }

  /** The error for a status that refused the input, naming it. */
  #error(status, nowMs, cost) {
    if (status === InvalidNow) return new Error(`nowMs must be a finite number ≥ 0, got ${nowMs}`);
    if (status === InvalidCost) return new Error(`cost must be a whole number from 0 to 4294967295, got ${cost}`);
    return new Error(`a request costing ${cost} can never fit a capacity of ${this.#read()[REMAINING]}`); // CostTooHigh
  }
}
