//! The rate-limit policy simulator: replays generated or recorded traffic against rate-limit
//! policies and reports who gets throttled, why and for how long, and whether the policies
//! protect the backend (findings RL01-RL10).
//!
//! This is the Rust implementation of the reference simulator
//! (`rate_sim.py`, see the `sim` subcommand of the `sluicegate` binary) and gives the same
//! results for the same configuration and trace: the same `--json` document, the same
//! Markdown report byte for byte, the same exit status. Parity decides a few things:
//!
//! - Time is `f64` seconds and the limiters ([`Limiter`]) use the reference's formulas and
//!   `1e-9` tolerances, not the integer-time limiters of [`crate::limit`].
//! - Poisson traffic draws from [`PyRandom`], CPython's Mersenne Twister, so a seed gives
//!   the reference's request times.
//! - Numbers are printed with [`py`]'s reproductions of Python's `repr`, `%g`, `%.Nf` and
//!   `round`, and the JSON with `json.dumps(indent=2)`'s layout.
//! - Where the reference itself crashes on a valid configuration (see [`SimError::Crash`]),
//!   this module fails at the same point with exit status 1.
//!
//! Needs `std` (floating-point `ln`, `floor`, `ceil`).
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
    generate, simulate, simulate_observed, ClientStats, Engine, Event, Feed, Names, Observer, Outcome, Peak,
    PolicyStats, Request, Sample, Traffic,
};
pub use limiters::{max_in_window, Check, Limiter};
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
pub fn simulate_trace<R: Read>(
    cfg: &Config,
    label: &str,
    mut open: impl FnMut() -> std::io::Result<R>,
    mut observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    let cannot = |e: std::io::Error| SimError::Input(format!("{label}: cannot read: {e}"));
    {
        let mut reader = TraceReader::new(label, open().map_err(cannot)?);
        let mut engine = Engine::new(cfg, observer.as_deref_mut().map(|o| -> &mut dyn Observer { o }));
        // Rows of one instant are replayed in the reference's order whatever their order in
        // the file; only a step back in time needs the whole trace sorted.
        let mut instant: Vec<Request> = Vec::new();
        let flush = |engine: &mut Engine<'_, '_>, instant: &mut Vec<Request>| -> Result<bool, SimError> {
            engine.sort_instant(instant);
            for r in instant.drain(..) {
                match engine.push(r) {
                    Ok(()) => {}
                    Err(Feed::Error(e)) => return Err(e),
                    Err(Feed::OutOfOrder) => return Ok(false),
                }
            }
            Ok(true)
        };
        let mut sorted = true;
        while let Some(row) = reader.next_row()? {
            let (client, endpoint) = (engine.client(row.client), engine.endpoint(row.endpoint));
            let r = Request { t: row.t, client, endpoint, cost: row.cost };
            if instant.first().is_some_and(|first| first.t != r.t) && !flush(&mut engine, &mut instant)? {
                sorted = false;
                break;
            }
            instant.push(r);
        }
        if sorted && flush(&mut engine, &mut instant)? {
            return engine.finish();
        }
    }
    if let Some(o) = observer.as_deref_mut() {
        o.restart();
    }
    let traffic = read_trace(TraceReader::new(label, open().map_err(cannot)?))?;
    simulate_observed(cfg, traffic, observer)
}

/// Configuration → traffic (generated, or `trace` as `(label, CSV text)`) → outcome.
fn outcome(
    cfg: &Config,
    trace: Option<(&str, &str)>,
    observer: Option<&mut dyn Observer>,
) -> Result<Outcome, SimError> {
    match trace {
        Some((label, text)) => simulate_trace(cfg, label, || Ok(text.as_bytes()), observer),
        None => {
            let traffic = generate(cfg)?;
            if traffic.is_empty() {
                return Ok(Outcome::default());
            }
            simulate_observed(cfg, traffic, observer)
        }
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
