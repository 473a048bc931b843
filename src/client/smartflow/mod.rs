//! Smart Flow: the proactive per-organization rate limiter of the "Smart Flow — Rate
//! Limiter Specification", as a pure core with time passed in.
//!
//! The Meraki Dashboard API enforces about 10 requests per second per organization and
//! about 100 per second per source IP. Smart Flow throttles locally before a 429 happens:
//! every request is charged to a global bucket, and to its organization's bucket once the
//! organization is known. Requests name a network or a device more often than an
//! organization, so the limiter learns which organization owns each network and device as
//! traffic flows, and can persist what it learned.
//!
//! | spec | here |
//! |---|---|
//! | §1 reservation token bucket, rate floor 0.5 | [`TokenBucket`] |
//! | §2 defaults | [`Config::default`] and the `DEFAULT_*` constants |
//! | §3 URL → identifiers, `resolve_org` | [`url`], [`OrgRateLimiter::resolve_org`] |
//! | §4 `acquire(url)`, sync and async paths | [`OrgRateLimiter::acquire`], [`OrgRateLimiter::acquire_sync`], [`OrgRateLimiter::acquire_async`] |
//! | §5 AIMD | [`OrgRateLimiter::on_rate_limited`], [`OrgRateLimiter::on_success`] |
//! | §6 learning, register APIs | [`OrgRateLimiter::learn_from_response`], [`OrgRateLimiter::register_network`], … |
//! | §7 persisted cache | [`OrgRateLimiter::save_cache`], [`OrgRateLimiter::load_cache`], [`is_fresh`], [`parse_saved_at`], [`format_saved_at`] |
//! | §8 resolver and hydrator bookkeeping | [`Resolver`], [`Hydrator`], [`OrgRateLimiter::start_lookup`], [`OrgRateLimiter::finish_lookup`], [`OrgRateLimiter::claim_hydration`] |
//!
//! Beyond the specification, what a fetch wrapper needs to follow it:
//!
//! | what | here |
//! |---|---|
//! | what a response means (429, 2xx, a GET's JSON body) | [`reaction`], [`Reaction`], [`url::without_query`] |
//! | which body fields are learned from | [`ResponseBody`], [`LEARNED_FIELDS`], [`OrgRateLimiter::learn_from_body`] |
//! | `Retry-After`: delay-seconds and the three HTTP-date forms | [`RetryAfter`], [`retry_after_wait`] |
//! | cooldowns per scope, never shortened | [`OrgRateLimiter::on_rate_limited_with_retry`], [`OrgRateLimiter::cooldown`], [`Cooldowns`], [`Target`] |
//! | when a failed save is tried again | [`OrgRateLimiter::save_failed`], [`SaveBackoff`] |
//!
//! Time is `f64` seconds, as in the specification: monotonic seconds for the buckets
//! (any epoch the caller likes) and Unix seconds for the cache's `saved_at`. The additions
//! above use [`Instant`](crate::core::time::Instant) and [`Span`](crate::core::time::Span): cooldowns on the
//! buckets' monotonic clock, `Retry-After` dates in Unix time. Nothing here
//! reads a clock, sleeps, or does I/O: an acquire *returns* how long to sleep, and the cache
//! is JSON text in and out.

mod bucket;
mod cache;
mod cooldown;
mod limiter;
mod response;
mod retry_after;
pub mod url;

pub use bucket::{TokenBucket, RATE_FLOOR};
pub use cache::{format_saved_at, is_fresh, parse_saved_at, parse_saved_at_str, CacheLoad};
pub use cooldown::{Cooldowns, SaveBackoff, Target, FIRST_SAVE_RETRY, MAX_SAVE_RETRY};
pub use limiter::{Acquired, Config, Hydrator, Learned, Lookup, OrgRateLimiter, Penalty, Resolver};
pub use response::{
    reaction, Field, Reaction, ResponseBody, LEARNED_FIELDS, NETWORK_ID, NETWORK_NESTED_ID, ORGANIZATION_ID,
    ORGANIZATION_NESTED_ID, SERIAL,
};
pub use retry_after::{retry_after_wait, RetryAfter, RetryAfterError};
pub use url::IdKind;

use core::fmt;

/// Per-organization rate, tokens per second (§2). Meraki enforces about 10.
pub const DEFAULT_ORG_RATE: f64 = 10.0;
/// The per-organization rate the SDK's configuration surfaces (§2): one below the ceiling,
/// leaving headroom for other applications.
pub const SDK_ORG_RATE: f64 = 9.0;
/// Per-organization capacity, tokens (§2).
pub const DEFAULT_ORG_CAPACITY: f64 = 10.0;
/// Global (per source IP) rate, tokens per second (§2). Its capacity is the whole part of
/// the rate (`int(global_rate)`).
pub const DEFAULT_GLOBAL_RATE: f64 = 100.0;
/// How long a persisted cache stays fresh, seconds (§7): seven days.
pub const DEFAULT_CACHE_TTL: f64 = 604_800.0;
/// The multiplicative decrease applied on a 429 (§5).
pub const DECREASE_FACTOR: f64 = 0.7;
/// The additive increase of an organization's rate on a success (§5).
pub const ORG_INCREASE: f64 = 0.2;
/// The additive increase of the global rate on a success (§5).
pub const GLOBAL_INCREASE: f64 = 0.5;
/// Changed mappings after which the cache is due to be saved (§7).
pub const FLUSH_THRESHOLD: u64 = 50;

/// Input that Smart Flow refuses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SmartFlowError {
    /// A rate that is not a finite number, or (when configuring) not above zero.
    InvalidRate(f64),
    /// A capacity that is not a finite number of at least zero.
    InvalidCapacity(f64),
    /// A token count that is not finite or exceeds the capacity.
    InvalidTokens {
        /// The token count given.
        tokens: f64,
        /// The bucket's capacity.
        capacity: f64,
    },
    /// A time that is not a finite number of seconds.
    InvalidTime(f64),
    /// A cache TTL that is not a finite number of at least zero seconds.
    InvalidTtl(f64),
    /// An identifier that is empty; the field is named.
    EmptyIdentifier(&'static str),
    /// [`OrgRateLimiter::finish_lookup`] for an identifier with no lookup pending.
    NoPendingLookup,
    /// A Unix time whose UTC year falls outside 0001–9999, which `saved_at` cannot carry.
    TimeOutOfRange(f64),
}

impl fmt::Display for SmartFlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SmartFlowError::InvalidRate(r) => write!(f, "a rate must be a finite number of tokens per second, not {r}"),
            SmartFlowError::InvalidCapacity(c) => {
                write!(f, "a capacity must be a finite number of tokens of at least 0, not {c}")
            }
            SmartFlowError::InvalidTokens { tokens, capacity } => {
                write!(f, "a token count must be finite and at most the capacity {capacity}, not {tokens}")
            }
            SmartFlowError::InvalidTime(t) => write!(f, "a time must be a finite number of seconds, not {t}"),
            SmartFlowError::InvalidTtl(t) => {
                write!(f, "a cache TTL must be a finite number of seconds of at least 0, not {t}")
            }
            SmartFlowError::EmptyIdentifier(field) => write!(f, "the {field} must not be empty"),
            SmartFlowError::NoPendingLookup => f.write_str("no lookup is pending for this identifier"),
            SmartFlowError::TimeOutOfRange(t) => {
                write!(f, "the Unix time {t} is outside the years 0001 to 9999 that saved_at can carry")
            }
        }
    }
}

/// `Ok(now)` when `now` is a finite number of seconds.
pub(crate) fn check_time(now: f64) -> Result<f64, SmartFlowError> {
    if now.is_finite() {
        Ok(now)
    } else {
        Err(SmartFlowError::InvalidTime(now))
    }
}
