//! The two outputs: the `--json` document and the Markdown report, laid out exactly as the
//! reference prints them.

use super::analyse::{ClientRow, Finding, PolicyRow, Report, TenantRow};
use super::py::{float_repr, format_f, format_g, PyValue};
use super::stats::Sample;
use super::SimError;
use crate::edge::rules::Enforce;
use crate::edge::tenants::TenantLimit;
use core::fmt::Write;

fn strings(v: &[String]) -> PyValue {
    PyValue::List(v.iter().map(|s| PyValue::from(s.as_str())).collect())
}

/// A Python dict with these items, in this order.
fn dict(items: Vec<(&str, PyValue)>) -> PyValue {
    PyValue::Dict(items.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

impl Report {
    /// The report as the Python value the reference passes to `json.dumps`.
    pub fn to_py(&self) -> PyValue {
        let clients = self.clients.iter().map(|c| client_py(c, self.pacers)).collect();
        let policies = self.policies.iter().map(policy_py).collect();
        let findings = self.findings.iter().map(finding_py).collect();
        let mut items = vec![
            ("service", self.service.clone()),
            ("duration_s", self.duration_s.into()),
            ("requests", self.requests.into()),
            ("admitted", self.admitted.into()),
            ("peak_admitted_rps", self.peak_admitted_rps.into()),
            ("peak_second", PyValue::Int(self.peak_second)),
            ("capacity_rps", self.capacity_rps.into()),
            ("clients", PyValue::List(clients)),
            ("policies", PyValue::List(policies)),
            ("findings", PyValue::List(findings)),
            ("sample_429", self.sample_429.as_ref().map_or(PyValue::None, sample_py)),
        ];
        if let Some(tenants) = &self.tenants {
            items.push(("tenants", PyValue::List(tenants.iter().map(tenant_py).collect())));
        }
        dict(items)
    }

    /// What `--json` prints: `json.dumps(report, indent=2)` and a newline.
    pub fn to_json(&self) -> String {
        let mut out = self.to_py().dumps();
        out.push('\n');
        out
    }

    /// The Markdown report. Fails only where the reference would crash: a token bucket's
    /// `limit` that `float()` cannot read, shown as the sample 429's quota.
    pub fn to_markdown(&self) -> Result<String, SimError> {
        let mut out = String::new();
        self.summary_md(&mut out);
        self.clients_md(&mut out);
        self.policies_md(&mut out);
        if self.pacers {
            self.pacing_md(&mut out);
        }
        self.blocks_md(&mut out);
        self.shadow_md(&mut out);
        self.stores_md(&mut out);
        if let Some(tenants) = &self.tenants {
            tenants_md(&mut out, tenants);
        }
        self.findings_md(&mut out);
        if let Some(s) = &self.sample_429 {
            sample_md(&mut out, s)?;
        }
        Ok(out)
    }

    /// The title, the totals and the verdict.
    fn summary_md(&self, o: &mut String) {
        let _ = writeln!(o, "# Rate limit simulation: {}", self.service.to_str());
        o.push('\n');
        let cap = match self.capacity_rps {
            Some(c) if c != 0.0 => format!(" vs capacity {}", format_g(c)),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "Simulated {}s, {} logical requests, {} admitted, peak {} req/s admitted (second {}){cap}.",
            format_g(self.duration_s),
            self.requests,
            self.admitted,
            self.peak_admitted_rps,
            self.peak_second
        );
        o.push('\n');
        match self.highs() {
            0 => o.push_str("Verdict: policies hold - no high findings\n"),
            n => {
                let _ = writeln!(o, "Verdict: {n} high finding(s) - fix before shipping these limits");
            }
        }
    }

    /// The clients table.
    fn clients_md(&self, o: &mut String) {
        o.push_str("\n## Clients\n\n");
        o.push_str(
            "| Client | Kind | Requests | Attempts | Allowed | 429s | OK after retry | Failed | Failed % | \
             Max Retry-After | Top policy |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for c in &self.clients {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {}% | {}s | {} |",
                c.client,
                c.kind.to_str(),
                c.logical,
                c.attempts,
                c.allowed,
                c.rejected,
                c.delayed,
                c.failed,
                format_f(c.failed_pct, 1),
                format_g(c.max_retry_after_s),
                if c.top_policy.is_empty() { "-" } else { &c.top_policy }
            );
        }
    }

    /// The policies table.
    fn policies_md(&self, o: &mut String) {
        o.push_str("\n## Policies\n\n");
        o.push_str(
            "| Policy | Algorithm | Key | Scope | Sustained | Worst case / window | Busiest key / window | Checks | \
             Rejects |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for p in &self.policies {
            let scope = scope(p);
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} req/s | {} per {}s | {} | {} | {} |",
                p.name,
                p.algorithm,
                p.key,
                if scope.is_empty() { "all" } else { &scope },
                format_g(p.sustained_rps),
                format_g(p.worst_case_per_window),
                format_g(p.window_s),
                p.observed_max_per_window,
                p.checks,
                p.rejects
            );
        }
    }

    /// The stores table (when an edge rule counts anywhere but in a Durable Object, or the
    /// traffic is spread over several isolates or locations): how far each rule's counters
    /// can overshoot its limit, beside what the busiest key got on this traffic.
    fn stores_md(&self, o: &mut String) {
        let rows: Vec<_> = self.policies.iter().filter_map(|p| Some((p, p.store.as_ref()?))).collect();
        if !rows.iter().any(|(_, s)| s.store != "durable_object" || s.counters > 1) && !self.spread {
            return;
        }
        o.push_str(
            "\n## Stores\n\n| Rule | Store | Counters | One counter: up to / window | All counters: up to / window | Busiest key / window |\n\
             |---|---|---|---|---|---|\n",
        );
        for (p, s) in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} per {}s | {} | {} |",
                p.name,
                s.store,
                s.described,
                format_g(s.exact_per_window),
                format_g(p.window_s),
                format_g(p.worst_case_per_window),
                p.observed_max_per_window
            );
        }
    }

    /// The client-side pacing table (when a policy is a pacer).
    fn pacing_md(&self, o: &mut String) {
        o.push_str(
            "\n## Client-side pacing\n\n| Client | Paced | Mean wait | Max wait | Pacer |\n|---|---|---|---|---|\n",
        );
        for c in &self.clients {
            let pacer = if c.pacer.is_empty() { "-" } else { &c.pacer };
            let _ = writeln!(
                o,
                "| {} | {} | {}s | {}s | {pacer} |",
                c.client,
                c.paced,
                format_g(c.mean_pace_s),
                format_g(c.max_pace_s)
            );
        }
    }

    /// The blocks table (when a policy is a count-then-block rule).
    fn blocks_md(&self, o: &mut String) {
        let blocking: Vec<_> = self.policies.iter().filter(|p| p.blocks.is_some()).collect();
        if blocking.is_empty() {
            return;
        }
        o.push_str("\n## Blocks\n\n| Policy | Mitigation timeout | Blocks | Clients blocked |\n|---|---|---|---|\n");
        for p in blocking {
            let clients: Vec<String> = p.blocked_clients.iter().map(|(c, n)| format!("{c} ({n})")).collect();
            let _ = writeln!(
                o,
                "| {} | {}s | {} | {} |",
                p.name,
                format_g(p.mitigation_timeout_s.unwrap_or(0.0)),
                p.blocks.unwrap_or(0),
                if clients.is_empty() { "-".into() } else { clients.join(", ") }
            );
        }
    }

    /// The shadow table (when an edge rule does not enforce all its refusals): per such rule,
    /// the refusals it enforced and those it made in shadow (counted, let through).
    fn shadow_md(&self, o: &mut String) {
        let rows: Vec<_> = self.policies.iter().filter_map(|p| Some((p, p.shadow.as_ref()?))).collect();
        if rows.is_empty() {
            return;
        }
        o.push_str(
            "\n## Shadow\n\nRefusals of rules in shadow or partial enforcement: enforced (refused), and in shadow \
             (counted as refused, let through: what enforcing them would add).\n\n\
             | Rule | Enforce | Rejects | Would refuse | Clients it would refuse |\n|---|---|---|---|---|\n",
        );
        for (p, s) in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                p.name,
                enforce_md(s.enforce),
                p.rejects,
                s.would_refuse,
                clients_md(&s.clients)
            );
        }
    }

    /// The findings, one line each.
    fn findings_md(&self, o: &mut String) {
        o.push_str("\n## Findings\n\n");
        if self.findings.is_empty() {
            o.push_str("- none\n");
        }
        for f in &self.findings {
            let _ = writeln!(o, "- {} {} {}", f.severity.name().to_uppercase(), f.code, f.message);
        }
    }
}

/// An edge rule's `enforce` in the shadow table: `shadow`, or `25% of keys`.
pub(super) fn enforce_md(enforce: Enforce) -> String {
    match enforce {
        Enforce::Shadow => "shadow".into(),
        other => format!("{}% of keys", format_g(other.fraction() * 100.0)),
    }
}

/// Clients in a table cell: how many, and the first few by name (`-`: none).
fn clients_md(clients: &[String]) -> String {
    const SHOWN: usize = 8;
    match clients.len() {
        0 => "-".into(),
        n if n <= SHOWN => format!("{n}: {}", clients.join(", ")),
        n => format!("{n}: {}, …", clients[..SHOWN].join(", ")),
    }
}

/// One client's row as a dict (with the pacing columns when a policy is a pacer).
fn client_py(c: &ClientRow, pacers: bool) -> PyValue {
    let mut row = vec![
        ("client", c.client.as_str().into()),
        ("kind", c.kind.clone()),
        ("logical", c.logical.into()),
        ("attempts", c.attempts.into()),
        ("allowed", c.allowed.into()),
        ("rejected", c.rejected.into()),
        ("failed", c.failed.into()),
        ("failed_pct", c.failed_pct.into()),
        ("delayed", c.delayed.into()),
        ("amplification", if c.logical > 0 { c.amplification.into() } else { 0u64.into() }),
        ("max_retry_after_s", c.max_retry_after_s.into()),
        ("top_policy", c.top_policy.as_str().into()),
        ("first_reject_s", c.first_reject_s.into()),
    ];
    if pacers {
        row.extend([
            ("paced", c.paced.into()),
            ("mean_pace_s", c.mean_pace_s.into()),
            ("max_pace_s", c.max_pace_s.into()),
            ("pacer", c.pacer.as_str().into()),
        ]);
    }
    dict(row)
}

/// One policy's row as a dict (with `delayed` for a pacer, the blocks for a count-then-block
/// rule, and `enforce` with the shadow refusals for an edge rule that does not enforce all
/// its refusals).
fn policy_py(p: &PolicyRow) -> PyValue {
    let mut row = vec![
        ("name", p.name.as_str().into()),
        ("algorithm", p.algorithm.into()),
        ("key", p.key.into()),
        ("endpoints", strings(&p.endpoints)),
        ("clients", strings(&p.clients)),
        ("exclude_clients", strings(&p.exclude_clients)),
        ("checks", p.checks.into()),
        ("rejects", p.rejects.into()),
        ("sustained_rps", p.sustained_rps.into()),
        ("window_s", p.window_s.into()),
        ("worst_case_per_window", p.worst_case_per_window.into()),
        ("observed_max_per_window", p.observed_max_per_window.into()),
    ];
    if let Some(delayed) = p.delayed {
        row.push(("delayed", delayed.into()));
    }
    if let Some(s) = &p.store {
        row.extend([("store", s.store.into()), ("counters", (s.counters as u64).into())]);
    }
    if let (Some(timeout), Some(blocks)) = (p.mitigation_timeout_s, p.blocks) {
        let blocked = p
            .blocked_clients
            .iter()
            .map(|(c, n)| PyValue::Dict(vec![("client".into(), c.as_str().into()), ("blocks".into(), (*n).into())]))
            .collect();
        row.extend([
            ("mitigation_timeout_s", timeout.into()),
            ("blocks", blocks.into()),
            ("blocked_clients", PyValue::List(blocked)),
        ]);
    }
    if let Some(s) = &p.shadow {
        let enforce = match s.enforce {
            Enforce::Share { fraction, .. } => fraction.into(),
            other => PyValue::Bool(other == Enforce::All),
        };
        row.extend([
            ("enforce", enforce),
            ("would_refuse", s.would_refuse.into()),
            ("would_refuse_clients", strings(&s.clients)),
        ]);
    }
    dict(row)
}

/// The tenants table (when the edge's rules have `tenants`): each tenant that reached the
/// tenant stage (in the order first seen), its limit and what the stage answered it, then
/// the attempts that named no known tenant.
fn tenants_md(o: &mut String, rows: &[TenantRow]) {
    o.push_str(
        "\n## Tenants\n\n| Tenant | Limit | Checks | Admitted | 401 | 413 | 429 rate | 429 overload |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for t in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            t.tenant.as_deref().unwrap_or("(no known tenant)"),
            tenant_limit_md(t),
            t.checks,
            t.admitted,
            t.unauthorized,
            t.too_large,
            t.rate_limited,
            t.overloaded
        );
    }
    if rows.is_empty() {
        o.push_str("| - | - | 0 | 0 | 0 | 0 | 0 | 0 |\n");
    }
}

/// A tenant's limit in words: `0.5 req/s, burst 2, 1000 B/s (burst 1000 B), body up to
/// 5000 B, 4 in flight, 4000000 B in flight (config)`; `unlimited` without one.
fn tenant_limit_md(t: &TenantRow) -> String {
    if t.tenant.is_none() {
        return "-".into();
    }
    let mut out = match &t.limit {
        Some(l) => format!("{} req/s, burst {}", format_g(l.rate), l.burst),
        None => "unlimited".into(),
    };
    if let Some((bps, burst)) = t.limit.as_ref().and_then(|l| Some((l.bytes_per_second?, l.burst_bytes))) {
        let _ = write!(out, ", {bps} B/s (burst {} B)", burst.unwrap_or(bps));
    }
    if let Some(max) = t.max_body_bytes {
        let _ = write!(out, ", body up to {max} B");
    }
    if let Some(n) = t.limit.as_ref().and_then(|l| l.max_queue) {
        let _ = write!(out, ", {n} in flight");
    }
    if let Some(n) = t.limit.as_ref().and_then(|l| l.max_queue_bytes) {
        let _ = write!(out, ", {n} B in flight");
    }
    if let Some(source) = t.source {
        let _ = write!(out, " ({source})");
    }
    match t.limit.as_ref().map(|l| l.enforce) {
        Some(crate::edge::rules::Enforce::Shadow) => {
            let _ = write!(out, ", in shadow: {} would be refused", t.would_refuse);
        }
        Some(share @ crate::edge::rules::Enforce::Share { .. }) => {
            let _ = write!(
                out,
                ", enforced for a share {} of tenants: {} would be refused",
                share.to_json(),
                t.would_refuse
            );
        }
        _ => {}
    }
    out
}

/// A tenant's limit as a dict, as a rules file writes it.
fn limit_py(l: &TenantLimit) -> PyValue {
    let mut items = vec![("rate", l.rate.into()), ("burst", u64::from(l.burst).into())];
    let optional = [
        ("bytes_per_second", l.bytes_per_second),
        ("burst_bytes", l.burst_bytes),
        ("max_body_bytes", l.max_body_bytes),
        ("max_queue", l.max_queue.map(u64::from)),
        ("max_queue_bytes", l.max_queue_bytes),
    ];
    items.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?.into()))));
    match l.enforce {
        crate::edge::rules::Enforce::All => {}
        crate::edge::rules::Enforce::Shadow => items.push(("enforce", PyValue::Bool(false))),
        crate::edge::rules::Enforce::Share { fraction, .. } => items.push(("enforce", fraction.into())),
    }
    dict(items)
}

/// One tenant's row as a dict.
fn tenant_py(t: &TenantRow) -> PyValue {
    let mut items = vec![
        ("tenant", t.tenant.as_deref().into()),
        ("limit", t.limit.as_ref().map_or(PyValue::None, limit_py)),
        ("source", t.source.into()),
        ("max_body_bytes", t.max_body_bytes.into()),
        ("checks", t.checks.into()),
        ("admitted", t.admitted.into()),
        ("unauthorized", t.unauthorized.into()),
        ("too_large", t.too_large.into()),
        ("rate_limited", t.rate_limited.into()),
        ("overloaded", t.overloaded.into()),
    ];
    // (only for a limit that does not enforce every refusal: other reports are unchanged)
    if t.limit.as_ref().is_some_and(|l| !l.enforce.is_all()) {
        items.push(("would_refuse", t.would_refuse.into()));
    }
    dict(items)
}

fn finding_py(f: &Finding) -> PyValue {
    dict(vec![("severity", f.severity.name().into()), ("code", f.code.into()), ("message", f.message.as_str().into())])
}

fn sample_py(s: &Sample) -> PyValue {
    dict(vec![
        ("t", s.t.into()),
        ("client", s.client.as_str().into()),
        ("endpoint", s.endpoint.as_str().into()),
        ("policy", s.policy.as_str().into()),
        ("retry_after", PyValue::Int(s.retry_after)),
        ("quota", s.quota.clone()),
        ("window_s", s.window_s.into()),
    ])
}

/// A policy's scope for the policies table: its endpoints, only and not clients (empty: all).
fn scope(p: &PolicyRow) -> String {
    let mut scope = Vec::new();
    if !p.endpoints.is_empty() {
        scope.push(p.endpoints.join(", "));
    }
    if !p.clients.is_empty() {
        scope.push(format!("only {}", p.clients.join(", ")));
    }
    if !p.exclude_clients.is_empty() {
        scope.push(format!("not {}", p.exclude_clients.join(", ")));
    }
    scope.join("; ")
}

/// The sample 429's headers. Fails where the reference's `float()` of the quota does.
pub(super) fn sample_md(o: &mut String, s: &Sample) -> Result<(), SimError> {
    let quota = s.quota.to_float().ok_or_else(|| {
        SimError::Crash(format!(
            "policy '{}': float({}) fails for the sample 429's quota: the reference raises here",
            s.policy,
            s.quota.repr()
        ))
    })?;
    let _ = write!(
        o,
        "\n## Sample 429 (first rejection, t={}s, {} {})\n\n```\nHTTP/1.1 429 Too Many Requests\n\
         Retry-After: {}\nRateLimit-Policy: \"{}\";q={};w={}\nRateLimit: \"{}\";r=0;t={}\n\
         Content-Type: application/problem+json\n```\nHeader names follow the IETF httpapi ratelimit-headers \
         draft; older gateways use X-RateLimit-Limit / -Remaining / -Reset instead.\n",
        float_repr(s.t),
        s.client,
        s.endpoint,
        s.retry_after,
        s.policy,
        format_g(quota),
        format_g(s.window_s),
        s.policy,
        s.retry_after
    );
    Ok(())
}
