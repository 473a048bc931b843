//! The admin API of tenant limits and of the rules' enforcement: which path is which route,
//! what each method on it does, and its answers. The Worker reads and changes the overrides
//! in their store and logs each change; everything it answers is written here.
//!
//! - `GET /v1/tenants`: every limit the edge knows, with where it comes from ([`list`]);
//! - `GET | PUT | DELETE /v1/tenants/:tenant/rate-limit`: one tenant's limit ([`entry`]), its
//!   override set or removed.
//! - `GET /v1/rules`: every rule's `enforce` now, with where it comes from ([`rules_list`]);
//! - `GET | PUT | DELETE /v1/rules/:rule/enforce`: one rule's ([`rule_entry`]), its override
//!   set (`{"enforce": 0.1}`) or removed.
//!
//! Routes match the normalised path in any case (`/V1/Tenants`), as the origin's router
//! may, and every path under `/v1/tenants` or `/v1/rules` is the API's (`404` when no route
//! matches): no spelling of them reaches the origin while the API is on.

use super::reply::{quoted, Reply};
use crate::edge::headers;
use crate::edge::rules::{Enforce, RuleOverride, RuleOverrides, RuleSet};
use crate::edge::tenants::{effective, LimitSource, Overrides, TenantLimit, Tenants};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Where the admin API of tenant limits lives.
pub const PREFIX: &str = "/v1/tenants";
/// Where the admin API of the rules' enforcement lives.
pub const RULES_PREFIX: &str = "/v1/rules";
/// The largest `enforce` document a PUT may send.
pub const MAX_ENFORCE_BODY: u64 = 4 * 1024;
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
    /// `/v1/rules`.
    Rules,
    /// `/v1/rules/:rule/enforce`, the rule's id as sent.
    Enforce(&'a str),
    /// Any other path under `/v1/tenants` or `/v1/rules`.
    Unknown,
}

/// The admin route of the normalised `path`, if it is under [`PREFIX`] or [`RULES_PREFIX`].
/// The tenant or rule keeps its case.
pub fn route(path: &str) -> Option<Route<'_>> {
    // (only the prefix and what is under it: an origin's `/v1/rulesets` stays the origin's)
    if let Some(rest) = strip_prefix_ignoring_case(path, RULES_PREFIX).filter(|r| r.is_empty() || r.starts_with('/')) {
        return Some(match rest {
            "" | "/" => Route::Rules,
            rest => match rest.strip_prefix('/').and_then(|r| strip_suffix_ignoring_case(r, "/enforce")) {
                Some(rule) => Route::Enforce(rule),
                None => Route::Unknown,
            },
        });
    }
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
#[derive(Clone, Debug, PartialEq)]
pub enum Action<'a> {
    /// Answer [`list`] (the overrides read from their store).
    List,
    /// Answer this tenant's [`entry`] (the overrides read from their store).
    Describe(&'a str),
    /// Set this tenant's override from the body (at most [`MAX_BODY`] bytes).
    Put(&'a str),
    /// Remove this tenant's override.
    Delete(&'a str),
    /// Answer [`rules_list`] (the rules' overrides read from their store).
    ListRules,
    /// Answer this rule's [`rule_entry`] (the rules' overrides read from their store).
    DescribeRule(&'a str),
    /// Set this rule's `enforce` from the body (at most [`MAX_ENFORCE_BODY`] bytes).
    PutEnforce(&'a str),
    /// Remove this rule's override (a rule no longer in the rules file included).
    DeleteEnforce(&'a str),
    /// Answer this.
    Answer(Reply),
}

/// What a `method` request to `route` does, on an edge of `rules`.
pub fn action<'a>(route: Route<'a>, method: &str, rules: &RuleSet) -> Action<'a> {
    let method = method.to_ascii_uppercase();
    match (route, method.as_str()) {
        (Route::Rules, "GET") => return Action::ListRules,
        (Route::Rules, _) => return Action::Answer(not_allowed("GET")),
        (Route::Enforce(rule), "DELETE") => return Action::DeleteEnforce(rule),
        (Route::Enforce(rule), _) if rules.get(rule).is_none() => {
            return Action::Answer(not_found(&format!(
                "The rules file has no rule \"{rule}\" (ids are matched exactly): GET {RULES_PREFIX} lists them."
            )))
        }
        (Route::Enforce(rule), "GET") => return Action::DescribeRule(rule),
        (Route::Enforce(rule), "PUT") => return Action::PutEnforce(rule),
        (Route::Enforce(_), _) => return Action::Answer(not_allowed("GET, PUT, DELETE")),
        _ => {}
    }
    if rules.tenants().is_none() {
        return Action::Answer(not_found("This edge has no tenants section in its rules."));
    }
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
        (Route::Rules | Route::Enforce(_), _) => unreachable!("answered above"),
        (Route::Unknown, _) => Action::Answer(not_found(
            "Not an admin route: /v1/tenants, /v1/tenants/:tenant/rate-limit, /v1/rules and /v1/rules/:rule/enforce are.",
        )),
    }
}

/// Where a rule's `enforce` comes from: `"override"` (the admin API's) or `"rules file"`.
fn enforce_source(overridden: bool) -> &'static str {
    if overridden {
        "override"
    } else {
        "rules file"
    }
}

/// `{"rule", "enforce", "source", "rules_file"}`: `rule`'s `enforce` now and where it comes
/// from, and what the rules file says (`null` for a rule no longer in it).
pub fn rule_entry_json(rule: &str, in_file: Option<Enforce>, overridden: Option<&RuleOverride>) -> String {
    let now = overridden.map(|o| o.enforce).or(in_file).unwrap_or_default();
    let set_at = overridden.map_or_else(String::new, |o| format!(",\"set_at\":{}", o.set_at));
    format!(
        "{{\"rule\":{},\"enforce\":{},\"source\":\"{}\",\"rules_file\":{}{set_at}}}",
        quoted(rule),
        now.to_json(),
        enforce_source(overridden.is_some()),
        in_file.map_or_else(|| "null".to_owned(), Enforce::to_json)
    )
}

/// `200`: `rule`'s `enforce` now under `overrides`.
pub fn rule_entry(rules: &RuleSet, overrides: &RuleOverrides, rule: &str) -> Reply {
    Reply::json(200, rule_entry_json(rule, rules.get(rule).map(|r| r.enforce), overrides.get(rule)))
}

/// `200`: every rule of the rules file, in its order, with its `enforce` now, and the ids of
/// overrides kept for rules no longer in the file (`"stale_overrides"`: DELETE them).
pub fn rules_list(rules: &RuleSet, overrides: &RuleOverrides) -> Reply {
    let entries: Vec<String> =
        rules.rules().iter().map(|r| rule_entry_json(&r.id, Some(r.enforce), overrides.get(&r.id))).collect();
    let stale: Vec<String> =
        overrides.iter().filter(|(id, _)| rules.get(id).is_none()).map(|(id, _)| quoted(id)).collect();
    Reply::json(200, format!("{{\"rules\":[{}],\"stale_overrides\":[{}]}}", entries.join(","), stale.join(",")))
}

/// The `enforce` a PUT sent (`None`: larger than [`MAX_ENFORCE_BODY`]): `{"enforce": true |
/// false | 0 < p < 1}`.
///
/// # Errors
/// The `400` naming the field at fault.
pub fn put_enforce(body: Option<&str>) -> Result<Enforce, Reply> {
    let Some(body) = body else {
        return Err(bad_request("", &format!("the document is larger than {MAX_ENFORCE_BODY} bytes")));
    };
    let value = crate::edge::json::strict_json(body).map_err(|e| bad_request(&e.field, &e.message))?;
    let Some(obj) = value.as_object() else {
        return Err(bad_request("", "send {\"enforce\": true | false | a fraction between 0 and 1}"));
    };
    if let Some(key) = obj.keys().find(|k| *k != "enforce") {
        return Err(bad_request(key, "unknown field; the document has only \"enforce\""));
    }
    let enforce = obj.get("enforce").ok_or_else(|| bad_request("enforce", "missing"))?;
    Enforce::from_json(enforce).map_err(|why| bad_request("enforce", &why))
}

/// `409`: the store refused a new override of a rule's `enforce` (`why`: its limit on how
/// many it keeps).
pub fn too_many_rule_overrides(rule: &str, why: &str) -> Reply {
    let detail = format!(
        "Rule \"{rule}\" has no override and {why}: delete one first (GET {RULES_PREFIX} lists the stale ones)."
    );
    coded(409, &detail, "too_many_overrides")
}

/// `404`: a DELETE of an override `rule` does not have.
pub fn no_rule_override(rule: &str) -> Reply {
    not_found(&format!("Rule \"{rule}\" has no override of its enforce."))
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
        assert_eq!(action(Route::List, "get", &rules), Action::List);
        assert_eq!(action(Route::Limit("acme"), "PUT", &rules), Action::Put("acme"));
        assert_eq!(action(Route::Limit("acme"), "DELETE", &rules), Action::Delete("acme"));
        assert_eq!(action(Route::Limit("acme"), "GET", &rules), Action::Describe("acme"));
        let status = |a: Action<'_>| match a {
            Action::Answer(reply) => (reply.status, reply.header("allow").map(ToOwned::to_owned)),
            other => panic!("{other:?}"),
        };
        assert_eq!(status(action(Route::List, "POST", &rules)), (405, Some("GET".into())));
        assert_eq!(status(action(Route::Limit("acme"), "PATCH", &rules)), (405, Some("GET, PUT, DELETE".into())));
        assert_eq!(status(action(Route::Limit("a b"), "GET", &rules)), (400, None));
        assert_eq!(status(action(Route::Unknown, "GET", &rules)), (404, None));
        let without = RuleSet::from_json(r#"{"rules": []}"#).unwrap();
        assert_eq!(status(action(Route::List, "GET", &without)), (404, None), "no tenants section");
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

    #[test]
    fn the_rules_routes_set_and_answer_a_rule_s_enforce_naming_what_is_wrong() {
        for path in ["/v1/rules", "/V1/Rules/", "/v1/RULES"] {
            assert_eq!(route(path), Some(Route::Rules), "{path}");
        }
        assert_eq!(route("/v1/rules/Api/ENFORCE"), Some(Route::Enforce("Api")));
        assert_eq!(route("/v1/rules/api"), Some(Route::Unknown));
        assert_eq!(route("/v1/rulesets"), None, "an origin's path beside the prefix stays the origin's");
        let rules = RuleSet::from_json(
            r#"{"rules": [{"id": "api", "match": {}, "characteristics": ["ip.src"], "period": 10,
                "requests_per_period": 5, "enforce": 0.25}]}"#,
        )
        .unwrap();
        assert_eq!(action(Route::Rules, "GET", &rules), Action::ListRules, "no tenants section needed");
        assert_eq!(action(Route::Enforce("api"), "put", &rules), Action::PutEnforce("api"));
        assert_eq!(action(Route::Enforce("gone"), "DELETE", &rules), Action::DeleteEnforce("gone"));
        let Action::Answer(unknown) = action(Route::Enforce("API"), "PUT", &rules) else { panic!("answered") };
        assert_eq!(unknown.status, 404);
        assert!(unknown.body.contains("no rule \\\"API\\\""), "{}", unknown.body);
        let Action::Answer(method) = action(Route::Rules, "PUT", &rules) else { panic!("answered") };
        assert_eq!((method.status, method.header("allow")), (405, Some("GET")));

        assert_eq!(put_enforce(Some(r#"{"enforce": false}"#)), Ok(Enforce::Shadow));
        assert_eq!(put_enforce(Some(r#"{"enforce": 0.01}"#)).unwrap().fraction(), 0.01);
        for (body, field) in [
            (r#"{"enforce": 1}"#, "enforce"),
            (r#"{"enforce": "0.5"}"#, "enforce"),
            (r#"{}"#, "enforce"),
            (r#"{"enforce": true, "rule": "api"}"#, "rule"),
        ] {
            let refused = put_enforce(Some(body)).unwrap_err();
            assert_eq!(refused.status, 400, "{body}");
            assert!(refused.body.contains(&format!("field \\\"{field}\\\"")), "{body}: {}", refused.body);
        }
        assert_eq!(put_enforce(Some("[1]")).unwrap_err().status, 400);
        assert_eq!(put_enforce(None).unwrap_err().status, 400);

        let mut overrides = RuleOverrides::default();
        let listed = rules_list(&rules, &overrides);
        assert_eq!(
            listed.body,
            r#"{"rules":[{"rule":"api","enforce":0.25,"source":"rules file","rules_file":0.25}],"stale_overrides":[]}"#
        );
        overrides.set("api", RuleOverride { enforce: Enforce::Shadow, set_at: 7 }).unwrap();
        overrides.set("gone", RuleOverride { enforce: Enforce::All, set_at: 8 }).unwrap();
        assert_eq!(
            rule_entry(&rules, &overrides, "api").body,
            r#"{"rule":"api","enforce":false,"source":"override","rules_file":0.25,"set_at":7}"#
        );
        assert!(rules_list(&rules, &overrides).body.ends_with(r#""stale_overrides":["gone"]}"#));
    }
}
