// What the Rust module needs from JavaScript that has no binding worth writing by hand:
// a response body that reports when it is done, and a promise with a deadline.

/**
 * `response` with a body that calls `done()` once: when the body has been read to its end,
 * when reading it fails, when the stream is cancelled, or when `signal` (the incoming
 * request's, aborted when the client goes away) aborts. A response without a body (a 204,
 * a WebSocket 101) calls it at once.
 */
export function whenBodyDone(response, done, signal) {
  let called = false;
  const finish = () => {
    if (!called) {
      called = true;
      signal?.removeEventListener("abort", finish);
      done();
    }
  };
  if (!response.body || signal?.aborted) {
    finish();
    return response;
  }
  signal?.addEventListener("abort", finish);
  const reader = response.body.getReader();
  const body = new ReadableStream({
    async pull(controller) {
      try {
        const { value, done: end } = await reader.read();
        if (end) {
          finish();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        finish();
        controller.error(error);
      }
    },
    cancel(reason) {
      finish();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** `promise`'s value, or `late` if it has not settled after `ms` milliseconds. */
export function within(promise, ms, late) {
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve(late), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Hold a fleet budget's `lease` (from `stub.acquireSlot(upstream)`): renew it every third
 * of `leaseMs` until the returned function is called, which gives the slot back. The
 * release outlives the response through `ctx.waitUntil`.
 */
export function keepLease(stub, upstream, lease, leaseMs, ctx) {
  const renewal = setInterval(() => {
    Promise.resolve(stub.renewSlot(upstream, lease)).catch(() => {});
  }, Math.max(100, leaseMs / 3));
  let released = false;
  return () => {
    if (released) return;
    released = true;
    clearInterval(renewal);
    const done = Promise.resolve(stub.releaseSlot(upstream, lease)).catch(() => {});
    ctx?.waitUntil?.(done);
  };
}

/**
 * An upload of `body` that is cut once `charge(chunk size)` returns false: `{ body, signal }`
 * for the upstream request, whose `signal` aborts it then (so the origin sees an
 * unfinished upload, not a short one), or when `clientSignal` aborts.
 */
export function metered(body, charge, clientSignal) {
  const cut = new AbortController();
  const stream = body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        if (charge(chunk.byteLength)) return controller.enqueue(chunk);
        const error = new Error("the source is over its body bytes per second");
        cut.abort(error);
        controller.error(error);
      },
    }),
  );
  const signal = clientSignal ? AbortSignal.any([clientSignal, cut.signal]) : cut.signal;
  return { body: stream, signal };
}

/**
 * `request` with its body passed through while `charge(chunk size)` is true, then cut (its
 * reader sees an error): for a handler in the same Worker, which reads the body itself.
 */
export function meteredRequest(request, charge) {
  return new Request(request, { body: metered(request.body, charge, null).body, cf: request.cf });
}

/** The SHA-256 of `text` (UTF-8) in lower-case hex. */
export async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
