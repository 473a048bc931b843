// Helpers shared by the pacer tests.

/** The largest weight any window [t, t + lengthMs) starting at a spend holds, from [atMs, weight] pairs. */
export function maxWindowLoad(spends, lengthMs) {
  let best = 0;
  for (const [start] of spends) {
    const load = spends.filter(([at]) => at >= start && at < start + lengthMs).reduce((s, [, w]) => s + w, 0);
    best = Math.max(best, load);
  }
  return best;
}

/** A Web Storage stand-in (getItem/setItem), shared the way tabs or page loads share localStorage. */
export class MemoryStorage {
  #items = new Map();
  getItem(k) {
    return this.#items.has(k) ? this.#items.get(k) : null;
  }
  setItem(k, v) {
    this.#items.set(k, String(v));
  }
}
