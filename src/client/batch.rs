//! The pure policy of a fan-out (one batch of upstream calls) after a 429 or a failure.
//!
//! The caller runs the calls, reports each response to [`BatchPolicy::on_response`] and
//! does what the [`Action`] says. Calls are *required* (the batch fails without them) or
//! *best-effort* (the batch can answer `null` for them). The policy never reads a clock or
//! draws a random number: the caller passes `now` and a uniform `jitter` in
//! `[0, JITTER_SCALE)`.
//!
//! | response to a required call | outcome |
//! |---|---|
//! | 2xx | [`Ok`](Action::Ok) |
//! | first minutely 429 | [`ResumeAt`](Action::ResumeAt) the next minute boundary + jitter (once per batch) |
//! | minutely 429 after resuming | [`Abort`](Action::Abort), retry at the next minute boundary |
//! | hourly / daily 429 | [`Abort`](Action::Abort), retry at the next hour / day boundary |
//! | concurrency 429 | [`LowerConcurrency`](Action::LowerConcurrency); the 3rd in a batch aborts |
//! | 503, unknown 429, any other failure | [`Abort`](Action::Abort), no retry time |
//! | 2xx whose body cannot be read ([`on_unreadable`](BatchPolicy::on_unreadable)) | [`Abort`](Action::Abort), no retry time |
//!
//! A best-effort call's first 429 or failure of any kind is
//! [`SkipBestEffort`](Action::SkipBestEffort): it and every best-effort call still to come
//! resolve to `null`, while required calls carry on ([`sends`](BatchPolicy::sends) says
//! whether a call still goes out). A best-effort call whose 2xx body cannot be read is
//! [`Null`](Action::Null): that call alone resolves to `null`.

use crate::core::openmeteo::{classify, RateLimitKind, UpstreamWindows};
use crate::core::time::{Instant, Span};
use core::fmt;

/// The default jitter added to a minutely resume, in milliseconds (inclusive range).
pub const DEFAULT_JITTER_MS: (u64, u64) = (1_000, 3_000);

/// `jitter` arguments are uniform in `[0, JITTER_SCALE)`.
pub const JITTER_SCALE: u64 = 1_000_000;

/// Concurrency 429s in one batch that abort it (the earlier ones lower concurrency).
pub const MAX_CONCURRENCY_REFUSALS: u32 = 3;

/// Why a batch was abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// The upstream refused a required call (429) or is overloaded (503).
    Limited(RateLimitKind),
    /// A required call failed with this status (0 for a transport failure, by convention).
    Failed {
        /// The HTTP status.
        status: u16,
    },
    /// A required call succeeded but its body could not be read (not the JSON expected).
    Unreadable {
        /// The HTTP status.
        status: u16,
    },
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbortReason::Limited(kind) => write!(f, "upstream refused: {kind}"),
            AbortReason::Failed { status } => write!(f, "upstream call failed with status {status}"),
            AbortReason::Unreadable { .. } => f.write_str("the upstream answered something other than JSON"),
        }
    }
}

/// What the caller does after one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A success: keep the data, carry on.
    Ok,
    /// Minutely limit: cancel every call in flight, wait until this instant, then run the
    /// cancelled and remaining calls. Happens at most once per batch; every minutely 429
    /// reported while paused answers the same instant.
    ResumeAt(Instant),
    /// Too many concurrent requests: lower the in-flight cap by 1 (to no less than 1, see
    /// [`lower_concurrency`]) and retry this call.
    LowerConcurrency,
    /// A best-effort call failed: resolve it and every remaining best-effort call to `null`;
    /// required calls carry on.
    SkipBestEffort,
    /// A best-effort call's 2xx body could not be read: resolve this call to `null`; the
    /// batch carries on unchanged.
    Null,
    /// Give the batch up: cancel everything and fail it.
    Abort {
        /// Why.
        reason: AbortReason,
        /// When trying again could succeed (a window boundary), if known.
        retry_at: Option<Instant>,
    },
}

/// Where a batch stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchState {
    /// Calls may run.
    Running,
    /// Waiting out a minutely 429; calls may run again from `until`.
    Paused {
        /// When the batch resumes.
        until: Instant,
    },
    /// Given up; nothing more may run. Every later response answers the same abort.
    Aborted {
        /// Why.
        reason: AbortReason,
        /// When trying again could succeed, if known.
        retry_at: Option<Instant>,
    },
    /// [`finish`](BatchPolicy::finish)ed without being aborted.
    Done,
}

/// A [`BatchPolicy`] configuration that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchConfigError {
    /// The jitter range's minimum exceeds its maximum.
    InvertedJitter {
        /// The minimum given, in ms.
        min_ms: u64,
        /// The maximum given, in ms.
        max_ms: u64,
    },
    /// An upstream window of zero length.
    ZeroWindow,
}

impl fmt::Display for BatchConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchConfigError::InvertedJitter { min_ms, max_ms } => {
                write!(f, "the jitter minimum ({min_ms} ms) must not exceed its maximum ({max_ms} ms)")
            }
            BatchConfigError::ZeroWindow => f.write_str("every upstream window must be longer than zero"),
        }
    }
}

/// The in-flight cap after a [`LowerConcurrency`](Action::LowerConcurrency): one less, never
/// below 1.
///
/// # Examples
/// ```
/// use sluicegate::batch::lower_concurrency;
/// assert_eq!(lower_concurrency(5), 4);
/// assert_eq!(lower_concurrency(1), 1);
/// ```
pub const fn lower_concurrency(cap: u32) -> u32 {
    if cap > 2 {
        cap - 1
    } else {
        1
    }
}

/// The decisions of one batch: resume once after a minutely 429, abort on anything worse,
/// shed best-effort calls at their first trouble.
///
/// ```text
/// required calls, minute window 60 s, jitter 1–3 s (j):
/// t(s)    10         10.2        60 + j       75
///         429 min    429 min     resume       429 min
///         ResumeAt   ResumeAt    Running      Abort { retry_at: 120 }
///         (60 + j)   (same)
/// ```
///
/// # Examples
/// ```
/// use sluicegate::batch::{BatchPolicy, BatchState, Action};
/// use sluicegate::Instant;
/// let minutely = r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#;
/// let mut batch = BatchPolicy::default();
/// let t = Instant::from_secs(10);
/// assert_eq!(batch.on_response(200, "{}", t, false, 0), Action::Ok);
/// // jitter 0 → the shortest wait: the next minute plus 1 s
/// assert_eq!(batch.on_response(429, minutely, t, false, 0), Action::ResumeAt(Instant::from_secs(61)));
/// assert_eq!(batch.state(), BatchState::Paused { until: Instant::from_secs(61) });
/// assert!(matches!(batch.on_response(429, minutely, Instant::from_secs(75), false, 0), Action::Abort { .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPolicy {
    windows: UpstreamWindows,
    jitter_ms: (u64, u64),
    state: BatchState,
    resumed: bool,
    concurrency_refusals: u32,
    best_effort_open: bool,
}

impl Default for BatchPolicy {
    /// The real upstream windows and [`DEFAULT_JITTER_MS`].
    fn default() -> Self {
        BatchPolicy::fresh(UpstreamWindows::default(), DEFAULT_JITTER_MS)
    }
}

impl BatchPolicy {
    /// A running batch against `windows`, resuming after a minutely 429 at the next minute
    /// boundary plus a jitter in `[jitter_ms.0, jitter_ms.1]` milliseconds.
    ///
    /// # Errors
    /// [`BatchConfigError::InvertedJitter`] when `jitter_ms.0 > jitter_ms.1`;
    /// [`BatchConfigError::ZeroWindow`] when any window is zero.
    pub fn new(windows: UpstreamWindows, jitter_ms: (u64, u64)) -> Result<Self, BatchConfigError> {
        if jitter_ms.0 > jitter_ms.1 {
            return Err(BatchConfigError::InvertedJitter { min_ms: jitter_ms.0, max_ms: jitter_ms.1 });
        }
        if windows.minute.is_zero() || windows.hour.is_zero() || windows.day.is_zero() {
            return Err(BatchConfigError::ZeroWindow);
        }
        Ok(BatchPolicy::fresh(windows, jitter_ms))
    }

    const fn fresh(windows: UpstreamWindows, jitter_ms: (u64, u64)) -> Self {
        BatchPolicy {
            windows,
            jitter_ms,
            state: BatchState::Running,
            resumed: false,
            concurrency_refusals: 0,
            best_effort_open: false,
        }
    }

    /// Decide on one response (`status`, `body`) received at `now` for a call that is
    /// `best_effort` or required. `jitter` is uniform in `[0, JITTER_SCALE)` (larger values
    /// count as the largest) and only spreads a minutely resume.
    ///
    /// A pause ends by itself: a response reported at or after its `until` finds the batch
    /// running again. Once aborted, every response answers the same abort. After
    /// [`finish`](Self::finish), responses are still answered but change nothing.
    pub fn on_response(&mut self, status: u16, body: &str, now: Instant, best_effort: bool, jitter: u64) -> Action {
        if let Some(abort) = self.abort() {
            return abort;
        }
        if let BatchState::Paused { until } = self.state {
            if now >= until {
                self.state = BatchState::Running;
            }
        }
        let action = self.decide(status, body, now, best_effort, jitter);
        self.take(action)
    }

    fn decide(&self, status: u16, body: &str, now: Instant, best_effort: bool, jitter: u64) -> Action {
        if (200..300).contains(&status) {
            return Action::Ok;
        }
        if best_effort {
            return Action::SkipBestEffort;
        }
        let abort = |reason, retry_at| Action::Abort { reason, retry_at };
        let Some(kind) = classify(status, body) else {
            return abort(AbortReason::Failed { status }, None);
        };
        match kind {
            RateLimitKind::Minutely => match self.state {
                BatchState::Paused { until } => Action::ResumeAt(until),
                _ if !self.resumed => Action::ResumeAt(
                    self.windows.resume_at(kind, now).unwrap_or(now) + Span::from_millis(self.jitter_ms_for(jitter)),
                ),
                _ => abort(AbortReason::Limited(kind), self.windows.resume_at(kind, now)),
            },
            RateLimitKind::Hourly | RateLimitKind::Daily => {
                abort(AbortReason::Limited(kind), self.windows.resume_at(kind, now))
            }
            RateLimitKind::Concurrency if self.concurrency_refusals + 1 < MAX_CONCURRENCY_REFUSALS => {
                Action::LowerConcurrency
            }
            RateLimitKind::Concurrency | RateLimitKind::Overloaded | RateLimitKind::Unknown => {
                abort(AbortReason::Limited(kind), None)
            }
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Ok | Action::Null => {}
            Action::ResumeAt(until) => {
                self.resumed = true;
                self.state = BatchState::Paused { until };
            }
            Action::LowerConcurrency => self.concurrency_refusals += 1,
            Action::SkipBestEffort => self.best_effort_open = true,
            Action::Abort { reason, retry_at } => {
                if reason == AbortReason::Limited(RateLimitKind::Concurrency) {
                    self.concurrency_refusals += 1;
                }
                self.state = BatchState::Aborted { reason, retry_at };
            }
        }
    }

    /// `jitter_ms.0 + ⌊(jitter_ms.1 − jitter_ms.0 + 1) × jitter / JITTER_SCALE⌋`: every
    /// whole millisecond of the inclusive range equally likely.
    fn jitter_ms_for(&self, jitter: u64) -> u64 {
        let (min, max) = self.jitter_ms;
        let jitter = u128::from(jitter.min(JITTER_SCALE - 1));
        let width = u128::from(max - min) + 1;
        min + u64::try_from(width * jitter / u128::from(JITTER_SCALE)).unwrap_or(max - min)
    }

    /// Where the batch stands. A pause is reported until a response at or after its end
    /// resumes the batch; compare `until` with the clock to know whether it is over.
    pub fn state(&self) -> BatchState {
        self.state
    }

    /// Whether best-effort calls are short-circuited: a best-effort call has failed, so every
    /// remaining one should resolve to `null` without being sent.
    pub fn best_effort_open(&self) -> bool {
        self.best_effort_open
    }

    /// Whether a call that is `best_effort` or required still goes out: every call until the
    /// batch is aborted, except best-effort ones once [`best_effort_open`](Self::best_effort_open)
    /// (they resolve to `null` unsent). A pause does not stop a call here: the caller holds
    /// it until the pause ends.
    pub fn sends(&self, best_effort: bool) -> bool {
        let aborted = matches!(self.state, BatchState::Aborted { .. });
        !aborted && (!best_effort || !self.best_effort_open)
    }

    /// Decide on a 2xx response whose body could not be read (the caller expected JSON and
    /// got something else): a required call aborts the batch
    /// ([`AbortReason::Unreadable`], no retry time); a best-effort one is
    /// [`Null`](Action::Null). An aborted batch answers its abort.
    pub fn on_unreadable(&mut self, status: u16, best_effort: bool) -> Action {
        if let Some(abort) = self.abort() {
            return abort;
        }
        let unreadable = Action::Abort { reason: AbortReason::Unreadable { status }, retry_at: None };
        self.take(if best_effort { Action::Null } else { unreadable })
    }

    /// The abort every response of an aborted batch answers.
    fn abort(&self) -> Option<Action> {
        match self.state {
            BatchState::Aborted { reason, retry_at } => Some(Action::Abort { reason, retry_at }),
            _ => None,
        }
    }

    /// `action` applied (a finished batch changes no more) and answered.
    fn take(&mut self, action: Action) -> Action {
        if self.state != BatchState::Done {
            self.apply(action);
        }
        action
    }

    /// Whether the batch has already used its one minutely resume.
    pub fn has_resumed(&self) -> bool {
        self.resumed
    }

    /// Concurrency 429s seen for required calls in this batch.
    pub fn concurrency_refusals(&self) -> u32 {
        self.concurrency_refusals
    }

    /// End the batch: a running or paused batch becomes [`Done`](BatchState::Done); an
    /// aborted one stays aborted. Returns the final state.
    pub fn finish(&mut self) -> BatchState {
        if !matches!(self.state, BatchState::Aborted { .. }) {
            self.state = BatchState::Done;
        }
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTELY: &str =
        r#"{"error":true,"reason":"Minutely API request limit exceeded. Please try again in one minute."}"#;
    const HOURLY: &str =
        r#"{"error":true,"reason":"Hourly API request limit exceeded. Please try again in the next hour."}"#;
    const DAILY: &str = r#"{"error":true,"reason":"Daily API request limit exceeded. Please try again tomorrow."}"#;
    const CONCURRENT: &str = r#"{"error":true,"reason":"Too many concurrent requests"}"#;

    /// Windows of 10 s / 100 s / 1,000 s and a jitter of 100–300 ms.
    fn policy() -> BatchPolicy {
        let windows =
            UpstreamWindows { minute: Span::from_secs(10), hour: Span::from_secs(100), day: Span::from_secs(1_000) };
        BatchPolicy::new(windows, (100, 300)).unwrap()
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn successes_are_ok_and_change_nothing() {
        let mut b = policy();
        for status in [200, 201, 204, 299] {
            assert_eq!(b.on_response(status, "", at(1), false, 0), Action::Ok);
            assert_eq!(b.on_response(status, "", at(1), true, 0), Action::Ok);
        }
        assert_eq!(b.state(), BatchState::Running);
        assert!(!b.best_effort_open());
    }

    #[test]
    fn the_first_minutely_429_pauses_until_the_next_minute_plus_jitter() {
        let mut b = policy();
        assert_eq!(b.on_response(429, MINUTELY, at(12_345), false, 0), Action::ResumeAt(at(20_100)));
        assert_eq!(b.state(), BatchState::Paused { until: at(20_100) });
        assert!(b.has_resumed());

        let mut b = policy();
        assert_eq!(b.on_response(429, MINUTELY, at(12_345), false, JITTER_SCALE - 1), Action::ResumeAt(at(20_300)));
        let mut b = policy();
        assert_eq!(b.on_response(429, MINUTELY, at(12_345), false, u64::MAX), Action::ResumeAt(at(20_300)));
        let mut b = policy();
        assert_eq!(b.on_response(429, MINUTELY, at(12_345), false, JITTER_SCALE / 2), Action::ResumeAt(at(20_200)));
    }

    #[test]
    fn the_jitter_covers_its_whole_inclusive_range() {
        let mut seen = [false; 201];
        for jitter in (0..JITTER_SCALE).step_by(997) {
            let mut b = policy();
            let Action::ResumeAt(until) = b.on_response(429, MINUTELY, at(0), false, jitter) else { panic!() };
            let ms = until.as_millis() - 10_000;
            assert!((100..=300).contains(&ms), "{ms}");
            seen[(ms - 100) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn minutely_429s_of_calls_already_in_flight_answer_the_same_pause() {
        let mut b = policy();
        let Action::ResumeAt(until) = b.on_response(429, MINUTELY, at(5_000), false, 0) else { panic!() };
        assert_eq!(b.on_response(429, MINUTELY, at(5_200), false, JITTER_SCALE - 1), Action::ResumeAt(until));
        assert_eq!(b.on_response(200, "", at(5_300), false, 0), Action::Ok);
        assert_eq!(b.state(), BatchState::Paused { until });
    }

    #[test]
    fn a_batch_resumes_exactly_once() {
        let mut b = policy();
        let Action::ResumeAt(until) = b.on_response(429, MINUTELY, at(5_000), false, 0) else { panic!() };
        assert_eq!(until, at(10_100));
        assert_eq!(b.on_response(200, "", until, false, 0), Action::Ok);
        assert_eq!(b.state(), BatchState::Running);
        let abort = Action::Abort { reason: AbortReason::Limited(RateLimitKind::Minutely), retry_at: Some(at(20_000)) };
        assert_eq!(b.on_response(429, MINUTELY, at(15_000), false, 0), abort);
        assert_eq!(
            b.state(),
            BatchState::Aborted { reason: AbortReason::Limited(RateLimitKind::Minutely), retry_at: Some(at(20_000)) }
        );
    }

    #[test]
    fn hourly_and_daily_429s_abort_until_their_window_boundary() {
        let mut b = policy();
        assert_eq!(
            b.on_response(429, HOURLY, at(12_345), false, 0),
            Action::Abort { reason: AbortReason::Limited(RateLimitKind::Hourly), retry_at: Some(at(100_000)) }
        );
        let mut b = policy();
        assert_eq!(
            b.on_response(429, DAILY, at(12_345), false, 0),
            Action::Abort { reason: AbortReason::Limited(RateLimitKind::Daily), retry_at: Some(at(1_000_000)) }
        );
        // Even while paused for a minutely 429, an hourly one ends the batch.
        let mut b = policy();
        b.on_response(429, MINUTELY, at(1_000), false, 0);
        assert!(matches!(b.on_response(429, HOURLY, at(1_100), false, 0), Action::Abort { .. }));
    }

    #[test]
    fn concurrency_429s_lower_concurrency_twice_then_abort() {
        let mut b = policy();
        assert_eq!(b.on_response(429, CONCURRENT, at(1), false, 0), Action::LowerConcurrency);
        assert_eq!(b.on_response(200, "", at(2), false, 0), Action::Ok);
        assert_eq!(b.on_response(429, CONCURRENT, at(3), false, 0), Action::LowerConcurrency);
        assert_eq!(b.concurrency_refusals(), 2);
        assert_eq!(b.state(), BatchState::Running);
        assert_eq!(
            b.on_response(429, CONCURRENT, at(4), false, 0),
            Action::Abort { reason: AbortReason::Limited(RateLimitKind::Concurrency), retry_at: None }
        );
        assert_eq!(b.concurrency_refusals(), MAX_CONCURRENCY_REFUSALS);
        assert_eq!(lower_concurrency(5), 4);
        assert_eq!(lower_concurrency(2), 1);
        assert_eq!(lower_concurrency(1), 1);
        assert_eq!(lower_concurrency(0), 1);
    }

    #[test]
    fn overload_unknown_429s_and_failures_abort_with_no_retry_time() {
        let cases = [
            (503, "The service is overloaded", AbortReason::Limited(RateLimitKind::Overloaded)),
            (429, "Too Many Requests", AbortReason::Limited(RateLimitKind::Unknown)),
            (500, "", AbortReason::Failed { status: 500 }),
            (
                400,
                r#"{"error":true,"reason":"Cannot initialize WeatherVariable"}"#,
                AbortReason::Failed { status: 400 },
            ),
            (0, "", AbortReason::Failed { status: 0 }),
            (304, "", AbortReason::Failed { status: 304 }),
        ];
        for (status, body, reason) in cases {
            let mut b = policy();
            assert_eq!(
                b.on_response(status, body, at(1), false, 0),
                Action::Abort { reason, retry_at: None },
                "{status}"
            );
        }
    }

    #[test]
    fn a_best_effort_failure_skips_best_effort_calls_and_required_ones_carry_on() {
        for (status, body) in [(429, MINUTELY), (429, HOURLY), (429, DAILY), (429, CONCURRENT), (503, ""), (500, "")] {
            let mut b = policy();
            assert_eq!(b.on_response(status, body, at(1), true, 0), Action::SkipBestEffort, "{status} {body}");
            assert!(b.best_effort_open());
            assert_eq!(b.state(), BatchState::Running);
            assert!(!b.has_resumed(), "a best-effort minutely 429 spends no resume");
            assert_eq!(b.concurrency_refusals(), 0);
            assert_eq!(b.on_response(200, "", at(2), false, 0), Action::Ok);
            assert_eq!(b.on_response(429, MINUTELY, at(3), false, 0), Action::ResumeAt(at(10_100)));
        }
    }

    #[test]
    fn best_effort_stays_short_circuited_for_the_rest_of_the_batch() {
        let mut b = policy();
        assert_eq!(b.on_response(500, "", at(1), true, 0), Action::SkipBestEffort);
        assert_eq!(b.on_response(502, "", at(2), true, 0), Action::SkipBestEffort);
        assert!(b.best_effort_open());
        assert_eq!(b.finish(), BatchState::Done);
        assert!(b.best_effort_open());
    }

    #[test]
    fn an_unreadable_body_aborts_a_required_call_and_nulls_a_best_effort_one() {
        let mut b = policy();
        assert_eq!(b.on_unreadable(200, true), Action::Null);
        assert_eq!(b.state(), BatchState::Running);
        assert!(!b.best_effort_open(), "one unreadable best-effort body closes nothing");
        assert!(b.sends(true));
        let abort = Action::Abort { reason: AbortReason::Unreadable { status: 203 }, retry_at: None };
        assert_eq!(b.on_unreadable(203, false), abort);
        assert_eq!(b.state(), BatchState::Aborted { reason: AbortReason::Unreadable { status: 203 }, retry_at: None });
        assert_eq!(b.on_unreadable(200, true), abort, "an aborted batch answers its abort");
        assert_eq!(b.on_response(200, "{}", at(2), false, 0), abort);
        let Action::Abort { reason, .. } = abort else { unreachable!() };
        assert_eq!(reason.to_string(), "the upstream answered something other than JSON");
    }

    #[test]
    fn calls_go_out_until_the_batch_aborts_and_best_effort_ones_until_one_fails() {
        let mut b = policy();
        assert!(b.sends(false) && b.sends(true));
        b.on_response(429, MINUTELY, at(1), false, 0);
        assert!(b.sends(false) && b.sends(true), "a pause holds calls; it does not drop them");
        b.on_response(500, "", at(2), true, 0);
        assert!(b.sends(false) && !b.sends(true));
        b.on_response(500, "", at(3), false, 0);
        assert!(!b.sends(false) && !b.sends(true));
    }

    #[test]
    fn an_aborted_batch_answers_every_later_response_with_the_same_abort() {
        let mut b = policy();
        let abort = b.on_response(429, DAILY, at(1), false, 0);
        assert_eq!(b.on_response(200, "", at(2), false, 0), abort);
        assert_eq!(b.on_response(429, MINUTELY, at(3), true, 0), abort);
        assert_eq!(
            b.finish(),
            BatchState::Aborted { reason: AbortReason::Limited(RateLimitKind::Daily), retry_at: Some(at(1_000_000)) }
        );
    }

    #[test]
    fn a_finished_batch_is_done_and_later_responses_change_nothing() {
        let mut b = policy();
        b.on_response(429, MINUTELY, at(1), false, 0);
        assert_eq!(b.finish(), BatchState::Done);
        assert!(matches!(b.on_response(500, "", at(2), false, 0), Action::Abort { .. }));
        assert_eq!(b.state(), BatchState::Done);
    }

    #[test]
    fn impossible_configurations_are_refused() {
        assert_eq!(
            BatchPolicy::new(UpstreamWindows::default(), (3_000, 1_000)),
            Err(BatchConfigError::InvertedJitter { min_ms: 3_000, max_ms: 1_000 })
        );
        let zero = UpstreamWindows { minute: Span::ZERO, ..UpstreamWindows::default() };
        assert_eq!(BatchPolicy::new(zero, DEFAULT_JITTER_MS), Err(BatchConfigError::ZeroWindow));
        assert_eq!(BatchPolicy::new(UpstreamWindows::default(), DEFAULT_JITTER_MS), Ok(BatchPolicy::default()));
        let fixed = BatchPolicy::new(UpstreamWindows::default(), (0, 0)).unwrap();
        assert_eq!(fixed.jitter_ms_for(JITTER_SCALE - 1), 0);
        let wide = BatchPolicy::new(UpstreamWindows::default(), (0, u64::MAX)).unwrap();
        assert!(wide.jitter_ms_for(JITTER_SCALE - 1) > u64::MAX / 2);
    }
}
