//! Bindings to the Workers runtime: the parts of `env`, `request.cf` and the global
//! `fetch` this crate uses (globals, never `window`).

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use web_sys::Request;

#[wasm_bindgen]
extern "C" {
    /// The Worker's `env`.
    pub type Env;
    #[wasm_bindgen(method, getter, js_name = SLUICEGATE_RULES)]
    pub fn rules(this: &Env) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = ORIGIN_URL)]
    pub fn origin_url(this: &Env) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = SLUICEGATE_TENANT_KEYS)]
    pub fn tenant_keys(this: &Env) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = SLUICEGATE_ADMIN_TOKEN)]
    pub fn admin_token(this: &Env) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = SLUICEGATE_EGRESS_TOKEN)]
    pub fn egress_token(this: &Env) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = SLUICEGATE_LOG_KEY)]
    pub fn log_key(this: &Env) -> JsValue;
    #[cfg(feature = "dev-origin")]
    #[wasm_bindgen(method, getter, js_name = ASSETS)]
    pub fn assets(this: &Env) -> JsValue;

    /// A Durable Object namespace.
    pub type Namespace;
    #[wasm_bindgen(method, catch, js_name = idFromName)]
    pub fn id_from_name(this: &Namespace, name: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn get(this: &Namespace, id: &JsValue) -> Result<Stub, JsValue>;

    /// A Durable Object stub; its methods are the object's RPC methods (see `edge.mjs`).
    pub type Stub;
    #[wasm_bindgen(method, catch)]
    pub fn check(this: &Stub, rule: &str, key: &str, at_ms: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = acquireSlot)]
    pub fn acquire_slot(this: &Stub, upstream: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = acquirePermit)]
    pub fn acquire_permit(
        this: &Stub,
        provider: &str,
        weight: f64,
        avoid: f64,
        wait_ms: f64,
        secret: &str,
    ) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = releasePermit)]
    pub fn release_permit(this: &Stub, provider: &str, permit: f64, failed: bool) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = releaseSealed)]
    pub fn release_sealed(this: &Stub, provider: &str, secret: &str, failed: bool) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = chargeTenant)]
    pub fn charge_tenant(
        this: &Stub,
        tenant: &str,
        limit: &str,
        generation: f64,
        bytes: f64,
        requests: f64,
        at_ms: f64,
    ) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getOverrides)]
    pub fn get_overrides(this: &Stub) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = putOverride)]
    pub fn put_override(this: &Stub, tenant: &str, limit: &str, at: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = deleteOverride)]
    pub fn delete_override(this: &Stub, tenant: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getRuleOverrides)]
    pub fn get_rule_overrides(this: &Stub) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = setRuleOverride)]
    pub fn set_rule_override(this: &Stub, rule: &str, enforce: &str, at: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = mergeStats)]
    pub fn merge_stats(this: &Stub, batch: &str, now_ms: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getStats)]
    pub fn get_stats(this: &Stub, since_ms: f64, until_ms: f64, name: &str) -> Result<JsValue, JsValue>;

    /// A Workers Rate Limiting binding (`[[ratelimits]]`).
    pub type RateLimit;
    #[wasm_bindgen(method, catch)]
    pub fn limit(this: &RateLimit, options: &JsValue) -> Result<JsValue, JsValue>;

    /// A Durable Object's `ctx.storage`.
    pub type Storage;
    #[wasm_bindgen(method, getter)]
    pub fn kv(this: &Storage) -> JsValue;

    /// `ctx.storage.kv`: the synchronous key-value API of SQLite-backed objects.
    pub type SyncKv;
    #[wasm_bindgen(method, catch, js_name = get)]
    pub fn get_value(this: &SyncKv, key: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn put(this: &SyncKv, key: &str, value: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn delete(this: &SyncKv, key: &str) -> Result<JsValue, JsValue>;

    /// A service binding such as `ASSETS`.
    #[cfg(feature = "dev-origin")]
    pub type Fetcher;
    #[cfg(feature = "dev-origin")]
    #[wasm_bindgen(method, catch)]
    pub fn fetch(this: &Fetcher, request: &Request) -> Result<Promise, JsValue>;

    /// The global `fetch`.
    #[wasm_bindgen(catch, js_name = fetch)]
    pub fn fetch(request: &Request) -> Result<Promise, JsValue>;
}

/// The answer of a call to a Durable Object (`what`, for the error), within `ms`: an error
/// when it throws, or does not answer in time.
pub async fn store_answer(call: Result<JsValue, JsValue>, what: &str, ms: u32) -> Result<JsValue, JsValue> {
    let call = Promise::resolve(&call?);
    let answer = wasm_bindgen_futures::JsFuture::from(within(&call, f64::from(ms), &JsValue::UNDEFINED)?).await?;
    if answer.is_undefined() {
        return Err(JsValue::from_str(&format!("{what} did not answer within {ms} ms")));
    }
    Ok(answer)
}

// Every import that can throw is `catch`: a JavaScript exception that unwound through the
// module's frames would skip every Rust destructor (and the guards that give slots back).
#[wasm_bindgen(module = "/js/streams.mjs")]
extern "C" {
    /// `response` with a body that calls `done` once, when it has been read to the end, has
    /// failed, or was cancelled by the client (at once when there is no body). When it
    /// throws, `done` was not called.
    #[wasm_bindgen(catch, js_name = whenBodyDone)]
    pub fn when_body_done(
        response: &web_sys::Response,
        done: &JsValue,
        signal: &JsValue,
    ) -> Result<web_sys::Response, JsValue>;

    /// `promise`'s value, or `late` if it has not settled after `ms` milliseconds.
    #[wasm_bindgen(catch)]
    pub fn within(promise: &Promise, ms: f64, late: &JsValue) -> Result<Promise, JsValue>;

    /// `body` passed through while it brings no more than `length` bytes, ended only once
    /// it brought exactly that many, else errored.
    #[wasm_bindgen(catch, js_name = exactLength)]
    pub fn exact_length(body: &web_sys::ReadableStream, length: f64) -> Result<ExactLength, JsValue>;

    /// What `exactLength` gives: the checked body, and what became of it.
    pub type ExactLength;
    #[wasm_bindgen(method, getter)]
    pub fn body(this: &ExactLength) -> web_sys::ReadableStream;
    /// `"longer"` or `"shorter"` once the body contradicted its length, else `""`.
    #[wasm_bindgen(method)]
    pub fn cut(this: &ExactLength) -> String;

    /// `body` passed through while `charge(chunk size)` admits each chunk (`true`, or a
    /// promise of it) before it goes on, then errored; with the signal to send it with, which
    /// aborts with `signal` (the client's) and when the body is cut.
    #[wasm_bindgen(catch)]
    pub fn charged(body: &web_sys::ReadableStream, charge: &JsValue, signal: &JsValue) -> Result<Charged, JsValue>;

    /// What `charged` gives: the charged body, and the signal to send it with.
    pub type Charged;
    #[wasm_bindgen(method, getter)]
    pub fn body(this: &Charged) -> web_sys::ReadableStream;
    #[wasm_bindgen(method, getter)]
    pub fn signal(this: &Charged) -> JsValue;

    /// `request` with `body` in place of its own, and `signal` (unless undefined) in place of
    /// its signal.
    #[wasm_bindgen(catch, js_name = withBody)]
    pub fn with_body(request: &Request, body: &JsValue, signal: &JsValue) -> Result<Request, JsValue>;

    /// The names of `headers`, each followed by `\n`.
    #[wasm_bindgen(catch, js_name = headerNames)]
    pub fn header_names(headers: &web_sys::Headers) -> Result<String, JsValue>;

    /// A copy of `headers` without the names in `left_out` (each followed by `\n`), then with
    /// the pairs in `set` (`name\nvalue\n`…) set.
    #[wasm_bindgen(catch, js_name = rebuiltHeaders)]
    pub fn rebuilt_headers(headers: &web_sys::Headers, left_out: &str, set: &str) -> Result<web_sys::Headers, JsValue>;

    /// `fetch(request)` given up after `ms`: a promise of the response, or of `null` (the
    /// call aborted); rejected when `signal` (the client's) aborts first.
    #[wasm_bindgen(catch, js_name = fetchWithin)]
    pub fn fetch_within(request: &Request, ms: f64, signal: &JsValue) -> Result<Promise, JsValue>;

    /// A reader of `stream`.
    #[wasm_bindgen(catch, js_name = readerOf)]
    pub fn reader_of(stream: &web_sys::ReadableStream) -> Result<JsValue, JsValue>;

    /// A promise of the next chunk of `reader` (a `Uint8Array`), or `undefined` at the end.
    #[wasm_bindgen(catch, js_name = nextChunk)]
    pub fn next_chunk(reader: &JsValue) -> Result<Promise, JsValue>;

    /// Cancel `reader`'s stream (nothing more is read).
    #[wasm_bindgen(js_name = cancelReader)]
    pub fn cancel_reader(reader: &JsValue);

    /// A stream of `chunks`, then of the rest of `reader`.
    #[wasm_bindgen(catch)]
    pub fn resumed(chunks: &js_sys::Array, reader: &JsValue) -> Result<web_sys::ReadableStream, JsValue>;

    /// `chunks` as one `Uint8Array`.
    #[wasm_bindgen(catch)]
    pub fn joined(chunks: &js_sys::Array) -> Result<js_sys::Uint8Array, JsValue>;

    /// The SHA-256 of `text` in lower-case hex (a promise of a string).
    #[wasm_bindgen(catch, js_name = sha256Hex)]
    pub fn sha256_hex(text: &str) -> Result<Promise, JsValue>;

    /// The module panicked: give back every fleet lease this isolate holds and tell the
    /// listeners (`onPanic`). Never throws.
    pub fn panicked();

    /// Call `listener` whenever the module panics (it outlives the module's instance).
    #[wasm_bindgen(js_name = onPanic)]
    pub fn on_panic(listener: &js_sys::Function);

    /// Renew a fleet egress permit until the returned function is called (with whether its
    /// call failed), which gives it back.
    #[wasm_bindgen(catch, js_name = keepPermit)]
    pub fn keep_permit(
        stub: &Stub,
        provider: &str,
        permit: f64,
        lease_ms: f64,
        ctx: &JsValue,
    ) -> Result<js_sys::Function, JsValue>;

    /// Renew a fleet lease until the returned function is called, which releases it.
    #[wasm_bindgen(catch, js_name = keepLease)]
    pub fn keep_lease(
        stub: &Stub,
        upstream: &str,
        lease: f64,
        lease_ms: f64,
        ctx: &JsValue,
    ) -> Result<js_sys::Function, JsValue>;
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    pub fn get_random_values(array: &js_sys::Uint32Array) -> Result<JsValue, JsValue>;
}
