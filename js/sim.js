// The policy simulator (sluicegate/sim): the same simulator as `sluicegate sim`, compiled to
// wasm. Every number is computed and printed by the wasm core, as the reference simulator
// prints it; this file turns JSON text into objects and failures into SimulationErrors.
//
// No node:fs here: reading files (a config path, a trace, an `edge_rules` path) is the
// command line's job (js/cli.mjs), so this runs unchanged in browsers and Workers.
import { simCheckConfig, simRun, simSelfTest } from "../pkg-sim/sluicegate.js";

/** Why a simulation gave no result: the simulator's message and its exit status. */
export class SimulationError extends Error {
  constructor(message, exitCode = 2, options = undefined) {
    super(message, options);
    this.name = "SimulationError";
    /** 2: bad input (configuration, trace, no traffic); 1: an input the reference simulator crashes on. */
    this.exitCode = exitCode;
  }
}

function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/** The configuration as JSON text: text is passed as is (numbers keep `20` vs `20.0`), an object is written with JSON.stringify. */
function configText(config) {
  if (typeof config === "string") return config;
  if (config !== null && typeof config === "object") {
    let text;
    try {
      text = JSON.stringify(config);
    } catch (error) {
      throw new TypeError(`config cannot be written as JSON: ${error.message}`);
    }
    return text;
  }
  throw new TypeError(`config must be an object or JSON text, got ${describe(config)}`);
}

function traceText(trace) {
  if (trace === undefined || trace === null) return undefined;
  if (typeof trace !== "string") throw new TypeError(`trace must be CSV text, got ${describe(trace)}`);
  return trace;
}

function traceName(options) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== "object") throw new TypeError(`options must be an object, got ${describe(options)}`);
  const { traceName: name } = options;
  if (name === undefined || name === null) return undefined;
  if (typeof name !== "string" || !name) throw new TypeError(`options.traceName must be a non-empty string, got ${describe(name)}`);
  return name;
}

/** The wasm's failure (an Error with `exitCode`) as a SimulationError. */
function simulationError(error) {
  if (error instanceof SimulationError) return error;
  if (error instanceof Error && (error.exitCode === 1 || error.exitCode === 2)) {
    return new SimulationError(error.message, error.exitCode);
  }
  return error; // not the simulator's refusal (e.g. out of memory): as it is
}

const NON_FINITE = { NaN: Number.NaN, nan: Number.NaN, Infinity: Infinity, inf: Infinity };

/**
 * JSON.parse, also reading the bare NaN / Infinity / -Infinity Python's json.dumps writes
 * for non-finite floats (only ever outside strings).
 */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    const marks = new Map();
    let changed = false;
    const tokens = /"(?:[^"\\]|\\.)*"|(-?)\b(NaN|nan|Infinity|inf)\b/g;
    const quoted = text.replace(tokens, (match, minus, word) => {
      if (word === undefined) return match;
      changed = true;
      const value = minus ? -NON_FINITE[word] : NON_FINITE[word];
      const mark = `\u0000sluicegate-non-finite-${marks.size}`;
      marks.set(mark, value);
      return JSON.stringify(mark);
    });
    if (!changed) throw error;
    return JSON.parse(quoted, (_key, value) => (typeof value === "string" && marks.has(value) ? marks.get(value) : value));
  }
}

function runText(config, trace, options) {
  const text = configText(config);
  const csv = traceText(trace);
  const name = traceName(options);
  try {
    return simRun(text, csv, name);
  } catch (error) {
    throw simulationError(error);
  }
}

/**
 * Simulate `config` (an object or JSON text) on its generated traffic, or on `trace` (CSV
 * text: t,client[,endpoint][,cost]). Returns the report: the `sluicegate sim --json`
 * document, parsed. Throws a SimulationError naming the policy or client and the field.
 */
export function simulate(config, trace = undefined, options = undefined) {
  return parseJson(runText(config, trace, options).report);
}

/**
 * Simulate as `simulate` does and return everything `sluicegate sim` can print: the report
 * (parsed and as the exact `--json` text), the Markdown report, the per-second timeline and
 * the exit status (1 when there are high findings, else 0).
 */
export function runSimulation(config, trace = undefined, options = undefined) {
  const run = runText(config, trace, options);
  return {
    report: parseJson(run.report),
    reportJson: run.report,
    markdown: run.markdown,
    markdownError: run.markdownError === null ? null : simulationError(run.markdownError),
    timeline: parseJson(run.timeline),
    exitCode: run.exitCode,
  };
}

/**
 * Check `config` (an object or JSON text) without simulating: throws the SimulationError
 * `simulate` would throw for it before reading any traffic.
 */
export function checkConfig(config) {
  const text = configText(config);
  try {
    simCheckConfig(text);
  } catch (error) {
    throw simulationError(error);
  }
}

/** The simulator's self-test (`sluicegate sim --self-test`): its output and whether every case passed. */
export function selfTest() {
  const { output, ok } = simSelfTest();
  return { output, ok };
}
