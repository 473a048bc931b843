// Pacer: the promise, AbortSignal and event face of PacerCore. Every decision (where a call fits, when
// it goes out, who gets a free slot, what a late call or a change of limits moves) is the core's; its
// waits are gloo-timers futures (Wait). The ledger stores a budget shared between tabs needs: ledger.js.
import { PacerCore, Wait } from "../pkg/sluicegate.js";
import { abortReason, onAbort } from "./abort.js";
import { sharedLedger } from "./ledger.js";

const [GO, NO_SLOT, UNKNOWN] = [-1, -2, -3]; // what PacerCore.due answers besides an instant

const defined = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** Paces weighted calls over several rolling windows at once, with an in-flight cap (see pacer.d.ts). */
export class Pacer extends EventTarget {
  #core;
  #now;
  #ledger;
  #owner = null;
  #waiters = new Map(); // id → { weight, at, resolve, reject, wait, off, done }
  #out = 0; // permits not yet released
  #idle = [];
  #heard = new Set(); // event types someone listens to

  constructor(options = {}) {
    super();
    const { persist = null, now = () => Date.now(), maxInFlight = 4, slackMs, ...limits } = options;
    // slackMs null is the core's default: 1 % of the shortest window, from 100 ms to 1 s.
    this.#core = new PacerCore(defined({ ...limits, maxInFlight, slackMs: slackMs ?? null }));
    this.#now = now;
    this.#ledger = sharedLedger(persist, this.#core, () => this.owner);
  }

  /** This pacer's id in the ledger, made at first use: workerd forbids random values at module scope. */
  get owner() {
    this.#owner ??= globalThis.crypto?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    return this.#owner;
  }

  /** Runs `fn` on the core: at once in memory, else inside one update of the shared ledger. */
  #run(fn) {
    return this.#ledger ? this.#ledger.run(fn) : fn();
  }

  addEventListener(type, ...rest) {
    this.#heard.add(type);
    super.addEventListener(type, ...rest);
  }

  #emit(type, detail) {
    if (this.#heard.has(type)) this.dispatchEvent(Object.assign(new Event(type), { detail }));
  }

  acquire(weight, { signal, priority } = {}) {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const placed = ([at, id]) => {
        const w = { id, weight, at, resolve, reject, wait: null, off: null, done: false };
        this.#waiters.set(id, w);
        this.#emit("queued", { id, weight, atMs: at });
        if (signal) w.off = onAbort(signal, () => this.#abort(w, abortReason(signal)));
        signal?.aborted ? this.#abort(w, abortReason(signal)) : this.#step(w); // it may have aborted while placed
      };
      const reserve = () => [this.#core.place(this.#now(), weight, priority), this.#core.lastId];
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
      try {
        due = this.#run(() => this.#core.due(this.#now(), w.id));
        if (this.#ledger) due = await due;
      } catch (error) {
        return this.#settle(w, error);
      }
      // Aborted meanwhile (the abort refunded or released it), or a release hands it a slot.
      if (w.done || due === NO_SLOT) return;
      if (due === UNKNOWN) return this.#settle(w, new Error(`the pacer no longer holds call ${w.id}`));
      if (due !== GO) {
        w.at = due;
        continue;
      }
      this.#settle(w);
      return w.resolve(this.#permit(w.id, w.weight));
    }
  }

  /** The call went out: in flight until its permit is released. */
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
        this.#core.release(id);
        this.#pump();
        this.#checkIdle();
      },
    };
  }

  /** Free slots go to the calls the core says waited longest (one placed again leaves its slot to the next). */
  #pump() {
    for (;;) {
      const w = this.#waiters.get(this.#core.nextInLine());
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

  tryAcquire(weight) {
    if (this.#ledger) throw new TypeError("tryAcquire decides at once, so it needs the pacer's own ledger: with persist, use acquire");
    const r = this.#core.tryAcquire(this.#now(), weight); // an id, 0 (no free slot) or −(ms until it fits)
    return r > 0 ? this.#permit(r, weight) : { retryAfterMs: Math.max(0, -r), reason: r === 0 ? "inFlight" : "budget" };
  }

  async schedule(weight, fn, options = {}) {
    const permit = await this.acquire(weight, options);
    try {
      return await fn(options.signal);
    } finally {
      permit.release();
    }
  }

  wrap(fn, weightOf = () => 1) {
    return (...args) => this.schedule(weightOf(...args), () => fn(...args));
  }

  onIdle() {
    return this.#waiters.size || this.#out ? new Promise((resolve) => this.#idle.push(resolve)) : Promise.resolve();
  }

  // etaMs and snapshot read a shared ledger as last seen (a synchronous storage: as stored now).
  etaMs(weight) {
    this.#ledger?.peek();
    return Math.max(0, this.#core.etaMs(this.#now(), weight));
  }

  snapshot() {
    this.#ledger?.peek();
    return this.#core.snapshot(this.#now());
  }

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

  async ledger() {
    return this.#run(() => this.#core.entries());
  }

  get ready() {
    return Promise.resolve(this.#run(() => undefined));
  }

  async close() {
    if (this.#ledger) await this.#run(() => undefined).catch(() => {}); // placements under way land first
    const reason = new DOMException("The pacer was closed.", "AbortError");
    await Promise.allSettled([...this.#waiters.values()].map((w) => this.#abort(w, reason)));
  }
}
