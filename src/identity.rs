//! Client identity: who a request is counted against.
//!
//! In order: `CF-Connecting-IP` (Cloudflare sets it and overwrites whatever the client
//! sent), else the **rightmost** `X-Forwarded-For` hop (each proxy appends the peer it saw
//! on the right; everything to its left was typed by the client, so rotating it must not
//! mint a fresh bucket), else the socket peer. A value that is not an IP address falls
//! through to the next source.
//!
//! An IPv6 client is counted by its /64 (one customer's allocation: rotating the low 64
//! bits must not mint a fresh bucket); an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
//! counts as the IPv4 address.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The address a request is counted against, already reduced to its counting unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientIp {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 /64 prefix: the first 64 bits, the rest zero.
    V6Prefix(Ipv6Addr),
}

impl ClientIp {
    /// The counting unit of `ip`: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::identity::ClientIp;
    /// let a = ClientIp::from("2001:db8:1:2:aaaa::1".parse::<std::net::IpAddr>().unwrap());
    /// let b = ClientIp::from("2001:db8:1:2:ffff:ffff:ffff:ffff".parse::<std::net::IpAddr>().unwrap());
    /// assert_eq!(a, b);
    /// assert_eq!(a.to_string(), "2001:db8:1:2::/64");
    /// ```
    pub fn from_ip(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => ClientIp::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientIp::V4(v4),
                None => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    ClientIp::V6Prefix(Ipv6Addr::from(bits))
                }
            },
        }
    }
}

impl From<IpAddr> for ClientIp {
    fn from(ip: IpAddr) -> Self {
        ClientIp::from_ip(ip)
    }
}

impl fmt::Display for ClientIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientIp::V4(v4) => write!(f, "{v4}"),
            ClientIp::V6Prefix(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// Where the counted address came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The `CF-Connecting-IP` header.
    CfConnectingIp,
    /// The rightmost hop of `X-Forwarded-For`.
    ForwardedFor,
    /// The socket peer.
    Peer,
}

impl Source {
    /// The name used in logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::CfConnectingIp => "cf-connecting-ip",
            Source::ForwardedFor => "x-forwarded-for",
            Source::Peer => "peer",
        }
    }
}

/// A counted identity and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The counting unit.
    pub ip: ClientIp,
    /// The whole address the source gave (what a proxy appends to `X-Forwarded-For`).
    pub address: IpAddr,
    /// Its source.
    pub source: Source,
}

impl Identity {
    fn new(address: IpAddr, source: Source) -> Self {
        Identity { ip: address.into(), address, source }
    }
}

/// The request fields identity is read from; `None` for an absent header or peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sources<'a> {
    /// The `CF-Connecting-IP` header.
    pub cf_connecting_ip: Option<&'a str>,
    /// The `X-Forwarded-For` header (all hops, comma-separated).
    pub x_forwarded_for: Option<&'a str>,
    /// The socket peer address (an IP, optionally with a port).
    pub peer: Option<&'a str>,
}

/// Who to count a request against, or `None` when no source holds an IP address.
///
/// # Examples
/// ```
/// use sluicegate::identity::{client_identity, Source, Sources};
/// let id = client_identity(&Sources {
///     cf_connecting_ip: None,
///     x_forwarded_for: Some("6.6.6.6, 198.51.100.7"),
///     peer: Some("10.0.0.2:443"),
/// }).unwrap();
/// assert_eq!(id.ip.to_string(), "198.51.100.7");
/// assert_eq!(id.source, Source::ForwardedFor);
/// ```
pub fn client_identity(sources: &Sources<'_>) -> Option<Identity> {
    if let Some(ip) = sources.cf_connecting_ip.and_then(parse_ip) {
        return Some(Identity::new(ip, Source::CfConnectingIp));
    }
    if let Some(ip) = sources.x_forwarded_for.and_then(rightmost_hop).and_then(parse_ip) {
        return Some(Identity::new(ip, Source::ForwardedFor));
    }
    sources.peer.and_then(parse_ip).map(|ip| Identity::new(ip, Source::Peer))
}

/// The rightmost non-empty hop. Only the hop our own proxy appended is trusted: when it is
/// not an address, the hops to its left (client-typed) are not consulted.
pub fn rightmost_hop(header: &str) -> Option<&str> {
    header.rsplit(',').map(str::trim).find(|hop| !hop.is_empty())
}

/// An IP address, accepting the forms proxies write: `a.b.c.d`, `a.b.c.d:port`, `v6`,
/// `[v6]` and `[v6]:port`.
pub fn parse_ip(value: &str) -> Option<IpAddr> {
    let value = value.trim();
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (host, port) = value.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn id(cf: Option<&str>, xff: Option<&str>, peer: Option<&str>) -> Option<(alloc::string::String, Source)> {
        client_identity(&Sources { cf_connecting_ip: cf, x_forwarded_for: xff, peer })
            .map(|i| (i.ip.to_string(), i.source))
    }

    #[test]
    fn cf_connecting_ip_wins_over_a_client_sent_forwarded_for() {
        assert_eq!(
            id(Some("203.0.113.9"), Some("1.1.1.1"), Some("10.0.0.1")),
            Some(("203.0.113.9".into(), Source::CfConnectingIp))
        );
    }

    #[test]
    fn rotating_the_leftmost_forwarded_for_hop_does_not_change_the_identity() {
        let a = id(None, Some("1.2.3.4, 198.51.100.7"), None);
        let b = id(None, Some("9.9.9.9, 198.51.100.7"), None);
        let c = id(None, Some("garbage, 5.5.5.5,198.51.100.7 "), None);
        assert_eq!(a, Some(("198.51.100.7".into(), Source::ForwardedFor)));
        assert_eq!(a, b);
        assert_eq!(a, c);
    }

    #[test]
    fn an_invalid_value_falls_through_to_the_next_source() {
        assert_eq!(
            id(Some("not-an-ip"), Some("198.51.100.7"), None),
            Some(("198.51.100.7".into(), Source::ForwardedFor))
        );
        // An invalid rightmost hop is not replaced by a client-typed hop to its left.
        assert_eq!(
            id(None, Some("6.6.6.6, unknown"), Some("192.0.2.1:5000")),
            Some(("192.0.2.1".into(), Source::Peer))
        );
        assert_eq!(id(Some(""), Some(" , "), Some("[2001:db8::1]:443")), Some(("2001:db8::/64".into(), Source::Peer)));
        assert_eq!(id(Some("x"), Some("y"), Some("z")), None);
        assert_eq!(id(None, None, None), None);
    }

    #[test]
    fn ipv6_is_counted_by_its_slash_64() {
        let a = id(Some("2001:db8:aa:bb:1:2:3:4"), None, None).unwrap();
        let b = id(Some("2001:db8:aa:bb:ffff:eeee:dddd:cccc"), None, None).unwrap();
        let other = id(Some("2001:db8:aa:bc::1"), None, None).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.0, "2001:db8:aa:bb::/64");
        assert_ne!(a, other);
    }

    #[test]
    fn the_whole_address_is_kept_beside_the_counting_unit() {
        let id = client_identity(&Sources { cf_connecting_ip: Some("2001:db8:aa:bb:1:2:3:4"), ..Sources::default() })
            .unwrap();
        assert_eq!(id.address.to_string(), "2001:db8:aa:bb:1:2:3:4");
        assert_eq!(id.ip.to_string(), "2001:db8:aa:bb::/64");
    }

    #[test]
    fn ipv4_mapped_ipv6_counts_as_the_ipv4_address() {
        assert_eq!(id(Some("::ffff:198.51.100.7"), None, None), id(Some("198.51.100.7"), None, None));
    }

    #[test]
    fn proxy_address_forms_parse() {
        for (text, want) in [
            ("198.51.100.7:8080", Some("198.51.100.7")),
            ("[2001:db8::1]", Some("2001:db8::1")),
            ("[2001:db8::1]:80", Some("2001:db8::1")),
            ("[2001:db8::1]:port", None),
            ("198.51.100.7:", None),
            ("2001:db8::1:80", Some("2001:db8::1:80")),
            ("", None),
        ] {
            assert_eq!(parse_ip(text).map(|ip| ip.to_string()), want.map(Into::into), "{text}");
        }
    }
}
