//! Each rule's store as the rules stage uses it: a Durable Object asked per key, the
//! Cloudflare binding asked for its outcome, or the isolate's own count, asked nothing.

use super::tests::{drive, get, header, Request};
use super::*;
use crate::core::time::{Instant, Span};
use crate::edge::rules::{RuleSet, Store};
use alloc::format;
use alloc::string::String;

fn one(fields: &str) -> RuleSet {
    RuleSet::from_json(&format!(
        r#"{{"rules": [{{"id": "api", "match": {{"path": {{"starts_with": "/api/"}}}}, {fields}}}]}}"#
    ))
    .unwrap()
}

fn never(rule: &crate::edge::rules::Rule, _: &str) -> Answer {
    panic!("rule {} counts in the isolate: nothing is asked", rule.id)
}

#[test]
fn an_isolate_rule_is_counted_without_a_question_and_each_isolate_counts_alone() {
    let set = one(r#""characteristics": ["ip.src"], "period": 10, "requests_per_period": 3, "store": "isolate""#);
    let mut first = Isolate::default();
    let t = Instant::from_secs(100);
    for n in 0..3 {
        let (status, asked, headers, _) = drive(&set, &mut first, &get("/api/a"), t, &mut never);
        assert_eq!((status, asked.len()), (None, 0));
        assert_eq!(header(&headers, "ratelimit"), Some(format!("\"api\";r={};t=10", 2 - n).as_str()));
    }
    let (status, _, headers, _) = drive(&set, &mut first, &get("/api/a"), t, &mut never);
    assert_eq!(status, Some(429));
    assert_eq!(header(&headers, "retry-after"), Some("10"));
    // Another isolate has its own count: two isolates admit up to twice the limit.
    let mut second = Isolate::default();
    for _ in 0..3 {
        assert_eq!(drive(&set, &mut second, &get("/api/a"), t, &mut never).0, None);
    }
    assert_eq!(drive(&set, &mut second, &get("/api/a"), t, &mut never).0, Some(429));
    // ... and a period later the key is counted afresh.
    assert_eq!(drive(&set, &mut first, &get("/api/a"), t + Span::from_secs(10), &mut never).0, None);
}

#[test]
fn a_flood_of_invented_keys_stays_within_the_isolate_table_and_fails_as_the_rule_says() {
    // A 10000-request log per key: the table's share of memory holds few keys.
    for (failure, status) in [("closed", Some(503)), ("open", None)] {
        let set = one(&format!(
            r#""characteristics": ["http.request.headers[\"x-api-key\"]"], "period": 60, "requests_per_period": 10000,
               "store": "isolate", "on_store_failure": "{failure}""#
        ));
        let Store::Isolate { max_keys } = set.rules()[0].store else { panic!("an isolate rule") };
        let mut isolate = Isolate::default();
        let t = Instant::from_secs(5);
        let mut refused = 0;
        for n in 0..max_keys * 10 {
            let key = format!("invented-{n}");
            let r = Request { method: "GET", path: "/api/a", ip: "192.0.2.1", colo: "AMS", key: Some(&key) };
            let (got, _, headers, _) = drive(&set, &mut isolate, &r, t, &mut never);
            if n < max_keys {
                assert_eq!(got, None, "key {n} of {max_keys} has room");
            } else {
                assert_eq!(got, status, "key {n}: the table is full of keys still counting");
                if status.is_none() {
                    assert_eq!(header(&headers, "sluicegate-degraded"), Some("api"));
                }
                refused += 1;
            }
            assert!(isolate.counted_keys() <= max_keys);
        }
        assert_eq!(refused, max_keys * 9);
        // A key already counted keeps its count meanwhile.
        let known = Request { method: "GET", path: "/api/a", ip: "192.0.2.1", colo: "AMS", key: Some("invented-0") };
        assert_eq!(drive(&set, &mut isolate, &known, t, &mut never).0, None);
        // Once the keys are idle (a period on), new keys are counted again.
        let fresh = Request { method: "GET", path: "/api/a", ip: "192.0.2.1", colo: "AMS", key: Some("late") };
        assert_eq!(drive(&set, &mut isolate, &fresh, t + Span::from_secs(61), &mut never).0, None);
    }
}

fn outcome(admitted: bool) -> Answer {
    Answer::Outcome { admitted, at: Instant::from_secs(50) }
}

#[test]
fn the_binding_is_asked_with_the_counting_key_and_no_remaining_is_invented() {
    let set = one(r#""characteristics": ["ip.src"], "period": 10, "requests_per_period": 20, "store": "cloudflare",
           "binding": "API_LIMITER""#);
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(50);
    let mut keys = alloc::vec::Vec::new();
    let (status, asked, headers, _) = drive(&set, &mut isolate, &get("/api/a"), t, &mut |_, key| {
        keys.push(String::from(key));
        outcome(true)
    });
    assert_eq!((status, asked.len()), (None, 1));
    assert_eq!(
        keys,
        [set.rules()[0].counting_key(
            &crate::edge::rules::RequestFacts {
                method: "GET",
                host: "example.com",
                path: "/api/a",
                colo: Some("AMS"),
                identity: crate::edge::identity::client_identity(&crate::edge::identity::Sources {
                    cf_connecting_ip: Some("198.51.100.7"),
                    x_forwarded_for: None,
                    peer: None
                }),
            },
            |_| None
        )]
    );
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"api\";q=20;w=10"));
    assert_eq!(header(&headers, "ratelimit"), None, "the binding does not say how many remain");
    // A refusal: Retry-After of one period (its window turns within it), r=0 known.
    let (status, _, headers, _) = drive(&set, &mut isolate, &get("/api/a"), t, &mut |_, _| outcome(false));
    assert_eq!(status, Some(429));
    assert_eq!(header(&headers, "retry-after"), Some("10"));
    assert_eq!(header(&headers, "ratelimit"), Some("\"api\";r=0;t=10"));
    // No block without a mitigation_timeout: the binding is asked again.
    let (_, asked, ..) = drive(&set, &mut isolate, &get("/api/a"), t, &mut |_, _| outcome(true));
    assert_eq!(asked.len(), 1);
}

#[test]
fn a_binding_rule_s_block_is_held_by_the_isolate_and_a_failing_binding_follows_on_store_failure() {
    let set = one(r#""characteristics": ["ip.src"], "period": 60, "requests_per_period": 5, "store": "cloudflare",
           "binding": "API_LIMITER", "mitigation_timeout": 300, "on_store_failure": "closed""#);
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(50);
    let (status, _, headers, _) = drive(&set, &mut isolate, &get("/api/a"), t, &mut |_, _| outcome(false));
    assert_eq!((status, header(&headers, "retry-after")), (Some(429), Some("300")));
    // The block holds in this isolate without asking the binding, until it ends.
    let (status, asked, ..) =
        drive(&set, &mut isolate, &get("/api/a"), t + Span::from_secs(299), &mut |_, _| outcome(true));
    assert_eq!((status, asked.len()), (Some(429), 0));
    let (status, asked, ..) =
        drive(&set, &mut isolate, &get("/api/a"), t + Span::from_secs(300), &mut |_, _| outcome(true));
    assert_eq!((status, asked.len()), (None, 1));
    let failing = |_: &crate::edge::rules::Rule, _: &str| Answer::Failed("the binding threw".into());
    let (status, ..) = drive(&set, &mut isolate, &get("/api/a"), t + Span::from_secs(301), &mut { failing });
    assert_eq!(status, Some(503));
}
