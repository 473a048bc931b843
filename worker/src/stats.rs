//! The edge's decisions counted for its operator (`sluicegate::analytics`): each final
//! decision is counted in this isolate's recorder (no call, no wait: the request's path
//! does not change), and the recorder's batch goes to the one object named
//! [`STATS_OBJECT`] through `ctx.waitUntil` every few seconds or thousand decisions; a batch
//! that could not be delivered goes with the next one, once, then counts as lost.
//! `GET /__sluicegate/stats` (behind the admin token) reads the counts back, this isolate's
//! own batch delivered first.

use crate::config::Setup;
use crate::js::{self, Env};
use crate::log::{describe, log_error, log_hash};
use crate::respond::own;
use sluicegate::analytics::{data_point, Batch, DataPoint, Kind, Outcome};
use sluicegate::identity::Identity;
use sluicegate::pipeline::stats::{self, Action};
use sluicegate::rules::RequestFacts;
use sluicegate::time::Span;
use wasm_bindgen::prelude::*;
use web_sys::{Request, Response, Url};

/// The name of the `RATE_LIMITER` object that keeps the stats (its `mergeStats` and `getStats`).
pub(crate) const STATS_OBJECT: &str = "sluicegate-stats";

/// Count one decision of subject `(kind, name)` about the request of `facts`, refused with
/// `wait` when refused, when the rules file counts decisions. A refusal counts its identity
/// too: as counted, or its keyed hash (`"identities": "hashed"`). With `analytics.dataset`,
/// the decision is also one Workers Analytics Engine data point.
pub(crate) fn record(
    setup: &Setup,
    env: &Env,
    facts: &RequestFacts<'_>,
    (kind, name): (Kind, &str),
    outcome: Outcome,
    wait: Span,
) {
    let analytics = setup.rules.analytics();
    if !analytics.enabled {
        return;
    }
    if let Some(dataset) = &analytics.dataset {
        write_point(env, dataset, data_point(kind, name, outcome, facts.colo.unwrap_or(""), wait), facts.identity);
    }
    let identity = facts.identity;
    // Only a refusal's identity is kept: the address is written out for those alone.
    let shown = identity.filter(|_| outcome == Outcome::Refused).map(|identity| {
        let counted = identity.ip.to_string();
        if analytics.hashed {
            log_hash(env).tag(&counted)
        } else {
            counted
        }
    });
    let now = js_sys::Date::now() as u64;
    crate::isolate::runtime(|rt| rt.recorder.borrow_mut().record(now, kind, name, outcome, shown.as_deref()));
}

/// Write `point` to the Analytics Engine binding `dataset`, the identity's keyed hash as its
/// index. The binding was checked at start; a write that throws is left out (the runtime
/// writes in the background, and a request never waits on it).
fn write_point(env: &Env, dataset: &str, point: DataPoint<'_>, identity: Option<Identity>) {
    let Ok(binding) = js_sys::Reflect::get(env, &JsValue::from_str(dataset)) else { return };
    let Ok(write) = js_sys::Reflect::get(&binding, &"writeDataPoint".into()) else { return };
    let Some(write) = write.dyn_ref::<js_sys::Function>() else { return };
    let blobs = js_sys::Array::new();
    for blob in point.blobs {
        blobs.push(&JsValue::from_str(blob));
    }
    let doubles = js_sys::Array::of2(&point.doubles[0].into(), &point.doubles[1].into());
    let index = identity.map(|i| log_hash(env).tag(&i.ip.to_string())).unwrap_or_default();
    let data = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&data, &"blobs".into(), &blobs);
    let _ = js_sys::Reflect::set(&data, &"doubles".into(), &doubles);
    let _ = js_sys::Reflect::set(&data, &"indexes".into(), &js_sys::Array::of1(&JsValue::from_str(&index)));
    let _ = write.call1(&binding, &data);
}

/// Hand the recorder's batch to the stats object through `ctx.waitUntil` when one is due.
pub(crate) fn flush_if_due(env: &Env, ctx: &JsValue) {
    let now = js_sys::Date::now() as u64;
    let due = crate::isolate::runtime(|rt| !rt.flushing.get() && rt.recorder.borrow().due(now));
    if !due {
        return;
    }
    let env = JsValue::clone(env).unchecked_into::<Env>();
    let task = wasm_bindgen_futures::future_to_promise(async move {
        flush(&env).await;
        Ok(JsValue::UNDEFINED)
    });
    if let Ok(f) = js_sys::Reflect::get(ctx, &"waitUntil".into()) {
        if let Some(f) = f.dyn_ref::<js_sys::Function>() {
            let _ = f.call1(ctx, &task);
        }
    }
}

/// Deliver the recorder's batch now (one delivery at a time per isolate). A batch that
/// fails goes back into the recorder unless it had failed before: then it is counted as lost.
async fn flush(env: &Env) {
    let taken = crate::isolate::runtime(|rt| {
        if rt.flushing.replace(true) {
            return None;
        }
        let mut recorder = rt.recorder.borrow_mut();
        (!recorder.is_empty()).then(|| recorder.take())
    });
    let Some(batch) = taken else {
        crate::isolate::runtime(|rt| rt.flushing.set(false));
        return;
    };
    let sent = call(stats_object(env).and_then(|o| o.merge_stats(&batch.to_json(), js_sys::Date::now()))).await;
    crate::isolate::runtime(|rt| {
        rt.flushing.set(false);
        if let Err(error) = &sent {
            let retried = rt.retried.replace(false);
            log_error(&format!(
                "sluicegate: stats batch of {} decisions not delivered{}: {}",
                batch.decisions(),
                if retried { ", counted as lost" } else { ", kept for the next one" },
                describe(error)
            ));
            let mut recorder = rt.recorder.borrow_mut();
            if retried {
                recorder.restore(
                    &Batch { rows: Vec::new(), lost: batch.decisions() + batch.lost },
                    js_sys::Date::now() as u64,
                );
            } else {
                rt.retried.set(true);
                recorder.restore(&batch, js_sys::Date::now() as u64);
            }
        } else {
            rt.retried.set(false);
        }
    });
}

/// The stats route's answer, when this request is one of its paths and the admin token is set.
pub(crate) async fn serve(
    request: &Request,
    env: &Env,
    setup: &Setup,
    url: &Url,
    path: &str,
    caller: Option<Identity>,
) -> Result<Option<Response>, JsValue> {
    let Some(token) = env.admin_token().as_string().filter(|t| !t.is_empty()) else { return Ok(None) };
    let Some(route) = stats::route(path) else { return Ok(None) };
    let params = url.search_params();
    let (since, rule) = (params.get("since"), params.get("rule"));
    let now = js_sys::Date::now() as u64;
    let query = match stats::action(route, &request.method(), since.as_deref(), rule.as_deref(), now) {
        // The dashboard's files are static, for anyone: the page asks for the token itself.
        Action::Asset(name) => return Ok(Some(own(&stats::asset(dashboard_file(name))))),
        // Anything else only with the token: no status says more to a caller without it.
        _ if let Some(refusal) = crate::auth::authorise(request, &token, caller, "admin")? => return Ok(Some(refusal)),
        Action::Answer(reply) => return Ok(Some(own(&reply))),
        Action::Stats(query) => query,
    };
    // This isolate's counts so far are part of the answer.
    flush(env).await;
    let read = call(
        stats_object(env)
            .and_then(|o| o.get_stats(query.since_ms as f64, query.until_ms as f64, query.name.unwrap_or_default())),
    )
    .await;
    let json =
        read.and_then(|text| text.as_string().ok_or_else(|| JsValue::from_str("the stats store answered no text")));
    let reply = match json {
        // The limits each subject works under, beside its counts (the capabilities answer).
        Ok(json) if json.starts_with('{') => {
            let limits = crate::isolate::with(|i| setup.rules.capabilities_json(|id| i.degraded(id)));
            sluicegate::pipeline::Reply::json(200, format!("{{\"limits\":{limits},{}", &json[1..]))
        }
        Ok(json) => sluicegate::pipeline::Reply::json(200, json),
        Err(error) => {
            log_error(&format!("sluicegate: 503 for the stats: {}", describe(&error)));
            stats::unavailable()
        }
    };
    Ok(Some(own(&reply)))
}

/// The dashboard's file `name` from the bundle: its content type and text.
fn dashboard_file(name: &str) -> Option<(String, String)> {
    let assets = crate::isolate::runtime(|rt| rt.dashboard.borrow().clone())?;
    let found = assets.call1(&JsValue::UNDEFINED, &JsValue::from_str(name)).ok()?;
    let found = js_sys::Array::from(&found);
    Some((found.get(0).as_string()?, found.get(1).as_string()?))
}

fn stats_object(env: &Env) -> Result<js::Stub, JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    namespace.get(&namespace.id_from_name(STATS_OBJECT)?)
}

/// The answer of a call to the stats object, within the store's timeout.
async fn call(call: Result<JsValue, JsValue>) -> Result<JsValue, JsValue> {
    js::store_answer(call, "the stats store", crate::config::STORE_TIMEOUT_MS).await
}
