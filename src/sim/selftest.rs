//! `sim --self-test`: the reference's self-test cases, with the reference's output.

use super::limiters::{max_in_window, ReferenceLimiter};
use super::{analyse, generate, Config, Report, Severity};
use serde_json::json;
use std::collections::HashMap;

/// Runs the cases; returns the printed lines and whether all passed.
pub fn self_test() -> (String, bool) {
    let mut cases = Cases::default();
    limiter_cases(&mut cases);
    simulation_cases(&mut cases);
    cases.summary()
}

/// The cases run so far: name, whether it passed, what to show when it did not.
#[derive(Default)]
struct Cases(Vec<(&'static str, bool, String)>);

impl Cases {
    fn check(&mut self, name: &'static str, ok: bool, detail: String) {
        self.0.push((name, ok, detail));
    }

    /// One line per case, then the count passed; and whether all passed.
    fn summary(&self) -> (String, bool) {
        let mut out = String::new();
        for (name, ok, detail) in &self.0 {
            let status = if *ok { "PASS" } else { "FAIL" };
            let detail = if *ok { String::new() } else { format!("  -> {detail}") };
            out.push_str(&format!("{status}  {name}{detail}\n"));
        }
        let passed = self.0.iter().filter(|c| c.1).count();
        out.push_str(&format!("{passed}/{} passed\n", self.0.len()));
        (out, passed == self.0.len())
    }
}

/// The four limiters on their own: bursts, Retry-After, window boundaries.
fn limiter_cases(cases: &mut Cases) {
    let mut check = |name: &'static str, ok: bool, detail: String| cases.check(name, ok, detail);
    let mut tb = ReferenceLimiter::token_bucket(1.0, 3.0);
    tb.add_key();
    let mut ok = 0;
    for _ in 0..5 {
        if tb.check(0, 0.0, 1.0).allowed {
            tb.consume(0, 0.0, 1.0);
            ok += 1;
        }
    }
    check("token bucket burst of 3 at t=0", ok == 3, ok.to_string());
    let c = tb.check(0, 0.0, 1.0);
    check("token bucket retry-after 1s", !c.allowed && (c.wait - 1.0).abs() < 1e-6, c.wait.to_string());
    let c = tb.check(0, 1.0, 1.0);
    check("token bucket refills 1 token per second", c.allowed, String::new());

    let times: Vec<f64> =
        (0..10).map(|i| 59.0 + f64::from(i) * 0.01).chain((0..10).map(|i| 60.0 + f64::from(i) * 0.01)).collect();
    let run = |lim: &mut ReferenceLimiter, times: &[f64]| -> Vec<f64> {
        let mut allowed = Vec::new();
        for &t in times {
            if lim.check(0, t, 1.0).allowed {
                lim.consume(0, t, 1.0);
                allowed.push(t);
            }
        }
        allowed
    };
    let mut fw = ReferenceLimiter::fixed_window(10.0, 60.0);
    fw.add_key();
    let allowed = run(&mut fw, &times);
    check("fixed window boundary burst = 2x limit", max_in_window(&allowed, 60.0) == 20, allowed.len().to_string());
    let c = fw.check(0, 61.0, 1.0);
    check("fixed window retry-after until reset", !c.allowed && (c.wait - 59.0).abs() < 1e-6, c.wait.to_string());

    let mut sl = ReferenceLimiter::sliding_log(10.0, 60.0);
    sl.add_key();
    let allowed = run(&mut sl, &times);
    check("sliding log never exceeds limit", max_in_window(&allowed, 60.0) == 10, allowed.len().to_string());
    let c = sl.check(0, 60.5, 1.0);
    check(
        "sliding log retry-after = oldest + window",
        !c.allowed && (c.wait - (59.0 + 60.0 - 60.5)).abs() < 1e-6,
        c.wait.to_string(),
    );

    let mut sc = ReferenceLimiter::sliding_counter(10.0, 60.0);
    let trickle: Vec<f64> = times.iter().copied().chain((0..10).map(|i| 90.0 + f64::from(i))).collect();
    sc.add_key();
    let allowed = run(&mut sc, &trickle);
    let first = allowed.iter().filter(|&&t| t < 61.0).count();
    let later = allowed.iter().filter(|&&t| t >= 90.0).count();
    check("sliding counter blocks the boundary burst", first == 10, first.to_string());
    check(
        "sliding counter weights previous window (about half at mid-window)",
        (4..=7).contains(&later),
        later.to_string(),
    );
}

/// A self-test configuration's report.
fn report(cfg: serde_json::Value) -> Report {
    // the errors' Display, not their Debug: the wasm build then carries no Debug of SimError
    let cfg = Config::from_value(&cfg).unwrap_or_else(|e| panic!("self-test config: {e}"));
    let traffic = generate(&cfg).unwrap_or_else(|e| panic!("self-test traffic: {e}"));
    analyse(&cfg, traffic).unwrap_or_else(|e| panic!("self-test analysis: {e}"))
}

/// Per client: 429s, admitted, amplification.
fn by(r: &Report) -> HashMap<String, (u64, u64, f64)> {
    r.clients.iter().map(|c| (c.client.clone(), (c.rejected, c.allowed, c.amplification))).collect()
}

/// Each finding code, with the severity of its last finding.
fn codes(r: &Report) -> HashMap<&'static str, Severity> {
    let mut m = HashMap::new();
    for f in &r.findings {
        m.insert(f.code, f.severity);
    }
    m
}

/// Whole simulations: who is throttled, the findings, scoping, tiers, the report.
fn simulation_cases(cases: &mut Cases) {
    let mut check = |name: &'static str, ok: bool, detail: String| cases.check(name, ok, detail);
    let r = report(json!({"service": "t", "duration_s": 60, "capacity_rps": 1000, "policies": [
        {"name": "pc", "algorithm": "token_bucket", "key": "client", "rate": 5, "burst": 5}],
        "clients": [{"name": "good", "kind": "legit", "rps": 2},
                    {"name": "bad", "kind": "abusive", "rps": 20, "retry": "immediate"}]}));
    let b = by(&r);
    check("legit client under limit not throttled", b["good"].0 == 0, format!("{:?}", b["good"]));
    check("abusive client mostly throttled", b["bad"].1 <= 5 * 60 + 10, b["bad"].1.to_string());
    check("immediate retries amplify attempts", b["bad"].2 > 1.5, b["bad"].2.to_string());
    check("RL05 retry amplification finding", codes(&r).contains_key("RL05"), format!("{:?}", codes(&r)));

    let r2 = report(json!({"duration_s": 30, "capacity_rps": 10, "policies": [
        {"name": "g", "algorithm": "fixed_window", "key": "global", "limit": 600, "window_s": 60}],
        "clients": [{"name": "hog", "kind": "abusive", "rps": 30},
                    {"name": "app", "kind": "legit", "rps": 1, "start": 25, "duration": 5}]}));
    let c2 = codes(&r2);
    check("RL03 over capacity is high", c2.get("RL03") == Some(&Severity::High), format!("{c2:?}"));
    check("RL06 noisy neighbour on global", c2.contains_key("RL06"), format!("{c2:?}"));
    check("RL01 legit client starved", c2.get("RL01") == Some(&Severity::High), format!("{c2:?}"));

    let cfg3 = json!({"duration_s": 10, "policies": [
        {"name": "login", "algorithm": "sliding_log", "key": "client", "limit": 2, "window_s": 60,
         "endpoints": ["/login"]}],
        "clients": [{"name": "u", "rps": 1, "endpoint": "/orders"}, {"name": "v", "rps": 1, "endpoint": "/login"}]});
    let b3 = by(&report(cfg3.clone()));
    check(
        "endpoint-scoped policy ignores other endpoints",
        b3["u"].0 == 0 && b3["v"].1 == 2,
        format!("{:?}", (b3["u"], b3["v"])),
    );
    let bursts = Config::from_value(&json!({"duration_s": 120, "policies": cfg3["policies"],
        "clients": [{"name": "b", "pattern": "burst", "burst": 5, "every_s": 60}]}))
    .and_then(|c| generate(&c))
    .map_or(0, |reqs| reqs.len());
    check("burst pattern generates bursts", bursts == 10, String::new());
    let b4 = by(&report(json!({"duration_s": 10, "policies": [
        {"name": "default", "algorithm": "token_bucket", "key": "client", "rate": 1, "burst": 1,
         "exclude_clients": ["vip"]},
        {"name": "vip", "algorithm": "token_bucket", "key": "client", "rate": 10, "burst": 10, "clients": ["vip"]}],
        "clients": [{"name": "vip", "rps": 5}, {"name": "std", "rps": 5}]})));
    check(
        "client tiers: vip unthrottled, std limited",
        b4["vip"].0 == 0 && b4["std"].1 <= 11,
        format!("{:?}", (b4["vip"], b4["std"])),
    );
    let bad = Config::from_value(&json!({"policies": [{"algorithm": "leaky"}]}));
    check("bad algorithm rejected", bad.is_err(), String::new());
    let rep = r2.to_markdown().unwrap_or_default();
    check("report has verdict and sample 429", rep.contains("Verdict") && rep.contains("429 Too Many Requests"), rep);
}
