//! `sluicegate sim BEFORE --compare AFTER [--trace CSV] [--review [--review-template PATH] | --json]`: the same
//! traffic through two configurations, the filled rate-limit review, the verdict judged on
//! the after run, and bad input refused with exit status 2.
//!
//! The reviews are compared with goldens under `tests/fixtures/sim/golden/` (written by this
//! test when `SLUICEGATE_BLESS=1`; read the diff before committing one). The figures the
//! simulator seed states for its example pair are asserted on their own as well.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `sluicegate sim ARGS` from the repository root: (exit status, stdout, stderr).
fn sim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
        .arg("sim")
        .args(args)
        .current_dir(root())
        .output()
        .expect("run sluicegate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `text` equals the golden `name` (or, with `SLUICEGATE_BLESS=1`, becomes it).
fn golden(name: &str, text: &str) {
    let path = root().join("tests/fixtures/sim/golden").join(name);
    if std::env::var_os("SLUICEGATE_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text == want, "{name} differs from its golden (SLUICEGATE_BLESS=1 rewrites it):\n{text}");
}

const BEFORE: &str = "examples/orders-api.json";
const AFTER: &str = "examples/orders-api-tuned.json";
const TRACE_BEFORE: &str = "tests/fixtures/sim/compare/before.json";
const TRACE_AFTER: &str = "tests/fixtures/sim/compare/after.json";
const TRACE: &str = "tests/fixtures/sim/compare/access.csv";

/// The sections of the seed's `templates/rate-limit-review.md`, in its order.
const SECTIONS: [&str; 8] = [
    "- **Scope:** ",
    "- **Verdict:** ",
    "## What happens today",
    "## Findings",
    "## Proposed policies",
    "## After the change (same traffic)",
    "## Response contract",
    "## Monitor after rollout",
];

#[test]
fn the_seed_example_pair_gives_the_seeds_figures_and_ships_with_changes() {
    let (code, review, stderr) = sim(&[BEFORE, "--compare", AFTER, "--review"]);
    assert_eq!(code, 0, "no high finding after the change: {stderr}");
    // the seed's example result
    assert!(review.contains("| mobile-app | legit | 1,839 | 1,081 | 1,042 | 0 | 60 s | per-key minute |"), "{review}");
    assert!(review.contains("Peak admitted: 313 req/s in second 240 vs capacity 80 req/s"), "{review}");
    assert!(review.contains("Peak admitted after: 27 req/s in second 59"), "{review}");
    assert!(review.contains("cred-stuffer (abusive) is held by 'login' at 40 of 480 requests"), "{review}");
    assert!(review.contains("| mobile-app | legit | 1,081 | 0 | 1,042 | 0 | 0 | 0 | 60 s | 0 s |"), "{review}");
    assert!(review.contains("- **Verdict:** **ship with changes**"), "{review}");
    assert!(review.contains("1. HIGH RL01 - Legit client mobile-app"), "findings are numbered: {review}");
    assert!(review.contains(
        "{\"name\": \"global\", \"algorithm\": \"token_bucket\", \"key\": \"global\", \"rate\": 50, \"burst\": 30}"
    ));
    let mut at = 0;
    for section in SECTIONS.iter().chain(&["## Outside rate limits"]) {
        let i = review.find(section).unwrap_or_else(|| panic!("no {section:?} in:\n{review}"));
        if *section != "## Outside rate limits" {
            assert!(i >= at, "{section:?} out of the template's order");
            at = i;
        }
    }
    golden("compare-orders-api.review.md", &review);
}

#[test]
fn the_comparison_as_data_carries_the_same_figures() {
    let (code, json, stderr) = sim(&[BEFORE, "--compare", AFTER, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["verdict"], "ship with changes");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["traffic"]["source"], "generated");
    assert_eq!(v["traffic"]["seed"], 7);
    assert_eq!(v["traffic"]["changed_clients"], serde_json::json!(["partner-erp"]));
    assert_eq!(v["peak"]["before"]["admitted_rps"], 313);
    assert_eq!(v["peak"]["after"]["admitted_rps"], 27);
    let mobile = v["clients"].as_array().unwrap().iter().find(|c| c["client"] == "mobile-app").unwrap();
    assert_eq!(mobile["before"]["delayed"], 1042);
    assert_eq!(mobile["before"]["requests"], 1839);
    assert_eq!(mobile["after"]["delayed"], 0);
    assert_eq!(v["findings"]["resolved"], serde_json::json!(["RL01", "RL03", "RL04", "RL10"]));
    assert_eq!(v["findings"]["new"], serde_json::json!(["RL09"]));
    // both whole reports, as `--json` prints each
    for (side, file) in [("before", BEFORE), ("after", AFTER)] {
        let (_, alone, _) = sim(&[file, "--json"]);
        let alone: serde_json::Value = serde_json::from_str(&alone).unwrap();
        assert_eq!(v[side], alone, "{side}");
    }
    golden("compare-orders-api.json", &json);
}

#[test]
fn without_review_the_comparison_is_the_short_table() {
    let (code, text, _) = sim(&[BEFORE, "--compare", AFTER]);
    assert_eq!(code, 0);
    assert!(text.starts_with("# Rate limit comparison: Orders API (public v2) → Orders API (public v2, tuned)\n"));
    assert!(text
        .contains("Findings after the change: resolved RL01, RL03, RL04, RL10; remaining RL02, RL05, RL08; new RL09."));
    assert!(!text.contains("## Response contract"), "the review only with --review");
    golden("compare-orders-api.md", &text);
}

#[test]
fn on_a_trace_both_see_the_same_rows_and_high_findings_after_mean_do_not_ship() {
    let (code, review, stderr) = sim(&[TRACE_BEFORE, "--compare", TRACE_AFTER, "--trace", TRACE, "--review"]);
    assert_eq!(code, 1, "high findings after the change: exit 1: {stderr}");
    assert!(review.contains("- **Traffic used:** trace tests/fixtures/sim/compare/access.csv: 1,431 rows over 180 s"));
    assert!(review.contains("- **Verdict:** **do not ship** - 2 high finding(s) after the change (RL01)"), "{review}");
    for section in SECTIONS {
        assert!(review.contains(section), "no {section:?}");
    }
    golden("compare-trace.review.md", &review);
}

#[test]
fn the_verdict_is_judged_on_the_after_run() {
    let dir = tempdir("verdict");
    let write = |name: &str, policies: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                r#"{{"duration_s": 60, "capacity_rps": 100, "seed": 3, "policies": [{policies}],
                  "clients": [{{"name": "app", "kind": "legit", "rps": 5, "retry": "honor"}},
                              {{"name": "bot", "kind": "abusive", "rps": 20, "retry": "none"}}]}}"#
            ),
        )
        .unwrap();
        path.to_string_lossy().into_owned()
    };
    // throttles the legit client: high RL01
    let tight = write("tight.json", r#"{"algorithm": "token_bucket", "rate": 2, "burst": 4}"#);
    // holds everyone and bounds the total: nothing medium or high
    let fit = write(
        "fit.json",
        r#"{"name": "per key", "algorithm": "token_bucket", "rate": 6, "burst": 10, "exclude_clients": ["bot"]},
           {"name": "bot tier", "algorithm": "token_bucket", "rate": 2, "burst": 2, "clients": ["bot"]},
           {"name": "global", "algorithm": "token_bucket", "key": "global", "rate": 90, "burst": 10}"#,
    );
    // no global limit: medium RL03 (nothing bounds the total), no high
    let open = write("open.json", r#"{"algorithm": "token_bucket", "rate": 30, "burst": 30}"#);
    let verdict = |after: &str| {
        let (code, json, stderr) = sim(&[&tight, "--compare", after, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        (code, v["verdict"].as_str().unwrap().to_owned(), v["findings"]["after"].clone())
    };
    let (code, v, findings) = verdict(&tight);
    assert_eq!((code, v.as_str()), (1, "do not ship"), "{findings}");
    let (code, v, findings) = verdict(&fit);
    assert_eq!((code, v.as_str()), (0, "ship"), "{findings}");
    let (code, v, findings) = verdict(&open);
    assert_eq!((code, v.as_str()), (0, "ship with changes"), "{findings}");
    assert!(findings.as_array().unwrap().iter().all(|f| f["severity"] != "high"));
    assert!(findings.as_array().unwrap().iter().any(|f| f["severity"] == "medium"));
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluicegate-compare-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Exit status 2, and stderr names what was wrong.
fn refused(args: &[&str], wants: &[&str]) {
    let (code, stdout, stderr) = sim(args);
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "nothing printed on stdout: {stdout}");
    for want in wants {
        assert!(stderr.contains(want), "{args:?}: expected {want:?} in:\n{stderr}");
    }
}

#[test]
fn bad_pairs_are_refused_naming_the_file() {
    // a compare file that is not a config
    refused(&[BEFORE, "--compare", TRACE], &["tests/fixtures/sim/compare/access.csv: invalid JSON"]);
    refused(
        &[BEFORE, "--compare", "tests/fixtures/sim/configs/bad-not-object.json"],
        &["bad-not-object.json: config must be a JSON object"],
    );
    refused(&[BEFORE, "--compare", "no/such/after.json"], &["no/such/after.json: cannot read"]);
    // generated traffic that would not be the same
    refused(
        &[BEFORE, "--compare", "tests/fixtures/sim/configs/no-findings.json"],
        &[
            "examples/orders-api.json simulates 300 s",
            "no-findings.json 45 s",
            "same duration_s (or compare them on one trace)",
        ],
    );
    let dir = tempdir("seed");
    let reseeded = dir.join("reseeded.json");
    let text = std::fs::read_to_string(root().join(AFTER)).unwrap().replace("\"seed\": 7", "\"seed\": 8");
    std::fs::write(&reseeded, text).unwrap();
    refused(&[BEFORE, "--compare", reseeded.to_str().unwrap()], &["has seed 7", "seed 8", "same seed"]);
    // a runaway after config: refused before either side runs, naming the side and the client
    let runaway = dir.join("runaway.json");
    std::fs::write(
        &runaway,
        r#"{"duration_s": 300, "seed": 7, "policies": [{"algorithm": "token_bucket", "rate": 1}],
            "clients": [{"name": "flood", "rps": 1e9}]}"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    refused(&[BEFORE, "--compare", runaway.to_str().unwrap()], &["runaway.json: client \"flood\": about"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "refused, not run");
    // the flags
    refused(&[BEFORE, "--review"], &["argument --review: needs --compare AFTER"]);
    refused(&[BEFORE, "--compare", AFTER, "--review", "--json"], &["not allowed with --json"]);
    refused(&[BEFORE, "--compare"], &["argument --compare: expected one argument"]);
}

#[test]
fn the_proposed_policies_are_the_after_configs_own() {
    let (_, review, _) = sim(&[TRACE_BEFORE, "--compare", TRACE_AFTER, "--trace", TRACE, "--review"]);
    let after: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&root()).join(TRACE_AFTER)).unwrap()).unwrap();
    let block = review.split("```json\n").nth(1).and_then(|b| b.split("\n```").next()).expect("a json block");
    let shown: serde_json::Value = serde_json::from_str(block).expect("the block is valid JSON");
    assert_eq!(shown["policies"], after["policies"], "as configured, nothing lost");
}

/// Reviews recorded before the review was written from `templates/rate-limit-review.md`: its
/// built-in copy must give them byte for byte, and so must the file passed as a team's own.
const RECORDED_REVIEWS: [(&str, &str, &str); 3] = [
    (
        "tests/fixtures/sim/configs/quiet-no-capacity.json",
        "tests/fixtures/sim/configs/no-findings.json",
        "compare-quiet-to-no-findings.review.md",
    ),
    (
        "tests/fixtures/sim/configs/global-noisy-neighbour.json",
        "tests/fixtures/sim/configs/global-noisy-neighbour.json",
        "compare-noisy-neighbour.review.md",
    ),
    (
        "tests/fixtures/sim/configs/retry-modes.json",
        "tests/fixtures/sim/configs/retry-modes.json",
        "compare-retry-modes.review.md",
    ),
];

const TEMPLATE: &str = "templates/rate-limit-review.md";

#[test]
fn the_review_from_the_template_file_is_the_review_as_recorded_before_it_was_a_template() {
    let mut runs: Vec<(Vec<&str>, &str)> =
        RECORDED_REVIEWS.iter().map(|(before, after, golden)| (vec![*before, "--compare", *after], *golden)).collect();
    runs.push((vec![BEFORE, "--compare", AFTER], "compare-orders-api.review.md"));
    runs.push((vec![TRACE_BEFORE, "--compare", TRACE_AFTER, "--trace", TRACE], "compare-trace.review.md"));
    for (args, name) in runs {
        let want = std::fs::read_to_string(root().join("tests/fixtures/sim/golden").join(name)).unwrap();
        let (_, built_in, stderr) = sim(&[&args[..], &["--review"]].concat());
        assert!(built_in == want, "{name}: --review differs from the recorded review: {stderr}\n{built_in}");
        let (_, from_file, stderr) = sim(&[&args[..], &["--review-template", TEMPLATE]].concat());
        assert!(from_file == want, "{name}: --review-template {TEMPLATE} differs: {stderr}\n{from_file}");
    }
}

#[test]
fn a_teams_own_template_gets_each_placeholder_filled_and_its_own_text_kept() {
    let dir = tempdir("template");
    let template = dir.join("short.md");
    std::fs::write(
        &template,
        "# {{ service }}: {{verdict}}\n\n{{before_after_table}}\n\n{{findings_change}}\n\nFrom {{before_config}} to \
         {{after_config}}; {not a placeholder}.\n",
    )
    .unwrap();
    let (code, review, stderr) = sim(&[BEFORE, "--compare", AFTER, "--review-template", template.to_str().unwrap()]);
    assert_eq!(code, 0, "the after run's exit status: {stderr}");
    let (_, full, _) = sim(&[BEFORE, "--compare", AFTER, "--review"]);
    let table = full.split("## After the change (same traffic)\n\n").nth(1).unwrap().split("\n\nPeak").next().unwrap();
    let want = format!(
        "# Orders API (public v2): **ship with changes** - no high finding after the change; 2 medium remain (RL02, RL05)\
         \n\n{table}\n\nFindings after the change: resolved RL01, RL03, RL04, RL10; remaining RL02, RL05, RL08; new \
         RL09.\n\nFrom {BEFORE} to {AFTER}; {{not a placeholder}}.\n"
    );
    assert_eq!(review, want);
}

#[test]
fn an_unknown_placeholder_is_refused_before_the_runs_naming_it_its_line_and_the_placeholders_there_are() {
    let dir = tempdir("bad-template");
    let typo = dir.join("typo.md");
    std::fs::write(&typo, "# Review\n**{{verdit}}**\n").unwrap();
    let typo = typo.to_str().unwrap();
    refused(
        &[BEFORE, "--compare", AFTER, "--review-template", typo],
        &[
            &format!(
                "error: {typo}: line 2: unknown placeholder {{{{verdit}}}} (did you mean {{{{verdict}}}}?); a review \
                      template may use {{{{service}}}}, {{{{scope}}}}, "
            ),
            "{{before_after_table}}",
            "{{monitor}}",
        ],
    );
    let open = dir.join("open.md");
    std::fs::write(&open, "{{verdict}}\n{{verdict\n").unwrap();
    refused(
        &[BEFORE, "--compare", AFTER, "--review-template", open.to_str().unwrap()],
        &["open.md: line 2: a {{ with no }} after it"],
    );
    refused(&[BEFORE, "--compare", AFTER, "--review-template", "no/such.md"], &["no/such.md: cannot read"]);
    refused(&[BEFORE, "--review-template", TEMPLATE], &["argument --review-template: needs --compare AFTER"]);
    refused(&[BEFORE, "--compare", AFTER, "--review-template", TEMPLATE, "--json"], &["not allowed with --json"]);
}

#[test]
fn a_misspelt_field_on_either_side_is_refused_naming_the_file_and_the_field() {
    let dir = tempdir("typo");
    let after = dir.join("after.json");
    let text = std::fs::read_to_string(root().join(AFTER)).unwrap().replacen("\"rps\"", "\"rsp\"", 1);
    std::fs::write(&after, text).unwrap();
    let after = after.to_str().unwrap();
    refused(
        &[BEFORE, "--compare", after, "--review"],
        &[&format!("error: {after}: clients[0].rsp: unknown field in client 'mobile-app' (did you mean \"rps\"?)")],
    );
}
