//! The admin API of tenant limits, when the secret `SLUICEGATE_ADMIN_TOKEN` is set:
//!
//! - `GET /v1/tenants`: every limit this edge knows, with where it comes from;
//! - `GET | PUT | DELETE /v1/tenants/:tenant/rate-limit`: one tenant's limit, its runtime
//!   override set (replacing the limit whole and starting fresh buckets) or removed.
//!
//! The routes match the normalised path in any case (`/V1/Tenants`), and every path under
//! `/v1/tenants` is the API's (a 404 when no route matches): none reaches the origin.
//!
//! Authorised by `Authorization: Bearer <token>`, compared in constant time; a wrong or
//! missing token is a bare 401. Overrides are kept by one Durable Object (they survive
//! restarts) and every isolate reads them at most a second old. Each change is logged:
//! who (the caller's address), what, before, after, when.

use crate::config::Setup;
use crate::js::Env;
use crate::tenancy;
use crate::{json_string, log, now, problem};
use sluicegate::headers;
use sluicegate::identity::Identity;
use sluicegate::tenants::{effective, same_secret, LimitSource, TenantLimit, Tenants};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, Response};

const PREFIX: &str = "/v1/tenants";
/// The largest limit document a PUT may send.
const MAX_BODY: usize = 64 * 1024;

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
    if let Some(refusal) = unauthorised(request, &token)? {
        return Ok(Some(refusal));
    }
    let Some(tenants) = setup.rules.tenants() else {
        return Ok(Some(not_found("This edge has no tenants section in its rules.")));
    };
    let method = request.method().to_ascii_uppercase();
    let answer = match (route, method.as_str()) {
        (Route::List, "GET") => json(200, &list(env, tenants).await),
        (Route::Limit(tenant), _) if !is_tenant(tenant) => {
            bad_request("tenant", "must be 1–128 letters, digits, '_', '-' or '.'")
        }
        (Route::Limit(tenant), "GET") => json(200, &describe(env, tenants, tenant).await),
        (Route::Limit(tenant), "PUT") => put(request, env, tenants, tenant, caller).await?,
        (Route::Limit(tenant), "DELETE") => delete(env, tenants, tenant, caller).await?,
        (Route::List, _) => not_allowed("GET"),
        (Route::Limit(_), _) => not_allowed("GET, PUT, DELETE"),
        (Route::Unknown, _) => not_found("Not an admin route."),
    };
    Ok(Some(answer))
}

/// A bare `401` unless `request` carries `Authorization: Bearer <token>` (compared in
/// constant time).
///
/// # Errors
/// When the headers cannot be read.
pub fn unauthorised(request: &Request, token: &str) -> Result<Option<Response>, JsValue> {
    let authorised = request
        .headers()
        .get("authorization")?
        .and_then(|h| h.get(..7).filter(|s| s.eq_ignore_ascii_case("bearer ")).map(|_| h[7..].trim().to_owned()))
        .is_some_and(|given| same_secret(&given, token));
    if authorised {
        return Ok(None);
    }
    let response = problem(401, &headers::problem(401, "Unauthorized", "", None, None), None);
    response.headers().set("www-authenticate", "Bearer")?;
    Ok(Some(response))
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

/// `{"tenant", "limit", "source"}` for the limit that applies to `tenant` now.
async fn describe(env: &Env, tenants: &Tenants, tenant: &str) -> String {
    let overrides = tenancy::overrides(env, now()).await;
    let found =
        effective(overrides.get(tenant).map(|o| &o.limit), tenants.limits.get(tenant), tenants.default.as_ref());
    entry(tenant, found)
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
async fn list(env: &Env, tenants: &Tenants) -> String {
    let overrides = tenancy::overrides(env, now()).await;
    let mut names: Vec<&String> = tenants.limits.keys().chain(overrides.iter().map(|(t, _)| t)).collect();
    names.sort();
    names.dedup();
    let entries: Vec<String> = names
        .into_iter()
        .map(|t| entry(t, effective(overrides.get(t).map(|o| &o.limit), tenants.limits.get(t), None)))
        .collect();
    let default = tenants.default.as_ref().map_or_else(|| "null".to_owned(), TenantLimit::to_json);
    format!("{{\"default\":{default},\"tenants\":[{}]}}", entries.join(","))
}

async fn put(
    request: &Request,
    env: &Env,
    tenants: &Tenants,
    tenant: &str,
    caller: Option<Identity>,
) -> Result<Response, JsValue> {
    let body = JsFuture::from(request.text()?).await?.as_string().unwrap_or_default();
    if body.len() > MAX_BODY {
        return Ok(bad_request("", &format!("the limit document is larger than {MAX_BODY} bytes")));
    }
    let limit = match TenantLimit::from_json_text(&body, tenants.max_body_bytes) {
        Ok(limit) => limit,
        Err(e) => return Ok(bad_request(&e.field, &e.message)),
    };
    let at = js_sys::Date::now();
    let call = tenancy::overrides_object(env)?.put_override(tenant, &limit.to_json(), at)?;
    let before = match JsFuture::from(js_sys::Promise::resolve(&call)).await {
        Ok(before) => before.as_string().unwrap_or_default(),
        Err(error) => return Ok(store_failed(&error)),
    };
    tenancy::forget_overrides();
    audit("put", tenant, &before, &limit.to_json(), caller, at);
    Ok(json(200, &entry(tenant, Some((&limit, LimitSource::Override)))))
}

async fn delete(env: &Env, tenants: &Tenants, tenant: &str, caller: Option<Identity>) -> Result<Response, JsValue> {
    let call = tenancy::overrides_object(env)?.delete_override(tenant)?;
    let before = match JsFuture::from(js_sys::Promise::resolve(&call)).await {
        Ok(before) => before.as_string().unwrap_or_default(),
        Err(error) => return Ok(store_failed(&error)),
    };
    if before.is_empty() {
        return Ok(not_found(&format!("Tenant \"{tenant}\" has no override.")));
    }
    tenancy::forget_overrides();
    audit("delete", tenant, &before, "", caller, js_sys::Date::now());
    Ok(json(200, &entry(tenant, effective(None, tenants.limits.get(tenant), tenants.default.as_ref()))))
}

/// One log line per change: who, what, before, after, when.
fn audit(action: &str, tenant: &str, before: &str, after: &str, caller: Option<Identity>, at: f64) {
    let or_null = |s: &str| if s.is_empty() { "null".to_owned() } else { s.to_owned() };
    log(&format!(
        "{{\"sluicegate\":\"admin\",\"action\":\"{action}\",\"tenant\":{},\"before\":{},\"after\":{},\"by\":{},\"at_ms\":{}}}",
        json_string(tenant),
        or_null(before),
        or_null(after),
        json_string(&caller.map_or_else(|| "unknown".to_owned(), |c| c.address.to_string())),
        at as u64
    ));
}

fn json(status: u16, body: &str) -> Response {
    crate::answer(status, "application/json", "no-store", Some(body), &[]).unwrap_or_else(|_| Response::error())
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

fn store_failed(error: &JsValue) -> Response {
    crate::log_error(&format!("sluicegate: admin change not stored: {}", crate::describe(error)));
    let detail = "The change could not be stored; nothing was changed. Try again.";
    problem(503, &headers::problem(503, "Service Unavailable", detail, None, None), None)
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
