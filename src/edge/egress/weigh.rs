//! How much one call to a provider weighs, and whether it can ever start: the decisions the
//! proxy and the permit routes share, in thousandths of a weighted call (the gate's unit).
//!
//! ```text
//! proxy:   GET /egress/<provider>/…?<query>    ─▶ call_weight(query)
//! permit:  POST …/permit {"weight"?, "query"?} ─▶ permit_weight: the larger of the two
//!                                                      │
//!                    too_heavy(weight) ─▶ Some: 413, never queued; None: ask the gate
//! ```
//!
//! A weighed provider (`"weight": "open-meteo"` in the rules file) prices a call from its
//! query string by the conservative formula, never below what Open-Meteo's server charges;
//! `"open-meteo-server"` prices it by the server's own formula. An unweighed provider's
//! calls weigh 1 each.

use super::gate::Refused;
use super::{PermitAsk, Provider, Weigh};
use crate::core::openmeteo::{weigh_query, WeightMode};
use alloc::format;
use alloc::string::String;

/// One call of an unweighed provider, in thousandths.
pub const ONE_CALL: u64 = 1_000;

/// The formula a [`Weigh`] prices Open-Meteo queries by.
pub const fn mode(how: Weigh) -> WeightMode {
    match how {
        Weigh::OpenMeteo => WeightMode::Conservative,
        Weigh::OpenMeteoServer => WeightMode::Server,
    }
}

/// A provider's `weight_per_minute` in thousandths, as the gate counts it (the rules file
/// gives whole weighted calls); `None` when its calls are not counted by weight.
///
/// # Examples
/// ```
/// use sluicegate::egress::weigh::budget_milli;
/// use sluicegate::rules::RuleSet;
/// let set = RuleSet::from_json(r#"{"rules": [], "egress": {"providers": [{"id": "weather",
///     "mirrors": ["https://api.open-meteo.com/v1/"], "max_in_flight": 4,
///     "weight": "open-meteo", "weight_per_minute": 550}]}}"#).unwrap();
/// assert_eq!(budget_milli(&set.egress().unwrap().providers[0]), Some(550_000));
/// ```
pub fn budget_milli(provider: &Provider) -> Option<u64> {
    provider.weight_per_minute.map(|calls| u64::from(calls) * ONE_CALL)
}

/// The weight of a call to `provider` with the query string `query` (without its `?`), in
/// thousandths: [`ONE_CALL`] for an unweighed provider, else the query's weight by the
/// provider's formula.
///
/// # Errors
/// What a `400`'s detail says when the query cannot be read: "The call's weight cannot be
/// read from its query: …", naming the parameter.
pub fn call_weight(provider: &Provider, query: &str) -> Result<u64, String> {
    match provider.weight {
        None => Ok(ONE_CALL),
        Some(how) => weigh_query(query, mode(how))
            .map_err(|why| format!("The call's weight cannot be read from its query: {why}.")),
    }
}

/// The weight a permit asks to hold, in thousandths. A caller's `weight` never lowers what
/// its `query` weighs:
///
/// | `weight` | `query` | the permit's weight |
/// |---|---|---|
/// | given | given | the larger of the two |
/// | — | given | the query's ([`call_weight`]) |
/// | given | — | the weight |
/// | — | — | [`ONE_CALL`] for an unweighed provider; an error for a weighed one |
///
/// # Errors
/// What a `400`'s detail says: the query's ([`call_weight`]), or, for a weighed provider
/// asked with neither field, one naming both.
pub fn permit_weight(provider: &Provider, ask: &PermitAsk) -> Result<u64, String> {
    let of_query = ask.query.as_deref().map(|query| call_weight(provider, query)).transpose()?;
    match (ask.weight, of_query) {
        (Some(given), Some(read)) => Ok(given.max(read)),
        (None, Some(read)) => Ok(read),
        (Some(given), None) => Ok(given),
        (None, None) if provider.weight.is_some() => {
            Err(format!("The provider \"{}\" is weighed: give \"weight\" or the call's \"query\".", provider.id))
        }
        (None, None) => Ok(ONE_CALL),
    }
}

/// Why a call of `weight` (thousandths) to `provider` can never start: it weighs more than
/// the provider's whole minute ([`budget_milli`]). `None` when it may wait its turn.
pub fn too_heavy(provider: &Provider, weight: u64) -> Option<Refused> {
    budget_milli(provider).filter(|&budget| weight > budget).map(|budget| Refused::TooHeavy { weight, budget })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::rules::RuleSet;

    /// The one provider of a rules file whose provider has `fields` beside its id, mirror and
    /// `max_in_flight`.
    fn provider(fields: &str) -> Provider {
        let json = format!(
            r#"{{"rules":[],"egress":{{"providers":[{{"id":"weather","mirrors":["https://x.example/"],"max_in_flight":4{fields}}}]}}}}"#
        );
        let set = RuleSet::from_json(&json).unwrap();
        set.egress().unwrap().providers[0].clone()
    }

    fn weather() -> Provider {
        provider(r#","weight":"open-meteo","weight_per_minute":550"#)
    }

    /// `count` variable names, `a0,a1,…`.
    fn names(count: usize) -> String {
        (0..count).map(|i| format!("a{i}")).collect::<alloc::vec::Vec<_>>().join(",")
    }

    fn ask(weight: Option<u64>, query: Option<&str>) -> PermitAsk {
        PermitAsk { weight, query: query.map(String::from) }
    }

    #[test]
    fn a_repeated_hourly_is_weighed_whole_by_the_proxy() {
        let query = format!("latitude=1&longitude=2&hourly={}&hourly={}", names(10), names(10));
        assert_eq!(call_weight(&weather(), &query), Ok(2_000));
    }

    #[test]
    fn the_proxy_weighs_conservatively_by_default() {
        // 5 variables over 28 days: 1.0 on the server, 2.0 conservatively.
        let sparse = "latitude=1&daily=a,b,c,d,e&start_date=2026-02-01&end_date=2026-02-28";
        assert_eq!(call_weight(&weather(), sparse), Ok(2_000));
        assert_eq!(mode(Weigh::OpenMeteo), WeightMode::Conservative);
    }

    #[test]
    fn the_server_formula_is_had_by_asking_for_it() {
        let by_server = provider(r#","weight":"open-meteo-server","weight_per_minute":550"#);
        let sparse = "latitude=1&daily=a,b,c,d,e&start_date=2026-02-01&end_date=2026-02-28";
        assert_eq!(call_weight(&by_server, sparse), Ok(1_000));
        assert_eq!(permit_weight(&by_server, &ask(Some(1), Some(sparse))), Ok(1_000));
        assert_eq!(mode(Weigh::OpenMeteoServer), WeightMode::Server);
        let twice = format!("latitude=1&hourly={}&hourly={}", names(10), names(10));
        assert_eq!(call_weight(&by_server, &twice), Ok(2_000), "every &hourly= counts by either formula");
    }

    #[test]
    fn an_unweighed_call_weighs_one_whatever_its_query() {
        assert_eq!(call_weight(&provider(""), "latitude=1&hourly=a&hourly=b&forecast_days=abc"), Ok(ONE_CALL));
    }

    #[test]
    fn an_unreadable_query_is_a_bad_request_naming_the_parameter() {
        assert_eq!(
            call_weight(&weather(), "latitude=1&forecast_days=abc"),
            Err(String::from(
                r#"The call's weight cannot be read from its query: forecast_days must be a whole number from 0 to 16, got "abc"."#
            ))
        );
    }

    #[test]
    fn a_callers_weight_never_lowers_what_its_query_weighs() {
        let heavy = format!("latitude=1&hourly={}&forecast_days=16&past_days=92", names(30));
        let of_query = call_weight(&weather(), &heavy).unwrap();
        // 30 variables over 108 days: 3 × 108/14
        assert_eq!(of_query, 23_143);
        // {"weight": 0.001, "query": heavy}
        let asked = PermitAsk::from_json(&format!(r#"{{"weight": 0.001, "query": "{heavy}"}}"#)).unwrap();
        assert_eq!(permit_weight(&weather(), &asked), Ok(of_query));
        assert_eq!(permit_weight(&weather(), &ask(Some(30_000), Some(&heavy))), Ok(30_000), "a larger weight stands");
        assert_eq!(permit_weight(&weather(), &ask(None, Some(&heavy))), Ok(of_query));
        assert_eq!(permit_weight(&weather(), &ask(Some(1_500), None)), Ok(1_500));
    }

    #[test]
    fn a_permit_for_a_weighed_provider_needs_a_weight_or_a_query() {
        let error = permit_weight(&weather(), &ask(None, None)).unwrap_err();
        assert!(error.contains("\"weight\"") && error.contains("\"query\""), "{error}");
        assert_eq!(permit_weight(&provider(""), &ask(None, None)), Ok(ONE_CALL));
        assert_eq!(permit_weight(&provider(""), &ask(Some(2_500), None)), Ok(2_500));
        assert_eq!(permit_weight(&provider(""), &ask(Some(500), Some("x=1"))), Ok(ONE_CALL), "a call weighs 1 there");
        let unreadable = permit_weight(&weather(), &ask(Some(1_000), Some("longitude=2"))).unwrap_err();
        assert!(unreadable.ends_with("latitude is required."), "{unreadable}");
    }

    #[test]
    fn only_a_call_heavier_than_a_whole_minute_is_too_heavy() {
        assert_eq!(budget_milli(&weather()), Some(550_000));
        assert_eq!(too_heavy(&weather(), 550_000), None);
        assert_eq!(too_heavy(&weather(), 550_001), Some(Refused::TooHeavy { weight: 550_001, budget: 550_000 }));
        assert_eq!(budget_milli(&provider("")), None);
        assert_eq!(too_heavy(&provider(""), u64::MAX), None, "an uncounted provider has no minute to exceed");
        let counted = provider(r#","weight_per_minute":10"#);
        assert_eq!(too_heavy(&counted, 10_001), Some(Refused::TooHeavy { weight: 10_001, budget: 10_000 }));
    }
}
