//! Nanoseconds per decision: the reference edge rule end to end (minus I/O), the same rule
//! counted in the isolate (`"store": "isolate"`) through the edge's rules stage, keyed GCRA
//! checks against governor's keyed limiter at 1, 1,000 and 1,000,000 keys, and the path
//! normalisation and rule matching every request pays (20 typical paths).
//!
//! Both keyed sides run the same quota (1000 per second, burst 1000) on a fake clock that
//! advances 1 ms per decision (so neither reads a real clock and every decision is an
//! admit), over the same pre-generated key sequence, with every key already in the table.
//!
//! `cargo bench -p sluicegate --bench decisions`; after criterion's report a summary is
//! printed, read from the estimates criterion just wrote (or, failing that, timed here).

use criterion::{BenchmarkId, Criterion};
use governor::clock::FakeRelativeClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use sluicegate::admission::IpTable;
use sluicegate::analytics::{Kind, Outcome, Recorder};
use sluicegate::identity::{client_identity, ClientIp, Sources};
use sluicegate::keyed::{Keyed, KeyedGcra};
use sluicegate::limit::{Blocking, Gcra};
use sluicegate::openmeteo::free_tier_windows;
use sluicegate::pacer::PacerCore;
use sluicegate::pipeline::{Isolate, RulesCheck, Step, Verdict};
use sluicegate::redact::KeyedHash;
use sluicegate::rules::{normalise_path, AnyLimiter, RequestFacts, RuleSet};
use sluicegate::{Decision, Instant, Span};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

const REFERENCE_RULES: &str = r#"{"rules":[{"id":"api","match":{"path":{"starts_with":"/api/"}},"characteristics":["ip.src","cf.colo.id"],"period":10,"requests_per_period":20,"mitigation_timeout":10}]}"#;

const KEY_COUNTS: [u64; 3] = [1, 1_000, 1_000_000];
const RATE: u32 = 1_000;
const STEP: Duration = Duration::from_millis(1);

// ---------------------------------------------------------------------------------------
// The reference rule, as the edge evaluates it per request
// ---------------------------------------------------------------------------------------

struct Edge {
    rules: RuleSet,
    ips: Vec<String>,
    table: Keyed<String, Blocking<AnyLimiter>>,
    now: Instant,
    i: usize,
}

impl Edge {
    fn new() -> Self {
        let rules = RuleSet::from_json(REFERENCE_RULES).expect("the reference rule parses");
        let prototype = rules.rules()[0].limiter();
        // 64 clients, one request every 10 ms: each client sends one per 640 ms, under the
        // 20 per 10 s of the rule, so every decision walks the admit path.
        let mut ips: Vec<String> = (0..48).map(|i| format!("198.51.100.{}", i + 1)).collect();
        ips.extend((0..16).map(|i| format!("2001:db8:{i:x}:1::{:x}", i * 7 + 1)));
        Edge { rules, ips, table: Keyed::new(prototype, 100_000, 0x5eed), now: Instant::from_secs(1_000), i: 0 }
    }

    fn decide(&mut self) -> Option<Decision> {
        let ip = self.ips[self.i % self.ips.len()].as_str();
        self.i = self.i.wrapping_add(1);
        self.now = self.now + Span::from_millis(10);
        let identity = client_identity(&Sources { cf_connecting_ip: Some(ip), ..Sources::default() });
        let path = normalise_path("/api/ping").expect("a normal path");
        let facts = RequestFacts { method: "GET", host: "example.com", path: &path, colo: Some("AMS"), identity };
        let mut decision = None;
        for rule in self.rules.matching(&facts) {
            let key = rule.counting_key(&facts, |_| None);
            decision = Some(self.table.check(key.as_str(), self.now, 1).expect("cost 1 fits"));
        }
        decision
    }
}

// ---------------------------------------------------------------------------------------
// The reference rule counted in the isolate, through the edge's own rules stage
// ---------------------------------------------------------------------------------------

/// What the Worker does per request for a rule with `"store": "isolate"`: the whole rules
/// stage (the counting key, its digest, the block cache, the isolate's keyed count, the
/// verdict and its RateLimit headers), with nothing asked of a store.
struct IsolateStage {
    rules: RuleSet,
    isolate: Isolate,
    ips: Vec<String>,
    now: Instant,
    i: usize,
}

impl IsolateStage {
    /// With the rule's `enforce` as given (`true`: every refusal; a fraction: the counting
    /// key's hash is taken on every decision).
    fn new(enforce: &str) -> Self {
        let rules = RuleSet::from_json(&REFERENCE_RULES.replace(
            "\"mitigation_timeout\"",
            &format!("\"store\":\"isolate\",\"enforce\":{enforce},\"mitigation_timeout\""),
        ))
        .expect("the reference rule on the isolate parses");
        let ips = (0..64).map(|i| format!("198.51.100.{}", i + 1)).collect();
        IsolateStage { rules, isolate: Isolate::default(), ips, now: Instant::from_secs(1_000), i: 0 }
    }

    fn decide(&mut self) -> bool {
        let ip = self.ips[self.i % self.ips.len()].as_str();
        self.i = self.i.wrapping_add(1);
        self.now = self.now + Span::from_millis(10);
        let identity = client_identity(&Sources { cf_connecting_ip: Some(ip), ..Sources::default() });
        let facts = RequestFacts { method: "GET", host: "example.com", path: "/api/ping", colo: Some("AMS"), identity };
        let mut check = RulesCheck::new(&self.rules, KeyedHash::new(7, 11));
        let none = |_: &str| None;
        assert!(matches!(check.next(&mut self.isolate, &facts, &none, self.now), Step::Done), "nothing is asked");
        let (verdict, _) = check.finish();
        match verdict {
            Verdict::Admitted(checked) => !checked.headers().0.is_empty(),
            Verdict::Refused { .. } => false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Path normalisation and rule matching, per request
// ---------------------------------------------------------------------------------------

/// The default rule and three app-layer rules (exact, prefix with methods, case-sensitive).
const APP_RULES: &str = r#"{"rules":[
  {"id":"api","match":{"path":{"starts_with":"/api/"}},"characteristics":["ip.src","cf.colo.id"],"period":10,"requests_per_period":20,"mitigation_timeout":10},
  {"id":"analyze","match":{"path":{"equals":"/api/analyze"},"methods":["POST"]},"characteristics":["ip.src"],"algorithm":"token_bucket","rate":0.2,"burst":6},
  {"id":"geocode","match":{"path":{"starts_with":"/api/geocode"}},"characteristics":["ip.src"],"algorithm":"token_bucket","rate":0.5,"burst":10},
  {"id":"static","match":{"path":{"starts_with":"/Static/"},"case_sensitive":true},"characteristics":["ip.src"],"period":1,"requests_per_period":1000}
]}"#;

/// Twenty request paths as they arrive: mostly already normal, some encoded or re-cased.
const TYPICAL_PATHS: [&str; 20] = [
    "/",
    "/index.html",
    "/api/ping",
    "/api/analyze",
    "/api/analyze/stream",
    "/api/destinations",
    "/api/geocode",
    "/api/capabilities",
    "/assets/app.3f9c2b.js",
    "/assets/app.3f9c2b.css",
    "/favicon.ico",
    "/api/v1/orders/12345/items",
    "/Static/logo.png",
    "/caf%C3%A9/menu",
    "/API/Ping",
    "/%61pi/ping",
    "/api%2Fping",
    "/x/..%2fapi/ping",
    "//api//geocode",
    "/search/a%20b%20c",
];

/// Normalise each path and count the rules it matches; the sum keeps the work observable.
fn normalise_and_match(rules: &RuleSet) -> usize {
    let mut matched = 0;
    for raw in TYPICAL_PATHS {
        let path = normalise_path(black_box(raw)).expect("typical paths normalise");
        let facts = RequestFacts { method: "GET", host: "example.com", path: &path, colo: Some("AMS"), identity: None };
        matched += rules.matching(&facts).count();
    }
    matched
}

// ---------------------------------------------------------------------------------------
// The per-address table checked before a body is read (2^20 salted slots)
// ---------------------------------------------------------------------------------------

struct IpFlood {
    table: IpTable,
    keys: Rc<[u64]>,
    i: usize,
    now: Instant,
    step: Span,
}

impl IpFlood {
    fn new(keys: Rc<[u64]>) -> Self {
        let quota = Gcra::new(RATE, Span::from_secs(1), RATE).expect("valid quota");
        IpFlood {
            table: IpTable::new(quota, 0x5eed),
            keys,
            i: 0,
            now: Instant::from_secs(1),
            step: Span::from_nanos(STEP.as_nanos() as u64),
        }
    }

    #[inline]
    fn decide(&mut self) -> Decision {
        let key = self.keys[self.i & (self.keys.len() - 1)];
        self.i = self.i.wrapping_add(1);
        self.now = self.now + self.step;
        let ip = ClientIp::from_ip(std::net::IpAddr::from((key as u32).to_be_bytes()));
        self.table.check(ip, self.now)
    }
}

// ---------------------------------------------------------------------------------------
// Keyed GCRA: sluicegate and governor on the same keys, quota and fake clock
// ---------------------------------------------------------------------------------------

/// The key of the `i`-th decision: a multiplicative hash of `i`, mod `n`, so consecutive
/// decisions land far apart in the table. A power-of-two sequence, cycled.
fn key_sequence(n: u64) -> Rc<[u64]> {
    let len = n.next_power_of_two().max(1 << 12);
    (0..len).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) % n).collect()
}

/// A table of GCRA buckets by `u64` key: [`Keyed`], or [`KeyedGcra`] (each key beside its
/// TAT, open addressing), which decide alike.
trait GcraTable {
    fn make(quota: Gcra, max_keys: usize) -> Self;
    fn decide(&mut self, key: u64, now: Instant) -> Decision;
    fn held(&self) -> usize;
}

impl GcraTable for Keyed<u64, Gcra> {
    fn make(quota: Gcra, max_keys: usize) -> Self {
        Keyed::new(quota, max_keys, 0x5eed)
    }
    #[inline]
    fn decide(&mut self, key: u64, now: Instant) -> Decision {
        self.check(&key, now, 1).unwrap()
    }
    fn held(&self) -> usize {
        self.len()
    }
}

impl GcraTable for KeyedGcra<u64> {
    fn make(quota: Gcra, max_keys: usize) -> Self {
        KeyedGcra::new(quota, max_keys, 0x5eed)
    }
    #[inline]
    fn decide(&mut self, key: u64, now: Instant) -> Decision {
        self.check(&key, now, 1).unwrap()
    }
    fn held(&self) -> usize {
        self.len()
    }
}

/// `Keyed`'s side of the keyed GCRA comparison.
type OursKeyed = SluiceKeyed<Keyed<u64, Gcra>>;
/// `KeyedGcra`'s side.
type OursTats = SluiceKeyed<KeyedGcra<u64>>;

/// Our side of the keyed GCRA comparison: `n` keys held, then decisions in `keys`' order.
struct SluiceKeyed<T> {
    table: T,
    keys: Rc<[u64]>,
    i: usize,
    now: Instant,
    step: Span,
}

impl<T: GcraTable> SluiceKeyed<T> {
    fn new(n: u64, keys: Rc<[u64]>) -> Self {
        let quota = Gcra::new(RATE, Span::from_secs(1), RATE).expect("valid quota");
        let max_keys = usize::try_from(n).unwrap().max(1024) * 2;
        let mut table = T::make(quota, max_keys);
        let now = Instant::from_secs(1);
        for key in 0..n {
            assert!(table.decide(key, now).is_allowed());
        }
        assert_eq!(table.held() as u64, n);
        SluiceKeyed { table, keys, i: 0, now, step: Span::from_nanos(STEP.as_nanos() as u64) }
    }

    #[inline]
    fn decide(&mut self) -> Decision {
        let key = self.keys[self.i & (self.keys.len() - 1)];
        self.i = self.i.wrapping_add(1);
        self.now = self.now + self.step;
        self.table.decide(key, self.now)
    }
}

type GovernorKeyed = governor::RateLimiter<u64, DashMapStateStore<u64>, FakeRelativeClock, NoOpMiddleware<Nanos>>;

struct GovKeyed {
    limiter: GovernorKeyed,
    clock: FakeRelativeClock,
    keys: Rc<[u64]>,
    i: usize,
}

impl GovKeyed {
    fn new(n: u64, keys: Rc<[u64]>) -> Self {
        let rate = NonZeroU32::new(RATE).unwrap();
        let quota = governor::Quota::per_second(rate).allow_burst(rate);
        let clock = FakeRelativeClock::default();
        clock.advance(Duration::from_secs(1));
        let limiter = GovernorKeyed::dashmap_with_clock(quota, clock.clone());
        for key in 0..n {
            assert!(limiter.check_key(&key).is_ok());
        }
        assert_eq!(limiter.len() as u64, n);
        GovKeyed { limiter, clock, keys, i: 0 }
    }

    #[inline]
    fn decide(&mut self) -> bool {
        let key = self.keys[self.i & (self.keys.len() - 1)];
        self.i = self.i.wrapping_add(1);
        self.clock.advance(STEP);
        self.limiter.check_key(&key).is_ok()
    }
}

// ---------------------------------------------------------------------------------------
// The client pacer: placing a call behind a deep queue (Open-Meteo's three windows)
// ---------------------------------------------------------------------------------------

/// Weights of a fan-out: mostly 1, some 1.5 and 2 (thousandths).
const FANOUT_WEIGHTS: [u64; 5] = [1_000, 1_500, 1_000, 2_000, 1_000];

/// A pacer with `depth` calls queued at `now`, as a page that fans out `depth` calls at once.
fn queued_pacer(depth: usize, now: Instant) -> PacerCore {
    let mut p = PacerCore::new(free_tier_windows(), Some(5_000_000)).expect("the windows are valid");
    for i in 0..depth {
        p.reserve(now, FANOUT_WEIGHTS[i % FANOUT_WEIGHTS.len()]).expect("admissible");
    }
    p
}

/// Mean ns per `reserve` for the next 1,000 calls behind `depth` queued ones.
fn reserve_ns(depth: usize) -> f64 {
    let now = Instant::from_secs(1_000_000);
    (0..3)
        .map(|_| {
            let mut p = queued_pacer(depth, now);
            let start = std::time::Instant::now();
            for i in 0..1_000 {
                black_box(p.reserve(now, FANOUT_WEIGHTS[i % FANOUT_WEIGHTS.len()]).expect("admissible"));
            }
            start.elapsed().as_nanos() as f64 / 1_000.0
        })
        .fold(f64::INFINITY, f64::min)
}

const PACER_DEPTHS: [usize; 3] = [1_000, 4_000, 10_000];

// ---------------------------------------------------------------------------------------
// Summary
// ---------------------------------------------------------------------------------------

/// Where criterion writes its estimates (its own order of preference).
fn criterion_home() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    // Cargo runs benches from the package root; this crate is the workspace root.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("criterion")
}

/// The mean ns/iteration criterion wrote for `id` during this run, if it did.
fn criterion_mean(id: &str, since: SystemTime) -> Option<f64> {
    let path = criterion_home().join(id).join("new").join("estimates.json");
    let written = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
    if written < since {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    // {"mean":{"confidence_interval":{...},"point_estimate":41.2,"standard_error":...},...}
    let mean = &text[text.find("\"mean\"")?..];
    let at = mean.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let rest = &mean[at..];
    let end = rest.find([',', '}'])?;
    rest[..end].trim().parse().ok()
}

/// ns per call of `f`, timed here: the best of three rounds of `iters` calls.
fn time_it(iters: u64, mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Criterion's estimate for `id` from this run, else a timing of `f` here.
fn ns_per_decision(id: &str, since: SystemTime, f: impl FnMut()) -> (f64, &'static str) {
    match criterion_mean(id, since) {
        Some(ns) => (ns, "criterion mean"),
        None => (time_it(2_000_000, f), "timed after criterion"),
    }
}

/// What the benchmarks decided on, kept for the summary's own timings.
/// The stats' recorder as an isolate runs it: one decision a millisecond, one in five a
/// refusal with its identity, the batch taken when due (every 1,000 decisions).
struct Recording {
    recorder: Recorder,
    t: u64,
}

impl Recording {
    fn decide(&mut self) -> bool {
        self.t += 1;
        let refused = self.t % 5 == 0;
        let outcome = if refused { Outcome::Refused } else { Outcome::Admitted };
        self.recorder.record(1_780_000_000_000 + self.t, Kind::Rule, "api", outcome, refused.then_some("203.0.113.7"));
        if self.recorder.due(1_780_000_000_000 + self.t) {
            black_box(self.recorder.take());
        }
        refused
    }
}

struct Subjects {
    edge: Edge,
    recording: Recording,
    isolate: IsolateStage,
    partial: IsolateStage,
    app_rules: RuleSet,
    /// Per-address tables by number of addresses.
    floods: Vec<(u64, IpFlood)>,
    /// Keyed GCRA, ours and governor's, by number of keys.
    sides: Vec<(u64, OursKeyed, OursTats, GovKeyed)>,
}

fn main() {
    let started = SystemTime::now();
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
        .configure_from_args();
    let mut subjects = run_benchmarks(&mut c, benchmarking);
    c.final_summary();
    if benchmarking {
        print_summary(&mut subjects, started);
    }
}

/// The criterion groups. Under `cargo test --benches` (no `--bench`): one pass each, and the
/// small tables only.
fn run_benchmarks(c: &mut Criterion, benchmarking: bool) -> Subjects {
    let mut edge = Edge::new();
    {
        let mut group = c.benchmark_group("reference_rule");
        group.bench_function("evaluate", |b| b.iter(|| black_box(edge.decide())));
        group.finish();
    }
    let mut isolate = IsolateStage::new("true");
    assert!(isolate.decide(), "the isolate store admits the reference traffic");
    let mut partial = IsolateStage::new("0.5");
    {
        let mut group = c.benchmark_group("rules_stage");
        group.bench_function("isolate_store", |b| b.iter(|| black_box(isolate.decide())));
        group.bench_function("isolate_store_enforce_half", |b| b.iter(|| black_box(partial.decide())));
        group.finish();
    }

    let app_rules = RuleSet::from_json(APP_RULES).expect("the app rules parse");
    assert_eq!(normalise_and_match(&app_rules), 15, "the typical paths match as expected");
    {
        let mut group = c.benchmark_group("paths");
        group.bench_function("normalise_and_match_20", |b| b.iter(|| black_box(normalise_and_match(&app_rules))));
        group.finish();
    }

    let mut floods = Vec::new();
    {
        let mut group = c.benchmark_group("ip_table");
        for &n in if benchmarking { &KEY_COUNTS[1..] } else { &KEY_COUNTS[1..2] } {
            let mut flood = IpFlood::new(key_sequence(n));
            group.bench_with_input(BenchmarkId::new("sluicegate", n), &n, |b, _| b.iter(|| black_box(flood.decide())));
            floods.push((n, flood));
        }
        group.finish();
    }

    let counts: &[u64] = if benchmarking { &KEY_COUNTS } else { &KEY_COUNTS[..2] };
    let mut sides = Vec::new();
    {
        let mut group = c.benchmark_group("keyed_gcra");
        for &n in counts {
            let keys = key_sequence(n);
            let mut ours = OursKeyed::new(n, keys.clone());
            group.bench_with_input(BenchmarkId::new("sluicegate", n), &n, |b, _| b.iter(|| black_box(ours.decide())));
            let mut tats = OursTats::new(n, keys.clone());
            group.bench_with_input(BenchmarkId::new("sluicegate_tats", n), &n, |b, _| {
                b.iter(|| black_box(tats.decide()))
            });
            let mut theirs = GovKeyed::new(n, keys);
            group.bench_with_input(BenchmarkId::new("governor", n), &n, |b, _| b.iter(|| black_box(theirs.decide())));
            // the same decisions on both tables, request for request
            for _ in 0..10_000 {
                assert_eq!(ours.decide(), tats.decide(), "Keyed and KeyedGcra decide alike");
            }
            sides.push((n, ours, tats, theirs));
        }
        group.finish();
    }
    {
        let mut group = c.benchmark_group("pacer");
        let depths: &[usize] = if benchmarking { &PACER_DEPTHS } else { &PACER_DEPTHS[..1] };
        for &depth in depths {
            let now = Instant::from_secs(1_000_000);
            let mut p = queued_pacer(depth, now);
            // One more call placed and refunded: the queue stays `depth` deep.
            group.bench_with_input(BenchmarkId::new("reserve_and_cancel", depth), &depth, |b, _| {
                b.iter(|| {
                    let r = p.reserve(now, 1_500).expect("admissible");
                    black_box(p.cancel(r.id))
                })
            });
        }
        group.finish();
    }
    let mut recording = Recording { recorder: Recorder::default(), t: 0 };
    {
        let mut group = c.benchmark_group("analytics");
        group.bench_function("record", |b| b.iter(|| black_box(recording.decide())));
        group.finish();
    }
    Subjects { edge, recording, isolate, partial, app_rules, floods, sides }
}

/// ns per decision of each benchmark (criterion's estimates where it wrote them), with
/// governor's fake clock on its own and the pacer's reserve alone.
fn print_summary(subjects: &mut Subjects, started: SystemTime) {
    let Subjects { edge, recording, isolate, partial, app_rules, floods, sides } = subjects;
    println!();
    println!("summary (ns per decision):");
    let (ns, source) = ns_per_decision("reference_rule/evaluate", started, || {
        black_box(edge.decide());
    });
    println!("reference rule evaluation: {ns:.1} ns/decision ({source})");
    let (ns, source) = ns_per_decision("rules_stage/isolate_store", started, || {
        black_box(isolate.decide());
    });
    println!(
        "the rules stage, the reference rule on the isolate store (key, digest, count, headers): {ns:.1} ns/request ({source})"
    );
    let (ns, source) = ns_per_decision("rules_stage/isolate_store_enforce_half", started, || {
        black_box(partial.decide());
    });
    println!("the same, the rule enforced for half its keys (the key's hash on every decision): {ns:.1} ns/request ({source})");
    let (ns, source) = ns_per_decision("analytics/record", started, || {
        black_box(recording.decide());
    });
    println!(
        "counting a decision for the stats (one in five a refusal with its identity, the batch taken every 1,000): \
         {ns:.1} ns/decision ({source})"
    );
    let (ns, source) = ns_per_decision("paths/normalise_and_match_20", started, || {
        black_box(normalise_and_match(app_rules));
    });
    println!(
        "path normalisation + matching 4 rules: {:.1} ns per request (mean over 20 typical paths, {source})",
        ns / 20.0
    );
    // governor's side includes advancing its fake clock (an atomic compare-exchange loop).
    let clock = FakeRelativeClock::default();
    let advance = time_it(2_000_000, || clock.advance(black_box(STEP)));
    println!("governor FakeRelativeClock::advance alone: {advance:.1} ns (included in governor's figures)");
    for (n, flood) in floods {
        let (ns, source) = ns_per_decision(&format!("ip_table/sluicegate/{n}"), started, || {
            black_box(flood.decide());
        });
        println!("per-address table (2^20 salted slots), {n} addresses: {ns:.1} ns ({source})");
    }
    for depth in PACER_DEPTHS {
        let pair = criterion_mean(&format!("pacer/reserve_and_cancel/{depth}"), started).unwrap_or(f64::NAN);
        println!(
            "pacer, Open-Meteo windows, {depth} calls queued: reserve {:.0} ns (mean of the next 1,000), \
             reserve + cancel {pair:.0} ns (criterion mean)",
            reserve_ns(depth)
        );
    }
    for (n, ours, tats, theirs) in sides {
        let (s, source) = ns_per_decision(&format!("keyed_gcra/sluicegate/{n}"), started, || {
            black_box(ours.decide());
        });
        let (k, _) = ns_per_decision(&format!("keyed_gcra/sluicegate_tats/{n}"), started, || {
            black_box(tats.decide());
        });
        let (g, _) = ns_per_decision(&format!("keyed_gcra/governor/{n}"), started, || {
            black_box(theirs.decide());
        });
        let keys = if *n == 1 { "key" } else { "keys" };
        println!(
            "keyed GCRA, {n} {keys}: sluicegate Keyed {s:.1} ns ({:.2}x governor), KeyedGcra {k:.1} ns ({:.2}x governor), \
             governor {g:.1} ns ({source})",
            s / g,
            k / g
        );
        let [s, k, g] = interleaved(ours, tats, theirs);
        println!(
            "  the same in alternating blocks: Keyed {s:.1} ns ({:.2}x), KeyedGcra {k:.1} ns ({:.2}x), governor {g:.1} ns",
            s / g,
            k / g
        );
    }
}

/// ns per decision of the three keyed GCRA sides timed in turn, a block of decisions each,
/// round after round (the first side moving round to round), so that all three meet the same
/// machine: criterion's means are taken seconds apart, and a shared machine's pace moves in
/// seconds.
fn interleaved(ours: &mut OursKeyed, tats: &mut OursTats, theirs: &mut GovKeyed) -> [f64; 3] {
    const ROUNDS: usize = 30;
    const BLOCK: usize = 1 << 16;
    let mut total = [Duration::ZERO; 3];
    for round in 0..ROUNDS {
        for side in (0..3).map(|i| (i + round) % 3) {
            total[side] += match side {
                0 => block(BLOCK, || ours.decide()),
                1 => block(BLOCK, || tats.decide()),
                _ => block(BLOCK, || theirs.decide()),
            };
        }
    }
    total.map(|t| t.as_nanos() as f64 / (ROUNDS * BLOCK) as f64)
}

/// The time of `n` calls of `decide` in a row.
fn block<T>(n: usize, mut decide: impl FnMut() -> T) -> Duration {
    let start = std::time::Instant::now();
    for _ in 0..n {
        black_box(decide());
    }
    start.elapsed()
}
