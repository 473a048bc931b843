//! The edge's rules in the replay: each request through the edge's own pipeline
//! ([`crate::edge::pipeline::RulesCheck`]), its counters in memory, so what the simulator
//! says of `edge_rules` is what the edge decides.
//!
//! A request carries what the edge reads: the client's address (`ip.src`), its data centre
//! (`cf.colo.id`), its method, its path and the request headers a rule counts by. A trace
//! names them in columns (`ip.src`, `cf.colo.id`, `method`, `header:<name>`, `endpoint`);
//! the simulator keeps them in the names of the request's client and endpoint:
//!
//! - the client: who it is (its `ip.src`, or the `client` column), then ` @ ` and its colo,
//!   then ` <name>=<value>` for each header it sent (values with `%` and spaces
//!   percent-encoded): `198.51.100.7 @ AMS x-api-key=k1`;
//! - the endpoint: its path, after its method and a space when that is not `GET`:
//!   `POST /api/orders`.
//!
//! A client named without ` @ ` (every client of a configuration's `clients`) is from the
//! colo `SIM`, and is what each header a rule counts by (or the tenants section names its
//! tenant by) holds, and sends no body; one whose name is not an address is counted as an
//! address of its own (in 240.0.0.0/4, by its number).
//!
//! A trace's `header:content-length` column is the body's declared length, which the
//! tenant stage charges and checks against the tenant's cap (`sim::tenants`); a length
//! the edge cannot trust (not a number, or beside `transfer-encoding`) is answered `400`
//! before any rule, so no rule counts that request.

use crate::edge::admission::declared_length;
use crate::edge::identity::{client_identity, Identity, Sources};
use crate::edge::rules::{normalise_path, RequestFacts, RuleSet};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

/// The colo of a request whose trace names none.
pub const DEFAULT_COLO: &str = "SIM";
/// The host of every simulated request when no rule names one.
pub const DEFAULT_HOST: &str = "sim.invalid";

/// What the edge reads of one simulated request (its client's and endpoint's).
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeFacts {
    method: String,
    path: String,
    host: String,
    colo: String,
    identity: Option<Identity>,
    /// The headers sent; `None`: the client is a configuration's, and every header a rule
    /// reads holds its name.
    headers: Option<Vec<(String, String)>>,
    who: String,
}

impl EdgeFacts {
    /// The facts of a request of `client` (number `n`) to `endpoint`, both named as the module
    /// says, to `host`; `None` for a path the edge cannot normalise or a body whose framing it
    /// cannot trust (it answers 400 before any rule: no rule counts it).
    pub fn of(client: &str, n: u32, endpoint: &str, host: &str) -> Option<EdgeFacts> {
        let (method, path) = match endpoint.split_once(' ') {
            Some((method, path)) if !endpoint.starts_with('/') => (method.to_owned(), path),
            _ => ("GET".to_owned(), endpoint),
        };
        let path = normalise_path(path).ok()?.into_owned();
        let (who, colo, headers) = match client.split_once(" @ ") {
            None => (client.to_owned(), DEFAULT_COLO.to_owned(), None),
            Some((who, rest)) => {
                let mut parts = rest.split(' ');
                let colo = unescape(parts.next().unwrap_or(DEFAULT_COLO));
                let headers = parts
                    .filter_map(|part| part.split_once('='))
                    .map(|(name, value)| (name.to_ascii_lowercase(), unescape(value)))
                    .collect();
                (who.to_owned(), colo, Some(headers))
            }
        };
        let identity = client_identity(&Sources { cf_connecting_ip: Some(&who), x_forwarded_for: None, peer: None })
            .or_else(|| {
                let [a, b, c, d] = (0xf000_0000u32 | (n & 0x0fff_ffff)).to_be_bytes();
                let own = format!("{a}.{b}.{c}.{d}");
                client_identity(&Sources { cf_connecting_ip: Some(&own), x_forwarded_for: None, peer: None })
            });
        let facts = EdgeFacts { method, path, host: host.to_owned(), colo, identity, headers, who };
        facts.framing().ok()?;
        Some(facts)
    }

    /// The body's declared length and whether it has one of no declared length
    /// (`transfer-encoding`), as the edge reads them; an error for framing it refuses.
    fn framing(&self) -> Result<(Option<u64>, bool), crate::edge::admission::FramingError> {
        let Some(headers) = &self.headers else { return Ok((None, false)) };
        let get = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let encoded = get("transfer-encoding");
        Ok((declared_length(get("content-length"), encoded)?, encoded.is_some()))
    }

    /// The body's declared length (`Content-Length`), if any.
    pub fn declared(&self) -> Option<u64> {
        self.framing().ok().and_then(|(declared, _)| declared)
    }

    /// Whether the request has a body: one of a declared length above 0, or of none.
    pub fn has_body(&self) -> bool {
        self.framing().is_ok_and(|(declared, encoded)| declared.is_some_and(|n| n > 0) || encoded)
    }

    /// The facts as the rules read them.
    pub fn facts(&self) -> RequestFacts<'_> {
        RequestFacts {
            method: &self.method,
            host: &self.host,
            path: &self.path,
            colo: Some(&self.colo),
            identity: self.identity,
        }
    }

    /// Request header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<String> {
        match &self.headers {
            None => Some(self.who.clone()),
            Some(headers) => headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        }
    }

    /// The colo.
    pub fn colo(&self) -> &str {
        &self.colo
    }
}

/// The host simulated requests go to: the first a rule names (else the tenants section), so
/// host conditions hold.
pub fn host_of(set: &RuleSet) -> String {
    let tenants = set.tenants().into_iter().map(|t| &t.matcher);
    let mut matchers = set.rules().iter().map(|r| &r.matcher).chain(tenants);
    matchers.find_map(|m| m.hosts.first().cloned()).unwrap_or_else(|| DEFAULT_HOST.to_owned())
}

/// A client's name from a trace row's columns ([module docs](self)).
pub fn client_name(who: &str, colo: Option<&str>, headers: &[(&str, &str)]) -> String {
    if colo.is_none() && headers.is_empty() {
        return who.to_owned();
    }
    let mut name = String::with_capacity(who.len() + 16);
    name.push_str(who);
    name.push_str(" @ ");
    escape_into(&mut name, colo.filter(|c| !c.is_empty()).unwrap_or(DEFAULT_COLO));
    for (header, value) in headers.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = write!(name, " {}=", header.to_ascii_lowercase());
        escape_into(&mut name, value);
    }
    name
}

/// An endpoint's name from a trace row's method and path ([module docs](self)).
pub fn endpoint_name(method: Option<&str>, path: &str) -> String {
    match method.map(str::trim).filter(|m| !m.is_empty() && !m.eq_ignore_ascii_case("GET")) {
        Some(method) => format!("{} {path}", method.to_ascii_uppercase()),
        None => path.to_owned(),
    }
}

fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            c => out.push(c),
        }
    }
}

fn unescape(value: &str) -> String {
    value.replace("%20", " ").replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_row_s_facts_come_back_from_its_names() {
        let client = client_name("198.51.100.7", Some("AMS"), &[("X-Api-Key", "k 1%")]);
        assert_eq!(client, "198.51.100.7 @ AMS x-api-key=k%201%25");
        let endpoint = endpoint_name(Some("post"), "/api/orders");
        assert_eq!(endpoint, "POST /api/orders");
        let facts = EdgeFacts::of(&client, 0, &endpoint, "example.com").unwrap();
        let f = facts.facts();
        assert_eq!((f.method, f.path, f.colo), ("POST", "/api/orders", Some("AMS")));
        assert_eq!(f.identity.unwrap().ip.to_string(), "198.51.100.7");
        assert_eq!(facts.header("x-api-key").as_deref(), Some("k 1%"));
        assert_eq!(facts.header("authorization"), None);
        assert_eq!(endpoint_name(Some("GET"), "/x"), "/x");
        assert_eq!(client_name("a", None, &[]), "a");
    }

    #[test]
    fn a_configuration_s_client_is_its_own_address_and_its_own_header_value() {
        let a = EdgeFacts::of("mobile app", 3, "/api/x", "h").unwrap();
        let b = EdgeFacts::of("web", 4, "/api/x", "h").unwrap();
        assert_ne!(a.facts().identity.unwrap().ip, b.facts().identity.unwrap().ip);
        assert_eq!(a.header("x-api-key").as_deref(), Some("mobile app"));
        assert_eq!(a.colo(), DEFAULT_COLO);
        assert_eq!(EdgeFacts::of("web", 4, "/a/%2e%2e/%zz", "h"), None, "a path the edge refuses with 400");
    }
}
