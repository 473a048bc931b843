//! The Smart Flow conformance vectors (`tests/fixtures/smartflow-vectors.json`): every case
//! of every section, floats compared with a tolerance of 1e-9. Each section's test reports
//! all its failing cases at once; a section, or a field in a case, that this file does not
//! handle is a failure, so new vectors cannot be skipped silently.
#![cfg(not(target_arch = "wasm32"))]

use serde_json::{json, Map, Value};
use sluicegate::smartflow::{
    format_saved_at, is_fresh, parse_saved_at, url, CacheLoad, Config, IdKind, OrgRateLimiter, Penalty, TokenBucket,
};
use std::collections::BTreeMap;

const TOLERANCE: f64 = 1e-9;
const SUPPORTED_VERSION: u64 = 1;
const HANDLED_SECTIONS: &[&str] = &[
    "token_bucket",
    "rate_setter_floor",
    "resolve_org",
    "is_unresolved_scoped_url",
    "aimd",
    "learn_from_response",
    "cache_freshness",
    "saved_at_format",
];
/// Top-level keys that are not sections.
const FILE_METADATA: &[&str] = &["$comment", "version"];

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/smartflow-vectors.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// A case's outcome: `Err` for a malformed vector (reported like a failure).
type Outcome = Result<(), String>;

/// The failures of one section, reported together.
struct Report {
    section: &'static str,
    failures: Vec<String>,
}

impl Report {
    fn new(section: &'static str) -> Self {
        Report { section, failures: Vec::new() }
    }

    fn f64(&mut self, case: &str, what: &str, expected: f64, got: f64) {
        let within = (expected - got).abs() <= TOLERANCE; // false for NaN
        if !within {
            self.failures.push(format!("{case}: {what}: expected {expected}, got {got}"));
        }
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, case: &str, what: &str, expected: T, got: T) {
        if expected != got {
            self.failures.push(format!("{case}: {what}: expected {expected:?}, got {got:?}"));
        }
    }

    fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} failing case check(s) in section `{}`:\n  {}",
            self.failures.len(),
            self.section,
            self.failures.join("\n  ")
        );
    }
}

/// Run every case of `section`, refusing fields not in `section_keys` / `case_keys`.
fn run_section(
    section: &'static str,
    section_keys: &[&str],
    case_keys: &[&str],
    mut run: impl FnMut(&Value, &Value, &str, &mut Report) -> Outcome,
) {
    let file = vectors();
    let body = file.get(section).unwrap_or_else(|| panic!("section `{section}` is missing from the vectors"));
    let mut report = Report::new(section);
    for key in body.as_object().expect("a section is an object").keys() {
        if !["$comment", "cases"].contains(&key.as_str()) && !section_keys.contains(&key.as_str()) {
            report.failures.push(format!("section field `{key}` is not handled by this test"));
        }
    }
    let cases = body["cases"].as_array().unwrap_or_else(|| panic!("section `{section}` has no cases"));
    assert!(!cases.is_empty(), "section `{section}` has no cases");
    for (i, case) in cases.iter().enumerate() {
        let name = case["name"].as_str().map_or_else(|| format!("case #{i}"), String::from);
        for key in case.as_object().expect("a case is an object").keys() {
            if !["name", "notes"].contains(&key.as_str()) && !case_keys.contains(&key.as_str()) {
                report.failures.push(format!("{name}: field `{key}` is not handled by this test"));
            }
        }
        if let Err(problem) = run(body, case, &name, &mut report) {
            report.failures.push(format!("{name}: {problem}"));
        }
    }
    report.finish();
}

fn num(v: &Value, key: &str) -> Result<f64, String> {
    v.get(key).and_then(Value::as_f64).ok_or_else(|| format!("field `{key}` is not a number"))
}

fn opt_num(v: &Value, key: &str) -> Result<Option<f64>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n.as_f64().map(Some).ok_or_else(|| format!("field `{key}` is not a number or null")),
    }
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| format!("field `{key}` is not a string"))
}

fn string_map(v: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let Some(v) = v else { return Ok(BTreeMap::new()) };
    let object = v.as_object().ok_or("a mapping is not an object")?;
    object
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or("a mapping value is not a string")?.to_owned())))
        .collect()
}

fn mappings<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, String> {
    entries.map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

#[test]
fn the_vector_file_has_no_section_this_suite_does_not_handle() {
    let file = vectors();
    assert_eq!(file["version"].as_u64(), Some(SUPPORTED_VERSION), "a new vector version needs a review of this suite");
    let object = file.as_object().expect("the vector file is an object");
    let unhandled: Vec<&String> = object
        .keys()
        .filter(|k| !FILE_METADATA.contains(&k.as_str()) && !HANDLED_SECTIONS.contains(&k.as_str()))
        .collect();
    assert!(unhandled.is_empty(), "vector sections not handled by this suite: {unhandled:?}");
    let missing: Vec<&&str> = HANDLED_SECTIONS.iter().filter(|s| !object.contains_key(**s)).collect();
    assert!(missing.is_empty(), "sections this suite expects are missing from the file: {missing:?}");
}

#[test]
fn token_bucket_vectors() {
    run_section(
        "token_bucket",
        &[],
        &["rate", "capacity", "init_tokens", "init_last", "steps"],
        |_, case, name, report| {
            let mut bucket = TokenBucket::with_state(
                num(case, "rate")?,
                num(case, "capacity")?,
                num(case, "init_tokens")?,
                num(case, "init_last")?,
            )
            .map_err(|e| e.to_string())?;
            let steps = case["steps"].as_array().ok_or("`steps` is not a list")?;
            for (i, step) in steps.iter().enumerate() {
                for key in step.as_object().ok_or("a step is not an object")?.keys() {
                    if !["now", "tokens_after", "wait"].contains(&key.as_str()) {
                        return Err(format!("step {i}: field `{key}` is not handled by this test"));
                    }
                }
                let wait = bucket.acquire(num(step, "now")?).map_err(|e| e.to_string())?;
                report.f64(name, &format!("step {i} wait"), num(step, "wait")?, wait);
                report.f64(name, &format!("step {i} tokens_after"), num(step, "tokens_after")?, bucket.tokens());
            }
            Ok(())
        },
    );
}

#[test]
fn rate_setter_floor_vectors() {
    run_section("rate_setter_floor", &[], &["set_rate", "expected_rate"], |_, case, name, report| {
        let mut bucket = TokenBucket::new(10.0, 10.0).map_err(|e| e.to_string())?;
        let applied = bucket.set_rate(num(case, "set_rate")?).map_err(|e| e.to_string())?;
        report.f64(name, "returned rate", num(case, "expected_rate")?, applied);
        report.f64(name, "rate", num(case, "expected_rate")?, bucket.rate());
        Ok(())
    });
}

#[test]
fn resolve_org_vectors() {
    run_section(
        "resolve_org",
        &["network_to_org", "serial_to_org"],
        &["url", "expected_org"],
        |section, case, name, report| {
            let mut limiter = OrgRateLimiter::new(Config::default()).map_err(|e| e.to_string())?;
            for (net, org) in string_map(section.get("network_to_org"))? {
                limiter.register_network(&net, &org).map_err(|e| e.to_string())?;
            }
            for (serial, org) in string_map(section.get("serial_to_org"))? {
                limiter.register_device(&serial, &org).map_err(|e| e.to_string())?;
            }
            let expected = case.get("expected_org").ok_or("no `expected_org`")?.as_str();
            report.eq(name, "org", expected, limiter.resolve_org(text(case, "url")?));
            Ok(())
        },
    );
}

#[test]
fn is_unresolved_scoped_url_vectors() {
    run_section("is_unresolved_scoped_url", &[], &["url", "expected"], |_, case, name, report| {
        let expected = case.get("expected").and_then(Value::as_bool).ok_or("`expected` is not a boolean")?;
        report.eq(name, "is_unresolved_scoped_url", expected, url::is_unresolved_scoped_url(text(case, "url")?));
        Ok(())
    });
}

#[test]
fn aimd_vectors() {
    const ORG: &str = "O_1";
    run_section(
        "aimd",
        &[],
        &["op", "target", "start_rate", "expected_rate", "configured_rate", "url", "org_resolvable"],
        |_, case, name, report| {
            let target = text(case, "target")?;
            let configured = opt_num(case, "configured_rate")?;
            let mut config = Config::default();
            match (target, configured) {
                ("org", Some(rate)) => config.org_rate = rate,
                ("global", Some(rate)) => config.global_rate = rate,
                ("org" | "global", None) => {}
                (other, _) => return Err(format!("unknown target `{other}`")),
            }
            let url = match case.get("url") {
                Some(u) => u.as_str().ok_or("`url` is not a string")?,
                None if target == "org" => "/organizations/O_1/networks",
                None => "/administered/identities/me",
            };
            let mut limiter = OrgRateLimiter::new(config).map_err(|e| e.to_string())?;
            let resolvable = match case.get("org_resolvable") {
                None => target == "org",
                Some(v) => v.as_bool().ok_or("`org_resolvable` is not a boolean")?,
            };
            if resolvable {
                limiter.register_org(ORG).map_err(|e| e.to_string())?;
                match url::scoped_id(url) {
                    Some((IdKind::Network, net)) if url::org_id(url).is_none() => limiter.register_network(net, ORG),
                    Some((IdKind::Device, serial)) if url::org_id(url).is_none() => {
                        limiter.register_device(serial, ORG)
                    }
                    _ => Ok(()),
                }
                .map_err(|e| e.to_string())?;
            }
            let start = num(case, "start_rate")?;
            let global_before = limiter.global_bucket().rate();
            let bucket = match target {
                "org" => limiter.bucket_mut(ORG),
                _ => Some(limiter.global_bucket_mut()),
            };
            let set = bucket.ok_or("the org has no bucket")?.set_rate(start).map_err(|e| e.to_string())?;
            if set != start {
                return Err(format!("start_rate {start} cannot be set (floor gives {set})"));
            }
            match text(case, "op")? {
                "on_rate_limited" => {
                    let penalty = limiter.on_rate_limited(url);
                    let expected = match (target, url::is_unresolved_scoped_url(url) && !resolvable) {
                        ("org", _) => Penalty::Org,
                        (_, true) => Penalty::SkippedUnresolved,
                        _ => Penalty::Global,
                    };
                    report.eq(name, "penalty", expected, penalty);
                }
                "on_success" => limiter.on_success(url),
                other => return Err(format!("unknown op `{other}`")),
            }
            let got = match target {
                "org" => {
                    report.f64(name, "global rate (untouched)", global_before, limiter.global_bucket().rate());
                    limiter.bucket(ORG).ok_or("the org bucket vanished")?.rate()
                }
                _ => limiter.global_bucket().rate(),
            };
            report.f64(name, "rate", num(case, "expected_rate")?, got);
            Ok(())
        },
    );
}

#[test]
fn learn_from_response_vectors() {
    run_section(
        "learn_from_response",
        &[],
        &[
            "url",
            "body",
            "expected_network_to_org",
            "expected_serial_to_org",
            "changed_networks",
            "changed_devices",
            "preexisting_network_to_org",
            "preexisting_serial_to_org",
        ],
        |_, case, name, report| {
            let mut limiter = OrgRateLimiter::new(Config::default()).map_err(|e| e.to_string())?;
            for (net, org) in string_map(case.get("preexisting_network_to_org"))? {
                limiter.register_network(&net, &org).map_err(|e| e.to_string())?;
            }
            for (serial, org) in string_map(case.get("preexisting_serial_to_org"))? {
                limiter.register_device(&serial, &org).map_err(|e| e.to_string())?;
            }
            let body = case.get("body").ok_or("no `body`")?;
            let learned = limiter.learn_from_response(text(case, "url")?, body);
            let count = |key: &str| case.get(key).and_then(Value::as_u64).ok_or(format!("`{key}` is not a count"));
            let (networks, devices) = (count("changed_networks")?, count("changed_devices")?);
            report.eq(name, "changed_networks", networks, u64::from(learned.networks));
            report.eq(name, "changed_devices", devices, u64::from(learned.devices));
            report.eq(name, "dirty", networks + devices, limiter.dirty());
            let expected_networks = string_map(Some(case.get("expected_network_to_org").ok_or("no networks")?))?;
            let expected_devices = string_map(Some(case.get("expected_serial_to_org").ok_or("no devices")?))?;
            report.eq(name, "network_to_org", expected_networks, mappings(limiter.network_mappings()));
            report.eq(name, "serial_to_org", expected_devices, mappings(limiter.device_mappings()));
            Ok(())
        },
    );
}

#[test]
fn cache_freshness_vectors() {
    run_section("cache_freshness", &[], &["now", "saved_ts", "ttl", "expected_fresh"], |_, case, name, report| {
        let now = num(case, "now")?;
        let saved = opt_num(case, "saved_ts")?;
        let ttl = opt_num(case, "ttl")?;
        let expected = case.get("expected_fresh").and_then(Value::as_bool).ok_or("`expected_fresh` not a boolean")?;
        report.eq(name, "is_fresh", expected, is_fresh(now, saved, ttl));

        // The same decision through a whole cache file, as loading makes it.
        let mut file = Map::new();
        if let Some(saved) = saved {
            file.insert("saved_at".into(), json!(format_saved_at(saved).map_err(|e| e.to_string())?));
        }
        file.insert("networks".into(), json!([{ "id": "N_1", "organization": { "id": "O_1" } }]));
        let mut limiter =
            OrgRateLimiter::new(Config { cache_ttl: ttl, ..Config::default() }).map_err(|e| e.to_string())?;
        let outcome = limiter.load_cache(&Value::Object(file).to_string(), now).map_err(|e| e.to_string())?;
        let expected_outcome =
            if expected { CacheLoad::Loaded { networks: 1, devices: 0 } } else { CacheLoad::Expired };
        report.eq(name, "load_cache", expected_outcome, outcome);
        report.eq(name, "cache_fresh", expected, limiter.cache_fresh());
        report.eq(name, "mapping loaded", expected.then_some("O_1"), limiter.network_org("N_1"));
        Ok(())
    });
}

#[test]
fn saved_at_format_vectors() {
    run_section("saved_at_format", &[], &["value", "expected_epoch"], |_, case, name, report| {
        let value = case.get("value").ok_or("no `value`")?;
        let expected = opt_num(case, "expected_epoch")?;
        let got = parse_saved_at(value);
        match (expected, got) {
            (Some(e), Some(g)) => report.f64(name, "epoch", e, g),
            _ => report.eq(name, "epoch", expected, got),
        }
        // A timestamp that parses is written back exactly as it was read.
        if let Some(epoch) = expected {
            let written = format_saved_at(epoch).map_err(|e| e.to_string())?;
            report.eq(name, "format_saved_at", value.as_str(), Some(written.as_str()));
        }
        Ok(())
    });
}
