//! The edge's own answers, as data: a status, headers and a body, which the Worker turns
//! into a `Response` and the simulator reads the status of.

use crate::core::time::Span;
use crate::edge::headers;
use alloc::string::String;
use alloc::vec::Vec;

/// One of the edge's own answers.
/// `s` as a JSON string, quoted and escaped, for the answers' bodies.
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// One of the edge's own answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Its status.
    pub status: u16,
    /// Its headers, names in lower case, in the order they are set.
    pub headers: Vec<(&'static str, String)>,
    /// Its body.
    pub body: String,
}

impl Reply {
    /// A `problem+json` answer (not stored by caches), with `Retry-After` when the client
    /// should wait.
    pub fn problem(status: u16, body: String, retry_after: Option<Span>) -> Reply {
        let mut reply = Reply::new(status, headers::PROBLEM_JSON.into(), body);
        reply.set("cache-control", "no-store".into());
        if let Some(wait) = retry_after {
            reply.set("retry-after", headers::retry_after(wait));
        }
        reply
    }

    /// A JSON answer (not stored by caches).
    pub fn json(status: u16, body: String) -> Reply {
        let mut reply = Reply::new(status, "application/json".into(), body);
        reply.set("cache-control", "no-store".into());
        reply
    }

    /// An answer of `status` with `body` of `content_type`.
    pub fn new(status: u16, content_type: String, body: String) -> Reply {
        Reply { status, headers: alloc::vec![("content-type", content_type)], body }
    }

    /// Set header `name` (lower case) to `value`, replacing a value it had.
    pub fn set(&mut self, name: &'static str, value: String) {
        match self.headers.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.headers.push((name, value)),
        }
    }

    /// The value of header `name` (lower case), if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}
