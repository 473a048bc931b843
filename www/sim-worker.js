// The policy simulator playground's simulator thread (a module Web Worker started by
// www/sim.js): loads sluicegate/sim (the build's copy under /sluicegate/) and runs the
// simulations the page posts, so that a long run never blocks the page and can be stopped
// by terminating this worker.
//
// In:  { id, kind: "run", config, trace, traceName, maxRequests }
//      { id, kind: "compare", before, after, trace, traceName, maxRequests }
// Out: { kind: "ready" } once the package is loaded, or { kind: "load-error", error };
//      then per message { id, ok: true, result, ms } (result: runSimulation's or
//      compareSimulations', each run's markdownError as a plain { name, message, exitCode })
//      or { id, ok: false, error }.
// Errors cross as { name, message, exitCode } (exitCode null: not the simulator's refusal).

const PACKAGE = "/sluicegate/js/sim-browser.js";

/** An error as plain data: the page rebuilds a SimulationError from it. */
function serialise(err) {
  if (err === null || err === undefined) return null;
  return {
    name: typeof err?.name === "string" ? err.name : "Error",
    message: typeof err?.message === "string" ? err.message : String(err),
    exitCode: err?.exitCode === 1 || err?.exitCode === 2 ? err.exitCode : null,
  };
}

const loaded = (async () => {
  const mod = await import(PACKAGE);
  await mod.default();
  return mod;
})();

loaded.then(
  () => postMessage({ kind: "ready" }),
  (err) => postMessage({ kind: "load-error", error: serialise(err) }),
);

/** runSimulation's result, fit for postMessage. */
function plainRun(out) {
  return { ...out, markdownError: serialise(out.markdownError) };
}

const handlers = {
  run(sim, { config, trace, traceName, maxRequests }) {
    const options = { traceName };
    if (maxRequests !== undefined && maxRequests !== null) options.maxRequests = maxRequests;
    return plainRun(sim.runSimulation(config, trace ?? undefined, options));
  },
  compare(sim, { before, after, trace, traceName, maxRequests }) {
    const options = { traceName };
    if (maxRequests !== undefined && maxRequests !== null) options.maxRequests = maxRequests;
    const out = sim.compareSimulations(before, after, trace ?? undefined, options);
    return { ...out, before: plainRun(out.before), after: plainRun(out.after) };
  },
};

self.addEventListener("message", async ({ data }) => {
  const { id, kind } = data ?? {};
  let sim;
  try {
    sim = await loaded;
  } catch (err) {
    postMessage({ id, ok: false, error: serialise(err) });
    return;
  }
  const handler = Object.hasOwn(handlers, kind) ? handlers[kind] : null;
  if (handler === null) {
    postMessage({ id, ok: false, error: { name: "TypeError", message: `unknown request kind ${JSON.stringify(kind)}`, exitCode: null } });
    return;
  }
  const started = performance.now();
  let result;
  try {
    result = handler(sim, data);
  } catch (err) {
    postMessage({ id, ok: false, error: serialise(err) });
    return;
  }
  const ms = performance.now() - started;
  try {
    postMessage({ id, ok: true, result, ms });
  } catch (err) {
    postMessage({ id, ok: false, error: serialise(err) });
  }
});
