import type { PacerOptions, PacerWindow } from "../pkg/sluicegate.js";
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
   * 1 % of the shortest window, from 100 ms to 1 s.
   */
  slackMs?: number;
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

/**
 * Paces weighted calls over several rolling windows at once, with an in-flight cap. Building
 * one reads no clock, storage or random source (all wait for first use), so it may live at
 * a Worker's module scope.
 */
export declare class Pacer {
  constructor(config?: PacerConfig);
  /**
   * Resolves when a call of `weight` may go out. Rejects at once with a `PacerWeightError` for
   * a call that could never go out; rejects with `signal.reason` when aborted before it went
   * out (the weight is refunded; after dispatch it is not).
   */
  acquire(weight: number, options?: { signal?: AbortSignal }): Promise<Permit>;
  /** How long a call of `weight` asked now would wait for budget. */
  etaMs(weight: number): number;
  snapshot(): PacerState;
  /** Change limits at run time; what was spent stays spent. */
  setLimits(limits: { windows?: PacerWindow[]; maxWeight?: number | null; maxInFlight?: number }): Promise<void>;
  /**
   * A copy of the shared ledger: [atMs, weight, owner, seq, dispatched (0|1)] per reservation,
   * where atMs is the planned instant (a call may go out up to slackMs after it).
   */
  ledger(): Promise<[number, number, string, number, 0 | 1][]>;
  /**
   * Resolves once a persisted ledger has been read. `etaMs` and `snapshot` are synchronous and
   * use the ledger as last read: at first use, and at every acquire, dispatch or cancel.
   */
  readonly ready: Promise<void>;
  /** This pacer's owner id in the ledger (made at first use, not at construction). */
  readonly owner: string;
  /** Cancel (and refund) every queued call of this pacer. */
  close(): Promise<void>;
}
