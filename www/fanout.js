// Open-Meteo fan-out demo: fetchForecasts for up to 1,500 locations × 16 days against the
// development worker's Open-Meteo mock, paced under the visitor's quota, with a countdown,
// and a 15-minute cache shared by every run of the page.
// Plain ES module, no dependencies; the package is the build's copy under /sluicegate/.
//
// Query string: ?scale=compressed (default: a minute of 1 s, an hour of 60 s, a day of
// 24 min, so the demo finishes in seconds) or ?scale=real.

const PACKAGE = "/sluicegate/js/browser.js";
const MOCK = "/mock/open-meteo";
const BASE_URL = `${MOCK}/v1/forecast`;
const TICK_MS = 250;
const CACHE_TTL_MS = 15 * 60_000;
const MAX_LOCATIONS_PER_CALL = 100; // fetchForecasts' default, for the plan shown before a run

/** The mock's quota (the free tier's) and the pacer's budgets, 8 % under it. */
const LIMITS = { minute: 600, hour: 5_000, day: 10_000 };
const BUDGETS = [550, 4_800, 9_500];
const LOWERED_HOUR_LIMIT = 300;

const SCALES = {
  compressed: {
    minuteMs: 1_000,
    hourMs: 60_000,
    dayMs: 24 * 60_000,
    jitterMs: [20, 60],
    labels: ["Minute (1 s)", "Hour (60 s)", "Day (24 min)"],
  },
  real: {
    minuteMs: 60_000,
    hourMs: 3_600_000,
    dayMs: 86_400_000,
    jitterMs: [1_000, 3_000],
    labels: ["Minute", "Hour", "Day"],
  },
};

/** Real Open-Meteo daily variables (the mock accepts any identifier and makes up values). */
const VARIABLES = [
  "temperature_2m_max",
  "precipitation_sum",
  "temperature_2m_min",
  "weather_code",
  "apparent_temperature_max",
  "apparent_temperature_min",
  "precipitation_hours",
  "precipitation_probability_max",
  "rain_sum",
  "showers_sum",
  "snowfall_sum",
  "wind_speed_10m_max",
  "wind_gusts_10m_max",
  "wind_direction_10m_dominant",
  "shortwave_radiation_sum",
  "et0_fao_evapotranspiration",
  "uv_index_max",
  "uv_index_clear_sky_max",
  "sunshine_duration",
  "daylight_duration",
];

const $ = (id) => document.getElementById(id);
const el = {
  main: $("fanout"),
  error: $("error"),
  form: $("controls"),
  locations: $("locations"),
  days: $("days"),
  variables: $("variables"),
  scale: $("scale"),
  run: $("run"),
  abort: $("abort"),
  weight: $("weight"),
  plan: $("plan"),
  variableNames: $("variable-names"),
  state: $("state"),
  eta: $("eta"),
  progress: $("progress"),
  progressLabel: $("progress-label"),
  abortReason: $("abort-reason"),
  calls: $("calls"),
  fetches: $("fetches"),
  spent: $("spent"),
  cacheHits: $("cache-hits"),
  rateLimited: $("rate-limited"),
  perCall: $("per-call"),
  received: $("received"),
  lowerQuota: $("lower-quota"),
  resetMock: $("reset-mock"),
  mockStatus: $("mock-status"),
  windows: [0, 1, 2].map((i) => ({ meter: $(`window-${i}`), label: $(`window-${i}-label`), text: $(`window-${i}-text`) })),
};

const STATE_TEXT = { idle: "Idle", running: "Running", paused: "Paused", done: "Done", aborted: "Aborted" };

let sg = null; // the package, once loaded
let cache = null; // one LocationCache for every run of this page
let pacer = null; // one Pacer per time scale (a fresh one when the mock is reset)
let scaleName = "compressed";
let ready = false;
let mockBusy = false;
let run = null; // the run under way: { controller, startedAt, state, seen429, pausedSince }
let runCount = 0;
let retryAtMs = null; // when an abort's quota reopens, for its countdown

// ---------------------------------------------------------------------------------------
// Formatting

const integerFormat = new Intl.NumberFormat("en");
const weightFormat = new Intl.NumberFormat("en", { maximumFractionDigits: 1 });
const fmtInt = (n) => integerFormat.format(n);
const fmtWeight = (n) => weightFormat.format(n);

function fmtDuration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 120) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function fmtClock(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function showError(message) {
  el.error.textContent = message;
  el.error.hidden = !message;
}

// ---------------------------------------------------------------------------------------
// Inputs

/** The whole number in `input` if it is within its min/max, else null. */
function intValue(input) {
  const n = Number(input.value);
  if (input.value.trim() === "" || !Number.isInteger(n) || n < Number(input.min) || n > Number(input.max)) return null;
  return n;
}

function readInputs() {
  const locations = intValue(el.locations);
  const days = intValue(el.days);
  const variables = intValue(el.variables);
  if (locations === null || days === null || variables === null) return null;
  return { locations, days, variables };
}

/** `n` points on a grid over Europe, distinct after the cache's rounding to 2 decimals. */
function gridPoints(n) {
  const round = (x) => Math.round(x * 100) / 100;
  return Array.from({ length: n }, (_, i) => ({
    latitude: round(35 + (i % 50) * 0.7),
    longitude: round(-10 + Math.floor(i / 50) * 1.7),
  }));
}

function paramsFor({ days, variables }) {
  return { daily: VARIABLES.slice(0, variables), forecast_days: days };
}

/** The weight of the whole analysis and how fetchForecasts will pack it, before running. */
function renderPlan() {
  const input = readInputs();
  if (!sg || !input) {
    el.weight.textContent = "—";
    el.weight.dataset.weight = "";
    el.plan.textContent = sg && !input ? "(enter whole numbers within the limits)" : "";
    return;
  }
  const { locations, days, variables } = input;
  const weightOf = (n) => sg.openMeteoWeight({ locations: n, days, variables });
  const total = weightOf(locations);
  el.weight.textContent = fmtWeight(total);
  el.weight.dataset.weight = String(total);
  try {
    const perCall = sg.chooseLocationsPerCall({ weightOf, budget: BUDGETS[0], max: MAX_LOCATIONS_PER_CALL });
    const calls = Math.ceil(locations / perCall);
    const perWindow = Math.floor(BUDGETS[0] / weightOf(perCall));
    el.plan.textContent =
      `for ${fmtInt(locations)} locations × ${days} days × ${variables} variables: ` +
      `${fmtInt(calls)} calls of up to ${perCall} locations, ${perWindow} per minute window ` +
      `(less whatever the cache already holds).`;
  } catch (err) {
    el.plan.textContent = `(${err.message})`;
  }
  el.variableNames.textContent = `Variables: ${VARIABLES.slice(0, variables).join(", ")}.`;
}

// ---------------------------------------------------------------------------------------
// The mock

async function mockPost(path, body) {
  const res = await fetch(`${MOCK}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${MOCK}${path} answered ${res.status}: ${text}`);
  return text;
}

function mockConfig(scale, hourLimit = LIMITS.hour) {
  return {
    minute: { window_ms: scale.minuteMs, limit: LIMITS.minute },
    hour: { window_ms: scale.hourMs, limit: hourLimit },
    day: { window_ms: scale.dayMs, limit: LIMITS.day },
    delay_ms: 5,
    max_concurrent: 5,
  };
}

function newPacer(scale) {
  return new sg.Pacer({
    windows: [
      { lengthMs: scale.minuteMs, budget: BUDGETS[0] },
      { lengthMs: scale.hourMs, budget: BUDGETS[1] },
      { lengthMs: scale.dayMs, budget: BUDGETS[2] },
    ],
  });
}

/** Run one mock operation at a time, with the buttons that start them disabled meanwhile. */
async function mockAction(fn) {
  if (mockBusy) return;
  mockBusy = true;
  el.mockStatus.dataset.state = "busy";
  updateButtons();
  try {
    await fn();
    el.mockStatus.dataset.state = "ready";
  } catch (err) {
    el.mockStatus.dataset.state = "error";
    el.mockStatus.textContent = `The mock could not be configured: ${err.message}`;
    showError(`The mock could not be configured: ${err.message}`);
  } finally {
    mockBusy = false;
    updateButtons();
  }
}

/** Configure the mock for the scale, reset its counters, and start a fresh pacer ledger. */
async function applyScale(name, { because }) {
  const scale = SCALES[name];
  await mockPost("/config", mockConfig(scale));
  await mockPost("/reset");
  scaleName = name;
  pacer = newPacer(scale);
  el.windows.forEach((w, i) => {
    w.label.textContent = scale.labels[i];
  });
  el.mockStatus.dataset.hourLimit = String(LIMITS.hour);
  el.mockStatus.textContent =
    `${because} The mock allows ${fmtInt(LIMITS.minute)} weight a minute, ${fmtInt(LIMITS.hour)} an hour and ` +
    `${fmtInt(LIMITS.day)} a day (${name === "real" ? "real windows" : "a minute of 1 s"}); ` +
    `its counters and the pacer's ledger start from zero.`;
  renderWindows();
}

async function lowerQuota() {
  const scale = SCALES[scaleName];
  await mockPost("/config", { hour: { window_ms: scale.hourMs, limit: LOWERED_HOUR_LIMIT } });
  await mockPost("/reset");
  el.mockStatus.dataset.hourLimit = String(LOWERED_HOUR_LIMIT);
  el.mockStatus.textContent =
    `The mock now allows only ${LOWERED_HOUR_LIMIT} weight an hour (counters reset), less than the pacer's ` +
    `${fmtInt(BUDGETS[1])}: a run that needs more than that gets an hourly 429 and stops. ` +
    `To see it, run something not in the cache yet (e.g. another number of days).`;
}

async function describeMock() {
  try {
    const state = await (await fetch(`${MOCK}/state`)).json();
    const client = Object.values(state.clients ?? {})[0];
    const hour = client ? `; this client has used ${fmtWeight(client.hour.used)} of ${fmtInt(client.hour.limit)} this hour` : "";
    const calls = `${fmtInt(state.calls)} call${state.calls === 1 ? "" : "s"}`;
    return `The mock has answered ${calls} since its reset, ${fmtInt(state.rejected_429)} of them with a 429${hour}.`;
  } catch {
    return "";
  }
}

// ---------------------------------------------------------------------------------------
// Display

function setState(state) {
  el.state.dataset.state = state;
  el.state.textContent = STATE_TEXT[state] ?? state;
}

function renderWindows(windows = pacer?.snapshot().windows) {
  if (!windows) return;
  windows.forEach((w, i) => {
    const view = el.windows[i];
    if (!view) return;
    const spent = Math.min(w.spent, w.budget);
    view.meter.max = w.budget;
    view.meter.low = w.budget * 0.8;
    view.meter.high = w.budget * 0.98;
    view.meter.value = spent;
    view.meter.dataset.spent = String(w.spent);
    view.meter.dataset.budget = String(w.budget);
    view.text.textContent = `${fmtWeight(w.spent)} / ${fmtInt(w.budget)}`;
  });
}

function setEta(ms, text) {
  el.eta.dataset.etaMs = String(Math.max(0, Math.round(ms)));
  el.eta.textContent = text;
}

function setProgress(done, total, finished) {
  const max = Math.max(1, total);
  el.progress.max = max;
  el.progress.value = total === 0 && finished ? max : Math.min(done, max);
  el.progress.textContent = `${Math.round((100 * el.progress.value) / max)} %`;
  el.progress.dataset.total = String(total);
  // runBatch reports nothing before its first call goes out: until then the pacer is waiting.
  el.progressLabel.textContent = total === 0 && !finished ? "waiting for the first call's turn" : `${fmtInt(done)} of ${fmtInt(total)} calls`;
}

function setTotals({ calls, fetches, weightSpent, cacheHits, locationsPerCall, received }) {
  if (calls !== undefined) el.calls.textContent = fmtInt(calls);
  if (fetches !== undefined) el.fetches.textContent = fmtInt(fetches);
  if (weightSpent !== undefined) {
    el.spent.textContent = fmtWeight(weightSpent);
    el.spent.dataset.spent = String(weightSpent);
  }
  if (cacheHits !== undefined) {
    el.cacheHits.textContent = fmtInt(cacheHits);
    el.cacheHits.dataset.hits = String(cacheHits);
  }
  if (locationsPerCall !== undefined) el.perCall.textContent = locationsPerCall === null ? "—" : fmtInt(locationsPerCall);
  if (received !== undefined) {
    el.received.textContent = fmtInt(received);
    el.received.dataset.received = String(received);
  }
}

function setRateLimited(count) {
  el.rateLimited.textContent = fmtInt(count);
  el.rateLimited.dataset.count = String(count);
  el.rateLimited.classList.toggle("bad", count > 0);
}

/** The countdown while a run waits for budget. */
function renderEta() {
  if (!run || !pacer) return;
  const now = Date.now();
  const snap = pacer.snapshot();
  const pacerMs = snap.drainsAtMs === null ? 0 : Math.max(0, snap.drainsAtMs - now);
  if (run.state === "paused") {
    // After a minutely 429 the batch sleeps until the upstream's next minute (plus jitter).
    const minuteMs = SCALES[scaleName].minuteMs;
    const boundary = Math.ceil(run.pausedSince / minuteMs) * minuteMs;
    const ms = Math.max(pacerMs, boundary - now);
    setEta(ms, `paused by a minutely 429: resuming in about ${fmtDuration(ms)}`);
  } else if (pacerMs > 0) {
    setEta(pacerMs, `about ${fmtDuration(pacerMs)} left`);
  } else {
    setEta(0, "last calls in flight…");
  }
}

function renderAbort() {
  if (retryAtMs === null || el.abortReason.hidden) return;
  const left = retryAtMs - Date.now();
  const when = el.abortReason.querySelector(".retry-when");
  if (!when) return;
  when.textContent =
    left > 0 ? `The upstream takes calls again at ${fmtClock(retryAtMs)}, in about ${fmtDuration(left)}.` : "The upstream takes calls again now: run again to fetch the rest.";
}

function showAbort(abort) {
  if (!abort) {
    el.abortReason.hidden = true;
    el.abortReason.replaceChildren();
    delete el.abortReason.dataset.kind;
    delete el.abortReason.dataset.retryAtMs;
    retryAtMs = null;
    return;
  }
  const byCaller = abort.kind === null && abort.status === null && abort.retryAtMs === null && /caller/.test(abort.reason);
  const head = document.createElement("strong");
  head.textContent = byCaller ? "Aborted by you. " : `Stopped: ${abort.reason}${abort.status ? ` (HTTP ${abort.status})` : ""}. `;
  const detail = document.createElement("span");
  detail.textContent = byCaller
    ? "Nothing more was sent. "
    : abort.kind
      ? `The upstream refused a call because its ${abort.kind} quota is used up; every queued and in-flight call was cancelled. `
      : "Every queued and in-flight call was cancelled. ";
  const when = document.createElement("span");
  when.className = "retry-when";
  retryAtMs = abort.retryAtMs ?? null;
  if (retryAtMs === null && !byCaller) when.textContent = "Retry later.";
  const cached = document.createElement("span");
  cached.textContent = `${byCaller ? "" : " "}What was fetched stays cached for 15 minutes, so running again spends only on the rest.`;
  el.abortReason.replaceChildren(head, detail, when, cached);
  el.abortReason.dataset.kind = abort.kind ?? "";
  el.abortReason.dataset.retryAtMs = retryAtMs === null ? "" : String(Math.round(retryAtMs));
  el.abortReason.hidden = false;
  renderAbort();
}

function updateButtons() {
  const running = run !== null;
  el.run.disabled = !ready || running || mockBusy;
  el.abort.disabled = !running;
  el.scale.disabled = !ready || running || mockBusy;
  el.lowerQuota.disabled = !ready || mockBusy;
  el.resetMock.disabled = !ready || running || mockBusy;
  for (const input of [el.locations, el.days, el.variables]) input.disabled = running;
  el.main.dataset.ready = String(ready && !mockBusy);
}

// ---------------------------------------------------------------------------------------
// A run

async function startRun() {
  if (!ready || run || mockBusy) return;
  const input = readInputs();
  if (!input) {
    for (const field of [el.locations, el.days, el.variables]) {
      if (intValue(field) === null) {
        showError(`${field.labels[0].textContent} must be a whole number from ${field.min} to ${field.max}.`);
        field.focus();
        return;
      }
    }
    return;
  }
  showError("");
  showAbort(null);
  const scale = SCALES[scaleName];
  const points = gridPoints(input.locations);
  const params = paramsFor(input);
  const current = { controller: new AbortController(), startedAt: Date.now(), state: "running", seen429: 0, pausedSince: 0 };
  run = current;
  runCount++;
  el.state.dataset.run = String(runCount);
  setState("running");
  setProgress(0, 0, false);
  setTotals({ calls: 0, fetches: 0, weightSpent: 0, cacheHits: 0, locationsPerCall: null });
  el.received.textContent = "…"; // known when the run ends
  el.received.dataset.received = "";
  setRateLimited(0);
  renderEta();
  updateButtons();

  // Counts every 429 the page receives, as it arrives (the batch's own count comes at the end).
  const countingFetch = async (url, init) => {
    const response = await fetch(url, init);
    if (response.status === 429) setRateLimited(++current.seen429);
    return response;
  };

  let outcome = null;
  try {
    outcome = await sg.fetchForecasts(points, params, {
      baseUrl: BASE_URL,
      pacer,
      cache,
      upstreamWindows: { minuteMs: scale.minuteMs, hourMs: scale.hourMs, dayMs: scale.dayMs },
      jitterMs: scale.jitterMs,
      signal: current.controller.signal,
      fetch: countingFetch,
      onProgress: (p) => {
        if (run !== current) return;
        if ((p.state === "running" || p.state === "paused") && p.state !== current.state) {
          if (p.state === "paused") current.pausedSince = Date.now();
          current.state = p.state;
          setState(p.state);
        }
        setProgress(p.done, p.total, false);
        setTotals({ calls: p.total, fetches: p.fetches, weightSpent: p.weightSpent, cacheHits: p.cacheHits });
        renderWindows(p.windows);
        renderEta();
      },
    });
  } catch (err) {
    showError(`The run failed: ${err?.message ?? err}`);
  }
  run = null;
  const elapsed = Date.now() - current.startedAt;
  if (outcome) {
    const { state, abort, results, stats } = outcome;
    setState(state);
    setProgress(stats.done, stats.calls, true);
    setTotals({
      calls: stats.calls,
      fetches: stats.fetches,
      weightSpent: stats.weightSpent,
      cacheHits: stats.cacheHits,
      locationsPerCall: stats.calls > 0 ? stats.locationsPerCall : null,
      received: results.filter((r) => r !== undefined).length,
    });
    setRateLimited(Math.max(current.seen429, stats.rateLimited));
    setEta(0, state === "done" ? `finished in ${fmtDuration(elapsed)}` : `stopped after ${fmtDuration(elapsed)}`);
    showAbort(abort);
  } else {
    setState("aborted");
    setEta(0, `stopped after ${fmtDuration(elapsed)}`);
  }
  renderWindows();
  updateButtons();
  const mock = await describeMock();
  if (mock && !mockBusy) el.mockStatus.textContent = mock;
}

// ---------------------------------------------------------------------------------------
// Wiring

el.form.addEventListener("submit", (event) => {
  event.preventDefault();
  startRun();
});

el.abort.addEventListener("click", () => run?.controller.abort());

for (const input of [el.locations, el.days, el.variables]) input.addEventListener("input", renderPlan);

el.scale.addEventListener("change", () => {
  const name = el.scale.value in SCALES ? el.scale.value : "compressed";
  const url = new URL(location.href);
  url.searchParams.set("scale", name);
  history.replaceState(null, "", url);
  mockAction(() => applyScale(name, { because: `Time scale: ${name}.` })).then(() => {
    el.scale.value = scaleName; // unchanged if the mock could not be configured
  });
});

el.lowerQuota.addEventListener("click", () => mockAction(lowerQuota));

el.resetMock.addEventListener("click", () =>
  mockAction(async () => {
    await applyScale(scaleName, { because: "Mock reset." });
    showAbort(null);
  }),
);

setInterval(() => {
  if (!sg) return;
  if (run) renderEta();
  renderWindows();
  renderAbort();
}, TICK_MS);

async function main() {
  const requested = new URLSearchParams(location.search).get("scale");
  scaleName = requested in SCALES ? requested : "compressed";
  el.scale.value = scaleName;
  try {
    const mod = await import(PACKAGE);
    await mod.default();
    sg = mod;
  } catch (err) {
    showError(`The sluicegate package failed to load from ${PACKAGE} (run scripts/build.sh): ${err?.message ?? err}`);
    el.mockStatus.textContent = "";
    return;
  }
  cache = new sg.LocationCache({ ttlMs: CACHE_TTL_MS });
  renderPlan();
  await mockAction(() => applyScale(scaleName, { because: "Ready." }));
  ready = el.mockStatus.dataset.state === "ready";
  updateButtons();
}

main();
