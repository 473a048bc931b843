#!/usr/bin/env node
// `sluicegate sim` on Node (`npx sluicegate sim CONFIG [--trace CSV] [--max-requests N] [--json] [--self-test]`,
// `npx sluicegate sim BEFORE --compare AFTER [--trace CSV] [--review [--review-template PATH] | --json]`):
// the native command line's `sim`, with the simulator in wasm. Same arguments (parsed as
// the reference's argparse parser reads them), same output, same exit status: 0 no high
// findings, 1 high findings, 2 bad input. `check-rules` is the native one's too, through
// the edge's wasm build (the same validator and the same summary). A first argument that is no
// command is named with the command it is closest to, as the native command line names it.
//
// A configuration whose `edge_rules` is a path gets that file (relative to the
// configuration's directory) in its place before simulating. A run longer than a second
// shows its progress on stderr when that is a terminal (js/progress.mjs).
import { readFileSync } from "node:fs";
import path from "node:path";
import { progressMeter } from "./progress.mjs";
import { SimulationError, checkConfig, compareSimulations, edgeRulesPath, inlineEdgeRules, runSimulation, selfTest } from "./sim-node.js";
// the simulator's own argument parser, usage line and option help (internal to the package)
import { cliUnknownCommand, simHelp, simParseArgs, simUsage } from "../pkg-sim/sluicegate.js";

const USAGE = `usage: sluicegate check-rules FILE
       sluicegate sim CONFIG [--trace CSV [--reorder-window SECONDS]] [--max-requests N] [--json] [--self-test]
       sluicegate sim BEFORE --compare AFTER [--trace CSV] [--max-requests N] [--review [--review-template PATH] | --json]
       sluicegate replay --rules RULES --trace CSV [--speed K] [--edge URL] [--tolerance-ms N] [--json]

  check-rules FILE   validate an edge rules file (JSON); exits 1 naming every problem
${simHelp()}
  replay             send a trace (t,ip.src[,cf.colo.id][,endpoint]) to the edge worker at its times
                     and compare every answer with the simulator's; exits 0 (all agree outside
                     the timing-limited), 1 (a disagreement) or 2 (bad input)
    --speed K        run the edge's clock K times as fast (the worker this command starts)
    --edge URL       a running edge instead of starting the package's own (which needs
                     Node >= 22.12 and miniflare@4)
    --tolerance-ms N requests within N ms (real time) of a window or block boundary are
                     timing-limited, reported apart (default 5)`;

const SIM_USAGE = simUsage();

/** strerror's words, where Node's differ or are missing. */
const STRERROR = {
  ENOENT: "No such file or directory",
  EACCES: "Permission denied",
  EISDIR: "Is a directory",
  ENOTDIR: "Not a directory",
};

/** Why a read failed, worded as the native command line words it ("No such file or directory (os error 2)"). */
function reason(error) {
  if (typeof error?.errno !== "number") return error?.message ?? String(error);
  const described = /^[A-Z0-9_]+: (.*?), [a-z_]+(?: '.*')?$/s.exec(error.message ?? "");
  const text = STRERROR[error.code] ?? (described ? described[1].charAt(0).toUpperCase() + described[1].slice(1) : error.message);
  return `${text} (os error ${Math.abs(error.errno)})`;
}

/** A text file, as UTF-8 (invalid UTF-8 is refused, as the native command line refuses it). */
function readText(file) {
  let bytes;
  try {
    bytes = readFileSync(file);
  } catch (error) {
    throw new SimulationError(`${file}: cannot read: ${reason(error)}`, 2);
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new SimulationError(`${file}: cannot read: stream did not contain valid UTF-8`, 2);
  }
}

/**
 * The configuration's text with a string `edge_rules` (a path, relative to the
 * configuration's directory) replaced by that file's JSON; everything else as written, so
 * numbers keep their spelling (`20` and `20.0` are different to the simulator).
 */
function withEdgeRules(text, configPath) {
  const rules = edgeRulesPath(text);
  if (rules === null) return text;
  // Beside the configuration, joined as the native command line joins paths (no normalising).
  const file = path.isAbsolute(rules) ? rules : `${configPath.slice(0, configPath.lastIndexOf("/") + 1)}${rules}`;
  let rulesText;
  try {
    rulesText = readText(file);
  } catch (error) {
    throw new SimulationError(`edge_rules: ${error.message}`, 2);
  }
  return inlineEdgeRules(text, rulesText, file);
}

function sim(args) {
  let parsed;
  try {
    // read by the native command line's own parser (in the wasm)
    parsed = simParseArgs(args);
  } catch (error) {
    process.stderr.write(`${SIM_USAGE}\nsluicegate sim: error: ${error.message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(`${SIM_USAGE}\n\n${USAGE}\n`);
    return 0;
  }
  if (parsed.selfTest) {
    const { output, ok } = selfTest();
    process.stdout.write(output);
    return ok ? 0 : 1;
  }
  if (parsed.config === null) {
    process.stderr.write(`${SIM_USAGE}\n`);
    return 2;
  }
  const meter = progressMeter();
  if (parsed.compare !== null) return compare(parsed, meter);
  try {
    const config = withEdgeRules(readText(parsed.config), parsed.config);
    let trace;
    if (parsed.trace !== null) {
      checkConfig(config); // the configuration's problems come before the trace's
      trace = readText(parsed.trace);
    }
    let run;
    try {
      run = runSimulation(config, trace, {
        traceName: parsed.trace ?? undefined,
        maxRequests: parsed.maxRequests ?? undefined,
        reorderWindow: parsed.reorderWindow ?? undefined,
        onProgress: meter.onProgress,
      });
    } catch (error) {
      throw nativeCeiling(error);
    } finally {
      meter.clear();
    }
    if (!parsed.json && run.markdownError !== null) throw run.markdownError;
    process.stdout.write(parsed.json ? run.reportJson : run.markdown);
    return run.exitCode;
  } catch (error) {
    if (!(error instanceof SimulationError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return error.exitCode;
  }
}

/** The ceiling's flag in a refusal, as the native command line names it. */
function nativeCeiling(error) {
  if (error instanceof SimulationError && error.message.endsWith("(raise it with the maxRequests option)")) {
    return new SimulationError(error.message.replace(/the maxRequests option\)$/, "--max-requests N)"), error.exitCode);
  }
  return error;
}

/** `sim BEFORE --compare AFTER`: the comparison, the review or the JSON; AFTER's exit status. */
function compare(parsed, meter) {
  try {
    const before = readText(parsed.config);
    const after = readText(parsed.compare);
    // a team's own review template (checked, naming its path, before the runs)
    const template = parsed.reviewTemplate === null ? undefined : readText(parsed.reviewTemplate);
    // a side's edge_rules problem names the side, as the native command line does
    const inline = (text, file) => {
      try {
        return withEdgeRules(text, file);
      } catch (error) {
        throw error instanceof SimulationError ? new SimulationError(`${file}: ${error.message}`, error.exitCode) : error;
      }
    };
    const configs = [inline(before, parsed.config), inline(after, parsed.compare)];
    const trace = parsed.trace === null ? undefined : readText(parsed.trace);
    let out;
    try {
      out = compareSimulations(configs[0], configs[1], trace, {
        traceName: parsed.trace ?? undefined,
        maxRequests: parsed.maxRequests ?? undefined,
        reorderWindow: parsed.reorderWindow ?? undefined,
        beforeName: parsed.config,
        afterName: parsed.compare,
        reviewTemplate: template,
        reviewTemplateName: parsed.reviewTemplate ?? undefined,
        onProgress: meter.onProgress,
      });
    } catch (error) {
      throw nativeCeiling(error);
    } finally {
      meter.clear();
    }
    process.stdout.write(parsed.json ? out.comparisonJson : parsed.review ? out.review : out.markdown);
    return out.exitCode;
  } catch (error) {
    if (!(error instanceof SimulationError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return error.exitCode;
  }
}

/** `check-rules FILE`: 0 and what the file enforces, 1 and every problem, 2 unreadable. */
async function checkRules(args) {
  if (args.length !== 1) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const [file] = args;
  let text;
  try {
    text = readText(file);
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    return 2;
  }
  await import("./edge-node.js"); // instantiates the edge's build
  const { checkRulesLines } = await import("../pkg-edge/sluicegate.js");
  const out = checkRulesLines(text);
  if ("problems" in out) {
    process.stderr.write(out.problems.map((problem) => `${file}: ${problem}\n`).join(""));
    process.stderr.write(`${file}: ${out.problems.length} problem(s); nothing was loaded\n`);
    return 1;
  }
  process.stdout.write([`${file}: ${out.rules} rule(s) valid`, ...out.lines.map((line) => `  ${line}`)].map((line) => `${line}\n`).join(""));
  return 0;
}

function main(args) {
  const [command, ...rest] = args;
  if (command === "sim") return sim(rest);
  if (command === "replay") return import("./replay.mjs").then(({ replayCommand }) => replayCommand(rest, { readText }));
  if (command === "check-rules") return checkRules(rest);
  if (args.length === 1 && ["-h", "--help", "help"].includes(command)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  // the native command line's list of commands and its suggestion (in the wasm)
  const unknown = command === undefined ? undefined : cliUnknownCommand(command);
  if (unknown !== undefined) {
    process.stderr.write(`sluicegate: ${unknown}\nRun 'sluicegate --help' for the commands and their options.\n`);
    return 2;
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

Promise.resolve(main(process.argv.slice(2))).then((code) => {
  process.exitCode = code;
});
