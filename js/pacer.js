// Pacer: the promise, AbortSignal and event face of PacerCore. Every decision (where a call fits, when
// it goes out, who gets a free slot, what a late call or a change of limits moves) is the core's; its
// waits are gloo-timers futures (Wait). The ledger stores a budget shared between tabs needs: ledger.js.
import { DecisionStatus, PacerMachine, Wait } from "../pkg/sluicegate.js";
import { abortReason, onAbort } from "./abort.js";
import { sharedLedger } from "./ledger.js";
import { AT_MS, figures, ID, pacerError, RETRY_AFTER_MS } from "./pacer-core.js";

/**
 * @import { PacerOptions } from "../pkg/sluicegate.js"
 * @import { IDBFactoryLike, LockManagerLike, StorageLike } from "./platform.js"
 */

/**
 * Where a pacer's ledger lives, so that page reloads and every tab of the origin share one
 * budget. With only a `key` (or a string), browsers keep it in IndexedDB, whose transactions
 * are atomic across tabs. With a `storage`, it lives there under `locks`: consistent within
 * one JavaScript context only (browsers copy localStorage between tabs asynchronously).
 * @typedef {object} PacerPersistence
 * @property {string} key One ledger per key.
 * @property {IDBFactoryLike} [indexedDB] Default: `indexedDB`.
 * @property {StorageLike} [storage] A synchronous storage instead of IndexedDB (e.g. for Node or tests).
 * @property {LockManagerLike | null} [locks] With `storage`: default `navigator.locks`; `null` to not lock.
 */

/**
 * A pacer's options: the core's limits ({@link PacerOptions}) and where its ledger lives.
 * @typedef {object} PacerConfig
 * @property {PacerOptions["windows"]} [windows] The rolling windows, as {@link PacerOptions}: default 550 per minute, 4,800 per hour, 9,500 per day (the Open-Meteo free tier, 8 % under).
 * @property {PacerOptions["maxWeight"]} [maxWeight] The most one call may weigh, as {@link PacerOptions}: default 5,000 (the upstream's cap); `null` for none.
 * @property {number} [maxInFlight] At most this many calls out at once (default 4: the upstream refuses more than 5 per IP).
 * @property {PacerOptions["maxQueued"]} [maxQueued] At most this many calls queued; beyond, a `PacerQueueFullError` (default: no cap).
 * @property {PacerOptions["maxQueuedWeight"]} [maxQueuedWeight] At most this much weight queued; beyond, a `PacerQueueFullError` (default: no cap).
 * @property {string | PacerPersistence | null} [persist] A ledger key (IndexedDB in browsers), or where to keep the ledger; default: this pacer's memory only.
 * @property {number | null} [slackMs] How late a call may go out after its planned instant (a late timer, a wait for a free
 *   slot) without being planned again; every window is reserved this much longer. Default
 *   (or `null`): 1 % of the shortest window, from 100 ms to 1 s.
 * @property {number | null} [fixedWindowMarginMs] Plan against the upstream's fixed windows (window k of a length L
 *   is [k·L, (k+1)·L) on `now`'s clock, ms since the Unix epoch) instead of rolling ones, a call at t counting in
 *   every window it may land in within this margin either way (clock error, the upstream's own offset, the time a
 *   call takes to arrive and be counted): a window's budget is spent from its start instead of a whole window after
 *   the first call. Only for an upstream whose windows are fixed and a clock known to agree with its clock to within
 *   the margin (a wrong clock could overspend a window by up to one budget); `slackMs` is then unused. Default
 *   (or `null`): rolling windows, safe whatever the clocks say.
 * @property {() => number} [now] The clock, in milliseconds (default `Date.now`); shared by every tab when persisted.
 */

/**
 * Permission for one call: call `release()` once it has answered (its weight stays spent).
 * @typedef {object} Permit
 * @property {number} id
 * @property {number} weight
 * @property {number} dispatchedAtMs
 * @property {() => void} release
 */

/**
 * @typedef {object} PacerState
 * @property {{ lengthMs: number; budget: number; spent: number }[]} windows Weight spent in each window up to now, by every tab sharing the ledger.
 * @property {number} queued This pacer's calls waiting for their turn, and their weight.
 * @property {number} queuedWeight
 * @property {number} inFlight
 * @property {number} maxInFlight
 * @property {number | null} drainsAtMs When this pacer's last queued call may go out, or null.
 */

/**
 * When `tryAcquire` gives no permit: how long until the budget has room ("budget"), or 0 while every slot is taken ("inFlight").
 * @typedef {object} PacerBusy
 * @property {number} retryAfterMs
 * @property {"budget" | "inFlight"} reason
 */

/**
 * @typedef {object} AcquireOptions
 * @property {AbortSignal} [signal] Aborting before the call goes out rejects with `signal.reason` and refunds its weight.
 * @property {number} [priority] Among calls due and waiting for a free slot, higher goes first (default 0). A committed reservation is never moved.
 */

/**
 * `queued`: a reservation was committed; `dispatch`: a call went out; `idle`: nothing queued
 * or in flight. `detail` is `{ id, weight, atMs }` for queued, `{ id, weight }` for dispatch,
 * undefined for idle.
 * @typedef {Event & { readonly type: "queued" | "dispatch" | "idle"; readonly detail?: { id: number; weight: number; atMs?: number } }} PacerEvent
 */

// What the core's decisions answer (src/wasm/convert.rs), their figures in #figures.
const { Allowed, Denied, Busy, Unknown } = DecisionStatus;

const defined = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/**
 * Paces weighted calls over several rolling windows at once, with an in-flight cap. Building
 * one reads no clock, storage or random source (all wait for first use), so it may live at
 * a Worker's module scope. Options are checked by name: an unknown or bad one throws.
 */
export class Pacer extends EventTarget {
  #core;
  #figures; // the core's figures, a view over the wasm memory (empty once the memory grows)
  #now;
  #ledger;
  /** @type {string | null} */
  #owner = null;
  #waiters = new Map(); // id → { weight, at, resolve, reject, wait, off, done }
  #out = 0; // permits not yet released
  #idle = [];
  #heard = new Set(); // event types someone listens to

  /** @param {PacerConfig} [options] */
  constructor(options = {}) {
    super();
    const { persist = null, now = () => Date.now(), maxInFlight = 4, slackMs, ...limits } = options;
    // slackMs null is the core's default: 1 % of the shortest window, from 100 ms to 1 s.
    this.#core = new PacerMachine(defined({ ...limits, maxInFlight, slackMs: slackMs ?? null }));
    this.#figures = this.#core.results();
    this.#now = now;
    this.#ledger = sharedLedger(persist, this.#core, () => this.owner);
  }

  /**
   * This pacer's owner id in the ledger (made at first use, not at construction: workerd
   * forbids random values at module scope).
   * @returns {string}
   */
  get owner() {
    const owner = this.#owner ?? globalThis.crypto?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    this.#owner = owner;
    return owner;
  }

  /** The core's figures of its last decision. */
  #read() {
    this.#figures = figures(this.#core, this.#figures);
    return this.#figures;
  }

  /** Runs `fn` on the core: at once in memory, else inside one update of the shared ledger. */
  #run(fn) {
    return this.#ledger ? this.#ledger.run(fn) : fn();
  }

  /**
   * EventTarget's, counting who listens, so that events nobody hears are never built.
   * @internal
   * @param {Parameters<EventTarget["addEventListener"]>} args
   */
  addEventListener(...args) {
    this.#heard.add(args[0]);
    super.addEventListener(...args);
  }

  #emit(type, detail) {
    if (this.#heard.has(type)) this.dispatchEvent(Object.assign(new Event(type), { detail }));
  }

  /**
   * Resolves when a call of `weight` may go out. Rejects at once with a `PacerWeightError` for
   * a call that could never go out, or a `PacerQueueFullError` beyond `maxQueued` /
   * `maxQueuedWeight`; rejects with `signal.reason` when aborted before it went out (the
   * weight is refunded; after dispatch it is not).
   * @param {number} weight
   * @param {AcquireOptions} [options]
   * @returns {Promise<Permit>}
   */
  acquire(weight, { signal, priority } = {}) {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const placed = ([at, id]) => {
        /** @type {{ id: number, weight: number, at: number, resolve: (permit: Permit) => void, reject: (error: unknown) => void, wait: Wait | null, off: (() => void) | null, done: boolean }} */
        const w = { id, weight, at, resolve, reject, wait: null, off: null, done: false };
        this.#waiters.set(id, w);
        this.#emit("queued", { id, weight, atMs: at });
        if (signal) w.off = onAbort(signal, () => this.#abort(w, abortReason(signal)));
        signal?.aborted ? this.#abort(w, abortReason(signal)) : this.#step(w); // it may have aborted while placed
      };
      /** @returns {[number, number]} */
      const reserve = () => {
        const now = this.#now();
        const status = this.#core.place(now, weight, priority);
        if (status !== Allowed) throw pacerError(this.#core, status, now, weight);
        const f = this.#read();
        return [f[AT_MS], f[ID]];
      };
      if (this.#ledger) return this.#run(reserve).then(placed, reject);
      placed(reserve()); // a throw rejects this promise
    });
  }

  /** Waits for the call's instant, then asks the core whether it goes. */
  async #step(w) {
    while (!w.done) {
      const delay = w.at - this.#now();
      if (delay > 0) {
        const wait = new Wait(delay);
        w.wait = wait;
        await wait.done; // run out, or cancelled (aborted, or moved by setLimits): look again
        wait.free();
        w.wait = null;
        continue;
      }
      let due;
      let now = 0;
      try {
        // the instant to wait for is read at once: with a shared ledger, another decision may
        // rewrite the figures before the update's promise settles
        due = this.#run(() => {
          now = this.#now();
          const status = this.#core.due(now, w.id);
          if (status === Denied) w.at = this.#read()[AT_MS];
          return status;
        });
        if (this.#ledger) due = await due;
      } catch (error) {
        return this.#settle(w, error);
      }
      // Aborted meanwhile (the abort refunded or released it), or a release hands it a slot.
      if (w.done || due === Busy) return;
      if (due === Unknown) return this.#settle(w, new Error(`the pacer no longer holds call ${w.id}`));
      if (due === Denied) continue; // w.at is the instant to wait for
      if (due !== Allowed) return this.#settle(w, pacerError(this.#core, due, now, w.weight, w.id));
      this.#settle(w);
      return w.resolve(this.#permit(w.id, w.weight));
    }
  }

  /**
   * The call went out: in flight until its permit is released.
   * @returns {Permit}
   */
  #permit(id, weight) {
    this.#out++;
    this.#emit("dispatch", { id, weight });
    let released = false;
    return {
      id,
      weight,
      dispatchedAtMs: this.#now(),
      release: () => {
        if (released) return;
        [released, this.#out] = [true, this.#out - 1];
        this.#core.release(id); // an id the core gave: never InvalidId
        this.#pump();
        this.#checkIdle();
      },
    };
  }

  /** Free slots go to the calls the core says waited longest (one placed again leaves its slot to the next). */
  #pump() {
    for (;;) {
      if (this.#core.nextInLine() !== Allowed) return;
      const w = this.#waiters.get(this.#read()[ID]);
      if (w === undefined) return;
      this.#step(w);
    }
  }

  #settle(w, error) {
    w.done = true;
    this.#waiters.delete(w.id);
    w.off?.();
    w.wait?.cancel();
    if (error) w.reject(error);
  }

  #abort(w, reason) {
    if (w.done) return;
    this.#settle(w, reason);
    return Promise.resolve(this.#run(() => this.#core.cancel(w.id))).finally(() => this.#checkIdle());
  }

  #checkIdle() {
    if (this.#waiters.size || this.#out) return;
    this.#emit("idle");
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  /**
   * A permit now, or why not, never a wait: nothing is queued. Needs the pacer's own ledger
   * (throws a TypeError with `persist`).
   * @param {number} weight
   * @returns {Permit | PacerBusy}
   */
  tryAcquire(weight) {
    if (this.#ledger) throw new TypeError("tryAcquire decides at once, so it needs the pacer's own ledger: with persist, use acquire");
    const now = this.#now();
    const status = this.#core.tryAcquire(now, weight);
    if (status === Allowed) return this.#permit(this.#read()[ID], weight);
    if (status === Busy) return { retryAfterMs: 0, reason: "inFlight" };
    if (status === Denied) return { retryAfterMs: Math.max(0, this.#read()[RETRY_AFTER_MS]), reason: "budget" };
    throw pacerError(this.#core, status, now, weight);
  }

  /**
   * Acquire, run `fn`, release (also when `fn` throws); resolves to what `fn` resolves to.
   * @template T
   * @param {number} weight
   * @param {(signal?: AbortSignal) => T | PromiseLike<T>} fn
   * @param {AcquireOptions} [options]
   * @returns {Promise<T>}
   */
  async schedule(weight, fn, options = {}) {
    const permit = await this.acquire(weight, options);
    try {
      return await fn(options.signal);
    } finally {
      permit.release();
    }
  }

  /**
   * `fn` paced: each call is scheduled with the weight `weightOf(...args)` (default 1).
   * @template {unknown[]} A
   * @template T
   * @param {(...args: A) => T | PromiseLike<T>} fn
   * @param {(...args: A) => number} [weightOf]
   * @returns {(...args: A) => Promise<T>}
   */
  wrap(fn, weightOf = () => 1) {
    return (...args) => this.schedule(weightOf(...args), () => fn(...args));
  }

  /**
   * Resolves once nothing is queued or in flight.
   * @returns {Promise<void>}
   */
  onIdle() {
    return this.#waiters.size || this.#out ? new Promise((resolve) => this.#idle.push(resolve)) : Promise.resolve();
  }

  // etaMs and snapshot read a shared ledger as last seen (a synchronous storage: as stored now).
  /**
   * How long a call of `weight` asked now would wait for budget.
   * @param {number} weight
   * @returns {number}
   */
  etaMs(weight) {
    this.#ledger?.peek();
    return Math.max(0, this.#core.etaMs(this.#now(), weight));
  }

  /** @returns {PacerState} */
  snapshot() {
    this.#ledger?.peek();
    return this.#core.snapshot(this.#now());
  }

  /**
   * Change limits at run time; what was spent stays spent, queued calls are placed again.
   * @param {PacerOptions} limits
   * @returns {Promise<void>}
   */
  async setLimits(limits = {}) {
    const { moved, refused } = await this.#run(() => this.#core.setLimits(this.#now(), defined(limits)));
    for (const { id, error } of refused) if (this.#waiters.has(id)) this.#settle(this.#waiters.get(id), error);
    for (const { id, atMs } of moved) {
      const w = this.#waiters.get(id);
      if (w) {
        w.wait?.cancel();
        w.at = atMs; // its #step looks again
      }
    }
    this.#pump(); // slots may have been added
    this.#checkIdle();
  }

  /**
   * A copy of the shared ledger: [atMs, weight, owner, seq, dispatched (0|1)] per reservation,
   * where atMs is the planned instant (a call may go out up to slackMs after it).
   * @returns {Promise<[number, number, string, number, 0 | 1][]>}
   */
  async ledger() {
    return this.#run(() => this.#core.entries());
  }

  /**
   * Resolves once a persisted ledger has been read.
   * @returns {Promise<void>}
   */
  get ready() {
    return Promise.resolve(this.#run(() => undefined));
  }

  /**
   * Cancel (and refund) every queued call of this pacer.
   * @returns {Promise<void>}
   */
  async close() {
    if (this.#ledger) await this.#run(() => undefined).catch(() => {}); // placements under way land first
    const reason = new DOMException("The pacer was closed.", "AbortError");
    await Promise.allSettled([...this.#waiters.values()].map((w) => this.#abort(w, reason)));
  }
}
