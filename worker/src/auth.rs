//! The edge's own bearer tokens (the admin API's, the egress routes'), as the pipeline lets
//! a request in ([`sluicegate::pipeline::token`]): compared in constant time, failed tries
//! counted per client in the isolate so that guessing one is slow.

use crate::clock::now;
use crate::log::{json_string, log};
use crate::respond;
use sluicegate::identity::Identity;
use sluicegate::pipeline::token::{self, TokenRefusal};
use wasm_bindgen::prelude::*;
use web_sys::{Request, Response};

/// `None` when `request` carries `Authorization: Bearer <token>`; otherwise its answer (see
/// [`token::authorise`]), from the client `caller`. `route` names the routes in the log line.
///
/// # Errors
/// When the headers cannot be read.
pub(crate) fn authorise(
    request: &Request,
    token: &str,
    caller: Option<Identity>,
    route: &str,
) -> Result<Option<Response>, JsValue> {
    let ip = caller.map(|c| c.ip);
    let presented = request.headers().get("authorization")?;
    let now = now();
    let Err(refusal) = crate::isolate::with(|i| token::authorise(i.guesses(), presented.as_deref(), token, ip, now))
    else {
        return Ok(None);
    };
    if let TokenRefusal::TooManyTries { .. } = refusal {
        log(&format!(
            "{{\"sluicegate\":\"token-guesses\",\"routes\":{},\"client\":{}}}",
            json_string(route),
            json_string(&ip.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string()))
        ));
    }
    respond::reply(&refusal.reply()).map(Some)
}
