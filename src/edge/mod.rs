//! The edge's policy, pure (the Worker crate reads the clock and the network and calls
//! these): the rules file ([`rules`], Cloudflare-rule shaped, with its tenants config and the
//! egress providers), who is counted ([`identity`]), what is forwarded ([`forward`],
//! [`headers`]), pre-read admission ([`admission`]), tenant quotas ([`tenants`]), the app's
//! egress ([`egress`]), bodies counted as they stream ([`body`]), failed tries of its secrets
//! ([`guesses`]), what a log may show ([`redact`]) and how much of a limit's refusals are
//! enforced ([`enforce`]: shadow, a share of keys). [`pipeline`] puts them together: one
//! request's decisions as a state machine the Worker and the simulator both drive.

pub mod admission;
pub mod analytics;
pub mod blocks;
pub mod body;
pub mod egress;
pub mod enforce;
pub mod forward;
pub mod guesses;
pub mod headers;
pub mod identity;
pub mod json;
pub mod pipeline;
pub mod redact;
pub mod rules;
pub mod scope;
pub mod tenants;
