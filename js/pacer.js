// Pacer: the async face of PacerCore. Every number (where a call fits, what a window holds)
// comes from the wasm core; this file only keeps promises, timers and the shared ledger.
//
// The ledger is the list of reservations of every tab of the origin: [atMs, weight, owner,
// seq, dispatched]. Each placement is computed from the whole ledger inside one atomic
// update, so tabs sharing a ledger together never exceed a budget, and a reservation is
// never displaced by a later one.
//
// A call may go out up to `slackMs` after its planned instant (timers fire late, a free
// slot takes a moment): placements reserve each window `slackMs` longer than it is, so
// that lateness can never push a window over its budget, and never pushes a call back.
// Ledger entries keep the planned instant; a permit's dispatchedAtMs is when it went out.
import { PacerCore } from "../pkg/sluicegate.js";

const AT = 0;
const WEIGHT = 1;
const OWNER = 2;
const SEQ = 3;
const DISPATCHED = 4;

function abortReason(signal) {
  return signal?.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

function randomId() {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

const isEntry = (e) => Array.isArray(e) && e.length === 5 && Number.isFinite(e[AT]) && Number.isFinite(e[WEIGHT]);

/** The ledger of one pacer, in memory. */
class MemoryLedger {
  #entries = [];
  loaded = Promise.resolve();
  read() {
    return this.#entries;
  }
  async load() {
    return this.#entries;
  }
  async update(fn) {
    return fn(this.#entries);
  }
}

/**
 * A ledger in a synchronous Web Storage (`{ key, storage }`), optionally under a Web Lock.
 * Consistent within one JavaScript context; across tabs use the IndexedDB ledger, since
 * browsers propagate localStorage writes between tabs asynchronously.
 */
class StorageLedger {
  constructor(key, storage, locks) {
    this.key = key;
    this.storage = storage;
    this.locks = locks;
  }
  loaded = Promise.resolve();
  async load() {
    return this.read();
  }
  read() {
    try {
      const parsed = JSON.parse(this.storage.getItem(this.key) ?? "[]");
      return Array.isArray(parsed) ? parsed.filter(isEntry) : [];
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
    return this.locks ? this.locks.request(`${this.key}:lock`, run) : run();
  }
}

/**
 * A ledger in IndexedDB: every update is one read-write transaction, which browsers
 * serialise across all tabs of the origin. `read()` returns the copy seen last: loaded at
 * first use, and again at every operation. Nothing is opened at construction, so a pacer
 * can be built where I/O is not allowed yet (a Worker's module scope).
 */
class IndexedDbLedger {
  #indexedDB;
  #db = null;
  #loaded = null;
  #seen = [];
  constructor(key, indexedDB) {
    this.key = key;
    this.#indexedDB = indexedDB;
  }
  #open() {
    this.#db ??= new Promise((resolve, reject) => {
      const open = this.#indexedDB.open("sluicegate-pacer", 1);
      open.onupgradeneeded = () => open.result.createObjectStore("ledgers");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    return this.#db;
  }
  /** The first read, started by whichever use comes first. */
  #firstLoad() {
    this.#loaded ??= this.load().catch(() => {});
    return this.#loaded;
  }
  get loaded() {
    return this.#firstLoad();
  }
  read() {
    this.#firstLoad();
    return this.#seen;
  }
  /** Read the ledger without changing it (a read-only transaction). */
  async load() {
    const db = await this.#open();
    return new Promise((resolve, reject) => {
      const get = db.transaction("ledgers", "readonly").objectStore("ledgers").get(this.key);
      get.onsuccess = () => {
        this.#seen = Array.isArray(get.result) ? get.result.filter(isEntry) : [];
        resolve(this.#seen);
      };
      get.onerror = () => reject(get.error);
    });
  }
  async update(fn) {
    const db = await this.#open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction("ledgers", "readwrite");
      const store = tx.objectStore("ledgers");
      const get = store.get(this.key);
      let result;
      let failure = null;
      get.onsuccess = () => {
        const entries = Array.isArray(get.result) ? get.result.filter(isEntry) : [];
        try {
          result = fn(entries);
        } catch (error) {
          failure = error;
          tx.abort();
          return;
        }
        store.put(entries, this.key);
        this.#seen = entries;
      };
      tx.oncomplete = () => resolve(result);
      tx.onabort = tx.onerror = () => reject(failure ?? tx.error ?? new Error("the pacer ledger could not be updated"));
    });
  }
}

/**
 * Paces weighted calls over several rolling windows at once, with an in-flight cap.
 * See the TypeScript declarations (pacer.d.ts) for the options.
 */
export class Pacer {
  #limits; // { windows, maxWeight } as given
  #placing; // the same windows, each slackMs longer, for placements
  #slackMs;
  #maxInFlight;
  #longestMs;
  #ledger;
  #owner = null;
  #seq = 0;
  #now;
  #waiting = new Map(); // seq → waiter
  #slotQueue = [];
  #inFlight = new Set();
  #pendingPlacements = new Set();
  #cache = null; // { entries, length, core }: a core holding `entries` as they were

  constructor(options = {}) {
    const { windows, maxWeight, maxInFlight = 4, slackMs, persist = null, now = () => Date.now() } = options;
    this.#configure({ windows, maxWeight }, maxInFlight, slackMs);
    this.#now = now;
    this.#ledger = ledgerFor(persist);
  }

  #configure(limits, maxInFlight, slackMs) {
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new RangeError(`maxInFlight must be a whole number ≥ 1, got ${maxInFlight}`);
    }
    const probe = new PacerCore(limits); // validates the windows and the cap
    const windows = probe.snapshot(0).windows.map(({ lengthMs, budget }) => ({ lengthMs, budget }));
    probe.free();
    const shortest = Math.min(...windows.map((w) => w.lengthMs));
    const slack = slackMs ?? Math.min(1_000, Math.max(100, shortest / 100));
    if (!Number.isFinite(slack) || slack < 0) throw new RangeError(`slackMs must be a number ≥ 0, got ${slackMs}`);
    this.#limits = { windows, maxWeight: limits.maxWeight };
    this.#placing = { windows: windows.map((w) => ({ lengthMs: w.lengthMs + slack, budget: w.budget })), maxWeight: limits.maxWeight };
    this.#slackMs = slack;
    this.#longestMs = Math.max(...windows.map((w) => w.lengthMs)) + slack;
    this.#maxInFlight = maxInFlight;
    this.#cache?.core.free();
    this.#cache = null;
  }

  #prune(entries, now) {
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i][AT] + this.#longestMs <= now) entries.splice(i, 1);
    }
  }

  /** This pacer's id in the ledger, made at first use: workerd forbids random values at module scope. */
  get #id() {
    this.#owner ??= randomId();
    return this.#owner;
  }

  #mine(seq) {
    return (e) => e[OWNER] === this.#id && e[SEQ] === seq;
  }

  /** A placement core holding `entries` (all but `skip`), reused while the ledger only grew by our own placements. */
  #coreFor(entries, now, skip) {
    const c = this.#cache;
    if (!skip && c && c.entries === entries && c.length === entries.length) return c.core;
    const core = new PacerCore(this.#placing);
    core.importSpends(now, entries.filter((e) => !skip?.(e)).map((e) => [e[AT], e[WEIGHT]]));
    if (skip) return core;
    c?.core.free();
    this.#cache = { entries, length: entries.length, core };
    return core;
  }

  /** Where a call of `weight` goes from `now` on, given `entries`; throws a PacerWeightError. */
  #place(entries, now, weight, skip) {
    const core = this.#coreFor(entries, now, skip);
    try {
      return now + core.etaMs(now, weight);
    } finally {
      if (skip) core.free();
    }
  }

  /** Add our entry, keeping the cached core in step. */
  #push(entries, now, entry) {
    const cached = this.#cache && this.#cache.entries === entries && this.#cache.length === entries.length;
    entries.push(entry);
    if (cached) {
      this.#cache.core.importSpends(now, [[entry[AT], entry[WEIGHT]]]);
      this.#cache.length = entries.length;
    } else {
      this.#cache?.core.free();
      this.#cache = null;
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
      const placement = this.#ledger
        .update((entries) => {
          const now = this.#now();
          this.#prune(entries, now);
          const at = this.#place(entries, now, weight);
          this.#push(entries, now, [at, weight, this.#id, seq, 0]);
          return at;
        })
        .then(
          (at) => {
            waiter.placed = true;
            if (this.#waiting.has(seq)) this.#arm(waiter, at);
            else this.#unplace(seq); // aborted while being placed
          },
          (error) => {
            this.#waiting.delete(seq);
            signal?.removeEventListener("abort", waiter.onAbort);
            reject(error);
          },
        )
        .finally(() => this.#pendingPlacements.delete(placement));
      this.#pendingPlacements.add(placement);
    });
  }

  /** Remove our reservation `seq` if it has not gone out (a refund). */
  #unplace(seq) {
    return this.#ledger.update((entries) => {
      const i = entries.findIndex((e) => this.#mine(seq)(e) && !e[DISPATCHED]);
      if (i >= 0) {
        entries.splice(i, 1);
        this.#cache?.core.free();
        this.#cache = null;
      }
    });
  }

  #arm(waiter, at) {
    waiter.at = at;
    const delay = Math.ceil(at - this.#now());
    if (delay <= 0) {
      this.#due(waiter); // no timer tick for a call that may go out now
      return;
    }
    waiter.timer = setTimeout(() => this.#due(waiter), delay);
  }

  #due(waiter) {
    waiter.timer = null;
    if (!this.#waiting.has(waiter.seq)) return;
    if (this.#inFlight.size >= this.#maxInFlight) {
      this.#slotQueue.push(waiter);
      return;
    }
    this.#inFlight.add(waiter.seq); // claim the slot now: going out takes a ledger update
    this.#goOut(waiter).catch((error) => {
      this.#freeSlot(waiter.seq);
      if (!this.#waiting.delete(waiter.seq)) return;
      waiter.signal?.removeEventListener("abort", waiter.onAbort);
      waiter.reject(error);
    });
  }

  #freeSlot(seq) {
    if (!this.#inFlight.delete(seq)) return;
    const next = this.#slotQueue.shift();
    if (next) this.#due(next);
  }

  async #goOut(waiter) {
    const outcome = await this.#ledger.update((entries) => {
      const now = this.#now();
      let entry = entries.find(this.#mine(waiter.seq));
      if (!entry) {
        // Gone from the ledger (cleared or pruned elsewhere): place the call again.
        const at = this.#place(entries, now, waiter.weight);
        entry = [at, waiter.weight, this.#id, waiter.seq, 0];
        this.#push(entries, now, entry);
      } else if (now > entry[AT] + this.#slackMs) {
        // Later than the slack covers: the spend must be placed where the call goes out.
        entry[AT] = this.#place(entries, now, waiter.weight, this.#mine(waiter.seq));
        this.#cache?.core.free();
        this.#cache = null;
      }
      if (entry[AT] > now) return { at: entry[AT] };
      entry[DISPATCHED] = 1;
      return { dispatchedAt: now };
    });
    if (!this.#waiting.has(waiter.seq) || outcome.dispatchedAt === undefined) {
      this.#freeSlot(waiter.seq); // aborted meanwhile, or not its turn yet
      if (this.#waiting.has(waiter.seq)) this.#arm(waiter, outcome.at);
      return;
    }
    this.#waiting.delete(waiter.seq);
    waiter.signal?.removeEventListener("abort", waiter.onAbort);
    let released = false;
    waiter.resolve({
      id: waiter.seq,
      weight: waiter.weight,
      dispatchedAtMs: outcome.dispatchedAt,
      release: () => {
        if (released) return;
        released = true;
        this.#freeSlot(waiter.seq);
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
    return Math.max(0, this.#place(this.#ledger.read(), now, weight) - now);
  }

  /** Spent weight per window (every tab's), and this pacer's queued and in-flight calls. */
  snapshot() {
    const now = this.#now();
    const entries = this.#ledger.read();
    const core = new PacerCore(this.#limits);
    core.importSpends(
      now,
      entries.filter((e) => e[AT] <= now).map((e) => [e[AT], e[WEIGHT]]),
    );
    const windows = core.snapshot(now).windows;
    core.free();
    const queued = [...this.#waiting.values()];
    return {
      windows,
      queued: queued.length,
      queuedWeight: queued.reduce((sum, w) => sum + w.weight, 0),
      inFlight: this.#inFlight.size,
      maxInFlight: this.#maxInFlight,
      drainsAtMs: queued.length ? Math.max(...queued.map((w) => w.at ?? now)) : null,
    };
  }

  /**
   * Change the windows, the per-call cap or the in-flight cap. What was spent stays spent;
   * this pacer's queued calls are placed again in their order (one that can never fit the
   * new limits is rejected with a PacerWeightError).
   */
  async setLimits({ windows, maxWeight, maxInFlight = this.#maxInFlight, slackMs = this.#slackMs } = {}) {
    this.#configure(
      { windows: windows ?? this.#limits.windows, maxWeight: maxWeight === undefined ? this.#limits.maxWeight : maxWeight },
      maxInFlight,
      slackMs,
    );
    const placed = new Map();
    const rejected = [];
    await this.#ledger.update((entries) => {
      const now = this.#now();
      const mine = entries.filter((e) => e[OWNER] === this.#id && !e[DISPATCHED]);
      for (const e of mine) entries.splice(entries.indexOf(e), 1);
      mine.sort((a, b) => a[AT] - b[AT] || a[SEQ] - b[SEQ]);
      for (const e of mine) {
        try {
          e[AT] = this.#place(entries, now, e[WEIGHT]);
          this.#push(entries, now, e);
          placed.set(e[SEQ], e[AT]);
        } catch (error) {
          rejected.push([e[SEQ], error]);
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
      if (waiter.timer !== null && placed.has(waiter.seq)) {
        clearTimeout(waiter.timer);
        this.#arm(waiter, placed.get(waiter.seq));
      }
    }
    while (this.#slotQueue.length && this.#inFlight.size < this.#maxInFlight) this.#due(this.#slotQueue.shift());
  }

  /**
   * A copy of the shared ledger, read atomically: `[atMs, weight, owner, seq, dispatched]`
   * per reservation of every pacer sharing it (for diagnostics and tests).
   */
  async ledger() {
    return (await this.#ledger.load()).map((e) => [...e]);
  }

  /** Resolves once a persisted ledger has been read, so `etaMs` and `snapshot` see it. */
  get ready() {
    return this.#ledger.loaded;
  }

  /** This pacer's owner id in the ledger. */
  get owner() {
    return this.#id;
  }

  /** Cancel every queued call of this pacer (they reject with an AbortError and are refunded). */
  async close() {
    const reason = new DOMException("The pacer was closed.", "AbortError");
    for (const waiter of [...this.#waiting.values()]) {
      waiter.signal?.removeEventListener("abort", waiter.onAbort);
      waiter.signal = { reason };
      await this.#abort(waiter);
    }
    await Promise.allSettled([...this.#pendingPlacements]);
  }
}

/** The ledger for a `persist` option: memory, IndexedDB (a key, in a browser) or a given storage. */
function ledgerFor(persist) {
  if (!persist) return new MemoryLedger();
  const key = typeof persist === "string" ? persist : persist.key;
  if (typeof key !== "string" || key === "") throw new TypeError("persist.key must be a non-empty string");
  if (typeof persist === "object" && persist.storage) {
    const locks = persist.locks === undefined ? globalThis.navigator?.locks : persist.locks;
    return new StorageLedger(key, persist.storage, locks ?? null);
  }
  const indexedDB = (typeof persist === "object" && persist.indexedDB) || globalThis.indexedDB;
  if (indexedDB) return new IndexedDbLedger(key, indexedDB);
  if (globalThis.localStorage) return new StorageLedger(key, globalThis.localStorage, globalThis.navigator?.locks ?? null);
  throw new TypeError("persist needs IndexedDB or a storage; neither is available here");
}
