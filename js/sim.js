// The policy simulator (sluicegate/sim): the same simulator as `sluicegate sim`, compiled to
// wasm. Every number is computed and printed by the wasm core, as the reference simulator
// prints it; this file turns JSON text into objects and failures into SimulationErrors.
//
// No node:fs here: reading files (a config path, a trace, an `edge_rules` path) is the
// command line's job (js/cli.mjs), so this runs unchanged in browsers and Workers.
import { simCheckConfig, simCompare, simEdgeRulesPath, simInlineEdgeRules, simRun, simSelfTest } from "../pkg-sim/sluicegate.js";
/** @import { SimCompareText, SimComparison, SimConfig, SimFailure, SimReport, SimRunText, SimTimeline } from "../pkg-sim/sluicegate.js" */

/**
 * @typedef {object} SimulationOptions
 * @property {string} [traceName] What trace errors call the trace (`"traces/x.csv line 4: …"`); default `"trace"`.
 * @property {number} [maxRequests]
 * The most requests the configured clients may generate (default 50,000,000; `Infinity`
 * for no ceiling): a config estimated past it is refused with a SimulationError (exit
 * status 2) naming the client and the estimate, before it runs. A trace is not estimated.
 * @property {number} [reorderWindow]
 * How far a trace's rows may lag behind the newest row read and still stream, in seconds
 * (default 10; `Infinity` holds the whole trace): `--reorder-window`. The results are the
 * same whatever it is.
 * @property {(done: number, total: number | null) => void} [onProgress]
 * Called every 65,536 requests with the requests replayed so far and, when it is known
 * beforehand, how many there will be (generated traffic: the estimate, never below `done`;
 * `null` for a trace, read as it streams). What it throws is thrown once the run ends (it is
 * not called again).
 */

/**
 * Everything `sluicegate sim` can print for one configuration.
 * @typedef {object} SimulationRun
 * @property {SimReport} report
 * @property {string} reportJson The `--json` document as text, byte for byte (`300.0` stays `300.0`).
 * @property {string | null} markdown The Markdown report; `null` when writing it fails (see `markdownError`).
 * @property {SimulationError | null} markdownError Why the Markdown report could not be written (where the reference simulator crashes), else `null`.
 * @property {SimTimeline} timeline
 * @property {0 | 1} exitCode 1 when there are high findings, else 0 (the command line's exit status).
 */

/**
 * Two configurations on the same traffic.
 * @typedef {object} SimulationComparison
 * @property {SimulationRun} before
 * @property {SimulationRun} after
 * @property {SimComparison} comparison
 * @property {string} comparisonJson The comparison as the command line prints it with `--json`.
 * @property {string} review The filled rate-limit review (Markdown), as `--compare AFTER --review` prints it (from `options.reviewTemplate` when given).
 * @property {string} markdown The short comparison (Markdown), as `--compare AFTER` prints it.
 * @property {0 | 1} exitCode 1 when the after run has high findings, else 0.
 */

/**
 * @typedef {object} SimulationComparisonOptions
 * @property {string} [traceName] What trace errors call the trace (`"traces/x.csv line 4: …"`); default `"trace"`.
 * @property {number} [maxRequests]
 * The most requests the configured clients may generate (default 50,000,000; `Infinity`
 * for no ceiling): a config estimated past it is refused with a SimulationError (exit
 * status 2) naming the client and the estimate, before it runs. A trace is not estimated.
 * @property {number} [reorderWindow]
 * How far a trace's rows may lag behind the newest row read and still stream, in seconds
 * (default 10; `Infinity` holds the whole trace): `--reorder-window`. The results are the
 * same whatever it is.
 * @property {string} [beforeName] What errors and the review call each side (a file name); default `the before config`, `the after config`.
 * @property {string} [afterName]
 * @property {string} [reviewTemplate]
 * The review's template (Markdown with `{{placeholders}}`, as `--review-template PATH` reads
 * it) instead of the built-in `templates/rate-limit-review.md`. An unknown placeholder is
 * refused with a SimulationError (exit status 2) before the runs, naming it, its line and the
 * placeholders there are.
 * @property {string} [reviewTemplateName] What that error calls the template (a file name); default `the review template`.
 * @property {(done: number, total: number | null, side: "before" | "after") => void} [onProgress]
 * `SimulationOptions.onProgress`, also told which run it is about: `before`, then `after`.
 */

/** Why a simulation gave no result. The message names the policy or client and the field. */
export class SimulationError extends Error {
  /** @readonly @type {"SimulationError"} */
  name = "SimulationError";
  /**
   * @param {string} message
   * @param {1 | 2} [exitCode]
   * @param {ErrorOptions & { field?: string | null }} [options]
   */
  constructor(message, exitCode = 2, options = undefined) {
    super(message, options);
    /** 2: bad input (configuration, trace, no traffic); 1: an input the reference simulator crashes on. */
    this.exitCode = exitCode;
    /**
     * The configuration field refused — unknown (a typo, most likely) or required and left
     * out — as a path: `policies[1].rsp`, `durration_s`; else `null`.
     * @type {string | null}
     */
    this.field = options?.field ?? null;
  }
}

/** @param {unknown} value */
function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/**
 * The configuration as JSON text: text is passed as is (numbers keep `20` vs `20.0`), an object is written with JSON.stringify.
 * @param {SimConfig | string} config
 * @returns {string}
 */
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

/**
 * @param {string | null | undefined} trace
 * @returns {string | undefined}
 */
function traceText(trace) {
  if (trace === undefined || trace === null) return undefined;
  if (typeof trace !== "string") throw new TypeError(`trace must be CSV text, got ${describe(trace)}`);
  return trace;
}

/**
 * @param {SimulationOptions | SimulationComparisonOptions | null | undefined} options
 * @returns {string | undefined}
 */
function traceName(options) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== "object") throw new TypeError(`options must be an object, got ${describe(options)}`);
  const { traceName: name } = options;
  if (name === undefined || name === null) return undefined;
  if (typeof name !== "string" || !name) throw new TypeError(`options.traceName must be a non-empty string, got ${describe(name)}`);
  return name;
}

/**
 * The wasm's failure (an Error with `exitCode`) as a SimulationError.
 * @overload
 * @param {SimFailure} error
 * @returns {SimulationError}
 */
/**
 * Anything else thrown: as it is.
 * @overload
 * @param {unknown} error
 * @returns {unknown}
 */
/**
 * @param {{ exitCode?: unknown, field?: unknown } | null | undefined} error what was thrown (typed so, rather than unknown, that `error.exitCode` can be read after `instanceof Error`)
 * @returns {unknown}
 */
function simulationError(error) {
  if (error instanceof SimulationError) return error;
  if (error instanceof Error && (error.exitCode === 1 || error.exitCode === 2)) {
    return new SimulationError(error.message, error.exitCode, { field: typeof error.field === "string" ? error.field : null });
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

/**
 * @param {SimulationOptions | SimulationComparisonOptions | null | undefined} options
 * @returns {number | undefined}
 */
function maxRequests(options) {
  if (options === undefined || options === null) return undefined;
  const { maxRequests: max } = options;
  if (max === undefined || max === null) return undefined;
  if (typeof max !== "number" || !(max >= 1) || (Number.isFinite(max) && !Number.isInteger(max))) {
    throw new TypeError(`options.maxRequests must be a whole number, 1 or more (or Infinity), got ${describe(max)}`);
  }
  return max;
}

/**
 * options.reorderWindow: seconds, 0 or more (Infinity: hold the whole trace).
 * @param {SimulationOptions | SimulationComparisonOptions | null | undefined} options
 * @returns {number | undefined}
 */
function reorderWindow(options) {
  const window = options?.reorderWindow;
  if (window === undefined || window === null) return undefined;
  if (typeof window !== "number" || !(window >= 0)) {
    throw new TypeError(`options.reorderWindow must be a number of seconds, 0 or more, got ${describe(window)}`);
  }
  return window;
}

/**
 * options.onProgress: a function, or absent.
 * @template {Function} F
 * @param {{ onProgress?: F | null } | null | undefined} options
 * @returns {F | undefined}
 */
function onProgress(options) {
  const report = options?.onProgress;
  if (report === undefined || report === null) return undefined;
  if (typeof report !== "function") throw new TypeError(`options.onProgress must be a function, got ${describe(report)}`);
  return report;
}

/**
 * @param {SimConfig | string} config
 * @param {string | null | undefined} trace
 * @param {SimulationOptions | undefined} options
 * @returns {SimRunText}
 */
function runText(config, trace, options) {
  const text = configText(config);
  const csv = traceText(trace);
  const name = traceName(options);
  const max = maxRequests(options);
  const window = reorderWindow(options);
  const progress = onProgress(options);
  try {
    return simRun(text, csv, name, max, window, progress);
  } catch (error) {
    throw simulationError(error);
  }
}

/**
 * Simulate `config` (an object, or JSON text: text keeps `20` and `20.0` apart as the
 * reference does) on its generated traffic, or on `trace` (CSV text:
 * `t,client[,endpoint][,cost]`). Returns the `--json` report. Throws a `SimulationError`
 * on bad input, a `TypeError` for arguments of the wrong type.
 * @param {SimConfig | string} config
 * @param {string | null} [trace]
 * @param {SimulationOptions} [options]
 * @returns {SimReport}
 */
export function simulate(config, trace = undefined, options = undefined) {
  return parseJson(runText(config, trace, options).report);
}

/**
 * `simulate`, returning the report, the Markdown report, the timeline and the exit status.
 * @param {SimConfig | string} config
 * @param {string | null} [trace]
 * @param {SimulationOptions} [options]
 * @returns {SimulationRun}
 */
export function runSimulation(config, trace = undefined, options = undefined) {
  return parseRun(runText(config, trace, options));
}

/**
 * options.beforeName / options.afterName / options.reviewTemplateName: what errors and the review call a side or the template.
 * @param {SimulationComparisonOptions | null | undefined} options
 * @param {"beforeName" | "afterName" | "reviewTemplateName"} key
 * @returns {string | undefined}
 */
function sideName(options, key) {
  const name = options?.[key];
  if (name === undefined || name === null) return undefined;
  if (typeof name !== "string" || !name) throw new TypeError(`options.${key} must be a non-empty string, got ${describe(name)}`);
  return name;
}

/**
 * options.reviewTemplate: the review's template text, or absent (the built-in one).
 * @param {SimulationComparisonOptions | null | undefined} options
 * @returns {string | undefined}
 */
function reviewTemplate(options) {
  const template = options?.reviewTemplate;
  if (template === undefined || template === null) return undefined;
  if (typeof template !== "string") throw new TypeError(`options.reviewTemplate must be Markdown text, got ${describe(template)}`);
  return template;
}

/**
 * A run's text as runSimulation returns it, parsed.
 * @param {SimRunText} run
 * @returns {SimulationRun}
 */
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
 * Compare `before` (today's policies) and `after` (the proposed ones) on the same traffic:
 * each one's own clients with one seed and `duration_s` (they must agree), or `trace`.
 * Throws a `SimulationError` (exit status 2) naming the side, or the mismatch.
 * @param {SimConfig | string} before
 * @param {SimConfig | string} after
 * @param {string | null} [trace]
 * @param {SimulationComparisonOptions} [options]
 * @returns {SimulationComparison}
 */
export function compareSimulations(before, after, trace = undefined, options = undefined) {
  const beforeText = configText(before);
  const afterText = configText(after);
  const csv = traceText(trace);
  const name = traceName(options);
  const max = maxRequests(options);
  const beforeName = sideName(options, "beforeName");
  const afterName = sideName(options, "afterName");
  const template = reviewTemplate(options);
  const templateName = sideName(options, "reviewTemplateName");
  const progress = onProgress(options);
  /** @type {SimCompareText} */
  let out;
  try {
    out = simCompare(beforeText, afterText, csv, name, max, reorderWindow(options), [beforeName, afterName, templateName], template, progress);
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
 * Check `config` without simulating: throws the `SimulationError` `simulate` would throw for it before reading any traffic.
 * @param {SimConfig | string} config
 * @returns {void}
 */
export function checkConfig(config) {
  const text = configText(config);
  try {
    simCheckConfig(text);
  } catch (error) {
    throw simulationError(error);
  }
}

/**
 * The simulator's self-test (`sluicegate sim --self-test`): its printed lines and whether every case passed.
 * @returns {{ output: string; ok: boolean }}
 */
export function selfTest() {
  const { output, ok } = simSelfTest();
  return { output, ok };
}

// ------------------------------------------------------------ edge_rules given as a path

/**
 * The `edge_rules` path of a configuration given as JSON text, or null (no `edge_rules`, the
 * rules object itself, or text that is not a JSON object).
 * @param {string} configText
 * @returns {string | null}
 */
export function edgeRulesPath(configText) {
  if (typeof configText !== "string") throw new TypeError(`configText must be JSON text, got ${describe(configText)}`);
  return simEdgeRulesPath(configText) ?? null;
}

/**
 * The configuration's text with its `edge_rules` value replaced by `rulesText` (the rules
 * file's JSON text), everything else as written. Rules that are not JSON throw a
 * SimulationError (exit status 2) naming `where`.
 * @param {string} configText
 * @param {string} rulesText
 * @param {string} where
 * @returns {string}
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
