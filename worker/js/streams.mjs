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
      try {
        done();
      } catch {
        // `done` belonged to a module instance that panicked since: its counts are gone too.
      }
    }
  };
  if (!response.body || signal?.aborted) {
    finish();
    return response;
  }
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
  let watched;
  try {
    watched = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  } catch (error) {
    // Nothing listens yet and `done` was not called: the caller still owns what it gives back.
    reader.cancel(error).catch(() => {});
    throw error;
  }
  signal?.addEventListener("abort", finish);
  return watched;
}

/** `promise`'s value, or `late` if it has not settled after `ms` milliseconds. */
export function within(promise, ms, late) {
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve(late), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** The give-backs of the fleet leases this isolate holds (see `releaseAllLeases`). */
const heldLeases = new Set();

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
  const release = () => {
    if (released) return;
    released = true;
    heldLeases.delete(release);
    clearInterval(renewal);
    const done = Promise.resolve(stub.releaseSlot(upstream, lease)).catch(() => {});
    ctx?.waitUntil?.(done);
  };
  heldLeases.add(release);
  return release;
}

/**
 * Hold a fleet egress `permit` of `provider` (from `stub.acquirePermit`): renew it every
 * third of `leaseMs` until the returned `release(failed)` is called, which gives it back
 * (`failed`: its mirror failed). The release outlives the response through `ctx.waitUntil`.
 */
export function keepPermit(stub, provider, permit, leaseMs, ctx) {
  const renewal = setInterval(() => {
    Promise.resolve(stub.renewPermit(provider, permit)).catch(() => {});
  }, Math.max(100, leaseMs / 3));
  let released = false;
  const release = (failed) => {
    if (released) return;
    released = true;
    heldLeases.delete(release);
    clearInterval(renewal);
    const done = Promise.resolve(stub.releasePermit(provider, permit, failed === true)).catch(() => {});
    ctx?.waitUntil?.(done);
  };
  heldLeases.add(release);
  return release;
}

/** Listeners of `panicked` (see `onPanic`). */
const panicListeners = new Set();

/** Call `listener()` whenever the module panics: its instance is about to be replaced. */
export function onPanic(listener) {
  panicListeners.add(listener);
}

/**
 * The module panicked (its instance traps next and is replaced at the next call): give back
 * every fleet lease this isolate holds, whose renewals would otherwise go on for ever, and
 * tell the listeners. Never throws: it runs inside the panic hook.
 */
export function panicked() {
  for (const release of [...heldLeases]) {
    try {
      release();
    } catch {}
  }
  for (const listener of panicListeners) {
    try {
      listener();
    } catch {}
  }
}

/**
 * `body` passed through while it brings no more than `length` bytes, and ended only once it
 * brought exactly that many; otherwise errored, which aborts an upload made of it (the
 * origin sees an unfinished upload, never a short or a long one). `{ body, cut }`: `cut()`
 * is "longer" or "shorter" once the body contradicted `length`, else "".
 */
export function exactLength(body, length) {
  let seen = 0;
  let cut = "";
  const stream = body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen <= length) return controller.enqueue(chunk);
        cut = "longer";
        controller.error(new Error(`the body is longer than its Content-Length of ${length} bytes`));
      },
      flush(controller) {
        if (seen === length) return;
        cut = "shorter";
        controller.error(new Error(`the body ended before its Content-Length of ${length} bytes`));
      },
    }),
  );
  return { body: stream, cut: () => cut };
}

/**
 * `body` passed through while `charge(chunk size)` (true or false, or a promise of either)
 * admits each chunk before it goes on; once it does not, errored. `{ body, signal }`: send
 * the body with `signal`, which aborts when `signal` given here does (the client went away)
 * and when the body is cut. The abort comes first: a request body that only errors is ended
 * as if it were whole (workerd sends the last chunk), so the origin would take a cut body for
 * a complete one, where an aborted upload is one it never finished receiving. What is charged
 * and which limit refused are `charge`'s to decide.
 */
export function charged(body, charge, signal) {
  const cut = new AbortController();
  if (signal?.aborted) cut.abort(signal.reason);
  else signal?.addEventListener?.("abort", () => cut.abort(signal.reason), { once: true });
  const stream = body.pipeThrough(
    new TransformStream({
      async transform(chunk, controller) {
        if (await charge(chunk.byteLength)) return controller.enqueue(chunk);
        const error = new Error("the body is over a limit on its bytes");
        cut.abort(error);
        controller.error(error);
      },
    }),
  );
  return { body: stream, signal: cut.signal };
}

/**
 * `request` with `body` in place of its own, and `signal` (when given) in place of its
 * signal: what the Worker's own handler reads, and forwards with.
 */
export function withBody(request, body, signal) {
  return new Request(request, { body, cf: request.cf, ...(signal ? { signal } : {}) });
}

/** The names of `headers`, each followed by a newline (no name or value can hold one). */
export function headerNames(headers) {
  let names = "";
  for (const name of headers.keys()) names += `${name}\n`;
  return names;
}

/**
 * A copy of `headers` without the names in `drop`, then with the pairs in `set` set (both
 * newline-separated: `name\n` and `name\nvalue\n`): what to leave out and what to set is
 * decided by the caller, in one call instead of one per header.
 */
export function rebuiltHeaders(headers, drop, set) {
  const dropped = new Set(drop.split("\n"));
  const out = new Headers();
  for (const [name, value] of headers) {
    if (!dropped.has(name)) out.append(name, value);
  }
  const pairs = set.split("\n");
  for (let i = 0; i + 1 < pairs.length; i += 2) out.set(pairs[i], pairs[i + 1]);
  return out;
}

/** The SHA-256 of `text` (UTF-8) in lower-case hex. */
export async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * `fetch(request)`, given up after `ms` milliseconds: then the call is aborted and the
 * promise resolves to `null`. When `signal` (the client's) aborts first, the call is aborted
 * with it and the promise rejects, as `fetch` does.
 */
export function fetchWithin(request, ms, signal) {
  const call = new AbortController();
  const follow = () => call.abort(signal.reason);
  if (signal?.aborted) follow();
  else signal?.addEventListener?.("abort", follow, { once: true });
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => {
      call.abort(new Error(`no answer within ${ms} ms`));
      resolve(null);
    }, ms);
  });
  return Promise.race([fetch(request, { signal: call.signal }), late]).finally(() => clearTimeout(timer));
}

/** A reader of `stream`. */
export function readerOf(stream) {
  return stream.getReader();
}

/** The next chunk `reader` gives (a `Uint8Array`), or `undefined` at the end. */
export async function nextChunk(reader) {
  const { done, value } = await reader.read();
  return done ? undefined : value;
}

/** Stop reading: `reader`'s stream is cancelled (its source told nobody reads on). */
export function cancelReader(reader) {
  reader.cancel().catch(() => {});
}

/**
 * A stream of `chunks` (read from `reader` already), then of the rest `reader` gives: an
 * answer passed on from where reading stopped. Cancelling it cancels `reader`.
 */
export function resumed(chunks, reader) {
  let i = 0;
  return new ReadableStream({
    async pull(controller) {
      if (i < chunks.length) {
        controller.enqueue(chunks[i]);
        chunks[i++] = undefined;
        return;
      }
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        controller.error(error);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/** `chunks` (`Uint8Array`s) as one `Uint8Array`. */
export function joined(chunks) {
  if (chunks.length === 1) return chunks[0];
  let length = 0;
  for (const chunk of chunks) length += chunk.byteLength;
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
