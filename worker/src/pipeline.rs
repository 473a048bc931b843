//! One request's way through the edge, in the order it meets the layers: its facts, the
//! checks before its body is read, the admin and egress routes, the capabilities answer,
//! the rules (each key's Durable Object), its tenant, its upstream slot, and the origin or
//! the Worker's own handler.

use crate::clock::now;
use crate::config::{self, config, Origin, Setup, STORE_TIMEOUT_MS};
#[cfg(feature = "dev-origin")]
use crate::dev;
use crate::guard::Scope;
use crate::js::{self, Env};
use crate::log::{
    describe, describe_kind, identity_fields, json_string, log, log_decision, log_error, log_hash, log_omitted,
    log_store_failure, logged_url,
};
use crate::respond::{self, answer, bad_request, busy, client_gone, interim_refusal, problem};
use crate::{admin, budgets, egress, isolate, preread, proxy, tenancy};
use sluicegate::admission::declared_length;
use sluicegate::headers;
use sluicegate::identity::{client_identity_behind, Identity, Sources};
use sluicegate::limit::Decision;
use sluicegate::pipeline::{Answer, Note, RulesCheck, Step, Verdict};
use sluicegate::rules::{normalise_path, RequestFacts, Rule};
use sluicegate::time::{Instant, Span};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, Response, ResponseInit, Url};

/// Why a request was not served.
pub(crate) enum Failure {
    /// The edge's own failure (answered with a 503).
    Edge(JsValue),
    /// What the Worker's handler threw (passed on to the caller as it was).
    Handler(JsValue),
}

impl From<JsValue> for Failure {
    fn from(error: JsValue) -> Self {
        Failure::Edge(error)
    }
}

pub(crate) async fn serve(
    request: &Request,
    env: &Env,
    ctx: &JsValue,
    handler: Option<&js_sys::Function>,
) -> Result<Response, Failure> {
    let now = now();
    let config = config(env);
    let setup = match config.as_ref() {
        Ok(setup) => setup,
        Err(problems) => {
            log_error(&format!("sluicegate: 503 for {}: invalid configuration: {problems}", logged_url(request)));
            return Ok(problem(503, &headers::unavailable(), None));
        }
    };
    let url = Url::new(&request.url())?;
    let raw_path = url.pathname();
    // Rules match the normalised path; the origin gets the path as it was sent.
    let path = match normalise_path(&raw_path) {
        Ok(path) => path,
        Err(why) => return Ok(bad_request(request, &format!("The request path is malformed: {why}."))),
    };
    let host = url.hostname();
    let method = request.method();
    let req_headers = request.headers();
    let header = |name: &str| req_headers.get(name).ok().flatten();
    let cf_connecting_ip = header("cf-connecting-ip");
    let x_forwarded_for = header("x-forwarded-for");
    let colo = crate::runtime::colo(request);
    // One identity for the rules, the checks before the body is read and the tenants:
    // X-Forwarded-For is believed past the trusted proxies only.
    let sources = Sources {
        cf_connecting_ip: cf_connecting_ip.as_deref(),
        x_forwarded_for: x_forwarded_for.as_deref(),
        peer: None,
    };
    let identity = client_identity_behind(&sources, setup.rules.trusted_proxies());
    let facts = RequestFacts { method: &method, host: &host, path: &path, colo: colo.as_deref(), identity };

    // How the body is framed, before anything is charged for it.
    let declared = match declared_length(header("content-length").as_deref(), header("transfer-encoding").as_deref()) {
        Ok(declared) => declared,
        Err(why) => return Ok(bad_request(request, &format!("The body's framing cannot be trusted: {why}."))),
    };
    // Before anything reads the body or asks a Durable Object: the address, the isolate,
    // the source's declared bytes.
    let source = setup.rules.pre_read().source_of(&facts);
    if let Err((scope, wait)) = isolate::with(|i| i.check_pre_read(&setup.rules, identity, source, declared, now)) {
        return Ok(pre_read_refusal(request, scope, wait, identity));
    }
    // The admin API of tenant limits (only when its token is set).
    if let Some(answer) = admin::serve(request, env, setup, &path, identity).await? {
        return Ok(answer);
    }
    // The app's calls to its providers (only when the egress token is set).
    if let Some(answer) = egress::serve(request, env, ctx, setup, &path, &url, identity).await? {
        return Ok(answer);
    }
    // The edge's own answer, cheap and cacheable: not counted, so reading the limits never
    // spends them.
    if let Some(answer) = capabilities(setup, &facts)? {
        return Ok(answer);
    }
    let checked = match check_rules(request, env, setup, &facts, &header).await? {
        Ok(checked) => checked,
        Err(refusal) => return Ok(refusal),
    };
    let admitted = Admitted { request, env, ctx, config: &config, setup, url: &url, facts: &facts, source, declared };
    admitted.forward(checked, &header, handler, now).await
}

/// A request the rules admitted, on its way to the origin: what is needed to charge its
/// tenant, take its upstream slot and send it.
pub(crate) struct Admitted<'a> {
    request: &'a Request,
    env: &'a Env,
    ctx: &'a JsValue,
    /// The configuration in force (the body checks keep it), and its setup.
    config: &'a config::Config,
    setup: &'a Setup,
    url: &'a Url,
    facts: &'a RequestFacts<'a>,
    /// The source its body bytes are counted under.
    source: &'a str,
    /// Its `Content-Length`.
    declared: Option<u64>,
}

impl Admitted<'_> {
    /// Charge the tenant, take the upstream slot and send the request on; everything it
    /// holds is a hold of its [`Scope`], given back however this ends.
    async fn forward(
        &self,
        checked: Checked,
        header: &impl Fn(&str) -> Option<String>,
        handler: Option<&js_sys::Function>,
        now: Instant,
    ) -> Result<Response, Failure> {
        let (request, setup) = (self.request, self.setup);
        let scope = Scope::of(request);
        // The tenant is charged after the rules: a request they refuse spends none of its
        // quota. Its place in flight is held until the origin has answered.
        let has_body = request.body().is_some();
        let tenant = tenancy::admit(setup, self.env, self.facts, header, self.declared, has_body, now, &scope);
        let mut tenant = match tenant.await? {
            Ok(admitted) => admitted,
            Err(refusal) => return Ok(checked.finish(tenant_refusal(request, refusal))?),
        };
        // The budget is charged only once the rules have admitted the request.
        let slot = match setup.rules.upstream_for(self.facts) {
            None => None,
            Some(upstream) => match budgets::acquire(upstream, self.env, self.ctx, &scope).await? {
                Some(slot) => Some(slot),
                None if scope.gone() => return Ok(client_gone(request)),
                None => return Ok(checked.finish(busy(request, upstream)?)?),
            },
        };
        // A client that left while it waited is not forwarded.
        if scope.gone() {
            return Ok(client_gone(request));
        }
        #[cfg(feature = "dev-origin")]
        crate::panic::on_purpose(self.env, self.facts.path);
        let counts_bytes = tenant.counts_bytes || setup.rules.pre_read().source_bytes_per_second.is_some();
        // A body that declared its length and came in through the runtime's own HTTP server
        // is framed by that length: it is what was charged (bodies framed otherwise were
        // refused above). One that the Worker's own code hands its handler is checked as it
        // streams, as is one of no declared length (charged to its source and its tenant
        // chunk by chunk).
        let framed = handler.is_none() && self.declared.is_some();
        let check = (has_body && counts_bytes && !framed && !is_bodiless(&request.method())).then(|| {
            preread::BodyCheck::new(self.config, self.source.to_owned(), self.declared, tenant.streamed.take())
        });
        let response = self.send(check.as_ref(), handler).await;
        // An upload cut as it streamed is answered as such, whatever came back.
        if let Some(why) = check.as_ref().and_then(preread::BodyCheck::cut) {
            return Ok(checked.finish(cut_refusal(request, why, self.facts.identity))?);
        }
        let response = match response {
            Ok(response) => response,
            Err(Failure::Handler(error)) => return Err(Failure::Handler(error)),
            // The origin request was cancelled with the client.
            Err(Failure::Edge(_)) if scope.gone() => return Ok(client_gone(request)),
            Err(Failure::Edge(error)) => {
                log_error(&format!(
                    "sluicegate: 502 for {}: the origin failed: {}",
                    logged_url(request),
                    describe(&error)
                ));
                let body = headers::problem(502, "Bad Gateway", "The origin could not be reached.", None, None);
                return Ok(problem(502, &body, None));
            }
        };
        if sluicegate::forward::is_interim(response.status()) {
            return Ok(interim_refusal(request, &response));
        }
        let response = checked.finish(response)?;
        drop(tenant.share);
        // The slot is held until the body has gone to the client (or the client went away).
        Ok(match slot {
            Some(slot) => slot.release_when_done(request, &response)?,
            None => response,
        })
    }

    /// Send the request on: to the Worker's handler when there is one, else to
    /// `ORIGIN_URL` or to the development origin.
    #[cfg_attr(not(feature = "dev-origin"), allow(unused_variables))]
    async fn send(
        &self,
        check: Option<&preread::BodyCheck>,
        handler: Option<&js_sys::Function>,
    ) -> Result<Response, Failure> {
        let (request, facts, setup) = (self.request, self.facts, self.setup);
        if let Some(handler) = handler {
            return to_handler(request, handler, check).await;
        }
        Ok(match &setup.origin {
            Origin::Url { origin, base_path } => {
                let rules_read = setup.rules.headers_read();
                proxy::to_origin(request, self.url, (origin, base_path), facts.identity, rules_read, check).await?
            }
            #[cfg(feature = "dev-origin")]
            Origin::Dev => dev::serve(request, self.env, self.url, facts).await?,
            Origin::Handler => return Err(JsValue::from_str("no handler was given for an admitted request").into()),
        })
    }
}

/// What the rules decided about an admitted request: the headers its answer carries.
#[derive(Default)]
pub(crate) struct Checked {
    headers: Vec<(&'static str, String)>,
    /// When the last rule decided (its Durable Object's clock, or the isolate's for a block it
    /// remembered): the development build's `Sluicegate-Clock`.
    #[cfg_attr(not(feature = "dev-origin"), allow(dead_code))]
    decided_at: Option<Instant>,
}

impl Checked {
    /// `response` with the RateLimit headers and `Sluicegate-Degraded` added.
    fn finish(&self, response: Response) -> Result<Response, JsValue> {
        if self.headers.is_empty() && !self.reports_clock() {
            return Ok(response);
        }
        // Responses from fetch have immutable headers: copy into a fresh response.
        let init = ResponseInit::new();
        init.set_status(response.status());
        init.set_status_text(&response.status_text());
        let headers = Headers::new_with_headers(&response.headers())?;
        self.decorate(&headers)?;
        init.set_headers(&headers);
        let socket = js_sys::Reflect::get(&response, &"webSocket".into())?;
        if socket.is_object() {
            js_sys::Reflect::set(&init, &"webSocket".into(), &socket)?;
        }
        Response::new_with_opt_readable_stream_and_init(response.body().as_ref(), &init)
    }

    fn decorate(&self, headers: &Headers) -> Result<(), JsValue> {
        for (name, value) in &self.headers {
            headers.set(name, value)?;
        }
        #[cfg(feature = "dev-origin")]
        if let Some(at) = self.decided_at.filter(|_| self.reports_clock()) {
            headers.set("sluicegate-clock", &at.as_millis().to_string())?;
        }
        Ok(())
    }

    /// Whether responses carry `Sluicegate-Clock` (a development build with SLUICEGATE_CLOCK).
    fn reports_clock(&self) -> bool {
        #[cfg(feature = "dev-origin")]
        return self.decided_at.is_some() && dev::clock::is_set();
        #[cfg(not(feature = "dev-origin"))]
        false
    }
}

/// Count the request under every rule that matches it, as the rules stage of the pipeline
/// says ([`RulesCheck`]): each rule's counter is its key's Durable Object. The checked
/// request, or the answer of the rule that refused it.
pub(crate) async fn check_rules(
    request: &Request,
    env: &Env,
    setup: &Setup,
    facts: &RequestFacts<'_>,
    header: &impl Fn(&str) -> Option<String>,
) -> Result<Result<Checked, Response>, JsValue> {
    let mut check = RulesCheck::new(&setup.rules, log_hash(env));
    #[cfg(feature = "dev-origin")]
    let _turn = dev::clock::take_turn().await;
    let started = now();
    loop {
        // The clock as each rule is checked: an earlier rule's counter may have taken a while.
        let now = crate::clock::rules_now(started);
        let step = isolate::with(|isolate| check.next(isolate, facts, header, now));
        let answer = match step {
            Step::Done => break,
            Step::Ask { rule, key } => match ask_counter(env, rule, key, now).await {
                Ok((decision, at)) => Answer::Decided { decision, at },
                Err(error) => Answer::Failed(describe(&error)),
            },
        };
        isolate::with(|isolate| check.answer(isolate, answer));
        log_notes(setup, facts, check.take_notes());
    }
    let (verdict, notes) = check.finish();
    log_notes(setup, facts, notes);
    let Some((reply, omitted)) = verdict.reply() else {
        let Verdict::Admitted(checked) = verdict else { unreachable!("a refusal has its reply") };
        let (headers, omitted) = checked.headers();
        log_omitted(omitted, request);
        return Ok(Ok(Checked { headers, decided_at: checked.decided_at() }));
    };
    log_omitted(omitted, request);
    #[cfg_attr(not(feature = "dev-origin"), allow(unused_mut))]
    let mut reply = reply;
    #[cfg(feature = "dev-origin")]
    if let Verdict::Refused { checked, .. } = &verdict {
        if let Some(at) = checked.decided_at().filter(|_| dev::clock::is_set()) {
            reply.set("sluicegate-clock", at.as_millis().to_string());
        }
    }
    Ok(Err(respond::reply(&reply)?))
}

/// What the rules stage did, in the log.
fn log_notes(setup: &Setup, facts: &RequestFacts<'_>, notes: Vec<Note<'_>>) {
    for note in notes {
        match note {
            Note::Decided { rule, logged, decision, via } => {
                log_decision(setup.rules.decision_log(), rule, &logged, facts.identity, &decision, via.name());
            }
            Note::StoreFailed { rule, logged, error } => log_store_failure(rule, &logged, &error),
        }
    }
}

/// The capabilities answer, when this is a `GET` or `HEAD` of its path.
pub(crate) fn capabilities(setup: &Setup, facts: &RequestFacts<'_>) -> Result<Option<Response>, JsValue> {
    let asked = setup.rules.is_capabilities_path(facts.path)
        && (facts.method.eq_ignore_ascii_case("GET") || facts.method.eq_ignore_ascii_case("HEAD"));
    if !asked {
        return Ok(None);
    }
    let body = isolate::with(|isolate| setup.rules.capabilities_json(|id| isolate.degraded(id)));
    let body = (!facts.method.eq_ignore_ascii_case("HEAD")).then_some(body);
    answer(200, "application/json", "public, max-age=60", body.as_deref(), &[]).map(Some)
}

/// The Worker's handler's answer to `request`. With a `check`, the body reaches it checked
/// as it streams (cut when the check fails).
pub(crate) async fn to_handler(
    request: &Request,
    handler: &js_sys::Function,
    check: Option<&preread::BodyCheck>,
) -> Result<Response, Failure> {
    let checked = match (check, request.body()) {
        (Some(check), Some(body)) => {
            let (body, signal) = check.apply(&body, &crate::runtime::signal(request))?;
            Some(js::with_body(request, &body, &signal)?)
        }
        _ => None,
    };
    let answer = handler.call1(&JsValue::UNDEFINED, checked.as_ref().unwrap_or(request)).map_err(Failure::Handler)?;
    let answer = JsFuture::from(js_sys::Promise::resolve(&answer)).await.map_err(Failure::Handler)?;
    answer.dyn_into::<Response>().map_err(|answer| {
        let error = js_sys::TypeError::new(&format!(
            "sluicegate: the handler answered {} instead of a Response",
            describe_kind(&answer)
        ));
        Failure::Handler(error.into())
    })
}

pub(crate) fn is_bodiless(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// Ask the key's Durable Object. Its answer is `[allowed, remaining, wait_ms, at_ms]`: the
/// decision, and its clock when it decided.
pub(crate) async fn ask_counter(
    env: &Env,
    rule: &Rule,
    key: &str,
    at: Instant,
) -> Result<(Decision, Instant), JsValue> {
    let namespace = crate::config::rate_limiter(env)?;
    let stub = namespace.get(&namespace.id_from_name(key)?)?;
    let call = js_sys::Promise::resolve(&stub.check(&rule.id, key, at.as_millis() as f64)?);
    let answer = JsFuture::from(js::within(&call, f64::from(STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    if answer.is_undefined() {
        return Err(JsValue::from_str(&format!("the counter did not answer within {STORE_TIMEOUT_MS} ms")));
    }
    let answer = js_sys::Array::from(&answer);
    let number = |i: u32| answer.get(i).as_f64().filter(|n| n.is_finite() && *n >= 0.0);
    match (number(0), number(1), number(2), number(3)) {
        (Some(allowed), Some(remaining), Some(wait_ms), Some(at_ms)) => {
            let wait = Span::from_millis(wait_ms as u64);
            let decision = if allowed >= 1.0 {
                Decision::Allow { remaining: remaining as u64, reset: wait }
            } else {
                Decision::Deny { retry_after: wait }
            };
            Ok((decision, Instant::from_millis(at_ms as u64)))
        }
        _ => Err(JsValue::from_str("the counter answered something other than [allowed, remaining, wait_ms, at_ms]")),
    }
}

/// The answer to an upload cut as it streamed: `429` for its source's bytes, `400` for a
/// body that contradicted its `Content-Length`, and for its tenant what a body that declared
/// its length gets: `413` past the biggest body, `429` past its bytes or its share in flight.
fn cut_refusal(request: &Request, why: preread::Cut, identity: Option<Identity>) -> Response {
    match why {
        preread::Cut::Source => pre_read_refusal(request, preread::Check::Source, Span::from_secs(1), identity),
        preread::Cut::Length(error) => bad_request(request, &format!("The body was cut: {error}.")),
        preread::Cut::Tenant(refusal) => tenant_refusal(request, refusal),
    }
}

/// `429` from a check made before the body is read, naming the check in `Sluicegate-Scope`
/// (the pipeline's [`preread::Check::reply`]), logged.
fn pre_read_refusal(request: &Request, scope: preread::Check, wait: Span, identity: Option<Identity>) -> Response {
    let (ip, source) = identity_fields(identity);
    log(&format!(
        "{{\"sluicegate\":\"pre-read\",\"scope\":\"{}\",\"identity\":{},\"identity_source\":\"{source}\",\"retry_after_ms\":{},\"url\":{}}}",
        scope.name(),
        json_string(&ip),
        wait.as_millis_ceil(),
        json_string(&logged_url(request))
    ));
    respond::reply(&scope.reply(wait)).unwrap_or_else(|_| Response::error())
}

/// The answer to a tenant request that is refused (the pipeline's [`tenancy::Refusal::reply`]), logged.
fn tenant_refusal(request: &Request, refusal: tenancy::Refusal) -> Response {
    let reply = refusal.reply();
    log(&format!(
        "{{\"sluicegate\":\"tenant\",\"status\":{},\"refusal\":{},\"url\":{}}}",
        reply.status,
        json_string(refusal.name()),
        json_string(&logged_url(request))
    ));
    respond::reply(&reply).unwrap_or_else(|_| Response::error())
}
