// A process that starts a long wait and aborts it: run by timers.test.mjs, which checks that
// it exits at once (a timer left behind would hold it open for the whole wait).
//   node leftover-timers.mjs batch       a batch paused on a minutely 429, aborted while paused
//   node leftover-timers.mjs smartflow   a Smart Flow acquire held by a 120 s cooldown, aborted
//   node leftover-timers.mjs smartflow-save  a Smart Flow whose save failed (the next one backs
//                                        off), left as it is, and a second one shut down
import { Pacer, runBatch } from "sluicegate";
import { SmartFlow } from "sluicegate/smartflow";

const MINUTELY = '{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}';
const controller = new AbortController();

if (process.argv[2] === "batch") {
  const pacer = new Pacer({ windows: [{ lengthMs: 60_000, budget: 1_000 }], maxInFlight: 1 });
  const fetch = async () => new Response(MINUTELY, { status: 429 });
  // abort once the batch is asleep until the next minute, not before it starts to wait
  const onProgress = (p) => p.state === "paused" && setTimeout(() => controller.abort(), 50);
  const out = await runBatch([{ url: "/a", weight: 1 }], { pacer, fetch, signal: controller.signal, onProgress });
  console.log(JSON.stringify({ state: out.state, resumed: out.stats.resumed }));
} else if (process.argv[2] === "smartflow") {
  const flow = new SmartFlow();
  flow.onRateLimited("/organizations/O_1/networks", 120);
  const waiting = flow.acquire("/organizations/O_1/networks", { signal: controller.signal });
  queueMicrotask(() => controller.abort(new Error("gave up")));
  const error = await waiting.catch((e) => e);
  console.log(JSON.stringify({ rejected: error?.message }));
} else if (process.argv[2] === "smartflow-save") {
  const failingStore = () => {
    const store = { saves: 0, load: () => null, save: () => (store.saves++ === 0 ? Promise.reject(new Error("disk full")) : undefined) };
    return store;
  };
  const out = {};
  for (const shutDown of [false, true]) {
    const store = failingStore();
    const failed = new Promise((resolve) => {
      const flow = new SmartFlow({ storage: store, onError: resolve });
      for (let i = 0; i < 50; i++) flow.learnFromResponse(`/organizations/O_1/networks/N_${i}`, null);
      out[shutDown ? "shutDown" : "leftAlone"] = flow;
    });
    await failed;
    if (shutDown) await out.shutDown.shutdown(); // the final save succeeds
    out[shutDown ? "shutDown" : "leftAlone"] = { saves: store.saves, dirty: out[shutDown ? "shutDown" : "leftAlone"].snapshot().dirty };
  }
  console.log(JSON.stringify(out));
} else {
  throw new Error(`usage: leftover-timers.mjs batch | smartflow | smartflow-save, got ${process.argv[2]}`);
}
