// runBatch: a fan-out through the pacer, decided by BatchPolicy. The first 429 or failure of
// a required call ends the batch: every queued and in-flight call is aborted. A minutely 429
// pauses it instead: queued calls stop, calls in flight (already admitted upstream) finish,
// and the rest resume once at the next upstream window. Best-effort calls degrade to null.
import { BatchPolicy, Wait } from "../pkg/sluicegate.js";
import { onAbort } from "./abort.js";
import { Pacer } from "./pacer.js";
import { sleep } from "./wait.js";

/** @import { PacerWindow, RateLimitKind, UpstreamWindowsMs } from "../pkg/sluicegate.js" */

/**
 * One upstream call of a batch.
 * @typedef {object} BatchCall
 * @property {string} url
 * @property {number} weight Its weight in the pacer's unit (e.g. Open-Meteo weighted calls).
 * @property {boolean} [bestEffort] A best-effort call degrades to `null`; its first 429 skips the remaining best-effort calls.
 * @property {RequestInit} [init]
 */

/**
 * @typedef {object} BatchProgress
 * @property {number} done Calls settled, of `total`.
 * @property {number} total
 * @property {number} weightSpent
 * @property {number} fetches
 * @property {number} etaMs How long until this batch's last queued call may go out.
 * @property {"running" | "paused" | "done" | "aborted"} state
 * @property {(PacerWindow & { spent: number })[]} windows
 */

/**
 * @typedef {object} BatchAbort
 * @property {string} reason
 * @property {RateLimitKind | null} kind
 * @property {number | null} status
 * @property {number | null} retryAtMs When trying again could succeed (the next upstream window), if known.
 */

/**
 * @typedef {object} BatchOptions
 * @property {Pacer} [pacer]
 * @property {(url: string, init: RequestInit) => Promise<Response>} [fetch]
 * @property {AbortSignal} [signal]
 * @property {(progress: BatchProgress) => void} [onProgress]
 * @property {(index: number, value: unknown) => void} [onResult]
 * @property {UpstreamWindowsMs} [upstreamWindows] The upstream's clock-aligned windows (default: a real minute, hour and day).
 * @property {[number, number]} [jitterMs] Jitter added to a minutely resume, [min, max] ms. Default [1000, 3000].
 * @property {() => number} [now]
 */

/**
 * @template [T=unknown]
 * @typedef {object} BatchOutcome
 * @property {"done" | "aborted"} state
 * @property {(T | null | undefined)[]} results Per call: its JSON, `null` for a skipped best-effort call, `undefined` if it never completed.
 * @property {BatchAbort | null} abort
 * @property {{ fetches: number; weightSpent: number; rateLimited: number; resumed: boolean; done: number }} stats
 */

/**
 * Run a fan-out through the pacer. The first 429 or failure of a required call aborts every
 * queued and in-flight call (one AbortController); a minutely 429 resumes once at the next
 * upstream window; an hourly or daily one ends the batch; a concurrency 429 lowers the cap.
 * Resolves (never rejects for upstream trouble); every call is settled.
 * @template [T=unknown]
 * @param {BatchCall[]} calls
 * @param {BatchOptions} [options]
 * @returns {Promise<BatchOutcome<T>>}
 */
export async function runBatch(calls, options = {}) {
  const {
    pacer = new Pacer(),
    fetch: doFetch = (url, init) => globalThis.fetch(url, init),
    signal: outer,
    onProgress,
    onResult,
    upstreamWindows,
    jitterMs = [1_000, 3_000],
    now = () => Date.now(),
  } = options;
  const policy = new BatchPolicy(upstreamWindows, jitterMs[0], jitterMs[1]);
  const total = calls.length;
  const results = new Array(total).fill(undefined);
  const settled = new Array(total).fill(false);
  const stats = { fetches: 0, weightSpent: 0, rateLimited: 0, resumed: false, done: 0 };
  /** @type {BatchAbort | null} */
  let abort = null;
  /** @type {BatchProgress["state"]} */
  let state = "running";

  const progress = () => {
    if (!onProgress) return;
    const snap = pacer.snapshot();
    onProgress({
      done: stats.done,
      total,
      weightSpent: stats.weightSpent,
      fetches: stats.fetches,
      etaMs: snap.drainsAtMs === null ? 0 : Math.max(0, snap.drainsAtMs - now()),
      state,
      windows: snap.windows,
    });
  };
  const settle = (i, value) => {
    if (settled[i]) return;
    settled[i] = true;
    results[i] = value;
    stats.done++;
    progress();
  };

  try {
    for (;;) {
      // Two signals per round: `queue` stops calls that have not gone out (a pause or the
      // end), `flight` also cuts the ones in flight (the end only). Calls already in flight
      // when a minutely 429 pauses the batch were admitted upstream: they finish and keep
      // their data, so nothing is spent twice.
      const queue = new AbortController();
      const flight = new AbortController();
      const end = (reason) => {
        queue.abort(reason);
        flight.abort(reason);
      };
      let stopOuter = () => {};
      if (outer?.aborted) end(outer.reason);
      else if (outer) stopOuter = onAbort(outer, () => end(outer.reason));
      /** @type {number | null} */
      let resumeAt = null;

      const runOne = async (i) => {
        const call = calls[i];
        const bestEffort = Boolean(call.bestEffort);
        if (!policy.sends(bestEffort)) return bestEffort ? settle(i, null) : undefined;
        let permit;
        try {
          permit = await pacer.acquire(call.weight, { signal: queue.signal });
        } catch (error) {
          if (queue.signal.aborted) return;
          abort ??= { reason: error.message, kind: null, status: null, retryAtMs: null };
          end(error);
          return;
        }
        if (queue.signal.aborted || !policy.sends(bestEffort)) {
          permit.release();
          if (!queue.signal.aborted && bestEffort) settle(i, null);
          return; // nothing goes out once the batch is paused or decided
        }
        stats.fetches++;
        stats.weightSpent += call.weight;
        progress();
        let status;
        let body;
        try {
          const response = await doFetch(call.url, { ...call.init, signal: flight.signal });
          status = response.status;
          body = await response.text();
        } catch (error) {
          if (flight.signal.aborted) return;
          status = 0;
          body = String(error?.message ?? error);
        } finally {
          permit.release();
        }
        if (flight.signal.aborted) return; // another call already decided the batch
        if (status === 429) stats.rateLimited++;
        let value;
        let readable = true;
        try {
          value = JSON.parse(body);
        } catch {
          readable = false;
        }
        const action = policy.onResponse(status, body, now(), bestEffort, pacer.snapshot().maxInFlight, readable);
        switch (action.action) {
          case "ok":
            onResult?.(i, value);
            return settle(i, value);
          case "null":
            return settle(i, null);
          case "resume":
            resumeAt = action.atMs;
            state = "paused";
            queue.abort(new DOMException("paused until the next upstream window", "AbortError"));
            return;
          case "lowerConcurrency":
            await pacer.setLimits({ maxInFlight: action.maxInFlight });
            return runOne(i);
          case "skipBestEffort":
            return settle(i, null);
          case "abort":
            abort ??= { reason: action.reason, kind: action.kind, status: action.status, retryAtMs: action.retryAtMs };
            end(new DOMException(action.reason, "AbortError"));
            return;
        }
      };

      await Promise.all(results.map((_, i) => (settled[i] ? null : runOne(i))));
      stopOuter();
      if (abort || outer?.aborted) break;
      if (resumeAt === null) break;
      stats.resumed = true;
      progress();
      try {
        await sleep(Wait, resumeAt - now(), outer);
      } catch {
        break;
      }
      state = "running";
    }
  } finally {
    policy.free();
  }
  if (outer?.aborted && !abort) abort = { reason: "aborted by the caller", kind: null, status: null, retryAtMs: null };
  state = abort ? "aborted" : "done";
  progress();
  return { state, results, abort, stats };
}
