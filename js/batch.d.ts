import type { Pacer } from "./pacer.js";
import type { PacerWindow, RateLimitKind, UpstreamWindowsMs } from "../pkg/sluicegate.js";

/** One upstream call of a batch. */
export interface BatchCall {
  url: string;
  /** Its weight in the pacer's unit (e.g. Open-Meteo weighted calls). */
  weight: number;
  /** A best-effort call degrades to `null`; its first 429 skips the remaining best-effort calls. */
  bestEffort?: boolean;
  init?: RequestInit;
}

export interface BatchProgress {
  /** Calls settled, of `total`. */
  done: number;
  total: number;
  weightSpent: number;
  fetches: number;
  /** How long until this batch's last queued call may go out. */
  etaMs: number;
  state: "running" | "paused" | "done" | "aborted";
  windows: (PacerWindow & { spent: number })[];
}

export interface BatchAbort {
  reason: string;
  kind: RateLimitKind | null;
  status: number | null;
  /** When trying again could succeed (the next upstream window), if known. */
  retryAtMs: number | null;
}

export interface BatchOptions {
  pacer?: Pacer;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  signal?: AbortSignal;
  onProgress?: (progress: BatchProgress) => void;
  onResult?: (index: number, value: unknown) => void;
  /** The upstream's clock-aligned windows (default: a real minute, hour and day). */
  upstreamWindows?: UpstreamWindowsMs;
  /** Jitter added to a minutely resume, [min, max] ms. Default [1000, 3000]. */
  jitterMs?: [number, number];
  now?: () => number;
}

export interface BatchOutcome<T = unknown> {
  state: "done" | "aborted";
  /** Per call: its JSON, `null` for a skipped best-effort call, `undefined` if it never completed. */
  results: (T | null | undefined)[];
  abort: BatchAbort | null;
  stats: { fetches: number; weightSpent: number; rateLimited: number; resumed: boolean; done: number };
}

/**
 * Run a fan-out through the pacer. The first 429 or failure of a required call aborts every
 * queued and in-flight call (one AbortController); a minutely 429 resumes once at the next
 * upstream window; an hourly or daily one ends the batch; a concurrency 429 lowers the cap.
 */
export declare function runBatch<T = unknown>(calls: BatchCall[], options?: BatchOptions): Promise<BatchOutcome<T>>;
