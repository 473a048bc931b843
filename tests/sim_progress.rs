//! A replay's progress ([`Observer::progress`]): every 65,536 logical requests, with the total
//! when the replay knows it beforehand; told to the observer without changing any result.
#![cfg(not(target_arch = "wasm32"))]

use sluicegate::sim::{self, Ceiling, Config, ConfigFile, Event, Observer, Progress, PROGRESS_EVERY};

/// 200,000 requests (1,000 s of 150 and 50 requests a second), some refused and retried.
const CONFIG: &str = r#"{"duration_s": 1000, "policies": [{"algorithm": "token_bucket", "rate": 120, "burst": 200}],
    "clients": [{"name": "app", "kind": "legit", "rps": 150, "retry": "immediate", "max_retries": 1},
                {"name": "batch", "pattern": "poisson", "rps": 50}]}"#;

/// A trace of `rows` rows, one every 10 ms; with `back`, its last row is a minute before the
/// first (further out of order than the reorder window: the replay starts over).
fn trace(rows: u64, back: bool) -> String {
    let mut csv = String::from("t,client\n");
    for i in 0..rows {
        csv.push_str(&format!("{}.{:02},c{}\n", i / 100 + 60, i % 100, i % 7));
    }
    if back {
        csv.push_str("0,c0\n");
    }
    csv
}

/// What an observer was told: the progress, the restarts, and the attempts (counted).
#[derive(Default)]
struct Told {
    progress: Vec<(u64, Option<u64>)>,
    restarts: usize,
    attempts: u64,
}

impl Observer for Told {
    fn attempt(&mut self, _: &Event<'_>) {
        self.attempts += 1;
    }
    fn restart(&mut self) {
        self.restarts += 1;
    }
    fn progress(&mut self, done: u64, total: Option<u64>) {
        self.progress.push((done, total));
    }
}

fn steps(n: u64, total: Option<u64>) -> Vec<(u64, Option<u64>)> {
    (1..=n).map(|k| (k * PROGRESS_EVERY, total)).collect()
}

#[test]
fn generated_traffic_reports_every_65536_requests_of_its_estimate() {
    let cfg = Config::from_json(CONFIG).unwrap();
    let mut told = Told::default();
    let observed = sim::report(&cfg, sim::simulate_generated(&cfg, Some(&mut told)).unwrap()).unwrap();
    let plain = sim::report(&cfg, sim::simulate_generated(&cfg, None).unwrap()).unwrap();
    assert_eq!(observed.to_json(), plain.to_json());
    assert_eq!(PROGRESS_EVERY, 65_536);
    assert_eq!(told.progress, steps(3, Some(200_000)));
    assert!(told.attempts > observed.requests, "every attempt, retries too");
}

#[test]
fn a_progress_observer_alone_sees_no_attempt_and_another_observer_sees_them_all() {
    let cfg = Config::from_json(CONFIG).unwrap();
    let mut seen = Vec::new();
    let mut alone = Progress { observer: None, report: |done, total| seen.push((done, total)) };
    assert!(!alone.watches_attempts());
    sim::simulate_generated(&cfg, Some(&mut alone)).unwrap();
    assert_eq!(seen, steps(3, Some(200_000)));

    let (mut told, mut reported) = (Told::default(), 0);
    let mut both = Progress { observer: Some(&mut told), report: |_, _| reported += 1 };
    assert!(both.watches_attempts());
    let report = sim::report(&cfg, sim::simulate_generated(&cfg, Some(&mut both)).unwrap()).unwrap();
    assert_eq!((reported, told.progress.len()), (3, 3));
    assert!(told.attempts > report.requests);
}

#[test]
fn a_streamed_trace_reports_rows_without_a_total_and_one_read_again_with_it() {
    let cfg = Config::from_json(CONFIG).unwrap();
    let rows = 3 * PROGRESS_EVERY + 5;
    let csv = trace(rows, false);
    let mut told = Told::default();
    sim::simulate_trace(&cfg, "trace.csv", || Ok(csv.as_bytes()), Some(&mut told)).unwrap();
    assert_eq!((told.progress, told.restarts), (steps(3, None), 0));

    // out of order past the window: streamed up to the step back, then read whole and sorted
    let csv = trace(rows, true);
    let mut told = Told::default();
    sim::simulate_trace(&cfg, "trace.csv", || Ok(csv.as_bytes()), Some(&mut told)).unwrap();
    assert_eq!(told.restarts, 1);
    let again = told.progress.iter().position(|&(_, total)| total.is_some()).unwrap();
    assert_eq!(told.progress[again..], steps(3, Some(rows + 1)));
    assert!(told.progress[..again].iter().all(|&(_, total)| total.is_none()));
}

/// How a comparison opens its trace (here it has none).
type OpenTrace = fn() -> std::io::Result<&'static [u8]>;

#[test]
fn a_comparison_says_which_run_the_progress_is_of() {
    let file = |label, text| ConfigFile { label, text, dir: None };
    let mut seen = Vec::new();
    let mut report = |side: &'static str, done, total| seen.push((side, done, total));
    let no_trace: Option<(&str, OpenTrace)> = None;
    let cmp = sim::compare(
        file("before.json", CONFIG),
        file("after.json", CONFIG),
        no_trace,
        sim::DEFAULT_REORDER_WINDOW_S,
        Ceiling::default(),
        Some(&mut report),
    )
    .unwrap();
    let side = |name| steps(3, Some(200_000)).into_iter().map(move |(done, total)| (name, done, total));
    assert_eq!(seen, side("before").chain(side("after")).collect::<Vec<_>>());
    let quiet = sim::compare(
        file("before.json", CONFIG),
        file("after.json", CONFIG),
        no_trace,
        sim::DEFAULT_REORDER_WINDOW_S,
        Ceiling::default(),
        None,
    )
    .unwrap();
    assert_eq!(cmp.to_json(), quiet.to_json());
}

#[test]
fn run_with_timeline_hands_on_the_progress_and_keeps_the_timeline() {
    let mut seen = Vec::new();
    let mut report = |done, total| seen.push((done, total));
    let (a, tl_a) =
        sim::run_with_timeline_reordered(CONFIG, None, Ceiling::default(), 10.0, Some(&mut report)).unwrap();
    let (b, tl_b) = sim::run_with_timeline_reordered(CONFIG, None, Ceiling::default(), 10.0, None).unwrap();
    assert_eq!(seen, steps(3, Some(200_000)));
    assert_eq!((a.to_json(), tl_a), (b.to_json(), tl_b));
}
