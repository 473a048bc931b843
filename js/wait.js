// sleep: the JS layer's one way to wait, over the wasm build's cancellable Wait (gloo-timers;
// the pacer drives its Waits itself). An abort clears the timer at once, so nothing is left
// behind to keep a process alive.
import { abortReason, onAbort } from "./abort.js";

/** One Wait's longest: setTimeout fires at once beyond 2^31 − 1 ms, so a longer sleep is several. */
const MAX_WAIT_MS = 2 ** 31 - 1;

/**
 * Resolves after `ms` (any length), or rejects with the signal's reason when `signal` aborts
 * first. `Wait` is the class of the build the caller runs on.
 */
export async function sleep(Wait, ms, signal) {
  if (signal?.aborted) throw abortReason(signal);
  const due = Date.now() + ms;
  for (let left = ms; ; left = due - Date.now()) {
    const wait = new Wait(Math.min(Math.max(0, left), MAX_WAIT_MS));
    const stop = signal ? onAbort(signal, () => wait.cancel()) : () => {};
    let ran;
    try {
      ran = await wait.done;
    } finally {
      stop();
      wait.free();
    }
    if (!ran) throw abortReason(signal);
    if (left <= MAX_WAIT_MS) return;
  }
}
