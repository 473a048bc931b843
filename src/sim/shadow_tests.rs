//! Edge rules in shadow (`"enforce": false`) and partial enforcement (a share of counting
//! keys): their refusals counted apart from the enforced ones, in the report, the comparison
//! and the replay's rows.

use super::{analyse, compare, edge_replay, parse_trace, simulate, Ceiling, Config, ConfigFile, EdgeDecision, EdgeRow};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// A rules file of one rule on `/api/`, 10 per 10 s per address, blocked 10 s, with `enforce`.
fn api_rule(enforce: &str) -> String {
    format!(
        r#"{{"rules": [{{"id": "api", "match": {{"path": {{"starts_with": "/api/"}}}}, "characteristics": ["ip.src"],
            "period": 10, "requests_per_period": 10, "mitigation_timeout": 10, "enforce": {enforce}}}]}}"#
    )
}

fn config(rules: &str) -> Config {
    Config::from_json(&format!(r#"{{"service": "shadow", "edge_rules": {rules}}}"#)).unwrap()
}

/// `clients` addresses, address `i` sending `5 + i` requests a second to `/api/x` for 30 s
/// (the odd ones to `/static` too, which no rule counts).
fn trace(clients: u32) -> String {
    let mut rows = Vec::new();
    for c in 0..clients {
        let rps = 5 + c;
        for k in 0..30 * rps {
            let t = f64::from(k) / f64::from(rps);
            rows.push((t, format!("{t},198.51.{}.{},/api/x", c / 200, c % 200 + 1)));
            if c % 2 == 1 && k % 7 == 0 {
                rows.push((t, format!("{t},198.51.{}.{},/static", c / 200, c % 200 + 1)));
            }
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = String::from("t,ip.src,endpoint\n");
    for (_, row) in rows {
        out += &row;
        out.push('\n');
    }
    out
}

#[test]
fn a_rule_in_shadow_admits_everything_and_would_refuse_what_its_enforced_twin_refuses() {
    let trace = trace(6);
    let traffic = || parse_trace("trace", &trace).unwrap();
    let enforced = simulate(&config(&api_rule("true")), traffic()).unwrap();
    let shadow = simulate(&config(&api_rule("false")), traffic()).unwrap();
    let (e, s) = (&enforced.policies[0], &shadow.policies[0]);
    assert!(e.rejects > 100, "the enforced rule refuses: {}", e.rejects);
    assert_eq!(e.shadow_refusals, 0, "an enforced rule refuses nothing in shadow");
    assert_eq!(shadow.admitted, enforced.admitted + e.rejects, "the shadow run admits every request");
    assert_eq!(s.rejects, 0);
    assert_eq!(s.shadow_refusals, e.rejects, "counted exactly as enforced: the same refusals");
    assert_eq!(s.shadow_clients, e.by_client, "the same clients");
    assert_eq!(s.checks, e.checks, "every request checked either way");

    // The report: the figures only for the rule in shadow.
    let enforced = analyse(&config(&api_rule("true")), traffic()).unwrap();
    let shadow = analyse(&config(&api_rule("false")), traffic()).unwrap();
    assert_eq!(enforced.policies[0].shadow, None);
    let row = shadow.policies[0].shadow.as_ref().expect("a row for the rule in shadow");
    assert_eq!((row.would_refuse, row.clients.len()), (enforced.policies[0].rejects, 6));
    let json = shadow.to_json();
    assert!(json.contains("\"enforce\": false,\n      \"would_refuse\": "), "{json}");
    assert!(!enforced.to_json().contains("would_refuse"));
    let md = shadow.to_markdown().unwrap();
    let line = format!("| api | shadow | 0 | {} | 6: 198.51.0.1, ", row.would_refuse);
    assert!(md.contains("\n## Shadow\n") && md.contains(&line), "{md}");
    assert!(!enforced.to_markdown().unwrap().contains("## Shadow"));
}

#[test]
fn a_share_of_keys_enforced_plus_the_rest_in_shadow_is_the_enforced_twin() {
    // Counters are per key and move alike whether a refusal is enforced or not: the enforced
    // share's refusals and the rest's shadow refusals add up to the twin's refusals.
    let trace = trace(40);
    let traffic = || parse_trace("trace", &trace).unwrap();
    let enforced = simulate(&config(&api_rule("true")), traffic()).unwrap();
    let half = simulate(&config(&api_rule("0.5")), traffic()).unwrap();
    let (e, h) = (&enforced.policies[0], &half.policies[0]);
    assert!(h.rejects > 0 && h.shadow_refusals > 0, "both kinds: {} and {}", h.rejects, h.shadow_refusals);
    assert_eq!(h.rejects + h.shadow_refusals, e.rejects);
    assert_eq!(half.admitted, enforced.admitted + h.shadow_refusals);
    // A client (one address, one key) is in the enforced share or out of it, never both.
    assert!(h.by_client.iter().all(|c| !h.shadow_clients.contains(c)));
    assert_eq!(h.by_client.len() + h.shadow_clients.len(), e.by_client.len());

    let report = analyse(&config(&api_rule("0.5")), traffic()).unwrap();
    let md = report.to_markdown().unwrap();
    let line = format!("| api | 50% of keys | {} | {} | {}: ", h.rejects, h.shadow_refusals, h.shadow_clients.len());
    assert!(md.contains(&line), "{md}");
    assert!(report.to_json().contains("\"enforce\": 0.5,"));
}

#[test]
fn a_shadow_refusal_goes_on_to_the_next_rule_and_is_named_in_its_row() {
    // "soft" (in shadow) admits 3 per 10 s, "hard" (enforced) 2: both count one address.
    let rules = r#"{"rules": [
      {"id": "soft", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10,
       "requests_per_period": 3, "mitigation_timeout": 10, "enforce": false},
      {"id": "hard", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10,
       "requests_per_period": 2, "mitigation_timeout": 10},
      {"id": "late", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10,
       "requests_per_period": 1, "enforce": false}]}"#;
    let mut trace = String::from("t,ip.src,endpoint\n");
    for i in 0..5 {
        trace += &format!("0.{i},198.51.100.7,/api/x\n");
    }
    let rows = edge_replay(rules, "trace", &trace).unwrap();
    let row =
        |decision, shadow: &[&str]| EdgeRow { decision, shadow: shadow.iter().map(|s| String::from(*s)).collect() };
    use EdgeDecision::{Admitted, Rule};
    assert_eq!(
        rows,
        [
            row(Admitted, &[]),
            row(Admitted, &["late"]), // "late" admits one, and refuses in shadow from the second
            row(Rule, &[]),           // "hard" refuses its third: "late" after it never sees it
            row(Rule, &["soft"]),     // "soft" refuses its fourth in shadow, "hard" is blocked
            row(Rule, &["soft"]),
        ]
    );
    // The report: "hard" started one block (on the third request), however the refusals came
    // (the fourth's "soft" began a block of its own the same instant "hard"'s went on).
    let cfg = config(rules);
    let out = simulate(&cfg, parse_trace("trace", &trace).unwrap()).unwrap();
    let stats: Vec<(u64, u64, u64)> = out.policies.iter().map(|p| (p.rejects, p.shadow_refusals, p.blocks)).collect();
    assert_eq!(stats, [(0, 2, 0), (3, 0, 1), (0, 1, 0)]);
}

#[test]
fn a_comparison_of_a_rule_in_shadow_with_it_enforced_shows_refusals_against_would_refuse() {
    let trace = trace(4);
    let before = format!(r#"{{"service": "shadow", "edge_rules": {}}}"#, api_rule("false"));
    let after = format!(r#"{{"service": "shadow", "edge_rules": {}}}"#, api_rule("true"));
    let file = |label, text| ConfigFile { label, text, dir: None };
    let open = || Ok::<_, std::io::Error>(trace.as_bytes());
    let run = |before, after| {
        let (before, after) = (file("before.json", before), file("after.json", after));
        compare(before, after, Some(("trace.csv", open)), super::DEFAULT_REORDER_WINDOW_S, Ceiling::default(), None)
            .unwrap()
    };
    let cmp = run(&before, &after);
    let refused = cmp.after.report.policies[0].rejects;
    assert!(refused > 0);
    assert_eq!(cmp.before.report.policies[0].shadow.as_ref().map(|s| s.would_refuse), Some(refused));
    let md = cmp.to_markdown();
    let line = format!("| api | shadow | all | 0 | {refused} | {refused} | 0 |");
    assert!(md.contains(&line), "{md}");
    // The clients' 429s: none before, the enforced refusals after.
    let rejected: u64 = cmp.after.report.clients.iter().map(|c| c.rejected).sum();
    assert_eq!(rejected, refused);
    assert!(cmp.before.report.clients.iter().all(|c| c.rejected == 0));
    // Without a rule in shadow on either side, no such table.
    let same = run(&after, &after);
    assert!(!same.to_markdown().contains("Would refuse"));
}

#[test]
fn a_tenant_limit_in_shadow_admits_what_its_enforced_twin_refuses_naming_the_tenant() {
    // acme may send 2 back to back, then one every 10 s; beta's limit is enforced.
    let rules = |enforce: &str| {
        format!(
            r#"{{"rules": [], "tenants": {{"match": {{"path": {{"starts_with": "/hooks/"}}}}, "tenant_header": "x-tenant",
                "limits": {{"acme": {{"rate": 0.1, "burst": 2, "enforce": {enforce}}}, "beta": {{"rate": 0.1, "burst": 2}}}}, "default": {{"rate": 0.1, "burst": 1}}}}}}"#
        )
    };
    let mut trace = String::from("t,ip.src,method,endpoint,header:x-tenant\n");
    for i in 0..4 {
        trace += &format!("{i},198.51.100.7,POST,/hooks/in,acme\n{i}.5,198.51.100.8,POST,/hooks/in,beta\n");
    }
    let shadow = edge_replay(&rules("false"), "trace", &trace).unwrap();
    let enforced = edge_replay(&rules("true"), "trace", &trace).unwrap();
    let acme = |rows: &[EdgeRow]| rows.iter().step_by(2).cloned().collect::<Vec<_>>();
    let refused = acme(&enforced).iter().filter(|r| r.decision != EdgeDecision::Admitted).count();
    assert_eq!(refused, 2, "the twin refuses acme's third and fourth");
    for (s, e) in acme(&shadow).iter().zip(acme(&enforced)) {
        assert_eq!(s.decision, EdgeDecision::Admitted);
        let named: &[&str] = if e.decision == EdgeDecision::Admitted { &[] } else { &["tenant:acme"] };
        assert_eq!(s.shadow, named);
    }
    let beta = |rows: &[EdgeRow]| rows.iter().skip(1).step_by(2).map(|r| r.decision).collect::<Vec<_>>();
    assert_eq!(beta(&shadow), beta(&enforced), "beta's limit is enforced either way");

    // The report's tenants table says what the shadow would refuse.
    let cfg = config(&rules("false"));
    let out = simulate(&cfg, parse_trace("trace", &trace).unwrap()).unwrap();
    let (_, acme_stats) = out.tenants.iter().find(|(t, _)| t == "acme").unwrap();
    assert_eq!((acme_stats.admitted, acme_stats.would_refuse), (4, 2));
    let report = analyse(&cfg, parse_trace("trace", &trace).unwrap()).unwrap();
    let md = report.to_markdown().unwrap();
    assert!(md.contains("in shadow: 2 would be refused"), "{md}");
    assert!(report.to_json().contains("\"would_refuse\": 2"), "{}", report.to_json());
}
