//! The reorder window: a trace out of time order by no more than the window streams, and
//! gives exactly what the same trace sorted gives (the report, the `--json` document, every
//! attempt an observer sees); one further out of order is read again whole and sorted, with
//! the same results.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::sim::{self, Config, Event, Observer, SimError};

/// Every attempt decided, and how many times the replay started over (read the trace again).
#[derive(Default)]
struct Seen {
    attempts: Vec<String>,
    restarts: usize,
}

impl Observer for Seen {
    fn attempt(&mut self, e: &Event<'_>) {
        // bits, so that -0.0 and 0.0 differ
        let (t, cost) = (e.t.to_bits(), e.cost.to_bits());
        let line = format!("{t:x} {} {} {} {cost:x} {} {}", e.client, e.name, e.endpoint, e.attempt, e.admitted);
        self.attempts.push(line);
    }
    fn restart(&mut self) {
        self.attempts.clear();
        self.restarts += 1;
    }
}

/// What a replay gives: the `--json` document, the Markdown report, the attempts seen.
#[derive(Debug, PartialEq)]
struct Results {
    json: String,
    markdown: String,
    attempts: Vec<String>,
}

/// Replays `csv` with a reorder window; the results and the number of restarts.
fn streamed(cfg: &Config, csv: &str, window: f64) -> Result<(Results, usize), SimError> {
    let mut seen = Seen::default();
    let out = sim::simulate_trace_within(cfg, "trace.csv", window, || Ok(csv.as_bytes()), Some(&mut seen))?;
    let report = sim::report(cfg, out)?;
    let results = Results { json: report.to_json(), markdown: report.to_markdown()?, attempts: seen.attempts };
    Ok((results, seen.restarts))
}

/// Replays `csv` read whole and sorted, as the reference does.
fn sorted(cfg: &Config, csv: &str) -> Results {
    let mut seen = Seen::default();
    let traffic = sim::parse_trace("trace.csv", csv).unwrap();
    let report = sim::report(cfg, sim::simulate_observed(cfg, traffic, Some(&mut seen)).unwrap()).unwrap();
    Results { json: report.to_json(), markdown: report.to_markdown().unwrap(), attempts: seen.attempts }
}

/// The reference's four algorithms and every retry mode, over a few clients and endpoints
/// whose names sort in another order than they first appear.
fn config() -> Config {
    Config::from_json(
        r#"{"service": "reorder", "duration_s": 60, "capacity_rps": 6,
        "policies": [
          {"name": "per client", "algorithm": "token_bucket", "key": "client", "rate": 2, "burst": 4},
          {"name": "login", "algorithm": "sliding_log", "key": "client+endpoint", "limit": 3, "window_s": 5,
           "endpoints": ["/login"]},
          {"name": "per endpoint", "algorithm": "sliding_counter", "key": "endpoint", "limit": 12, "window_s": 4},
          {"name": "global", "algorithm": "fixed_window", "key": "global", "limit": 20, "window_s": 2}],
        "clients": [
          {"name": "zeta", "kind": "legit", "rps": 1, "retry": "honor"},
          {"name": "bot", "kind": "abusive", "rps": 1, "retry": "immediate", "max_retries": 2},
          {"name": "Alpha", "kind": "legit", "rps": 1, "retry": "backoff"}]}"#,
    )
    .expect("a valid config")
}

const CLIENTS: [&str; 4] = ["zeta", "bot", "Alpha", "mid"];
const ENDPOINTS: [&str; 3] = ["/orders", "/login", ""];

/// A row: (time in milliseconds, client, endpoint, cost).
type Row = (i64, usize, usize, u32);

fn csv(rows: &[Row]) -> String {
    let mut text = String::from("t,client,endpoint,cost\n");
    for &(ms, c, e, cost) in rows {
        let t = if ms == 0 && c == 0 { "-0.0".to_string() } else { format!("{}", ms as f64 / 1000.0) };
        text.push_str(&format!("{t},{},{},{cost}\n", CLIENTS[c], ENDPOINTS[e]));
    }
    text
}

/// xorshift64*: a small seeded generator for the tests' traces.
struct Rand(u64);

impl Rand {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

/// `n` rows in time order over about `n / 10` seconds, times on a 50 ms grid (so many rows
/// share an instant).
fn rows_in_order(n: usize, seed: u64) -> Vec<Row> {
    let mut rand = Rand(seed | 1);
    let mut ms = 0;
    (0..n)
        .map(|_| {
            ms += 50 * rand.below(4) as i64;
            (ms, rand.below(4) as usize, rand.below(3) as usize, 1 + rand.below(3) as u32)
        })
        .collect()
}

/// The rows in the order of their time moved later by up to `jitter_ms`: out of time order
/// by less than `jitter_ms`, as logs merged from several servers are.
fn jittered(rows: &[Row], jitter_ms: i64, seed: u64) -> Vec<Row> {
    let mut rand = Rand(seed | 1);
    let mut keyed: Vec<(i64, Row)> =
        rows.iter().map(|&r| (r.0 + rand.below(jitter_ms.max(1) as u64) as i64, r)).collect();
    keyed.sort_by_key(|&(k, _)| k);
    keyed.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn a_trace_out_of_order_within_the_window_streams_and_replays_as_sorted() {
    let cfg = config();
    let rows = rows_in_order(3000, 7);
    let want = sorted(&cfg, &csv(&rows));
    for (jitter_ms, window) in [(5000, 5.0), (5000, 10.0), (9999, 10.0), (2000, 30.0)] {
        let shuffled = jittered(&rows, jitter_ms, 11);
        assert_ne!(shuffled, rows);
        let (got, restarts) = streamed(&cfg, &csv(&shuffled), window).unwrap();
        assert_eq!(restarts, 0, "jitter {jitter_ms} ms, window {window} s: streamed");
        assert!(got == want, "jitter {jitter_ms} ms, window {window} s: the results differ from the sorted trace's");
    }
    // in order, and with the default window
    let mut seen = Seen::default();
    let text = csv(&rows);
    let out = sim::simulate_trace(&cfg, "trace.csv", || Ok(text.as_bytes()), Some(&mut seen)).unwrap();
    assert_eq!(sim::report(&cfg, out).unwrap().to_json(), want.json);
    assert_eq!((seen.attempts, seen.restarts), (want.attempts, 0));
}

#[test]
fn rows_of_one_instant_in_any_order_replay_as_sorted() {
    let cfg = config();
    // four instants, each with every client, endpoint and cost, -0.0 and 0.0 among them
    let mut rows: Vec<Row> = Vec::new();
    for ms in [0, 1000, 1000, 2500] {
        for c in 0..4 {
            for e in 0..3 {
                rows.push((ms, c, e, 1 + (c + e) as u32 % 3));
            }
        }
    }
    let want = sorted(&cfg, &csv(&rows));
    let mut rand = Rand(3);
    for window in [0.0, 1.0, 10.0] {
        for _ in 0..20 {
            // shuffled within each instant only: in time order, so any window streams it
            let mut shuffled = rows.clone();
            for run in shuffled.chunk_by_mut(|a, b| a.0 == b.0) {
                for i in (1..run.len()).rev() {
                    run.swap(i, rand.below(i as u64 + 1) as usize);
                }
            }
            let (got, restarts) = streamed(&cfg, &csv(&shuffled), window).unwrap();
            assert_eq!(restarts, 0);
            assert!(got == want, "window {window} s: the results differ from the sorted trace's");
        }
    }
}

#[test]
fn a_row_further_back_than_the_window_makes_the_replay_read_the_trace_again_sorted() {
    let cfg = config();
    let rows = rows_in_order(2000, 5);
    let want = sorted(&cfg, &csv(&rows));
    // the first row from 40 s on read after the rows until 60 s: 19.x s back
    let mut late = rows.clone();
    let from = late.iter().position(|r| r.0 >= 40_000).unwrap();
    let to = late.iter().position(|r| r.0 >= 60_000).unwrap();
    late[from..to].rotate_left(1);
    let text = csv(&late);
    for (window, restarts) in [(0.0, 1), (5.0, 1), (19.0, 1), (20.0, 0), (f64::INFINITY, 0)] {
        let (got, n) = streamed(&cfg, &text, window).unwrap();
        assert_eq!(n, restarts, "window {window} s");
        assert!(got == want, "window {window} s: the results differ from the sorted trace's");
    }
}

#[test]
fn a_long_window_holding_many_rows_hands_them_on_in_pieces() {
    // 20,000 rows in one instant's worth of reversed order: an infinite window holds them all
    let cfg = config();
    let rows = rows_in_order(20_000, 9);
    let mut reversed = rows.clone();
    reversed.reverse();
    let want = sorted(&cfg, &csv(&rows));
    let (got, restarts) = streamed(&cfg, &csv(&reversed), f64::INFINITY).unwrap();
    assert_eq!(restarts, 0);
    assert!(got == want, "the results differ from the sorted trace's");
}

#[test]
fn a_window_that_is_negative_or_not_a_number_is_refused() {
    let cfg = config();
    for window in [-1.0, f64::NAN, f64::NEG_INFINITY] {
        let err = streamed(&cfg, "t,client\n1,a\n", window).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("reorder window"), "{err}");
    }
}

fn trace_rows() -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec((0i64..40, 0usize..4, 0usize..3, 1u32..=3), 1..300).prop_map(|mut rows| {
        // times on a 250 ms grid: many ties
        let mut ms = 0;
        for r in &mut rows {
            ms += r.0 / 10 * 250;
            r.0 = ms;
        }
        rows
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any trace, any window, rows moved by up to twice the window: the same results as the
    /// trace sorted, streamed whenever no row is further back than the window.
    #[test]
    fn any_trace_replays_as_sorted(rows in trace_rows(), window_ms in 0i64..3000, seed in any::<u64>()) {
        let cfg = config();
        let want = sorted(&cfg, &csv(&rows));
        let shuffled = jittered(&rows, 2 * window_ms + 1, seed);
        // (a little more than the whole milliseconds: a row just the window back is within)
        let (got, restarts) = streamed(&cfg, &csv(&shuffled), (window_ms as f64 + 0.1) / 1000.0).unwrap();
        prop_assert!(got == want, "the results differ from the sorted trace's");
        // streamed when every row is at most the window before the newest above it
        let mut newest = i64::MIN;
        let within = shuffled.iter().all(|r| {
            newest = newest.max(r.0);
            r.0 >= newest - window_ms
        });
        prop_assert_eq!(restarts, usize::from(!within));
    }
}
