//! The admin API of tenant limits, when the secret `SLUICEGATE_ADMIN_TOKEN` is set:
//!
//! - `GET /v1/tenants`: every limit this edge knows, with where it comes from;
//! - `GET | PUT | DELETE /v1/tenants/:tenant/rate-limit`: the limit that applies to one
//!   tenant (override > the rules file's entry > the default, saying which), its runtime
//!   override set (validated against the tenants section's `max_body_bytes`, replacing the
//!   limit whole and starting fresh buckets; the override in force again changes nothing)
//!   or removed (fresh buckets of the limit that applies then; `404` when there is none).
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
//! address), what, before, after, when, and whether it changed anything.

use crate::config::Setup;
use crate::js::{self, Env};
use crate::log::{json_string, log};
use crate::respond::problem;
use crate::tenancy;
use sluicegate::headers;
use sluicegate::identity::Identity;
use sluicegate::tenants::{effective, LimitSource, Overrides, TenantLimit, Tenants};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, Response};

const PREFIX: &str = "/v1/tenants";
/// The largest limit document a PUT may send.
const MAX_BODY: u64 = 64 * 1024;

/// The admin API's answer, when this request is one of its routes and the API exists.
pub async fn serve(
    request: &Request,
    env: &Env,
    setup: &Setup,
    path: &str,
    caller: Option<Identity>,
) -> Result<Option<Response>, JsValue> {
    let Some(token) = env.admin_token().as_string().filter(|t| !t.is_empty()) else { return Ok(None) };
    let Some(route) = route(path) else { return Ok(None) };
    if let Some(refusal) = crate::auth::authorise(request, &token, caller, "admin")? {
        return Ok(Some(refusal));
    }
    let Some(tenants) = setup.rules.tenants() else {
        return Ok(Some(not_found("This edge has no tenants section in its rules.")));
    };
    let method = request.method().to_ascii_uppercase();
    let answer = match (route, method.as_str()) {
        (Route::List, "GET") => list(env, tenants).await,
        (Route::Limit(tenant), _) if !is_tenant(tenant) => {
            bad_request("tenant", "must be 1–128 letters, digits, '_', '-' or '.'")
        }
        (Route::Limit(tenant), "GET") => describe(env, tenants, tenant).await,
        (Route::Limit(tenant), "PUT") => put(request, env, tenants, tenant, caller).await?,
        (Route::Limit(tenant), "DELETE") => delete(env, tenants, tenant, caller).await?,
        (Route::List, _) => not_allowed("GET"),
        (Route::Limit(_), _) => not_allowed("GET, PUT, DELETE"),
        (Route::Unknown, _) => not_found("Not an admin route."),
    };
    Ok(Some(answer))
}

#[derive(Debug, PartialEq)]
enum Route<'a> {
    List,
    Limit(&'a str),
    Unknown,
}

/// The admin route of the normalised `path`, if it is under `/v1/tenants`. Routes match in
/// any case (`/V1/Tenants`), as the origin's router may: no spelling of them is forwarded
/// while the admin API is on. The tenant keeps its case.
fn route(path: &str) -> Option<Route<'_>> {
    Some(match strip_prefix_ignoring_case(path, PREFIX)? {
        "" | "/" => Route::List,
        rest => match rest.strip_prefix('/').and_then(|r| strip_suffix_ignoring_case(r, "/rate-limit")) {
            Some(tenant) => Route::Limit(tenant),
            None => Route::Unknown,
        },
    })
}

fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let (head, rest) = (text.get(..prefix.len())?, text.get(prefix.len()..)?);
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

fn strip_suffix_ignoring_case<'a>(text: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = text.len().checked_sub(suffix.len())?;
    let (rest, tail) = (text.get(..cut)?, text.get(cut..)?);
    tail.eq_ignore_ascii_case(suffix).then_some(rest)
}

fn is_tenant(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

fn source_name(source: LimitSource) -> &'static str {
    match source {
        LimitSource::Override => "override",
        LimitSource::Config => "config",
        LimitSource::Default => "default",
    }
}

/// The overrides as their store holds them now: an admin read never answers from this
/// isolate's copy, which may be a second old or, when the store cannot be read, empty.
async fn stored_overrides(env: &Env) -> Result<Overrides, Response> {
    let read = async {
        let text = call_store(tenancy::overrides_object(env).and_then(|o| o.get_overrides())).await?;
        let text = text.as_string().ok_or_else(|| JsValue::from_str("the overrides store answered no text"))?;
        Overrides::from_json(&text).map(|(o, _)| o).map_err(|e| JsValue::from_str(&e))
    };
    read.await.map_err(|error| store_unavailable(&error, "The tenant overrides cannot be read right now."))
}

/// The answer of a call to the overrides object, within the store's timeout.
async fn call_store(call: Result<JsValue, JsValue>) -> Result<JsValue, JsValue> {
    let call = js_sys::Promise::resolve(&call?);
    let answer =
        JsFuture::from(js::within(&call, f64::from(crate::config::STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    if answer.is_undefined() {
        return Err(JsValue::from_str(&format!(
            "the overrides store did not answer within {} ms",
            crate::config::STORE_TIMEOUT_MS
        )));
    }
    Ok(answer)
}

/// `{"tenant", "limit", "source"}` for the limit that applies to `tenant` now (an override's
/// `max_body_bytes` at most the instance's, as requests meet it).
async fn describe(env: &Env, tenants: &Tenants, tenant: &str) -> Response {
    let mut overrides = match stored_overrides(env).await {
        Ok(overrides) => overrides,
        Err(refusal) => return refusal,
    };
    overrides.clamp_bodies(tenants.max_body_bytes);
    let overridden = overrides.get(tenant).map(|o| &o.limit);
    json(200, &entry(tenant, effective(overridden, tenants.limits.get(tenant), tenants.default.as_ref())))
}

fn entry(tenant: &str, found: Option<(&TenantLimit, LimitSource)>) -> String {
    match found {
        Some((limit, source)) => format!(
            "{{\"tenant\":{},\"limit\":{},\"source\":\"{}\"}}",
            json_string(tenant),
            limit.to_json(),
            source_name(source)
        ),
        None => format!("{{\"tenant\":{},\"limit\":null,\"source\":\"none\"}}", json_string(tenant)),
    }
}

/// Every tenant with a limit of its own (configured or overridden), sorted, and the default.
async fn list(env: &Env, tenants: &Tenants) -> Response {
    let mut overrides = match stored_overrides(env).await {
        Ok(overrides) => overrides,
        Err(refusal) => return refusal,
    };
    overrides.clamp_bodies(tenants.max_body_bytes);
    let mut names: Vec<&String> = tenants.limits.keys().chain(overrides.iter().map(|(t, _)| t)).collect();
    names.sort();
    names.dedup();
    let entries: Vec<String> = names
        .into_iter()
        .map(|t| entry(t, effective(overrides.get(t).map(|o| &o.limit), tenants.limits.get(t), None)))
        .collect();
    let default = tenants.default.as_ref().map_or_else(|| "null".to_owned(), TenantLimit::to_json);
    json(200, &format!("{{\"default\":{default},\"tenants\":[{}]}}", entries.join(",")))
}

/// Set `tenant`'s override. The same override again is idempotent: the same answer, its
/// buckets not started afresh again, and an audit line with `"changed": false`.
async fn put(
    request: &Request,
    env: &Env,
    tenants: &Tenants,
    tenant: &str,
    caller: Option<Identity>,
) -> Result<Response, JsValue> {
    let Ok(body) = crate::body::request_text(request, MAX_BODY).await? else {
        return Ok(bad_request("", &format!("the limit document is larger than {MAX_BODY} bytes")));
    };
    let limit = match TenantLimit::from_json_text(&body, tenants.max_body_bytes) {
        Ok(limit) => limit,
        Err(e) => return Ok(bad_request(&e.field, &e.message)),
    };
    let at = js_sys::Date::now();
    let call = tenancy::overrides_object(env).and_then(|o| o.put_override(tenant, &limit.to_json(), at));
    let answer = match call_store(call).await {
        Ok(answer) => answer,
        Err(error) => return Ok(store_unavailable(&error, CHANGE_NOT_CONFIRMED)),
    };
    let field = |name: &str| js_sys::Reflect::get(&answer, &name.into()).unwrap_or(JsValue::UNDEFINED);
    if let Some(why) = field("refused").as_string() {
        let detail = format!("Tenant \"{tenant}\" has no override and {why}: delete one first.");
        return Ok(coded(409, &detail, "too_many_overrides"));
    }
    let before = field("before").as_string().unwrap_or_default();
    let changed = field("changed").as_bool().unwrap_or(true);
    if changed {
        tenancy::forget_overrides();
    }
    audit(("put", changed), tenant, &before, &limit.to_json(), caller, at);
    Ok(json(200, &entry(tenant, Some((&limit, LimitSource::Override)))))
}

/// Remove `tenant`'s override (`404` when it has none).
async fn delete(env: &Env, tenants: &Tenants, tenant: &str, caller: Option<Identity>) -> Result<Response, JsValue> {
    let before = match call_store(tenancy::overrides_object(env).and_then(|o| o.delete_override(tenant))).await {
        Ok(before) => before.as_string().unwrap_or_default(),
        Err(error) => return Ok(store_unavailable(&error, CHANGE_NOT_CONFIRMED)),
    };
    if before.is_empty() {
        return Ok(not_found(&format!("Tenant \"{tenant}\" has no override.")));
    }
    tenancy::forget_overrides();
    audit(("delete", true), tenant, &before, "", caller, js_sys::Date::now());
    Ok(json(200, &entry(tenant, effective(None, tenants.limits.get(tenant), tenants.default.as_ref()))))
}

/// One log line per accepted change: who, what, before, after, when, and whether it
/// changed anything (a repeated PUT does not).
fn audit((action, changed): (&str, bool), tenant: &str, before: &str, after: &str, caller: Option<Identity>, at: f64) {
    let or_null = |s: &str| if s.is_empty() { "null".to_owned() } else { s.to_owned() };
    log(&format!(
        "{{\"sluicegate\":\"admin\",\"action\":\"{action}\",\"tenant\":{},\"before\":{},\"after\":{},\"changed\":{changed},\
         \"by\":{},\"at_ms\":{}}}",
        json_string(tenant),
        or_null(before),
        or_null(after),
        json_string(&caller.map_or_else(|| "unknown".to_owned(), |c| c.address.to_string())),
        at as u64
    ));
}

fn json(status: u16, body: &str) -> Response {
    crate::respond::answer(status, "application/json", "no-store", Some(body), &[])
        .unwrap_or_else(|_| Response::error())
}

fn bad_request(field: &str, message: &str) -> Response {
    let detail = if field.is_empty() { message.to_owned() } else { format!("field \"{field}\": {message}") };
    problem(400, &headers::problem(400, "Bad Request", &detail, None, None), None)
}

fn not_found(detail: &str) -> Response {
    problem(404, &headers::problem(404, "Not Found", detail, None, None), None)
}

fn not_allowed(allow: &str) -> Response {
    let response = problem(405, &headers::problem(405, "Method Not Allowed", "", None, None), None);
    let _ = response.headers().set("allow", allow);
    response
}

/// What a `503` to a change says: a store that timed out may still have made it.
const CHANGE_NOT_CONFIRMED: &str =
    "The tenant overrides store cannot be reached: the change was not confirmed. Try again (repeating a change is safe).";

/// `503` with `"code": "store_unavailable"` and `Retry-After: 1`, the store's error logged.
fn store_unavailable(error: &JsValue, detail: &str) -> Response {
    crate::log::log_error(&format!(
        "{{\"sluicegate\":\"store-failure\",\"store\":\"{}\",\"error\":{}}}",
        crate::counter::OVERRIDES_OBJECT,
        json_string(&crate::log::describe(error))
    ));
    let response = coded(503, detail, "store_unavailable");
    let _ = response.headers().set("retry-after", "1");
    response
}

/// A problem+json answer with a `code`.
fn coded(status: u16, detail: &str, code: &str) -> Response {
    problem(status, &headers::coded_problem(status, detail, code), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_routes_match_in_any_case_and_keep_the_tenant_as_sent() {
        for path in ["/v1/tenants", "/V1/tenants", "/V1/Tenants/", "/v1/TENANTS"] {
            assert_eq!(route(path), Some(Route::List), "{path}");
        }
        assert_eq!(route("/v1/TENANTS/Acme/rate-limit"), Some(Route::Limit("Acme")));
        assert_eq!(route("/V1/Tenants/acme/RATE-LIMIT"), Some(Route::Limit("acme")));
        assert_eq!(
            route("/V1/TENANTS/acme"),
            Some(Route::Unknown),
            "under the prefix: the admin API's, never the origin's"
        );
        assert_eq!(route("/v1/tenantsX"), Some(Route::Unknown));
        for path in ["/v1/tenant", "/v2/tenants", "/", "/api/v1/tenants", "/v1/ténants", "/v1/te"] {
            assert_eq!(route(path), None, "{path}");
        }
    }
}
