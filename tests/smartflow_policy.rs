//! Properties of Smart Flow's policy around a 429: `Retry-After` read back from every form
//! it can be written in, and cooldowns that are never shortened.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::smartflow::{Config, Cooldowns, OrgRateLimiter, RetryAfter, Target};
use sluicegate::{Instant, Span};

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// A Unix second as (year, month 1–12, day, weekday 0 = Monday, hour, minute, second), by
/// the usual days-to-civil algorithm written out here independently of the crate.
fn civil(unix: u64) -> (u64, usize, u64, usize, u64, u64, u64) {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    let weekday = ((days + 3) % 7) as usize; // 1970-01-01 was a Thursday
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day, weekday, secs / 3_600, secs % 3_600 / 60, secs % 60)
}

fn imf_fixdate(unix: u64) -> String {
    let (y, mo, d, wd, h, mi, s) = civil(unix);
    format!("{}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} GMT", DAYS[wd], MONTHS[mo - 1])
}

fn rfc850_date(unix: u64) -> String {
    let (y, mo, d, wd, h, mi, s) = civil(unix);
    format!("{}, {d:02}-{}-{:02} {h:02}:{mi:02}:{s:02} GMT", LONG_DAYS[wd], MONTHS[mo - 1], y % 100)
}

fn asctime_date(unix: u64) -> String {
    let (y, mo, d, wd, h, mi, s) = civil(unix);
    format!("{} {} {d:>2} {h:02}:{mi:02}:{s:02} {y:04}", DAYS[wd], MONTHS[mo - 1])
}

/// The last whole second an `Instant` (u64 nanoseconds since 1970) holds: in 2554. Later
/// dates saturate.
const LAST_HTTP_DATE: u64 = u64::MAX / 1_000_000_000;
/// 50 years of 365 days, well inside the RFC 850 window either side of now.
const FORTY_NINE_YEARS: u64 = 49 * 365 * 86_400;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn an_http_date_is_read_back_as_the_second_it_was_written_from(
        unix in 0..=LAST_HTTP_DATE,
        now in 0..=LAST_HTTP_DATE,
    ) {
        let now = Instant::from_secs(now);
        let at = Ok(RetryAfter::At(Instant::from_secs(unix)));
        prop_assert_eq!(RetryAfter::parse(&imf_fixdate(unix), now), at);
        prop_assert_eq!(RetryAfter::parse(&asctime_date(unix), now), at);
        prop_assert_eq!(RetryAfter::parse(&format!("  {}\t", imf_fixdate(unix)), now), at);
    }

    #[test]
    fn an_rfc_850_date_within_fifty_years_of_now_is_read_back_exactly(
        now in FORTY_NINE_YEARS..=LAST_HTTP_DATE - FORTY_NINE_YEARS,
        offset in 0..=2 * FORTY_NINE_YEARS,
    ) {
        let unix = now - FORTY_NINE_YEARS + offset;
        let now = Instant::from_secs(now);
        let parsed = RetryAfter::parse(&rfc850_date(unix), now);
        prop_assert_eq!(parsed, Ok(RetryAfter::At(Instant::from_secs(unix))));
    }

    #[test]
    fn the_wait_for_a_date_is_the_seconds_until_it_and_zero_once_past(
        now in 0..=LAST_HTTP_DATE,
        unix in 0..=LAST_HTTP_DATE,
    ) {
        let retry = RetryAfter::parse(&imf_fixdate(unix), Instant::from_secs(now)).unwrap();
        prop_assert_eq!(retry.wait(Instant::from_secs(now)), Span::from_secs(unix.saturating_sub(now)));
    }

    #[test]
    fn delay_seconds_are_read_back_as_written(secs in any::<u64>(), millis in 0u64..1_000) {
        let expected = Span::from_secs(secs) + Span::from_millis(millis);
        let parsed = RetryAfter::parse(&format!("{secs}.{millis:03}"), Instant::ZERO);
        prop_assert_eq!(parsed, Ok(RetryAfter::Delay(expected)));
    }

    #[test]
    fn any_text_is_read_or_refused_without_panicking(text in "\\PC{0,40}", now in any::<u64>()) {
        let _ = RetryAfter::parse(&text, Instant::from_nanos(now));
    }

    #[test]
    fn a_cooldown_is_never_shortened(
        holds in prop::collection::vec((0usize..4, 0u64..1_000, 0u64..100), 1..40),
    ) {
        let scopes = [Target::Global, Target::Org("O_1".into()), Target::Network("N_1".into()), Target::Device("Q2".into())];
        let mut cooldowns = Cooldowns::default();
        let mut longest = [None::<Instant>; 4];
        let mut now = Instant::ZERO;
        for (which, until, step) in holds {
            now = now + Span::from_millis(step);
            let until = Instant::from_millis(until);
            cooldowns.hold_back(scopes[which].clone(), until);
            longest[which] = longest[which].max(Some(until));
            for (i, scope) in scopes.iter().enumerate().skip(1) {
                let expected = [longest[0], longest[i]].into_iter().flatten().max().map_or(Span::ZERO, |u| u - now);
                prop_assert_eq!(cooldowns.hold(Some(scope), now), expected);
            }
        }
    }

    #[test]
    fn a_429_never_shortens_the_cooldown_of_its_scope(
        retries in prop::collection::vec((0usize..3, 0u64..10_000, 0u64..2_000), 1..30),
    ) {
        let urls = ["/organizations/O_1/networks", "/networks/N_1/clients", "/networks/N_9/clients"];
        let mut limiter = OrgRateLimiter::new(Config::default()).unwrap();
        limiter.register_org("O_1").unwrap();
        limiter.register_network("N_1", "O_1").unwrap();
        let mut now = Instant::from_secs(1);
        for (which, wait_ms, step_ms) in retries {
            let before = [urls[0], urls[2]].map(|url| limiter.cooldown(url, now));
            limiter.on_rate_limited_with_retry(urls[which], Some(Span::from_millis(wait_ms)), now);
            let after = [urls[0], urls[2]].map(|url| limiter.cooldown(url, now));
            prop_assert!(after[0] >= before[0] && after[1] >= before[1]);
            prop_assert!(limiter.cooldown(urls[which], now) >= Span::from_millis(wait_ms));
            prop_assert_eq!(limiter.cooldown(urls[0], now), limiter.cooldown(urls[1], now), "N_1 is O_1's");
            now = now + Span::from_millis(step_ms);
        }
    }
}
