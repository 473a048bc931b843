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
//!   formulas and `1e-9` tolerances, not the integer-time limiters of [`crate::limit`].
//! - Poisson traffic draws from [`PyRandom`], CPython's Mersenne Twister, so a seed gives
//!   the reference's request times.
//! - Numbers are printed with [`py`]'s reproductions of Python's `repr`, `%g`, `%.Nf` and
//!   `round`, and the JSON with `json.dumps(indent=2)`'s layout.
//! - Where the reference itself crashes on a valid configuration (see [`SimError::Crash`]),
//!   this module fails at the same point with exit status 1.
//!
//! Beyond the reference, policies can run the limiters the edge and the browser client run
//! — `gcra` and `count_then_block` ([`crate::limit`], on whole nanoseconds), `smartflow` (the
//! Smart Flow reservation bucket as a client-side pacer) — and `edge_rules` turns the
//! worker's rules file into policies ([`edge_rule_policies`]). The replay streams
//! ([`simulate_trace`], [`Engine`]): memory does not grow with the length of a trace in time
//! order.
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
mod config;
mod engine;
mod findings;
mod limiters;
pub mod py;
mod random;
mod report;
mod selftest;
mod timeline;
mod trace;

pub use analyse::{analyse, report, ClientRow, Finding, PolicyRow, Report, Severity};
pub use config::{edge_rule_policies, Algorithm, Client, Config, KeyBy, Pattern, Policy, Retry};
pub use engine::{
    generate, simulate, simulate_generated, simulate_observed, ClientStats, Engine, Event, Feed, Names, Observer,
    Outcome, Peak, PolicyStats, Request, Sample, Traffic,
};
pub use limiters::{max_in_window, Check, ReferenceLimiter};
pub use random::{py_hash_float, PyRandom, Seed};
pub use selftest::self_test;
pub use timeline::{Timeline, TimelineClient};
pub use trace::{parse_trace, read_trace, records, Row, TraceReader};

use core::fmt;
use std::io::Read;

/// Why a simulation did not produce a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// Bad input (configuration, trace, no traffic): exit status 2.
    Input(String),
    /// A valid input on which the reference simulator raises an uncaught exception (a
    /// traceback and exit status 1); this port stops at the same point with exit status 1.
    Crash(String),
}

impl SimError {
    /// The exit status the reference gives.
    pub fn exit_code(&self) -> u8 {
        match self {
            SimError::Input(_) => 2,
            SimError::Crash(_) => 1,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Input(msg) | SimError::Crash(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for SimError {}

/// Replays a trace through `cfg`'s policies. The trace streams when its rows are in time
/// order (as exported logs are): memory then stays flat however long it is. A trace that is
/// not is read again from `open`, whole, sorted and replayed (the observer is told to
/// [`Observer::restart`]).
pub fn simulate_trace<R: Read + Send>(
    cfg: &Config,
    label: &str,
    mut open: impl FnMut() -> std::io::Result<R>,
    mut observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    let cannot = |e: std::io::Error| SimError::Input(format!("{label}: cannot read: {e}"));
    let reader = TraceReader::new(label, open().map_err(cannot)?);
    let streamed = {
        let mut replay = Streamed {
            engine: Engine::new(cfg, observer.as_deref_mut().map(|o| -> &mut dyn Observer { o })),
            instant: Vec::new(),
        };
        if for_each_batch(reader, |batch| replay.batch(batch))? && replay.flush()? {
            Some(replay.engine.finish()?)
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

/// Rows of a trace with client and endpoint numbered in the order first seen, and the names
/// first seen in this batch (numbered from where the previous batch stopped).
#[derive(Default)]
struct Batch {
    rows: Vec<Request>,
    clients: Vec<Box<str>>,
    endpoints: Vec<Box<str>>,
}

const BATCH: usize = 4096;

/// Reads `reader` in batches, handing each to `take` until it returns false; false then.
fn read_batches<R: Read>(mut reader: TraceReader<R>, mut take: impl FnMut(Batch) -> bool) -> Result<bool, SimError> {
    let (mut clients, mut endpoints) = (Names::default(), Names::default());
    let mut batch = Batch::default();
    while let Some(row) = reader.next_row()? {
        let (nc, ne) = (clients.len(), endpoints.len());
        let client = clients.intern(row.client);
        let endpoint = endpoints.intern(row.endpoint);
        if clients.len() > nc {
            batch.clients.push(row.client.into());
        }
        if endpoints.len() > ne {
            batch.endpoints.push(row.endpoint.into());
        }
        batch.rows.push(Request { t: row.t, client, endpoint, cost: row.cost });
        if batch.rows.len() == BATCH && !take(core::mem::take(&mut batch)) {
            return Ok(false);
        }
    }
    Ok(take(batch))
}

/// [`read_batches`], reading on a second thread while `take` replays (native builds).
#[cfg(not(target_arch = "wasm32"))]
fn for_each_batch<R: Read + Send>(
    reader: TraceReader<R>,
    mut take: impl FnMut(Batch) -> Result<bool, SimError>,
) -> Result<bool, SimError> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Batch, SimError>>(8);
        scope.spawn(move || {
            let tx_rows = tx.clone();
            if let Err(e) = read_batches(reader, |b| tx_rows.send(Ok(b)).is_ok()) {
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
    mut take: impl FnMut(Batch) -> Result<bool, SimError>,
) -> Result<bool, SimError> {
    let mut failed = None;
    let all = read_batches(reader, |b| match take(b) {
        Ok(go_on) => go_on,
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    failed.map_or(Ok(all), Err)
}

/// A replay fed a trace in batches. Rows of one instant are replayed in the reference's order
/// whatever their order in the file; only a step back in time needs the whole trace sorted.
struct Streamed<'c, 'o> {
    engine: Engine<'c, 'o>,
    instant: Vec<Request>,
}

impl Streamed<'_, '_> {
    /// Replays a batch; false when the trace steps back in time.
    fn batch(&mut self, batch: Batch) -> Result<bool, SimError> {
        // numbered here in the order the reader numbered them: the same numbers
        for name in &batch.clients {
            self.engine.client(name);
        }
        for name in &batch.endpoints {
            self.engine.endpoint(name);
        }
        for r in batch.rows {
            if self.instant.first().is_some_and(|first| first.t != r.t) && !self.flush()? {
                return Ok(false);
            }
            self.instant.push(r);
        }
        Ok(true)
    }

    fn flush(&mut self) -> Result<bool, SimError> {
        self.engine.sort_instant(&mut self.instant);
        for r in self.instant.drain(..) {
            match self.engine.push(r) {
                Ok(()) => {}
                Err(Feed::Error(e)) => return Err(e),
                Err(Feed::OutOfOrder) => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Configuration → traffic (generated, or `trace` as `(label, CSV text)`) → outcome.
fn outcome(
    cfg: &Config,
    trace: Option<(&str, &str)>,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    match trace {
        Some((label, text)) => simulate_trace(cfg, label, || Ok(text.as_bytes()), observer),
        None => simulate_generated(cfg, observer),
    }
}

/// Configuration → traffic (generated, or `trace` as `(label, CSV text)`) → report, with
/// the reference's checks in the reference's order.
pub fn run(config_json: &str, trace: Option<(&str, &str)>) -> Result<Report, SimError> {
    let cfg = Config::from_json(config_json)?;
    report(&cfg, outcome(&cfg, trace, None)?)
}

/// [`run`], also returning the per-second [`Timeline`] of admitted and rejected attempts per
/// client (what the playground charts).
pub fn run_with_timeline(config_json: &str, trace: Option<(&str, &str)>) -> Result<(Report, Timeline), SimError> {
    let cfg = Config::from_json(config_json)?;
    let mut timeline = Timeline { capacity_rps: cfg.capacity_rps, ..Timeline::default() };
    let out = outcome(&cfg, trace, Some(&mut timeline))?;
    timeline.finish();
    Ok((report(&cfg, out)?, timeline))
}
