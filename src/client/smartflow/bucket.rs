//! §1: the reservation token bucket.

use super::{check_time, SmartFlowError};

/// The lowest rate a bucket can have, tokens per second (§1): a rate set lower is raised to
/// this, so a run of multiplicative decreases never stalls a bucket.
pub const RATE_FLOOR: f64 = 0.5;

/// A token bucket that reserves instead of refusing (§1).
///
/// Every [`acquire`](TokenBucket::acquire) refills the bucket for the time elapsed since
/// the previous one (never above `capacity`), then deducts one token **unconditionally**.
/// Tokens may go negative: the deficit *is* the reservation, and the caller must wait
/// `-tokens / rate` seconds before sending. Callers arriving at the same instant therefore
/// each get their own wait against the accumulated deficit, spread `1 / rate` apart, instead
/// of all colliding on the same instant; the reservation is made at once, and the sleeping
/// is the caller's (outside any lock).
///
/// Decisions where the specification leaves room:
/// - A bucket's `last` refill time starts unset and is taken from the first acquire (as the
///   async reference does). A fresh bucket is full, so this is the same as setting it at
///   creation.
/// - A `now` earlier than the last refill (out-of-order callers, or a caller whose global
///   wait moved its organization charge into the future) refills nothing and leaves `last`
///   where it was, instead of draining tokens by a negative elapsed time. A monotonic clock,
///   as the reference reads, never goes back, so this never changes a conformant sequence.
/// - A non-finite `now` is refused ([`SmartFlowError::InvalidTime`]) rather than poisoning
///   the bucket's state.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::TokenBucket;
/// let mut bucket = TokenBucket::new(10.0, 10.0).unwrap();
/// let waits: Vec<f64> = (0..12).map(|_| bucket.acquire(0.0).unwrap()).collect();
/// assert_eq!(waits[..10], [0.0; 10]);
/// assert!((waits[10] - 0.1).abs() < 1e-9 && (waits[11] - 0.2).abs() < 1e-9);
/// assert!((bucket.tokens() + 2.0).abs() < 1e-9); // the deficit is the reservation
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Option<f64>,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` tokens per second up to `capacity` tokens. A rate
    /// above zero but below [`RATE_FLOOR`] is raised to the floor, as the rate setter does.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidRate`] for a rate that is not finite or not above zero;
    /// [`SmartFlowError::InvalidCapacity`] for a capacity that is not finite or below zero.
    pub fn new(rate: f64, capacity: f64) -> Result<Self, SmartFlowError> {
        let rate = check_rate(rate)?;
        if !(capacity.is_finite() && capacity >= 0.0) {
            return Err(SmartFlowError::InvalidCapacity(capacity));
        }
        Ok(TokenBucket { rate, capacity, tokens: capacity, last: None })
    }

    /// A bucket in a given state: `tokens` (negative for outstanding reservations) as of the
    /// refill at `last`.
    ///
    /// # Errors
    /// As for [`TokenBucket::new`]; [`SmartFlowError::InvalidTokens`] for a token count
    /// that is not finite or above the capacity; [`SmartFlowError::InvalidTime`] for a
    /// non-finite `last`.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::TokenBucket;
    /// let mut bucket = TokenBucket::with_state(10.0, 10.0, -5.0, 0.0).unwrap();
    /// assert_eq!(bucket.acquire(1.0).unwrap(), 0.0); // -5 + 1 s × 10 = 5, minus 1
    /// assert_eq!(bucket.tokens(), 4.0);
    /// ```
    pub fn with_state(rate: f64, capacity: f64, tokens: f64, last: f64) -> Result<Self, SmartFlowError> {
        let mut bucket = TokenBucket::new(rate, capacity)?;
        if !(tokens.is_finite() && tokens <= capacity) {
            return Err(SmartFlowError::InvalidTokens { tokens, capacity });
        }
        bucket.tokens = tokens;
        bucket.last = Some(check_time(last)?);
        Ok(bucket)
    }

    /// Reserve one token at `now` (seconds on the caller's monotonic clock) and return how
    /// many seconds to wait before sending: `0` while tokens remain, else `-tokens / rate`.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`; nothing changes.
    pub fn acquire(&mut self, now: f64) -> Result<f64, SmartFlowError> {
        Ok(self.reserve(check_time(now)?))
    }

    /// The wait an [`acquire`](TokenBucket::acquire) at `now` would return, changing
    /// nothing.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`.
    pub fn peek(&self, now: f64) -> Result<f64, SmartFlowError> {
        let mut copy = *self;
        copy.acquire(now)
    }

    /// The refill rate, tokens per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Set the refill rate, raising anything below [`RATE_FLOOR`] (zero and negative rates
    /// included) to the floor; returns the rate now in force. The new rate applies from the
    /// last refill on: the time elapsed since then is refilled at the new rate.
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidRate`] for a non-finite rate; nothing changes.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::smartflow::TokenBucket;
    /// let mut bucket = TokenBucket::new(10.0, 10.0).unwrap();
    /// assert_eq!(bucket.set_rate(3.0).unwrap(), 3.0);
    /// assert_eq!(bucket.set_rate(0.0).unwrap(), 0.5);
    /// assert!(bucket.set_rate(f64::NAN).is_err());
    /// ```
    pub fn set_rate(&mut self, rate: f64) -> Result<f64, SmartFlowError> {
        if !rate.is_finite() {
            return Err(SmartFlowError::InvalidRate(rate));
        }
        self.set_rate_clamped(rate);
        Ok(self.rate)
    }

    /// The most tokens the bucket holds.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// The tokens as of the last refill: negative while reservations are outstanding.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// When the bucket was last refilled, or `None` before its first acquire.
    pub fn last(&self) -> Option<f64> {
        self.last
    }

    /// [`TokenBucket::acquire`] for a `now` already checked (or derived from a checked one).
    pub(crate) fn reserve(&mut self, now: f64) -> f64 {
        self.reserve_cost(now, 1.0)
    }

    /// [`TokenBucket::acquire`] for a request weighing `cost` tokens instead of one (the
    /// policy simulator's weighted requests); `cost` must be finite and above zero.
    ///
    /// ```
    /// use sluicegate::smartflow::TokenBucket;
    /// let mut bucket = TokenBucket::new(2.0, 4.0).unwrap();
    /// assert_eq!(bucket.acquire_cost(0.0, 3.0).unwrap(), 0.0);
    /// assert_eq!(bucket.acquire_cost(0.0, 3.0).unwrap(), 1.0); // 2 tokens short at 2 per second
    /// ```
    ///
    /// # Errors
    /// [`SmartFlowError::InvalidTime`] for a non-finite `now`; nothing changes.
    pub fn acquire_cost(&mut self, now: f64, cost: f64) -> Result<f64, SmartFlowError> {
        let now = check_time(now)?;
        debug_assert!(cost.is_finite() && cost > 0.0);
        Ok(self.reserve_cost(now, cost))
    }

    fn reserve_cost(&mut self, now: f64, cost: f64) -> f64 {
        self.refill(now);
        self.tokens -= cost;
        self.deficit_wait()
    }

    /// Set a finite rate, raising it to the floor.
    pub(crate) fn set_rate_clamped(&mut self, rate: f64) {
        debug_assert!(rate.is_finite());
        self.rate = rate.max(RATE_FLOOR);
    }

    fn refill(&mut self, now: f64) {
        match self.last {
            None => self.last = Some(now),
            Some(last) if now > last => {
                self.tokens = self.capacity.min(self.tokens + (now - last) * self.rate);
                self.last = Some(now);
            }
            Some(_) => {}
        }
    }

    fn deficit_wait(&self) -> f64 {
        if self.tokens < 0.0 {
            -self.tokens / self.rate
        } else {
            0.0
        }
    }
}

fn check_rate(rate: f64) -> Result<f64, SmartFlowError> {
    if rate.is_finite() && rate > 0.0 {
        Ok(rate.max(RATE_FLOOR))
    } else {
        Err(SmartFlowError::InvalidRate(rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn close(a: f64, b: f64) -> bool {
        let d = a - b;
        (-1e-9..=1e-9).contains(&d)
    }

    #[test]
    fn twenty_simultaneous_reservations_on_a_fresh_bucket_are_spread_over_one_second() {
        let mut bucket = TokenBucket::new(10.0, 10.0).unwrap();
        let waits: Vec<f64> = (0..20).map(|_| bucket.acquire(5.0).unwrap()).collect();
        for (i, wait) in waits.iter().enumerate() {
            let expected = if i < 10 { 0.0 } else { (i - 9) as f64 * 0.1 };
            assert!(close(*wait, expected), "call {i}: expected {expected}, got {wait}");
        }
        assert!(close(bucket.tokens(), -10.0));
        // Sent at their reserved instants, the twenty calls are all out within 1 s.
        assert!(waits.iter().all(|w| *w <= 1.0 + 1e-9));
    }

    #[test]
    fn a_reservation_made_while_others_wait_queues_behind_them() {
        let mut bucket = TokenBucket::new(10.0, 10.0).unwrap();
        for _ in 0..15 {
            bucket.acquire(0.0).unwrap();
        }
        // 0.2 s later two tokens came back; the deficit of 5 is now 3, and one more call
        // waits behind it: (3 + 1) / 10.
        assert!(close(bucket.acquire(0.2).unwrap(), 0.4));
    }

    #[test]
    fn time_going_backwards_refills_nothing_and_keeps_the_last_refill() {
        let mut bucket = TokenBucket::with_state(10.0, 10.0, 0.0, 5.0).unwrap();
        assert!(close(bucket.acquire(4.0).unwrap(), 0.1));
        assert_eq!(bucket.last(), Some(5.0));
        assert!(close(bucket.tokens(), -1.0));
        assert!(close(bucket.acquire(5.5).unwrap(), 0.0)); // -1 + 5 - 1
        assert!(close(bucket.tokens(), 3.0));
    }

    #[test]
    fn a_rate_below_the_floor_is_raised_to_half_a_token_per_second() {
        assert_eq!(TokenBucket::new(0.1, 1.0).unwrap().rate(), RATE_FLOOR);
        let mut bucket = TokenBucket::new(1.0, 1.0).unwrap();
        assert_eq!(bucket.set_rate(-3.0).unwrap(), RATE_FLOOR);
        // At the floor a drained bucket still refills: the wait stays bounded.
        bucket.acquire(0.0).unwrap();
        assert!(close(bucket.acquire(0.0).unwrap(), 2.0));
    }

    #[test]
    fn invalid_configuration_and_times_are_refused_naming_the_value() {
        assert_eq!(TokenBucket::new(0.0, 1.0), Err(SmartFlowError::InvalidRate(0.0)));
        assert_eq!(TokenBucket::new(f64::INFINITY, 1.0), Err(SmartFlowError::InvalidRate(f64::INFINITY)));
        assert_eq!(TokenBucket::new(1.0, -1.0), Err(SmartFlowError::InvalidCapacity(-1.0)));
        assert_eq!(
            TokenBucket::with_state(1.0, 10.0, 11.0, 0.0),
            Err(SmartFlowError::InvalidTokens { tokens: 11.0, capacity: 10.0 })
        );
        let mut bucket = TokenBucket::new(1.0, 1.0).unwrap();
        assert!(matches!(bucket.acquire(f64::NAN), Err(SmartFlowError::InvalidTime(_))));
        assert_eq!(bucket.tokens(), 1.0, "a refused acquire changes nothing");
        assert!(bucket.set_rate(f64::NAN).is_err());
        assert_eq!(bucket.rate(), 1.0);
    }

    #[test]
    fn peek_reports_the_wait_without_reserving() {
        let mut bucket = TokenBucket::new(2.0, 1.0).unwrap();
        bucket.acquire(0.0).unwrap();
        assert!(close(bucket.peek(0.0).unwrap(), 0.5));
        assert!(close(bucket.peek(0.0).unwrap(), 0.5));
        assert!(close(bucket.tokens(), 0.0));
    }
}
