// sluicegate pacer demo: one weighted budget shared by page reloads and by every tab of the
// origin. The pacer keeps its ledger in IndexedDB (database "sluicegate-pacer", store
// "ledgers", one entry per key) and updates it in one read-write transaction per operation,
// which the browser serialises across tabs.
// Plain ES module, no dependencies; the package is the build's copy under /sluicegate/.
//
// Query string (to compress time in tests): ?window=<ms>&budget=<weight>&key=<ledger key>

const PACKAGE = "/sluicegate/js/browser.js";
// Where js/pacer.js keeps ledgers given as `persist: key`.
const LEDGER_DB = "sluicegate-pacer";
const LEDGER_STORE = "ledgers";
const REFRESH_MS = 200;
const MAX_LOG_LINES = 500;

const $ = (id) => document.getElementById(id);
const form = $("spend-form");
const weightInput = $("weight");
const countInput = $("count");
const spendButton = $("spend");
const clearButton = $("clear");
const errorLine = $("error");
const spentLine = $("spent");
const barFill = $("bar-fill");
const queuedEl = $("queued");
const queuedWeightEl = $("queued-weight");
const inFlightEl = $("in-flight");
const maxInFlightEl = $("max-in-flight");
const etaEl = $("eta");
const log = $("log");

function showError(message) {
  errorLine.textContent = message;
  errorLine.hidden = false;
}

/** A positive finite number from the query string, or the default; throws on anything else. */
function numberParam(params, name, fallback) {
  const raw = params.get(name);
  if (raw === null || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`?${name}= must be a positive number, got "${raw}"`);
  }
  return value;
}

const fmtNumber = (n) => (Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/\.?0+$/, ""));

function fmtDuration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/**
 * Delete the ledger `key` from the pacer's IndexedDB database, in one read-write transaction
 * (so it is never interleaved with a pacer's update in any tab). Opens the database at its
 * current version, so it never competes with the pacers' connections for an upgrade.
 */
function clearLedger(key) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open(LEDGER_DB);
    // The database did not exist yet: create it as the pacer would; nothing to delete then.
    open.onupgradeneeded = () => {
      if (!open.result.objectStoreNames.contains(LEDGER_STORE)) open.result.createObjectStore(LEDGER_STORE);
    };
    open.onblocked = () => reject(new Error("the ledger database is being upgraded in another tab; try again"));
    open.onerror = () => reject(open.error ?? new Error("the ledger database could not be opened"));
    open.onsuccess = () => {
      const db = open.result;
      db.onversionchange = () => db.close(); // never hold up another tab's upgrade
      if (!db.objectStoreNames.contains(LEDGER_STORE)) {
        db.close();
        resolve();
        return;
      }
      const tx = db.transaction(LEDGER_STORE, "readwrite");
      tx.objectStore(LEDGER_STORE).delete(key);
      tx.oncomplete = () => {
        db.close();
        resolve();
      };
      tx.onabort = tx.onerror = () => {
        db.close();
        reject(tx.error ?? new Error("the ledger could not be cleared"));
      };
    };
  });
}

/** Local wall-clock time with milliseconds: 14:03:05.123. */
function fmtTime(ms) {
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

function addLogLine(permit, askedAtMs) {
  const li = document.createElement("li");
  li.dataset.weight = String(permit.weight);
  li.dataset.at = String(permit.dispatchedAtMs);
  const time = document.createElement("time");
  time.dateTime = new Date(permit.dispatchedAtMs).toISOString();
  time.textContent = fmtTime(permit.dispatchedAtMs);
  const waited = permit.dispatchedAtMs - askedAtMs;
  li.append(time, ` · weight ${fmtNumber(permit.weight)}`, waited >= 1 ? ` · waited ${fmtDuration(waited)}` : " · at once");
  log.prepend(li);
  while (log.children.length > MAX_LOG_LINES) log.lastElementChild.remove();
}

async function main() {
  const params = new URLSearchParams(location.search);
  const lengthMs = numberParam(params, "window", 60_000);
  const budget = numberParam(params, "budget", 550);
  const key = params.get("key") || "sluicegate:pacer-demo";

  $("policy").textContent = `${fmtNumber(budget)} weight per ${fmtDuration(lengthMs)}`;
  $("key").textContent = key;

  let Pacer;
  try {
    const mod = await import(PACKAGE);
    await mod.default();
    Pacer = mod.Pacer;
  } catch (err) {
    throw new Error(`The sluicegate package failed to load from ${PACKAGE} (run scripts/build.sh): ${err?.message || err}`);
  }

  if (!globalThis.indexedDB) {
    throw new Error("IndexedDB is not available here (a private window, or storage turned off?): the pacer's " + "ledger needs it to be kept over reloads and shared by tabs.");
  }

  const pacer = new Pacer({
    windows: [{ lengthMs, budget }],
    maxWeight: null,
    maxInFlight: 4,
    persist: key,
  });
  // Every permit this tab's pacer grants gets a log line, also those asked for from the
  // console or by tests through window.sluicegatePacer.
  const acquire = pacer.acquire.bind(pacer);
  pacer.acquire = (weight, options) => {
    const askedAt = Date.now();
    return acquire(weight, options).then((permit) => {
      addLogLine(permit, askedAt);
      return permit;
    });
  };
  window.sluicegatePacer = pacer;

  // etaMs() and snapshot() read the pacer's last copy of the ledger, which only its own
  // updates refresh: read the shared ledger (one atomic transaction) before each render, so
  // the page shows what earlier page loads and other tabs spent too.
  async function refresh() {
    try {
      await pacer.ledger();
    } catch (err) {
      showError(`Could not read the shared ledger: ${err?.message || err}`);
    }
    render();
  }

  function render() {
    let snap;
    try {
      snap = pacer.snapshot();
    } catch (err) {
      showError(`Could not read the pacer's state: ${err?.message || err}`);
      return;
    }
    const w = snap.windows[0];
    spentLine.dataset.spent = String(w.spent);
    spentLine.dataset.budget = String(w.budget);
    spentLine.textContent = `${fmtNumber(w.spent)} / ${fmtNumber(w.budget)} spent in the last ${fmtDuration(w.lengthMs)}`;
    const ratio = w.budget > 0 ? Math.min(1, w.spent / w.budget) : 0;
    barFill.style.width = `${(ratio * 100).toFixed(1)}%`;
    barFill.classList.toggle("full", ratio >= 1);
    queuedEl.dataset.queued = String(snap.queued);
    queuedEl.textContent = String(snap.queued);
    queuedWeightEl.textContent = fmtNumber(snap.queuedWeight);
    inFlightEl.textContent = String(snap.inFlight);
    maxInFlightEl.textContent = String(snap.maxInFlight);
    if (snap.drainsAtMs !== null) {
      const drainsInMs = snap.drainsAtMs - Date.now();
      etaEl.textContent = drainsInMs > 0 ? `queue drains in ${fmtDuration(drainsInMs)}` : "queued calls are due now";
    } else {
      const weight = Number(weightInput.value);
      let eta = null;
      if (Number.isFinite(weight) && weight > 0) {
        try {
          eta = pacer.etaMs(weight);
        } catch {
          eta = null; // a weight that can never fit: the spend button says so
        }
      }
      etaEl.textContent = eta === null ? "—" : eta <= 0 ? `weight ${fmtNumber(weight)} would go at once` : `weight ${fmtNumber(weight)} would wait ${fmtDuration(eta)}`;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    const weight = Number(weightInput.value);
    const count = Math.trunc(Number(countInput.value));
    for (let i = 0; i < count; i += 1) {
      pacer.acquire(weight).then(
        (permit) => permit.release(), // the "call" answers at once: only the budget paces this demo
        (err) => showError(`Weight ${fmtNumber(weight)} refused: ${err?.message || err}`),
      );
    }
    render();
  });

  clearButton.addEventListener("click", async () => {
    clearButton.disabled = true;
    spendButton.disabled = true;
    try {
      await clearLedger(key);
    } catch (err) {
      showError(`Could not clear the ledger: ${err?.message || err}`);
      clearButton.disabled = false;
      spendButton.disabled = false;
      return;
    }
    location.reload();
  });

  await refresh();
  // One refresh at a time: the next starts REFRESH_MS after the previous one finished.
  const tick = () => setTimeout(() => refresh().finally(tick), REFRESH_MS);
  tick();
  spendButton.disabled = false;
  clearButton.disabled = false;
  document.documentElement.dataset.pacer = "ready";
}

main().catch((err) => {
  document.documentElement.dataset.pacer = "error";
  spentLine.textContent = "Not available.";
  showError(err?.message || String(err));
});
