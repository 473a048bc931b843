//! How big a run is before it starts: the requests a configuration's clients will generate,
//! estimated from their patterns, and the ceiling past which a run is refused (a mistyped
//! `duration_s: 1e12` or `rps: 1e9` would otherwise run until killed).
//!
//! Recorded traffic is not estimated: a trace is bounded by its file.

use super::config::{Client, Config, Pattern};
use super::{py, SimError};
use alloc::format;
use alloc::string::String;

/// The most requests a run may generate unless raised (`--max-requests`, `maxRequests`):
/// 50 million, a few minutes of simulation. The repository's example and test configs
/// generate at most about a million.
pub const DEFAULT_MAX_REQUESTS: u64 = 50_000_000;

/// The requests `client` will generate (the expected count for Poisson traffic), before
/// retries: `rps × duration`, or `burst` per burst with a burst every `every_s` seconds.
/// Never NaN, at least 0, and `f64::INFINITY` at worst (saturating when converted).
pub fn estimate_requests(client: &Client) -> f64 {
    let d = client.duration.max(0.0);
    let n = match client.pattern {
        Pattern::Steady { rps } => (d * rps).round_ties_even(),
        Pattern::Poisson { rps } => d * rps,
        Pattern::Burst { burst, every_s } => {
            // a burst at start, start + every_s, ... while before the end
            let bursts = if d > 0.0 { (d / every_s).ceil().max(1.0) } else { 0.0 };
            bursts * burst.max(0) as f64
        }
    };
    if n.is_nan() {
        f64::INFINITY
    } else {
        n.max(0.0)
    }
}

/// `n` with thousands separators (`50,000,000`), as the simulator's messages and the command
/// line's progress line write counts.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An estimate as `1.0e15` (up to a million written out whole).
fn about(n: f64) -> String {
    if n < 1e6 {
        grouped(n as u64)
    } else {
        format!("{n:.1e}")
    }
}

impl Config {
    /// The requests the configured clients will generate together ([`estimate_requests`]
    /// summed, saturating: never NaN, `f64::INFINITY` at worst).
    pub fn estimated_requests(&self) -> f64 {
        self.clients.iter().map(estimate_requests).sum()
    }

    /// Refuses (exit status 2) a configuration whose clients would generate more than
    /// `max_requests` requests, naming the client and the estimate; `raise` says how to
    /// raise the ceiling (`--max-requests N` for the CLI).
    pub fn check_size(&self, max_requests: u64, raise: &str) -> Result<(), SimError> {
        let total = self.estimated_requests();
        // `as` saturates: an infinite estimate is u64::MAX
        if (total as u64) <= max_requests && total <= max_requests as f64 {
            return Ok(());
        }
        let (biggest, n) = self
            .clients
            .iter()
            .map(|c| (c, estimate_requests(c)))
            .fold(None, |best: Option<(&Client, f64)>, (c, n)| match best {
                Some((_, m)) if m >= n => best,
                _ => Some((c, n)),
            })
            .expect("a non-zero estimate has a client");
        let name = format!("{:?}", biggest.name);
        let over = py::format_g(biggest.duration);
        let ceiling = format!("the most a run may make is {} (raise it with {raise})", grouped(max_requests));
        Err(SimError::Input(if n > max_requests as f64 || self.clients.len() == 1 {
            format!("client {name}: about {} requests over {over} s; {ceiling}", about(n))
        } else {
            format!(
                "the {} clients together: about {} requests (the most, client {name}: about {} over {over} s); \
                 {ceiling}",
                self.clients.len(),
                about(total),
                about(n)
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::{estimate_requests, DEFAULT_MAX_REQUESTS};
    use crate::sim::{Config, SimError};

    fn config(clients: &str, duration_s: &str) -> Config {
        Config::from_json(&format!(
            r#"{{"duration_s": {duration_s}, "policies": [{{"algorithm": "token_bucket", "rate": 1}}],
                "clients": [{clients}]}}"#
        ))
        .unwrap()
    }

    fn estimates(cfg: &Config) -> Vec<f64> {
        cfg.clients.iter().map(estimate_requests).collect()
    }

    #[test]
    fn steady_and_poisson_clients_send_rps_times_their_duration() {
        let cfg = config(
            r#"{"rps": 2.5}, {"pattern": "poisson", "rps": 4}, {"rps": 10, "start": 100},
               {"rps": 10, "start": 50, "duration": 20}, {"rps": 0.001}"#,
            "300",
        );
        assert_eq!(estimates(&cfg), [750.0, 1200.0, 2000.0, 200.0, 0.0]);
        assert_eq!(cfg.estimated_requests(), 4150.0);
    }

    #[test]
    fn burst_clients_send_a_burst_every_interval_from_their_start() {
        let cfg = config(
            r#"{"pattern": "burst", "burst": 50, "every_s": 60}, {"pattern": "burst", "burst": 50, "every_s": 70},
               {"pattern": "burst", "burst": 7}, {"pattern": "burst", "burst": 3, "every_s": 1000},
               {"pattern": "burst", "burst": 0.5, "every_s": 1}"#,
            "300",
        );
        // bursts at 0, 60, ..., 240 (5); at 0, 70, ..., 280 (5); default every 60 s; one
        assert_eq!(estimates(&cfg), [250.0, 250.0, 35.0, 3.0, 0.0]);
    }

    #[test]
    fn the_estimate_is_what_the_run_generates() {
        let cfg = config(
            r#"{"name": "a", "rps": 3}, {"name": "b", "pattern": "burst", "burst": 20, "every_s": 7},
               {"name": "c", "rps": 0.7, "start": 13.5}"#,
            "200",
        );
        let traffic = crate::sim::generate(&cfg).unwrap();
        assert_eq!(cfg.estimated_requests(), traffic.len() as f64);
    }

    #[test]
    fn huge_numbers_saturate_and_are_refused_never_nan_or_wrapped() {
        let cfg = config(
            r#"{"name": "big", "rps": 1e308}, {"name": "bigger", "rps": 1e308},
               {"name": "bursty", "pattern": "burst", "burst": 1e300, "every_s": 1e-300}"#,
            "1e308",
        );
        assert_eq!(estimates(&cfg), [f64::INFINITY; 3]);
        assert_eq!(cfg.estimated_requests(), f64::INFINITY);
        let Err(SimError::Input(msg)) = cfg.check_size(u64::MAX, "--max-requests N") else { panic!() };
        assert!(msg.starts_with(r#"client "big": about inf requests over 1e+308 s; the most a run may make is 18,446,744,073,709,551,615"#), "{msg}");
    }

    #[test]
    fn a_config_just_under_the_ceiling_is_accepted_and_just_over_it_refused() {
        let under = config(r#"{"name": "a", "rps": 99999}, {"name": "b", "rps": 1}"#, "500");
        assert_eq!(under.estimated_requests(), DEFAULT_MAX_REQUESTS as f64);
        assert_eq!(under.check_size(DEFAULT_MAX_REQUESTS, "--max-requests N"), Ok(()));
        let over = config(r#"{"name": "a", "rps": 99999}, {"name": "b", "rps": 1.002}"#, "500");
        assert_eq!(over.estimated_requests(), DEFAULT_MAX_REQUESTS as f64 + 1.0);
        assert_eq!(
            over.check_size(DEFAULT_MAX_REQUESTS, "--max-requests N"),
            Err(SimError::Input(
                r#"the 2 clients together: about 5.0e7 requests (the most, client "a": about 5.0e7 over 500 s); the most a run may make is 50,000,000 (raise it with --max-requests N)"#
                    .into()
            ))
        );
        assert_eq!(over.check_size(DEFAULT_MAX_REQUESTS + 1, "--max-requests N"), Ok(()));
    }
}
