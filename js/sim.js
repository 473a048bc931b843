// The policy simulator (sluicegate/sim): the same simulator as `sluicegate sim`, compiled to
// wasm. Every number is computed and printed by the wasm core, as the reference simulator
// prints it; this file turns JSON text into objects and failures into SimulationErrors.
//
// No node:fs here: reading files (a config path, a trace, an `edge_rules` path) is the
// command line's job (js/cli.mjs), so this runs unchanged in browsers and Workers.
import { simCheckConfig, simCompare, simEdgeRulesPath, simInlineEdgeRules, simRun, simSelfTest } from "../pkg-sim/sluicegate.js";

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

function maxRequests(options) {
  if (options === undefined || options === null) return undefined;
  const { maxRequests: max } = options;
  if (max === undefined || max === null) return undefined;
  if (typeof max !== "number" || !(max >= 1) || (Number.isFinite(max) && !Number.isInteger(max))) {
    throw new TypeError(`options.maxRequests must be a whole number, 1 or more (or Infinity), got ${describe(max)}`);
  }
  return max;
}

/** options.reorderWindow: seconds, 0 or more (Infinity: hold the whole trace). */
function reorderWindow(options) {
  const window = options?.reorderWindow;
  if (window === undefined || window === null) return undefined;
  if (typeof window !== "number" || !(window >= 0)) {
    throw new TypeError(`options.reorderWindow must be a number of seconds, 0 or more, got ${describe(window)}`);
  }
  return window;
}

function runText(config, trace, options) {
  const text = configText(config);
  const csv = traceText(trace);
  const name = traceName(options);
  const max = maxRequests(options);
  const window = reorderWindow(options);
  try {
    return simRun(text, csv, name, max, window);
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
  return parseRun(runText(config, trace, options));
}

/** options.beforeName / options.afterName: what errors and the review call a side. */
function sideName(options, key) {
  const name = options?.[key];
  if (name === undefined || name === null) return undefined;
  if (typeof name !== "string" || !name) throw new TypeError(`options.${key} must be a non-empty string, got ${describe(name)}`);
  return name;
}

/** A run's text as runSimulation returns it, parsed. */
function parseRun(run) {
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
 * Compare two configurations (objects or JSON texts: `before`, today's policies, and `after`,
 * the proposed ones) on the same traffic: each one's own clients with one seed and duration
 * (they must agree), or `trace` (CSV text). Returns both runs as runSimulation gives them,
 * the comparison (`sluicegate sim BEFORE --compare AFTER --json`, parsed), the filled
 * rate-limit review (`--review`, Markdown), the short comparison, and the exit status judged
 * on the after run. Throws a SimulationError naming the side (`the after config: …`) or the
 * mismatch.
 */
export function compareSimulations(before, after, trace = undefined, options = undefined) {
  const beforeText = configText(before);
  const afterText = configText(after);
  const csv = traceText(trace);
  const name = traceName(options);
  const max = maxRequests(options);
  const beforeName = sideName(options, "beforeName");
  const afterName = sideName(options, "afterName");
  let out;
  try {
    out = simCompare(beforeText, afterText, csv, name, max, reorderWindow(options), [beforeName, afterName]);
  } catch (error) {
    throw simulationError(error);
  }
  return {
    before: parseRun(out.before),
    after: parseRun(out.after),
    comparison: parseJson(out.comparison),
    comparisonJson: out.comparison,
    review: out.review,
    markdown: out.markdown,
    exitCode: out.exitCode,
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

// ------------------------------------------------------------ edge_rules given as a path

/**
 * The `edge_rules` path of a configuration given as JSON text (a string value), or null: no
 * `edge_rules`, the rules object itself, or text that is not a JSON object (the simulator
 * then says what is wrong with it).
 */
export function edgeRulesPath(configText) {
  if (typeof configText !== "string") throw new TypeError(`configText must be JSON text, got ${describe(configText)}`);
  return simEdgeRulesPath(configText) ?? null;
}

/**
 * The configuration's text with its `edge_rules` path replaced by `rulesText` (the rules
 * file's JSON text), as the command line reads a path: numbers keep their spelling (`20` and
 * `20.0` are different to the simulator). Rules that are not JSON throw a SimulationError
 * (exit status 2) saying `edge_rules: <where>: invalid JSON: ...`.
 */
export function inlineEdgeRules(configText, rulesText, where) {
  for (const [name, value] of [
    ["configText", configText],
    ["rulesText", rulesText],
    ["where", where],
  ]) {
    if (typeof value !== "string") throw new TypeError(`${name} must be a string, got ${describe(value)}`);
  }
  try {
    return simInlineEdgeRules(configText, rulesText, where);
  } catch (error) {
    throw simulationError(error);
  }
}
