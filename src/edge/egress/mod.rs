//! The app's own calls to its providers (`"egress"` in the rules file), held to each
//! provider's budget at the edge: mirrors with their own slots and failover, spacing
//! between starts, a rolling minute of weighted calls, and a cache in front.
//!
//! ```json
//! "egress": { "prefix": "/egress/", "providers": [ {
//!     "id": "overpass",
//!     "mirrors": ["https://overpass-api.de/api/", "https://overpass.kumi.systems/api/"],
//!     "max_in_flight": 2
//! } ] }
//! ```
//!
//! The origin calls the edge in one of two ways: as a proxy
//! (`/egress/<provider>/<path>?<query>`: the edge calls a mirror under the budget) or for a
//! permit (`POST /egress/<provider>/permit`: the edge says which mirror and when, and the app
//! calls it from its own address, then `DELETE`s the permit). [`gate`] decides who starts,
//! [`cache`] what a call may be answered from; this module names the routes and builds the
//! only URLs a call may go to.

pub mod cache;
pub mod call;
pub mod gate;
pub mod permit;
pub mod weigh;

use crate::core::time::Span;
use crate::edge::scope::BudgetScope;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The `egress` section of a rules file.
#[derive(Clone, Debug, PartialEq)]
pub struct Egress {
    /// Where the routes live (`/egress/`: starts and ends with `/`, compared in any case).
    pub prefix: String,
    /// The providers, by id.
    pub providers: Vec<Provider>,
}

/// One provider's budget and where its calls go.
#[derive(Clone, Debug, PartialEq)]
pub struct Provider {
    /// Its identifier, the path segment after the prefix.
    pub id: String,
    /// Free text.
    pub description: Option<String>,
    /// The base URLs a call may go to, tried in this order.
    pub mirrors: Vec<Mirror>,
    /// Calls in flight at once at each mirror.
    pub max_in_flight: u32,
    /// The least time between two call starts.
    pub min_interval: Span,
    /// How a call's weight is read; `None`: every call weighs 1.
    pub weight: Option<Weigh>,
    /// Whole weighted calls in any rolling minute, as the rules file's `weight_per_minute`
    /// gives them (the gate counts thousandths: [`weigh::budget_milli`]); `None`: not counted.
    pub weight_per_minute: Option<u32>,
    /// How long a call may wait to start before it is answered `503`.
    pub max_wait: Span,
    /// The `User-Agent` every proxied call carries.
    pub user_agent: Option<String>,
    /// The cache in front of the provider, for `GET` calls.
    pub cache: Option<CacheRule>,
    /// How long a mirror that failed is tried only after the others.
    pub retry_after_failure: Span,
    /// Where the budget is kept.
    pub scope: BudgetScope,
    /// How long a permit is held unless given back (or, for a fleet budget's proxied call,
    /// renewed).
    pub lease: Span,
    /// How long one attempt at a mirror may wait for its answer before the mirror counts as
    /// failed and the next is tried (see [`call`]).
    pub timeout: Span,
    /// Whether the capabilities answer lists it.
    pub public: bool,
}

/// How a provider's calls are weighed: Open-Meteo's accounting of the query string
/// ([`crate::core::openmeteo::read_query`]), by one of its two formulas ([`weigh::mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weigh {
    /// `"open-meteo"`: the conservative formula, `locations × max(1, d/14) × max(1, v/10)`,
    /// never below what Open-Meteo's server charges, so a budget kept by it is never
    /// overspent.
    OpenMeteo,
    /// `"open-meteo-server"`: the server's own formula, summed over locations,
    /// `max(1, v/10 × max(1, d/14))`, for a budget that should run as close to the server's
    /// count as it can (half the conservative weight for 5 variables over 28 days).
    OpenMeteoServer,
}

impl Weigh {
    /// Every way, in the order the rules file's error lists them.
    pub const ALL: [Weigh; 2] = [Weigh::OpenMeteo, Weigh::OpenMeteoServer];

    /// The name in the rules file.
    pub const fn name(self) -> &'static str {
        match self {
            Weigh::OpenMeteo => "open-meteo",
            Weigh::OpenMeteoServer => "open-meteo-server",
        }
    }
}

/// A provider's cache, as the rules file gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheRule {
    /// How long an answer is fresh.
    pub ttl: Span,
    /// Whether an expired answer is served when the call to refresh it fails.
    pub stale_if_error: bool,
    /// Whether an expired answer is served at once and refreshed behind the request
    /// (a snapshot), rather than refreshed in front of it.
    pub refresh_behind: bool,
    /// How long after a failed call the next is made (in between, the last good answer or
    /// a `503`).
    pub retry_after_failure: Span,
    /// The most answers kept.
    pub max_entries: u32,
    /// The largest answer kept, in bytes (a larger one is passed on as it streams, not
    /// kept): counted as it arrives, after decompression.
    pub max_entry_bytes: u64,
    /// The most bytes this provider's answers and keys may hold in one isolate; the
    /// providers' caches together hold at most [`ISOLATE_CACHE_BYTES`].
    pub max_bytes: u64,
    /// Whether `POST` answers are kept too, keyed by their body (Overpass's queries), a body
    /// of at most `max_entry_bytes`.
    pub post: bool,
}

/// The most bytes every egress cache of one isolate holds together (a Worker has 128 MB):
/// the providers' `max_bytes` add up to at most this, and a provider that names none gets
/// an equal share of what the others left.
pub const ISOLATE_CACHE_BYTES: u64 = 32 * 1024 * 1024;
/// The largest answer kept unless `max_entry_bytes` says otherwise (never more than the
/// provider's `max_bytes`).
pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 8 * 1024 * 1024;

/// One base URL of a provider: scheme and authority, and a path ending in `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// `https://host[:port]`, in lower case.
    pub origin: String,
    /// `/api/`: starts and ends with `/`.
    pub base_path: String,
}

impl Mirror {
    /// Read a mirror's base URL: `http` or `https`, a host name or IP address, an optional
    /// port and path; no user, query or fragment.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(url: &str) -> Result<Mirror, String> {
        let lower = url.to_ascii_lowercase();
        let scheme_len = if lower.starts_with("https://") {
            8
        } else if lower.starts_with("http://") {
            7
        } else {
            return Err(format!("must start with https:// or http://, got {}", crate::edge::json::brief(url)));
        };
        let rest = &url[scheme_len..];
        if rest.contains(['?', '#']) {
            return Err("must have no query or fragment".into());
        }
        let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
        if authority.contains('@') {
            return Err("must have no user name or password".into());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (host, Some(port)),
            _ => (authority, None),
        };
        let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            !v6.is_empty() && v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        } else {
            !host.is_empty()
                && host.len() <= 253
                && host.split('.').all(|l| {
                    !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        };
        if !host_ok {
            return Err(format!("has no valid host name, got {}", crate::edge::json::brief(url)));
        }
        if let Some(port) = port {
            if port.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(format!("has a port that is not 1–65535: {}", crate::edge::json::brief(port)));
            }
        }
        if path.contains("//") || path.split('/').any(|s| s == "." || s == "..") || path.contains(['\\', '%']) {
            return Err("has a path with '//', '.', '..', '\\' or an escape; write it plainly".into());
        }
        if !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("has a path with spaces or characters outside ASCII".into());
        }
        let mut base_path = String::from(path);
        if !base_path.ends_with('/') {
            base_path.push('/');
        }
        Ok(Mirror { origin: lower[..scheme_len + authority.len()].into(), base_path })
    }

    /// The base URL as written in the rules, normalised (`https://host/api/`).
    pub fn url(&self) -> String {
        format!("{}{}", self.origin, self.base_path)
    }
}

/// An egress route, from the normalised path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `<prefix><provider>/<rest>`: a call to proxy (the rest may be empty).
    Proxy {
        /// The provider's id as written in the path.
        provider: &'a str,
        /// The path below the mirror's base path.
        rest: &'a str,
    },
    /// `<prefix><provider>/permit`.
    Permit {
        /// The provider's id as written in the path.
        provider: &'a str,
    },
    /// `<prefix><provider>/permit/<id>`.
    GiveBack {
        /// The provider's id as written in the path.
        provider: &'a str,
        /// The permit's id.
        permit: &'a str,
    },
    /// Under the prefix, but naming no provider.
    Unknown,
}

impl Egress {
    /// The route of the normalised `path` (see [`crate::edge::rules::normalise_path`]) when it is
    /// under the prefix (compared in any case, so no spelling of it reaches the origin).
    /// `POST …/permit` and `DELETE …/permit/<id>` are the permit routes; `permit` is
    /// reserved for them, every other path below a provider is proxied.
    pub fn route<'a>(&self, method: &str, path: &'a str) -> Option<Route<'a>> {
        // `/egress` alone is under it too.
        if path.eq_ignore_ascii_case(self.prefix.trim_end_matches('/')) {
            return Some(Route::Unknown);
        }
        if !path.get(..self.prefix.len())?.eq_ignore_ascii_case(&self.prefix) {
            return None;
        }
        let below = &path[self.prefix.len()..];
        let (provider, rest) = below.split_once('/').unwrap_or((below, ""));
        if provider.is_empty() {
            return Some(Route::Unknown);
        }
        let permit = rest.get(..6).filter(|p| p.eq_ignore_ascii_case("permit"));
        Some(match (permit, rest.get(6..)) {
            (Some(_), Some("")) if method.eq_ignore_ascii_case("POST") => Route::Permit { provider },
            (Some(_), Some(id)) if method.eq_ignore_ascii_case("DELETE") && id.len() > 1 && id.starts_with('/') => {
                Route::GiveBack { provider, permit: &id[1..] }
            }
            _ => Route::Proxy { provider, rest },
        })
    }

    /// The provider named `id` (in any case).
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.id.eq_ignore_ascii_case(id))
    }
}

/// What `POST …/permit` asks for: a weight in thousandths, the query to weigh, or both (a
/// weight never below the query's: [`weigh::permit_weight`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermitAsk {
    /// `"weight"` (weighted calls), in thousandths, rounded up.
    pub weight: Option<u64>,
    /// `"query"`: the call's query string (without its `?`).
    pub query: Option<String>,
}

impl PermitAsk {
    /// Read a permit request's body: empty, or `{"weight"?: n, "query"?: "…"}`.
    ///
    /// # Errors
    /// What is wrong with it, naming the field.
    pub fn from_json(body: &str) -> Result<PermitAsk, String> {
        if body.trim().is_empty() {
            return Ok(PermitAsk { weight: None, query: None });
        }
        let obj = object(body, &["weight", "query"], "a permit request has \"weight\" and \"query\"")?;
        let weight = match obj.get("weight") {
            None => None,
            Some(w) => match w.as_f64().filter(|w| w.is_finite() && *w > 0.0 && *w <= 1e9) {
                Some(w) => {
                    // Rounded up, without `ceil` (not in `core`).
                    let milli = w * 1000.0;
                    let whole = milli as u64;
                    Some(if (whole as f64) < milli { whole + 1 } else { whole })
                }
                None => return Err(format!("\"weight\" must be a number above 0 and at most 1e9, got {w}.")),
            },
        };
        let query = match obj.get("query") {
            None => None,
            Some(serde_json::Value::String(q)) => Some(String::from(q.trim_start_matches('?'))),
            Some(q) => return Err(format!("\"query\" must be the call's query string, got {q}.")),
        };
        Ok(PermitAsk { weight, query })
    }
}

/// Read a permit's give-back body: empty, or `{"failed": true | false}`; whether the call
/// failed.
///
/// # Errors
/// What is wrong with it.
pub fn failed_from_json(body: &str) -> Result<bool, String> {
    if body.trim().is_empty() {
        return Ok(false);
    }
    let obj = object(body, &["failed"], "a give-back has \"failed\"")?;
    match obj.get("failed") {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("\"failed\" must be true or false, got {v}.")),
    }
}

/// A JSON object of only `fields` (a repeated key is refused too).
fn object(body: &str, fields: &[&str], has: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let value = crate::edge::json::strict_json(body).map_err(|e| format!("The body must be JSON: {}.", e.message))?;
    let serde_json::Value::Object(obj) = value else { return Err("The body must be a JSON object.".into()) };
    if let Some(key) = obj.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(format!("Unknown field \"{}\"; {has}.", crate::edge::json::brief(key)));
    }
    Ok(obj)
}

/// Why a proxied path may not be sent to a mirror.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetError {
    /// It starts with `/`, or holds `//`, a `.` or `..` segment, a `\` (raw or escaped as
    /// `%5C`, which a mirror may read as a `/`), an escaped control character, or a character
    /// that may not stand raw in a path.
    Unsafe,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the path below the provider must be plain path segments (no '//', '.', '..', '\\' or '%5C')")
    }
}

/// The URL a proxied call goes to: the mirror's base URL, then `rest` (a normalised path
/// below the provider), then `?query` if there is one. Only the mirror's scheme and host
/// are ever contacted: `rest` is checked to be plain segments, so nothing in it can climb
/// out of the base path or name another host.
///
/// # Errors
/// [`TargetError::Unsafe`] for a `rest` that is not plain path segments.
pub fn target(mirror: &Mirror, rest: &str, query: &str) -> Result<String, TargetError> {
    let plain = !rest.starts_with('/')
        && !rest.contains("//")
        && !rest.split('/').any(|s| s == "." || s == "..")
        && rest.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b'\\' | b'?' | b'#'))
        && !has_unsafe_escape(rest);
    if !plain || query.bytes().any(|b| !b.is_ascii_graphic() || b == b'#') {
        return Err(TargetError::Unsafe);
    }
    let mut url = mirror.url();
    url.push_str(rest);
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    Ok(url)
}

/// Whether `path` holds an escape a mirror could read as a separator or a control
/// character: `%5C` (`\\`, a `/` to some servers, so `..%5C` climbs) or `%00`–`%1F`, `%7F`.
fn has_unsafe_escape(path: &str) -> bool {
    let hex = |b: u8| char::from(b).to_digit(16);
    path.as_bytes().windows(3).any(|w| match (w[0], hex(w[1]), hex(w[2])) {
        (b'%', Some(high), Some(low)) => {
            let byte = high * 16 + low;
            byte == 0x5c || byte < 0x20 || byte == 0x7f
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress() -> Egress {
        Egress { prefix: "/egress/".into(), providers: Vec::new() }
    }

    #[test]
    fn permit_bodies_are_read_strictly() {
        assert_eq!(PermitAsk::from_json(""), Ok(PermitAsk { weight: None, query: None }));
        assert_eq!(PermitAsk::from_json(r#"{"weight": 1.5}"#).unwrap().weight, Some(1_500));
        assert_eq!(PermitAsk::from_json(r#"{"weight": 1e9}"#).unwrap().weight, Some(1_000_000_000_000));
        assert_eq!(PermitAsk::from_json(r#"{"query": "?latitude=1"}"#).unwrap().query.as_deref(), Some("latitude=1"));
        for (bad, named) in [
            ("{", "JSON"),
            ("[1]", "object"),
            (r#"{"weight": 0}"#, "weight"),
            (r#"{"weight": "2"}"#, "weight"),
            (r#"{"query": 3}"#, "query"),
            (r#"{"colour": 1}"#, "colour"),
            (r#"{"weight": 1, "weight": 2}"#, "JSON"),
            (r#"{"weight": 1000000001}"#, "at most 1e9"),
        ] {
            let error = PermitAsk::from_json(bad).unwrap_err();
            assert!(error.contains(named), "{bad}: {error}");
        }
        assert_eq!(failed_from_json(""), Ok(false));
        assert_eq!(failed_from_json(r#"{"failed": true}"#), Ok(true));
        assert!(failed_from_json(r#"{"failed": "yes"}"#).is_err());
        assert!(failed_from_json(r#"{"ok": 1}"#).is_err());
    }

    #[test]
    fn mirrors_are_read_strictly_and_normalised() {
        let m = Mirror::parse("HTTPS://Overpass-API.de/api").unwrap();
        assert_eq!(m.url(), "https://overpass-api.de/api/");
        assert_eq!(Mirror::parse("http://127.0.0.1:8080").unwrap().url(), "http://127.0.0.1:8080/");
        assert_eq!(Mirror::parse("http://[::1]:9/x/").unwrap().url(), "http://[::1]:9/x/");
        for bad in [
            "ftp://a.example/",
            "https://user@a.example/",
            "https://a.example/?q=1",
            "https://a.example/#f",
            "https://a..example/",
            "https://a.example:0/",
            "https://a.example:99999/",
            "https://a.example/x/../y",
            "https://a.example/x//y",
            "https://a.example/%2e%2e/",
            "https:///path",
            "https://a.example\\@b.example/",
        ] {
            assert!(Mirror::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn routes_are_read_from_the_normalised_path_in_any_case() {
        let e = egress();
        assert_eq!(e.route("GET", "/api/x"), None);
        assert_eq!(e.route("GET", "/egress"), Some(Route::Unknown));
        assert_eq!(e.route("GET", "/EGRESS/"), Some(Route::Unknown));
        assert_eq!(
            e.route("GET", "/Egress/overpass/interpreter"),
            Some(Route::Proxy { provider: "overpass", rest: "interpreter" })
        );
        assert_eq!(e.route("GET", "/egress/nifc"), Some(Route::Proxy { provider: "nifc", rest: "" }));
        assert_eq!(e.route("POST", "/egress/nominatim/permit"), Some(Route::Permit { provider: "nominatim" }));
        assert_eq!(
            e.route("delete", "/egress/nominatim/Permit/12"),
            Some(Route::GiveBack { provider: "nominatim", permit: "12" })
        );
        assert_eq!(
            e.route("GET", "/egress/nominatim/permit"),
            Some(Route::Proxy { provider: "nominatim", rest: "permit" }),
            "only POST takes a permit"
        );
    }

    #[test]
    fn no_spelling_of_the_path_leaves_the_mirror() {
        let m = Mirror::parse("https://a.example/api/").unwrap();
        assert_eq!(target(&m, "interpreter", "data=x").unwrap(), "https://a.example/api/interpreter?data=x");
        assert_eq!(target(&m, "", "").unwrap(), "https://a.example/api/");
        assert_eq!(target(&m, "x@evil.example/y", "").unwrap(), "https://a.example/api/x@evil.example/y");
        for bad in [
            "/evil.example/",
            "a//b",
            "../x",
            "a/./b",
            "a\\b",
            "a?b",
            "a b",
            "x/..",
            "..%5C..%5Cetc",
            "a/..%5c",
            "a%5Cb",
            "a%00b",
            "a%0Ab",
            "a%7f",
        ] {
            assert_eq!(target(&m, bad, ""), Err(TargetError::Unsafe), "{bad}");
        }
        assert!(target(&m, "x", "a=1#frag").is_err());
        assert_eq!(target(&m, "a%255Cb", "").unwrap(), "https://a.example/api/a%255Cb", "a literal %5C once decoded");
        assert_eq!(target(&m, "caf%C3%A9", "").unwrap(), "https://a.example/api/caf%C3%A9");
    }
}
