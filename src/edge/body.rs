//! Bodies counted as they stream: a request body the edge reads (the admin API's limit
//! documents, egress permits, proxied `POST`s) and an answer it may keep. A body is never
//! taken whole before it is measured: its declared length is checked first, then every
//! chunk as it arrives, and reading stops at the first byte over the cap, so a body of any
//! size (chunked, or lying about its length, or inflating from a small compressed one)
//! costs at most the cap in memory.
//!
//! ```text
//! cap 4096         Content-Length: 9000 → Over at once, nothing read
//!                  chunk 1500   chunk 1500   chunk 1500 → Over (4500 > 4096): stop reading
//! ```

use core::fmt;

/// The bytes of one body, counted against a cap.
///
/// # Examples
/// ```
/// use sluicegate::edge::body::{ByteCap, Over};
/// let mut cap = ByteCap::declared(4096, None).unwrap();
/// assert_eq!(cap.take(4000), Ok(()));
/// assert_eq!(cap.take(97), Err(Over { max: 4096 }));
/// assert_eq!(ByteCap::declared(4096, Some(9000)).unwrap_err(), Over { max: 4096 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteCap {
    max: u64,
    seen: u64,
}

/// A body over its cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Over {
    /// The cap, in bytes.
    pub max: u64,
}

impl fmt::Display for Over {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "The body may be at most {} bytes.", self.max)
    }
}

impl ByteCap {
    /// Counting towards `max` bytes.
    pub const fn new(max: u64) -> Self {
        ByteCap { max, seen: 0 }
    }

    /// Counting towards `max` bytes a body that declared `length` (`Content-Length`).
    ///
    /// # Errors
    /// [`Over`] when the declared length is over the cap: refuse it before reading a byte.
    pub const fn declared(max: u64, length: Option<u64>) -> Result<Self, Over> {
        match length {
            Some(length) if length > max => Err(Over { max }),
            _ => Ok(ByteCap::new(max)),
        }
    }

    /// Count a chunk of `len` bytes.
    ///
    /// # Errors
    /// [`Over`] when the body is now over the cap: stop reading it (and keep nothing of it).
    pub fn take(&mut self, len: usize) -> Result<(), Over> {
        self.seen = self.seen.saturating_add(len as u64);
        if self.seen > self.max {
            Err(Over { max: self.max })
        } else {
            Ok(())
        }
    }

    /// The bytes counted so far.
    pub const fn seen(&self) -> u64 {
        self.seen
    }

    /// The cap.
    pub const fn max(&self) -> u64 {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn a_body_is_over_on_the_first_byte_past_the_cap_whatever_it_declared() {
        let mut cap = ByteCap::declared(1_000, Some(10)).unwrap();
        assert_eq!(cap.take(600), Ok(()));
        assert_eq!(cap.take(400), Ok(()), "exactly the cap is within it");
        assert_eq!(cap.take(1), Err(Over { max: 1_000 }));
        assert_eq!(cap.seen(), 1_001);
    }

    #[test]
    fn a_declared_length_over_the_cap_is_refused_before_a_byte_is_read() {
        assert_eq!(ByteCap::declared(1_000, Some(1_001)), Err(Over { max: 1_000 }));
        assert_eq!(ByteCap::declared(1_000, Some(1_000)).map(|c| c.max()), Ok(1_000));
        assert_eq!(Over { max: 4096 }.to_string(), "The body may be at most 4096 bytes.");
    }

    #[test]
    fn counting_saturates_and_never_wraps_back_under_the_cap() {
        let mut cap = ByteCap::new(u64::MAX);
        assert_eq!(cap.take(usize::MAX), Ok(()));
        assert_eq!(cap.take(usize::MAX), Ok(()));
        let mut small = ByteCap::new(10);
        assert!(small.take(usize::MAX).is_err());
        assert!(small.take(usize::MAX).is_err());
    }
}
