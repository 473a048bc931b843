//! The crate's folders are its layers, and each imports only the layers below it that
//! [`MAY_IMPORT`] names:
//!
//! ```text
//! src/core/    time, limit/, keyed, budget, sort,    imports nothing above it
//!              openmeteo
//! src/client/  the browser client's policy           core
//! src/edge/    the edge's policy                     core
//! src/sim/     the policy simulator                  core, client, edge
//! src/wasm/    the bindings                          everything
//! ```
//!
//! and no file imports, through others, a file that imports it. An import is a path in the
//! source that starts `crate::`, `super::` or `self::` (in a `use` tree or inline), resolved
//! to the file of the longest module it names; test modules (`#[cfg(test)] mod …`) and
//! comments are not read. A module's own children (declared with `mod`) are its parts, not
//! its imports. `lib.rs` only re-exports: a file importing through it (`crate::Decision`)
//! is told to use the real path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: [&str; 5] = ["core", "client", "edge", "sim", "wasm"];

/// The layers each layer may import besides itself.
const MAY_IMPORT: [(&str, &[&str]); 5] = [
    ("core", &[]),
    ("client", &["core"]),
    ("edge", &["core"]),
    ("sim", &["core", "client", "edge"]),
    ("wasm", &["core", "client", "edge", "sim"]),
];

/// Whether a file of layer `mine` may import a file of layer `theirs`.
fn may_import(mine: usize, theirs: usize) -> bool {
    let allowed = MAY_IMPORT.iter().find(|(layer, _)| *layer == LAYERS[mine]).map_or(&[][..], |(_, to)| *to);
    theirs == mine || allowed.contains(&LAYERS[theirs])
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The Worker crate's sources.
fn worker_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("worker/src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `root`: `src/edge/rules/mod.rs` → `["edge", "rules"]`.
fn module_in(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The source without comments, string and char literals, and `#[cfg(test)]` modules.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // a raw string: r"…", r#"…"#
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\')) => {
                // a char literal ('x', '\n', '\u{..}'); a lifetime has no closing quote
                let mut j = i + 1;
                if b[j] == b'\\' {
                    j += 2;
                }
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    strip_test_modules(&out)
}

/// `code` without `#[cfg(test)] mod name { … }` and `#[cfg(test)] mod name;`.
fn strip_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        if !trimmed.starts_with("mod ") {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let start = after.len() - trimmed.len();
        let end = match trimmed.find(['{', ';']) {
            Some(i) if trimmed.as_bytes()[i] == b';' => start + i + 1,
            Some(i) => {
                let mut depth = 0;
                let mut close = trimmed.len();
                for (j, c) in trimmed[i..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                close = i + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                start + close
            }
            None => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every path a `use` tree names: `crate::a::{b, c::{d, e}}` → `crate::a::b`, `crate::a::c::d`, ….
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{') {
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(prefix, &inner[start..], out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    match tree.split_once("::") {
        Some((head, rest)) => {
            let mut p = prefix.to_vec();
            p.push(head.trim().to_string());
            expand(&p, rest, out);
        }
        None => {
            let head = tree.split_whitespace().next().unwrap_or("");
            let mut p = prefix.to_vec();
            if head != "*" && head != "self" {
                p.push(head.to_string());
            }
            out.push(p);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The `crate::`, `super::` and `self::` paths in `code`, as segments.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // use trees
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before_ok = rest[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        let tree: String = after[..end].chars().filter(|c| !c.is_whitespace() || *c == ' ').collect();
        let tree = tree.trim();
        if before_ok && ["crate::", "super::", "self::"].iter().any(|p| tree.starts_with(p)) {
            expand(&[], tree, &mut out);
        }
        rest = &after[end..];
    }
    // inline paths
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let at = from + at;
            from = at + root.len();
            if code[..at].chars().next_back().is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            let mut segs = vec![root.trim_end_matches(':').to_string()];
            let mut tail = &code[at + root.len()..];
            loop {
                let n = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
                if n == 0 {
                    break;
                }
                segs.push(tail[..n].to_string());
                tail = &tail[n..];
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            out.push(segs);
        }
    }
    out
}

struct Tree {
    /// module path → file
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// file → files it imports
    imports: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

/// The module path of a file of the core crate.
fn module_of(file: &Path) -> Vec<String> {
    module_in(&src(), file)
}

/// The files under `root` (a crate's `src/`) and what each imports.
fn tree_of(root: &Path) -> Tree {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files.iter().map(|f| (module_in(root, f), f.clone())).collect();
    let mut imports = BTreeMap::new();
    for file in &files {
        let me = module_in(root, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let mut to = BTreeSet::new();
        for path in paths_in(&code) {
            let mut base = me.clone();
            let mut segs = path.iter().peekable();
            match segs.peek().map(|s| s.as_str()) {
                Some("crate") => {
                    base.clear();
                    segs.next();
                }
                _ => {
                    while let Some(s) = segs.peek() {
                        match s.as_str() {
                            "super" => {
                                base.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        segs.next();
                    }
                }
            }
            let full: Vec<String> = base.into_iter().chain(segs.cloned()).collect();
            let target = (0..=full.len()).rev().find_map(|n| modules.get(&full[..n]));
            if let Some(target) = target.filter(|t| *t != file) {
                to.insert(target.clone());
            }
        }
        imports.insert(file.clone(), to);
    }
    Tree { modules, imports }
}

fn tree() -> Tree {
    tree_of(&src())
}

fn rel(p: &Path) -> String {
    p.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap().display().to_string()
}

fn layer(file: &Path) -> Option<usize> {
    let first = module_of(file).into_iter().next()?;
    LAYERS.iter().position(|l| *l == first)
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let t = tree();
    let lib = src().join("lib.rs");
    let mut wrong = Vec::new();
    for (file, to) in &t.imports {
        if *file == lib {
            continue;
        }
        let Some(mine) = layer(file) else {
            wrong.push(format!("{} is in no layer folder ({})", rel(file), LAYERS.join(", ")));
            continue;
        };
        for target in to {
            if *target == lib {
                wrong.push(format!("{} imports through lib.rs's re-exports: use the real path", rel(file)));
            } else if let Some(theirs) = layer(target).filter(|theirs| !may_import(mine, *theirs)) {
                let why = if theirs > mine { "a layer above it" } else { "a layer it may not import" };
                wrong.push(format!(
                    "{} ({}) imports {} ({}), {why}",
                    rel(file),
                    LAYERS[mine],
                    rel(target),
                    LAYERS[theirs]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // the test reads what it should: the core's files were found, and imports were seen
    assert!(t.modules.contains_key(&vec!["core".to_string(), "limit".to_string()]));
    assert!(t.imports.values().map(BTreeSet::len).sum::<usize>() > 100);
}

#[test]
fn the_core_has_no_serde_and_no_bindings() {
    let mut files = Vec::new();
    rust_files(&src().join("core"), &mut files);
    assert!(files.len() >= 5);
    for file in files {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for word in ["serde", "wasm_bindgen", "js_sys", "web_sys", "std::"] {
            let found = code.match_indices(word).any(|(i, _)| !code[..i].ends_with(|c: char| is_ident(c) || c == ':'));
            assert!(!found, "{} uses {word}", rel(&file));
        }
    }
}

#[test]
fn no_file_imports_itself_through_others() {
    circles_in(&src());
}

#[test]
fn no_file_of_the_worker_imports_itself_through_others() {
    let t = tree_of(&worker_src());
    assert!(t.modules.len() >= 10, "the Worker's modules were read");
    circles_in(&worker_src());
}

/// The Worker's `lib.rs` holds its exports only: every function in it is one JS calls.
#[test]
fn the_workers_lib_holds_its_exports_only() {
    let code = code_of(&std::fs::read_to_string(worker_src().join("lib.rs")).unwrap());
    let lines: Vec<&str> = code.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let item = line.trim_start();
        let is_fn = ["fn ", "pub fn ", "async fn ", "pub async fn "].iter().any(|p| item.starts_with(p));
        if is_fn && !line.starts_with(' ') {
            let exported = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("#["))
                .any(|l| l.contains("wasm_bindgen"));
            assert!(exported, "worker/src/lib.rs: {item} is not an export; it belongs in a module of its own");
        }
    }
}

fn circles_in(root: &Path) {
    let t = tree_of(root);
    // Tarjan's strongly connected components
    struct State<'a> {
        imports: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        circles: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.imports.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(rel(w));
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.circles.push(comp);
            }
        }
    }
    let lib = root.join("lib.rs");
    let imports: BTreeMap<PathBuf, BTreeSet<PathBuf>> =
        t.imports.iter().filter(|(f, _)| **f != lib).map(|(f, to)| (f.clone(), to.clone())).collect();
    let mut s = State {
        imports: &imports,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        circles: Vec::new(),
    };
    for v in imports.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    let circles: Vec<String> = s.circles.iter().map(|c| c.join(" ↔ ")).collect();
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn the_reader_finds_imports_in_use_trees_and_inline_paths() {
    let code = code_of(
        "use crate::a::{b, c::{d, e as f}};\n// use crate::commented;\nlet s = \"crate::quoted\";\n\
         fn g() { super::h::i(); }\n#[cfg(test)]\nmod tests { use crate::tested; }\nuse self::j::*;",
    );
    let paths: Vec<String> = paths_in(&code).iter().map(|p| p.join("::")).collect();
    for want in ["crate::a::b", "crate::a::c::d", "crate::a::c::e", "super::h::i", "self::j"] {
        assert!(paths.contains(&want.to_string()), "{want} in {paths:?}");
    }
    for unwanted in ["commented", "quoted", "tested"] {
        assert!(!paths.iter().any(|p| p.contains(unwanted)), "{unwanted} in {paths:?}");
    }
}
