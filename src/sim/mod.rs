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
//! let report = analyse(&cfg, &generate(&cfg).unwrap()).unwrap();
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

pub use analyse::{analyse, analyse_with, ClientRow, Finding, PolicyRow, Report, Severity};
pub use config::{Algorithm, Client, Config, KeyBy, Pattern, Policy, Retry};
pub use engine::{generate, simulate, simulate_with, ClientStats, Outcome, PolicyStats, Request, Sample};
pub use limiters::{max_in_window, Check, Limiter};
pub use random::{py_hash_float, PyRandom, Seed};
pub use selftest::self_test;
pub use timeline::{Timeline, TimelineClient};
pub use trace::{parse_trace, records};

use core::fmt;

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

/// Configuration → traffic (generated, or `trace` as `(label, CSV text)`) → report, with
/// the reference's checks in the reference's order.
pub fn run(config_json: &str, trace: Option<(&str, &str)>) -> Result<Report, SimError> {
    let cfg = Config::from_json(config_json)?;
    let reqs = match trace {
        Some((label, text)) => parse_trace(label, text)?,
        None => generate(&cfg)?,
    };
    analyse(&cfg, &reqs)
}

/// [`run`], also returning the per-second [`Timeline`] of admitted and rejected attempts per
/// client (what the playground charts).
pub fn run_with_timeline(config_json: &str, trace: Option<(&str, &str)>) -> Result<(Report, Timeline), SimError> {
    let cfg = Config::from_json(config_json)?;
    let reqs = match trace {
        Some((label, text)) => parse_trace(label, text)?,
        None => generate(&cfg)?,
    };
    let mut timeline = Timeline::default();
    let report = analyse_with(&cfg, &reqs, Some(&mut timeline))?;
    Ok((report, timeline))
}
