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
// No node:fs here: the Node entry (smartflow-node.js) installs the file store.
import { SmartFlowCore, Wait } from "../pkg-smartflow/sluicegate.js";
import { abortReason } from "./abort.js";
import { sleep } from "./wait.js";

let fileStoreFactory = null;

/** Called by the Node entry: how `fileStore(path)` and the `path` option reach the disk. */
export function installFileStore(factory) {
  fileStoreFactory = factory;
}

/** A store keeping the cache in a file (Node entry only). */
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
 * How long a `Retry-After` asks to wait, in milliseconds: delay-seconds ("120"), or an
 * HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT", or the obsolete RFC 850 and asctime forms)
 * measured from `nowMs` (Unix ms). A number is taken as seconds. `null` when absent or
 * unreadable; a date in the past is 0.
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  return SmartFlowCore.retryAfterMs(value, nowMs) ?? null;
}

function localStorageStore(key) {
  let storage;
  try {
    storage = globalThis.localStorage;
  } catch {
    storage = undefined; // e.g. a sandboxed frame: access itself throws
  }
  if (!storage) {
    throw new TypeError("storage given as a key needs localStorage; under Node pass path, or pass { load, save }");
  }
  return { load: () => storage.getItem(key), save: (text) => storage.setItem(key, text) };
}

function storeFor(storage, path) {
  if (path !== undefined && path !== null) {
    if (storage !== null && storage !== undefined) throw new TypeError("give storage or path, not both");
    if (typeof path !== "string" || !path) throw new TypeError(`path must be a non-empty string, got ${describe(path)}`);
    return fileStore(path);
  }
  if (storage === null || storage === undefined) return null;
  if (typeof storage === "string") {
    if (!storage) throw new TypeError("storage must be a non-empty localStorage key");
    return localStorageStore(storage);
  }
  if (typeof storage === "object" && typeof storage.load === "function" && typeof storage.save === "function") {
    return storage;
  }
  throw new TypeError(`storage must be a localStorage key or { load, save }, got ${describe(storage)}`);
}

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
 * Smart Flow: throttles requests per organization (and globally per source IP) before the
 * server has to refuse them, learning which organization owns each network and device.
 * See the TypeScript declarations (smartflow.d.ts) for the options.
 */
export class SmartFlow {
  #limiter;
  #store;
  #resolver;
  #hydrator;
  #now;
  #fetch;
  #onError;
  #cacheStatus;
  #started = false; // whether the saved cache's load has begun
  #ready = Promise.resolve();
  #loading = null; // the store's load while it is under way
  #tasks = new Set(); // background resolves (and their hydrations)
  #saving = null; // the last save queued
  #autoSaving = false;
  #retryTimer = null;
  #closed = false;

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
    this.#store = storeFor(storage, path);
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

  /** Resolves once the saved cache was read; never rejects. */
  get ready() {
    this.#start();
    return this.#ready;
  }

  #failedLoad(error) {
    this.#cacheStatus = "failed";
    this.#report(error, "loading the cache");
  }

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

  #report(error, context) {
    try {
      this.#onError(error, context);
    } catch {
      // an error handler that throws must not break the limiter
    }
  }

  /** Reserve now, synchronously; the seconds to wait. Starts a background resolve if due. */
  #reserve(url) {
    const now = this.#now() / 1000;
    if (this.#resolver === null || this.#closed) return this.#core.acquire(url, now);
    const wait = this.#core.acquireAsync(url, now);
    const lookup = this.#core.takeLookup();
    if (lookup !== undefined) this.#startResolve(lookup);
    return wait;
  }

  /**
   * Wait for the turn of a request to `url`; resolves with the milliseconds waited. The
   * reservation is made at once: concurrent calls each get their own place.
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

  /** How long a cooldown still holds requests to `url` back, ms (0: none). */
  #holdMs(url) {
    return this.#limiter.coolingDown ? this.#limiter.cooldownMs(url, this.#now()) : 0;
  }

  /** How long a `Retry-After` still holds requests to `url` back, ms (0: not at all). */
  cooldownMs(url) {
    return this.#holdMs(checkString(url, "url"));
  }

  #startResolve(lookup) {
    const task = this.#resolveInBackground(lookup);
    this.#tasks.add(task);
    task.finally(() => this.#tasks.delete(task));
  }

  async #resolveInBackground({ kind, id }) {
    await null; // never run the resolver inside acquire()
    let org = null;
    try {
      const found = await this.#resolver(kind, id);
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
    if (recorded && this.#hydrator !== null && this.#core.claimHydration(org)) {
      try {
        await this.#hydrator(org, this);
      } catch (error) {
        this.#report(error, `hydrating the organization ${JSON.stringify(org)}`);
      }
    }
    this.#flushIfDue();
  }

  /**
   * A 429 on `url`: lower its organization's rate (× 0.7), or the global rate when the URL
   * names no organization, network or device; a network or device of an organization not
   * yet known lowers nothing. `retryAfter` (the header, or seconds) holds the same scope
   * back that long, never shortening a cooldown in force.
   */
  onRateLimited(url, retryAfter = undefined) {
    return this.#core.onRateLimited(checkString(url, "url"), retryAfter, this.#now(), Date.now());
  }

  /** A 2xx on `url`: its organization's rate + 0.2, the global rate + 0.5, up to the configured rates. */
  onSuccess(url) {
    this.#core.onSuccess(checkString(url, "url"));
  }

  /** Learn which organization owns the networks and devices a successful response names. */
  learnFromResponse(url, body) {
    const learned = this.#core.learnFromResponse(checkString(url, "url"), body);
    if (learned.networks + learned.devices > 0) this.#flushIfDue();
    return learned;
  }

  registerOrg(orgId) {
    this.#core.registerOrg(checkString(orgId, "orgId"));
  }

  registerNetwork(networkId, orgId) {
    this.#core.registerNetwork(checkString(networkId, "networkId"), checkString(orgId, "orgId"));
  }

  registerDevice(serial, orgId) {
    this.#core.registerDevice(checkString(serial, "serial"), checkString(orgId, "orgId"));
  }

  resolveOrg(url) {
    return this.#core.resolveOrg(checkString(url, "url"));
  }

  orgRate(orgId) {
    return this.#core.orgRate(checkString(orgId, "orgId"));
  }

  get globalRate() {
    return this.#core.globalRate;
  }

  get cacheFresh() {
    return this.#core.cacheFresh;
  }

  get cacheStatus() {
    this.#start();
    return this.#cacheStatus;
  }

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

  /** Save the mappings now; resolves `false` without a storage, rejects when the save fails. */
  flush() {
    this.#start();
    return this.#save();
  }

  #save() {
    if (this.#store === null) return Promise.resolve(false);
    const run = async () => {
      const count = this.#core.dirty;
      const text = this.#core.saveCache(Date.now() / 1000);
      await this.#store.save(text);
      this.#core.markFlushed(count);
      return true;
    };
    // One save at a time, each writing the mappings as they are when its turn comes.
    const saving = (this.#saving ?? Promise.resolve()).catch(() => {}).then(run);
    this.#saving = saving;
    return saving;
  }

  #flushIfDue() {
    if (this.#store === null || this.#closed || this.#autoSaving || this.#retryTimer !== null) return;
    if (!this.#core.flushDue) return;
    this.#autoSaving = true;
    this.#save().then(
      () => {
        this.#autoSaving = false;
        this.#flushIfDue(); // 50 more learned while saving
      },
      (error) => {
        this.#autoSaving = false;
        this.#report(error, "saving the cache");
        this.#scheduleRetry(); // the changes stay counted: nothing is lost
      },
    );
  }

  #scheduleRetry() {
    if (this.#closed) return;
    const delay = this.#core.saveFailed();
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      this.#flushIfDue();
    }, delay);
    // The one timer not on Wait (js/wait.js): nobody awaits a retry, so in Node it must not
    // keep the process running (unref), and gloo-timers' waits cannot be unref'd.
    this.#retryTimer.unref?.();
  }

  /**
   * Stop background work: wait for the resolves (and hydrations) under way and any save in
   * flight, then save once more. Rejects when that final save fails.
   */
  async shutdown() {
    this.#start();
    this.#closed = true;
    if (this.#retryTimer !== null) {
      clearTimeout(this.#retryTimer);
      this.#retryTimer = null;
    }
    if (this.#loading !== null) await this.#loading;
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    await this.#saving?.catch(() => {});
    await this.#save();
  }

  /**
   * `fetch` through Smart Flow: acquire, fetch, then a 2xx counts as a success (and a GET's
   * JSON body is learned from) and a 429 as rate limited, honouring its Retry-After.
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

let shared = null;

/**
 * `fetch` through Smart Flow: through `init.smartFlow`, or a shared SmartFlow with the
 * default limits (created on first use).
 */
export function smartFetch(input, init = undefined) {
  if (init?.smartFlow !== undefined) {
    const { smartFlow, ...rest } = init;
    if (!(smartFlow instanceof SmartFlow)) return Promise.reject(new TypeError("init.smartFlow must be a SmartFlow"));
    return smartFlow.smartFetch(input, rest);
  }
  shared ??= new SmartFlow();
  return shared.smartFetch(input, init);
}
