//! The checks made before a request's body is read (`pre_read` in the rules file): per
//! client address, per isolate, per source's body bytes. They protect the isolate, so they
//! are counted in it ([`super::Isolate`]), never in a store: no question, only a verdict.

use super::reply::Reply;
use super::tenant::TenantRefusal;
use super::Isolate;
use crate::core::limit::{Decision, Gcra, Limiter};
use crate::core::time::{Instant, Span};
use crate::edge::admission::{ByteBucket, IpTable, LengthError};
use crate::edge::headers;
use crate::edge::identity::{ClientIp, Identity};
use crate::edge::rules::{PreRead, RuleSet};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use core::net::Ipv4Addr;
use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// Sources named by host (a request in no named source) counted at once; past this, full
/// buckets are swept, then the rest share one bucket.
pub const MAX_HOST_SOURCES: usize = 10_000;
/// The source that requests share when the host table is full of busy hosts.
const OVERFLOW_SOURCE: &str = "\u{1f}other-hosts";

/// Which check refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Its client address's.
    Ip,
    /// The isolate's.
    Node,
    /// Its source's body bytes.
    Source,
}

impl Check {
    /// The name in `Sluicegate-Scope` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Check::Ip => "ip",
            Check::Node => "node",
            Check::Source => "source",
        }
    }

    /// The answer to a request this check refused, to wait `wait`: `429` naming the check in
    /// `Sluicegate-Scope`, `Retry-After` in whole seconds (at least 1).
    pub fn reply(self, wait: Span) -> Reply {
        let detail = match self {
            Check::Ip => "Too many requests from this address.",
            Check::Node => "This edge is receiving too many requests.",
            Check::Source => "Too many body bytes for this endpoint.",
        };
        let wait = Span::from_secs(wait.as_secs_ceil().max(1));
        let body = headers::problem(429, "Too Many Requests", detail, None, Some(wait));
        let mut reply = Reply::problem(429, body, Some(wait));
        reply.set("sluicegate-scope", self.name().into());
        reply
    }
}

/// The isolate's counters for the checks.
pub struct PreReadState {
    /// The checks these counters belong to (other checks start them afresh).
    pre: PreRead,
    ip: Option<IpTable>,
    node: Option<Gcra>,
    sources: HashMap<String, ByteBucket, FixedState>,
}

impl Isolate {
    fn pre_read(&mut self, rules: &RuleSet) -> &mut PreReadState {
        let pre = rules.pre_read();
        if self.pre_read.as_ref().is_none_or(|s| s.pre != *pre) {
            self.pre_read = Some(PreReadState {
                pre: pre.clone(),
                ip: pre.per_ip.map(|quota| IpTable::new(quota, self.salt.0 ^ self.salt.1)),
                node: pre.node,
                sources: HashMap::with_hasher(FixedState::with_seed(self.salt.1)),
            });
        }
        self.pre_read.as_mut().expect("just set")
    }

    /// Check a request before its body is read: its address (requests without one share one
    /// bucket rather than go uncounted), then the isolate, then its source's declared body
    /// bytes (`declared`: `Content-Length`). The first refusal answers, with how long to
    /// wait; a request refused per address charges nothing further.
    ///
    /// # Errors
    /// The check that refused it, and the wait.
    pub fn check_pre_read(
        &mut self,
        rules: &RuleSet,
        identity: Option<Identity>,
        source: &str,
        declared: Option<u64>,
        now: Instant,
    ) -> Result<(), (Check, Span)> {
        if rules.pre_read().is_empty() {
            return Ok(());
        }
        let state = self.pre_read(rules);
        if let Some(table) = &mut state.ip {
            let ip = identity.map_or(ClientIp::V4(Ipv4Addr::UNSPECIFIED), |id| id.ip);
            refused(table.check(ip, now), Check::Ip)?;
        }
        if let Some(node) = &mut state.node {
            refused(node.check(now, 1).unwrap_or(Decision::Deny { retry_after: Span::ZERO }), Check::Node)?;
        }
        match (declared, state.pre.source_bytes_per_second) {
            (Some(bytes), Some(rate)) if bytes > 0 => {
                refused(source_bucket(state, source, rate, now).check(bytes, now), Check::Source)
            }
            _ => Ok(()),
        }
    }

    /// Whether `source` may bring `bytes` more of a body as it streams (always, when its
    /// bytes are not counted).
    pub fn source_admits(&mut self, rules: &RuleSet, source: &str, bytes: u64, now: Instant) -> bool {
        let Some(rate) = rules.pre_read().source_bytes_per_second else { return true };
        let state = self.pre_read(rules);
        source_bucket(state, source, rate, now).check(bytes, now).is_allowed()
    }
}

fn refused(decision: Decision, scope: Check) -> Result<(), (Check, Span)> {
    match decision {
        Decision::Allow { .. } => Ok(()),
        Decision::Deny { retry_after } => Err((scope, retry_after)),
    }
}

/// The byte bucket of `source`: one second's worth back to back.
fn source_bucket<'s>(state: &'s mut PreReadState, source: &str, rate: u64, now: Instant) -> &'s mut ByteBucket {
    let sources = &mut state.sources;
    let mut key = source;
    if !sources.contains_key(key) && sources.len() >= MAX_HOST_SOURCES {
        sources.retain(|_, bucket| !bucket.is_full(now));
        if sources.len() >= MAX_HOST_SOURCES {
            key = OVERFLOW_SOURCE;
        }
    }
    sources.entry(key.to_owned()).or_insert_with(|| ByteBucket::new(rate, rate).expect("a validated rate"))
}

/// How long an upload cut for its source's bytes is told to wait.
pub const SOURCE_CUT_WAIT: Span = Span::from_secs(1);

/// Why an upload was cut as it streamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its source went over its body bytes per second.
    Source,
    /// It contradicted its `Content-Length`.
    Length(LengthError),
    /// Its tenant's cap, byte budget or share in flight refused it.
    Tenant(TenantRefusal),
}

impl Cut {
    /// The answer, whatever the origin said meanwhile: `429` for its source's bytes (retry
    /// after [`SOURCE_CUT_WAIT`], `Sluicegate-Scope: source`), `400` for a body that contradicted its
    /// `Content-Length`, and for its tenant what a body that declared its length gets
    /// ([`TenantRefusal::reply`]: `413` past the biggest body, `429` past its bytes or its
    /// share in flight).
    pub fn reply(&self) -> Reply {
        match self {
            Cut::Source => Check::Source.reply(SOURCE_CUT_WAIT),
            Cut::Length(error) => super::serve::bad_request(&format!("The body was cut: {error}.")),
            Cut::Tenant(refusal) => refusal.reply(),
        }
    }
}

/// One chunk of a body of no declared length, charged in the edge's order: its tenant's
/// biggest body and share in flight (`tenant_takes`: `None` without a tenant), then its
/// source's bytes (`source_admits`), then its tenant's byte bucket. `Ok(true)`: pass it on
/// once the tenant's bucket is charged (it has a tenant); `Ok(false)`: pass it on.
///
/// # Errors
/// Why the body is cut; what comes after the check that cut it is not charged.
pub fn check_chunk(
    tenant_takes: impl FnOnce() -> Option<Result<(), TenantRefusal>>,
    source_admits: impl FnOnce() -> bool,
) -> Result<bool, Cut> {
    let tenant = tenant_takes().transpose().map_err(Cut::Tenant)?.is_some();
    if !source_admits() {
        return Err(Cut::Source);
    }
    Ok(tenant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::identity::{client_identity, Sources};

    fn id(ip: &str) -> Option<Identity> {
        client_identity(&Sources { cf_connecting_ip: Some(ip), x_forwarded_for: None, peer: None })
    }

    #[test]
    fn the_address_then_the_isolate_then_the_source_refuse_in_that_order() {
        let rules = RuleSet::from_json(
            r#"{"rules": [], "pre_read": {"per_ip": {"rate": 1, "burst": 2}, "node": {"rate": 0.001, "burst": 2},
                "source_bytes_per_second": 1000}}"#,
        )
        .unwrap();
        let mut isolate = Isolate::default();
        let t = Instant::from_secs(5);
        let mut check = |ip: &str, bytes| isolate.check_pre_read(&rules, id(ip), "s", bytes, t);
        assert_eq!(check("198.51.100.1", Some(600)), Ok(()));
        assert_eq!(check("198.51.100.1", Some(600)).unwrap_err().0, Check::Source, "1,200 bytes of 1,000");
        let third = check("198.51.100.1", None);
        assert_eq!(third.map_err(|e| e.0), Err(Check::Ip), "the address's burst of 2 is spent");
        assert_eq!(
            check("198.51.100.2", None).unwrap_err().0,
            Check::Node,
            "the isolate's burst of 2 is spent (the refusal per address charged it nothing)"
        );
        let reply = Check::Node.reply(Span::from_millis(10));
        assert_eq!(
            (reply.status, reply.header("retry-after"), reply.header("sluicegate-scope")),
            (429, Some("1"), Some("node"))
        );
    }

    #[test]
    fn a_chunk_is_charged_tenant_first_then_source_and_what_cut_it_is_answered() {
        use core::cell::Cell;
        let asked = Cell::new(0);
        let source = |admits: bool| {
            let asked = &asked;
            move || {
                asked.set(asked.get() + 1);
                admits
            }
        };
        assert_eq!(check_chunk(|| None, source(true)), Ok(false), "no tenant: nothing more to charge");
        assert_eq!(check_chunk(|| Some(Ok(())), source(true)), Ok(true), "then the tenant's byte bucket");
        assert_eq!(check_chunk(|| Some(Ok(())), source(false)), Err(Cut::Source));
        let over = TenantRefusal::TooLarge { max: 10 };
        asked.set(0);
        assert_eq!(check_chunk(|| Some(Err(over.clone())), source(true)), Err(Cut::Tenant(over.clone())));
        assert_eq!(asked.get(), 0, "the source is not charged for a chunk the tenant refused");
        let source_cut = Cut::Source.reply();
        assert_eq!(
            (source_cut.status, source_cut.header("retry-after"), source_cut.header("sluicegate-scope")),
            (429, Some("1"), Some("source"))
        );
        let length = Cut::Length(LengthError::Longer { declared: 5 }).reply();
        assert_eq!(length.status, 400);
        assert!(length.body.contains("cut"), "{}", length.body);
        assert_eq!(Cut::Tenant(over.clone()).reply(), over.reply());
    }
}
