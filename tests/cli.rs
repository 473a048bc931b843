//! `sluicegate check-rules`: the build refuses a bad rules file, naming what is wrong.

use std::path::Path;
use std::process::Command;

fn check_rules(file: &str) -> (i32, String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
        .args(["check-rules", path.to_str().unwrap()])
        .output()
        .expect("run sluicegate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_default_worker_rules_are_valid() {
    let (code, stdout, stderr) = check_rules("worker/rules.json");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("api: 20 per 10 s"), "{stdout}");
    assert!(stdout.contains("ip.src + cf.colo.id, then block 10 s"), "{stdout}");
}

fn refused(file: &str, wants: &[&str]) {
    let (code, _, stderr) = check_rules(&format!("tests/fixtures/rules/{file}"));
    assert_eq!(code, 1, "{file} must be refused: {stderr}");
    for want in wants {
        assert!(stderr.contains(want), "{file}: expected {want:?} in:\n{stderr}");
    }
    assert!(stderr.contains("rules[0] (\"api\")"), "names the rule:\n{stderr}");
}

#[test]
fn an_unknown_characteristic_is_refused() {
    refused(
        "unknown-characteristic.json",
        &["field \"characteristics\"", "unknown characteristic \"cf.colo\"", "\"cf.colo.id\""],
    );
}

#[test]
fn a_period_of_zero_is_refused() {
    refused("zero-period.json", &["field \"period\"", "got 0"]);
}

#[test]
fn a_negative_threshold_is_refused() {
    refused("negative-threshold.json", &["field \"requests_per_period\"", "got -20"]);
}

#[test]
fn a_missing_field_is_refused() {
    refused("missing-field.json", &["field \"period\": missing"]);
}

#[test]
fn the_traffic_example_with_its_route_buckets_and_upstream_budgets_is_valid() {
    let (code, stdout, stderr) = check_rules("worker/examples/traffic.json");
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "6 rule(s) valid",
        "analyze: token bucket, burst 6, one token every 5000 ms per ip.src",
        "upstream overpass: at most 2 in flight per isolate, waiting up to 30000 ms",
        "upstream nominatim: at most 1 in flight per isolate, waiting up to 30000 ms",
        "wildfires: token bucket, burst 10, one token every 2000 ms per ip.src",
        "smoke: token bucket, burst 10, one token every 2000 ms per ip.src",
        "capabilities: GET /api/capabilities",
    ] {
        assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    }
}

/// `check-rules` on a file written for the test.
fn check_rules_text(name: &str, json: &str) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("sluicegate-check-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rules.json");
    std::fs::write(&file, json).unwrap();
    let result = check_rules(file.to_str().unwrap());
    std::fs::remove_dir_all(&dir).ok();
    result
}

#[test]
fn the_source_ceiling_in_force_is_printed() {
    let (code, stdout, stderr) = check_rules("worker/rules.json");
    assert_eq!(code, 0, "{stderr}");
    let want = "pre_read source_bytes_per_second: 100000000 body bytes per second per source (the default)";
    assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    let (code, stdout, stderr) = check_rules_text(
        "set",
        r#"{"rules": [], "pre_read": {"per_ip": {"rate": 0.5, "burst": 3}, "source_bytes_per_second": 5000,
                                      "sources": [{"id": "hooks", "match": {}}]}}"#,
    );
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "pre_read per_ip: 0.5 requests per second, burst 3, per client address",
        "pre_read source_bytes_per_second: 5000 body bytes per second per source\n",
        "pre_read sources: hooks",
    ] {
        assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    }
    let (code, stdout, stderr) =
        check_rules_text("off", r#"{"rules": [], "pre_read": {"source_bytes_per_second": null}}"#);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("pre_read source_bytes_per_second: off (null)"), "{stdout}");
}

#[test]
fn the_trusted_proxies_are_printed_and_checked() {
    let (code, stdout, stderr) = check_rules("worker/rules.json");
    assert_eq!(code, 0, "{stderr}");
    let want = "identity: CF-Connecting-IP, else the rightmost X-Forwarded-For hop, else the peer";
    assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    let (code, stdout, stderr) =
        check_rules_text("trusted", r#"{"rules": [], "trusted_proxies": ["10.0.0.0/8", "2001:db8::/32"]}"#);
    assert_eq!(code, 0, "{stderr}");
    let want = "identity: X-Forwarded-For walked from the right past the trusted proxies 10.0.0.0/8, 2001:db8::/32 \
                (at most 32 hops), when CF-Connecting-IP (else the peer) is one of them";
    assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    let (code, _, stderr) =
        check_rules_text("bad", r#"{"rules": [], "trusted_proxies": ["10.0.0.0/8", "10.0.0.1/8"]}"#);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "field \"trusted_proxies[1]\": \"10.0.0.1/8\" has bits set past its prefix length; write \"10.0.0.0/8\""
        ),
        "{stderr}"
    );
}

#[test]
fn the_simulator_reads_the_traffic_example_as_edge_rules() {
    let dir = std::env::temp_dir().join(format!("sluicegate-traffic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("traffic-sim.json");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("worker/examples/traffic.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"duration_s": 30, "edge_rules": {:?}, "clients": [
                {{"name": "page", "kind": "legit", "rps": 3, "endpoint": "/api/geocode"}}]}}"#,
            rules.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
        .args(["sim", config.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success() || out.status.code() == Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies: Vec<&str> =
        report["policies"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(policies, ["api", "analyze", "destinations", "geocode", "wildfires", "smoke"]);
}

#[test]
fn a_repeated_key_is_refused_instead_of_keeping_the_last() {
    let (code, _, stderr) = check_rules("tests/fixtures/rules/duplicate-key.json");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("rules file: field \"rules\": is given twice; a JSON object must not repeat a key"),
        "{stderr}"
    );
}

#[test]
fn a_content_type_with_a_control_character_is_refused() {
    refused("bad-content-type.json", &["field \"response.content_type\": must be a media type"]);
}

#[test]
fn a_token_bucket_too_slow_to_count_is_refused() {
    refused("tiny-rate.json", &["field \"rate\"", "got 1e-10"]);
}

#[test]
fn a_rate_too_slow_to_represent_is_refused_not_made_unlimited() {
    refused("vanishing-rate.json", &["field \"rate\"", "got 1e-12", "a slower rate cannot be counted"]);
}

#[test]
fn each_configuration_that_would_be_silently_wrong_is_refused_naming_its_field() {
    let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let rule = |id: &str, extra: &str| {
        format!(
            r#"{{"id":"{id}","match":{{}},"characteristics":["ip.src"],"period":1,"requests_per_period":1{extra}}}"#
        )
    };
    let text = format!(
        r#"{{"rules":[{},{}],
            "upstreams":[{{"id":"u","match":{{}},"max_in_flight":1,"lease":10}}],
            "capabilities":{{"path":"/api//caps"}},
            "tenants":{{"match":{{}},"key_header":"x-api-key","keys":{{"{hash}":"acme","{}":"beta"}}}}}}"#,
        rule("api", &format!(r#","response":{{"content":"{}"}}"#, "x".repeat(30_001))),
        rule("API", ""),
        hash.to_ascii_uppercase()
    );
    let file = std::env::temp_dir().join(format!("sluicegate-small-refusals-{}.json", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let (code, _, stderr) = check_rules(file.to_str().unwrap());
    std::fs::remove_file(&file).ok();
    assert_eq!(code, 1, "{stderr}");
    for want in [
        "rule rules[0] (\"api\"): field \"response.content\": is 30001 bytes long; at most 30000 are allowed",
        "rule rules[1] (\"API\"): field \"id\": \"API\" is an earlier rule's id, \"api\", in other case",
        "upstream upstreams[0] (\"u\"): field \"lease\": lease is only used with scope \"fleet\"",
        "rules file: field \"capabilities.path\": \"/api//caps\" is not a normalised path",
        "write \"/api/caps\"",
        "rules file: field \"tenants.keys\": ",
        "are one hash in other case",
        "5 problem(s); nothing was loaded",
    ] {
        assert!(stderr.contains(want), "expected {want:?} in:\n{stderr}");
    }
}

#[test]
fn more_rules_than_the_cap_are_refused() {
    let (code, _, stderr) = check_rules("tests/fixtures/rules/too-many-rules.json");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("field \"rules\": 1000 rules; at most 64 are allowed"), "{stderr}");
}

#[test]
fn a_missing_file_and_bad_usage_exit_2() {
    let (code, _, stderr) = check_rules("tests/fixtures/rules/no-such-file.json");
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read"));
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate")).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sim_reads_the_workers_rules_file_named_by_a_config_relative_to_the_config() {
    // from worker/src, "../worker/rules.json" would not exist: only the config's directory works
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
        .args(["sim", "../../examples/edge-api.json", "--json"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/worker/src"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let api = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "api")
        .expect("the rule from worker/rules.json");
    assert_eq!((api["algorithm"].as_str(), api["window_s"].as_f64()), (Some("count_then_block"), Some(10.0)));
    assert!(api["blocks"].as_u64().unwrap() > 0);
    let export = report["clients"].as_array().unwrap().iter().find(|c| c["client"] == "export-job").unwrap();
    assert!(export["paced"].as_u64().unwrap() > 0 && export["rejected"] == 0, "paced, never refused: {export}");
}

/// `sluicegate sim` run in tests/fixtures/sim: exit status, stdout, stderr.
fn sim(args: &[&str]) -> (i32, String, String) {
    let args: Vec<&str> = std::iter::once("sim").chain(args.iter().copied()).collect();
    run_in(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sim"), &args)
}

#[test]
fn sim_replays_a_trace_out_of_order_as_the_reference_does_whatever_the_reorder_window() {
    // traces/basic.csv with each pair of rows swapped: out of time order by up to a second
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sim");
    let text = std::fs::read_to_string(fixtures.join("traces/basic.csv")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    for pair in lines[1..].chunks_mut(2) {
        pair.reverse();
    }
    let trace = std::env::temp_dir().join(format!("sluicegate-reorder-{}.csv", std::process::id()));
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let trace = trace.to_str().unwrap();
    let golden = |ext| std::fs::read_to_string(fixtures.join(format!("golden/trace-basic.{ext}"))).unwrap();
    let config = "configs/trace-config.json";
    let windows: [&[&str]; 5] =
        [&[], &["--reorder-window", "5"], &["--reorder-window=0"], &["--reorder-window", "inf"], &["--reorder", "2.5"]];
    for window in windows {
        let (code, stdout, stderr) = sim(&[&[config, "--trace", trace, "--json"], window].concat());
        assert_eq!((code, stdout.as_str()), (1, golden("json").as_str()), "{window:?}: {stderr}");
        let (code, stdout, stderr) = sim(&[&[config, "--trace", trace], window].concat());
        assert_eq!((code, stdout.as_str()), (1, golden("md").as_str()), "{window:?}: {stderr}");
    }
    std::fs::remove_file(trace).ok();
}

#[test]
fn sim_refuses_a_reorder_window_that_is_not_seconds_naming_the_flag() {
    let config = ["configs/trace-config.json", "--trace", "traces/basic.csv"];
    for bad in [
        &["--reorder-window", "-1"][..],
        &["--reorder-window", "nan"],
        &["--reorder-window=ten"],
        &["--reorder-window="],
    ] {
        let (code, stdout, stderr) = sim(&[&config[..], bad].concat());
        assert_eq!((code, stdout.as_str()), (2, ""), "{bad:?}");
        assert!(stderr.contains("argument --reorder-window: expected seconds, 0 or more"), "{bad:?}: {stderr}");
        assert!(
            stderr.contains(&format!("got {:?}", bad.last().unwrap().trim_start_matches("--reorder-window="))),
            "{stderr}"
        );
    }
    let (code, _, stderr) = sim(&[&config[..], &["--reorder-window"]].concat());
    assert_eq!(code, 2);
    assert!(stderr.contains("argument --reorder-window: expected one argument"), "{stderr}");
}

/// Writes `config` to a temporary file named after `name`; its path.
fn temp_config(name: &str, config: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("sluicegate-{name}-{}.json", std::process::id()));
    std::fs::write(&path, config).unwrap();
    path
}

const RUNAWAYS: [(&str, &str, &str); 3] = [
    (
        "long",
        r#"{"duration_s": 1e12, "policies": [{"algorithm": "token_bucket", "rate": 10}],
            "clients": [{"name": "mobile", "kind": "legit", "rps": 1000}]}"#,
        r#"client "mobile": about 1.0e15 requests over 1e+12 s; the most a run may make is 50,000,000 (raise it with --max-requests N)"#,
    ),
    (
        "fast",
        r#"{"policies": [{"algorithm": "token_bucket", "rate": 10}],
            "clients": [{"name": "app", "kind": "legit", "rps": 5}, {"name": "flood", "rps": 1e9}]}"#,
        r#"client "flood": about 3.0e11 requests over 300 s; the most a run may make is 50,000,000"#,
    ),
    (
        "bursts",
        r#"{"policies": [{"algorithm": "token_bucket", "rate": 10}],
            "clients": [{"name": "batch", "pattern": "burst", "burst": 1e9, "every_s": 1e-6}]}"#,
        r#"client "batch": about 3.0e17 requests over 300 s; the most a run may make is 50,000,000"#,
    ),
];

#[test]
fn sim_refuses_a_config_that_would_generate_too_many_requests_naming_the_client_and_the_estimate() {
    for (name, config, wants) in RUNAWAYS {
        let path = temp_config(name, config);
        let started = std::time::Instant::now();
        let (code, stdout, stderr) = sim(&[path.to_str().unwrap()]);
        let took = started.elapsed();
        std::fs::remove_file(&path).ok();
        assert_eq!((code, stdout.as_str()), (2, ""), "{name}: {stderr}");
        assert!(stderr.contains(wants), "{name}: {stderr}");
        assert!(took < std::time::Duration::from_secs(1), "{name}: refused after {took:?}");
    }
}

#[test]
fn sim_sums_the_clients_against_the_ceiling_and_the_flag_raises_it() {
    // 30,000 + 30,000 requests: each client fits under 50,000, both together do not
    let config = r#"{"duration_s": 300, "policies": [{"algorithm": "token_bucket", "rate": 1000}],
        "clients": [{"name": "a", "kind": "legit", "rps": 100}, {"name": "b", "kind": "legit", "rps": 100}]}"#;
    let path = temp_config("summed", config);
    let file = path.to_str().unwrap();
    let (code, _, stderr) = sim(&[file, "--max-requests", "50000"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            r#"the 2 clients together: about 60,000 requests (the most, client "a": about 30,000 over 300 s); the most a run may make is 50,000"#
        ),
        "{stderr}"
    );
    for ok in [&["--max-requests", "60000"][..], &["--max-requests=6e4"], &["--max-requests", "1_000_000"], &[]] {
        let (code, stdout, stderr) = sim(&[&[file][..], ok].concat());
        assert_eq!(code, 0, "{ok:?}: {stderr}");
        assert!(stdout.contains("| a |"), "{ok:?}: {stdout}");
    }
    for bad in ["0", "-5", "lots", "1.5"] {
        let (code, _, stderr) = sim(&[file, "--max-requests", bad]);
        assert_eq!(code, 2, "{bad}");
        assert!(stderr.contains("argument --max-requests: expected a whole number, 1 or more"), "{bad}: {stderr}");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn sim_runs_every_example_config_under_the_default_ceiling() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for dir in ["examples", "tests/fixtures/sim/configs"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let (code, _, stderr) = sim(&[path.to_str().unwrap(), "--json"]);
            assert!(!stderr.contains("the most a run may make"), "{}: {stderr}", path.display());
            if !path.file_name().unwrap().to_str().unwrap().starts_with("bad-") {
                assert!(code == 0 || code == 1 || stderr.contains("reference"), "{}: {code} {stderr}", path.display());
                ran += 1;
            }
        }
    }
    assert!(ran >= 20, "{ran}");
}

#[test]
fn sim_does_not_estimate_a_trace() {
    // a trace is bounded by its file: the configured clients are not run, so not estimated
    let (code, _, stderr) =
        sim(&["configs/trace-config.json", "--trace", "traces/basic.csv", "--max-requests", "1", "--json"]);
    assert_eq!(code, 1, "{stderr}");
}

#[test]
fn output_into_a_closed_pipe_ends_the_run_quietly_not_with_a_panic() {
    // `sluicegate sim … | head`: the reader has gone before the report is written.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/orders-api.json");
    for args in [vec!["--help"], vec!["sim", config.to_str().unwrap()]] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
            .args(&args)
            .stdout(writer.try_clone().expect("the pipe's write end"))
            .output()
            .expect("run sluicegate");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
    }
}

/// A config whose run takes a second or two in a debug build (3,000,000 requests).
const LONG_RUN: &str = r#"{"duration_s": 1500, "policies": [{"algorithm": "token_bucket", "rate": 500, "burst": 1000}],
    "clients": [{"name": "app", "kind": "legit", "rps": 400}, {"name": "flood", "rps": 1600, "retry": "immediate", "max_retries": 1}]}"#;

#[test]
fn a_long_run_with_stderr_piped_prints_no_progress() {
    let path = temp_config("long-piped", LONG_RUN);
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = sim(&[path.to_str().unwrap()]);
    let took = started.elapsed();
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("# Rate limit simulation"), "{stdout}");
    assert_eq!(stderr, "", "after {took:?}");
}

#[test]
fn a_long_run_on_a_terminal_shows_its_progress_on_stderr_and_clears_it() {
    // `script` runs the command on a pseudo-terminal and copies what it shows to its stdout
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to run the command on a terminal");
        return;
    }
    let path = temp_config("long-tty", LONG_RUN);
    let config = path.to_str().unwrap();
    let report = path.with_extension("md");
    let command = format!("'{}' sim '{config}' > '{}'", env!("CARGO_BIN_EXE_sluicegate"), report.to_str().unwrap());
    let started = std::time::Instant::now();
    let shown = Command::new("script").args(["-qfec", &command, "/dev/null"]).output().expect("run script");
    let took = started.elapsed();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let on_terminal = std::fs::read_to_string(&report).unwrap();
    let (code, piped, _) = sim(&[config]);
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&report).ok();
    assert_eq!(code, 0);
    assert_eq!(on_terminal, piped, "stdout is the same on a terminal");
    let lines: Vec<&str> = shown.split('\r').collect();
    if took > std::time::Duration::from_millis(1500) {
        assert!(lines.iter().any(|l| l.starts_with("sim: ") && l.contains(" of 3,000,000 requests (")), "{shown:?}");
    }
    // a line drawn is blanked before the report is printed: the stream ends "\r<spaces>\r"
    if let [.., drawn, blank, end] = lines[..] {
        assert!(drawn.starts_with("sim: ") && blank.len() >= drawn.trim_end().len(), "{shown:?}");
        assert!(blank.bytes().all(|b| b == b' ') && end.is_empty(), "{shown:?}");
    } else {
        assert!(took < std::time::Duration::from_secs(1) && shown.is_empty(), "after {took:?}: {shown:?}");
    }
}

/// `sluicegate ARGS` from the repository root: (exit status, stdout, stderr).
fn sluicegate(args: &[&str]) -> (i32, String, String) {
    run_in(env!("CARGO_MANIFEST_DIR"), args)
}

/// `sluicegate ARGS` run in `dir`: (exit status, stdout, stderr).
fn run_in(dir: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate")).args(args).current_dir(dir).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_command_is_named_with_the_command_it_is_closest_to_and_exits_2() {
    let hint = "Run 'sluicegate --help' for the commands and their options.\n";
    for (args, want) in [
        (
            &["simulate", "examples/orders-api.json"][..],
            "sluicegate: unknown command 'simulate'; did you mean 'sim'?\n",
        ),
        (&["check", "worker/rules.json"], "sluicegate: unknown command 'check'; did you mean 'check-rules'?\n"),
        (&["frobnicate"], "sluicegate: unknown command 'frobnicate'\n"),
        (&["--verison"], "sluicegate: unknown option '--verison'\n"),
        (&["--hepl"], "sluicegate: unknown option '--hepl'; did you mean '--help'?\n"),
    ] {
        let (code, stdout, stderr) = sluicegate(args);
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}");
        assert_eq!(stderr, format!("{want}{hint}"), "{args:?}");
    }
    // a command with the wrong arguments, or none at all: the usage
    for args in [&["check-rules"][..], &[]] {
        let (code, _, stderr) = sluicegate(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(stderr.starts_with("usage: sluicegate check-rules FILE\n"), "{args:?}: {stderr}");
    }
    // the npm command line's replay is named, not taken for a typo
    let (code, _, stderr) = sluicegate(&["replay", "--rules", "worker/rules.json"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("replay runs from npm") && stderr.contains("npx sluicegate replay"), "{stderr}");
}

#[test]
fn sim_refuses_a_misspelt_config_field_naming_where_it_is_and_the_field_meant() {
    let base = r#""policies": [{"algorithm": "token_bucket", "rate": 1},
        {"name": "api", "algorithm": "fixed_window", "limit": 5, "window_s": 1}],
        "clients": [{"name": "app", "rps": 2}]"#;
    for (name, config, want) in [
        (
            "typo-top",
            format!(r#"{{"durration_s": 20, {base}}}"#),
            "error: durration_s: unknown field in the config (did you mean \"duration_s\"?); the config has service, \
             notes, duration_s, capacity_rps, seed, policies, clients, edge_rules, edge_spread\n",
        ),
        (
            "typo-policy",
            format!(r#"{{{}}}"#, base.replace(r#""window_s": 1}"#, r#""window_s": 1, "bursts": 3}"#)),
            "error: policies[1].bursts: unknown field in policy 'api' (did you mean \"burst\"?); a policy has name, notes, \
             algorithm, key, rate, burst, limit, window_s, endpoints, clients, exclude_clients, requests_per_period, \
             period, mitigation_timeout, counting\n",
        ),
        (
            "typo-client",
            format!(r#"{{{}}}"#, base.replace(r#""rps": 2}"#, r#""rps": 2, "rsp": 20}"#)),
            "error: clients[0].rsp: unknown field in client 'app' (did you mean \"rps\"?); a client has name, notes, kind, \
             pattern, rps, burst, every_s, endpoint, retry, max_retries, cost, start, duration\n",
        ),
        (
            "missing-limit",
            format!(r#"{{{}}}"#, base.replace(r#""limit": 5, "#, "")),
            "error: policies[1].limit is required (api.limit: a number > 0)\n",
        ),
    ] {
        let path = temp_config(name, &config);
        for json in [&[][..], &["--json"]] {
            let (code, stdout, stderr) = sim(&[&[path.to_str().unwrap()][..], json].concat());
            assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", want), "{name} {json:?}");
        }
        std::fs::remove_file(path).ok();
    }
}

#[test]
fn the_example_report_is_what_the_simulator_prints_for_the_example_config() {
    let (code, report, stderr) = sluicegate(&["sim", "examples/orders-api.json"]);
    assert_eq!(code, 1, "high findings: {stderr}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/orders-api-report.md");
    let kept = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        report == kept,
        "examples/orders-api-report.md is stale; write it again with \
         `sluicegate sim examples/orders-api.json > examples/orders-api-report.md`"
    );
}
