//! A before/after pair: two configurations replayed on the same traffic (the same seed and
//! duration, or the same trace), the per-client change between them, a verdict judged on the
//! after run, and the filled rate-limit review (`sluicegate sim BEFORE --compare AFTER
//! --review`): scope, what happens today, the findings, the proposed policies as config, the
//! same traffic after the change, the response contract, what limits cannot do and what to
//! monitor.

use super::analyse::{ClientRow, PolicyRow, Report};
use super::config::{Config, KeyBy, Retry};
use super::findings::{Finding, Severity};
use super::py::{format_g, PyValue};
use super::review::{fill, Placeholder, TemplateError, REVIEW_TEMPLATE};
use super::size::grouped;
use super::stats::{Event, Observer};
use super::timeline::Timeline;
use super::{report, simulate_generated, simulate_trace_within, Ceiling, SimError};
use core::fmt::Write;
use serde_json::Value;
use std::io::Read;

/// What a comparison recommends, judged on the after run's findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No high or medium finding after the change.
    Ship,
    /// Medium findings remain after the change (none high).
    ShipWithChanges,
    /// A high finding remains after the change.
    DoNotShip,
}

impl Verdict {
    /// From the after run's findings: any high → do not ship; any medium → ship with
    /// changes; else ship.
    pub fn of(findings: &[Finding]) -> Verdict {
        if findings.iter().any(|f| f.severity == Severity::High) {
            Verdict::DoNotShip
        } else if findings.iter().any(|f| f.severity == Severity::Medium) {
            Verdict::ShipWithChanges
        } else {
            Verdict::Ship
        }
    }

    /// `ship`, `ship with changes` or `do not ship`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ship => "ship",
            Verdict::ShipWithChanges => "ship with changes",
            Verdict::DoNotShip => "do not ship",
        }
    }
}

/// A configuration to compare: its JSON text, what errors call it (a path, or "the after
/// config"), and the folder an `edge_rules` path is read from (`None`: the rules are inline).
#[derive(Clone, Copy, Debug)]
pub struct ConfigFile<'a> {
    /// What errors and the review call it.
    pub label: &'a str,
    /// The JSON text.
    pub text: &'a str,
    /// Where a relative `edge_rules` path is read from.
    pub dir: Option<&'a std::path::Path>,
}

/// Where the compared traffic came from.
#[derive(Clone, Debug, PartialEq)]
pub enum TrafficUsed {
    /// Generated from each configuration's own clients with one seed over one duration.
    Generated {
        /// The seed, as written.
        seed: String,
        /// Seconds simulated.
        duration_s: f64,
        /// Clients the after configuration defines differently (or only one side defines).
        changed: Vec<String>,
    },
    /// One recorded trace replayed through both.
    Trace {
        /// Its name (the path).
        name: String,
        /// Its rows (logical requests).
        rows: u64,
        /// Its first and last request time, seconds.
        first_s: f64,
        /// See `first_s`.
        last_s: f64,
    },
}

/// One side of a comparison.
#[derive(Clone, Debug)]
pub struct Side {
    /// What the input called it.
    pub label: String,
    /// The configuration as checked.
    pub config: Config,
    /// The configuration as written (for its `policies` block and client definitions).
    pub value: Value,
    /// The simulator's report.
    pub report: Report,
    /// Per-second admissions and refusals per client.
    pub timeline: Timeline,
}

/// A before/after pair, replayed on the same traffic.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Today's policies.
    pub before: Side,
    /// The proposed ones.
    pub after: Side,
    /// The traffic both saw.
    pub traffic: TrafficUsed,
}

/// The timeline and, for a trace, its rows and span: what a side's replay is watched for;
/// and its progress, handed on.
#[derive(Default)]
struct Watch<'p> {
    timeline: Timeline,
    rows: u64,
    first: f64,
    last: f64,
    progress: Option<&'p mut dyn FnMut(u64, Option<u64>)>,
}

impl Observer for Watch<'_> {
    fn attempt(&mut self, e: &Event<'_>) {
        self.timeline.attempt(e);
        if e.attempt == 0 {
            if self.rows == 0 {
                self.first = e.t;
            }
            self.rows += 1;
            self.last = e.t;
        }
    }
    fn restart(&mut self) {
        self.timeline.restart();
        self.rows = 0;
    }
    fn progress(&mut self, done: u64, total: Option<u64>) {
        if let Some(report) = self.progress.as_deref_mut() {
            report(done, total);
        }
    }
}

fn labelled(label: &str) -> impl Fn(SimError) -> SimError + '_ {
    move |e| match e {
        SimError::Input(m) => SimError::Input(format!("{label}: {m}")),
        SimError::Field(e) => SimError::Field(Box::new(super::FieldError { config: Some(label.into()), ..*e })),
        SimError::Crash(m) => SimError::Crash(format!("{label}: {m}")),
    }
}

/// Reads and checks one side's configuration: the parsed value and the checked config.
fn read_config(file: ConfigFile<'_>) -> Result<(Value, Config), SimError> {
    let value: Value = serde_json::from_str(file.text)
        .map_err(|e| SimError::Input(format!("invalid JSON: {e}")))
        .map_err(labelled(file.label))?;
    let cfg = match file.dir {
        Some(dir) => Config::from_json_in(file.text, dir),
        None => Config::from_value(&value),
    }
    .map_err(labelled(file.label))?;
    Ok((value, cfg))
}

/// The seed as a comparison shows it.
fn seed_text(cfg: &Config) -> String {
    match &cfg.seed {
        super::Seed::Int(i) => i.to_string(),
        super::Seed::Float(x) => super::py::float_repr(*x),
        super::Seed::Unsupported(text) => text.clone(),
    }
}

/// Clients the two configurations define differently, by name: before's order, then those
/// only the after configuration has.
fn changed_clients(before: (&Config, &Value), after: (&Config, &Value)) -> Vec<String> {
    // the checked config names every client (a default name for one without); its raw
    // definition is the entry at the same place
    let clients = |(cfg, v): (&Config, &Value)| -> Vec<(String, Value)> {
        let list = v.get("clients").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        cfg.clients.iter().zip(list).map(|(c, def)| (c.name.clone(), def.clone())).collect()
    };
    let (b, a) = (clients(before), clients(after));
    let mut changed: Vec<String> = Vec::new();
    for (name, def) in &b {
        if a.iter().find(|(n, _)| n == name).map(|(_, d)| d) != Some(def) {
            changed.push(name.clone());
        }
    }
    for (name, _) in &a {
        if !b.iter().any(|(n, _)| n == name) && !changed.contains(name) {
            changed.push(name.clone());
        }
    }
    changed
}

/// Replays `before` and `after` on the same traffic: each configuration's own clients with
/// one seed and duration (each refused past `ceiling`), or `trace` (its name, and how to open
/// it: it is read once per side) reordered within `window_s` seconds. `progress`, if any, is
/// called with the side being replayed (`"before"`, then `"after"`) and how far it has got
/// (see [`Observer::progress`]).
///
/// # Errors
/// [`SimError::Input`] naming the side for a bad configuration, and for two configurations
/// whose generated traffic would not be comparable: different `duration_s` or `seed` with no
/// trace.
pub fn compare<R: Read + Send>(
    before: ConfigFile<'_>,
    after: ConfigFile<'_>,
    trace: Option<(&str, impl FnMut() -> std::io::Result<R>)>,
    window_s: f64,
    ceiling: Ceiling<'_>,
    mut progress: Option<&mut dyn FnMut(&'static str, u64, Option<u64>)>,
) -> Result<Comparison, SimError> {
    let (before_value, before_cfg) = read_config(before)?;
    let (after_value, after_cfg) = read_config(after)?;
    let mut run = |side, cfg: &Config, label: &str, trace: Option<(&str, &mut dyn FnMut() -> std::io::Result<R>)>| {
        let mut report_side = progress.as_deref_mut().map(|report| move |done, total| report(side, done, total));
        let mut watch = Watch {
            timeline: Timeline { capacity_rps: cfg.capacity_rps, ..Timeline::default() },
            progress: report_side.as_mut().map(|r| -> &mut dyn FnMut(u64, Option<u64>) { r }),
            ..Watch::default()
        };
        let out = match trace {
            Some((name, open)) => simulate_trace_within(cfg, name, window_s, open, Some(&mut watch))?,
            None => simulate_generated(cfg, Some(&mut watch)).map_err(labelled(label))?,
        };
        watch.timeline.finish();
        let report = report(cfg, out).map_err(labelled(label))?;
        let Watch { timeline, rows, first, last, .. } = watch;
        Ok::<_, SimError>((report, Watch { timeline, rows, first, last, progress: None }))
    };
    let (before_run, after_run, traffic) = match trace {
        Some((name, mut open)) => {
            let before_run = run("before", &before_cfg, before.label, Some((name, &mut open)))?;
            let after_run = run("after", &after_cfg, after.label, Some((name, &mut open)))?;
            let w = &before_run.1;
            let traffic = TrafficUsed::Trace { name: name.into(), rows: w.rows, first_s: w.first, last_s: w.last };
            (before_run, after_run, traffic)
        }
        None => {
            if before_cfg.duration_s != after_cfg.duration_s {
                return Err(SimError::Input(format!(
                    "{} simulates {} s and {} {} s: the same traffic needs the same duration_s (or compare them on one trace)",
                    before.label,
                    format_g(before_cfg.duration_s),
                    after.label,
                    format_g(after_cfg.duration_s)
                )));
            }
            let (seed_b, seed_a) = (seed_text(&before_cfg), seed_text(&after_cfg));
            if seed_b != seed_a {
                return Err(SimError::Input(format!(
                    "{} has seed {seed_b} and {} seed {seed_a}: the same traffic needs the same seed (or compare them on one trace)",
                    before.label, after.label
                )));
            }
            before_cfg.check_size(ceiling.max_requests, ceiling.raise).map_err(labelled(before.label))?;
            after_cfg.check_size(ceiling.max_requests, ceiling.raise).map_err(labelled(after.label))?;
            let traffic = TrafficUsed::Generated {
                seed: seed_b,
                duration_s: before_cfg.duration_s,
                changed: changed_clients((&before_cfg, &before_value), (&after_cfg, &after_value)),
            };
            let before_run = run("before", &before_cfg, before.label, None)?;
            (before_run, run("after", &after_cfg, after.label, None)?, traffic)
        }
    };
    let side = |label: &str, config: Config, value: Value, (report, watch): (Report, Watch)| Side {
        label: label.into(),
        config,
        value,
        report,
        timeline: watch.timeline,
    };
    Ok(Comparison {
        before: side(before.label, before_cfg, before_value, before_run),
        after: side(after.label, after_cfg, after_value, after_run),
        traffic,
    })
}

/// A count with thousands separators.
fn n(v: u64) -> String {
    grouped(v)
}

/// A wait as the review shows it: whole seconds from 10 s up, else to a tenth.
fn wait(s: f64) -> String {
    if s >= 10.0 {
        format!("{} s", format_g(s.round()))
    } else {
        format!("{} s", format_g(s))
    }
}

/// A capacity's text, or `none given`.
fn capacity(c: Option<f64>) -> String {
    c.filter(|c| *c != 0.0).map_or_else(|| "none given".into(), |c| format!("{} req/s", format_g(c)))
}

/// Finding codes in first-seen order, each once.
fn codes(findings: &[Finding]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for f in findings {
        if !out.contains(&f.code) {
            out.push(f.code);
        }
    }
    out
}

/// Endpoints a login limit guards (a policy whose endpoints name login, sign-in or auth).
fn is_login_path(endpoint: &str) -> bool {
    let e = endpoint.to_ascii_lowercase();
    ["login", "signin", "sign-in", "sign_in", "auth", "password", "session"].iter().any(|w| e.contains(w))
}

/// One JSON value on one line, objects' keys in the order a person writes a policy.
fn json_line(v: &Value, o: &mut String) {
    const FIRST: [&str; 10] =
        ["name", "algorithm", "key", "limit", "window_s", "rate", "burst", "endpoints", "clients", "exclude_clients"];
    match v {
        Value::Array(items) => {
            o.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    o.push_str(", ");
                }
                json_line(item, o);
            }
            o.push(']');
        }
        Value::Object(map) => {
            // the usual fields first, then the rest in the map's (alphabetical) order
            let first = FIRST.iter().filter(|k| map.contains_key(**k)).copied();
            let rest = map.keys().map(String::as_str).filter(|k| !FIRST.contains(k));
            o.push('{');
            for (i, k) in first.chain(rest).enumerate() {
                if i > 0 {
                    o.push_str(", ");
                }
                o.push_str(&serde_json::to_string(k).unwrap_or_default());
                o.push_str(": ");
                json_line(&map[k], o);
            }
            o.push('}');
        }
        other => o.push_str(&other.to_string()),
    }
}

/// The after configuration's policies as config: its `policies` (and `edge_rules`) blocks,
/// one policy or rule per line.
fn policies_block(value: &Value) -> String {
    let mut o = String::from("{\n");
    let blocks: Vec<(&str, &Value)> =
        ["policies", "edge_rules"].into_iter().filter_map(|k| value.get(k).map(|v| (k, v))).collect();
    for (bi, (key, block)) in blocks.iter().enumerate() {
        let _ = write!(o, "  \"{key}\": ");
        match block {
            Value::Array(items) if !items.is_empty() => {
                o.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    o.push_str("    ");
                    json_line(item, &mut o);
                    o.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                o.push_str("  ]");
            }
            other => json_line(other, &mut o),
        }
        o.push_str(if bi + 1 < blocks.len() { ",\n" } else { "\n" });
    }
    o.push('}');
    o
}

impl Comparison {
    /// The verdict, judged on the after run.
    pub fn verdict(&self) -> Verdict {
        Verdict::of(&self.after.report.findings)
    }

    /// The exit status `sluicegate sim --compare` gives: 1 when the after run has high
    /// findings, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.after.report.highs() > 0)
    }

    /// Clients in the before run's order (most requests first), then those only the after
    /// run saw: each with its row on either side.
    pub fn clients(&self) -> Vec<(&str, Option<&ClientRow>, Option<&ClientRow>)> {
        let (b, a) = (&self.before.report.clients, &self.after.report.clients);
        let mut out: Vec<(&str, Option<&ClientRow>, Option<&ClientRow>)> =
            b.iter().map(|c| (c.client.as_str(), Some(c), a.iter().find(|x| x.client == c.client))).collect();
        out.extend(
            a.iter().filter(|c| !b.iter().any(|x| x.client == c.client)).map(|c| (c.client.as_str(), None, Some(c))),
        );
        out
    }

    /// The edge rules in shadow or partial enforcement on either side (by name: before's
    /// order, then those only the after run has), each with its row on either side.
    pub fn shadow_rules(&self) -> Vec<(&str, Option<&PolicyRow>, Option<&PolicyRow>)> {
        let (b, a) = (&self.before.report.policies, &self.after.report.policies);
        let mut out: Vec<(&str, Option<&PolicyRow>, Option<&PolicyRow>)> =
            b.iter().map(|p| (p.name.as_str(), Some(p), a.iter().find(|x| x.name == p.name))).collect();
        out.extend(a.iter().filter(|p| !b.iter().any(|x| x.name == p.name)).map(|p| (p.name.as_str(), None, Some(p))));
        out.retain(|(_, b, a)| [b, a].iter().any(|p| p.is_some_and(|p| p.shadow.is_some())));
        out
    }

    /// Per rule in shadow or partial enforcement on either side: its enforcement, the
    /// refusals it enforced and those it made in shadow, before and after (empty when no rule
    /// is).
    fn shadow_table(&self, o: &mut String) {
        let rows = self.shadow_rules();
        if rows.is_empty() {
            return;
        }
        o.push_str(
            "\nRules in shadow or partial enforcement: refusals enforced, and in shadow (counted as refused, \
             let through).\n\n| Rule | Enforce before | Enforce after | Rejects before | Rejects after | \
             Would refuse before | Would refuse after |\n|---|---|---|---|---|---|---|\n",
        );
        let enforce = |p: Option<&PolicyRow>| {
            p.map_or_else(
                || "-".into(),
                |p| p.shadow.as_ref().map_or_else(|| "all".into(), |s| report::enforce_md(s.enforce)),
            )
        };
        let cell = |p: Option<&PolicyRow>, f: &dyn Fn(&PolicyRow) -> u64| p.map_or_else(|| "-".into(), |p| n(f(p)));
        let would = |p: &PolicyRow| p.shadow.as_ref().map_or(0, |s| s.would_refuse);
        for (name, b, a) in rows {
            let _ = writeln!(
                o,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                enforce(b),
                enforce(a),
                cell(b, &|p| p.rejects),
                cell(a, &|p| p.rejects),
                cell(b, &would),
                cell(a, &would),
            );
        }
    }

    /// Finding codes the change removed, and codes only the after run has.
    pub fn resolved_and_new(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        let (b, a) = (codes(&self.before.report.findings), codes(&self.after.report.findings));
        (b.iter().filter(|c| !a.contains(c)).copied().collect(), a.iter().filter(|c| !b.contains(c)).copied().collect())
    }

    /// The comparison as data (what `--compare --json` prints): the verdict, the traffic, the
    /// capacity and peak on either side, per client before and after, the findings, and both
    /// reports as `--json` gives them.
    pub fn to_py(&self) -> PyValue {
        let dict = |items: Vec<(&str, PyValue)>| PyValue::Dict(items.into_iter().map(|(k, v)| (k.into(), v)).collect());
        let traffic = match &self.traffic {
            TrafficUsed::Generated { seed, duration_s, changed } => dict(vec![
                ("source", "generated".into()),
                ("seed", self.before.value.get("seed").map_or(PyValue::None, PyValue::from_json)),
                ("seed_text", seed.as_str().into()),
                ("duration_s", (*duration_s).into()),
                ("changed_clients", PyValue::List(changed.iter().map(|c| c.as_str().into()).collect())),
            ]),
            TrafficUsed::Trace { name, rows, first_s, last_s } => dict(vec![
                ("source", "trace".into()),
                ("name", name.as_str().into()),
                ("rows", (*rows).into()),
                ("span_s", (last_s - first_s).into()),
            ]),
        };
        let row = |c: Option<&ClientRow>| {
            c.map_or(PyValue::None, |c| {
                dict(vec![
                    ("requests", c.logical.into()),
                    ("rejected", c.rejected.into()),
                    ("delayed", c.delayed.into()),
                    ("failed", c.failed.into()),
                    ("max_wait_s", c.max_retry_after_s.into()),
                ])
            })
        };
        let clients = self
            .clients()
            .into_iter()
            .map(|(name, b, a)| {
                let kind = b.or(a).map_or(PyValue::None, |c| c.kind.clone());
                dict(vec![("client", name.into()), ("kind", kind), ("before", row(b)), ("after", row(a))])
            })
            .collect();
        let peak = |r: &Report| {
            dict(vec![("admitted_rps", r.peak_admitted_rps.into()), ("second", PyValue::Int(r.peak_second))])
        };
        let findings = |r: &Report| {
            PyValue::List(
                r.findings
                    .iter()
                    .map(|f| {
                        dict(vec![
                            ("severity", f.severity.name().into()),
                            ("code", f.code.into()),
                            ("message", f.message.as_str().into()),
                        ])
                    })
                    .collect(),
            )
        };
        let (resolved, new) = self.resolved_and_new();
        let code_list = |v: Vec<&'static str>| PyValue::List(v.into_iter().map(PyValue::from).collect());
        let (b, a) = (&self.before.report, &self.after.report);
        dict(vec![
            ("verdict", self.verdict().name().into()),
            ("exit_code", PyValue::Int(self.exit_code().into())),
            ("traffic", traffic),
            ("capacity_rps", dict(vec![("before", b.capacity_rps.into()), ("after", a.capacity_rps.into())])),
            ("peak", dict(vec![("before", peak(b)), ("after", peak(a))])),
            ("clients", PyValue::List(clients)),
            (
                "findings",
                dict(vec![
                    ("before", findings(b)),
                    ("after", findings(a)),
                    ("resolved", code_list(resolved)),
                    ("new", code_list(new)),
                ]),
            ),
            ("before", b.to_py()),
            ("after", a.to_py()),
        ])
    }

    /// What `--compare --json` prints.
    pub fn to_json(&self) -> String {
        let mut out = self.to_py().dumps();
        out.push('\n');
        out
    }

    /// The traffic line.
    fn traffic_text(&self) -> String {
        match &self.traffic {
            TrafficUsed::Generated { seed, duration_s, changed } => {
                let (b, a) = (self.before.report.requests, self.after.report.requests);
                let counts = if b == a {
                    format!("{} requests", n(b))
                } else {
                    format!("{} requests before, {} after", n(b), n(a))
                };
                let changed = match changed.as_slice() {
                    [] => String::new(),
                    names => format!("; the after config changes client {}", names.join(", ")),
                };
                format!(
                    "generated from the configs' clients, seed {seed}, {} s ({counts}{changed})",
                    format_g(*duration_s)
                )
            }
            TrafficUsed::Trace { name, rows, first_s, last_s } => {
                let span = last_s - first_s;
                let span = if span >= 10.0 { format_g(span.round()) } else { format_g(super::py::round(span, 1)) };
                format!("trace {name}: {} rows over {span} s", n(*rows))
            }
        }
    }

    /// The capacity line: one number, or the change.
    fn capacity_text(&self) -> String {
        let (b, a) = (self.before.report.capacity_rps, self.after.report.capacity_rps);
        if b == a {
            format!("{} sustained", capacity(a))
        } else {
            format!("{} sustained before, {} after", capacity(b), capacity(a))
        }
    }

    /// The scope: the policies on each side and the endpoints they name.
    fn scope_text(&self) -> String {
        let names = |r: &Report| r.policies.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
        let mut endpoints: Vec<&str> = Vec::new();
        for p in self.before.report.policies.iter().chain(&self.after.report.policies) {
            for e in &p.endpoints {
                if !endpoints.contains(&e.as_str()) {
                    endpoints.push(e);
                }
            }
        }
        let scoped = if endpoints.is_empty() {
            "every endpoint".to_string()
        } else {
            format!("every endpoint, and {}", endpoints.join(", "))
        };
        format!(
            "{} today ({}) → {} proposed ({}); {scoped}",
            policies(self.before.report.policies.len()),
            names(&self.before.report),
            policies(self.after.report.policies.len()),
            names(&self.after.report),
        )
    }

    /// The before → after per-client table and the peak line.
    fn after_table(&self, o: &mut String) {
        o.push_str(&self.before_after_table());
        o.push('\n');
        o.push_str(&self.after_peak());
    }

    /// Per client before → after: 429s, OK after retry, failed, max wait.
    fn before_after_table(&self) -> String {
        let mut o = String::from(
            "| Client | Kind | 429s before | 429s after | OK after retry before | OK after retry after | Failed before | \
             Failed after | Max wait before | Max wait after |\n|---|---|---|---|---|---|---|---|---|---|\n",
        );
        let cell = |c: Option<&ClientRow>, f: &dyn Fn(&ClientRow) -> String| c.map_or_else(|| "-".into(), f);
        for (name, b, a) in self.clients() {
            let kind = b.or(a).map_or_else(String::new, |c| c.kind.to_str());
            let _ = writeln!(
                o,
                "| {name} | {kind} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(b, &|c| n(c.rejected)),
                cell(a, &|c| n(c.rejected)),
                cell(b, &|c| n(c.delayed)),
                cell(a, &|c| n(c.delayed)),
                cell(b, &|c| n(c.failed)),
                cell(a, &|c| n(c.failed)),
                cell(b, &|c| wait(c.max_retry_after_s)),
                cell(a, &|c| wait(c.max_retry_after_s)),
            );
        }
        o
    }

    /// The peak admitted second after the change, and before.
    fn after_peak(&self) -> String {
        let (b, a) = (&self.before.report, &self.after.report);
        format!(
            "Peak admitted after: {} req/s in second {} (before: {} req/s in second {}) vs capacity {}.\n",
            n(a.peak_admitted_rps),
            a.peak_second,
            n(b.peak_admitted_rps),
            b.peak_second,
            capacity(a.capacity_rps)
        )
    }

    /// The after run's findings, and what changed.
    fn after_findings(&self, o: &mut String) {
        let _ = write!(o, "\n{}\n", self.findings_change());
        numbered(o, &self.after.report.findings);
    }

    /// The finding codes the change resolved, those remaining and the new ones.
    fn findings_change(&self) -> String {
        let (resolved, new) = self.resolved_and_new();
        let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
        let remaining: Vec<&str> =
            codes(&self.after.report.findings).into_iter().filter(|c| !new.contains(c)).collect();
        format!(
            "Findings after the change: resolved {}; remaining {}; new {}.\n",
            list(&resolved),
            list(&remaining),
            list(&new)
        )
    }

    /// A short comparison (what `--compare` prints without `--review`): the verdict, the
    /// traffic, the before → after table and the findings after the change.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# Rate limit comparison: {} → {}\n",
            self.before.report.service.to_str(),
            self.after.report.service.to_str()
        );
        let _ = writeln!(o, "Traffic used: {}.\n", self.traffic_text());
        let _ = writeln!(o, "Verdict: {}.\n", self.verdict_text());
        self.after_table(&mut o);
        self.shadow_table(&mut o);
        self.after_findings(&mut o);
        o
    }

    /// The verdict with its reason.
    fn verdict_text(&self) -> String {
        let after = &self.after.report.findings;
        let count = |s: Severity| after.iter().filter(|f| f.severity == s).count();
        let which = |s: Severity| {
            let mut c: Vec<&str> = Vec::new();
            for f in after.iter().filter(|f| f.severity == s) {
                if !c.contains(&f.code) {
                    c.push(f.code);
                }
            }
            c.join(", ")
        };
        match self.verdict() {
            Verdict::DoNotShip => format!(
                "**do not ship** - {} high finding(s) after the change ({})",
                count(Severity::High),
                which(Severity::High)
            ),
            Verdict::ShipWithChanges => format!(
                "**ship with changes** - no high finding after the change; {} medium remain ({})",
                count(Severity::Medium),
                which(Severity::Medium)
            ),
            Verdict::Ship => "**ship** - no high or medium finding after the change".into(),
        }
    }

    /// The filled rate-limit review (`--compare --review`), from the built-in template
    /// ([`REVIEW_TEMPLATE`], `templates/rate-limit-review.md`).
    pub fn to_review(&self) -> String {
        // the built-in template is checked by the tests: it has no unknown placeholder
        self.to_review_from(REVIEW_TEMPLATE).unwrap_or_else(|e| e.to_string())
    }

    /// The rate-limit review from `template` (`--review-template PATH`): each `{{placeholder}}`
    /// filled in (see [`super::review`] for the names).
    ///
    /// # Errors
    /// [`TemplateError`] for an unknown or unclosed placeholder.
    pub fn to_review_from(&self, template: &str) -> Result<String, TemplateError> {
        fill(template, |p| self.review_text(p))
    }

    /// What one placeholder of the review holds.
    fn review_text(&self, placeholder: Placeholder) -> String {
        let written = |section: fn(&Self, &mut String)| {
            let mut o = String::new();
            section(self, &mut o);
            o
        };
        match placeholder {
            Placeholder::Service => self.before.report.service.to_str(),
            Placeholder::Scope => self.scope_text(),
            Placeholder::Capacity => self.capacity_text(),
            Placeholder::Traffic => self.traffic_text(),
            Placeholder::Verdict => self.verdict_text(),
            Placeholder::TodayTable => self.today_table(),
            Placeholder::TodayPeak => self.today_peak(),
            Placeholder::TodayFindings => written(|c, o| numbered(o, &c.before.report.findings)),
            Placeholder::BeforeConfig => self.before.label.clone(),
            Placeholder::AfterConfig => self.after.label.clone(),
            Placeholder::ProposedPolicies => policies_block(&self.after.value),
            Placeholder::BeforeAfterTable => self.before_after_table(),
            Placeholder::AfterPeak => self.after_peak(),
            Placeholder::FindingsChange => self.findings_change(),
            Placeholder::AfterFindings => written(|c, o| numbered(o, &c.after.report.findings)),
            Placeholder::ResponseContract => written(Self::contract),
            Placeholder::OutsideRateLimits => written(Self::outside),
            Placeholder::Monitor => written(Self::monitor),
        }
    }

    /// Per client today: requests, 429s, OK after retry, failed, max wait, main policy.
    fn today_table(&self) -> String {
        let mut o = String::from(
            "| Client | Kind | Requests | 429s | OK after retry | Failed | Max wait | Main policy |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for c in &self.before.report.clients {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                c.client,
                c.kind.to_str(),
                n(c.logical),
                n(c.rejected),
                n(c.delayed),
                n(c.failed),
                wait(c.max_retry_after_s),
                if c.top_policy.is_empty() { "-" } else { &c.top_policy }
            );
        }
        o
    }

    /// Today's peak admitted second against capacity (and how many times capacity).
    fn today_peak(&self) -> String {
        let b = &self.before.report;
        let over = match b.capacity_rps.filter(|c| *c != 0.0) {
            Some(c) if b.peak_admitted_rps as f64 > c => {
                format!(" ({}x)", format_g(super::py::round(b.peak_admitted_rps as f64 / c, 1)))
            }
            _ => String::new(),
        };
        format!(
            "Peak admitted: {} req/s in second {} vs capacity {}{over}.\n",
            n(b.peak_admitted_rps),
            b.peak_second,
            capacity(b.capacity_rps)
        )
    }

    /// 429 for per-client limits, 503 for global overload, the headers, client guidance.
    fn contract(&self, o: &mut String) {
        let a = &self.after.report;
        let per_client: Vec<&str> =
            a.policies.iter().filter(|p| p.key != KeyBy::Global.name()).map(|p| p.name.as_str()).collect();
        let global: Vec<String> = a
            .policies
            .iter()
            .filter(|p| p.key == KeyBy::Global.name())
            .map(|p| {
                format!(
                    "'{}' ({} req/s sustained, at most {} per {} s)",
                    p.name,
                    format_g(p.sustained_rps),
                    format_g(p.worst_case_per_window),
                    format_g(p.window_s)
                )
            })
            .collect();
        if per_client.is_empty() {
            o.push_str("- No per-client limit is proposed: one client can take the whole global budget.\n");
        } else {
            let _ = writeln!(
                o,
                "- **429 Too Many Requests** + `Retry-After` (with jitter added) when a per-client limit refuses: {}.",
                per_client.join(", ")
            );
        }
        if global.is_empty() {
            o.push_str(
                "- No global limit is proposed, so nothing bounds the total the backend sees (RL03): add one sized to \
                 capacity, answering **503 Service Unavailable** + `Retry-After` when it sheds.\n",
            );
        } else {
            let _ = writeln!(
                o,
                "- **503 Service Unavailable** + `Retry-After` when the global limit sheds overload: {}.",
                global.join(", ")
            );
        }
        o.push_str(
            "- **Headers** on every refusal: `Retry-After` (seconds), `RateLimit-Policy` and `RateLimit` (IETF httpapi \
             ratelimit-headers draft; older gateways send `X-RateLimit-Limit` / `-Remaining` / `-Reset`), and an \
             `application/problem+json` body naming the policy.\n",
        );
        if let Some(s) = &a.sample_429 {
            let mut sample = String::new();
            if super::report::sample_md(&mut sample, s).is_ok() {
                if let Some(block) = sample.split("```").nth(1) {
                    let _ = writeln!(
                        o,
                        "- The first refusal after the change (t={} s, {} {}):\n\n```{}```\n",
                        format_g(s.t),
                        s.client,
                        s.endpoint,
                        block
                    );
                }
            }
        }
        o.push_str(
            "- **Client guidance:** honour `Retry-After`; otherwise back off exponentially with full jitter (1 s, 2 s, \
             4 s ... capped at 60 s); at most 3 retries per request; pace batch jobs under their tier's rate instead of \
             bursting.\n",
        );
        // per client: what its configured retry does, judged on the after run
        for c in &self.after.config.clients {
            let Some(row) = a.clients.iter().find(|r| r.client == c.name) else { continue };
            let advice = match c.retry {
                Retry::Immediate if row.rejected > 0 => format!(
                    "retries refused calls at once ({}x attempts per request after the change): it must wait for \
                     `Retry-After`",
                    format_g(row.amplification)
                ),
                Retry::None if row.failed > 0 && c.is_legit() => {
                    format!(
                        "gives up on a refusal ({} failed after the change): it should retry after `Retry-After`",
                        n(row.failed)
                    )
                }
                Retry::Honor | Retry::Backoff if row.rejected > 0 && c.is_legit() => format!(
                    "still refused {} times after the change although it waits as told: its limit is too tight for \
                     it (RL01)",
                    n(row.rejected)
                ),
                _ => continue,
            };
            let _ = writeln!(o, "  - {}: {advice}.", c.name);
        }
    }

    /// What the findings say limits cannot do.
    fn outside(&self, o: &mut String) {
        let a = &self.after.report;
        let mut said = false;
        for c in a
            .clients
            .iter()
            .filter(|c| a.findings.iter().any(|f| f.code == "RL02" && names_client(&f.message, &c.client)))
        {
            let _ = writeln!(
                o,
                "- {} ({}) still gets {} of its {} requests through under the proposed limits: a rate limit only \
                 slows it; it needs bot detection, authentication or a WAF rule for its pattern (RL02).",
                c.client,
                c.kind.to_str(),
                n(c.allowed),
                n(c.logical)
            );
            said = true;
        }
        // abusive clients a login limit holds: the limit caps guesses per key, not the attack
        for c in a.clients.iter().filter(|c| matches!(&c.kind, PyValue::Str(k) if k == "abusive")) {
            let Some(p) = a.policies.iter().find(|p| p.name == c.top_policy) else { continue };
            if !p.endpoints.iter().any(|e| is_login_path(e)) {
                continue;
            }
            let _ = writeln!(
                o,
                "- {} ({}) is held by '{}' at {} of {} requests; a limit per key still lets every new key or \
                 address try again, so add account lockout or a CAPTCHA after repeated failures.",
                c.client,
                c.kind.to_str(),
                p.name,
                n(c.logical - c.failed),
                n(c.logical)
            );
            said = true;
        }
        if a.findings.iter().any(|f| f.code == "RL03") {
            o.push_str(
                "- Admitted traffic can still exceed capacity (RL03): load shedding or autoscaling behind the limits.\n",
            );
            said = true;
        }
        if !said {
            o.push_str("- Nothing in this traffic needs more than rate limits; watch for clients the simulation did not model.\n");
        }
    }

    /// Per client and per policy, from the policies actually proposed.
    fn monitor(&self, o: &mut String) {
        let a = &self.after.report;
        let policies: Vec<&str> = a.policies.iter().map(|p| p.name.as_str()).collect();
        let _ = writeln!(o, "- 429 rate per policy: {}.", policies.join(", "));
        let legit: Vec<&str> = a
            .clients
            .iter()
            .filter(|c| matches!(&c.kind, PyValue::Str(k) if k == "legit"))
            .map(|c| c.client.as_str())
            .collect();
        if !legit.is_empty() {
            let _ = writeln!(
                o,
                "- 429s and retries per client, with an alert on any for the legitimate ones: {}.",
                legit.join(", ")
            );
        }
        let abusive: Vec<String> = a
            .clients
            .iter()
            .filter(|c| matches!(&c.kind, PyValue::Str(k) if k == "abusive"))
            .map(|c| format!("{} ({}% failed in simulation)", c.client, format_g(c.failed_pct)))
            .collect();
        if !abusive.is_empty() {
            let _ = writeln!(o, "- Top throttled keys; the abusive clients should stay there: {}.", abusive.join(", "));
        }
        let _ = writeln!(
            o,
            "- Admitted req/s against capacity {} (the simulated peak after the change: {} req/s), and p99 latency.",
            capacity(a.capacity_rps),
            n(a.peak_admitted_rps)
        );
        let idle: Vec<&str> =
            a.findings.iter().filter(|f| f.code == "RL09").filter_map(|f| quoted(&f.message)).collect();
        if !idle.is_empty() {
            let _ = writeln!(
                o,
                "- Policies that never triggered here: {}; confirm with real traffic, and lower them if they stay idle (RL09).",
                idle.join(", ")
            );
        }
        o.push_str("- Review in 2 weeks: the gateway's counts beside this simulation, then re-run it with a trace of real traffic.\n");
    }
}

/// `1 policy`, `3 policies`.
fn policies(count: usize) -> String {
    format!("{count} {}", if count == 1 { "policy" } else { "policies" })
}

/// Whether a finding's message is about client `name` ("... client NAME ...").
fn names_client(message: &str, name: &str) -> bool {
    message.contains(&format!("client {name} "))
}

/// The text between the first pair of single quotes.
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('\'')? + 1;
    let len = message[start..].find('\'')?;
    Some(&message[start..start + len])
}

/// Findings as a numbered list: severity, code, message.
fn numbered(o: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        o.push_str("None.\n");
    }
    for (i, f) in findings.iter().enumerate() {
        let _ = writeln!(o, "{}. {} {} - {}", i + 1, f.severity.name().to_ascii_uppercase(), f.code, f.message);
    }
}
