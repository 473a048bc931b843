// fetchForecasts: the common case. Points are looked up in the cache, the misses are split
// into calls of the size the core chooses (chooseLocationsPerCall), weighed as the core reads
// their query (openMeteoQueryWeight: the same reader as the edge's and the mock's), and run as
// one batch through the pacer.
import { chooseLocationsPerCall, openMeteoQueryWeight } from "../pkg/sluicegate.js";
import { runBatch } from "./batch.js";
import { Pacer } from "./pacer.js";

/**
 * @import { BatchAbort, BatchOptions, BatchProgress } from "./batch.js"
 * @import { LocationCache } from "./cache.js"
 */

/**
 * @typedef {object} ForecastPoint
 * @property {number} latitude
 * @property {number} longitude
 */

/**
 * The API's query parameters; arrays are joined with commas. Weighed as the core reads them
 * (openMeteoQueryWeight): a value it cannot read (`forecast_days: 17`) rejects naming it.
 * @typedef {{ daily?: readonly string[] | string; hourly?: readonly string[] | string; current?: readonly string[] | string; minutely_15?: readonly string[] | string; models?: readonly string[] | string; forecast_days?: number; past_days?: number; start_date?: string; end_date?: string; [name: string]: readonly (string | number)[] | string | number | undefined }} ForecastParams
 */

/**
 * `fetchForecasts`' options: a batch's ({@link BatchOptions}, but for its `onProgress` and
 * `onResult`) and these.
 * @typedef {object} ForecastOptions
 * @property {BatchOptions["pacer"]} [pacer] As {@link BatchOptions}.
 * @property {BatchOptions["fetch"]} [fetch] As {@link BatchOptions}.
 * @property {BatchOptions["signal"]} [signal] As {@link BatchOptions}.
 * @property {BatchOptions["upstreamWindows"]} [upstreamWindows] As {@link BatchOptions}.
 * @property {BatchOptions["jitterMs"]} [jitterMs] As {@link BatchOptions}.
 * @property {BatchOptions["now"]} [now] As {@link BatchOptions}.
 * @property {string} [baseUrl] Default: the real API, https://api.open-meteo.com/v1/forecast.
 * @property {LocationCache | null} [cache]
 * @property {number} [maxLocationsPerCall] At most this many locations per call (≤ 1,000). Default 100; the size that packs the budget best is used.
 * @property {"conservative" | "server"} [weightMode]
 * @property {(progress: BatchProgress & { cacheHits: number; locations: number }) => void} [onProgress]
 */

/**
 * @template [T=unknown]
 * @typedef {object} ForecastOutcome
 * @property {"done" | "aborted"} state
 * @property {BatchAbort | null} abort
 * @property {(T | undefined)[]} results Per point; `undefined` where the batch was aborted before it was fetched.
 * @property {{ fetches: number; weightSpent: number; rateLimited: number; resumed: boolean; done: number; cacheHits: number; calls: number; locationsPerCall: number }} stats
 */

function list(value) {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : String(value).split(",").filter(Boolean);
}

/**
 * Fetch forecasts for `points` ([{ latitude, longitude }]) with `params` (the API's query
 * parameters; arrays are joined with commas). Resolves to
 * `{ state, results, abort, stats }`: `results[i]` is the forecast of point i (undefined if
 * the batch was aborted before it was fetched).
 * @template [T=unknown]
 * @param {readonly ForecastPoint[]} points
 * @param {ForecastParams} params
 * @param {ForecastOptions} [options]
 * @returns {Promise<ForecastOutcome<T>>}
 */
export async function fetchForecasts(points, params = {}, options = {}) {
  const {
    baseUrl = "https://api.open-meteo.com/v1/forecast",
    pacer = new Pacer(),
    cache = null,
    maxLocationsPerCall = 100,
    weightMode = "conservative",
    onProgress,
    ...batchOptions
  } = options;
  if (!Array.isArray(points)) throw new TypeError("points must be an array of { latitude, longitude }");
  points.forEach((p, i) => {
    if (!Number.isFinite(p?.latitude) || p.latitude < -90 || p.latitude > 90) throw new RangeError(`points[${i}].latitude must be in [-90, 90]`);
    if (!Number.isFinite(p?.longitude) || p.longitude < -180 || p.longitude > 180) throw new RangeError(`points[${i}].longitude must be in [-180, 180]`);
  });
  for (const name of ["latitude", "longitude"]) {
    if (Object.hasOwn(params, name)) throw new TypeError(`params must not name ${name}: the points give each call's`);
  }
  const query = Object.entries(params)
    .map(([k, v]) => `${encodeURIComponent(k)}=${list(v).map(encodeURIComponent).join(",")}`)
    .join("&");
  // One location's weight, read from the query by the core (past_days added to forecast_days,
  // a call without variables priced as the server prices it, a value out of range an error
  // naming the parameter). Both formulas multiply it by the locations last, so a call for n
  // weighs n times it, to the bit: no query is read again while the calls are sized.
  const perLocation = openMeteoQueryWeight(`latitude=0&${query}`, weightMode);
  const weightOf = (/** @type {number} */ locations) => locations * perLocation;

  const results = new Array(points.length).fill(undefined);
  const misses = [];
  const waits = [];
  let cacheHits = 0;
  points.forEach((p, i) => {
    if (!cache) {
      misses.push({ i, point: p, settle: null });
      return;
    }
    const found = cache.lookup(cache.key(p.latitude, p.longitude, /** @type {Record<string, string | number | readonly (string | number)[]>} */ (params)));
    if (found.state === "hit") {
      results[i] = found.value;
      cacheHits++;
    } else if (found.state === "pending") {
      cacheHits++; // no weight spent on it here: another request is fetching it
      waits.push(
        found.promise.then(
          (v) => (results[i] = v),
          () => {},
        ),
      );
    } else {
      misses.push({ i, point: p, settle: found });
    }
  });

  const budget = Math.min(...pacer.snapshot().windows.map((w) => w.budget));
  const perCall = chooseLocationsPerCall({ weightOf, budget, max: maxLocationsPerCall });
  const groups = [];
  for (let k = 0; k < misses.length; k += perCall) groups.push(misses.slice(k, k + perCall));
  const calls = groups.map((group) => {
    const lat = group.map((m) => m.point.latitude).join(",");
    const lon = group.map((m) => m.point.longitude).join(",");
    return { url: `${baseUrl}?latitude=${lat}&longitude=${lon}${query ? `&${query}` : ""}`, weight: weightOf(group.length) };
  });

  const outcome = await runBatch(calls, {
    pacer,
    ...batchOptions,
    onProgress: onProgress && ((p) => onProgress({ ...p, cacheHits, locations: points.length })),
    onResult: (ci, value) => {
      const rows = Array.isArray(value) ? value : [value];
      groups[ci].forEach((m, j) => {
        results[m.i] = rows[j];
        m.settle?.resolve(rows[j]);
      });
    },
  });
  const failure = new Error(outcome.abort?.reason ?? "not fetched");
  for (const m of misses) if (results[m.i] === undefined) m.settle?.reject(failure);
  await Promise.all(waits);
  const { state, abort } = outcome;
  return { state, abort, results, stats: { ...outcome.stats, cacheHits, calls: calls.length, locationsPerCall: perCall } };
}
