//! The simulator runs the edge's tenant stage after its rules, as the edge orders them: a
//! tenant over its rate is refused 429 once its burst is spent, an unknown API key 401, a
//! body over the tenant's cap 413, and a request the rules refuse spends none of its
//! tenant's quota. Expected figures come from the limits (burst, rate), or from the core's
//! own tenant buckets on the same arrivals.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sha2::{Digest, Sha256};
use sluicegate::sim::{self, EdgeDecision, TenantRefused};
use sluicegate::tenants::TenantLimit;
use sluicegate::Instant;

const RATE_LIMITED: EdgeDecision = EdgeDecision::Tenant(TenantRefused { status: 429, name: "tenant_rate_limited" });
const UNKNOWN: EdgeDecision = EdgeDecision::Tenant(TenantRefused { status: 401, name: "unknown" });
const TOO_LARGE: EdgeDecision = EdgeDecision::Tenant(TenantRefused { status: 413, name: "too_large" });

fn sha256_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A rules file of `rules` and a tenants section on `/hooks/` with `section` (its other keys).
fn rules(rules: &str, section: &str) -> String {
    format!(r#"{{"rules": [{rules}], "tenants": {{"match": {{"path": {{"starts_with": "/hooks/"}}}}, {section}}}}}"#)
}

/// A trace of `(t, ip.src, colo, tenant header value)` rows POSTing to `/hooks/in`, with a
/// `header:<name>` column for the tenant.
fn trace(header: &str, rows: &[(f64, &str, &str, &str)]) -> String {
    let mut text = format!("t,ip.src,cf.colo.id,method,endpoint,header:{header}\n");
    for (t, ip, colo, value) in rows {
        text.push_str(&format!("{t},{ip},{colo},POST,/hooks/in,{value}\n"));
    }
    text
}

fn decide(rules: &str, trace: &str) -> Vec<EdgeDecision> {
    sim::edge_decisions(rules, "trace", trace).expect("a trace the simulator reads")
}

#[test]
fn a_named_tenant_over_its_rate_is_refused_429_once_its_burst_is_spent_while_another_is_not() {
    let (rate, burst, default_burst) = (1.0, 3usize, 20usize);
    let set = rules(
        "",
        &format!(
            r#""tenant_header": "x-tenant", "limits": {{"acme": {{"rate": {rate}, "burst": {burst}, "max_queue": 1}}}},
            "default": {{"rate": 1, "burst": {default_burst}}}"#
        ),
    );
    // 8 requests of each tenant 10 ms apart (well within 1 / rate: no token comes back), then
    // one of acme a whole interval (1 / rate) after its burst: one token is back.
    let n = 8;
    let mut rows = Vec::new();
    for i in 0..n {
        rows.push((1.0 + 0.01 * i as f64, "198.51.100.1", "AMS", "acme"));
        rows.push((1.0 + 0.01 * i as f64, "198.51.100.2", "AMS", "beta"));
    }
    rows.push((1.0 + 0.01 * (burst - 1) as f64 + 1.0 / rate + 0.001, "198.51.100.1", "AMS", "acme"));
    let decided = decide(&set, &trace("X-Tenant", &rows));
    let acme: Vec<EdgeDecision> = decided.iter().step_by(2).copied().collect();
    let beta: Vec<EdgeDecision> = decided.iter().skip(1).step_by(2).take(n).copied().collect();
    let mut expected = vec![EdgeDecision::Admitted; burst];
    expected.extend(vec![RATE_LIMITED; n - burst]);
    expected.push(EdgeDecision::Admitted);
    assert_eq!(acme, expected, "acme: its burst, then 429 until a token is back");
    assert!(n <= default_burst);
    assert_eq!(beta, vec![EdgeDecision::Admitted; n], "beta, under the default's burst, is never refused");
    // Its share in flight (max_queue 1) is given back as each request is answered at once:
    // never `tenant_overload`.
    assert_eq!(RATE_LIMITED.code(), 4);

    // The report: the stage's policy row, and a row per tenant.
    let config = format!(r#"{{"service": "ingest", "edge_rules": {set}}}"#);
    let report = sim::run(&config, Some(("trace", &trace("X-Tenant", &rows)))).unwrap();
    let stage = report.policies.iter().find(|p| p.name == "tenants").expect("the tenant stage's row");
    assert_eq!((stage.algorithm, stage.key, stage.rejects), ("tenant_quota", "tenant+colo", (n - burst) as u64));
    assert_eq!(stage.checks, 2 * n as u64 + 1);
    let tenants = report.tenants.as_ref().expect("a tenants section");
    let row = |name: &str| tenants.iter().find(|t| t.tenant.as_deref() == Some(name)).unwrap();
    assert_eq!((row("acme").admitted, row("acme").rate_limited), (burst as u64 + 1, (n - burst) as u64));
    assert_eq!((row("beta").admitted, row("beta").rate_limited, row("beta").source), (n as u64, 0, Some("default")));
    let acme_client = report.clients.iter().find(|c| c.client.contains("x-tenant=acme")).unwrap();
    assert_eq!(acme_client.top_policy, "tenants");
    let markdown = report.to_markdown().unwrap();
    assert!(markdown.contains("\n## Tenants\n"), "{markdown}");
    assert!(
        markdown.contains(&format!("| acme | 1 req/s, burst {burst}, 1 in flight (config) | {} |", n + 1)),
        "{markdown}"
    );
    let sample = report.sample_429.as_ref().expect("a tenant's 429 is the sample");
    assert_eq!((sample.policy.as_str(), &sample.quota), ("tenants", &sim::py::PyValue::Int(burst as i128)));
    assert!(report.to_json().contains("\"tenants\": ["));
}

#[test]
fn an_api_key_tenant_is_admitted_under_its_limit_and_an_unknown_or_missing_key_is_refused_401() {
    let burst = 2;
    let set = rules(
        "",
        &format!(
            r#""key_header": "x-api-key", "keys": {{"{}": "acme"}}, "limits": {{"acme": {{"rate": 0.01, "burst": {burst}}}}}"#,
            sha256_hex("k-acme")
        ),
    );
    let rows = [
        (0.0, "198.51.100.1", "AMS", "k-acme"),
        (0.1, "198.51.100.1", "AMS", "k-other"),
        (0.2, "198.51.100.1", "AMS", ""),
        (0.3, "198.51.100.2", "AMS", "k-acme"),
        (0.4, "198.51.100.3", "AMS", "k-acme"),
    ];
    let decided = decide(&set, &trace("x-api-key", &rows));
    // The unknown and missing keys charged nothing: acme's burst still admits the second.
    let mut expected = vec![EdgeDecision::Admitted, UNKNOWN, UNKNOWN];
    expected.extend(vec![EdgeDecision::Admitted; burst - 1]);
    expected.push(RATE_LIMITED);
    assert_eq!(decided, expected);
    assert_eq!(UNKNOWN.code(), 2);

    let config = format!(r#"{{"edge_rules": {set}}}"#);
    let report = sim::run(&config, Some(("trace", &trace("x-api-key", &rows)))).unwrap();
    let tenants = report.tenants.unwrap();
    let unknown = tenants.iter().find(|t| t.tenant.is_none()).expect("a row of the requests naming no tenant");
    assert_eq!((unknown.checks, unknown.unauthorized), (2, 2));
    // A 401 is not a 429: the sample is acme's refusal.
    assert_eq!(report.sample_429.unwrap().t, 0.4);
}

#[test]
fn a_request_the_rules_refuse_spends_none_of_its_tenant_s_quota() {
    let burst = 2;
    let set = rules(
        r#"{"id": "per-ip", "match": {"path": {"starts_with": "/hooks/"}}, "characteristics": ["ip.src"],
            "period": 60, "requests_per_period": 1}"#,
        &format!(r#""tenant_header": "x-tenant", "default": {{"rate": 0.01, "burst": {burst}}}"#),
    );
    // 198.51.100.1 is over the rule from its second request: those are the rule's refusals,
    // and acme's burst is still there for other addresses.
    let mut rows = vec![(0.0, "198.51.100.1", "AMS", "acme")];
    rows.extend((1..=3).map(|i| (0.01 * i as f64, "198.51.100.1", "AMS", "acme")));
    rows.extend((0..burst).map(|i| (0.1 + 0.01 * i as f64, ["198.51.100.2", "198.51.100.3"][i], "AMS", "acme")));
    let decided = decide(&set, &trace("x-tenant", &rows));
    let mut expected = vec![EdgeDecision::Admitted, EdgeDecision::Rule, EdgeDecision::Rule, EdgeDecision::Rule];
    expected.extend(vec![EdgeDecision::Admitted; burst - 1]);
    expected.push(RATE_LIMITED);
    assert_eq!(decided, expected);
    assert_eq!(EdgeDecision::Rule.code(), 0);
}

#[test]
fn a_body_over_the_tenant_s_cap_is_refused_413_before_its_buckets_are_charged() {
    let (own_cap, file_cap) = (1000, 5000);
    let set = rules(
        "",
        &format!(
            r#""tenant_header": "x-tenant", "limits": {{"acme": {{"rate": 0.01, "burst": 1, "max_body_bytes": {own_cap}}}}},
            "default": {{"rate": 0.01, "burst": 5}}, "max_body_bytes": {file_cap}"#
        ),
    );
    let row = |t: f64, tenant: &str, length: u64| format!("{t},198.51.100.1,AMS,POST,/hooks/in,{tenant},{length}\n");
    let text = [
        "t,ip.src,cf.colo.id,method,endpoint,header:x-tenant,header:Content-Length\n".to_owned(),
        row(0.0, "acme", own_cap + 1),
        row(0.1, "acme", own_cap),
        row(0.2, "acme", 10),
        row(0.3, "beta", file_cap),
        row(0.4, "beta", file_cap + 1),
    ]
    .concat();
    let decided = decide(&set, &text);
    assert_eq!(
        decided,
        [
            TOO_LARGE,              // over acme's own cap
            EdgeDecision::Admitted, // the 413 charged nothing: its one token
            RATE_LIMITED,           // burst 1 spent
            EdgeDecision::Admitted, // the default has no cap of its own: the file's binds
            TOO_LARGE,
        ]
    );
    assert_eq!(TOO_LARGE.code(), 3);
}

#[test]
fn colo_scope_counts_a_tenant_per_colo_and_fleet_scope_once() {
    let burst = 2;
    let section = |scope: &str| {
        rules(
            "",
            &format!(
                r#""tenant_header": "x-tenant", "default": {{"rate": 0.01, "burst": {burst}}}, "scope": "{scope}""#
            ),
        )
    };
    let mut rows = Vec::new();
    for i in 0..=burst {
        rows.push((0.01 * i as f64, "198.51.100.1", "AMS", "acme"));
        rows.push((0.01 * i as f64, "198.51.100.1", "LHR", "acme"));
    }
    let text = trace("x-tenant", &rows);
    // Per colo: each colo's burst, then 429 in each.
    let mut each = vec![EdgeDecision::Admitted; 2 * burst];
    each.extend([RATE_LIMITED, RATE_LIMITED]);
    assert_eq!(decide(&section("colo"), &text), each);
    // For the fleet: one burst for both colos.
    let mut once = vec![EdgeDecision::Admitted; burst];
    once.extend(vec![RATE_LIMITED; burst + 2]);
    assert_eq!(decide(&section("fleet"), &text), once);
}

#[test]
fn a_configuration_s_client_names_its_tenant_and_a_file_without_tenants_has_no_tenants_section() {
    // A configuration's client is what every header holds: here its tenant's name.
    let config = r#"{"duration_s": 10, "clients": [{"name": "acme", "rps": 4, "kind": "legit"}],
        "edge_rules": {"rules": [], "tenants": {"match": {}, "tenant_header": "x-tenant",
          "default": {"rate": 1, "burst": 2}}}}"#;
    let report = sim::run(config, None).unwrap();
    let tenants = report.tenants.as_ref().unwrap();
    assert_eq!(tenants.len(), 1);
    assert_eq!(tenants[0].tenant.as_deref(), Some("acme"));
    // 4 a second for 10 s, at i / 4 s, through the default's own buckets.
    let mut buckets = TenantLimit::from_json_text(r#"{"rate": 1, "burst": 2}"#, None).unwrap().buckets();
    let admitted = (0..40u64).filter(|&i| buckets.charge(now(250 * i), 0).is_allowed()).count() as u64;
    assert_eq!((tenants[0].checks, tenants[0].admitted, tenants[0].rate_limited), (40, admitted, 40 - admitted));
    assert_eq!(report.clients[0].allowed, admitted);

    let without = r#"{"duration_s": 10, "clients": [{"name": "acme", "rps": 4}],
        "edge_rules": {"rules": [{"id": "api", "match": {}, "characteristics": ["ip.src"], "period": 1,
          "requests_per_period": 2}]}}"#;
    let report = sim::run(without, None).unwrap();
    assert!(report.tenants.is_none());
    assert!(!report.to_markdown().unwrap().contains("## Tenants"));
    assert!(!report.to_json().contains("\"tenants\""));
}

fn now(ms: u64) -> Instant {
    Instant::from_nanos(((ms as f64 / 1000.0) * 1e9).round() as u64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One tenant's arrivals: the simulator admits exactly what the tenant's own buckets (the
    /// core's, which the edge's store charges) admit.
    #[test]
    fn a_tenant_is_admitted_exactly_as_its_buckets_admit(
        gaps in prop::collection::vec(prop_oneof![1 => Just(0u64), 3 => 0u64..800], 1..80),
        rate in prop_oneof![Just(0.5), Just(2.0), Just(7.0)],
        burst in 1u32..5,
    ) {
        let limit = format!(r#"{{"rate": {rate}, "burst": {burst}}}"#);
        let set = rules("", &format!(r#""tenant_header": "x-tenant", "default": {limit}"#));
        let mut ms = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { ms += g; ms }).collect();
        let mut text = String::from("t,ip.src,cf.colo.id,method,endpoint,header:x-tenant\n");
        for ms in &arrivals {
            text.push_str(&format!("{},198.51.100.1,AMS,POST,/hooks/in,acme\n", *ms as f64 / 1000.0));
        }
        let mut buckets = TenantLimit::from_json_text(&limit, None).unwrap().buckets();
        let expected: Vec<bool> = arrivals.iter().map(|&ms| buckets.charge(now(ms), 0).is_allowed()).collect();
        let decided: Vec<bool> = decide(&set, &text).into_iter().map(EdgeDecision::admitted).collect();
        prop_assert_eq!(decided, expected);
    }
}
