// The operator's dashboard (/__sluicegate/dashboard): the edge's decisions per subject and
// minute from GET /__sluicegate/stats, charted with uPlot (served beside this page, no CDN),
// refreshed every 5 s. The admin token is asked once and kept in this tab (sessionStorage).
const { uPlot } = /** @type {any} */ (globalThis); // uplot.js, loaded before this module

const TOKEN = "sluicegate-admin-token";
const REFRESH_MS = 5_000;
const MINUTE_MS = 60_000;
const SERIES = [
  { key: "admitted", label: "admitted", stroke: "#2e7d32", fill: "rgba(46,125,50,0.12)" },
  { key: "refused", label: "refused", stroke: "#c62828", fill: "rgba(198,40,40,0.12)" },
  { key: "failed_open", label: "failed open", stroke: "#ef6c00" },
  { key: "shed", label: "shed", stroke: "#6a1b9a" },
  // A rule's refusals not enforced (`"enforce"`: false, or a share of keys): the requests went on.
  { key: "would_refuse", label: "would refuse", stroke: "#1565c0", dash: [6, 4], kinds: ["rule"] },
];
/** The series a subject of `kind` is charted with (only rules can would-refuse). */
const seriesOf = (kind) => SERIES.filter((s) => !s.kinds || s.kinds.includes(kind));

const main = document.getElementById("dashboard");
const form = document.getElementById("unlock");
const status = document.getElementById("status");
const list = document.getElementById("subjects");
/** Each subject's card and chart, by `kind:name`, kept across refreshes. */
const cards = new Map();
let timer;

function say(text, error = false) {
  status.textContent = text;
  status.classList.toggle("error", error);
}

/** The limit a subject works under, in words, from the capabilities answer in `limits`. */
function limitOf(limits, kind, name) {
  if (kind === "rule") {
    const rule = limits?.rules?.find((r) => r.id === name);
    if (!rule) return "";
    const count = rule.limit !== null && rule.limit !== undefined ? `${rule.limit} per ${rule.period_s} s` : `${rule.rate_per_s}/s, burst ${rule.burst}`;
    const block = rule.block_s ? `, then blocked ${rule.block_s} s` : "";
    return `${count}${block} per ${rule.counted_by.join(" + ")} (${rule.algorithm}, ${rule.store})`;
  }
  if (kind === "budget") {
    const budget = limits?.upstreams?.find((u) => u.id === name);
    return budget ? `${budget.max_in_flight} in flight, waiting at most ${budget.max_wait_s} s (${budget.scope})` : "";
  }
  return "";
}

/** The minutes from `since` to `until` as uPlot's columns: seconds, then each series (0 where a minute has no counts). */
function columns(subject, since, until) {
  const xs = [];
  const series = seriesOf(subject.kind);
  const ys = series.map(() => []);
  const byMinute = new Map(subject.minutes.map((m) => [m.minute, m]));
  for (let t = since - (since % MINUTE_MS); t <= until; t += MINUTE_MS) {
    xs.push(t / 1000);
    const m = byMinute.get(t);
    for (const [i, s] of series.entries()) ys[i].push(m ? (m[s.key] ?? 0) : 0);
  }
  return [xs, ...ys];
}

function card(key) {
  let entry = cards.get(key);
  if (entry) return entry;
  const el = document.createElement("article");
  el.className = "subject";
  el.innerHTML = `<h2><span class="kind"></span><span class="name"></span></h2><p class="limit"></p><p class="totals"></p><div class="chart"></div>
    <table class="refused"><thead><tr><th>refused most</th><th>refusals</th></tr></thead><tbody></tbody></table>`;
  list.append(el);
  entry = { el, chart: null };
  cards.set(key, entry);
  return entry;
}

function render(json) {
  const seen = new Set();
  for (const subject of json.subjects) {
    const key = `${subject.kind}:${subject.name}`;
    seen.add(key);
    const entry = card(key);
    const { el } = entry;
    el.dataset.kind = subject.kind;
    el.dataset.name = subject.name;
    el.querySelector(".kind").textContent = subject.kind.replace("_", "-");
    el.querySelector(".name").textContent = subject.name;
    el.querySelector(".limit").textContent = limitOf(json.limits, subject.kind, subject.name);
    const t = subject.total;
    const would = t.would_refuse ? `, ${t.would_refuse} would refuse (not enforced)` : "";
    el.querySelector(".totals").textContent = `${t.admitted} admitted, ${t.refused} refused, ${t.failed_open} failed open, ${t.shed} shed${would}`;
    const rows = t.top_refused.map((h) => {
      const tr = document.createElement("tr");
      const who = document.createElement("td");
      who.textContent = h.identity;
      const count = document.createElement("td");
      count.textContent = h.error ? `${h.count} (±${h.error})` : String(h.count);
      tr.append(who, count);
      return tr;
    });
    el.querySelector("table.refused tbody").replaceChildren(...rows);
    const data = columns(subject, json.since, json.until);
    if (entry.chart) {
      entry.chart.setData(data);
    } else {
      const width = Math.max(320, el.clientWidth - 32);
      entry.chart = new uPlot(
        {
          width,
          height: 180,
          scales: { x: { time: true } },
          axes: [{}, { label: "requests / minute" }],
          series: [{}, ...seriesOf(subject.kind).map((s) => ({ label: s.label, stroke: s.stroke, fill: s.fill, dash: s.dash, width: 1.5, points: { show: false } }))],
        },
        data,
        el.querySelector(".chart"),
      );
    }
  }
  for (const [key, entry] of cards) {
    if (!seen.has(key)) {
      entry.chart?.destroy();
      entry.el.remove();
      cards.delete(key);
    }
  }
  main.dataset.subjects = String(cards.size);
  main.dataset.state = "ready";
  say(json.subjects.length ? `Updated ${new Date().toLocaleTimeString()}; ${json.lost} decisions lost.` : "No decisions counted in this span yet.");
}

async function refresh() {
  const token = sessionStorage.getItem(TOKEN);
  if (!token) return;
  const minutes = Number(form.elements.span.value);
  const since = Date.now() - minutes * MINUTE_MS;
  let res;
  try {
    res = await fetch(`/__sluicegate/stats?since=${since}`, { headers: { authorization: `Bearer ${token}` }, cache: "no-store" });
  } catch (error) {
    say(`The edge cannot be reached: ${error.message}`, true);
    return;
  }
  if (res.status === 401) {
    sessionStorage.removeItem(TOKEN);
    clearInterval(timer);
    main.dataset.state = "locked";
    say("That token is not the edge's admin token.", true);
    return;
  }
  if (!res.ok) {
    say(`The stats answered ${res.status}: ${(await res.text()).slice(0, 200)}`, true);
    return;
  }
  render(await res.json());
}

function start() {
  clearInterval(timer);
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN, form.elements.token.value);
  form.elements.token.value = "";
  start();
});
form.elements.span.addEventListener("change", () => {
  for (const entry of cards.values()) entry.chart?.destroy();
  cards.clear();
  list.replaceChildren();
  refresh();
});
if (sessionStorage.getItem(TOKEN)) start();
