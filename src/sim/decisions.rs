//! Every decided attempt of a replay, in time order: what `sluicegate replay` compares with
//! the real edge's answers, request by request.

use super::{simulate_trace, Config, Event, Observer, SimError, TenantRefused};
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use std::collections::HashMap;

/// One decided attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    /// When it was sent, in the trace's seconds.
    pub t: f64,
    /// The client's name.
    pub client: String,
    /// The endpoint.
    pub endpoint: String,
    /// Whether every policy admitted it.
    pub admitted: bool,
    /// When the edge's tenant stage refused it: how (its status and name).
    pub tenant_refusal: Option<TenantRefused>,
    /// When the edge's checks before the body is read refused it: which (`ip`, `node`,
    /// `source`).
    pub pre_read: Option<&'static str>,
    /// The edge rules that refused it in shadow (their refusal not enforced for its key: it
    /// went on), by id in the rules' order: what the edge names in `Sluicegate-Shadow`.
    pub shadow: Vec<String>,
}

/// The edge's decision on one row of a trace, and the rules that refused it in shadow
/// ([`edge_replay`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeRow {
    /// What the edge answers it.
    pub decision: EdgeDecision,
    /// The rules that refused it in shadow, by id in the rules' order (the rule ids its
    /// answer's `Sluicegate-Shadow` names); empty when none did.
    pub shadow: Vec<String>,
}

/// What the edge answers one request, as the simulator decides it ([`edge_decisions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeDecision {
    /// Its rules (and its tenant, if any) admitted it: it goes on to the origin.
    Admitted,
    /// A rule refused it: the answer names the rule in `Sluicegate-Rule`.
    Rule,
    /// The tenant stage refused it: 401 (no known tenant), 413 (a body over the tenant's
    /// cap) or 429 with `Sluicegate-Scope: tenant` (`tenant_rate_limited`, `tenant_overload`).
    Tenant(TenantRefused),
    /// A check before its body was read refused it: 429 with `Sluicegate-Scope` naming the
    /// check (`ip`, `node` or `source`).
    PreRead(&'static str),
}

impl EdgeDecision {
    /// Whether it goes on to the origin.
    pub fn admitted(self) -> bool {
        self == EdgeDecision::Admitted
    }

    /// As one number: 1 admitted, 0 refused by a rule; refused by the tenant stage, 2 with
    /// 401 (`unknown`), 3 with 413 (`too_large`), 4 with 429 `tenant_rate_limited`, 5 with
    /// 429 `tenant_overload`; 6 refused by a check before its body was read.
    pub fn code(self) -> u8 {
        match self {
            EdgeDecision::Admitted => 1,
            EdgeDecision::Rule => 0,
            EdgeDecision::Tenant(TenantRefused { status: 401, .. }) => 2,
            EdgeDecision::Tenant(TenantRefused { status: 413, .. }) => 3,
            EdgeDecision::Tenant(TenantRefused { name: "tenant_overload", .. }) => 5,
            EdgeDecision::Tenant(_) => 4,
            EdgeDecision::PreRead(_) => 6,
        }
    }
}

/// Every decided attempt, its shadow refusals named by their policies.
struct Record<'c> {
    decided: Vec<Decided>,
    policies: &'c [super::Policy],
}

impl<'c> Record<'c> {
    fn new(cfg: &'c Config) -> Self {
        Record { decided: Vec::new(), policies: &cfg.policies }
    }
}

impl Observer for Record<'_> {
    fn attempt(&mut self, event: &Event<'_>) {
        self.decided.push(Decided {
            t: event.t,
            client: event.name.into(),
            endpoint: event.endpoint.into(),
            admitted: event.admitted,
            tenant_refusal: event.tenant_refusal,
            pre_read: event.pre_read,
            shadow: event
                .shadow
                .iter()
                .map(|&j| self.policies[j as usize].name.clone())
                .chain(event.tenant_shadow.map(|t| format!("tenant:{t}")))
                .collect(),
        });
    }

    fn restart(&mut self) {
        self.decided.clear();
    }
}

/// Replays the CSV `trace` (named `label` in errors) through the policies of `config_json`
/// and returns every decided attempt, in the replay's order.
///
/// # Errors
/// What [`super::run`] refuses.
pub fn decisions(config_json: &str, label: &str, trace: &str) -> Result<Vec<Decided>, SimError> {
    let cfg = Config::from_json(config_json)?;
    let mut record = Record::new(&cfg);
    simulate_trace(&cfg, label, || Ok(trace.as_bytes()), Some(&mut record))?;
    Ok(record.decided)
}

/// The edge's decision on each row of the CSV `trace` (named `label` in errors), in the
/// trace's order: whether the rules of `rules_json` (a rules file, `{"rules": [...]}`)
/// admit it, and then its tenant when the file has `tenants` (rules first: a request they
/// refuse spends none of its tenant's quota), each row through the edge's own pipeline
/// ([`super::edge`]); a refusal says which stage answered, as the edge's answer does. The
/// trace names what the edge reads: `t`, `ip.src` (or `client`), and optionally
/// `cf.colo.id`, `method`, `endpoint` and `header:<name>` columns (`header:content-length`
/// a body's declared length). What `sluicegate replay` compares with the edge.
///
/// # Errors
/// Rules that do not validate, or a trace the simulator cannot read.
pub fn edge_decisions(rules_json: &str, label: &str, trace: &str) -> Result<Vec<EdgeDecision>, SimError> {
    Ok(edge_replay(rules_json, label, trace)?.into_iter().map(|row| row.decision).collect())
}

/// [`edge_decisions`], each row with the rules that refused it in shadow (`"enforce":
/// false`, or a share of counting keys that leaves its key out): what the edge names in its
/// answer's `Sluicegate-Shadow`.
///
/// # Errors
/// As [`edge_decisions`].
pub fn edge_replay(rules_json: &str, label: &str, trace: &str) -> Result<Vec<EdgeRow>, SimError> {
    let rules: serde_json::Value =
        serde_json::from_str(rules_json).map_err(|e| SimError::Input(format!("rules: invalid JSON: {e}")))?;
    let mut config = serde_json::Map::new();
    config.insert("service".into(), "replay".into());
    config.insert("edge_rules".into(), rules);
    // The replayed edge is one workerd: every colo's requests in its one isolate.
    config.insert("edge_spread".into(), serde_json::json!({"colos": "together"}));
    let cfg = Config::from_value(&serde_json::Value::Object(config))?;
    let mut record = Record::new(&cfg);
    simulate_trace(&cfg, label, || Ok(trace.as_bytes()), Some(&mut record))?;
    // Each decided attempt back to its row: rows of one instant, client and endpoint are
    // alike to the rules, so they take their decisions in order.
    let mut decided: HashMap<(u64, String, String), VecDeque<EdgeRow>> = HashMap::new();
    for d in record.decided.drain(..) {
        let decision = match (d.admitted, d.tenant_refusal, d.pre_read) {
            (true, _, _) => EdgeDecision::Admitted,
            (false, _, Some(check)) => EdgeDecision::PreRead(check),
            (false, Some(refused), None) => EdgeDecision::Tenant(refused),
            (false, None, None) => EdgeDecision::Rule,
        };
        let row = EdgeRow { decision, shadow: d.shadow };
        decided.entry((d.t.to_bits(), d.client, d.endpoint)).or_default().push_back(row);
    }
    let (mut clients, mut endpoints) = (super::Names::default(), super::Names::default());
    let mut reader = super::TraceReader::new(label, trace.as_bytes());
    let mut out = Vec::new();
    while let Some(r) = reader.next_request(&mut clients, &mut endpoints)? {
        let key = (r.t.to_bits(), clients.name(r.client).to_owned(), endpoints.name(r.endpoint).to_owned());
        let admitted = decided.get_mut(&key).and_then(VecDeque::pop_front);
        out.push(admitted.ok_or_else(|| SimError::Crash(format!("{label}: a row the replay did not decide")))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn every_attempt_is_reported_in_order_with_its_decision() {
        let config = r#"{"edge_rules": {"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}},
            "characteristics": ["ip.src"], "period": 10, "requests_per_period": 20, "mitigation_timeout": 10}]}}"#;
        let mut trace = String::from("t,client,endpoint\n");
        for i in 0..25 {
            trace += &format!("{}.{:02},a,/api/x\n", i / 100, i % 100);
        }
        trace += "0.5,b,/api/x\n0.5,a,/static\n10.1,a,/api/x\n10.3,a,/api/x\n";
        let decided = decisions(config, "trace", &trace).unwrap();
        assert_eq!(decided.len(), 29);
        let admitted = |client: &str, endpoint: &str| {
            decided.iter().filter(|d| d.client == client && d.endpoint == endpoint && d.admitted).count()
        };
        assert_eq!(admitted("a", "/api/x"), 21, "20 per 10 s, then blocked from the 21st (0.2 s) to 10.2 s");
        let late: Vec<bool> = decided.iter().filter(|d| d.t > 10.0).map(|d| d.admitted).collect();
        assert_eq!(late, [false, true], "10.1 s is inside the block, 10.3 s after it");
        assert_eq!(admitted("b", "/api/x"), 1, "another client counts apart");
        assert_eq!(admitted("a", "/static"), 1, "a path no rule matches");
        assert!(decided.windows(2).all(|w| w[0].t <= w[1].t), "in time order");
        assert!(decisions(config, "trace", "t,client\nx,a\n").is_err());
    }

    #[test]
    fn a_replay_counts_every_colo_in_the_one_isolate_the_replayed_edge_has() {
        // An isolate rule of 3 per 10 s on one address: 2 from AMS then 2 from FRA. One workerd
        // serves both colos from one isolate, so the fourth is refused, as the edge refuses it.
        let rules = r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}},
            "characteristics": ["ip.src"], "period": 10, "requests_per_period": 3, "store": "isolate"}]}"#;
        let trace = "t,ip.src,cf.colo.id,endpoint\n1,198.51.100.7,AMS,/api/x\n2,198.51.100.7,AMS,/api/x\n\
                     3,198.51.100.7,FRA,/api/x\n4,198.51.100.7,FRA,/api/x\n";
        use EdgeDecision::{Admitted, Rule};
        assert_eq!(edge_decisions(rules, "trace", trace).unwrap(), [Admitted, Admitted, Admitted, Rule]);
    }

    #[test]
    fn edge_rules_decide_each_row_as_the_edge_does_in_the_trace_s_order() {
        // Rules that count by different characteristics, several colos, a POST route and a
        // header-counted rule with its own status.
        let rules = r#"{"rules": [
          {"id": "api", "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src", "cf.colo.id"],
           "period": 10, "requests_per_period": 3, "mitigation_timeout": 10},
          {"id": "geocode", "match": {"path": {"equals": "/api/geocode"}, "methods": ["GET"]},
           "characteristics": ["ip.src"], "algorithm": "token_bucket", "rate": 0.5, "burst": 2},
          {"id": "orders", "match": {"path": {"equals": "/api/orders"}, "methods": ["POST"]},
           "characteristics": ["http.request.headers[\"x-api-key\"]"], "period": 60, "requests_per_period": 1,
           "response": {"status_code": 403}}]}"#;
        let trace = "t,ip.src,cf.colo.id,method,endpoint,header:X-Api-Key\n\
            0.6,198.51.100.1,LHR,GET,/api/x,\n\
            0.0,198.51.100.1,AMS,GET,/api/geocode,\n\
            0.1,198.51.100.1,LHR,GET,/api/geocode,\n\
            0.2,198.51.100.1,AMS,GET,/api/geocode,\n\
            0.3,198.51.100.1,AMS,POST,/api/orders,k1\n\
            0.4,198.51.100.2,AMS,POST,/api/orders,k1\n\
            0.5,198.51.100.1,AMS,get,/api/x,\n";
        let decided: Vec<bool> =
            edge_decisions(rules, "trace", trace).unwrap().into_iter().map(|d| d.admitted()).collect();
        assert_eq!(
            decided,
            [
                true,  // 0.6: the address's second /api/ request at LHR (its count there is apart)
                true,  // 0.0
                true,  // 0.1: another colo, the same address's bucket (its second token)
                false, // 0.2: the bucket is empty; the /api/ rule counted it (2 at AMS)
                true,  // 0.3: the /api/ rule's third at AMS; the key's one order
                false, // 0.4: another address, the same key: refused by its rule (403)
                false, // 0.5: the /api/ rule's fourth at AMS in 10 s: refused, and blocked
            ]
        );
        let bad = edge_decisions(r#"{"rules": [{"id": "x"}]}"#, "trace", trace).unwrap_err();
        assert!(bad.to_string().starts_with("edge_rules: "), "{bad}");
    }

    #[test]
    fn the_capabilities_answer_is_the_edge_s_own_and_counted_by_no_rule() {
        let rules = r#"{"rules": [{"id": "api", "match": {"path": {"starts_with": "/api/"}},
            "characteristics": ["ip.src"], "period": 10, "requests_per_period": 2, "mitigation_timeout": 10}]}"#;
        let mut trace = String::from("t,ip.src,method,endpoint\n");
        for i in 0..5 {
            trace += &format!("0.{i},198.51.100.7,GET,/api/capabilities\n");
        }
        trace += "1.0,198.51.100.7,HEAD,/API/Capabilities/\n1.1,198.51.100.7,POST,/api/capabilities\n";
        trace += "1.2,198.51.100.7,GET,/api/x\n1.3,198.51.100.7,GET,/api/x\n";
        let decided = edge_decisions(rules, "trace", &trace).unwrap();
        let admitted: Vec<bool> = decided.iter().map(|d| d.admitted()).collect();
        assert_eq!(
            admitted,
            [true, true, true, true, true, true, true, true, false],
            "six reads of the limits spend none of them; a POST to the path is the app's and counted (1 of 2)"
        );
    }

    #[test]
    fn the_checks_before_the_body_is_read_refuse_first_in_each_colo_s_isolate() {
        // 2 requests per address back to back, then one every second; the rule behind them
        // would admit far more.
        let rules = r#"{"pre_read": {"per_ip": {"rate": 1, "burst": 2}}, "rules": [{"id": "api",
            "match": {"path": {"starts_with": "/api/"}}, "characteristics": ["ip.src"], "period": 10,
            "requests_per_period": 100}]}"#;
        let mut trace = String::from("t,ip.src,cf.colo.id,endpoint\n");
        for i in 0..4 {
            trace += &format!("0.{i},198.51.100.7,AMS,/api/x\n");
        }
        trace += "0.5,198.51.100.7,FRA,/api/x\n0.6,203.0.113.9,AMS,/api/x\n1.5,198.51.100.7,AMS,/api/x\n";
        // `sluicegate sim`: each colo its own isolate.
        let simulated = decisions(&format!(r#"{{"edge_rules": {rules}}}"#), "trace", &trace).unwrap();
        let simulated: Vec<Option<&str>> =
            simulated.iter().map(|d| if d.admitted { None } else { Some(d.pre_read.unwrap_or("rule")) }).collect();
        assert_eq!(
            simulated,
            [None, None, Some("ip"), Some("ip"), None, None, None],
            "per address in each colo's isolate (FRA counts apart), a token back each second"
        );
        // `sluicegate replay`: one workerd serves both colos from its one isolate.
        let decided = edge_decisions(rules, "trace", &trace).unwrap();
        use EdgeDecision::{Admitted, PreRead};
        assert_eq!(
            decided,
            [Admitted, Admitted, PreRead("ip"), PreRead("ip"), PreRead("ip"), Admitted, Admitted],
            "FRA shares AMS's isolate in the replayed edge: its request is the address's fifth"
        );
        assert_eq!(PreRead("ip").code(), 6);
        // In the report, the stage is a policy of its own, which the refusals are counted
        // against.
        let config = crate::sim::Config::from_json(&format!(r#"{{"edge_rules": {rules}}}"#)).unwrap();
        let at = config.policies.iter().position(|p| p.name == "pre_read").expect("a pre_read policy");
        let traffic = crate::sim::parse_trace("trace", &trace).unwrap();
        let outcome = crate::sim::simulate_observed(&config, traffic, None).unwrap();
        let stage = &outcome.policies[at];
        assert_eq!((stage.checks, stage.rejects), (7, 2), "every request checked (a trace's are not retried)");
    }
}
