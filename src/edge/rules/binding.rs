//! What a rules file keeps in the Worker's Durable Object binding, and what a Worker that
//! was deployed without that binding does: refuse to start, naming the binding and the
//! `wrangler.toml` lines to add — a missing binding is a deploy mistake, not a store that
//! failed for a moment — unless every user of it is a rule that says
//! `"on_store_failure": "open"` in the file, which then starts, said once.

use super::{RuleSet, Store};
use crate::edge::scope::BudgetScope;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// What a Worker without the binding does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WithoutBinding {
    /// Nothing in the rules counts in a Durable Object.
    Unused,
    /// Only rules that fail open by choice count there: start, and log this once.
    Warn(String),
    /// Refuse to start with this message.
    Refuse(String),
}

impl RuleSet {
    /// What a Worker whose `env` has no Durable Object binding called `binding` does with
    /// these rules (see [`WithoutBinding`]).
    ///
    /// # Examples
    /// ```
    /// use sluicegate::rules::{RuleSet, WithoutBinding};
    /// let rules = RuleSet::from_json(r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}},
    ///     "characteristics": ["ip.src"], "period": 10, "requests_per_period": 20}]}"#).unwrap();
    /// let WithoutBinding::Refuse(why) = rules.without_binding("RATE_LIMITER") else { panic!() };
    /// assert!(why.contains("[[durable_objects.bindings]]"));
    /// ```
    pub fn without_binding(&self, binding: &str) -> WithoutBinding {
        let mut needs: Vec<String> = Vec::new();
        let mut open: Vec<&str> = Vec::new();
        for rule in self.rules.iter().filter(|r| r.store == Store::DurableObject) {
            if self.open_by_choice.contains(&rule.id) {
                open.push(&rule.id);
            } else {
                needs.push(format!("rule \"{}\"", rule.id));
            }
        }
        match self.tenants.as_ref().map(|t| t.scope) {
            None => {}
            // counted in the isolate, but their runtime overrides are kept in an object
            Some(crate::edge::tenants::TenantScope::Isolate) => needs.push("the tenants' runtime overrides".into()),
            Some(_) => needs.push("the tenants' quotas".into()),
        }
        for upstream in self.upstreams.iter().filter(|u| u.scope == BudgetScope::Fleet) {
            needs.push(format!("the fleet budget \"{}\"", upstream.id));
        }
        let fleet_providers = self.egress.iter().flat_map(|e| &e.providers).filter(|p| p.scope == BudgetScope::Fleet);
        for provider in fleet_providers {
            needs.push(format!("the fleet egress provider \"{}\"", provider.id));
        }
        if !needs.is_empty() {
            return WithoutBinding::Refuse(format!(
                "env has no Durable Object binding \"{binding}\", which these count in: {}. Add it to \
                 wrangler.toml: [[durable_objects.bindings]] name = \"{binding}\" class_name = \"RateLimiter\", \
                 and [[migrations]] tag = \"v1\" new_sqlite_classes = [\"RateLimiter\"] (and export RateLimiter \
                 from the Worker's main module)",
                join(&needs)
            ));
        }
        if open.is_empty() {
            return WithoutBinding::Unused;
        }
        let ids: Vec<String> = open.iter().map(|id| format!("\"{id}\"")).collect();
        WithoutBinding::Warn(format!(
            "env has no \"{binding}\" Durable Object binding: rule{} {} say on_store_failure \"open\", so \
             {} admit every request uncounted until the binding is added to wrangler.toml",
            if ids.len() == 1 { "" } else { "s" },
            join(&ids),
            if ids.len() == 1 { "it" } else { "they" },
        ))
    }
}

impl RuleSet {
    /// The Workers Rate Limiting bindings the rules count on, each with its limit and period
    /// (its wrangler.toml `simple`) and the rules on it, in file order.
    pub fn rate_limit_bindings(&self) -> Vec<(&str, crate::core::limit::Quota, Vec<&str>)> {
        let mut out: Vec<(&str, crate::core::limit::Quota, Vec<&str>)> = Vec::new();
        for rule in &self.rules {
            let Store::Cloudflare { binding } = &rule.store else { continue };
            match out.iter_mut().find(|(b, ..)| b == binding) {
                Some((.., rules)) => rules.push(&rule.id),
                None => out.push((binding, rule.quota(), alloc::vec![rule.id.as_str()])),
            }
        }
        out
    }

    /// Why a Worker cannot start when a binding the rules count on is not a Workers Rate
    /// Limiting binding of its `env` (`is_binding` says whether a name is one): the first
    /// such binding, the rules on it, and the wrangler.toml lines to add. `None` when every
    /// one is there.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::rules::RuleSet;
    /// let rules = RuleSet::from_json(r#"{"rules": [{"id": "search", "match": {}, "characteristics": ["ip.src"],
    ///     "store": "cloudflare", "binding": "SEARCH_LIMITER", "period": 10, "requests_per_period": 20}]}"#).unwrap();
    /// let why = rules.missing_rate_limit_binding(|_| false).unwrap();
    /// assert!(why.contains("[[ratelimits]] name = \"SEARCH_LIMITER\""));
    /// assert_eq!(rules.missing_rate_limit_binding(|name| name == "SEARCH_LIMITER"), None);
    /// ```
    pub fn missing_rate_limit_binding(&self, is_binding: impl Fn(&str) -> bool) -> Option<String> {
        let (binding, quota, rules) = self.rate_limit_bindings().into_iter().find(|(b, ..)| !is_binding(b))?;
        let ids: Vec<String> = rules.iter().map(|id| format!("\"{id}\"")).collect();
        Some(format!(
            "env has no Workers Rate Limiting binding \"{binding}\", which rule{} {} count{} on. Add it to \
             wrangler.toml: {}",
            if ids.len() == 1 { "" } else { "s" },
            join(&ids),
            if ids.len() == 1 { "s" } else { "" },
            ratelimits_toml(binding, quota)
        ))
    }
}

/// The wrangler.toml lines of a Workers Rate Limiting binding of `quota` (one line each):
/// the namespace id is the account's to choose.
pub fn ratelimits_toml(binding: &str, quota: crate::core::limit::Quota) -> String {
    format!(
        "[[ratelimits]] name = \"{binding}\" namespace_id = \"<a number unique in your account>\" \
         simple = {{ limit = {}, period = {} }}",
        quota.limit,
        quota.window.as_secs_ceil()
    )
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> RuleSet {
        RuleSet::from_json(text).unwrap()
    }

    const API: &str = r#"{"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10, "requests_per_period": 20"#;

    #[test]
    fn a_counted_rule_without_the_binding_refuses_to_start_naming_what_to_add() {
        let set = rules(&format!(r#"{{"rules": [{API}}}]}}"#));
        let WithoutBinding::Refuse(why) = set.without_binding("COUNTS") else { panic!("refused") };
        assert!(
            why.starts_with("env has no Durable Object binding \"COUNTS\", which these count in: rule \"api\"."),
            "{why}"
        );
        assert!(why.contains("name = \"COUNTS\" class_name = \"RateLimiter\""), "{why}");
        assert!(why.contains("new_sqlite_classes = [\"RateLimiter\"]"), "{why}");
    }

    #[test]
    fn rules_that_fail_open_by_choice_start_with_one_warning() {
        let set = rules(&format!(r#"{{"rules": [{API}, "on_store_failure": "open"}}]}}"#));
        let WithoutBinding::Warn(why) = set.without_binding("RATE_LIMITER") else { panic!("warned") };
        assert!(why.contains("rule \"api\" say on_store_failure \"open\""), "{why}");
        // Open by default (counted by ip.src) is not a choice the file made.
        let by_default = rules(&format!(r#"{{"rules": [{API}}}]}}"#));
        assert!(matches!(by_default.without_binding("RATE_LIMITER"), WithoutBinding::Refuse(_)));
    }

    #[test]
    fn every_user_of_the_binding_is_named_and_a_file_with_none_needs_none() {
        let set = rules(&format!(
            r#"{{"rules": [{API}, "on_store_failure": "open"}}, {API2}}}],
                "upstreams": [{{"id": "db", "match": {{"path": {{"starts_with": "/"}}}}, "max_in_flight": 2, "scope": "fleet"}}]}}"#,
            API2 = API.replace("\"api\"", "\"second\"")
        ));
        let WithoutBinding::Refuse(why) = set.without_binding("RATE_LIMITER") else { panic!("refused") };
        assert!(why.contains("count in: rule \"second\" and the fleet budget \"db\"."), "{why}");
        assert_eq!(rules(r#"{"rules": []}"#).without_binding("RATE_LIMITER"), WithoutBinding::Unused);
    }
}
