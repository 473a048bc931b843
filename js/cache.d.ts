import type { StorageLike } from "./platform.js";

/** Where a cache's entries are saved between page loads. */
export interface CachePersistence {
  key: string;
  /** Default: `localStorage`. */
  storage?: StorageLike;
}

export interface LocationCacheConfig {
  /** How long a result lives, counted from its response. Default 15 minutes. */
  ttlMs?: number;
  /** The most results kept (least recently used go first). Default 5,000. */
  maxEntries?: number;
  /** Decimals lat/lon are rounded to in keys (0–6). Default 2 (about 1 km). */
  precision?: number;
  /** The clock in milliseconds. Default `Date.now`. */
  now?: () => number;
  /** A storage key (or key and storage) to keep results across page loads; values must be JSON. */
  persist?: string | CachePersistence | null;
}

export type CacheEntry<V> = { state: "hit"; value: V } | { state: "pending"; promise: Promise<V> } | { state: "miss"; resolve(value: V): void; reject(error: unknown): void };

/**
 * Per-location results for a TTL; identical requests in flight share one fetch; errors are
 * never cached. A persisted cache is read at first use, not at construction, so it may live
 * at a Worker's module scope.
 */
export declare class LocationCache<V = unknown> {
  constructor(config?: LocationCacheConfig);
  /** The normalised key: lat/lon rounded, parameters and their values sorted. */
  key(latitude: number, longitude: number, params?: Record<string, string | number | readonly (string | number)[]>): string;
  /** A hit, a fetch to wait for, or a miss that the caller must settle. */
  lookup(key: string): CacheEntry<V>;
  /** The value for `key`, loaded once by `load()` on a miss. */
  get(key: string, load: () => Promise<V>): Promise<V>;
  readonly size: number;
  readonly inFlight: number;
}
