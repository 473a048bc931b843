//! The edge's own bearer tokens (the admin API's, the egress routes'): compared in constant
//! time, and failed tries counted per client ([`Guesses`]) so that guessing one is slow.

use crate::clock::now;
use crate::log::{json_string, log};
use crate::respond::problem;
use sluicegate::edge::guesses::Guesses;
use sluicegate::headers;
use sluicegate::identity::Identity;
use sluicegate::tenants::same_secret;
use sluicegate::time::Span;
use wasm_bindgen::prelude::*;
use web_sys::{Request, Response};

fn with_guesses<T>(f: impl FnOnce(&mut Guesses) -> T) -> T {
    crate::isolate::with(|i| f(i.guesses()))
}

/// `None` when `request` carries `Authorization: Bearer <token>`; otherwise its answer: a
/// bare `401` (a request that presented a wrong credential counts as a failed try of its
/// client, `caller`), or `429` with `Retry-After` once that client has failed too often — its
/// credential is then not even compared. `route` names the routes in the log line.
///
/// # Errors
/// When the headers cannot be read.
pub(crate) fn authorise(
    request: &Request,
    token: &str,
    caller: Option<Identity>,
    route: &str,
) -> Result<Option<Response>, JsValue> {
    let now = now();
    let ip = caller.map(|c| c.ip);
    let Some(presented) = request.headers().get("authorization")? else { return unauthorised() };
    if let Err(wait) = with_guesses(|g| g.may_try(ip, now)) {
        return Ok(Some(too_many_tries(ip, wait, route)));
    }
    let authorised = presented
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("bearer "))
        .is_some_and(|_| same_secret(presented[7..].trim(), token));
    if authorised {
        return Ok(None);
    }
    with_guesses(|g| g.failed(ip, now));
    unauthorised()
}

fn unauthorised() -> Result<Option<Response>, JsValue> {
    let response = problem(401, &headers::problem(401, "Unauthorized", "", None, None), None);
    response.headers().set("www-authenticate", "Bearer")?;
    Ok(Some(response))
}

fn too_many_tries(ip: Option<sluicegate::identity::ClientIp>, wait: Span, route: &str) -> Response {
    let retry = Span::from_secs(wait.as_secs_ceil().max(1));
    log(&format!(
        "{{\"sluicegate\":\"token-guesses\",\"routes\":{},\"client\":{}}}",
        json_string(route),
        json_string(&ip.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string()))
    ));
    let detail =
        format!("Too many wrong tokens from this client; the next try is compared in {} s.", retry.as_secs_ceil());
    problem(429, &headers::problem(429, "Too Many Requests", &detail, None, Some(retry)), Some(retry))
}
