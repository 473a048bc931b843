//! `sluicegate sim`'s arguments, read once for the native command line and for `npx
//! sluicegate sim` (through the wasm build): long options may be abbreviated, `--trace=CSV`
//! works, `--` ends the options, as the reference's `argparse` parser reads them.

/// The usage line of `sluicegate sim` (the native command line and `npx sluicegate sim`).
pub const USAGE: &str =
    "usage: sluicegate sim [-h] [--trace TRACE] [--reorder-window SECONDS] [--json] [--self-test] [config]\n       \
     sluicegate sim BEFORE --compare AFTER [--trace TRACE] [--review [--review-template PATH] | --json]";

/// `sim`'s lines in the command line's help (the native one and `npx sluicegate sim`): what
/// each option does.
pub const HELP: &str = "  sim CONFIG         replay traffic against rate-limit policies and report who is throttled;
                     exits 0 (no high findings), 1 (high findings) or 2 (bad input)
    --trace CSV      recorded traffic (t,client[,endpoint][,cost]) instead of the generated clients
    --reorder-window SECONDS
                     how far a trace's rows may lag behind the newest row read and still
                     stream (default 10; 0 or more; inf holds the whole trace in memory); a
                     row further back makes the trace be read again, whole, and sorted. The
                     results are the same whatever the window
    --max-requests N the most requests the configured clients may generate (default
                     50,000,000): a config estimated past it is refused (exit 2) before it
                     runs, naming the client and the estimate. Not applied to a trace
    --json           the result as JSON instead of the Markdown report
    --compare AFTER  replay the same traffic (the same seed and duration_s, or the same
                     --trace) through CONFIG (before) and AFTER (the proposed policies): per
                     client 429s, delays and failures before -> after, the peak, the findings
                     resolved and new, and a verdict judged on AFTER (ship / ship with changes
                     / do not ship); the exit status is AFTER's
    --review         with --compare: the filled rate-limit review (Markdown) to hand back
    --review-template PATH
                     the review from this template instead of the built-in one
                     (templates/rate-limit-review.md; implies --review): {{placeholders}}
                     such as {{verdict}} and {{before_after_table}} are filled in
    --self-test      run the simulator's self-test";

/// The commands of the command line, native and `npx sluicegate` (`help` is also `-h` and
/// `--help`). `replay` is the npm one's alone: it starts the edge worker in Miniflare.
pub const COMMANDS: [&str; 4] = ["sim", "check-rules", "replay", "help"];

/// What the command line says when its first argument is no command (`None` when it is one,
/// or `-h` / `--help`): `unknown command 'simulate'; did you mean 'sim'?`, the suggestion
/// when a command is close to it; `unknown option '--verbose'` for an option.
pub fn unknown_command(word: &str) -> Option<String> {
    if COMMANDS.contains(&word) || word == "-h" || word == "--help" {
        return None;
    }
    let what = if word.starts_with('-') && word.len() > 1 { "option" } else { "command" };
    let mut message = format!("unknown {what} '{word}'");
    if let Some(command) = crate::core::suggest::nearest(word.trim_start_matches('-'), &COMMANDS) {
        let command = if what == "option" && command == "help" { "--help" } else { command };
        message.push_str(&format!("; did you mean '{command}'?"));
    }
    Some(message)
}

/// `sim`'s options, parsed the way the reference's `argparse` parser reads them (long
/// options may be abbreviated, `--trace=CSV` works, `--` ends the options).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args<'a> {
    /// The configuration file (the before one with `--compare`).
    pub config: Option<&'a str>,
    /// `--trace CSV`.
    pub trace: Option<&'a str>,
    /// `--reorder-window SECONDS`.
    pub reorder_window: Option<f64>,
    /// `--max-requests N`.
    pub max_requests: Option<u64>,
    /// `--json`.
    pub json: bool,
    /// `--self-test`.
    pub self_test: bool,
    /// `-h`, `--help`.
    pub help: bool,
    /// `--compare AFTER`.
    pub compare: Option<&'a str>,
    /// `--review`.
    pub review: bool,
    /// `--review-template PATH`.
    pub review_template: Option<&'a str>,
}

/// `sim`'s long options (abbreviated as argparse allows).
const LONG: [&str; 9] = [
    "--help",
    "--trace",
    "--reorder-window",
    "--max-requests",
    "--json",
    "--self-test",
    "--compare",
    "--review",
    "--review-template",
];

/// Reads `sim`'s arguments (after `sim`).
///
/// # Errors
/// What argparse would say, e.g. `unrecognized arguments: --verbose` or `argument
/// --max-requests: expected a whole number, 1 or more, got "lots"`.
pub fn parse<'a>(args: &[&'a str]) -> Result<Args<'a>, String> {
    let mut parsed = Args::default();
    let mut positional = Vec::new();
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        if arg == "--" {
            positional.extend(rest.by_ref());
            break;
        }
        if arg == "-h" {
            parsed.help = true;
            continue;
        }
        if !arg.starts_with("--") || arg.len() == 2 {
            if arg.starts_with('-') && arg.len() > 1 {
                return Err(format!("unrecognized arguments: {arg}"));
            }
            positional.push(arg);
            continue;
        }
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (arg, None),
        };
        // an option's whole name wins over the longer ones it starts (`--review`)
        let matches: Vec<_> = match LONG.iter().find(|l| **l == name) {
            Some(exact) => vec![exact],
            None => LONG.iter().filter(|l| l.starts_with(name)).collect(),
        };
        let option = match matches.as_slice() {
            [one] => **one,
            [] => return Err(format!("unrecognized arguments: {arg}")),
            _ => return Err(format!("ambiguous option: {name}")),
        };
        match (option, value) {
            ("--trace", Some(v)) => parsed.trace = Some(v),
            ("--trace", None) => match rest.next() {
                Some(v) if !v.starts_with('-') || v.len() == 1 => parsed.trace = Some(v),
                _ => return Err("argument --trace: expected one argument".into()),
            },
            ("--compare", Some(v)) => parsed.compare = Some(v),
            ("--compare", None) => match rest.next() {
                Some(v) if !v.starts_with('-') || v.len() == 1 => parsed.compare = Some(v),
                _ => return Err("argument --compare: expected one argument (the after config)".into()),
            },
            ("--review-template", value) => {
                parsed.review = true;
                parsed.review_template = match value.or_else(|| rest.next().copied()) {
                    Some(v) if value.is_some() || !v.starts_with('-') || v.len() == 1 => Some(v),
                    _ => return Err("argument --review-template: expected one argument (the template's path)".into()),
                };
            }
            ("--reorder-window", value) => {
                let Some(v) = value.or_else(|| rest.next().copied()) else {
                    return Err("argument --reorder-window: expected one argument".into());
                };
                let Some(window) = seconds(v) else {
                    return Err(format!("argument --reorder-window: expected seconds, 0 or more (or inf), got {v:?}"));
                };
                parsed.reorder_window = Some(window);
            }
            ("--max-requests", value) => {
                let Some(v) = value.or_else(|| rest.next().copied()) else {
                    return Err("argument --max-requests: expected one argument".into());
                };
                let Some(n) = count(v) else {
                    return Err(format!("argument --max-requests: expected a whole number, 1 or more, got {v:?}"));
                };
                parsed.max_requests = Some(n);
            }
            (_, Some(_)) => return Err(format!("argument {option}: ignored explicit argument")),
            ("--json", None) => parsed.json = true,
            ("--self-test", None) => parsed.self_test = true,
            ("--review", None) => parsed.review = true,
            _ => parsed.help = true,
        }
    }
    match positional.as_slice() {
        [] => {}
        [config] => parsed.config = Some(config),
        [_, extra @ ..] => return Err(format!("unrecognized arguments: {}", extra.join(" "))),
    }
    let review = if parsed.review_template.is_some() { "--review-template" } else { "--review" };
    if parsed.review && parsed.compare.is_none() {
        return Err(format!("argument {review}: needs --compare AFTER (the review compares two configs)"));
    }
    if parsed.review && parsed.json {
        return Err(format!(
            "argument {review}: not allowed with --json (the JSON comparison carries the same figures)"
        ));
    }
    if parsed.compare.is_some() && parsed.self_test {
        return Err("argument --compare: not allowed with --self-test".into());
    }
    Ok(parsed)
}

/// The usage line of `sluicegate replay` (the npm command line's).
pub const REPLAY_USAGE: &str =
    "usage: sluicegate replay --rules RULES --trace TRACE [--speed K] [--edge URL] [--tolerance-ms N] [--json]";

/// `replay`'s options.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayArgs<'a> {
    /// `--rules RULES`: the rules file.
    pub rules: &'a str,
    /// `--trace TRACE`: the trace.
    pub trace: &'a str,
    /// `--speed K`: the edge's clock runs K times as fast (above 0, at most 1,000; default 1).
    pub speed: f64,
    /// `--edge URL`: a running edge instead of the one the command starts.
    pub edge: Option<&'a str>,
    /// `--tolerance-ms N`: how near a boundary a request is timing-limited (above 0; default 5).
    pub tolerance_ms: f64,
    /// `--json`.
    pub json: bool,
}

/// Reads `replay`'s arguments (after `replay`).
///
/// # Errors
/// What is wrong, e.g. `--rules and --trace are required`, `--speed must be a number above 0
/// and at most 1000, got 0`, `unknown argument --bogus`.
pub fn parse_replay<'a>(args: &[&'a str]) -> Result<ReplayArgs<'a>, String> {
    let (mut rules, mut trace, mut edge) = (None, None, None);
    let (mut speed, mut tolerance_ms, mut json) = (1.0, 5.0, false);
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        let mut value = || rest.next().copied().ok_or_else(|| format!("{arg} needs a value"));
        match arg {
            "--json" => json = true,
            "--rules" => rules = Some(value()?),
            "--trace" => trace = Some(value()?),
            "--edge" => edge = Some(value()?),
            "--speed" | "--tolerance-ms" => {
                let text = value()?;
                let most = if arg == "--speed" { 1_000.0 } else { f64::INFINITY };
                let n = text.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n > 0.0 && *n <= most);
                let Some(n) = n else {
                    let bound = if arg == "--speed" { " and at most 1000" } else { "" };
                    return Err(format!("{arg} must be a number above 0{bound}, got {text}"));
                };
                if arg == "--speed" {
                    speed = n;
                } else {
                    tolerance_ms = n;
                }
            }
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    let (Some(rules), Some(trace)) = (rules, trace) else {
        return Err("--rules and --trace are required".into());
    };
    if edge.is_some() && speed != 1.0 {
        return Err("--speed needs the edge this command starts: a running edge (--edge) keeps its own clock".into());
    }
    Ok(ReplayArgs { rules, trace, speed, edge, tolerance_ms, json })
}

/// A count, 1 or more: digits (`_` and `,` allowed as separators) or a whole number in
/// exponent form (`1e9`); `None` for anything else.
pub(crate) fn count(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits: String = text.chars().filter(|c| *c != '_' && *c != ',').collect();
    let n = match digits.parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            let x = digits.parse::<f64>().ok().filter(|x| x.is_finite() && x.fract() == 0.0 && *x >= 1.0)?;
            // `as` saturates past u64::MAX
            x as u64
        }
    };
    (n >= 1).then_some(n)
}

/// A number of seconds, 0 or more (`inf` too); `None` for anything else.
pub(crate) fn seconds(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|s| *s >= 0.0).map(|s| s + 0.0)
}

#[cfg(test)]
mod tests {
    use super::{parse, parse_replay, unknown_command, Args};

    #[test]
    fn a_word_that_is_no_command_is_named_with_the_command_it_is_closest_to() {
        assert_eq!(unknown_command("simulate").as_deref(), Some("unknown command 'simulate'; did you mean 'sim'?"));
        assert_eq!(unknown_command("check").as_deref(), Some("unknown command 'check'; did you mean 'check-rules'?"));
        assert_eq!(unknown_command("replya").as_deref(), Some("unknown command 'replya'; did you mean 'replay'?"));
        assert_eq!(unknown_command("frobnicate").as_deref(), Some("unknown command 'frobnicate'"));
        assert_eq!(unknown_command("--hlep").as_deref(), Some("unknown option '--hlep'; did you mean '--help'?"));
        assert_eq!(unknown_command("--verbose").as_deref(), Some("unknown option '--verbose'"));
        for known in ["sim", "check-rules", "replay", "help", "-h", "--help"] {
            assert_eq!(unknown_command(known), None, "{known}");
        }
    }

    #[test]
    fn review_template_takes_a_path_implies_review_and_review_alone_is_not_ambiguous() {
        let want = Args {
            config: Some("a.json"),
            compare: Some("b.json"),
            review: true,
            review_template: Some("t.md"),
            ..Args::default()
        };
        assert_eq!(parse(&["a.json", "--compare", "b.json", "--review-template", "t.md"]), Ok(want.clone()));
        assert_eq!(parse(&["a.json", "--compare", "b.json", "--review-t=t.md", "--review"]), Ok(want));
        let plain = parse(&["a.json", "--compare", "b.json", "--review"]).unwrap();
        assert_eq!((plain.review, plain.review_template), (true, None));
        assert_eq!(
            parse(&["a.json", "--compare", "b.json", "--review-template"]),
            Err("argument --review-template: expected one argument (the template's path)".into())
        );
        assert_eq!(
            parse(&["a.json", "--review-template", "t.md"]),
            Err("argument --review-template: needs --compare AFTER (the review compares two configs)".into())
        );
        assert_eq!(parse(&["a.json", "--compare", "b.json", "--revi"]), Err("ambiguous option: --revi".into()));
    }

    #[test]
    fn replay_reads_its_options_and_names_what_is_wrong() {
        let ok = parse_replay(&["--rules", "r.json", "--trace", "t.csv", "--speed", "30", "--json"]).unwrap();
        assert_eq!(
            (ok.rules, ok.trace, ok.speed, ok.edge, ok.tolerance_ms, ok.json),
            ("r.json", "t.csv", 30.0, None, 5.0, true)
        );
        let err = |args: &[&str]| parse_replay(args).unwrap_err();
        assert_eq!(err(&["--trace", "t.csv"]), "--rules and --trace are required");
        assert_eq!(
            err(&["--rules", "r", "--trace", "t", "--speed", "0"]),
            "--speed must be a number above 0 and at most 1000, got 0"
        );
        assert_eq!(
            err(&["--rules", "r", "--trace", "t", "--speed", "1001"]),
            "--speed must be a number above 0 and at most 1000, got 1001"
        );
        assert_eq!(
            err(&["--rules", "r", "--trace", "t", "--tolerance-ms", "x"]),
            "--tolerance-ms must be a number above 0, got x"
        );
        assert_eq!(err(&["--rules"]), "--rules needs a value");
        assert_eq!(err(&["--rules", "r", "--trace", "t", "--bogus"]), "unknown argument --bogus");
        assert!(err(&["--rules", "r", "--trace", "t", "--speed", "4", "--edge", "http://127.0.0.1:9"])
            .starts_with("--speed needs the edge"));
    }
}
