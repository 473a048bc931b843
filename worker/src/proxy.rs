//! Sending an admitted request to `ORIGIN_URL`, as a proxy (see `sluicegate::forward`).

use crate::js;
use sluicegate::forward::{forwarded_for, is_hop_by_hop, is_websocket_upgrade, upstream_url};
use sluicegate::identity::Identity;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, RequestRedirect, Response, Url};

/// The origin's answer to `request`, sent to `origin` + `base_path` + the request's path
/// and query as they were received. Redirects are passed back, not followed. `checks`, when
/// given, are the body's `(charge, end)` checks as it streams (see `js::metered`).
pub async fn to_origin(
    request: &Request,
    url: &Url,
    origin: &str,
    base_path: &str,
    client: Option<Identity>,
    checks: Option<&(JsValue, JsValue)>,
) -> Result<Response, JsValue> {
    let target = upstream_url(origin, base_path, &format!("{}{}", url.pathname(), url.search()));
    // The join above cannot leave the origin; this keeps it so whatever changes around it.
    if Url::new(&target)?.origin() != origin {
        return Err(JsValue::from_str(&format!("the upstream URL {target} left the origin {origin}")));
    }
    let init = RequestInit::new();
    let method = request.method();
    init.set_method(&method);
    init.set_headers(upstream_headers(request, url, client)?.as_ref());
    init.set_redirect(RequestRedirect::Manual);
    // A client that goes away cancels the origin request too.
    let mut signal = js::signal(request);
    if !method.eq_ignore_ascii_case("GET") && !method.eq_ignore_ascii_case("HEAD") {
        if let Some(body) = request.body() {
            match checks {
                // Checked as it streams; a body that fails its checks aborts the upload.
                Some((charge, end)) => {
                    let upload = js::metered(&body, charge, end, &signal)?;
                    init.set_body(&js_sys::Reflect::get(&upload, &"body".into())?);
                    signal = js_sys::Reflect::get(&upload, &"signal".into())?;
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

/// The request's headers without the hop-by-hop ones and `Host`, with the counted client appended to
/// `X-Forwarded-For` and `X-Forwarded-Proto` / `X-Forwarded-Host` set to what the edge
/// received.
fn upstream_headers(request: &Request, url: &Url, client: Option<Identity>) -> Result<Headers, JsValue> {
    let received = request.headers();
    let header = |name: &str| received.get(name).ok().flatten();
    let connection = header("connection");
    let websocket = is_websocket_upgrade(header("upgrade").as_deref(), connection.as_deref());
    let headers = Headers::new()?;
    if let Some(entries) = js_sys::try_iter(&received)? {
        for entry in entries {
            let entry: js_sys::Array = entry?.unchecked_into();
            let (name, value) = (entry.get(0).as_string().unwrap_or_default(), entry.get(1));
            // `Host` names the edge; the upstream request's own comes from its URL.
            if !is_hop_by_hop(&name, connection.as_deref(), websocket) && name != "host" {
                headers.append(&name, &value.as_string().unwrap_or_default())?;
            }
        }
    }
    if websocket {
        headers.set("connection", "Upgrade")?;
    }
    match forwarded_for(header("x-forwarded-for").as_deref(), client.map(|c| c.address)) {
        Some(value) => headers.set("x-forwarded-for", &value)?,
        None => headers.delete("x-forwarded-for")?,
    }
    headers.set("x-forwarded-proto", url.protocol().trim_end_matches(':'))?;
    headers.set("x-forwarded-host", &url.host())?;
    Ok(headers)
}
