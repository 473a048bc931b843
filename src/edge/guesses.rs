//! Failed tries of the edge's own secrets (the admin and egress bearer tokens), counted per
//! client: past [`GUESSES_PER_MINUTE`] a client is answered `429` before its token is even
//! compared, so guessing a token costs a minute per handful of tries from each address.
//!
//! ```text
//! a client's tries     ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ | ✗ ✓      one more try every 6 s
//! answers              401 × 10              | 429 429   (the right token too: it is not compared)
//! ```
//!
//! Counted in this isolate, as the pre-read checks are, in a table of salted keys bounded in
//! size ([`MAX_CLIENTS`]; past it, new clients share one count, so more addresses buy no more
//! tries); a request with no client address counts under `0.0.0.0`, which all such requests
//! share. A right token costs nothing and clears nothing.

use crate::core::limit::{Decision, Gcra};
use crate::core::time::{Instant, Span};
use crate::edge::identity::ClientIp;
use core::net::{Ipv4Addr, Ipv6Addr};
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// Failed tries a client may make in a row; then one more every `60 s / GUESSES_PER_MINUTE`.
pub const GUESSES_PER_MINUTE: u32 = 10;
/// Clients whose failed tries are remembered at once. A client that fails while the table
/// is full of clients still counting is counted with every other such client under one
/// shared count, so a crowd of addresses gets no more tries than one.
pub const MAX_CLIENTS: usize = 10_000;
/// The shared count of the clients a full table has no room for.
const OVERFLOW: ClientIp = ClientIp::V6Prefix(Ipv6Addr::UNSPECIFIED);

/// The failed tries of each client: a GCRA's theoretical arrival time per client address.
///
/// # Examples
/// ```
/// use sluicegate::edge::guesses::Guesses;
/// use sluicegate::Instant;
/// let mut guesses = Guesses::new(7);
/// let now = Instant::from_secs(100);
/// for _ in 0..10 {
///     assert!(guesses.may_try(None, now).is_ok());
///     guesses.failed(None, now);
/// }
/// assert_eq!(guesses.may_try(None, now).unwrap_err().as_secs_ceil(), 6);
/// ```
pub struct Guesses {
    quota: Gcra,
    tats: HashMap<ClientIp, Instant, FixedState>,
    max_clients: usize,
}

impl Guesses {
    /// An empty table whose hash is salted with `salt` (draw it at random).
    pub fn new(salt: u64) -> Self {
        Self::with_room(salt, MAX_CLIENTS)
    }

    /// An empty table with room for `max_clients` (at least 1) besides the shared count.
    pub fn with_room(salt: u64, max_clients: usize) -> Self {
        let quota = Gcra::new(GUESSES_PER_MINUTE, Span::from_secs(60), GUESSES_PER_MINUTE)
            .unwrap_or_else(|_| unreachable!("10 per minute, bursts of 10, is a valid quota"));
        Guesses { quota, tats: HashMap::with_hasher(FixedState::with_seed(salt)), max_clients: max_clients.max(1) }
    }

    /// Whether the client at `ip` may try a token now; `Err(wait)` when it has failed too
    /// often (answer `429` with `Retry-After`, without comparing the token).
    ///
    /// # Errors
    /// How long the client must wait before its next try.
    pub fn may_try(&self, ip: Option<ClientIp>, now: Instant) -> Result<(), Span> {
        let ip = key(ip);
        let tat = self.tats.get(&ip).or_else(|| self.tats.get(&OVERFLOW).filter(|_| self.is_full()));
        // A copy is checked: looking charges nothing.
        let mut tat = tat.copied().unwrap_or(Instant::ZERO);
        match self.quota.check_tat(&mut tat, now, 1) {
            Ok(Decision::Deny { retry_after }) => Err(retry_after),
            _ => Ok(()),
        }
    }

    /// The client at `ip` tried a wrong token (or none) at `now`.
    pub fn failed(&mut self, ip: Option<ClientIp>, now: Instant) {
        let mut ip = key(ip);
        if !self.tats.contains_key(&ip) && self.is_full() {
            // Clients whose counts are full again (their TAT passed) are forgotten first.
            self.tats.retain(|&kept, tat| kept == OVERFLOW || *tat > now);
            if self.is_full() {
                ip = OVERFLOW;
            }
        }
        let tat = self.tats.entry(ip).or_insert(Instant::ZERO);
        let _ = self.quota.check_tat(tat, now, 1);
    }

    fn is_full(&self) -> bool {
        self.tats.len() - usize::from(self.tats.contains_key(&OVERFLOW)) >= self.max_clients
    }
}

fn key(ip: Option<ClientIp>) -> ClientIp {
    ip.unwrap_or(ClientIp::V4(Ipv4Addr::UNSPECIFIED))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(last: u8) -> Option<ClientIp> {
        Some(ClientIp::V4(Ipv4Addr::new(203, 0, 113, last)))
    }

    #[test]
    fn a_guesser_gets_ten_tries_then_one_every_six_seconds() {
        let mut g = Guesses::new(1);
        let t0 = Instant::from_secs(1_000);
        let mut tries = 0;
        while g.may_try(v4(1), t0).is_ok() {
            g.failed(v4(1), t0);
            tries += 1;
            assert!(tries <= 10);
        }
        assert_eq!(tries, 10);
        assert_eq!(g.may_try(v4(1), t0), Err(Span::from_secs(6)));
        assert!(g.may_try(v4(1), t0 + Span::from_secs(6)).is_ok());
        assert!(g.may_try(v4(2), t0).is_ok(), "another client is counted apart");
    }

    #[test]
    fn over_a_minute_a_guesser_makes_at_most_twenty_tries() {
        let mut g = Guesses::new(2);
        let t0 = Instant::from_secs(50);
        let mut tries = 0;
        for ms in (0..60_000).step_by(100) {
            let now = t0 + Span::from_millis(ms);
            if g.may_try(v4(9), now).is_ok() {
                g.failed(v4(9), now);
                tries += 1;
            }
        }
        assert_eq!(tries, 10 + 9, "the burst, then one every 6 s");
    }

    #[test]
    fn clients_a_full_table_has_no_room_for_share_one_count() {
        let mut g = Guesses::with_room(4, 2);
        let now = Instant::from_secs(9);
        g.failed(v4(1), now);
        g.failed(v4(2), now);
        for last in 3..=12 {
            assert!(g.may_try(v4(last), now).is_ok(), "{last}");
            g.failed(v4(last), now);
        }
        assert!(g.may_try(v4(200), now).is_err(), "ten addresses past the room spent the shared count");
        assert!(g.may_try(v4(1), now).is_ok(), "a client with its own count keeps it");
        // A minute on, the counts are full again and forgotten: room for new clients.
        let later = now + Span::from_secs(61);
        g.failed(v4(100), later);
        assert!(g.may_try(v4(200), later).is_ok());
    }

    #[test]
    fn requests_without_an_address_share_one_count() {
        let mut g = Guesses::new(3);
        let now = Instant::from_secs(5);
        for _ in 0..10 {
            g.failed(None, now);
        }
        assert!(g.may_try(None, now).is_err());
        assert!(g.may_try(Some(ClientIp::V4(Ipv4Addr::UNSPECIFIED)), now).is_err());
        assert!(g.may_try(v4(1), now).is_ok());
    }
}
