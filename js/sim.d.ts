// sluicegate/sim: the policy simulator (its wasm core, simRun and simSelfTest, and
// simulate / runSimulation around them) beside the browser client's exports.
export * from "../pkg-sim/sluicegate.js";
export { default } from "../pkg-sim/sluicegate.js";

/** Any JSON value (a configuration's `service`, a client's `kind`, a policy's quota are echoed as written). */
export type SimJsonValue = string | number | boolean | null | SimJsonValue[] | { [key: string]: SimJsonValue };

/** A rate-limit policy of a configuration. Fields beyond these are read as the simulator documents them. */
export interface SimPolicyConfig {
  /** Default `policy-N`. */
  name?: string;
  /**
   * `token_bucket`, `fixed_window`, `sliding_log`, `sliding_counter` (the reference's), `gcra`,
   * `count_then_block` (the edge's), `smartflow` (a client-side pacer), or another algorithm
   * the simulator knows.
   */
  algorithm: string;
  /** What is counted separately; default `client`. */
  key?: "client" | "endpoint" | "client+endpoint" | "global";
  /** Requests per `window_s` (the window algorithms; a token bucket may give `limit` + `window_s` instead of `rate`). */
  limit?: number;
  window_s?: number;
  /** Tokens per second and bucket size (`token_bucket`). */
  rate?: number;
  burst?: number;
  /** Endpoint prefixes it applies to (default: all). */
  endpoints?: string[];
  /** Only these clients, or all but these. */
  clients?: string[];
  exclude_clients?: string[];
  [field: string]: SimJsonValue | undefined;
}

/** A client whose traffic the simulator generates. Fields beyond these are read as the simulator documents them. */
export interface SimClientConfig {
  /** Default `client-N`. */
  name?: string;
  /** `legit` clients must not be throttled, `abusive` ones should be; default `unknown`. */
  kind?: "legit" | "abusive" | (string & {});
  /** Default `steady`. */
  pattern?: "steady" | "poisson" | "burst";
  /** Requests per second (`steady`, `poisson`). */
  rps?: number;
  /** Requests per burst, every `every_s` seconds (`burst`). */
  burst?: number;
  every_s?: number;
  /** When it starts, seconds, and for how long (default: to the end). */
  start?: number;
  duration?: number;
  endpoint?: string;
  /** What it does after a 429; default `none`. */
  retry?: "none" | "immediate" | "backoff" | "honor";
  max_retries?: number;
  /** What each request costs (default 1). */
  cost?: number;
  [field: string]: SimJsonValue | undefined;
}

/**
 * A rule of the edge worker's rules file (`worker/rules.json`; fields as `sluicegate
 * check-rules` validates them, unknown ones refused). The simulator makes each rule a
 * `count_then_block` policy named by its `id`.
 */
export interface SimEdgeRule {
  /** 1–64 of `A-Z a-z 0-9 _ - .`, unique: the policy's name in the report. */
  id: string;
  description?: string;
  /** `{}` matches everything. The simulated requests are GETs: a rule whose `methods` leave out GET never applies. */
  match: {
    path?: { starts_with: string } | { equals: string };
    methods?: string[];
    hosts?: string[];
  };
  /** `ip.src`, `cf.colo.id`, `http.host`, `http.request.method`, `http.request.uri.path`, `http.request.headers["name"]`. */
  characteristics: string[];
  /** How it counts; default `sliding_log`. */
  algorithm?: "sliding_log" | "fixed_window" | "sliding_window" | "token_bucket";
  /** Whole seconds and whole requests (the window algorithms). */
  period?: number;
  requests_per_period?: number;
  /** Requests per second and bucket size (`token_bucket`). */
  rate?: number;
  burst?: number;
  /** Whole seconds the key stays blocked from its first refusal; default 0. */
  mitigation_timeout?: number;
  response?: { status_code?: number; content_type?: string; content?: string };
}

/** The edge worker's rules file. */
export interface SimEdgeRules {
  rules: SimEdgeRule[];
}

/** A simulation configuration, as the JSON file has it. */
export interface SimConfig {
  /** The report's title; default `API`. */
  service?: SimJsonValue;
  /** Seconds simulated; default 300. */
  duration_s?: number;
  /** What the backend can take, requests per second (checked by the findings); `null`: unknown. */
  capacity_rps?: number | null;
  /** Seeds the Poisson traffic (Python's Mersenne Twister: the reference's traffic for the same seed). */
  seed?: SimJsonValue;
  policies?: SimPolicyConfig[];
  clients?: SimClientConfig[];
  /**
   * The edge worker's rules file, simulated as `count_then_block` policies after
   * `policies` (which may then be left out). The command line (`sluicegate sim`, `npx
   * sluicegate sim`) also takes a path here, read relative to the configuration file; the
   * functions of this module take only the rules themselves and throw a `SimulationError`
   * for a path (`edge_rules: '<path>' is a path; …`). `null`: none.
   */
  edge_rules?: SimEdgeRules | string | null;
  [field: string]: SimJsonValue | SimPolicyConfig[] | SimClientConfig[] | SimEdgeRules | undefined;
}

export type SimSeverity = "high" | "medium" | "low" | "info";

/** One client's row of the report (`sluicegate sim --json`'s `clients`), most requests first. */
export interface SimClientRow {
  client: string;
  /** `legit`, `abusive`, or as configured (`unknown` when not). */
  kind: SimJsonValue;
  /** Logical requests. */
  logical: number;
  /** Attempts, retries included. */
  attempts: number;
  /** Attempts admitted. */
  allowed: number;
  /** Attempts refused (429s). */
  rejected: number;
  /** Logical requests given up on. */
  failed: number;
  /** `failed / logical`, percent, 1 decimal. */
  failed_pct: number;
  /** Logical requests admitted only after retrying. */
  delayed: number;
  /** Attempts per logical request, 2 decimals. */
  amplification: number;
  /** The longest Retry-After it was given, seconds, 1 decimal. */
  max_retry_after_s: number;
  /** The policy that refused it most (`""`: none). */
  top_policy: string;
  /** Its first refusal, seconds, 1 decimal; `null`: never refused. */
  first_reject_s: number | null;
  /** Attempts a client-side pacer held back. Present (on every client) only when a policy is a `smartflow` pacer. */
  paced?: number;
  /** Their mean wait, seconds, 3 decimals (0 when none was held back). Only with a `smartflow` policy. */
  mean_pace_s?: number;
  /** The longest wait, seconds, 3 decimals. Only with a `smartflow` policy. */
  max_pace_s?: number;
  /** The pacer that held it back (`""`: none). Only with a `smartflow` policy. */
  pacer?: string;
}

/** A client a `count_then_block` rule blocked, and how many blocks it started on it (`SimPolicyRow.blocked_clients`). */
export interface SimBlockedClient {
  client: string;
  blocks: number;
}

/** One policy's row of the report, in configuration order. */
export interface SimPolicyRow {
  name: string;
  /** `token_bucket`, `fixed_window`, `sliding_log`, `sliding_counter`, `gcra`, `count_then_block`, `smartflow`, or another algorithm the simulator names. */
  algorithm: string;
  /** `client`, `endpoint`, `client+endpoint` or `global`, or another key the simulator names. */
  key: string;
  /** Endpoint prefixes it applies to (empty: all). */
  endpoints: string[];
  /** Only these clients (empty: all). */
  clients: string[];
  /** Not these clients. */
  exclude_clients: string[];
  /** Attempts checked. */
  checks: number;
  /** Attempts refused. */
  rejects: number;
  /** Long-run rate per key, requests per second, 3 decimals. */
  sustained_rps: number;
  window_s: number;
  /** The most one key can get through in one window, 1 decimal. */
  worst_case_per_window: number;
  /** The most one key got through in any rolling window. */
  observed_max_per_window: number;
  /** Attempts it held back. Present only on a `smartflow` (pacer) policy. */
  delayed?: number;
  /** Seconds a key stays blocked from its first refusal. Present only on a `count_then_block` policy. */
  mitigation_timeout_s?: number;
  /** Blocks it started. Present only on a `count_then_block` policy. */
  blocks?: number;
  /** The clients it blocked, in the order first blocked. Present only on a `count_then_block` policy. */
  blocked_clients?: SimBlockedClient[];
}

export interface SimFinding {
  severity: SimSeverity;
  /** `RL01`, `RL02`, … */
  code: string;
  /** What happened and what to do. */
  message: string;
}

/** The first refusal, as the sample 429 shows it. */
export interface SimSample429 {
  /** Seconds, 3 decimals. */
  t: number;
  client: string;
  endpoint: string;
  policy: string;
  /** Whole seconds, at least 1. */
  retry_after: number;
  /** The policy's quota as configured. */
  quota: SimJsonValue;
  window_s: number;
}

/** The report: the `sluicegate sim --json` document. */
export interface SimReport {
  service: SimJsonValue;
  duration_s: number;
  /** Logical requests. */
  requests: number;
  /** Attempts admitted. */
  admitted: number;
  /** The most attempts admitted in one whole second, and that second. */
  peak_admitted_rps: number;
  peak_second: number;
  capacity_rps: number | null;
  clients: SimClientRow[];
  policies: SimPolicyRow[];
  /** Most severe first. */
  findings: SimFinding[];
  sample_429: SimSample429 | null;
}

/** One client's attempts per second (index 0 is the timeline's `first_second`). */
export interface SimTimelineClient {
  name: string;
  admitted: number[];
  rejected: number[];
}

/** Admitted and refused attempts per client per whole second: what the playground charts. */
export interface SimTimeline {
  /** The second (`floor(t)`) of column 0. */
  first_second: number;
  /** Columns in every row. */
  seconds: number;
  capacity_rps: number | null;
  /** In the order they first sent. */
  clients: SimTimelineClient[];
}

export interface SimulationOptions {
  /** What trace errors call the trace (`"traces/x.csv line 4: …"`); default `"trace"`. */
  traceName?: string;
  /**
   * The most requests the configured clients may generate (default 50,000,000; `Infinity`
   * for no ceiling): a config estimated past it is refused with a SimulationError (exit
   * status 2) naming the client and the estimate, before it runs. A trace is not estimated.
   */
  maxRequests?: number;
  /**
   * How far a trace's rows may lag behind the newest row read and still stream, in seconds
   * (default 10; `Infinity` holds the whole trace): `--reorder-window`. The results are the
   * same whatever it is.
   */
  reorderWindow?: number;
}

/** Everything `sluicegate sim` can print for one configuration. */
export interface SimulationRun {
  report: SimReport;
  /** The `--json` document as text, byte for byte (`300.0` stays `300.0`). */
  reportJson: string;
  /** The Markdown report; `null` when writing it fails (see `markdownError`). */
  markdown: string | null;
  /** Why the Markdown report could not be written (where the reference simulator crashes), else `null`. */
  markdownError: SimulationError | null;
  timeline: SimTimeline;
  /** 1 when there are high findings, else 0 (the command line's exit status). */
  exitCode: 0 | 1;
}

/** Why a simulation gave no result. The message names the policy or client and the field. */
export declare class SimulationError extends Error {
  constructor(message: string, exitCode?: 1 | 2, options?: ErrorOptions);
  readonly name: "SimulationError";
  /** 2: bad input (configuration, trace, no traffic); 1: an input the reference simulator crashes on. */
  exitCode: 1 | 2;
}

/**
 * Simulate `config` (an object, or JSON text: text keeps `20` and `20.0` apart as the
 * reference does) on its generated traffic, or on `trace` (CSV text:
 * `t,client[,endpoint][,cost]`). Returns the `--json` report. Throws a `SimulationError`
 * on bad input, a `TypeError` for arguments of the wrong type.
 */
export declare function simulate(config: SimConfig | string, trace?: string | null, options?: SimulationOptions): SimReport;

/** `simulate`, returning the report, the Markdown report, the timeline and the exit status. */
export declare function runSimulation(
  config: SimConfig | string,
  trace?: string | null,
  options?: SimulationOptions,
): SimulationRun;

/** A finding of a comparison's side. */
export interface SimComparisonFinding {
  severity: "high" | "medium" | "low" | "info";
  code: string;
  message: string;
}

/** One client's figures on one side of a comparison. */
export interface SimComparisonSide {
  requests: number;
  /** Refused attempts (429s). */
  rejected: number;
  /** Requests admitted only after retrying. */
  delayed: number;
  failed: number;
  /** The longest Retry-After it was given, seconds. */
  max_wait_s: number;
}

/** `sluicegate sim BEFORE --compare AFTER --json`. */
export interface SimComparison {
  /** Judged on the after run: any high finding → do not ship; any medium → ship with changes. */
  verdict: "ship" | "ship with changes" | "do not ship";
  exit_code: 0 | 1;
  traffic:
    | { source: "generated"; seed: SimJsonValue; seed_text: string; duration_s: number; changed_clients: string[] }
    | { source: "trace"; name: string; rows: number; span_s: number };
  capacity_rps: { before: number | null; after: number | null };
  peak: { before: { admitted_rps: number; second: number }; after: { admitted_rps: number; second: number } };
  /** The before run's clients (most requests first), then those only the after run saw; `null` on the side that lacks it. */
  clients: { client: string; kind: SimJsonValue; before: SimComparisonSide | null; after: SimComparisonSide | null }[];
  findings: { before: SimComparisonFinding[]; after: SimComparisonFinding[]; resolved: string[]; new: string[] };
  before: SimReport;
  after: SimReport;
}

/** Two configurations on the same traffic. */
export interface SimulationComparison {
  before: SimulationRun;
  after: SimulationRun;
  comparison: SimComparison;
  /** The comparison as the command line prints it with `--json`. */
  comparisonJson: string;
  /** The filled rate-limit review (Markdown), as `--compare AFTER --review` prints it. */
  review: string;
  /** The short comparison (Markdown), as `--compare AFTER` prints it. */
  markdown: string;
  /** 1 when the after run has high findings, else 0. */
  exitCode: 0 | 1;
}

/**
 * Compare `before` (today's policies) and `after` (the proposed ones) on the same traffic:
 * each one's own clients with one seed and `duration_s` (they must agree), or `trace`.
 * Throws a `SimulationError` (exit status 2) naming the side, or the mismatch.
 */
export declare function compareSimulations(
  before: SimConfig | string,
  after: SimConfig | string,
  trace?: string | null,
  options?: SimulationComparisonOptions,
): SimulationComparison;

export interface SimulationComparisonOptions extends SimulationOptions {
  /** What errors and the review call each side (a file name); default `the before config`, `the after config`. */
  beforeName?: string;
  afterName?: string;
}

/** Check `config` without simulating: throws the `SimulationError` `simulate` would throw for it before reading any traffic. */
export declare function checkConfig(config: SimConfig | string): void;

/**
 * The `edge_rules` path of a configuration given as JSON text, or null (no `edge_rules`, the
 * rules object itself, or text that is not a JSON object).
 */
export declare function edgeRulesPath(configText: string): string | null;

/**
 * The configuration's text with its `edge_rules` value replaced by `rulesText` (the rules
 * file's JSON text), everything else as written. Rules that are not JSON throw a
 * SimulationError (exit status 2) naming `where`.
 */
export declare function inlineEdgeRules(configText: string, rulesText: string, where: string): string;

/** The simulator's self-test (`sluicegate sim --self-test`): its printed lines and whether every case passed. */
export declare function selfTest(): { output: string; ok: boolean };
