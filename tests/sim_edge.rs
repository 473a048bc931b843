//! The simulator's own algorithms (`gcra`, `count_then_block`, `smartflow`, policies from
//! the edge's rules file): the simulator must decide exactly as the core's limiters do on
//! the same arrivals, since that is the code the edge and the browser client run.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::limit::{Blocking, FixedWindow, Gcra, Limiter, SlidingLog};
use sluicegate::sim::{self, Config, Event, Observer, Report, SimError, Timeline};
use sluicegate::smartflow::TokenBucket;
use sluicegate::{Instant, Span};
use std::path::Path;

/// Every decided attempt: (time sent, client, admitted).
#[derive(Default)]
struct Log(Vec<(f64, String, bool)>);

impl Observer for Log {
    fn attempt(&mut self, e: &Event<'_>) {
        self.0.push((e.t, e.name.to_string(), e.admitted));
    }
    fn restart(&mut self) {
        self.0.clear();
    }
}

fn config(policies: &str) -> Config {
    Config::from_json(&format!(r#"{{"duration_s": 60, "policies": [{policies}]}}"#)).expect("valid config")
}

/// A trace of one client `c` on `/api/x`, times in milliseconds.
fn trace(arrivals: &[(u64, u32)]) -> String {
    let mut text = String::from("t,client,endpoint,cost\n");
    for &(ms, cost) in arrivals {
        text.push_str(&format!("{},c,/api/x,{cost}\n", ms as f64 / 1000.0));
    }
    text
}

fn replay(cfg: &Config, text: &str) -> Result<(sim::Outcome, Log), SimError> {
    let mut log = Log::default();
    let out = sim::simulate_trace(cfg, "trace", || Ok(text.as_bytes()), Some(&mut log))?;
    Ok((out, log))
}

fn now(ms: u64) -> Instant {
    Instant::from_nanos(((ms as f64 / 1000.0) * 1e9).round() as u64)
}

/// Arrivals in milliseconds (a quarter simultaneous) with costs 1-3, in the order the
/// simulator replays them: by time, then (one client, one endpoint) by cost.
fn arrivals() -> impl Strategy<Value = Vec<(u64, u32)>> {
    prop::collection::vec((prop_oneof![1 => Just(0u64), 3 => 0u64..1500], 1u32..=3), 1..120).prop_map(|gaps| {
        let mut t = 0;
        let mut out: Vec<(u64, u32)> = gaps
            .into_iter()
            .map(|(gap, cost)| {
                t += gap;
                (t, cost)
            })
            .collect();
        out.sort_unstable();
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_gcra_policy_decides_exactly_as_the_cores_gcra(
        rate_tenths in 5u32..=200, burst in 3u32..=12, arrivals in arrivals()
    ) {
        let rate = f64::from(rate_tenths) / 10.0;
        let cfg = config(&format!(r#"{{"name": "g", "algorithm": "gcra", "key": "client", "rate": {rate}, "burst": {burst}}}"#));
        let (_, log) = replay(&cfg, &trace(&arrivals)).unwrap();
        let mut core = Gcra::with_interval(burst, Span::from_nanos(((1.0 / rate) * 1e9).round() as u64));
        let want: Vec<bool> = arrivals.iter().map(|&(ms, cost)| core.check(now(ms), cost).unwrap().is_allowed()).collect();
        let got: Vec<bool> = log.0.iter().map(|e| e.2).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn a_count_then_block_policy_decides_exactly_as_the_cores_blocking_rule(
        limit in 1u32..=8, period in 1u64..=5, timeout in 0u64..=8, fixed in any::<bool>(), arrivals in arrivals()
    ) {
        let counting = if fixed { "fixed_window" } else { "sliding_log" };
        let arrivals: Vec<(u64, u32)> = arrivals.into_iter().map(|(t, cost)| (t, cost.min(limit))).collect();
        let cfg = config(&format!(
            r#"{{"name": "r", "algorithm": "count_then_block", "requests_per_period": {limit}, "period": {period},
                "mitigation_timeout": {timeout}, "counting": "{counting}"}}"#
        ));
        let (out, log) = replay(&cfg, &trace(&arrivals)).unwrap();
        let p = Span::from_secs(period);
        let inner = if fixed {
            sluicegate::rules::AnyLimiter::FixedWindow(FixedWindow::new(limit.into(), p).unwrap())
        } else {
            sluicegate::rules::AnyLimiter::SlidingLog(SlidingLog::new(limit.into(), p).unwrap())
        };
        let mut core = Blocking::new(inner, Span::from_secs(timeout));
        let mut blocks = 0;
        let want: Vec<bool> = arrivals
            .iter()
            .map(|&(ms, cost)| {
                let blocked = core.blocked_until(now(ms)).is_some();
                let allowed = core.check(now(ms), cost).unwrap_or(sluicegate::Decision::Deny { retry_after: Span::ZERO });
                blocks += usize::from(!blocked && core.blocked_until(now(ms)).is_some());
                allowed.is_allowed()
            })
            .collect();
        let got: Vec<bool> = log.0.iter().map(|e| e.2).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(out.policies[0].blocks, blocks as u64);
        // the core's promise, read off the report: an exact count blocked for at least the
        // period never lets more than the limit through in any window of the period
        if !fixed && timeout >= period && arrivals.iter().all(|a| a.1 == 1) {
            prop_assert!(out.policies[0].observed_max <= u64::from(limit));
        }
    }

    #[test]
    fn a_smartflow_pacer_delays_each_request_by_the_cores_reservation_and_refuses_none(
        rate in 1u32..=20, burst in 1u32..=10, arrivals in arrivals()
    ) {
        let cfg = config(&format!(r#"{{"name": "p", "algorithm": "smartflow", "key": "client", "rate": {rate}, "burst": {burst}}}"#));
        let (out, log) = replay(&cfg, &trace(&arrivals)).unwrap();
        let mut bucket = TokenBucket::new(f64::from(rate), f64::from(burst)).unwrap();
        let mut want: Vec<f64> = arrivals
            .iter()
            .map(|&(ms, cost)| {
                let t = ms as f64 / 1000.0;
                t + bucket.acquire_cost(t, f64::from(cost)).unwrap()
            })
            .collect();
        want.sort_by(f64::total_cmp);
        prop_assert!(log.0.iter().all(|e| e.2), "a pacer never refuses");
        let got: Vec<f64> = log.0.iter().map(|e| e.0).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(out.clients[0].1.paced, out.policies[0].delayed);
    }
}

#[test]
fn the_edge_rules_file_is_simulated_as_the_worker_enforces_it() {
    let cfg = Config::from_json_in(
        r#"{"duration_s": 60, "edge_rules": "../worker/rules.json", "clients": [
            {"name": "app", "kind": "legit", "rps": 3, "endpoint": "/api/orders", "retry": "honor"},
            {"name": "site", "kind": "legit", "rps": 5, "endpoint": "/index.html"}]}"#,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    )
    .unwrap();
    let p = &cfg.policies[0];
    assert_eq!(
        (p.name.as_str(), p.algorithm.name(), p.key.name(), p.window_s),
        ("api", "count_then_block", "client", 10.0)
    );
    let report = sim::analyse(&cfg, sim::generate(&cfg).unwrap()).unwrap();
    let row = |name: &str| report.clients.iter().find(|c| c.client == name).unwrap();
    assert_eq!(row("site").rejected, 0, "the rule covers /api/ only");
    assert!(row("app").rejected > 0);
    let api = &report.policies[0];
    assert_eq!((api.worst_case_per_window, api.observed_max_per_window), (20.0, 20));
    assert!(api.blocks.unwrap() > 0 && api.blocked_clients[0].0 == "app");
    let rl12 = report.findings.iter().find(|f| f.code == "RL12").expect("RL12");
    assert_eq!(rl12.severity, sim::Severity::High);
    assert!(rl12.message.contains("app"), "{}", rl12.message);
    let json = report.to_json();
    assert!(json.contains("\"mitigation_timeout_s\": 10.0") && json.contains("\"blocks\": "), "{json}");
    assert!(report.to_markdown().unwrap().contains("## Blocks"));
}

#[test]
fn inline_edge_rules_with_an_exact_path_and_methods() {
    let cfg = Config::from_json(
        r#"{"duration_s": 10, "edge_rules": {"rules": [
            {"id": "login", "match": {"path": {"equals": "/login"}}, "characteristics": ["ip.src"],
             "period": 10, "requests_per_period": 2},
            {"id": "writes", "match": {"path": {"starts_with": "/"}, "methods": ["POST"]}, "characteristics": ["cf.colo.id"],
             "period": 10, "requests_per_period": 1}]},
          "clients": [{"name": "a", "rps": 1, "endpoint": "/login"}, {"name": "b", "rps": 1, "endpoint": "/login/help"}]}"#,
    )
    .unwrap();
    let report = sim::analyse(&cfg, sim::generate(&cfg).unwrap()).unwrap();
    let row = |name: &str| report.clients.iter().find(|c| c.client == name).unwrap();
    assert_eq!((row("a").allowed, row("b").allowed), (2, 10), "equals matches one path; simulated requests are GETs");
    assert_eq!(report.policies[1].checks, 0);
}

#[test]
fn edge_rules_match_encoded_and_re_cased_endpoints_as_the_worker_does() {
    let cfg = Config::from_json(
        r#"{"duration_s": 10, "edge_rules": {"rules": [
            {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"],
             "period": 10, "requests_per_period": 2}]},
          "clients": [{"name": "a", "rps": 1, "endpoint": "/API/x"}, {"name": "b", "rps": 1, "endpoint": "/%61pi/x"},
                      {"name": "c", "rps": 1, "endpoint": "/apix/x"}]}"#,
    )
    .unwrap();
    let report = sim::analyse(&cfg, sim::generate(&cfg).unwrap()).unwrap();
    let row = |name: &str| report.clients.iter().find(|c| c.client == name).unwrap();
    assert_eq!((row("a").allowed, row("b").allowed, row("c").allowed), (2, 2, 10));
}

#[test]
fn a_rules_file_with_a_log_section_is_simulated_as_one_without() {
    let rules = r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"],
        "period": 10, "requests_per_period": 2}]"#;
    let config = |log: &str| {
        Config::from_json(&format!(
            r#"{{"duration_s": 10, "edge_rules": {rules}{log}}}, "clients": [{{"name": "a", "rps": 1, "endpoint": "/api/x"}}]}}"#
        ))
    };
    let plain = config("").unwrap();
    let logged = config(r#", "log": {"decisions": "refusals", "sample": 0.1}"#).unwrap();
    let allowed = |cfg: &Config| sim::analyse(cfg, sim::generate(cfg).unwrap()).unwrap().clients[0].allowed;
    assert_eq!(logged.policies.len(), 1);
    assert_eq!((allowed(&plain), allowed(&logged)), (2, 2), "logging changes no decision");
    // The log section is checked there as the edge checks it.
    let bad = config(r#", "log": {"decisions": "denials"}"#).unwrap_err().to_string();
    assert!(bad.contains("edge_rules: rules file: field \"log.decisions\""), "{bad}");
}

fn input_error(cfg: &str) -> String {
    match sim::run(cfg, None) {
        Err(e @ (SimError::Input(_) | SimError::Field(_))) => e.to_string(),
        other => panic!("expected an input error for {cfg}, got {other:?}"),
    }
}

#[test]
fn bad_edge_algorithm_fields_name_the_policy_and_the_field() {
    let cfg = |policy: &str| format!(r#"{{"policies": [{policy}], "clients": [{{"name": "c", "rps": 1}}]}}"#);
    let cases = [
        (r#"{"name": "g", "algorithm": "gcra", "rate": 0}"#, "g.rate must be > 0"),
        (r#"{"name": "g", "algorithm": "gcra", "rate": 2, "burst": 2.5}"#, "g.burst must be a whole number"),
        (
            r#"{"name": "r", "algorithm": "count_then_block", "period": 10}"#,
            "policies[0].requests_per_period is required (r.requests_per_period: a whole number > 0)",
        ),
        (
            r#"{"name": "r", "algorithm": "count_then_block", "requests_per_period": 5, "period": -1}"#,
            "r.period must be > 0",
        ),
        (
            r#"{"name": "r", "algorithm": "count_then_block", "requests_per_period": 5, "period": 1, "mitigation_timeout": -2}"#,
            "r.mitigation_timeout must be >= 0",
        ),
        (
            r#"{"name": "r", "algorithm": "count_then_block", "requests_per_period": 5, "period": 1, "counting": "leaky"}"#,
            "policy 'r': counting must be",
        ),
        (r#"{"name": "p", "algorithm": "smartflow", "rate": 0.1}"#, "p.rate must be >= 0.5"),
        (r#"{"name": "x", "algorithm": "leaky"}"#, "policy 'x': algorithm must be one of"),
    ];
    for (policy, want) in cases {
        let msg = input_error(&cfg(policy));
        assert!(msg.contains(want), "{policy}: {msg}");
    }
    let msg = input_error(r#"{"edge_rules": {"rules": [{"id": "api", "period": 7}]}, "clients": [{"rps": 1}]}"#);
    assert!(msg.starts_with("edge_rules: rule") && msg.contains("api"), "{msg}");
    let msg = input_error(r#"{"edge_rules": "rules.json", "clients": [{"rps": 1}]}"#);
    assert!(msg.contains("'rules.json' is a path"), "{msg}");
    let missing = Config::from_json_in(r#"{"edge_rules": "nope.json"}"#, Path::new("/tmp")).unwrap_err();
    assert!(missing.to_string().contains("/tmp/nope.json: cannot read"), "{missing}");
}

#[test]
fn the_core_algorithms_refuse_what_they_cannot_count_naming_policy_and_client() {
    let cfg = config(r#"{"name": "g", "algorithm": "gcra", "rate": 1, "burst": 2}"#);
    let err = replay(&cfg, "t,client,cost\n0,c,1.5\n").err().unwrap();
    assert!(
        matches!(&err, SimError::Input(m) if m.contains("policy 'g' (gcra) counts whole units") && m.contains("'c'")),
        "{err}"
    );
    let err = replay(&cfg, "t,client\n-1,c\n").err().unwrap();
    assert!(err.to_string().contains("counts time from 0"), "{err}");
    let err = replay(&cfg, "t,client,cost\n0,c,3\n").err().unwrap();
    assert!(err.to_string().contains("refuses forever"), "{err}");
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn a_trace_out_of_time_order_gives_the_same_report_as_the_sorted_trace() {
    let cfg = r#"{"duration_s": 20, "capacity_rps": 3, "policies": [
        {"algorithm": "fixed_window", "limit": 5, "window_s": 5},
        {"algorithm": "gcra", "key": "global", "rate": 2, "burst": 4}],
      "clients": [{"name": "a", "kind": "legit", "retry": "honor", "rps": 1}, {"name": "b", "retry": "immediate", "rps": 1}]}"#;
    let mut rows: Vec<String> =
        (0..60).map(|i| format!("{},{},/x", (i * 7919) % 200 / 10, ["a", "b", "c"][i % 3])).collect();
    let shuffled = format!("t,client,endpoint\n{}\n", rows.join("\n"));
    rows.sort_by(|x, y| {
        let key = |r: &str| r.split(',').next().unwrap().parse::<f64>().unwrap();
        key(x).total_cmp(&key(y))
    });
    // in time order, but ties still in any client order: streamed
    let in_order = format!("t,client,endpoint\n{}\n", rows.join("\n"));
    let (a, tl_a): (Report, Timeline) = sim::run_with_timeline(cfg, Some(("shuffled", &shuffled))).unwrap();
    let (b, tl_b) = sim::run_with_timeline(cfg, Some(("in order", &in_order))).unwrap();
    assert_eq!(a, b);
    assert_eq!(tl_a, tl_b, "the timeline restarts when the trace has to be sorted");
    assert_eq!(a.requests, 60);
}

#[test]
fn generated_traffic_replayed_on_the_fly_equals_generated_traffic_stored_and_sorted() {
    let configs = [
        // Poisson clients share one generator, in config order, around other patterns
        r#"{"duration_s": 40, "seed": 9, "policies": [{"algorithm": "fixed_window", "limit": 20, "window_s": 10},
            {"algorithm": "sliding_log", "key": "global", "limit": 50, "window_s": 5}],
          "clients": [{"name": "p1", "pattern": "poisson", "rps": 3, "retry": "honor"},
                      {"name": "s", "rps": 2.5, "start": 3.3, "retry": "immediate"},
                      {"name": "p2", "pattern": "poisson", "rps": 5, "start": 10, "duration": 7, "retry": "backoff"},
                      {"name": "p1", "pattern": "poisson", "rps": 1, "endpoint": "/x"}]}"#,
        // bursts that overlap (merged as they go), an empty burst, equal names and times
        r#"{"duration_s": 20, "policies": [{"algorithm": "token_bucket", "rate": 2, "burst": 5},
            {"algorithm": "gcra", "key": "global", "rate": 10, "burst": 10}],
          "clients": [{"name": "b", "pattern": "burst", "burst": 50, "every_s": 0.02, "duration": 0.1},
                      {"name": "b", "pattern": "burst", "burst": 3, "every_s": 2, "retry": "honor"},
                      {"name": "z", "pattern": "burst", "burst": 0.5, "every_s": 1},
                      {"name": "a", "rps": 1, "cost": 2, "retry": "backoff"}]}"#,
        // overlapping bursts whose requests tie across bursts (every_s a multiple of 1 ms, or
        // not quite), starting before 0, at an odd time, or past the end of the run
        r#"{"duration_s": 6, "policies": [{"algorithm": "sliding_log", "limit": 40, "window_s": 1},
            {"algorithm": "token_bucket", "key": "global", "rate": 30, "burst": 20}],
          "clients": [{"name": "tie", "pattern": "burst", "burst": 40, "every_s": 0.003, "duration": 0.05},
                      {"name": "near", "pattern": "burst", "burst": 25, "every_s": 0.0030000001, "start": 1.1,
                       "duration": 0.04, "retry": "immediate"},
                      {"name": "early", "pattern": "burst", "burst": 9, "every_s": 0.0007, "start": -0.01,
                       "duration": 0.02, "retry": "honor"},
                      {"name": "odd", "pattern": "burst", "burst": 300, "every_s": 0.1, "start": 2.7,
                       "retry": "backoff"}]}"#,
    ];
    for text in configs {
        let cfg = Config::from_json(text).unwrap();
        let (mut on_the_fly, mut stored) = (Log::default(), Log::default());
        let a = sim::report(&cfg, sim::simulate_generated(&cfg, Some(&mut on_the_fly)).unwrap()).unwrap();
        let b =
            sim::report(&cfg, sim::simulate_observed(&cfg, sim::generate(&cfg).unwrap(), Some(&mut stored)).unwrap())
                .unwrap();
        assert_eq!(a, b);
        assert_eq!(on_the_fly.0, stored.0, "the same attempts in the same order");
        assert!(a.requests > 0);
    }
}
