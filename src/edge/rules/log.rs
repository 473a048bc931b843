//! Which decisions the edge writes a log line for (`"log"` in the rules file): every
//! decision, only refusals, or none, and of those a random share (`sample`).
//!
//! The choice for one decision is [`DecisionLog::logs`], pure: the caller brings the random
//! draw (the Worker uses `Math.random()`), so it is tested here with the draws as arguments.

use crate::core::limit::Decision;
use alloc::string::{String, ToString};

/// Which decisions get a line (`log.decisions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoggedDecisions {
    /// `"all"` (the default): every decision, allowed or refused.
    #[default]
    All,
    /// `"refusals"`: only refusals ([`Decision::Deny`]), those of a rule whose refusal is not
    /// enforced for the key (shadow refusals: the request went on) as well.
    Refusals,
    /// `"none"`: no decision lines (failures and errors are still logged).
    None,
}

impl LoggedDecisions {
    /// The name in the rules file.
    pub const fn name(self) -> &'static str {
        match self {
            LoggedDecisions::All => "all",
            LoggedDecisions::Refusals => "refusals",
            LoggedDecisions::None => "none",
        }
    }

    /// The setting a name in the rules file stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        [LoggedDecisions::All, LoggedDecisions::Refusals, LoggedDecisions::None].into_iter().find(|d| d.name() == name)
    }
}

/// The `analytics` section: whether the edge counts its decisions for the stats and the
/// dashboard ([`crate::edge::analytics`]), and how it shows the identities it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analytics {
    /// Whether decisions are counted (`"analytics": false` turns it off).
    pub enabled: bool,
    /// Whether the refused identities are kept as keyed hashes (`"identities": "hashed"`)
    /// instead of as counted (an address, IPv6 by its /64).
    pub hashed: bool,
    /// The Workers Analytics Engine binding that gets one data point per decision
    /// (`"dataset"`), when there is one.
    pub dataset: Option<String>,
}

impl Default for Analytics {
    /// What a file without `analytics` gets: decisions counted, identities as counted.
    fn default() -> Self {
        Analytics { enabled: true, hashed: false, dataset: None }
    }
}

impl Analytics {
    /// Why `env` cannot run this file, when it names a dataset binding that
    /// `is_dataset(name)` says is not there: what to add to wrangler.toml.
    pub fn missing_dataset(&self, is_dataset: impl Fn(&str) -> bool) -> Option<String> {
        let name = self.dataset.as_deref().filter(|name| !is_dataset(name))?;
        Some(alloc::format!(
            "env has no Workers Analytics Engine binding \"{name}\", which analytics.dataset names. Add it to \
             wrangler.toml: [[analytics_engine_datasets]] binding = \"{name}\" dataset = \"sluicegate\""
        ))
    }
}

/// The `log` section: which decisions get a line, and the share of them that is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecisionLog {
    /// Which decisions get a line.
    pub decisions: LoggedDecisions,
    /// The share of those decisions whose line is written, `0 < sample <= 1`; each one is
    /// drawn at random, independently of the others.
    pub sample: f64,
}

impl Default for DecisionLog {
    /// What a file without `log` gets: a line for every decision, as it always was.
    fn default() -> Self {
        DecisionLog { decisions: LoggedDecisions::All, sample: 1.0 }
    }
}

impl DecisionLog {
    /// Whether this is what a file without `log` gets.
    pub fn is_default(&self) -> bool {
        *self == DecisionLog::default()
    }

    /// Whether `decision` gets a log line. `draw` is called only when the decision is one
    /// the setting logs and `sample` is below 1, and must return a number drawn uniformly
    /// from `[0, 1)` (`Math.random()`); the line is written when the draw is below
    /// `sample`, so over many decisions a share `sample` of them is logged. A draw outside
    /// `[0, 1)` (or NaN) leaves the line out.
    ///
    /// A shadow refusal (a rule whose refusal is not enforced for the key, `"enforce"`) is
    /// the counter's [`Decision::Deny`] as an enforced one is: it is logged whenever a refusal
    /// would be, and its line says it was not enforced.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::limit::Decision;
    /// use sluicegate::rules::{DecisionLog, LoggedDecisions};
    /// use sluicegate::Span;
    /// let refusals = DecisionLog { decisions: LoggedDecisions::Refusals, sample: 0.25 };
    /// let deny = Decision::Deny { retry_after: Span::from_secs(1) };
    /// assert!(refusals.logs(&deny, || 0.1));
    /// assert!(!refusals.logs(&deny, || 0.25));
    /// ```
    pub fn logs(&self, decision: &Decision, draw: impl FnOnce() -> f64) -> bool {
        let wanted = match self.decisions {
            LoggedDecisions::All => true,
            LoggedDecisions::Refusals => matches!(decision, Decision::Deny { .. }),
            LoggedDecisions::None => false,
        };
        // `sample` is validated to be in (0, 1]: at 1 every wanted decision is logged, with
        // no draw at all.
        wanted && (self.sample >= 1.0 || (0.0..self.sample).contains(&draw()))
    }

    /// The share a logged line stands for, when lines are sampled (`sample` below 1): the
    /// line says so (`"sample":0.25`), so that counts can be scaled back up by `1 / sample`.
    pub fn sampled(&self) -> Option<f64> {
        (self.sample < 1.0).then_some(self.sample)
    }

    /// [`Self::sampled`] as the log line and `check-rules` write it: JSON's shortest spelling
    /// (`0.1`, `0.25`), through serde_json's number formatting, which the edge already
    /// carries (core's float `Display` would add about 10 KB gzip to the Worker's wasm).
    pub fn sampled_text(&self) -> Option<String> {
        self.sampled().and_then(serde_json::Number::from_f64).map(|n| n.to_string())
    }
}
