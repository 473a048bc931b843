//! Where a count is kept: in each isolate, or once for the whole fleet.

/// Where an upstream budget's count is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetScope {
    /// In each isolate (like a per-pod budget): N isolates admit up to N × `max_in_flight`.
    Isolate,
    /// One count across every isolate, held by a Durable Object.
    Fleet,
}

impl BudgetScope {
    /// The name in the rules file.
    pub const fn name(self) -> &'static str {
        match self {
            BudgetScope::Isolate => "isolate",
            BudgetScope::Fleet => "fleet",
        }
    }
}
