//! The sluicegate edge: validated rules enforced in a Cloudflare Worker.
//!
//! A thin layer over the core: it reads the clock once per request, reads the request's
//! facts, asks the counting key's Durable Object for the decision (exact counting), and
//! translates the decision into a response. An isolate-local cache remembers keys that are
//! blocked, so a flood from a blocked key is refused without a Durable Object round trip.
//!
//! The JS entry (`entry.mjs`) only loads the module and forwards `fetch` and the Durable
//! Object's `check` here.

mod blocks;
mod js;
mod mock;

use blocks::BlockCache;
use js::{Env, Fetcher};
use sluicegate::headers;
use sluicegate::identity::{client_identity, Identity, Sources};
use sluicegate::limit::{Blocking, Decision, Limiter};
use sluicegate::rules::{AnyLimiter, RequestFacts, Rule, RuleSet};
use sluicegate::time::{Instant, Span};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, Response, ResponseInit, Url};

/// The rules used when `SLUICEGATE_RULES` is not set; checked by `sluicegate check-rules`
/// in the build.
const DEFAULT_RULES: &str = include_str!("../rules.json");

/// The validated rules, or every problem joined into one line.
type Config = Rc<Result<RuleSet, String>>;

thread_local! {
    /// The `SLUICEGATE_RULES` value last seen (compared with `Object.is`, so an unchanged
    /// binding costs no copy) and what it parsed to.
    static CONFIG: RefCell<Option<(JsValue, Config)>> = const { RefCell::new(None) };
    static BLOCKS: RefCell<BlockCache> = RefCell::new(BlockCache::new(10_000));
}

fn now() -> Instant {
    Instant::from_millis(js_sys::Date::now().max(0.0) as u64)
}

/// The rules text in force: `SLUICEGATE_RULES` (a JSON string, or an object that wrangler
/// passed already parsed), else the bundled default.
fn rules_text(env: &Env) -> String {
    rules_text_of(&env.rules())
}

fn rules_text_of(value: &JsValue) -> String {
    if let Some(text) = value.as_string() {
        if !text.trim().is_empty() {
            return text;
        }
    } else if value.is_object() {
        if let Some(text) = js_sys::JSON::stringify(value).ok().and_then(|s| s.as_string()) {
            return text;
        }
    }
    DEFAULT_RULES.to_owned()
}

/// The validated rules, parsed once per isolate (again only if the text changes). An
/// invalid file is logged in full, naming each rule and field, the first time it is seen.
fn config(env: &Env) -> Config {
    let value = env.rules();
    CONFIG.with(|cell| {
        if let Some((seen, parsed)) = cell.borrow().as_ref() {
            if js_sys::Object::is(seen, &value) {
                return parsed.clone();
            }
        }
        let parsed = Rc::new(RuleSet::from_json(&rules_text_of(&value)).map_err(|errors| {
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            let message = lines.join("; ");
            for line in &lines {
                log_error(&format!("sluicegate: invalid rules, refusing every request with 503: {line}"));
            }
            message
        }));
        *cell.borrow_mut() = Some((value, parsed.clone()));
        parsed
    })
}

fn log(line: &str) {
    web_sys::console::log_1(&JsValue::from_str(line));
}

fn log_error(line: &str) {
    web_sys::console::error_1(&JsValue::from_str(line));
}

/// Serve one request: the Worker's `fetch`.
#[wasm_bindgen]
pub async fn handle(request: Request, env: JsValue) -> Response {
    let env: Env = env.unchecked_into();
    match serve(&request, &env).await {
        Ok(response) => response,
        Err(error) => {
            log_error(&format!("sluicegate: refusing with 503: {}", describe(&error)));
            problem(503, &headers::unavailable(), None)
        }
    }
}

async fn serve(request: &Request, env: &Env) -> Result<Response, JsValue> {
    let now = now();
    let config = config(env);
    let rules = match config.as_ref() {
        Ok(rules) => rules,
        Err(first) => {
            log_error(&format!("sluicegate: 503 for {}: rules invalid: {first}", request.url()));
            return Ok(problem(503, &headers::unavailable(), None));
        }
    };
    let url = Url::new(&request.url())?;
    let path = url.pathname();
    let host = url.hostname();
    let method = request.method();
    let req_headers = request.headers();
    let header = |name: &str| req_headers.get(name).ok().flatten();
    let cf_connecting_ip = header("cf-connecting-ip");
    let x_forwarded_for = header("x-forwarded-for");
    let colo = js::colo(request);
    let identity = client_identity(&Sources {
        cf_connecting_ip: cf_connecting_ip.as_deref(),
        x_forwarded_for: x_forwarded_for.as_deref(),
        peer: None,
    });
    let facts = RequestFacts { method: &method, host: &host, path: &path, colo: colo.as_deref(), identity };

    let mut policies: Vec<String> = Vec::new();
    let mut states: Vec<String> = Vec::new();
    for rule in rules.matching(&facts) {
        let key = rule.counting_key(&facts, header);
        let cached = BLOCKS.with(|b| b.borrow().blocked_for(&key, now));
        let (decision, via) = match cached {
            Some(wait) => (Decision::Deny { retry_after: wait }, "isolate-cache"),
            None => (ask_counter(env, rule, &key).await?, "durable-object"),
        };
        log_decision(rule, &key, identity, &decision, via);
        policies.push(rule.policy_header());
        states.push(headers::ratelimit(&rule.id, &decision));
        if let Decision::Deny { retry_after } = decision {
            if cached.is_none() {
                BLOCKS.with(|b| b.borrow_mut().insert(&key, now + retry_after, now));
            }
            return refusal(rule, retry_after, &policies, &states);
        }
    }
    let response = match forward(request, env, &path, &url, &facts).await {
        Ok(response) => response,
        Err(error) => {
            log_error(&format!("sluicegate: 502 for {}: the origin failed: {}", request.url(), describe(&error)));
            let body = headers::problem(502, "Bad Gateway", "The origin could not be reached.", None, None);
            return Ok(problem(502, &body, None));
        }
    };
    if policies.is_empty() {
        return Ok(response);
    }
    with_rate_headers(response, &policies, &states)
}

/// Ask the key's Durable Object. Its answer is `[allowed, remaining, wait_ms]`.
async fn ask_counter(env: &Env, rule: &Rule, key: &str) -> Result<Decision, JsValue> {
    let namespace = env.rate_limiter();
    if namespace.is_undefined() {
        return Err(JsValue::from_str("the RATE_LIMITER Durable Object binding is missing"));
    }
    let stub = namespace.get(&namespace.id_from_name(key)?)?;
    let answer = JsFuture::from(js_sys::Promise::resolve(&stub.check(&rule.id, key)?)).await?;
    let answer = js_sys::Array::from(&answer);
    let number = |i: u32| answer.get(i).as_f64().filter(|n| n.is_finite() && *n >= 0.0);
    match (number(0), number(1), number(2)) {
        (Some(allowed), Some(remaining), Some(wait_ms)) => {
            let wait = Span::from_millis(wait_ms as u64);
            Ok(if allowed >= 1.0 {
                Decision::Allow { remaining: remaining as u64, reset: wait }
            } else {
                Decision::Deny { retry_after: wait }
            })
        }
        _ => Err(JsValue::from_str("the counter answered something other than [allowed, remaining, wait_ms]")),
    }
}

fn log_decision(rule: &Rule, key: &str, identity: Option<Identity>, decision: &Decision, via: &str) {
    let (ip, source) = match identity {
        Some(id) => (id.ip.to_string(), id.source.as_str()),
        None => ("unknown".to_owned(), "none"),
    };
    let outcome = match decision {
        Decision::Allow { remaining, .. } => format!("\"allow\",\"remaining\":{remaining}"),
        Decision::Deny { retry_after } => format!("\"deny\",\"retry_after_ms\":{}", retry_after.as_millis_ceil()),
    };
    log(&format!(
        "{{\"sluicegate\":\"decision\",\"rule\":{},\"identity\":{},\"identity_source\":\"{source}\",\"key\":{},\"decision\":{outcome},\"via\":\"{via}\"}}",
        json_string(&rule.id),
        json_string(&ip),
        json_string(key)
    ));
}

fn json_string(s: &str) -> String {
    js_sys::JSON::stringify(&JsValue::from_str(s)).ok().and_then(|v| v.as_string()).unwrap_or_else(|| "\"\"".into())
}

fn refusal(rule: &Rule, wait: Span, policies: &[String], states: &[String]) -> Result<Response, JsValue> {
    let (status, content_type, body) = rule.refusal(wait);
    let headers = Headers::new()?;
    headers.set("content-type", &content_type)?;
    headers.set("retry-after", &headers::retry_after(wait))?;
    headers.set("ratelimit-policy", &policies.join(", "))?;
    headers.set("ratelimit", &states.join(", "))?;
    headers.set("cache-control", "no-store")?;
    let init = ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers);
    Response::new_with_opt_str_and_init(Some(&body), &init)
}

fn problem(status: u16, body: &str, retry_after: Option<Span>) -> Response {
    let build = || -> Result<Response, JsValue> {
        let headers = Headers::new()?;
        headers.set("content-type", headers::PROBLEM_JSON)?;
        headers.set("cache-control", "no-store")?;
        if let Some(wait) = retry_after {
            headers.set("retry-after", &headers::retry_after(wait))?;
        }
        let init = ResponseInit::new();
        init.set_status(status);
        init.set_headers(&headers);
        Response::new_with_opt_str_and_init(Some(body), &init)
    };
    build().unwrap_or_else(|_| Response::error())
}

fn with_rate_headers(response: Response, policies: &[String], states: &[String]) -> Result<Response, JsValue> {
    // Responses from fetch have immutable headers: copy into a fresh response.
    let init = ResponseInit::new();
    init.set_status(response.status());
    init.set_status_text(&response.status_text());
    let headers = Headers::new_with_headers(&response.headers())?;
    headers.set("ratelimit-policy", &policies.join(", "))?;
    headers.set("ratelimit", &states.join(", "))?;
    init.set_headers(&headers);
    Response::new_with_opt_readable_stream_and_init(response.body().as_ref(), &init)
}

/// Send an admitted request on: to `ORIGIN_URL` when set, else to the built-in
/// development origin (the `www/` pages and `/api/ping`).
async fn forward(
    request: &Request,
    env: &Env,
    path: &str,
    url: &Url,
    facts: &RequestFacts<'_>,
) -> Result<Response, JsValue> {
    let origin = env.origin_url();
    if let Some(origin) = origin.as_string().filter(|o| !o.trim().is_empty()) {
        let target = Url::new_with_base(&format!("{path}{}", url.search()), &origin)?;
        // `new Request(url, request)`: the same method, headers and body, another URL.
        let upstream = Request::new_with_str_and_init(&target.href(), request.unchecked_ref::<RequestInit>())?;
        let response = JsFuture::from(js::fetch(&upstream)).await?;
        return response.dyn_into();
    }
    if path.starts_with("/mock/open-meteo/") {
        return mock::serve(request, path, url, facts.identity).await;
    }
    if path == "/api/ping" {
        return ping(facts);
    }
    let assets = env.assets();
    if assets.is_undefined() {
        return Ok(problem(404, &headers::problem(404, "Not Found", "No origin is configured.", None, None), None));
    }
    let assets: Fetcher = assets.unchecked_into();
    JsFuture::from(assets.fetch(request)?).await?.dyn_into()
}

fn ping(facts: &RequestFacts<'_>) -> Result<Response, JsValue> {
    let body = format!(
        "{{\"pong\":true,\"time_ms\":{},\"colo\":{},\"identity\":{}}}",
        now().as_millis(),
        json_string(facts.colo.unwrap_or("unknown")),
        json_string(&facts.identity.map_or_else(|| "unknown".to_owned(), |id| id.ip.to_string()))
    );
    let headers = Headers::new()?;
    headers.set("content-type", "application/json")?;
    headers.set("cache-control", "no-store")?;
    let init = ResponseInit::new();
    init.set_status(200);
    init.set_headers(&headers);
    Response::new_with_opt_str_and_init(Some(&body), &init)
}

fn describe(error: &JsValue) -> String {
    error
        .as_string()
        .or_else(|| js_sys::Reflect::get(error, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| format!("{error:?}"))
}

/// The state behind one Durable Object: exact counts for the keys routed to it (one, as
/// the Worker names objects by counting key).
///
/// Counts live in memory. Blocks are also written to the object's storage when they start,
/// so a restart or a deploy does not lift a block: a key's first check after a restart
/// restores its block if one is still in force.
#[wasm_bindgen]
pub struct Counter {
    rules: Result<RuleSet, String>,
    limiters: HashMap<String, (Rule, Blocking<AnyLimiter>)>,
    kv: Option<js::SyncKv>,
}

#[wasm_bindgen]
impl Counter {
    /// A counter reading the same rules as the Worker, keeping blocks in `storage`
    /// (`ctx.storage`; blocks stay in memory only when it has no synchronous `kv`).
    #[wasm_bindgen(constructor)]
    pub fn new(env: JsValue, storage: JsValue) -> Counter {
        let env: Env = env.unchecked_into();
        let rules = RuleSet::from_json(&rules_text(&env))
            .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
        let kv = if storage.is_object() { storage.unchecked_into::<js::Storage>().kv() } else { JsValue::UNDEFINED };
        let kv = if kv.is_object() {
            Some(kv.unchecked_into())
        } else {
            log_error(
                "sluicegate: this Durable Object has no storage.kv (not SQLite-backed): blocks are kept in memory only",
            );
            None
        };
        Counter { rules, limiters: HashMap::new(), kv }
    }

    /// Count one request of `key` under rule `rule_id`, at this object's clock:
    /// `[allowed (1 or 0), remaining, wait_ms]`, where `wait_ms` is the reset for an allow
    /// and the retry-after for a refusal.
    ///
    /// # Errors
    /// When the rule is unknown (the Worker and this object disagree about the rules) or
    /// the rules are invalid.
    pub fn check(&mut self, rule_id: &str, key: &str) -> Result<Vec<f64>, JsError> {
        let now = now();
        let rules = self.rules.as_ref().map_err(|e| JsError::new(&format!("invalid rules: {e}")))?;
        let rule = rules.get(rule_id).ok_or_else(|| JsError::new(&format!("unknown rule \"{rule_id}\"")))?;
        if self.limiters.len() >= 1_000 && !self.limiters.contains_key(key) {
            self.limiters.retain(|_, (_, l)| !l.is_idle(now));
        }
        let restored = match self.limiters.get(key) {
            Some(_) => None,
            None => self.stored_block(key),
        };
        let entry = self.limiters.entry(key.to_owned()).or_insert_with(|| (rule.clone(), rule.limiter()));
        if entry.0 != *rule {
            // The rule changed since this key was counted: start it fresh under the new one.
            *entry = (rule.clone(), rule.limiter());
        }
        if let Some(until) = restored {
            entry.1.impose_block(until);
        }
        let blocked_before = entry.1.blocked_until(now);
        let decision = entry.1.check(now, 1).map_err(|e| JsError::new(&e.to_string()))?;
        let blocked_after = entry.1.blocked_until(now);
        if let Some(until) = blocked_after.filter(|_| blocked_before.is_none()) {
            self.store_block(key, until);
        }
        Ok(match decision {
            Decision::Allow { remaining, reset } => vec![1.0, remaining as f64, reset.as_millis_ceil() as f64],
            Decision::Deny { retry_after } => vec![0.0, 0.0, retry_after.as_millis_ceil() as f64],
        })
    }
}

impl Counter {
    /// The end of the block stored for `key`, if it is stored and readable.
    fn stored_block(&self, key: &str) -> Option<Instant> {
        let value = self.kv.as_ref()?.get_value(key).ok()?;
        let ms = value.as_f64().filter(|ms| ms.is_finite() && *ms > 0.0)?;
        Some(Instant::from_millis(ms as u64))
    }

    /// Remember that `key` is blocked until `until` (epoch milliseconds). A failed write
    /// keeps the block in memory and is logged.
    fn store_block(&self, key: &str, until: Instant) {
        if let Some(kv) = &self.kv {
            if let Err(e) = kv.put(key, &JsValue::from_f64(until.as_millis() as f64)) {
                log_error(&format!("sluicegate: could not store the block of {key}: {}", describe(&e)));
            }
        }
    }
}
