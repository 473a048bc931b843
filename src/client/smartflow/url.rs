//! §3: the organization, network and device identifiers a request URL names.
//!
//! The specification defines three regular expressions, *searched* (not fully matched)
//! against the URL: `/organizations/([^/]+)`, `/networks/([^/]+)` and `/devices/([^/]+)`.
//! This module reproduces them exactly with plain string scanning:
//!
//! - the leftmost occurrence of the marker followed by at least one character other than
//!   `/` wins; an occurrence followed by `/` or by the end of the URL is skipped, and the
//!   search goes on (`/networks//networks/N_1` names `N_1`);
//! - the capture runs to the next `/` or to the end of the URL. A query string or fragment
//!   directly after the identifier is therefore part of it (`/networks/N_1?perPage=5` names
//!   `N_1?perPage=5`), exactly as the reference's `[^/]+` does; pass the path without its
//!   query when that is not wanted;
//! - matching is case-sensitive, anywhere in the URL (scheme, host and API prefix are
//!   ignored: `https://api.meraki.com/api/v1/networks/N_1` names `N_1`).
//!
//! Nothing here allocates: captures borrow from the URL.

/// Which kind of identifier a lookup is for: the resolver's `id_type` (§8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// A network id, from `/networks/<id>`.
    Network,
    /// A device serial, from `/devices/<serial>`.
    Device,
}

impl IdKind {
    /// The resolver's `id_type` string: `"network"` or `"device"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            IdKind::Network => "network",
            IdKind::Device => "device",
        }
    }
}

const ORGANIZATIONS: &str = "/organizations/";
const NETWORKS: &str = "/networks/";
const DEVICES: &str = "/devices/";

/// The organization id a URL names explicitly (`/organizations/<id>`).
///
/// # Examples
/// ```
/// use sluicegate::smartflow::url;
/// assert_eq!(url::org_id("/api/v1/organizations/O_1/networks"), Some("O_1"));
/// assert_eq!(url::org_id("/networks/N_1"), None);
/// ```
pub fn org_id(url: &str) -> Option<&str> {
    search(url, ORGANIZATIONS)
}

/// The network id a URL names (`/networks/<id>`).
///
/// # Examples
/// ```
/// use sluicegate::smartflow::url;
/// assert_eq!(url::network_id("/networks/N_1/clients"), Some("N_1"));
/// assert_eq!(url::network_id("/networks/N_1?perPage=5"), Some("N_1?perPage=5"));
/// ```
pub fn network_id(url: &str) -> Option<&str> {
    search(url, NETWORKS)
}

/// The device serial a URL names (`/devices/<serial>`).
///
/// # Examples
/// ```
/// use sluicegate::smartflow::url;
/// assert_eq!(url::serial("/devices/Q2XX-XXXX-XXXX/lldpCdp"), Some("Q2XX-XXXX-XXXX"));
/// ```
pub fn serial(url: &str) -> Option<&str> {
    search(url, DEVICES)
}

/// The identifier a resolver would be asked about: the network id when the URL names one,
/// else the device serial, else nothing.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::{url, IdKind};
/// assert_eq!(url::scoped_id("/devices/Q2/x/networks/N_1"), Some((IdKind::Network, "N_1")));
/// assert_eq!(url::scoped_id("/devices/Q2"), Some((IdKind::Device, "Q2")));
/// assert_eq!(url::scoped_id("/organizations/O_1"), None);
/// ```
pub fn scoped_id(url: &str) -> Option<(IdKind, &str)> {
    if let Some(id) = network_id(url) {
        return Some((IdKind::Network, id));
    }
    serial(url).map(|id| (IdKind::Device, id))
}

/// Whether a URL names a network or a device but no explicit organization (§5): a 429 on
/// it belongs to one specific, not yet known, organization. Purely structural: the learned
/// mappings play no part.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::url;
/// assert!(url::is_unresolved_scoped_url("/networks/N_9/clients"));
/// assert!(!url::is_unresolved_scoped_url("/organizations/O_1/networks/N_1"));
/// assert!(!url::is_unresolved_scoped_url("/administered/identities/me"));
/// ```
pub fn is_unresolved_scoped_url(url: &str) -> bool {
    org_id(url).is_none() && scoped_id(url).is_some()
}

/// The URL without its query and fragment: what a fetch wrapper routes by, so that
/// `/networks/N_1?perPage=5` names `N_1` (the searches above would take `N_1?perPage=5`).
///
/// # Examples
/// ```
/// use sluicegate::smartflow::url;
/// assert_eq!(url::without_query("https://api.meraki.com/api/v1/networks/N_1?perPage=5"), "https://api.meraki.com/api/v1/networks/N_1");
/// assert_eq!(url::without_query("/devices/Q2#top"), "/devices/Q2");
/// ```
pub fn without_query(url: &str) -> &str {
    let cut = url.bytes().position(|b| b == b'?' || b == b'#').unwrap_or(url.len());
    url.get(..cut).unwrap_or(url)
}

/// The regex search `<marker>([^/]+)`, where `marker` begins and ends with `/`.
fn search<'a>(url: &'a str, marker: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(pos) = url[from..].find(marker) {
        let start = from + pos + marker.len();
        let rest = &url[start..];
        let len = rest.find('/').unwrap_or(rest.len());
        if len > 0 {
            return Some(&rest[..len]);
        }
        // The marker's leading `/` is one byte: the next candidate starts just after it
        // (occurrences can overlap on a shared `/`).
        from += pos + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_capture_is_skipped_and_the_search_goes_on() {
        assert_eq!(network_id("/networks//networks/N_1"), Some("N_1"));
        assert_eq!(network_id("/networks/"), None);
        assert_eq!(network_id("/networks"), None);
        assert_eq!(org_id("/organizations//x"), None);
    }

    #[test]
    fn overlapping_markers_are_found_as_the_regex_would() {
        // The first marker captures "networks"; a regex search does the same.
        assert_eq!(network_id("/networks/networks/N_1"), Some("networks"));
        // The first marker is empty; the second one starts on its trailing slash.
        assert_eq!(org_id("/x/organizations//organizations/O_2"), Some("O_2"));
    }

    #[test]
    fn a_capture_runs_to_the_next_slash_or_the_end_including_query_and_non_ascii() {
        assert_eq!(serial("https://api.meraki.com/api/v1/devices/Q2?x=1#f"), Some("Q2?x=1#f"));
        assert_eq!(org_id("/organizations/Ørg 1/admins"), Some("Ørg 1"));
        assert_eq!(org_id("/Organizations/O_1"), None, "case-sensitive");
    }

    #[test]
    fn the_first_occurrence_wins() {
        assert_eq!(network_id("/networks/N_1/x/networks/N_2"), Some("N_1"));
    }

    #[test]
    fn the_query_and_fragment_are_cut_at_the_first_of_them() {
        assert_eq!(without_query("/networks/N_1/clients"), "/networks/N_1/clients");
        assert_eq!(without_query("/networks/N_1#a?b"), "/networks/N_1");
        assert_eq!(without_query("?x"), "");
    }

    #[test]
    fn resolver_id_types_are_the_reference_strings() {
        assert_eq!(IdKind::Network.as_str(), "network");
        assert_eq!(IdKind::Device.as_str(), "device");
    }
}
