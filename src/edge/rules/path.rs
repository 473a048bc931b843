//! The path rules match: one spelling for every way of writing the same path.
//!
//! Routers decode a request path before they route it: nginx and Express send
//! `/%61pi/ping`, `/api%2Fping` and `/x/..%2fapi/ping` to the handler of `/api/ping`, and
//! Tomcat, Spring and Jetty send `/api;x/ping` and `/x/..;/api/ping` there too. A rule
//! that compared the path as sent would let each of those spellings past it. So rules match
//! [`normalise_path`]'s form, in this order:
//!
//! 1. Path parameters are removed from every segment: a raw `;` and everything after it up
//!    to the end of its segment (the next raw `/` or `\`), so `/api;jsessionid=1/ping` is
//!    `/api/ping` and `..;` is `..`. This comes before decoding, as in Tomcat: an escaped
//!    `%3B` is a literal `;` in a segment's name, and stays `%3B`.
//! 2. `%XX` escapes are decoded when they stand for `/` or an unreserved character
//!    (`A-Z a-z 0-9 - . _ ~`); every other escape stays, with upper-case hex (`%c3%a9` →
//!    `%C3%A9`).
//!    A raw `\` is a `/` (as the WHATWG URL parser and Cloudflare read it); any other byte
//!    that may not appear raw in a path (a space, `"`, `<`, a control character, anything
//!    non-ASCII) is escaped, so the raw and the escaped spelling agree.
//! 3. Dot segments (`.`, `..`, including the decoded `%2e%2e` and `..;`) are resolved,
//!    never above `/`.
//! 4. Repeated slashes are merged (`/api//ping` → `/api/ping`).
//!
//! Escapes are decoded once (`%2561` stays `%2561`, as nginx leaves it). A path with a
//! malformed escape (`%zz`, `%4`) or a NUL byte cannot be normalised: [`PathError`], even
//! inside a path parameter that is then removed.
//! Case is kept; rules compare case-insensitively unless they say otherwise.
//!
//! Cloudflare's own URL normalisation (type "Cloudflare", on by default for incoming URLs)
//! does steps 2–4 except that it leaves `%2F` encoded: `/api%2Fping` is not `/api/ping` to a
//! Cloudflare rule, but it is to nginx and Express, so it is here. It keeps path parameters,
//! which Tomcat, Spring and Jetty drop before routing, so they are dropped here.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Why a request path cannot be normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// A `%` not followed by two hex digits, at this byte offset.
    BadEscape {
        /// The offset of the `%`.
        at: usize,
    },
    /// A NUL byte (raw or `%00`), at this byte offset.
    Nul {
        /// The offset of the NUL or of its `%`.
        at: usize,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::BadEscape { at } => {
                write!(f, "the path has a '%' not followed by two hex digits at byte {at}")
            }
            PathError::Nul { at } => write!(f, "the path has a NUL byte at byte {at}"),
        }
    }
}

/// Unreserved characters (RFC 3986 §2.3): an escape of one of them is decoded.
const fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Bytes that stand raw in a normalised path: unreserved, sub-delims, `:`, `@`, `/`.
const fn is_raw_ok_slow(b: u8) -> bool {
    is_unreserved(b)
        || matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
        || matches!(b, b':' | b'@' | b'/')
}

/// [`is_raw_ok_slow`] as a table: one load per byte on the hot path.
const RAW_OK: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_raw_ok_slow(b as u8);
        b += 1;
    }
    table
};

fn is_raw_ok(b: u8) -> bool {
    RAW_OK[usize::from(b)]
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The normalised form of a request path (see the module docs), borrowed when the path is
/// already normal, which is the common case and allocates nothing.
///
/// # Examples
/// ```
/// use sluicegate::rules::normalise_path;
/// for spelling in [
///     "/api/ping", "/%61pi/ping", "/api%2Fping", "//api//ping", "/x/..%2fapi/ping", "/./api/./ping",
///     "/api;v=1/ping", "/api/ping;jsessionid=0", "/x/..;/api/ping",
/// ] {
///     assert_eq!(normalise_path(spelling).unwrap(), "/api/ping");
/// }
/// assert_eq!(normalise_path("/a%3Bb").unwrap(), "/a%3Bb", "an escaped ';' is part of the name");
/// assert_eq!(normalise_path("/caf\u{e9}").unwrap(), "/caf%C3%A9");
/// assert!(normalise_path("/api/%zz").is_err());
/// ```
///
/// # Errors
/// [`PathError`] for a malformed escape or a NUL byte.
pub fn normalise_path(path: &str) -> Result<Cow<'_, str>, PathError> {
    if is_normal(path.as_bytes()) {
        return Ok(Cow::Borrowed(path));
    }
    let decoded = decode(path.as_bytes())?;
    Ok(Cow::Owned(resolve(&decoded)))
}

/// Whether `path` is already in normal form: starts with `/`, no path parameter (raw `;`),
/// no byte that must be escaped, no escape that decodes or has lower-case hex, no empty,
/// `.` or `..` segment (a trailing `/` is kept).
fn is_normal(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') {
        return false;
    }
    let mut segment_start = 1;
    let mut i = 1;
    while i < path.len() {
        match path[i] {
            b'/' => {
                if i == segment_start || is_dot_segment(&path[segment_start..i]) {
                    return false;
                }
                segment_start = i + 1;
            }
            b'%' => match (path.get(i + 1), path.get(i + 2)) {
                (Some(&hi @ (b'0'..=b'9' | b'A'..=b'F')), Some(&lo @ (b'0'..=b'9' | b'A'..=b'F'))) => {
                    let byte = hex(hi).unwrap_or(0) << 4 | hex(lo).unwrap_or(0);
                    if byte == 0 || byte == b'/' || is_unreserved(byte) {
                        return false;
                    }
                    i += 2;
                }
                _ => return false,
            },
            b';' => return false,
            b if !is_raw_ok(b) => return false,
            _ => {}
        }
        i += 1;
    }
    !is_dot_segment(&path[segment_start..])
}

fn is_dot_segment(segment: &[u8]) -> bool {
    segment == b"." || segment == b".."
}

/// Steps 1 and 2: path parameters dropped (their escapes still checked), then escapes
/// decoded or re-cased and raw bytes escaped where they must be.
fn decode(path: &[u8]) -> Result<Vec<u8>, PathError> {
    let mut out = Vec::with_capacity(path.len() + 1);
    if path.first() != Some(&b'/') {
        out.push(b'/');
    }
    // Inside a path parameter: from a raw `;` to the end of its segment.
    let mut in_parameter = false;
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        if b == b'%' {
            let byte = match (path.get(i + 1).copied().and_then(hex), path.get(i + 2).copied().and_then(hex)) {
                (Some(hi), Some(lo)) => hi << 4 | lo,
                _ => return Err(PathError::BadEscape { at: i }),
            };
            if byte == 0 {
                return Err(PathError::Nul { at: i });
            }
            if !in_parameter {
                if is_unreserved(byte) || byte == b'/' {
                    out.push(byte);
                } else {
                    out.extend_from_slice(&[b'%', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 15)]]);
                }
            }
            i += 3;
            continue;
        }
        match b {
            0 => return Err(PathError::Nul { at: i }),
            b'/' | b'\\' => {
                in_parameter = false;
                out.push(b'/');
            }
            b';' => in_parameter = true,
            _ if in_parameter => {}
            _ if is_raw_ok(b) => out.push(b),
            _ => out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]),
        }
        i += 1;
    }
    Ok(out)
}

/// Steps 3 and 4 on a decoded path (which starts with `/`): empty and `.` segments dropped,
/// `..` removes the segment before it; a path that ended in a `/`, `.` or `..` segment keeps
/// its trailing `/`.
fn resolve(path: &[u8]) -> String {
    let mut out = String::with_capacity(path.len());
    let mut segments = path.split(|&b| b == b'/').skip(1).peekable();
    let mut trailing_slash = false;
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            b"" | b"." => trailing_slash = last,
            b".." => {
                let cut = out.rfind('/').unwrap_or(0);
                out.truncate(cut);
                trailing_slash = last;
            }
            _ => {
                out.push('/');
                // Only ASCII is left after `decode`: every other byte was escaped.
                out.extend(segment.iter().map(|&b| char::from(b)));
                trailing_slash = false;
            }
        }
    }
    if trailing_slash || out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_spellings_of_one_path_normalise_alike() {
        for spelling in [
            "/api/ping",
            "/%61pi/ping",
            "/ap%69/ping",
            "/%61%70%69/%70%69%6e%67",
            "/api%2Fping",
            "/api%2fping",
            "/%2Fapi/ping",
            "//api/ping",
            "/api//ping",
            "/x/..%2fapi/ping",
            "/x/%2e%2e/api/ping",
            "/./api/ping",
            "/api/./ping",
            "/../api/ping",
            "/api/x/../ping",
            "/api/%2E/ping",
        ] {
            assert_eq!(normalise_path(spelling).unwrap(), "/api/ping", "{spelling}");
        }
    }

    #[test]
    fn a_path_that_is_already_normal_is_borrowed() {
        for path in ["/", "/api/ping", "/api/", "/a,b=c/d:e@f", "/caf%C3%A9", "/a%3Bb"] {
            assert!(matches!(normalise_path(path).unwrap(), Cow::Borrowed(_)), "{path}");
        }
    }

    #[test]
    fn reserved_escapes_stay_escaped_with_upper_case_hex() {
        assert_eq!(normalise_path("/a%3fb").unwrap(), "/a%3Fb");
        assert_eq!(normalise_path("/a%25b").unwrap(), "/a%25b");
        assert_eq!(normalise_path("/a%2561").unwrap(), "/a%2561", "decoded once only");
        assert_eq!(normalise_path("/caf%c3%a9").unwrap(), "/caf%C3%A9");
        assert_eq!(normalise_path("/a%5cb").unwrap(), "/a%5Cb");
    }

    #[test]
    fn raw_bytes_that_may_not_stand_in_a_path_are_escaped() {
        assert_eq!(normalise_path("/caf\u{e9}").unwrap(), "/caf%C3%A9");
        assert_eq!(normalise_path("/a b").unwrap(), normalise_path("/a%20b").unwrap());
        assert_eq!(normalise_path("/a\\b").unwrap(), "/a/b", "a raw backslash is a slash, as in a URL");
        assert_eq!(normalise_path("/\\api\\ping").unwrap(), "/api/ping");
    }

    #[test]
    fn dot_segments_never_climb_above_the_root_and_keep_a_trailing_slash() {
        assert_eq!(normalise_path("/..").unwrap(), "/");
        assert_eq!(normalise_path("/../..//").unwrap(), "/");
        assert_eq!(normalise_path("/api/.").unwrap(), "/api/");
        assert_eq!(normalise_path("/api/x/..").unwrap(), "/api/");
        assert_eq!(normalise_path("/api//").unwrap(), "/api/");
        assert_eq!(normalise_path("/a/...").unwrap(), "/a/...", "three dots are a name");
        assert_eq!(normalise_path("").unwrap(), "/");
        assert_eq!(normalise_path("api/x").unwrap(), "/api/x");
    }

    #[test]
    fn path_parameters_are_removed_from_every_segment_before_decoding() {
        for (sent, normal) in [
            ("/api;x/ping", "/api/ping"),
            ("/api;a=1;b=2/ping;jsessionid=F00", "/api/ping"),
            ("/api/analyze/..;/analyze", "/api/analyze"),
            ("/api/x/..;y/ping", "/api/ping"),
            ("/api/.;/ping", "/api/ping"),
            ("/;x/api/ping", "/api/ping"),
            ("/api;x\\ping", "/api/ping"),
            ("/api;x%2Fy/ping", "/api/ping"),
            ("/api/ping;", "/api/ping"),
            ("/api/;x", "/api/"),
            ("/;", "/"),
        ] {
            assert_eq!(normalise_path(sent).unwrap(), normal, "{sent}");
        }
        assert_eq!(normalise_path("/a%3Bx/ping").unwrap(), "/a%3Bx/ping", "an escaped ';' is a literal");
        assert_eq!(normalise_path("/a%3bx/..;/ping").unwrap(), "/ping");
        assert!(matches!(normalise_path("/api;x/ping").unwrap(), Cow::Owned(_)), "a raw ';' is never normal");
        assert_eq!(normalise_path("/api;%zz/ping"), Err(PathError::BadEscape { at: 5 }), "checked, then dropped");
        assert_eq!(normalise_path("/api;%00/ping"), Err(PathError::Nul { at: 5 }));
    }

    #[test]
    fn malformed_escapes_and_nul_bytes_are_refused_with_their_offset() {
        assert_eq!(normalise_path("/api/%zz"), Err(PathError::BadEscape { at: 5 }));
        assert_eq!(normalise_path("/api/%4"), Err(PathError::BadEscape { at: 5 }));
        assert_eq!(normalise_path("/api/%"), Err(PathError::BadEscape { at: 5 }));
        assert_eq!(normalise_path("/a%00b"), Err(PathError::Nul { at: 2 }));
        assert_eq!(normalise_path("/a\0b"), Err(PathError::Nul { at: 2 }));
        assert!(normalise_path("/a%00b").unwrap_err().to_string().contains("NUL"));
    }
}
