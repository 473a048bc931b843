//! What the edge sends on to the origin: the upstream URL and the request headers, as a
//! proxy must (RFC 9110 §7.6).
//!
//! - **The upstream URL is built, never resolved.** It is the origin's scheme, host and port,
//!   its base path, then the request's path and query as they were sent. Resolving the
//!   request's path against the origin (`new URL(path, origin)`) would read `//evil/x` or
//!   `/\evil/x` as another host: an open proxy.
//! - **Hop-by-hop headers stay behind**: `Connection` and every header it names,
//!   `Keep-Alive`, `Proxy-Authorization`, `Proxy-Authenticate`, `Proxy-Connection`, `TE`,
//!   `Trailer`, `Transfer-Encoding` and `Upgrade` (except a WebSocket upgrade's).
//! - **The counted client is appended to `X-Forwarded-For`**, so the origin sees who was
//!   counted; `X-Forwarded-Proto` and `X-Forwarded-Host` are set to what the edge received.

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

/// Whether a request is a WebSocket upgrade: `Upgrade: websocket` with `Connection`
/// naming `upgrade`.
pub fn is_websocket_upgrade(upgrade: Option<&str>, connection: Option<&str>) -> bool {
    upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
        && connection.is_some_and(|c| tokens(c).any(|t| t.eq_ignore_ascii_case("upgrade")))
}

/// Whether the request header `name` (any case) stays behind. `connection` is the
/// request's `Connection` value: every header it names is hop-by-hop too. A WebSocket
/// upgrade keeps its `Upgrade` header (the caller sends `Connection: Upgrade` with it).
pub fn is_hop_by_hop(name: &str, connection: Option<&str>, websocket: bool) -> bool {
    if websocket && name.eq_ignore_ascii_case("upgrade") {
        return false;
    }
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
        || connection.is_some_and(|c| tokens(c).any(|t| t.eq_ignore_ascii_case(name)))
}

fn tokens(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|t| !t.is_empty())
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
    let last = received.and_then(crate::identity::rightmost_hop).and_then(crate::identity::parse_ip);
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
            assert!(is_hop_by_hop(name, connection, false), "{name}");
        }
        for name in ["authorization", "content-type", "cookie", "x-forwarded-for", "sec-websocket-key"] {
            assert!(!is_hop_by_hop(name, connection, false), "{name}");
        }
        assert!(!is_hop_by_hop("upgrade", Some("Upgrade"), true), "a WebSocket upgrade keeps Upgrade");
        assert!(is_hop_by_hop("connection", Some("Upgrade"), true));
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
