// The policy simulator's figures (`npm run bench`): the reference simulator (rate_sim.py) and
// `sluicegate sim` on the same workloads, with wall time, peak memory and a parity check.
//
//   node scripts/bench-sim.mjs [--quick]        (Node 22; SLUICEGATE_BENCH_QUICK=1 = --quick)
//
// Workloads, generated deterministically into target/bench-sim/ (reused while unchanged):
//   orders-api × 10   the orders-api example at duration_s 3000 (generated traffic), --json
//   1M-row trace      1,000,000 rows t,client,endpoint,cost from a seeded PRNG, --trace --json
//   1M-row jittered   the same rows, each time moved later by a seeded uniform 0–5 s, in the
//                     same file order (so out of time order, as merged logs are), --trace --json
//   10M-row trace     the same generator at 10,000,000 rows, sluicegate only (not with --quick)
//
// The reference is found through SLUICEGATE_REFERENCE_SIM (the path of rate_sim.py), else
// ../shared/reference/rate_sim.py next to the repository; without it only sluicegate's
// figures are printed. Wall time is taken around each process by a python3 timer that starts
// it with posix_spawn and waits for it with os.wait4 (Node's own spawn and exit event add
// 3 ms or so, a fifth of a short run; without python3, around Node's spawn). One timer makes
// all of a side's runs in a row, as a benchmark harness does: an interpreter's first
// posix_spawn costs it a millisecond or more, which a timer started afresh for each run
// counted as the measured program's (a tenth of a 10 ms run), and a run just after an
// interpreter started is slower again. So the timer starts `true` once, untimed, before its
// runs, and a first run under 5 s is a warm-up, not counted (on either side). Peak resident
// memory is GNU time's %M: every reference run goes through GNU time (its own start, under a
// millisecond, is then in the reference's wall time: under 0.1 % of it), while sluicegate's
// timed runs do not and one more run of it, under GNU time, gives its peak. Without GNU time,
// the peak is ru_maxrss from os.wait4 (which counts the timer's few MiB). sluicegate and the
// reference run in rounds (see below: median wall, highest peak). Outputs are compared as
// parsed JSON documents, plus the exit status.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { totalmem } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { mulberry32 } from "./mulberry32.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const work = join(root, "target", "bench-sim");
const args = process.argv.slice(2);
if (args.includes("-h") || args.includes("--help")) {
  console.log("usage: node scripts/bench-sim.mjs [--quick]   (--quick, or SLUICEGATE_BENCH_QUICK=1, skips the 10M-row trace)");
  process.exit(0);
}
for (const a of args) {
  if (a !== "--quick") {
    console.error(`bench-sim: unknown argument ${a} (usage: node scripts/bench-sim.mjs [--quick])`);
    process.exit(2);
  }
}
const quick = args.includes("--quick") || process.env.SLUICEGATE_BENCH_QUICK === "1";
// One process may run this long or grow this large before it is stopped (and reported as such).
const limitS = Number(process.env.SLUICEGATE_BENCH_TIMEOUT_S || 1800);
const limitMiB = Number(process.env.SLUICEGATE_BENCH_MAX_MIB || Math.floor((0.75 * totalmem()) / 2 ** 20));

const say = (msg) => console.log(`  ${msg}`);
const int = (n) => Math.round(n).toLocaleString("en-US");
const rel = (p) => relative(process.cwd(), p) || ".";
mkdirSync(work, { recursive: true });

// ---------------------------------------------------------------------------------------- tools

// The interpreter itself rather than a launcher script (pyenv's shim would add its own start-up).
const probe = spawnSync(process.env.PYTHON || "python3", ["-c", "import os, sys; os.wait4; os.posix_spawn; print(sys.executable)"], { encoding: "utf8" });
const hasPython = probe.status === 0 && probe.stdout.trim() !== "";
const python = hasPython ? probe.stdout.trim() : process.env.PYTHON || "python3";
const gnuTime = spawnSync("/usr/bin/time", ["-f", "%e %M", "-o", "/dev/null", "true"], { stdio: "ignore" }).status === 0;
const method = gnuTime ? "GNU time %M" : hasPython ? "python3 os.wait4 ru_maxrss (the timer's few MiB counted)" : "none (no GNU time, no python3)";

const envRef = process.env.SLUICEGATE_REFERENCE_SIM;
const refPath = envRef ? resolve(envRef) : resolve(root, "..", "shared", "reference", "rate_sim.py");
const reference = existsSync(refPath) && hasPython ? refPath : null;

// A first run under this many seconds is a warm-up, not counted (see the top of this file).
const WARMUP_S = 5;

// The timer: runs argv up to TIMES times in a row, each started with posix_spawn (its stdout in
// OUT.i for the i-th timed run) and waited for with os.wait4, appending "WALL_S PEAK_KIB EXIT"
// per timed run to STATS (the peak is the child's ru_maxrss, which counts the timer's own few
// MiB). It starts `true` once first, untimed; a first run under WARMUP_S seconds that exits 0
// or 1 is a warm-up, not written. It stops after a run that exits otherwise, and after the
// first timed run when that took ENOUGH_S seconds or more.
const TIMER = `import os, shutil, sys, time
stats, out, times, warmup, enough = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
argv = sys.argv[6:]
exe = shutil.which(argv[0]) or argv[0]
true = shutil.which("true")
if true:
    os.waitpid(os.posix_spawn(true, [true], os.environ), 0)
def run(i):
    fd = os.open("%s.%d" % (out, i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(fd)
    return wall, ru.ru_maxrss, os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
timed = []
def record(r):
    timed.append(r)
    with open(stats, "a") as f:
        f.write("%.6f %d %d\\n" % r)
first = run(0)
if first[2] not in (0, 1) or first[0] >= warmup:
    record(first)
while len(timed) < times and (not timed or (timed[-1][2] in (0, 1) and timed[0][0] < enough)):
    record(run(len(timed)))`;

function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** The processes under `pid`, to the last one (the measured process, under its wrappers). */
function innermost(pid) {
  const below = childrenOf(pid);
  return below.length === 0 ? [pid] : below.flatMap(innermost);
}

/** Runs argv up to `times` times in a row as the timer does (see TIMER: a warm-up first when
 * the first run takes under `warmupS`; only one timed run when it takes `enoughS` or more; none
 * after a failure), each timed run's stdout in `${outFile}.${i}`, their stderr in errFile; the
 * timed runs' [{ wall, peakKiB, code, stopped }]. With `peak`, each run goes under GNU time
 * for its peak (see the top of this file); without it, only wall times are taken (peakKiB
 * null when python3 times them). */
async function measureRuns(argv, outFile, errFile, peak, times, warmupS, enoughS) {
  if (!hasPython) {
    // Around Node's spawn, one process at a time, to the same rules.
    const runs = [];
    let r = await measureOnce(argv, `${outFile}.0`, errFile, peak);
    if (!ok(r) || r.wall >= warmupS) runs.push(r);
    while (runs.length < times && (runs.length === 0 || (ok(runs.at(-1)) && runs[0].wall < enoughS))) {
      r = await measureOnce(argv, `${outFile}.${runs.length}`, errFile, peak);
      runs.push(r);
    }
    return runs;
  }
  const timerStats = join(work, "timer.txt");
  const timeStats = join(work, "time.txt");
  writeFileSync(timerStats, "");
  writeFileSync(timeStats, "");
  const underTime = gnuTime && peak ? ["/usr/bin/time", "-a", "-f", "%e %M", "-o", timeStats, ...argv] : argv;
  const full = [python, "-c", TIMER, timerStats, outFile, String(times), String(warmupS), String(enoughS), ...underTime];
  const { code, around, stopped } = await guarded(full, "ignore", errFile, true);
  // GNU time's figures of the timed runs are its last lines (a warm-up's come first; it may
  // write "Command exited with non-zero status N" before its figures).
  const lines = (file) =>
    readFileSync(file, "utf8")
      .split("\n")
      .map((l) => /^([\d.]+) (\d+)(?: (\d+))?$/.exec(l.trim()))
      .filter(Boolean);
  const timed = lines(timerStats);
  const peaks = underTime === argv ? [] : lines(timeStats).slice(-timed.length);
  const runs = timed.map((m, i) => ({
    wall: Number(m[1]),
    peakKiB: peaks[i] ? Number(peaks[i][2]) : peak ? Number(m[2]) : null,
    code: Number(m[3]),
    stopped: null,
  }));
  if (stopped && runs.length) runs.at(-1).stopped = stopped;
  if (runs.length === 0) runs.push({ wall: around, peakKiB: null, code: code || 128, stopped: stopped ?? `the timer exited ${code}` });
  return runs;
}

/** One run of argv around Node's spawn (without python3), stdout in outFile; { wall, peakKiB,
 * code, stopped }, the peak from GNU time with `peak` when it is there. */
async function measureOnce(argv, outFile, errFile, peak) {
  const timeStats = join(work, "time.txt");
  writeFileSync(timeStats, "");
  const full = gnuTime && peak ? ["/usr/bin/time", "-f", "%e %M", "-o", timeStats, ...argv] : argv;
  const { code, around, stopped } = await guarded(full, outFile, errFile, false);
  const time = full === argv ? null : /^([\d.]+) (\d+)$/.exec(readFileSync(timeStats, "utf8").trim().split("\n").at(-1) || "");
  return { wall: around, peakKiB: time ? Number(time[2]) : null, code, stopped };
}

/** Runs argv (stdout to outFile, or ignored; stderr to errFile) under the time and memory
 * limits, stopping the measured process itself (the innermost, under `wrapped` wrappers, so
 * they still report) past either; { code, around (s), stopped }. A limit's time counts from
 * the start of argv, all of a timer's runs together. */
function guarded(argv, outFile, errFile, wrapped) {
  const out = outFile === "ignore" ? "ignore" : openSync(outFile, "w");
  const err = openSync(errFile, "w");
  const t0 = process.hrtime.bigint();
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", out, err] });
  if (out !== "ignore") closeSync(out);
  closeSync(err);
  let stopped = null;
  const measured = () => (wrapped ? innermost(child.pid) : [child.pid]);
  const stop = (why) => {
    stopped = why;
    for (const pid of measured()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  };
  const guard = setInterval(() => {
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    if (elapsed > limitS) return stop(`stopped after ${limitS} s (SLUICEGATE_BENCH_TIMEOUT_S)`);
    const rss = measured().reduce((s, p) => s + rssMiB(p), 0);
    if (rss > limitMiB) stop(`stopped at ${int(rss)} MiB resident (SLUICEGATE_BENCH_MAX_MIB=${limitMiB})`);
  }, 100);
  return new Promise((done, fail) => {
    child.on("error", (e) => {
      clearInterval(guard);
      fail(e);
    });
    child.on("close", (code, signal) => {
      clearInterval(guard);
      done({ code: signal ? 128 : code, around: Number(process.hrtime.bigint() - t0) / 1e9, stopped });
    });
  });
}

// ------------------------------------------------------------------------------------ workloads

const DURATION = 3600;
const ENDPOINTS = ["/v2/orders", "/v2/orders/bulk", "/v2/checkout", "/v2/products", "/v2/login", "/v2/account"];
const MIX = [40, 3, 12, 30, 5, 10]; // the usual endpoint mix (relative weights)
// The named clients sit at fixed ranks of the skewed (Zipf s = 1.2) distribution.
const NAMED = {
  0: { name: "price-scraper", mix: [2, 0, 0, 96, 0, 2] },
  1: { name: "mobile-app", mix: [55, 0, 15, 15, 5, 10] },
  2: { name: "partner-erp", mix: [30, 70, 0, 0, 0, 0] },
  3: { name: "checkout-web", mix: [20, 0, 75, 0, 3, 2] },
  6: { name: "cred-stuffer", mix: [0, 0, 0, 0, 100, 0] },
  9: { name: "nightly-sync", mix: [50, 40, 0, 0, 0, 10] },
};
const CLIENTS = 200;

function cumulative(weights) {
  const c = [];
  let s = 0;
  for (const w of weights) {
    s += w;
    c.push(s);
  }
  return c.map((x) => x / s);
}

function pick(cum, r) {
  let lo = 0;
  let hi = cum.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (r < cum[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Writes `rows` rows sorted by t (whole milliseconds) to file, in chunks; with `jitterMs`,
 * each row's time is then moved later by a uniform 0..jitterMs ms (a second seeded PRNG) and
 * the rows stay in the same order, out of time order. */
function writeTrace(file, rows, jitterMs = 0) {
  const jitter = mulberry32(0x7177_e5);
  const rand = mulberry32(0x5eed_2024);
  const clients = [];
  for (let k = 0; k < CLIENTS; k++) {
    const named = NAMED[k];
    let mix = named?.mix;
    if (!mix) {
      const primary = Math.floor(rand() * ENDPOINTS.length);
      mix = MIX.map((w, i) => (i === primary ? w + 150 : w));
    }
    clients.push({ name: named?.name ?? `key-${String(k).padStart(3, "0")}`, cum: cumulative(mix) });
  }
  const zipf = cumulative(clients.map((_, k) => 1 / (k + 1) ** 1.2));
  const index = Object.fromEntries(clients.map((c, k) => [c.name, k]));

  // Traffic per second, in integer weights: a ramp up and down over the hour, partner-erp's
  // bulk burst in second 58 of each minute, and 24 random surges (2–6× for 1–20 s) led by one
  // client (the scraper, the credential stuffer, or anyone).
  const weight = new Array(DURATION);
  const focus = new Array(DURATION).fill(null);
  for (let s = 0; s < DURATION; s++) {
    const phase = s < DURATION / 2 ? s : DURATION - s;
    weight[s] = 1000 + Math.floor((phase * 600) / (DURATION / 2));
  }
  for (let s = 58; s < DURATION; s += 60) {
    weight[s] += 1500;
    focus[s] = { client: index["partner-erp"], share: 0.8, withinMs: 200 };
  }
  for (let b = 0; b < 24; b++) {
    const start = Math.floor(rand() * DURATION);
    const length = 1 + Math.floor(rand() * 20);
    const times = 2 + Math.floor(rand() * 5);
    const r = rand();
    const client = r < 0.4 ? index["price-scraper"] : r < 0.7 ? index["cred-stuffer"] : pick(zipf, rand());
    for (let s = start; s < Math.min(DURATION, start + length); s++) {
      weight[s] *= times;
      focus[s] = { client, share: 0.6, withinMs: 1000 };
    }
  }
  const total = weight.reduce((a, b) => a + b, 0);

  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, "w");
  let chunk = "t,client,endpoint,cost\n";
  let cum = 0;
  let written = 0;
  for (let s = 0; s < DURATION; s++) {
    const before = Math.round((rows * cum) / total);
    cum += weight[s];
    const count = Math.round((rows * cum) / total) - before;
    const f = focus[s];
    const second = [];
    for (let i = 0; i < count; i++) {
      let k;
      let ms;
      if (f && rand() < f.share) {
        k = f.client;
        ms = Math.floor(rand() * f.withinMs);
      } else {
        k = pick(zipf, rand());
        ms = Math.floor(rand() * 1000);
      }
      const e = pick(clients[k].cum, rand());
      const cost = e === 1 ? 2 + Math.floor(rand() * 4) : rand() < 0.03 ? 2 : 1;
      second.push([ms, k, e, cost]);
    }
    second.sort((a, b) => a[0] - b[0]);
    for (const [ms, k, e, cost] of second) {
      const at = s * 1000 + ms + (jitterMs ? Math.floor(jitter() * (jitterMs + 1)) : 0);
      chunk += `${Math.floor(at / 1000)}.${String(at % 1000).padStart(3, "0")},${clients[k].name},${ENDPOINTS[e]},${cost}\n`;
    }
    written += count;
    if (chunk.length > 1 << 20) {
      writeSync(fd, chunk);
      chunk = "";
    }
  }
  writeSync(fd, chunk);
  closeSync(fd);
  if (written !== rows) throw new Error(`generator wrote ${written} rows, not ${rows}`);
  renameSync(tmp, file);
}

/** The policies for a trace of `rows` rows over an hour: limits scale with the traffic. */
function traceConfig(rows) {
  const k = rows / 1_000_000;
  const n = (x) => Math.max(1, Math.round(x * k));
  return {
    service: `Orders API (recorded traffic, ${int(rows)} rows)`,
    duration_s: DURATION,
    capacity_rps: n(520),
    policies: [
      { name: "per-key minute", algorithm: "fixed_window", key: "client", limit: n(1500), window_s: 60 },
      { name: "login", algorithm: "sliding_log", key: "client", limit: n(30), window_s: 60, endpoints: ["/v2/login"] },
      { name: "per endpoint", algorithm: "sliding_counter", key: "endpoint", limit: n(2400), window_s: 10 },
      { name: "global", algorithm: "token_bucket", key: "global", rate: n(500), burst: n(1000) },
    ],
    clients: [
      { name: "price-scraper", kind: "abusive", rps: 1, retry: "immediate" },
      { name: "mobile-app", kind: "legit", rps: 1, retry: "honor" },
      { name: "partner-erp", kind: "legit", rps: 1, retry: "backoff", max_retries: 4 },
      { name: "checkout-web", kind: "legit", rps: 1, retry: "honor" },
      { name: "cred-stuffer", kind: "abusive", rps: 1, retry: "immediate", max_retries: 2 },
      { name: "nightly-sync", kind: "unknown", rps: 1, retry: "backoff" },
    ],
  };
}

/** The trace and its config in target/bench-sim/, generated again only when missing or stale. */
function prepareTrace(rows, label, jitterMs = 0) {
  const csv = join(work, `${label}.csv`);
  const config = join(work, `${label}.json`);
  const stampFile = join(work, `${label}.stamp`);
  // The generator's own source is in the stamp: any change to it makes the traces again.
  const generator = [mulberry32, cumulative, pick, writeTrace].map(String).join("") + JSON.stringify([DURATION, ENDPOINTS, MIX, NAMED, CLIENTS]);
  const stamp = `${createHash("sha256").update(generator).digest("hex").slice(0, 16)}, ${rows} rows, jitter ${jitterMs} ms`;
  const fresh = existsSync(csv) && existsSync(stampFile) && readFileSync(stampFile, "utf8") === `${stamp}, ${statSync(csv).size} bytes`;
  if (fresh) {
    say(`${label}: reusing ${rel(csv)} (${(statSync(csv).size / 2 ** 20).toFixed(0)} MiB)`);
  } else {
    const t0 = performance.now();
    writeTrace(csv, rows, jitterMs);
    writeFileSync(stampFile, `${stamp}, ${statSync(csv).size} bytes`);
    say(
      `${label}: wrote ${rel(csv)}, ${int(rows)} rows${jitterMs ? `, times moved 0–${jitterMs} ms` : ""}, ${(statSync(csv).size / 2 ** 20).toFixed(0)} MiB in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
  }
  writeFileSync(config, `${JSON.stringify(traceConfig(rows), null, 2)}\n`);
  return { csv, config };
}

// ------------------------------------------------------------------------------------- checking

/** The first path where two parsed JSON documents differ, or null. */
function firstDiff(a, b, path = "$") {
  if (a === b) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object" || Array.isArray(a) !== Array.isArray(b)) {
    return `${path}: ${JSON.stringify(a)?.slice(0, 80)} vs ${JSON.stringify(b)?.slice(0, 80)}`;
  }
  if (Array.isArray(a)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = firstDiff(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return a.length === b.length ? null : `${path}: ${a.length} items vs ${b.length}`;
  }
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (!(key in a) || !(key in b)) return `${path}.${key}: ${key in a ? "only in the reference" : "only in sluicegate"}`;
    const d = firstDiff(a[key], b[key], `${path}.${key}`);
    if (d) return d;
  }
  return null;
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ok = (r) => !r.stopped && (r.code === 0 || r.code === 1); // 1 = high findings, still a result

/** Up to `times` timed runs of argv (one when the first takes `enoughS` or more; see
 * measureRuns); the figures and output. With `peakApart`, the timed runs leave GNU time out
 * and one more run takes the peak. The first run's output is left in outFile. */
async function runSide(label, side, argv, outFile, enoughS, times = 3, peakApart = false) {
  const err = `${outFile}.stderr`;
  const outputs = [];
  const runs = await measureRuns(argv, outFile, err, !peakApart || !gnuTime, times, WARMUP_S, enoughS);
  const take = (file) => {
    const text = existsSync(file) ? readFileSync(file, "utf8") : "";
    rmSync(file, { force: true });
    return text;
  };
  const texts = runs.map((_, i) => take(`${outFile}.${i}`));
  for (const [i, r] of runs.entries()) {
    const text = ok(r) ? texts[i] : "";
    if (ok(r) && parse(text) === null) r.noJson = true;
    const peak = r.peakKiB === null ? "" : `, peak ${(r.peakKiB / 1024).toFixed(1)} MiB`;
    const what = r.stopped ? ` (${r.stopped})` : r.noJson ? " (no JSON on stdout)" : "";
    say(`${label}: ${side} run ${i + 1}: ${r.wall.toFixed(r.wall < 1 ? 3 : 2)} s${peak}, exit ${r.code}${what}`);
    if (!ok(r) || r.noJson) {
      const text = readFileSync(err, "utf8").trim();
      if (text) say(`  stderr: ${text.split("\n").slice(-3).join(" | ")}`);
      break;
    }
    outputs.push(text);
  }
  let good = runs.every((r) => ok(r) && !r.noJson);
  if (good && peakApart && gnuTime) {
    const [r] = await measureRuns(argv, `${outFile}.peak`, err, true, 1, 0, Infinity);
    const text = take(`${outFile}.peak.0`);
    const peak = r.peakKiB === null ? "" : `, peak ${(r.peakKiB / 1024).toFixed(1)} MiB`;
    say(`${label}: ${side} run for the peak (under GNU time, not timed): ${r.wall.toFixed(r.wall < 1 ? 3 : 2)} s${peak}, exit ${r.code}`);
    good = ok(r) && text === outputs[0];
    if (!good) say(`${label}: ${side}'s run for the peak ${ok(r) ? "gave another output" : `failed${r.stopped ? ` (${r.stopped})` : ""}`}`);
    runs.forEach((x) => {
      x.peakKiB = r.peakKiB;
    });
  }
  writeFileSync(outFile, outputs[0] ?? "");
  return {
    wall: good ? median(runs.map((r) => r.wall)) : null,
    walls: runs.map((r) => r.wall),
    lastWall: runs.at(-1).wall,
    peakKiB: runs.some((r) => r.peakKiB !== null) ? Math.max(...runs.map((r) => r.peakKiB ?? 0)) : null,
    code: runs.at(-1).code,
    stopped: runs.find((r) => r.stopped)?.stopped ?? null,
    good,
    runs: runs.length,
    stable: outputs.every((o) => o === outputs[0]),
    doc: good ? parse(outputs[0]) : null,
    bytes: good ? outputs[0] : null,
  };
}

// ------------------------------------------------------------------------------------------ run

say(`peak memory: ${method}; wall time: ${hasPython ? "the python3 timer's, around posix_spawn and os.wait4" : "measured around Node's spawn"}`);
if (reference) {
  say(`reference: ${reference} (${python})`);
} else if (!hasPython) {
  say(`reference not run: ${python} not found (needed for rate_sim.py); sluicegate's figures only`);
} else {
  say(`reference simulator not found at ${refPath}; set SLUICEGATE_REFERENCE_SIM=/path/to/rate_sim.py to compare against it. sluicegate's figures only`);
}

// cargo builds into CARGO_TARGET_DIR when it is set.
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
say(`building ${rel(join(targetDir, "release", "sluicegate"))} (cargo build --release --features cli --bin sluicegate)`);
const build = spawnSync("cargo", ["build", "--release", "--features", "cli", "--bin", "sluicegate"], { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
const bin = join(targetDir, "release", "sluicegate");
if (build.status !== 0 || !existsSync(bin)) {
  console.error("bench-sim: cargo build failed; no policy simulator figures");
  process.exit(1);
}

const workloads = [];
{
  const example = [join(root, "examples", "orders-api.json"), join(root, "tests", "fixtures", "sim", "configs", "orders-api.json")].find(existsSync);
  const cfg = JSON.parse(readFileSync(example, "utf8"));
  cfg.duration_s = 3000;
  const config = join(work, "orders-api-x10.json");
  writeFileSync(config, `${JSON.stringify(cfg, null, 2)}\n`);
  say(`orders-api × 10: ${rel(config)} (${rel(example)} with duration_s 3000)`);
  workloads.push({ label: "orders-api × 10", file: "orders-api-x10", args: [config, "--json"], reference: true });
}
{
  const { csv, config } = prepareTrace(1_000_000, "trace-1m");
  workloads.push({ label: "1M-row trace", file: "trace-1m", args: [config, "--trace", csv, "--json"], rows: 1_000_000, reference: true });
}
{
  const { csv, config } = prepareTrace(1_000_000, "trace-1m-jittered", 5000);
  workloads.push({
    label: "1M-row trace, jittered 0–5 s",
    file: "trace-1m-jittered",
    args: [config, "--trace", csv, "--json"],
    rows: 1_000_000,
    reference: true,
  });
}
if (quick) {
  say("10M-row trace: skipped (--quick / SLUICEGATE_BENCH_QUICK=1)");
} else {
  const { csv, config } = prepareTrace(10_000_000, "trace-10m");
  workloads.push({ label: "10M-row trace", file: "trace-10m", args: [config, "--trace", csv, "--json"], rows: 10_000_000, reference: false });
}

/** The figures of several `runSide` results as one (runs pooled: median wall, highest peak). */
function pool(parts) {
  const good = parts.every((p) => p.good);
  const walls = parts.flatMap((p) => p.walls);
  return {
    ...parts.at(-1),
    wall: good ? median(walls) : null,
    walls,
    peakKiB: parts.some((p) => p.peakKiB !== null) ? Math.max(...parts.map((p) => p.peakKiB ?? 0)) : null,
    good,
    runs: walls.length,
    stable: parts.every((p) => p.stable && p.bytes === parts[0].bytes),
  };
}

const results = [];
for (const w of workloads) {
  const out = (side) => join(work, `${w.file}.${side}.json`);
  // In rounds, so that both sides meet the same load on a shared machine (where a sub-second
  // run varies by a third from run to run, and a 30 s one by a fifth): each round runs
  // sluicegate 5 times (once if that takes over a minute) and the reference once. Three
  // rounds (one with --quick), or one when the reference takes under 5 s, whose round then
  // runs it 3 times. The ratio is of the medians; each round's own ratio is printed too.
  const rounds = [];
  for (let i = 0; i < (quick ? 1 : 3); i++) {
    const sg = await runSide(w.label, "sluicegate", [bin, "sim", ...w.args], out("sluicegate"), 60, 5, true);
    const ref = reference && w.reference ? await runSide(w.label, "reference", [python, reference, ...w.args], out("reference"), 5) : null;
    rounds.push({ sg, ref });
    if (!sg.good || !ref?.good || ref.runs > 1 || sg.runs < 5) break;
    if (ref.wall && sg.wall) say(`${w.label}: round ${i + 1}: ${(ref.wall / sg.wall).toFixed(1)}× (reference ${ref.wall.toFixed(2)} s, sluicegate median ${sg.wall.toFixed(3)} s)`);
  }
  const sg = pool(rounds.map((r) => r.sg));
  const ref = rounds[0].ref ? pool(rounds.map((r) => r.ref)) : null;
  const requests = w.rows ?? sg.doc?.requests ?? null;
  const attempts = sg.doc?.clients?.reduce((s, c) => s + c.attempts, 0) ?? null;
  let identical = null;
  if (ref?.good && sg.good) {
    const diff = firstDiff(ref.doc, sg.doc);
    identical = !diff && ref.code === sg.code;
    say(
      `${w.label}: outputs identical: ${identical ? "yes" : "no"}${diff ? ` (first difference at ${diff})` : ""}${ref.code !== sg.code ? ` (exit ${ref.code} vs ${sg.code})` : ""}${identical && ref.bytes === sg.bytes ? ", byte for byte" : ""}`,
    );
  }
  if (!sg.stable) say(`${w.label}: sluicegate's output differed between its runs`);
  results.push({ w, sg, ref, requests, attempts, identical });
}

// ---------------------------------------------------------------------------------------- table

const s2 = (x) => (x === null ? "—" : x.toFixed(x < 1 ? 3 : 2));
const mib = (kib) => (kib === null ? "—" : (kib / 1024).toFixed(1));
const rows = [["workload", "requests", "reference s", "sluicegate s", "ratio", "reference peak MiB", "sluicegate peak MiB", "identical"]];
for (const { w, sg, ref, requests, identical } of results) {
  const refWall = ref?.good ? ref.wall : null;
  rows.push([
    w.label,
    requests === null ? "—" : int(requests),
    ref ? (ref.good ? s2(ref.wall) : ref.stopped ? "stopped" : "failed") : w.reference ? "—" : "not run",
    sg.good ? s2(sg.wall) : sg.stopped ? "stopped" : "failed",
    refWall && sg.good ? `${(refWall / sg.wall).toFixed(1)}×` : "—",
    ref ? mib(ref.peakKiB) : "—",
    mib(sg.peakKiB),
    identical === null ? "—" : identical ? "yes" : "no",
  ]);
}
const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
console.log();
for (const [i, r] of rows.entries()) {
  console.log(`  ${r.map((c, j) => (j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j]))).join("  ")}`);
  if (i === 0) console.log(`  ${widths.map((n) => "-".repeat(n)).join("  ")}`);
}
console.log();
for (const { w, sg, attempts } of results) {
  if (!w.rows) continue;
  if (sg.good) {
    const extra = attempts && attempts !== w.rows ? ` (${int(attempts)} attempts with retries, ${int(attempts / sg.wall)} attempts/s)` : "";
    say(`sluicegate throughput, ${w.label}: ${int(w.rows / sg.wall)} requests/s${extra}, median of ${sg.runs} run(s)`);
  } else {
    say(`sluicegate, ${w.label}: ${sg.stopped ?? `exit ${sg.code}`} after ${s2(sg.lastWall)} s, peak ${mib(sg.peakKiB)} MiB`);
  }
  if (!w.reference) {
    // What the reference would need, scaled linearly from its 1M-row run.
    const one = results.find((r) => r.w.rows === 1_000_000 && r.ref?.good)?.ref;
    const k = w.rows / 1_000_000;
    const guess = one ? `; at its 1M-row pace it would need about ${((one.wall * k) / 60).toFixed(1)} min and ${((one.peakKiB * k) / 2 ** 20).toFixed(1)} GiB` : "";
    say(`reference not run on the ${w.label} (too slow for a routine bench run${guess})`);
  }
}
// A crash, an unexpected exit status or different outputs fail the bench; a run stopped at the
// time or memory limit is only reported.
const failed = (side) => side && !side.good && !side.stopped;
if (results.some((r) => failed(r.sg) || failed(r.ref) || r.identical === false)) process.exitCode = 1;
