//! How much of a rule's (or a tenant limit's) refusals are enforced (`"enforce"`): a limit
//! rolled out in shadow, then to a share of its clients, then to all of them.
//!
//! - `true` (the default): every refusal is enforced.
//! - `false` (shadow): the rule counts exactly as if enforced, and never refuses: the
//!   refusals it would have made are logged, counted apart in the stats ("would refuse") and
//!   named in the answer's `Sluicegate-Shadow` header.
//! - a fraction `0 < p < 1`: the refusals of about that share of the rule's counting keys
//!   are enforced, the rest are shadow. Which keys is fixed by a hash of the counting key
//!   ([`Enforce::applies`]), the same in every isolate and location and across restarts: one
//!   client is either in or out, never flickering between its requests. The keys enforced at
//!   `p` are still enforced at any larger `p`, so a rollout 0.01 → 0.1 → 1 only ever adds
//!   clients.
//!
//! The admin API can set a rule's `enforce` at runtime ([`RuleOverrides`]), so a rollout
//! needs no new rules file.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

/// A rule's enforcement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Enforce {
    /// Every refusal (`true`).
    #[default]
    All,
    /// None: shadow (`false`).
    Shadow,
    /// The refusals of the keys whose hash falls below this share of the hash space.
    Share {
        /// The fraction, `0 < p < 1`, as written.
        fraction: f64,
        /// `fraction` × 2⁶⁴: a key is enforced when its hash is below it.
        below: u64,
    },
}

/// What `enforce` takes, in an error.
const ALLOWED: &str = "true (enforce every refusal, the default), false (shadow: count and log, never refuse) \
                       or a fraction between 0 and 1 exclusive (enforce that share of the counting keys, e.g. 0.1)";

impl serde::Serialize for Enforce {
    /// As the rules file writes it: `true`, `false` or the fraction.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Enforce::All => s.serialize_bool(true),
            Enforce::Shadow => s.serialize_bool(false),
            Enforce::Share { fraction, .. } => s.serialize_f64(fraction),
        }
    }
}

impl Enforce {
    /// Whether every refusal is enforced (`true`, the default).
    pub fn is_all(&self) -> bool {
        *self == Enforce::All
    }

    /// Read `enforce` from JSON.
    ///
    /// # Errors
    /// What is wrong and what is allowed.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::rules::Enforce;
    /// use serde_json::json;
    /// assert_eq!(Enforce::from_json(&json!(false)), Ok(Enforce::Shadow));
    /// assert_eq!(Enforce::from_json(&json!(0.25)).unwrap().fraction(), 0.25);
    /// assert!(Enforce::from_json(&json!(1)).unwrap_err().contains("true"));
    /// ```
    pub fn from_json(v: &Value) -> Result<Enforce, String> {
        match v {
            Value::Bool(true) => Ok(Enforce::All),
            Value::Bool(false) => Ok(Enforce::Shadow),
            Value::Number(n) => match n.as_f64() {
                Some(p) if p > 0.0 && p < 1.0 => Ok(Enforce::share(p)),
                Some(0.0) => Err(format!("must be {ALLOWED}, got 0: write false for a rule in shadow")),
                Some(1.0) => Err(format!("must be {ALLOWED}, got 1: write true to enforce every refusal")),
                _ => Err(format!("must be {ALLOWED}, got {v}")),
            },
            other => Err(format!("must be {ALLOWED}, got {other}")),
        }
    }

    /// Read `enforce` from JSON text (`true`, `false` or a fraction).
    ///
    /// # Errors
    /// What is wrong and what is allowed.
    pub fn from_json_text(text: &str) -> Result<Enforce, String> {
        let value = crate::edge::json::strict_json(text).map_err(|e| format!("not JSON: {}", e.message))?;
        Enforce::from_json(&value)
    }

    fn share(fraction: f64) -> Enforce {
        // 2^64 × p, below 2^64 since p < 1 (the cast saturates in any case).
        Enforce::Share { fraction, below: (fraction * 18_446_744_073_709_551_616.0) as u64 }
    }

    /// The share of counting keys enforced: 1, 0, or the fraction.
    pub fn fraction(self) -> f64 {
        match self {
            Enforce::All => 1.0,
            Enforce::Shadow => 0.0,
            Enforce::Share { fraction, .. } => fraction,
        }
    }

    /// As the rules file writes it (`true`, `false`, or the fraction).
    pub fn to_json(self) -> String {
        match self {
            Enforce::All => "true".into(),
            Enforce::Shadow => "false".into(),
            // (serde_json's shortest form: core's float formatting would add 14 KB to a Worker)
            Enforce::Share { fraction, .. } => serde_json::to_string(&fraction).unwrap_or_default(),
        }
    }

    /// In words, for `check-rules`: `enforced`, `shadow (…)`, or `partial: refusals
    /// enforced for a share 0.25 of keys`.
    pub fn describe(self) -> String {
        match self {
            Enforce::All => "enforced".into(),
            Enforce::Shadow => "shadow (counts and logs, never refuses)".into(),
            Enforce::Share { .. } => format!("partial: refusals enforced for a share {} of keys", self.to_json()),
        }
    }

    /// Whether a refusal of counting key `key` is enforced.
    ///
    /// # Examples
    /// ```
    /// use sluicegate::rules::Enforce;
    /// let tenth = Enforce::from_json(&serde_json::json!(0.1)).unwrap();
    /// let half = Enforce::from_json(&serde_json::json!(0.5)).unwrap();
    /// let keys: Vec<String> = (0..1000).map(|i| format!("api|ip.src=10.0.{}.{}", i / 256, i % 256)).collect();
    /// let at_tenth = keys.iter().filter(|k| tenth.applies(k)).count();
    /// assert!((70..130).contains(&at_tenth), "{at_tenth}");
    /// // a key enforced at 0.1 is enforced at 0.5: a rollout only adds keys
    /// assert!(keys.iter().filter(|k| tenth.applies(k)).all(|k| half.applies(k)));
    /// ```
    #[inline]
    pub fn applies(self, key: &str) -> bool {
        match self {
            Enforce::All => true,
            Enforce::Shadow => false,
            Enforce::Share { below, .. } => SHARE_HASH.digest(key.as_bytes()).0 < below,
        }
    }
}

/// The hash that places a counting key in or out of a share: the edge's SipHash under a
/// fixed, public key ("sluicega", "te share"), not a secret one, since every isolate,
/// location and deploy must place a key alike. A client can learn whether it is in the
/// enforced share, but not move into or out of it without changing what it is counted by.
const SHARE_HASH: crate::edge::redact::KeyedHash =
    crate::edge::redact::KeyedHash::new(0x736c_7569_6365_6761, 0x7465_2073_6861_7265);

/// A rule's `enforce` set at runtime through the admin API.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleOverride {
    /// The enforcement.
    pub enforce: Enforce,
    /// When it was set (ms since the epoch).
    pub set_at: u64,
}

/// The runtime overrides of rules' `enforce`, by rule id, as their store keeps them
/// (`{"api": {"enforce": 0.1, "set_at": 1765000000000}}`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleOverrides {
    /// Sorted by rule id (a few hundred at most: a sorted list costs a Worker far less code
    /// than a map).
    by_rule: Vec<(String, RuleOverride)>,
}

impl RuleOverrides {
    /// The most overrides kept (one per rule: a rules file has at most [`crate::edge::rules::MAX_RULES`],
    /// and a few more stay for rules since removed, until deleted).
    pub const MAX: usize = 256;

    /// Read stored overrides; entries that no longer validate are left out (and named).
    ///
    /// # Errors
    /// Text that is not such a JSON object.
    pub fn from_json(text: &str) -> Result<(Self, Vec<String>), String> {
        let value =
            crate::edge::json::strict_json(text).map_err(|e| format!("rule overrides are not JSON: {}", e.message))?;
        let obj = value.as_object().ok_or("rule overrides must be a JSON object")?;
        let mut read = RuleOverrides::default();
        let mut dropped = Vec::new();
        for (rule, entry) in obj {
            let enforce = entry.get("enforce").map(Enforce::from_json);
            match (enforce, entry.get("set_at").and_then(Value::as_u64)) {
                (Some(Ok(enforce)), Some(set_at)) if read.by_rule.len() < Self::MAX => {
                    read.put(rule, RuleOverride { enforce, set_at });
                }
                _ => dropped.push(rule.clone()),
            }
        }
        Ok((read, dropped))
    }

    /// The overrides as stored.
    pub fn to_json(&self) -> String {
        let entries: Vec<String> = self
            .by_rule
            .iter()
            .map(|(rule, o)| {
                format!(
                    "{}:{{\"enforce\":{},\"set_at\":{}}}",
                    crate::edge::pipeline::reply::quoted(rule),
                    o.enforce.to_json(),
                    o.set_at
                )
            })
            .collect();
        format!("{{{}}}", entries.join(","))
    }

    fn find(&self, rule: &str) -> Result<usize, usize> {
        self.by_rule.binary_search_by(|(id, _)| id.as_str().cmp(rule))
    }

    /// Set `rule`'s override whatever the count: the one it replaced.
    fn put(&mut self, rule: &str, value: RuleOverride) -> Option<RuleOverride> {
        match self.find(rule) {
            Ok(i) => Some(core::mem::replace(&mut self.by_rule[i].1, value)),
            Err(i) => {
                self.by_rule.insert(i, (rule.into(), value));
                None
            }
        }
    }

    /// `rule`'s override, if it has one.
    pub fn get(&self, rule: &str) -> Option<&RuleOverride> {
        self.find(rule).ok().map(|i| &self.by_rule[i].1)
    }

    /// Set `rule`'s override; the one it replaced. `Err` (and nothing changed) when `rule`
    /// has none and [`Self::MAX`] are kept.
    ///
    /// # Errors
    /// Why it was not set.
    pub fn set(&mut self, rule: &str, value: RuleOverride) -> Result<Option<RuleOverride>, String> {
        if self.find(rule).is_err() && self.by_rule.len() >= Self::MAX {
            return Err(format!("{} rule overrides are kept already", Self::MAX));
        }
        Ok(self.put(rule, value))
    }

    /// Remove `rule`'s override: the one removed.
    pub fn remove(&mut self, rule: &str) -> Option<RuleOverride> {
        self.find(rule).ok().map(|i| self.by_rule.remove(i).1)
    }

    /// Every override, by rule id in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &RuleOverride)> {
        self.by_rule.iter().map(|(id, o)| (id, o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enforce_takes_true_false_or_a_fraction_and_names_what_else_is_wrong() {
        assert_eq!(Enforce::from_json(&json!(true)), Ok(Enforce::All));
        assert_eq!(Enforce::from_json(&json!(false)), Ok(Enforce::Shadow));
        assert_eq!(Enforce::from_json(&json!(0.01)).unwrap().fraction(), 0.01);
        for bad in [json!(0), json!(1), json!(1.5), json!(-0.1), json!("0.5"), json!(null), json!("shadow")] {
            let why = Enforce::from_json(&bad).unwrap_err();
            assert!(why.contains("false (shadow"), "{bad}: {why}");
        }
        assert!(Enforce::from_json(&json!(0)).unwrap_err().contains("write false"));
        assert!(Enforce::from_json(&json!(1.0)).unwrap_err().contains("write true"));
        for text in ["true", "false", "0.25"] {
            let e = Enforce::from_json(&serde_json::from_str(text).unwrap()).unwrap();
            assert_eq!(e.to_json(), text);
        }
    }

    #[test]
    fn a_share_enforces_about_that_share_of_keys_each_always_alike() {
        for p in [0.01, 0.1, 0.25, 0.5, 0.9] {
            let e = Enforce::from_json(&json!(p)).unwrap();
            let n = 20_000;
            let hit = (0..n).filter(|i| e.applies(&format!("api|ip.src=2001:db8:{i:x}::|cf.colo.id=AMS"))).count();
            let share = hit as f64 / f64::from(n);
            // binomial: 4 standard deviations
            let tolerance = 4.0 * (p * (1.0 - p) / f64::from(n)).sqrt();
            assert!((share - p).abs() < tolerance, "{p}: {share}");
        }
        let e = Enforce::from_json(&json!(0.5)).unwrap();
        assert_eq!(e.applies("api|ip.src=198.51.100.7"), e.applies("api|ip.src=198.51.100.7"));
        assert!(Enforce::All.applies("x") && !Enforce::Shadow.applies("x"));
    }

    #[test]
    fn overrides_round_trip_and_leave_out_what_no_longer_validates() {
        let mut o = RuleOverrides::default();
        let at = 1_765_000_000_000;
        assert_eq!(o.set("api", RuleOverride { enforce: Enforce::Shadow, set_at: at }), Ok(None));
        o.set("login", RuleOverride { enforce: Enforce::from_json(&json!(0.1)).unwrap(), set_at: at }).unwrap();
        let text = o.to_json();
        assert_eq!(
            text,
            r#"{"api":{"enforce":false,"set_at":1765000000000},"login":{"enforce":0.1,"set_at":1765000000000}}"#
        );
        assert_eq!(RuleOverrides::from_json(&text).unwrap(), (o.clone(), Vec::new()));
        let (read, dropped) =
            RuleOverrides::from_json(r#"{"a":{"enforce":2,"set_at":1},"b":{"enforce":true,"set_at":1}}"#).unwrap();
        assert_eq!((read.get("b").map(|o| o.enforce), dropped), (Some(Enforce::All), vec![String::from("a")]));
        assert!(RuleOverrides::from_json("[]").is_err());
        assert_eq!(o.remove("api").map(|o| o.enforce), Some(Enforce::Shadow));
        for i in 0..RuleOverrides::MAX {
            let _ = o.set(&format!("r{i}"), RuleOverride { enforce: Enforce::All, set_at: 0 });
        }
        assert!(o.set("one-more", RuleOverride { enforce: Enforce::All, set_at: 0 }).is_err());
        assert!(
            o.set("login", RuleOverride { enforce: Enforce::All, set_at: 0 }).is_ok(),
            "a rule with one may change"
        );
    }
}
