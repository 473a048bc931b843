//! The rate-limit review's template: Markdown with `{{placeholders}}` that
//! `sluicegate sim BEFORE --compare AFTER --review` fills in. The built-in one is
//! `templates/rate-limit-review.md`, compiled in; `--review-template PATH` takes a team's own.
//!
//! A placeholder is a name between `{{` and `}}` (spaces inside are allowed: `{{ verdict }}`);
//! everything else is copied as it is. Each placeholder is filled with its text without a
//! final line end, so a template sets its own blank lines. An unknown name is refused, naming
//! it, the names it may be, and the line.

use crate::core::suggest::nearest;
use core::fmt;

/// The built-in review template (`templates/rate-limit-review.md`).
pub const REVIEW_TEMPLATE: &str = include_str!("../../templates/rate-limit-review.md");

/// What a placeholder of the review stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Placeholder {
    /// The before config's `service`.
    Service,
    /// The policies on each side and the endpoints they name.
    Scope,
    /// The backend's capacity, or its change.
    Capacity,
    /// Where the traffic came from (seed and duration, or the trace) and how much there was.
    Traffic,
    /// The verdict and its reason.
    Verdict,
    /// Per client today: requests, 429s, OK after retry, failed, max wait, main policy.
    TodayTable,
    /// Today's peak admitted second against capacity.
    TodayPeak,
    /// Today's findings, numbered.
    TodayFindings,
    /// What the input called the before config (its path).
    BeforeConfig,
    /// What the input called the after config.
    AfterConfig,
    /// The after config's `policies` (and `edge_rules`) as JSON, one per line.
    ProposedPolicies,
    /// Per client before → after: 429s, OK after retry, failed, max wait.
    BeforeAfterTable,
    /// The peak admitted second after the change, and before.
    AfterPeak,
    /// The finding codes resolved, remaining and new.
    FindingsChange,
    /// The findings after the change, numbered.
    AfterFindings,
    /// 429 and 503 with `Retry-After`, the headers, the sample refusal, client guidance.
    ResponseContract,
    /// What rate limits cannot do for these clients (bot detection, lockout, shedding).
    OutsideRateLimits,
    /// What to watch after rollout.
    Monitor,
}

/// Every placeholder's name, in the built-in template's order.
const PLACEHOLDERS: [(&str, Placeholder); 18] = [
    ("service", Placeholder::Service),
    ("scope", Placeholder::Scope),
    ("capacity", Placeholder::Capacity),
    ("traffic", Placeholder::Traffic),
    ("verdict", Placeholder::Verdict),
    ("today_table", Placeholder::TodayTable),
    ("today_peak", Placeholder::TodayPeak),
    ("today_findings", Placeholder::TodayFindings),
    ("before_config", Placeholder::BeforeConfig),
    ("after_config", Placeholder::AfterConfig),
    ("proposed_policies", Placeholder::ProposedPolicies),
    ("before_after_table", Placeholder::BeforeAfterTable),
    ("after_peak", Placeholder::AfterPeak),
    ("findings_change", Placeholder::FindingsChange),
    ("after_findings", Placeholder::AfterFindings),
    ("response_contract", Placeholder::ResponseContract),
    ("outside_rate_limits", Placeholder::OutsideRateLimits),
    ("monitor", Placeholder::Monitor),
];

/// The placeholders' names, in the built-in template's order.
pub fn placeholder_names() -> impl Iterator<Item = &'static str> {
    PLACEHOLDERS.iter().map(|(name, _)| *name)
}

/// Why a review template cannot be filled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// `{{name}}` is no placeholder of the review.
    Unknown {
        /// The name between the braces (trimmed).
        name: String,
        /// The template's line it is on, from 1.
        line: usize,
        /// The placeholder it is closest to, if one is close (a typo, most likely).
        suggestion: Option<&'static str>,
    },
    /// A `{{` with no `}}` after it.
    Unclosed {
        /// The template's line it is on, from 1.
        line: usize,
    },
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Unknown { name, line, suggestion } => {
                write!(f, "line {line}: unknown placeholder {{{{{}}}}}", crate::edge::json::brief(name))?;
                if let Some(known) = suggestion {
                    write!(f, " (did you mean {{{{{known}}}}}?)")?;
                }
                f.write_str("; a review template may use")?;
                for (i, name) in placeholder_names().enumerate() {
                    write!(f, "{} {{{{{name}}}}}", if i == 0 { "" } else { "," })?;
                }
                Ok(())
            }
            TemplateError::Unclosed { line } => write!(f, "line {line}: a {{{{ with no }}}} after it"),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Goes through the template: its text to `out`, and each placeholder's text from `value`
/// (both skipped when `out` is `None`, to check a template without filling it).
fn walk(
    template: &str,
    mut out: Option<&mut String>,
    value: &mut dyn FnMut(Placeholder) -> String,
) -> Result<(), TemplateError> {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let line = template[..template.len() - rest.len() + open].matches('\n').count() + 1;
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or(TemplateError::Unclosed { line })?;
        let name = after[..close].trim();
        let Some((_, placeholder)) = PLACEHOLDERS.iter().find(|(known, _)| *known == name) else {
            let names: Vec<&str> = placeholder_names().collect();
            return Err(TemplateError::Unknown { name: name.into(), line, suggestion: nearest(name, &names) });
        };
        if let Some(out) = out.as_deref_mut() {
            out.push_str(&rest[..open]);
            let text = value(*placeholder);
            out.push_str(text.strip_suffix('\n').unwrap_or(&text));
        }
        rest = &after[close + 2..];
    }
    if let Some(out) = out {
        out.push_str(rest);
    }
    Ok(())
}

/// Checks a review template without filling it: what `fill` would refuse it for.
///
/// # Errors
/// [`TemplateError`] for the first placeholder that is unknown or not closed.
pub fn check_template(template: &str) -> Result<(), TemplateError> {
    walk(template, None, &mut |_| String::new())
}

/// The template with each placeholder replaced by `value`'s text for it (a final line end
/// left out).
pub(super) fn fill(template: &str, mut value: impl FnMut(Placeholder) -> String) -> Result<String, TemplateError> {
    // checked first: nothing is computed for a template that is refused
    check_template(template)?;
    let mut out = String::with_capacity(template.len() * 4);
    walk(template, Some(&mut out), &mut value)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{check_template, fill, placeholder_names, Placeholder, TemplateError, REVIEW_TEMPLATE};

    #[test]
    fn the_built_in_template_uses_every_placeholder_but_before_config_once() {
        assert_eq!(check_template(REVIEW_TEMPLATE), Ok(()));
        for name in placeholder_names() {
            let uses = REVIEW_TEMPLATE.matches(&format!("{{{{{name}}}}}")).count();
            assert_eq!(uses, usize::from(name != "before_config"), "{name}");
        }
    }

    #[test]
    fn placeholders_are_filled_without_their_final_line_end_and_the_text_kept_as_it_is() {
        let filled = fill("# {{ service }}\n\n{{verdict}}\n{ not one }} {x}\n", |p| match p {
            Placeholder::Service => "Orders API".into(),
            Placeholder::Verdict => "**ship**\n".into(),
            _ => "?".into(),
        });
        assert_eq!(filled.as_deref(), Ok("# Orders API\n\n**ship**\n{ not one }} {x}\n"));
        assert_eq!(fill("", |_| String::new()).as_deref(), Ok(""));
    }

    #[test]
    fn an_unknown_placeholder_is_refused_naming_it_its_line_and_every_known_one() {
        let e = check_template("# Review\n\nVerdict: {{verdit}}\n").unwrap_err();
        assert_eq!(e, TemplateError::Unknown { name: "verdit".into(), line: 3, suggestion: Some("verdict") });
        let text = e.to_string();
        assert!(text.starts_with("line 3: unknown placeholder {{verdit}} (did you mean {{verdict}}?); a review template may use {{service}}, {{scope}}, "), "{text}");
        assert!(text.ends_with(", {{outside_rate_limits}}, {{monitor}}"), "{text}");
        let e = check_template("{{colour}}").unwrap_err();
        assert_eq!(e, TemplateError::Unknown { name: "colour".into(), line: 1, suggestion: None });
    }

    #[test]
    fn an_unclosed_placeholder_is_refused_naming_its_line() {
        assert_eq!(check_template("ok {{verdict}}\n\n{{verdict"), Err(TemplateError::Unclosed { line: 3 }));
        assert_eq!(TemplateError::Unclosed { line: 3 }.to_string(), "line 3: a {{ with no }} after it");
    }
}
