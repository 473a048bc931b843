//! The `sluicegate` command line.
//!
//! ```text
//! sluicegate check-rules FILE   validate a rules file; exit 1 naming every problem
//! ```

use sluicegate::rules::{Algorithm, RuleSet};
use std::process::ExitCode;

const USAGE: &str = "usage: sluicegate check-rules FILE\n\n  check-rules FILE   validate an edge rules file (JSON); exits 1 naming every problem";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["check-rules", file] => check_rules(file),
        ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn check_rules(file: &str) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("{file}: cannot read: {e}");
            return ExitCode::from(2);
        }
    };
    match RuleSet::from_json(&text) {
        Ok(set) => {
            println!("{file}: {} rule(s) valid", set.rules().len());
            for rule in set.rules() {
                println!("  {}: {}", rule.id, summary(rule));
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("{file}: {error}");
            }
            eprintln!("{file}: {} problem(s); nothing was loaded", errors.len());
            ExitCode::FAILURE
        }
    }
}

fn summary(rule: &sluicegate::rules::Rule) -> String {
    let counting = match rule.algorithm {
        Algorithm::SlidingLog { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (exact rolling count)", period.as_secs_ceil())
        }
        Algorithm::FixedWindow { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (fixed windows)", period.as_secs_ceil())
        }
        Algorithm::SlidingWindow { requests_per_period, period } => {
            format!("{requests_per_period} per {} s (sliding-window estimate)", period.as_secs_ceil())
        }
        Algorithm::TokenBucket { interval, burst } => {
            format!("token bucket, burst {burst}, one token every {} ms", interval.as_millis_ceil())
        }
    };
    let by: Vec<_> = rule.characteristics.iter().map(|c| c.name().into_owned()).collect();
    let block = rule.mitigation_timeout.as_secs_ceil();
    let block = if block == 0 { String::new() } else { format!(", then block {block} s") };
    format!("{counting} per {}{block}, answering {}", by.join(" + "), rule.response.status)
}
