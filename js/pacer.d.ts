import type { PacerOptions } from "../pkg/sluicegate.js";
import type { IDBFactoryLike, LockManagerLike, StorageLike } from "./platform.js";

/** Where a pacer's ledger lives, so that page reloads and every tab of the origin share one budget. */
/**
 * Where a pacer's ledger lives, so that page reloads and every tab of the origin share one
 * budget. With only a `key` (or a string), browsers keep it in IndexedDB, whose transactions
 * are atomic across tabs. With a `storage`, it lives there under `locks`: consistent within
 * one JavaScript context only (browsers copy localStorage between tabs asynchronously).
 */
export interface PacerPersistence {
  /** One ledger per key. */
  key: string;
  /** Default: `indexedDB`. */
  indexedDB?: IDBFactoryLike;
  /** A synchronous storage instead of IndexedDB (e.g. for Node or tests). */
  storage?: StorageLike;
  /** With `storage`: default `navigator.locks`; `null` to not lock. */
  locks?: LockManagerLike | null;
}

export interface PacerConfig extends PacerOptions {
  /** At most this many calls out at once (default 4: the upstream refuses more than 5 per IP). */
  maxInFlight?: number;
  /** A ledger key (IndexedDB in browsers), or where to keep the ledger; default: this pacer's memory only. */
  persist?: string | PacerPersistence | null;
  /**
   * How late a call may go out after its planned instant (a late timer, a wait for a free
   * slot) without being planned again; every window is reserved this much longer. Default
   * (or `null`): 1 % of the shortest window, from 100 ms to 1 s.
   */
  slackMs?: number | null;
  /** The clock, in milliseconds (default `Date.now`); shared by every tab when persisted. */
  now?: () => number;
}

/** Permission for one call: call `release()` once it has answered (its weight stays spent). */
export interface Permit {
  id: number;
  weight: number;
  dispatchedAtMs: number;
  release(): void;
}

export interface PacerState {
  /** Weight spent in each window up to now, by every tab sharing the ledger. */
  windows: { lengthMs: number; budget: number; spent: number }[];
  /** This pacer's calls waiting for their turn, and their weight. */
  queued: number;
  queuedWeight: number;
  inFlight: number;
  maxInFlight: number;
  /** When this pacer's last queued call may go out, or null. */
  drainsAtMs: number | null;
}

/** When `tryAcquire` gives no permit: how long until the budget has room ("budget"), or 0 while every slot is taken ("inFlight"). */
export interface PacerBusy {
  retryAfterMs: number;
  reason: "budget" | "inFlight";
}

export interface AcquireOptions {
  /** Aborting before the call goes out rejects with `signal.reason` and refunds its weight. */
  signal?: AbortSignal;
  /** Among calls due and waiting for a free slot, higher goes first (default 0). A committed reservation is never moved. */
  priority?: number;
}

/** `queued`: a reservation was committed; `dispatch`: a call went out; `idle`: nothing queued or in flight. */
export interface PacerEvent extends Event {
  readonly type: "queued" | "dispatch" | "idle";
  /** `{ id, weight, atMs }` for queued, `{ id, weight }` for dispatch, undefined for idle. */
  readonly detail?: { id: number; weight: number; atMs?: number };
}

/**
 * Paces weighted calls over several rolling windows at once, with an in-flight cap. Building
 * one reads no clock, storage or random source (all wait for first use), so it may live at
 * a Worker's module scope. Options are checked by name: an unknown or bad one throws.
 */
export declare class Pacer extends EventTarget {
  constructor(config?: PacerConfig);
  /**
   * Resolves when a call of `weight` may go out. Rejects at once with a `PacerWeightError` for
   * a call that could never go out, or a `PacerQueueFullError` beyond `maxQueued` /
   * `maxQueuedWeight`; rejects with `signal.reason` when aborted before it went out (the
   * weight is refunded; after dispatch it is not).
   */
  acquire(weight: number, options?: AcquireOptions): Promise<Permit>;
  /** Acquire, run `fn`, release (also when `fn` throws); resolves to what `fn` resolves to. */
  schedule<T>(weight: number, fn: (signal?: AbortSignal) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>;
  /** `fn` paced: each call is scheduled with the weight `weightOf(...args)` (default 1). */
  wrap<A extends unknown[], T>(fn: (...args: A) => T | PromiseLike<T>, weightOf?: (...args: A) => number): (...args: A) => Promise<T>;
  /**
   * A permit now, or why not, never a wait: nothing is queued. Needs the pacer's own ledger
   * (throws a TypeError with `persist`).
   */
  tryAcquire(weight: number): Permit | PacerBusy;
  /** Resolves once nothing is queued or in flight. */
  onIdle(): Promise<void>;
  /** How long a call of `weight` asked now would wait for budget. */
  etaMs(weight: number): number;
  snapshot(): PacerState;
  /** Change limits at run time; what was spent stays spent, queued calls are placed again. */
  setLimits(limits: PacerOptions): Promise<void>;
  /**
   * A copy of the shared ledger: [atMs, weight, owner, seq, dispatched (0|1)] per reservation,
   * where atMs is the planned instant (a call may go out up to slackMs after it).
   */
  ledger(): Promise<[number, number, string, number, 0 | 1][]>;
  /** Resolves once a persisted ledger has been read. */
  readonly ready: Promise<void>;
  /** This pacer's owner id in the ledger (made at first use, not at construction). */
  readonly owner: string;
  /** Cancel (and refund) every queued call of this pacer. */
  close(): Promise<void>;
}
