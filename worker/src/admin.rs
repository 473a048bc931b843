//! The admin API of tenant limits and of the rules' enforcement, when the secret
//! `SLUICEGATE_ADMIN_TOKEN` is set (its routes, methods and answers are
//! `sluicegate::pipeline::admin`'s; this carries them out):
//!
//! - `GET /v1/tenants`: every limit this edge knows, with where it comes from;
//! - `GET | PUT | DELETE /v1/tenants/:tenant/rate-limit`: the limit that applies to one
//!   tenant (override > the rules file's entry > the default, saying which), its runtime
//!   override set (validated against the tenants section's `max_body_bytes`, replacing the
//!   limit whole and starting fresh buckets; the override in force again changes nothing)
//!   or removed (fresh buckets of the limit that applies then; `404` when there is none).
//! - `GET /v1/rules`: every rule's `enforce` now, with where it comes from;
//! - `GET | PUT | DELETE /v1/rules/:rule/enforce`: one rule's, its override set
//!   (`{"enforce": 0.1}`; counts go on, only what is enforced changes) or removed.
//!
//! The routes match the normalised path in any case (`/V1/Tenants`), and every path under
//! `/v1/tenants` is the API's (a 404 when no route matches): none reaches the origin.
//!
//! Authorised by `Authorization: Bearer <token>`, compared in constant time; a wrong or
//! missing token is a bare 401, and a client that sent too many wrong ones is answered 429
//! for a while (see `crate::auth`). A limit document is read as it streams and refused at
//! the first byte past 64 KiB (never read whole first). Overrides are kept by one Durable
//! Object (they survive restarts) and every isolate reads them at most a second old; the API
//! itself reads and changes them in that object, and answers `503` `store_unavailable` when
//! it cannot be reached within a second. Each accepted change is logged: who (the caller's
//! address), what, before, after, when, and whether it changed anything. The rules' overrides
//! are kept by the same object, and read by the rules stage the same way.

use crate::config::Setup;
use crate::js::{self, Env};
use crate::log::{json_string, log};
use crate::respond::own;
use crate::tenancy;
use sluicegate::identity::Identity;
use sluicegate::pipeline::admin::{self, Action, CANNOT_READ, CHANGE_NOT_CONFIRMED, MAX_BODY, MAX_ENFORCE_BODY};
use sluicegate::pipeline::Reply;
use sluicegate::rules::{Enforce, RuleOverride, RuleOverrides, RuleSet};
use sluicegate::tenants::{effective, LimitSource, Overrides, Tenants};
use wasm_bindgen::prelude::*;
use web_sys::{Request, Response};

/// The admin API's answer, when this request is one of its routes and the API exists.
pub async fn serve(
    request: &Request,
    env: &Env,
    setup: &Setup,
    path: &str,
    caller: Option<Identity>,
) -> Result<Option<Response>, JsValue> {
    let Some(token) = env.admin_token().as_string().filter(|t| !t.is_empty()) else { return Ok(None) };
    let Some(route) = admin::route(path) else { return Ok(None) };
    if let Some(refusal) = crate::auth::authorise(request, &token, caller, "admin")? {
        return Ok(Some(refusal));
    }
    let tenants = setup.rules.tenants();
    let rules = &setup.rules;
    let reply = match (admin::action(route, &request.method(), rules), tenants) {
        (Action::Answer(reply), _) => reply,
        (Action::ListRules, _) => match stored_rule_overrides(env).await {
            Ok(overrides) => admin::rules_list(rules, &overrides),
            Err(refusal) => refusal,
        },
        (Action::DescribeRule(rule), _) => match stored_rule_overrides(env).await {
            Ok(overrides) => admin::rule_entry(rules, &overrides, rule),
            Err(refusal) => refusal,
        },
        (Action::PutEnforce(rule), _) => put_enforce(request, env, rules, rule, caller).await?,
        (Action::DeleteEnforce(rule), _) => change_enforce(env, rules, rule, None, caller).await?,
        (Action::List, Some(tenants)) => match stored_overrides(env).await {
            Ok(overrides) => admin::list(tenants, overrides),
            Err(refusal) => refusal,
        },
        (Action::Describe(tenant), Some(tenants)) => match stored_overrides(env).await {
            Ok(overrides) => admin::entry(tenants, overrides, tenant),
            Err(refusal) => refusal,
        },
        (Action::Put(tenant), Some(tenants)) => put(request, env, tenants, tenant, caller).await?,
        (Action::Delete(tenant), Some(tenants)) => delete(env, tenants, tenant, caller).await?,
        (_, None) => return Err(JsValue::from_str("an admin action without a tenants section")),
    };
    Ok(Some(own(&reply)))
}

/// The overrides as their store holds them now: an admin read never answers from this
/// isolate's copy, which may be a second old or, when the store cannot be read, empty.
async fn stored_overrides(env: &Env) -> Result<Overrides, Reply> {
    let read = tenancy::read_stored(env, js::Stub::get_overrides, Overrides::from_json).await;
    read.map_err(|error| store_unavailable(&error, CANNOT_READ))
}

/// The rules' overrides as their store holds them now.
async fn stored_rule_overrides(env: &Env) -> Result<RuleOverrides, Reply> {
    let read = tenancy::read_stored(env, js::Stub::get_rule_overrides, RuleOverrides::from_json).await;
    read.map_err(|error| store_unavailable(&error, CANNOT_READ))
}

/// Set `rule`'s `enforce` from a PUT's body. The same again is idempotent (an audit line
/// with `"changed": false`). The rule's counts go on: only which refusals are enforced
/// changes.
async fn put_enforce(
    request: &Request,
    env: &Env,
    rules: &RuleSet,
    rule: &str,
    caller: Option<Identity>,
) -> Result<Reply, JsValue> {
    let body = crate::body::request_text(request, MAX_ENFORCE_BODY).await?.ok();
    match admin::put_enforce(body.as_deref()) {
        Ok(enforce) => change_enforce(env, rules, rule, Some(enforce), caller).await,
        Err(refusal) => Ok(refusal),
    }
}

/// Set `rule`'s override of `enforce`, or remove it (`None`; `404` when it has none, so a
/// repeated delete is `404`), in the overrides object; audit the change and answer the
/// rule's entry as it is from now on.
async fn change_enforce(
    env: &Env,
    rules: &RuleSet,
    rule: &str,
    enforce: Option<Enforce>,
    caller: Option<Identity>,
) -> Result<Reply, JsValue> {
    let at = js_sys::Date::now();
    let json = enforce.map(Enforce::to_json).unwrap_or_default();
    let call = tenancy::overrides_object(env).and_then(|o| o.set_rule_override(rule, &json, at));
    let (before, changed) = match change_in_store(call).await {
        Ok(Ok(change)) => change,
        Ok(Err(why)) => return Ok(admin::too_many_rule_overrides(rule, &why)),
        Err(refusal) => return Ok(refusal),
    };
    if enforce.is_none() && before.is_empty() {
        return Ok(admin::no_rule_override(rule));
    }
    if changed {
        crate::isolate::with(|i| i.forget_rule_overrides());
    }
    let action = if enforce.is_some() { "put" } else { "delete" };
    audit((action, changed), ("rule", rule), &before, &json, caller, at);
    let set = enforce.map(|enforce| RuleOverride { enforce, set_at: at as u64 });
    Ok(Reply::json(200, admin::rule_entry_json(rule, rules.get(rule).map(|r| r.enforce), set.as_ref())))
}

/// What the overrides object answered a change, within the store's timeout: `(before,
/// changed)` (`before` as JSON, or empty), or why it refused it (`{refused}`: as many
/// overrides as it keeps); `Err` the `503` when it could not be reached.
async fn change_in_store(call: Result<JsValue, JsValue>) -> Result<Result<(String, bool), String>, Reply> {
    let answer = call_store(call).await.map_err(|error| store_unavailable(&error, CHANGE_NOT_CONFIRMED))?;
    let field = |name: &str| js_sys::Reflect::get(&answer, &name.into()).unwrap_or(JsValue::UNDEFINED);
    if let Some(why) = field("refused").as_string() {
        return Ok(Err(why));
    }
    Ok(Ok((field("before").as_string().unwrap_or_default(), field("changed").as_bool().unwrap_or(true))))
}

/// The answer of a call to the overrides object, within the store's timeout.
async fn call_store(call: Result<JsValue, JsValue>) -> Result<JsValue, JsValue> {
    js::store_answer(call, "the overrides store", crate::config::STORE_TIMEOUT_MS).await
}

/// Set `tenant`'s override. The same override again is idempotent: the same answer, its
/// buckets not started afresh again, and an audit line with `"changed": false`.
async fn put(
    request: &Request,
    env: &Env,
    tenants: &Tenants,
    tenant: &str,
    caller: Option<Identity>,
) -> Result<Reply, JsValue> {
    let body = crate::body::request_text(request, MAX_BODY).await?.ok();
    let limit = match admin::put_limit(tenants, body.as_deref()) {
        Ok(limit) => limit,
        Err(refusal) => return Ok(refusal),
    };
    let at = js_sys::Date::now();
    let call = tenancy::overrides_object(env).and_then(|o| o.put_override(tenant, &limit.to_json(), at));
    let (before, changed) = match change_in_store(call).await {
        Ok(Ok(change)) => change,
        Ok(Err(why)) => return Ok(admin::too_many_overrides(tenant, &why)),
        Err(refusal) => return Ok(refusal),
    };
    if changed {
        tenancy::forget_overrides();
    }
    audit(("put", changed), ("tenant", tenant), &before, &limit.to_json(), caller, at);
    Ok(Reply::json(200, admin::entry_json(tenant, Some((&limit, LimitSource::Override)))))
}

/// Remove `tenant`'s override (`404` when it has none).
async fn delete(env: &Env, tenants: &Tenants, tenant: &str, caller: Option<Identity>) -> Result<Reply, JsValue> {
    let before = match call_store(tenancy::overrides_object(env).and_then(|o| o.delete_override(tenant))).await {
        Ok(before) => before.as_string().unwrap_or_default(),
        Err(error) => return Ok(store_unavailable(&error, CHANGE_NOT_CONFIRMED)),
    };
    if before.is_empty() {
        return Ok(admin::no_override(tenant));
    }
    tenancy::forget_overrides();
    audit(("delete", true), ("tenant", tenant), &before, "", caller, js_sys::Date::now());
    let found = effective(None, tenants.limits.get(tenant), tenants.default.as_ref());
    Ok(Reply::json(200, admin::entry_json(tenant, found)))
}

/// One log line per accepted change: who, what (`("tenant", name)` or `("rule", id)`),
/// before, after, when, and whether it changed anything (a repeated PUT does not).
fn audit(
    (action, changed): (&str, bool),
    (what, name): (&str, &str),
    before: &str,
    after: &str,
    caller: Option<Identity>,
    at: f64,
) {
    let or_null = |s: &str| if s.is_empty() { "null".to_owned() } else { s.to_owned() };
    log(&format!(
        "{{\"sluicegate\":\"admin\",\"action\":\"{action}\",\"{what}\":{},\"before\":{},\"after\":{},\"changed\":{changed},\
         \"by\":{},\"at_ms\":{}}}",
        json_string(name),
        or_null(before),
        or_null(after),
        json_string(&caller.map_or_else(|| "unknown".to_owned(), |c| c.address.to_string())),
        at as u64
    ));
}

/// [`admin::store_unavailable`], the store's error logged.
fn store_unavailable(error: &JsValue, detail: &str) -> Reply {
    crate::log::log_error(&format!(
        "{{\"sluicegate\":\"store-failure\",\"store\":\"{}\",\"error\":{}}}",
        crate::counter::OVERRIDES_OBJECT,
        json_string(&crate::log::describe(error))
    ));
    admin::store_unavailable(detail)
}
