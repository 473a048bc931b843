// sluicegate edge burst tester: fire N GET /api/ping requests and show how the edge answers.
// Plain ES module, no dependencies.

const ENDPOINT = "/api/ping";

const $ = (id) => document.getElementById(id);
const form = $("burst");
const countInput = $("count");
const sequentialInput = $("sequential");
const fireButton = $("fire");
const summary = $("summary");
const okCount = $("ok-count");
const blockedCount = $("blocked-count");
const other = $("other");
const otherCount = $("other-count");
const progress = $("progress");
const countdown = $("countdown");
const tbody = $("results").tBodies[0];

/** Block state: when the longest block announced so far ends (ms since epoch). */
let blockEnd = null;
let tickTimer = null;

/** `Retry-After` as seconds: delay-seconds or an HTTP date; null when absent or invalid. */
function retryAfterSeconds(value) {
  if (value == null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** One request; never rejects: network failures become `{ status: "error" }`. */
async function ping(index) {
  try {
    const res = await fetch(ENDPOINT, { cache: "no-store", headers: { accept: "application/json" } });
    const receivedAt = Date.now();
    const text = await res.text();
    let detail = "";
    if (!res.ok) {
      try {
        const problem = JSON.parse(text);
        detail = typeof problem.detail === "string" ? problem.detail : (problem.title ?? "");
      } catch {
        detail = text.slice(0, 200);
      }
    }
    return {
      index,
      status: String(res.status),
      retryAfter: res.headers.get("retry-after"),
      policy: res.headers.get("ratelimit-policy"),
      rateLimit: res.headers.get("ratelimit"),
      detail,
      receivedAt,
    };
  } catch (err) {
    return { index, status: "error", detail: err?.message || String(err), receivedAt: Date.now() };
  }
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text == null || text === "" ? "—" : text;
  if (className) td.className = className;
  return td;
}

function statusClass(status) {
  if (status === "error") return "status error";
  if (status === "429") return "status blocked";
  return /^2\d\d$/.test(status) ? "status ok" : "status other";
}

function renderRow(result) {
  const tr = document.createElement("tr");
  tr.dataset.status = result.status;
  tr.append(
    cell(String(result.index + 1), "num"),
    cell(result.status, statusClass(result.status)),
    cell(result.retryAfter, "mono"),
    cell(result.policy, "mono"),
    cell(result.rateLimit, "mono"),
    cell(result.detail, "detail"),
  );
  tbody.append(tr);
}

function updateSummary(results, total, done) {
  let ok = 0;
  let blocked = 0;
  let rest = 0;
  for (const r of results) {
    if (!r) continue;
    if (r.status === "429") blocked += 1;
    else if (/^2\d\d$/.test(r.status)) ok += 1;
    else rest += 1;
  }
  okCount.textContent = String(ok);
  blockedCount.textContent = String(blocked);
  otherCount.textContent = String(rest);
  other.hidden = rest === 0;
  const answered = ok + blocked + rest;
  progress.textContent = done ? "" : ` · ${answered}/${total} answered`;
  summary.dataset.state = done ? "done" : "running";
}

/** A refusal arrived: the block lasts Retry-After seconds from the moment it was received. */
function noteBlock(result) {
  if (result.status !== "429") return;
  const seconds = retryAfterSeconds(result.retryAfter);
  if (seconds == null) return;
  const end = result.receivedAt + seconds * 1000;
  if (blockEnd == null || end > blockEnd) blockEnd = end;
  tick();
}

/** Show the whole seconds left, then sleep until the next whole second is crossed. */
function tick() {
  if (tickTimer != null) clearTimeout(tickTimer);
  tickTimer = null;
  if (blockEnd == null) return;
  const msLeft = blockEnd - Date.now();
  const remaining = Math.max(0, Math.ceil(msLeft / 1000));
  countdown.hidden = false;
  countdown.dataset.remaining = String(remaining);
  countdown.classList.toggle("over", remaining === 0);
  countdown.textContent = remaining > 0 ? `Blocked: ${remaining} s left` : "Block over: fire again";
  if (remaining > 0) {
    // The displayed value drops when msLeft reaches (remaining - 1) s.
    tickTimer = setTimeout(tick, msLeft - (remaining - 1) * 1000 + 5);
  }
}

function resetCountdown() {
  if (tickTimer != null) clearTimeout(tickTimer);
  tickTimer = null;
  blockEnd = null;
  countdown.hidden = true;
  countdown.textContent = "";
  countdown.dataset.remaining = "0";
  countdown.classList.remove("over");
}

async function fire(total, sequential) {
  resetCountdown();
  tbody.replaceChildren();
  const results = new Array(total);
  let rendered = 0;
  updateSummary(results, total, false);

  // Rows appear in request order: a row is added once it and every earlier request have answered.
  const arrive = (result) => {
    results[result.index] = result;
    noteBlock(result);
    while (rendered < total && results[rendered]) renderRow(results[rendered++]);
    updateSummary(results, total, false);
  };

  if (sequential) {
    for (let i = 0; i < total; i += 1) arrive(await ping(i));
  } else {
    await Promise.all(Array.from({ length: total }, (_, i) => ping(i).then(arrive)));
  }
  updateSummary(results, total, true);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!form.reportValidity()) return;
  const total = Math.trunc(Number(countInput.value));
  fireButton.disabled = true;
  fireButton.textContent = "Firing…";
  try {
    await fire(total, sequentialInput.checked);
  } finally {
    fireButton.disabled = false;
    fireButton.textContent = "Fire";
  }
});

// The active limits, as the edge publishes them (GET /api/capabilities, not counted).
const limits = $("limits");
const limitsStatus = $("limits-status");
const limitsList = $("limits-list");

/** One line for a published rule or upstream budget. */
function describeLimit(entry, kind) {
  if (kind === "upstream") {
    return `${entry.id}: at most ${entry.max_in_flight} in flight per ${entry.scope}, waiting up to ${entry.max_wait_s} s`;
  }
  const amount = entry.algorithm === "token_bucket" ? `${+(entry.rate_per_s * 60).toFixed(3)} per minute, bursts of ${entry.burst}` : `${entry.limit} per ${entry.period_s} s`;
  const paths = (entry.matches.paths ?? []).map((p) => ("starts_with" in p ? `${p.starts_with}*` : p.equals));
  const where = [(entry.matches.methods ?? []).join("|"), paths.join(", ") || "every path"].filter(Boolean).join(" ");
  const block = entry.block_s ? `, then block ${entry.block_s} s` : "";
  return `${entry.id}: ${where}: ${amount} per ${entry.counted_by.join(" + ")}${block}`;
}

async function showLimits() {
  try {
    const res = await fetch("/api/capabilities", { headers: { accept: "application/json" } });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const answer = await res.json();
    const items = [...answer.rules.map((r) => [r, "rule"]), ...answer.upstreams.map((u) => [u, "upstream"])];
    limitsList.replaceChildren(
      ...items.map(([entry, kind]) => {
        const li = document.createElement("li");
        li.dataset.id = entry.id;
        li.dataset.kind = kind;
        li.textContent = describeLimit(entry, kind);
        if (entry.description) li.title = entry.description;
        return li;
      }),
    );
    limitsStatus.textContent = items.length ? "" : "No public limits.";
    limitsStatus.hidden = items.length > 0;
    limits.dataset.state = "done";
  } catch (err) {
    limitsStatus.textContent = `The limits could not be read: ${err?.message || err}`;
    limits.dataset.state = "error";
  }
}

showLimits();
