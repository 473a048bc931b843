//! The simulator predicts what a rule's store admits before a user picks one: the same rule
//! counted in a Durable Object (exact), on the Cloudflare binding (per location) and in the
//! isolate (per isolate), over traffic spread across locations and isolates.
#![cfg(not(target_arch = "wasm32"))]

use sluicegate::sim::{self, Config, Report};

/// One abusive client at 5 requests per second against "20 per 10 s per address", the rule
/// counted in `store`, the edge's traffic spread as `spread` says.
fn run(store: &str, spread: &str) -> Report {
    let cfg = Config::from_json(&format!(
        r#"{{"duration_s": 60, "edge_spread": {spread}, "edge_rules": {{"rules": [
            {{"id": "api", "match": {{"path": {{"starts_with": "/api/"}}}}, "characteristics": ["ip.src"],
              "period": 10, "requests_per_period": 20, {store}}}]}},
          "clients": [{{"name": "scraper", "kind": "abusive", "rps": 5, "endpoint": "/api/search"}}]}}"#
    ))
    .unwrap();
    sim::analyse(&cfg, sim::generate(&cfg).unwrap()).unwrap()
}

#[test]
fn a_durable_object_is_exact_however_the_traffic_is_spread() {
    let report = run(r#""store": "durable_object""#, r#"{"isolates": 8, "locations": 3}"#);
    let api = &report.policies[0];
    assert_eq!((api.worst_case_per_window, api.observed_max_per_window), (20.0, 20));
    let md = report.to_markdown().unwrap();
    assert!(md.contains("| api | durable_object | exact (one per key) | 20 per 10s | 20 | 20 |"), "{md}");
}

#[test]
fn isolate_counts_overshoot_by_the_isolates_and_the_report_says_how_far() {
    let one = run(r#""store": "isolate""#, "null");
    assert_eq!(one.policies[0].observed_max_per_window, 20, "one isolate is exact");
    let eight = run(r#""store": "isolate""#, r#"{"isolates": 8}"#);
    let api = &eight.policies[0];
    assert_eq!(api.worst_case_per_window, 160.0);
    // 50 sent per 10 s, 8 isolates of 20 each: every one gets through
    assert_eq!(api.observed_max_per_window, 50);
    let md = eight.to_markdown().unwrap();
    assert!(md.contains("| api | isolate | 8 isolates × 1 location | 20 per 10s | 160 | 50 |"), "{md}");
    assert!(eight.to_json().contains("\"store\": \"isolate\""));
    // two isolates: up to 40 of the 50
    let two = run(r#""store": "isolate""#, r#"{"isolates": [1, 1]}"#);
    assert_eq!(two.policies[0].observed_max_per_window, 40);
}

#[test]
fn the_binding_counts_per_location_and_its_isolates_share_it() {
    let store = r#""store": "cloudflare", "binding": "API_LIMITER""#;
    // The binding counts fixed windows: up to twice the limit across a window's boundary.
    let one = run(store, r#"{"isolates": 4}"#);
    assert_eq!(one.policies[0].worst_case_per_window, 40.0);
    assert!(one.policies[0].observed_max_per_window <= 40);
    let three = run(store, r#"{"locations": 3, "isolates": 4}"#);
    assert_eq!(three.policies[0].worst_case_per_window, 120.0);
    assert_eq!(three.policies[0].observed_max_per_window, 50, "three locations of 20 let all 50 through");
    assert!(three.to_markdown().unwrap().contains("| api | cloudflare | 3 locations |"));
}

#[test]
fn a_bad_spread_is_refused_naming_the_field() {
    let cfg = Config::from_json(
        r#"{"duration_s": 5, "edge_spread": {"isolates": 0}, "edge_rules": {"rules": []},
            "clients": [{"name": "a", "rps": 1, "endpoint": "/"}]}"#,
    );
    let Err(sim::SimError::Input(msg)) = cfg else { panic!("refused") };
    assert!(msg.starts_with("edge_spread: isolates must be"), "{msg}");
}
