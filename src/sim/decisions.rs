//! Every decided attempt of a replay, in time order: what `sluicegate replay` compares with
//! the real edge's answers, request by request.

use super::{simulate_trace, Config, Event, Observer, SimError};
use alloc::string::String;
use alloc::vec::Vec;

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
}

#[derive(Default)]
struct Record(Vec<Decided>);

impl Observer for Record {
    fn attempt(&mut self, event: &Event<'_>) {
        self.0.push(Decided {
            t: event.t,
            client: event.name.into(),
            endpoint: event.endpoint.into(),
            admitted: event.admitted,
        });
    }

    fn restart(&mut self) {
        self.0.clear();
    }
}

/// Replays the CSV `trace` (named `label` in errors) through the policies of `config_json`
/// and returns every decided attempt, in the replay's order.
///
/// # Errors
/// What [`super::run`] refuses.
pub fn decisions(config_json: &str, label: &str, trace: &str) -> Result<Vec<Decided>, SimError> {
    let cfg = Config::from_json(config_json)?;
    let mut record = Record::default();
    simulate_trace(&cfg, label, || Ok(trace.as_bytes()), Some(&mut record))?;
    Ok(record.0)
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
}
