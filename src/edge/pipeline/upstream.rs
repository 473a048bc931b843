//! The upstream stage: where a budget's slots are counted ([`SlotStore`]: a fleet budget in
//! its Durable Object, falling back to the isolate's count when that cannot be asked), and
//! the answer to a request that found no slot within its `max_wait` ([`busy`]). The egress
//! routes' budgets are taken from the same stores.

use super::reply::Reply;
use crate::core::time::Span;
use crate::edge::headers;
use crate::edge::rules::Upstream;
use crate::edge::scope::BudgetScope;

/// Waiters one upstream budget may queue in an isolate before new arrivals are refused at
/// once (and shed).
pub const MAX_QUEUE: usize = 10_000;

/// The numbers a fleet budget of `max_in_flight` is held to in its Durable Object: a lease
/// machine of one "mirror" (the egress gate's), no spacing, no weight, [`MAX_QUEUE`] waiting.
pub fn fleet_limits(max_in_flight: u32) -> crate::edge::egress::gate::Limits {
    crate::edge::egress::gate::Limits {
        mirrors: 1,
        max_in_flight,
        min_interval: Span::ZERO,
        weight_milli_per_minute: None,
        retry_after_failure: Span::ZERO,
        max_queue: MAX_QUEUE,
    }
}

/// Where a budget's slots (or an egress provider's permits) are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotStore {
    /// The budget's Durable Object: one count for every isolate.
    Fleet,
    /// This isolate's own count.
    Isolate,
}

impl SlotStore {
    /// The store a budget of `scope` is asked first.
    pub const fn first(scope: BudgetScope) -> SlotStore {
        match scope {
            BudgetScope::Fleet => SlotStore::Fleet,
            BudgetScope::Isolate => SlotStore::Isolate,
        }
    }

    /// The store asked when this one could not be (the failure logged as a store failure):
    /// a fleet budget falls back to this isolate's count; the isolate's own has nothing
    /// behind it (and cannot fail).
    pub const fn on_failure(self) -> Option<SlotStore> {
        match self {
            SlotStore::Fleet => Some(SlotStore::Isolate),
            SlotStore::Isolate => None,
        }
    }
}

/// The shed of a request that found no slot of `upstream` within its `max_wait`: `503` with a
/// problem+json body and `Retry-After` (whole seconds, at least 1), never a 500. A request
/// whose `Accept` (`accept`) lists `text/event-stream` (an `EventSource`) gets the same
/// problem as one `event: error` of a `200` event stream instead: an `EventSource` dispatches
/// no events from any other status, only a bare error with nothing in it. Both name the
/// upstream in `Sluicegate-Shed`.
pub fn busy(upstream: &Upstream, accept: Option<&str>) -> Reply {
    let retry = Span::from_secs(upstream.max_wait.as_secs_ceil().max(1));
    let body = headers::upstream_busy(&upstream.id, upstream.max_wait, retry);
    let mut reply = if accept.is_some_and(headers::accepts_event_stream) {
        let mut reply = Reply::new(200, headers::EVENT_STREAM.into(), headers::event_stream_error(&body, retry));
        reply.set("cache-control", "no-store".into());
        reply.set("retry-after", headers::retry_after(retry));
        reply
    } else {
        Reply::problem(503, body, Some(retry))
    };
    reply.set("sluicegate-shed", upstream.id.clone());
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::rules::RuleSet;

    #[test]
    fn a_shed_request_is_a_503_or_an_event_stream_s_error_naming_its_upstream() {
        let rules = RuleSet::from_json(
            r#"{"rules": [], "upstreams": [{"id": "nominatim", "match": {}, "max_in_flight": 1, "max_wait": 0.2}]}"#,
        )
        .unwrap();
        let upstream = &rules.upstreams()[0];
        let plain = busy(upstream, Some("application/json"));
        assert_eq!(
            (plain.status, plain.header("retry-after"), plain.header("sluicegate-shed")),
            (503, Some("1"), Some("nominatim"))
        );
        let stream = busy(upstream, Some("text/event-stream"));
        assert_eq!((stream.status, stream.header("content-type")), (200, Some(headers::EVENT_STREAM)));
        assert!(stream.body.contains("\nevent: error\n"), "{}", stream.body);
    }
}
