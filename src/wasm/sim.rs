//! The policy simulator for JavaScript (feature `wasm-sim`): a configuration (JSON text)
//! and an optional CSV trace in; the `--json` document, the Markdown report, the
//! per-second timeline and the exit status out, exactly as `sluicegate sim` gives them.
//! Kept out of the browser client's build.
//!
//! The results cross as text (the JS layer parses the JSON), so no number is formatted
//! here: everything is printed by the simulator itself, as the reference prints it.

use super::set_prop;
use crate::sim::{self, SimError};
use alloc::string::String;
use js_sys::Object;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_SIM: &str = r#"
/** Why a simulation gave no result: the simulator's message, and its exit status (2: bad input, 1: a valid input the reference simulator crashes on). */
export interface SimFailure extends Error {
  exitCode: 1 | 2;
  /** The configuration field refused (unknown, or required and left out), as a path: `policies[1].rsp`, `durration_s`; else `null`. */
  field: string | null;
}
/** One simulation, as `sluicegate sim` would print it. */
export interface SimRunText {
  /** The `--json` document (JSON text). */
  report: string;
  /** The Markdown report, or `null` when writing it fails (see `markdownError`). */
  markdown: string | null;
  /** Why the Markdown report could not be written (the JSON one was), else `null`. */
  markdownError: SimFailure | null;
  /** The per-second timeline (JSON text): `{ first_second, seconds, capacity_rps, clients: [{ name, admitted, rejected }] }`. */
  timeline: string;
  /** 1 when there are high findings, else 0. */
  exitCode: 0 | 1;
}
/** Every decided attempt of a replay, in the replay's order, as parallel arrays. */
export interface SimDecisions {
  t: Float64Array;
  client: string[];
  endpoint: string[];
  /** 1 admitted, 0 refused. */
  admitted: Uint8Array;
}
/** The edge's decision on each row of a trace, as `simEdgeReplay` gives it. */
export interface SimEdgeReplay {
  /** Per row, as `simEdgeDecisions` codes it (128 added when timing-limited). */
  codes: Uint8Array;
  /** Per row, the rules that refused it in shadow, by id in the rules' order (what `Sluicegate-Shadow` names); empty when none did. */
  shadow: string[][];
}
/** Two configurations on the same traffic, as `sluicegate sim BEFORE --compare AFTER` prints them. */
export interface SimCompareText {
  /** Each side as `simRun` gives it. */
  before: SimRunText;
  after: SimRunText;
  /** The comparison as data (JSON text): `--compare --json`. */
  comparison: string;
  /** The filled rate-limit review (Markdown): `--compare --review`. */
  review: string;
  /** The short comparison (Markdown): `--compare`. */
  markdown: string;
  /** 1 when the after run has high findings, else 0. */
  exitCode: 0 | 1;
}
/**
 * How far a simulation has got, called every 65,536 requests: `done` replayed so far, of
 * `total` when it is known beforehand (generated traffic: the estimate, never below `done`;
 * `null` for a trace, read as it streams).
 */
export type SimProgress = (done: number, total: number | null) => void;
/** `SimProgress` for a comparison: `side` is the run being replayed (`before`, then `after`). */
export type SimCompareProgress = (done: number, total: number | null, side: "before" | "after") => void;
/** `sluicegate sim`'s arguments as the command line reads them (absent values `null`). */
export interface SimArgs {
  config: string | null;
  trace: string | null;
  reorderWindow: number | null;
  maxRequests: number | null;
  json: boolean;
  selfTest: boolean;
  help: boolean;
  compare: string | null;
  review: boolean;
  reviewTemplate: string | null;
}
/** The simulator's self-test: its printed lines and whether every case passed. */
export interface SimSelfTest {
  output: string;
  ok: boolean;
}
/** Any JSON value (a configuration's `service`, a client's `kind`, a policy's quota are echoed as written). */
export type SimJsonValue = string | number | boolean | null | SimJsonValue[] | { [key: string]: SimJsonValue };
/** A rate-limit policy of a configuration. Any other field is refused, naming it (a typo would otherwise leave a default in place). */
export interface SimPolicyConfig {
  /** Default `policy-N`. */
  name?: string;
  /** Free text, not read. */
  notes?: SimJsonValue;
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
  /** `count_then_block`: requests per `period` seconds (whole numbers), the block after a refusal (seconds, default 0), and how it counts. */
  requests_per_period?: number;
  period?: number;
  mitigation_timeout?: number;
  counting?: "sliding_log" | "fixed_window" | "sliding_window";
}
/** A client whose traffic the simulator generates. Any other field is refused, naming it. */
export interface SimClientConfig {
  /** Default `client-N`. */
  name?: string;
  /** Free text, not read. */
  notes?: SimJsonValue;
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
/** A simulation configuration, as the JSON file has it. Any other field is refused, naming it. */
export interface SimConfig {
  /** The report's title; default `API`. */
  service?: SimJsonValue;
  /** Free text, not read. */
  notes?: SimJsonValue;
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
  /** An edge rule's `enforce`: `false` (shadow) or the share of counting keys whose refusals it enforces. Present only on an edge rule that does not enforce all its refusals. */
  enforce?: boolean | number;
  /** Attempts it refused in shadow (counted as refused, let through; `rejects` are the enforced ones). Present only with `enforce`. */
  would_refuse?: number;
  /** The clients of those attempts, in the order first seen. Present only with `enforce`. */
  would_refuse_clients?: string[];
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
  /** What the edge's tenant stage did, per tenant in the order first seen, then the attempts that named no known tenant. Present only when `edge_rules` has a `tenants` section. */
  tenants?: SimTenantRow[];
}
/** What the edge's tenant stage did to one tenant's attempts (those its rules admitted): `SimReport.tenants`. */
export interface SimTenantRow {
  /** `null` for the attempts that named no known tenant (refused with 401). */
  tenant: string | null;
  /** The limit it is under, as a rules file writes one; `null`: unlimited. */
  limit: SimJsonValue;
  /** `config` (its entry in `limits`) or `default`; `null` without a limit. */
  source: "config" | "default" | null;
  /** The biggest body it may send (its limit's, or the file's); `null`: no cap. */
  max_body_bytes: number | null;
  /** Attempts that reached the stage. */
  checks: number;
  admitted: number;
  /** Refused with 401: no known tenant. */
  unauthorized: number;
  /** Refused with 413: a body over its cap. */
  too_large: number;
  /** Refused with 429 `tenant_rate_limited`. */
  rate_limited: number;
  /** Refused with 429 `tenant_overload`. */
  overloaded: number;
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
"#;

/// A JS `Error` (named `SimulationError`) with the simulator's message, `exitCode`, and the
/// path of the configuration field it refuses (`field`, else `null`).
fn failure(e: &SimError) -> js_sys::Error {
    let error = js_sys::Error::new(&e.to_string());
    error.set_name("SimulationError");
    set_prop(&error, "exitCode", &JsValue::from(e.exit_code()));
    let field = match e {
        SimError::Field(f) => JsValue::from(f.path()),
        _ => JsValue::NULL,
    };
    set_prop(&error, "field", &field);
    error
}

/// Run a simulation: `config` is the configuration's JSON text, `trace` the CSV text of
/// recorded traffic (instead of the configured clients), `traceName` what trace errors
/// call it (default `"trace"`), `maxRequests` the most requests the configured clients may
/// generate (default 50,000,000; a config estimated past it is refused before it runs),
/// `reorderWindow` how far behind a trace's rows may lag and still stream (default 10 s; the
/// results are the same whatever it is), `onProgress` called every 65,536 requests with how
/// far the run has got.
///
/// Throws an `Error` with the simulator's message (naming the policy or client and the
/// field) and `exitCode` 2 for bad input, 1 where the reference simulator crashes; or what
/// `onProgress` threw (it is not called again, and the run ends before it is thrown).
#[wasm_bindgen(js_name = simRun, unchecked_return_type = "SimRunText")]
pub fn sim_run(
    config: &str,
    trace: Option<String>,
    trace_name: Option<String>,
    max_requests: Option<f64>,
    reorder_window: Option<f64>,
    #[wasm_bindgen(unchecked_optional_param_type = "SimProgress")] on_progress: Option<js_sys::Function>,
) -> Result<Object, JsValue> {
    let name = trace_name.unwrap_or_else(|| String::from("trace"));
    let ceiling = ceiling(max_requests);
    let window = reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S);
    let traced = trace.as_deref().map(|text| (name.as_str(), text));
    let mut hook = on_progress.map(OnProgress::new);
    let mut tell = hook.as_mut().map(|h| move |done, total| h.call(done, total, None));
    let tell = tell.as_mut().map(|t| -> &mut dyn FnMut(u64, Option<u64>) { t });
    let ran = sim::run_with_timeline_reordered(config, traced, ceiling, window, tell);
    OnProgress::rethrow(hook)?;
    let (report, timeline) = ran.map_err(|e| failure(&e))?;
    Ok(run_object(&report, &timeline))
}

/// `onProgress` called as the simulator's progress hook: an exception it throws is kept
/// (and no more calls made) to be thrown when the run ends.
struct OnProgress {
    f: js_sys::Function,
    thrown: Option<JsValue>,
}

impl OnProgress {
    fn new(f: js_sys::Function) -> Self {
        OnProgress { f, thrown: None }
    }

    /// `f(done, total, side)` (`side` undefined but for a comparison).
    fn call(&mut self, done: u64, total: Option<u64>, side: Option<&str>) {
        if self.thrown.is_some() {
            return;
        }
        let total = total.map_or(JsValue::NULL, |t| JsValue::from(t as f64));
        let side = side.map_or(JsValue::UNDEFINED, JsValue::from_str);
        self.thrown = self.f.call3(&JsValue::UNDEFINED, &JsValue::from(done as f64), &total, &side).err();
    }

    /// What `onProgress` threw, if it did.
    fn rethrow(hook: Option<OnProgress>) -> Result<(), JsValue> {
        hook.and_then(|h| h.thrown).map_or(Ok(()), Err)
    }
}

/// A run as `simRun` gives it: the JSON report, the Markdown one (or why not), the timeline
/// and the exit status.
fn run_object(report: &sim::Report, timeline: &sim::Timeline) -> Object {
    let out = Object::new();
    set_prop(&out, "report", &report.to_json().into());
    match report.to_markdown() {
        Ok(markdown) => {
            set_prop(&out, "markdown", &markdown.into());
            set_prop(&out, "markdownError", &JsValue::NULL);
        }
        Err(e) => {
            set_prop(&out, "markdown", &JsValue::NULL);
            set_prop(&out, "markdownError", &failure(&e));
        }
    }
    set_prop(&out, "timeline", &timeline.to_json().into());
    set_prop(&out, "exitCode", &JsValue::from(u8::from(report.highs() > 0)));
    out
}

/// Compare two configurations (JSON texts, `edge_rules` inline) on the same traffic: their
/// own clients with one seed and duration, or `trace` (CSV text). `names` is
/// `[beforeName, afterName, reviewTemplateName]`, what errors and the review call them (a
/// missing or `undefined` one is `the before config`, `the after config`, `the review
/// template`). `review_template` is the review's template (Markdown with `{{placeholders}}`),
/// else the built-in one; it is checked before the runs. Returns both runs, the comparison
/// as JSON text, the filled review and the exit status judged on the after run.
/// `onProgress` is called every 65,536 requests with how far a run has got, and which.
/// Throws as `simRun` does; the message names the side (`the before config: ...`), or the
/// mismatch (different `duration_s` or `seed` and no trace).
#[wasm_bindgen(js_name = simCompare, unchecked_return_type = "SimCompareText")]
#[allow(clippy::too_many_arguments)] // the JS wrapper's positional call
pub fn sim_compare(
    before: &str,
    after: &str,
    trace: Option<String>,
    trace_name: Option<String>,
    max_requests: Option<f64>,
    reorder_window: Option<f64>,
    names: Vec<JsValue>,
    review_template: Option<String>,
    #[wasm_bindgen(unchecked_optional_param_type = "SimCompareProgress")] on_progress: Option<js_sys::Function>,
) -> Result<Object, JsValue> {
    let name = trace_name.unwrap_or_else(|| String::from("trace"));
    let ceiling = ceiling(max_requests);
    let name_at = |i: usize, default: &str| names.get(i).and_then(JsValue::as_string).unwrap_or_else(|| default.into());
    let before_name = name_at(0, "the before config");
    let after_name = name_at(1, "the after config");
    let template = review_template.as_deref().unwrap_or(sim::review::REVIEW_TEMPLATE);
    let template_error = |e: sim::review::TemplateError| {
        let shown = name_at(2, "the review template");
        failure(&SimError::Input(alloc::format!("{shown}: {e}")))
    };
    sim::review::check_template(template).map_err(template_error)?;
    let file = |label, text| sim::ConfigFile { label, text, dir: None };
    let traced = trace.as_deref().map(|text| (name.as_str(), move || Ok(text.as_bytes())));
    let mut hook = on_progress.map(OnProgress::new);
    let mut tell = hook.as_mut().map(|h| move |side, done, total| h.call(done, total, Some(side)));
    let compared = sim::compare(
        file(&before_name, before),
        file(&after_name, after),
        traced,
        reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S),
        ceiling,
        tell.as_mut().map(|t| -> &mut dyn FnMut(&'static str, u64, Option<u64>) { t }),
    );
    OnProgress::rethrow(hook)?;
    let cmp = compared.map_err(|e| failure(&e))?;
    let out = Object::new();
    set_prop(&out, "before", &run_object(&cmp.before.report, &cmp.before.timeline));
    set_prop(&out, "after", &run_object(&cmp.after.report, &cmp.after.timeline));
    set_prop(&out, "comparison", &cmp.to_json().into());
    set_prop(&out, "review", &cmp.to_review_from(template).map_err(template_error)?.into());
    set_prop(&out, "markdown", &cmp.to_markdown().into());
    set_prop(&out, "exitCode", &JsValue::from(cmp.exit_code()));
    Ok(out)
}

/// `sluicegate sim`'s arguments (after `sim`), read as the native command line reads them:
/// `{ config, trace, reorderWindow, maxRequests, json, selfTest, help, compare, review,
/// reviewTemplate }`
/// (absent values `null`). Throws an `Error` saying what argparse would (without the usage
/// line: see `simUsage`).
#[wasm_bindgen(js_name = simParseArgs, unchecked_return_type = "SimArgs")]
pub fn sim_parse_args(args: Vec<String>) -> Result<Object, JsError> {
    let args: alloc::vec::Vec<&str> = args.iter().map(String::as_str).collect();
    let parsed = sim::args::parse(&args).map_err(|e| JsError::new(&e))?;
    let text = |v: Option<&str>| v.map_or(JsValue::NULL, JsValue::from_str);
    let out = Object::new();
    set_prop(&out, "config", &text(parsed.config));
    set_prop(&out, "trace", &text(parsed.trace));
    set_prop(&out, "reorderWindow", &parsed.reorder_window.map_or(JsValue::NULL, JsValue::from));
    // as f64: a ceiling past 2^53 is no ceiling in practice
    set_prop(&out, "maxRequests", &parsed.max_requests.map_or(JsValue::NULL, |n| JsValue::from(n as f64)));
    set_prop(&out, "json", &parsed.json.into());
    set_prop(&out, "selfTest", &parsed.self_test.into());
    set_prop(&out, "help", &parsed.help.into());
    set_prop(&out, "compare", &text(parsed.compare));
    set_prop(&out, "review", &parsed.review.into());
    set_prop(&out, "reviewTemplate", &text(parsed.review_template));
    Ok(out)
}

/// `sluicegate replay`'s options (`args` after `replay`): `{rules, trace, speed, edge,
/// toleranceMs, json}`. Throws an error saying what is wrong.
#[wasm_bindgen(js_name = simParseReplayArgs)]
pub fn sim_parse_replay_args(args: Vec<String>) -> Result<Object, JsError> {
    let args: alloc::vec::Vec<&str> = args.iter().map(String::as_str).collect();
    let parsed = sim::args::parse_replay(&args).map_err(|e| JsError::new(&e))?;
    let out = Object::new();
    set_prop(&out, "rules", &JsValue::from_str(parsed.rules));
    set_prop(&out, "trace", &JsValue::from_str(parsed.trace));
    set_prop(&out, "speed", &parsed.speed.into());
    set_prop(&out, "edge", &parsed.edge.map_or(JsValue::NULL, JsValue::from_str));
    set_prop(&out, "toleranceMs", &parsed.tolerance_ms.into());
    set_prop(&out, "json", &parsed.json.into());
    Ok(out)
}

/// The ceiling on generated requests that `maxRequests` sets (default
/// [`sim::DEFAULT_MAX_REQUESTS`]).
fn ceiling(max_requests: Option<f64>) -> sim::Ceiling<'static> {
    sim::Ceiling {
        // `as` saturates: Infinity is no ceiling at all
        max_requests: max_requests.map_or(sim::DEFAULT_MAX_REQUESTS, |n| n as u64),
        raise: "the maxRequests option",
    }
}

/// What the command line says of a first argument that is no command (`unknown command
/// 'simulate'; did you mean 'sim'?`), or `undefined` when it is one.
#[wasm_bindgen(js_name = cliUnknownCommand)]
pub fn cli_unknown_command(word: &str) -> Option<String> {
    sim::args::unknown_command(word)
}

/// The usage line of `sluicegate sim`.
#[wasm_bindgen(js_name = simUsage)]
pub fn sim_usage() -> String {
    sim::args::USAGE.into()
}

/// The usage line of `sluicegate replay`.
#[wasm_bindgen(js_name = simReplayUsage)]
pub fn sim_replay_usage() -> String {
    sim::args::REPLAY_USAGE.into()
}

/// `sim`'s lines in the command line's help: what each option does.
#[wasm_bindgen(js_name = simHelp)]
pub fn sim_help() -> String {
    sim::args::HELP.into()
}

/// The `edge_rules` path of a configuration given as JSON text, or `undefined`: no
/// `edge_rules`, the rules object itself, or text that is not a JSON object.
#[wasm_bindgen(js_name = simEdgeRulesPath)]
pub fn sim_edge_rules_path(config: &str) -> Option<String> {
    sim::Config::edge_rules_path(config)
}

/// The configuration's text with its `edge_rules` path replaced by `rules` (the rules file's
/// JSON text; `where` names it in errors). Throws as `simRun` does (exit status 2) for rules
/// that are not JSON.
#[wasm_bindgen(js_name = simInlineEdgeRules)]
pub fn sim_inline_edge_rules(config: &str, rules: &str, r#where: &str) -> Result<String, JsValue> {
    sim::Config::inline_edge_rules(config, rules, r#where).map_err(|e| failure(&e).into())
}

/// Check a configuration (JSON text) without simulating: what `simRun` would refuse it for
/// before reading any traffic. Throws as `simRun` does.
#[wasm_bindgen(js_name = simCheckConfig)]
pub fn sim_check_config(config: &str) -> Result<(), JsValue> {
    sim::Config::from_json(config).map(drop).map_err(|e| failure(&e).into())
}

/// The simulator's self-test (`sluicegate sim --self-test`).
#[wasm_bindgen(js_name = simSelfTest, unchecked_return_type = "SimSelfTest")]
pub fn sim_self_test() -> Object {
    let (output, ok) = sim::self_test();
    let out = Object::new();
    set_prop(&out, "output", &output.into());
    set_prop(&out, "ok", &ok.into());
    out
}

/// Every decided attempt of replaying the CSV `trace` through `config`'s policies, in the
/// replay's order (what `sluicegate replay` compares with the edge). Throws as `simRun` does.
#[wasm_bindgen(js_name = simDecisions, unchecked_return_type = "SimDecisions")]
pub fn sim_decisions(config: &str, trace: &str, trace_name: Option<String>) -> Result<Object, JsValue> {
    let name = trace_name.unwrap_or_else(|| String::from("trace"));
    let decided = sim::decisions(config, &name, trace).map_err(|e| failure(&e))?;
    let t: alloc::vec::Vec<f64> = decided.iter().map(|d| d.t).collect();
    let admitted: alloc::vec::Vec<u8> = decided.iter().map(|d| u8::from(d.admitted)).collect();
    let client = js_sys::Array::new();
    let endpoint = js_sys::Array::new();
    for d in &decided {
        client.push(&JsValue::from_str(&d.client));
        endpoint.push(&JsValue::from_str(&d.endpoint));
    }
    let out = Object::new();
    set_prop(&out, "t", &js_sys::Float64Array::from(&t[..]).into());
    set_prop(&out, "client", &client.into());
    set_prop(&out, "endpoint", &endpoint.into());
    set_prop(&out, "admitted", &js_sys::Uint8Array::from(&admitted[..]).into());
    Ok(out)
}

/// The edge's decision on each row of the CSV `trace`, in the trace's order, each row
/// through the edge's own pipeline (what `sluicegate replay` compares with the edge): 1 when
/// the rules of `rules` (a rules file's JSON), and its tenant when the file has `tenants`,
/// admit it; 0 when a rule refuses it (the edge's answer names the rule in
/// `Sluicegate-Rule`); when the tenant stage refuses it, 2 for its `401` (no known tenant),
/// 3 for its `413` (a body over the tenant's cap), 4 for its `429` `tenant_rate_limited` and
/// 5 for its `429` `tenant_overload` (both with `Sluicegate-Scope: tenant`); 6 when a check
/// before its body was read refuses it (`Sluicegate-Scope: ip | node | source`). Throws as
/// `simRun` does.
/// With `tolerance_s` (seconds), a row within it of an instant where timing alone decides
/// (a window's edge, an earlier request of its address leaving a period or ending a block, a
/// token of its tenant coming back: `sim::timing_limited`) has 128 added to its code.
#[wasm_bindgen(js_name = simEdgeDecisions)]
pub fn sim_edge_decisions(
    rules: &str,
    trace: &str,
    trace_name: Option<String>,
    tolerance_s: Option<f64>,
) -> Result<js_sys::Uint8Array, JsValue> {
    let name = trace_name.unwrap_or_else(|| String::from("trace"));
    let codes: alloc::vec::Vec<u8> = match tolerance_s {
        None => sim::edge_decisions(rules, &name, trace)
            .map_err(|e| failure(&e))?
            .into_iter()
            .map(sim::EdgeDecision::code)
            .collect(),
        Some(tolerance) => sim::replay_decisions(rules, &name, trace, tolerance.max(0.0))
            .map_err(|e| failure(&e))?
            .into_iter()
            .map(|(row, limited)| row.decision.code() | if limited { 128 } else { 0 })
            .collect(),
    };
    Ok(js_sys::Uint8Array::from(&codes[..]))
}

/// [`sim_edge_decisions`] with a tolerance, each row with the rules that refused it in
/// shadow (`"enforce": false`, or a share of counting keys that leaves its key out): what
/// `sluicegate replay` compares with the edge's answers and their `Sluicegate-Shadow`.
/// Throws as `simRun` does.
#[wasm_bindgen(js_name = simEdgeReplay, unchecked_return_type = "SimEdgeReplay")]
pub fn sim_edge_replay(
    rules: &str,
    trace: &str,
    trace_name: Option<String>,
    tolerance_s: f64,
) -> Result<Object, JsValue> {
    let name = trace_name.unwrap_or_else(|| String::from("trace"));
    let rows = sim::replay_decisions(rules, &name, trace, tolerance_s.max(0.0)).map_err(|e| failure(&e))?;
    let codes: alloc::vec::Vec<u8> =
        rows.iter().map(|(row, limited)| row.decision.code() | if *limited { 128 } else { 0 }).collect();
    let shadow: js_sys::Array = rows
        .iter()
        .map(|(row, _)| row.shadow.iter().map(|id| JsValue::from_str(id)).collect::<js_sys::Array>())
        .collect();
    let out = Object::new();
    set_prop(&out, "codes", &js_sys::Uint8Array::from(&codes[..]).into());
    set_prop(&out, "shadow", &shadow.into());
    Ok(out)
}

/// The records of a CSV text, read as the simulator reads a trace (Python's `csv` reader:
/// quoted fields, `""` escapes, any line end). What `sluicegate replay` reads its trace with.
#[wasm_bindgen(js_name = simCsvRecords, unchecked_return_type = "string[][]")]
pub fn sim_csv_records(text: &str) -> js_sys::Array {
    sim::records(text)
        .into_iter()
        .map(|record| record.into_iter().map(JsValue::from).collect::<js_sys::Array>())
        .collect()
}
