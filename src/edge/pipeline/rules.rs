//! The rules stage: a request counted under every rule that matches it, in file order,
//! until one refuses.
//!
//! This is the edge's one semantics for several matching rules, the one Cloudflare's rules
//! have: they run in order and the first one that acts ends the evaluation. Each matching
//! rule's counter is asked (and charged, when it admits) in turn; the first refusal answers
//! the request, the rules before it stay charged and the rules after it never see it. It is
//! what one round trip per rule can do exactly: a counter decides and charges in one step,
//! so "charge none unless all admit" would need a second round trip to give back what the
//! earlier rules took, and a crash between the two would lose it.
//!
//! The stage owns no I/O. [`RulesCheck::next`] says what it needs ([`Step::Ask`]: counter
//! `key` of `rule`, in the rule's [`Store`]), [`RulesCheck::answer`] takes the counter's
//! answer back (its decision, the binding's outcome, or that it could not be asked), and
//! [`RulesCheck::finish`] gives the verdict. The Worker asks each key's Durable Object or
//! the rule's Workers Rate Limiting binding; the simulator asks its counters in memory; tests
//! answer from a script. A rule counted in the isolate (`"store": "isolate"`) asks nothing:
//! the stage counts it itself, in the [`Isolate`] it is handed.
//!
//! A rule that does not enforce its refusal for a key ([`Enforce`]: in shadow, or the key
//! outside its enforced share) is counted exactly as if it did: its counter is asked and
//! moves as for an enforced refusal (a refused request is not charged, a block starts and
//! the isolate remembers it), so the refusals it logs are the ones enforcement would make.
//! Its refusal does not end the evaluation: it is noted ([`Checked::shadow`], the
//! `Sluicegate-Shadow` header) and the next rule is asked. With
//! [`RulesCheck::reading_overrides`] the stage first reads the runtime overrides of the
//! rules' `enforce` ([`Step::ReadOverrides`]; the isolate's copy serves for
//! [`OVERRIDES_FRESH`]).

use super::reply::Reply;
use super::Isolate;
use crate::core::limit::Decision;
use crate::core::time::{Instant, Span};
use crate::edge::headers::{self, RateLimitFields};
use crate::edge::redact::{Digest, KeyedHash};
use crate::edge::rules::{CountingKey, Enforce, RequestFacts, Rule, RuleOverrides, RuleSet, Store, StoreFailure};
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;

/// How long an isolate trusts its copy of the rules' runtime overrides: a change made
/// through the admin API reaches every isolate within this.
pub const OVERRIDES_FRESH: Span = super::tenant::OVERRIDES_FRESH;

/// Where a rule's decision came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A block the isolate remembered (the counter was not asked).
    IsolateCache,
    /// The key's Durable Object.
    DurableObject,
    /// The rule's Workers Rate Limiting binding (its decision is whether the request is
    /// within the limit: no `remaining` is known).
    Binding,
    /// The rule's count in this isolate.
    Isolate,
}

impl Via {
    /// Its name in log lines.
    pub fn name(self) -> &'static str {
        match self {
            Via::IsolateCache => "isolate-cache",
            Via::DurableObject => "durable-object",
            Via::Binding => "cloudflare",
            Via::Isolate => "isolate",
        }
    }
}

/// Something the stage did that a log may show.
#[derive(Clone, Debug, PartialEq)]
pub enum Note<'s> {
    /// A rule decided: the key as logs show it, the decision and where it came from.
    Decided {
        /// The rule.
        rule: &'s Rule,
        /// The counting key as logs show it (header values as their keyed hash).
        logged: String,
        /// Its decision.
        decision: Decision,
        /// Where the decision came from.
        via: Via,
        /// Whether a refusal is enforced for this key (`false`: the rule refused in shadow;
        /// the request went on).
        enforced: bool,
    },
    /// A rule's counter could not be asked (`error` says why); the rule failed open or closed
    /// as it says.
    StoreFailed {
        /// The rule.
        rule: &'s Rule,
        /// The counting key as logs show it.
        logged: String,
        /// Why the counter could not be asked.
        error: String,
        /// Whether a refusal is enforced for this key (a rule that fails closed in shadow
        /// lets the request on).
        enforced: bool,
    },
    /// The runtime overrides of the rules' `enforce` could not be read: the copy in hand
    /// (or the rules file's) serves.
    OverridesUnreadable(String),
}

/// A counter's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// It decided, at `at` by its clock.
    Decided {
        /// The decision (charged when it admits).
        decision: Decision,
        /// When it decided.
        at: Instant,
    },
    /// The Workers Rate Limiting binding's outcome (`{success}`): whether the request is
    /// within the limit (charged when it is), asked at `at` by the asker's clock. A refusal
    /// is answered with `Retry-After` of the rule's `mitigation_timeout` (held by the
    /// isolate's block cache), or of its period when it has none: the binding's window
    /// turns within one period.
    Outcome {
        /// `success`.
        admitted: bool,
        /// When it was asked.
        at: Instant,
    },
    /// It could not be asked, or answered nonsense: why.
    Failed(String),
    /// The answer to [`Step::ReadOverrides`]: the rules' runtime overrides, or why they could
    /// not be read.
    Overrides(Result<RuleOverrides, String>),
}

/// What the stage needs next.
#[derive(Debug, PartialEq)]
pub enum Step<'a, 's> {
    /// Ask `rule`'s counter of `key` to count the request, in the rule's store (its
    /// `store`: the Durable Object named by `key`, or the binding asked with `key`), then
    /// [`RulesCheck::answer`].
    Ask {
        /// The rule.
        rule: &'s Rule,
        /// The counting key.
        key: &'a str,
    },
    /// Read the runtime overrides of the rules' `enforce` from their store, then
    /// [`RulesCheck::answer`] with [`Answer::Overrides`].
    ReadOverrides,
    /// Nothing: [`RulesCheck::finish`].
    Done,
}

/// What the rules decided about a request: each rule's decision and the rules that failed
/// open. The headers they give its answer are written only when asked for
/// ([`Checked::headers`]): the simulator never asks.
#[derive(Clone, Debug, Default)]
pub struct Checked<'s> {
    /// Each rule's decision, and whether it is enforced for the request's key.
    decided: Vec<(&'s Rule, Decision, bool)>,
    degraded: Vec<&'s str>,
    shadow: Vec<(&'s Rule, Refusal)>,
    decided_at: Option<Instant>,
}

impl<'s> Checked<'s> {
    /// The headers every answer to the request carries: `RateLimit-Policy` and `RateLimit`
    /// (when a rule that enforces its refusals for the request's key counted it),
    /// `Sluicegate-Degraded` (the rules that failed open) and `Sluicegate-Shadow` (the rules
    /// that refused it in shadow: `api;retry-after=7`, or `api;unavailable` for one that
    /// fails closed and could not be asked); and how many RateLimit entries were left out
    /// (the headers are capped in bytes). A rule not enforced for the key gives no RateLimit
    /// entry: a client pacing itself by them would slow down for a limit that does not refuse
    /// it, and the shadow would see less than enforcement will refuse.
    pub fn headers(&self) -> (Vec<(&'static str, String)>, usize) {
        let mut fields = RateLimitFields::default();
        for (rule, decision, _) in self.decided.iter().filter(|d| d.2) {
            if let Store::Cloudflare { .. } = rule.store {
                fields.push_without_remaining(&rule.id, rule.quota(), decision);
            } else {
                fields.push(&rule.id, rule.quota(), decision);
            }
        }
        let mut out = Vec::new();
        if !fields.is_empty() {
            out.push(("ratelimit-policy", fields.policy()));
            let state = fields.state();
            if !state.is_empty() {
                out.push(("ratelimit", state));
            }
        }
        if !self.degraded.is_empty() {
            out.push(("sluicegate-degraded", self.degraded.join(", ")));
        }
        if !self.shadow.is_empty() {
            let mut shadow = String::new();
            for (rule, refusal) in &self.shadow {
                if !shadow.is_empty() {
                    shadow.push_str(", ");
                }
                shadow.push_str(&rule.id);
                match refusal {
                    Refusal::Limited { wait } => {
                        shadow.push_str(";retry-after=");
                        shadow.push_str(&headers::retry_after(*wait));
                    }
                    Refusal::Unavailable => shadow.push_str(";unavailable"),
                }
            }
            out.push(("sluicegate-shadow", shadow));
        }
        (out, fields.omitted())
    }

    /// The rules that refused the request in shadow (it went on), in order, and how.
    pub fn shadow(&self) -> &[(&'s Rule, Refusal)] {
        &self.shadow
    }

    /// When the last rule decided (its counter's clock, or the isolate's for a block it
    /// remembered).
    pub fn decided_at(&self) -> Option<Instant> {
        self.decided_at
    }

    /// The rules that failed open, in order.
    pub fn degraded(&self) -> &[&str] {
        &self.degraded
    }
}

/// Why a rule refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its counter refused: the request may be sent again after `wait`.
    Limited {
        /// How long the key stays refused.
        wait: Span,
    },
    /// Its counter could not be asked and the rule fails closed.
    Unavailable,
}

/// The rules' verdict on a request.
#[derive(Debug)]
pub enum Verdict<'s> {
    /// Every matching rule admitted it (or failed open).
    Admitted(Checked<'s>),
    /// `rule` refused it.
    Refused {
        /// The rule that ended the evaluation.
        rule: &'s Rule,
        /// Why.
        refusal: Refusal,
        /// What the rules decided, this rule's refusal included.
        checked: Checked<'s>,
    },
}

impl Verdict<'_> {
    /// The answer to a refused request (`None` when admitted): the rule's own refusal (`429`
    /// unless the rule says otherwise) with `Retry-After` in whole seconds, rounded up, or
    /// `503` from a rule that fails closed (`Retry-After: 1`); with the RateLimit entries of
    /// every rule that decided, `Sluicegate-Rule` naming the rule, and `no-store`. The
    /// RateLimit entries left out (capped in bytes) are counted too.
    pub fn reply(&self) -> Option<(Reply, usize)> {
        let Verdict::Refused { rule, refusal, checked } = self else { return None };
        let mut reply = match *refusal {
            Refusal::Limited { wait } => {
                let (status, content_type, body) = rule.refusal(wait);
                let mut reply = Reply::new(status, content_type, body);
                reply.set("retry-after", headers::retry_after(wait));
                reply
            }
            Refusal::Unavailable => {
                let retry = Span::from_secs(1);
                let detail = alloc::format!("The rate limit \"{}\" cannot be checked right now.", rule.id);
                let body = headers::problem(503, "Service Unavailable", &detail, Some(&rule.id), Some(retry));
                Reply::problem(503, body, Some(retry))
            }
        };
        let (headers, omitted) = checked.headers();
        for (name, value) in headers {
            reply.set(name, value);
        }
        reply.set("cache-control", "no-store".into());
        // Which rule answered (its id is in the body too): what `sluicegate replay` reads.
        reply.set("sluicegate-rule", rule.id.clone());
        Some((reply, omitted))
    }
}

struct Pending<'s> {
    rule: &'s Rule,
    key: CountingKey,
    digest: Digest,
}

/// The runtime overrides of the rules' `enforce`, as the check knows them.
enum Overrides {
    /// It does not read them: each rule's own `enforce` serves.
    Unused,
    /// To be read before the first rule that matches.
    Unread,
    /// [`Step::ReadOverrides`] was asked, at this instant.
    Reading(Instant),
    /// In hand.
    Held(Rc<RuleOverrides>),
}

/// One request through the rules: see the module's documentation.
pub struct RulesCheck<'s> {
    rules: &'s [Rule],
    hash: KeyedHash,
    /// The next rule to look at.
    next: usize,
    pending: Option<Pending<'s>>,
    checked: Checked<'s>,
    refused: Option<(&'s Rule, Refusal)>,
    notes: Vec<Note<'s>>,
    /// Whether notes carry the key as logs show it (a second string per rule).
    log_keys: bool,
    overrides: Overrides,
}

impl<'s> RulesCheck<'s> {
    /// A request's way through `set`'s rules; `hash` keys the block cache and the keys as
    /// logs show them.
    pub fn new(set: &'s RuleSet, hash: KeyedHash) -> Self {
        RulesCheck {
            rules: set.rules(),
            hash,
            next: 0,
            pending: None,
            checked: Checked::default(),
            refused: None,
            notes: Vec::new(),
            log_keys: true,
            overrides: Overrides::Unused,
        }
    }

    /// The same check, reading the runtime overrides of the rules' `enforce` before the
    /// first rule that matches ([`Step::ReadOverrides`], unless the isolate's copy is
    /// fresh): the Worker's, when its admin API is on.
    pub fn reading_overrides(mut self) -> Self {
        self.overrides = Overrides::Unread;
        self
    }

    /// How `rule` enforces its refusals now: its runtime override, else the rules file's.
    fn enforce_of(&self, rule: &Rule) -> Enforce {
        match &self.overrides {
            Overrides::Held(o) => o.get(&rule.id).map_or(rule.enforce, |o| o.enforce),
            _ => rule.enforce,
        }
    }

    /// The same check, its notes without the keys as logs show them (their `logged` is
    /// empty): for a caller that writes no log lines, such as the simulator.
    pub fn without_log_keys(mut self) -> Self {
        self.log_keys = false;
        self
    }

    /// What the stage needs next, at `now` (the clock as this rule is checked: an earlier
    /// rule's counter may have taken a while, and a remembered block ends when the
    /// counter's does). `header` looks a request header up by its lower-case name.
    ///
    /// # Panics
    /// When the previous [`Step::Ask`] was not answered.
    pub fn next(
        &mut self,
        isolate: &mut Isolate,
        facts: &RequestFacts<'_>,
        header: &dyn Fn(&str) -> Option<String>,
        now: Instant,
    ) -> Step<'_, 's> {
        assert!(
            self.pending.is_none() && !matches!(self.overrides, Overrides::Reading(_)),
            "RulesCheck::next before the answer"
        );
        if self.refused.is_some() {
            return Step::Done;
        }
        while let Some(rule) = self.rules.get(self.next) {
            self.next += 1;
            if !rule.matches(facts) {
                continue;
            }
            if let Overrides::Unread = self.overrides {
                if let Some(held) = isolate.rule_overrides.fresh(now) {
                    self.overrides = Overrides::Held(held);
                } else {
                    // (this rule is looked at again once they are in hand)
                    self.next -= 1;
                    self.overrides = Overrides::Reading(now);
                    return Step::ReadOverrides;
                }
            }
            let key = if self.log_keys {
                rule.counting_key_and_log(facts, header, &self.hash)
            } else {
                CountingKey { key: rule.counting_key(facts, header), logged: String::new() }
            };
            let digest = self.hash.digest(key.key.as_bytes());
            if let Some(wait) = isolate.blocks.blocked_for(digest, now) {
                self.decided(rule, key, Decision::Deny { retry_after: wait }, Via::IsolateCache, now);
                if self.refused.is_some() {
                    return Step::Done;
                }
                continue;
            }
            if let Store::Isolate { max_keys } = rule.store {
                match isolate.counts.check(rule, max_keys, digest, now) {
                    Some(decision) => self.decided(rule, key, decision, Via::Isolate, now),
                    None => {
                        let error = alloc::format!(
                            "this isolate's table of {max_keys} keys for the rule is full of keys still counting"
                        );
                        self.failed(isolate, rule, key, error);
                    }
                }
                if self.refused.is_some() {
                    return Step::Done;
                }
                continue;
            }
            let pending = self.pending.insert(Pending { rule, key, digest });
            return Step::Ask { rule: pending.rule, key: &pending.key.key };
        }
        Step::Done
    }

    /// The counter's answer to the last [`Step::Ask`].
    ///
    /// # Panics
    /// When nothing was asked.
    pub fn answer(&mut self, isolate: &mut Isolate, answer: Answer) {
        if let Answer::Overrides(read) = answer {
            let Overrides::Reading(asked) = self.overrides else { panic!("overrides answered unasked") };
            let (held, error) = isolate.rule_overrides.refreshed(asked, read);
            self.notes.extend(error.map(Note::OverridesUnreadable));
            self.overrides = Overrides::Held(held);
            return;
        }
        let Pending { rule, key, digest } = self.pending.take().expect("RulesCheck::answer without a question");
        match answer {
            Answer::Decided { decision, at } => {
                if let Decision::Deny { retry_after } = decision {
                    // Until the counter's block ends: counted from when it decided.
                    isolate.blocks.insert(digest, at + retry_after, at);
                }
                self.decided(rule, key, decision, Via::DurableObject, at);
            }
            Answer::Outcome { admitted, at } => {
                let quota = rule.quota();
                let decision = if admitted {
                    // (the binding says nothing more: the headers and logs show no remaining)
                    Decision::Allow { remaining: 0, reset: quota.window }
                } else if rule.mitigation_timeout.is_zero() {
                    Decision::Deny { retry_after: quota.window }
                } else {
                    // The binding has no block: this isolate holds it.
                    isolate.blocks.insert(digest, at + rule.mitigation_timeout, at);
                    Decision::Deny { retry_after: rule.mitigation_timeout }
                };
                self.decided(rule, key, decision, Via::Binding, at);
            }
            Answer::Failed(error) => self.failed(isolate, rule, key, error),
            Answer::Overrides(_) => unreachable!("taken above"),
        }
    }

    /// `rule`'s count could not be had: it fails open or closed as it says.
    fn failed(&mut self, isolate: &mut Isolate, rule: &'s Rule, key: CountingKey, error: String) {
        let closed = rule.on_store_failure == StoreFailure::Closed;
        let enforced = !closed || self.enforce_of(rule).applies(&key.key);
        self.notes.push(Note::StoreFailed { rule, logged: key.logged, error, enforced });
        if closed {
            self.refuse(rule, Refusal::Unavailable, enforced);
        } else {
            *isolate.degraded.entry_ref(rule.id.as_str()).or_insert(0) += 1;
            self.checked.degraded.push(&rule.id);
        }
    }

    fn decided(&mut self, rule: &'s Rule, key: CountingKey, decision: Decision, via: Via, at: Instant) {
        let enforced = self.enforce_of(rule).applies(&key.key);
        self.checked.decided_at = Some(at);
        self.checked.decided.push((rule, decision, enforced));
        self.notes.push(Note::Decided { rule, logged: key.logged, decision, via, enforced });
        if let Decision::Deny { retry_after } = decision {
            self.refuse(rule, Refusal::Limited { wait: retry_after }, enforced);
        }
    }

    /// `rule` refused: the request is refused, or, when the refusal is not enforced for its
    /// key, the shadow refusal noted and the next rule asked.
    fn refuse(&mut self, rule: &'s Rule, refusal: Refusal, enforced: bool) {
        if enforced {
            self.refused = Some((rule, refusal));
        } else {
            self.checked.shadow.push((rule, refusal));
        }
    }

    /// What happened so far that a log may show (taken: each note is given once).
    pub fn take_notes(&mut self) -> Vec<Note<'s>> {
        core::mem::take(&mut self.notes)
    }

    /// The verdict, once [`RulesCheck::next`] said [`Step::Done`], and the notes not yet
    /// taken (a block the isolate remembered is decided without a question: its note comes
    /// here).
    ///
    /// # Panics
    /// When a question is still unanswered.
    pub fn finish(self) -> (Verdict<'s>, Vec<Note<'s>>) {
        assert!(
            self.pending.is_none() && !matches!(self.overrides, Overrides::Reading(_)),
            "RulesCheck::finish before the answer"
        );
        let verdict = match self.refused {
            Some((rule, refusal)) => Verdict::Refused { rule, refusal, checked: self.checked },
            None => Verdict::Admitted(self.checked),
        };
        (verdict, self.notes)
    }
}
