//! A store of tenant buckets, as the edge keeps one (a Durable Object per tenant and colo, or
//! per tenant for the fleet) and the simulator keeps it in memory: each tenant's buckets of
//! the limit they are charged under, started afresh when that limit or its generation (when
//! its override was set) changes, so a new override is not held back by the old limit's
//! debt.
//!
//! A store that writes its buckets down (a Durable Object) hands [`TenantStore::charge`] what
//! it wrote for a tenant it has not charged since it started, and after a charge that says so
//! ([`Charged::write`]) writes down [`TenantStore::record`] under [`record_key`]: a record of
//! another limit or generation, or one that does not read, is ignored (the buckets start
//! afresh).

use crate::core::limit::{Decision, SaveState};
use crate::core::time::{Instant, Span};
use crate::edge::pipeline::tenant::Charge;
use crate::edge::tenants::{TenantBuckets, TenantLimit};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Where a tenant's buckets are written down in its store.
pub fn record_key(tenant: &str) -> String {
    format!("tenant-buckets\u{1f}{tenant}")
}

struct Held {
    tenant: String,
    /// The limit (as JSON) and generation the buckets are of.
    seen: String,
    buckets: TenantBuckets,
    /// Whether the buckets are written down (a limit that refills in under a few seconds is
    /// not: its state would be fresh again by the time it was read).
    keeps: bool,
}

/// What a charge came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charged {
    /// Admitted, or the wait in whole milliseconds (at least 1).
    pub decision: Decision,
    /// Whether the buckets changed and their state is kept: write down
    /// [`TenantStore::record`].
    pub write: bool,
}

/// The buckets of the tenants one store has charged: one, as a store is named by its tenant
/// (and colo), so they are looked up in turn.
#[derive(Default)]
pub struct TenantStore {
    held: Vec<Held>,
}

impl TenantStore {
    /// Charge `tenant`'s buckets of `limit` (its JSON, as the stage resolved it) and
    /// `generation` with `what`, at `now`. `stored` is asked, only for a tenant this store has
    /// not charged since it started and whose limit keeps its state, for the record written
    /// down for it.
    ///
    /// # Errors
    /// A `limit` that is not a valid limit, naming the field.
    pub fn charge(
        &mut self,
        tenant: &str,
        limit: &str,
        generation: u64,
        what: Charge,
        now: Instant,
        stored: impl FnOnce() -> Option<String>,
    ) -> Result<Charged, String> {
        let seen = format!("{generation}\u{1f}{limit}");
        let at = self.held.iter().position(|held| held.tenant == tenant);
        let at = match at {
            Some(at) if self.held[at].seen == seen => at,
            known => {
                let parsed =
                    TenantLimit::from_json_text(limit, None).map_err(|e| format!("{}: {}", e.field, e.message))?;
                let mut buckets = parsed.buckets();
                let keeps = parsed.keeps_state();
                if keeps && known.is_none() {
                    restore(&mut buckets, &seen, stored());
                }
                let fresh = Held { tenant: tenant.to_string(), seen, buckets, keeps };
                match known {
                    Some(at) => {
                        self.held[at] = fresh;
                        at
                    }
                    None => {
                        self.held.push(fresh);
                        self.held.len() - 1
                    }
                }
            }
        };
        let held = &mut self.held[at];
        let decision = match what {
            Charge::Request(bytes) => held.buckets.charge(now, bytes),
            Charge::More(bytes) => held.buckets.charge_more(now, bytes),
        };
        Ok(match decision {
            Decision::Allow { .. } => {
                Charged { decision: Decision::Allow { remaining: 0, reset: Span::ZERO }, write: held.keeps }
            }
            Decision::Deny { retry_after } => Charged {
                decision: Decision::Deny { retry_after: Span::from_millis(retry_after.as_millis_ceil().max(1)) },
                write: false,
            },
        })
    }

    /// `tenant`'s buckets as written down: the limit and generation they are of, then their
    /// state as words.
    pub fn record(&self, tenant: &str) -> Option<String> {
        let held = self.held.iter().find(|held| held.tenant == tenant)?;
        let mut words = Vec::new();
        held.buckets.save(&mut words);
        let words: Vec<String> = words.iter().map(u64::to_string).collect();
        Some(format!("{}\u{1e}{}", held.seen, words.join(",")))
    }
}

/// `buckets` as `written` says, when it is a record of `seen` that reads whole (inlined: a
/// store that writes nothing down hands none, and none of this is left).
#[inline(always)]
fn restore(buckets: &mut TenantBuckets, seen: &str, written: Option<String>) {
    let Some(written) = written else { return };
    let Some((of, words)) = written.rsplit_once('\u{1e}') else { return };
    if of != seen {
        return;
    }
    let words: Option<Vec<u64>> = words.split(',').map(|w| w.parse().ok()).collect();
    let mut trial = buckets.clone();
    let mut words = words.unwrap_or_default().into_iter();
    if trial.restore(&mut words).is_some() && words.next().is_none() {
        *buckets = trial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOW: &str = r#"{"rate": 0.01, "burst": 2}"#;
    const OTHER: &str = r#"{"rate": 0.01, "burst": 3}"#;
    const T: Instant = Instant::from_secs(1_000);

    fn admitted(charged: &Charged) -> bool {
        charged.decision.is_allowed()
    }

    #[test]
    fn a_tenant_s_burst_is_spent_then_it_waits_in_whole_milliseconds() {
        let mut store = TenantStore::default();
        let mut charge = |what| store.charge("acme", SLOW, 0, what, T, || None).unwrap();
        assert!(admitted(&charge(Charge::Request(0))));
        assert!(admitted(&charge(Charge::Request(0))));
        let refused = charge(Charge::Request(0));
        let Decision::Deny { retry_after } = refused.decision else { panic!("{refused:?}") };
        assert_eq!(retry_after, Span::from_secs(100), "one request every 100 s");
        assert!(!refused.write, "nothing to write down for a refusal");
    }

    #[test]
    fn a_new_limit_or_generation_starts_the_buckets_afresh() {
        let mut store = TenantStore::default();
        for _ in 0..2 {
            store.charge("acme", SLOW, 0, Charge::Request(0), T, || None).unwrap();
        }
        assert!(!admitted(&store.charge("acme", SLOW, 0, Charge::Request(0), T, || None).unwrap()));
        assert!(admitted(&store.charge("acme", SLOW, 7, Charge::Request(0), T, || None).unwrap()), "a new override");
        assert!(admitted(&store.charge("acme", OTHER, 7, Charge::Request(0), T, || None).unwrap()), "a new limit");
        assert!(admitted(&store.charge("other", SLOW, 0, Charge::Request(0), T, || None).unwrap()), "tenants apart");
        assert!(store
            .charge("acme", r#"{"rate": -1}"#, 7, Charge::Request(0), T, || None)
            .unwrap_err()
            .contains("rate"));
    }

    #[test]
    fn a_store_that_restarts_takes_back_what_it_wrote_down_of_the_same_limit_only() {
        let mut store = TenantStore::default();
        assert!(store.charge("acme", SLOW, 0, Charge::Request(0), T, || None).unwrap().write);
        let first = store.record("acme").unwrap();
        let second = store.charge("acme", SLOW, 0, Charge::Request(0), T, || None).unwrap();
        assert!(second.write, "a slow limit keeps its state");
        let written = store.record("acme").unwrap();
        assert_ne!(first, written);
        assert_eq!(store.record("nobody"), None);
        let mut restarted = TenantStore::default();
        let asked = core::cell::Cell::new(0);
        let after = restarted
            .charge("acme", SLOW, 0, Charge::Request(0), T, || {
                asked.set(asked.get() + 1);
                Some(written.clone())
            })
            .unwrap();
        assert!(!admitted(&after), "the burst spent before the restart stays spent");
        assert_eq!(asked.get(), 1);
        let mut other_limit = TenantStore::default();
        assert!(admitted(
            &other_limit.charge("acme", OTHER, 0, Charge::Request(0), T, || Some(written.clone())).unwrap()
        ));
        let mut garbled = TenantStore::default();
        let bad = format!("{}\u{1e}1,x", written.rsplit_once('\u{1e}').unwrap().0);
        assert!(admitted(&garbled.charge("acme", SLOW, 0, Charge::Request(0), T, || Some(bad.clone())).unwrap()));
        assert_eq!(record_key("acme"), "tenant-buckets\u{1f}acme");
    }
}
