//! The JavaScript bindings, run in Node and in headless Chromium by `wasm-pack test`.
#![cfg(all(target_arch = "wasm32", feature = "wasm", feature = "wasm-edge", feature = "wasm-smartflow"))]

use js_sys::{Object, Reflect};
use sluicegate::wasm::{client_identity_js, validate_rules, DecisionStatus, TokenBucket};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

pub(crate) fn get(v: &JsValue, key: &str) -> JsValue {
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
    assert_eq!(bucket.check(f64::NAN, 1.0), DecisionStatus::InvalidNow);
    assert_eq!(bucket.check(-1.0, 1.0), DecisionStatus::InvalidNow);
    assert_eq!(bucket.check(f64::INFINITY, 1.0), DecisionStatus::InvalidNow);
    assert_eq!(bucket.check(0.0, 1.5), DecisionStatus::InvalidCost);
    assert_eq!(bucket.check(0.0, f64::NAN), DecisionStatus::InvalidCost);
    assert_eq!(bucket.check(0.0, -1.0), DecisionStatus::InvalidCost);
    assert_eq!(bucket.check(0.0, 3.0), DecisionStatus::CostTooHigh, "a cost above the burst");
    assert_eq!(bucket.results().to_vec()[0], 2.0, "the capacity it can never fit");
    assert_eq!(bucket.check(0.0, 1.0), DecisionStatus::Allowed, "nothing was charged for a refused input");
    assert!(TokenBucket::new(0.0, 1_000.0, 1.0).is_err());
    assert!(TokenBucket::new(1.0, f64::INFINITY, 1.0).is_err());
}

#[wasm_bindgen_test]
fn token_bucket_admits_the_burst_then_says_when() {
    let mut bucket = TokenBucket::new(2.0, 1_000.0, 2.0).unwrap();
    let figures = bucket.results();
    assert_eq!(bucket.check(10_000.0, 1.0), DecisionStatus::Allowed);
    assert_eq!(figures.to_vec(), [1.0, 0.0, 500.0], "[remaining, retryAfterMs, resetMs]");
    assert_eq!(bucket.check(10_000.0, 1.0), DecisionStatus::Allowed);
    assert_eq!(figures.to_vec(), [0.0, 0.0, 1_000.0]);
    assert_eq!(bucket.check(10_000.0, 1.0), DecisionStatus::Denied);
    assert_eq!(figures.to_vec(), [0.0, 500.0, 0.0], "the view reads each decision in place");
}

#[wasm_bindgen_test]
fn many_instances_can_be_created_and_dropped() {
    for i in 0..10_000 {
        let mut bucket = TokenBucket::new(1.0, 1_000.0, 1.0).unwrap();
        assert_eq!(bucket.check(f64::from(i), 1.0), DecisionStatus::Allowed);
    }
}

mod client {
    use super::get;
    use js_sys::{Object, Reflect};
    use sluicegate::wasm::{
        classify_rate_limit, open_meteo_query_weight, open_meteo_weight, BatchPolicyJs, DecisionStatus,
        LocationCacheJs, PacerCoreJs, Wait,
    };
    use wasm_bindgen::JsValue;
    use wasm_bindgen_test::wasm_bindgen_test;

    fn call(locations: f64, days: f64, variables: f64, models: f64, mode: &str) -> JsValue {
        let o = Object::new();
        for (k, v) in [("locations", locations), ("days", days), ("variables", variables), ("models", models)] {
            Reflect::set(&o, &k.into(), &v.into()).unwrap();
        }
        Reflect::set(&o, &"mode".into(), &mode.into()).unwrap();
        o.into()
    }

    #[wasm_bindgen_test]
    fn open_meteo_weights_match_the_worked_values() {
        for (l, v, d, m, want) in [
            (1.0, 10.0, 7.0, 1.0, 1.0),
            (1.0, 15.0, 14.0, 1.0, 1.5),
            (1.0, 15.0, 28.0, 1.0, 3.0),
            (1.0, 6.0, 7.0, 2.0, 1.2),
            (100.0, 3.0, 7.0, 1.0, 100.0),
        ] {
            let got = open_meteo_weight(call(l, d, v, m, "server")).unwrap();
            assert!((got - want).abs() < 1e-9, "{l} {v} {d} {m}: {got}");
        }
        assert_eq!(open_meteo_weight(call(1.0, 28.0, 5.0, 1.0, "conservative")).unwrap(), 2.0);
        assert!(open_meteo_weight(call(0.0, 7.0, 1.0, 1.0, "server")).is_err());
        assert!(open_meteo_weight(call(1.0, 7.0, 1.0, 1.0, "exact")).is_err());
    }

    #[wasm_bindgen_test]
    fn a_url_or_query_string_is_weighed_as_the_core_reads_it() {
        let weigh = |url: JsValue, mode: Option<&str>| open_meteo_query_weight(url, mode.map(JsValue::from));
        let message = |result: Result<f64, wasm_bindgen::JsError>| {
            js_sys::Error::from(JsValue::from(result.unwrap_err())).message().as_string().unwrap()
        };
        let url =
            "https://api.open-meteo.com/v1/forecast?latitude=1,2&longitude=3,4&daily=a,b&forecast_days=16&past_days=7";
        // past_days adds to forecast_days: 23 days, 2 locations × 23/14 conservatively, 1 each on the server
        assert_eq!(weigh(url.into(), None).unwrap(), 2.0 * 23.0 / 14.0);
        assert_eq!(weigh(url.into(), Some("conservative")).unwrap(), 2.0 * 23.0 / 14.0);
        assert_eq!(weigh(url.into(), Some("server")).unwrap(), 2.0);
        let constructor: js_sys::Function = Reflect::get(&js_sys::global(), &"URL".into()).unwrap().into();
        let object = Reflect::construct(&constructor, &js_sys::Array::of1(&url.into())).unwrap();
        assert_eq!(weigh(object, Some("server")).unwrap(), 2.0, "a URL object is read by its href");
        // no variables: the formula with its variable factor at 1, as the server charges it
        assert_eq!(weigh("?latitude=1&forecast_days=16".into(), None).unwrap(), 16.0 / 14.0);
        assert_eq!(weigh("latitude=1&forecast_days=16".into(), Some("server")).unwrap(), 1.0);
        assert_eq!(
            message(weigh("latitude=1&daily=a&forecast_days=17".into(), None)),
            r#"forecast_days must be a whole number from 0 to 16, got "17""#
        );
        assert_eq!(message(weigh("daily=a".into(), None)), "latitude is required");
        assert_eq!(
            message(weigh("latitude=1".into(), Some("exact"))),
            r#"mode must be "conservative" or "server", got "exact""#
        );
        assert!(message(weigh(JsValue::from(42), None)).contains("a URL or a query string"));
        assert_eq!(
            message(open_meteo_query_weight("latitude=1".into(), Some(JsValue::from(1)))),
            r#"mode must be "conservative" or "server", got a number"#
        );
    }

    #[wasm_bindgen_test]
    fn rate_limit_bodies_are_classified() {
        let minutely =
            r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#;
        assert_eq!(classify_rate_limit(429, minutely).as_string().unwrap(), "minutely");
        assert_eq!(classify_rate_limit(429, "garbage").as_string().unwrap(), "unknown");
        assert!(classify_rate_limit(200, minutely).is_null());
    }

    /// The pacer's waits (gloo-timers futures): one runs its time, a cancelled one ends at
    /// once and clears its timer.
    #[wasm_bindgen_test]
    async fn a_wait_runs_its_time_and_a_cancelled_one_ends_at_once() {
        use wasm_bindgen_futures::JsFuture;
        let started = js_sys::Date::now();
        let short = Wait::new(30.0).unwrap();
        assert_eq!(JsFuture::from(short.done()).await.unwrap(), JsValue::TRUE);
        let waited = js_sys::Date::now() - started;
        assert!(waited >= 29.0, "a 30 ms wait ended after {waited} ms");
        let long = Wait::new(600_000.0).unwrap();
        long.cancel();
        let started = js_sys::Date::now();
        assert_eq!(JsFuture::from(long.done()).await.unwrap(), JsValue::FALSE);
        assert!(js_sys::Date::now() - started < 1_000.0, "a cancelled wait ends at once");
        assert!(Wait::new(f64::NAN).is_err(), "a wait of NaN ms is refused");
    }

    #[wasm_bindgen_test]
    fn the_pacer_core_places_and_refunds() {
        let windows = js_sys::Array::of1(&{
            let w = Object::new();
            Reflect::set(&w, &"lengthMs".into(), &10_000.0.into()).unwrap();
            Reflect::set(&w, &"budget".into(), &10.0.into()).unwrap();
            JsValue::from(w)
        });
        let options = Object::new();
        Reflect::set(&options, &"windows".into(), &windows).unwrap();
        let mut p = PacerCoreJs::new(options.into()).unwrap();
        let a = p.reserve(0.0, 6.0, None).unwrap();
        assert_eq!(get(&p.reserve(0.0, 6.0, None).unwrap(), "delayMs").as_f64(), Some(10_000.0));
        assert_eq!(p.cancel(get(&a, "id").as_f64().unwrap()), DecisionStatus::Allowed);
        assert_eq!(p.eta_ms(0.0, 4.0).unwrap(), 0.0);
        let err = p.reserve(0.0, 11.0, None).unwrap_err();
        assert_eq!(get(&err, "name").as_string().unwrap(), "PacerWeightError");
    }

    fn one_window(length_ms: f64, budget: f64, max_in_flight: f64) -> PacerCoreJs {
        let w = Object::new();
        Reflect::set(&w, &"lengthMs".into(), &length_ms.into()).unwrap();
        Reflect::set(&w, &"budget".into(), &budget.into()).unwrap();
        let options = Object::new();
        Reflect::set(&options, &"windows".into(), &js_sys::Array::of1(&w)).unwrap();
        Reflect::set(&options, &"maxInFlight".into(), &max_in_flight.into()).unwrap();
        PacerCoreJs::new(options.into()).unwrap()
    }

    #[wasm_bindgen_test]
    fn the_pacer_decisions_answer_a_status_and_their_figures() {
        let mut p = one_window(10_000.0, 10.0, 1.0);
        let figures = p.results(); // [atMs, id, retryAfterMs]
        assert_eq!(p.place(1_000.0, 6.0, None), DecisionStatus::Allowed);
        let first = figures.to_vec()[1];
        assert_eq!(figures.to_vec()[0], 1_000.0);
        assert_eq!(p.place(1_000.0, 6.0, None), DecisionStatus::Allowed);
        let second = figures.to_vec()[1];
        assert_eq!(figures.to_vec()[0], 11_000.0, "the second 6 waits a window");
        assert_eq!(p.due(1_000.0, first), DecisionStatus::Allowed, "it goes out");
        assert_eq!(p.due(11_000.0, second), DecisionStatus::Busy, "its one slot is taken");
        assert_eq!(p.due(5_000.0, 99.0), DecisionStatus::Unknown);
        assert_eq!(p.try_acquire(1_000.0, 1.0), DecisionStatus::Busy);
        assert_eq!(p.release(first), DecisionStatus::Allowed);
        assert_eq!(p.release(first), DecisionStatus::Unknown, "released once");
        assert_eq!(p.next_in_line(), DecisionStatus::Allowed);
        assert_eq!(figures.to_vec()[1], second);
        assert_eq!(p.next_in_line(), DecisionStatus::Unknown, "nobody else waits");
        assert_eq!(p.cancel(second), DecisionStatus::Allowed, "refunded");
        assert_eq!(p.due(2_000.0, second), DecisionStatus::Unknown);
        let mut q = one_window(10_000.0, 10.0, 1.0);
        assert_eq!(q.place(0.0, 4.0, None), DecisionStatus::Allowed);
        let id = q.results().to_vec()[1];
        assert_eq!(q.due(0.0, id), DecisionStatus::Allowed);
        assert_eq!(q.place(0.0, 8.0, None), DecisionStatus::Allowed);
        let late = q.results().to_vec();
        assert_eq!(late[0], 10_000.0);
        assert_eq!(q.due(5_000.0, late[1]), DecisionStatus::Denied, "not yet");
        assert_eq!(q.results().to_vec()[0], 10_000.0, "the instant to wait for");
        let mut r = one_window(10_000.0, 10.0, 4.0);
        assert_eq!(r.try_acquire(0.0, 8.0), DecisionStatus::Allowed);
        let permit = r.results().to_vec()[1];
        assert_eq!(r.try_acquire(0.0, 5.0), DecisionStatus::Denied);
        assert_eq!(r.results().to_vec()[2], 10_000.0, "the ms until the budget has room");
        assert_eq!(r.release(permit), DecisionStatus::Allowed);
    }

    #[wasm_bindgen_test]
    fn the_pacer_refuses_bad_input_and_ids_with_a_status_or_an_error_naming_them() {
        let mut p = one_window(10_000.0, 10.0, 4.0);
        assert_eq!(p.place(f64::NAN, 1.0, None), DecisionStatus::InvalidNow);
        assert_eq!(p.place(-1.0, 1.0, None), DecisionStatus::InvalidNow);
        assert_eq!(p.place(0.0, 0.0, None), DecisionStatus::InvalidCost);
        assert_eq!(p.try_acquire(0.0, f64::NAN), DecisionStatus::InvalidCost);
        assert_eq!(p.place(0.0, 11.0, None), DecisionStatus::CostTooHigh);
        assert_eq!(get(&p.last_error(), "name").as_string().unwrap(), "PacerWeightError");
        for id in [f64::NAN, -1.0, 1.5, f64::INFINITY, 2f64.powi(53)] {
            assert_eq!(p.due(0.0, id), DecisionStatus::InvalidId, "{id}");
            assert_eq!(p.release(id), DecisionStatus::InvalidId, "{id}");
            assert_eq!(p.cancel(id), DecisionStatus::InvalidId, "{id}");
            let message = |e: JsValue| js_sys::Error::from(e).message().as_string().unwrap();
            assert!(message(p.dispatch(id).unwrap_err()).starts_with("id must be a whole number"), "{id}");
            assert!(message(p.reschedule(0.0, id).unwrap_err()).starts_with("id must be a whole number"), "{id}");
        }
        assert_eq!(p.due(f64::NAN, 1.0), DecisionStatus::InvalidNow);
        let mut full = {
            let options = Object::new();
            Reflect::set(&options, &"maxQueued".into(), &1.0.into()).unwrap();
            PacerCoreJs::new(options.into()).unwrap()
        };
        assert_eq!(full.place(0.0, 1.0, None), DecisionStatus::Allowed);
        assert_eq!(full.place(0.0, 1.0, None), DecisionStatus::QueueFull);
        assert_eq!(get(&full.last_error(), "name").as_string().unwrap(), "PacerQueueFullError");
    }

    #[wasm_bindgen_test]
    fn the_cache_core_is_single_flight_and_never_caches_errors() {
        let mut c = LocationCacheJs::new(1_000.0, 10.0, 2.0).unwrap();
        let params = Object::new();
        Reflect::set(&params, &"daily".into(), &"b,a".into()).unwrap();
        let key = c.key(52.5249, 13.4149, params.into()).unwrap();
        assert_eq!(key, "52.52,13.41|daily=a,b");
        assert_eq!(get(&c.lookup(key.clone(), 0.0).unwrap(), "state").as_string().unwrap(), "miss");
        assert_eq!(get(&c.lookup(key.clone(), 0.0).unwrap(), "state").as_string().unwrap(), "pending");
        c.fail(key.clone());
        assert_eq!(get(&c.lookup(key.clone(), 0.0).unwrap(), "state").as_string().unwrap(), "miss");
        c.complete(key.clone(), "forecast".into(), 500.0).unwrap();
        let hit = c.lookup(key.clone(), 1_499.0).unwrap();
        assert_eq!(get(&hit, "value").as_string().unwrap(), "forecast");
        assert_eq!(get(&c.lookup(key, 1_500.0).unwrap(), "state").as_string().unwrap(), "miss");
    }

    #[wasm_bindgen_test]
    fn the_batch_policy_resumes_a_minutely_429_once() {
        let minutely =
            r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#;
        let mut b = BatchPolicyJs::new(JsValue::UNDEFINED, Some(1_000.0), Some(1_000.0)).unwrap();
        let first = b.on_response(429, minutely, 90_000.0, false, 4, true).unwrap();
        assert_eq!(get(&first, "action").as_string().unwrap(), "resume");
        assert_eq!(get(&first, "atMs").as_f64(), Some(121_000.0));
        let second = b.on_response(429, minutely, 125_000.0, false, 4, true).unwrap();
        assert_eq!(get(&second, "action").as_string().unwrap(), "abort");
        assert_eq!(get(&second, "kind").as_string().unwrap(), "minutely");
    }

    #[wasm_bindgen_test]
    fn the_batch_policy_lowers_the_cap_it_is_given_and_judges_an_unreadable_body() {
        let concurrent = r#"{"error":true,"reason":"Too many concurrent requests"}"#;
        let mut b = BatchPolicyJs::new(JsValue::UNDEFINED, None, None).unwrap();
        let lower = b.on_response(429, concurrent, 1_000.0, false, 4, true).unwrap();
        assert_eq!(get(&lower, "action").as_string().unwrap(), "lowerConcurrency");
        assert_eq!(get(&lower, "maxInFlight").as_f64(), Some(3.0));
        let null = b.on_response(200, "<html>", 1_000.0, true, 3, false).unwrap();
        assert_eq!(get(&null, "action").as_string().unwrap(), "null");
        assert!(b.sends(true) && b.sends(false));
        let abort = b.on_response(200, "<html>", 1_000.0, false, 3, false).unwrap();
        assert_eq!(get(&abort, "action").as_string().unwrap(), "abort");
        assert_eq!(get(&abort, "status").as_f64(), Some(200.0));
        assert!(!b.sends(false));
    }
}

/// Smart Flow's persistence through the browser's localStorage (the cache format of the
/// specification, §7): in headless Chromium the real `localStorage`; under Node, which has
/// none, a stand-in with the same three methods, so the same round trip runs there too.
mod smartflow_browser {
    use super::get;
    use js_sys::{Date, Reflect, JSON};
    use sluicegate::wasm::{format_saved_at, SmartFlowCoreJs};
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen(inline_js = "
        export function storage() {
            try { if (globalThis.localStorage) return globalThis.localStorage; } catch {}
            const items = new Map();
            return {
                standIn: true,
                getItem: (k) => (items.has(k) ? items.get(k) : null),
                setItem: (k, v) => { items.set(k, String(v)); },
                removeItem: (k) => { items.delete(k); },
            };
        }
        export function inBrowser() { return typeof window === 'object' && typeof document === 'object'; }
    ")]
    extern "C" {
        type Storage;
        fn storage() -> Storage;
        #[wasm_bindgen(js_name = inBrowser)]
        fn in_browser() -> bool;
        #[wasm_bindgen(method, js_name = getItem)]
        fn get_item(this: &Storage, key: &str) -> Option<String>;
        #[wasm_bindgen(method, js_name = setItem)]
        fn set_item(this: &Storage, key: &str, value: &str);
        #[wasm_bindgen(method, js_name = removeItem)]
        fn remove_item(this: &Storage, key: &str);
    }

    const DAY: f64 = 86_400.0;

    fn now() -> f64 {
        Date::now() / 1_000.0
    }

    /// The browser's localStorage (never the stand-in when running in a browser).
    fn local_storage() -> Storage {
        let storage = storage();
        let stand_in = Reflect::get(&storage, &"standIn".into()).unwrap().is_truthy();
        assert_eq!(stand_in, !in_browser(), "in a browser the real localStorage is used");
        storage
    }

    fn state(outcome: &JsValue) -> String {
        get(outcome, "state").as_string().unwrap()
    }

    fn learned_core() -> SmartFlowCoreJs {
        let mut core = SmartFlowCoreJs::new(None).unwrap();
        let body = JSON::parse(r#"{"organizationId":"O_5","serial":"Q2BB-BBBB-BBBB"}"#).unwrap();
        core.learn_from_response("/networks/N_1/devices", body);
        core.learn_from_response("/organizations/O_1/networks/N_2", JsValue::NULL);
        core.register_device("Q2 \"quoted\"", "O_1").unwrap();
        core
    }

    #[wasm_bindgen_test]
    fn learned_mappings_round_trip_through_local_storage() {
        let storage = local_storage();
        let key = "sluicegate-smartflow-test-round-trip";
        let core = learned_core();
        assert_eq!(core.dirty(), 3.0);
        storage.set_item(key, &core.save_cache(now()).unwrap());

        let text = storage.get_item(key).expect("the saved cache");
        assert!(text.starts_with(r#"{"saved_at":""#), "{text}");
        let mut reloaded = SmartFlowCoreJs::new(None).unwrap();
        let outcome = reloaded.load_cache(&text, now() + 60.0).unwrap();
        assert_eq!(state(&outcome), "loaded");
        assert_eq!(get(&outcome, "networks").as_f64(), Some(2.0));
        assert_eq!(get(&outcome, "devices").as_f64(), Some(2.0));
        assert!(reloaded.cache_fresh());
        assert_eq!(reloaded.resolve_org("/networks/N_1/clients").as_deref(), Some("O_5"));
        assert_eq!(reloaded.resolve_org("/devices/Q2BB-BBBB-BBBB/lldpCdp").as_deref(), Some("O_5"));
        assert_eq!(reloaded.resolve_org("/devices/Q2 \"quoted\"/x").as_deref(), Some("O_1"));
        assert_eq!(reloaded.dirty(), 0.0, "loaded mappings are not changes");
        // Saved again, the same state writes the same text.
        assert_eq!(reloaded.save_cache(now()).unwrap()[33..], core.save_cache(now()).unwrap()[33..]);
        storage.remove_item(key);
    }

    #[wasm_bindgen_test]
    fn a_corrupt_local_storage_entry_loads_nothing_and_throws_nothing() {
        let storage = local_storage();
        let key = "sluicegate-smartflow-test-corrupt";
        let whole = learned_core().save_cache(now()).unwrap();
        let saved_at = format_saved_at(now()).unwrap();
        let wrong_shape = format!(r#"{{"saved_at":"{saved_at}","networks":{{}}}}"#);
        let missing_org = format!(r#"{{"saved_at":"{saved_at}","devices":[{{"serial":"Q2"}}]}}"#);
        for corrupt in [&whole[..whole.len() / 2], "{ not json", "[]", &wrong_shape, &missing_org] {
            storage.set_item(key, corrupt);
            let mut core = SmartFlowCoreJs::new(None).unwrap();
            let outcome = core.load_cache(&storage.get_item(key).unwrap(), now()).expect("no exception");
            assert_eq!(state(&outcome), "malformed", "{corrupt}");
            assert!(!core.cache_fresh());
            assert_eq!(core.network_count() + core.device_count(), 0, "started empty");
        }
        storage.remove_item(key);
    }

    #[wasm_bindgen_test]
    fn an_expired_local_storage_entry_is_ignored_unless_the_ttl_is_none() {
        let storage = local_storage();
        let key = "sluicegate-smartflow-test-expired";
        storage.set_item(key, &learned_core().save_cache(now() - 7.0 * DAY - 60.0).unwrap());
        let text = storage.get_item(key).unwrap();

        let mut core = SmartFlowCoreJs::new(None).unwrap();
        assert_eq!(state(&core.load_cache(&text, now()).unwrap()), "expired");
        assert!(!core.cache_fresh());
        assert_eq!(core.resolve_org("/networks/N_1/clients"), None);

        let options = JSON::parse(r#"{"cacheTtlSeconds":null}"#).unwrap();
        let mut forever = SmartFlowCoreJs::new(Some(options)).unwrap();
        assert_eq!(state(&forever.load_cache(&text, now()).unwrap()), "loaded");
        assert_eq!(forever.resolve_org("/networks/N_1/clients").as_deref(), Some("O_5"));
        storage.remove_item(key);
    }
}
