//! The tenant stage driven with scripted answers: key lookups, overrides, stores failing,
//! tenants over their rate, their body cap and their share in flight.

use super::tenant::*;
use super::Isolate;
use crate::core::limit::Decision;
use crate::core::time::{Instant, Span};
use crate::edge::rules::{RequestFacts, RuleSet};
use crate::edge::tenants::Overrides;
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

const KEY_HASH: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"; // sha256("foo")

const RULES_TEXT: &str = r#"{"rules": [], "tenants": {"match": {"path": {"starts_with": "/hooks/"}}, "key_header": "x-api-key",
        "keys": {"KEY": "acme"},
        "limits": {"acme": {"rate": 1, "burst": 2, "max_body_bytes": 1000, "max_queue": 1}},
        "max_body_bytes": 5000, "scope": "SCOPE"}}"#;

fn rules(scope: &str) -> RuleSet {
    RuleSet::from_json(&RULES_TEXT.replace("KEY", KEY_HASH).replace("SCOPE", scope)).unwrap()
}

/// What the Worker would see: the steps asked, in order, and the verdict.
struct Run {
    asked: Vec<String>,
    verdict: TenantVerdict,
    notes: Vec<TenantNote>,
}

#[allow(clippy::too_many_arguments)]
fn run(
    set: &RuleSet,
    isolate: &mut Isolate,
    path: &str,
    key: Option<&str>,
    declared: Option<u64>,
    now: Instant,
    store: &mut dyn FnMut(&str) -> Result<Decision, String>,
    overrides: &mut dyn FnMut() -> Result<Overrides, String>,
) -> Run {
    let facts = RequestFacts { method: "POST", host: "h", path, colo: Some("AMS"), identity: None };
    let key = key.map(String::from);
    let header = move |name: &str| if name == "x-api-key" { key.clone() } else { None };
    let extra = BTreeMap::new();
    let mut check = TenantCheck::new(set.tenants(), &extra, &facts, declared, declared.is_some());
    let mut asked = Vec::new();
    loop {
        let answer = match check.next(isolate, &header, now) {
            TenantStep::Done => break,
            TenantStep::Hash { key } => {
                asked.push("hash".to_string());
                TenantAnswer::Hashed(if key == "foo" { KEY_HASH.into() } else { "0".repeat(64) })
            }
            TenantStep::ReadOverrides => {
                asked.push("overrides".to_string());
                TenantAnswer::Overrides(overrides())
            }
            TenantStep::Charge(ask) => {
                asked.push(ask.store.replace('\u{1f}', "/"));
                TenantAnswer::Charged(store(ask.store))
            }
        };
        check.answer(isolate, answer, now);
    }
    let notes = check.take_notes();
    Run { asked, verdict: check.finish(), notes }
}

fn allow(_: &str) -> Result<Decision, String> {
    Ok(Decision::Allow { remaining: 0, reset: Span::ZERO })
}

fn none() -> Result<Overrides, String> {
    Ok(Overrides::default())
}

#[test]
fn a_known_key_is_hashed_its_overrides_read_and_its_colo_store_charged() {
    let set = rules("colo");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t, &mut allow, &mut none);
    assert_eq!(r.asked, ["hash", "overrides", "tenant/acme/AMS"]);
    let TenantVerdict::Admitted(admitted) = r.verdict else { panic!("admitted: {:?}", r.verdict) };
    assert_eq!((&*admitted.tenant, admitted.max_body, admitted.share), ("acme", Some(1000), Some(10)));
    // Within a second the isolate's copy of the overrides serves.
    isolate.tenants.release("acme", 10);
    let r =
        run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t + Span::from_millis(900), &mut allow, &mut none);
    assert_eq!(r.asked, ["hash", "tenant/acme/AMS"]);
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t + Span::from_secs(1), &mut allow, &mut none);
    assert_eq!(r.asked[1], "overrides", "a copy a second old is read again");
}

#[test]
fn an_unknown_or_missing_key_is_refused_with_401_before_anything_is_charged() {
    let set = rules("colo");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    for key in [None, Some(""), Some("bar")] {
        let r = run(&set, &mut isolate, "/hooks/a", key, None, t, &mut allow, &mut none);
        assert!(!r.asked.iter().any(|a| a.starts_with("tenant")), "{key:?}: {:?}", r.asked);
        let TenantVerdict::Refused(refusal) = r.verdict else { panic!("refused") };
        assert_eq!(refusal, TenantRefusal::Unknown);
        assert_eq!(refusal.reply().status, 401);
    }
    let r = run(&set, &mut isolate, "/other", None, None, t, &mut allow, &mut none);
    assert!(matches!(r.verdict, TenantVerdict::NoTenant) && r.asked.is_empty());
}

#[test]
fn a_body_over_the_cap_is_refused_413_before_the_buckets_and_a_store_refusal_is_429() {
    let set = rules("colo");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(1001), t, &mut allow, &mut none);
    assert_eq!(r.asked, ["hash", "overrides"]);
    let TenantVerdict::Refused(refusal) = r.verdict else { panic!("refused") };
    assert_eq!(refusal, TenantRefusal::TooLarge { max: 1000 });
    assert_eq!(refusal.reply().status, 413);

    let mut refuse = |_: &str| Ok(Decision::Deny { retry_after: Span::from_millis(1_200) });
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t, &mut refuse, &mut none);
    let TenantVerdict::Refused(refusal) = r.verdict else { panic!("refused") };
    let reply = refusal.reply();
    assert_eq!(
        (reply.status, reply.header("retry-after"), reply.header("sluicegate-scope")),
        (429, Some("2"), Some("tenant"))
    );
}

#[test]
fn the_fleet_store_then_the_colo_store_then_the_isolate_s_table_charge_the_tenant() {
    let set = rules("fleet");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    let mut failing = |store: &str| {
        if store.ends_with("AMS") {
            Ok(Decision::Allow { remaining: 0, reset: Span::ZERO })
        } else {
            Err("the fleet's store did not answer in time".to_string())
        }
    };
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(1), t, &mut failing, &mut none);
    assert_eq!(r.asked, ["hash", "overrides", "tenant/acme", "tenant/acme/AMS"]);
    assert!(matches!(&r.notes[..], [TenantNote::StoreFailed { store, .. }] if store == "tenant\u{1f}acme"));
    assert!(matches!(r.verdict, TenantVerdict::Admitted(_)));
    isolate.tenants.release("acme", 1);
    // No store answers: the isolate's own buckets (burst 2) charge it, and refuse the third.
    let mut down = |_: &str| Err("down".to_string());
    let mut verdicts = Vec::new();
    for i in 0..3 {
        let r =
            run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(1), t + Span::from_millis(i), &mut down, &mut none);
        if let TenantVerdict::Admitted(_) = r.verdict {
            isolate.tenants.release("acme", 1);
        }
        verdicts.push(matches!(r.verdict, TenantVerdict::Admitted(_)));
    }
    assert_eq!(verdicts, [true, true, false]);
}

#[test]
fn a_tenant_over_its_share_in_flight_is_refused_until_it_gives_one_back() {
    let set = rules("colo");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    let first = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t, &mut allow, &mut none);
    assert!(matches!(first.verdict, TenantVerdict::Admitted(_)));
    let second = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t, &mut allow, &mut none);
    let TenantVerdict::Refused(refusal) = second.verdict else { panic!("refused") };
    assert_eq!(refusal, TenantRefusal::Overloaded { tenant: "acme".into() });
    assert_eq!(isolate.tenants.in_flight(), 1);
    isolate.tenants.release("acme", 10);
    assert_eq!(isolate.tenants.in_flight(), 0, "nothing in flight: nothing kept");
    let third = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(10), t, &mut allow, &mut none);
    assert!(matches!(third.verdict, TenantVerdict::Admitted(_)));
}

#[test]
fn overrides_that_cannot_be_read_leave_the_copy_in_hand_and_an_override_s_body_is_clamped_once() {
    let set = rules("colo");
    let mut isolate = Isolate::default();
    let t = Instant::from_secs(10);
    let text = r#"{"acme": {"limit": {"rate": 5, "burst": 5, "max_body_bytes": 9000}, "set_at": 7}}"#;
    let mut read = || Ok(Overrides::from_json(text).unwrap().0);
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(4000), t, &mut allow, &mut read);
    let TenantVerdict::Admitted(admitted) = r.verdict else { panic!("admitted") };
    assert_eq!(admitted.max_body, Some(5000), "the instance's cap binds the override");
    assert!(matches!(&r.notes[..], [TenantNote::Clamped(c)] if c.to == 5000 && c.was == 9000));
    isolate.tenants.release("acme", 4000);
    let mut broken = || Err("the store did not answer".to_string());
    let later = t + Span::from_secs(5);
    let r = run(&set, &mut isolate, "/hooks/a", Some("foo"), Some(4000), later, &mut allow, &mut broken);
    let TenantVerdict::Admitted(admitted) = r.verdict else { panic!("admitted") };
    assert_eq!(admitted.limit.unwrap().2, 7, "the override in hand still applies");
    assert!(matches!(&r.notes[..], [TenantNote::OverridesUnreadable(_)]));
}

#[test]
fn a_streamed_body_is_cut_at_its_cap_or_its_share_and_its_bytes_charged_to_its_bucket() {
    let text = r#"{"rules": [], "tenants": {"match": {"path": {"starts_with": "/hooks/"}}, "tenant_header": "x-tenant",
        "limits": {"acme": {"rate": 1, "burst": 2, "bytes_per_second": 100, "max_body_bytes": 1000, "max_queue_bytes": 600}},
        "default": {"rate": 1, "burst": 1}, "max_body_bytes": 5000}}"#;
    let set = RuleSet::from_json(text).unwrap();
    let mut isolate = Isolate::default();
    let facts = RequestFacts { method: "POST", host: "h", path: "/hooks/a", colo: Some("AMS"), identity: None };
    let header = |name: &str| (name == "x-tenant").then(|| String::from("acme"));
    let extra = BTreeMap::new();
    let now = Instant::from_secs(50);
    // Bodies of no declared length: each request charged with no bytes, then its chunks.
    let admit = |isolate: &mut Isolate| {
        let mut check = TenantCheck::new(set.tenants(), &extra, &facts, None, true);
        loop {
            let answer = match check.next(isolate, &header, now) {
                TenantStep::Done => break,
                TenantStep::ReadOverrides => TenantAnswer::Overrides(none()),
                TenantStep::Charge(ask) => {
                    assert_eq!((ask.requests, ask.bytes), (1, 0), "the request is charged before its bytes stream");
                    TenantAnswer::Charged(allow(ask.store))
                }
                TenantStep::Hash { .. } => unreachable!("a named tenant"),
            };
            check.answer(isolate, answer, now);
        }
        let TenantVerdict::Admitted(admitted) = check.finish() else { panic!("admitted") };
        admitted
    };
    // Another request of the tenant in flight: a request alone is never refused its share.
    let _other = admit(&mut isolate);
    let admitted = admit(&mut isolate);
    let mut streamed = StreamedTenant::of(&admitted, set.tenants().unwrap().scope, Some("AMS")).expect("it streams");
    assert!(streamed.holds_bytes());
    let mut held = admitted.share.unwrap();
    assert_eq!(streamed.take(&mut isolate.tenants, Some(&mut held), 500), Ok(()));
    assert_eq!(held, 500);
    assert_eq!(
        streamed.take(&mut isolate.tenants, Some(&mut held), 200),
        Err(TenantRefusal::Overloaded { tenant: "acme".into() }),
        "past max_queue_bytes in flight"
    );
    assert_eq!(held, 500, "bytes refused are not held");
    // Once the origin answered, its share is given back and no longer grows; the cap stays
    // (every byte that came counts toward it: 500 + 200 + 200 = 900, then 1,100).
    assert_eq!(streamed.take(&mut isolate.tenants, None, 200), Ok(()));
    assert_eq!(streamed.take(&mut isolate.tenants, None, 200), Err(TenantRefusal::TooLarge { max: 1000 }));
    let walk = streamed.charge(64).expect("its limit counts bytes");
    let ask = walk.next().expect("a store to charge");
    assert_eq!((ask.requests, ask.bytes), (0, 64), "more bytes of a request already charged");
    assert!(streamed.charge(0).is_none(), "nothing to charge");
    let wait = Span::from_millis(640);
    assert_eq!(
        streamed.charged(Decision::Deny { retry_after: wait }),
        Err(TenantRefusal::Limited { tenant: "acme".into(), wait })
    );
}

#[test]
fn isolate_scope_charges_the_isolate_s_own_table_and_asks_no_store() {
    // (no share in flight here: the requests below are never finished)
    let text = RULES_TEXT.replace(", \"max_queue\": 1", "").replace("KEY", KEY_HASH).replace("SCOPE", "isolate");
    let set = RuleSet::from_json(&text).unwrap();
    let t = Instant::from_secs(10);
    let mut first = Isolate::default();
    let mut never = |store: &str| -> Result<Decision, String> { panic!("no store is asked, got {store}") };
    for n in 0..2 {
        let r = run(&set, &mut first, "/hooks/a", Some("foo"), Some(10), t, &mut never, &mut none);
        assert!(r.asked.iter().all(|a| a == "hash" || a == "overrides"), "request {n}: {:?}", r.asked);
        assert!(matches!(r.verdict, TenantVerdict::Admitted(_)), "request {n}: within the burst of 2");
    }
    let r = run(&set, &mut first, "/hooks/a", Some("foo"), Some(10), t, &mut never, &mut none);
    assert!(matches!(r.verdict, TenantVerdict::Refused(TenantRefusal::Limited { .. })), "past the burst");
    // another isolate counts the tenant afresh
    let mut second = Isolate::default();
    let r = run(&set, &mut second, "/hooks/a", Some("foo"), Some(10), t, &mut never, &mut none);
    assert!(matches!(r.verdict, TenantVerdict::Admitted(_)));
}

#[test]
fn a_limit_in_shadow_charges_as_if_enforced_and_lets_its_refusals_on_naming_them() {
    let shadow = RuleSet::from_json(
        &RULES_TEXT
            .replace("KEY", KEY_HASH)
            .replace("SCOPE", "isolate")
            .replace("\"max_queue\": 1}", "\"max_queue\": 1, \"enforce\": false}"),
    )
    .unwrap();
    let enforced = rules("isolate");
    let t = Instant::from_secs(10);
    let (mut a, mut b) = (Isolate::default(), Isolate::default());
    let mut store = |_: &str| Err::<Decision, String>("no store: the isolate's table".into());
    let mut verdicts = Vec::new();
    for _ in 0..4 {
        let twin = run(&enforced, &mut a, "/hooks/x", Some("foo"), Some(10), t, &mut store, &mut none).verdict;
        let ours = run(&shadow, &mut b, "/hooks/x", Some("foo"), Some(10), t, &mut store, &mut none).verdict;
        verdicts.push((twin, ours));
    }
    // The burst of 2 (each admitted request released at once by nobody: its share stays held,
    // so the second is over the share of 1 in flight, the third over the rate too).
    for (n, (twin, ours)) in verdicts.iter().enumerate() {
        let TenantVerdict::Admitted(ours) = ours else { panic!("shadow refuses nothing: {ours:?}") };
        match twin {
            TenantVerdict::Admitted(_) => assert_eq!(ours.shadow, None, "request {n}"),
            TenantVerdict::Refused(refusal) => {
                assert_eq!(ours.shadow.as_ref(), Some(refusal), "request {n}: the same refusal, in shadow");
                assert_eq!(ours.share, None, "a shadow refusal holds no place in flight");
            }
            TenantVerdict::NoTenant => panic!("a tenant"),
        }
    }
    let refused = verdicts.iter().filter(|(twin, _)| matches!(twin, TenantVerdict::Refused(_))).count();
    assert_eq!(refused, 3, "{verdicts:?}");
    let TenantVerdict::Admitted(last) = &verdicts[3].1 else { unreachable!() };
    let entry = last.shadow.as_ref().unwrap().shadow_entry();
    assert!(entry == "tenant:acme;overload" || entry.starts_with("tenant:acme;retry-after="), "{entry}");
    // A body over the cap is refused all the same: a cap is not a rate.
    let big = run(&shadow, &mut b, "/hooks/x", Some("foo"), Some(2000), t, &mut store, &mut none);
    assert!(matches!(big.verdict, TenantVerdict::Refused(TenantRefusal::TooLarge { .. })));
    let unknown = run(&shadow, &mut b, "/hooks/x", Some("bar"), Some(1), t, &mut store, &mut none);
    assert!(matches!(unknown.verdict, TenantVerdict::Refused(TenantRefusal::Unknown)));
}

#[test]
fn a_tenant_limit_s_enforce_is_validated_and_kept_in_its_json() {
    use crate::edge::tenants::TenantLimit;
    let limit = TenantLimit::from_json_text(r#"{"rate": 1, "burst": 2, "enforce": 0.25}"#, None).unwrap();
    assert_eq!(limit.enforce.fraction(), 0.25);
    assert_eq!(limit.to_json(), r#"{"rate":1.0,"burst":2,"enforce":0.25}"#);
    let plain = TenantLimit::from_json_text(r#"{"rate": 1, "burst": 2}"#, None).unwrap();
    assert_eq!(plain.to_json(), r#"{"rate":1.0,"burst":2}"#, "enforced: not written");
    let bad = TenantLimit::from_json_text(r#"{"rate": 1, "burst": 2, "enforce": 2}"#, None).unwrap_err();
    assert_eq!(bad.field, "enforce");
}
