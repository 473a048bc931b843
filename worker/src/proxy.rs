//! Sending an admitted request to `ORIGIN_URL`, as a proxy (see `sluicegate::forward`).

use crate::js;
use crate::preread::BodyCheck;
use sluicegate::forward::{is_sent_as_received, is_websocket_upgrade, upstream_url, Received, Treatment, FORWARDING};
use sluicegate::identity::Identity;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, RequestRedirect, Response, Url};

/// The origin's answer to `request`, sent to `origin` + `base_path` + the request's path
/// and query as they were received. Redirects are passed back, not followed. `rules_read`
/// names the headers the rules read (a `Connection` token cannot strip them). `check`, when
/// given, is how the body is checked as it streams.
pub async fn to_origin(
    request: &Request,
    url: &Url,
    (origin, base_path): (&str, &str),
    client: Option<Identity>,
    rules_read: &[String],
    check: Option<&BodyCheck>,
) -> Result<Response, JsValue> {
    let target = upstream_url(origin, base_path, &format!("{}{}", url.pathname(), url.search()));
    // The join above cannot leave the origin; this keeps it so whatever changes around it.
    if Url::new(&target)?.origin() != origin {
        return Err(JsValue::from_str(&format!("the upstream URL {target} left the origin {origin}")));
    }
    let init = RequestInit::new();
    let method = request.method();
    init.set_method(&method);
    init.set_headers(upstream_headers(request, url, client, rules_read)?.as_ref());
    init.set_redirect(RequestRedirect::Manual);
    // A client that goes away cancels the origin request too.
    let mut signal = crate::runtime::signal(request);
    if !method.eq_ignore_ascii_case("GET") && !method.eq_ignore_ascii_case("HEAD") {
        if let Some(body) = request.body() {
            // A body that fails its check errors, and the upload is aborted.
            match check {
                Some(check) => {
                    let (checked, with) = check.apply(&body, &signal)?;
                    init.set_body(&checked);
                    signal = with;
                }
                None => init.set_body(&body),
            }
        }
    }
    if signal.is_object() {
        js_sys::Reflect::set(&init, &"signal".into(), &signal)?;
    }
    let upstream = Request::new_with_str_and_init(&target, &init)?;
    JsFuture::from(js::fetch(&upstream)?).await?.dyn_into()
}

/// The request's headers without the hop-by-hop ones, `Host` and the forwarding headers
/// ([`FORWARDING`]); then those the edge sets, from what it received and whom it counted.
fn upstream_headers(
    request: &Request,
    url: &Url,
    client: Option<Identity>,
    rules_read: &[String],
) -> Result<Headers, JsValue> {
    let received = request.headers();
    let header = |name: &str| received.get(name).ok().flatten();
    let connection = header("connection");
    let websocket = is_websocket_upgrade(header("upgrade").as_deref(), connection.as_deref());
    // Decided here, applied in one call: what to leave out, then what the edge sets.
    let mut drop = String::new();
    for name in js::header_names(&received)?.lines() {
        if !is_sent_as_received(name, connection.as_deref(), websocket, rules_read) {
            drop.push_str(name);
            drop.push('\n');
        }
    }
    let mut set = String::new();
    let mut push = |name: &str, value: &str| {
        for part in [name, value] {
            set.push_str(part);
            set.push('\n');
        }
    };
    if websocket {
        push("connection", "Upgrade");
    }
    let (scheme, host, x_forwarded_for) = (url.protocol(), url.host(), header("x-forwarded-for"));
    let edge = Received {
        scheme: scheme.trim_end_matches(':'),
        host: &host,
        port: url.port().parse().ok(),
        client: client.map(|c| c.address),
        x_forwarded_for: x_forwarded_for.as_deref(),
    };
    // None of them was copied: a header without the edge's value is simply not sent.
    for (name, treatment) in FORWARDING {
        if let Treatment::Set(value) = treatment {
            if let Some(value) = edge.value(*value) {
                push(name, &value);
            }
        }
    }
    js::rebuilt_headers(&received, &drop, &set)
}
