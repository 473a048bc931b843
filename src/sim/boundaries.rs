//! Which requests of a replay sit where timing alone decides: `sluicegate replay` reports them
//! apart, since a millisecond either way (the machine's, not the policy's) can turn them.
//!
//! A request is timing-limited when it is within the tolerance of
//! - a boundary of a fixed window (every rule's period divides the edge's replay clock, so the
//!   windows start at multiples of the period);
//! - the instant an earlier request of its address leaves a rule's period (an admitted one),
//!   or its block ends (a refused one);
//! - the instant a token of its tenant's bucket comes back after one of the tenant's
//!   admissions (every `1 / rate` seconds, as many as the burst holds, at most
//!   [`REFILLS_WATCHED`]).
//!
//! A request that a rule on the Cloudflare binding counts (`"store": "cloudflare"`) is
//! reported apart whenever it comes: the binding's windows follow its own clock (the wall
//! clock, in Miniflare), never the replay's, so the simulator cannot say which window it
//! lands in.

use super::edge::{host_of, EdgeFacts};
use super::{EdgeDecision, EdgeRow, Names, SimError, TraceReader};
use crate::edge::rules::{Algorithm, RuleSet, Store};
use crate::edge::tenants::{effective, Identify};
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;

/// Refills of a tenant's bucket watched after each of its admissions.
pub const REFILLS_WATCHED: u32 = 8;

/// The edge's decision on each row of `trace` under `rules_json`, with the rules that refused
/// it in shadow ([`super::edge_replay`]), and whether it is timing-limited within `tolerance_s` seconds ([`timing_limited`]): what
/// `sluicegate replay` compares with the edge.
///
/// # Errors
/// Rules that do not validate, or a trace the simulator cannot read.
pub fn replay_decisions(
    rules_json: &str,
    label: &str,
    trace: &str,
    tolerance_s: f64,
) -> Result<Vec<(EdgeRow, bool)>, SimError> {
    let rows = super::edge_replay(rules_json, label, trace)?;
    let decided: Vec<EdgeDecision> = rows.iter().map(|row| row.decision).collect();
    let rules = RuleSet::from_json(rules_json).map_err(|errors| {
        SimError::Input(alloc::format!(
            "rules: {}",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        ))
    })?;
    let limited = timing_limited(&rules, label, trace, &decided, tolerance_s)?;
    Ok(rows.into_iter().zip(limited).collect())
}

/// What a row of a replay is, for its boundaries: when, whose address and whose tenant (each
/// a group's number), and how the tenant's bucket refills.
struct Row {
    t: f64,
    address: Option<u32>,
    tenant: Option<u32>,
    refill: Option<(f64, u32)>,
    /// Whether a rule on the Cloudflare binding counts it.
    binding: bool,
}

/// Whether each row of `trace` (decided as `decided` says, in the trace's order) is within
/// `tolerance_s` seconds of an instant where timing decides, under `rules`.
///
/// # Errors
/// A trace the simulator cannot read.
pub fn timing_limited(
    rules: &RuleSet,
    label: &str,
    trace: &str,
    decided: &[EdgeDecision],
    tolerance_s: f64,
) -> Result<Vec<bool>, SimError> {
    let rows = rows(rules, label, trace)?;
    let mut periods: Vec<f64> = Vec::new();
    let mut blocks: Vec<f64> = Vec::new();
    for rule in rules.rules() {
        let period = match rule.algorithm {
            Algorithm::SlidingLog { period, .. }
            | Algorithm::FixedWindow { period, .. }
            | Algorithm::SlidingWindow { period, .. } => Some(period.as_nanos() as f64 / 1e9),
            _ => None,
        };
        periods.extend(period.filter(|p| *p > 0.0 && !periods.contains(p)));
        let block = rule.mitigation_timeout.as_nanos() as f64 / 1e9;
        if block > 0.0 && !blocks.contains(&block) {
            blocks.push(block);
        }
    }
    // The instants after which each address's and each tenant's requests may decide
    // otherwise, by group (an address, or a tenant), in one sorted list.
    let mut instants: Vec<(u32, f64)> = Vec::new();
    for (row, decision) in rows.iter().zip(decided) {
        if let Some(address) = row.address {
            let after = if decision.admitted() { &periods } else { &blocks };
            instants.extend(after.iter().map(|p| (address, row.t + p)));
        }
        let refill = row.tenant.filter(|_| decision.admitted()).zip(row.refill);
        if let Some((tenant, (every, count))) = refill {
            instants.extend((1..=count).map(|k| (tenant, row.t + every * f64::from(k))));
        }
    }
    crate::core::sort::sort_by(&mut instants, |a, b| a.0 < b.0 || (a.0 == b.0 && a.1 < b.1));
    let near = |group: Option<u32>, t: f64| {
        let Some(group) = group else { return false };
        let first = instants.partition_point(|&(g, x)| g < group || (g == group && x < t - tolerance_s));
        instants.get(first).is_some_and(|&(g, x)| g == group && x <= t + tolerance_s)
    };
    Ok(rows
        .iter()
        .map(|row| {
            let on_window = periods.iter().any(|p| {
                let phase = row.t - (row.t / p).floor() * p;
                phase <= tolerance_s || p - phase <= tolerance_s
            });
            row.binding || on_window || near(row.address, row.t) || near(row.tenant, row.t)
        })
        .collect())
}

/// How often `tenant`'s bucket refills (seconds) and how many refills to watch.
fn refill(rules: &RuleSet, tenant: &str) -> Option<(f64, u32)> {
    let tenants = rules.tenants()?;
    let (limit, _) = effective(None, tenants.limits.get(tenant), tenants.default.as_ref())?;
    (limit.rate > 0.0).then(|| (1.0 / limit.rate, limit.burst.clamp(1, REFILLS_WATCHED)))
}

/// Each row's time, address and tenant (the value of the header that names it), as groups.
fn rows(rules: &RuleSet, label: &str, trace: &str) -> Result<Vec<Row>, SimError> {
    let host = host_of(rules);
    let header = rules.tenants().map(|t| match &t.identify {
        Identify::Named(name) | Identify::Key(name) => name.clone(),
    });
    let (mut clients, mut endpoints, mut groups) = (Names::default(), Names::default(), Names::default());
    let mut reader = TraceReader::new(label, trace.as_bytes());
    let mut out = Vec::new();
    while let Some(r) = reader.next_request(&mut clients, &mut endpoints)? {
        let facts = EdgeFacts::of(clients.name(r.client), r.client, endpoints.name(r.endpoint), &host);
        let address = facts.as_ref().and_then(|f| f.facts().identity).map(|i| i.ip.to_string());
        let tenant = facts.as_ref().zip(header.as_deref()).and_then(|(f, name)| f.header(name));
        let refill = tenant.as_deref().and_then(|t| refill(rules, t));
        let binding = facts.as_ref().is_some_and(|f| {
            let request = f.facts();
            rules.rules().iter().any(|r| matches!(r.store, Store::Cloudflare { .. }) && r.matches(&request))
        });
        out.push(Row {
            binding,
            t: r.t,
            address: address.map(|a| groups.intern(&a)),
            tenant: tenant.map(|t| groups.intern(&format!("\u{1f}{t}"))),
            refill,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(rules: &str, trace: &str, decided: &[EdgeDecision]) -> Vec<bool> {
        let set = RuleSet::from_json(rules).unwrap();
        timing_limited(&set, "trace", trace, decided, 0.005).unwrap()
    }

    #[test]
    fn requests_near_a_window_edge_or_an_earlier_request_leaving_it_are_timing_limited() {
        let rules = r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}},
            "characteristics": ["ip.src"], "period": 10, "requests_per_period": 2, "mitigation_timeout": 5}]}"#;
        let trace = "t,ip.src,endpoint\n1.0,198.51.100.7,/api/x\n2.0,198.51.100.7,/api/x\n\
                     9.998,203.0.113.9,/api/x\n11.5,198.51.100.7,/api/x\n12.0,198.51.100.7,/api/x\n\
                     17.002,198.51.100.7,/api/x\n";
        use EdgeDecision::{Admitted, Rule};
        let decided = [Admitted, Admitted, Admitted, Admitted, Rule, Admitted];
        assert_eq!(
            limited(rules, trace, &decided),
            [false, false, true, false, true, true],
            "9.998: a window's edge; 12.0: the request at 2.0 leaves its period; 17.002: the block at 12.0 ends"
        );
    }

    #[test]
    fn every_request_a_binding_rule_counts_is_reported_apart() {
        let rules = r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}}, "store": "cloudflare",
            "binding": "API_LIMITER", "characteristics": ["ip.src"], "period": 60, "requests_per_period": 2}]}"#;
        let trace = "t,ip.src,endpoint\n1.0,198.51.100.7,/api/x\n30.0,198.51.100.7,/index.html\n";
        use EdgeDecision::Admitted;
        assert_eq!(limited(rules, trace, &[Admitted, Admitted]), [true, false]);
    }

    #[test]
    fn a_tenant_s_requests_near_a_refill_are_timing_limited_whatever_their_address() {
        let rules = r#"{"rules": [], "tenants": {"match": {"path": {"starts_with": "/hooks/"}},
            "tenant_header": "x-tenant", "default": {"rate": 2, "burst": 1}}}"#;
        let trace = "t,ip.src,endpoint,header:x-tenant\n1.0,198.51.100.7,/hooks/a,acme\n\
                     1.5,203.0.113.9,/hooks/a,acme\n1.7,203.0.113.9,/hooks/a,other\n";
        let decided = [EdgeDecision::Admitted, EdgeDecision::Admitted, EdgeDecision::Admitted];
        assert_eq!(limited(rules, trace, &decided), [false, true, false], "acme's token is back at 1.5 s");
    }
}
