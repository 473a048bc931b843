//! Per-second counts of admitted and rejected attempts per client: the data behind the
//! playground's chart (a retry herd shows as a spike of admissions at a window reset).

use super::py::float_repr;
use super::stats::{Event, Observer};
use core::fmt::Write;

/// One client's row of the timeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelineClient {
    /// Client name.
    pub name: String,
    /// Attempts admitted in each second (index 0 is [`Timeline::first_second`]).
    pub admitted: Vec<u32>,
    /// Attempts rejected in each second.
    pub rejected: Vec<u32>,
}

impl Observer for Timeline {
    fn attempt(&mut self, e: &Event<'_>) {
        self.record(e.client, e.name, e.t, e.admitted);
    }
    fn restart(&mut self) {
        *self = Timeline { capacity_rps: self.capacity_rps, ..Timeline::default() };
    }
}

/// Admitted and rejected attempts per client per whole second (`floor(t)`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The second of column 0.
    pub first_second: i64,
    /// The number of seconds covered.
    pub seconds: usize,
    /// Backend capacity in requests per second, if configured.
    pub capacity_rps: Option<f64>,
    /// Clients in first-seen order.
    pub clients: Vec<TimelineClient>,
}

impl Timeline {
    /// Counts an attempt of client `ci` (first-seen index) at `t`; `t` never decreases.
    pub(crate) fn record(&mut self, ci: usize, name: &str, t: f64, admitted: bool) {
        let sec = t.floor() as i64;
        if self.seconds == 0 {
            self.first_second = sec;
        }
        let col = (sec - self.first_second).max(0) as usize;
        if col >= self.seconds {
            self.seconds = col + 1;
        }
        while self.clients.len() <= ci {
            self.clients.push(TimelineClient { name: name.into(), ..TimelineClient::default() });
        }
        let row = &mut self.clients[ci];
        for v in [&mut row.admitted, &mut row.rejected] {
            if v.len() <= col {
                v.resize(col + 1, 0);
            }
        }
        if admitted {
            row.admitted[col] += 1;
        } else {
            row.rejected[col] += 1;
        }
    }

    /// Pads every row to [`Timeline::seconds`] columns.
    pub(crate) fn finish(&mut self) {
        for row in &mut self.clients {
            row.admitted.resize(self.seconds, 0);
            row.rejected.resize(self.seconds, 0);
        }
    }

    /// `{"first_second": .., "seconds": .., "capacity_rps": ..|null, "clients": [{"name", "admitted", "rejected"}]}`.
    pub fn to_json(&self) -> String {
        let mut o = String::new();
        let cap = self.capacity_rps.map_or_else(|| "null".into(), float_repr);
        let _ = write!(
            o,
            "{{\"first_second\":{},\"seconds\":{},\"capacity_rps\":{cap},\"clients\":[",
            self.first_second, self.seconds
        );
        for (i, c) in self.clients.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let name = serde_json::to_string(&c.name).unwrap_or_default();
            let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let _ = write!(
                o,
                "{{\"name\":{name},\"admitted\":[{}],\"rejected\":[{}]}}",
                join(&c.admitted),
                join(&c.rejected)
            );
        }
        o.push_str("]}");
        o
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::run_with_timeline;

    #[test]
    fn timeline_counts_every_attempt_once() {
        let cfg = r#"{"duration_s": 20, "capacity_rps": 5, "policies": [
            {"algorithm": "fixed_window", "limit": 10, "window_s": 10}],
          "clients": [{"name": "a", "kind": "legit", "rps": 2, "retry": "honor"},
                      {"name": "b", "pattern": "burst", "burst": 8, "every_s": 10, "start": 1}]}"#;
        let (report, tl) = run_with_timeline(cfg, None).unwrap();
        assert_eq!(tl.capacity_rps, Some(5.0));
        assert_eq!(tl.first_second, 0);
        let admitted: u64 = tl.clients.iter().flat_map(|c| &c.admitted).map(|&n| u64::from(n)).sum();
        let rejected: u64 = tl.clients.iter().flat_map(|c| &c.rejected).map(|&n| u64::from(n)).sum();
        assert_eq!(admitted, report.admitted);
        assert_eq!(rejected, report.clients.iter().map(|c| c.rejected).sum::<u64>());
        assert!(rejected > 0);
        let peak = (0..tl.seconds).map(|s| tl.clients.iter().map(|c| c.admitted[s]).sum::<u32>()).max().unwrap();
        assert_eq!(u64::from(peak), report.peak_admitted_rps);
        assert!(tl.clients.iter().all(|c| c.admitted.len() == tl.seconds && c.rejected.len() == tl.seconds));
        assert!(tl.to_json().starts_with("{\"first_second\":0,\"seconds\":"));
    }
}
