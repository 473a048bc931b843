//! The JavaScript bindings, run in Node and in headless Chromium by `wasm-pack test`.
#![cfg(all(target_arch = "wasm32", feature = "wasm"))]

use js_sys::{Object, Reflect};
use sluicegate::wasm::{client_identity_js, validate_rules, TokenBucket};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &key.into()).unwrap()
}

fn sources(cf: Option<&str>, xff: Option<&str>, peer: Option<&str>) -> JsValue {
    let o = Object::new();
    for (k, v) in [("cfConnectingIp", cf), ("xForwardedFor", xff), ("peer", peer)] {
        if let Some(v) = v {
            Reflect::set(&o, &k.into(), &v.into()).unwrap();
        }
    }
    o.into()
}

#[wasm_bindgen_test]
fn validate_rules_returns_each_rules_policy() {
    let rules = r#"{"rules":[{"id":"api","match":{"path":{"starts_with":"/api/"}},"characteristics":["ip.src","cf.colo.id"],"period":10,"requests_per_period":20,"mitigation_timeout":10}]}"#;
    let out = validate_rules(rules).unwrap();
    assert_eq!(out.length(), 1);
    assert_eq!(get(&out.get(0), "policy").as_string().unwrap(), "\"api\";q=20;w=10");
}

#[wasm_bindgen_test]
fn validate_rules_throws_naming_the_rule_and_field() {
    let bad = r#"{"rules":[{"id":"api","match":{},"characteristics":["ip.src"],"period":0,"requests_per_period":20}]}"#;
    let err: JsValue = validate_rules(bad).unwrap_err().into();
    let message = get(&err, "message").as_string().unwrap();
    assert!(message.contains("rules[0] (\"api\")") && message.contains("\"period\""), "{message}");
}

#[wasm_bindgen_test]
fn client_identity_trusts_only_the_rightmost_forwarded_hop() {
    let a = client_identity_js(sources(None, Some("1.1.1.1, 198.51.100.7"), None)).unwrap();
    let b = client_identity_js(sources(None, Some("2.2.2.2, 198.51.100.7"), None)).unwrap();
    assert_eq!(get(&a, "ip").as_string().unwrap(), "198.51.100.7");
    assert_eq!(get(&a, "source").as_string().unwrap(), "x-forwarded-for");
    assert_eq!(get(&a, "ip"), get(&b, "ip"));
    let v6 = client_identity_js(sources(Some("2001:db8:1:2:3:4:5:6"), None, None)).unwrap();
    assert_eq!(get(&v6, "ip").as_string().unwrap(), "2001:db8:1:2::/64");
    assert!(client_identity_js(sources(None, None, None)).unwrap().is_undefined());
    assert!(client_identity_js(JsValue::from(5)).is_err());
}

#[wasm_bindgen_test]
fn token_bucket_refuses_nan_and_negative_time() {
    let mut bucket = TokenBucket::new(2.0, 1_000.0, 2.0).unwrap();
    assert!(bucket.check(f64::NAN, 1.0).is_err());
    assert!(bucket.check(-1.0, 1.0).is_err());
    assert!(bucket.check(0.0, 1.5).is_err());
    assert!(TokenBucket::new(0.0, 1_000.0, 1.0).is_err());
    assert!(TokenBucket::new(1.0, f64::INFINITY, 1.0).is_err());
}

#[wasm_bindgen_test]
fn token_bucket_admits_the_burst_then_says_when() {
    let mut bucket = TokenBucket::new(2.0, 1_000.0, 2.0).unwrap();
    assert_eq!(get(&bucket.check(10_000.0, 1.0).unwrap(), "allowed"), JsValue::TRUE);
    assert_eq!(get(&bucket.check(10_000.0, 1.0).unwrap(), "allowed"), JsValue::TRUE);
    let denied = bucket.check(10_000.0, 1.0).unwrap();
    assert_eq!(get(&denied, "allowed"), JsValue::FALSE);
    assert_eq!(get(&denied, "retryAfterMs").as_f64().unwrap(), 500.0);
}

#[wasm_bindgen_test]
fn many_instances_can_be_created_and_dropped() {
    for i in 0..10_000 {
        let mut bucket = TokenBucket::new(1.0, 1_000.0, 1.0).unwrap();
        assert_eq!(get(&bucket.check(f64::from(i), 1.0).unwrap(), "allowed"), JsValue::TRUE);
    }
}
