//! What the edge sends on to the origin: the upstream URL and the request headers, as a
//! proxy must (RFC 9110 §7.6).
//!
//! - **The upstream URL is built, never resolved.** It is the origin's scheme, host and port,
//!   its base path, then the request's path and query as they were sent. Resolving the
//!   request's path against the origin (`new URL(path, origin)`) would read `//evil/x` or
//!   `/\evil/x` as another host: an open proxy.
//! - **Hop-by-hop headers stay behind**: `Connection` and every header it names,
//!   `Keep-Alive`, `Proxy-Authorization`, `Proxy-Authenticate`, `Proxy-Connection`, `TE`,
//!   `Trailer`, `Transfer-Encoding` and `Upgrade` (except a WebSocket upgrade's). A
//!   `Connection` token naming a header the edge sets or reads ([`is_protected`]) is
//!   ignored: a client cannot strip those from the origin's request.
//! - **Forwarding headers are the edge's, never the client's** ([`FORWARDING`]): each is
//!   either dropped or set to what the edge received and who it counted, whatever the client
//!   sent. The counted client is appended to `X-Forwarded-For`, so the origin sees who was
//!   counted.

use alloc::string::String;
use core::fmt::Write;
use core::net::IpAddr;

/// Headers that belong to one connection, not to the request.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// What becomes of a forwarding header the client sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// Never sent on.
    Dropped,
    /// Replaced by the edge's own value ([`Received::value`]); removed when the edge has none.
    Set(EdgeValue),
}

/// A value the edge sets from what it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeValue {
    /// The received `X-Forwarded-For` with the counted client appended ([`forwarded_for`]).
    ForwardedFor,
    /// The scheme the edge received the request on: `https` or `http`.
    Scheme,
    /// The host the edge received the request for, with its port when the URL has one.
    Host,
    /// The port the edge received the request on: the URL's, else 443 or 80 by scheme.
    Port,
    /// One RFC 7239 element: `for=<counted client>;host=<host>;proto=<scheme>`
    /// ([`forwarded_element`]).
    Forwarded,
    /// The counted client's address; removed when there is none.
    Client,
}

/// Every header that tells the origin where a request came from, how it reached the edge,
/// or which URL or method it "really" is, with what the edge does with a client's value
/// (names in lower case; they compare case-insensitively). Forwarded as sent, any of them
/// would let a client choose the address, scheme, host, path or method the origin acts on.
///
/// `Expect` is here too: the edge answers an expectation itself (the runtime sends the
/// client its `100 Continue`); sent on, it makes the origin send an interim `100` that
/// would be taken for the final response.
pub const FORWARDING: &[(&str, Treatment)] = &[
    ("x-forwarded-for", Treatment::Set(EdgeValue::ForwardedFor)),
    ("x-forwarded-proto", Treatment::Set(EdgeValue::Scheme)),
    ("x-forwarded-host", Treatment::Set(EdgeValue::Host)),
    ("x-forwarded-port", Treatment::Set(EdgeValue::Port)),
    ("forwarded", Treatment::Set(EdgeValue::Forwarded)),
    ("x-real-ip", Treatment::Set(EdgeValue::Client)),
    ("true-client-ip", Treatment::Set(EdgeValue::Client)),
    ("cf-connecting-ip", Treatment::Set(EdgeValue::Client)),
    ("x-original-url", Treatment::Dropped),
    ("x-rewrite-url", Treatment::Dropped),
    ("x-original-host", Treatment::Dropped),
    ("x-host", Treatment::Dropped),
    ("x-http-method-override", Treatment::Dropped),
    ("x-http-method", Treatment::Dropped),
    ("x-method-override", Treatment::Dropped),
    ("x-forwarded-prefix", Treatment::Dropped),
    ("x-forwarded-server", Treatment::Dropped),
    ("x-forwarded-scheme", Treatment::Dropped),
    ("x-forwarded-ssl", Treatment::Dropped),
    ("x-url-scheme", Treatment::Dropped),
    ("front-end-https", Treatment::Dropped),
    ("x-client-ip", Treatment::Dropped),
    ("x-cluster-client-ip", Treatment::Dropped),
    ("client-ip", Treatment::Dropped),
    ("x-originating-ip", Treatment::Dropped),
    ("x-remote-ip", Treatment::Dropped),
    ("x-remote-addr", Treatment::Dropped),
    ("forwarded-for", Treatment::Dropped),
    ("x-forwarded", Treatment::Dropped),
    ("expect", Treatment::Dropped),
];

/// Headers the edge reads or relies on itself, besides [`FORWARDING`]: a `Connection` token
/// naming one is ignored.
pub const EDGE_READS: &[&str] =
    &["authorization", "cookie", "host", "content-length", "content-type", "content-encoding"];

/// What the edge does with the client's `name` header, when it is a forwarding header.
pub fn treatment(name: &str) -> Option<Treatment> {
    FORWARDING.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, t)| *t)
}

/// Whether `name` is a header the edge sets or reads: one of [`FORWARDING`], [`EDGE_READS`],
/// or `rules_read` (the headers the rules file reads,
/// [`RuleSet::headers_read`](crate::edge::rules::RuleSet::headers_read)). A `Connection` token
/// naming it is ignored.
pub fn is_protected(name: &str, rules_read: &[String]) -> bool {
    treatment(name).is_some()
        || EDGE_READS.iter().any(|h| h.eq_ignore_ascii_case(name))
        || rules_read.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The URL an admitted request is sent to: `origin` (`https://o.example:8443`, no path),
/// then `base_path` (`/base`, `/base/` or empty), then the request's `path_and_query`
/// (`/api/x?q=1`), joined as text.
///
/// # Examples
/// ```
/// use sluicegate::forward::upstream_url;
/// assert_eq!(upstream_url("https://o.example", "/base", "/api/x?q"), "https://o.example/base/api/x?q");
/// // A path that looks like another authority stays a path on the origin.
/// assert_eq!(upstream_url("https://o.example", "", "//127.0.0.1:9/x"), "https://o.example//127.0.0.1:9/x");
/// ```
pub fn upstream_url(origin: &str, base_path: &str, path_and_query: &str) -> String {
    let base = base_path.trim_end_matches('/');
    let mut url = String::with_capacity(origin.len() + base.len() + path_and_query.len() + 1);
    url.push_str(origin);
    url.push_str(base);
    if !path_and_query.starts_with('/') {
        url.push('/');
    }
    url.push_str(path_and_query);
    url
}

/// Whether an origin's answer of `status` is an interim response (1xx) other than a
/// WebSocket's `101`: never a final answer, so never passed on as one. The fetch API hands an
/// origin's unasked-for `100 Continue` or `103 Early Hints` back as if it were the response,
/// with the real one unread in its body; the edge answers `502` instead.
///
/// # Examples
/// ```
/// use sluicegate::forward::is_interim;
/// assert!(is_interim(100) && is_interim(103));
/// assert!(!is_interim(101) && !is_interim(200) && !is_interim(204));
/// ```
pub fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

/// Whether a request is a WebSocket upgrade: `Upgrade: websocket` with `Connection`
/// naming `upgrade`.
pub fn is_websocket_upgrade(upgrade: Option<&str>, connection: Option<&str>) -> bool {
    upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
        && connection.is_some_and(|c| tokens(c).any(|t| t.eq_ignore_ascii_case("upgrade")))
}

/// Whether the request header `name` (any case) stays behind as hop-by-hop. `connection` is
/// the request's `Connection` value: every header it names is hop-by-hop too, except one the
/// edge sets or reads ([`is_protected`], with `rules_read`). A WebSocket upgrade keeps its
/// `Upgrade` header (the caller sends `Connection: Upgrade` with it).
pub fn is_hop_by_hop(name: &str, connection: Option<&str>, websocket: bool, rules_read: &[String]) -> bool {
    if websocket && name.eq_ignore_ascii_case("upgrade") {
        return false;
    }
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
        || (connection.is_some_and(|c| tokens(c).any(|t| t.eq_ignore_ascii_case(name)))
            && !is_protected(name, rules_read))
}

/// Whether the client's `name` header is sent on as the client sent it: not hop-by-hop
/// ([`is_hop_by_hop`]), not `Host` (the upstream request's comes from its URL) and not a
/// forwarding header ([`FORWARDING`]: those the edge sets are added by the caller).
pub fn is_sent_as_received(name: &str, connection: Option<&str>, websocket: bool, rules_read: &[String]) -> bool {
    !is_hop_by_hop(name, connection, websocket, rules_read)
        && !name.eq_ignore_ascii_case("host")
        && treatment(name).is_none()
}

fn tokens(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|t| !t.is_empty())
}

/// What the edge received a request on and whom it counted: where the values of the headers
/// it sets ([`EdgeValue`]) come from.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    /// The scheme, without `:` (`https`).
    pub scheme: &'a str,
    /// The host as the URL has it, with its port when it has one (`edge.example:8443`).
    pub host: &'a str,
    /// The URL's explicit port, if any.
    pub port: Option<u16>,
    /// The counted client's address, when there is one.
    pub client: Option<IpAddr>,
    /// The `X-Forwarded-For` the edge received.
    pub x_forwarded_for: Option<&'a str>,
}

impl Received<'_> {
    /// The edge's value for a header it sets; `None`: the header is removed.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::forward::{EdgeValue, Received};
    /// let received = Received { scheme: "https", host: "edge.example", port: None,
    ///     client: "2001:db8::7".parse().ok(), x_forwarded_for: None };
    /// assert_eq!(received.value(EdgeValue::Port).as_deref(), Some("443"));
    /// assert_eq!(received.value(EdgeValue::Forwarded).as_deref(),
    ///     Some("for=\"[2001:db8::7]\";host=edge.example;proto=https"));
    /// ```
    pub fn value(&self, value: EdgeValue) -> Option<String> {
        match value {
            EdgeValue::ForwardedFor => forwarded_for(self.x_forwarded_for, self.client),
            EdgeValue::Scheme => Some(self.scheme.into()),
            EdgeValue::Host => Some(self.host.into()),
            EdgeValue::Port => {
                let default = if self.scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
                Some(alloc::format!("{}", self.port.unwrap_or(default)))
            }
            EdgeValue::Forwarded => Some(forwarded_element(self.client, self.host, self.scheme)),
            EdgeValue::Client => self.client.map(|c| alloc::format!("{c}")),
        }
    }
}

/// The `X-Forwarded-For` to send: the received one with `client` appended, unless it
/// already ends with that address (the client was counted by that hop). `None` when there
/// is nothing to send.
///
/// # Examples
/// ```
/// use sluicegate::forward::forwarded_for;
/// let client = "198.51.100.7".parse().ok();
/// assert_eq!(forwarded_for(Some("10.0.0.1"), client).as_deref(), Some("10.0.0.1, 198.51.100.7"));
/// assert_eq!(forwarded_for(None, client).as_deref(), Some("198.51.100.7"));
/// assert_eq!(forwarded_for(Some("10.0.0.1, 198.51.100.7"), client).as_deref(), Some("10.0.0.1, 198.51.100.7"));
/// ```
pub fn forwarded_for(received: Option<&str>, client: Option<IpAddr>) -> Option<String> {
    let received = received.map(str::trim).filter(|r| !r.is_empty());
    let Some(client) = client else { return received.map(String::from) };
    let last = received.and_then(crate::edge::identity::rightmost_hop).and_then(crate::edge::identity::parse_ip);
    if last == Some(client) {
        return received.map(String::from);
    }
    let mut out = String::new();
    if let Some(received) = received {
        out.push_str(received);
        out.push_str(", ");
    }
    let _ = write!(out, "{client}");
    Some(out)
}

/// One `Forwarded` element (RFC 7239 §4): `for=<client>;host=<host>;proto=<scheme>`. An IPv6
/// client is quoted and bracketed (`for="[2001:db8::7]"`), no client is `for=unknown`, and
/// a value that is not a token (a host with a port) is a quoted string.
///
/// # Examples
/// ```
/// use sluicegate::forward::forwarded_element;
/// assert_eq!(forwarded_element("192.0.2.1".parse().ok(), "edge.example", "https"),
///     "for=192.0.2.1;host=edge.example;proto=https");
/// assert_eq!(forwarded_element(None, "edge.example:8787", "http"),
///     "for=unknown;host=\"edge.example:8787\";proto=http");
/// ```
pub fn forwarded_element(client: Option<IpAddr>, host: &str, scheme: &str) -> String {
    let mut out = String::with_capacity(host.len() + 64);
    out.push_str("for=");
    match client {
        Some(IpAddr::V4(v4)) => {
            let _ = write!(out, "{v4}");
        }
        Some(IpAddr::V6(v6)) => {
            let _ = write!(out, "\"[{v6}]\"");
        }
        None => out.push_str("unknown"),
    }
    out.push_str(";host=");
    push_token_or_quoted(&mut out, host);
    out.push_str(";proto=");
    push_token_or_quoted(&mut out, scheme);
    out
}

/// `value` as an RFC 9110 token when it is one, else as a quoted string.
fn push_token_or_quoted(out: &mut String, value: &str) {
    if crate::edge::headers::is_token(value) {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_url_keeps_the_origin_and_its_base_path_whatever_the_request_path() {
        let o = "http://127.0.0.1:8080";
        assert_eq!(upstream_url(o, "", "/api/x?q=1"), "http://127.0.0.1:8080/api/x?q=1");
        assert_eq!(upstream_url(o, "/", "/api/x"), "http://127.0.0.1:8080/api/x");
        assert_eq!(upstream_url(o, "/base/", "/api/x?q"), "http://127.0.0.1:8080/base/api/x?q");
        for hostile in ["//evil.example/x", "/\\evil.example/x", "//user@evil.example/", "/@evil.example"] {
            let url = upstream_url(o, "/base", hostile);
            assert!(url.starts_with("http://127.0.0.1:8080/base/"), "{hostile} → {url}");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_stay_behind() {
        let connection = Some("keep-alive, X-Secret , close");
        for name in
            ["Connection", "keep-alive", "TE", "Transfer-Encoding", "Upgrade", "Proxy-Authorization", "x-secret"]
        {
            assert!(is_hop_by_hop(name, connection, false, &[]), "{name}");
            assert!(!is_sent_as_received(name, connection, false, &[]), "{name}");
        }
        for name in ["authorization", "content-type", "cookie", "sec-websocket-key", "x-kept"] {
            assert!(!is_hop_by_hop(name, connection, false, &[]), "{name}");
            assert!(is_sent_as_received(name, connection, false, &[]), "{name}");
        }
        assert!(!is_hop_by_hop("upgrade", Some("Upgrade"), true, &[]), "a WebSocket upgrade keeps Upgrade");
        assert!(is_hop_by_hop("connection", Some("Upgrade"), true, &[]));
    }

    #[test]
    fn a_connection_token_naming_a_header_the_edge_sets_or_reads_is_ignored() {
        let connection = Some(
            "CF-Connecting-IP, Authorization, X-Forwarded-For, cookie, HOST, Content-Length, \
                               Content-Type, Content-Encoding, X-Api-Key, X-Tenant, X-Real-IP, X-Secret",
        );
        let rules_read = ["x-api-key", "x-tenant"].map(String::from);
        for name in [
            "cf-connecting-ip",
            "Authorization",
            "x-forwarded-for",
            "Cookie",
            "host",
            "content-length",
            "content-type",
            "content-encoding",
            "X-API-KEY",
            "x-tenant",
            "x-real-ip",
        ] {
            assert!(is_protected(name, &rules_read), "{name}");
            assert!(!is_hop_by_hop(name, connection, false, &rules_read), "{name}: the Connection token is ignored");
        }
        for name in ["authorization", "cookie", "content-type", "x-api-key", "x-tenant"] {
            assert!(is_sent_as_received(name, connection, false, &rules_read), "{name} reaches the origin");
        }
        assert!(is_hop_by_hop("x-secret", connection, false, &rules_read), "an unprotected header named still goes");
        assert!(is_hop_by_hop("x-api-key", connection, false, &[]), "a header no rule reads is the client's to name");
    }

    #[test]
    fn every_forwarding_header_is_dropped_or_set_by_the_edge_in_any_case() {
        let set = [
            ("x-forwarded-for", EdgeValue::ForwardedFor),
            ("X-Forwarded-Proto", EdgeValue::Scheme),
            ("X-FORWARDED-HOST", EdgeValue::Host),
            ("X-Forwarded-Port", EdgeValue::Port),
            ("Forwarded", EdgeValue::Forwarded),
            ("X-Real-IP", EdgeValue::Client),
            ("True-Client-IP", EdgeValue::Client),
            ("CF-Connecting-IP", EdgeValue::Client),
        ];
        for (name, value) in set {
            assert_eq!(treatment(name), Some(Treatment::Set(value)), "{name}");
            assert!(!is_sent_as_received(name, None, false, &[]), "{name}: the client's value is replaced");
        }
        let dropped = [
            "X-Original-URL",
            "X-Rewrite-URL",
            "X-Original-Host",
            "X-Host",
            "X-HTTP-Method-Override",
            "X-HTTP-Method",
            "X-Method-Override",
            "X-Forwarded-Prefix",
            "X-Forwarded-Server",
            "X-Forwarded-Scheme",
            "X-Forwarded-Ssl",
            "X-Url-Scheme",
            "Front-End-Https",
            "X-Client-IP",
            "X-Cluster-Client-IP",
            "Client-IP",
            "X-Originating-IP",
            "X-Remote-IP",
            "X-Remote-Addr",
            "Forwarded-For",
            "X-Forwarded",
            "Expect",
        ];
        for name in dropped {
            for spelling in [name.into(), name.to_ascii_lowercase(), name.to_ascii_uppercase()] {
                assert_eq!(treatment(&spelling), Some(Treatment::Dropped), "{spelling}");
                assert!(!is_sent_as_received(&spelling, None, false, &[]), "{spelling}");
            }
        }
        assert_eq!(FORWARDING.len(), set.len() + dropped.len(), "every entry of the table is listed here");
        assert!(FORWARDING.iter().all(|(name, _)| *name == name.to_ascii_lowercase()));
    }

    #[test]
    fn the_edge_sets_what_it_received_and_whom_it_counted() {
        let v4 = Received {
            scheme: "http",
            host: "edge.test:8787",
            port: Some(8787),
            client: "198.51.100.7".parse().ok(),
            x_forwarded_for: Some("10.0.0.1"),
        };
        assert_eq!(v4.value(EdgeValue::ForwardedFor).as_deref(), Some("10.0.0.1, 198.51.100.7"));
        assert_eq!(v4.value(EdgeValue::Scheme).as_deref(), Some("http"));
        assert_eq!(v4.value(EdgeValue::Host).as_deref(), Some("edge.test:8787"));
        assert_eq!(v4.value(EdgeValue::Port).as_deref(), Some("8787"));
        assert_eq!(v4.value(EdgeValue::Client).as_deref(), Some("198.51.100.7"));
        assert_eq!(
            v4.value(EdgeValue::Forwarded).as_deref(),
            Some("for=198.51.100.7;host=\"edge.test:8787\";proto=http")
        );
        let nobody = Received { scheme: "https", host: "edge.test", port: None, client: None, x_forwarded_for: None };
        assert_eq!(nobody.value(EdgeValue::Client), None, "no identity: the header is removed");
        assert_eq!(nobody.value(EdgeValue::ForwardedFor), None);
        assert_eq!(nobody.value(EdgeValue::Port).as_deref(), Some("443"));
        assert_eq!(Received { scheme: "http", ..nobody }.value(EdgeValue::Port).as_deref(), Some("80"));
    }

    #[test]
    fn a_forwarded_element_quotes_and_brackets_ipv6_and_says_unknown_without_a_client() {
        let v6 = "2001:db8::7".parse().ok();
        assert_eq!(forwarded_element(v6, "edge.test", "https"), "for=\"[2001:db8::7]\";host=edge.test;proto=https");
        assert_eq!(
            forwarded_element("192.0.2.1".parse().ok(), "edge.test", "http"),
            "for=192.0.2.1;host=edge.test;proto=http"
        );
        assert_eq!(forwarded_element(None, "edge.test", "https"), "for=unknown;host=edge.test;proto=https");
        assert_eq!(
            forwarded_element(None, "[2001:db8::1]:8443", "https"),
            "for=unknown;host=\"[2001:db8::1]:8443\";proto=https"
        );
        assert_eq!(forwarded_element(None, "a\"b\\c", "https"), "for=unknown;host=\"a\\\"b\\\\c\";proto=https");
    }

    #[test]
    fn only_a_websocket_upgrade_is_one() {
        assert!(is_websocket_upgrade(Some("websocket"), Some("Upgrade")));
        assert!(is_websocket_upgrade(Some("WebSocket"), Some("keep-alive, upgrade")));
        assert!(!is_websocket_upgrade(Some("h2c"), Some("Upgrade")));
        assert!(!is_websocket_upgrade(Some("websocket"), Some("keep-alive")));
        assert!(!is_websocket_upgrade(None, Some("Upgrade")));
    }

    #[test]
    fn the_counted_client_is_appended_once_to_x_forwarded_for() {
        let v6 = "2001:db8::7".parse().ok();
        assert_eq!(forwarded_for(Some(" 6.6.6.6 "), v6).as_deref(), Some("6.6.6.6, 2001:db8::7"));
        assert_eq!(
            forwarded_for(Some("6.6.6.6, [2001:db8::7]:443"), v6).as_deref(),
            Some("6.6.6.6, [2001:db8::7]:443")
        );
        assert_eq!(forwarded_for(Some("6.6.6.6"), None).as_deref(), Some("6.6.6.6"));
        assert_eq!(forwarded_for(Some(" "), None), None);
    }
}
