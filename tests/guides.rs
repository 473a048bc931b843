//! The guides under `docs/` quote the simulator: every `sluicegate sim ...` line in a
//! fenced `sh` block is run here, and each figure stated after the block must appear in
//! its output.
//!
//! The format, in the guide's Markdown:
//!
//! ````text
//! ```sh
//! sluicegate sim docs/examples/fixed-window.json
//! ```
//! <!-- expect: let 200 requests through in one rolling 60s window -->
//! <!-- exit: 0 -->
//! ````
//!
//! A block holding a `sluicegate sim` line holds only that one command; the comments that
//! follow the closing fence (one per line, nothing else in between) are its checks: each
//! `expect:` text must appear verbatim in the command's output (stdout), and `exit:`, when
//! given, is the exit status. Paths are relative to the repository root.

use std::path::{Path, PathBuf};
use std::process::Command;

const GUIDES: [&str; 2] = ["docs/algorithms.md", "docs/policy-design.md"];

/// One quoted command and what its output must show.
#[derive(Debug, Default)]
struct Quoted {
    guide: &'static str,
    line: usize,
    args: Vec<String>,
    expects: Vec<String>,
    exit: Option<i32>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The commands a guide quotes, with their checks.
fn quoted(guide: &'static str) -> Vec<Quoted> {
    let text = read(guide);
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "```sh" {
            i += 1;
            continue;
        }
        let mut commands = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            if let Some(rest) = lines[i].trim().strip_prefix("sluicegate sim ") {
                commands.push((i + 1, rest.split_whitespace().map(str::to_owned).collect::<Vec<_>>()));
            }
            i += 1;
        }
        assert!(i < lines.len(), "{guide}: a ```sh block is never closed");
        i += 1;
        let mut checks = Quoted { guide, ..Quoted::default() };
        while i < lines.len() {
            let l = lines[i].trim();
            let Some(body) = l.strip_prefix("<!--").and_then(|b| b.strip_suffix("-->")).map(str::trim) else { break };
            if let Some(want) = body.strip_prefix("expect:") {
                let want = want.trim();
                assert!(!want.is_empty(), "{guide}:{}: an empty expect", i + 1);
                checks.expects.push(want.to_owned());
            } else if let Some(code) = body.strip_prefix("exit:") {
                checks.exit = Some(code.trim().parse().unwrap_or_else(|_| panic!("{guide}:{}: bad exit", i + 1)));
            } else {
                break;
            }
            i += 1;
        }
        match commands.len() {
            0 => assert!(
                checks.expects.is_empty() && checks.exit.is_none(),
                "{guide}:{i}: checks after a block without a sluicegate sim command"
            ),
            1 => {
                let (line, args) = commands.pop().unwrap();
                assert!(
                    !checks.expects.is_empty(),
                    "{guide}:{line}: the command states no figure (<!-- expect: ... -->)"
                );
                found.push(Quoted { line, args, ..checks });
            }
            n => panic!("{guide}:{i}: {n} sluicegate sim commands in one block; quote one per block"),
        }
    }
    found
}

fn run(q: &Quoted) {
    let mut args = vec!["sim".to_owned()];
    args.extend(q.args.iter().cloned());
    let out = Command::new(env!("CARGO_BIN_EXE_sluicegate"))
        .args(&args)
        .current_dir(root())
        .output()
        .expect("run sluicegate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    let at = format!("{}:{} (sluicegate {})", q.guide, q.line, args.join(" "));
    assert!((0..=1).contains(&code), "{at}: exit {code}\n{stderr}");
    if let Some(exit) = q.exit {
        assert_eq!(code, exit, "{at}: exit status\n{stdout}");
    }
    for want in &q.expects {
        assert!(stdout.contains(want.as_str()), "{at}: expected {want:?} in:\n{stdout}");
    }
}

#[test]
fn every_quoted_command_shows_the_figures_the_guide_states() {
    let mut n = 0;
    for guide in GUIDES {
        let commands = quoted(guide);
        assert!(!commands.is_empty(), "{guide} quotes no sluicegate sim command");
        for q in &commands {
            run(q);
            n += 1;
        }
    }
    assert!(n >= 6, "only {n} quoted commands");
}

#[test]
fn every_example_config_under_docs_is_run_by_a_guide() {
    let used: Vec<String> = GUIDES.iter().flat_map(|g| quoted(g)).flat_map(|q| q.args).collect();
    let dir = root().join("docs/examples");
    let mut configs: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    configs.sort();
    assert!(!configs.is_empty());
    for path in configs {
        let rel = Path::new("docs/examples").join(path.file_name().unwrap());
        let rel = rel.to_str().unwrap();
        assert!(used.iter().any(|a| a == rel), "{rel} is not run by any guide");
    }
}

#[test]
fn the_policy_guide_explains_every_finding_code() {
    let source = read("src/sim/findings.rs");
    let guide = read("docs/policy-design.md");
    let mut codes: Vec<&str> = source.split("code: \"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect();
    codes.sort_unstable();
    codes.dedup();
    assert!(codes.len() >= 13, "{codes:?}");
    for code in codes {
        assert!(guide.contains(&format!("### {code}")), "docs/policy-design.md has no section for {code}");
    }
}

#[test]
fn the_readme_links_both_guides() {
    let readme = read("README.md");
    for guide in GUIDES {
        assert!(readme.contains(&format!("({guide})")), "README.md does not link {guide}");
    }
}

/// mdBook builds only the pages `docs/SUMMARY.md` lists: a page left out would be in the
/// repository and the package but not in the guide, and a listed page that is missing fails
/// the build.
#[test]
fn the_guide_lists_every_page() {
    let summary = read("docs/SUMMARY.md");
    let listed: Vec<&str> =
        summary.split("](").skip(1).map(|rest| &rest[..rest.find(')').unwrap_or(rest.len())]).collect();
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 15, "{pages:?}");
    for page in &pages {
        assert!(listed.contains(&page.as_str()), "docs/SUMMARY.md does not list docs/{page}");
    }
    for page in listed {
        assert!(root().join("docs").join(page).is_file(), "docs/SUMMARY.md lists docs/{page}, which does not exist");
    }
}
