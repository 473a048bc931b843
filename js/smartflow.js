// SmartFlow: the async face of SmartFlowCore (the Smart Flow specification's async path,
// §4). Every decision (which bucket, how long to wait, which rate, which mapping, the cache
// file, what a response means, how long a Retry-After holds a scope back, when a failed
// save is tried again) comes from the wasm core; this file keeps the clocks, the timers,
// the resolver and hydrator callbacks, and the storage.
//
// acquire(url) reserves synchronously inside the core (tokens may go negative: the deficit
// is the reservation) and then sleeps outside it, so concurrent callers each get their own
// wait instead of queueing behind one another's sleeps.
//
// No node:fs here: the Node entry (smartflow-node.js) installs the file store and the
// default cache file.
import { SmartFlowCore, Wait } from "../pkg-smartflow/sluicegate.js";
import { abortReason } from "./abort.js";
import { sleep } from "./wait.js";
/** @import { SmartFlowCoreOptions, SmartFlowIdKind, SmartFlowLearned, SmartFlowLookup, SmartFlowPenalty } from "../pkg-smartflow/sluicegate.js" */
/** @import { FetchInput } from "./platform.js" */

// The public types (the declarations are compiled from this JSDoc). They stand here, before a
// statement the declarations leave out, so that tsc does not copy their comments a second time.

/**
 * Where the learned mappings are kept between runs: the cache file's JSON text in and out.
 * @typedef {object} SmartFlowStore
 * @property {() => string | null | undefined | Promise<string | null | undefined>} load The saved text; `null` or `undefined` when there is none. A throw or rejection means starting empty.
 * @property {(text: string) => void | Promise<void>} save Keep `text`; a throw or rejection keeps the changes counted, to be saved again later.
 */

/**
 * Finds which organization owns a network or device (answers `null`/`undefined` when it cannot).
 * @typedef {(kind: SmartFlowIdKind, id: string) => string | null | undefined | Promise<string | null | undefined>} SmartFlowResolver
 */

/**
 * Registers every network and device of an organization (`flow.registerNetwork`, `flow.registerDevice`); called once per organization, after its first resolve.
 * @typedef {(orgId: string, flow: SmartFlow) => void | Promise<void>} SmartFlowHydrator
 */

/**
 * Where the cache stands: no storage, loading, loaded fresh, or started empty because it was expired, malformed, missing or unreadable.
 * @typedef {"none" | "pending" | "loaded" | "expired" | "malformed" | "missing" | "failed"} SmartFlowCacheStatus
 */

/**
 * The options a SmartFlow adds to its core's limits (`SmartFlowCoreOptions`): the storage, the callbacks and the clock.
 * @typedef {object} SmartFlowAsyncOptions
 * @property {string | SmartFlowStore | null} [storage] Where the mappings persist (the specification's JSON cache format): a localStorage key,
 *   or your own `{ load, save }`. Default: under Node the cache file (see `path`), elsewhere nowhere.
 * @property {string | false | null} [path] Under Node, the cache file. Default: the specification's `~/.meraki/.cache/rate_limit_cache.json`, written
 *   atomically, its directory created; a failed save of that default is reported once (`onError`) and never rejects `flush()` or `shutdown()`.
 *   A path keeps it there instead (see `fileStore`; elsewhere than Node a path throws); `false` keeps no file.
 * @property {SmartFlowResolver | null} [resolver] Looks up the organization of a network or device the limiter has not learned, in the background.
 * @property {SmartFlowHydrator | null} [hydrator] Registers all of an organization's networks and devices after its first resolve.
 * @property {(() => number) | null} [now] The monotonic clock, milliseconds (default `performance.now`).
 * @property {((input: FetchInput, init?: RequestInit) => Promise<Response>) | null} [fetch] The `fetch` that `smartFetch` calls (default `globalThis.fetch`).
 * @property {((error: unknown, context: string) => void) | null} [onError] Told about background failures (a resolver, hydrator, load or save that threw); default `console.warn`.
 */

/** @typedef {SmartFlowCoreOptions & SmartFlowAsyncOptions} SmartFlowOptions */

/**
 * @typedef {object} SmartFlowSnapshot
 * @property {number} globalRate
 * @property {number} orgs Organizations with a bucket.
 * @property {number} networks Mapped networks and devices.
 * @property {number} devices
 * @property {number} dirty Mapped changes not yet saved.
 * @property {number} pendingResolves Background resolves (and hydrations) under way.
 * @property {SmartFlowCacheStatus} cacheStatus
 * @property {boolean} cacheFresh
 */

/**
 * `RequestInit` plus the SmartFlow to go through (default: a shared one with the default limits).
 * @typedef {RequestInit & { smartFlow?: SmartFlow }} SmartFetchInit
 */

/** @type {((path: string) => SmartFlowStore & { readonly path: string }) | null} */
let fileStoreFactory = null;
/** @type {() => string | null} */
let defaultCachePath = () => null;

/**
 * Called by the Node entry: how `fileStore(path)` and the `path` option reach the disk, and
 * where the cache file is kept when no `path` or `storage` is given.
 * @internal
 * @param {(path: string) => SmartFlowStore & { readonly path: string }} factory
 * @param {() => string | null} defaultPath
 */
export function installFileStore(factory, defaultPath) {
  fileStoreFactory = factory;
  defaultCachePath = defaultPath;
}

/**
 * Node entry only (elsewhere it throws): a `{ load, save }` over a file, written atomically.
 * @param {string} path
 * @returns {SmartFlowStore & { readonly path: string }}
 */
export function fileStore(path) {
  if (fileStoreFactory === null) {
    throw new TypeError("a cache file needs Node's file system: import sluicegate/smartflow under Node, or pass storage");
  }
  return fileStoreFactory(path);
}

function describe(value) {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || value === undefined || typeof value === "number" || typeof value === "boolean") return String(value);
  return typeof value;
}

function checkString(value, what) {
  if (typeof value !== "string") throw new TypeError(`${what} must be a string, got ${describe(value)}`);
  return value;
}

const defaultNow = globalThis.performance?.now ? () => globalThis.performance.now() : () => Date.now();

function defaultOnError(error, context) {
  console.warn(`sluicegate SmartFlow: ${context} failed:`, error);
}

const isThenable = (v) => v !== null && (typeof v === "object" || typeof v === "function") && typeof v.then === "function";

/**
 * Milliseconds a Retry-After asks for: delay-seconds (a number is seconds too), or an HTTP-date
 * (IMF-fixdate, or the obsolete RFC 850 and asctime forms) measured from `nowMs` (Unix ms; a
 * date past is 0). `null` when absent or in any other form.
 * @param {string | number | null | undefined} value
 * @param {number} [nowMs]
 * @returns {number | null}
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  return SmartFlowCore.retryAfterMs(value, nowMs) ?? null;
}

/**
 * @param {string} key
 * @returns {SmartFlowStore}
 */
function localStorageStore(key) {
  let storage;
  try {
    storage = globalThis.localStorage;
  } catch {
    storage = undefined; // e.g. a sandboxed frame: access itself throws
  }
  if (!storage) {
    throw new TypeError("storage given as a key needs localStorage; under Node pass path (or nothing: the default cache file), or pass { load, save }");
  }
  return { load: () => storage.getItem(key), save: (text) => storage.setItem(key, text) };
}

/**
 * Where the cache is kept: the file `path` names, the `storage` given, or (neither given, and
 * `path` not `false`) the default cache file under Node. `defaultFile` names that default.
 * @param {string | SmartFlowStore | null | undefined} storage
 * @param {string | false | null | undefined} path
 * @returns {{ store: SmartFlowStore | null, defaultFile: string | null }}
 */
function storeFor(storage, path) {
  const noStorage = storage === null || storage === undefined;
  if (path !== undefined && path !== null && path !== false) {
    if (!noStorage) throw new TypeError("give storage or path, not both");
    if (typeof path !== "string" || !path) throw new TypeError(`path must be a non-empty string or false, got ${describe(path)}`);
    return { store: fileStore(path), defaultFile: null };
  }
  if (!noStorage) return { store: userStore(storage), defaultFile: null };
  const defaultFile = path === false || fileStoreFactory === null ? null : defaultCachePath();
  return defaultFile === null ? { store: null, defaultFile } : { store: fileStore(defaultFile), defaultFile };
}

/**
 * @param {string | SmartFlowStore} storage
 * @returns {SmartFlowStore}
 */
function userStore(storage) {
  if (typeof storage === "string") {
    if (!storage) throw new TypeError("storage must be a non-empty localStorage key");
    return localStorageStore(storage);
  }
  if (typeof storage === "object" && typeof storage.load === "function" && typeof storage.save === "function") {
    return storage;
  }
  throw new TypeError(`storage must be a localStorage key or { load, save }, got ${describe(storage)}`);
}

/**
 * @template T
 * @param {T | null | undefined} value
 * @param {string} what
 * @returns {T | null}
 */
function optionalFunction(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value !== "function") throw new TypeError(`${what} must be a function, got ${describe(value)}`);
  return value;
}

function requestUrl(input) {
  if (typeof input === "string") return input;
  if (input instanceof URL) return input.href;
  if (input && typeof input.url === "string") return input.url;
  throw new TypeError(`input must be a URL string, a URL or a Request, got ${describe(input)}`);
}

/**
 * Smart Flow: throttles requests per organization (default 10/s, burst 10) and globally
 * (default 100/s) before the server has to refuse them, learning which organization owns
 * each network and device from responses, a resolver, a hydrator or the saved cache. The
 * saved cache is loaded at first use, not at construction, so a SmartFlow may live at a
 * Worker's module scope.
 */
export class SmartFlow {
  /** @type {SmartFlowCore} */
  #limiter;
  /** @type {SmartFlowStore | null} */
  #store;
  /** @type {string | null} */
  #defaultFile; // the store is this default cache file: its failed saves are reported once, and never rejected
  #saveFailureReported = false;
  /** @type {SmartFlowResolver | null} */
  #resolver;
  /** @type {SmartFlowHydrator | null} */
  #hydrator;
  /** @type {() => number} */
  #now;
  /** @type {((input: FetchInput, init?: RequestInit) => Promise<Response>) | null} */
  #fetch;
  /** @type {(error: unknown, context: string) => void} */
  #onError;
  /** @type {SmartFlowCacheStatus} */
  #cacheStatus;
  #started = false; // whether the saved cache's load has begun
  /** @type {Promise<void>} */
  #ready = Promise.resolve();
  /** @type {Promise<void> | null} */
  #loading = null; // the store's load while it is under way
  /** @type {Set<Promise<void>>} */
  #tasks = new Set(); // background resolves (and their hydrations)
  /** @type {Promise<boolean> | null} */
  #saving = null; // the last save queued
  #autoSaving = false;
  /** @type {number | null} */
  #retryAtMs = null; // after a failed save: the first change from then on saves again
  #closed = false;

  /** @param {SmartFlowOptions} [options] */
  constructor(options = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`options must be an object, got ${describe(options)}`);
    }
    const { orgRate, orgCapacity, globalRate, cacheTtlSeconds, storage, path, resolver, hydrator, now, fetch, onError } = options;
    this.#limiter = new SmartFlowCore({ orgRate, orgCapacity, globalRate, cacheTtlSeconds });
    this.#resolver = optionalFunction(resolver, "resolver");
    this.#hydrator = optionalFunction(hydrator, "hydrator");
    this.#now = optionalFunction(now, "now") ?? defaultNow;
    this.#fetch = optionalFunction(fetch, "fetch");
    this.#onError = optionalFunction(onError, "onError") ?? defaultOnError;
    ({ store: this.#store, defaultFile: this.#defaultFile } = storeFor(storage, path));
    this.smartFetch = this.smartFetch.bind(this);
    this.#cacheStatus = this.#store ? "missing" : "none";
  }

  /** The core, its saved cache loading (or loaded) from first use on. */
  get #core() {
    this.#start();
    return this.#limiter;
  }

  /**
   * Load the saved cache at first use, not at construction: a SmartFlow may be built at a
   * Worker's module scope, where workerd allows no I/O (a store may be a KV or a fetch).
   */
  #start() {
    if (this.#started) return;
    this.#started = true;
    if (!this.#store) return;
    let loaded;
    try {
      loaded = this.#store.load();
    } catch (error) {
      this.#failedLoad(error);
      return;
    }
    if (!isThenable(loaded)) {
      this.#applyCache(loaded);
      return;
    }
    this.#cacheStatus = "pending";
    const loading = Promise.resolve(loaded).then(
      (text) => this.#applyCache(text),
      (error) => this.#failedLoad(error),
    );
    this.#loading = loading.finally(() => {
      this.#loading = null;
    });
    this.#ready = this.#loading;
  }

  /** Resolves once the saved cache was read (at once for a synchronous store); never rejects. Starts the load if nothing else has. */
  get ready() {
    this.#start();
    return this.#ready;
  }

  /** @param {unknown} error */
  #failedLoad(error) {
    this.#cacheStatus = "failed";
    this.#report(error, "loading the cache");
  }

  /** @param {unknown} loaded */
  #applyCache(loaded) {
    if (loaded === null || loaded === undefined || loaded === "") {
      this.#cacheStatus = "missing";
      return;
    }
    try {
      const text = typeof loaded === "string" ? loaded : JSON.stringify(loaded);
      this.#cacheStatus = this.#limiter.loadCache(text, Date.now() / 1000).state;
    } catch (error) {
      this.#failedLoad(error); // e.g. an object JSON cannot write; the limiter starts empty
    }
  }

  /**
   * @param {unknown} error
   * @param {string} context
   */
  #report(error, context) {
    try {
      this.#onError(error, context);
    } catch {
      // an error handler that throws must not break the limiter
    }
  }

  /**
   * Reserve now, synchronously; the seconds to wait. Starts a background resolve if due.
   * @param {string} url
   */
  #reserve(url) {
    const now = this.#now() / 1000;
    if (this.#resolver === null || this.#closed) return this.#core.acquire(url, now);
    const wait = this.#core.acquireAsync(url, now);
    const lookup = this.#core.takeLookup();
    if (lookup !== undefined) this.#startResolve(lookup);
    return wait;
  }

  /**
   * Resolves when a request to `url` may go out, with the milliseconds waited. The
   * reservation is made synchronously: concurrent calls each get their own place. Rejects
   * with `signal.reason` when aborted (the place stays taken).
   * @param {string} url
   * @param {{ signal?: AbortSignal }} [options]
   * @returns {Promise<number>}
   */
  acquire(url, options = undefined) {
    const signal = options?.signal;
    try {
      checkString(url, "url");
      this.#start();
      if (this.#loading !== null || this.#limiter.coolingDown || signal?.aborted) {
        return this.#acquireSlowly(url, signal);
      }
      const waitMs = this.#reserve(url) * 1000;
      return waitMs > 0 ? sleep(Wait, waitMs, signal).then(() => waitMs) : Promise.resolve(0);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * @param {string} url
   * @param {AbortSignal | undefined} signal
   */
  async #acquireSlowly(url, signal) {
    if (signal?.aborted) throw abortReason(signal);
    if (this.#loading !== null) await this.#loading;
    let waited = 0;
    for (let hold = this.#holdMs(url); hold > 0; hold = this.#holdMs(url)) {
      await sleep(Wait, hold, signal);
      waited += hold;
    }
    const waitMs = this.#reserve(url) * 1000;
    if (waitMs > 0) await sleep(Wait, waitMs, signal);
    return waited + waitMs;
  }

  /**
   * How long a cooldown still holds requests to `url` back, ms (0: none).
   * @param {string} url
   */
  #holdMs(url) {
    return this.#limiter.coolingDown ? this.#limiter.cooldownMs(url, this.#now()) : 0;
  }

  /**
   * How long a Retry-After still holds requests to `url` back, milliseconds.
   * @param {string} url
   * @returns {number}
   */
  cooldownMs(url) {
    return this.#holdMs(checkString(url, "url"));
  }

  /** @param {SmartFlowLookup} lookup */
  #startResolve(lookup) {
    const task = this.#resolveInBackground(lookup);
    this.#tasks.add(task);
    task.finally(() => this.#tasks.delete(task));
  }

  /** @param {SmartFlowLookup} lookup */
  async #resolveInBackground({ kind, id }) {
    await null; // never run the resolver inside acquire()
    let org = null;
    try {
      const found = await /** @type {SmartFlowResolver} */ (this.#resolver)(kind, id);
      if (typeof found === "string" && found) org = found;
      else if (found !== null && found !== undefined && found !== "") {
        throw new TypeError(`the resolver must answer an organization id, null or undefined, got ${describe(found)}`);
      }
    } catch (error) {
      this.#report(error, `resolving the ${kind} ${JSON.stringify(id)}`);
    }
    let recorded = false;
    try {
      recorded = this.#core.finishLookup(kind, id, org);
    } catch (error) {
      this.#report(error, "recording a resolve");
    }
    // a mapping recorded means an organization was found: org is a string
    if (recorded && this.#hydrator !== null && this.#core.claimHydration(/** @type {string} */ (org))) {
      try {
        await this.#hydrator(/** @type {string} */ (org), this);
      } catch (error) {
        this.#report(error, `hydrating the organization ${JSON.stringify(org)}`);
      }
    }
    this.#flushIfDue();
  }

  /**
   * A 429 on `url`: lowers its organization's rate (× 0.7, never below 0.5), or the global
   * rate when the URL names no organization, network or device; an unresolved network or
   * device lowers nothing. `retryAfter` (the header, or seconds) holds that scope back,
   * never shortening a cooldown in force.
   * @param {string} url
   * @param {string | number | null} [retryAfter]
   * @returns {SmartFlowPenalty}
   */
  onRateLimited(url, retryAfter = undefined) {
    // undefined reads as null to the core
    return this.#core.onRateLimited(checkString(url, "url"), /** @type {string | number | null} */ (retryAfter), this.#now(), Date.now());
  }

  /**
   * A 2xx on `url`: + 0.2 to its organization's rate, + 0.5 to the global rate, up to the configured rates.
   * @param {string} url
   * @returns {void}
   */
  onSuccess(url) {
    this.#core.onSuccess(checkString(url, "url"));
  }

  /**
   * Learn mappings from a successful response: `body` parsed (an object) or as JSON text.
   * @param {string} url
   * @param {unknown} body
   * @returns {SmartFlowLearned}
   */
  learnFromResponse(url, body) {
    const learned = this.#core.learnFromResponse(checkString(url, "url"), body);
    if (learned.networks + learned.devices > 0) this.#flushIfDue();
    return learned;
  }

  /**
   * @param {string} orgId
   * @returns {void}
   */
  registerOrg(orgId) {
    this.#core.registerOrg(checkString(orgId, "orgId"));
  }

  /**
   * @param {string} networkId
   * @param {string} orgId
   * @returns {void}
   */
  registerNetwork(networkId, orgId) {
    this.#core.registerNetwork(checkString(networkId, "networkId"), checkString(orgId, "orgId"));
  }

  /**
   * @param {string} serial
   * @param {string} orgId
   * @returns {void}
   */
  registerDevice(serial, orgId) {
    this.#core.registerDevice(checkString(serial, "serial"), checkString(orgId, "orgId"));
  }

  /**
   * The organization a request URL belongs to, when known.
   * @param {string} url
   * @returns {string | undefined}
   */
  resolveOrg(url) {
    return this.#core.resolveOrg(checkString(url, "url"));
  }

  /**
   * An organization's current rate, once it has a bucket.
   * @param {string} orgId
   * @returns {number | undefined}
   */
  orgRate(orgId) {
    return this.#core.orgRate(checkString(orgId, "orgId"));
  }

  get globalRate() {
    return this.#core.globalRate;
  }

  /** Whether a fresh saved cache was loaded. */
  get cacheFresh() {
    return this.#core.cacheFresh;
  }

  get cacheStatus() {
    this.#start();
    return this.#cacheStatus;
  }

  /** @returns {SmartFlowSnapshot} */
  snapshot() {
    const core = this.#core;
    return {
      globalRate: core.globalRate,
      orgs: core.orgCount,
      networks: core.networkCount,
      devices: core.deviceCount,
      dirty: core.dirty,
      pendingResolves: this.#tasks.size,
      cacheStatus: this.#cacheStatus,
      cacheFresh: core.cacheFresh,
    };
  }

  /**
   * Save now: `false` without a storage; rejects when the save fails (the changes stay
   * counted), but for the default cache file, whose failure is reported once and resolves `false`.
   * @returns {Promise<boolean>}
   */
  flush() {
    this.#start();
    return this.#saveNow();
  }

  /** A save that the caller waits for: the default cache file's failure is reported, not thrown. */
  #saveNow() {
    const saving = this.#save();
    if (this.#defaultFile === null) return saving;
    return saving.catch((error) => {
      this.#saveFailed(error);
      return false;
    });
  }

  /**
   * Tell `onError` that a save failed: each time, but for the default cache file, which nobody
   * asked for and which may well be unwritable (a read-only home): once.
   * @param {unknown} error
   */
  #saveFailed(error) {
    if (this.#defaultFile === null) {
      this.#report(error, "saving the cache");
      return;
    }
    if (this.#saveFailureReported) return;
    this.#saveFailureReported = true;
    this.#report(error, `saving the cache to ${this.#defaultFile} (the default cache file: pass path to keep it elsewhere, or path: false for none; said once)`);
  }

  /** @returns {Promise<boolean>} */
  #save() {
    if (this.#store === null) return Promise.resolve(false);
    const run = async () => {
      const count = this.#core.dirty;
      const text = this.#core.saveCache(Date.now() / 1000);
      await /** @type {SmartFlowStore} */ (this.#store).save(text); // not null: checked above
      this.#core.markFlushed(count);
      this.#retryAtMs = null;
      return true;
    };
    // One save at a time, each writing the mappings as they are when its turn comes.
    const saving = (this.#saving ?? Promise.resolve()).catch(() => {}).then(run);
    this.#saving = saving;
    return saving;
  }

  #flushIfDue() {
    if (this.#store === null || this.#closed || this.#autoSaving) return;
    if (this.#retryAtMs !== null && this.#now() < this.#retryAtMs) return; // backing off

    if (!this.#core.flushDue) return;
    this.#autoSaving = true;
    this.#save().then(
      () => {
        this.#autoSaving = false;
        this.#flushIfDue(); // 50 more learned while saving
      },
      (error) => {
        this.#autoSaving = false;
        this.#saveFailed(error);
        this.#scheduleRetry(); // the changes stay counted: nothing is lost
      },
    );
  }

  /**
   * After a failed save, the next is tried by the first change once the core's backoff has
   * passed (or by `flush()` / `shutdown()`), not by a timer: nobody awaits a retry, so a
   * timer would be one more thing to cancel, and in Node one that keeps the process running.
   */
  #scheduleRetry() {
    if (this.#closed) return;
    this.#retryAtMs = this.#now() + this.#core.saveFailed();
  }

  /**
   * Wait for the background resolves (and hydrations) and saves under way, then save once
   * more; rejects when that save fails (but for the default cache file: reported once).
   * Afterwards `acquire` still paces, but starts no resolves, and nothing is saved but by `flush()`.
   * @returns {Promise<void>}
   */
  async shutdown() {
    this.#start();
    this.#closed = true;
    if (this.#loading !== null) await this.#loading;
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    await this.#saving?.catch(() => {});
    await this.#saveNow();
  }

  /**
   * `fetch` through this limiter (bound: pass it around as a `fetch`).
   * @param {FetchInput} input
   * @param {RequestInit} [init]
   * @returns {Promise<Response>}
   */
  async smartFetch(input, init = undefined) {
    const url = SmartFlowCore.withoutQuery(requestUrl(input));
    const request = typeof input === "object" && !(input instanceof URL) ? input : null;
    const method = String(init?.method ?? request?.method ?? "GET");
    await this.acquire(url, { signal: init?.signal ?? request?.signal ?? undefined });
    const response = this.#fetch !== null ? await this.#fetch(input, init) : await globalThis.fetch(input, init);
    const reaction = SmartFlowCore.reaction(response.status, method, response.headers.get("content-type"));
    if (reaction === "rateLimited") {
      this.onRateLimited(url, response.headers.get("retry-after"));
    } else if (reaction !== "none") {
      this.onSuccess(url);
      if (reaction !== "success") {
        let body = null;
        if (reaction === "learnJson" && response.body !== null) {
          try {
            body = await response.clone().json();
          } catch {
            body = null; // not JSON after all: learn from the URL alone
          }
        }
        this.learnFromResponse(url, body);
      }
    }
    return response;
  }
}

/** @type {SmartFlow | null} */
let shared = null;

/**
 * `fetch` through Smart Flow: acquire → fetch → a 2xx is a success (a GET's JSON body is
 * learned from), a 429 is rate limited and its Retry-After (seconds or HTTP-date) honoured.
 * @param {FetchInput} input
 * @param {SmartFetchInit} [init]
 * @returns {Promise<Response>}
 */
export async function smartFetch(input, init = undefined) {
  if (init?.smartFlow !== undefined) {
    const { smartFlow, ...rest } = init;
    if (!(smartFlow instanceof SmartFlow)) throw new TypeError("init.smartFlow must be a SmartFlow");
    return smartFlow.smartFetch(input, rest);
  }
  shared ??= new SmartFlow();
  return shared.smartFetch(input, init);
}
