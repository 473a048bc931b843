//! The admin API of tenant limits: which path is which route, what each method on it does,
//! and its answers. The Worker reads and changes the overrides in their store and logs each
//! change; everything it answers is written here.
//!
//! - `GET /v1/tenants`: every limit the edge knows, with where it comes from ([`list`]);
//! - `GET | PUT | DELETE /v1/tenants/:tenant/rate-limit`: one tenant's limit ([`entry`]), its
//!   override set or removed.
//!
//! Routes match the normalised path in any case (`/V1/Tenants`), as the origin's router
//! may, and every path under `/v1/tenants` is the API's (`404` when no route matches): no
//! spelling of them reaches the origin while the API is on.

use super::reply::{quoted, Reply};
use crate::edge::headers;
use crate::edge::tenants::{effective, LimitSource, Overrides, TenantLimit, Tenants};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Where the admin API lives.
pub const PREFIX: &str = "/v1/tenants";
/// The largest limit document a PUT may send.
pub const MAX_BODY: u64 = 64 * 1024;
/// What a `503` to a change says: a store that timed out may still have made it.
pub const CHANGE_NOT_CONFIRMED: &str =
    "The tenant overrides store cannot be reached: the change was not confirmed. Try again (repeating a change is safe).";
/// What a `503` to a read says.
pub const CANNOT_READ: &str = "The tenant overrides cannot be read right now.";

/// An admin route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/v1/tenants`.
    List,
    /// `/v1/tenants/:tenant/rate-limit`, the tenant as sent.
    Limit(&'a str),
    /// Any other path under `/v1/tenants`.
    Unknown,
}

/// The admin route of the normalised `path`, if it is under [`PREFIX`]. The tenant keeps
/// its case.
pub fn route(path: &str) -> Option<Route<'_>> {
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

/// Whether the API takes `name` as a tenant: 1–128 letters, digits, `_`, `-` or `.`.
pub fn is_tenant(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

/// What a request to the API does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// Answer [`list`] (the overrides read from their store).
    List,
    /// Answer this tenant's [`entry`] (the overrides read from their store).
    Describe(&'a str),
    /// Set this tenant's override from the body (at most [`MAX_BODY`] bytes).
    Put(&'a str),
    /// Remove this tenant's override.
    Delete(&'a str),
    /// Answer this.
    Answer(Reply),
}

/// What a `method` request to `route` does, on an edge whose rules have `tenants`.
pub fn action<'a>(route: Route<'a>, method: &str, tenants: Option<&Tenants>) -> Action<'a> {
    if tenants.is_none() {
        return Action::Answer(not_found("This edge has no tenants section in its rules."));
    }
    let method = method.to_ascii_uppercase();
    match (route, method.as_str()) {
        (Route::List, "GET") => Action::List,
        (Route::Limit(tenant), _) if !is_tenant(tenant) => {
            Action::Answer(bad_request("tenant", "must be 1–128 letters, digits, '_', '-' or '.'"))
        }
        (Route::Limit(tenant), "GET") => Action::Describe(tenant),
        (Route::Limit(tenant), "PUT") => Action::Put(tenant),
        (Route::Limit(tenant), "DELETE") => Action::Delete(tenant),
        (Route::List, _) => Action::Answer(not_allowed("GET")),
        (Route::Limit(_), _) => Action::Answer(not_allowed("GET, PUT, DELETE")),
        (Route::Unknown, _) => Action::Answer(not_found("Not an admin route.")),
    }
}

fn source_name(source: LimitSource) -> &'static str {
    match source {
        LimitSource::Override => "override",
        LimitSource::Config => "config",
        LimitSource::Default => "default",
    }
}

/// `{"tenant", "limit", "source"}` for the limit `found` for `tenant` (`"source": "none"`
/// without one).
pub fn entry_json(tenant: &str, found: Option<(&TenantLimit, LimitSource)>) -> String {
    match found {
        Some((limit, source)) => format!(
            "{{\"tenant\":{},\"limit\":{},\"source\":\"{}\"}}",
            quoted(tenant),
            limit.to_json(),
            source_name(source)
        ),
        None => format!("{{\"tenant\":{},\"limit\":null,\"source\":\"none\"}}", quoted(tenant)),
    }
}

/// `200`: the limit that applies to `tenant` now under `overrides` (override > the rules
/// file's entry > the default; an override's `max_body_bytes` at most the instance's, as
/// requests meet it).
pub fn entry(tenants: &Tenants, mut overrides: Overrides, tenant: &str) -> Reply {
    overrides.clamp_bodies(tenants.max_body_bytes);
    let overridden = overrides.get(tenant).map(|o| &o.limit);
    Reply::json(200, entry_json(tenant, effective(overridden, tenants.limits.get(tenant), tenants.default.as_ref())))
}

/// `200`: every tenant with a limit of its own (configured or overridden), sorted, and the
/// default.
pub fn list(tenants: &Tenants, mut overrides: Overrides) -> Reply {
    overrides.clamp_bodies(tenants.max_body_bytes);
    let mut names: Vec<&String> = tenants.limits.keys().chain(overrides.iter().map(|(t, _)| t)).collect();
    names.sort();
    names.dedup();
    let entries: Vec<String> = names
        .into_iter()
        .map(|t| entry_json(t, effective(overrides.get(t).map(|o| &o.limit), tenants.limits.get(t), None)))
        .collect();
    let default = tenants.default.as_ref().map_or_else(|| "null".to_owned(), TenantLimit::to_json);
    Reply::json(200, format!("{{\"default\":{default},\"tenants\":[{}]}}", entries.join(",")))
}

/// The limit document a PUT sent (`None`: larger than [`MAX_BODY`]), read against the
/// tenants' `max_body_bytes`.
///
/// # Errors
/// The `400` naming the field at fault.
pub fn put_limit(tenants: &Tenants, body: Option<&str>) -> Result<TenantLimit, Reply> {
    let Some(body) = body else {
        return Err(bad_request("", &format!("the limit document is larger than {MAX_BODY} bytes")));
    };
    TenantLimit::from_json_text(body, tenants.max_body_bytes).map_err(|e| bad_request(&e.field, &e.message))
}

/// `409`: the store refused a new override (`why`: its limit on how many it keeps).
pub fn too_many_overrides(tenant: &str, why: &str) -> Reply {
    let detail = format!("Tenant \"{tenant}\" has no override and {why}: delete one first.");
    coded(409, &detail, "too_many_overrides")
}

/// `404`: a DELETE of an override `tenant` does not have.
pub fn no_override(tenant: &str) -> Reply {
    not_found(&format!("Tenant \"{tenant}\" has no override."))
}

/// `503` with `"code": "store_unavailable"` and `Retry-After: 1`.
pub fn store_unavailable(detail: &str) -> Reply {
    let mut reply = coded(503, detail, "store_unavailable");
    reply.set("retry-after", "1".into());
    reply
}

fn bad_request(field: &str, message: &str) -> Reply {
    let detail = if field.is_empty() { message.to_owned() } else { format!("field \"{field}\": {message}") };
    super::serve::bad_request(&detail)
}

fn not_found(detail: &str) -> Reply {
    Reply::problem(404, headers::problem(404, "Not Found", detail, None, None), None)
}

fn not_allowed(allow: &str) -> Reply {
    let mut reply = Reply::problem(405, headers::problem(405, "Method Not Allowed", "", None, None), None);
    reply.set("allow", allow.to_owned());
    reply
}

fn coded(status: u16, detail: &str, code: &str) -> Reply {
    Reply::problem(status, headers::coded_problem(status, detail, code), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::rules::RuleSet;

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

    #[test]
    fn each_method_of_each_route_does_one_thing_and_the_rest_is_answered() {
        let rules = RuleSet::from_json(
            r#"{"rules": [], "tenants": {"match": {"path": {"starts_with": "/hooks/"}}, "tenant_header": "x-tenant", "default": {"rate": 1, "burst": 2}}}"#,
        )
        .unwrap();
        let tenants = rules.tenants();
        assert_eq!(action(Route::List, "get", tenants), Action::List);
        assert_eq!(action(Route::Limit("acme"), "PUT", tenants), Action::Put("acme"));
        assert_eq!(action(Route::Limit("acme"), "DELETE", tenants), Action::Delete("acme"));
        assert_eq!(action(Route::Limit("acme"), "GET", tenants), Action::Describe("acme"));
        let status = |a: Action<'_>| match a {
            Action::Answer(reply) => (reply.status, reply.header("allow").map(ToOwned::to_owned)),
            other => panic!("{other:?}"),
        };
        assert_eq!(status(action(Route::List, "POST", tenants)), (405, Some("GET".into())));
        assert_eq!(status(action(Route::Limit("acme"), "PATCH", tenants)), (405, Some("GET, PUT, DELETE".into())));
        assert_eq!(status(action(Route::Limit("a b"), "GET", tenants)), (400, None));
        assert_eq!(status(action(Route::Unknown, "GET", tenants)), (404, None));
        assert_eq!(status(action(Route::List, "GET", None)), (404, None), "no tenants section");
        let tenants = tenants.unwrap();
        let listed = list(tenants, Overrides::default());
        assert_eq!(listed.status, 200);
        assert!(listed.body.starts_with("{\"default\":{"), "{}", listed.body);
        let one = entry(tenants, Overrides::default(), "acme");
        assert!(one.body.contains("\"source\":\"default\""), "{}", one.body);
        assert_eq!(put_limit(tenants, None).unwrap_err().status, 400);
        let bad = put_limit(tenants, Some(r#"{"rate": -1}"#)).unwrap_err();
        assert!(bad.body.contains("field \\\"rate\\\""), "names the field: {}", bad.body);
        let unavailable = store_unavailable(CANNOT_READ);
        assert_eq!((unavailable.status, unavailable.header("retry-after")), (503, Some("1")));
    }
}
