//! The edge's decisions about one request, pure: state machines that say what they need
//! done (ask a counter, …), take the answers back and reach a verdict. The Worker carries
//! out what they ask (Durable Object calls, fetches, timers); the simulator answers from
//! counters in memory; tests answer from a script. So what the edge decides, the simulator
//! replays with the same code.
//!
//! - [`serve`]: the stages in the order a request meets them, and the answers between them.
//! - [`rules`]: the rules file's rules, in order, until one refuses.
//! - [`preread`]: the checks made before a body is read (the isolate's own counts).
//! - [`tenant`]: the request's tenant, its limit, its buckets and its share in flight.
//! - [`tenant_store`]: a tenant's buckets as its store keeps them.
//! - [`upstream`]: where a budget is counted, and the answer to a request it sheds.
//! - [`egress`]: the egress routes: a proxied call through its budget and mirrors, permits.
//! - [`admin`]: the admin API of tenant limits: its routes and answers.
//! - [`stats`]: the operator's stats route: its query and answer.
//! - [`token`]: the bearer tokens of the edge's own routes, and guessing them.
//! - [`counting`]: one key's counter, as a Durable Object (or the simulator) keeps it, and
//!   the counts of the rules kept in the isolate.
//! - [`reply`]: the edge's own answers, as data.

pub mod admin;
pub mod counting;
pub mod egress;
pub mod preread;
pub mod reply;
pub mod rules;
pub mod serve;
pub mod stats;
pub mod tenant;
pub mod tenant_store;
pub mod token;
pub mod upstream;

pub use reply::Reply;
pub use rules::{Answer, Checked, Note, Refusal, RulesCheck, Step, Verdict, Via, OVERRIDES_FRESH};
pub use tenant::{TenantAnswer, TenantCheck, TenantNote, TenantRefusal, TenantStep, TenantVerdict};

use crate::edge::blocks::BlockCache;
use alloc::string::String;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// How many blocked keys an isolate remembers.
pub const BLOCKS_KEPT: usize = 10_000;

/// What the edge keeps in one isolate between requests, in one place the pipeline is handed:
/// the blocks the rules have seen (answered without asking their counter again), how often
/// each rule failed open, and the tenants' state ([`tenant::TenantState`]).
pub struct Isolate {
    pub(crate) blocks: BlockCache,
    /// The counts of the rules kept in the isolate.
    pub(crate) counts: counting::IsolateCounts,
    pub(crate) degraded: HashMap<String, u64, FixedState>,
    /// The tenants' state.
    pub tenants: tenant::TenantState,
    /// The checks made before a body is read (made on first use, and afresh when they change).
    pub(crate) pre_read: Option<preread::PreReadState>,
    /// Failed tries of the edge's secrets, per client (made on first use).
    guesses: Option<crate::edge::guesses::Guesses>,
    /// The salt of its tables' hashes.
    pub(crate) salt: (u64, u64),
    /// Its copy of the runtime overrides of the rules' `enforce`.
    pub(crate) rule_overrides: StoredCopy<crate::edge::rules::RuleOverrides>,
}

/// An isolate's copy of a document a store keeps (the runtime overrides of tenant limits, of
/// the rules' `enforce`), trusted for [`tenant::OVERRIDES_FRESH`] after it was read; when it
/// cannot be read again, the copy in hand serves (an empty one before any).
pub(crate) struct StoredCopy<T>(Option<(crate::core::time::Instant, alloc::rc::Rc<T>)>);

impl<T: Default> StoredCopy<T> {
    /// No copy yet.
    pub(crate) const fn new() -> Self {
        StoredCopy(None)
    }

    /// The copy, when it was read less than [`tenant::OVERRIDES_FRESH`] before `now`.
    pub(crate) fn fresh(&self, now: crate::core::time::Instant) -> Option<alloc::rc::Rc<T>> {
        let (at, copy) = self.0.as_ref()?;
        (now < *at + tenant::OVERRIDES_FRESH).then(|| alloc::rc::Rc::clone(copy))
    }

    /// What a read asked at `at` came to: the document, kept as the fresh copy; or, when it
    /// could not be read, the copy in hand and why.
    pub(crate) fn refreshed(
        &mut self,
        at: crate::core::time::Instant,
        read: Result<T, String>,
    ) -> (alloc::rc::Rc<T>, Option<String>) {
        match read {
            Ok(fresh) => {
                let fresh = alloc::rc::Rc::new(fresh);
                self.0 = Some((at, alloc::rc::Rc::clone(&fresh)));
                (fresh, None)
            }
            Err(error) => {
                let held =
                    self.0.as_ref().map_or_else(|| alloc::rc::Rc::new(T::default()), |(_, o)| alloc::rc::Rc::clone(o));
                (held, Some(error))
            }
        }
    }

    /// Forget the copy (after a change made through this isolate).
    pub(crate) fn forget(&mut self) {
        self.0 = None;
    }
}

impl Default for Isolate {
    /// An isolate's state with a fixed salt (the simulator's and tests'; the Worker draws
    /// one: [`Isolate::new`]).
    fn default() -> Self {
        Isolate::new((0x5eed_0001, 0x5eed_0002))
    }
}

impl Isolate {
    /// An isolate's state; `salt` keys the hash of the tenants' table (draw it at random, so
    /// nobody outside can aim tenant names at one of its shards).
    pub fn new(salt: (u64, u64)) -> Self {
        Isolate {
            blocks: BlockCache::new(BLOCKS_KEPT),
            counts: counting::IsolateCounts::default(),
            degraded: HashMap::with_hasher(FixedState::with_seed(0xdec1)),
            tenants: tenant::TenantState::new(salt),
            pre_read: None,
            guesses: None,
            salt,
            rule_overrides: StoredCopy::new(),
        }
    }

    /// How many requests rule `id` admitted without its count (its store failed, the rule
    /// fails open) since this isolate started.
    pub fn degraded(&self, id: &str) -> u64 {
        self.degraded.get(id).copied().unwrap_or(0)
    }

    /// How many keys the rules counted in the isolate hold.
    pub fn counted_keys(&self) -> usize {
        self.counts.len()
    }

    /// Forget its copy of the rules' runtime overrides (after a change made through it).
    pub fn forget_rule_overrides(&mut self) {
        self.rule_overrides.forget();
    }

    /// The blocks it remembers.
    pub fn blocks(&self) -> &BlockCache {
        &self.blocks
    }

    /// Its count of failed tries of the edge's secrets.
    pub fn guesses(&mut self) -> &mut crate::edge::guesses::Guesses {
        let salt = self.salt.0.rotate_left(17) ^ self.salt.1;
        self.guesses.get_or_insert_with(|| crate::edge::guesses::Guesses::new(salt))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tenant_tests;

#[cfg(test)]
mod store_tests;

#[cfg(test)]
mod shadow_tests;
