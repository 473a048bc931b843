// sluicegate/smartflow: the Smart Flow limiter (its wasm core, SmartFlowCore, and the async
// SmartFlow around it) beside the browser client's exports.
import type { FetchInput } from "./platform.js";
import type { SmartFlowCoreOptions, SmartFlowIdKind, SmartFlowLearned, SmartFlowPenalty } from "../pkg-smartflow/sluicegate.js";

export * from "../pkg-smartflow/sluicegate.js";
export { default } from "../pkg-smartflow/sluicegate.js";

/** Where the learned mappings are kept between runs: the cache file's JSON text in and out. */
export interface SmartFlowStore {
  /** The saved text; `null` or `undefined` when there is none. A throw or rejection means starting empty. */
  load(): string | null | undefined | Promise<string | null | undefined>;
  /** Keep `text`; a throw or rejection keeps the changes counted, to be saved again later. */
  save(text: string): void | Promise<void>;
}

/** Finds which organization owns a network or device (answers `null`/`undefined` when it cannot). */
export type SmartFlowResolver = (
  kind: SmartFlowIdKind,
  id: string,
) => string | null | undefined | Promise<string | null | undefined>;

/** Registers every network and device of an organization (`flow.registerNetwork`, `flow.registerDevice`); called once per organization, after its first resolve. */
export type SmartFlowHydrator = (orgId: string, flow: SmartFlow) => void | Promise<void>;

/** Where the cache stands: no storage, loading, loaded fresh, or started empty because it was expired, malformed, missing or unreadable. */
export type SmartFlowCacheStatus = "none" | "pending" | "loaded" | "expired" | "malformed" | "missing" | "failed";

export interface SmartFlowOptions extends SmartFlowCoreOptions {
  /**
   * Where the mappings persist (the specification's JSON cache format): a localStorage key,
   * or your own `{ load, save }`. Default: nowhere.
   */
  storage?: string | SmartFlowStore | null;
  /** Node entry only: keep the cache in this file (see `fileStore`). Elsewhere it throws. */
  path?: string | null;
  /** Looks up the organization of a network or device the limiter has not learned, in the background. */
  resolver?: SmartFlowResolver | null;
  /** Registers all of an organization's networks and devices after its first resolve. */
  hydrator?: SmartFlowHydrator | null;
  /** The monotonic clock, milliseconds (default `performance.now`). */
  now?: (() => number) | null;
  /** The `fetch` that `smartFetch` calls (default `globalThis.fetch`). */
  fetch?: ((input: FetchInput, init?: RequestInit) => Promise<Response>) | null;
  /** Told about background failures (a resolver, hydrator, load or save that threw); default `console.warn`. */
  onError?: ((error: unknown, context: string) => void) | null;
}

export interface SmartFlowSnapshot {
  globalRate: number;
  /** Organizations with a bucket. */
  orgs: number;
  /** Mapped networks and devices. */
  networks: number;
  devices: number;
  /** Mapped changes not yet saved. */
  dirty: number;
  /** Background resolves (and hydrations) under way. */
  pendingResolves: number;
  cacheStatus: SmartFlowCacheStatus;
  cacheFresh: boolean;
}

/** `RequestInit` plus the SmartFlow to go through (default: a shared one with the default limits). */
export interface SmartFetchInit extends RequestInit {
  smartFlow?: SmartFlow;
}

/**
 * Smart Flow: throttles requests per organization (default 10/s, burst 10) and globally
 * (default 100/s) before the server has to refuse them, learning which organization owns
 * each network and device from responses, a resolver, a hydrator or the saved cache. The
 * saved cache is loaded at first use, not at construction, so a SmartFlow may live at a
 * Worker's module scope.
 */
export declare class SmartFlow {
  constructor(options?: SmartFlowOptions);
  /** Resolves once the saved cache was read (at once for a synchronous store); never rejects. Starts the load if nothing else has. */
  readonly ready: Promise<void>;
  /**
   * Resolves when a request to `url` may go out, with the milliseconds waited. The
   * reservation is made synchronously: concurrent calls each get their own place. Rejects
   * with `signal.reason` when aborted (the place stays taken).
   */
  acquire(url: string, options?: { signal?: AbortSignal }): Promise<number>;
  /**
   * A 429 on `url`: lowers its organization's rate (× 0.7, never below 0.5), or the global
   * rate when the URL names no organization, network or device; an unresolved network or
   * device lowers nothing. `retryAfter` (the header, or seconds) holds that scope back,
   * never shortening a cooldown in force.
   */
  onRateLimited(url: string, retryAfter?: string | number | null): SmartFlowPenalty;
  /** A 2xx on `url`: + 0.2 to its organization's rate, + 0.5 to the global rate, up to the configured rates. */
  onSuccess(url: string): void;
  /** Learn mappings from a successful response: `body` parsed (an object) or as JSON text. */
  learnFromResponse(url: string, body: unknown): SmartFlowLearned;
  registerOrg(orgId: string): void;
  registerNetwork(networkId: string, orgId: string): void;
  registerDevice(serial: string, orgId: string): void;
  /** The organization a request URL belongs to, when known. */
  resolveOrg(url: string): string | undefined;
  /** An organization's current rate, once it has a bucket. */
  orgRate(orgId: string): number | undefined;
  readonly globalRate: number;
  /** How long a Retry-After still holds requests to `url` back, milliseconds. */
  cooldownMs(url: string): number;
  /** Whether a fresh saved cache was loaded. */
  readonly cacheFresh: boolean;
  readonly cacheStatus: SmartFlowCacheStatus;
  snapshot(): SmartFlowSnapshot;
  /** Save now: `false` without a storage; rejects when the save fails (the changes stay counted). */
  flush(): Promise<boolean>;
  /**
   * Wait for the background resolves (and hydrations) and saves under way, then save once
   * more; rejects when that save fails. Afterwards `acquire` still paces, but starts no
   * resolves, and nothing is saved but by `flush()`.
   */
  shutdown(): Promise<void>;
  /** `fetch` through this limiter (bound: pass it around as a `fetch`). */
  smartFetch(input: FetchInput, init?: RequestInit): Promise<Response>;
}

/**
 * `fetch` through Smart Flow: acquire → fetch → a 2xx is a success (a GET's JSON body is
 * learned from), a 429 is rate limited and its Retry-After (seconds or HTTP-date) honoured.
 */
export declare function smartFetch(input: FetchInput, init?: SmartFetchInit): Promise<Response>;

/**
 * Milliseconds a Retry-After asks for: delay-seconds (a number is seconds too), or an HTTP-date
 * (IMF-fixdate, or the obsolete RFC 850 and asctime forms) measured from `nowMs` (Unix ms; a
 * date past is 0). `null` when absent or in any other form.
 */
export declare function parseRetryAfter(value: string | number | null | undefined, nowMs?: number): number | null;

/** Node entry only (elsewhere it throws): a `{ load, save }` over a file, written atomically. */
export declare function fileStore(path: string): SmartFlowStore & { readonly path: string };
