//! Tenant quotas, charged after the sender is verified: a limit per tenant (from a runtime
//! override, the rules file, or the default, the first found applying whole), its buckets,
//! and its share of what may be in flight to the origin at once.
//!
//! A limit is `{rate, burst}` (rate per second, fractions allowed: 0.5 is one request
//! every 2 s), optionally with body bytes (`bytes_per_second`, `burst_bytes`, which
//! defaults to one second's worth), the biggest body (`max_body_bytes`) and what the
//! tenant may have in flight (`max_queue` requests, `max_queue_bytes` body bytes), and how
//! much of its refusals are enforced (`enforce`: see [`crate::edge::pipeline::tenant`]).

use crate::core::limit::{Decision, Gcra, Limiter};
use crate::core::time::{Instant, Span};
use crate::edge::admission::ByteBucket;
use crate::edge::enforce::Enforce;
use crate::edge::json::brief;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::Serialize;
use serde_json::{Map, Value};

mod table;
pub use table::{Placement, Swept, TenantTable};

/// One tenant's limit, validated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantLimit {
    /// Requests per second, as configured.
    pub rate: f64,
    /// Requests admitted back to back.
    pub burst: u32,
    /// Body bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<u64>,
    /// Body bytes admitted back to back (one second's worth unless given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
    /// The biggest body, at most the instance's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Requests in flight to the origin at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queue: Option<u32>,
    /// Body bytes in flight to the origin at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queue_bytes: Option<u64>,
    /// How much of its refusals for its rate, bytes and share in flight are enforced
    /// (`true`; `false`: shadow; a share of tenants, by a stable hash of the tenant's name).
    #[serde(skip_serializing_if = "Enforce::is_all")]
    pub enforce: Enforce,
    #[serde(skip)]
    interval: Span,
}

/// What is wrong with a limit: the field and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitError {
    /// The field, e.g. `burst_bytes`.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// The slowest rate: one request per 366 days (the longest period rules allow).
const MAX_SECONDS: u64 = 366 * 86_400;
const FIELDS: &[&str] =
    &["rate", "burst", "bytes_per_second", "burst_bytes", "max_body_bytes", "max_queue", "max_queue_bytes", "enforce"];

impl TenantLimit {
    /// Parse a limit from its JSON object. `instance_max_body` is the ceiling a tenant's
    /// `max_body_bytes` may not pass.
    ///
    /// # Errors
    /// The first problem, naming the field.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::tenants::TenantLimit;
    /// let limit = TenantLimit::from_json(&serde_json::json!({"rate": 0.5, "burst": 2}), None).unwrap();
    /// assert_eq!(limit.burst, 2);
    /// let err = TenantLimit::from_json(&serde_json::json!({"rate": 1, "burst": 1, "burst_bytes": 10}), None).unwrap_err();
    /// assert_eq!(err.field, "burst_bytes");
    /// ```
    pub fn from_json(v: &Value, instance_max_body: Option<u64>) -> Result<Self, LimitError> {
        let err = |field: &str, message: String| LimitError { field: field.into(), message };
        let obj =
            v.as_object().ok_or_else(|| err("", format!("a limit must be an object with rate and burst, got {v}")))?;
        if let Some(key) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(err(key, format!("unknown field; a limit has {}", FIELDS.join(", "))));
        }
        let slowest = Span::from_secs(MAX_SECONDS);
        let rate_and_interval = obj
            .get("rate")
            .and_then(Value::as_f64)
            .and_then(|r| Gcra::interval_of_rate(r, slowest).map(|interval| (r, interval)));
        let (rate, interval) = match rate_and_interval {
            Some(found) => found,
            _ => {
                let got = obj.get("rate").map_or_else(|| "nothing".to_string(), ToString::to_string);
                return Err(err(
                    "rate",
                    format!(
                        "must be requests per second from one per {MAX_SECONDS} s (about 3.2e-8) to 1e9 \
                         (0.5 is one every 2 s), got {got}; a slower rate cannot be counted"
                    ),
                ));
            }
        };
        let burst: u32 = whole(obj, "burst", 1, u32::MAX)?
            .ok_or_else(|| err("burst", "missing; the most requests admitted back to back".into()))?;
        if interval.as_nanos().saturating_mul(u64::from(burst)) > MAX_SECONDS * 1_000_000_000 {
            return Err(err("burst", format!("burst / rate must be at most {MAX_SECONDS} s (the time to refill)")));
        }
        let bytes_per_second = whole(obj, "bytes_per_second", 1, 1u64 << 40)?;
        let burst_bytes = whole(obj, "burst_bytes", 1, 1u64 << 40)?;
        if burst_bytes.is_some() && bytes_per_second.is_none() {
            return Err(err("burst_bytes", "needs bytes_per_second".into()));
        }
        let max_body_bytes = whole(obj, "max_body_bytes", 1, 1u64 << 40)?;
        if let (Some(own), Some(instance)) = (max_body_bytes, instance_max_body) {
            if own > instance {
                return Err(err("max_body_bytes", format!("{own} is above the instance's max_body_bytes, {instance}")));
            }
        }
        let max_queue = whole(obj, "max_queue", 1, u32::MAX)?;
        let max_queue_bytes = whole(obj, "max_queue_bytes", 1, 1u64 << 40)?;
        let enforce = match obj.get("enforce") {
            None => Enforce::All,
            Some(v) => Enforce::from_json(v).map_err(|why| err("enforce", why))?,
        };
        Ok(TenantLimit {
            rate,
            burst,
            bytes_per_second,
            burst_bytes: bytes_per_second.map(|bps| burst_bytes.unwrap_or(bps)),
            max_body_bytes,
            max_queue,
            max_queue_bytes,
            enforce,
            interval,
        })
    }

    /// [`TenantLimit::from_json`] of JSON text.
    ///
    /// # Errors
    /// Text that is not JSON, or the first problem of the limit, naming the field.
    pub fn from_json_text(text: &str, instance_max_body: Option<u64>) -> Result<Self, LimitError> {
        // The rules file's reader: a key given twice is refused here too, naming it.
        let value =
            crate::edge::json::strict_json(text).map_err(|e| LimitError { field: e.field, message: e.message })?;
        Self::from_json(&value, instance_max_body)
    }

    /// The limit as JSON (the shape [`TenantLimit::from_json`] reads).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Lower this limit's `max_body_bytes` to `instance_max` (the rules file's) when it is
    /// above it: what it was, when it was lowered. A limit is checked against the instance's
    /// cap when it is written, but an override stored before a deploy that lowered the cap
    /// is checked again here, when it is read.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::tenants::TenantLimit;
    /// let mut limit =
    ///     TenantLimit::from_json(&serde_json::json!({"rate": 1, "burst": 1, "max_body_bytes": 5000}), None).unwrap();
    /// assert_eq!(limit.clamp_body(Some(1000)), Some(5000));
    /// assert_eq!(limit.max_body_bytes, Some(1000));
    /// assert_eq!(limit.clamp_body(Some(1000)), None, "within the cap: unchanged");
    /// ```
    pub fn clamp_body(&mut self, instance_max: Option<u64>) -> Option<u64> {
        let (own, instance) = (self.max_body_bytes?, instance_max?);
        (own > instance).then(|| {
            self.max_body_bytes = Some(instance);
            own
        })
    }

    /// Fresh buckets of this limit (full).
    pub fn buckets(&self) -> TenantBuckets {
        TenantBuckets {
            count: Gcra::with_interval(self.burst, self.interval),
            bytes: self.bytes_per_second.and_then(|bps| ByteBucket::new(bps, self.burst_bytes.unwrap_or(bps))),
        }
    }
}

/// A whole number in `min..=max`, as the type the field is kept in (no cast narrows it).
fn whole<T>(obj: &Map<String, Value>, field: &str, min: T, max: T) -> Result<Option<T>, LimitError>
where
    T: Copy + core::fmt::Display + Into<u64> + TryFrom<u64>,
{
    match obj.get(field) {
        None => Ok(None),
        Some(v) => match v.as_u64().filter(|n| (min.into()..=max.into()).contains(n)).and_then(|n| T::try_from(n).ok())
        {
            Some(n) => Ok(Some(n)),
            None => Err(LimitError {
                field: field.into(),
                message: format!("must be a whole number from {min} to {max}, got {v}"),
            }),
        },
    }
}

/// Where a tenant's limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// A runtime override (the admin API).
    Override,
    /// The tenant's entry in the rules file.
    Config,
    /// The rules file's default.
    Default,
}

/// The limit that applies: the first of `overridden`, `configured` and `default` that
/// exists, whole (its keys never merge with the next one's); `None` means unlimited.
pub fn effective<'a>(
    overridden: Option<&'a TenantLimit>,
    configured: Option<&'a TenantLimit>,
    default: Option<&'a TenantLimit>,
) -> Option<(&'a TenantLimit, LimitSource)> {
    overridden
        .map(|l| (l, LimitSource::Override))
        .or_else(|| configured.map(|l| (l, LimitSource::Config)))
        .or_else(|| default.map(|l| (l, LimitSource::Default)))
}

/// The biggest body a request of a tenant may send: the smaller of its limit's
/// `max_body_bytes` and the instance's (the rules file's `tenants.max_body_bytes`), which
/// binds every tenant the section matches, one with no limit at all too. `None`: no cap.
///
/// # Examples
/// ```
/// use sluicegate::tenants::{body_cap, TenantLimit};
/// let own = TenantLimit::from_json(&serde_json::json!({"rate": 1, "burst": 1, "max_body_bytes": 500}), None).unwrap();
/// assert_eq!(body_cap(Some(&own), Some(1000)), Some(500));
/// assert_eq!(body_cap(None, Some(1000)), Some(1000), "an unlimited tenant meets the instance's cap");
/// assert_eq!(body_cap(None, None), None);
/// ```
pub fn body_cap(limit: Option<&TenantLimit>, instance_max: Option<u64>) -> Option<u64> {
    match (limit.and_then(|l| l.max_body_bytes), instance_max) {
        (Some(own), Some(instance)) => Some(own.min(instance)),
        (own, instance) => own.or(instance),
    }
}

/// A tenant's body of no declared length, counted as it streams against the biggest body
/// the tenant may send ([`body_cap`]). Its bytes are charged chunk by chunk as they come
/// ([`TenantBuckets::charge_more`], [`QueueShare::grow`]): the request itself was charged,
/// with no bytes, before its body was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamedBody {
    cap: Option<u64>,
    seen: u64,
}

impl StreamedBody {
    /// A body that may bring at most `cap` bytes (`None`: any number).
    pub const fn new(cap: Option<u64>) -> Self {
        StreamedBody { cap, seen: 0 }
    }

    /// Count `bytes` more; `Err(cap)` once the body has brought more than its cap (those
    /// bytes are not to be passed on, and the body is cut: `413`).
    ///
    /// # Errors
    /// The cap, when these bytes go past it.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::tenants::StreamedBody;
    /// let mut body = StreamedBody::new(Some(1000));
    /// assert_eq!(body.take(600), Ok(()));
    /// assert_eq!(body.take(400), Ok(()));
    /// assert_eq!(body.take(1), Err(1000));
    /// assert_eq!(body.seen(), 1001);
    /// ```
    pub fn take(&mut self, bytes: u64) -> Result<(), u64> {
        self.seen = self.seen.saturating_add(bytes);
        match self.cap {
            Some(cap) if self.seen > cap => Err(cap),
            _ => Ok(()),
        }
    }

    /// The bytes the body has brought so far.
    pub const fn seen(&self) -> u64 {
        self.seen
    }
}

/// A tenant's buckets: requests, and body bytes when its limit has them.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantBuckets {
    count: Gcra,
    bytes: Option<ByteBucket>,
}

impl TenantBuckets {
    /// Charge one request of `body_bytes`. The request count is charged first; a request
    /// that passes it and is refused on bytes has spent its count token (as the seed's
    /// hook does), so that a tenant cannot probe its byte budget for free.
    pub fn charge(&mut self, now: Instant, body_bytes: u64) -> Decision {
        let count = self.count.check(now, 1).unwrap_or(Decision::Deny { retry_after: Span::ZERO });
        if !count.is_allowed() {
            return count;
        }
        match &mut self.bytes {
            Some(bytes) if body_bytes > 0 => match bytes.check(body_bytes, now) {
                Decision::Allow { .. } => count,
                refused => refused,
            },
            _ => count,
        }
    }

    /// Charge `bytes` more of the body of a request already charged (one of no declared
    /// length, charged chunk by chunk as it streams): the byte bucket only, when the limit
    /// has one. Each chunk is charged as a body of its own would be, so a chunk bigger than
    /// `burst_bytes` goes only into a full bucket, and a streamed body is refused once it has
    /// used the bucket up: only a declared body bigger than `burst_bytes` can be admitted
    /// whole into a full bucket.
    pub fn charge_more(&mut self, now: Instant, bytes: u64) -> Decision {
        match &mut self.bytes {
            Some(bucket) if bytes > 0 => bucket.check(bytes, now),
            _ => Decision::Allow { remaining: 0, reset: Span::ZERO },
        }
    }
}

/// What a tenant has in flight to the origin: requests and body bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueShare {
    requests: u32,
    bytes: u64,
}

impl QueueShare {
    /// Count one request of `bytes` against the limit's `max_queue` / `max_queue_bytes`;
    /// `false`, counting nothing, past either. A request bigger than `max_queue_bytes` on
    /// its own is admitted when the tenant holds nothing else.
    pub fn acquire(&mut self, limit: &TenantLimit, bytes: u64) -> bool {
        let requests_ok = limit.max_queue.is_none_or(|max| self.requests < max);
        let bytes_ok = limit
            .max_queue_bytes
            .is_none_or(|max| self.bytes.saturating_add(bytes) <= max || (self.requests == 0 && self.bytes == 0));
        if !(requests_ok && bytes_ok) {
            return false;
        }
        self.requests += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        true
    }

    /// Count `bytes` more of a request already counted, which holds `held` bytes so far (a
    /// body of no declared length, as it streams) against `max_queue_bytes`; `false`,
    /// counting nothing, past it. As in [`QueueShare::acquire`], a body bigger than
    /// `max_queue_bytes` may grow while it is all the tenant holds.
    pub fn grow(&mut self, limit: &TenantLimit, held: u64, bytes: u64) -> bool {
        let alone = self.requests <= 1 && self.bytes <= held;
        let fits = limit.max_queue_bytes.is_none_or(|max| self.bytes.saturating_add(bytes) <= max || alone);
        if fits {
            self.bytes = self.bytes.saturating_add(bytes);
        }
        fits
    }

    /// Give back one request of `bytes`.
    pub fn release(&mut self, bytes: u64) {
        self.requests = self.requests.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// Whether nothing is held (the share can be forgotten).
    pub fn is_empty(&self) -> bool {
        self.requests == 0 && self.bytes == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limit(v: Value) -> TenantLimit {
        TenantLimit::from_json(&v, Some(10_000_000)).unwrap()
    }

    #[test]
    fn half_a_request_per_second_is_one_every_two_seconds() {
        let mut b = limit(json!({"rate": 0.5, "burst": 1})).buckets();
        let t = Instant::from_secs(100);
        assert!(b.charge(t, 0).is_allowed());
        assert_eq!(b.charge(t + Span::from_secs(1), 0), Decision::Deny { retry_after: Span::from_secs(1) });
        assert!(b.charge(t + Span::from_secs(2), 0).is_allowed());
    }

    #[test]
    fn burst_bytes_default_to_one_second_and_a_byte_refusal_spends_the_count_token() {
        let l = limit(json!({"rate": 1, "burst": 2, "bytes_per_second": 1000}));
        assert_eq!(l.burst_bytes, Some(1000));
        let mut b = l.buckets();
        let t = Instant::from_secs(100);
        assert!(b.charge(t, 900).is_allowed());
        assert!(!b.charge(t, 900).is_allowed(), "over on bytes");
        assert!(!b.charge(t, 0).is_allowed(), "the byte refusal spent the second count token");
    }

    #[test]
    fn a_body_bigger_than_burst_bytes_goes_only_into_a_full_bucket() {
        let mut b = limit(json!({"rate": 100, "burst": 100, "bytes_per_second": 1000, "burst_bytes": 1000})).buckets();
        let t = Instant::from_secs(100);
        assert!(b.charge(t, 5_000).is_allowed(), "full: admitted, and emptied");
        assert!(!b.charge(t + Span::from_millis(500), 5_000).is_allowed());
        assert!(!b.charge(t + Span::from_millis(500), 600).is_allowed(), "emptied: 500 B back after 0.5 s");
        assert!(b.charge(t + Span::from_secs(1), 5_000).is_allowed());
    }

    #[test]
    fn limits_are_validated_naming_the_field() {
        let e = |v: Value| TenantLimit::from_json(&v, Some(1_000)).unwrap_err().field;
        assert_eq!(e(json!({"burst": 1})), "rate");
        assert_eq!(e(json!({"rate": 0, "burst": 1})), "rate");
        assert_eq!(e(json!({"rate": 1})), "burst");
        assert_eq!(e(json!({"rate": 1, "burst": 0})), "burst");
        assert_eq!(e(json!({"rate": 1, "burst": 1, "burst_bytes": 5})), "burst_bytes");
        assert_eq!(e(json!({"rate": 1, "burst": 1, "max_body_bytes": 2_000})), "max_body_bytes");
        assert_eq!(e(json!({"rate": 1, "burst": 1, "max_queue": -1})), "max_queue");
        assert_eq!(e(json!({"rate": 1, "burst": 1, "extra": 1})), "extra");
        let round = limit(json!({"rate": 0.5, "burst": 2, "bytes_per_second": 10, "max_queue": 3}));
        assert_eq!(limit(serde_json::from_str(&round.to_json()).unwrap()), round);
    }

    #[test]
    fn a_tenant_rate_too_slow_to_represent_is_refused_naming_rate() {
        for rate in [1e-12, 1e-300, 5e-324] {
            let e = TenantLimit::from_json(&json!({"rate": rate, "burst": 1}), None).unwrap_err();
            assert_eq!(e.field, "rate", "{rate}");
            assert!(e.message.contains("cannot be counted"), "{}", e.message);
        }
        let e = TenantLimit::from_json_text(r#"{"rate": 1e-12, "burst": 1}"#, None).unwrap_err();
        assert_eq!(e.field, "rate");
        let slowest = limit(json!({"rate": 3.2e-8, "burst": 1}));
        assert_eq!(slowest.interval, Span::from_nanos(31_250_000_000_000_000));
    }

    #[test]
    fn the_first_limit_found_applies_whole() {
        let (o, c, d) = (
            limit(json!({"rate": 1, "burst": 1})),
            limit(json!({"rate": 2, "burst": 2, "max_queue": 5})),
            limit(json!({"rate": 3, "burst": 3})),
        );
        assert_eq!(effective(Some(&o), Some(&c), Some(&d)), Some((&o, LimitSource::Override)));
        assert_eq!(effective(None, Some(&c), Some(&d)), Some((&c, LimitSource::Config)));
        assert_eq!(effective(None, None, Some(&d)), Some((&d, LimitSource::Default)));
        assert_eq!(effective(None, None, None), None, "no limit at all: unlimited");
        assert_eq!(effective(Some(&o), Some(&c), None).unwrap().0.max_queue, None, "the override's keys do not merge");
    }

    #[test]
    fn a_queue_share_bounds_requests_and_bytes_and_admits_one_oversized_request_alone() {
        let l = limit(json!({"rate": 1, "burst": 1, "max_queue": 2, "max_queue_bytes": 1000}));
        let mut q = QueueShare::default();
        assert!(q.acquire(&l, 5_000), "alone: admitted although bigger than max_queue_bytes");
        assert!(!q.acquire(&l, 1), "nothing more while it is held");
        q.release(5_000);
        assert!(q.acquire(&l, 400));
        assert!(q.acquire(&l, 400));
        assert!(!q.acquire(&l, 0), "max_queue");
        q.release(400);
        assert!(!q.acquire(&l, 700), "max_queue_bytes");
        assert!(q.acquire(&l, 600));
        q.release(400);
        q.release(600);
        assert!(q.is_empty());
    }

    #[test]
    fn a_streamed_body_grows_its_share_while_it_fits_or_is_all_the_tenant_holds() {
        let l = limit(json!({"rate": 1, "burst": 1, "max_queue": 3, "max_queue_bytes": 1000}));
        let mut q = QueueShare::default();
        assert!(q.acquire(&l, 0), "a body of no declared length is counted with no bytes");
        assert!(q.grow(&l, 0, 700));
        assert!(q.acquire(&l, 0), "another one");
        assert!(!q.grow(&l, 0, 400), "over max_queue_bytes, and not alone: refused, nothing counted");
        assert!(q.grow(&l, 700, 300), "the first fits");
        q.release(0);
        assert!(q.grow(&l, 1_000, 5_000), "alone: it may pass max_queue_bytes");
        assert!(!q.acquire(&l, 0), "nothing more while it is held");
        q.release(6_000);
        assert!(q.is_empty());
    }

    #[test]
    fn a_streamed_body_is_charged_chunk_by_chunk_and_cut_past_its_cap() {
        let l = limit(json!({"rate": 10, "burst": 1, "bytes_per_second": 1000, "max_body_bytes": 3000}));
        let mut b = l.buckets();
        let t = Instant::from_secs(100);
        assert!(b.charge(t, 0).is_allowed(), "the request, before its body is read");
        assert!(!b.charge(t, 0).is_allowed(), "its count token was spent");
        let mut body = StreamedBody::new(body_cap(Some(&l), Some(10_000)));
        let mut passed = 0;
        let mut at = t;
        for chunk in [500, 500, 500] {
            body.take(chunk).unwrap();
            if !b.charge_more(at, chunk).is_allowed() {
                break;
            }
            passed += chunk;
            at = at + Span::from_millis(100);
        }
        assert_eq!(passed, 1_000, "1,000 back to back, 200 back by 0.2 s: the third chunk is over");
        assert_eq!(body.take(1_500), Ok(()));
        assert_eq!(body.take(1), Err(3_000), "past max_body_bytes");
        let mut unlimited = limit(json!({"rate": 1, "burst": 1})).buckets();
        assert!(unlimited.charge_more(t, 1 << 30).is_allowed(), "no byte bucket: nothing to charge");
    }
}

/// A tenant's admitted bytes, whatever mix of declared bodies and bodies of no declared
/// length (charged chunk by chunk, as the edge charges them) comes at whatever times.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[derive(Clone, Debug)]
    enum Op {
        /// A body that declared its length: charged whole with its request.
        Declared(u64),
        /// A body of no declared length starts: its request is charged with no bytes.
        Start,
        /// The next chunk of the n-th open streamed body (modulo).
        Chunk(usize, u64),
        /// Time passes (ms).
        Wait(u64),
    }

    /// A rate, a burst (0.1 s to 3 s of it), and what happens.
    fn case() -> impl Strategy<Value = (u64, u64, Vec<Op>)> {
        (1_000u64..50_000, 1u64..30).prop_flat_map(|(bps, tenths)| {
            let burst_bytes = bps * tenths / 10;
            (Just(bps), Just(burst_bytes), proptest::collection::vec(op(burst_bytes), 1..300))
        })
    }

    fn op(burst_bytes: u64) -> impl Strategy<Value = Op> {
        // Pieces (declared bodies and chunks) up to twice burst_bytes: bigger ones go only
        // into a full bucket.
        let piece = 1..=burst_bytes * 2;
        prop_oneof![
            piece.clone().prop_map(Op::Declared),
            Just(Op::Start),
            (0usize..4, piece).prop_map(|(i, n)| Op::Chunk(i, n)),
            (0u64..1_500).prop_map(Op::Wait),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Over every window from one admission to a later one, the bytes passed on are at
        /// most `burst_bytes` plus `bytes_per_second` × its length, a piece bigger than
        /// `burst_bytes` counted as the whole bucket it empties (it is admitted only into a
        /// full one); with no piece that big, that is the bytes themselves. A body cut once
        /// is never charged again, and none passes its cap.
        #[test]
        fn admitted_bytes_never_exceed_the_rate_plus_the_burst((bps, burst_bytes, ops) in case()) {
            let cap = burst_bytes * 3;
            let l = TenantLimit::from_json(
                &json!({"rate": 1000, "burst": 1000, "bytes_per_second": bps, "burst_bytes": burst_bytes, "max_body_bytes": cap}),
                None,
            ).unwrap();
            let mut buckets = l.buckets();
            let mut now = Instant::from_secs(1_000);
            // What passed: when, and what it cost the bucket (a piece over burst_bytes: the bucket).
            let mut passed: Vec<(Instant, u64, u64)> = Vec::new();
            // Each open streamed body, with the bytes of it passed on.
            let mut open: Vec<(StreamedBody, u64)> = Vec::new();
            for op in ops {
                match op {
                    Op::Declared(n) if n <= cap => {
                        if buckets.charge(now, n).is_allowed() {
                            passed.push((now, n, n.min(burst_bytes)));
                        }
                    }
                    Op::Declared(_) => {}
                    Op::Start => {
                        if buckets.charge(now, 0).is_allowed() {
                            open.push((StreamedBody::new(body_cap(Some(&l), None)), 0));
                        }
                    }
                    Op::Chunk(i, n) if !open.is_empty() => {
                        let at = i % open.len();
                        let within = open[at].0.take(n).is_ok();
                        if within && buckets.charge_more(now, n).is_allowed() {
                            passed.push((now, n, n.min(burst_bytes)));
                            open[at].1 += n;
                            prop_assert!(open[at].1 <= cap, "a body passed its cap");
                        } else {
                            // Cut: the rest of that body never comes.
                            open.remove(at);
                        }
                    }
                    Op::Chunk(..) => {}
                    Op::Wait(ms) => now = now + Span::from_millis(ms),
                }
            }
            let capacity_ns = u128::from(burst_bytes) * 1_000_000_000;
            for (i, &(from, _, _)) in passed.iter().enumerate() {
                let (mut cost, mut bytes, mut none_bigger) = (0u128, 0u128, true);
                for &(at, n, charged) in &passed[i..] {
                    cost += u128::from(charged);
                    bytes += u128::from(n);
                    none_bigger &= n <= burst_bytes;
                    let window_ns = u128::from((at - from).as_nanos());
                    // bytes × 1e9 ≤ burst × 1e9 + rate × window (+ rate: the bucket's capacity
                    // is rounded up to a whole nanosecond).
                    let bound = capacity_ns + u128::from(bps) * window_ns + u128::from(bps);
                    prop_assert!(cost * 1_000_000_000 <= bound, "{cost} B charged from {from:?} to {at:?}");
                    if none_bigger {
                        prop_assert!(bytes * 1_000_000_000 <= bound, "{bytes} B from {from:?} to {at:?}");
                    }
                }
            }
        }
    }
}

/// How a request names its tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identify {
    /// An API key in this header (lower-case name), verified against the SHA-256 hashes of
    /// [`Tenants::keys`]: an unknown key is refused with 401.
    Key(String),
    /// The sender names the tenant in this header, unverified (the rules then need a
    /// default limit, or every invented tenant would be unlimited).
    Named(String),
}

/// Where tenant buckets are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantScope {
    /// One count per tenant per data centre.
    Colo,
    /// One count per tenant across the fleet (each data centre's own count answers when
    /// the fleet's store cannot).
    Fleet,
    /// One count per tenant in each isolate, in its own table: no store is asked (no round
    /// trip), and N isolates admit up to N × a tenant's limit.
    Isolate,
}

impl TenantScope {
    /// The name in the rules file.
    pub const fn name(self) -> &'static str {
        match self {
            TenantScope::Colo => "colo",
            TenantScope::Fleet => "fleet",
            TenantScope::Isolate => "isolate",
        }
    }
}

/// The `tenants` section of a rules file.
#[derive(Clone, Debug, PartialEq)]
pub struct Tenants {
    /// Which requests carry a tenant.
    pub matcher: crate::edge::rules::matching::Match,
    /// How the tenant is named.
    pub identify: Identify,
    /// Lower-case hex SHA-256 of each API key → its tenant.
    pub keys: alloc::collections::BTreeMap<String, String>,
    /// Each configured tenant's limit.
    pub limits: alloc::collections::BTreeMap<String, TenantLimit>,
    /// The limit of a tenant with no entry (none: unlimited).
    pub default: Option<TenantLimit>,
    /// The biggest body any tenant may send.
    pub max_body_bytes: Option<u64>,
    /// Where buckets are counted.
    pub scope: TenantScope,
}

/// The longest tenant name, in bytes (as the admin API takes them).
pub const MAX_TENANT_BYTES: usize = 128;

/// Whether `name` can name a tenant: 1 to [`MAX_TENANT_BYTES`] bytes.
pub fn is_tenant_name(name: &str) -> bool {
    (1..=MAX_TENANT_BYTES).contains(&name.len())
}

impl Tenants {
    /// The tenant of an API key's SHA-256 (lower-case hex), when it is known.
    pub fn tenant_of_hash(&self, hash: &str) -> Option<&str> {
        self.keys.get(hash).map(String::as_str)
    }

    /// Whether `text` is a SHA-256 in lower- or upper-case hex.
    pub fn is_hash(text: &str) -> bool {
        text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
    }

    /// API key hashes → tenants, from a JSON object of SHA-256 (hex) → tenant as
    /// `tenants.keys` and the secret `SLUICEGATE_TENANT_KEYS` give them, the hashes
    /// lower-cased. Hex is read in either case, so two spellings of one hash would be one
    /// key of which only the last would count: they are refused, naming both.
    ///
    /// # Errors
    /// Every entry that is not a hash → a tenant name, and every hash given twice.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::tenants::Tenants;
    /// let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    /// let keys = Tenants::keys_from_json(&format!(r#"{{"{}": "acme"}}"#, hash.to_ascii_uppercase())).unwrap();
    /// assert_eq!(keys[hash], "acme");
    /// let twice = format!(r#"{{"{}": "acme", "{hash}": "beta"}}"#, hash.to_ascii_uppercase());
    /// assert!(Tenants::keys_from_json(&twice).unwrap_err()[0].contains("one hash in other case"));
    /// ```
    pub fn keys_from_object(entries: &Map<String, Value>) -> Result<BTreeMap<String, String>, Vec<String>> {
        let mut keys = BTreeMap::new();
        // Each lower-case hash → the spelling it was given in.
        let mut given: BTreeMap<String, &str> = BTreeMap::new();
        let mut problems = Vec::new();
        for (hash, tenant) in entries {
            let Some(tenant) = tenant.as_str().filter(|t| Self::is_hash(hash) && is_tenant_name(t)) else {
                problems.push(format!(
                    "each entry is the SHA-256 of an API key in hex (64 digits) → its tenant (a name of 1 to \
                     {MAX_TENANT_BYTES} bytes), got {} → {}",
                    brief(&format!("{hash:?}")),
                    brief(&tenant.to_string())
                ));
                continue;
            };
            let lower = hash.to_ascii_lowercase();
            if let Some(earlier) = given.get(&lower) {
                problems.push(format!(
                    "\"{earlier}\" → \"{}\" and \"{hash}\" → \"{tenant}\" are one hash in other case \
                     (hex is read in either case); give each API key once",
                    keys.get(&lower).map_or("", String::as_str)
                ));
                continue;
            }
            given.insert(lower.clone(), hash);
            keys.insert(lower, tenant.to_string());
        }
        if problems.is_empty() {
            Ok(keys)
        } else {
            Err(problems)
        }
    }

    /// [`Tenants::keys_from_object`] of JSON text, which must be one object that repeats no key.
    ///
    /// # Errors
    /// Text that is not such an object, or every problem of its entries.
    pub fn keys_from_json(text: &str) -> Result<BTreeMap<String, String>, Vec<String>> {
        let value = crate::edge::json::strict_json(text).map_err(|e| {
            alloc::vec![if e.field.is_empty() { e.message } else { format!("\"{}\" {}", brief(&e.field), e.message) }]
        })?;
        let entries = value.as_object().ok_or_else(|| {
            alloc::vec![String::from("must be a JSON object of API key SHA-256 (64 hex digits) → tenant")]
        })?;
        Self::keys_from_object(entries)
    }

    /// The API key hashes that `elsewhere` (lower-case hash → tenant, as
    /// [`Tenants::keys_from_object`] makes them) gives to another tenant than these keys
    /// do, each as (hash, tenant here, tenant there): a key has one tenant.
    pub fn conflicting_keys<'a>(
        &'a self,
        elsewhere: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> + 'a {
        elsewhere.iter().filter_map(|(hash, there)| match self.keys.get(hash) {
            Some(here) if here != there => Some((hash.as_str(), here.as_str(), there.as_str())),
            _ => None,
        })
    }
}

/// A runtime override of a tenant's limit (set through the admin API), with when it was set.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// The limit that replaces the tenant's whole.
    pub limit: TenantLimit,
    /// When it was set (ms since the epoch): a new override starts fresh buckets.
    pub set_at: u64,
}

/// Every runtime override, by tenant, as stored: `{"tenant": {"limit": {...}, "set_at": ms}}`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    by_tenant: alloc::collections::BTreeMap<String, Override>,
}

impl Overrides {
    /// The most overrides kept.
    pub const MAX: usize = 10_000;

    /// Read stored overrides; entries that no longer validate are left out (and named).
    ///
    /// # Errors
    /// Text that is not such a JSON object.
    pub fn from_json(text: &str) -> Result<(Self, alloc::vec::Vec<String>), String> {
        let value =
            crate::edge::json::strict_json(text).map_err(|e| format!("overrides are not JSON: {}", e.message))?;
        let obj = value.as_object().ok_or("overrides must be a JSON object")?;
        let mut by_tenant = alloc::collections::BTreeMap::new();
        let mut dropped = alloc::vec::Vec::new();
        for (tenant, entry) in obj {
            let limit = entry.get("limit").ok_or(()).and_then(|l| TenantLimit::from_json(l, None).map_err(|_| ()));
            match (limit, entry.get("set_at").and_then(Value::as_u64)) {
                (Ok(limit), Some(set_at)) => {
                    by_tenant.insert(tenant.clone(), Override { limit, set_at });
                }
                _ => dropped.push(tenant.clone()),
            }
        }
        Ok((Overrides { by_tenant }, dropped))
    }

    /// The overrides as stored.
    pub fn to_json(&self) -> String {
        let mut obj = Map::new();
        for (tenant, o) in &self.by_tenant {
            let limit: Value = serde_json::from_str(&o.limit.to_json()).unwrap_or(Value::Null);
            obj.insert(tenant.clone(), serde_json::json!({ "limit": limit, "set_at": o.set_at }));
        }
        Value::Object(obj).to_string()
    }

    /// The override of `tenant`.
    pub fn get(&self, tenant: &str) -> Option<&Override> {
        self.by_tenant.get(tenant)
    }

    /// Set `tenant`'s override; the one it replaces, if any. `Err` when full.
    ///
    /// # Errors
    /// [`Overrides::MAX`] overrides are held already and `tenant` has none.
    pub fn set(&mut self, tenant: &str, o: Override) -> Result<Option<Override>, String> {
        if self.by_tenant.len() >= Self::MAX && !self.by_tenant.contains_key(tenant) {
            return Err(format!("at most {} overrides are kept", Self::MAX));
        }
        Ok(self.by_tenant.insert(tenant.to_string(), o))
    }

    /// Set `tenant`'s override to `limit` as of `at` (ms), unless that limit is its override
    /// already: the override it had, if any, and whether anything changed. An unchanged
    /// override keeps its `set_at`, so a repeated change does not start the tenant's buckets
    /// afresh again (a retried request is idempotent).
    ///
    /// # Errors
    /// As for [`Overrides::set`].
    pub fn put(&mut self, tenant: &str, limit: TenantLimit, at: u64) -> Result<(Option<Override>, bool), String> {
        match self.by_tenant.get(tenant) {
            Some(same) if same.limit == limit => Ok((Some(same.clone()), false)),
            _ => self.set(tenant, Override { limit, set_at: at }).map(|before| (before, true)),
        }
    }

    /// Remove `tenant`'s override; the one removed, if any.
    pub fn remove(&mut self, tenant: &str) -> Option<Override> {
        self.by_tenant.remove(tenant)
    }

    /// The tenants with an override, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Override)> {
        self.by_tenant.iter()
    }

    /// Lower every override's `max_body_bytes` to `instance_max` where it is above it
    /// ([`TenantLimit::clamp_body`]): an override is checked against the instance's cap when
    /// it is read, so one stored before a deploy that lowered the cap never lets a bigger
    /// body through. The overrides lowered, each with what it had.
    pub fn clamp_bodies(&mut self, instance_max: Option<u64>) -> Vec<Clamped> {
        let mut clamped = Vec::new();
        for (tenant, o) in &mut self.by_tenant {
            if let Some(was) = o.limit.clamp_body(instance_max) {
                let to = o.limit.max_body_bytes.unwrap_or(was);
                clamped.push(Clamped { tenant: tenant.clone(), set_at: o.set_at, was, to });
            }
        }
        clamped
    }
}

/// An override whose `max_body_bytes` was above the instance's and was lowered to it when read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clamped {
    /// The tenant.
    pub tenant: String,
    /// When its override was set (ms since the epoch): with the tenant, names the override.
    pub set_at: u64,
    /// Its `max_body_bytes` as stored.
    pub was: u64,
    /// What applies: the instance's.
    pub to: u64,
}

/// Whether `given` equals `secret`, in time that depends only on their lengths (a
/// credential check that leaks nothing about how much of it matched).
///
/// # Examples
/// ```
/// use sluicegate::tenants::same_secret;
/// assert!(same_secret("s3cret", "s3cret"));
/// assert!(!same_secret("s3cret", "s3cres"));
/// assert!(!same_secret("s3cret", "s3cret-and-more"));
/// ```
pub fn same_secret(given: &str, secret: &str) -> bool {
    let (a, b) = (given.as_bytes(), secret.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

#[cfg(test)]
mod override_tests {
    use super::*;

    #[test]
    fn overrides_round_trip_through_their_stored_form_and_bad_entries_are_named() {
        let limit =
            TenantLimit::from_json(&serde_json::json!({"rate": 0.5, "burst": 2, "max_queue": 3}), None).unwrap();
        let mut o = Overrides::default();
        assert_eq!(o.set("acme", Override { limit: limit.clone(), set_at: 42 }).unwrap(), None);
        let (back, dropped) = Overrides::from_json(&o.to_json()).unwrap();
        assert_eq!((back, dropped.len()), (o.clone(), 0));
        let (partial, dropped) = Overrides::from_json(
            r#"{"ok":{"limit":{"rate":1,"burst":1},"set_at":1},"bad":{"limit":{"rate":-1},"set_at":1}}"#,
        )
        .unwrap();
        assert_eq!(dropped, ["bad"]);
        assert!(partial.get("ok").is_some());
        assert_eq!(o.remove("acme").map(|x| x.set_at), Some(42));
        assert!(Overrides::from_json("[]").is_err());
    }

    #[test]
    fn putting_the_override_in_force_again_changes_nothing_and_a_full_set_refuses_new_tenants() {
        let limit = |burst: u32| TenantLimit::from_json(&serde_json::json!({"rate": 1, "burst": burst}), None).unwrap();
        let mut o = Overrides::default();
        assert_eq!(o.put("acme", limit(2), 10).unwrap(), (None, true));
        let (before, changed) = o.put("acme", limit(2), 20).unwrap();
        assert_eq!((before.map(|b| b.set_at), changed), (Some(10), false));
        assert_eq!(o.get("acme").unwrap().set_at, 10, "the buckets are not started afresh again");
        let (before, changed) = o.put("acme", limit(3), 30).unwrap();
        assert_eq!((before.map(|b| b.limit), changed), (Some(limit(2)), true));
        assert_eq!(o.get("acme").unwrap().set_at, 30);
        for i in 1..Overrides::MAX {
            o.put(&format!("t{i}"), limit(1), 1).unwrap();
        }
        assert!(o.put("one-too-many", limit(1), 1).unwrap_err().contains("at most 10000"));
        assert!(o.put("acme", limit(4), 40).unwrap().1, "a tenant with an override may still change it");
    }

    #[test]
    fn an_override_above_a_lowered_instance_cap_is_clamped_when_read() {
        let stored = r#"{"big":{"limit":{"rate":1,"burst":1,"max_body_bytes":5000},"set_at":7},
                         "small":{"limit":{"rate":1,"burst":1,"max_body_bytes":500},"set_at":8},
                         "none":{"limit":{"rate":1,"burst":1},"set_at":9}}"#;
        let (mut o, _) = Overrides::from_json(stored).unwrap();
        assert_eq!(o.clone().clamp_bodies(None), [], "no instance cap: nothing to clamp");
        assert_eq!(o.clamp_bodies(Some(1000)), [Clamped { tenant: "big".into(), set_at: 7, was: 5000, to: 1000 }]);
        assert_eq!(o.get("big").unwrap().limit.max_body_bytes, Some(1000));
        assert_eq!(o.get("small").unwrap().limit.max_body_bytes, Some(500));
        assert_eq!(body_cap(Some(&o.get("none").unwrap().limit), Some(1000)), Some(1000), "the instance's cap applies");
        assert_eq!(o.clamp_bodies(Some(1000)), [], "clamped once");
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const OTHER: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    #[test]
    fn secret_keys_are_read_as_the_rules_file_reads_tenants_keys() {
        let upper = HASH.to_ascii_uppercase();
        assert_eq!(Tenants::keys_from_json(&format!(r#"{{"{upper}":"acme"}}"#)).unwrap()[HASH], "acme");
        let errs = Tenants::keys_from_json(&format!(r#"{{"{HASH}":"acme","{upper}":"beta"}}"#)).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains(&format!("\"{upper}\" → \"beta\" and \"{HASH}\" → \"acme\"")), "{errs:?}");
        let errs = Tenants::keys_from_json(&format!(r#"{{"{HASH}":"acme","{HASH}":"beta"}}"#)).unwrap_err();
        assert!(errs[0].contains(&format!("\"{HASH}\" is given twice")), "{errs:?}");
        for bad in [
            r#"{"nothex":"acme"}"#.to_string(),
            format!(r#"{{"{HASH}":""}}"#),
            format!(r#"{{"{HASH}":7}}"#),
            format!(r#"{{"{HASH}":"{}"}}"#, "t".repeat(MAX_TENANT_BYTES + 1)),
            "[]".to_string(),
            "not json".to_string(),
        ] {
            assert_eq!(Tenants::keys_from_json(&bad).unwrap_err().len(), 1, "{bad}");
        }
        let long = format!(r#"{{"{HASH}":"{}"}}"#, "t".repeat(10_000));
        assert!(Tenants::keys_from_json(&long).unwrap_err()[0].len() < 400, "a long value is not repeated whole");
    }

    #[test]
    fn a_key_the_rules_file_and_the_secret_give_to_two_tenants_is_a_conflict_naming_both() {
        let set = crate::edge::rules::RuleSet::from_json(&format!(
            r#"{{"rules":[],"tenants":{{"match":{{}},"key_header":"x-api-key","keys":{{"{HASH}":"acme","{OTHER}":"beta"}}}}}}"#
        ))
        .unwrap();
        let tenants = set.tenants().unwrap();
        let secret =
            Tenants::keys_from_json(&format!(r#"{{"{}":"intruder","{OTHER}":"beta"}}"#, HASH.to_ascii_uppercase()))
                .unwrap();
        assert_eq!(tenants.conflicting_keys(&secret).collect::<Vec<_>>(), [(HASH, "acme", "intruder")]);
        let agreeing = Tenants::keys_from_json(&format!(r#"{{"{HASH}":"acme"}}"#)).unwrap();
        assert_eq!(tenants.conflicting_keys(&agreeing).count(), 0, "the same tenant in both is no conflict");
    }
}
