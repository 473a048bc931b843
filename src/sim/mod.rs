//! The rate-limit policy simulator: replays generated or recorded traffic against rate-limit
//! policies and reports who gets throttled, why and for how long, and whether the policies
//! protect the backend (findings RL01-RL13).
//!
//! For the reference simulator's four algorithms this is a Rust implementation of it
//! (`rate_sim.py`, see the `sim` subcommand of the `sluicegate` binary) and gives the same
//! results for the same configuration and trace: the same `--json` document, the same
//! Markdown report byte for byte, the same exit status. Parity decides a few things:
//!
//! - Time is `f64` seconds and those limiters ([`ReferenceLimiter`]) use the reference's
//!   formulas and `1e-9` tolerances, not the integer-time limiters of [`crate::core::limit`].
//! - Poisson traffic draws from [`PyRandom`], CPython's Mersenne Twister, so a seed gives
//!   the reference's request times.
//! - Numbers are printed with [`py`]'s reproductions of Python's `repr`, `%g`, `%.Nf` and
//!   `round`, and the JSON with `json.dumps(indent=2)`'s layout.
//! - Where the reference itself crashes on a valid configuration (see [`SimError::Crash`]),
//!   this module fails at the same point with exit status 1.
//!
//! Beyond the reference, policies can run the limiters the edge and the browser client run
//! — `gcra` and `count_then_block` ([`crate::core::limit`], on whole nanoseconds), `smartflow` (the
//! Smart Flow reservation bucket as a client-side pacer) — and `edge_rules` turns the
//! worker's rules file into policies ([`edge_rule_policies`]). The replay streams
//! ([`simulate_trace`], [`Engine`]): memory does not grow with the length of a trace in time
//! order, or out of it by no more than the reorder window ([`DEFAULT_REORDER_WINDOW_S`]).
//!
//! Needs `std` (floating-point `ln`, `floor`, `ceil`; the trace reader's thread).
//!
//! ```
//! use sluicegate::sim::{analyse, generate, Config};
//! let cfg = Config::from_json(r#"{"duration_s": 10, "policies": [
//!     {"algorithm": "token_bucket", "rate": 1, "burst": 2}],
//!   "clients": [{"name": "app", "kind": "legit", "rps": 2}]}"#).unwrap();
//! let report = analyse(&cfg, generate(&cfg).unwrap()).unwrap();
//! assert_eq!(report.clients[0].allowed, 11);
//! assert_eq!(report.highs(), 1); // RL01: a legit client throttled
//! ```

mod analyse;
pub mod args;
mod boundaries;
mod compare;
mod config;
mod decisions;
pub mod edge;
mod engine;
mod findings;
mod limiters;
mod names;
pub mod py;
mod queue;
mod random;
mod reorder;
mod report;
pub mod review;
mod selftest;
#[cfg(test)]
mod shadow_tests;
mod size;
pub mod spread;
mod stats;
mod tenants;
mod timeline;
mod trace;
mod traffic;

pub use analyse::{analyse, report, ClientRow, Finding, PolicyRow, Report, Severity, ShadowRow, TenantRow};
pub use boundaries::{replay_decisions, timing_limited, REFILLS_WATCHED};
pub use compare::{compare, Comparison, ConfigFile, Side, TrafficUsed, Verdict};
pub use config::{
    edge_rule_policies, Client, Config, FieldError, FieldProblem, KeyBy, Pattern, Policy, PolicyAlgorithm, Retry,
};
pub use decisions::{decisions, edge_decisions, edge_replay, Decided, EdgeDecision, EdgeRow};
pub use engine::{simulate, simulate_generated, simulate_observed, Engine};
pub use limiters::{max_in_window, Check, ReferenceLimiter, WindowAt};
pub use names::Names;
pub use random::{py_hash_float, PyRandom, Seed};
pub use reorder::DEFAULT_REORDER_WINDOW_S;
pub use selftest::self_test;
pub use size::{estimate_requests, grouped, DEFAULT_MAX_REQUESTS};
pub use stats::{
    ClientStats, Event, Feed, Observer, Outcome, Peak, PolicyStats, Progress, Sample, TenantRefused, TenantStats,
    PROGRESS_EVERY,
};
pub use timeline::{Timeline, TimelineClient};
pub use trace::{parse_trace, read_trace, records, TraceReader};
pub use traffic::{generate, Request, Traffic};

use core::fmt;
use std::io::Read;

/// Why a simulation did not produce a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// Bad input (configuration, trace, no traffic): exit status 2.
    Input(String),
    /// A configuration field that is unknown (a typo, most likely) or required and left
    /// out: exit status 2. Boxed: every `Result` of the simulator carries a `SimError`, and
    /// a small one is cheaper to pass up.
    Field(Box<FieldError>),
    /// A valid input on which the reference simulator raises an uncaught exception (a
    /// traceback and exit status 1); this port stops at the same point with exit status 1.
    Crash(String),
}

impl SimError {
    /// The exit status the reference gives.
    pub fn exit_code(&self) -> u8 {
        match self {
            SimError::Input(_) | SimError::Field(_) => 2,
            SimError::Crash(_) => 1,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Input(msg) | SimError::Crash(msg) => f.write_str(msg),
            SimError::Field(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for SimError {}

/// [`simulate_trace_within`] with the default reorder window, [`DEFAULT_REORDER_WINDOW_S`].
pub fn simulate_trace<R: Read + Send>(
    cfg: &Config,
    label: &str,
    open: impl FnMut() -> std::io::Result<R>,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    simulate_trace_within(cfg, label, DEFAULT_REORDER_WINDOW_S, open, observer)
}

/// Replays a trace through `cfg`'s policies, with the same results as sorting it whole. The
/// trace streams when its rows are in time order (as exported logs are) or out of it by up
/// to `window_s` seconds of trace time (as logs merged from several servers are): rows are
/// held until they are that far behind the newest row read and replayed in order, so memory
/// stays flat however long the trace, bounded by the rows of one and a half windows. A row
/// more than `window_s` before the newest row read before it makes the replay start over:
/// the trace is read again from `open`, whole, sorted and replayed (the observer is told to
/// [`Observer::restart`]). A window of 0 holds only the rows of one instant (any step back
/// is read twice); an infinite one holds the whole trace, and never reads it twice.
///
/// # Errors
/// [`SimError::Input`] for a window that is negative or not a number, and for a bad trace.
pub fn simulate_trace_within<R: Read + Send>(
    cfg: &Config,
    label: &str,
    window_s: f64,
    mut open: impl FnMut() -> std::io::Result<R>,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    // one copy of the replay per reader type, whatever opens it (a wasm build stays small)
    trace_replay(cfg, label, window_s, &mut open, observer)
}

fn trace_replay<R: Read + Send>(
    cfg: &Config,
    label: &str,
    window_s: f64,
    open: &mut dyn FnMut() -> std::io::Result<R>,
    mut observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    if window_s.is_nan() || window_s < 0.0 {
        let window = py::float_repr(window_s);
        return Err(SimError::Input(format!("the reorder window must be 0 or more seconds, got {window}")));
    }
    let cannot = |e: std::io::Error| SimError::Input(format!("{label}: cannot read: {e}"));
    let reader = TraceReader::new(label, open().map_err(cannot)?);
    let streamed = {
        let mut engine = Engine::new(cfg, observer.as_deref_mut().map(|o| -> &mut dyn Observer { o }));
        if for_each_batch(reader, window_s, |batch| replay(&mut engine, batch))? {
            Some(engine.finish()?)
        } else {
            None
        }
    };
    if let Some(out) = streamed {
        return Ok(out);
    }
    if let Some(o) = observer.as_deref_mut() {
        o.restart();
    }
    let traffic = read_trace(TraceReader::new(label, open().map_err(cannot)?))?;
    simulate_observed(cfg, traffic, observer)
}

/// Rows of a trace in the replay's order, with client and endpoint numbered in the order
/// first seen, and the names first seen in this batch (numbered from where the previous batch
/// stopped); or, with `stepped_back`, the news that the trace steps back further than the
/// reorder window.
#[derive(Default)]
struct Batch {
    rows: Vec<Request>,
    /// Each row's `(client, endpoint)` pair number (numbered as the replay first meets them).
    pairs: Vec<u32>,
    clients: Vec<Box<str>>,
    endpoints: Vec<Box<str>>,
    stepped_back: bool,
}

const BATCH: usize = 4096;

/// Reads `reader` in batches of rows in the replay's order (held up to `window` seconds to
/// be put in order, see [`reorder`]), handing each to `take` until it returns false; false
/// then. A row further back than the window is handed on as a batch that says so.
fn read_batches<R: Read>(
    mut reader: TraceReader<R>,
    window: f64,
    mut take: impl FnMut(Batch) -> bool,
) -> Result<bool, SimError> {
    let (mut clients, mut endpoints) = (Names::default(), Names::default());
    let mut pairs = names::Pairs::default();
    let mut reorder = reorder::Reorder::new(window);
    let mut batch = Batch::default();
    // how many names have been handed on (in this batch or an earlier one)
    let (mut batch_clients, mut batch_endpoints) = (0, 0);
    while let Some(r) = reader.next_request(&mut clients, &mut endpoints)? {
        if r.client as usize + 1 > batch_clients {
            batch.clients.push(clients.name(r.client).into());
            batch_clients += 1;
        }
        if r.endpoint as usize + 1 > batch_endpoints {
            batch.endpoints.push(endpoints.name(r.endpoint).into());
            batch_endpoints += 1;
        }
        let start = batch.rows.len();
        if !reorder.push(r, &mut batch.rows) {
            return Ok(take(Batch { stepped_back: true, ..Batch::default() }));
        }
        if batch.rows.len() > start {
            // rows come out of the reorder window whole instants at a time
            sort_instants(&clients, &endpoints, &mut batch.rows[start..]);
            number_pairs(&mut pairs, &mut batch, start);
            if batch.rows.len() >= BATCH && !hand_on(&mut batch, &mut take) {
                return Ok(false);
            }
        }
    }
    let start = batch.rows.len();
    reorder.finish(&mut batch.rows);
    sort_instants(&clients, &endpoints, &mut batch.rows[start..]);
    number_pairs(&mut pairs, &mut batch, start);
    Ok(hand_on(&mut batch, &mut take))
}

/// Numbers the pairs of the batch's rows from `start` on (the replay then need not).
fn number_pairs(pairs: &mut names::Pairs, batch: &mut Batch, start: usize) {
    let rows = &batch.rows[start..];
    batch.pairs.extend(rows.iter().map(|r| pairs.number(r.client, r.endpoint).0));
}

/// Hands `batch` to `take`, in pieces of [`BATCH`] rows when it is much longer (rows held
/// for a long window come out many at once: the pieces keep what waits between the threads
/// small).
fn hand_on(batch: &mut Batch, take: &mut impl FnMut(Batch) -> bool) -> bool {
    let batch = core::mem::take(batch);
    if batch.rows.len() <= 2 * BATCH {
        return take(batch);
    }
    let mut names = Some((batch.clients, batch.endpoints));
    batch.rows.chunks(BATCH).zip(batch.pairs.chunks(BATCH)).all(|(rows, pairs)| {
        let (clients, endpoints) = names.take().unwrap_or_default();
        take(Batch { rows: rows.to_vec(), pairs: pairs.to_vec(), clients, endpoints, stepped_back: false })
    })
}

/// Puts each instant of `rows` (in time order) in the replay's order: only those of more
/// than one row need it, found where a row's time is its predecessor's.
fn sort_instants(clients: &Names, endpoints: &Names, rows: &mut [Request]) {
    let mut i = 1;
    while i < rows.len() {
        if rows[i].t != rows[i - 1].t {
            i += 1;
            continue;
        }
        // an instant from `i - 1` on, to the first row of another time
        let first = i - 1;
        let t = rows[first].t;
        let n = rows[i..].iter().position(|r| r.t != t).map_or(rows.len(), |n| i + n);
        traffic::sort_instant(clients, endpoints, &mut rows[first..n]);
        i = n + 1;
    }
}

/// [`read_batches`], reading on a second thread while `take` replays (native builds).
#[cfg(not(target_arch = "wasm32"))]
fn for_each_batch<R: Read + Send>(
    reader: TraceReader<R>,
    window: f64,
    mut take: impl FnMut(Batch) -> Result<bool, SimError>,
) -> Result<bool, SimError> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Batch, SimError>>(8);
        scope.spawn(move || {
            let tx_rows = tx.clone();
            if let Err(e) = read_batches(reader, window, |b| tx_rows.send(Ok(b)).is_ok()) {
                let _ = tx.send(Err(e));
            }
        });
        // dropping `rx` on an early return stops the reader at its next batch
        for batch in rx {
            if !take(batch?)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
}

/// [`read_batches`] (no threads in wasm).
#[cfg(target_arch = "wasm32")]
fn for_each_batch<R: Read + Send>(
    reader: TraceReader<R>,
    window: f64,
    mut take: impl FnMut(Batch) -> Result<bool, SimError>,
) -> Result<bool, SimError> {
    let mut failed = None;
    let all = read_batches(reader, window, |b| match take(b) {
        Ok(go_on) => go_on,
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    failed.map_or(Ok(all), Err)
}

/// Replays a batch of rows in order; false when the trace stepped back further than the
/// reorder window.
fn replay(engine: &mut Engine<'_, '_>, batch: Batch) -> Result<bool, SimError> {
    // numbered here in the order the reader numbered them: the same numbers
    for name in &batch.clients {
        engine.client(name);
    }
    for name in &batch.endpoints {
        engine.endpoint(name);
    }
    for (r, pair) in batch.rows.into_iter().zip(batch.pairs) {
        engine.push_sorted(r, pair)?;
    }
    Ok(!batch.stepped_back)
}

/// How big a run of generated traffic may be: the most requests, and what to tell the user
/// to raise it (see [`Config::check_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ceiling<'a> {
    /// The most requests the configured clients may generate.
    pub max_requests: u64,
    /// How to raise it, e.g. `--max-requests N`.
    pub raise: &'a str,
}

impl Default for Ceiling<'_> {
    fn default() -> Self {
        Ceiling { max_requests: DEFAULT_MAX_REQUESTS, raise: "--max-requests N" }
    }
}

/// Configuration → traffic (generated, refused past `ceiling`; or `trace` as `(label, CSV
/// text)`) → outcome.
fn outcome(
    cfg: &Config,
    trace: Option<(&str, &str)>,
    ceiling: Ceiling<'_>,
    window_s: f64,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    match trace {
        Some((label, text)) => simulate_trace_within(cfg, label, window_s, || Ok(text.as_bytes()), observer),
        None => {
            cfg.check_size(ceiling.max_requests, ceiling.raise)?;
            simulate_generated(cfg, observer)
        }
    }
}

/// Configuration → traffic (generated, or `trace` as `(label, CSV text)`) → report, with
/// the reference's checks in the reference's order. Generated traffic past
/// [`DEFAULT_MAX_REQUESTS`] is refused.
pub fn run(config_json: &str, trace: Option<(&str, &str)>) -> Result<Report, SimError> {
    let cfg = Config::from_json(config_json)?;
    report(&cfg, outcome(&cfg, trace, Ceiling::default(), DEFAULT_REORDER_WINDOW_S, None)?)
}

/// [`run`], also returning the per-second [`Timeline`] of admitted and rejected attempts per
/// client (what the playground charts).
pub fn run_with_timeline(config_json: &str, trace: Option<(&str, &str)>) -> Result<(Report, Timeline), SimError> {
    run_with_timeline_within(config_json, trace, Ceiling::default())
}

/// [`run_with_timeline`] with generated traffic refused past `ceiling` rather than
/// [`DEFAULT_MAX_REQUESTS`].
pub fn run_with_timeline_within(
    config_json: &str,
    trace: Option<(&str, &str)>,
    ceiling: Ceiling<'_>,
) -> Result<(Report, Timeline), SimError> {
    run_with_timeline_reordered(config_json, trace, ceiling, DEFAULT_REORDER_WINDOW_S, None)
}

/// [`run_with_timeline_within`] with a trace held for `window_s` seconds to be put in order
/// (see [`simulate_trace_within`]; the results are the same whatever the window), and
/// `progress`, if any, called with how far the replay has got (see [`Observer::progress`]).
pub fn run_with_timeline_reordered(
    config_json: &str,
    trace: Option<(&str, &str)>,
    ceiling: Ceiling<'_>,
    window_s: f64,
    progress: Option<&mut dyn FnMut(u64, Option<u64>)>,
) -> Result<(Report, Timeline), SimError> {
    let cfg = Config::from_json(config_json)?;
    let mut timeline = Timeline { capacity_rps: cfg.capacity_rps, ..Timeline::default() };
    let out = match progress {
        Some(report) => {
            let mut observer = Progress { observer: Some(&mut timeline), report };
            outcome(&cfg, trace, ceiling, window_s, Some(&mut observer))?
        }
        None => outcome(&cfg, trace, ceiling, window_s, Some(&mut timeline))?,
    };
    timeline.finish();
    Ok((report(&cfg, out)?, timeline))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each instant sorted on its own, found as `sort_instants` once found them (a row of
    /// another time ends one).
    fn sort_each_instant(clients: &Names, endpoints: &Names, mut rows: &mut [Request]) {
        while let Some(first) = rows.first() {
            let t = first.t;
            let n = rows.iter().position(|r| r.t != t).unwrap_or(rows.len());
            let (instant, rest) = rows.split_at_mut(n);
            traffic::sort_instant(clients, endpoints, instant);
            rows = rest;
        }
    }

    #[test]
    fn instants_are_sorted_whole_wherever_they_lie() {
        let (mut clients, mut endpoints) = (Names::default(), Names::default());
        for name in ["a", "b", "c", "d"] {
            clients.intern(name);
            endpoints.intern(&format!("/{name}"));
        }
        // instants of one to five rows (first, last, alone, one after another), -0.0 with
        // 0.0; each out of order (its clients' names descending), some rows by endpoint or cost
        let mut rows = Vec::new();
        let mut i = 0u32;
        for (t, n) in
            [(-0.0, 2), (0.0, 1), (0.5, 1), (1.0, 5), (1.5, 2), (2.0, 1), (2.5, 3), (3.0, 1), (3.5, 1), (4.0, 4)]
        {
            for k in 0..n {
                let cost = f64::from(3 - i % 3);
                rows.push(Request { t, client: 3 - k % 4, endpoint: (i * 5 + i / 4) % 4, cost });
                i += 1;
            }
        }
        for start in 0..4 {
            for end in rows.len() - 4..=rows.len() {
                let mut got = rows[start..end].to_vec();
                let mut want = got.clone();
                sort_instants(&clients, &endpoints, &mut got);
                sort_each_instant(&clients, &endpoints, &mut want);
                assert_eq!(got, want, "{start}..{end}");
            }
        }
        let mut got = rows.clone();
        sort_instants(&clients, &endpoints, &mut got);
        assert_ne!(got, rows, "some instants were out of order");
    }
}
