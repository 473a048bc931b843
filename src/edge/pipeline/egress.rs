//! The egress routes' decisions, in the order the edge makes them (the pieces are
//! [`crate::edge::egress`]'s: weights, the gate, failover, the cache, permit ids):
//!
//! - a proxied call is opened ([`open_proxy`]: `405` for a method other than GET, HEAD or
//!   POST, `400` for a path or query no mirror may be called with, `413` for a call heavier
//!   than the provider's whole minute), its body read (POST, up to [`MAX_REQUEST_BODY`]),
//!   then planned ([`Proxy::plan`]: whether the cache answers it, the method and headers it
//!   carries);
//! - it is sent by [`Sending`]: a start asked of the provider's budget (its Durable Object for
//!   a fleet budget; when that fails, this isolate's, for the rest of the call), the mirror
//!   called, failed over as [`Failover`] says, until an answer is passed on or the call ends;
//! - a permit is opened ([`open_permit`]) and taken from the same stores; one given back goes
//!   to the store that holds it ([`give_back_to`]);
//! - every refusal is a [`Reply`]: [`shed`] (`503`, `Retry-After` the provider's `max_wait` in
//!   whole seconds, at least 1), [`refused`] (`413` too heavy, else shed), [`unreachable()`]
//!   (`502`), [`failing`] (`503` until the cache's next attempt).
//!
//! The Worker carries each step out (fetches, timers, its Durable Objects, streams); tests
//! answer from a script.

use super::reply::{quoted, Reply};
pub use super::serve::bad_request;
use super::upstream::{SlotStore, MAX_QUEUE};
use crate::core::milli::Milli;
use crate::core::time::{Instant, Span};
use crate::edge::body::Over;
use crate::edge::egress::call::{Attempt, End, Failover, Next, NoStart};
use crate::edge::egress::gate::{Limits, Refused};
use crate::edge::egress::permit::PermitId;
use crate::edge::egress::{self as rules, weigh, CacheRule, PermitAsk, Provider};
use crate::edge::headers;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// The largest request body a proxied call may carry (it is kept to fail over with).
pub const MAX_REQUEST_BODY: u64 = 1024 * 1024;
/// The largest permit request body (`POST …/permit`, `DELETE …/permit/<id>`).
pub const MAX_PERMIT_BODY: u64 = 4096;
/// Headers of a provider's answer that are not passed on, one per line: the body is
/// re-framed by the edge, and the provider's cookies are not the app's.
pub const ANSWER_DROPS: &str =
    "set-cookie\nset-cookie2\nconnection\nkeep-alive\ntransfer-encoding\ncontent-length\ncontent-encoding\n";
/// Headers of the app's call that go on to the provider; every other one stays at the edge
/// (the edge's token above all).
pub const CALL_HEADERS: &[&str] =
    &["accept", "accept-language", "content-type", "user-agent", "if-none-match", "if-modified-since"];
/// Of [`CALL_HEADERS`], those a cached call leaves out: the edge is the cache, and a
/// provider's `304` is no answer to keep.
pub const CONDITIONAL: &[&str] = &["if-none-match", "if-modified-since"];

/// The numbers `p`'s gate enforces in an isolate (and in its Durable Object, for a fleet).
pub fn limits(p: &Provider) -> Limits {
    Limits {
        mirrors: p.mirrors.len(),
        max_in_flight: p.max_in_flight,
        min_interval: p.min_interval,
        weight_milli_per_minute: weigh::budget_milli(p),
        retry_after_failure: p.retry_after_failure,
        max_queue: MAX_QUEUE,
    }
}

// ─── The answers ────────────────────────────────────────────────────────────────────────

/// `503` for a call to `p` that could not start within its `max_wait` (its budget in use, or
/// its queue full): `Retry-After` is `max_wait` in whole seconds, at least 1.
pub fn shed(p: &Provider) -> Reply {
    let retry = Span::from_secs(p.max_wait.as_secs_ceil().max(1));
    let detail = format!(
        "No call to the provider \"{}\" could start within {} s (its budget is in use); retry after {} s.",
        p.id,
        p.max_wait.as_secs_ceil(),
        retry.as_secs_ceil()
    );
    Reply::problem(503, headers::problem(503, "Service Unavailable", &detail, Some(&p.id), Some(retry)), Some(retry))
}

/// The answer to a call to `p` that can never start: `413` for one heavier than the whole
/// minute's budget (split it), else [`shed`].
pub fn refused(p: &Provider, why: Refused) -> Reply {
    match why {
        Refused::TooHeavy { weight, budget } => {
            let detail = format!(
                "The call weighs {} weighted calls, more than the provider \"{}\" allows in a whole minute ({}); split it.",
                Milli(weight),
                p.id,
                budget / 1000
            );
            Reply::problem(413, headers::problem(413, "Content Too Large", &detail, Some(&p.id), None), None)
        }
        Refused::QueueFull | Refused::NoMirror => shed(p),
    }
}

/// `502`: every mirror of `p` tried failed, and no answer of theirs is left to pass on.
pub fn unreachable(p: &Provider) -> Reply {
    let detail = format!("No mirror of the provider \"{}\" could be reached.", p.id);
    Reply::problem(502, headers::problem(502, "Bad Gateway", &detail, Some(&p.id), None), None)
}

/// `503` for a cached call of `p` whose provider failed and left nothing kept: retry at the
/// cache's next attempt (`retry_at`), in whole seconds from `now`, at least 1.
pub fn failing(p: &Provider, retry_at: Instant, now: Instant) -> Reply {
    let retry = Span::from_secs(retry_at.saturating_since(now).as_secs_ceil().max(1));
    let detail = format!(
        "The provider \"{}\" failed and has no answer kept for this call; the next attempt is in {} s.",
        p.id,
        retry.as_secs_ceil()
    );
    Reply::problem(503, headers::problem(503, "Service Unavailable", &detail, Some(&p.id), Some(retry)), Some(retry))
}

/// `413` for a body over its cap.
pub fn too_large(over: Over) -> Reply {
    Reply::problem(413, headers::problem(413, "Content Too Large", &over.to_string(), None, None), None)
}

/// `404` for an egress path that names no provider.
pub fn no_provider() -> Reply {
    Reply::problem(404, headers::problem(404, "Not Found", "No egress provider has this name.", None, None), None)
}

/// `404` for a permit given back that no store holds.
pub fn no_permit() -> Reply {
    let detail = "No such permit is held: it was given back already, its lease ended, or another isolate holds it.";
    Reply::problem(404, headers::problem(404, "Not Found", detail, None, None), None)
}

/// `204`: a permit given back.
pub fn given_back() -> Reply {
    let mut reply = Reply { status: 204, headers: Vec::new(), body: String::new() };
    reply.set("content-type", "text/plain".into());
    reply.set("cache-control", "no-store".into());
    reply
}

/// `200`: the permit `id` of `p` at `mirror`, of `weight` (thousandths), for the app to call
/// that mirror with and give back within `lease_ms`.
pub fn permit_granted(p: &Provider, id: &PermitId, mirror: usize, weight: u64) -> Reply {
    let body = format!(
        "{{\"id\":{},\"provider\":{},\"mirror\":{},\"lease_ms\":{},\"weight\":{}}}",
        quoted(&id.to_string()),
        quoted(&p.id),
        quoted(&p.mirrors[mirror.min(p.mirrors.len() - 1)].url()),
        p.lease.as_millis_ceil(),
        Milli(weight)
    );
    Reply::json(200, body)
}

// ─── A proxied call ─────────────────────────────────────────────────────────────────────

/// A method a proxied call may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`.
    Head,
    /// `POST`.
    Post,
}

impl Method {
    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
        }
    }
}

/// A proxied call, opened: what it weighs, and how much of its body to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    /// Its method.
    pub method: Method,
    /// Its weight, in thousandths.
    pub weight: u64,
}

/// Open a `method` call of `p` to `rest` with `query` (without its `?`): its method, its
/// path and query (a mirror's URL must come of them) and its weight are checked before its
/// body is read.
///
/// # Errors
/// The answer instead: `405` (with `Allow`), `400` naming what is wrong, `413` too heavy.
pub fn open_proxy(p: &Provider, method: &str, rest: &str, query: &str) -> Result<Proxy, Reply> {
    let method = match method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => {
            let body = headers::problem(405, "Method Not Allowed", "A proxied call is GET, HEAD or POST.", None, None);
            let mut reply = Reply::problem(405, body, None);
            reply.set("allow", "GET, HEAD, POST".into());
            return Err(reply);
        }
    };
    if let Err(why) = rules::target(&p.mirrors[0], rest, query) {
        return Err(bad_request(&format!("{why}.")));
    }
    let weight = weigh::call_weight(p, query).map_err(|why| bad_request(&why))?;
    if let Some(why) = weigh::too_heavy(p, weight) {
        return Err(refused(p, why));
    }
    Ok(Proxy { method, weight })
}

/// How a proxied call is made, once its body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The method the mirror is called with (a cached `HEAD` is answered from what a `GET`
    /// keeps, so it calls with `GET`).
    pub method: Method,
    /// The cache that answers it, if one does.
    pub cache: Option<CacheRule>,
}

impl Proxy {
    /// The most body bytes to read before the call (a POST's, kept to fail over with); `None`:
    /// it sends none.
    pub fn body_cap(&self) -> Option<u64> {
        (self.method == Method::Post).then_some(MAX_REQUEST_BODY)
    }

    /// The call's plan, its body (if any) `body_len` bytes: a POST is cached where the
    /// provider's cache says so (`post`), keyed by its body, never one larger than an entry
    /// may be.
    pub fn plan(&self, p: &Provider, body_len: Option<u64>) -> Plan {
        let cache = p.cache.filter(|rule| {
            self.method != Method::Post || (rule.post && body_len.is_some_and(|n| n <= rule.max_entry_bytes))
        });
        let method = if self.method == Method::Head && cache.is_some() { Method::Get } else { self.method };
        Plan { method, cache }
    }
}

impl Plan {
    /// The headers the call carries to `p`'s mirror, as `(lower-case name, value)` in
    /// [`CALL_HEADERS`]' order: the app's (`header` looks one up), without the conditional
    /// ones for a cached call, and the provider's `User-Agent` when it has one.
    pub fn carried(&self, p: &Provider, header: impl Fn(&str) -> Option<String>) -> Vec<(&'static str, String)> {
        CALL_HEADERS
            .iter()
            .filter(|name| self.cache.is_none() || !CONDITIONAL.contains(name))
            .filter_map(|&name| {
                let value = match (name, &p.user_agent) {
                    ("user-agent", Some(agent)) => Some(agent.clone()),
                    _ => header(name),
                };
                value.map(|value| (name, value))
            })
            .collect()
    }
}

/// What a call asks of a provider's budget: its weight, the mirrors it has already tried
/// (a bit each), and by when it must start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// Thousandths of weighted calls.
    pub weight: u64,
    /// Bit `i`: mirror `i` is not to be started at.
    pub avoid: u32,
    /// By when it must start.
    pub deadline: Instant,
}

/// What [`Sending`] needs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStep {
    /// Ask `store` for a start as `want` says: then [`Sending::started`] (or, when the
    /// store could not be asked, [`Sending::store_failed`]).
    Start {
        /// Where the budget is counted.
        store: SlotStore,
        /// What the call asks.
        want: Want,
    },
    /// Call `mirror`, giving up after `timeout` without its status line: then
    /// [`Sending::attempted`].
    Call {
        /// The mirror (an index into the provider's).
        mirror: usize,
        /// How long the attempt may wait for the answer.
        timeout: Span,
    },
    /// The call is over.
    Done(Sent),
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// `mirror`'s answer is passed on (its permit held until its body has gone).
    PassOn {
        /// The mirror that answered.
        mirror: usize,
    },
    /// Every mirror tried failed: pass on the failure kept (`kept`, its mirror), or, with
    /// none, [`unreachable()`].
    Failed {
        /// The mirror whose failure (a 5xx or 429) was kept.
        kept: Option<usize>,
    },
    /// Nothing started in time, or the app left: [`shed`] (nothing counts against `p`).
    Late,
    /// It can never start: [`refused`].
    Refused(Refused),
}

impl Sent {
    /// The edge's own answer for `p`, when no mirror's answer is passed on.
    pub fn reply(&self, p: &Provider) -> Option<Reply> {
        match *self {
            Sent::PassOn { .. } | Sent::Failed { kept: Some(_) } => None,
            Sent::Failed { kept: None } => Some(unreachable(p)),
            Sent::Late => Some(shed(p)),
            Sent::Refused(why) => Some(refused(p, why)),
        }
    }
}

/// What to do with an attempt's answer (and its permit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposal {
    /// Pass it on ([`Sent::PassOn`]).
    PassOn,
    /// The mirror failed: give the permit back marked failed, and log it. `keep`: the answer
    /// replaces the failure kept so far (cancel that one); otherwise cancel this one.
    Failed {
        /// Whether to keep this answer as the last failure.
        keep: bool,
    },
    /// The call is over ([`Sent`] from [`Sending::next`]): cancel the answer, give the permit
    /// back (not failed).
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Starting,
    Calling(usize),
    Done(Sent),
}

/// One proxied call through a provider's budget and mirrors: see the module's documentation.
#[derive(Clone, Debug)]
pub struct Sending {
    failover: Failover,
    store: SlotStore,
    weight: u64,
    deadline: Instant,
    timeout: Span,
    mirrors: usize,
    kept: Option<usize>,
    state: Phase,
}

impl Sending {
    /// A call of `weight` to `p`, which must start by `deadline`.
    pub fn new(p: &Provider, weight: u64, deadline: Instant) -> Sending {
        Sending {
            failover: Failover::default(),
            store: SlotStore::first(p.scope),
            weight,
            deadline,
            timeout: p.timeout,
            mirrors: p.mirrors.len().max(1),
            kept: None,
            state: Phase::Starting,
        }
    }

    /// What is needed next.
    pub fn next(&self) -> SendStep {
        match self.state {
            Phase::Starting => SendStep::Start {
                store: self.store,
                want: Want { weight: self.weight, avoid: self.failover.avoid(), deadline: self.deadline },
            },
            Phase::Calling(mirror) => SendStep::Call { mirror, timeout: self.timeout },
            Phase::Done(sent) => SendStep::Done(sent),
        }
    }

    /// The store asked could not be: the next one is asked (a fleet's Durable Object falls
    /// back to this isolate's count, for the rest of this call).
    pub fn store_failed(&mut self) {
        match self.store.on_failure() {
            Some(store) => self.store = store,
            None => self.started(Err(NoStart::Late)),
        }
    }

    /// What the start came to: the mirror it goes to, or why none did.
    pub fn started(&mut self, got: Result<usize, NoStart>) {
        self.state = match got {
            Ok(mirror) => {
                let mirror = mirror.min(self.mirrors - 1);
                self.failover.started(mirror);
                Phase::Calling(mirror)
            }
            Err(why) => Phase::Done(self.ended(self.failover.no_start(why))),
        };
    }

    /// What the attempt at the mirror came to, and what to do with its answer.
    pub fn attempted(&mut self, attempt: Attempt) -> Disposal {
        let Phase::Calling(mirror) = self.state else { return Disposal::End };
        match self.failover.after(attempt) {
            Next::PassOn => {
                self.state = Phase::Done(Sent::PassOn { mirror });
                Disposal::PassOn
            }
            Next::TryNext { keep } => {
                if keep {
                    self.kept = Some(mirror);
                }
                self.state = Phase::Starting;
                Disposal::Failed { keep }
            }
            Next::End(end) => {
                self.state = Phase::Done(self.ended(end));
                Disposal::End
            }
        }
    }

    fn ended(&self, end: End) -> Sent {
        match end {
            End::Failed => Sent::Failed { kept: self.kept },
            End::Refused(why) => Sent::Refused(why),
            End::Late => Sent::Late,
        }
    }
}

// ─── Permits ────────────────────────────────────────────────────────────────────────────

/// The weight a permit of `p` asks to hold (thousandths), from the body of `POST …/permit`.
///
/// # Errors
/// The answer instead: `400` for a body that is not a permit's ask or a weight that cannot be
/// read, `413` for one heavier than the whole minute's budget.
pub fn open_permit(p: &Provider, body: &str) -> Result<u64, Reply> {
    let asked = PermitAsk::from_json(body).map_err(|why| bad_request(&why))?;
    let weight = weigh::permit_weight(p, &asked).map_err(|why| bad_request(&why))?;
    match weigh::too_heavy(p, weight) {
        Some(why) => Err(refused(p, why)),
        None => Ok(weight),
    }
}

/// Where the permit `id` given back to `p` is held: a fleet permit by the provider's Durable
/// Object, one of this isolate by its gate; `None` when no store of `p` can hold it (a fleet
/// permit given to a provider counted per isolate).
pub fn give_back_to(p: &Provider, id: &PermitId) -> Option<SlotStore> {
    match (id.fleet, SlotStore::first(p.scope)) {
        (true, SlotStore::Fleet) => Some(SlotStore::Fleet),
        (true, SlotStore::Isolate) => None,
        (false, _) => Some(SlotStore::Isolate),
    }
}

/// Whether the cache of a key whose provider failed (`stale`: an answer it may serve
/// instead) and a call that kept a failure (`kept`) answer with the stale one, pass the
/// failure on, or have nothing ([`unreachable()`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Serve the stale answer (`Sluicegate-Cache: stale`); cancel a kept failure.
    Stale,
    /// Pass the kept failure on.
    PassKept,
    /// [`unreachable()`].
    Unreachable,
}

/// See [`AfterFailure`]: a stale answer the cache may serve beats a provider's failure.
pub const fn after_failure(stale: bool, kept: bool) -> AfterFailure {
    match (stale, kept) {
        (true, _) => AfterFailure::Stale,
        (false, true) => AfterFailure::PassKept,
        (false, false) => AfterFailure::Unreachable,
    }
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
