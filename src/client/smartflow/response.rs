//! §5–§6 as a fetch wrapper meets them: what a response means to the limiter, and which
//! fields of its body the mappings are learned from.

use alloc::borrow::Cow;
use serde_json::Value;

/// A field of a response body as §6 reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    /// Not there (a missing key, or a step of the path that is not an object).
    Absent,
    /// There, but not a string (`null`, a number, an object …): never an identifier.
    NotText,
    /// A string.
    Text(Cow<'a, str>),
}

impl Field<'_> {
    /// The string, when the field is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Field::Text(text) => Some(text),
            Field::Absent | Field::NotText => None,
        }
    }
}

/// The body's organization id. When present it decides, even when it is not a string.
pub const ORGANIZATION_ID: &[&str] = &["organizationId"];
/// The body's organization id when `organizationId` is absent.
pub const ORGANIZATION_NESTED_ID: &[&str] = &["organization", "id"];
/// A network id the body names.
pub const NETWORK_ID: &[&str] = &["networkId"];
/// A network id the body names, nested.
pub const NETWORK_NESTED_ID: &[&str] = &["network", "id"];
/// A device serial the body names.
pub const SERIAL: &[&str] = &["serial"];
/// Every field learned from, as paths of object keys: all a binding has to read.
pub const LEARNED_FIELDS: [&[&str]; 5] =
    [ORGANIZATION_ID, ORGANIZATION_NESTED_ID, NETWORK_ID, NETWORK_NESTED_ID, SERIAL];

/// A response body, in whatever object model the caller holds it (a `serde_json::Value`
/// here; a JS object in the binding, read without copying the rest of the body).
pub trait ResponseBody {
    /// The field at `path` (object keys, outermost first; one of [`LEARNED_FIELDS`]). An
    /// array is no object, and neither is anything else that is not a record.
    fn field(&self, path: &[&str]) -> Field<'_>;
}

impl ResponseBody for Value {
    fn field(&self, path: &[&str]) -> Field<'_> {
        let mut at = self;
        for key in path {
            match at.as_object().and_then(|object| object.get(*key)) {
                Some(next) => at = next,
                None => return Field::Absent,
            }
        }
        match at {
            Value::String(text) => Field::Text(Cow::Borrowed(text)),
            _ => Field::NotText,
        }
    }
}

/// What a response means to the limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaction {
    /// A 429: lower the rate, honour its `Retry-After`.
    RateLimited,
    /// A 2xx to anything but a GET: raise the rates.
    Success,
    /// A 2xx to a GET: raise the rates and learn from the URL, and from the body when
    /// `json` (the content type names JSON; a body that does not parse teaches nothing).
    SuccessAndLearn {
        /// Whether the body is worth parsing as JSON.
        json: bool,
    },
    /// Anything else: nothing to do.
    Nothing,
}

/// What a response with `status`, to a request with `method` (any case), with the
/// `content_type` header (if any) means to the limiter.
///
/// # Examples
/// ```
/// use sluicegate::smartflow::{reaction, Reaction};
/// assert_eq!(reaction(429, "GET", None), Reaction::RateLimited);
/// assert_eq!(reaction(200, "get", Some("application/json; charset=utf-8")), Reaction::SuccessAndLearn { json: true });
/// assert_eq!(reaction(201, "POST", Some("application/json")), Reaction::Success);
/// assert_eq!(reaction(404, "GET", None), Reaction::Nothing);
/// ```
pub fn reaction(status: u16, method: &str, content_type: Option<&str>) -> Reaction {
    match status {
        429 => Reaction::RateLimited,
        200..=299 if method.eq_ignore_ascii_case("GET") => {
            Reaction::SuccessAndLearn { json: content_type.is_some_and(names_json) }
        }
        200..=299 => Reaction::Success,
        _ => Reaction::Nothing,
    }
}

/// Whether a content type names JSON anywhere (`application/json`, `application/problem+json`,
/// `text/JSON` …), as loosely as servers label it.
fn names_json(content_type: &str) -> bool {
    content_type.as_bytes().windows(4).any(|w| w.eq_ignore_ascii_case(b"json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_read_along_their_paths_and_only_strings_are_text() {
        let body =
            json!({ "organizationId": null, "organization": { "id": "O_2" }, "networkId": 5, "network": ["N_1"] });
        assert_eq!(body.field(ORGANIZATION_ID), Field::NotText);
        assert_eq!(body.field(ORGANIZATION_NESTED_ID).text(), Some("O_2"));
        assert_eq!(body.field(NETWORK_ID), Field::NotText);
        assert_eq!(body.field(NETWORK_NESTED_ID), Field::Absent, "an array is no object");
        assert_eq!(body.field(SERIAL), Field::Absent);
        assert_eq!(json!([{ "serial": "Q2" }]).field(SERIAL), Field::Absent);
        assert_eq!(json!("text").field(SERIAL), Field::Absent);
    }

    #[test]
    fn only_a_429_is_rate_limited_and_only_a_2xx_get_is_learned_from() {
        assert_eq!(reaction(429, "POST", None), Reaction::RateLimited);
        assert_eq!(reaction(299, "Get", Some("text/plain")), Reaction::SuccessAndLearn { json: false });
        assert_eq!(reaction(204, "GET", None), Reaction::SuccessAndLearn { json: false });
        assert_eq!(reaction(200, "GET", Some("application/problem+JSON")), Reaction::SuccessAndLearn { json: true });
        assert_eq!(reaction(200, "HEAD", Some("application/json")), Reaction::Success);
        for status in [100, 199, 300, 304, 428, 430, 500, 503] {
            assert_eq!(reaction(status, "GET", None), Reaction::Nothing, "{status}");
        }
    }
}
