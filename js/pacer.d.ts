import type { PacerOptions, PacerWindow } from "../pkg/sluicegate.js";

/** Where a pacer's ledger lives, so that page reloads and every tab of the origin share one budget. */
export interface PacerPersistence {
  /** The Web Storage key (one ledger per key). */
  key: string;
  /** Default: `localStorage`. */
  storage?: Pick<Storage, "getItem" | "setItem">;
  /** Default: `navigator.locks` (Web Locks); `null` to not lock (a single context). */
  locks?: Pick<LockManager, "request"> | null;
}

export interface PacerConfig extends PacerOptions {
  /** At most this many calls out at once (default 4: the upstream refuses more than 5 per IP). */
  maxInFlight?: number;
  /** A storage key, or where to keep the ledger; default: this pacer's memory only. */
  persist?: string | PacerPersistence | null;
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

/** Paces weighted calls over several rolling windows at once, with an in-flight cap. */
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
  /** Cancel (and refund) every queued call of this pacer. */
  close(): Promise<void>;
}
