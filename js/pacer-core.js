// PacerCore: the pacer's scheduler with time passed in, as the package has always exported it,
// over the wasm's PacerMachine. The machine answers each decision as a status
// (DecisionStatus) with its figures in a Float64Array over the wasm memory (see
// src/wasm/convert.rs); this maps them to PacerCore's numbers and errors. Pacer (pacer.js)
// uses the machine directly.
import { DecisionStatus, PacerMachine } from "../pkg/sluicegate.js";

/** @import { PacerOptions, PacerReservation, PacerSnapshot } from "../pkg/sluicegate.js" */

const { Allowed, Denied, Busy, Unknown, InvalidNow, InvalidCost, InvalidId } = DecisionStatus;

/** Where a PacerMachine's `results()` holds each figure. */
export const AT_MS = 0;
export const ID = 1;
export const RETRY_AFTER_MS = 2;

/**
 * The error for a status the machine answered for input it refused or a limit it could never
 * meet, naming the argument (`nowMs`, `weight`, `id`), or the machine's own
 * `PacerWeightError` / `PacerQueueFullError`.
 * @param {PacerMachine} machine
 * @param {number} status
 * @param {number} nowMs
 * @param {number} [weight]
 * @param {number} [id]
 * @returns {Error}
 */
export function pacerError(machine, status, nowMs, weight, id) {
  if (status === InvalidNow) return new Error(`nowMs must be a finite number ≥ 0, got ${nowMs}`);
  if (status === InvalidCost) return new Error(`weight must be a finite number above 0, got ${weight}`);
  if (status === InvalidId) return idError(id);
  return machine.lastError();
}

/**
 * The error for an id the machine refused (as the number that crossed, as the machine's own
 * `dispatch` and `reschedule` word it).
 * @param {unknown} id
 */
const idError = (id) => new Error(`id must be a whole number from 0 to 2^53 − 1, got ${Number(id)}`);

/**
 * The figures of `machine`, `view` if it still reads (a view over a buffer the wasm memory
 * left behind when it grew reads `undefined`), else a new view.
 * @param {PacerMachine} machine
 * @param {Float64Array} view
 */
export const figures = (machine, view) => (view[0] === undefined ? machine.results() : view);

/**
 * The pacer's state machine with time passed in (milliseconds on any clock): reservations over
 * several rolling windows, slots for calls in flight, and the shared ledger. Ids are whole
 * numbers: any other (`NaN`, a fraction, a negative number) throws an error naming `id`.
 */
export class PacerCore {
  #machine;
  #figures;
  #lastId = 0;

  /** @param {PacerOptions} [options] */
  constructor(options) {
    this.#machine = new PacerMachine(options);
    this.#figures = this.#machine.results();
  }

  #read() {
    this.#figures = figures(this.#machine, this.#figures);
    return this.#figures;
  }

  /**
   * Commit a call of `weight` at the earliest instant from `nowMs` at which it fits every
   * window; once due it goes before calls of lower `priority` waiting for a slot. Throws a
   * `PacerWeightError` for a call that could never go out, a `PacerQueueFullError` beyond
   * `maxQueued`/`maxQueuedWeight`.
   * @param {number} nowMs
   * @param {number} weight
   * @param {number | null} [priority]
   * @returns {PacerReservation}
   */
  reserve(nowMs, weight, priority) {
    return this.#machine.reserve(nowMs, weight, priority);
  }

  /**
   * `reserve` without building an object: returns the instant (ms) the call may go out; its
   * id is `lastId`.
   * @param {number} nowMs
   * @param {number} weight
   * @param {number | null} [priority]
   * @returns {number}
   */
  place(nowMs, weight, priority) {
    const status = this.#machine.place(nowMs, weight, priority);
    if (status !== Allowed) throw pacerError(this.#machine, status, nowMs, weight);
    const f = this.#read();
    this.#lastId = f[ID];
    return f[AT_MS];
  }

  /** The id of the call `place` reserved last. */
  get lastId() {
    return this.#lastId;
  }

  /**
   * A permit now or never: the id of a call in flight (release it when it has answered), `0`
   * when every slot is taken, or minus the milliseconds until the budget has room.
   * @param {number} nowMs
   * @param {number} weight
   * @returns {number}
   */
  tryAcquire(nowMs, weight) {
    const status = this.#machine.tryAcquire(nowMs, weight);
    if (status === Allowed) return this.#read()[ID];
    if (status === Busy) return 0;
    if (status === Denied) return -this.#read()[RETRY_AFTER_MS];
    throw pacerError(this.#machine, status, nowMs, weight);
  }

  /**
   * How long a call of `weight` asked at `nowMs` would wait, committing nothing.
   * @param {number} nowMs
   * @param {number} weight
   * @returns {number}
   */
  etaMs(nowMs, weight) {
    return this.#machine.etaMs(nowMs, weight);
  }

  /**
   * The queued call `id` is due at `nowMs`: `-1` it went out (in flight until `release`), `-2`
   * every slot is taken (`nextInLine` hands it one), `-3` no such queued call; any other value
   * is the instant (ms) to wait for before asking again.
   * @param {number} nowMs
   * @param {number} id
   * @returns {number}
   */
  due(nowMs, id) {
    const status = this.#machine.due(nowMs, id);
    if (status === Allowed) return -1;
    if (status === Busy) return -2;
    if (status === Unknown) return -3;
    if (status === Denied) return this.#read()[AT_MS];
    throw pacerError(this.#machine, status, nowMs, undefined, id);
  }

  /**
   * The call went out at its planned instant (ignoring slots): no refund from now on.
   * @param {number} id
   */
  dispatch(id) {
    this.#machine.dispatch(id);
  }

  /**
   * The dispatched call answered; its slot is free. Returns whether it was in flight.
   * @param {number} id
   * @returns {boolean}
   */
  release(id) {
    const status = this.#machine.release(id);
    if (status === InvalidId) throw idError(id);
    return status === Allowed;
  }

  /**
   * The call that waited longest for a slot, once a slot is free (pass it to `due`).
   * @returns {number | undefined}
   */
  nextInLine() {
    return this.#machine.nextInLine() === Allowed ? this.#read()[ID] : undefined;
  }

  /**
   * Cancel: `true` if refunded (not yet dispatched), `false` if it stays spent.
   * @param {number} id
   * @returns {boolean}
   */
  cancel(id) {
    const status = this.#machine.cancel(id);
    if (status === InvalidId) throw idError(id);
    return status === Allowed;
  }

  /**
   * Move a reservation that could not go out at its instant to the earliest fit from `nowMs`.
   * @param {number} nowMs
   * @param {number} id
   * @returns {PacerReservation}
   */
  reschedule(nowMs, id) {
    return this.#machine.reschedule(nowMs, id);
  }

  /**
   * Change any of the options, keeping everything spent; queued reservations are planned
   * again. Returns `{ moved, refused }`.
   * @param {number} nowMs
   * @param {PacerOptions} options
   * @returns {ReturnType<PacerMachine["setLimits"]>}
   */
  setLimits(nowMs, options) {
    return this.#machine.setLimits(nowMs, options);
  }

  /**
   * Spent weight per window at `nowMs`, and what is queued and in flight.
   * @param {number} nowMs
   * @returns {PacerSnapshot}
   */
  snapshot(nowMs) {
    return this.#machine.snapshot(nowMs);
  }

  /**
   * Name this pacer in a shared ledger.
   * @param {string} name
   */
  setOwner(name) {
    this.#machine.setOwner(name);
  }

  /**
   * The ledger as stored: `[atMs, weight, owner, seq, dispatched (0|1)]` per entry.
   * @returns {[number, number, string, number, 0 | 1][]}
   */
  entries() {
    return this.#machine.entries();
  }

  /**
   * Take a stored ledger (as `entries()` writes it, shared with other pacers) as the truth.
   * Malformed rows are skipped.
   * @param {[number, number, string, number, 0 | 1][]} stored
   */
  sync(stored) {
    this.#machine.sync(stored);
  }

  /**
   * Every spend still inside a window as `[atMs, weight, dispatched]`, for persistence.
   * @returns {[number, number, boolean][]}
   */
  exportSpends() {
    return this.#machine.exportSpends();
  }

  /**
   * Count spends recorded elsewhere (another tab, an earlier page load), each `[atMs, weight]`,
   * against every window.
   * @param {number} nowMs
   * @param {[number, number][]} spends
   */
  importSpends(nowMs, spends) {
    this.#machine.importSpends(nowMs, spends);
  }

  /** Frees the wasm memory now (else it is freed when the core is collected). */
  free() {
    this.#machine.free();
  }

  // Disposable as the wasm classes are (`using core = new PacerCore()`). A host without
  // Symbol.dispose has no `using` either (the method is then named "undefined", unused).
  [Symbol.dispose]() {
    this.#machine.free();
  }
}
