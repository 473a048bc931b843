// LocationCache: per-location results for a TTL, with one fetch for identical requests.
// The bookkeeping (normalised keys, expiry, LRU, in-flight marks) is LocationCacheCore's.
import { LocationCacheCore } from "../pkg/sluicegate.js";

/** @import { StorageLike } from "./platform.js" */

/**
 * Where a cache's entries are saved between page loads.
 * @typedef {object} CachePersistence
 * @property {string} key
 * @property {StorageLike} [storage] Default: `localStorage`.
 */

/**
 * @typedef {object} LocationCacheConfig
 * @property {number} [ttlMs] How long a result lives, counted from its response. Default 15 minutes.
 * @property {number} [maxEntries] The most results kept (least recently used go first). Default 5,000.
 * @property {number} [precision] Decimals lat/lon are rounded to in keys (0–6). Default 2 (about 1 km).
 * @property {() => number} [now] The clock in milliseconds. Default `Date.now`.
 * @property {string | CachePersistence | null} [persist] A storage key (or key and storage) to keep results across page loads; values must be JSON.
 */

/**
 * @template V
 * @typedef {{ state: "hit"; value: V } | { state: "pending"; promise: Promise<V> } | { state: "miss"; resolve(value: V): void; reject(error: unknown): void }} CacheEntry
 */

const MINUTE = 60_000;

/**
 * Per-location results for a TTL; identical requests in flight share one fetch; errors are
 * never cached. A persisted cache is read at first use, not at construction, so it may live
 * at a Worker's module scope.
 * @template [V=unknown]
 */
export class LocationCache {
  #core;
  /** @type {Map<string, { promise: Promise<V>, resolve: (value: V) => void, reject: (error: unknown) => void }>} */
  #pending = new Map();
  #now;
  /** @type {{ key: string, storage: StorageLike } | undefined} */
  #persist;
  #restored = false;

  /** @param {LocationCacheConfig} [config] */
  constructor({ ttlMs = 15 * MINUTE, maxEntries = 5_000, precision = 2, now = () => Date.now(), persist = null } = {}) {
    this.#core = new LocationCacheCore(ttlMs, maxEntries, precision);
    this.#now = now;
    if (persist) {
      const key = typeof persist === "string" ? persist : persist.key;
      const storage = (typeof persist === "object" && persist.storage) || globalThis.localStorage;
      if (typeof key !== "string" || !key || !storage) throw new TypeError("persist needs a key and a storage");
      this.#persist = { key, storage };
    }
  }

  /**
   * The core, holding the saved results from first use on: they are read then, not at
   * construction, so a cache can be built at a Worker's module scope, where workerd
   * allows no I/O.
   */
  #loaded() {
    if (!this.#persist || this.#restored) return this.#core;
    this.#restored = true;
    const { key, storage } = this.#persist;
    try {
      const saved = JSON.parse(storage.getItem(key) ?? "null");
      if (Array.isArray(saved?.entries) && typeof saved.savedAtMs === "number") {
        // Remaining lifetimes were measured at save time: take off what has passed since.
        const elapsed = Math.max(0, this.#now() - saved.savedAtMs);
        const live = saved.entries.filter((e) => Array.isArray(e) && e.length === 3 && e[2] - elapsed > 0).map(([k, v, left]) => [k, v, left - elapsed]);
        this.#core.importEntries(live, this.#now());
      }
    } catch {
      // A corrupt saved cache is ignored: the cache starts empty.
    }
    return this.#core;
  }

  /**
   * The normalised key: lat/lon rounded, parameters and their values sorted.
   * @param {number} latitude
   * @param {number} longitude
   * @param {Record<string, string | number | readonly (string | number)[]>} [params]
   * @returns {string}
   */
  key(latitude, longitude, params = {}) {
    return this.#core.key(latitude, longitude, params);
  }

  /**
   * What the cache holds for `key`: `{ state: "hit", value }`, `{ state: "pending", promise }`
   * (an identical fetch is under way), or `{ state: "miss", resolve(value), reject(error) }`:
   * the caller fetches, then settles; errors are never cached.
   * @param {string} key
   * @returns {CacheEntry<V>}
   */
  lookup(key) {
    const found = this.#loaded().lookup(key, this.#now());
    if (found.state === "hit") return /** @type {{ state: "hit", value: V }} */ (found);
    // the core marks a key pending exactly while this map holds it
    if (found.state === "pending") return { state: "pending", promise: /** @type {{ promise: Promise<V> }} */ (this.#pending.get(key)).promise };
    /** @type {(value: V) => void} */
    let resolve = () => {};
    /** @type {(error: unknown) => void} */
    let reject = () => {};
    /** @type {Promise<V>} */
    const promise = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    promise.catch(() => {}); // waiting callers handle it; nobody else must see it unhandled
    this.#pending.set(key, { promise, resolve, reject });
    return {
      state: "miss",
      resolve: (value) => {
        this.#core.complete(key, value, this.#now());
        this.#pending.delete(key);
        this.#save();
        resolve(value);
      },
      reject: (error) => {
        this.#core.fail(key);
        this.#pending.delete(key);
        reject(error);
      },
    };
  }

  /**
   * The value for `key`, loaded once by `load()` on a miss (one load for concurrent gets).
   * @param {string} key
   * @param {() => Promise<V>} load
   * @returns {Promise<V>}
   */
  async get(key, load) {
    const found = this.lookup(key);
    if (found.state === "hit") return found.value;
    if (found.state === "pending") return found.promise;
    try {
      const value = await load();
      found.resolve(value);
      return value;
    } catch (error) {
      found.reject(error);
      throw error;
    }
  }

  /** @returns {number} */
  get size() {
    return this.#loaded().size;
  }

  /** @returns {number} */
  get inFlight() {
    return this.#loaded().inFlight;
  }

  #save() {
    if (!this.#persist) return;
    try {
      const now = this.#now();
      const entries = this.#core.exportEntries(now);
      this.#persist.storage.setItem(this.#persist.key, JSON.stringify({ savedAtMs: now, entries }));
    } catch {
      // Storage full or unavailable: the in-memory cache still works.
    }
  }
}
