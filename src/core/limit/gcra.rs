//! GCRA, the generic cell rate algorithm: a token bucket kept as one number.

use super::{ConfigError, CostTooHigh, Decision, Limiter, Quota};
use crate::core::time::{Instant, Span};

/// A token bucket of `burst` tokens refilled one every `T` (the emission interval), kept
/// as one theoretical arrival time (TAT).
///
/// A request of cost `c` is admitted when, after it, the bucket would not be more than
/// `burst × T` in debt: `max(TAT, now) + c·T − now ≤ burst·T`. The tolerance
/// `τ = (burst − 1)·T` is what lets `burst` requests through back to back; it is not the
/// capacity (`burst·T`), and confusing the two lets one extra request through after a long
/// idle.
///
/// ```text
/// burst 3, T = 1 s, one request per mark:
/// t(s)   0   0   0   0   1   2   2
///        ✓   ✓   ✓   ✗   ✓   ✓   ✗     (the 4th waits 1 s; idle refills one per second)
/// ```
///
/// In any window of length `W` it admits at most `burst + ⌊W/T⌋` units.
///
/// # Examples
/// ```
/// use sluicegate::limit::{Gcra, Limiter};
/// use sluicegate::{Decision, Instant, Span};
/// // 12 per minute, burst 6
/// let mut bucket = Gcra::new(6, Span::from_secs(60), 12).unwrap();
/// let t = Instant::ZERO;
/// for _ in 0..6 { assert!(bucket.check(t, 1).unwrap().is_allowed()); }
/// assert_eq!(bucket.check(t, 1).unwrap(), Decision::Deny { retry_after: Span::from_secs(5) });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    tat: Instant,
    interval: u64,
    /// `burst × interval`, saturating: kept so that a check multiplies at most once (wasm32
    /// has no 64-bit multiply with overflow check; it calls a 128-bit one).
    capacity: u64,
    burst: u32,
}

impl Gcra {
    /// A bucket of `burst` that refills `count` units every `period` (`T = period / count`,
    /// rounded up to whole nanoseconds so the rate is never exceeded, and at least 1 ns).
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`] for a zero burst or count, [`ConfigError::ZeroPeriod`] for
    /// a zero period.
    pub fn new(burst: u32, period: Span, count: u32) -> Result<Self, ConfigError> {
        if burst == 0 || count == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        if period.is_zero() {
            return Err(ConfigError::ZeroPeriod);
        }
        Ok(Self::with_interval(burst, Span::from_nanos(period.as_nanos().div_ceil(u64::from(count)))))
    }

    /// A bucket of `burst` that refills one unit every `interval` (clamped to ≥ 1 ns).
    ///
    /// # Panics
    /// Never; a zero `burst` is raised to 1. Prefer [`Gcra::new`] for validated input.
    pub fn with_interval(burst: u32, interval: Span) -> Self {
        let (interval, burst) = (interval.as_nanos().max(1), burst.max(1));
        Gcra { tat: Instant::ZERO, interval, capacity: interval.saturating_mul(u64::from(burst)), burst }
    }

    /// Check one request of `cost` against a bucket of this quota whose state is `tat`
    /// alone (the TAT is updated on an admit; a denial changes nothing).
    ///
    /// # Errors
    /// [`CostTooHigh`] when `cost` exceeds the burst.
    #[inline]
    pub fn check_tat(&self, tat: &mut Instant, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, next) = self.evaluate_from(*tat, now, cost)?;
        *tat = next;
        Ok(decision)
    }

    /// The emission interval of `per_second` requests per second, rounded up to whole
    /// nanoseconds so the rate is never exceeded; `None` outside one per `slowest` to 1e9
    /// per second (a longer interval would overflow the bucket's arithmetic), and for NaN or
    /// an infinity. The quotient is bounded in floating point before it becomes an integer,
    /// so a rate too slow to represent is refused, never wrapped into a fast one.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::limit::Gcra;
    /// use sluicegate::Span;
    /// let year = Span::from_secs(366 * 86_400);
    /// assert_eq!(Gcra::interval_of_rate(0.5, year), Some(Span::from_secs(2)));
    /// assert_eq!(Gcra::interval_of_rate(3.0, year), Some(Span::from_nanos(333_333_334)));
    /// assert_eq!(Gcra::interval_of_rate(1e-10, year), None);
    /// assert_eq!(Gcra::interval_of_rate(1e-12, Span::from_nanos(u64::MAX)), None, "1e21 ns is past u64");
    /// ```
    pub fn interval_of_rate(per_second: f64, slowest: Span) -> Option<Span> {
        /// 2^64: the first quotient a `u64` cannot hold.
        const PAST_U64: f64 = 18_446_744_073_709_551_616.0;
        if !(per_second.is_finite() && per_second > 0.0 && per_second <= 1e9) {
            return None;
        }
        // At least 1: the rate is at most 1e9. At most +∞: the rate may be subnormal.
        let nanos = 1e9 / per_second;
        if !(nanos < PAST_U64 && nanos <= slowest.as_nanos() as f64) {
            return None;
        }
        // 1 ≤ nanos < 2^64: the cast is the exact floor. No `f64::ceil` without std: round up by hand.
        let floor = nanos as u64;
        let ceil = if (floor as f64) < nanos { floor.checked_add(1)? } else { floor };
        // The float comparison rounds `slowest`; the integer one is exact.
        let interval = Span::from_nanos(ceil);
        (interval <= slowest).then_some(interval)
    }

    /// The same quota's bucket at theoretical arrival time `tat`.
    pub(crate) fn at_tat(mut self, tat: Instant) -> Self {
        self.tat = tat;
        self
    }

    /// The emission interval `T`.
    pub fn interval(&self) -> Span {
        Span::from_nanos(self.interval)
    }

    /// The burst: the most units admitted back to back.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn evaluate(&self, now: Instant, cost: u32) -> Result<(Decision, Instant), CostTooHigh> {
        self.evaluate_from(self.tat, now, cost)
    }

    /// This bucket's decision for a bucket whose theoretical arrival time is `tat`: the
    /// decision and the TAT to keep. Lets a table of many buckets of one quota keep 8 bytes
    /// per bucket ([`Gcra::check_tat`]).
    #[inline]
    fn evaluate_from(&self, tat: Instant, now: Instant, cost: u32) -> Result<(Decision, Instant), CostTooHigh> {
        if cost > self.burst {
            return Err(CostTooHigh { cost, capacity: u64::from(self.burst) });
        }
        // cost ≤ burst, so the charge is at most the capacity: it cannot overflow unless that saturated.
        let exact = self.capacity < u64::MAX;
        let charge =
            if exact { self.interval * u64::from(cost) } else { self.interval.saturating_mul(u64::from(cost)) };
        if tat <= now && exact {
            // A full bucket (idle since its TAT), as most of a large table's are when their
            // key comes back: admitted, and what remains is plain, with no division (the
            // capacity is burst × T exactly, and the debt cost × T, unless the clock's end
            // cuts the new TAT short).
            if let Some(new_tat) = now.as_nanos().checked_add(charge) {
                return Ok((
                    Decision::Allow { remaining: u64::from(self.burst - cost), reset: Span::from_nanos(charge) },
                    Instant::from_nanos(new_tat),
                ));
            }
        }
        let start = tat.max(now);
        let new_tat = start + Span::from_nanos(charge);
        let debt = (new_tat - now).as_nanos();
        let capacity = self.capacity();
        if debt > capacity {
            return Ok((Decision::Deny { retry_after: Span::from_nanos(debt - capacity) }, tat));
        }
        let remaining = (capacity - debt) / self.interval;
        Ok((Decision::Allow { remaining, reset: new_tat - now }, new_tat))
    }
}

impl super::SaveState for Gcra {
    fn save(&self, out: &mut alloc::vec::Vec<u64>) {
        out.push(self.tat.as_nanos());
    }
    fn restore(&mut self, words: &mut dyn Iterator<Item = u64>) -> Option<()> {
        self.tat = Instant::from_nanos(words.next()?);
        Some(())
    }
}

impl Limiter for Gcra {
    fn check(&mut self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        let (decision, tat) = self.evaluate(now, cost)?;
        self.tat = tat;
        Ok(decision)
    }

    fn peek(&self, now: Instant, cost: u32) -> Result<Decision, CostTooHigh> {
        self.evaluate(now, cost).map(|(d, _)| d)
    }

    fn quota(&self) -> Quota {
        Quota { limit: u64::from(self.burst), window: Span::from_nanos(self.capacity()) }
    }

    fn full_at(&self) -> Instant {
        self.tat
    }

    fn reset(&mut self) {
        self.tat = Instant::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn does_not_allow_one_extra_request_after_a_long_idle() {
        let mut g = Gcra::new(3, Span::from_secs(3), 3).unwrap();
        let t = Instant::from_secs(1_000);
        for _ in 0..3 {
            assert!(g.check(t, 1).unwrap().is_allowed());
        }
        assert!(!g.check(t, 1).unwrap().is_allowed());
    }

    #[test]
    fn a_denial_charges_nothing_and_says_exactly_when_to_return() {
        let mut g = Gcra::new(1, Span::from_secs(1), 1).unwrap();
        let t = Instant::from_secs(5);
        assert!(g.check(t, 1).unwrap().is_allowed());
        let before = g;
        let Decision::Deny { retry_after } = g.check(t + Span::from_millis(300), 1).unwrap() else {
            panic!("second request in the same second must be refused")
        };
        assert_eq!(g, before);
        assert_eq!(retry_after, Span::from_millis(700));
        assert!(g.check(t + Span::from_millis(300) + retry_after, 1).unwrap().is_allowed());
    }

    #[test]
    fn remaining_and_reset_describe_the_bucket_after_the_request() {
        let mut g = Gcra::new(5, Span::from_secs(5), 5).unwrap();
        assert_eq!(
            g.check(Instant::from_secs(10), 2).unwrap(),
            Decision::Allow { remaining: 3, reset: Span::from_secs(2) }
        );
    }

    #[test]
    fn a_full_bucket_at_the_clock_s_end_counts_what_the_saturated_tat_charged() {
        // 2 s charged 0.5 s before the clock's end: the TAT stops at the end, 0.5 s of debt.
        let mut g = Gcra::new(5, Span::from_secs(5), 5).unwrap();
        let now = Instant::from_nanos(u64::MAX - 500_000_000);
        assert_eq!(g.check(now, 2).unwrap(), Decision::Allow { remaining: 4, reset: Span::from_millis(500) });
    }

    #[test]
    fn a_cost_above_the_burst_is_an_error_not_a_denial() {
        let mut g = Gcra::new(4, Span::from_secs(1), 4).unwrap();
        assert_eq!(g.check(Instant::ZERO, 5), Err(CostTooHigh { cost: 5, capacity: 4 }));
    }

    #[test]
    fn extreme_rates_never_truncate_the_interval_to_zero() {
        let g = Gcra::new(1, Span::from_nanos(1), u32::MAX).unwrap();
        assert_eq!(g.interval(), Span::from_nanos(1));
        assert_eq!(Gcra::new(0, Span::from_secs(1), 1), Err(ConfigError::ZeroLimit));
        assert_eq!(Gcra::new(1, Span::ZERO, 1), Err(ConfigError::ZeroPeriod));
    }

    const YEAR: Span = Span::from_secs(366 * 86_400);

    #[test]
    fn a_rate_too_slow_to_represent_is_refused_not_made_unlimited() {
        // 1e9 / 1e-12 = 1e21 ns: past u64, which a cast would saturate and the round-up wrap to 0.
        for slowest in [YEAR, Span::from_nanos(u64::MAX)] {
            assert_eq!(Gcra::interval_of_rate(1e-12, slowest), None);
            assert_eq!(Gcra::interval_of_rate(f64::MIN_POSITIVE, slowest), None);
            assert_eq!(Gcra::interval_of_rate(5e-324, slowest), None, "subnormal: the quotient is infinite");
        }
        for nonsense in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, -1.0, 1e9 + 1.0, f64::MAX] {
            assert_eq!(Gcra::interval_of_rate(nonsense, YEAR), None, "{nonsense}");
        }
    }

    #[test]
    fn the_slowest_and_fastest_rates_are_their_bounds_exactly() {
        assert_eq!(Gcra::interval_of_rate(1e9, YEAR), Some(Span::from_nanos(1)));
        // 2^-24 per second: exactly 1e9·2^24 ns (194 days), at the bound and 1 ns past it.
        let (rate, interval) = (1.0 / 16_777_216.0, Span::from_nanos(16_777_216_000_000_000));
        assert_eq!(Gcra::interval_of_rate(rate, interval), Some(interval));
        assert_eq!(Gcra::interval_of_rate(rate, Span::from_nanos(interval.as_nanos() - 1)), None);
        // 2^-34 per second: 1e9·2^34 ns, about 1.7e19, just below 2^64.
        let tiny = 1.0 / 17_179_869_184.0;
        assert_eq!(
            Gcra::interval_of_rate(tiny, Span::from_nanos(u64::MAX)),
            Some(Span::from_nanos(17_179_869_184_000_000_000))
        );
        assert_eq!(Gcra::interval_of_rate(tiny / 2.0, Span::from_nanos(u64::MAX)), None, "3.4e19 ns is past u64");
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod extremes {
        use super::*;
        use proptest::prelude::*;

        /// Any f64 at all: every bit pattern (NaN, infinities, subnormals, negatives) and
        /// the neighbourhood of the bounds.
        fn any_rate() -> impl Strategy<Value = f64> {
            prop_oneof![any::<u64>().prop_map(f64::from_bits), any::<f64>(), (1e-30f64..1e-6), (1e-9f64..2e9),]
        }

        fn any_slowest() -> impl Strategy<Value = Span> {
            prop_oneof![Just(YEAR), Just(Span::from_nanos(u64::MAX)), (1u64..=u64::MAX).prop_map(Span::from_nanos)]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4_000))]

            #[test]
            fn any_rate_is_refused_or_an_interval_within_bounds_never_faster_than_asked(
                rate in any_rate(),
                slowest in any_slowest(),
            ) {
                if let Some(interval) = Gcra::interval_of_rate(rate, slowest) {
                    let nanos = interval.as_nanos();
                    prop_assert!(rate.is_finite() && rate > 0.0 && rate <= 1e9, "accepted {}", rate);
                    prop_assert!((1..=slowest.as_nanos()).contains(&nanos), "{} ns for {}/s", nanos, rate);
                    // Never faster: the interval is at least the quotient, and within 1 ns of it.
                    let exact = 1e9 / rate;
                    prop_assert!(nanos as f64 >= exact, "{} ns is faster than {}/s ({} ns)", nanos, rate, exact);
                    prop_assert!(nanos as f64 - exact < 1.0, "{} ns for {} ns", nanos, exact);
                    // And a bucket built on it (within the year rules allow, so that its arithmetic
                    // cannot overflow) admits no more than its rate.
                    if interval <= YEAR {
                        let mut bucket = Gcra::with_interval(1, interval);
                        let t = Instant::from_secs(1_000);
                        prop_assert!(bucket.check(t, 1).unwrap().is_allowed());
                        prop_assert!(!bucket.check(t + Span::from_nanos(nanos - 1), 1).unwrap().is_allowed());
                        prop_assert!(bucket.check(t + interval, 1).unwrap().is_allowed());
                    }
                } else {
                    let fits = rate.is_finite() && rate > 0.0 && rate <= 1e9 && 1e9 / rate <= slowest.as_nanos() as f64 * (1.0 - 1e-15);
                    prop_assert!(!fits, "refused {}/s although {} ns fits under {:?}", rate, 1e9 / rate, slowest);
                }
            }

            /// Every decision is the documented formula worked out in 128 bits, whether the
            /// bucket is full (its TAT passed: no division) or in debt: admitted when
            /// `max(TAT, now) + cost·T − now ≤ burst·T`, with the whole units left and the time
            /// to full, else refused for the time until it would be admitted.
            #[test]
            fn decisions_are_the_formula_full_bucket_or_not(
                burst in 1u32..=1_000,
                interval in prop_oneof![1u64..=1_000, 1u64..=1_000_000_000],
                cost in 1u32..=1_000,
                tat in 0u64..=4_000_000_000_000,
                now in prop_oneof![0u64..=4_000_000_000_000, Just(2_000_000_000_000)],
            ) {
                let cost = cost.min(burst);
                let mut g = Gcra::with_interval(burst, Span::from_nanos(interval)).at_tat(Instant::from_nanos(tat));
                let (i, b, c) = (u128::from(interval), u128::from(burst), u128::from(cost));
                let new_tat = u128::from(tat.max(now)) + c * i;
                let debt = new_tat - u128::from(now);
                let want = if debt > b * i {
                    Decision::Deny { retry_after: Span::from_nanos((debt - b * i) as u64) }
                } else {
                    Decision::Allow { remaining: ((b * i - debt) / i) as u64, reset: Span::from_nanos(debt as u64) }
                };
                prop_assert_eq!(g.check(Instant::from_nanos(now), cost).unwrap(), want);
                let kept = if want.is_allowed() { new_tat as u64 } else { tat };
                prop_assert_eq!(g.tat, Instant::from_nanos(kept));
            }
        }
    }
}
