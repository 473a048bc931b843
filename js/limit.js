// Limiter: a keyed limiter over the core's bounded slots (LimiterCore). The string keys stay
// here, in a Map from key to slot (V8 seeds its string hashes per isolate), so a key never
// crosses into wasm: a decision is one call with numbers in and a status out, its figures
// read from a Float64Array over the core's memory (LimiterCore.results).
import { LimiterCore } from "../pkg-edge/sluicegate.js";
import { notNumber } from "./numbers.js";

/** The answer of `limit`, reused: each call on the same limiter overwrites it. */
class LimitResult {
  success = false;
  limit = 0;
  remaining = 0;
  reset = 0;
  retryAfter = 0;

  constructor(limit) {
    this.limit = limit;
  }
}

// LimiterCore's statuses, and where its figures stand in `results()`.
const ADMITTED = 0;
const INVALID_INPUT = 2;
const REMAINING = 0;
const RETRY_AFTER_MS = 1;
const RESET_MS = 2;
const SLOT = 3;
const FREED = 4;

function optionsError(options) {
  return new TypeError(`limit options must be an object { cost?, now }, got ${options === null ? "null" : typeof options}`);
}

function keyError(key) {
  return new TypeError(`limiter key must be a string, got ${key === null ? "null" : typeof key}`);
}

/** Keyed limits: `limit(key)` → `{ success, limit, remaining, reset, retryAfter }` (see limit.d.ts). */
export class Limiter {
  #core;
  #slots = new Map(); // key → slot
  #keys = []; // slot → key
  #result;
  #figures; // the core's figures, a view over its memory (empty once the memory grows)

  constructor(options) {
    this.#core = new LimiterCore(options);
    this.#result = new LimitResult(this.#core.limit);
    this.#figures = this.#core.results();
  }

  /** Keys holding state. */
  get size() {
    return this.#slots.size;
  }

  limit(key, options) {
    let cost = 1;
    let now;
    if (options === undefined) now = Date.now();
    else {
      if (typeof options !== "object" || options === null) throw optionsError(options);
      ({ cost = 1, now = Date.now() } = options);
      if (typeof now !== "number" || typeof cost !== "number") throw notNumber(["now", now], ["cost", cost]);
    }
    const slot = this.#slots.get(key);
    const status = slot === undefined ? this.#first(key, now, cost) : this.#core.check(slot, now, cost);
    if (status > 1) this.#invalid(status, now, cost);
    const figures = this.#read();
    const result = this.#result;
    result.success = status === ADMITTED;
    result.remaining = figures[REMAINING];
    result.reset = figures[RESET_MS];
    result.retryAfter = figures[RETRY_AFTER_MS];
    return result;
  }

  /** What `limit` would answer, changing nothing (a new object). */
  peek(key, options = {}) {
    if (typeof options !== "object" || options === null) throw optionsError(options);
    const { cost = 1, now = Date.now() } = options;
    if (typeof key !== "string") throw keyError(key);
    if (typeof now !== "number" || typeof cost !== "number") throw notNumber(["now", now], ["cost", cost]);
    const status = this.#core.peek(this.#slots.get(key) ?? -1, now, cost);
    if (status > 1) this.#invalid(status, now, cost);
    const figures = this.#read();
    return { success: status === ADMITTED, limit: this.#result.limit, remaining: figures[REMAINING], retryAfter: figures[RETRY_AFTER_MS] };
  }

  /** Forget `key`: its next request starts afresh. Whether it held state. */
  reset(key) {
    const slot = this.#slots.get(key);
    if (slot === undefined) return false;
    this.#slots.delete(key);
    this.#keys[slot] = undefined;
    return this.#core.remove(slot);
  }

  /** Refuse `key` for `ms` from `now`. False when the key holds no state and the table is full. */
  block(key, ms, { now = Date.now() } = {}) {
    if (typeof key !== "string") throw keyError(key);
    if (typeof now !== "number" || typeof ms !== "number") throw notNumber(["ms", ms], ["now", now]);
    const slot = this.#slots.get(key);
    const placed = this.#core.block(slot ?? -1, now, ms);
    if (slot === undefined) this.#adopt(key, placed);
    return placed >= 0;
  }

  /** Drop the keys back at full quota at `now` (a full table does this by itself); how many. */
  sweep({ now = Date.now() } = {}) {
    if (typeof now !== "number") throw notNumber(["now", now]);
    const count = this.#core.sweep(now);
    this.#forget();
    return count;
  }

  /**
   * The response headers of the last `limit` decision, as the edge writes them, for a limit
   * named `name`: `RateLimit-Policy`, `RateLimit` and, when refused, `Retry-After`.
   */
  headers(name = "default") {
    const [policy, state, retryAfter] = this.#core.lastHeaders(name);
    const out = { "RateLimit-Policy": policy, RateLimit: state };
    if (retryAfter) out["Retry-After"] = retryAfter;
    return out;
  }

  /** The `application/problem+json` body of the last decision's refusal, for a limit named `name`. */
  refusalBody(name = "default") {
    return this.#core.refusalBody(name);
  }

  #first(key, now, cost) {
    if (typeof key !== "string") throw keyError(key);
    const status = this.#core.checkNew(now, cost);
    this.#adopt(key, this.#read()[SLOT]); // −1: no slot (refused without a trace, or not decided)
    return status;
  }

  /**
   * The core's figures, the view taken again when the wasm memory has grown (a view over a
   * detached buffer reads `undefined`: cheaper to test than its byteLength).
   */
  #read() {
    if (this.#figures[FREED] === undefined) this.#figures = this.#core.results();
    return this.#figures;
  }

  #adopt(key, slot) {
    this.#forget(); // a sweep may have freed the very slot the key now takes
    if (slot >= 0) {
      this.#slots.set(key, slot);
      this.#keys[slot] = key;
    }
  }

  #forget() {
    if (this.#read()[FREED] === 0) return;
    for (const slot of this.#core.takeFreed()) {
      this.#slots.delete(this.#keys[slot]);
      this.#keys[slot] = undefined;
    }
  }

  #invalid(status, now, cost) {
    if (typeof now !== "number" || !Number.isFinite(now) || now < 0) throw new RangeError(`now must be a finite number of ms ≥ 0, got ${now}`);
    if (status !== INVALID_INPUT) throw new RangeError(`cost ${cost} exceeds the limit of ${this.#result.limit}: it could never be admitted`);
    throw new RangeError(`cost must be a whole number from 0 to 4294967295, got ${cost}`);
  }
}
