//! The egress routes' decisions driven with scripted answers: budgets full, stores failing,
//! mirrors failing, and what each call may carry and be answered from.

use super::*;
use crate::edge::egress::gate::Refused;
use crate::edge::rules::RuleSet;

/// The one provider of a rules file with `mirrors` mirrors and `fields` beside them.
fn provider(mirrors: usize, fields: &str) -> Provider {
    let urls: Vec<String> = (0..mirrors).map(|i| format!("\"https://m{i}.example/api/\"")).collect();
    let json = format!(
        r#"{{"rules":[],"egress":{{"providers":[{{"id":"maps","mirrors":[{}],"max_in_flight":2{fields}}}]}}}}"#,
        urls.join(",")
    );
    RuleSet::from_json(&json).unwrap().egress().unwrap().providers[0].clone()
}

const T0: Instant = Instant::from_secs(100);

/// Drive `sending` with a gate that grants the lowest mirror not avoided (or refuses with
/// `NoMirror`), and mirrors that answer as `answers` says, in turn. The mirrors called, and
/// how it ended.
fn drive(sending: &mut Sending, mirrors: usize, answers: &[Attempt]) -> (Vec<usize>, Sent) {
    let mut called = Vec::new();
    let mut answers = answers.iter();
    loop {
        match sending.next() {
            SendStep::Start { want, .. } => {
                let free = (0..mirrors).find(|m| want.avoid & (1 << m) == 0);
                sending.started(free.ok_or(NoStart::Refused(Refused::NoMirror)));
            }
            SendStep::Call { mirror, .. } => {
                called.push(mirror);
                sending.attempted(*answers.next().expect("an answer for every call"));
            }
            SendStep::Done(sent) => return (called, sent),
        }
    }
}

#[test]
fn mirrors_failing_are_each_tried_once_and_the_last_failure_answered_is_passed_on() {
    let p = provider(3, "");
    let mut sending = Sending::new(&p, 1000, T0 + p.max_wait);
    let (called, sent) = drive(&mut sending, 3, &[Attempt::Answered(503), Attempt::TimedOut, Attempt::Unreachable]);
    assert_eq!(called, [0, 1, 2], "each mirror once, in turn");
    assert_eq!(sent, Sent::Failed { kept: Some(0) }, "the 503 is what the app gets");
    assert_eq!(sent.reply(&p), None, "a kept failure is passed on, not answered by the edge");

    let mut sending = Sending::new(&p, 1000, T0);
    let (_, sent) = drive(&mut sending, 3, &[Attempt::Unreachable, Attempt::TimedOut, Attempt::Unreachable]);
    assert_eq!(sent, Sent::Failed { kept: None });
    let reply = sent.reply(&p).unwrap();
    assert_eq!((reply.status, reply.header("retry-after")), (502, None));
    assert!(reply.body.contains("\"maps\""), "{}", reply.body);
}

#[test]
fn a_mirror_that_answers_after_others_failed_is_passed_on_and_the_kept_failure_dropped() {
    let p = provider(3, "");
    let mut sending = Sending::new(&p, 1000, T0);
    assert_eq!(
        sending.next(),
        SendStep::Start { store: SlotStore::Isolate, want: Want { weight: 1000, avoid: 0, deadline: T0 } }
    );
    sending.started(Ok(1));
    assert_eq!(sending.next(), SendStep::Call { mirror: 1, timeout: p.timeout });
    assert_eq!(sending.attempted(Attempt::Answered(429)), Disposal::Failed { keep: true });
    assert_eq!(
        sending.next(),
        SendStep::Start { store: SlotStore::Isolate, want: Want { weight: 1000, avoid: 0b10, deadline: T0 } }
    );
    sending.started(Ok(0));
    assert_eq!(sending.attempted(Attempt::Answered(404)), Disposal::PassOn, "a 4xx is the provider's answer");
    assert_eq!(sending.next(), SendStep::Done(Sent::PassOn { mirror: 0 }));
}

#[test]
fn budgets_full_shed_with_retry_after_and_a_call_heavier_than_the_minute_is_413() {
    let p = provider(2, r#","max_wait":2.5"#);
    let mut sending = Sending::new(&p, 1000, T0);
    sending.started(Err(NoStart::Refused(Refused::QueueFull)));
    let SendStep::Done(sent) = sending.next() else { panic!("a full queue ends the call") };
    let reply = sent.reply(&p).unwrap();
    assert_eq!((reply.status, reply.header("retry-after")), (503, Some("3")), "max_wait 2.5 s, rounded up");

    let mut sending = Sending::new(&p, 1000, T0);
    sending.started(Err(NoStart::Late));
    assert_eq!(sending.next(), SendStep::Done(Sent::Late));
    assert_eq!(Sent::Late.reply(&p).unwrap().status, 503);

    let quick = provider(1, r#","max_wait":0"#);
    assert_eq!(shed(&quick).header("retry-after"), Some("1"), "never 0: the client would retry at once");

    let weighed = provider(1, r#","weight":"open-meteo","weight_per_minute":10"#);
    let heavy =
        format!("latitude=1&longitude=2&hourly={}", (0..200).map(|i| format!("v{i}")).collect::<Vec<_>>().join(","));
    let reply = open_proxy(&weighed, "GET", "forecast", &heavy).unwrap_err();
    assert_eq!((reply.status, reply.header("retry-after")), (413, None), "waiting never makes it fit");
    assert!(reply.body.contains("split it"), "{}", reply.body);
}

#[test]
fn a_refusal_after_a_failed_attempt_passes_the_failure_on() {
    let p = provider(2, "");
    let mut sending = Sending::new(&p, 1000, T0);
    sending.started(Ok(0));
    sending.attempted(Attempt::Answered(500));
    sending.started(Err(NoStart::Late));
    assert_eq!(sending.next(), SendStep::Done(Sent::Failed { kept: Some(0) }));
}

#[test]
fn the_app_leaving_ends_the_call_as_nobody_s_failure() {
    let p = provider(2, "");
    let mut sending = Sending::new(&p, 1000, T0);
    sending.started(Ok(0));
    assert_eq!(sending.attempted(Attempt::Left), Disposal::End);
    assert_eq!(sending.next(), SendStep::Done(Sent::Late));
}

#[test]
fn a_fleet_store_that_fails_falls_back_to_the_isolate_for_the_rest_of_the_call() {
    let p = provider(2, r#","scope":"fleet""#);
    let mut sending = Sending::new(&p, 1000, T0);
    assert!(matches!(sending.next(), SendStep::Start { store: SlotStore::Fleet, .. }));
    sending.store_failed();
    assert!(matches!(sending.next(), SendStep::Start { store: SlotStore::Isolate, .. }));
    sending.started(Ok(0));
    sending.attempted(Attempt::Answered(502));
    assert!(matches!(sending.next(), SendStep::Start { store: SlotStore::Isolate, want: Want { avoid: 1, .. } }));
    // The isolate's own count cannot fail; were it to, the call is shed, not lost.
    sending.store_failed();
    assert_eq!(sending.next(), SendStep::Done(Sent::Failed { kept: Some(0) }));
}

#[test]
fn a_proxied_call_is_opened_only_with_a_method_path_and_weight_the_edge_can_send() {
    let p = provider(1, r#","weight":"open-meteo","weight_per_minute":100"#);
    let put = open_proxy(&p, "PUT", "forecast", "").unwrap_err();
    assert_eq!((put.status, put.header("allow")), (405, Some("GET, HEAD, POST")));
    for rest in ["../admin", "a//b", "/etc", "a%5c..%5cb"] {
        assert_eq!(open_proxy(&p, "GET", rest, "latitude=1").unwrap_err().status, 400, "{rest}");
    }
    let bad = open_proxy(&p, "GET", "forecast", "latitude=1&longitude=2&forecast_days=x").unwrap_err();
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("forecast_days"), "names the parameter: {}", bad.body);
    let ok = open_proxy(&p, "get", "forecast", "latitude=1&longitude=2&hourly=temperature_2m").unwrap();
    assert_eq!((ok.method, ok.weight, ok.body_cap()), (Method::Get, 1000, None));
    assert_eq!(
        open_proxy(&p, "POST", "forecast", "latitude=1&longitude=2").unwrap().body_cap(),
        Some(MAX_REQUEST_BODY)
    );
}

#[test]
fn what_a_call_is_answered_from_and_what_it_carries() {
    let cached = provider(1, r#","cache":{"ttl_s":60,"post":true,"max_entry_bytes":100},"user_agent":"app/1""#);
    let open = |method| open_proxy(&cached, method, "x", "").unwrap();
    let head = open("HEAD").plan(&cached, None);
    assert_eq!((head.method, head.cache.is_some()), (Method::Get, true), "a cached HEAD is a kept GET");
    assert!(open("POST").plan(&cached, Some(100)).cache.is_some());
    assert!(open("POST").plan(&cached, Some(101)).cache.is_none(), "a body larger than an entry is not keyed");
    assert!(open("POST").plan(&cached, None).cache.is_none());
    let app = |name: &str| Some(format!("app's {name}"));
    let names =
        |plan: Plan| plan.carried(&cached, app).into_iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>();
    assert_eq!(
        names(open("GET").plan(&cached, None)),
        [
            "accept=app's accept",
            "accept-language=app's accept-language",
            "content-type=app's content-type",
            "user-agent=app/1"
        ],
        "a cached call carries no conditional header, and the provider's User-Agent"
    );
    let plain = provider(1, "");
    let plan = open_proxy(&plain, "HEAD", "x", "").unwrap().plan(&plain, None);
    assert_eq!(plan.method, Method::Head);
    assert_eq!(plan.carried(&plain, app).len(), CALL_HEADERS.len(), "an uncached call carries the conditional ones");
    assert!(
        open("POST").plan(&provider(1, r#","cache":{"ttl_s":60}"#), Some(1)).cache.is_none(),
        "POSTs cached only when the rule says so"
    );
}

#[test]
fn permits_are_opened_weighed_and_given_back_where_they_are_held() {
    let weighed = provider(1, r#","weight":"open-meteo","weight_per_minute":5,"scope":"fleet""#);
    assert_eq!(open_permit(&weighed, r#"{"weight": 2}"#), Ok(2_000));
    assert_eq!(open_permit(&weighed, "{}").unwrap_err().status, 400, "a weighed provider needs a weight or query");
    assert_eq!(open_permit(&weighed, "not json").unwrap_err().status, 400);
    assert_eq!(open_permit(&weighed, r#"{"weight": 6}"#).unwrap_err().status, 413);
    let fleet = PermitId { fleet: true, secret: 7 };
    let here = PermitId { fleet: false, secret: 7 };
    assert_eq!(give_back_to(&weighed, &fleet), Some(SlotStore::Fleet));
    assert_eq!(give_back_to(&weighed, &here), Some(SlotStore::Isolate));
    let isolate = provider(1, "");
    assert_eq!(give_back_to(&isolate, &fleet), None, "no store of an isolate provider holds a fleet permit");
    let granted = permit_granted(&weighed, &here, 0, 2_000);
    assert_eq!((granted.status, granted.header("cache-control")), (200, Some("no-store")));
    assert!(granted.body.contains("\"mirror\":\"https://m0.example/api/\""), "{}", granted.body);
    assert!(granted.body.contains("\"weight\":2"), "{}", granted.body);
    assert_eq!((given_back().status, no_permit().status, no_provider().status), (204, 404, 404));
}

#[test]
fn a_failed_provider_s_cached_call_is_answered_stale_then_failure_then_502() {
    assert_eq!(after_failure(true, true), AfterFailure::Stale);
    assert_eq!(after_failure(false, true), AfterFailure::PassKept);
    assert_eq!(after_failure(false, false), AfterFailure::Unreachable);
    let p = provider(1, "");
    let reply = failing(&p, T0 + Span::from_millis(1_200), T0);
    assert_eq!((reply.status, reply.header("retry-after")), (503, Some("2")));
    assert_eq!(failing(&p, T0, T0 + Span::from_secs(5)).header("retry-after"), Some("1"), "a past retry is 1 s");
}

#[test]
fn limits_follow_the_provider() {
    let p = provider(3, r#","weight":"open-meteo","weight_per_minute":550,"min_interval_ms":50"#);
    let l = limits(&p);
    assert_eq!((l.mirrors, l.max_in_flight, l.weight_milli_per_minute, l.max_queue), (3, 2, Some(550_000), MAX_QUEUE));
    assert_eq!(l.min_interval, Span::from_millis(50));
}

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn attempt() -> impl Strategy<Value = Attempt> {
        prop_oneof![(100u16..700).prop_map(Attempt::Answered), Just(Attempt::Unreachable), Just(Attempt::TimedOut),]
    }

    proptest! {
        /// Whatever the mirrors answer, each is called at most once, the first that passes is
        /// passed on, and a call that ends without one passes on the last failure it kept.
        #[test]
        fn failover_calls_each_mirror_once_and_passes_on_the_first_answer(
            mirrors in 1usize..6,
            answers in proptest::collection::vec(attempt(), 6),
        ) {
            let p = provider(mirrors, "");
            let mut sending = Sending::new(&p, 1000, T0);
            let (called, sent) = drive(&mut sending, mirrors, &answers);
            let mut seen = called.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), called.len(), "a mirror called twice: {:?}", called);
            let first_pass = answers[..mirrors].iter().position(|a| matches!(a, Attempt::Answered(s) if crate::edge::egress::call::passes(*s)));
            match first_pass {
                Some(i) => {
                    prop_assert_eq!(called.len(), i + 1);
                    prop_assert_eq!(sent, Sent::PassOn { mirror: i });
                }
                None => {
                    prop_assert_eq!(called.len(), mirrors);
                    let kept = answers[..mirrors].iter().rposition(|a| matches!(a, Attempt::Answered(s) if *s <= 599));
                    prop_assert_eq!(sent, Sent::Failed { kept });
                }
            }
        }
    }
}
