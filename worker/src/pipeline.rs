//! One request's way through the edge, in the order it meets the layers: its facts, the
//! checks before its body is read, the admin and egress routes, the capabilities answer,
//! the rules (each key's Durable Object), its tenant, its upstream slot, and the origin or
//! the Worker's own handler.

use crate::config::{self, config, Origin, Setup, STORE_TIMEOUT_MS};
#[cfg(feature = "dev-origin")]
use crate::dev;
use crate::guard::Scope;
use crate::js::{self, Env};
use crate::log::{
    describe, describe_kind, identity_fields, json_string, log, log_decision, log_error, log_hash, log_omitted,
    log_store_failure, logged_url,
};
use crate::respond::{self, busy, client_gone, interim_refusal};
use crate::{admin, budgets, egress, isolate, preread, proxy, stats, tenancy};
use sluicegate::analytics::{Kind, Outcome};
use sluicegate::identity::{client_identity_behind, Identity, Sources};
use sluicegate::limit::Decision;
use sluicegate::pipeline::preread::SOURCE_CUT_WAIT;
use sluicegate::pipeline::serve::{self, Routes, Stage, Way};
use sluicegate::pipeline::{Answer, Note, Reply, RulesCheck, Step, Verdict};
use sluicegate::rules::{RequestFacts, Rule, RuleOverrides, Store, StoreFailure};
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
    let config = config(env);
    let setup = match config.as_ref() {
        Ok(setup) => setup,
        Err(problems) => {
            log_error(&format!("sluicegate: 503 for {}: invalid configuration: {problems}", logged_url(request)));
            return Ok(respond::reply(&serve::unavailable())?);
        }
    };
    let url = Url::new(&request.url())?;
    let raw_path = url.pathname();
    let req_headers = request.headers();
    let header = |name: &str| req_headers.get(name).ok().flatten();
    // Rules match the normalised path; the origin gets the path as it was sent. How the body
    // is framed is read before anything is charged for it.
    let read =
        serve::read_request(&raw_path, header("content-length").as_deref(), header("transfer-encoding").as_deref());
    let (path, declared) = match read {
        Ok(read) => read,
        Err(reply) => return Ok(logged(request, &reply)?),
    };
    let host = url.hostname();
    let method = request.method();
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
    let source = setup.rules.pre_read().source_of(&facts);
    let routes = Routes {
        admin: env.admin_token().as_string().is_some_and(|t| !t.is_empty()),
        egress: env.egress_token().as_string().is_some_and(|t| !t.is_empty()),
    };
    let mut way = Way::new(&setup.rules, routes);
    // The request's stages are decided from this instant (under a development clock, at it,
    // after the requests before this one: see `crate::clock::turn`).
    let mut turn = Some(crate::clock::turn().await);
    let now = crate::clock::now();
    // The stages before the rules: each may answer, and that ends the way.
    for stage in way.by_ref() {
        let answered = match stage {
            // Before anything reads the body or asks a Durable Object: the address, the
            // isolate, the source's declared bytes.
            Stage::PreRead => isolate::with(|i| i.check_pre_read(&setup.rules, identity, source, declared, now))
                .err()
                .map(|(scope, wait)| {
                    stats::record(setup, env, &facts, (Kind::PreRead, scope.name()), Outcome::Refused, wait);
                    dev_clock(pre_read_refusal(request, scope, wait, identity), now)
                }),
            // The admin and egress routes wait on stores and providers, never in a turn (a
            // permit waiting in one would hold up the request that gives one back).
            Stage::Admin => {
                if sluicegate::pipeline::admin::route(&path).is_some()
                    || sluicegate::pipeline::stats::route(&path).is_some()
                {
                    turn = None;
                }
                match stats::serve(request, env, setup, &url, &path, identity).await? {
                    Some(answer) => Some(answer),
                    None => admin::serve(request, env, setup, &path, identity).await?,
                }
            }
            Stage::Egress => {
                if setup.rules.egress().is_some_and(|e| e.route(&method.to_ascii_uppercase(), &path).is_some()) {
                    turn = None;
                }
                egress::serve(request, env, ctx, setup, &path, &url, identity).await?
            }
            Stage::Capabilities => {
                let reply = isolate::with(|i| serve::capabilities(&setup.rules, &facts, |id| i.degraded(id)));
                reply.as_ref().map(respond::reply).transpose()?
            }
            Stage::Rules => break,
            Stage::Tenant | Stage::Upstream | Stage::Origin => {
                return Err(JsValue::from_str("the rules stage comes before the tenant's").into())
            }
        };
        if let Some(answer) = answered {
            return Ok(answer);
        }
    }
    let checked = match check_rules(request, env, setup, &facts, &header, now).await? {
        Ok(checked) => checked,
        Err(refusal) => return Ok(refusal),
    };
    let admitted = Admitted { request, env, ctx, config: &config, setup, url: &url, facts: &facts, source, declared };
    admitted.forward(way, turn, checked, &header, handler, now).await
}

/// One of the edge's own answers, logged with its detail and the URL it answers.
fn logged(request: &Request, reply: &Reply) -> Result<Response, JsValue> {
    log(&format!("sluicegate: {} for {}: {}", reply.status, logged_url(request), reply.body));
    respond::reply(reply)
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
    /// The rest of the `way`: charge the tenant, take the upstream slot and send the request
    /// on; everything it holds is a hold of its [`Scope`], given back however this ends.
    async fn forward(
        &self,
        way: Way,
        turn: Option<crate::clock::Turn>,
        mut checked: Checked,
        header: &impl Fn(&str) -> Option<String>,
        handler: Option<&js_sys::Function>,
        now: Instant,
    ) -> Result<Response, Failure> {
        let (request, setup) = (self.request, self.setup);
        let scope = Scope::of(request);
        let has_body = request.body().is_some();
        let mut tenant = None;
        let mut slot = None;
        let mut turn = turn;
        for stage in way {
            // The turn ends with the tenant stage: waiting for a slot is not a decision.
            if stage != Stage::Tenant {
                let _ = turn.take();
            }
            match stage {
                // Its place in flight is held until the origin has answered.
                Stage::Tenant => {
                    let admitted =
                        tenancy::admit(setup, self.env, self.facts, header, self.declared, has_body, now, &scope);
                    match admitted.await? {
                        Ok(admitted) => {
                            if let Some(name) = &admitted.tenant {
                                let counted = (Kind::Tenant, &**name);
                                let (outcome, wait) = match &admitted.shadow {
                                    Some(refusal) => (Outcome::WouldRefuse, refusal_wait(refusal)),
                                    None => (Outcome::Admitted, Span::ZERO),
                                };
                                stats::record(setup, self.env, self.facts, counted, outcome, wait);
                            }
                            if let Some(refusal) = &admitted.shadow {
                                log_tenant_refusal(request, refusal, false);
                                checked.add_shadow(refusal.shadow_entry());
                            }
                            tenant = Some(admitted);
                        }
                        Err(refusal) => {
                            let (counted, wait) = ((Kind::Tenant, refused_tenant(&refusal)), refusal_wait(&refusal));
                            stats::record(setup, self.env, self.facts, counted, Outcome::Refused, wait);
                            return Ok(checked.finish(tenant_refusal(request, refusal))?);
                        }
                    }
                }
                Stage::Upstream => {
                    let Some(upstream) = setup.rules.upstream_for(self.facts) else { continue };
                    match budgets::acquire(upstream, self.env, self.ctx, &scope).await? {
                        Some(held) => {
                            let counted = (Kind::Budget, upstream.id.as_str());
                            stats::record(setup, self.env, self.facts, counted, Outcome::Admitted, Span::ZERO);
                            slot = Some(held);
                        }
                        None if scope.gone() => return Ok(client_gone(request)),
                        None => {
                            let counted = (Kind::Budget, upstream.id.as_str());
                            stats::record(setup, self.env, self.facts, counted, Outcome::Shed, Span::ZERO);
                            return Ok(checked.finish(busy(request, upstream)?)?);
                        }
                    }
                }
                // A client that left while it waited is not forwarded.
                Stage::Origin if scope.gone() => return Ok(client_gone(request)),
                Stage::Origin => {
                    let tenant = tenant.ok_or_else(|| JsValue::from_str("the origin before the tenant stage"))?;
                    return self.origin(checked, tenant, slot, has_body, handler, &scope).await;
                }
                _ => return Err(JsValue::from_str("a stage before the rules after them").into()),
            }
        }
        Err(JsValue::from_str("the way ended before the origin").into())
    }

    /// Send the request to the origin (its tenant admitted, its slot held) and pass its answer
    /// on with the rules' headers.
    async fn origin(
        &self,
        checked: Checked,
        mut tenant: tenancy::Admitted,
        slot: Option<budgets::Slot>,
        has_body: bool,
        handler: Option<&js_sys::Function>,
        scope: &Scope<'_>,
    ) -> Result<Response, Failure> {
        let (request, setup) = (self.request, self.setup);
        #[cfg(feature = "dev-origin")]
        crate::panic::on_purpose(self.env, self.facts.path);
        let counts_bytes = tenant.counts_bytes || setup.rules.pre_read().source_bytes_per_second.is_some();
        // A body that declared its length and came in through the runtime's own HTTP server
        // is framed by that length: it is what was charged (bodies framed otherwise were
        // refused above). One that the Worker's own code hands its handler is checked as it
        // streams, as is one of no declared length (charged to its source and its tenant
        // chunk by chunk).
        let framed = handler.is_none() && self.declared.is_some();
        let check = serve::counts_as_it_streams(&request.method(), has_body, counts_bytes, framed).then(|| {
            preread::BodyCheck::new(self.config, self.source.to_owned(), self.declared, tenant.streamed.take())
        });
        let response = self.send(check.as_ref(), handler).await;
        // An upload cut as it streamed is answered as such, whatever came back.
        if let Some(why) = check.as_ref().and_then(preread::BodyCheck::cut) {
            match &why {
                preread::Cut::Source => {
                    let counted = (Kind::PreRead, preread::Check::Source.name());
                    stats::record(setup, self.env, self.facts, counted, Outcome::Refused, SOURCE_CUT_WAIT);
                }
                preread::Cut::Tenant(refusal) => {
                    let (counted, wait) = ((Kind::Tenant, refused_tenant(refusal)), refusal_wait(refusal));
                    stats::record(setup, self.env, self.facts, counted, Outcome::Refused, wait);
                }
                preread::Cut::Length(_) => {}
            }
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
                return Ok(respond::reply(&serve::origin_failed())?);
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
    /// Name one more shadow refusal in `Sluicegate-Shadow` (after the rules').
    fn add_shadow(&mut self, entry: String) {
        match self.headers.iter_mut().find(|(name, _)| *name == "sluicegate-shadow") {
            Some((_, value)) => {
                value.push_str(", ");
                value.push_str(&entry);
            }
            None => self.headers.push(("sluicegate-shadow", entry)),
        }
    }

    /// `response` with the RateLimit headers, `Sluicegate-Degraded` and `Sluicegate-Shadow` added.
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
/// request, or the answer of the rule that refused it; `started`: when its turn came.
pub(crate) async fn check_rules(
    request: &Request,
    env: &Env,
    setup: &Setup,
    facts: &RequestFacts<'_>,
    header: &impl Fn(&str) -> Option<String>,
    started: Instant,
) -> Result<Result<Checked, Response>, JsValue> {
    let mut check = RulesCheck::new(&setup.rules, log_hash(env));
    // The admin API may override a rule's `enforce`: read while it is on.
    if env.admin_token().as_string().is_some_and(|t| !t.is_empty()) {
        check = check.reading_overrides();
    }
    loop {
        // The clock as each rule is checked: an earlier rule's counter may have taken a while.
        let now = crate::clock::rules_now(started);
        let step = isolate::with(|isolate| check.next(isolate, facts, header, now));
        let answer = match step {
            Step::Done => break,
            Step::ReadOverrides => Answer::Overrides(read_rule_overrides(env).await),
            Step::Ask { rule, key } => match &rule.store {
                Store::Cloudflare { binding } => match ask_binding(env, binding, key).await {
                    Ok(admitted) => Answer::Outcome { admitted, at: now },
                    Err(error) => Answer::Failed(describe(&error)),
                },
                _ => match ask_counter(env, rule, key, now).await {
                    Ok((decision, at)) => Answer::Decided { decision, at },
                    Err(error) => Answer::Failed(describe(&error)),
                },
            },
        };
        isolate::with(|isolate| check.answer(isolate, answer));
        log_notes(setup, env, facts, check.take_notes());
    }
    let (verdict, notes) = check.finish();
    log_notes(setup, env, facts, notes);
    let Some((reply, omitted)) = verdict.reply() else {
        let Verdict::Admitted(checked) = verdict else { unreachable!("a refusal has its reply") };
        let (headers, omitted) = checked.headers();
        log_omitted(omitted, request);
        // A request no rule decided was still decided at its instant (what a development
        // clock reports for it).
        return Ok(Ok(Checked { headers, decided_at: checked.decided_at().or(Some(started)) }));
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

/// What the rules stage did, in the log and the stats.
fn log_notes(setup: &Setup, env: &Env, facts: &RequestFacts<'_>, notes: Vec<Note<'_>>) {
    for note in notes {
        match note {
            // A refusal not enforced for this key (a shadow refusal) is counted apart, as one
            // the rule would have made, and its line says `"enforced":false`.
            Note::Decided { rule, logged, decision, via, enforced } => {
                let (outcome, wait) = match decision {
                    Decision::Deny { retry_after } if enforced => (Outcome::Refused, retry_after),
                    Decision::Deny { retry_after } => (Outcome::WouldRefuse, retry_after),
                    Decision::Allow { .. } => (Outcome::Admitted, Span::ZERO),
                };
                stats::record(setup, env, facts, (Kind::Rule, &rule.id), outcome, wait);
                let line = (rule, logged.as_str(), enforced);
                log_decision(setup.rules.decision_log(), line, facts.identity, &decision, via.name());
            }
            Note::StoreFailed { rule, logged, error, enforced } => {
                let outcome = match rule.on_store_failure {
                    StoreFailure::Open => Outcome::FailedOpen,
                    _ if enforced => Outcome::Refused,
                    _ => Outcome::WouldRefuse,
                };
                stats::record(setup, env, facts, (Kind::Rule, &rule.id), outcome, Span::ZERO);
                log_store_failure(rule, &logged, &error, enforced);
            }
            Note::OverridesUnreadable(error) => crate::log::log_error(&format!(
                "{{\"sluicegate\":\"store-failure\",\"store\":\"{}\",\"what\":\"rule overrides\",\"error\":{}}}",
                crate::counter::OVERRIDES_OBJECT,
                crate::log::json_string(&error)
            )),
        }
    }
}

/// The runtime overrides of the rules' `enforce`, from the object that keeps them, within
/// the store's timeout.
async fn read_rule_overrides(env: &Env) -> Result<RuleOverrides, String> {
    let read = tenancy::read_stored(env, js::Stub::get_rule_overrides, RuleOverrides::from_json).await;
    read.map_err(|e| describe(&e))
}

/// The wait a tenant refusal gives (none but for its rate).
fn refusal_wait(refusal: &tenancy::Refusal) -> Span {
    match refusal {
        tenancy::Refusal::Limited { wait, .. } => *wait,
        _ => Span::ZERO,
    }
}

/// The name a tenant refusal is counted under: its tenant, or what kept it from having one.
fn refused_tenant(refusal: &tenancy::Refusal) -> &str {
    match refusal {
        tenancy::Refusal::Limited { tenant, .. } | tenancy::Refusal::Overloaded { tenant } => tenant,
        tenancy::Refusal::Unknown => "(unknown key)",
        tenancy::Refusal::TooLarge { .. } => "(body too large)",
    }
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

/// Ask the Workers Rate Limiting binding `binding` to count `key`: its `success`.
async fn ask_binding(env: &Env, binding: &str, key: &str) -> Result<bool, JsValue> {
    let limiter: js::RateLimit = js_sys::Reflect::get(env, &JsValue::from_str(binding))?.unchecked_into();
    let options = js_sys::Object::new();
    js_sys::Reflect::set(&options, &"key".into(), &JsValue::from_str(key))?;
    let call = js_sys::Promise::resolve(&limiter.limit(&options)?);
    let answer = JsFuture::from(js::within(&call, f64::from(STORE_TIMEOUT_MS), &JsValue::UNDEFINED)?).await?;
    if answer.is_undefined() {
        return Err(JsValue::from_str(&format!("the binding {binding} did not answer within {STORE_TIMEOUT_MS} ms")));
    }
    js_sys::Reflect::get(&answer, &"success".into())?
        .as_bool()
        .ok_or_else(|| JsValue::from_str(&format!("the binding {binding} answered something other than {{success}}")))
}

/// The answer to an upload cut as it streamed: `429` for its source's bytes, `400` for a
/// body that contradicted its `Content-Length`, and for its tenant what a body that declared
/// its length gets: `413` past the biggest body, `429` past its bytes or its share in flight.
fn cut_refusal(request: &Request, why: preread::Cut, identity: Option<Identity>) -> Response {
    match why {
        preread::Cut::Source => pre_read_refusal(request, preread::Check::Source, SOURCE_CUT_WAIT, identity),
        preread::Cut::Tenant(refusal) => tenant_refusal(request, refusal),
        preread::Cut::Length(_) => logged(request, &why.reply()).unwrap_or_else(|_| Response::error()),
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

/// `response` (one of the edge's own) with `Sluicegate-Clock` under a development clock: the
/// instant the request was decided at, as every answer after the rules reports it.
#[cfg_attr(not(feature = "dev-origin"), allow(unused_variables))]
fn dev_clock(response: Response, at: Instant) -> Response {
    #[cfg(feature = "dev-origin")]
    if dev::clock::is_set() {
        let _ = response.headers().set("sluicegate-clock", &at.as_millis().to_string());
    }
    response
}

/// The answer to a tenant request that is refused (the pipeline's [`tenancy::Refusal::reply`]), logged.
fn tenant_refusal(request: &Request, refusal: tenancy::Refusal) -> Response {
    let reply = log_tenant_refusal(request, &refusal, true);
    respond::reply(&reply).unwrap_or_else(|_| Response::error())
}

/// A tenant refusal's log line (`"enforced":false` for one its limit did not enforce: the
/// request went on), and its answer.
fn log_tenant_refusal(request: &Request, refusal: &tenancy::Refusal, enforced: bool) -> Reply {
    let reply = refusal.reply();
    log(&format!(
        "{{\"sluicegate\":\"tenant\",\"status\":{},\"refusal\":{},\"url\":{}{}}}",
        reply.status,
        json_string(refusal.name()),
        json_string(&logged_url(request)),
        if enforced { "" } else { ",\"enforced\":false" }
    ));
    reply
}
