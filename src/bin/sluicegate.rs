//! The `sluicegate` command line.
//!
//! ```text
//! sluicegate check-rules FILE   validate a rules file; exit 1 naming every problem
//! sluicegate sim CONFIG [--trace CSV [--reorder-window SECONDS]] [--max-requests N] [--json] [--self-test]
//!                               simulate rate-limit policies (same output as rate_sim.py)
//! sluicegate sim BEFORE --compare AFTER [--trace CSV] [--review | --json]
//!                               the same traffic through both; the filled rate-limit review
//! ```

use sluicegate::identity::{TrustedProxies, MAX_FORWARDED_HOPS};
use sluicegate::rules::{Algorithm, PreRead, RuleSet, DEFAULT_SOURCE_BYTES_PER_SECOND};
use std::process::ExitCode;

/// `print!` that ends the process when stdout is a closed pipe (`sluicegate sim … | head`),
/// where std's would panic: exit status 141, what a process that SIGPIPE ends reports.
macro_rules! print {
    ($($arg:tt)*) => {
        write_out(format_args!($($arg)*))
    };
}

/// `println!` over [`print!`]'s closed-pipe handling.
macro_rules! println {
    ($($arg:tt)*) => {
        write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

fn write_out(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(text) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("sluicegate: cannot write the output: {e}");
        std::process::exit(2);
    }
}

const USAGE_HEAD: &str = "usage: sluicegate check-rules FILE
       sluicegate sim CONFIG [--trace CSV [--reorder-window SECONDS]] [--max-requests N] [--json] [--self-test]
       sluicegate sim BEFORE --compare AFTER [--trace CSV] [--max-requests N] [--review | --json]

  check-rules FILE   validate an edge rules file (JSON); exits 1 naming every problem
";

/// The whole help: the usage lines, `check-rules`, then `sim`'s options as the simulator states them.
fn usage() -> String {
    format!("{USAGE_HEAD}{}", sluicegate::sim::args::HELP)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["check-rules", file] => check_rules(file),
        ["sim", rest @ ..] => sim(rest),
        ["-h" | "--help" | "help"] => {
            println!("{}", usage());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{}", usage());
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
            for upstream in set.upstreams() {
                println!(
                    "  upstream {}: at most {} in flight per {}, waiting up to {} ms for a slot",
                    upstream.id,
                    upstream.max_in_flight,
                    upstream.scope.name(),
                    upstream.max_wait.as_millis_ceil()
                );
            }
            for (prefix, p) in set.egress().iter().flat_map(|e| e.providers.iter().map(|p| (&e.prefix, p))) {
                let mut limits =
                    vec![format!("{} in flight per mirror ({} mirror(s))", p.max_in_flight, p.mirrors.len())];
                if !p.min_interval.is_zero() {
                    limits.push(format!("starts {} ms apart", p.min_interval.as_millis_ceil()));
                }
                if let Some(w) = p.weight_per_minute {
                    limits.push(format!("{w} weighted calls per rolling minute"));
                }
                if let Some(c) = p.cache {
                    let how = if c.refresh_behind { "refreshed behind" } else { "refreshed ahead" };
                    limits.push(format!("cached {} s, {how}", c.ttl.as_secs_ceil()));
                }
                println!(
                    "  egress {}: {prefix}{}/…: {}, per {}, waiting up to {} ms",
                    p.id,
                    p.id,
                    limits.join(", "),
                    p.scope.name(),
                    p.max_wait.as_millis_ceil()
                );
            }
            for line in pre_read_lines(set.pre_read()) {
                println!("  {line}");
            }
            println!("  {}", identity_line(set.trusted_proxies()));
            match set.capabilities_path() {
                Some(path) => println!("  capabilities: GET {path}"),
                None => println!("  capabilities: off"),
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

/// The checks made before the body is read; the source ceiling always (the one in force).
fn pre_read_lines(pre: &PreRead) -> Vec<String> {
    let bucket = |g: &sluicegate::limit::Gcra| {
        format!("{} requests per second, burst {},", 1e9 / g.interval().as_nanos() as f64, g.burst())
    };
    let mut lines = Vec::new();
    if let Some(g) = &pre.per_ip {
        lines.push(format!("pre_read per_ip: {} per client address", bucket(g)));
    }
    if let Some(g) = &pre.node {
        lines.push(format!("pre_read node: {} per isolate", bucket(g)));
    }
    lines.push(match pre.source_bytes_per_second {
        Some(rate) if rate == DEFAULT_SOURCE_BYTES_PER_SECOND => {
            format!("pre_read source_bytes_per_second: {rate} body bytes per second per source (the default)")
        }
        Some(rate) => format!("pre_read source_bytes_per_second: {rate} body bytes per second per source"),
        None => "pre_read source_bytes_per_second: off (null): body bytes are not counted per source".into(),
    });
    if !pre.sources.is_empty() {
        let ids: Vec<&str> = pre.sources.iter().map(|s| s.id.as_str()).collect();
        lines.push(format!("pre_read sources: {} (any other request's source is its host)", ids.join(", ")));
    }
    lines
}

/// Whose address a request is counted against.
fn identity_line(trusted: &TrustedProxies) -> String {
    if trusted.is_empty() {
        return "identity: CF-Connecting-IP, else the rightmost X-Forwarded-For hop, else the peer".into();
    }
    let ranges: Vec<String> = trusted.ranges().iter().map(ToString::to_string).collect();
    format!(
        "identity: X-Forwarded-For walked from the right past the trusted proxies {} (at most {MAX_FORWARDED_HOPS} \
         hops), when CF-Connecting-IP (else the peer) is one of them",
        ranges.join(", ")
    )
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

fn sim(args: &[&str]) -> ExitCode {
    use sluicegate::sim;
    let args = match sim::args::parse(args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{}\nsluicegate sim: error: {e}", sim::args::USAGE);
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{}\n\n{}", sim::args::USAGE, usage());
        return ExitCode::SUCCESS;
    }
    if args.self_test {
        let (out, ok) = sim::self_test();
        print!("{out}");
        return if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let Some(config) = args.config else {
        eprintln!("{}", sim::args::USAGE);
        return ExitCode::from(2);
    };
    let fail = |e: sim::SimError| {
        eprintln!("error: {e}");
        ExitCode::from(e.exit_code())
    };
    let read = |path: &str| {
        std::fs::read_to_string(path).map_err(|e| sim::SimError::Input(format!("{path}: cannot read: {e}")))
    };
    if let Some(after) = args.compare {
        return compare(&args, config, after).unwrap_or_else(fail);
    }
    let result = read(config).and_then(|text| {
        let dir = std::path::Path::new(config).parent().unwrap_or(std::path::Path::new("."));
        let cfg = sim::Config::from_json_in(&text, dir)?;
        let report = match args.trace {
            // streamed: a trace in time order, or out of it within the window, is never held
            // in memory
            Some(path) => {
                let open = || std::fs::File::open(path);
                let window = args.reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S);
                sim::report(&cfg, sim::simulate_trace_within(&cfg, path, window, open, None)?)?
            }
            // generated and merged on the fly: never stored
            None => {
                let max = args.max_requests.unwrap_or(sim::DEFAULT_MAX_REQUESTS);
                cfg.check_size(max, "--max-requests N")?;
                sim::report(&cfg, sim::simulate_generated(&cfg, None)?)?
            }
        };
        let text = if args.json { report.to_json() } else { report.to_markdown()? };
        Ok((report.highs(), text))
    });
    match result {
        Ok((highs, text)) => {
            print!("{text}");
            if highs > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail(e),
    }
}

/// `sim BEFORE --compare AFTER`: the comparison, the review or the JSON; AFTER's exit status.
fn compare(
    args: &sluicegate::sim::args::Args<'_>,
    before: &str,
    after: &str,
) -> Result<ExitCode, sluicegate::sim::SimError> {
    use sluicegate::sim;
    let read = |path: &str| {
        std::fs::read_to_string(path).map_err(|e| sim::SimError::Input(format!("{path}: cannot read: {e}")))
    };
    let (before_text, after_text) = (read(before)?, read(after)?);
    let dir = |path: &str| std::path::Path::new(path).parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let (before_dir, after_dir) = (dir(before), dir(after));
    let file = |label, text, dir| sim::ConfigFile { label, text, dir: Some(dir) };
    let ceiling = sim::Ceiling {
        max_requests: args.max_requests.unwrap_or(sim::DEFAULT_MAX_REQUESTS),
        raise: "--max-requests N",
    };
    let window = args.reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S);
    let trace = args.trace.map(|path| (path, move || std::fs::File::open(path)));
    let cmp = sim::compare(
        file(before, &before_text, before_dir.as_path()),
        file(after, &after_text, after_dir.as_path()),
        trace,
        window,
        ceiling,
    )?;
    let text = if args.json {
        cmp.to_json()
    } else if args.review {
        cmp.to_review()
    } else {
        cmp.to_markdown()
    };
    print!("{text}");
    Ok(ExitCode::from(cmp.exit_code()))
}
