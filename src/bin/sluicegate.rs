//! The `sluicegate` command line.
//!
//! ```text
//! sluicegate check-rules FILE   validate a rules file; exit 1 naming every problem
//! sluicegate sim CONFIG [--trace CSV [--reorder-window SECONDS]] [--max-requests N] [--json] [--self-test]
//!                               simulate rate-limit policies (same output as rate_sim.py)
//! sluicegate sim BEFORE --compare AFTER [--trace CSV] [--review [--review-template PATH] | --json]
//!                               the same traffic through both; the filled rate-limit review
//! ```
//!
//! A first argument that is no command is named, with the command it is closest to
//! (`unknown command 'simulate'; did you mean 'sim'?`), exit status 2.
//!
//! A simulation that runs longer than a second shows how far it has got on stderr when that
//! is a terminal (see [`progress`]); what it prints on stdout is the same either way.

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
       sluicegate sim BEFORE --compare AFTER [--trace CSV] [--max-requests N] [--review [--review-template PATH] | --json]

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
        ["replay", ..] => {
            eprintln!(
                "sluicegate: replay runs from npm, where it can start the edge worker in Miniflare: \
                 npx sluicegate replay --rules RULES --trace CSV"
            );
            ExitCode::from(2)
        }
        // a command with the wrong arguments, or none: the usage
        [word, ..] => match sluicegate::sim::args::unknown_command(word) {
            Some(message) => {
                eprintln!("sluicegate: {message}\nRun 'sluicegate --help' for the commands and their options.");
                ExitCode::from(2)
            }
            None => {
                eprintln!("{}", usage());
                ExitCode::from(2)
            }
        },
        [] => {
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
    let mut meter = progress::Meter::on_stderr();
    if let Some(after) = args.compare {
        let result = compare(&args, config, after, &mut meter);
        meter.clear(); // a line left by a run that failed (one that did not cleared it to print)
        return result.unwrap_or_else(fail);
    }
    let mut draw =
        meter.tty.then_some(sim::Progress { observer: None, report: |done, total| meter.update(done, total, None) });
    let observer = draw.as_mut().map(|p| -> &mut dyn sim::Observer { p });
    let result = read(config).and_then(|text| {
        let dir = std::path::Path::new(config).parent().unwrap_or(std::path::Path::new("."));
        let cfg = sim::Config::from_json_in(&text, dir)?;
        let report = match args.trace {
            // streamed: a trace in time order, or out of it within the window, is never held
            // in memory
            Some(path) => {
                let open = || std::fs::File::open(path);
                let window = args.reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S);
                sim::report(&cfg, sim::simulate_trace_within(&cfg, path, window, open, observer)?)?
            }
            // generated and merged on the fly: never stored
            None => {
                let max = args.max_requests.unwrap_or(sim::DEFAULT_MAX_REQUESTS);
                cfg.check_size(max, "--max-requests N")?;
                sim::report(&cfg, sim::simulate_generated(&cfg, observer)?)?
            }
        };
        let text = if args.json { report.to_json() } else { report.to_markdown()? };
        Ok((report.highs(), text))
    });
    meter.clear();
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
    meter: &mut progress::Meter,
) -> Result<ExitCode, sluicegate::sim::SimError> {
    use sluicegate::sim;
    let read = |path: &str| {
        std::fs::read_to_string(path).map_err(|e| sim::SimError::Input(format!("{path}: cannot read: {e}")))
    };
    let (before_text, after_text) = (read(before)?, read(after)?);
    // a team's own review template, refused before the runs for a placeholder it cannot fill
    let template = match args.review_template {
        Some(path) => {
            let text = read(path)?;
            let template_error = move |e: sim::review::TemplateError| sim::SimError::Input(format!("{path}: {e}"));
            sim::review::check_template(&text).map_err(template_error)?;
            Some((text, template_error))
        }
        None => None,
    };
    let dir = |path: &str| std::path::Path::new(path).parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let (before_dir, after_dir) = (dir(before), dir(after));
    let file = |label, text, dir| sim::ConfigFile { label, text, dir: Some(dir) };
    let ceiling = sim::Ceiling {
        max_requests: args.max_requests.unwrap_or(sim::DEFAULT_MAX_REQUESTS),
        raise: "--max-requests N",
    };
    let window = args.reorder_window.unwrap_or(sim::DEFAULT_REORDER_WINDOW_S);
    let trace = args.trace.map(|path| (path, move || std::fs::File::open(path)));
    let tty = meter.tty;
    let mut draw = |side, done, total| meter.update(done, total, Some(side));
    let cmp = sim::compare(
        file(before, &before_text, before_dir.as_path()),
        file(after, &after_text, after_dir.as_path()),
        trace,
        window,
        ceiling,
        if tty { Some(&mut draw) } else { None },
    )?;
    let text = if args.json {
        cmp.to_json()
    } else if let Some((template, template_error)) = &template {
        cmp.to_review_from(template).map_err(template_error)?
    } else if args.review {
        cmp.to_review()
    } else {
        cmp.to_markdown()
    };
    meter.clear();
    print!("{text}");
    Ok(ExitCode::from(cmp.exit_code()))
}

/// The progress line of a long simulation: on stderr when it is a terminal, once the run has
/// taken a second, redrawn in place at most ten times a second, and cleared before anything
/// else is printed.
mod progress {
    use sluicegate::sim::grouped;
    use std::io::{IsTerminal, Write};
    use std::time::{Duration, Instant};

    /// How long a run goes before it shows its progress.
    pub const AFTER: Duration = Duration::from_secs(1);
    /// The least time between two draws.
    pub const EVERY: Duration = Duration::from_millis(100);

    /// The line to draw now, if any: none when stderr is not a terminal (`tty`), when the run
    /// (`elapsed`) is younger than [`AFTER`], or when the line was last drawn (`last_draw`,
    /// into the run) less than [`EVERY`] ago; else what it says (see [`text`]).
    pub fn line(
        tty: bool,
        elapsed: Duration,
        last_draw: Option<Duration>,
        done: u64,
        total: Option<u64>,
        side: Option<&str>,
    ) -> Option<String> {
        let due = tty && elapsed >= AFTER && last_draw.is_none_or(|last| elapsed.saturating_sub(last) >= EVERY);
        due.then(|| text(done, total, side))
    }

    /// `sim: 1,234,567 of 3,000,000 requests (41 %)`; `sim: 1,234,567 rows read` when the
    /// total is not known (a trace read as it streams); `sim (before): …` for a side of a
    /// comparison.
    pub fn text(done: u64, total: Option<u64>, side: Option<&str>) -> String {
        let who = side.map_or_else(|| "sim".to_owned(), |side| format!("sim ({side})"));
        match total {
            Some(total) => {
                let percent = u128::from(done) * 100 / u128::from(total.max(1));
                format!("{who}: {} of {} requests ({percent} %)", grouped(done), grouped(total))
            }
            None => format!("{who}: {} rows read", grouped(done)),
        }
    }

    /// Draws the line on stderr as a run goes on.
    pub struct Meter {
        /// Whether stderr is a terminal.
        pub tty: bool,
        start: Instant,
        last_draw: Option<Duration>,
        /// The widest line drawn (what [`Meter::clear`] blanks).
        width: usize,
    }

    impl Meter {
        /// A meter for a run starting now.
        pub fn on_stderr() -> Self {
            Meter { tty: std::io::stderr().is_terminal(), start: Instant::now(), last_draw: None, width: 0 }
        }

        /// The run has replayed `done` logical requests (of `total`, when known).
        pub fn update(&mut self, done: u64, total: Option<u64>, side: Option<&str>) {
            let elapsed = self.start.elapsed();
            if let Some(text) = line(self.tty, elapsed, self.last_draw, done, total, side) {
                // over the whole of a longer line drawn before
                let pad = self.width.saturating_sub(text.len());
                draw(&format!("\r{text}{:pad$}", ""));
                self.width = self.width.max(text.len());
                self.last_draw = Some(elapsed);
            }
        }

        /// Blanks the line, if one was drawn, leaving the cursor at its start.
        pub fn clear(&mut self) {
            if self.width > 0 {
                draw(&format!("\r{:w$}\r", "", w = self.width));
                self.width = 0;
            }
        }
    }

    /// Writes to stderr in one piece; a failure only costs the progress line.
    fn draw(text: &str) {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    #[cfg(test)]
    mod tests {
        use super::{line, text, Meter, AFTER, EVERY};
        use std::time::Duration;

        const MS: Duration = Duration::from_millis(1);

        #[test]
        fn nothing_is_drawn_off_a_terminal_or_in_the_first_second() {
            assert_eq!(line(false, 10 * AFTER, None, 65_536, Some(100_000), None), None);
            assert_eq!(line(true, AFTER - MS, None, 65_536, Some(100_000), None), None);
            assert_eq!(
                line(true, AFTER, None, 65_536, Some(100_000), None).as_deref(),
                Some("sim: 65,536 of 100,000 requests (65 %)")
            );
        }

        #[test]
        fn the_line_is_drawn_at_most_ten_times_a_second() {
            let drawn = Some(AFTER + 50 * MS);
            assert_eq!(line(true, AFTER + 149 * MS, drawn, 1, None, None), None);
            assert_eq!(line(true, AFTER + 150 * MS, drawn, 1, None, None).as_deref(), Some("sim: 1 rows read"));
            assert_eq!(EVERY, 100 * MS);
            // a clock that went back draws nothing, rather than failing
            assert_eq!(line(true, AFTER, Some(AFTER + MS), 1, None, None), None);
        }

        #[test]
        fn the_text_says_how_far_of_how_many_or_the_rows_read_and_which_side() {
            assert_eq!(text(1_234_567, Some(3_000_000), None), "sim: 1,234,567 of 3,000,000 requests (41 %)");
            assert_eq!(text(3_000_000, Some(3_000_000), None), "sim: 3,000,000 of 3,000,000 requests (100 %)");
            assert_eq!(
                text(u64::MAX, Some(u64::MAX), None),
                "sim: 18,446,744,073,709,551,615 of 18,446,744,073,709,551,615 requests (100 %)"
            );
            assert_eq!(text(999, None, None), "sim: 999 rows read");
            assert_eq!(text(131_072, None, Some("after")), "sim (after): 131,072 rows read");
            assert_eq!(text(65_536, Some(200_000), Some("before")), "sim (before): 65,536 of 200,000 requests (32 %)");
        }

        #[test]
        fn a_meter_off_a_terminal_never_draws() {
            let mut meter =
                Meter { tty: false, start: std::time::Instant::now() - 5 * AFTER, last_draw: None, width: 0 };
            meter.update(65_536, None, None);
            assert_eq!((meter.last_draw, meter.width), (None, 0));
        }
    }
}
