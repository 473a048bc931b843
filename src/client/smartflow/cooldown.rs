//! What a 429's `Retry-After` holds back, and for how long; and how long a failed save of
//! the cache waits before it is tried again. Time is an [`Instant`] on the caller's
//! monotonic clock (the one the buckets' seconds are read from).
//!
//! A cooldown is kept per [`Target`]: the organization a request belongs to when it is
//! known, else the network or device its URL names, else everything (global). A request is
//! held back by the global cooldown and by its own scope's, whichever ends later:
//!
//! ```text
//! t=0   429 on /organizations/O_1/…, Retry-After: 5   → org:O_1 until t=5
//! t=1   429 on /organizations/O_1/…, Retry-After: 1   → org:O_1 still until t=5 (never shortened)
//! t=2   429 on /administered/…,      Retry-After: 4   → global until t=6
//! t=3   /networks/N_1 (of O_1) waits 3 s; /organizations/O_2 waits 3 s (global)
//! t=6   nothing held back
//! ```

use crate::core::time::{Instant, Span};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// What a cooldown holds back.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// Every request.
    Global,
    /// The requests of one organization (named, or through a learned network or device).
    Org(String),
    /// The requests naming a network whose organization is not known.
    Network(String),
    /// The requests naming a device whose organization is not known.
    Device(String),
}

impl fmt::Display for Target {
    /// `global`, `org:<id>`, `network:<id>` or `device:<serial>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Global => f.write_str("global"),
            Target::Org(id) => write!(f, "org:{id}"),
            Target::Network(id) => write!(f, "network:{id}"),
            Target::Device(serial) => write!(f, "device:{serial}"),
        }
    }
}

/// The cooldowns in force: until when each [`Target`] is held back.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::{Cooldowns, Target};
/// use sluicegate::{Instant, Span};
/// let mut cooldowns = Cooldowns::default();
/// let org = Target::Org("O_1".into());
/// cooldowns.hold_back(org.clone(), Instant::from_secs(5));
/// cooldowns.hold_back(org.clone(), Instant::from_secs(1)); // shorter: ignored
/// assert_eq!(cooldowns.hold(Some(&org), Instant::from_secs(2)), Span::from_secs(3));
/// assert_eq!(cooldowns.hold(None, Instant::from_secs(2)), Span::ZERO, "other scopes go");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cooldowns {
    /// One entry per scope. A list: only the scopes a 429 named recently are here, and the
    /// ended ones are dropped at each [`hold`](Cooldowns::hold).
    until: Vec<(Target, Instant)>,
}

impl Cooldowns {
    /// Hold `scope` back until `until`; a cooldown in force that ends later is kept (a
    /// cooldown is never shortened).
    pub fn hold_back(&mut self, scope: Target, until: Instant) {
        match self.until.iter_mut().find(|(held, _)| *held == scope) {
            Some((_, current)) => *current = (*current).max(until),
            None => self.until.push((scope, until)),
        }
    }

    /// How long a request in `scope` (`None`: a request in no scope but the global one) is
    /// still held back at `now`: until the later of the global cooldown and its scope's.
    /// Cooldowns that have ended are forgotten.
    pub fn hold(&mut self, scope: Option<&Target>, now: Instant) -> Span {
        self.until.retain(|&(_, until)| until > now);
        let global = self.until(&Target::Global).map_or(Span::ZERO, |until| until - now);
        let own = scope.and_then(|scope| self.until(scope)).map_or(Span::ZERO, |until| until - now);
        global.max(own)
    }

    /// Whether any cooldown is recorded (possibly ended, until the next
    /// [`hold`](Cooldowns::hold) forgets it).
    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }

    /// When `scope`'s own cooldown ends, if one is recorded.
    pub fn until(&self, scope: &Target) -> Option<Instant> {
        self.until.iter().find(|(held, _)| held == scope).map(|&(_, until)| until)
    }
}

/// The first wait before a failed save of the cache is tried again.
pub const FIRST_SAVE_RETRY: Span = Span::from_secs(1);
/// The longest wait between two tries of a failing save.
pub const MAX_SAVE_RETRY: Span = Span::from_secs(60);

/// How long to wait before trying a failed save again: 1 s after the first failure,
/// doubling after each further one up to 60 s, and back to 1 s once a save succeeds.
///
/// ```text
/// fail → 1 s → fail → 2 s → fail → 4 s … 32 s → fail → 60 s → fail → 60 s → ok → (1 s next time)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveBackoff {
    next: Span,
}

impl Default for SaveBackoff {
    fn default() -> Self {
        SaveBackoff { next: FIRST_SAVE_RETRY }
    }
}

impl SaveBackoff {
    /// A save failed: how long to wait before the next try.
    pub fn failed(&mut self) -> Span {
        let wait = self.next;
        self.next = wait.saturating_mul(2).min(MAX_SAVE_RETRY);
        wait
    }

    /// A save succeeded: the next failure waits [`FIRST_SAVE_RETRY`] again.
    pub fn succeeded(&mut self) {
        self.next = FIRST_SAVE_RETRY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec::Vec;

    fn at(secs: u64) -> Instant {
        Instant::from_secs(secs)
    }

    fn org(id: &str) -> Target {
        Target::Org(id.into())
    }

    #[test]
    fn a_cooldown_in_force_is_never_shortened_but_a_longer_one_extends_it() {
        let mut cooldowns = Cooldowns::default();
        cooldowns.hold_back(org("O_1"), at(5));
        cooldowns.hold_back(org("O_1"), at(1));
        assert_eq!(cooldowns.until(&org("O_1")), Some(at(5)));
        cooldowns.hold_back(org("O_1"), at(8));
        assert_eq!(cooldowns.hold(Some(&org("O_1")), at(0)), Span::from_secs(8));
    }

    #[test]
    fn a_request_waits_for_the_later_of_the_global_cooldown_and_its_own() {
        let mut cooldowns = Cooldowns::default();
        cooldowns.hold_back(org("O_1"), at(5));
        cooldowns.hold_back(Target::Global, at(6));
        assert_eq!(cooldowns.hold(Some(&org("O_1")), at(3)), Span::from_secs(3));
        assert_eq!(cooldowns.hold(Some(&org("O_2")), at(3)), Span::from_secs(3), "global holds everyone");
        assert_eq!(cooldowns.hold(None, at(3)), Span::from_secs(3));
        cooldowns.hold_back(org("O_1"), at(9));
        assert_eq!(cooldowns.hold(Some(&org("O_1")), at(3)), Span::from_secs(6));
    }

    #[test]
    fn other_scopes_are_not_held_back() {
        let mut cooldowns = Cooldowns::default();
        cooldowns.hold_back(Target::Network("N_9".into()), at(2));
        assert_eq!(cooldowns.hold(Some(&Target::Network("N_1".into())), at(0)), Span::ZERO);
        assert_eq!(cooldowns.hold(Some(&Target::Device("N_9".into())), at(0)), Span::ZERO, "kinds differ");
        assert_eq!(cooldowns.hold(Some(&org("N_9")), at(0)), Span::ZERO);
        assert_eq!(cooldowns.hold(None, at(0)), Span::ZERO);
    }

    #[test]
    fn ended_cooldowns_are_forgotten() {
        let mut cooldowns = Cooldowns::default();
        cooldowns.hold_back(org("O_1"), at(2));
        assert!(!cooldowns.is_empty());
        assert_eq!(cooldowns.hold(Some(&org("O_1")), at(2)), Span::ZERO, "it ends at its instant");
        assert!(cooldowns.is_empty());
    }

    #[test]
    fn scopes_are_written_as_their_keys() {
        let scopes = [Target::Global, org("O_1"), Target::Network("N_1".into()), Target::Device("Q2".into())];
        let keys: Vec<_> = scopes.iter().map(ToString::to_string).collect();
        assert_eq!(keys, ["global", "org:O_1", "network:N_1", "device:Q2"]);
    }

    #[test]
    fn a_failing_save_is_retried_after_one_second_doubling_to_a_minute() {
        let mut backoff = SaveBackoff::default();
        let waits: Vec<u64> = (0..9).map(|_| backoff.failed().as_nanos() / 1_000_000_000).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), FIRST_SAVE_RETRY);
    }
}
