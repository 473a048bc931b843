// `sluicegate replay --rules RULES --trace TRACE.csv [--speed K] [--edge URL] [--tolerance-ms N] [--json]`:
// sends a trace's requests to the real edge worker at their times (the package's own
// development build, started in workerd through Miniflare, or a running one at --edge), runs
// the simulator on the same rules and trace (each request through the edge's own pipeline),
// and prints where the two agree, request by request.
//
// The trace is a CSV with a header, in the simulator's trace format: `t` (seconds), `ip.src`
// (the client's address), and optionally `cf.colo.id` (the data centre; default "SIM"),
// `method` (default GET), `endpoint` (the path; default "/") and `header:<name>` columns (a
// request header it sends). `--speed K` runs the edge's clock K times as fast (the
// development build's SLUICEGATE_CLOCK), which divides every period, block and trace time by
// K; under that clock the edge decides every rule of a request at the instant it arrived.
// A request agrees when the two decide it alike and name the same rules as refusing it in
// shadow (the edge's `Sluicegate-Shadow`: rules with `"enforce": false`, or a share of keys
// that leaves its key out).
import { clientIdentity, validateRules } from "./edge-node.js";
import { progressMeter, replayProgressText } from "./progress.mjs";
import { SimulationError } from "./sim.js";
import "./sim-node.js"; // instantiates the simulator's build
import { simCsvRecords, simEdgeReplay, simParseReplayArgs, simReplayUsage } from "../pkg-sim/sluicegate.js";

export const REPLAY_USAGE = simReplayUsage();

/** The edge's clock at the trace's t = 0: a multiple of every period that divides a day. */
const VIRTUAL_START_MS = 864_000_000_000;
/** Requests sent and not yet answered, at most. */
const MAX_IN_FLIGHT = 32;
/** The header of an answer the edge's rules gave (a refusal), naming the rule. */
const RULE_HEADER = "sluicegate-rule";
/** The header naming the rules that refused the request in shadow: `api;retry-after=7, search;unavailable`. */
const SHADOW_HEADER = "sluicegate-shadow";

/** The rule ids a `Sluicegate-Shadow` value names, in order (none without one); a tenant's limit is named `tenant:<name>`. */
export function shadowRules(value) {
  if (!value) return [];
  return value
    .split(",")
    .map((entry) => entry.split(";")[0].trim())
    .filter((id) => id !== "");
}

class ReplayInputError extends Error {}

/** The edge's clock when it took the request (the development build's `Sluicegate-Clock`, under SLUICEGATE_CLOCK), or null. */
function edgeClock(res) {
  const value = Number(res.headers.get("sluicegate-clock") ?? Number.NaN);
  return Number.isFinite(value) ? value : null;
}

/** `replay`'s options, read by the simulator's argument parser (Rust). */
export function replayArgs(args) {
  try {
    return simParseReplayArgs(args);
  } catch (error) {
    throw new ReplayInputError(error.message);
  }
}

/** The trace's requests: `{ line, t, ip, identity, colo, method, path, headers }`, in file order. */
export function readTrace(text) {
  // Read as the simulator reads a trace; blank lines are records of no fields.
  const [header, ...rows] = simCsvRecords(text).filter((record) => record.length > 0);
  if (!header) throw new ReplayInputError("trace: empty");
  const column = (name) => header.lastIndexOf(name);
  const [t, ip, colo, method, path] = ["t", "ip.src", "cf.colo.id", "method", "endpoint"].map(column);
  if (t < 0 || ip < 0) throw new ReplayInputError(`trace: the header needs t and ip.src columns, got ${header.join(",")}`);
  const headerColumns = header.flatMap((name, i) => (/^header:/i.test(name) ? [[name.slice(7).trim().toLowerCase(), i]] : []));
  return rows.map((cells, i) => {
    const line = i + 2;
    const time = Number(cells[t]);
    if (!(cells[t] ?? "").trim() || !Number.isFinite(time) || time < 0)
      throw new ReplayInputError(`trace line ${line}: t must be a number of seconds ≥ 0, got ${JSON.stringify(cells[t])}`);
    const identity = clientIdentity({ cfConnectingIp: cells[ip] ?? "" });
    if (!identity) throw new ReplayInputError(`trace line ${line}: ip.src is not an IP address: ${JSON.stringify(cells[ip])}`);
    const where = path < 0 ? "/" : cells[path] || "/";
    if (!where.startsWith("/")) throw new ReplayInputError(`trace line ${line}: endpoint must be a path starting with /, got ${JSON.stringify(where)}`);
    const verb = ((method < 0 ? "" : cells[method]) || "GET").trim().toUpperCase();
    if (!/^[A-Z]+$/.test(verb)) throw new ReplayInputError(`trace line ${line}: method must be an HTTP method, got ${JSON.stringify(cells[method])}`);
    const headers = headerColumns.flatMap(([name, col]) => ((cells[col] ?? "") === "" ? [] : [[name, cells[col]]]));
    return { line, t: time, ip: cells[ip], identity: identity.ip, colo: (colo < 0 ? "" : cells[colo]) || "SIM", method: verb, path: where, headers };
  });
}

const csvCell = (value) => `"${String(value).replaceAll('"', '""')}"`;

/**
 * The simulator's decision on each request of `requests`, in their order (the edge's pipeline
 * over `rulesText`): `{ outcome, shadow, timingLimited }`, the outcome as `outcomeOf` names the
 * edge's, `shadow` the rules that refused it in shadow (ids, in order), timing-limited when
 * within `toleranceS` seconds of an instant where timing alone decides.
 */
function simulated(rulesText, requests, toleranceS = 0) {
  const names = [...new Set(requests.flatMap((r) => r.headers.map(([name]) => name)))];
  const head = ["t", "ip.src", "cf.colo.id", "method", "endpoint", ...names.map((n) => `header:${n}`)].join(",");
  const rows = requests.map((r) => {
    const sent = new Map(r.headers);
    return [r.t, r.ip, r.colo, r.method, r.path, ...names.map((n) => sent.get(n) ?? "")].map(csvCell).join(",");
  });
  try {
    const { codes, shadow } = simEdgeReplay(rulesText, [head, ...rows].join("\n"), "trace", toleranceS);
    return Array.from(codes, (code, i) => ({ outcome: SIM_OUTCOMES[code & 127], shadow: shadow[i], timingLimited: code >= 128 }));
  } catch (error) {
    if (error?.name === "SimulationError") throw new ReplayInputError(`simulator: ${error.message}`);
    throw error;
  }
}

/** `simEdgeReplay`'s codes as outcomes: admitted, refused by a rule, by the tenant stage with its status, by a check before the body is read. */
const SIM_OUTCOMES = ["rule", "admitted", "tenant 401", "tenant 413", "tenant 429", "tenant 429", "pre-read"];

/** The checks before the body is read, as `Sluicegate-Scope` names them. */
const PRE_READ_SCOPES = new Set(["ip", "node", "source"]);

/** The edge's answer as an outcome: refused by a rule (its answer names it, whatever status it answers with), by the tenant stage (`Sluicegate-Scope: tenant`, with its status), by a check before the body is read (`Sluicegate-Scope: ip | node | source`), else admitted; another scope is none of them (null). */
function outcomeOf({ status, rule, scope }) {
  if (rule) return "rule";
  if (scope === "tenant") return `tenant ${status}`;
  if (PRE_READ_SCOPES.has(scope)) return "pre-read";
  return scope ? null : "admitted";
}

/**
 * Sends every request at its time, without waiting for earlier answers; the status, the send
 * time and the edge's clock when it decided, of each.
 */
async function send(requests, { fetchOne, speed, startRealMs, onProgress }) {
  const results = new Array(requests.length);
  const order = requests.map((_, i) => i).sort((a, b) => requests[a].t - requests[b].t);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
  const sends = [];
  // At most MAX_IN_FLIGHT at once: a burst waits (and is sent late, at the instant reported)
  // rather than flooding the edge's socket.
  let inFlight = 0;
  const freed = [];
  for (const i of order) {
    const due = startRealMs + (requests[i].t * 1000) / speed;
    if (due - Date.now() > 1) await sleep(due - Date.now() - 1);
    while (inFlight >= MAX_IN_FLIGHT) await new Promise((resolve) => freed.push(resolve));
    inFlight++;
    const sentAt = Date.now();
    onProgress?.(sends.length + 1, requests.length);
    sends.push(
      fetchOne(requests[i])
        .finally(() => {
          inFlight--;
          freed.shift()?.();
        })
        .then(
          ({ status, rule, scope, shadow, clockMs }) => {
            results[i] = { status, rule, scope, shadow, sentAtMs: sentAt, clockMs, lateMs: Math.max(0, Math.round(sentAt - due)) };
          },
          (error) => {
            results[i] = {
              status: 0,
              error: `${error.message}${error.cause ? ` (${error.cause.code ?? error.cause.message})` : ""}`,
              sentAtMs: sentAt,
              clockMs: null,
              lateMs: Math.max(0, Math.round(sentAt - due)),
            };
          },
        ),
    );
  }
  await Promise.all(sends);
  return results;
}

/** A trace request's headers: its address and the headers it names (a `content-length` only with the body it declares: see `requestBody`). */
function requestHeaders(r) {
  const named = requestBody(r) === undefined ? r.headers.filter(([name]) => name !== "content-length") : r.headers;
  return { ...Object.fromEntries(named), "cf-connecting-ip": r.ip };
}

/** The body a trace request sends: as many bytes as its `content-length` says (a method that carries one), else none. */
function requestBody(r) {
  const length = Number(r.headers.find(([name]) => name === "content-length")?.[1] ?? Number.NaN);
  if (!Number.isSafeInteger(length) || length < 0 || r.method === "GET" || r.method === "HEAD") return undefined;
  return new Uint8Array(length).fill(0x61);
}

/** What the edge's answer says of its decision: its status, the rule that refused it, the scope of a refusal by another stage, and the rules that refused it in shadow. */
function answerOf(res) {
  return { status: res.status, rule: res.headers.get(RULE_HEADER), scope: res.headers.get("sluicegate-scope"), shadow: shadowRules(res.headers.get(SHADOW_HEADER)) };
}

/** Shadow refusals per rule id, counted from rows' lists. */
function countByRule(lists) {
  const byRule = {};
  for (const list of lists) for (const id of list) byRule[id] = (byRule[id] ?? 0) + 1;
  return byRule;
}

/** Replays `traceText` against the edge and the simulator; the comparison. */
export async function replay({ rulesText, traceText, speed = 1, edge = null, toleranceMs = 5, onProgress = undefined }) {
  const problems = (() => {
    try {
      validateRules(rulesText);
      return null;
    } catch (error) {
      return error.message;
    }
  })();
  if (problems) throw new ReplayInputError(`rules: ${problems}`);
  const requests = readTrace(traceText);
  simulated(rulesText, requests); // the simulator's objections to the trace come before any request is sent

  let started = null;
  let fetchOne;
  if (edge === null) {
    const { startEdge, MISSING_REQUIREMENT } = await import("./testing.js");
    const startRealMs = Date.now() + 1_500;
    let edgeStarted;
    try {
      edgeStarted = await startEdge({ rules: rulesText, vars: { SLUICEGATE_CLOCK: `${speed},${startRealMs},${VIRTUAL_START_MS}` } });
    } catch (error) {
      // what this machine lacks to start one (Node, miniflare): say so, and the way around it
      if (error?.code === MISSING_REQUIREMENT) throw new ReplayInputError(`${error.message}; or pass --edge URL for a running edge`);
      throw error;
    }
    started = { edge: edgeStarted, startRealMs };
    fetchOne = async (r) => {
      const res = await started.edge.fetch(r.path, { method: r.method, headers: requestHeaders(r), body: requestBody(r), cf: { colo: r.colo } });
      await res.arrayBuffer();
      return { ...answerOf(res), clockMs: edgeClock(res) };
    };
  } else {
    if (new Set(requests.map((r) => r.colo)).size > 1) throw new ReplayInputError("a running edge (--edge) decides the colo itself: its trace must have one colo");
    const base = new URL(edge);
    fetchOne = async (r) => {
      const res = await fetch(new URL(r.path, base), { method: r.method, headers: requestHeaders(r), body: requestBody(r) });
      await res.arrayBuffer();
      return { ...answerOf(res), clockMs: null };
    };
  }
  let results;
  const startRealMs = started?.startRealMs ?? Date.now() + 200;
  try {
    results = await send(requests, { fetchOne, speed, startRealMs, onProgress });
  } finally {
    await started?.edge.close();
  }

  // The simulator replays the requests at the instants the edge saw them (its clock, which it
  // reports, else the send time), so a late send cannot make the two disagree about what follows.
  // A request that failed on the way is left out: the edge most likely never counted it.
  const sent = requests.flatMap((r, i) => {
    const { clockMs, sentAtMs, error } = results[i];
    if (error) return [];
    const ms = clockMs === null ? (sentAtMs - startRealMs) * speed : clockMs - VIRTUAL_START_MS;
    return [{ ...r, index: i, t: Math.max(0, ms) / 1000 }];
  });
  const toleranceS = (toleranceMs * speed) / 1000;
  const sim = simulated(rulesText, sent, toleranceS);
  const lateness = results.map((x) => x.lateMs).sort((x, y) => x - y);
  const report = {
    requests: requests.length,
    speed,
    toleranceMs,
    lateMs: { p50: lateness[lateness.length >> 1] ?? 0, max: lateness.at(-1) ?? 0 },
    errors: [],
    agree: 0,
    compared: 0,
    timingLimited: 0,
    timingLimitedAgree: 0,
    disagreements: [],
    edge: { admitted: 0, refused: 0, other: 0 },
    simulator: { admitted: 0, refused: 0 },
  };
  results.forEach((x, i) => {
    if (x.error) report.errors.push({ line: requests[i].line, error: x.error });
  });
  // Shadow refusals, reported when either side made one (a trace without rules in shadow
  // reports as it always did).
  const edgeShadow = sent.map((r) => results[r.index].shadow);
  if (edgeShadow.some((list) => list.length) || sim.some(({ shadow }) => shadow.length))
    report.shadow = {
      edge: { requests: edgeShadow.filter((list) => list.length).length, byRule: countByRule(edgeShadow) },
      simulator: { requests: sim.filter(({ shadow }) => shadow.length).length, byRule: countByRule(sim.map(({ shadow }) => shadow)) },
    };
  sent.forEach((r, i) => {
    const { status, shadow: edgeShadowRules } = results[r.index];
    const edge = outcomeOf(results[r.index]);
    const { outcome, shadow, timingLimited } = sim[i];
    report.edge[edge === null ? "other" : edge === "admitted" ? "admitted" : "refused"]++;
    report.simulator[outcome === "admitted" ? "admitted" : "refused"]++;
    const sameShadow = edgeShadowRules.join(",") === shadow.join(",");
    const same = edge === outcome && sameShadow;
    if (timingLimited) {
      report.timingLimited++;
      if (same) report.timingLimitedAgree++;
      return;
    }
    report.compared++;
    if (same) report.agree++;
    else
      report.disagreements.push({
        line: r.line,
        t: requests[r.index].t,
        sentT: r.t,
        client: `${r.identity} @ ${r.colo}`,
        method: r.method,
        path: r.path,
        edge: status,
        simulator: outcome,
        ...(sameShadow ? {} : { edgeShadow: edgeShadowRules, simulatorShadow: shadow }),
      });
  });
  report.share = report.compared ? report.agree / report.compared : 1;
  report.edge.other += report.errors.length;
  return report;
}

/** The report as text. */
export function describe(report) {
  const pct = (x) => `${(100 * x).toFixed(2)} %`;
  const lines = [
    `replay: ${report.requests} requests at ${report.speed}× speed, sent ${report.lateMs.p50} ms late at the median (at most ${report.lateMs.max} ms); the simulator replays each at the instant the edge decided it`,
    `  timing-limited: within ${report.toleranceMs} ms (real time; ${(report.toleranceMs * report.speed) / 1000} s of trace time) of a window or block boundary, or a tenant's refill`,
    `  edge:       ${report.edge.admitted} admitted, ${report.edge.refused} refused${report.edge.other ? `, ${report.edge.other} failed` : ""}`,
    `  simulator:  ${report.simulator.admitted} admitted, ${report.simulator.refused} refused`,
  ];
  if (report.shadow) {
    const side = ({ requests, byRule }) =>
      `${requests} requests refused in shadow (${
        Object.entries(byRule)
          .map(([id, n]) => `${id} ${n}`)
          .join(", ") || "none"
      })`;
    lines.push(`  shadow:     edge ${side(report.shadow.edge)}; simulator ${side(report.shadow.simulator)}`);
  }
  lines.push(
    `  agreement:  ${report.agree} of ${report.compared} (${pct(report.share)}) outside the timing-limited; ${report.timingLimitedAgree} of ${report.timingLimited} timing-limited agree`,
  );
  if (report.errors.length)
    lines.push(`  ${report.errors.length} requests failed on the way (left out of the comparison), e.g. line ${report.errors[0].line}: ${report.errors[0].error}`);
  const named = (list) => (list.length ? list.join(" ") : "none");
  const shadowed = (d, side) => (d.edgeShadow ? ` (shadow: ${named(side === "edge" ? d.edgeShadow : d.simulatorShadow)})` : "");
  for (const d of report.disagreements.slice(0, 20))
    lines.push(
      `  line ${d.line}, t=${d.t} s (sent at ${d.sentT} s), ${d.client} ${d.method} ${d.path}: edge ${d.edge}${shadowed(d, "edge")}, simulator ${d.simulator}${shadowed(d, "simulator")}`,
    );
  if (report.disagreements.length > 20) lines.push(`  … and ${report.disagreements.length - 20} more`);
  return `${lines.join("\n")}\n`;
}

/** The command: 0 when every request outside the timing-limited agrees, 1 when one does not, 2 for bad input. */
export async function replayCommand(args, { readText }) {
  let options;
  // a run of more than a second shows how far it is, on a terminal's stderr
  const meter = progressMeter(process.stderr, undefined, replayProgressText);
  try {
    options = replayArgs(args);
    const report = await replay({ ...options, rulesText: readText(options.rules), traceText: readText(options.trace), onProgress: meter.onProgress }).finally(meter.clear);
    process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : describe(report));
    return report.agree === report.compared && report.errors.length === 0 ? 0 : 1;
  } catch (error) {
    if (!(error instanceof ReplayInputError || error instanceof SimulationError)) throw error;
    process.stderr.write(`${REPLAY_USAGE}\nsluicegate replay: error: ${error.message}\n`);
    return 2;
  }
}
