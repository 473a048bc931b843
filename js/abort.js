// One "abort" listener per AbortSignal, however many waits share the signal: a caller that
// passes one signal to many calls (a page's "cancel" button, a request's signal) would
// otherwise collect a listener per call, and Node warns past ten
// (MaxListenersExceededWarning). The listener is removed with the last wait on the signal.
const waiting = new WeakMap(); // AbortSignal → { callbacks: Set, listener }

/**
 * Call `callback()` when `signal` (not yet aborted) aborts. Returns `stop()`, which forgets
 * the callback, and removes the signal's listener when no other wait is left on it.
 */
export function onAbort(signal, callback) {
  let entry = waiting.get(signal);
  if (entry === undefined) {
    const callbacks = new Set();
    const listener = () => {
      waiting.delete(signal);
      for (const call of callbacks) call();
      callbacks.clear();
    };
    entry = { callbacks, listener };
    waiting.set(signal, entry);
    signal.addEventListener("abort", listener, { once: true });
  }
  const { callbacks, listener } = entry;
  const call = () => callback(); // one entry per wait, even for the same function
  callbacks.add(call);
  return () => {
    if (!callbacks.delete(call) || callbacks.size > 0) return;
    if (waiting.get(signal) === entry) waiting.delete(signal);
    signal.removeEventListener("abort", listener);
  };
}

/** Why a wait on `signal` ends: the signal's own reason, or the standard AbortError. */
export function abortReason(signal) {
  return signal?.reason ?? new DOMException("The operation was aborted.", "AbortError");
}
