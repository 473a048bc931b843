//! Rules that do not enforce every refusal (`"enforce": false` or a share of keys): counted
//! as their enforced twins are, never refusing for a key they do not enforce, and the
//! runtime overrides of `enforce`.

use super::counting::{Counts, Stored};
use super::tests::{header, Request};
use super::*;
use crate::core::limit::Decision;
use crate::core::time::{Instant, Span};
use crate::edge::identity::{client_identity, Sources};
use crate::edge::redact::KeyedHash;
use crate::edge::rules::{Enforce, RequestFacts, RuleOverride, RuleOverrides, RuleSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

const HASH: KeyedHash = KeyedHash::new(3, 5);

/// `api`: every /api/ request, 3 per 10 s per address then blocked 5 s, enforced as
/// `enforce` says; `b`: /api/b, a bucket of 2 at one per second, enforced.
fn twin(enforce: &str) -> RuleSet {
    RuleSet::from_json(&format!(
        r#"{{"rules": [
          {{"id": "api", "match": {{"path": {{"starts_with": "/api/"}}}}, "characteristics": ["ip.src"],
            "period": 10, "requests_per_period": 3, "mitigation_timeout": 5, "enforce": {enforce}}},
          {{"id": "b", "match": {{"path": {{"equals": "/api/b"}}}}, "characteristics": ["ip.src"],
            "algorithm": "token_bucket", "rate": 1, "burst": 2}}]}}"#
    ))
    .unwrap()
}

/// What one request met: the status of a refusal, each rule's decision and whether it was
/// enforced (in the order asked), the answer's headers.
struct Met {
    status: Option<u16>,
    decided: Vec<(String, Decision, bool)>,
    headers: Vec<(&'static str, String)>,
    read_overrides: usize,
}

/// One request through `set`, its counters answered by `counts` (as a Durable Object does),
/// the overrides (when asked for) by `overrides`.
fn through(
    set: &RuleSet,
    isolate: &mut Isolate,
    counts: &mut Counts,
    r: &Request<'_>,
    now: Instant,
    overrides: Option<&dyn Fn() -> Result<RuleOverrides, String>>,
) -> Met {
    let identity = client_identity(&Sources { cf_connecting_ip: Some(r.ip), x_forwarded_for: None, peer: None });
    let facts = RequestFacts { method: r.method, host: "example.com", path: r.path, colo: Some(r.colo), identity };
    let header = |_: &str| None;
    let mut check = RulesCheck::new(set, HASH);
    if overrides.is_some() {
        check = check.reading_overrides();
    }
    let mut read_overrides = 0;
    let mut notes = Vec::new();
    loop {
        let answer = match check.next(isolate, &facts, &header, now) {
            Step::Done => break,
            Step::ReadOverrides => {
                read_overrides += 1;
                Answer::Overrides(overrides.expect("asked only when reading")())
            }
            Step::Ask { rule, key } => {
                let counted = counts.check(rule, key, now, Stored::default()).unwrap();
                Answer::Decided { decision: counted.decision, at: now }
            }
        };
        check.answer(isolate, answer);
        notes.extend(check.take_notes());
    }
    let (verdict, last) = check.finish();
    notes.extend(last);
    let decided = notes
        .into_iter()
        .filter_map(|n| match n {
            Note::Decided { rule, decision, enforced, .. } => Some((rule.id.clone(), decision, enforced)),
            _ => None,
        })
        .collect();
    let (status, headers) = match verdict.reply() {
        Some((reply, _)) => (Some(reply.status), reply.headers),
        None => match verdict {
            Verdict::Admitted(checked) => (None, checked.headers().0),
            Verdict::Refused { .. } => unreachable!("a refusal has a reply"),
        },
    };
    Met { status, decided, headers, read_overrides }
}

#[test]
fn a_shadow_refusal_is_named_in_its_header_and_the_request_goes_on_to_the_next_rule() {
    let set = twin("false");
    let (mut isolate, mut counts) = (Isolate::default(), Counts::default());
    let r = Request { method: "GET", path: "/api/b", ip: "198.51.100.7", colo: "AMS", key: None };
    let t = Instant::from_secs(100);
    for _ in 0..2 {
        let met = through(&set, &mut isolate, &mut counts, &r, t, None);
        assert_eq!(met.status, None);
        assert_eq!(header(&met.headers, "sluicegate-shadow"), None);
        // A rule in shadow gives no RateLimit entry: a client pacing itself by them would
        // slow down for a limit that does not refuse it.
        assert_eq!(header(&met.headers, "ratelimit-policy"), Some("\"b\";q=2;w=2"));
    }
    // The third: within api's 3, past b's bucket of 2: b refuses it, as it would anyway.
    let met = through(&set, &mut isolate, &mut counts, &r, t, None);
    assert_eq!((met.status, header(&met.headers, "sluicegate-shadow")), (Some(429), None));
    let met = through(&set, &mut isolate, &mut counts, &r, t + Span::from_secs(2), None);
    // The fourth request in 10 s: api refuses it in shadow (a block of 5 s starts), and b,
    // asked next as if api had admitted it, admits it (its bucket refilled).
    assert_eq!(met.status, None);
    assert_eq!(header(&met.headers, "sluicegate-shadow"), Some("api;retry-after=5"));
    let asked: Vec<&str> = met.decided.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(asked, ["api", "b"]);
    assert!(!met.decided[0].2, "not enforced");
    // Within the block, the isolate answers for api's counter, still in shadow.
    let met = through(&set, &mut isolate, &mut counts, &r, t + Span::from_secs(4), None);
    assert_eq!((met.status, header(&met.headers, "sluicegate-shadow")), (None, Some("api;retry-after=3")));
}

#[test]
fn a_fail_closed_rule_in_shadow_lets_the_request_on_when_its_store_fails() {
    let set = RuleSet::from_json(
        r#"{"rules": [{"id": "orders", "match": {}, "characteristics": ["http.host"], "period": 60,
            "requests_per_period": 1, "on_store_failure": "closed", "enforce": false}]}"#,
    )
    .unwrap();
    let mut isolate = Isolate::default();
    let (status, _, headers, _) =
        super::tests::drive(&set, &mut isolate, &super::tests::get("/x"), Instant::from_secs(5), &mut |_, _| {
            Answer::Failed("unreachable".into())
        });
    assert_eq!(status, None);
    assert_eq!(header(&headers, "sluicegate-shadow"), Some("orders;unavailable"));
    assert_eq!(header(&headers, "sluicegate-degraded"), None, "it did not fail open: it would have refused");
}

#[test]
fn a_rule_s_counts_go_on_when_only_its_enforce_changes() {
    let (shadow, enforced) = (twin("false"), twin("true"));
    let mut counts = Counts::default();
    let key = "api|ip.src=192.0.2.1";
    let t = Instant::from_secs(50);
    for _ in 0..3 {
        assert!(matches!(
            counts.check(&shadow.rules()[0], key, t, Stored::default()).unwrap().decision,
            Decision::Allow { .. }
        ));
    }
    let fourth = counts.check(&enforced.rules()[0], key, t, Stored::default()).unwrap();
    assert!(matches!(fourth.decision, Decision::Deny { .. }), "the shadow's three still count once it enforces");
    assert!(shadow.rules()[0].counts_like(&enforced.rules()[0]));
    assert!(!twin("true").rules()[1].counts_like(&enforced.rules()[0]));
}

#[test]
fn the_runtime_override_of_enforce_is_read_once_per_second_and_its_copy_serves_when_it_cannot_be() {
    let set = twin("true");
    let (mut isolate, mut counts) = (Isolate::default(), Counts::default());
    let r = Request { method: "GET", path: "/api/a", ip: "198.51.100.9", colo: "AMS", key: None };
    let mut shadow = RuleOverrides::default();
    shadow.set("api", RuleOverride { enforce: Enforce::Shadow, set_at: 1 }).unwrap();
    let read_shadow = || Ok(shadow.clone());
    let t = Instant::from_secs(200);
    for n in 0..6 {
        let met = through(&set, &mut isolate, &mut counts, &r, t, Some(&read_shadow));
        assert_eq!(met.read_overrides, usize::from(n == 0), "read once, then the isolate's copy serves");
        assert_eq!(met.status, None, "the override puts api in shadow: request {n}");
    }
    // A request no rule matches reads nothing.
    let off = Request { method: "GET", path: "/static", ip: "198.51.100.9", colo: "AMS", key: None };
    assert_eq!(
        through(&set, &mut isolate, &mut counts, &off, t + Span::from_secs(5), Some(&read_shadow)).read_overrides,
        0
    );
    // A second later the copy is read again; when it cannot be, the copy in hand serves.
    let unreadable = || Err(String::from("the overrides store did not answer"));
    let met = through(&set, &mut isolate, &mut counts, &r, t + Span::from_secs(1), Some(&unreadable));
    assert_eq!((met.read_overrides, met.status), (1, None));
    // The override removed: enforced again, on the counts the shadow kept.
    isolate.forget_rule_overrides();
    let none = || Ok(RuleOverrides::default());
    let met = through(&set, &mut isolate, &mut counts, &r, t + Span::from_secs(1), Some(&none));
    assert_eq!((met.read_overrides, met.status), (1, Some(429)));
    // Without reading (the admin API off) the rules file's enforce serves.
    let mut fresh = Isolate::default();
    assert_eq!(through(&set, &mut fresh, &mut counts, &r, t + Span::from_secs(2), None).status, Some(429));
}

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;

    const CLIENTS: [&str; 5] = ["198.51.100.1", "198.51.100.2", "2001:db8::1", "2001:db8:1::1", "203.0.113.77"];

    proptest! {
        /// The same requests through `api` enforced, in shadow and enforced for half its
        /// keys: its counter decides alike in all three (the same decisions, so the same
        /// counts); in shadow it refuses nothing and names each refusal in Sluicegate-Shadow;
        /// at half, it refuses exactly for the keys in the enforced share. A request it does
        /// not refuse goes on to `b`.
        #[test]
        fn a_shadow_or_partial_rule_decides_as_its_enforced_twin_and_refuses_only_where_it_enforces(
            requests in proptest::collection::vec((0..CLIENTS.len(), 0u64..2_500, any::<bool>()), 1..80),
        ) {
            let sets = [twin("true"), twin("false"), twin("0.5")];
            let mut isolates = [Isolate::default(), Isolate::default(), Isolate::default()];
            let mut counts = [Counts::default(), Counts::default(), Counts::default()];
            let half = sets[2].rules()[0].enforce;
            let mut t = Instant::from_secs(1_000);
            for (client, gap_ms, to_b) in requests {
                t = t + Span::from_millis(gap_ms);
                let r = Request { method: "GET", path: if to_b { "/api/b" } else { "/api/a" }, ip: CLIENTS[client], colo: "AMS", key: None };
                let met: Vec<Met> = (0..3).map(|i| through(&sets[i], &mut isolates[i], &mut counts[i], &r, t, None)).collect();
                let api: Vec<Decision> = met.iter().map(|m| m.decided[0].1).collect();
                prop_assert_eq!(api[0], api[1]);
                prop_assert_eq!(api[0], api[2]);
                let refused = matches!(api[0], Decision::Deny { .. });
                let b_status = |m: &Met| m.decided.iter().find(|d| d.0 == "b").map(|d| matches!(d.1, Decision::Deny { .. }));
                // Enforced: api's refusal ends the evaluation.
                prop_assert_eq!(met[0].status.is_some(), refused || b_status(&met[0]) == Some(true));
                prop_assert_eq!(met[0].decided.len(), if refused || !to_b { 1 } else { 2 });
                // Shadow: never refused by api; b asked whenever it matches.
                prop_assert_eq!(met[1].decided.len(), if to_b { 2 } else { 1 });
                prop_assert_eq!(met[1].status.is_some(), b_status(&met[1]) == Some(true));
                let named = header(&met[1].headers, "sluicegate-shadow").is_some_and(|h| h.starts_with("api;retry-after="));
                prop_assert_eq!(named, refused);
                // Half: refused for the keys it enforces, in shadow for the others.
                let key = sets[2].rules()[0].counting_key(&RequestFacts {
                    method: "GET", host: "example.com", path: r.path, colo: Some("AMS"),
                    identity: client_identity(&Sources { cf_connecting_ip: Some(r.ip), x_forwarded_for: None, peer: None }),
                }, |_| None);
                let enforced = half.applies(&key);
                prop_assert_eq!(met[2].decided[0].2, enforced);
                if refused {
                    prop_assert_eq!(met[2].status == Some(429) && met[2].decided.len() == 1, enforced);
                    prop_assert_eq!(header(&met[2].headers, "sluicegate-shadow").is_some(), !enforced);
                }
            }
        }
    }
}
