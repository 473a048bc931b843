//! The edge's own answers: problem+json refusals with `Retry-After`, and the 400, 413, 429,
//! 499, 502 and 503 a request can get before it reaches the origin.

use crate::log::{json_string, log, log_error, logged_url};
use sluicegate::pipeline::{serve, Reply};
use sluicegate::rules::Upstream;
use wasm_bindgen::prelude::*;
use web_sys::{Headers, Request, Response, ResponseInit};

/// `502` for an origin that answered with an interim response where a final one was due (its
/// body, the rest of the origin's answer, is cancelled unread).
pub(crate) fn interim_refusal(request: &Request, response: &Response) -> Response {
    let status = response.status();
    if let Some(body) = response.body() {
        let _ = body.cancel();
    }
    log_error(&format!(
        "{{\"sluicegate\":\"origin-interim\",\"status\":{status},\"url\":{}}}",
        json_string(&logged_url(request))
    ));
    own(&serve::interim(status))
}

/// The answer to a request whose client went away before it was forwarded: nobody reads it
/// (`499`, as proxies log a client that closed first), and nothing was sent to the origin.
pub(crate) fn client_gone(request: &Request) -> Response {
    log(&format!("{{\"sluicegate\":\"client-gone\",\"url\":{}}}", json_string(&logged_url(request))));
    own(&serve::client_gone())
}

/// The shed of a request that found no slot of `upstream` within its `max_wait`, as the
/// pipeline answers it ([`sluicegate::pipeline::upstream::busy`]), logged.
pub(crate) fn busy(request: &Request, upstream: &Upstream) -> Result<Response, JsValue> {
    let accept = request.headers().get("accept").ok().flatten();
    let shed = sluicegate::pipeline::upstream::busy(upstream, accept.as_deref());
    log(&format!(
        "{{\"sluicegate\":\"upstream-busy\",\"upstream\":{},\"event_stream\":{},\"url\":{}}}",
        json_string(&upstream.id),
        shed.status == 200,
        json_string(&logged_url(request))
    ));
    reply(&shed)
}

/// [`reply`], or a network error where the runtime cannot make the response.
pub(crate) fn own(answer: &Reply) -> Response {
    reply(answer).unwrap_or_else(|_| Response::error())
}

/// One of the edge's own answers as the pipeline wrote it.
pub(crate) fn reply(reply: &Reply) -> Result<Response, JsValue> {
    let headers = Headers::new()?;
    for (name, value) in &reply.headers {
        headers.set(name, value)?;
    }
    let init = ResponseInit::new();
    init.set_status(reply.status);
    init.set_headers(&headers);
    Response::new_with_opt_str_and_init(Some(&reply.body), &init)
}
