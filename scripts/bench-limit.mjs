// Keyed decisions from JavaScript (`npm run bench`): sluicegate/limit's `limit(key)` at
// 1,000 and 1,000,000 string keys beside rate-limiter-flexible's RateLimiterMemory.consume,
// and the edge build's TokenBucket.check beside limiter's TokenBucket.tryRemoveTokens, in
// one run with the ratios. The keys are made once and passed again and again (the same string
// objects, whose hashes the engine keeps), then made anew for each call, as a server's are.
// Each figure is the best of five rounds after a warm-up, the figures of a ratio taking their
// rounds in turn, each round after a full garbage collection, every limiter generous enough
// that all requests are admitted (the common case). Node 22.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { TokenBucket as LimiterBucket } from "limiter";
import { Limiter } from "../js/limit-node.js";
import { TokenBucket } from "../js/edge-node.js";

const ROUNDS = 5;
// A full collection before every timed round, so that no round pays for the garbage of the
// one before it (another limiter's, when rounds take turns).
setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc");
const line = (label, value) => console.log(`${label.padEnd(58)} ${value}`);

/** Mean ns per call of each of `fns` (`fn(i)`) over `n` calls, best of ROUNDS, each its own loop
 * (its own call site); their rounds are taken in turn (round r of each before round r + 1 of
 * any, the first moving round to round), so that the figures of a ratio meet the same machine. */
function nsPerCallInTurn(n, fns) {
  const loops = fns.map(() => new Function("fn", "n", "let s = 0; for (let i = 0; i < n; i++) if (fn(i)) s++; return s;"));
  for (const [k, loop] of loops.entries()) {
    loop(fns[k], Math.min(n, 300_000));
  }
  const best = fns.map(() => Infinity);
  for (let round = 0; round < ROUNDS; round++) {
    for (let j = 0; j < fns.length; j++) {
      const k = (j + round) % fns.length;
      collect();
      const start = process.hrtime.bigint();
      loops[k](fns[k], n);
      best[k] = Math.min(best[k], Number(process.hrtime.bigint() - start) / n);
    }
  }
  return best;
}

const CALLS = 2_000_000;
const ns = (x) => `${x.toFixed(1)} ns`;
for (const keyCount of [1_000, 1_000_000]) {
  const keys = Array.from({ length: keyCount }, (_, i) => `user:${i}`);
  const ours = new Limiter({ algorithm: "token_bucket", limit: 1e9, windowMs: 1_000, maxKeys: 2 * keyCount });
  const flexible = new RateLimiterMemory({ points: 1e9, duration: 1 });
  const given = { now: Date.now() };
  const mask = keyCount - 1;
  const pick = keyCount & mask ? (i) => keys[i % keyCount] : (i) => keys[i & mask];
  const [withClock, withNow, theirs] = nsPerCallInTurn(CALLS, [
    (i) => ours.limit(pick(i)).success,
    (i) => ours.limit(pick(i), given).success,
    (i) => flexible.consume(pick(i)) !== undefined,
  ]);
  line(`limit(key), ${keyCount.toLocaleString("en")} keys (Date.now)`, ns(withClock));
  line(`limit(key, { now }), ${keyCount.toLocaleString("en")} keys`, ns(withNow));
  line(`rate-limiter-flexible consume, ${keyCount.toLocaleString("en")} keys`, ns(theirs));
  line(`  ratio (rate-limiter-flexible / limit(key))`, `${(theirs / withClock).toFixed(1)}×`);
  // A server's keys arrive as new strings (from a header, an address): each call hashes its
  // key and compares it with the stored one by content, on both sides.
  const [fresh, theirsFresh] = nsPerCallInTurn(CALLS, [(i) => ours.limit(`user:${i % keyCount}`).success, (i) => flexible.consume(`user:${i % keyCount}`) !== undefined]);
  line(`  the same, a new key string each call (limit / consume)`, `${ns(fresh)} / ${ns(theirsFresh)}, ${(theirsFresh / fresh).toFixed(1)}×`);
}

const bucket = new TokenBucket(1e9, 1_000, 1e9);
const now = Date.now();
const theirBucket = new LimiterBucket({ bucketSize: 1e9, tokensPerInterval: 1e9, interval: "second" });
theirBucket.content = 1e9;
const [ourBucket, limiterFigure] = nsPerCallInTurn(CALLS, [() => bucket.check(now, 1) >= 0, () => theirBucket.tryRemoveTokens(1)]);
line("TokenBucket.check (one bucket, time passed in)", ns(ourBucket));
line("limiter TokenBucket.tryRemoveTokens (one bucket)", ns(limiterFigure));
line("  ratio (limiter / TokenBucket.check)", `${(limiterFigure / ourBucket).toFixed(1)}×`);
