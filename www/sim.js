// Policy simulator playground: runSimulation from sluicegate/sim (the simulator in wasm, the
// results of `sluicegate sim` exactly) on a configuration edited here, optionally with a
// recorded CSV trace; the verdict, the tables, the findings, the sample 429, the Markdown
// report and a per-second chart of admitted and refused attempts per client.
// Compare mode: compareSimulations on a before (current) and an after (proposed)
// configuration, as `sluicegate sim BEFORE --compare AFTER`: the verdict, both charts on one
// time axis, the per-client change, the findings resolved and new, and the filled review.
// Plain ES module, no dependencies; the package is the build's copy under /sluicegate/.
//
// The simulations run in a module Web Worker (www/sim-worker.js), so the page stays
// responsive during a long run; Cancel terminates that worker and starts a fresh one.
//
// A configuration whose `edge_rules` is a path (the command line reads it relative to the
// configuration file) gets the file fetched from this server in its place: relative to the
// example's URL, or to /examples/ for a configuration of your own.

const PACKAGE = "/sluicegate/js/sim-browser.js";
const WORKER = "/sim-worker.js";
const EXAMPLES = ["orders-api", "orders-api-tuned", "edge-api"];
const exampleUrl = (name) => `/examples/${name}.json`;
const SVG = "http://www.w3.org/2000/svg";
/** Client colours (colour-blind friendly), cycled. */
const PALETTE = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#ee8866"];
const SEVERITIES = ["high", "medium", "low", "info"];
const MAX_BARS = 720; // more seconds than this are shown in bins of several seconds

const $ = (id) => document.getElementById(id);
const el = {
  root: $("sim"),
  error: $("error"),
  form: $("controls"),
  example: $("example"),
  run: $("run"),
  compare: $("compare"),
  cancel: $("cancel"),
  modes: document.querySelectorAll("input[name=mode]"),
  afterExample: $("after-example"),
  examplePair: $("example-pair"),
  configLabel: $("config-label"),
  exampleLabel: $("example-label"),
  after: $("after"),
  status: $("status"),
  config: $("config"),
  traceBox: $("trace-box"),
  traceFile: $("trace-file"),
  clearTrace: $("clear-trace"),
  trace: $("trace"),
  result: $("result"),
  verdict: $("verdict"),
  summary: $("run-summary"),
  chart: $("chart"),
  chartNote: $("chart-note"),
  legend: $("legend"),
  clients: document.querySelector("#clients tbody"),
  policies: document.querySelector("#policies tbody"),
  pacingSection: $("pacing-section"),
  pacing: document.querySelector("#pacing tbody"),
  blocksSection: $("blocks-section"),
  blocks: document.querySelector("#blocks tbody"),
  findings: $("findings"),
  sampleHeading: $("sample-heading"),
  sample: $("sample"),
  markdown: $("markdown"),
  compareResult: $("compare-result"),
  compareVerdictLine: $("compare-verdict-line"),
  compareVerdict: $("compare-verdict"),
  compareVerdictNote: $("compare-verdict-note"),
  compareTraffic: $("compare-traffic"),
  comparePeak: $("compare-peak"),
  compareChartNote: $("compare-chart-note"),
  compareChartBefore: $("compare-chart-before"),
  compareChartAfter: $("compare-chart-after"),
  compareLegend: $("compare-legend"),
  compareClients: document.querySelector("#compare-clients tbody"),
  compareResolved: $("compare-resolved"),
  compareNew: $("compare-new"),
  compareFindings: $("compare-findings"),
  downloadReview: $("download-review"),
  review: $("review"),
};

const examples = new Map(); // name → configuration text
let sim = null; // the sluicegate/sim module, once loaded
let traceName = "trace";
let runs = 0;
/** The run or comparison in progress ({ run, mode, cancelled }), or null. */
let current = null;
/** Which result sections hold a result (shown in their mode). */
const shown = { run: false, compare: false };
let reviewUrl = null; // the review's Blob URL, revoked when replaced

const integer = new Intl.NumberFormat("en");
const fmt = (n) => (typeof n === "number" ? integer.format(n) : String(n));

function showError(message) {
  el.error.textContent = message;
  el.error.hidden = false;
}

function clearError() {
  el.error.hidden = true;
  el.error.textContent = "";
}

function make(tag, { className, text, attrs } = {}) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [k, v] of Object.entries(attrs ?? {})) node.setAttribute(k, v);
  return node;
}

function svg(tag, attrs = {}, text = undefined) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A JSON value as the report's tables show it (`kind`, `service` are echoed as configured). */
function show(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

function setState(state) {
  el.root.dataset.state = state;
}

// ---------------------------------------------------------------- examples and inputs

/** Put example `name` in `textarea` and name it in `select` (an unknown name changes nothing). */
function pick(select, textarea, name) {
  const text = examples.get(name);
  if (text === undefined) return;
  textarea.value = text;
  select.value = name;
}

/** `select` picks an example for `textarea`; an edit to the text makes it "custom". */
function pairExamples(select, textarea) {
  select.addEventListener("change", () => {
    if (select.value !== "custom") pick(select, textarea, select.value);
    clearError();
  });
  textarea.addEventListener("input", () => {
    const name = select.value;
    if (name !== "custom" && examples.get(name) !== textarea.value) select.value = "custom";
  });
}

function pickExample(name) {
  pick(el.example, el.config, name);
}

pairExamples(el.example, el.config);

// Compare mode: the configuration above is "before", a second one "after".

function mode() {
  return el.form.dataset.mode;
}

/** Show `m`'s controls and result ("run" or "compare"). */
function setMode(m) {
  el.form.dataset.mode = m;
  el.root.dataset.mode = m;
  for (const radio of el.modes) radio.checked = radio.value === m;
  for (const node of el.form.querySelectorAll(".compare-only")) node.hidden = m !== "compare";
  for (const node of el.form.querySelectorAll(".run-only")) node.hidden = m !== "run";
  el.configLabel.textContent = m === "compare" ? "Before (current)" : "Configuration (JSON)";
  el.exampleLabel.textContent = m === "compare" ? "Before" : "Example";
  showResults();
  if (m === "compare" && el.after.value.trim() === "") pickAfter(el.afterExample.value);
}

function showResults() {
  el.result.hidden = !(mode() === "run" && shown.run);
  el.compareResult.hidden = !(mode() === "compare" && shown.compare);
}

for (const radio of el.modes) radio.addEventListener("change", () => radio.checked && setMode(radio.value));

function pickAfter(name) {
  pick(el.afterExample, el.after, name);
}

pairExamples(el.afterExample, el.after);

el.examplePair.addEventListener("click", () => {
  pickExample("orders-api");
  pickAfter("orders-api-tuned");
  clearError();
});

el.traceFile.addEventListener("change", async () => {
  const file = el.traceFile.files?.[0];
  if (!file) return;
  try {
    el.trace.value = await file.text();
    traceName = file.name;
    el.traceBox.open = true;
  } catch (err) {
    showError(`Cannot read ${file.name}: ${err?.message ?? err}`);
  }
});

el.trace.addEventListener("input", () => {
  traceName = "trace";
});

el.clearTrace.addEventListener("click", () => {
  el.trace.value = "";
  el.traceFile.value = "";
  traceName = "trace";
});

// ---------------------------------------------------------------- edge_rules paths

/**
 * The configuration's text with a string `edge_rules` (a path, resolved against `base`)
 * replaced by the fetched file's JSON text; everything else as typed, so numbers keep
 * their spelling (`20` and `20.0` are different to the simulator). Returns the text and the
 * path substituted (null: none). A file that cannot be fetched or is not JSON is a
 * SimulationError naming the path (exit status 2, as the command line's).
 */
async function withEdgeRules(text, base) {
  const rules = sim.edgeRulesPath(text);
  if (rules === null) return { text, rules: null };
  let url;
  try {
    url = new URL(rules, base);
  } catch {
    throw new sim.SimulationError(`edge_rules: ${rules}: not a path or URL`, 2);
  }
  const shown = url.origin === location.origin ? url.pathname : url.href;
  let rulesText;
  try {
    const res = await fetch(url, { cache: "no-cache" });
    if (!res.ok) throw new Error(`HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`);
    rulesText = await res.text();
  } catch (err) {
    throw new sim.SimulationError(`edge_rules: ${rules}: cannot fetch ${shown}: ${err?.message ?? err}`, 2);
  }
  return { text: sim.inlineEdgeRules(text, rulesText, `${rules} (${shown})`), rules };
}

/** What a configuration's relative paths are resolved against: its example's URL, or /examples/. */
function configBase(name = el.example.value) {
  return new URL(examples.has(name) ? exampleUrl(name) : "/examples/", location.href);
}

/** withEdgeRules for one side of a comparison: its errors name the side, as the simulator's do. */
async function sideWithEdgeRules(side, text, base) {
  try {
    return await withEdgeRules(text, base);
  } catch (err) {
    if (err instanceof sim.SimulationError) throw new sim.SimulationError(`the ${side} config: ${err.message}`, err.exitCode);
    throw err;
  }
}

// ---------------------------------------------------------------- the simulator worker

/** The worker's error as the page's: the simulator's refusal becomes a SimulationError again. */
function fromWorker(error) {
  if (error?.name === "SimulationError" && (error.exitCode === 1 || error.exitCode === 2)) {
    return new sim.SimulationError(error.message, error.exitCode);
  }
  const err = new Error(error?.message ?? "the simulator worker failed");
  if (error?.name) err.name = error.name;
  return err;
}

/** A simulator worker that did not load (its script, or the package in it). */
class WorkerLoadError extends Error {
  constructor(message) {
    super(message);
    this.name = "WorkerLoadError";
  }
}

/**
 * A fresh simulator worker: `{ ready, request(kind, payload), stop() }`. `ready`
 * settles once the package is loaded in it; `request` posts one message and resolves with
 * the worker's answer ({ result, ms }) or rejects with its error.
 */
function startWorker() {
  const pending = new Map(); // id → { resolve, reject }
  let failed = null;
  let requests = 0;
  let readyResolve;
  let readyReject;
  const ready = new Promise((resolve, reject) => {
    readyResolve = resolve;
    readyReject = reject;
  });
  ready.catch(() => {}); // reported where it is awaited
  const fail = (err) => {
    if (failed) return;
    failed = err;
    readyReject(err);
    for (const { reject } of pending.values()) reject(err);
    pending.clear();
  };
  let worker = null;
  try {
    worker = new Worker(WORKER, { type: "module" });
  } catch (err) {
    fail(new WorkerLoadError(err?.message ?? String(err)));
    return { ready, request: () => Promise.reject(failed), stop() {} };
  }
  worker.addEventListener("message", ({ data }) => {
    if (data?.kind === "ready") return readyResolve();
    if (data?.kind === "load-error") return fail(new WorkerLoadError(data.error?.message ?? "the package did not load"));
    const waiting = pending.get(data?.id);
    if (!waiting) return;
    pending.delete(data.id);
    if (data.ok) waiting.resolve(data);
    else waiting.reject(fromWorker(data.error));
  });
  worker.addEventListener("error", (event) => {
    event.preventDefault();
    fail(new WorkerLoadError(event.message || `${WORKER} did not load or stopped`));
  });
  worker.addEventListener("messageerror", () => fail(new Error("the simulator worker's answer could not be read")));
  return {
    ready,
    request(kind, payload) {
      if (failed) return Promise.reject(failed);
      const id = ++requests;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker.postMessage({ id, kind, ...payload });
      });
    },
    stop() {
      worker.terminate();
      fail(new Error("stopped"));
    },
  };
}

let engine = null; // the current simulator worker

// ---------------------------------------------------------------- running

/** Begin a run or a comparison: a new run number, the form busy, Cancel enabled. Returns the job. */
function beginJob() {
  clearError();
  const job = { run: ++runs, mode: mode(), cancelled: false };
  current = job;
  el.root.dataset.run = String(job.run);
  setState("running");
  el.run.disabled = true;
  el.compare.disabled = true;
  el.cancel.disabled = false;
  el.status.textContent = job.mode === "compare" ? "Comparing…" : "Running…";
  return job;
}

function endJob(job) {
  if (current !== job) return;
  current = null;
  el.run.disabled = false;
  el.compare.disabled = false;
  el.cancel.disabled = true;
}

/** The error box for a failed run or comparison (a SimulationError shows its exit status). */
function showRunError(err, jobMode) {
  const known = err instanceof sim.SimulationError;
  const what = !known ? "The simulation failed" : err.exitCode === 2 ? "Bad input" : "The reference simulator fails on this input";
  showError(`${what}${known ? ` (exit status ${err.exitCode})` : ""}: ${err?.message ?? err}`);
  el.error.dataset.exitCode = known ? String(err.exitCode) : "";
  el.status.textContent = "";
  shown[jobMode] = false; // no stale result beside the error
  showResults();
  setState("error");
}

/** A worker that failed outside the simulator (not its refusal) is replaced for the next run. */
function replaceWorkerAfter(err) {
  if (err instanceof sim.SimulationError) return;
  engine.stop();
  engine = startWorker();
}

const millis = (ms) => `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;

el.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!sim || current) return;
  const job = beginJob();
  try {
    if (job.mode === "compare") await compare(job);
    else await run(job);
  } catch (err) {
    if (job.cancelled) return;
    showRunError(err, job.mode);
    replaceWorkerAfter(err);
  } finally {
    endJob(job);
  }
});

async function run(job) {
  const { text, rules } = await withEdgeRules(el.config.value, configBase());
  if (job.cancelled) return;
  const trace = el.trace.value.trim() === "" ? undefined : el.trace.value;
  const { result: out, ms } = await engine.request("run", { config: text, trace, traceName });
  if (job.cancelled) return;
  render(out);
  el.status.textContent = `Simulated in ${millis(ms)}${trace ? ` on ${traceName}` : ""}` + `${rules ? `, with edge_rules from ${rules}` : ""}.`;
  el.root.dataset.exitCode = String(out.exitCode);
  setState("done");
}

async function compare(job) {
  const before = await sideWithEdgeRules("before", el.config.value, configBase());
  if (job.cancelled) return;
  const after = await sideWithEdgeRules("after", el.after.value, configBase(el.afterExample.value));
  if (job.cancelled) return;
  const trace = el.trace.value.trim() === "" ? undefined : el.trace.value;
  const { result: out, ms } = await engine.request("compare", { before: before.text, after: after.text, trace, traceName });
  if (job.cancelled) return;
  renderCompare(out);
  const rules = [before.rules && `${before.rules} (before)`, after.rules && `${after.rules} (after)`].filter(Boolean);
  el.status.textContent = `Compared in ${millis(ms)}${trace ? ` on ${traceName}` : ""}` + `${rules.length ? `, with edge_rules from ${rules.join(" and ")}` : ""}.`;
  el.root.dataset.exitCode = String(out.exitCode);
  setState("done");
}

el.cancel.addEventListener("click", () => {
  const job = current;
  if (!job) return;
  job.cancelled = true;
  engine.stop();
  engine = startWorker();
  endJob(job);
  el.status.textContent = "Cancelled.";
  setState("idle");
});

// ---------------------------------------------------------------- the report

function render({ report, markdown, markdownError, timeline, exitCode }) {
  renderVerdict(report, exitCode);
  renderSummary(report);
  renderChart(timeline, report);
  renderClients(report, timeline);
  renderPolicies(report);
  renderPacing(report, timeline);
  renderBlocks(report);
  renderFindings(report.findings, el.findings);
  renderSample(report, markdown);
  el.markdown.textContent = markdown ?? `The Markdown report cannot be written: ${markdownError?.message}`;
  shown.run = true;
  showResults();
}

function renderVerdict(report, exitCode) {
  const counts = Object.fromEntries(SEVERITIES.map((s) => [s, 0]));
  for (const f of report.findings) counts[f.severity] = (counts[f.severity] ?? 0) + 1;
  const tally = SEVERITIES.map((s) => `${counts[s]} ${s}`).join(", ");
  el.verdict.replaceChildren(
    make("strong", { text: exitCode === 1 ? "High findings" : "No high findings" }),
    ` — ${exitCode === 1 ? "fix before shipping these limits" : "the policies hold"} (exit status ${exitCode}; ${tally})`,
  );
  el.verdict.dataset.exitCode = String(exitCode);
  el.verdict.dataset.highs = String(counts.high);
  el.verdict.className = `verdict ${exitCode === 1 ? "bad" : "ok"}`;
}

function renderSummary(r) {
  const peak = `peak ${fmt(r.peak_admitted_rps)} req/s admitted (second ${fmt(r.peak_second)})`;
  let capacity = "";
  if (r.capacity_rps !== null) {
    const times = r.peak_admitted_rps / r.capacity_rps;
    capacity = ` vs capacity ${fmt(r.capacity_rps)} req/s${times > 1 ? ` (${times.toFixed(1)}× over)` : ""}`;
  }
  const service = show(r.service);
  el.summary.replaceChildren(
    make("strong", { text: service }),
    `: simulated ${fmt(r.duration_s)} s, ${fmt(r.requests)} logical requests, ${fmt(r.admitted)} attempts admitted, ${peak}${capacity}.`,
  );
}

function cell(row, text, className = undefined) {
  const td = make("td", { text, className });
  row.append(td);
  return td;
}

function renderClients(report, timeline) {
  const colours = clientColours(timeline);
  el.clients.replaceChildren(
    ...report.clients.map((c) => {
      const tr = make("tr", { attrs: { "data-client": c.client, "data-kind": show(c.kind) } });
      const name = cell(tr, "");
      name.append(make("span", { className: "swatch", attrs: { style: `background:${colours.get(c.client) ?? "transparent"}` } }), c.client);
      cell(tr, show(c.kind), `kind kind-${show(c.kind)}`);
      cell(tr, fmt(c.logical), "n");
      cell(tr, fmt(c.attempts), "n");
      cell(tr, fmt(c.allowed), "n");
      cell(tr, fmt(c.rejected), c.rejected > 0 ? "n bad-text" : "n");
      cell(tr, fmt(c.delayed), "n");
      cell(tr, fmt(c.failed), c.failed > 0 ? "n bad-text" : "n");
      cell(tr, `${c.failed_pct.toFixed(1)}%`, "n");
      cell(tr, `${fmt(c.max_retry_after_s)} s`, "n");
      cell(tr, c.top_policy || "–");
      return tr;
    }),
  );
}

function renderPolicies(report) {
  el.policies.replaceChildren(
    ...report.policies.map((p) => {
      const tr = make("tr", { attrs: { "data-policy": p.name } });
      const scope = [];
      if (p.endpoints.length) scope.push(p.endpoints.join(", "));
      if (p.clients.length) scope.push(`only ${p.clients.join(", ")}`);
      if (p.exclude_clients.length) scope.push(`not ${p.exclude_clients.join(", ")}`);
      cell(tr, p.name);
      cell(tr, p.algorithm, "mono");
      cell(tr, p.key, "mono");
      cell(tr, scope.join("; ") || "all");
      cell(tr, `${fmt(p.sustained_rps)} req/s`, "n");
      cell(tr, `${fmt(p.worst_case_per_window)} per ${fmt(p.window_s)} s`, "n");
      cell(tr, fmt(p.observed_max_per_window), "n");
      cell(tr, fmt(p.checks), "n");
      cell(tr, fmt(p.rejects), p.rejects > 0 ? "n bad-text" : "n");
      return tr;
    }),
  );
}

/** With a `smartflow` policy, every client row has `paced`, `mean_pace_s`, `max_pace_s`, `pacer`. */
function renderPacing(report, timeline) {
  const rows = report.clients.filter((c) => c.paced !== undefined);
  el.pacingSection.hidden = rows.length === 0;
  const colours = clientColours(timeline);
  el.pacing.replaceChildren(
    ...rows.map((c) => {
      const tr = make("tr", { attrs: { "data-client": c.client, "data-paced": String(c.paced) } });
      const name = cell(tr, "");
      name.append(make("span", { className: "swatch", attrs: { style: `background:${colours.get(c.client) ?? "transparent"}` } }), c.client);
      cell(tr, fmt(c.paced), "n");
      cell(tr, `${fmt(c.mean_pace_s)} s`, "n");
      cell(tr, `${fmt(c.max_pace_s)} s`, "n");
      cell(tr, c.pacer || "–");
      return tr;
    }),
  );
}

/** `count_then_block` policy rows have `mitigation_timeout_s`, `blocks`, `blocked_clients`. */
function renderBlocks(report) {
  const rows = report.policies.filter((p) => p.blocks !== undefined);
  el.blocksSection.hidden = rows.length === 0;
  const kinds = new Map(report.clients.map((c) => [c.client, show(c.kind)]));
  el.blocks.replaceChildren(
    ...rows.map((p) => {
      const tr = make("tr", { attrs: { "data-policy": p.name, "data-blocks": String(p.blocks) } });
      cell(tr, p.name);
      cell(tr, `${fmt(p.mitigation_timeout_s)} s`, "n");
      cell(tr, fmt(p.blocks), p.blocks > 0 ? "n bad-text" : "n");
      const who = cell(tr, p.blocked_clients.length ? "" : "–", "blocked");
      p.blocked_clients.forEach((b, i) => {
        if (i > 0) who.append(", ");
        const kind = kinds.get(b.client) ?? "unknown";
        who.append(
          make("span", {
            className: kind === "legit" ? "blocked-client legit" : "blocked-client",
            text: `${b.client} (${fmt(b.blocks)})`,
            attrs: { "data-client": b.client, "data-kind": kind, "data-blocks": String(b.blocks) },
          }),
        );
      });
      return tr;
    }),
  );
}

function renderFindings(findings, list) {
  if (findings.length === 0) {
    list.replaceChildren(make("li", { className: "none", text: "No findings." }));
    return;
  }
  list.replaceChildren(
    ...findings.map((f) => {
      const li = make("li", { className: `finding severity-${f.severity}`, attrs: { "data-severity": f.severity, "data-code": f.code } });
      li.append(make("span", { className: "badge", text: f.severity.toUpperCase() }), make("code", { className: "code", text: f.code }), make("span", { text: f.message }));
      return li;
    }),
  );
}

/** The sample 429 as the Markdown report prints it (its numbers in the reference's format). */
function renderSample(report, markdown) {
  const s = report.sample_429;
  if (s === null) {
    el.sampleHeading.textContent = "Sample 429";
    el.sample.textContent = "No request was refused.";
    return;
  }
  el.sampleHeading.textContent = `Sample 429 (first rejection, t=${s.t} s, ${s.client} ${s.endpoint})`;
  const block = markdown && /\n## Sample 429[^\n]*\n\n```\n([\s\S]*?)```/.exec(markdown);
  el.sample.textContent = block
    ? block[1]
    : [
        "HTTP/1.1 429 Too Many Requests",
        `Retry-After: ${s.retry_after}`,
        `RateLimit-Policy: "${s.policy}";q=${show(s.quota)};w=${s.window_s}`,
        `RateLimit: "${s.policy}";r=0;t=${s.retry_after}`,
        "Content-Type: application/problem+json",
        "",
      ].join("\n");
}

// ---------------------------------------------------------------- the comparison

const VERDICT_CLASS = { ship: "ok", "ship with changes": "warn", "do not ship": "bad" };

function severityTally(findings) {
  const counts = Object.fromEntries(SEVERITIES.map((s) => [s, 0]));
  for (const f of findings) counts[f.severity] = (counts[f.severity] ?? 0) + 1;
  return SEVERITIES.map((s) => `${counts[s]} ${s}`).join(", ");
}

function renderCompare({ before, after, comparison: c, review, exitCode }) {
  el.compareVerdict.textContent = c.verdict;
  el.compareVerdictNote.textContent = ` — judged on the after run: ${severityTally(c.findings.after)} (exit status ${exitCode})`;
  el.compareVerdictLine.className = `verdict ${VERDICT_CLASS[c.verdict] ?? "bad"}`;
  el.compareVerdictLine.dataset.verdict = c.verdict;
  el.compareVerdictLine.dataset.exitCode = String(exitCode);

  renderCompareTraffic(c);
  renderComparePeak(c);

  // Both charts in one frame: one time axis (from the earlier first second to the later
  // end) and one rate scale, one colour per client.
  const colours = clientColours(before.timeline, after.timeline);
  const frame = chartFrame([before.timeline, after.timeline]);
  el.compareChartBefore.replaceChildren(drawChart(before.timeline, frame, frame.data[0], colours, "compare-chart-before"));
  el.compareChartAfter.replaceChildren(drawChart(after.timeline, frame, frame.data[1], colours, "compare-chart-after"));
  el.compareChartNote.textContent = `${chartNote({ clients: [...c.before.clients, ...c.after.clients] }, frame.bin)} Both charts share the time axis and the scale.`;
  el.compareLegend.replaceChildren(...legendItems(colours));

  renderCompareClients(c, colours);

  const codes = (list) => (list.length ? list.join(", ") : "none");
  el.compareResolved.textContent = codes(c.findings.resolved);
  el.compareResolved.dataset.codes = c.findings.resolved.join(" ");
  el.compareNew.textContent = codes(c.findings.new);
  el.compareNew.dataset.codes = c.findings.new.join(" ");
  renderFindings(c.findings.after, el.compareFindings);

  el.review.textContent = review;
  if (reviewUrl) URL.revokeObjectURL(reviewUrl);
  reviewUrl = URL.createObjectURL(new Blob([review], { type: "text/markdown;charset=utf-8" }));
  el.downloadReview.href = reviewUrl;

  shown.compare = true;
  showResults();
}

function renderCompareTraffic(c) {
  const t = c.traffic;
  const requests = `${fmt(c.before.requests)} requests before, ${fmt(c.after.requests)} after`;
  let text;
  if (t.source === "trace") {
    text = `Same traffic for both: the trace ${t.name}, ${fmt(t.rows)} rows over ${fmt(t.span_s)} s (${requests}).`;
  } else {
    const changed = t.changed_clients?.length ? `; the after config changes ${t.changed_clients.length === 1 ? "client" : "clients"} ${t.changed_clients.join(", ")}` : "";
    text = `Same traffic for both: generated from the configs' clients, seed ${t.seed_text ?? show(t.seed)}, ${fmt(t.duration_s)} s (${requests}${changed}).`;
  }
  el.compareTraffic.textContent = text;
  el.compareTraffic.dataset.source = t.source;
}

function renderComparePeak(c) {
  const { before: pb, after: pa } = c.peak;
  const { before: cb, after: ca } = c.capacity_rps;
  const over = (peak, capacity) => (capacity === null ? "no capacity given" : peak > capacity ? `${(peak / capacity).toFixed(1)}× over` : "within");
  let capacity;
  if (cb === null && ca === null) capacity = "";
  else if (cb === ca) capacity = ` vs capacity ${fmt(cb)} req/s (${over(pb.admitted_rps, cb)} → ${over(pa.admitted_rps, ca)})`;
  else
    capacity = ` vs capacity ${cb === null ? "none" : `${fmt(cb)} req/s`} → ${ca === null ? "none" : `${fmt(ca)} req/s`} (${over(pb.admitted_rps, cb)} → ${over(pa.admitted_rps, ca)})`;
  el.comparePeak.replaceChildren(
    "Peak admitted: ",
    make("strong", { text: `${fmt(pb.admitted_rps)} → ${fmt(pa.admitted_rps)} req/s` }),
    ` (second ${fmt(pb.second)} → ${fmt(pa.second)})${capacity}.`,
  );
  Object.assign(el.comparePeak.dataset, {
    before: String(pb.admitted_rps),
    after: String(pa.admitted_rps),
    capacityBefore: String(cb),
    capacityAfter: String(ca),
  });
}

function renderCompareClients(c, colours) {
  const figures = [
    ["rejected", (n) => fmt(n)],
    ["delayed", (n) => fmt(n)],
    ["failed", (n) => fmt(n)],
    ["max_wait_s", (n) => `${fmt(n)} s`],
  ];
  el.compareClients.replaceChildren(
    ...c.clients.map((row) => {
      const kind = show(row.kind);
      const tr = make("tr", { attrs: { "data-client": row.client, "data-kind": kind } });
      const name = cell(tr, "");
      name.append(make("span", { className: "swatch", attrs: { style: `background:${colours.get(row.client) ?? "transparent"}` } }), row.client);
      cell(tr, kind, `kind kind-${kind}`);
      for (const [key, format] of figures) {
        const b = row.before?.[key];
        const a = row.after?.[key];
        cell(tr, b === undefined ? "–" : format(b), "n").dataset.figure = `${key} before`;
        // For a legit client, fewer refusals, retries, failures or waits is better.
        let change = "";
        if (kind === "legit" && a !== undefined && b !== undefined && a !== b) change = a < b ? " better" : " worse";
        cell(tr, a === undefined ? "–" : format(a), `n${change}`).dataset.figure = `${key} after`;
      }
      return tr;
    }),
  );
}

// ---------------------------------------------------------------- the chart

/** A colour per client, in the order the timelines name them (the same colour in every chart of a page). */
function clientColours(...timelines) {
  const names = [...new Set(timelines.flatMap((t) => t.clients.map((c) => c.name)))];
  return new Map(names.map((name, i) => [name, PALETTE[i % PALETTE.length]]));
}

/** A step giving at most about `count` ticks over `span`, from 1, 2, 5 × 10^n (or minutes for time). */
function niceStep(span, count, steps = null) {
  const raw = span / Math.max(1, count);
  if (steps) return steps.find((s) => s >= raw) ?? steps[steps.length - 1] * Math.ceil(raw / steps[steps.length - 1]);
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];

/**
 * The common frame of charts drawn one above the other: the time range (from the earliest
 * first second to the latest end, so every chart shares one x scale), the seconds per bar,
 * and the attempts-per-second scale both ways (large enough for every chart and capacity).
 * `data[i]`: timeline i's per-bar, per-client rates.
 */
function chartFrame(timelines) {
  const from = Math.min(...timelines.map((t) => t.first_second));
  const to = Math.max(...timelines.map((t) => t.first_second + t.seconds));
  const span = to - from;
  const bin = Math.max(1, Math.ceil(span / MAX_BARS));
  const bars = Math.ceil(span / bin);
  let maxUp = 0;
  let maxDown = 0;
  const data = timelines.map((timeline) => {
    const first = timeline.first_second;
    // Attempts per second in bar b: the mean over the bar's seconds (none outside the timeline).
    const rate = (row, b) => {
      const start = from + b * bin;
      const end = Math.min(to, start + bin);
      let sum = 0;
      for (let s = Math.max(start, first); s < Math.min(end, first + row.length); s++) sum += row[s - first];
      return sum / (end - start);
    };
    const up = timeline.clients.map((c) => Array.from({ length: bars }, (_, b) => rate(c.admitted, b)));
    const down = timeline.clients.map((c) => Array.from({ length: bars }, (_, b) => rate(c.rejected, b)));
    const total = (rows, b) => rows.reduce((sum, r) => sum + r[b], 0);
    for (let b = 0; b < bars; b++) {
      maxUp = Math.max(maxUp, total(up, b));
      maxDown = Math.max(maxDown, total(down, b));
    }
    const capacity = timeline.capacity_rps;
    if (capacity !== null && Number.isFinite(capacity)) maxUp = Math.max(maxUp, capacity);
    return { up, down };
  });
  return { from, to, span, bin, bars, maxUp: Math.max(maxUp, 1), maxDown, data };
}

function chartNote(report, bin) {
  const paced = report.clients.some((c) => c.paced > 0);
  return (
    "Admitted attempts above the axis, refused ones (429) below, stacked by client" +
    (paced ? "; a paced attempt counts in the second its pacer sends it" : "") +
    (bin > 1 ? `; each bar is the mean of ${bin} s.` : "; one bar per second.")
  );
}

function legendItems(colours) {
  return [...colours].map(([name, colour]) => {
    const li = make("li", { attrs: { "data-client": name } });
    li.append(make("span", { className: "swatch", attrs: { style: `background:${colour}` } }), name);
    return li;
  });
}

/** The single run's chart, note and legend. */
function renderChart(timeline, report) {
  const colours = clientColours(timeline);
  const frame = chartFrame([timeline]);
  el.chart.replaceChildren(drawChart(timeline, frame, frame.data[0], colours, "chart"));
  el.chartNote.textContent = chartNote(report, frame.bin);
  el.legend.replaceChildren(...legendItems(colours));
}

/**
 * The SVG chart of `timeline` in `frame` (chartFrame's: its time range and scales), its bars
 * `data` and client `colours`; `id` names its title element.
 */
function drawChart(timeline, frame, data, colours, id) {
  const { from, to, span: seconds, bin, bars, up, down } = { ...frame, ...data };
  const { maxUp, maxDown } = frame;
  const capacity = timeline.capacity_rps;
  const W = 960;
  const H = 380;
  const m = { left: 56, right: 104, top: 14, bottom: 40 };
  const plotW = W - m.left - m.right;
  const plotH = H - m.top - m.bottom;
  const k = plotH / (maxUp + maxDown);
  const axisY = m.top + maxUp * k;
  const barW = plotW / Math.max(bars, 1);
  const x = (second) => m.left + ((second - from) / bin) * barW;

  const root = svg("svg", {
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-labelledby": `${id}-title`,
    "data-testid": "chart-svg",
    "data-seconds": seconds,
    "data-bin": bin,
    "data-from": from,
    "data-to": to,
  });
  root.append(svg("title", { id: `${id}-title` }, `Admitted (above) and refused (below) attempts per second, by client, over ${seconds} s`));

  // Horizontal grid and y ticks (attempts per second, both directions).
  const grid = svg("g", { class: "grid" });
  const yStep = niceStep(maxUp + maxDown, 8);
  for (let v = 0; v <= maxUp + 1e-9; v += yStep) tickY(grid, axisY - v * k, v);
  for (let v = yStep; v <= maxDown + 1e-9; v += yStep) tickY(grid, axisY + v * k, v);
  function tickY(g, y, v) {
    g.append(svg("line", { x1: m.left, x2: m.left + plotW, y1: y, y2: y, class: "grid-line" }));
    g.append(svg("text", { x: m.left - 6, y: y + 4, class: "tick-label", "text-anchor": "end" }, fmt(Math.round(v * 100) / 100)));
  }
  root.append(grid);

  // Stacked bars: admitted up from the axis, refused down from it.
  const barsGroup = svg("g", { class: "bars" });
  for (let b = 0; b < bars; b++) {
    let top = axisY;
    let bottom = axisY;
    timeline.clients.forEach((c, i) => {
      const a = up[i][b];
      const r = down[i][b];
      const bx = m.left + b * barW;
      const width = Math.max(barW - (barW > 3 ? 0.5 : 0), 0.6);
      const second = from + b * bin;
      if (a > 0) {
        top -= a * k;
        barsGroup.append(
          svg("rect", {
            x: bx,
            y: top,
            width,
            height: a * k,
            fill: colours.get(c.name),
            class: "chart-bar admitted",
            "data-client": c.name,
            "data-second": second,
          }),
        );
      }
      if (r > 0) {
        barsGroup.append(
          svg("rect", {
            x: bx,
            y: bottom,
            width,
            height: r * k,
            fill: colours.get(c.name),
            class: "chart-bar rejected",
            "data-client": c.name,
            "data-second": second,
          }),
        );
        bottom += r * k;
      }
    });
  }
  root.append(barsGroup);

  // The axis, with ticks in seconds.
  const axis = svg("g", { class: "axis" });
  axis.append(svg("line", { x1: m.left, x2: m.left + plotW, y1: axisY, y2: axisY, class: "axis-line" }));
  const xStep = niceStep(seconds, 10, TIME_STEPS);
  for (let t = Math.ceil(from / xStep) * xStep; t <= to; t += xStep) {
    const tx = x(t);
    axis.append(svg("line", { x1: tx, x2: tx, y1: m.top + plotH, y2: m.top + plotH + 5, class: "tick" }));
    axis.append(svg("text", { x: tx, y: m.top + plotH + 18, class: "tick-label", "text-anchor": "middle" }, `${fmt(t)} s`));
  }
  axis.append(svg("line", { x1: m.left, x2: m.left + plotW, y1: m.top + plotH, y2: m.top + plotH, class: "frame" }));
  axis.append(svg("text", { x: m.left + plotW / 2, y: H - 4, class: "axis-label", "text-anchor": "middle" }, "time (s)"));
  axis.append(svg("text", { x: 12, y: m.top + plotH / 2, class: "axis-label", "text-anchor": "middle", transform: `rotate(-90 12 ${m.top + plotH / 2})` }, "attempts per second"));
  // "admitted ↑" at the top of the margin, or under the capacity label when that is there.
  const capacityY = capacity !== null && Number.isFinite(capacity) ? axisY - capacity * k + 4 : null;
  const admittedY = capacityY !== null && Math.abs(capacityY - (m.top + 12)) < 14 ? capacityY + 16 : m.top + 12;
  axis.append(svg("text", { x: m.left + plotW + 6, y: admittedY, class: "band-label" }, "admitted ↑"));
  if (maxDown > 0) axis.append(svg("text", { x: m.left + plotW + 6, y: m.top + plotH - 4, class: "band-label" }, "refused ↓"));
  root.append(axis);

  // The backend's capacity.
  if (capacity !== null && Number.isFinite(capacity)) {
    const cy = axisY - capacity * k;
    const line = svg("g", { class: "capacity", "data-testid": "capacity-line", "data-capacity": capacity });
    line.append(svg("line", { x1: m.left, x2: m.left + plotW, y1: cy, y2: cy, class: "capacity-line" }));
    line.append(svg("text", { x: m.left + plotW + 6, y: cy + 4, class: "capacity-label" }, `capacity ${fmt(capacity)}/s`));
    root.append(line);
  }

  return root;
}

// ---------------------------------------------------------------- start

async function main() {
  engine = startWorker(); // loads beside the page's own copy of the package
  try {
    const mod = await import(PACKAGE);
    await mod.default();
    sim = mod;
  } catch (err) {
    showError(`The sluicegate package failed to load from ${PACKAGE} (run scripts/build.sh): ${err?.message ?? err}`);
    el.status.textContent = "";
    return;
  }
  try {
    await engine.ready;
  } catch (err) {
    showError(`The simulator worker failed to load from ${WORKER} (run scripts/build.sh): ${err?.message ?? err}`);
    el.status.textContent = "";
    return;
  }
  try {
    const texts = await Promise.all(
      EXAMPLES.map(async (name) => {
        const res = await fetch(exampleUrl(name));
        if (!res.ok) throw new Error(`GET ${exampleUrl(name)}: ${res.status}`);
        return [name, await res.text()];
      }),
    );
    for (const [name, text] of texts) examples.set(name, text);
  } catch (err) {
    showError(`The examples failed to load (run scripts/build.sh): ${err?.message ?? err}`);
  }
  if (el.config.value.trim() === "") pickExample(examples.has("orders-api") ? "orders-api" : "custom");
  if (el.after.value.trim() === "" && examples.has("orders-api-tuned")) pickAfter("orders-api-tuned");
  setMode([...el.modes].find((radio) => radio.checked)?.value ?? "run");
  el.example.disabled = false;
  el.afterExample.disabled = false;
  el.examplePair.disabled = false;
  el.run.disabled = false;
  el.compare.disabled = false;
  el.status.textContent = "Ready.";
  el.root.dataset.ready = "true";
}

main();
