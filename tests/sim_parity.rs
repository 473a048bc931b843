//! `sluicegate sim` against the reference simulator's recorded outputs.
//!
//! Every case in tests/fixtures/sim/cases.txt runs the binary inside tests/fixtures/sim and
//! compares with golden/ (recorded from `python3 rate_sim.py` by
//! scripts/make-sim-goldens.sh): the Markdown byte for byte, the `--json` document value for
//! value and byte for byte, the exit status, and for failures an error on stderr that names
//! what the reference's error names. Neither python nor the reference is needed here.

use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sim")
}

struct Case {
    name: String,
    modes: Vec<String>,
    args: Vec<String>,
    needles: Vec<String>,
}

fn cases() -> Vec<Case> {
    let text = fs::read_to_string(dir().join("cases.txt")).expect("cases.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let cols: Vec<&str> = line.split('|').map(str::trim).collect();
            assert_eq!(cols.len(), 4, "cases.txt: 4 columns expected in {line:?}");
            Case {
                name: cols[0].into(),
                modes: cols[1].split_whitespace().map(String::from).collect(),
                args: cols[2].split_whitespace().map(String::from).collect(),
                needles: cols[3].split(';').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect(),
            }
        })
        .collect()
}

fn golden(name: &str, ext: &str) -> Option<String> {
    fs::read_to_string(dir().join("golden").join(format!("{name}.{ext}"))).ok()
}

fn sim(args: &[String], json: bool) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluicegate"));
    cmd.current_dir(dir()).arg("sim").args(args);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("run sluicegate sim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Value-for-value equality, keeping Python's int / float distinction (`5` is not `5.0`).
fn same_json(want: &Value, got: &Value, path: &str) -> Result<(), String> {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => {
            let same = match (a.as_f64(), b.as_f64()) {
                _ if a.is_f64() != b.is_f64() => false,
                (Some(x), Some(y)) if a.is_f64() => x == y,
                _ => a == b,
            };
            if same {
                Ok(())
            } else {
                Err(format!("{path}: want {a}, got {b}"))
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Err(format!("{path}: want {} items, got {}", a.len(), b.len()));
            }
            a.iter().zip(b).enumerate().try_for_each(|(i, (x, y))| same_json(x, y, &format!("{path}[{i}]")))
        }
        (Value::Object(a), Value::Object(b)) => {
            let (ka, kb): (Vec<_>, Vec<_>) = (a.keys().collect(), b.keys().collect());
            if ka != kb {
                return Err(format!("{path}: want keys {ka:?}, got {kb:?}"));
            }
            a.iter().try_for_each(|(k, v)| same_json(v, &b[k], &format!("{path}.{k}")))
        }
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{path}: want {a}, got {b}")),
    }
}

fn first_difference(want: &str, got: &str) -> String {
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("line {}:\n  want {w:?}\n  got  {g:?}", i + 1);
        }
    }
    format!("{} lines wanted, {} lines got", want.lines().count(), got.lines().count())
}

fn check(case: &Case) -> Vec<String> {
    let mut problems = Vec::new();
    let name = &case.name;
    let want_exit: i32 =
        golden(name, "exit").unwrap_or_else(|| panic!("golden/{name}.exit missing")).trim().parse().unwrap();
    let want_stderr = golden(name, "stderr");
    for mode in &case.modes {
        let (code, stdout, stderr) = sim(&case.args, mode == "json");
        let what = format!("{name} ({mode})");
        if code != want_exit {
            problems.push(format!("{what}: exit status {code}, reference {want_exit}; stderr: {stderr}"));
        }
        match golden(name, mode) {
            None if !stdout.is_empty() => {
                problems.push(format!("{what}: the reference prints nothing, we print:\n{stdout}"))
            }
            None => {}
            Some(want) => {
                if mode == "json" {
                    match (serde_json::from_str::<Value>(&want), serde_json::from_str::<Value>(&stdout)) {
                        (Ok(w), Ok(g)) => {
                            if let Err(e) = same_json(&w, &g, "$") {
                                problems.push(format!("{what}: JSON differs at {e}"));
                            }
                        }
                        (Ok(_), Err(e)) => problems.push(format!("{what}: our output is not JSON: {e}\n{stdout}")),
                        (Err(e), _) => panic!("golden/{name}.json is not JSON: {e}"),
                    }
                }
                if stdout != want {
                    problems.push(format!("{what}: output differs, {}", first_difference(&want, &stdout)));
                }
            }
        }
        if want_exit == 2 && (stderr.is_empty() || !stderr.ends_with('\n')) {
            problems.push(format!("{what}: bad input must be explained on stderr, got {stderr:?}"));
        }
        // a mode that printed a result has nothing to explain (the quota crash is Markdown-only)
        let explains = golden(name, mode).is_none();
        for needle in case.needles.iter().filter(|_| explains) {
            let reference = want_stderr.as_deref().unwrap_or("");
            assert!(reference.contains(needle.as_str()), "cases.txt: {name}: the reference's stderr lacks {needle:?}");
            if !stderr.contains(needle.as_str()) {
                problems.push(format!("{what}: stderr should name {needle:?} as the reference does:\n  {stderr}"));
            }
        }
    }
    problems
}

#[test]
fn every_case_matches_the_reference() {
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let problems: Vec<String> = cases.iter().flat_map(check).collect();
    assert!(problems.is_empty(), "{} problem(s):\n\n{}", problems.len(), problems.join("\n\n"));
}

#[test]
fn every_failure_case_says_what_is_wrong() {
    for case in cases() {
        let exit = golden(&case.name, "exit").unwrap();
        if exit.trim() != "0" && exit.trim() != "1" || case.name.starts_with("reference-crash") {
            assert!(!case.needles.is_empty(), "{}: name what the error must mention", case.name);
        }
    }
}

#[test]
fn the_fixtures_cover_every_finding_code_and_severity() {
    let mut seen = BTreeSet::new();
    for case in cases() {
        let Some(json) = golden(&case.name, "json") else { continue };
        let report: Value = serde_json::from_str(&json).unwrap();
        for f in report["findings"].as_array().unwrap() {
            seen.insert(format!("{} {}", f["code"].as_str().unwrap(), f["severity"].as_str().unwrap()));
        }
    }
    let want = [
        "RL01 high",
        "RL01 low",
        "RL02 medium",
        "RL03 high",
        "RL03 medium",
        "RL04 medium",
        "RL05 medium",
        "RL06 high",
        "RL06 medium",
        "RL07 low",
        "RL08 info",
        "RL09 low",
        "RL10 medium",
    ];
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "no fixture shows {missing:?}");
}

#[test]
fn the_fixtures_cover_every_algorithm_key_pattern_and_retry_mode() {
    let mut seen = BTreeSet::new();
    for entry in fs::read_dir(dir().join("configs")).unwrap() {
        let path = entry.unwrap().path();
        let Ok(cfg) = serde_json::from_str::<Value>(&fs::read_to_string(&path).unwrap()) else { continue };
        for p in cfg["policies"].as_array().into_iter().flatten() {
            seen.insert(format!("algorithm {}", p["algorithm"].as_str().unwrap_or("?")));
            seen.insert(format!("key {}", p["key"].as_str().unwrap_or("client")));
        }
        for c in cfg["clients"].as_array().into_iter().flatten() {
            seen.insert(format!("pattern {}", c["pattern"].as_str().unwrap_or("steady")));
            seen.insert(format!("retry {}", c["retry"].as_str().unwrap_or("none")));
        }
    }
    for want in [
        "algorithm token_bucket",
        "algorithm fixed_window",
        "algorithm sliding_log",
        "algorithm sliding_counter",
        "key client",
        "key endpoint",
        "key client+endpoint",
        "key global",
        "pattern steady",
        "pattern poisson",
        "pattern burst",
        "retry none",
        "retry immediate",
        "retry backoff",
        "retry honor",
    ] {
        assert!(seen.contains(want), "no fixture config uses {want}");
    }
}

#[test]
fn the_self_test_passes() {
    let (code, stdout, _) = sim(&["--self-test".into()], false);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.ends_with("21/21 passed\n"), "{stdout}");
}
