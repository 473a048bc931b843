import type { LimitDecision } from "../pkg-edge/sluicegate.js";

/** A token bucket (GCRA) with time passed in: `count` units per `periodMs`, at most `burst` back to back. */
export class TokenBucket {
  /** Throws when `burst` or `count` is not a whole number ≥ 1, or `periodMs` not above 0. */
  constructor(burst: number, periodMs: number, count: number);
  /**
   * Decide on a request of `cost` (default 1) at `nowMs` (any clock, in ms), as one number:
   * the units left (≥ 0) when admitted, else minus the wait in whole ms (≤ −1). Nothing is
   * allocated. Throws, naming it, for a `nowMs` that is not a finite number ≥ 0 or a `cost`
   * that is not a whole number that fits the burst.
   */
  check(nowMs: number, cost?: number): number;
  /** The same decision as an object. */
  decide(nowMs: number, cost?: number): LimitDecision;
  /** Frees the wasm memory now (else it is freed when the bucket is collected). */
  free(): void;
}
