//! The pipeline driven as the Worker drives it, with a script in place of the Durable
//! Objects: what each rule is asked, what the client gets.

use super::counting::{Counts, Stored};
use super::*;
use crate::core::limit::Decision;
use crate::core::time::{Instant, Span};
use crate::edge::identity::{client_identity, Sources};
use crate::edge::redact::KeyedHash;
use crate::edge::rules::{RequestFacts, Rule, RuleSet};
use alloc::string::String;
use alloc::vec::Vec;

const HASH: KeyedHash = KeyedHash::new(7, 11);

/// Two overlapping rules in the shape of the example's: every /api/ request 3 per 10 s per
/// address and colo then blocked 10 s, and a token bucket on GET /api/geocode (burst 2), and a
/// per-key rule on POST /api/orders answering 403 that fails closed.
const RULES: &str = r#"{"rules": [
  {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src", "cf.colo.id"],
   "period": 10, "requests_per_period": 3, "mitigation_timeout": 10},
  {"id": "geocode", "match": {"path": {"equals": "/api/geocode"}, "methods": ["GET"]}, "characteristics": ["ip.src"],
   "algorithm": "token_bucket", "rate": 0.5, "burst": 2, "on_store_failure": "open"},
  {"id": "orders", "match": {"path": {"equals": "/api/orders"}, "methods": ["POST"]},
   "characteristics": ["http.request.headers[\"x-api-key\"]"], "period": 60, "requests_per_period": 1,
   "on_store_failure": "closed", "response": {"status_code": 403}}
]}"#;

fn rules() -> RuleSet {
    RuleSet::from_json(RULES).unwrap()
}

pub(super) struct Request<'a> {
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) ip: &'a str,
    pub(super) colo: &'a str,
    pub(super) key: Option<&'a str>,
}

pub(super) fn get(path: &str) -> Request<'_> {
    Request { method: "GET", path, ip: "198.51.100.7", colo: "AMS", key: None }
}

/// A request's way through the rules: the verdict's status (`None`: admitted), the rules
/// asked, the answer's headers and how many notes the stage wrote.
pub(super) type Driven = (Option<u16>, Vec<String>, Vec<(&'static str, String)>, usize);

/// One request through the rules, each counter answered by `counter` (called with the rule
/// id and the counting key); the verdict's status (`None`: admitted), what was asked, the
/// answer's headers and the notes.
pub(super) fn drive(
    set: &RuleSet,
    isolate: &mut Isolate,
    r: &Request<'_>,
    now: Instant,
    counter: &mut dyn FnMut(&Rule, &str) -> Answer,
) -> Driven {
    let identity = client_identity(&Sources { cf_connecting_ip: Some(r.ip), x_forwarded_for: None, peer: None });
    let facts = RequestFacts { method: r.method, host: "example.com", path: r.path, colo: Some(r.colo), identity };
    let key = r.key.map(String::from);
    let header = move |name: &str| if name == "x-api-key" { key.clone() } else { None };
    let mut check = RulesCheck::new(set, HASH);
    let mut asked = Vec::new();
    let mut notes = 0;
    while let Step::Ask { rule, key } = check.next(isolate, &facts, &header, now) {
        asked.push(rule.id.clone());
        let answer = counter(rule, key);
        check.answer(isolate, answer);
        notes += check.take_notes().len();
    }
    let (verdict, last) = check.finish();
    notes += last.len();
    if let Some((reply, _)) = verdict.reply() {
        return (Some(reply.status), asked, reply.headers, notes);
    }
    match verdict {
        Verdict::Admitted(checked) => (None, asked, checked.headers().0, notes),
        Verdict::Refused { .. } => unreachable!("a refusal has a reply"),
    }
}

fn allow(remaining: u64) -> Answer {
    Answer::Decided { decision: Decision::Allow { remaining, reset: Span::from_secs(1) }, at: Instant::from_secs(5) }
}

fn deny(secs: u64) -> Answer {
    Answer::Decided {
        decision: Decision::Deny { retry_after: Span::from_millis(secs * 1000 - 300) },
        at: Instant::from_secs(5),
    }
}

pub(super) fn header<'h>(headers: &'h [(&'static str, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
}

#[test]
fn every_matching_rule_is_asked_in_file_order_and_the_request_is_admitted_when_all_admit() {
    let set = rules();
    let mut isolate = Isolate::default();
    let (status, asked, headers, _) =
        drive(&set, &mut isolate, &get("/api/geocode"), Instant::from_secs(5), &mut |_, _| allow(1));
    assert_eq!(status, None);
    assert_eq!(asked, ["api", "geocode"]);
    let state = header(&headers, "ratelimit").unwrap();
    assert!(state.contains("\"api\"") && state.contains("\"geocode\""), "{state}");
    // A request no rule matches asks nothing and carries no RateLimit entry.
    let (status, asked, headers, _) =
        drive(&set, &mut isolate, &get("/about"), Instant::from_secs(5), &mut |_, _| allow(1));
    assert_eq!((status, asked.len(), headers.len()), (None, 0, 0));
}

#[test]
fn the_first_refusal_ends_the_evaluation_and_later_rules_never_see_the_request() {
    let set = rules();
    let mut isolate = Isolate::default();
    let (status, asked, headers, _) =
        drive(&set, &mut isolate, &get("/api/geocode"), Instant::from_secs(5), &mut |rule, _| {
            if rule.id == "api" {
                deny(4)
            } else {
                allow(1)
            }
        });
    assert_eq!(status, Some(429));
    assert_eq!(asked, ["api"], "geocode is never asked, so never charged");
    assert_eq!(header(&headers, "retry-after"), Some("4"), "3.7 s rounds up to whole seconds");
    assert_eq!(header(&headers, "cache-control"), Some("no-store"));
}

#[test]
fn a_later_refusal_leaves_the_earlier_rules_charged_and_answers_with_its_own_status() {
    let set = rules();
    let mut isolate = Isolate::default();
    let post = Request { method: "POST", path: "/api/orders", ip: "198.51.100.7", colo: "AMS", key: Some("k1") };
    let (status, asked, headers, _) = drive(&set, &mut isolate, &post, Instant::from_secs(5), &mut |rule, _| {
        if rule.id == "orders" {
            deny(60)
        } else {
            allow(2)
        }
    });
    assert_eq!(status, Some(403), "the rule's own status");
    assert_eq!(asked, ["api", "orders"]);
    let state = header(&headers, "ratelimit").unwrap();
    assert!(state.contains("\"api\""), "the earlier rule's entry is in the refusal: {state}");
}

#[test]
fn a_counter_that_fails_is_passed_by_a_rule_that_fails_open_and_refused_by_one_that_fails_closed() {
    let set = rules();
    let mut isolate = Isolate::default();
    let failed = || Answer::Failed("the counter did not answer within 1000 ms".into());
    let (status, asked, headers, notes) =
        drive(&set, &mut isolate, &get("/api/geocode"), Instant::from_secs(5), &mut |rule, _| {
            if rule.id == "geocode" {
                failed()
            } else {
                allow(1)
            }
        });
    assert_eq!((status, asked.len()), (None, 2));
    assert_eq!(header(&headers, "sluicegate-degraded"), Some("geocode"));
    assert_eq!(isolate.degraded("geocode"), 1, "the capabilities answer counts it");
    assert_eq!(notes, 2, "api's decision and geocode's store failure");

    let post = Request { method: "POST", path: "/api/orders", ip: "198.51.100.7", colo: "AMS", key: Some("k1") };
    let (status, asked, headers, _) = drive(&set, &mut isolate, &post, Instant::from_secs(5), &mut |rule, _| {
        if rule.id == "orders" {
            failed()
        } else {
            allow(1)
        }
    });
    assert_eq!(status, Some(503));
    assert_eq!(asked, ["api", "orders"]);
    assert_eq!(header(&headers, "retry-after"), Some("1"));
    assert_eq!(isolate.degraded("orders"), 0);
}

#[test]
fn a_refusal_is_remembered_by_the_isolate_until_its_block_ends() {
    let set = rules();
    let mut isolate = Isolate::default();
    let mut asks = 0;
    let mut counter = |_: &Rule, _: &str| {
        asks += 1;
        // Blocked 10 s from t = 5 s.
        Answer::Decided { decision: Decision::Deny { retry_after: Span::from_secs(10) }, at: Instant::from_secs(5) }
    };
    assert_eq!(drive(&set, &mut isolate, &get("/api/x"), Instant::from_secs(5), &mut counter).0, Some(429));
    let (status, _, headers, _) = drive(&set, &mut isolate, &get("/api/x"), Instant::from_secs(12), &mut counter);
    assert_eq!(status, Some(429));
    assert_eq!(header(&headers, "retry-after"), Some("3"), "until the counter's block ends");
    // Another colo is another key: asked.
    let other = Request { colo: "LHR", ..get("/api/x") };
    drive(&set, &mut isolate, &other, Instant::from_secs(12), &mut counter);
    // Once the block has ended the counter is asked again.
    drive(&set, &mut isolate, &get("/api/x"), Instant::from_secs(15), &mut counter);
    assert_eq!(asks, 3);
}

#[test]
fn counters_in_memory_count_then_block_as_the_rule_says() {
    let set = rules();
    let mut isolate = Isolate::default();
    let mut counts = Counts::default();
    let mut at = Instant::from_secs(100);
    let mut seen = Vec::new();
    for path in ["/api/geocode", "/api/geocode", "/api/geocode", "/api/x", "/api/geocode"] {
        let now = at;
        let mut counter = |rule: &Rule, key: &str| {
            let counted = counts.check(rule, key, now, Stored::default()).unwrap();
            Answer::Decided { decision: counted.decision, at: now }
        };
        let (status, asked, _, _) = drive(&set, &mut isolate, &get(path), now, &mut counter);
        seen.push((status, asked.join(",")));
        at = at + Span::from_millis(100);
    }
    let expected = [
        (None, "api,geocode"),
        (None, "api,geocode"),
        // The bucket's burst of 2 refuses the third, after the /api/ rule counted it...
        (Some(429), "api,geocode"),
        // ...so the next /api/ request is that rule's fourth in 10 s: refused, and blocked.
        (Some(429), "api"),
        // Blocked: the bucket is not asked (nor charged) while the /api/ rule's block lasts.
        (Some(429), ""),
    ];
    let seen: Vec<(Option<u16>, &str)> = seen.iter().map(|(s, a)| (*s, a.as_str())).collect();
    assert_eq!(seen, expected);
}

#[test]
fn a_stored_block_outlives_a_restart_and_a_changed_rule_starts_afresh() {
    let set = rules();
    let api = set.get("api").unwrap();
    let mut counts = Counts::default();
    let t = Instant::from_secs(50);
    let stored = Stored { block: Some(t + Span::from_secs(4)), count: None };
    assert!(counts.is_new(api, "api|k"));
    let counted = counts.check(api, "api|k", t, stored).unwrap();
    assert_eq!(counted.decision, Decision::Deny { retry_after: Span::from_secs(4) });
    assert_eq!(counted.block_started, None, "the block was restored, not started");
    let mut changed = api.clone();
    changed.mitigation_timeout = Span::from_secs(1);
    let counted = counts.check(&changed, "api|k", t, Stored::default()).unwrap();
    assert!(matches!(counted.decision, Decision::Allow { .. }), "a new rule counts the key afresh");
}

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use alloc::string::ToString;
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug)]
    enum Scripted {
        Allow,
        Deny,
        Fail,
    }

    fn scripted() -> impl Strategy<Value = Scripted> {
        prop_oneof![4 => Just(Scripted::Allow), 1 => Just(Scripted::Deny), 1 => Just(Scripted::Fail)]
    }

    proptest! {
        /// Whatever the counters answer, the rules asked are the matching ones in file order up
        /// to the first that ends the evaluation (a refusal, or a failure of a rule that fails
        /// closed), and the verdict is that rule's.
        #[test]
        fn the_rules_asked_are_a_prefix_ending_at_the_first_that_acts(
            answers in proptest::collection::vec(scripted(), 3),
            method in prop::sample::select(vec!["GET", "POST"]),
            path in prop::sample::select(vec!["/api/geocode", "/api/orders", "/api/x", "/x"]),
        ) {
            let set = rules();
            let mut isolate = Isolate::default();
            let r = Request { method, path, ip: "203.0.113.1", colo: "AMS", key: Some("k") };
            let ids = ["api", "geocode", "orders"];
            let (status, asked, _, _) = drive(&set, &mut isolate, &r, Instant::from_secs(5), &mut |rule, _| {
                let i = ids.iter().position(|id| *id == rule.id).unwrap();
                match answers[i] { Scripted::Allow => allow(1), Scripted::Deny => deny(2), Scripted::Fail => Answer::Failed("x".to_string()) }
            });
            let facts_match: Vec<&str> = ids.iter().copied().filter(|id| {
                let rule = set.get(id).unwrap();
                rule.matcher.methods.iter().all(|m| m == method) && match *id {
                    "api" => path.starts_with("/api/"),
                    "geocode" => path == "/api/geocode",
                    _ => path == "/api/orders",
                }
            }).collect();
            let mut expected = Vec::new();
            let mut expected_status = None;
            for id in &facts_match {
                expected.push(id.to_string());
                let i = ids.iter().position(|x| x == id).unwrap();
                let rule = set.get(id).unwrap();
                match answers[i] {
                    Scripted::Deny => { expected_status = Some(rule.response.status); break }
                    Scripted::Fail if rule.on_store_failure == crate::edge::rules::StoreFailure::Closed => {
                        expected_status = Some(503); break
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(asked, expected);
            prop_assert_eq!(status, expected_status);
        }
    }
}

/// A rule in shadow and its twin, both 1 per 60 s per address; `shadow` fails closed.
const SHADOW_RULES: &str = r#"{"log": {"decisions": "refusals"}, "rules": [
  {"id": "shadow", "match": {"path": {"starts_with": "/shadow/"}}, "characteristics": ["ip.src"],
   "period": 60, "requests_per_period": 1, "enforce": false, "on_store_failure": "closed"},
  {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"],
   "period": 60, "requests_per_period": 1}
]}"#;

/// The notes of one request through `set`, each counter answered `answer`, and whether it
/// was admitted.
fn notes_of(set: &RuleSet, path: &str, answer: &dyn Fn() -> Answer) -> (bool, Vec<(String, Option<Decision>, bool)>) {
    let r = get(path);
    let identity = client_identity(&Sources { cf_connecting_ip: Some(r.ip), x_forwarded_for: None, peer: None });
    let facts = RequestFacts { method: r.method, host: "example.com", path: r.path, colo: Some(r.colo), identity };
    let mut isolate = Isolate::default();
    let mut check = RulesCheck::new(set, HASH);
    let mut notes = Vec::new();
    let mut keep = |taken: Vec<Note<'_>>| {
        for note in taken {
            match note {
                Note::Decided { rule, decision, enforced, .. } => {
                    notes.push((rule.id.clone(), Some(decision), enforced))
                }
                Note::StoreFailed { rule, enforced, .. } => notes.push((rule.id.clone(), None, enforced)),
                Note::OverridesUnreadable(_) => {}
            }
        }
    };
    while let Step::Ask { .. } = check.next(&mut isolate, &facts, &|_: &str| None, Instant::from_secs(5)) {
        check.answer(&mut isolate, answer());
        keep(check.take_notes());
    }
    let (verdict, last) = check.finish();
    keep(last);
    (matches!(verdict, Verdict::Admitted(_)), notes)
}

#[test]
fn a_shadow_refusal_is_noted_as_the_counters_refusal_not_enforced_and_logged_as_refusals_are() {
    let set = RuleSet::from_json(SHADOW_RULES).unwrap();
    let deny = Decision::Deny { retry_after: Span::from_secs(7) };
    let refuse = || Answer::Decided { decision: deny, at: Instant::from_secs(5) };
    let (admitted, notes) = notes_of(&set, "/shadow/x", &refuse);
    assert!(admitted);
    assert_eq!(notes, [("shadow".into(), Some(deny), false)]);
    // `"log": {"decisions": "refusals"}` logs it, as it logs the twin's enforced refusal
    assert!(set.decision_log().logs(&deny, || 0.0));
    let (admitted, notes) = notes_of(&set, "/api/x", &refuse);
    assert!(!admitted);
    assert_eq!(notes, [("api".into(), Some(deny), true)]);
    // a shadow rule that fails closed lets the request on, its store failure noted as not enforced
    let (admitted, notes) = notes_of(&set, "/shadow/x", &|| Answer::Failed("down".into()));
    assert!(admitted);
    assert_eq!(notes, [("shadow".into(), None, false)]);
}
