//! The `sluicegate` command line.
//!
//! ```text
//! sluicegate check-rules FILE   validate a rules file; exit 1 naming every problem
//! sluicegate sim CONFIG [--trace CSV [--reorder-window SECONDS]] [--max-requests N] [--json] [--self-test]
//!                               simulate rate-limit policies (same output as rate_sim.py)
//! sluicegate sim BEFORE --compare AFTER [--trace CSV] [--review | --json]
//!                               the same traffic through both; the filled rate-limit review
//! ```

use sluicegate::rules::RuleSet;
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
            for line in set.summary_lines() {
                println!("  {line}");
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
