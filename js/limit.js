// Limiter: a keyed limiter over the core's bounded slots (LimiterCore). The string keys stay
// here, in a Map from key to slot (V8 seeds its string hashes per isolate), so a key never
// crosses into wasm: a decision is one call with numbers in and a status out, its figures
// read from a Float64Array over the core's memory (LimiterCore.results). The statuses are
// every binding's DecisionStatus (src/wasm/convert.rs).
import { DecisionStatus, LimiterCore } from "../pkg-limit/sluicegate.js";
import { notNumber } from "./numbers.js";

/** How a `Limiter` counts: the build's `LimiterOptions` (its Rust side declares them, and sluicegate/limit exports them). */
/** @import { LimiterOptions } from "../pkg-limit/sluicegate.js" */

/**
 * A decision of `Limiter.limit`. Times are in ms, on the clock of `now` (default `Date.now()`).
 * @typedef {object} LimitResult
 * @property {boolean} success Whether the request is admitted (and charged).
 * @property {number} limit Units per window.
 * @property {number} remaining Units left right after this request (0 when refused).
 * @property {number} reset When the key is back at its full quota.
 * @property {number} retryAfter How long until a request of the same cost can be admitted (0 when admitted).
 */

/**
 * Per-request options of `limit` and `peek`.
 * @typedef {object} LimitOptions
 * @property {number} [cost] Units this request takes: a whole number ≥ 0 (default 1).
 * @property {number} [now] The time of the request in ms (default `Date.now()`).
 */

// The answer of `limit` (a `LimitResult`), reused: each call on the same limiter overwrites
// it. A class expression rather than a declaration, which would declare a type of the same
// name as the typedef above; the class is still named `LimitResult`.
const LimitResult = class {
  success = false;
  limit = 0;
  remaining = 0;
  reset = 0;
  retryAfter = 0;

  constructor(limit) {
    this.limit = limit;
  }
};

// LimiterCore's statuses (Allowed, Denied, or the input it refused), and where its figures
// stand in `results()`.
const { Allowed: ADMITTED, Denied: REFUSED, InvalidNow: INVALID_NOW, CostTooHigh: COST_TOO_HIGH } = DecisionStatus;
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

/**
 * Limits per string key (a user, an IP, an API key), each key with its own counter, in a
 * bounded table of at most `maxKeys` keys. Keys back at their full quota are dropped when the
 * table fills (or by `sweep()`); a full table with nothing to drop refuses *new* keys (fail
 * closed, `retryAfter` until the earliest frees up) while keys it holds keep their counts.
 */
export class Limiter {
  #core;
  #slots = new Map(); // key → slot
  #keys = []; // slot → key
  #result;
  #figures; // the core's figures, a view over its memory (empty once the memory grows)

  /** @param {LimiterOptions} options */
  constructor(options) {
    this.#core = new LimiterCore(options);
    this.#result = new LimitResult(this.#core.limit);
    this.#figures = this.#core.results();
  }

  /** Keys holding state. */
  get size() {
    return this.#slots.size;
  }

  /**
   * Decide on a request of `key`. The result object is the limiter's own and is overwritten
   * by its next `limit` call (nothing is allocated per decision): read it at once, or copy it
   * (`{ ...limiter.limit(key) }`) to keep it.
   * @param {string} key
   * @param {LimitOptions} [options]
   * @returns {Readonly<LimitResult>}
   */
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
    if (status > REFUSED) this.#invalid(status, now, cost);
    const figures = this.#read();
    const result = this.#result;
    result.success = status === ADMITTED;
    result.remaining = figures[REMAINING];
    result.reset = figures[RESET_MS];
    result.retryAfter = figures[RETRY_AFTER_MS];
    return result;
  }

  /**
   * What `limit` would answer, changing nothing (a new object, without `reset`).
   * @param {string} key
   * @param {LimitOptions} [options]
   * @returns {Omit<LimitResult, "reset">}
   */
  peek(key, options = {}) {
    if (typeof options !== "object" || options === null) throw optionsError(options);
    const { cost = 1, now = Date.now() } = options;
    if (typeof key !== "string") throw keyError(key);
    if (typeof now !== "number" || typeof cost !== "number") throw notNumber(["now", now], ["cost", cost]);
    const status = this.#core.peek(this.#slots.get(key) ?? -1, now, cost);
    if (status > REFUSED) this.#invalid(status, now, cost);
    const figures = this.#read();
    return { success: status === ADMITTED, limit: this.#result.limit, remaining: figures[REMAINING], retryAfter: figures[RETRY_AFTER_MS] };
  }

  /**
   * Forget `key`: its next request starts afresh. Whether it held state.
   * @param {string} key
   * @returns {boolean}
   */
  reset(key) {
    const slot = this.#slots.get(key);
    if (slot === undefined) return false;
    this.#slots.delete(key);
    this.#keys[slot] = undefined;
    return this.#core.remove(slot);
  }

  /**
   * Refuse `key` for `ms` from `now`. False when the key holds no state and the table is full.
   * @param {string} key
   * @param {number} ms
   * @param {{ now?: number }} [options]
   * @returns {boolean}
   */
  block(key, ms, { now = Date.now() } = {}) {
    if (typeof key !== "string") throw keyError(key);
    if (typeof now !== "number" || typeof ms !== "number") throw notNumber(["ms", ms], ["now", now]);
    const slot = this.#slots.get(key);
    const placed = this.#core.block(slot ?? -1, now, ms);
    if (slot === undefined) this.#adopt(key, placed);
    return placed >= 0;
  }

  // A full table does this by itself when it needs room.
  /**
   * Drop the keys back at full quota at `now`; how many.
   * @param {{ now?: number }} [options]
   * @returns {number}
   */
  sweep({ now = Date.now() } = {}) {
    if (typeof now !== "number") throw notNumber(["now", now]);
    const count = this.#core.sweep(now);
    this.#forget();
    return count;
  }

  /**
   * The response headers of the last `limit` decision, as the edge writes them, for a limit
   * named `name` (default "default"; 1–64 of A–Z a–z 0–9 _ . -): `RateLimit-Policy`,
   * `RateLimit` and, when refused, `Retry-After`.
   * @param {string} [name]
   * @returns {Record<string, string>}
   */
  headers(name = "default") {
    const [policy, state, retryAfter] = this.#core.lastHeaders(name);
    const out = { "RateLimit-Policy": policy, RateLimit: state };
    if (retryAfter) out["Retry-After"] = retryAfter;
    return out;
  }

  /**
   * The `application/problem+json` body of the last decision's refusal, for a limit named `name`.
   * @param {string} [name]
   * @returns {string}
   */
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

  /** The error for a status that refused the input (InvalidNow, InvalidCost, CostTooHigh), naming it. */
  #invalid(status, now, cost) {
    if (status === INVALID_NOW) throw new RangeError(`now must be a finite number of ms ≥ 0, got ${now}`);
    if (status === COST_TOO_HIGH) throw new RangeError(`cost ${cost} exceeds the limit of ${this.#result.limit}: it could never be admitted`);
    throw new RangeError(`cost must be a whole number from 0 to 4294967295, got ${cost}`);
  }
}
