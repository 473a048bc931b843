//! Client identity: who a request is counted against.
//!
//! In order: `CF-Connecting-IP` (Cloudflare sets it and overwrites whatever the client
//! sent), else the **rightmost** `X-Forwarded-For` hop (each proxy appends the peer it saw
//! on the right; everything to its left was typed by the client, so rotating it must not
//! mint a fresh bucket), else the socket peer. A value that is not an IP address falls
//! through to the next source.
//!
//! Behind proxies of one's own (a load balancer in front of the edge, or in front of
//! Cloudflare), [`client_identity_behind`] believes `X-Forwarded-For` only as far as
//! [`TrustedProxies`] vouch for it: the nearest address (`CF-Connecting-IP`, else the peer)
//! is the client unless it is a trusted proxy; then the header is walked from the right,
//! past every trusted hop, and the first untrusted address is the client. The walk reads at
//! most [`MAX_FORWARDED_HOPS`] hops of at most [`MAX_HOP_BYTES`] bytes each, so whatever the
//! header holds it costs a bounded amount of work, and a hop that is not an address ends it.
//!
//! An IPv6 client is counted by its /64 (one customer's allocation: rotating the low 64
//! bits must not mint a fresh bucket); an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
//! counts as the IPv4 address.

use alloc::vec::Vec;
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

/// The most `X-Forwarded-For` hops [`client_identity_behind`] reads: past this many trusted
/// hops the walk stops, and the identity is the last of them.
pub const MAX_FORWARDED_HOPS: usize = 32;

/// The longest hop [`client_identity_behind`] reads, in bytes, spaces around it included
/// (the longest address a proxy writes, `[v6]:port` with an IPv4 tail, is 53). A longer hop
/// is not an address: the walk stops there.
pub const MAX_HOP_BYTES: usize = 64;

/// A range of addresses: an address and a prefix length (`10.0.0.0/8`, `2001:db8::/32`),
/// its host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a text is not a [`Cidr`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CidrError {
    /// Not an address, or not `address/prefix`.
    NotARange,
    /// The prefix length is not a whole number within the address's bits.
    Prefix {
        /// The address's bits: 32 or 128.
        bits: u8,
    },
    /// `/0`: every address.
    Everything,
    /// The address has bits set past its prefix; the range as it must be written.
    HostBits {
        /// The same range with its host bits cleared.
        normal: Cidr,
    },
    /// An IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`); the IPv4 range it stands for.
    Mapped {
        /// The IPv4 range (none for `/96`, every IPv4 address).
        v4: Option<Cidr>,
    },
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidrError::NotARange => f.write_str(
                "is not an IP address or a CIDR range such as \"10.0.0.0/8\" or \"2001:db8::/32\" \
                 (no port, no brackets, no spaces)",
            ),
            CidrError::Prefix { bits } => {
                write!(f, "has a prefix length that is not a whole number from 1 to {bits} (this address's bits)")
            }
            CidrError::Everything => f.write_str(
                "is a /0 range: it would trust every address, so any client could name its own identity in \
                 X-Forwarded-For",
            ),
            CidrError::HostBits { normal } => write!(f, "has bits set past its prefix length; write \"{normal}\""),
            CidrError::Mapped { v4: Some(v4) } => {
                write!(f, "is an IPv4-mapped IPv6 range; write the IPv4 range \"{v4}\" (it covers both forms)")
            }
            CidrError::Mapped { v4: None } => {
                f.write_str("is an IPv4-mapped IPv6 range; write the IPv4 range it stands for (it covers both forms)")
            }
        }
    }
}

impl Cidr {
    /// `address/prefix`, or a bare address (`/32` or `/128`). The address must not have
    /// bits set past the prefix (`10.0.0.1/8` is refused, naming `10.0.0.0/8`): such a
    /// range is more often a typo than a wish. `/0` is refused (it would trust the client's
    /// own hops), and so is an IPv4-mapped IPv6 range (write the IPv4 one: trust already
    /// covers an address in either form).
    ///
    /// # Errors
    /// What is wrong, as a [`CidrError`].
    ///
    /// # Examples
    /// ```
    /// use sluicegate::identity::Cidr;
    /// let lan = Cidr::parse("10.0.0.0/8").unwrap();
    /// assert!(lan.contains("10.9.8.7".parse().unwrap()));
    /// assert!(lan.contains("::ffff:10.9.8.7".parse().unwrap()));
    /// assert!(!lan.contains("11.0.0.1".parse().unwrap()));
    /// assert_eq!(Cidr::parse("2001:db8::1").unwrap().to_string(), "2001:db8::1/128");
    /// assert!(Cidr::parse("10.0.0.1/8").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Cidr, CidrError> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| CidrError::NotARange)?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().ok().filter(|p| *p <= bits).ok_or(CidrError::Prefix { bits })?
            }
            Some(_) => return Err(CidrError::Prefix { bits }),
        };
        if prefix == 0 {
            return Err(CidrError::Everything);
        }
        if let (IpAddr::V6(v6), 96..) = (network, prefix) {
            if let Some(v4) = v6.to_ipv4_mapped() {
                let v4 = (prefix > 96).then(|| Cidr::masked(IpAddr::V4(v4), prefix - 96));
                return Err(CidrError::Mapped { v4 });
            }
        }
        let normal = Cidr::masked(network, prefix);
        if normal.network != network {
            return Err(CidrError::HostBits { normal });
        }
        Ok(normal)
    }

    /// `network/prefix` with the host bits cleared.
    fn masked(network: IpAddr, prefix: u8) -> Cidr {
        let network = match network {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix))),
        };
        Cidr { network, prefix }
    }

    /// Whether `ip` is in the range; an IPv4-mapped IPv6 address is its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => u32::from(ip) & mask32(self.prefix) == u32::from(net),
            (IpAddr::V6(net), IpAddr::V6(ip)) => u128::from(ip) & mask128(self.prefix) == u128::from(net),
            _ => false,
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix.min(128))).unwrap_or(0)
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The proxies whose `X-Forwarded-For` hops are believed (`trusted_proxies` in a rules
/// file); empty, the header's rightmost hop is taken as it is ([`client_identity`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<Cidr>,
}

impl TrustedProxies {
    /// The proxies in `ranges`.
    pub fn new(ranges: Vec<Cidr>) -> Self {
        TrustedProxies { ranges }
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The trusted ranges, as given.
    pub fn ranges(&self) -> &[Cidr] {
        &self.ranges
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|range| range.contains(ip))
    }
}

/// Who to count a request against when the proxies in `trusted` stand in front of the edge.
///
/// The nearest address is `CF-Connecting-IP`, else the peer (a value that is not an address
/// is passed over). When it is not a trusted proxy, it is the client. When it is one (or
/// there is none), `X-Forwarded-For` is walked from the right: a trusted hop is passed, and
/// the first untrusted address is the client. The walk stops, and the client is the last
/// address it reached (the trusted proxy that sent the rest, or the nearest address; none if
/// there was none), at the header's end, at a hop that is not an address (garbage, empty,
/// longer than [`MAX_HOP_BYTES`]), or after [`MAX_FORWARDED_HOPS`] hops. So nothing a client
/// writes to the left of a trusted proxy's hop is read, and a hostile header can at worst
/// name the proxy that passed it, never an address of the client's choosing.
///
/// With no trusted proxy this is [`client_identity`].
///
/// # Examples
/// ```
/// use sluicegate::identity::{client_identity_behind, Cidr, Source, Sources, TrustedProxies};
/// let lb = TrustedProxies::new(vec![Cidr::parse("10.0.0.0/8").unwrap()]);
/// let id = client_identity_behind(
///     &Sources {
///         cf_connecting_ip: Some("10.0.0.5"),
///         x_forwarded_for: Some("6.6.6.6, 198.51.100.7, 10.0.0.9"),
///         peer: None,
///     },
///     &lb,
/// )
/// .unwrap();
/// assert_eq!(id.ip.to_string(), "198.51.100.7");
/// assert_eq!(id.source, Source::ForwardedFor);
/// ```
pub fn client_identity_behind(sources: &Sources<'_>, trusted: &TrustedProxies) -> Option<Identity> {
    if trusted.is_empty() {
        return client_identity(sources);
    }
    let nearest = sources
        .cf_connecting_ip
        .and_then(parse_ip)
        .map(|ip| Identity::new(ip, Source::CfConnectingIp))
        .or_else(|| sources.peer.and_then(parse_ip).map(|ip| Identity::new(ip, Source::Peer)));
    match nearest {
        Some(id) if !trusted.contains(id.address) => Some(id),
        _ => walk(sources.x_forwarded_for, trusted, nearest).0,
    }
}

/// The trusted walk of `header` from `last` (the nearest address, trusted, or none): the
/// identity, and how many bytes of the header's end were read.
fn walk(header: Option<&str>, trusted: &TrustedProxies, mut last: Option<Identity>) -> (Option<Identity>, usize) {
    let Some(header) = header else { return (last, 0) };
    let mut hops = Hops::new(header);
    for _ in 0..MAX_FORWARDED_HOPS {
        let Some(hop) = hops.next() else { break };
        let Some(ip) = hop.and_then(parse_ip) else { break };
        let id = Identity::new(ip, Source::ForwardedFor);
        if !trusted.contains(ip) {
            return (Some(id), hops.read());
        }
        last = Some(id);
    }
    (last, hops.read())
}

/// The hops of an `X-Forwarded-For` header from the right, each `None` when it is longer
/// than [`MAX_HOP_BYTES`] (its text is then not read, and it is the last).
struct Hops<'a> {
    header: &'a str,
    /// The part not yet read (`None` once the leftmost hop was given).
    rest: Option<&'a str>,
    /// The lowest byte offset looked at.
    low: usize,
}

impl<'a> Hops<'a> {
    fn new(header: &'a str) -> Self {
        Hops { header, rest: Some(header), low: header.len() }
    }

    /// How many bytes of the header's end were looked at.
    fn read(&self) -> usize {
        self.header.len() - self.low
    }
}

impl<'a> Iterator for Hops<'a> {
    type Item = Option<&'a str>;

    fn next(&mut self) -> Option<Option<&'a str>> {
        let rest = self.rest?;
        // A comma can only be this close: a hop is at most MAX_HOP_BYTES long.
        let from = rest.len().saturating_sub(MAX_HOP_BYTES + 1);
        self.low = self.low.min(from);
        match rest.as_bytes()[from..].iter().rposition(|b| *b == b',') {
            Some(at) => {
                let comma = from + at;
                self.rest = Some(&rest[..comma]);
                Some(Some(&rest[comma + 1..]))
            }
            None => {
                self.rest = None;
                Some((rest.len() <= MAX_HOP_BYTES).then_some(rest))
            }
        }
    }
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

    fn lan() -> TrustedProxies {
        TrustedProxies::new(["10.0.0.0/8", "fd00::/8", "127.0.0.1"].iter().map(|c| Cidr::parse(c).unwrap()).collect())
    }

    fn behind(cf: Option<&str>, xff: Option<&str>, peer: Option<&str>) -> Option<(alloc::string::String, Source)> {
        client_identity_behind(&Sources { cf_connecting_ip: cf, x_forwarded_for: xff, peer }, &lan())
            .map(|i| (i.ip.to_string(), i.source))
    }

    fn some(ip: &str, source: Source) -> Option<(alloc::string::String, Source)> {
        Some((ip.into(), source))
    }

    #[test]
    fn ranges_parse_and_name_what_is_wrong() {
        for (text, want) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("192.0.2.7", "192.0.2.7/32"),
            ("192.0.2.7/32", "192.0.2.7/32"),
            ("2001:db8::/32", "2001:db8::/32"),
            ("2001:db8::1", "2001:db8::1/128"),
            ("fc00::/7", "fc00::/7"),
            ("0.0.0.0/1", "0.0.0.0/1"),
        ] {
            assert_eq!(Cidr::parse(text).map(|c| c.to_string()), Ok(want.into()), "{text}");
        }
        let host_bits = |normal: &str| {
            let (a, p) = normal.split_once('/').unwrap();
            Err(CidrError::HostBits { normal: Cidr { network: a.parse().unwrap(), prefix: p.parse().unwrap() } })
        };
        assert_eq!(Cidr::parse("10.1.2.3/8"), host_bits("10.0.0.0/8"));
        assert_eq!(Cidr::parse("2001:db8::1/32"), host_bits("2001:db8::/32"));
        assert_eq!(Cidr::parse("10.0.0.0/33"), Err(CidrError::Prefix { bits: 32 }));
        assert_eq!(Cidr::parse("2001:db8::/129"), Err(CidrError::Prefix { bits: 128 }));
        for prefix in ["", "-1", "+8", "8.0", " 8", "0008", "256", "x", "8/8"] {
            assert!(
                matches!(Cidr::parse(&alloc::format!("10.0.0.0/{prefix}")), Err(CidrError::Prefix { .. })),
                "{prefix}"
            );
        }
        assert_eq!(Cidr::parse("0.0.0.0/0"), Err(CidrError::Everything));
        assert_eq!(Cidr::parse("::/0"), Err(CidrError::Everything));
        for text in ["", "10.0.0", " 10.0.0.0/8", "[::1]", "[::1]/128", "10.0.0.1:80", "fe80::1%eth0", "localhost"] {
            assert_eq!(Cidr::parse(text), Err(CidrError::NotARange), "{text:?}");
        }
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap_err();
        assert_eq!(
            mapped.to_string(),
            "is an IPv4-mapped IPv6 range; write the IPv4 range \"10.0.0.0/8\" (it covers both forms)"
        );
        assert_eq!(Cidr::parse("::ffff:0.0.0.0/96"), Err(CidrError::Mapped { v4: None }));
        assert_eq!(
            Cidr::parse("10.1.2.3/8").unwrap_err().to_string(),
            "has bits set past its prefix length; write \"10.0.0.0/8\""
        );
    }

    #[test]
    fn a_range_holds_its_addresses_in_either_form() {
        let lan = lan();
        for ip in ["10.0.0.1", "10.255.255.255", "::ffff:10.1.2.3", "fd12::1", "127.0.0.1"] {
            assert!(lan.contains(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["11.0.0.1", "9.255.255.255", "::ffff:11.0.0.1", "fe00::1", "127.0.0.2", "::a00:1"] {
            assert!(!lan.contains(ip.parse().unwrap()), "{ip}");
        }
        let one = Cidr::parse("198.51.100.0/31").unwrap();
        assert!(one.contains("198.51.100.1".parse().unwrap()));
        assert!(!one.contains("198.51.100.2".parse().unwrap()));
        let all_but = Cidr::parse("128.0.0.0/1").unwrap();
        assert!(all_but.contains("255.0.0.1".parse().unwrap()) && !all_but.contains("1.0.0.1".parse().unwrap()));
    }

    #[test]
    fn without_trusted_proxies_nothing_changes() {
        let none = TrustedProxies::default();
        for (cf, xff, peer) in [
            (Some("203.0.113.9"), Some("1.1.1.1"), Some("10.0.0.1")),
            (None, Some("6.6.6.6, 198.51.100.7"), Some("10.0.0.1")),
            (None, Some("6.6.6.6, unknown"), Some("192.0.2.1:5000")),
            (None, None, None),
        ] {
            let sources = Sources { cf_connecting_ip: cf, x_forwarded_for: xff, peer };
            assert_eq!(client_identity_behind(&sources, &none), client_identity(&sources));
        }
    }

    #[test]
    fn an_untrusted_nearest_address_is_the_client_whatever_the_header_says() {
        let x = Source::CfConnectingIp;
        assert_eq!(behind(Some("203.0.113.9"), Some("1.1.1.1, 10.0.0.1"), None), some("203.0.113.9", x));
        assert_eq!(behind(None, Some("1.1.1.1"), Some("192.0.2.1:5000")), some("192.0.2.1", Source::Peer));
        // CF-Connecting-IP is the nearest address; the peer is not consulted beside it.
        assert_eq!(behind(Some("203.0.113.9"), None, Some("10.0.0.1")), some("203.0.113.9", x));
    }

    #[test]
    fn behind_a_trusted_proxy_the_header_is_walked_past_trusted_hops() {
        let xff = Source::ForwardedFor;
        // Cloudflare's address for the load balancer in front of it is trusted: the header decides.
        assert_eq!(behind(Some("10.0.0.5"), Some("198.51.100.7"), None), some("198.51.100.7", xff));
        assert_eq!(behind(Some("10.0.0.5"), Some("198.51.100.7, 10.0.0.5"), None), some("198.51.100.7", xff));
        assert_eq!(
            behind(Some("10.0.0.5"), Some("6.6.6.6, 198.51.100.7, 10.2.0.1,[fd00::9]:443 , ::ffff:10.9.9.9"), None),
            some("198.51.100.7", xff)
        );
        // A trusted peer, without CF-Connecting-IP.
        assert_eq!(behind(None, Some("198.51.100.7, 10.0.0.9"), Some("10.0.0.1:41000")), some("198.51.100.7", xff));
        // Nothing nearer: the walk starts at the header's right end.
        assert_eq!(behind(None, Some("198.51.100.7, 10.0.0.9"), None), some("198.51.100.7", xff));
        // The client's own hops, left of the first untrusted one, are never read.
        for typed in ["1.2.3.4", "9.9.9.9, 8.8.8.8", "garbage", "10.0.0.1", ""] {
            let header = alloc::format!("{typed}, 2001:db8:aa:bb::1, 10.0.0.9");
            assert_eq!(behind(Some("10.0.0.5"), Some(&header), None), some("2001:db8:aa:bb::/64", xff), "{header}");
        }
        // An IPv4-mapped client counts as its IPv4 address; ports are read past.
        assert_eq!(behind(Some("127.0.0.1"), Some("::ffff:198.51.100.7, 10.0.0.9"), None), some("198.51.100.7", xff));
        assert_eq!(behind(Some("127.0.0.1"), Some("198.51.100.7:80"), None), some("198.51.100.7", xff));
        assert_eq!(behind(Some("127.0.0.1"), Some("[2001:db8::1]:443"), None), some("2001:db8::/64", xff));
    }

    #[test]
    fn a_walk_that_ends_on_trusted_hops_counts_the_last_one() {
        let xff = Source::ForwardedFor;
        // Only proxies: the request came from the leftmost (a health check, say).
        assert_eq!(behind(Some("10.0.0.5"), Some("10.0.0.7, 10.0.0.6"), None), some("10.0.0.7", xff));
        // No header at all: the trusted nearest address itself.
        assert_eq!(behind(Some("10.0.0.5"), None, None), some("10.0.0.5", Source::CfConnectingIp));
        assert_eq!(behind(None, None, Some("10.0.0.1:80")), some("10.0.0.1", Source::Peer));
        assert_eq!(behind(None, None, None), None);
    }

    #[test]
    fn a_hop_that_is_not_an_address_stops_the_walk_at_the_proxy_that_passed_it() {
        let (xff, cf) = (Source::ForwardedFor, Source::CfConnectingIp);
        let long = "1".repeat(MAX_HOP_BYTES + 1);
        for bad in
            ["garbage", "", "   ", "unknown", "1.2.3.4 5.6.7.8", "1.2.3.4\r\n 5.6.7.8", "1.2.3.4:", "[::1", &long]
        {
            // The bad hop right of the client's: the trusted hop that carried it is counted.
            let header = alloc::format!("198.51.100.7, {bad}, 10.0.0.9");
            assert_eq!(behind(Some("10.0.0.5"), Some(&header), None), some("10.0.0.9", xff), "{header:?}");
            // Rightmost: the nearest address, which is trusted, is counted.
            let header = alloc::format!("198.51.100.7,{bad}");
            assert_eq!(behind(Some("10.0.0.5"), Some(&header), None), some("10.0.0.5", cf), "{header:?}");
            // Nothing nearer, nothing good: no identity (requests share `unknown`).
            assert_eq!(behind(None, Some(&header), None), None, "{header:?}");
        }
        // A hop of exactly the longest length is read.
        let padded = alloc::format!("{}198.51.100.7", " ".repeat(MAX_HOP_BYTES - 12));
        assert_eq!(behind(Some("10.0.0.5"), Some(&padded), None), some("198.51.100.7", xff));
        for header in [alloc::format!(" {padded}"), alloc::format!("1.2.3.4, {padded}")] {
            assert_eq!(behind(Some("10.0.0.5"), Some(&header), None), some("10.0.0.5", cf), "one byte too long");
        }
        // An address CF-Connecting-IP cannot hold falls through to the peer.
        assert_eq!(behind(Some("nope"), Some("198.51.100.7"), Some("10.0.0.1")), some("198.51.100.7", xff));
    }

    #[test]
    fn the_walk_reads_at_most_max_forwarded_hops() {
        let hop = |i: usize| alloc::format!("10.0.{}.{}", i / 256, i % 256);
        let trusted: Vec<_> = (0..40).map(hop).collect();
        let header = alloc::format!("198.51.100.7, {}", trusted.join(", "));
        // The 32nd hop from the right is the last read: trusted, it is the identity.
        assert_eq!(
            behind(Some("10.0.0.5"), Some(&header), None),
            some(&hop(40 - MAX_FORWARDED_HOPS), Source::ForwardedFor)
        );
        let header = alloc::format!("198.51.100.7, {}", trusted[..MAX_FORWARDED_HOPS - 1].join(", "));
        assert_eq!(behind(Some("10.0.0.5"), Some(&header), None), some("198.51.100.7", Source::ForwardedFor));
    }

    #[test]
    fn hostile_headers_of_60_kb_are_read_only_at_their_end() {
        let bound = MAX_FORWARDED_HOPS * (MAX_HOP_BYTES + 1);
        let lan = lan();
        let start = Some(Identity::new("10.0.0.5".parse().unwrap(), Source::CfConnectingIp));
        for (piece, want) in [
            // 32 trusted hops read, the rest never.
            (", 10.0.0.1", Some("10.0.0.1")),
            (",::ffff:10.1.1.1", Some("10.1.1.1")),
            (", [fd00::1]:443", Some("fd00::/64")),
            // The first untrusted hop from the right.
            (", 1.2.3.4:80, 10.0.0.1", Some("1.2.3.4")),
            // An empty rightmost hop, or one endless hop: the trusted nearest address.
            ("10.0.0.1, ", Some("10.0.0.5")),
            (",", Some("10.0.0.5")),
            (" ", Some("10.0.0.5")),
            ("x", Some("10.0.0.5")),
        ] {
            let header = piece.repeat(60_000 / piece.len());
            let (id, read) = walk(Some(&header), &lan, start);
            assert!(read <= bound, "{piece:?}: read {read} bytes");
            assert_eq!(id.map(|i| i.ip.to_string()).as_deref(), want, "{piece:?}");
        }
        let hops = "1.2.3.4,".repeat(1_000);
        let (id, read) = walk(Some(&hops), &lan, start);
        assert_eq!(id.map(|i| i.ip.to_string()).as_deref(), Some("10.0.0.5"), "a trailing empty hop stops the walk");
        assert!(read <= MAX_HOP_BYTES + 1);
        let hops = hops.trim_end_matches(',');
        assert_eq!(walk(Some(hops), &lan, start).0.map(|i| i.ip.to_string()).as_deref(), Some("1.2.3.4"));
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use alloc::string::String;
        use proptest::prelude::*;

        /// The walk as the documentation states it, on a header split whole (a test can afford it).
        fn oracle(sources: &Sources<'_>, trusted: &TrustedProxies) -> Option<Identity> {
            let nearest = sources
                .cf_connecting_ip
                .and_then(parse_ip)
                .map(|ip| Identity::new(ip, Source::CfConnectingIp))
                .or_else(|| sources.peer.and_then(parse_ip).map(|ip| Identity::new(ip, Source::Peer)));
            if let Some(id) = nearest.filter(|id| !trusted.contains(id.address)) {
                return Some(id);
            }
            let mut last = nearest;
            let Some(header) = sources.x_forwarded_for else { return last };
            for hop in header.split(',').rev().take(MAX_FORWARDED_HOPS) {
                let Some(ip) = Some(hop).filter(|h| h.len() <= MAX_HOP_BYTES).and_then(parse_ip) else { break };
                last = Some(Identity::new(ip, Source::ForwardedFor));
                if !trusted.contains(ip) {
                    break;
                }
            }
            last
        }

        fn hop() -> impl Strategy<Value = String> {
            let trusted = ["10.0.0.1", "10.2.3.4:80", "[fd00::1]:443", "::ffff:10.0.0.7", "127.0.0.1"];
            let untrusted = ["198.51.100.7", "2001:db8::1", "[2001:db8::2]:8080", "::ffff:1.2.3.4", "1.2.3.4:80"];
            let bad = ["", " ", "unknown", "[::1", "1.2.3.4:", "\r\n 1.2.3.4", "_hidden", "1.2.3.4 5.6.7.8"];
            prop_oneof![
                prop::sample::select(trusted.to_vec()).prop_map(String::from),
                prop::sample::select(untrusted.to_vec()).prop_map(String::from),
                prop::sample::select(bad.to_vec()).prop_map(String::from),
                ".{0,80}",
                "[0-9a-f:.\\[\\] ]{0,70}",
            ]
        }

        fn header() -> impl Strategy<Value = String> {
            prop_oneof![
                3 => (proptest::collection::vec(hop(), 0..48), prop::sample::select(vec![",", ", ", " , ", ",\r\n "]))
                    .prop_map(|(hops, sep)| hops.join(sep)),
                1 => any::<String>(),
                // 60 KB of one piece: a flood of hops, commas, spaces or one endless hop.
                1 => (prop::sample::select(vec!["10.0.0.1,", ",", " ", "x", "1.2.3.4, ", "[fd00::1]:443,", "::ffff:10.1.1.1,"]), 1usize..60_000)
                    .prop_map(|(piece, n)| piece.repeat(n.div_ceil(piece.len()))),
            ]
        }

        fn address() -> impl Strategy<Value = Option<String>> {
            proptest::option::of(prop_oneof![hop(), Just("10.0.0.5".into()), Just("203.0.113.9".into())])
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2_000))]

            /// Whatever the headers hold: no panic, a bounded read of the header's end, the
            /// documented walk's answer, and an identity that is none, the nearest address,
            /// or a hop reached past trusted hops only.
            #[test]
            fn any_header_gives_a_walked_address_or_none(
                xff in proptest::option::of(header()),
                cf in address(),
                peer in address(),
            ) {
                let trusted = lan();
                let sources = Sources { cf_connecting_ip: cf.as_deref(), x_forwarded_for: xff.as_deref(), peer: peer.as_deref() };
                let found = client_identity_behind(&sources, &trusted);
                prop_assert_eq!(found, oracle(&sources, &trusted));
                let _ = client_identity(&sources);
                let nearest = cf
                    .as_deref()
                    .and_then(parse_ip)
                    .map(|ip| Identity::new(ip, Source::CfConnectingIp))
                    .or_else(|| peer.as_deref().and_then(parse_ip).map(|ip| Identity::new(ip, Source::Peer)));
                let nearest_trusted = nearest.is_none_or(|id| trusted.contains(id.address));
                if nearest_trusted {
                    let (walked, read) = walk(xff.as_deref(), &trusted, nearest);
                    prop_assert!(read <= MAX_FORWARDED_HOPS * (MAX_HOP_BYTES + 1), "read {} bytes", read);
                    prop_assert_eq!(walked, found);
                }
                match found {
                    None => prop_assert!(nearest.is_none()),
                    Some(id) if id.source == Source::ForwardedFor => {
                        prop_assert!(nearest_trusted);
                        let header = xff.as_deref().unwrap_or_default();
                        let hops: Vec<_> = header.rsplit(',').take(MAX_FORWARDED_HOPS + 1).collect();
                        let at = hops.iter().position(|h| parse_ip(h) == Some(id.address)).unwrap();
                        prop_assert!(at < MAX_FORWARDED_HOPS);
                        for right in &hops[..at] {
                            prop_assert!(parse_ip(right).is_some_and(|ip| trusted.contains(ip)), "{:?} right of {:?}", right, id);
                        }
                    }
                    Some(id) => prop_assert_eq!(Some(id), nearest),
                }
            }
        }
    }
}
