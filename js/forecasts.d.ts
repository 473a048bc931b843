import type { BatchAbort, BatchOptions, BatchProgress } from "./batch.js";
import type { LocationCache } from "./cache.js";

export interface ForecastPoint {
  latitude: number;
  longitude: number;
}

/** The API's query parameters; arrays are joined with commas. */
export interface ForecastParams {
  daily?: readonly string[] | string;
  hourly?: readonly string[] | string;
  current?: readonly string[] | string;
  models?: readonly string[] | string;
  forecast_days?: number;
  start_date?: string;
  end_date?: string;
  [name: string]: readonly (string | number)[] | string | number | undefined;
}

export interface ForecastOptions extends Omit<BatchOptions, "onProgress" | "onResult"> {
  /** Default: the real API, https://api.open-meteo.com/v1/forecast. */
  baseUrl?: string;
  cache?: LocationCache | null;
  /** At most this many locations per call (≤ 1,000). Default 100; the size that packs the budget best is used. */
  maxLocationsPerCall?: number;
  weightMode?: "conservative" | "server";
  onProgress?: (progress: BatchProgress & { cacheHits: number; locations: number }) => void;
}

export interface ForecastOutcome<T = unknown> {
  state: "done" | "aborted";
  abort: BatchAbort | null;
  /** Per point; `undefined` where the batch was aborted before it was fetched. */
  results: (T | undefined)[];
  stats: {
    fetches: number;
    weightSpent: number;
    rateLimited: number;
    resumed: boolean;
    done: number;
    cacheHits: number;
    calls: number;
    locationsPerCall: number;
  };
}

export declare function fetchForecasts<T = unknown>(points: readonly ForecastPoint[], params: ForecastParams, options?: ForecastOptions): Promise<ForecastOutcome<T>>;
