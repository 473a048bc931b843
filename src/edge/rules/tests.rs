use super::*;
use crate::edge::identity::{client_identity, Sources};
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

/// The first problem `json` is refused for.
fn first_error(json: &str) -> RuleError {
    RuleSet::from_json(json).unwrap_err().remove(0)
}

/// The rule of rules[0] as the errors name it.
fn rule0(id: &str) -> Option<String> {
    Some(alloc::format!("rules[0] (\"{id}\")"))
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
    let json = r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src","ip.geoip.country"],"period":10,"requests_per_period":20}]}"#;
    assert_eq!(fields_of(json), [(rule0("api"), "characteristics".into())]);
    let error = first_error(json);
    assert!(error.message.contains("ip.geoip.country"), "{error}");
    assert!(error.message.contains("cf.colo.id"), "lists what is allowed: {error}");
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
    let json = one_rule(r#""period":10,"requests_per_period":-5"#);
    assert_eq!(fields_of(&json), [(rule0("api"), "requests_per_period".into())]);
    assert!(first_error(&json).message.contains("got -5"), "{}", first_error(&json));
}

#[test]
fn a_missing_field_is_refused_by_name() {
    let json = one_rule(r#""period":10"#);
    assert_eq!(fields_of(&json), [(rule0("api"), "requests_per_period".into())]);
    assert!(first_error(&json).message.starts_with("missing"), "{}", first_error(&json));
    let json = r#"{"rules":[{"id":"api","match":{},"period":10,"requests_per_period":5}]}"#;
    assert_eq!(fields_of(json), [(rule0("api"), "characteristics".into())]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let json = r#"{"rules":[{"id":"a","match":{"path":{"starts_with":"api"}},"characteristics":[],"period":10,"requests_per_period":1,"mitigation_timout":10},
                     {"id":"a","match":{},"characteristics":["ip.src"],"algorithm":"leaky","period":1}]}"#;
    let fields = fields_of(json);
    for (rule, field) in [
        ("rules[0] (\"a\")", "match.path.starts_with"),
        ("rules[0] (\"a\")", "characteristics"),
        ("rules[0] (\"a\")", "mitigation_timout"),
        ("rules[1] (\"a\")", "algorithm"),
    ] {
        assert!(fields.contains(&(Some(rule.into()), field.into())), "{rule} {field} in {fields:?}");
    }
    let errors = RuleSet::from_json(json).unwrap_err();
    let message = |field: &str| errors.iter().find(|e| e.field == field).map(|e| e.message.clone()).unwrap();
    assert!(message("mitigation_timout").starts_with("unknown field"), "{errors:?}");
    assert!(message("algorithm").starts_with("unknown algorithm \"leaky\""), "{errors:?}");
}

#[test]
fn token_bucket_fields_do_not_mix_with_window_fields() {
    let error = first_error(&one_rule(r#""algorithm":"token_bucket","rate":1,"burst":5,"period":10"#));
    assert_eq!(error.field, "period");
    assert!(error.message.starts_with("is not used by \"token_bucket\""), "{error}");
    assert_eq!(first_error(&one_rule(r#""algorithm":"token_bucket","rate":0,"burst":5"#)).field, "rate");
}

#[test]
fn duplicate_ids_and_bad_files_are_refused() {
    let dup = r#"{"rules":[{"id":"a","match":{},"characteristics":["ip.src"],"period":1,"requests_per_period":1},
                           {"id":"a","match":{},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#;
    assert_eq!(fields_of(dup), [(Some("rules[1] (\"a\")".into()), "id".into())]);
    assert!(first_error(dup).message.contains("ids must be unique"), "{}", first_error(dup));
    assert!(errors_of("{")[0].starts_with("rules file: not valid JSON"));
    assert!(errors_of("[]")[0].contains("\"rules\" array"));
    assert!(fields_of(r#"{"rule":[]}"#).contains(&(None, "rules".into())));
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

/// The request as the edge sees it: the path normalised first.
fn normal_facts<'a>(path: &'a str, host: &'a str) -> RequestFacts<'a> {
    RequestFacts { method: "GET", host, path, colo: Some("AMS"), identity: None }
}

#[test]
fn encoded_and_re_cased_spellings_of_a_path_meet_the_rule() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    for spelling in
        ["/%61pi/ping", "/ap%69/ping", "/api%2Fping", "/%2Fapi/ping", "/x/..%2fapi/ping", "/API/ping", "/Api/ping"]
    {
        let path = normalise_path(spelling).unwrap();
        assert_eq!(set.matching(&normal_facts(&path, "example.com")).count(), 1, "{spelling}");
    }
    let path = normalise_path("/x/..%2fapix/ping").unwrap();
    assert_eq!(set.matching(&normal_facts(&path, "example.com")).count(), 0);
}

#[test]
fn case_sensitive_rules_tell_upper_from_lower_case() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"a","match":{"path":{"starts_with":"/api/"},"case_sensitive":true},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    )
    .unwrap();
    assert!(set.rules()[0].matches(&normal_facts("/api/x", "h")));
    assert!(!set.rules()[0].matches(&normal_facts("/API/x", "h")));
    assert_eq!(
        fields_of(
            r#"{"rules":[{"id":"a","match":{"case_sensitive":"yes"},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
        ),
        [(rule0("a"), "match.case_sensitive".into())]
    );
}

#[test]
fn the_path_characteristic_counts_every_spelling_of_a_path_on_one_counter() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"p","match":{"path":{"starts_with":"/api/"}},"characteristics":["http.request.uri.path"],"period":1,"requests_per_period":1}]}"#,
    )
    .unwrap();
    let rule = &set.rules()[0];
    let spellings = [
        "/api/ping",
        "/%61pi/ping",
        "/ap%69/ping",
        "/api%2Fping",
        "/%2Fapi/ping",
        "/x/..%2fapi/ping",
        "/API/ping",
        "/Api/PING",
        "//api//ping",
        "/api/./ping",
        "/api/x/../ping",
        "/api/ping/",
        "/%41%50%49/ping",
        "/api/%70ing",
        "/./api/ping//",
        "/api\\ping",
    ];
    let keys: Vec<String> = spellings
        .iter()
        .map(|s| rule.counting_key(&normal_facts(&normalise_path(s).unwrap(), "h"), |_| None))
        .collect();
    assert!(keys.iter().all(|k| k == "p|http.request.uri.path=/api/ping"), "{keys:?}");
}

#[test]
fn a_non_ascii_rule_path_matches_the_percent_encoded_request() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"cafe","match":{"path":{"equals":"/café"}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    )
    .unwrap();
    assert_eq!(set.rules()[0].matcher.paths, vec![PathMatch::Equals("/caf%C3%A9".into())]);
    for sent in ["/caf%C3%A9", "/caf%c3%a9", "/caf%C3%A9/", "/CAF%C3%A9"] {
        assert!(set.rules()[0].matches(&normal_facts(&normalise_path(sent).unwrap(), "h")), "{sent}");
    }
    assert!(!set.rules()[0].matches(&normal_facts("/cafe", "h")));
    let error = first_error(
        r#"{"rules":[{"id":"a","match":{"path":{"starts_with":"/a%zz"}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    );
    assert_eq!(error.field, "match.path.starts_with");
    assert!(error.message.starts_with("cannot be normalised"), "{error}");
}

#[test]
fn an_exact_path_also_matches_it_with_a_trailing_slash() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"a","match":{"path":{"equals":"/api/analyze"}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    )
    .unwrap();
    let rule = &set.rules()[0];
    assert!(rule.matches(&normal_facts("/api/analyze/", "h")));
    assert!(!rule.matches(&normal_facts("/api/analyze/x", "h")));
    assert!(!rule.matches(&normal_facts("/api/analyzex", "h")));
}

#[test]
fn a_host_with_a_trailing_dot_is_the_host_without_it() {
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"a","match":{"hosts":["Example.com","api.example.org."]},"characteristics":["http.host"],"period":1,"requests_per_period":1}]}"#,
    )
    .unwrap();
    let rule = &set.rules()[0];
    assert_eq!(rule.matcher.hosts, vec!["example.com", "api.example.org"]);
    for host in ["example.com", "example.com.", "EXAMPLE.COM.", "api.example.org", "api.example.org."] {
        assert!(rule.matches(&normal_facts("/", host)), "{host}");
    }
    assert!(!rule.matches(&normal_facts("/", "example.com..")));
    assert_eq!(rule.counting_key(&normal_facts("/", "Example.COM."), |_| None), "a|http.host=example.com");
    for bad in ["", ".", "a b", "http://x", "x:80", "x/y", "a..b"] {
        let json = alloc::format!(
            r#"{{"rules":[{{"id":"a","match":{{"hosts":["{bad}"]}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}}]}}"#
        );
        assert_eq!(first_error(&json).field, "match.hosts", "{bad}");
    }
}

#[test]
fn a_repeated_json_key_anywhere_is_refused_with_its_rule_and_field() {
    let errs = errors_of(
        r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src"],"period":10,"requests_per_period":20}],"rules":[]}"#,
    );
    assert_eq!(errs.len(), 1);
    assert!(errs[0] == "rules file: field \"rules\": is given twice; a JSON object must not repeat a key", "{errs:?}");
    let errs = errors_of(
        "{\"rules\":[{\"id\":\"api\",\"match\":{},\"characteristics\":[\"ip.src\"],\n\"period\":10,\"period\":1,\"requests_per_period\":20}]}",
    );
    assert!(errs[0].starts_with("rule rules[0]: field \"period\": is given twice"), "{errs:?}");
    let errs = errors_of(
        r#"{"rules":[{"id":"a","match":{},"characteristics":["ip.src"],"period":1,"requests_per_period":1},
        {"id":"b","match":{"path":{"starts_with":"/a/","starts_with":"/b/"}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    );
    assert!(errs[0].starts_with("rule rules[1]: field \"match.path.starts_with\": is given twice"), "{errs:?}");
    // A syntax error after a repeated key is still reported as such.
    assert!(errors_of(r#"{"rules":[],"rules":[],}"#)[0].starts_with("rules file: not valid JSON"));
}

#[test]
fn a_content_type_that_is_not_a_media_type_is_refused() {
    for ok in
        ["application/json", "text/plain; charset=utf-8", "text/plain;charset=\"utf-8\"", "application/vnd.x+json"]
    {
        let rule = one_rule(&alloc::format!(
            r#""period":1,"requests_per_period":1,"response":{{"content_type":{},"content":"x"}}"#,
            serde_json::to_string(ok).unwrap()
        ));
        assert!(RuleSet::from_json(&rule).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "json",
        "text/plain\u{1}",
        "text/pl ain",
        "text/plain; charset",
        "text/html\r\nx-evil: 1",
        "a/b; c=\"\u{7f}\"",
    ] {
        let rule = one_rule(&alloc::format!(
            r#""period":1,"requests_per_period":1,"response":{{"content_type":{},"content":"x"}}"#,
            serde_json::to_string(bad).unwrap()
        ));
        assert_eq!(fields_of(&rule), [(rule0("api"), "response.content_type".into())], "{bad:?}");
    }
}

#[test]
fn a_token_bucket_too_slow_to_count_is_refused() {
    let error = first_error(&one_rule(r#""algorithm":"token_bucket","rate":1e-10,"burst":5"#));
    assert_eq!(error.field, "rate");
    assert!(error.message.contains("one per 31622400 s"), "{error}");
    let error = first_error(&one_rule(r#""algorithm":"token_bucket","rate":0.001,"burst":100000"#));
    assert_eq!(error.field, "burst");
    assert!(error.message.starts_with("burst / rate is 100000000 s"), "{error}");
    let slowest = RuleSet::from_json(&one_rule(r#""algorithm":"token_bucket","rate":3.2e-8,"burst":1"#)).unwrap();
    assert_eq!(slowest.rules()[0].policy_header(), "\"api\";q=1;w=31250000");
}

/// Each problem's item and field, for asserting what is named rather than how it is worded.
fn fields_of(json: &str) -> Vec<(Option<String>, String)> {
    RuleSet::from_json(json).unwrap_err().into_iter().map(|e| (e.rule, e.field)).collect()
}

#[test]
fn a_rule_rate_too_slow_to_represent_is_refused_naming_rate_not_made_unlimited() {
    // 1e9 / 1e-12 = 1e21 ns, past u64: it once became a 1 ns interval (1e9 per second).
    for rate in ["1e-12", "1e-20", "2.2250738585072014e-308", "5e-324"] {
        let json = one_rule(&alloc::format!(r#""algorithm":"token_bucket","rate":{rate},"burst":1"#));
        assert_eq!(fields_of(&json), [(Some("rules[0] (\"api\")".into()), "rate".into())], "{rate}");
        let errs = errors_of(&json);
        let got = serde_json::Value::from(rate.parse::<f64>().unwrap());
        assert!(errs[0].contains(&alloc::format!("got {got}; a slower rate cannot be counted")), "{errs:?}");
    }
    for bucket in ["per_ip", "node"] {
        let json = alloc::format!(r#"{{"rules":[],"pre_read":{{"{bucket}":{{"rate":1e-12,"burst":1}}}}}}"#);
        assert_eq!(fields_of(&json), [(None, alloc::format!("pre_read.{bucket}.rate"))]);
    }
    let tenants = r#"{"rules":[],"tenants":{"match":{},"tenant_header":"x-tenant",
        "limits":{"acme":{"rate":1e-12,"burst":1}},"default":{"rate":1e-12,"burst":1}}}"#;
    let mut fields: Vec<String> = fields_of(tenants).into_iter().map(|(_, f)| f).collect();
    fields.sort();
    assert_eq!(fields, ["tenants.default.rate", "tenants.limits.acme.rate"]);
}

#[test]
fn a_slow_token_bucket_still_refuses_what_is_over_its_burst() {
    let set = RuleSet::from_json(&one_rule(r#""algorithm":"token_bucket","rate":1e-6,"burst":2"#)).unwrap();
    let mut limiter = set.rules()[0].limiter();
    let now = Instant::from_millis(1_790_000_000_000);
    assert!(limiter.check(now, 1).unwrap().is_allowed());
    assert!(limiter.check(now, 1).unwrap().is_allowed());
    assert!(!limiter.check(now + Span::from_secs(3600), 1).unwrap().is_allowed());
}

#[test]
fn more_rules_than_the_cap_are_refused() {
    let rules = |n: usize| {
        let list: Vec<String> = (0..n)
            .map(|i| {
                alloc::format!(
                    r#"{{"id":"r{i}","match":{{}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}}"#
                )
            })
            .collect();
        alloc::format!(r#"{{"rules":[{}]}}"#, list.join(","))
    };
    assert_eq!(RuleSet::from_json(&rules(MAX_RULES)).unwrap().rules().len(), MAX_RULES);
    let errs = errors_of(&rules(MAX_RULES + 1));
    assert_eq!(errs, vec![alloc::format!(
        "rules file: field \"rules\": {} rules; at most {MAX_RULES} are allowed (each matching rule adds to the RateLimit headers)",
        MAX_RULES + 1
    )]);
}

const TRAFFIC: &str = r#"{
  "rules": [
    {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src", "cf.colo.id"],
     "period": 10, "requests_per_period": 20, "mitigation_timeout": 10},
    {"id": "analyze", "description": "analyses", "match": {"path": [{"equals": "/api/analyze"}, {"equals": "/api/analyze/stream"}], "methods": ["POST"]},
     "characteristics": ["ip.src"], "algorithm": "token_bucket", "rate": 0.2, "burst": 6},
    {"id": "by-key", "match": {}, "characteristics": ["http.request.headers[\"x-api-key\"]"], "period": 60, "requests_per_period": 100, "public": false}
  ],
  "upstreams": [
    {"id": "overpass", "match": {"path": {"starts_with": "/api/destinations"}}, "max_in_flight": 2, "max_wait": 1.5},
    {"id": "secret", "match": {"path": {"starts_with": "/internal/"}}, "max_in_flight": 1, "public": false}
  ]
}"#;

#[test]
fn a_path_list_matches_when_any_test_does() {
    let set = RuleSet::from_json(TRAFFIC).unwrap();
    let analyze = &set.rules()[1];
    let post = |path| RequestFacts { method: "POST", ..normal_facts(path, "h") };
    assert!(analyze.matches(&post("/api/analyze")));
    assert!(analyze.matches(&post("/api/analyze/stream")));
    assert!(!analyze.matches(&post("/api/analyze/other")));
    assert!(!analyze.matches(&normal_facts("/api/analyze", "h")), "GET is not in the rule");
    let error = first_error(
        r#"{"rules":[{"id":"a","match":{"path":[]},"characteristics":["ip.src"],"period":1,"requests_per_period":1}]}"#,
    );
    assert_eq!(error.field, "match.path");
    assert!(error.message.starts_with("an empty list matches nothing"), "{error}");
}

#[test]
fn store_failure_defaults_to_open_for_ip_rules_and_closed_otherwise() {
    let set = RuleSet::from_json(TRAFFIC).unwrap();
    assert_eq!(set.rules()[0].on_store_failure, StoreFailure::Open);
    assert_eq!(set.rules()[2].on_store_failure, StoreFailure::Closed);
    let closed =
        RuleSet::from_json(&one_rule(r#""period":1,"requests_per_period":1,"on_store_failure":"closed""#)).unwrap();
    assert_eq!(closed.rules()[0].on_store_failure, StoreFailure::Closed);
    let json = one_rule(r#""period":1,"requests_per_period":1,"on_store_failure":"maybe""#);
    assert_eq!(fields_of(&json), [(rule0("api"), "on_store_failure".into())]);
}

#[test]
fn enforce_is_true_false_or_a_share_and_check_rules_lists_the_rules_not_enforced_everywhere() {
    use crate::edge::rules::Enforce;
    let set = RuleSet::from_json(TRAFFIC).unwrap();
    assert!(set.rules().iter().all(|r| r.enforce == Enforce::All), "enforced unless the file says otherwise");
    assert!(set.summary_lines().iter().all(|l| !l.contains("not enforced")));
    let shadow = RuleSet::from_json(&one_rule(r#""period":1,"requests_per_period":1,"enforce":false"#)).unwrap();
    assert_eq!(shadow.rules()[0].enforce, Enforce::Shadow);
    let lines = shadow.summary_lines();
    assert!(lines[0].ends_with("; shadow (counts and logs, never refuses)"), "{}", lines[0]);
    assert!(lines.iter().any(|l| l.starts_with("not enforced for every key: api (shadow);")), "{lines:?}");
    let tenth = RuleSet::from_json(&one_rule(r#""period":1,"requests_per_period":1,"enforce":0.1"#)).unwrap();
    assert_eq!(tenth.rules()[0].enforce.fraction(), 0.1);
    assert!(tenth.summary_lines().iter().any(|l| l.starts_with("not enforced for every key: api (0.1 of keys);")));
    let tenants = RuleSet::from_json(
        r#"{"rules": [], "tenants": {"match": {}, "tenant_header": "x-tenant",
            "limits": {"acme": {"rate": 1, "burst": 1, "enforce": false}, "beta": {"rate": 1, "burst": 1}},
            "default": {"rate": 1, "burst": 1, "enforce": 0.25}}}"#,
    )
    .unwrap();
    let line = tenants.summary_lines().into_iter().find(|l| l.starts_with("not enforced")).unwrap();
    assert!(
        line.starts_with(
            "not enforced for every key: tenant acme (shadow), the default tenant limit (0.25 of tenants);"
        ),
        "{line}"
    );
    for bad in ["0", "1", "1.5", "-0.5", "\"false\"", "null", "[0.5]"] {
        let json = one_rule(&alloc::format!(r#""period":1,"requests_per_period":1,"enforce":{bad}"#));
        assert_eq!(fields_of(&json), [(rule0("api"), "enforce".into())], "{bad}");
    }
}

#[test]
fn upstream_budgets_are_validated_naming_the_upstream_and_field() {
    let set = RuleSet::from_json(TRAFFIC).unwrap();
    let overpass = &set.upstreams()[0];
    assert_eq!(
        (overpass.max_in_flight, overpass.max_wait, overpass.scope),
        (2, Span::from_millis(1_500), BudgetScope::Isolate)
    );
    assert_eq!(set.upstreams()[1].max_wait, Span::from_secs(30), "max_wait defaults to 30 s");
    let post = RequestFacts { method: "POST", ..normal_facts("/api/destinations", "h") };
    assert_eq!(set.upstream_for(&post).map(|u| u.id.as_str()), Some("overpass"));
    assert!(set.upstream_for(&normal_facts("/api/x", "h")).is_none());
    let json = r#"{"rules":[],"upstreams":[{"id":"u","match":{},"max_in_flight":0,"max_wait":-1,"scope":"moon","extra":1},{"match":{}}]}"#;
    let fields = fields_of(json);
    for (rule, field) in [
        ("upstreams[0] (\"u\")", "extra"),
        ("upstreams[0] (\"u\")", "max_in_flight"),
        ("upstreams[0] (\"u\")", "max_wait"),
        ("upstreams[0] (\"u\")", "scope"),
        ("upstreams[1]", "id"),
        ("upstreams[1]", "max_in_flight"),
    ] {
        assert!(fields.contains(&(Some(rule.into()), field.into())), "{rule} {field} in {fields:?}");
    }
    let text = errors_of(json).join("\n");
    for want in [
        "upstream upstreams[0] (\"u\"): field \"extra\": unknown field",
        "upstream upstreams[0] (\"u\"): field \"max_in_flight\": must be a whole number of requests from 1",
        "upstream upstreams[0] (\"u\"): field \"max_wait\": must be a number of seconds from 0 to 300",
        "upstream upstreams[0] (\"u\"): field \"scope\": must be \"isolate\" (the default) or \"fleet\"",
        "upstream upstreams[1]: field \"id\": missing",
        "upstream upstreams[1]: field \"max_in_flight\": missing",
    ] {
        assert!(text.contains(want), "expected {want:?} in:\n{text}");
    }
}

#[test]
fn the_capabilities_path_is_configurable_or_off() {
    assert_eq!(RuleSet::from_json(REFERENCE).unwrap().capabilities_path(), Some("/api/capabilities"));
    let moved = RuleSet::from_json(r#"{"rules":[],"capabilities":{"path":"/limits"}}"#).unwrap();
    assert_eq!(moved.capabilities_path(), Some("/limits"));
    assert_eq!(RuleSet::from_json(r#"{"rules":[],"capabilities":false}"#).unwrap().capabilities_path(), None);
    assert_eq!(fields_of(r#"{"rules":[],"capabilities":{"path":"limits"}}"#), [(None, "capabilities.path".into())]);
}

#[test]
fn the_capabilities_answer_lists_every_public_rule_and_budget() {
    let set = RuleSet::from_json(TRAFFIC).unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&set.capabilities_json(|id| if id == "api" { 3 } else { 0 })).unwrap();
    let ids = |key: &str| -> Vec<&str> {
        answer[key].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect()
    };
    assert_eq!(ids("rules"), vec!["api", "analyze"], "by-key is not public");
    assert_eq!(ids("upstreams"), vec!["overpass"], "secret is not public");
    let api = &answer["rules"][0];
    assert_eq!(api["algorithm"], "sliding_log");
    assert_eq!(
        (api["limit"].as_u64(), api["period_s"].as_u64(), api["block_s"].as_u64()),
        (Some(20), Some(10), Some(10))
    );
    assert_eq!(api["counted_by"], serde_json::json!(["ip.src", "cf.colo.id"]));
    assert_eq!(api["matches"]["paths"], serde_json::json!([{"starts_with": "/api/"}]));
    assert_eq!(api["on_store_failure"], "open");
    let analyze = &answer["rules"][1];
    assert_eq!((analyze["rate_per_s"].as_f64(), analyze["burst"].as_u64()), (Some(0.2), Some(6)));
    assert_eq!(analyze["description"], "analyses");
    assert_eq!(analyze["matches"]["methods"], serde_json::json!(["POST"]));
    assert_eq!(answer["upstreams"][0]["max_wait_s"].as_f64(), Some(1.5));
    assert_eq!(answer["upstreams"][0]["scope"], "isolate");
    assert_eq!(answer["degraded"], serde_json::json!([{"rule": "api", "fail_open_decisions": 3}]));
}

#[test]
fn body_bytes_per_source_have_a_ceiling_unless_the_file_turns_it_off() {
    let default = Some(crate::edge::rules::DEFAULT_SOURCE_BYTES_PER_SECOND);
    assert_eq!(default, Some(100_000_000));
    let caps = |set: &RuleSet| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&set.capabilities_json(|_| 0)).unwrap()["pre_read"].clone()
    };
    // No pre_read at all, or one that leaves the ceiling out: the default is in force.
    for json in
        [REFERENCE, r#"{"rules":[],"pre_read":{"per_ip":{"rate":2,"burst":3}}}"#, r#"{"rules":[],"pre_read":{}}"#]
    {
        let set = RuleSet::from_json(json).unwrap();
        assert_eq!(set.pre_read().source_bytes_per_second, default, "{json}");
        assert!(!set.pre_read().is_empty());
        assert_eq!(caps(&set)["source_bytes_per_second"], 100_000_000, "{json}");
    }
    assert_eq!(
        caps(&RuleSet::from_json(REFERENCE).unwrap()),
        serde_json::json!({"source_bytes_per_second": 100_000_000})
    );
    // Named sources share the default ceiling.
    let named = RuleSet::from_json(r#"{"rules":[],"pre_read":{"sources":[{"id":"hooks","match":{}}]}}"#).unwrap();
    assert_eq!(named.pre_read().source_bytes_per_second, default);
    assert_eq!(named.pre_read().sources.len(), 1);
    // null turns it off, and the answer says so.
    let off = RuleSet::from_json(r#"{"rules":[],"pre_read":{"source_bytes_per_second":null}}"#).unwrap();
    assert_eq!(off.pre_read().source_bytes_per_second, None);
    assert!(off.pre_read().is_empty());
    assert_eq!(caps(&off), serde_json::json!({"source_bytes_per_second": null}));
    let set = RuleSet::from_json(r#"{"rules":[],"pre_read":{"source_bytes_per_second":5000}}"#).unwrap();
    assert_eq!(set.pre_read().source_bytes_per_second, Some(5_000));
    for bad in ["0", "-1", "1.5", "\"100\"", "false", "1099511627777"] {
        let json = alloc::format!(r#"{{"rules":[],"pre_read":{{"source_bytes_per_second":{bad}}}}}"#);
        let errs = errors_of(&json);
        assert_eq!(errs.len(), 1, "{bad}: {errs:?}");
        assert!(
            errs[0].starts_with(
                "rules file: field \"pre_read.source_bytes_per_second\": must be a whole number of bytes per second \
                 from 1 to 1099511627776, or null to count no body bytes, got "
            ),
            "{errs:?}"
        );
    }
}

#[test]
fn trusted_proxies_are_ranges_checked_one_by_one() {
    let set =
        RuleSet::from_json(r#"{"rules":[],"trusted_proxies":["10.0.0.0/8","2001:db8::/32","192.0.2.7"]}"#).unwrap();
    let shown: Vec<_> = set.trusted_proxies().ranges().iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7/32"]);
    assert!(set.trusted_proxies().contains("::ffff:10.1.2.3".parse().unwrap()));
    assert!(RuleSet::from_json(REFERENCE).unwrap().trusted_proxies().is_empty());
    assert!(RuleSet::from_json(r#"{"rules":[],"trusted_proxies":[]}"#).unwrap().trusted_proxies().is_empty());
    let errs = errors_of(
        r#"{"rules":[],"trusted_proxies":["10.0.0.0/8","10.1.2.3/8","10.0.0.0/33","0.0.0.0/0","bogus",7,
            "2001:db8::1/32","::ffff:10.0.0.0/104","[::1]:443","2001:db8::/129"]}"#,
    );
    assert_eq!(
        errs,
        [
            "rules file: field \"trusted_proxies[1]\": \"10.1.2.3/8\" has bits set past its prefix length; write \"10.0.0.0/8\"",
            "rules file: field \"trusted_proxies[2]\": \"10.0.0.0/33\" has a prefix length that is not a whole number \
             from 1 to 32 (this address's bits)",
            "rules file: field \"trusted_proxies[3]\": \"0.0.0.0/0\" is a /0 range: it would trust every address, so any \
             client could name its own identity in X-Forwarded-For",
            "rules file: field \"trusted_proxies[4]\": \"bogus\" is not an IP address or a CIDR range such as \
             \"10.0.0.0/8\" or \"2001:db8::/32\" (no port, no brackets, no spaces)",
            "rules file: field \"trusted_proxies[5]\": must be a string such as \"10.0.0.0/8\", got 7",
            "rules file: field \"trusted_proxies[6]\": \"2001:db8::1/32\" has bits set past its prefix length; write \
             \"2001:db8::/32\"",
            "rules file: field \"trusted_proxies[7]\": \"::ffff:10.0.0.0/104\" is an IPv4-mapped IPv6 range; write the \
             IPv4 range \"10.0.0.0/8\" (it covers both forms)",
            "rules file: field \"trusted_proxies[8]\": \"[::1]:443\" is not an IP address or a CIDR range such as \
             \"10.0.0.0/8\" or \"2001:db8::/32\" (no port, no brackets, no spaces)",
            "rules file: field \"trusted_proxies[9]\": \"2001:db8::/129\" has a prefix length that is not a whole number \
             from 1 to 128 (this address's bits)",
        ]
    );
    assert_eq!(
        errors_of(r#"{"rules":[],"trusted_proxies":"10.0.0.0/8"}"#),
        ["rules file: field \"trusted_proxies\": must be an array of addresses or CIDR ranges, e.g. [\"10.0.0.0/8\"], \
          got \"10.0.0.0/8\""]
    );
    let many = alloc::format!(r#"{{"rules":[],"trusted_proxies":[{}]}}"#, vec!["\"10.0.0.1\""; 257].join(","));
    assert_eq!(errors_of(&many), ["rules file: field \"trusted_proxies\": 257 ranges; at most 256 are allowed"]);
}

#[test]
fn pre_read_checks_are_validated_and_name_their_field() {
    let set = RuleSet::from_json(
        r#"{"rules":[],"pre_read":{"per_ip":{"rate":2,"burst":3},"node":{"rate":100,"burst":200},
            "source_bytes_per_second":1000000,"sources":[{"id":"hooks","match":{"path":{"starts_with":"/hooks/"}}}]}}"#,
    )
    .unwrap();
    let pre = set.pre_read();
    assert_eq!(pre.per_ip, Some(crate::core::limit::Gcra::with_interval(3, Span::from_millis(500))));
    assert_eq!(pre.source_bytes_per_second, Some(1_000_000));
    assert_eq!(pre.source_of(&normal_facts("/hooks/github", "in.example")), "hooks");
    assert_eq!(pre.source_of(&normal_facts("/other", "In.example.")), "In.example", "else the host");
    let answer: serde_json::Value = serde_json::from_str(&set.capabilities_json(|_| 0)).unwrap();
    assert_eq!(
        answer["pre_read"],
        serde_json::json!({"per_ip": {"rate_per_s": 2.0, "burst": 3}, "node": {"rate_per_s": 100.0, "burst": 200}, "source_bytes_per_second": 1000000})
    );
    let json = r#"{"rules":[],"pre_read":{"per_ip":{"rate":0,"burst":3},"node":{"rate":1},"sources":[],"extra":1,
            "source_bytes_per_second":null}}"#;
    let fields = fields_of(json);
    for field in ["pre_read.per_ip.rate", "pre_read.node", "pre_read.sources", "pre_read.extra"] {
        assert!(fields.contains(&(None, field.into())), "{field} in {fields:?}");
    }
    let errs = errors_of(json).join("\n");
    for want in [
        "rules file: field \"pre_read.per_ip.rate\": must be a number of requests per second",
        "rules file: field \"pre_read.node\": must be {\"rate\": per second, \"burst\": n}",
        "rules file: field \"pre_read.sources\": names sources for source_bytes_per_second, which is null (not counted)",
        "rules file: field \"pre_read.extra\": unknown field",
    ] {
        assert!(errs.contains(want), "expected {want:?} in:\n{errs}");
    }
    assert_eq!(
        fields_of(
            r#"{"rules":[],"pre_read":{"source_bytes_per_second":10,"sources":[{"id":"a","match":{"path":{"starts_with":"x"}}}]}}"#,
        ),
        [(Some("pre_read.sources[0]".into()), "match.path.starts_with".into())]
    );
}

#[test]
fn tenants_are_validated_naming_the_field() {
    use crate::edge::tenants::{Identify, TenantScope};
    let hash = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
    let set = RuleSet::from_json(&alloc::format!(
        r#"{{"rules":[],"tenants":{{"match":{{"path":{{"starts_with":"/hooks/"}}}},"key_header":"X-Api-Key",
            "keys":{{"{hash}":"acme"}},"limits":{{"acme":{{"rate":0.5,"burst":2}}}},"max_body_bytes":1000,"scope":"fleet"}}}}"#
    ))
    .unwrap();
    let t = set.tenants().unwrap();
    assert_eq!(t.identify, Identify::Key("x-api-key".into()));
    assert_eq!(t.tenant_of_hash(&hash.to_ascii_lowercase()), Some("acme"));
    assert_eq!((t.limits["acme"].burst, t.default.is_none(), t.scope), (2, true, TenantScope::Fleet));
    let error = first_error(
        r#"{"rules":[],"tenants":{"match":{},"tenant_header":"x-tenant","limits":{"a":{"rate":1,"burst":1,"max_body_bytes":5000}},"max_body_bytes":1000}}"#,
    );
    assert_eq!(error.field, "tenants.limits.a.max_body_bytes");
    assert!(error.message.starts_with("5000 is above the instance's"), "{error}");
    let error = first_error(r#"{"rules":[],"tenants":{"match":{},"tenant_header":"x-tenant"}}"#);
    assert_eq!(error.field, "tenants.default");
    assert!(error.message.starts_with("missing: with tenant_header"), "{error}");
    let json = r#"{"rules":[],"tenants":{"match":{},"key_header":"k","tenant_header":"t","keys":{"nothex":"a"}}}"#;
    let errors = RuleSet::from_json(json).unwrap_err();
    assert!(errors.iter().any(|e| e.message.contains("needs exactly one of key_header")), "{errors:?}");
    assert!(errors.iter().any(|e| e.field == "tenants.keys"), "{errors:?}");
}

#[test]
fn the_headers_a_rules_file_reads_are_its_header_characteristics_and_its_tenant_header() {
    let set = RuleSet::from_json(
        r#"{"rules":[
            {"id":"a","match":{},"characteristics":["ip.src","http.request.headers[\"Authorization\"]"],"period":10,"requests_per_period":5},
            {"id":"b","match":{},"characteristics":["http.request.headers[\"x-api-key\"]","http.request.headers[\"authorization\"]"],"period":10,"requests_per_period":5}],
          "tenants":{"match":{},"tenant_header":"X-Tenant","default":{"rate":1,"burst":1}}}"#,
    )
    .unwrap();
    assert_eq!(set.headers_read(), ["authorization", "x-api-key", "x-tenant"]);
    let none = RuleSet::from_json(&one_rule(r#""period":10,"requests_per_period":5"#)).unwrap();
    assert!(none.headers_read().is_empty());
}

#[test]
fn a_header_value_in_a_counting_key_is_logged_as_its_keyed_hash_never_as_sent() {
    use crate::edge::redact::KeyedHash;
    let set = RuleSet::from_json(
        r#"{"rules":[{"id":"per-token","match":{},"period":10,"requests_per_period":5,
        "characteristics":["ip.src","http.request.headers[\"authorization\"]","cf.colo.id"]}]}"#,
    )
    .unwrap();
    let rule = &set.rules()[0];
    let hash = KeyedHash::from_secret(b"a log key of thirty-two characters");
    let request = facts("GET", "/api/x", "198.51.100.7", "AMS");
    let token = |value: &'static str| move |name: &str| (name == "authorization").then(|| value.to_string());
    let keys = rule.counting_key_and_log(&request, token("Bearer s3cret-token"), &hash);
    assert_eq!(keys.key, rule.counting_key(&request, token("Bearer s3cret-token")), "one key, counted as before");
    assert_eq!(
        keys.key,
        "per-token|ip.src=198.51.100.7|http.request.headers[\"authorization\"]=Bearer s3cret-token|cf.colo.id=AMS"
    );
    assert!(!keys.logged.contains("s3cret"), "{}", keys.logged);
    let tag = hash.tag("Bearer s3cret-token");
    assert_eq!(
        keys.logged,
        alloc::format!("per-token|ip.src=198.51.100.7|http.request.headers[\"authorization\"]={tag}|cf.colo.id=AMS")
    );
    assert_eq!(rule.counting_key_and_log(&request, token("Bearer s3cret-token"), &hash).logged, keys.logged);
    assert_ne!(rule.counting_key_and_log(&request, token("Bearer other-token"), &hash).logged, keys.logged);
    let absent = rule.counting_key_and_log(&request, |_| None, &hash);
    assert_eq!(absent.logged, absent.key, "nothing read from a header: nothing to hide");
    assert!(absent.logged.contains("authorization\"]=unknown|"));
}

/// traffic.json's geocode rule and nominatim budget (GET only), a GET-only pre_read source
/// and a GET-only tenants section.
const GET_ONLY: &str = r#"{
  "rules": [
    {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src", "http.request.method"],
     "period": 10, "requests_per_period": 20},
    {"id": "geocode", "match": {"path": {"equals": "/api/geocode"}, "methods": ["GET"]}, "characteristics": ["ip.src"],
     "algorithm": "token_bucket", "rate": 0.5, "burst": 10},
    {"id": "head-only", "match": {"path": {"equals": "/api/probe"}, "methods": ["HEAD"]}, "characteristics": ["ip.src"],
     "period": 10, "requests_per_period": 1}
  ],
  "upstreams": [{"id": "nominatim", "match": {"path": {"equals": "/api/geocode"}, "methods": ["GET"]}, "max_in_flight": 1}],
  "pre_read": {"source_bytes_per_second": 1000, "sources": [{"id": "reads", "match": {"methods": ["GET"]}}]},
  "tenants": {"match": {"path": {"starts_with": "/api/"}, "methods": ["GET"]}, "tenant_header": "x-tenant",
              "default": {"rate": 1, "burst": 1}}
}"#;

#[test]
fn a_head_request_meets_a_get_only_rule() {
    let set = RuleSet::from_json(GET_ONLY).unwrap();
    for method in ["HEAD", "head", "GET"] {
        let f = facts(method, "/api/geocode", "192.0.2.1", "AMS");
        let ids: Vec<&str> = set.matching(&f).map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["api", "geocode"], "{method}");
        assert_eq!(set.upstream_for(&f).map(|u| u.id.as_str()), Some("nominatim"), "{method}");
        assert_eq!(set.pre_read().source_of(&f), "reads", "{method}");
        assert!(set.tenants().unwrap().matcher.matches(&f), "{method}");
    }
    for method in ["POST", "OPTIONS"] {
        let f = facts(method, "/api/geocode", "192.0.2.1", "AMS");
        assert_eq!(set.matching(&f).map(|r| r.id.as_str()).collect::<Vec<_>>(), ["api"], "{method}");
        assert!(set.upstream_for(&f).is_none(), "{method}");
    }
}

#[test]
fn a_get_does_not_meet_a_head_only_rule_but_a_head_does() {
    let set = RuleSet::from_json(GET_ONLY).unwrap();
    let ids = |method| {
        let f = facts(method, "/api/probe", "192.0.2.1", "AMS");
        set.matching(&f).map(|r| r.id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids("HEAD"), ["api", "head-only"]);
    assert_eq!(ids("GET"), ["api"]);
}

#[test]
fn the_method_characteristic_counts_a_head_on_the_get_counter() {
    let set = RuleSet::from_json(GET_ONLY).unwrap();
    let api = set.get("api").unwrap();
    let key = |method| api.counting_key(&facts(method, "/api/geocode", "192.0.2.1", "AMS"), |_| None);
    assert_eq!(key("HEAD"), "api|ip.src=192.0.2.1|http.request.method=GET");
    assert_eq!(key("head"), key("GET"));
    assert_eq!(key("get"), key("GET"));
    assert_ne!(key("POST"), key("GET"));
}

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn key_tenants(keys: &str) -> String {
    alloc::format!(
        r#"{{"rules":[],"tenants":{{"match":{{"path":{{"starts_with":"/hooks/"}}}},"key_header":"x-api-key","keys":{{{keys}}}}}}}"#
    )
}

#[test]
fn two_tenant_key_hashes_differing_only_in_case_are_refused_naming_both() {
    let upper = HASH.to_ascii_uppercase();
    let json = key_tenants(&alloc::format!(r#""{HASH}":"acme","{upper}":"beta""#));
    assert_eq!(fields_of(&json), [(None, "tenants.keys".into())]);
    let errs = errors_of(&json);
    assert!(errs[0].contains(&alloc::format!("\"{upper}\" → \"beta\" and \"{HASH}\" → \"acme\"")), "{errs:?}");
    assert!(errs[0].contains("one hash in other case"), "{errs:?}");
    // The same tenant twice is still one key given twice.
    let json = key_tenants(&alloc::format!(r#""{HASH}":"acme","{upper}":"acme""#));
    assert_eq!(fields_of(&json), [(None, "tenants.keys".into())]);
    // One spelling alone, in either case, is the lower-case hash.
    let set = RuleSet::from_json(&key_tenants(&alloc::format!(r#""{upper}":"acme""#))).unwrap();
    assert_eq!(set.tenants().unwrap().tenant_of_hash(HASH), Some("acme"));
}

#[test]
fn an_unnormalised_capabilities_path_is_refused_naming_the_form_to_write() {
    for (given, normal) in [
        ("/api//caps", "/api/caps"),
        ("/api/./caps", "/api/caps"),
        ("/%61pi/caps", "/api/caps"),
        ("/api/x/../caps", "/api/caps"),
        ("/api;v=1/caps", "/api/caps"),
        ("/api/caps?x=1", "/api/caps"),
        ("/api/caps#top", "/api/caps"),
        ("/api/caf\u{e9}", "/api/caf%C3%A9"),
    ] {
        let json = alloc::format!(r#"{{"rules":[],"capabilities":{{"path":"{given}"}}}}"#);
        assert_eq!(fields_of(&json), [(None, "capabilities.path".into())], "{given}");
        let errs = errors_of(&json);
        assert!(errs[0].contains(&alloc::format!("write \"{normal}\"")), "{given}: {errs:?}");
    }
    assert_eq!(fields_of(r#"{"rules":[],"capabilities":{"path":"/a/%zz"}}"#), [(None, "capabilities.path".into())]);
    let normal = RuleSet::from_json(r#"{"rules":[],"capabilities":{"path":"/api/caps/"}}"#).unwrap();
    assert_eq!(normal.capabilities_path(), Some("/api/caps/"));
}

#[test]
fn the_capabilities_answer_is_asked_for_by_any_spelling_of_its_path() {
    let set = RuleSet::from_json(r#"{"rules":[],"capabilities":{"path":"/api/caps"}}"#).unwrap();
    for asked in ["/api/caps", "/API/Caps", "/api/caps/", "/api//caps", "/%61pi/caps", "/api;x/caps", "/x/../api/caps"]
    {
        assert!(set.is_capabilities_path(asked), "{asked}");
    }
    for other in ["/api/caps//x", "/api/capsx", "/api", "/api/caps/x", "/api/%zz"] {
        assert!(!set.is_capabilities_path(other), "{other}");
    }
    let slash = RuleSet::from_json(r#"{"rules":[],"capabilities":{"path":"/caps/"}}"#).unwrap();
    assert!(slash.is_capabilities_path("/caps") && slash.is_capabilities_path("/caps/"));
    let off = RuleSet::from_json(r#"{"rules":[],"capabilities":false}"#).unwrap();
    assert!(!off.is_capabilities_path(DEFAULT_CAPABILITIES_PATH));
    assert!(RuleSet::from_json(REFERENCE).unwrap().is_capabilities_path("/api/capabilities/"));
}

#[test]
fn a_lease_on_an_isolate_scoped_upstream_is_refused() {
    let upstream = |extra: &str| {
        alloc::format!(r#"{{"rules":[],"upstreams":[{{"id":"u","match":{{}},"max_in_flight":1{extra}}}]}}"#)
    };
    for extra in [r#","lease":10"#, r#","lease":10,"scope":"isolate""#] {
        assert_eq!(fields_of(&upstream(extra)), [(Some("upstreams[0] (\"u\")".into()), "lease".into())], "{extra}");
        assert!(errors_of(&upstream(extra))[0].contains("lease is only used with scope \"fleet\""));
    }
    let fleet = RuleSet::from_json(&upstream(r#","lease":10,"scope":"fleet""#)).unwrap();
    assert_eq!(fleet.upstreams()[0].lease, Span::from_secs(10));
    assert!(RuleSet::from_json(&upstream("")).is_ok(), "no lease, isolate scope");
}

#[test]
fn ids_differing_only_in_ascii_case_are_refused_for_rules_upstreams_and_sources() {
    let rule = |id: &str| {
        alloc::format!(
            r#"{{"id":"{id}","match":{{}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}}"#
        )
    };
    let json = alloc::format!(r#"{{"rules":[{},{}]}}"#, rule("api"), rule("API"));
    assert_eq!(fields_of(&json), [(Some("rules[1] (\"API\")".into()), "id".into())]);
    assert!(errors_of(&json)[0].contains("\"API\" is an earlier rule's id, \"api\", in other case"));
    let json = alloc::format!(r#"{{"rules":[{},{}]}}"#, rule("api"), rule("api"));
    assert_eq!(fields_of(&json), [(Some("rules[1] (\"api\")".into()), "id".into())]);

    let json = r#"{"rules":[],"upstreams":[{"id":"Overpass","match":{},"max_in_flight":1},
        {"id":"overpass","match":{},"max_in_flight":1}]}"#;
    assert_eq!(fields_of(json), [(Some("upstreams[1] (\"overpass\")".into()), "id".into())]);

    let json = r#"{"rules":[],"pre_read":{"source_bytes_per_second":10,"sources":[
        {"id":"hooks","match":{}},{"id":"Hooks","match":{}}]}}"#;
    assert_eq!(fields_of(json), [(None, "pre_read.sources[1].id".into())]);
    assert!(errors_of(json)[0].contains("\"Hooks\" is an earlier source's id, \"hooks\""));
}

#[test]
fn a_refusal_body_longer_than_cloudflare_allows_is_refused_naming_response_content() {
    let body = |n: usize| {
        one_rule(&alloc::format!(r#""period":1,"requests_per_period":1,"response":{{"content":"{}"}}"#, "x".repeat(n)))
    };
    let set = RuleSet::from_json(&body(MAX_RESPONSE_BYTES)).unwrap();
    assert_eq!(set.rules()[0].response.body.as_ref().map(|(_, b)| b.len()), Some(MAX_RESPONSE_BYTES));
    assert_eq!(
        fields_of(&body(MAX_RESPONSE_BYTES + 1)),
        [(Some("rules[0] (\"api\")".into()), "response.content".into())]
    );
    let five_mb = errors_of(&body(5_000_000));
    assert!(five_mb[0].contains("is 5000000 bytes long; at most 30000 are allowed"), "{:?}", &five_mb[0][..200]);
    assert!(five_mb[0].len() < 200, "the message does not repeat the body");
}

#[test]
fn every_other_string_of_a_rules_file_has_a_bound_named_by_its_field() {
    let long = |n: usize| "a".repeat(n);
    let rule_with = |fields: &str| one_rule(&alloc::format!(r#""period":1,"requests_per_period":1,{fields}"#));
    let in_rule = |field: &str| [(Some(String::from("rules[0] (\"api\")")), String::from(field))];
    let cases = [
        (rule_with(&alloc::format!(r#""description":"{}""#, long(MAX_DESCRIPTION_BYTES + 1))), "description"),
        (
            rule_with(&alloc::format!(
                r#""response":{{"content":"x","content_type":"text/{}"}}"#,
                long(MAX_HEADER_BYTES)
            )),
            "response.content_type",
        ),
        (
            alloc::format!(
                r#"{{"rules":[{{"id":"api","match":{{"path":{{"starts_with":"/{}"}}}},"characteristics":["ip.src"],"period":1,"requests_per_period":1}}]}}"#,
                long(MAX_PATH_BYTES)
            ),
            "match.path.starts_with",
        ),
        (
            alloc::format!(
                r#"{{"rules":[{{"id":"api","match":{{}},"characteristics":["http.request.headers[\"{}\"]"],"period":1,"requests_per_period":1}}]}}"#,
                long(MAX_HEADER_BYTES + 1)
            ),
            "characteristics",
        ),
    ];
    for (json, field) in &cases {
        assert_eq!(fields_of(json), in_rule(field), "{field}");
    }
    // At the bound, each is accepted.
    assert!(
        RuleSet::from_json(&rule_with(&alloc::format!(r#""description":"{}""#, long(MAX_DESCRIPTION_BYTES)))).is_ok()
    );
    let upstream = alloc::format!(
        r#"{{"rules":[],"upstreams":[{{"id":"u","description":"{}","match":{{}},"max_in_flight":1}}]}}"#,
        long(MAX_DESCRIPTION_BYTES + 1)
    );
    assert_eq!(fields_of(&upstream), [(Some("upstreams[0] (\"u\")".into()), "description".into())]);
    let caps = alloc::format!(r#"{{"rules":[],"capabilities":{{"path":"/{}"}}}}"#, long(MAX_PATH_BYTES));
    assert_eq!(fields_of(&caps), [(None, "capabilities.path".into())]);
    let header =
        alloc::format!(r#"{{"rules":[],"tenants":{{"match":{{}},"key_header":"{}"}}}}"#, long(MAX_HEADER_BYTES + 1));
    assert_eq!(fields_of(&header), [(None, "tenants.key_header".into())]);
    let tenant = long(crate::edge::tenants::MAX_TENANT_BYTES + 1);
    let limits = alloc::format!(
        r#"{{"rules":[],"tenants":{{"match":{{}},"tenant_header":"t","default":{{"rate":1,"burst":1}},"limits":{{"{tenant}":{{"rate":1,"burst":1}}}}}}}}"#
    );
    assert_eq!(fields_of(&limits), [(None, "tenants.limits".into())]);
    assert_eq!(fields_of(&key_tenants(&alloc::format!(r#""{HASH}":"{tenant}""#))), [(None, "tenants.keys".into())]);
}

fn egress_file(providers: &str) -> String {
    alloc::format!(r#"{{"rules":[],"egress":{{"providers":[{providers}]}}}}"#)
}

#[test]
fn an_egress_section_reads_every_provider_field_with_the_seed_defaults() {
    let set = RuleSet::from_json(&egress_file(
        r#"{"id":"overpass","mirrors":["https://overpass-api.de/api/","https://overpass.kumi.systems/api"],"max_in_flight":2},
           {"id":"weather","mirrors":"https://api.open-meteo.com/v1/","max_in_flight":4,"weight":"open-meteo",
            "weight_per_minute":550,"cache":{"ttl_s":900},"scope":"fleet","lease":90},
           {"id":"nominatim","mirrors":["https://nominatim.openstreetmap.org/"],"max_in_flight":1,
            "min_interval_ms":3500,"user_agent":"app/1.0 (ops@example.com)","max_wait":10},
           {"id":"wildfires","mirrors":["https://services3.arcgis.com/x/"],"max_in_flight":1,
            "cache":{"ttl_s":600,"refresh":"behind","retry_after_failure_s":60}}"#,
    ))
    .unwrap();
    let egress = set.egress().unwrap();
    assert_eq!(egress.prefix, "/egress/");
    let [overpass, weather, nominatim, wildfires] = &egress.providers[..] else { panic!("four providers") };
    assert_eq!(overpass.mirrors[1].url(), "https://overpass.kumi.systems/api/");
    assert_eq!(overpass.max_wait, Span::from_secs(30), "UPSTREAM_BUDGET_WAIT_S");
    assert_eq!((overpass.min_interval, overpass.weight, overpass.cache), (Span::ZERO, None, None));
    assert_eq!(overpass.retry_after_failure, Span::from_secs(60));
    assert_eq!((weather.weight, weather.weight_per_minute), (Some(crate::edge::egress::Weigh::OpenMeteo), Some(550)));
    assert_eq!((weather.scope, weather.lease), (BudgetScope::Fleet, Span::from_secs(90)));
    let cache = weather.cache.unwrap();
    assert_eq!((cache.ttl, cache.refresh_behind, cache.stale_if_error), (Span::from_secs(900), false, false));
    assert_eq!(nominatim.min_interval, Span::from_millis(3_500));
    assert_eq!(nominatim.user_agent.as_deref(), Some("app/1.0 (ops@example.com)"));
    assert_eq!(nominatim.max_wait, Span::from_secs(10));
    assert!(wildfires.cache.unwrap().refresh_behind);
    let caps = set.capabilities_json(|_| 0);
    assert!(caps.contains(r#""id":"weather""#) && caps.contains(r#""weight_per_minute":550"#), "{caps}");
    assert!(!caps.contains("open-meteo.com"), "mirror addresses are not published: {caps}");
}

#[test]
fn egress_problems_name_the_provider_and_the_field() {
    // (provider, the field named, what the message says where its wording is the point)
    let cases: &[(&str, &str, &str)] = &[
        (r#"{"id":"a","max_in_flight":1}"#, "mirrors", ""),
        (r#"{"id":"a","mirrors":["ftp://x.example/"],"max_in_flight":1}"#, "mirrors[0]", ""),
        (r#"{"id":"a","mirrors":["https://u@x.example/"],"max_in_flight":1}"#, "mirrors[0]", "user name"),
        (
            r#"{"id":"a","mirrors":["https://x.example/","https://X.example"],"max_in_flight":1}"#,
            "mirrors[1]",
            "listed twice",
        ),
        (r#"{"id":"a","mirrors":["https://x.example/"]}"#, "max_in_flight", ""),
        (
            r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"weight":"open-meteo"}"#,
            "weight_per_minute",
            "",
        ),
        (
            r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"weight":"bytes","weight_per_minute":5}"#,
            "weight",
            "",
        ),
        (r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"max_wait":301}"#, "max_wait", ""),
        (r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"user_agent":"bad\nua"}"#, "user_agent", ""),
        (r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"cache":{}}"#, "cache.ttl_s", ""),
        (
            r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"cache":{"ttl_s":1,"refresh":"now"}}"#,
            "cache.refresh",
            "",
        ),
        (r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1,"colour":1}"#, "colour", ""),
        (r#"{"id":"permit","mirrors":["https://x.example/"],"max_in_flight":1}"#, "id", "permit route"),
    ];
    for (provider, field, says) in cases {
        let error = first_error(&egress_file(provider));
        assert!(error.rule.as_deref().is_some_and(|r| r.starts_with("egress.providers[0]")), "{provider}: {error}");
        assert_eq!(error.field, *field, "{provider}: {error}");
        assert!(error.message.contains(says), "{provider}: expected {says} in {error}");
    }
    let twice = errors_of(&egress_file(
        r#"{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1},{"id":"A","mirrors":["https://y.example/"],"max_in_flight":1}"#,
    ));
    assert!(twice.join("\n").contains("ignoring ASCII case"), "{twice:?}");
    let prefix = errors_of(r#"{"rules":[],"egress":{"prefix":"/a/../b/","providers":[]}}"#);
    assert!(prefix.join("\n").contains("\"prefix\""), "{prefix:?}");
}

#[test]
fn an_egress_weight_is_conservative_by_name_and_the_servers_by_request() {
    let weighed = |how: &str| {
        egress_file(&alloc::format!(
            r#"{{"id":"weather","mirrors":["https://x.example/"],"max_in_flight":4,"weight":{how},"weight_per_minute":550}}"#
        ))
    };
    let weigh_of = |how: &str| RuleSet::from_json(&weighed(how)).unwrap().egress().unwrap().providers[0].weight;
    assert_eq!(weigh_of(r#""open-meteo""#), Some(crate::edge::egress::Weigh::OpenMeteo));
    assert_eq!(weigh_of(r#""open-meteo-server""#), Some(crate::edge::egress::Weigh::OpenMeteoServer));
    let set = RuleSet::from_json(&weighed(r#""open-meteo-server""#)).unwrap();
    assert!(set.capabilities_json(|_| 0).contains(r#""weight":"open-meteo-server""#));
    let line = set.summary_lines().into_iter().find(|l| l.starts_with("egress weather:")).unwrap();
    assert!(line.contains("550 weighted calls per rolling minute, weighed by open-meteo-server"), "{line}");
    for unknown in [r#""bytes""#, r#""Open-Meteo""#, "true"] {
        let errors = RuleSet::from_json(&weighed(unknown)).unwrap_err();
        assert_eq!(fields_of(&weighed(unknown)), [(Some("egress.providers[0] (\"weather\")".into()), "weight".into())]);
        assert_eq!(
            errors[0].message,
            alloc::format!(
                "must be \"open-meteo\" (the query's weight as Open-Meteo counts it, conservatively: never below \
                 what its server charges) or \"open-meteo-server\" (by the server's own formula), got {unknown}"
            )
        );
    }
}

#[test]
fn a_provider_spaced_alone_gets_one_call_in_flight_per_mirror() {
    let nominatim = r#"{"id":"nominatim","mirrors":["https://nominatim.openstreetmap.org/"],"min_interval_ms":3500}"#;
    let set = RuleSet::from_json(&egress_file(nominatim)).unwrap();
    let p = &set.egress().unwrap().providers[0];
    assert_eq!((p.max_in_flight, p.min_interval), (1, Span::from_millis(3_500)));
    let line = set.summary_lines().into_iter().find(|l| l.starts_with("egress nominatim:")).unwrap();
    assert_eq!(
        line,
        "egress nominatim: /egress/nominatim/…: 1 in flight per mirror (the default with min_interval_ms) \
         (1 mirror(s)), starts 3500 ms apart, per isolate, waiting up to 30000 ms, each attempt up to 30000 ms"
    );
    let two = r#"{"id":"nominatim","mirrors":["https://x.example/"],"min_interval_ms":3500,"max_in_flight":2}"#;
    let set = RuleSet::from_json(&egress_file(two)).unwrap();
    assert_eq!(set.egress().unwrap().providers[0].max_in_flight, 2, "a given max_in_flight stands");
    assert!(set.summary_lines().iter().any(|l| l.contains(": 2 in flight per mirror (1 mirror(s)), starts")));
}

#[test]
fn a_provider_bounded_by_nothing_is_refused_naming_max_in_flight() {
    let provider =
        |fields: &str| egress_file(&alloc::format!(r#"{{"id":"a","mirrors":["https://x.example/"]{fields}}}"#));
    let named = |field: &str| vec![(Some(String::from("egress.providers[0] (\"a\")")), String::from(field))];
    assert_eq!(fields_of(&provider("")), named("max_in_flight"));
    assert_eq!(fields_of(&provider(r#","min_interval_ms":0"#)), named("max_in_flight"), "spacing of 0 bounds nothing");
    assert_eq!(fields_of(&provider(r#","min_interval_ms":"x""#)), named("min_interval_ms"), "one problem, not two");
    let error = &RuleSet::from_json(&provider("")).unwrap_err()[0];
    assert_eq!(
        error.message,
        "missing; a provider needs max_in_flight or min_interval_ms: without either nothing bounds its calls \
         (max_in_flight: how many may be in flight at once at each mirror, 1 or more; min_interval_ms: the least \
         time between two starts, above 0)"
    );
}

/// A file with no rules and this `log` section.
fn log_file(log: &str) -> String {
    alloc::format!(r#"{{"rules":[],"log":{log}}}"#)
}

const ALLOW: Decision = Decision::Allow { remaining: 3, reset: Span::from_secs(1) };
const DENY: Decision = Decision::Deny { retry_after: Span::from_secs(1) };

/// A draw that must not be taken.
fn no_draw() -> f64 {
    panic!("drew a random number where no sampling applies")
}

#[test]
fn without_log_every_decision_is_logged_and_nothing_is_drawn() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    let log = set.decision_log();
    assert_eq!(*log, DecisionLog { decisions: LoggedDecisions::All, sample: 1.0 });
    assert!(log.is_default() && log.sampled().is_none());
    assert!(log.logs(&ALLOW, no_draw) && log.logs(&DENY, no_draw));
    // Written out as the defaults, or empty, it is the same.
    for section in [r#"{}"#, r#"{"decisions":"all"}"#, r#"{"sample":1}"#, r#"{"decisions":"all","sample":1.0}"#] {
        assert!(RuleSet::from_json(&log_file(section)).unwrap().decision_log().is_default(), "{section}");
    }
    assert!(!set.summary_lines().iter().any(|l| l.starts_with("log:")), "the default is not listed");
}

#[test]
fn log_sections_parse_to_their_setting() {
    let parsed = |section: &str| *RuleSet::from_json(&log_file(section)).unwrap().decision_log();
    assert_eq!(
        parsed(r#"{"decisions":"refusals"}"#),
        DecisionLog { decisions: LoggedDecisions::Refusals, sample: 1.0 }
    );
    assert_eq!(parsed(r#"{"decisions":"none"}"#), DecisionLog { decisions: LoggedDecisions::None, sample: 1.0 });
    assert_eq!(parsed(r#"{"sample":0.1}"#), DecisionLog { decisions: LoggedDecisions::All, sample: 0.1 });
    assert_eq!(
        parsed(r#"{"decisions":"refusals","sample":0.25}"#),
        DecisionLog { decisions: LoggedDecisions::Refusals, sample: 0.25 }
    );
    assert_eq!(parsed(r#"{"sample":1e-6}"#).sample, 1e-6);
    // Beside everything else a file may hold.
    let full = r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src"],"period":10,"requests_per_period":2}],
        "trusted_proxies":["10.0.0.0/8"],"log":{"decisions":"refusals"},"capabilities":false}"#;
    assert_eq!(RuleSet::from_json(full).unwrap().decision_log().decisions, LoggedDecisions::Refusals);
}

#[test]
fn every_log_problem_names_its_field() {
    let cases: &[(&str, &[&str])] = &[
        (r#""refusals""#, &[r#"rules file: field "log": must be an object with decisions, sample, got "refusals""#]),
        (r#"[]"#, &[r#"rules file: field "log": must be an object with decisions, sample, got []"#]),
        (r#"null"#, &[r#"rules file: field "log": must be an object with decisions, sample, got null"#]),
        (
            r#"{"decision":"all","level":"info"}"#,
            &[
                r#"rules file: field "log.decision": unknown field; log has decisions, sample"#,
                r#"rules file: field "log.level": unknown field; log has decisions, sample"#,
            ],
        ),
        (
            r#"{"decisions":"denials"}"#,
            &[r#"rules file: field "log.decisions": must be "all" (the default), "refusals" or "none", got "denials""#],
        ),
        (
            r#"{"decisions":"ALL"}"#,
            &[r#"rules file: field "log.decisions": must be "all" (the default), "refusals" or "none", got "ALL""#],
        ),
        (
            r#"{"decisions":["refusals"]}"#,
            &[
                r#"rules file: field "log.decisions": must be "all" (the default), "refusals" or "none", got ["refusals"]"#,
            ],
        ),
        (
            r#"{"decisions":false}"#,
            &[r#"rules file: field "log.decisions": must be "all" (the default), "refusals" or "none", got false"#],
        ),
        (
            r#"{"decisions":"none","sample":0.5}"#,
            &[
                r#"rules file: field "log.sample": is not used when log.decisions is "none" (no decision is logged); leave it out"#,
            ],
        ),
    ];
    for (section, want) in cases {
        assert_eq!(errors_of(&log_file(section)), *want, "{section}");
    }
    for bad in ["0", "0.0", "-0.5", "1.5", "2", "\"0.1\"", "null", "true", "[0.5]"] {
        assert_eq!(
            errors_of(&log_file(&alloc::format!(r#"{{"sample":{bad}}}"#))),
            [alloc::format!(
                "rules file: field \"log.sample\": must be a number greater than 0 and at most 1, the share of \
                 decisions logged (e.g. 0.01 for one in a hundred), got {bad}"
            )],
            "{bad}"
        );
    }
    // Every problem at once, beside a rule's own.
    let all = errors_of(
        r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src"],"period":0,"requests_per_period":2}],
        "log":{"decisions":"some","sample":0,"x":1}}"#,
    );
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all[3].starts_with("rule rules[0] (\"api\"): field \"period\""), "{all:?}");
    // `log` is one of the file's sections in the message for an unknown one.
    let unknown = errors_of(r#"{"rules":[],"logging":{}}"#);
    assert_eq!(
        unknown,
        ["rules file: field \"logging\": unknown field; the file has rules, upstreams, capabilities, pre_read, \
          tenants, egress, trusted_proxies, log, analytics"]
    );
}

#[test]
fn the_analytics_section_turns_counting_off_or_hashes_identities_and_names_every_problem() {
    let parsed = |section: &str| RuleSet::from_json(&alloc::format!(r#"{{"rules":[],"analytics":{section}}}"#));
    let plain = Analytics { enabled: true, hashed: false, dataset: None };
    assert_eq!(*RuleSet::from_json(REFERENCE).unwrap().analytics(), plain);
    assert_eq!(*parsed("{}").unwrap().analytics(), plain);
    assert_eq!(*parsed(r#"{"identities":"plain"}"#).unwrap().analytics(), plain);
    assert_eq!(*parsed(r#"{"identities":"hashed"}"#).unwrap().analytics(), Analytics { hashed: true, ..plain.clone() });
    let engine = parsed(r#"{"dataset":"DECISIONS"}"#).unwrap().analytics().clone();
    assert_eq!(engine.dataset.as_deref(), Some("DECISIONS"));
    assert_eq!(engine.missing_dataset(|name| name == "DECISIONS"), None);
    let missing = engine.missing_dataset(|_| false).unwrap();
    assert!(missing.contains(r#"[[analytics_engine_datasets]] binding = "DECISIONS""#), "{missing}");
    assert_eq!(plain.missing_dataset(|_| false), None);
    assert!(!parsed("false").unwrap().analytics().enabled);
    let cases: &[(&str, &str)] = &[
        (
            "true",
            r#"rules file: field "analytics": must be {"identities": "plain" | "hashed", "dataset": binding}, or false to count no decisions, got true"#,
        ),
        (
            "null",
            r#"rules file: field "analytics": must be {"identities": "plain" | "hashed", "dataset": binding}, or false to count no decisions, got null"#,
        ),
        (
            r#"{"identity":"hashed"}"#,
            r#"rules file: field "analytics.identity": unknown field; analytics has identities, dataset"#,
        ),
        (
            r#"{"dataset":"RATE_LIMITER"}"#,
            r#"rules file: field "analytics.dataset": must name a Workers Analytics Engine binding (1–64 letters, digits or '_', not starting with a digit, not RATE_LIMITER), got "RATE_LIMITER""#,
        ),
        (
            r#"{"dataset":"9lives"}"#,
            r#"rules file: field "analytics.dataset": must name a Workers Analytics Engine binding (1–64 letters, digits or '_', not starting with a digit, not RATE_LIMITER), got "9lives""#,
        ),
        (
            r#"{"identities":"sha256"}"#,
            r#"rules file: field "analytics.identities": must be "plain" (the default: as counted) or "hashed" (keyed hashes), got "sha256""#,
        ),
    ];
    for (section, want) in cases {
        assert_eq!(errors_of(&alloc::format!(r#"{{"rules":[],"analytics":{section}}}"#)), [*want], "{section}");
    }
}

#[test]
fn which_decisions_are_logged() {
    let log = |decisions, sample| DecisionLog { decisions, sample };
    let all = log(LoggedDecisions::All, 1.0);
    let refusals = log(LoggedDecisions::Refusals, 1.0);
    let none = log(LoggedDecisions::None, 1.0);
    assert!(all.logs(&ALLOW, no_draw) && all.logs(&DENY, no_draw));
    assert!(!refusals.logs(&ALLOW, no_draw) && refusals.logs(&DENY, no_draw));
    assert!(!none.logs(&ALLOW, no_draw) && !none.logs(&DENY, no_draw));
    // A decision the setting leaves out costs no draw, sampled or not.
    let sampled_refusals = log(LoggedDecisions::Refusals, 0.5);
    assert!(!sampled_refusals.logs(&ALLOW, no_draw));
    assert!(!log(LoggedDecisions::None, 0.5).logs(&DENY, no_draw));
    assert!(sampled_refusals.logs(&DENY, || 0.0) && !sampled_refusals.logs(&DENY, || 0.75));
}

#[test]
fn a_sampled_decision_is_logged_when_its_draw_is_below_the_share() {
    let quarter = DecisionLog { decisions: LoggedDecisions::All, sample: 0.25 };
    assert_eq!(quarter.sampled(), Some(0.25));
    for (draw, logged) in [(0.0, true), (0.1, true), (0.249_999, true), (0.25, false), (0.6, false), (0.999_999, false)]
    {
        assert_eq!(quarter.logs(&ALLOW, || draw), logged, "{draw}");
        assert_eq!(quarter.logs(&DENY, || draw), logged, "{draw}");
    }
    // A draw that is not in [0, 1) never logs.
    for draw in [-0.1, 1.0, 7.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(!quarter.logs(&ALLOW, || draw), "{draw}");
    }
    // Draws spread evenly over [0, 1): exactly the share is logged.
    for sample in [0.01, 0.1, 0.25, 0.5, 0.9] {
        let set = DecisionLog { decisions: LoggedDecisions::All, sample };
        let logged = (0..10_000).filter(|i| set.logs(&ALLOW, || f64::from(*i) / 10_000.0)).count();
        assert_eq!(logged as f64, sample * 10_000.0, "{sample}");
    }
    // Pseudo-random draws (a 64-bit LCG's top 53 bits): about the share, well within 4
    // standard deviations of 100,000 draws.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut draw = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let logged = (0..100_000).filter(|_| quarter.logs(&ALLOW, &mut draw)).count();
    assert!((24_450..=25_550).contains(&logged), "{logged} of 100000 at 0.25");
}

#[test]
fn the_summary_lists_a_log_setting_that_is_not_the_default() {
    let line = |section: &str| {
        let lines = RuleSet::from_json(&log_file(section)).unwrap().summary_lines();
        assert!(lines.last().unwrap().starts_with("log: "), "{lines:?}");
        lines.last().unwrap().clone()
    };
    assert_eq!(line(r#"{"decisions":"refusals"}"#), "log: refusals only");
    assert_eq!(line(r#"{"decisions":"none"}"#), "log: no decision lines (store failures and errors are still logged)");
    assert_eq!(
        line(r#"{"sample":0.1}"#),
        "log: every decision, 1 in 10 sampled at random (each line carries \"sample\":0.1)"
    );
    assert_eq!(
        line(r#"{"decisions":"refusals","sample":0.25}"#),
        "log: refusals only, 1 in 4 sampled at random (each line carries \"sample\":0.25)"
    );
    assert_eq!(
        line(r#"{"sample":0.001}"#),
        "log: every decision, 1 in 1000 sampled at random (each line carries \"sample\":0.001)"
    );
    assert_eq!(
        line(r#"{"sample":0.3}"#),
        "log: every decision, a share of 0.3 sampled at random (each line carries \"sample\":0.3)"
    );
}

#[test]
fn an_attempt_at_a_mirror_waits_30_s_for_its_answer_unless_timeout_s_says_otherwise() {
    let one = |extra: &str| {
        egress_file(&alloc::format!(r#"{{"id":"a","mirrors":["https://x.example/"],"max_in_flight":1{extra}}}"#))
    };
    let set = RuleSet::from_json(&one("")).unwrap();
    assert_eq!(set.egress().unwrap().providers[0].timeout, Span::from_secs(30));
    let set = RuleSet::from_json(&one(r#","timeout_s":2.5"#)).unwrap();
    assert_eq!(set.egress().unwrap().providers[0].timeout, Span::from_millis(2_500));
    for bad in [r#","timeout_s":0"#, r#","timeout_s":301"#, r#","timeout_s":"5""#] {
        let fields = fields_of(&one(bad));
        assert_eq!(fields, [(Some("egress.providers[0] (\"a\")".into()), "timeout_s".into())], "{bad}");
    }
}

#[test]
fn the_isolate_s_cache_bytes_are_shared_among_the_providers_that_name_none() {
    const MIB: u64 = 1 << 20;
    let cached = |id: &str, cache: &str| {
        alloc::format!(
            r#"{{"id":"{id}","mirrors":["https://{id}.example/"],"max_in_flight":1,"cache":{{"ttl_s":60{cache}}}}}"#
        )
    };
    let file = egress_file(
        &[
            cached("a", r#","max_bytes":16777216"#),
            cached("b", ""),
            cached("c", r#","post":true"#),
            cached("d", r#","max_entry_bytes":1024"#),
        ]
        .join(","),
    );
    let set = RuleSet::from_json(&file).unwrap();
    let caches: Vec<_> = set.egress().unwrap().providers.iter().map(|p| p.cache.unwrap()).collect();
    let bytes: Vec<u64> = caches.iter().map(|c| c.max_bytes).collect();
    assert_eq!(bytes, [16 * MIB, 16 * MIB / 3, 16 * MIB / 3, 16 * MIB / 3]);
    assert!(bytes.iter().sum::<u64>() <= crate::edge::egress::ISOLATE_CACHE_BYTES);
    let entries: Vec<u64> = caches.iter().map(|c| c.max_entry_bytes).collect();
    assert_eq!(entries, [8 * MIB, 16 * MIB / 3, 16 * MIB / 3, 1024], "8 MiB, or the cache's share when smaller");
    assert_eq!(caches.iter().map(|c| c.post).collect::<Vec<_>>(), [false, false, true, false]);
    let line = set.summary_lines().into_iter().find(|l| l.starts_with("egress c:")).unwrap();
    assert!(
        line.contains("cached (GET and POST) 60 s, refreshed ahead, 5461 KiB in all, answers of up to 5461 KiB"),
        "{line}"
    );
}

#[test]
fn caches_that_would_not_fit_in_one_isolate_are_refused_naming_what_to_lower() {
    let cached = |id: &str, cache: &str| {
        alloc::format!(
            r#"{{"id":"{id}","mirrors":["https://{id}.example/"],"max_in_flight":1,"cache":{{"ttl_s":60{cache}}}}}"#
        )
    };
    let over =
        egress_file(&[cached("a", r#","max_bytes":20000000"#), cached("b", r#","max_bytes":20000000"#)].join(","));
    assert_eq!(fields_of(&over), [(Some("egress".into()), "providers".into())]);
    assert!(errors_of(&over)[0].contains("add up to 40000000 bytes"), "{:?}", errors_of(&over));
    let none_left = egress_file(&[cached("a", r#","max_bytes":33554432"#), cached("b", "")].join(","));
    assert!(errors_of(&none_left)[0].contains("leaving nothing for the caches that give none"));
    let entry = egress_file(&cached("a", r#","max_bytes":1000,"max_entry_bytes":2000"#));
    assert_eq!(fields_of(&entry), [(Some("egress".into()), "providers.a.cache.max_entry_bytes".into())]);
    let unknown = egress_file(&cached("a", r#","methods":["POST"]"#));
    assert_eq!(fields_of(&unknown), [(Some("egress.providers[0] (\"a\")".into()), "cache.methods".into())]);
}

#[test]
fn a_rule_counts_in_a_durable_object_unless_it_names_another_store() {
    let set = RuleSet::from_json(REFERENCE).unwrap();
    assert_eq!(set.rules()[0].store, Store::DurableObject);
    let set = RuleSet::from_json(&one_rule(r#""period": 10, "requests_per_period": 20, "store": "isolate""#)).unwrap();
    assert!(matches!(set.rules()[0].store, Store::Isolate { max_keys } if max_keys > 1_000));
    let set = RuleSet::from_json(&one_rule(
        r#""period": 60, "requests_per_period": 100, "store": "cloudflare", "binding": "API_LIMITER""#,
    ))
    .unwrap();
    assert_eq!(set.rules()[0].store, Store::Cloudflare { binding: "API_LIMITER".into() });
    // the binding's own way of counting: windows of its period
    assert_eq!(
        set.rules()[0].algorithm,
        Algorithm::FixedWindow { requests_per_period: 100, period: Span::from_secs(60) }
    );
    let e = first_error(&one_rule(r#""period": 10, "requests_per_period": 20, "store": "redis""#));
    assert_eq!(e.field, "store");
    assert!(e.message.contains("\"durable_object\" (the default"), "{e}");
}

#[test]
fn what_the_cloudflare_binding_cannot_do_is_refused_naming_the_field() {
    let cf = |fields: &str| {
        first_error(&one_rule(&alloc::format!(r#""store": "cloudflare", "binding": "LIMITER", {fields}"#)))
    };
    let e = cf(r#""period": 30, "requests_per_period": 20"#);
    assert_eq!((e.rule.as_deref(), e.field.as_str()), (rule0("api").as_deref(), "period"));
    assert!(e.message.contains("10 or 60 s only, got 30"), "{e}");
    let e = cf(r#""algorithm": "sliding_log", "period": 10, "requests_per_period": 20"#);
    assert_eq!(e.field, "algorithm");
    assert!(e.message.contains("counts as the binding does"), "{e}");
    let e = cf(r#""algorithm": "token_bucket", "rate": 2, "burst": 4"#);
    assert_eq!(e.field, "algorithm");
    // no binding, or a binding on another store, or a name env cannot have
    let e = first_error(&one_rule(r#""store": "cloudflare", "period": 10, "requests_per_period": 20"#));
    assert_eq!(e.field, "binding");
    assert!(e.message.contains("[[ratelimits]]"), "{e}");
    let e = first_error(&one_rule(r#""binding": "LIMITER", "period": 10, "requests_per_period": 20"#));
    assert_eq!(e.field, "binding");
    assert!(e.message.contains("this one's store is \"durable_object\""), "{e}");
    let e = first_error(&one_rule(r#""store": "cloudflare", "binding": "9x", "period": 10, "requests_per_period": 1"#));
    assert_eq!(e.field, "binding");
    assert!(e.message.contains("not starting with a digit") && e.message.contains("got \"9x\""), "{e}");
    let e = first_error(&one_rule(
        r#""store": "cloudflare", "binding": "RATE_LIMITER", "period": 10, "requests_per_period": 20"#,
    ));
    assert!(e.message.contains("Durable Object binding"), "{e}");
    // a mitigation_timeout is held by the isolate's block cache, and said so
    let set = RuleSet::from_json(&one_rule(
        r#""store": "cloudflare", "binding": "LIMITER", "period": 10, "requests_per_period": 20, "mitigation_timeout": 30"#,
    ))
    .unwrap();
    assert!(set.summary_lines()[0].contains("the block is held by each isolate's cache"), "{:?}", set.summary_lines());
}

#[test]
fn two_rules_on_one_binding_must_count_alike() {
    let rule = |id: &str, n: u32| {
        alloc::format!(
            r#"{{"id": "{id}", "match": {{}}, "characteristics": ["ip.src"], "store": "cloudflare",
                "binding": "LIMITER", "period": 10, "requests_per_period": {n}}}"#
        )
    };
    let same = alloc::format!(r#"{{"rules": [{}, {}]}}"#, rule("a", 20), rule("b", 20));
    let set = RuleSet::from_json(&same).unwrap();
    assert_eq!(set.rate_limit_bindings().len(), 1);
    assert_eq!(set.rate_limit_bindings()[0].2, ["a", "b"]);
    let differ = alloc::format!(r#"{{"rules": [{}, {}]}}"#, rule("a", 20), rule("b", 30));
    let e = first_error(&differ);
    assert_eq!((e.rule.as_deref(), e.field.as_str()), (Some("rules[1] (\"b\")"), "binding"));
    assert!(e.message.contains("counts rule \"a\" at 20 per 10 s"), "{e}");
}

#[test]
fn isolate_tables_share_a_fixed_amount_of_memory() {
    let two = r#"{"rules": [
        {"id": "a", "match": {}, "characteristics": ["ip.src"], "store": "isolate", "period": 10, "requests_per_period": 20},
        {"id": "b", "match": {}, "characteristics": ["ip.src"], "store": "isolate", "period": 10, "requests_per_period": 10000}]}"#;
    let set = RuleSet::from_json(two).unwrap();
    let bytes: usize = set
        .rules()
        .iter()
        .map(|r| match r.store {
            Store::Isolate { max_keys } => max_keys * isolate_key_bytes(&r.algorithm),
            _ => 0,
        })
        .sum();
    assert!(bytes <= ISOLATE_STORE_BYTES, "{bytes}");
    let Store::Isolate { max_keys: big_logs } = set.rules()[1].store else { panic!() };
    assert!((1..100).contains(&big_logs), "a 10000-request log per key leaves room for few keys: {big_logs}");
    // and the JSON answer says where each rule counts
    let json = set.capabilities_json(|_| 0);
    assert!(json.contains("\"scope\":\"isolate\",\"store\":\"isolate\""), "{json}");
}

#[test]
fn a_missing_rate_limit_binding_is_named_with_the_lines_to_add() {
    let set = RuleSet::from_json(&one_rule(
        r#""store": "cloudflare", "binding": "SEARCH", "period": 60, "requests_per_period": 100"#,
    ))
    .unwrap();
    let why = set.missing_rate_limit_binding(|_| false).unwrap();
    assert!(
        why.starts_with("env has no Workers Rate Limiting binding \"SEARCH\", which rule \"api\" counts on."),
        "{why}"
    );
    assert!(why.contains("simple = { limit = 100, period = 60 }"), "{why}");
    // the Durable Object binding is then needed by nothing
    assert_eq!(set.without_binding("RATE_LIMITER"), WithoutBinding::Unused);
}

#[test]
fn tenants_counted_in_the_isolate_need_the_durable_object_for_their_overrides_only() {
    let text = |scope: &str| {
        alloc::format!(
            r#"{{"rules": [], "tenants": {{"match": {{}}, "tenant_header": "x-tenant", "default": {{"rate": 1, "burst": 2}},
                "scope": "{scope}"}}}}"#
        )
    };
    let set = RuleSet::from_json(&text("isolate")).unwrap();
    assert_eq!(set.tenants().unwrap().scope, crate::edge::tenants::TenantScope::Isolate);
    let WithoutBinding::Refuse(why) = set.without_binding("RATE_LIMITER") else { panic!("refused") };
    assert!(why.contains("count in: the tenants' runtime overrides."), "{why}");
    let e = first_error(&text("everywhere"));
    assert_eq!(e.field, "tenants.scope");
    assert!(e.message.contains("\"colo\" (the default), \"fleet\" or \"isolate\""), "{e}");
}

#[test]
fn a_schema_reference_is_read_by_editors_and_ignored_by_the_edge() {
    let with = r#"{"$schema": "./node_modules/sluicegate/schema/rules.json", "rules": []}"#;
    assert_eq!(RuleSet::from_json(with).unwrap(), RuleSet::from_json(r#"{"rules": []}"#).unwrap());
    assert_eq!(first_error(r#"{"$schema": 1, "rules": []}"#).field, "$schema");
}
