//! The edge's decisions about one request, pure: state machines that say what they need
//! done (ask a counter, …), take the answers back and reach a verdict. The Worker carries
//! out what they ask (Durable Object calls, fetches, timers); the simulator answers from
//! counters in memory; tests answer from a script. So what the edge decides, the simulator
//! replays with the same code.
//!
//! - [`rules`]: the rules file's rules, in order, until one refuses.
//! - [`counting`]: one key's counter, as a Durable Object (or the simulator) keeps it.
//! - [`reply`]: the edge's own answers, as data.

pub mod counting;
pub mod reply;
pub mod rules;

pub use reply::Reply;
pub use rules::{Answer, Checked, Isolate, Note, Refusal, RulesCheck, Step, Verdict, Via};

#[cfg(test)]
mod tests;
