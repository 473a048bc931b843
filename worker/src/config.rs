//! The configuration in force: the rules and where admitted requests go, read from `env`
//! (or given by the Worker's own code, see [`use_rules`]) and checked once per isolate,
//! shared by the Worker and its Durable Objects.

use crate::js::Env;
use sluicegate::rules::{RuleSet, WithoutBinding};
use sluicegate::tenants::Tenants;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use web_sys::Url;

/// The rules used when `SLUICEGATE_RULES` is not set; checked by `sluicegate check-rules`
/// in the build.
const DEFAULT_RULES: &str = include_str!("../rules.json");

/// A configuration the edge can serve with.
pub struct Setup {
    pub rules: RuleSet,
    pub origin: Origin,
    /// API keys from the secret `SLUICEGATE_TENANT_KEYS` (SHA-256 hex → tenant), beside
    /// those in the rules file.
    pub tenant_keys: BTreeMap<String, String>,
}

/// Where admitted requests go.
pub enum Origin {
    /// The Worker's own handler: the rules were given by its code ([`use_rules`]), and
    /// each request brings the handler that an admitted one goes to.
    Handler,
    /// `ORIGIN_URL`: its scheme, host and port (`https://o.example`), and its base path
    /// (`/base`, or empty).
    Url { origin: String, base_path: String },
    /// The built-in development origin (`ORIGIN_URL` unset in a `dev-origin` build).
    #[cfg(feature = "dev-origin")]
    Dev,
}

/// The checked configuration, or every problem in one message.
pub type Config = Rc<Result<Setup, String>>;

/// The Durable Object binding the Worker counts with, unless its code names another.
pub const DEFAULT_BINDING: &str = "RATE_LIMITER";

/// Rules given by the Worker's own code, in place of `SLUICEGATE_RULES` and `ORIGIN_URL`.
struct Library {
    /// The rules file's text.
    rules: JsValue,
    /// The Durable Object binding's name in `env`.
    binding: String,
}

/// The configuration this isolate holds.
struct Held {
    /// The `env` values last seen (compared with `Object.is`, so unchanged bindings cost no
    /// copy), whether the rules came from the Worker's code, and what they made.
    config: RefCell<Option<([JsValue; 3], bool, Config)>>,
    /// Rules given by the Worker's own code.
    library: RefCell<Option<Library>>,
}

thread_local! {
    static HELD: Held = const { Held { config: RefCell::new(None), library: RefCell::new(None) } };
}

/// Enforce `rules` (the rules file as an object or as JSON text) from now on, in place of
/// `SLUICEGATE_RULES`, counting with the Durable Object binding `binding`; admitted
/// requests go to the handler each request brings, so `ORIGIN_URL` is neither needed nor
/// read. `env` (the Worker's, at module scope) is checked with them. Giving the same rules
/// again changes nothing.
///
/// # Errors
/// Every problem with the rules or `env`, in one message; other rules or another binding
/// than those already in force (the Durable Objects count by rule id, for one rule set).
pub fn use_rules(rules: &JsValue, binding: &str, env: &Env) -> Result<(), String> {
    let text = if let Some(text) = rules.as_string().filter(|t| !t.trim().is_empty()) {
        text
    } else if rules.is_object() {
        js_sys::JSON::stringify(rules)
            .ok()
            .and_then(|s| s.as_string())
            .ok_or("the rules cannot be written as JSON (a cycle, or a BigInt?)")?
    } else {
        return Err("no rules given: pass { rules }, the rules file as an object or a JSON string".into());
    };
    if binding.is_empty() {
        return Err("the Durable Object binding's name is empty".into());
    }
    let text = JsValue::from_str(&text);
    let checked = setup(&text, None, &env.tenant_keys())?;
    check_binding(&checked, env, binding)?;
    let same = HELD.with(|h| {
        h.library.borrow().as_ref().map(|lib| js_sys::Object::is(&lib.rules, &text) && lib.binding == binding)
    });
    match same {
        Some(true) => return Ok(()),
        Some(false) => {
            return Err("other rules (or another binding) are already in force in this Worker: \
                        it enforces one rules file, with one Durable Object binding"
                .into())
        }
        None => {}
    }
    HELD.with(|h| *h.library.borrow_mut() = Some(Library { rules: text, binding: binding.to_owned() }));
    Ok(())
}

/// Whether `env` can count what `setup`'s rules count in the Durable Object binding
/// `binding`: without the binding, a Worker whose rules need it refuses to start (a deploy
/// mistake, named with the lines to add), and one whose only users of it fail open by choice
/// starts with one log line saying so.
///
/// # Errors
/// What is missing and how to add it.
pub fn check_binding(setup: &Setup, env: &Env, binding: &str) -> Result<(), String> {
    // Each Workers Rate Limiting binding a rule counts on: an object with a `limit` method.
    let is_rate_limit = |name: &str| {
        let found = js_sys::Reflect::get(env, &JsValue::from_str(name)).unwrap_or_default();
        found.is_object() && js_sys::Reflect::get(&found, &"limit".into()).is_ok_and(|f| f.is_function())
    };
    if let Some(why) = setup.rules.missing_rate_limit_binding(is_rate_limit) {
        return Err(why);
    }
    // The Workers Analytics Engine binding `analytics.dataset` names: an object with a
    // `writeDataPoint` method.
    let is_dataset = |name: &str| {
        let found = js_sys::Reflect::get(env, &JsValue::from_str(name)).unwrap_or_default();
        found.is_object() && js_sys::Reflect::get(&found, &"writeDataPoint".into()).is_ok_and(|f| f.is_function())
    };
    if let Some(why) = setup.rules.analytics().missing_dataset(is_dataset) {
        return Err(why);
    }
    if js_sys::Reflect::get(env, &JsValue::from_str(binding)).is_ok_and(|b| b.is_object()) {
        return Ok(());
    }
    match setup.rules.without_binding(binding) {
        WithoutBinding::Unused => Ok(()),
        WithoutBinding::Warn(why) => {
            crate::log::log_error(&format!("sluicegate: {why}"));
            Ok(())
        }
        WithoutBinding::Refuse(why) => Err(why),
    }
}

/// The name in `env` of the Durable Object binding that counts.
pub fn binding() -> String {
    HELD.with(|h| h.library.borrow().as_ref().map_or_else(|| DEFAULT_BINDING.to_owned(), |lib| lib.binding.clone()))
}

/// The configuration for `env`, checked the first time it is seen (again only when
/// `SLUICEGATE_RULES` or `ORIGIN_URL` changes). Problems are logged once, naming each rule
/// and field.
pub fn config(env: &Env) -> Config {
    let library = HELD.with(|h| h.library.borrow().as_ref().map(|lib| lib.rules.clone()));
    let is_library = library.is_some();
    let values = match library {
        Some(rules) => [rules, JsValue::UNDEFINED, env.tenant_keys()],
        None => [env.rules(), env.origin_url(), env.tenant_keys()],
    };
    HELD.with(|held| {
        let cell = &held.config;
        if let Some((seen, was_library, config)) = cell.borrow().as_ref() {
            if *was_library == is_library && seen.iter().zip(&values).all(|(a, b)| js_sys::Object::is(a, b)) {
                return config.clone();
            }
        }
        let origin = (!is_library).then_some(&values[1]);
        let config = Rc::new(setup(&values[0], origin, &values[2]));
        match config.as_ref() {
            Ok(setup) => crate::log::log(&format!(
                "sluicegate: configuration checked: {} rule{}, origin {}",
                setup.rules.rules().len(),
                if setup.rules.rules().len() == 1 { "" } else { "s" },
                match &setup.origin {
                    Origin::Handler => "the Worker's own handler".to_owned(),
                    Origin::Url { origin, base_path } => format!("{origin}{base_path}"),
                    #[cfg(feature = "dev-origin")]
                    Origin::Dev => "built in (development)".to_owned(),
                }
            )),
            Err(problems) => crate::log::log_error(&format!("sluicegate: invalid configuration: {problems}")),
        }
        *cell.borrow_mut() = Some((values, is_library, config.clone()));
        config
    })
}

/// The setup of `rules`, `origin` (`ORIGIN_URL`; `None`: the Worker's own handler) and
/// `keys` (`SLUICEGATE_TENANT_KEYS`), or every problem with them.
fn setup(rules: &JsValue, origin: Option<&JsValue>, keys: &JsValue) -> Result<Setup, String> {
    let rules = RuleSet::from_json(&rules_text(rules))
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
    let origin = origin.map_or(Ok(Origin::Handler), origin_of);
    let tenant_keys = tenant_keys(keys);
    let conflicts = match (&rules, &tenant_keys) {
        (Ok(rules), Ok(keys)) => conflicting_keys(rules, keys),
        _ => None,
    };
    let problems: Vec<String> =
        [rules.as_ref().err().cloned(), origin.as_ref().err().cloned(), tenant_keys.as_ref().err().cloned(), conflicts]
            .into_iter()
            .flatten()
            .collect();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(Setup { rules: rules?, origin: origin?, tenant_keys: tenant_keys? })
}

/// `SLUICEGATE_TENANT_KEYS`: a JSON object of API key SHA-256 (hex) → tenant, or unset;
/// read as the rules file's `tenants.keys` is ([`Tenants::keys_from_json`]).
fn tenant_keys(value: &JsValue) -> Result<BTreeMap<String, String>, String> {
    let Some(text) = value.as_string().filter(|t| !t.trim().is_empty()) else { return Ok(BTreeMap::new()) };
    Tenants::keys_from_json(&text).map_err(|problems| {
        problems.iter().map(|p| format!("SLUICEGATE_TENANT_KEYS: {p}")).collect::<Vec<_>>().join("; ")
    })
}

/// The API key hashes that `SLUICEGATE_TENANT_KEYS` gives to another tenant than the rules
/// file's `tenants.keys` does, naming both: a key has one tenant, and which of the two would
/// win must not depend on a lookup order.
fn conflicting_keys(rules: &RuleSet, keys: &BTreeMap<String, String>) -> Option<String> {
    let problems: Vec<String> = rules
        .tenants()?
        .conflicting_keys(keys)
        .map(|(hash, in_file, in_secret)| {
            format!(
                "API key hash \"{hash}\" is tenant \"{in_file}\" in the rules file's tenants.keys but \
                 \"{in_secret}\" in SLUICEGATE_TENANT_KEYS; a key has one tenant"
            )
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The rules text in force: `SLUICEGATE_RULES` (a JSON string, or an object that wrangler
/// passed already parsed), else the bundled default.
fn rules_text(value: &JsValue) -> String {
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

/// `ORIGIN_URL` checked: an absolute `http:` or `https:` URL without credentials, query or
/// fragment. Unset means the development origin in a `dev-origin` build, and is refused in
/// the deploy build.
fn origin_of(value: &JsValue) -> Result<Origin, String> {
    let text = value.as_string().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let Some(text) = text else {
        #[cfg(feature = "dev-origin")]
        return Ok(Origin::Dev);
        #[cfg(not(feature = "dev-origin"))]
        return Err("ORIGIN_URL is not set: set it to the origin that admitted requests go to \
                    (wrangler.toml [vars] or `wrangler secret put ORIGIN_URL`)"
            .into());
    };
    let bad = |why: &str| format!("ORIGIN_URL \"{text}\" {why}");
    let url = Url::new(&text).map_err(|_| bad("is not an absolute URL (e.g. https://origin.example.com)"))?;
    if url.protocol() != "https:" && url.protocol() != "http:" {
        return Err(bad("must be an http: or https: URL"));
    }
    if !url.username().is_empty() || !url.password().is_empty() {
        return Err(bad("must not carry credentials; send them as a header from the origin side"));
    }
    if !url.search().is_empty() || !url.hash().is_empty() || text.ends_with(['?', '#']) {
        return Err(bad("must not have a query or a fragment (only a base path)"));
    }
    Ok(Origin::Url { origin: url.origin(), base_path: url.pathname().trim_end_matches('/').to_owned() })
}

/// The Durable Object namespace that counts: `env.RATE_LIMITER`, or the binding the
/// Worker's code named.
///
/// # Errors
/// When `env` has no such binding.
pub fn rate_limiter(env: &Env) -> Result<crate::js::Namespace, JsValue> {
    let name = binding();
    let namespace = js_sys::Reflect::get(env, &JsValue::from_str(&name)).unwrap_or(JsValue::UNDEFINED);
    if !namespace.is_object() {
        return Err(JsValue::from_str(&format!("the {name} Durable Object binding is missing")));
    }
    Ok(namespace.unchecked_into())
}

/// How long a rule's store (its key's Durable Object, or its binding) may take to answer before it counts as
/// failed (and the rule fails open or closed as it says).
pub const STORE_TIMEOUT_MS: u32 = 1_000;
