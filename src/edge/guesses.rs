//! Failed tries of the edge's own secrets (the admin and egress bearer tokens), counted per
//! client: past [`GUESSES_PER_MINUTE`] a client is answered `429` before its token is even
//! compared, so guessing a token costs a minute per handful of tries from each address.
//!
//! ```text
//! a client's tries     ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ ✗ | ✗ ✓      one more try every 6 s
//! answers              401 × 10              | 429 429   (the right token too: it is not compared)
//! ```
//!
//! Counted in this isolate (a per-isolate table of salted keys, bounded in size, as the
//! pre-read checks are); a request with no client address counts under `0.0.0.0`, which all
//! such requests share. A right token costs nothing and clears nothing.

use crate::core::keyed::Keyed;
use crate::core::limit::{Decision, Gcra};
use crate::core::time::{Instant, Span};
use crate::edge::identity::ClientIp;
use core::net::Ipv4Addr;

/// Failed tries a client may make in a row; then one more every `60 s / GUESSES_PER_MINUTE`.
pub const GUESSES_PER_MINUTE: u32 = 10;
/// Clients whose failed tries are remembered at once (a full table refuses tries from new
/// clients until one of them has waited out its count).
pub const MAX_CLIENTS: usize = 10_000;

/// The failed tries of each client.
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
    table: Keyed<ClientIp, Gcra>,
}

impl Guesses {
    /// An empty table whose hash is salted with `salt` (draw it at random).
    pub fn new(salt: u64) -> Self {
        let quota = Gcra::new(GUESSES_PER_MINUTE, Span::from_secs(60), GUESSES_PER_MINUTE)
            .unwrap_or_else(|_| unreachable!("10 per minute, bursts of 10, is a valid quota"));
        Guesses { table: Keyed::new(quota, MAX_CLIENTS, salt) }
    }

    /// Whether the client at `ip` may try a token now; `Err(wait)` when it has failed too
    /// often (answer `429` with `Retry-After`, without comparing the token).
    ///
    /// # Errors
    /// How long the client must wait before its next try.
    pub fn may_try(&self, ip: Option<ClientIp>, now: Instant) -> Result<(), Span> {
        match self.table.peek(&key(ip), now, 1) {
            Ok(Decision::Deny { retry_after }) => Err(retry_after),
            _ => Ok(()),
        }
    }

    /// The client at `ip` tried a wrong token (or none) at `now`.
    pub fn failed(&mut self, ip: Option<ClientIp>, now: Instant) {
        let _ = self.table.check(&key(ip), now, 1);
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
