//! The edge's tenant stage in the replay: a request the rules admitted goes through the
//! edge's own [`TenantCheck`], its steps answered in memory as the Worker answers them
//! (`worker/src/tenancy.rs`):
//!
//! - `Hash { key }`: the key's SHA-256, in lower-case hex;
//! - `ReadOverrides`: no runtime overrides (the simulator has no admin API);
//! - `Charge`: the store the stage names (per tenant and colo, or per tenant for the fleet
//!   scope), kept in memory and deciding as the edge's Durable Object does, with the same
//!   buckets ([`TenantBuckets`]), so a store always answers.
//!
//! A simulated request takes no time: the share in flight of a tenant admitted under
//! `max_queue` / `max_queue_bytes` is given back at once, so those never refuse here.
//! A body of no declared length is charged with its request, with no bytes, as the edge
//! charges it before it streams; the bytes it would bring as it streams are not known.

use super::edge::EdgeFacts;
use super::names::Names;
use super::stats::{TenantRefused, TenantStats};
use crate::core::limit::Decision;
use crate::core::time::Instant;
use crate::edge::pipeline::tenant::{Charge, StoreCharge};
use crate::edge::pipeline::tenant_store::TenantStore;
use crate::edge::pipeline::{Isolate, TenantAnswer, TenantCheck, TenantRefusal, TenantStep, TenantVerdict};
use crate::edge::tenants::{effective, is_tenant_name, Identify, Overrides, TenantLimit, Tenants};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use std::collections::HashMap;

/// The SHA-256 of `key` in lower-case hex: what the Worker answers a `Hash` step with.
pub(super) fn sha256_hex(key: &str) -> String {
    use sha2::{Digest, Sha256};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

/// The stores of tenant buckets, in memory: one per store name the stage asks (a Durable
/// Object each at the edge), each deciding as the object does ([`TenantStore`]), so a store
/// always answers.
#[derive(Default)]
pub(super) struct Stores {
    by_name: HashMap<String, TenantStore>,
}

impl Stores {
    /// The decision of the store `ask` names, at `now`.
    pub(super) fn charge(&mut self, ask: &StoreCharge<'_>, now: Instant) -> Result<Decision, String> {
        let store = match self.by_name.get_mut(ask.store) {
            Some(store) => store,
            None => self.by_name.entry(ask.store.to_owned()).or_default(),
        };
        let what = if ask.requests > 0 { Charge::Request(ask.bytes) } else { Charge::More(ask.bytes) };
        let charged = store.charge(ask.tenant, &ask.limit.to_json(), ask.generation, what, now, || None)?;
        Ok(charged.decision)
    }
}

/// What the stage decided about one request.
pub(super) enum Decided {
    /// The tenants section does not match it.
    NoTenant,
    /// Admitted, as this tenant; `true` when its limit refused it in shadow.
    Admitted(String, bool),
    /// Refused: how, the tenant when one was named, and the burst of its limit.
    Refused { refusal: TenantRefusal, tenant: Option<String>, burst: Option<u32> },
}

/// The tenant stage of a replay: the rules file's `tenants`, the stores, and what it did to
/// each tenant.
pub(super) struct TenantStage<'c> {
    tenants: &'c Tenants,
    /// API key hashes besides the file's: none (the edge's `SLUICEGATE_TENANT_KEYS` is a secret).
    keys: BTreeMap<String, String>,
    stores: Stores,
    /// The tenants that reached the stage, in the order first seen, and what it did to each.
    names: Names,
    stats: Vec<TenantStats>,
    /// Requests refused for naming no tenant (401).
    pub(super) unknown: u64,
}

impl<'c> TenantStage<'c> {
    pub(super) fn new(tenants: &'c Tenants) -> Self {
        TenantStage {
            tenants,
            keys: BTreeMap::new(),
            stores: Stores::default(),
            names: Names::default(),
            stats: Vec::new(),
            unknown: 0,
        }
    }

    /// Where its buckets are counted.
    pub(super) fn tenants(&self) -> &'c Tenants {
        self.tenants
    }

    /// What it did to each tenant, in the order first seen.
    pub(super) fn take_stats(&mut self) -> Vec<(String, TenantStats)> {
        let stats = core::mem::take(&mut self.stats);
        stats.into_iter().enumerate().map(|(i, s)| (self.names.name(i as u32).into(), s)).collect()
    }

    /// The stats of `tenant`.
    fn stats_of(&mut self, tenant: &str) -> &mut TenantStats {
        let id = self.names.intern(tenant) as usize;
        if id == self.stats.len() {
            self.stats.push(TenantStats::default());
        }
        &mut self.stats[id]
    }

    /// Takes a request the rules admitted through the stage, in `isolate` at `now`.
    pub(super) fn decide(&mut self, isolate: &mut Isolate, facts: &EdgeFacts, now: Instant) -> Decided {
        let request = facts.facts();
        let header = |name: &str| facts.header(name);
        let mut check = TenantCheck::new(Some(self.tenants), &self.keys, &request, facts.declared(), facts.has_body());
        // The tenant a key named (a refusal of its body's size does not say).
        let mut hashed = None;
        loop {
            let answer = match check.next(isolate, &header, now) {
                TenantStep::Done => break,
                TenantStep::Hash { key } => {
                    let hash = sha256_hex(key);
                    hashed = Some(hash.clone());
                    TenantAnswer::Hashed(hash)
                }
                TenantStep::ReadOverrides => TenantAnswer::Overrides(Ok(Overrides::default())),
                TenantStep::Charge(ask) => TenantAnswer::Charged(self.stores.charge(&ask, now)),
            };
            check.answer(isolate, answer, now);
        }
        match check.finish() {
            TenantVerdict::NoTenant => Decided::NoTenant,
            TenantVerdict::Admitted(admitted) => {
                // The request is answered at once: its share in flight is given back.
                if let Some(bytes) = admitted.share {
                    isolate.tenants.release(&admitted.tenant, bytes);
                }
                let tenant = String::from(&*admitted.tenant);
                let stats = self.stats_of(&tenant);
                stats.checks += 1;
                stats.admitted += 1;
                let shadow = admitted.shadow.is_some();
                stats.would_refuse += u64::from(shadow);
                Decided::Admitted(tenant, shadow)
            }
            TenantVerdict::Refused(refusal) => {
                let tenant = match &refusal {
                    TenantRefusal::Unknown => None,
                    TenantRefusal::Limited { tenant, .. } | TenantRefusal::Overloaded { tenant } => {
                        Some(tenant.clone())
                    }
                    TenantRefusal::TooLarge { .. } => self.named(facts, hashed.as_deref()),
                };
                match &tenant {
                    None => self.unknown += 1,
                    Some(name) => {
                        let stats = self.stats_of(name);
                        stats.checks += 1;
                        match refusal {
                            TenantRefusal::TooLarge { .. } => stats.too_large += 1,
                            TenantRefusal::Limited { .. } => stats.rate_limited += 1,
                            TenantRefusal::Overloaded { .. } => stats.overloaded += 1,
                            TenantRefusal::Unknown => {}
                        }
                    }
                }
                let burst = tenant.as_deref().and_then(|t| self.limit_of(t)).map(|l| l.burst);
                Decided::Refused { refusal, tenant, burst }
            }
        }
    }

    /// The tenant a request names, as the stage found it: the name in the tenant header, or
    /// the tenant of its key's hash.
    fn named(&self, facts: &EdgeFacts, hashed: Option<&str>) -> Option<String> {
        match &self.tenants.identify {
            Identify::Named(name) => facts.header(name).map(|t| t.trim().to_owned()).filter(|t| is_tenant_name(t)),
            Identify::Key(_) => {
                let hash = hashed?;
                self.tenants.tenant_of_hash(hash).or_else(|| self.keys.get(hash).map(String::as_str)).map(str::to_owned)
            }
        }
    }

    /// The limit that applies to `tenant` (there are no runtime overrides).
    pub(super) fn limit_of(&self, tenant: &str) -> Option<&'c TenantLimit> {
        effective(None, self.tenants.limits.get(tenant), self.tenants.default.as_ref()).map(|(limit, _)| limit)
    }
}

/// How the edge answers a refusal of the tenant stage: [`TenantRefusal::reply`]'s status
/// (kept here rather than asked of the reply, which writes the whole answer; a test holds
/// the two equal), and its name in the edge's log line.
pub(super) fn refused(refusal: &TenantRefusal) -> TenantRefused {
    let status = match refusal {
        TenantRefusal::Unknown => 401,
        TenantRefusal::TooLarge { .. } => 413,
        TenantRefusal::Limited { .. } | TenantRefusal::Overloaded { .. } => 429,
    };
    TenantRefused { status, name: refusal.name() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::Span;

    #[test]
    fn a_refusal_s_status_is_its_reply_s() {
        let wait = Span::from_millis(1_500);
        for refusal in [
            TenantRefusal::Unknown,
            TenantRefusal::TooLarge { max: 10 },
            TenantRefusal::Limited { tenant: "acme".into(), wait },
            TenantRefusal::Overloaded { tenant: "acme".into() },
        ] {
            assert_eq!(refused(&refusal).status, refusal.reply().status, "{refusal:?}");
        }
    }

    #[test]
    fn the_hash_is_sha256_in_lower_case_hex() {
        assert_eq!(sha256_hex("foo"), "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
        assert_eq!(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn a_store_starts_afresh_when_the_limit_or_its_generation_changes_and_answers_whole_milliseconds() {
        let limit = |text: &str| TenantLimit::from_json_text(text, None).unwrap();
        let (one, two) = (limit(r#"{"rate": 3, "burst": 1}"#), limit(r#"{"rate": 3, "burst": 2}"#));
        let mut stores = Stores::default();
        let ask =
            |limit, generation| StoreCharge { store: "s", tenant: "acme", limit, generation, requests: 1, bytes: 0 };
        let t = Instant::from_secs(5);
        assert!(stores.charge(&ask(&one, 0), t).unwrap().is_allowed());
        // 1/3 s to the next token: 333,333,334 ns, answered as 334 ms
        assert_eq!(stores.charge(&ask(&one, 0), t).unwrap(), Decision::Deny { retry_after: Span::from_millis(334) });
        assert!(stores.charge(&ask(&two, 0), t).unwrap().is_allowed(), "another limit: fresh buckets");
        assert!(stores.charge(&ask(&two, 0), t).unwrap().is_allowed());
        assert!(!stores.charge(&ask(&two, 0), t).unwrap().is_allowed());
        assert!(stores.charge(&ask(&two, 7), t).unwrap().is_allowed(), "another generation: fresh buckets");
    }
}
