// Pacer: the async face of PacerCore. Every number (where a call fits, what a window holds)
// comes from the wasm core; this file only keeps promises, timers and the shared ledger.
//
// The ledger is the list of reservations of every tab of the origin: [atMs, weight, owner,
// seq, dispatched]. Each placement is computed under a lock from the whole ledger, so two
// tabs together never exceed a budget; a reservation is never displaced by a later one.
import { PacerCore } from "../pkg/sluicegate.js";

const ENTRY_AT = 0;
const ENTRY_WEIGHT = 1;
const ENTRY_OWNER = 2;
const ENTRY_SEQ = 3;
const ENTRY_DISPATCHED = 4;

function abortReason(signal) {
  return signal?.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

function randomId() {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

/** Where a ledger lives: in memory (one pacer) or in Web Storage shared by an origin's tabs. */
class MemoryLedger {
  #entries = [];
  async update(fn) {
    return fn(this.#entries);
  }
  read() {
    return this.#entries;
  }
}

class StorageLedger {
  constructor(key, storage, locks) {
    this.key = key;
    this.storage = storage;
    this.locks = locks;
  }
  read() {
    try {
      const parsed = JSON.parse(this.storage.getItem(this.key) ?? "[]");
      return Array.isArray(parsed) ? parsed.filter((e) => Array.isArray(e) && e.length === 5) : [];
    } catch {
      return [];
    }
  }
  async update(fn) {
    const run = () => {
      const entries = this.read();
      const result = fn(entries);
      this.storage.setItem(this.key, JSON.stringify(entries));
      return result;
    };
    // Web Locks serialise the read-modify-write across tabs; without them (old browsers,
    // Node) one context's operations are already serial.
    return this.locks ? this.locks.request(`${this.key}:lock`, run) : run();
  }
}

/**
 * Paces weighted calls over several rolling windows at once, with an in-flight cap.
 * See the TypeScript declarations (pacer.d.ts) for the options.
 */
export class Pacer {
  #options;
  #maxInFlight;
  #ledger;
  #owner = randomId();
  #seq = 0;
  #now;
  #waiting = new Map(); // seq → waiter
  #slotQueue = [];
  #inFlight = new Set();
  #placing = new Set(); // placements under way, so close() can wait for them
  #longestMs;

  constructor(options = {}) {
    const { windows, maxWeight, maxInFlight = 4, persist = null, now = () => Date.now() } = options;
    this.#setOptions({ windows, maxWeight }, maxInFlight);
    this.#now = now;
    if (persist) {
      const key = typeof persist === "string" ? persist : persist.key;
      if (typeof key !== "string" || key === "") throw new TypeError("persist.key must be a non-empty string");
      const storage = persist.storage ?? globalThis.localStorage;
      if (!storage) throw new TypeError("persist needs a storage (localStorage is not available here)");
      const locks = persist.locks === undefined ? globalThis.navigator?.locks : persist.locks;
      this.#ledger = new StorageLedger(key, storage, locks ?? null);
    } else {
      this.#ledger = new MemoryLedger();
    }
  }

  #setOptions(limits, maxInFlight) {
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new RangeError(`maxInFlight must be a whole number ≥ 1, got ${maxInFlight}`);
    }
    const probe = new PacerCore(limits); // validates the windows and the cap
    this.#longestMs = Math.max(...probe.snapshot(0).windows.map((w) => w.lengthMs));
    probe.free();
    this.#options = limits;
    this.#maxInFlight = maxInFlight;
  }

  /** A PacerCore holding the ledger's spends, except those for which `skip` is true. */
  #calculator(entries, now, skip = () => false) {
    const core = new PacerCore(this.#options);
    core.importSpends(
      now,
      entries.filter((e) => !skip(e)).map((e) => [e[ENTRY_AT], e[ENTRY_WEIGHT]]),
    );
    return core;
  }

  #prune(entries, now) {
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i][ENTRY_AT] + this.#longestMs <= now) entries.splice(i, 1);
    }
  }

  #mine(seq) {
    return (e) => e[ENTRY_OWNER] === this.#owner && e[ENTRY_SEQ] === seq;
  }

  /** Where a call of `weight` would be placed from `now` on, given `entries`. Throws a PacerWeightError. */
  #place(entries, now, weight, skip) {
    const core = this.#calculator(entries, now, skip);
    try {
      return now + core.etaMs(now, weight);
    } finally {
      core.free();
    }
  }

  /**
   * Wait until a call of `weight` may go out. Resolves to a permit (call `release()` when
   * the call has answered); rejects at once with a PacerWeightError for a call that could
   * never go out, or with the signal's reason when aborted before it went out (the weight
   * is then refunded).
   */
  acquire(weight, { signal } = {}) {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      const waiter = { seq, weight, resolve, reject, signal, timer: null, onAbort: null, placed: false };
      this.#waiting.set(seq, waiter);
      if (signal) {
        waiter.onAbort = () => this.#abort(waiter);
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      const placing = this.#ledger
        .update((entries) => {
          const now = this.#now();
          this.#prune(entries, now);
          const at = this.#place(entries, now, weight);
          entries.push([at, weight, this.#owner, seq, 0]);
        })
        .then(
          () => {
            waiter.placed = true;
            if (this.#waiting.has(seq)) this.#arm(waiter);
            else this.#unplace(seq); // aborted while being placed
          },
          (error) => {
            this.#waiting.delete(seq);
            signal?.removeEventListener("abort", waiter.onAbort);
            reject(error);
          },
        )
        .finally(() => this.#placing.delete(placing));
      this.#placing.add(placing);
    });
  }

  /** Remove this pacer's reservation `seq` if it has not gone out (a refund). */
  #unplace(seq) {
    return this.#ledger.update((entries) => {
      const i = entries.findIndex((e) => this.#mine(seq)(e) && !e[ENTRY_DISPATCHED]);
      if (i >= 0) entries.splice(i, 1);
    });
  }

  #arm(waiter) {
    const entry = this.#ledger.read().find(this.#mine(waiter.seq));
    const delay = entry ? Math.max(0, entry[ENTRY_AT] - this.#now()) : 0;
    waiter.timer = setTimeout(() => this.#due(waiter), delay);
  }

  #due(waiter) {
    waiter.timer = null;
    if (!this.#waiting.has(waiter.seq)) return;
    if (this.#inFlight.size >= this.#maxInFlight) {
      this.#slotQueue.push(waiter);
      return;
    }
    this.#goOut(waiter);
  }

  async #goOut(waiter) {
    // Record the spend when the call really goes out: a timer that fired late, or a wait
    // for a free slot, moves the reservation to now, or later if it no longer fits.
    let dispatchedAt = null;
    await this.#ledger.update((entries) => {
      const now = this.#now();
      const i = entries.findIndex(this.#mine(waiter.seq));
      if (i < 0) return;
      const at = this.#place(entries, now, waiter.weight, this.#mine(waiter.seq));
      entries[i][ENTRY_AT] = at;
      if (at <= now) {
        entries[i][ENTRY_DISPATCHED] = 1;
        dispatchedAt = now;
      }
    });
    if (!this.#waiting.has(waiter.seq)) return; // aborted meanwhile
    if (dispatchedAt === null) {
      this.#arm(waiter);
      return;
    }
    this.#waiting.delete(waiter.seq);
    waiter.signal?.removeEventListener("abort", waiter.onAbort);
    this.#inFlight.add(waiter.seq);
    let released = false;
    waiter.resolve({
      id: waiter.seq,
      weight: waiter.weight,
      dispatchedAtMs: dispatchedAt,
      release: () => {
        if (released) return;
        released = true;
        this.#inFlight.delete(waiter.seq);
        const next = this.#slotQueue.shift();
        if (next) this.#due(next);
      },
    });
  }

  async #abort(waiter) {
    if (!this.#waiting.delete(waiter.seq)) return;
    if (waiter.timer !== null) clearTimeout(waiter.timer);
    this.#slotQueue = this.#slotQueue.filter((w) => w !== waiter);
    waiter.reject(abortReason(waiter.signal));
    if (waiter.placed) await this.#unplace(waiter.seq);
  }

  /** How long a call of `weight` asked now would wait for budget (not for a free slot). */
  etaMs(weight) {
    const now = this.#now();
    return this.#place(this.#ledger.read(), now, weight) - now;
  }

  /** Spent weight per window (every tab's), and this pacer's queued and in-flight calls. */
  snapshot() {
    const now = this.#now();
    const entries = this.#ledger.read();
    const core = this.#calculator(
      entries.filter((e) => e[ENTRY_AT] <= now),
      now,
    );
    const windows = core.snapshot(now).windows;
    core.free();
    const queued = entries.filter((e) => e[ENTRY_OWNER] === this.#owner && !e[ENTRY_DISPATCHED]);
    return {
      windows,
      queued: queued.length,
      queuedWeight: queued.reduce((sum, e) => sum + e[ENTRY_WEIGHT], 0),
      inFlight: this.#inFlight.size,
      maxInFlight: this.#maxInFlight,
      drainsAtMs: queued.length ? Math.max(...queued.map((e) => e[ENTRY_AT])) : null,
    };
  }

  /**
   * Change the windows, the per-call cap or the in-flight cap. What was spent stays spent;
   * this pacer's queued calls are placed again in their order (one that can never fit the
   * new limits is rejected with a PacerWeightError).
   */
  async setLimits({ windows, maxWeight, maxInFlight = this.#maxInFlight } = {}) {
    const limits = {
      windows: windows ?? this.#options.windows,
      maxWeight: maxWeight === undefined ? this.#options.maxWeight : maxWeight,
    };
    this.#setOptions(limits, maxInFlight);
    const rejected = [];
    await this.#ledger.update((entries) => {
      const now = this.#now();
      const mine = entries.filter((e) => e[ENTRY_OWNER] === this.#owner && !e[ENTRY_DISPATCHED]);
      for (const e of mine) entries.splice(entries.indexOf(e), 1);
      mine.sort((a, b) => a[ENTRY_AT] - b[ENTRY_AT] || a[ENTRY_SEQ] - b[ENTRY_SEQ]);
      for (const e of mine) {
        try {
          e[ENTRY_AT] = this.#place(entries, now, e[ENTRY_WEIGHT]);
          entries.push(e);
        } catch (error) {
          rejected.push([e[ENTRY_SEQ], error]);
        }
      }
    });
    for (const [seq, error] of rejected) {
      const waiter = this.#waiting.get(seq);
      if (!waiter) continue;
      this.#waiting.delete(seq);
      if (waiter.timer !== null) clearTimeout(waiter.timer);
      waiter.reject(error);
    }
    for (const waiter of this.#waiting.values()) {
      if (waiter.timer !== null) {
        clearTimeout(waiter.timer);
        this.#arm(waiter);
      }
    }
    while (this.#slotQueue.length && this.#inFlight.size < this.#maxInFlight) this.#due(this.#slotQueue.shift());
  }

  /** Cancel every queued call of this pacer (they reject with an AbortError and are refunded). */
  async close() {
    const reason = new DOMException("The pacer was closed.", "AbortError");
    for (const waiter of [...this.#waiting.values()]) {
      waiter.signal?.removeEventListener("abort", waiter.onAbort);
      waiter.signal = { reason };
      await this.#abort(waiter);
    }
    await Promise.allSettled([...this.#placing]);
  }
}
