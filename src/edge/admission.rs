//! Admission before a request's body is read: cheap checks that protect the edge itself,
//! not a quota. In order: the client's address ([`IpTable`]), the whole isolate (one
//! [`Gcra`]), the body bytes of the request's source ([`ByteBucket`]).
//!
//! The per-address table has a fixed number of slots, addressed by a salted hash of the
//! address (IPv6 by its /64), so a flood of invented addresses can never grow memory: two
//! addresses that share a slot share its bucket. The salt is chosen per process, so nobody
//! outside can aim addresses at one slot.

use crate::core::limit::{Decision, Gcra};
use crate::core::time::{Instant, Span};
use crate::edge::identity::ClientIp;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::hash::BuildHasher;
use foldhash::fast::FixedState;

/// GCRA buckets of one quota, one per slot, addressed by a salted hash of the client's
/// address: 8 bytes a slot, allocated once.
///
/// # Examples
/// ```
/// use sluicegate::admission::IpTable;
/// use sluicegate::identity::ClientIp;
/// use sluicegate::limit::Gcra;
/// use sluicegate::{Instant, Span};
/// let mut table = IpTable::with_slots(Gcra::new(2, Span::from_secs(1), 2).unwrap(), 0x5eed, 1 << 10);
/// let ip = ClientIp::from_ip("198.51.100.7".parse().unwrap());
/// let t = Instant::from_secs(100);
/// assert!(table.check(ip, t).is_allowed());
/// assert!(table.check(ip, t).is_allowed());
/// assert!(!table.check(ip, t).is_allowed());
/// ```
#[derive(Clone, Debug)]
pub struct IpTable {
    quota: Gcra,
    hasher: FixedState,
    shift: u32,
    tats: Vec<Instant>,
}

impl IpTable {
    /// The number of slots of [`IpTable::new`]: 2^20 (8 MiB).
    pub const SLOTS: usize = 1 << 20;

    /// A table of [`IpTable::SLOTS`] buckets of `quota`, hashing with `salt`.
    pub fn new(quota: Gcra, salt: u64) -> Self {
        Self::with_slots(quota, salt, Self::SLOTS)
    }

    /// A table of `slots` buckets (rounded up to a power of two, at least 2).
    pub fn with_slots(quota: Gcra, salt: u64, slots: usize) -> Self {
        let slots = slots.max(2).next_power_of_two();
        IpTable {
            quota,
            hasher: FixedState::with_seed(salt),
            shift: 64 - slots.trailing_zeros(),
            tats: vec![Instant::ZERO; slots],
        }
    }

    /// Charge one request of `ip`. A denial changes nothing.
    pub fn check(&mut self, ip: ClientIp, now: Instant) -> Decision {
        let slot = (self.hasher.hash_one(ip) >> self.shift) as usize;
        // Cost 1 never exceeds a burst of at least 1.
        self.quota.check_tat(&mut self.tats[slot], now, 1).unwrap_or(Decision::Deny { retry_after: Span::ZERO })
    }

    /// How many slots the table holds (fixed at construction).
    pub fn slots(&self) -> usize {
        self.tats.len()
    }
}

/// A bucket of body bytes: `bytes_per_second`, up to `burst_bytes` back to back. A body
/// bigger than `burst_bytes` is admitted only into a full bucket, and empties it (so one
/// large upload is possible, but never two in a row).
///
/// ```text
/// 1,000 B/s, burst 1,000 B:   t=0 600 B ✓   t=0 600 B ✗ (wait 0.2 s)   t=1 5,000 B ✓ (full → empty)
/// ```
///
/// # Examples
/// ```
/// use sluicegate::admission::ByteBucket;
/// use sluicegate::{Instant, Span};
/// let mut bucket = ByteBucket::new(1_000, 1_000).unwrap();
/// let t = Instant::from_secs(10);
/// assert!(bucket.check(600, t).is_allowed());
/// assert!(!bucket.check(600, t).is_allowed());
/// assert!(bucket.check(5_000, t + Span::from_secs(1)).is_allowed());
/// assert!(!bucket.check(1, t + Span::from_secs(1)).is_allowed());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteBucket {
    bytes_per_second: u64,
    capacity: Span,
    tat: Instant,
}

impl ByteBucket {
    /// A bucket refilling `bytes_per_second` up to `burst_bytes`; `None` when either is 0.
    pub fn new(bytes_per_second: u64, burst_bytes: u64) -> Option<Self> {
        if bytes_per_second == 0 || burst_bytes == 0 {
            return None;
        }
        let mut bucket = ByteBucket { bytes_per_second, capacity: Span::ZERO, tat: Instant::ZERO };
        bucket.capacity = bucket.time_for(burst_bytes);
        Some(bucket)
    }

    /// How long `bytes` take to refill, rounded up to whole nanoseconds.
    fn time_for(&self, bytes: u64) -> Span {
        let nanos = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(self.bytes_per_second));
        Span::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Charge `bytes`. A denial changes nothing; its `retry_after` is when the bytes would
    /// fit (for an oversized body: when the bucket is full again).
    pub fn check(&mut self, bytes: u64, now: Instant) -> Decision {
        let needed = self.time_for(bytes);
        if needed > self.capacity {
            if self.tat > now {
                return Decision::Deny { retry_after: self.tat - now };
            }
            self.tat = now + self.capacity;
            return Decision::Allow { remaining: 0, reset: self.capacity };
        }
        let new_tat = self.tat.max(now) + needed;
        let debt = new_tat - now;
        if debt > self.capacity {
            return Decision::Deny { retry_after: debt - self.capacity };
        }
        self.tat = new_tat;
        let left = self.capacity - debt;
        let remaining = (u128::from(left.as_nanos()) * u128::from(self.bytes_per_second) / 1_000_000_000) as u64;
        Decision::Allow { remaining, reset: debt }
    }

    /// Whether the bucket is full at `now` (holding it is the same as holding nothing).
    pub fn is_full(&self, now: Instant) -> bool {
        self.tat <= now
    }
}

impl crate::core::limit::SaveState for ByteBucket {
    fn save(&self, out: &mut Vec<u64>) {
        out.push(self.tat.as_nanos());
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        self.tat = Instant::from_nanos(words.next()?);
        Some(())
    }
}

/// Why a request's body framing cannot be trusted: answered `400` before anything is read
/// or charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramingError {
    /// Both `Content-Length` and `Transfer-Encoding`: which one framed the body depends on
    /// who reads it, so a cap checked against one can be passed by the other (RFC 9112
    /// §6.3 calls such a message an attempt at request smuggling).
    LengthAndEncoding,
    /// A `Content-Length` that is not one whole number of bytes (repeats of one value are
    /// that value).
    BadLength,
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FramingError::LengthAndEncoding => "the request has both Content-Length and Transfer-Encoding",
            FramingError::BadLength => "the request's Content-Length is not a whole number of bytes",
        })
    }
}

/// The body length a request declares (`None`: no `Content-Length`), from its
/// `Content-Length` and `Transfer-Encoding` headers as received.
///
/// # Examples
/// ```
/// use sluicegate::admission::{declared_length, FramingError};
/// assert_eq!(declared_length(Some("10"), None), Ok(Some(10)));
/// assert_eq!(declared_length(Some("10, 10"), None), Ok(Some(10)));
/// assert_eq!(declared_length(None, Some("chunked")), Ok(None));
/// assert_eq!(declared_length(Some("10"), Some("chunked")), Err(FramingError::LengthAndEncoding));
/// assert_eq!(declared_length(Some("10, 20"), None), Err(FramingError::BadLength));
/// ```
///
/// # Errors
/// [`FramingError`] for framing a cap could not be checked against.
pub fn declared_length(
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Result<Option<u64>, FramingError> {
    let Some(field) = content_length else { return Ok(None) };
    if transfer_encoding.is_some() {
        return Err(FramingError::LengthAndEncoding);
    }
    let mut length = None;
    for value in field.split(',').map(|v| v.trim_matches([' ', '\t'])) {
        let valid = !value.is_empty() && value.len() <= 19 && value.bytes().all(|b| b.is_ascii_digit());
        let n = value.parse::<u64>().ok().filter(|_| valid).ok_or(FramingError::BadLength)?;
        if length.is_some_and(|seen| seen != n) {
            return Err(FramingError::BadLength);
        }
        length = Some(n);
    }
    Ok(length)
}

/// How a streamed body contradicted the length it declared (and was charged). The body is cut
/// at the first byte past its `Content-Length`, or at its end when it brought fewer, and the
/// request answered `400`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthError {
    /// More bytes came than `Content-Length` said.
    Longer {
        /// The declared length.
        declared: u64,
    },
    /// The body ended before `Content-Length` bytes.
    Shorter {
        /// The declared length.
        declared: u64,
    },
}

impl fmt::Display for LengthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthError::Longer { declared } => {
                write!(f, "the body is longer than its Content-Length of {declared} bytes")
            }
            LengthError::Shorter { declared } => {
                write!(f, "the body ended before its Content-Length of {declared} bytes")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> ClientIp {
        ClientIp::from_ip(text.parse().unwrap())
    }

    #[test]
    fn each_address_has_its_own_bucket_and_a_slash_64_is_one_address() {
        let mut table = IpTable::with_slots(Gcra::new(1, Span::from_secs(1), 1).unwrap(), 7, 1 << 16);
        let t = Instant::from_secs(50);
        assert!(table.check(ip("2001:db8:1:2::1"), t).is_allowed());
        assert!(!table.check(ip("2001:db8:1:2:ffff::9"), t).is_allowed(), "the same /64");
        assert!(table.check(ip("198.51.100.1"), t).is_allowed());
        assert_eq!(table.check(ip("198.51.100.1"), t), Decision::Deny { retry_after: Span::from_secs(1) });
        assert_eq!(table.slots(), 1 << 16);
    }

    #[test]
    fn a_flood_of_invented_addresses_never_grows_the_table() {
        let mut table = IpTable::with_slots(Gcra::new(5, Span::from_secs(1), 5).unwrap(), 99, 1 << 12);
        let t = Instant::from_secs(1);
        for i in 0..100_000u32 {
            table.check(ClientIp::from_ip(core::net::IpAddr::from(i.to_be_bytes())), t);
        }
        assert_eq!(table.slots(), 1 << 12);
    }

    #[test]
    fn another_salt_puts_addresses_in_other_slots() {
        let quota = Gcra::new(1, Span::from_secs(1), 1).unwrap();
        let t = Instant::from_secs(1);
        // The addresses that find a slot of their own, in order, in a table of 256 slots.
        let first_in_own_slot = |salt| {
            let mut table = IpTable::with_slots(quota, salt, 1 << 8);
            (1..5_000u32)
                .map(|i| ClientIp::from_ip(core::net::IpAddr::from(i.to_be_bytes())))
                .filter(|addr| table.check(*addr, t).is_allowed())
                .collect::<Vec<_>>()
        };
        let (a, b) = (first_in_own_slot(1), first_in_own_slot(2));
        assert_eq!((a.len(), b.len()), (1 << 8, 1 << 8), "every slot filled once");
        assert_ne!(a, b, "which addresses collide depends on the salt");
    }

    #[test]
    fn an_oversized_body_goes_only_into_a_full_bucket_and_empties_it() {
        let mut bucket = ByteBucket::new(1_000, 1_000).unwrap();
        let t = Instant::from_secs(10);
        assert!(bucket.check(1, t).is_allowed());
        assert_eq!(bucket.check(5_000, t), Decision::Deny { retry_after: Span::from_millis(1) }, "not full");
        let full = t + Span::from_millis(1);
        assert!(bucket.check(5_000, full).is_allowed());
        assert_eq!(bucket.check(1, full), Decision::Deny { retry_after: Span::from_millis(1) });
        assert!(ByteBucket::new(0, 1).is_none());
    }

    #[test]
    fn a_byte_bucket_admits_its_rate_over_time() {
        let mut bucket = ByteBucket::new(100, 100).unwrap();
        let mut t = Instant::from_secs(1);
        let mut admitted = 0;
        for _ in 0..1_000 {
            if bucket.check(10, t).is_allowed() {
                admitted += 10;
            }
            t = t + Span::from_millis(10);
        }
        // 10 s: the burst of 100 plus 100 per second.
        assert!((1_000..=1_100).contains(&admitted), "{admitted}");
    }

    #[test]
    fn a_request_framed_two_ways_is_refused_before_anything_is_charged() {
        for te in ["chunked", "gzip, chunked", ""] {
            assert_eq!(declared_length(Some("10"), Some(te)), Err(FramingError::LengthAndEncoding), "{te:?}");
        }
        assert_eq!(declared_length(None, Some("chunked")), Ok(None));
        assert_eq!(declared_length(None, None), Ok(None));
    }

    #[test]
    fn a_content_length_is_one_whole_number_or_a_refusal() {
        assert_eq!(declared_length(Some(" 0 "), None), Ok(Some(0)));
        assert_eq!(declared_length(Some("5,5 , 5"), None), Ok(Some(5)));
        for bad in ["", "-1", "+5", "0x10", "1e3", "5, 6", "5,", "99999999999999999999", "1 0"] {
            assert_eq!(declared_length(Some(bad), None), Err(FramingError::BadLength), "{bad:?}");
        }
    }
}
