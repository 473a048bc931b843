use super::*;
use crate::identity::{client_identity, Sources};
use alloc::string::ToString;
use alloc::vec;

const REFERENCE: &str = r#"{ "rules": [ {
    "id": "api",
    "description": "Bluebird API rate limit",
    "match": { "path": { "starts_with": "/api/" } },
    "characteristics": ["ip.src", "cf.colo.id"],
    "period": 10, "requests_per_period": 20, "mitigation_timeout": 10
} ] }"#;

fn errors_of(json: &str) -> Vec<String> {
    RuleSet::from_json(json).unwrap_err().iter().map(ToString::to_string).collect()
}

fn one_rule(fields: &str) -> String {
    alloc::format!(r#"{{"rules":[{{"id":"api","match":{{}},"characteristics":["ip.src"],{fields}}}]}}"#)
}

fn facts<'a>(method: &'a str, path: &'a str, ip: &'a str, colo: &'a str) -> RequestFacts<'a> {
    RequestFacts {
        method,
        host: "example.com",
        path,
        colo: Some(colo),
        identity: client_identity(&Sources { cf_connecting_ip: Some(ip), ..Default::default() }),
    }
}

#[test]
fn the_reference_rule_parses_to_an_exact_count_then_block() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    let rule = &set.rules()[0];
    assert_eq!(rule.algorithm, Algorithm::SlidingLog { requests_per_period: 20, period: Span::from_secs(10) });
    assert_eq!(rule.mitigation_timeout, Span::from_secs(10));
    assert_eq!(rule.policy_header(), "\"api\";q=20;w=10");
    assert_eq!(rule.response.status, 429);
}

#[test]
fn only_paths_under_the_prefix_match() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    for (path, want) in
        [("/api/ping", true), ("/api/", true), ("/api", false), ("/apix", false), ("/", false), ("/static/x", false)]
    {
        let f = facts("GET", path, "198.51.100.7", "AMS");
        assert_eq!(set.matching(&f).count() == 1, want, "{path}");
    }
}

#[test]
fn the_counting_key_separates_ip_and_colo_and_merges_an_ipv6_slash_64() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    let rule = &set.rules()[0];
    let key = |ip, colo| rule.counting_key(&facts("GET", "/api/x", ip, colo), |_| None);
    assert_eq!(key("198.51.100.7", "AMS"), "api|ip.src=198.51.100.7|cf.colo.id=AMS");
    assert_ne!(key("198.51.100.7", "AMS"), key("198.51.100.7", "DFW"));
    assert_ne!(key("198.51.100.7", "AMS"), key("198.51.100.8", "AMS"));
    assert_eq!(key("2001:db8:1:2::1", "AMS"), key("2001:db8:1:2:ffff::9", "AMS"));
}

#[test]
fn methods_hosts_and_exact_paths_narrow_a_match() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"analyze","match":{"path":{"equals":"/api/analyze"},"methods":["post"],"hosts":["Example.com"]},
        "characteristics":["ip.src","http.request.headers[\"X-Api-Key\"]"],"algorithm":"token_bucket","rate":0.2,"burst":6}]}"#,
    )
    .unwrap();
    let rule = &set.rules()[0];
    assert!(rule.matches(&facts("POST", "/api/analyze", "192.0.2.1", "AMS")));
    assert!(!rule.matches(&facts("GET", "/api/analyze", "192.0.2.1", "AMS")));
    assert!(!rule.matches(&facts("POST", "/api/analyze/x", "192.0.2.1", "AMS")));
    assert_eq!(rule.algorithm, Algorithm::TokenBucket { interval: Span::from_secs(5), burst: 6 });
    let key = rule.counting_key(&facts("POST", "/api/analyze", "192.0.2.1", "AMS"), |name| {
        (name == "x-api-key").then(|| "k1".to_string())
    });
    assert_eq!(key, "analyze|ip.src=192.0.2.1|http.request.headers[\"x-api-key\"]=k1");
    assert_eq!(rule.policy_header(), "\"analyze\";q=6;w=30");
}

#[test]
fn an_unknown_characteristic_is_refused_by_name() {
    let errs = errors_of(
        r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src","ip.geoip.country"],"period":10,"requests_per_period":20}]}"#,
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("rules[0] (\"api\")"), "{}", errs[0]);
    assert!(errs[0].contains("characteristics"), "{}", errs[0]);
    assert!(errs[0].contains("ip.geoip.country"), "{}", errs[0]);
    assert!(errs[0].contains("cf.colo.id"), "lists what is allowed: {}", errs[0]);
}

#[test]
fn a_zero_period_is_refused() {
    let errs = errors_of(&one_rule(r#""period":0,"requests_per_period":20"#));
    assert_eq!(
        errs,
        vec!["rule rules[0] (\"api\"): field \"period\": must be a whole number of seconds from 1 to 31622400, got 0"]
    );
}

#[test]
fn a_negative_threshold_is_refused() {
    let errs = errors_of(&one_rule(r#""period":10,"requests_per_period":-5"#));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].contains("field \"requests_per_period\"") && errs[0].contains("got -5"), "{}", errs[0]);
}

#[test]
fn a_missing_field_is_refused_by_name() {
    let errs = errors_of(&one_rule(r#""period":10"#));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].contains("field \"requests_per_period\": missing"), "{}", errs[0]);
    let errs = errors_of(r#"{"rules":[{"id":"api","match":{},"period":10,"requests_per_period":5}]}"#);
    assert!(errs[0].contains("field \"characteristics\": missing"), "{}", errs[0]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let errs = errors_of(
        r#"{"rules":[{"id":"a","match":{"path":{"starts_with":"api"}},"characteristics":[],"period":10,"requests_per_period":1,"mitigation_timout":10},
                     {"id":"a","match":{},"characteristics":["ip.src"],"algorithm":"leaky","period":1}]}"#,
    );
    let text = errs.join("\n");
    assert!(text.contains("rules[0] (\"a\"): field \"match.path.starts_with\""), "{text}");
    assert!(text.contains("rules[0] (\"a\"): field \"characteristics\""), "{text}");
    assert!(text.contains("rules[0] (\"a\"): field \"mitigation_timout\": unknown field"), "{text}");
    assert!(text.contains("rules[1] (\"a\"): field \"algorithm\": unknown algorithm \"leaky\""), "{text}");
}

#[test]
fn token_bucket_fields_do_not_mix_with_window_fields() {
    let errs = errors_of(&one_rule(r#""algorithm":"token_bucket","rate":1,"burst":5,"period":10"#));
    assert!(errs[0].contains("field \"period\": is not used by \"token_bucket\""), "{errs:?}");
    let errs = errors_of(&one_rule(r#""algorithm":"token_bucket","rate":0,"burst":5"#));
    assert!(errs[0].contains("field \"rate\""), "{errs:?}");
}

#[test]
fn duplicate_ids_and_bad_files_are_refused() {
    let dup = r#"{"rules":[{"id":"a","match":{},"characteristics":["ip.src"],"period":1,"requests_per_period":1},
                           {"id":"a","match":{},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#;
    assert!(errors_of(dup)[0].contains("ids must be unique"));
    assert!(errors_of("{")[0].starts_with("rules file: not valid JSON"));
    assert!(errors_of("[]")[0].contains("\"rules\" array"));
    assert!(errors_of(r#"{"rule":[]}"#).iter().any(|e| e.contains("field \"rules\": missing")));
}

#[test]
fn a_configured_response_replaces_the_problem_body() {
    let set = RuleSet::from_json(&one_rule(
        r#""period":10,"requests_per_period":1,"response":{"status_code":503,"content_type":"application/json","content":"{\"busy\":true}"}"#,
    ))
    .unwrap();
    let (status, ct, body) = set.rules()[0].refusal(Span::from_secs(3));
    assert_eq!((status, ct.as_str(), body.as_str()), (503, "application/json", "{\"busy\":true}"));
    let default = RuleSet::from_json(REFERENCE).unwrap();
    let (status, ct, body) = default.rules()[0].refusal(Span::from_secs(10));
    assert_eq!((status, ct.as_str()), (429, "application/problem+json"));
    assert!(body.contains("\"rule\":\"api\""));
}
