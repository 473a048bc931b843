//! The bits of Python the reference report is made of: `repr(float)`, `"%g"`, `"%.Nf"`,
//! `round(x, n)`, `float(str)`, `int(str)`, `str()`/`repr()` of JSON-like values and
//! `json.dumps(value, indent=2)` (which escapes every non-ASCII character).
//!
//! Rust's float formatting is exact and rounds exact ties to even, as CPython's `dtoa` does,
//! so the helpers only rearrange Rust's digits into Python's layouts.

use core::fmt::Write;

/// A Python value as `json.load` produces it (and as the report's `json.dumps` consumes it).
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    /// `None` / `null`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An `int`.
    Int(i128),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `list`.
    List(Vec<PyValue>),
    /// A `dict`, in insertion order.
    Dict(Vec<(String, PyValue)>),
}

impl PyValue {
    /// The value `json.load` would give for this JSON (object keys come in the order
    /// `serde_json` keeps them, which is sorted rather than the file's order).
    pub fn from_json(v: &serde_json::Value) -> PyValue {
        use serde_json::Value;
        match v {
            Value::Null => PyValue::None,
            Value::Bool(b) => PyValue::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => PyValue::Int(i.into()),
                (_, Some(u)) => PyValue::Int(u.into()),
                _ => PyValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => PyValue::Str(s.clone()),
            Value::Array(items) => PyValue::List(items.iter().map(PyValue::from_json).collect()),
            Value::Object(map) => PyValue::Dict(map.iter().map(|(k, v)| (k.clone(), PyValue::from_json(v))).collect()),
        }
    }

    /// `str(value)`: a string as is, anything else as its `repr`.
    pub fn to_str(&self) -> String {
        match self {
            PyValue::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    /// `repr(value)`.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            PyValue::None => out.push_str("None"),
            PyValue::Bool(true) => out.push_str("True"),
            PyValue::Bool(false) => out.push_str("False"),
            PyValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            PyValue::Float(x) => out.push_str(&float_repr(*x)),
            PyValue::Str(s) => out.push_str(&str_repr(s)),
            PyValue::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_repr(out);
                }
                out.push(']');
            }
            PyValue::Dict(items) => {
                out.push('{');
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&str_repr(k));
                    out.push_str(": ");
                    v.write_repr(out);
                }
                out.push('}');
            }
        }
    }

    /// `float(value)` for the types `float()` accepts (numbers, booleans, numeric strings).
    pub fn to_float(&self) -> Option<f64> {
        match self {
            PyValue::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            PyValue::Int(i) => Some(*i as f64),
            PyValue::Float(x) => Some(*x),
            PyValue::Str(s) => parse_float(s),
            _ => None,
        }
    }

    /// Python truthiness.
    pub fn is_truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(i) => *i != 0,
            PyValue::Float(x) => *x != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(v) => !v.is_empty(),
            PyValue::Dict(v) => !v.is_empty(),
        }
    }

    /// `json.dumps(value, indent=2)`.
    pub fn dumps(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out, 0);
        out
    }

    fn write_json(&self, out: &mut String, depth: usize) {
        fn newline(out: &mut String, depth: usize) {
            out.push('\n');
            for _ in 0..depth {
                out.push_str("  ");
            }
        }
        match self {
            PyValue::None => out.push_str("null"),
            PyValue::Bool(true) => out.push_str("true"),
            PyValue::Bool(false) => out.push_str("false"),
            PyValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            PyValue::Float(x) if x.is_nan() => out.push_str("NaN"),
            PyValue::Float(x) if x.is_infinite() => out.push_str(if *x > 0.0 { "Infinity" } else { "-Infinity" }),
            PyValue::Float(x) => out.push_str(&float_repr(*x)),
            PyValue::Str(s) => json_string(out, s),
            PyValue::List(items) if items.is_empty() => out.push_str("[]"),
            PyValue::Dict(items) if items.is_empty() => out.push_str("{}"),
            PyValue::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, depth + 1);
                    item.write_json(out, depth + 1);
                }
                newline(out, depth);
                out.push(']');
            }
            PyValue::Dict(items) => {
                out.push('{');
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, depth + 1);
                    json_string(out, k);
                    out.push_str(": ");
                    v.write_json(out, depth + 1);
                }
                newline(out, depth);
                out.push('}');
            }
        }
    }
}

impl From<&str> for PyValue {
    fn from(s: &str) -> Self {
        PyValue::Str(s.into())
    }
}
impl From<String> for PyValue {
    fn from(s: String) -> Self {
        PyValue::Str(s)
    }
}
impl From<f64> for PyValue {
    fn from(x: f64) -> Self {
        PyValue::Float(x)
    }
}
impl From<u64> for PyValue {
    fn from(i: u64) -> Self {
        PyValue::Int(i.into())
    }
}
impl From<i64> for PyValue {
    fn from(i: i64) -> Self {
        PyValue::Int(i.into())
    }
}
impl<T: Into<PyValue>> From<Option<T>> for PyValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(PyValue::None, Into::into)
    }
}
impl<T: Into<PyValue>> From<Vec<T>> for PyValue {
    fn from(v: Vec<T>) -> Self {
        PyValue::List(v.into_iter().map(Into::into).collect())
    }
}

/// A JSON string as `json.dumps` writes it with `ensure_ascii=True`.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `repr(str)`: single quotes unless the text has a single quote and no double quote.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa1).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Sign, significant digits (no dot) and decimal exponent of Rust's `{:e}` / `{:.Ne}` text.
fn sci_parts(text: &str) -> (bool, String, i32) {
    let (neg, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = text.split_once('e').unwrap_or((text, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (neg, digits, exp.parse().unwrap_or(0))
}

/// Digits laid out around the decimal point `decpt` (value = 0.DIGITS x 10^decpt).
fn fixed_layout(digits: &str, decpt: i32, dot_zero: bool) -> String {
    let len = digits.len() as i32;
    if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= len {
        let zeros = "0".repeat((decpt - len) as usize);
        if dot_zero {
            format!("{digits}{zeros}.0")
        } else {
            format!("{digits}{zeros}")
        }
    } else {
        format!("{}.{}", &digits[..decpt as usize], &digits[decpt as usize..])
    }
}

fn exp_layout(digits: &str, exp: i32) -> String {
    let (first, rest) = digits.split_at(1);
    let dot = if rest.is_empty() { String::new() } else { format!(".{rest}") };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{first}{dot}e{sign}{:02}", exp.unsigned_abs())
}

/// `repr(x)` for a float: the shortest round-trip digits, in exponent form when the
/// decimal exponent is below -4 or at least 16, otherwise fixed with at least `.0`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let (neg, digits, exp) = sci_parts(&format!("{x:e}"));
    let body = if !(-4..16).contains(&exp) { exp_layout(&digits, exp) } else { fixed_layout(&digits, exp + 1, true) };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `"%g" % x`: six significant digits, trailing zeros dropped, exponent form below 1e-4
/// and from 1e6 up.
pub fn format_g(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let (neg, digits, exp) = sci_parts(&format!("{x:.5e}"));
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let body = if !(-4..6).contains(&exp) { exp_layout(digits, exp) } else { fixed_layout(digits, exp + 1, false) };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `"%.{prec}f" % x`.
pub fn format_f(x: f64, prec: usize) -> String {
    format!("{x:.prec$}")
}

/// `round(x, ndigits)` for a float: the nearest float to the correctly rounded decimal.
pub fn round(x: f64, ndigits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.ndigits$}").parse().unwrap_or(x)
}

/// `floor(x)`, without a libm call for the values a simulation meets (`f64::floor` is one
/// on x86-64 without SSE4.1).
#[inline]
pub fn floor(x: f64) -> f64 {
    if x.abs() < 4.0e15 {
        let f = (x as i64) as f64;
        if f > x {
            f - 1.0
        } else {
            f
        }
    } else {
        x.floor()
    }
}

/// `trunc(x)`, without a libm call for the values a simulation meets (as [`floor`]).
#[inline]
pub fn trunc(x: f64) -> f64 {
    if x.abs() < 4.0e15 {
        // (a cast drops the sign of a zero: -0.5 and -0.0 truncate to -0.0)
        ((x as i64) as f64).copysign(x)
    } else {
        x.trunc()
    }
}

/// `int(x)` (truncation toward zero) of a finite float.
#[inline]
pub fn trunc_int(x: f64) -> i128 {
    if x.abs() < 4.0e15 {
        i128::from(x as i64)
    } else {
        x.trunc() as i128
    }
}

/// Python's `str.isspace()` for one character (what `strip()` and `float()` trim).
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Removes `_` separators, which Python allows only between two digits.
fn strip_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.into());
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            let before = i > 0 && chars[i - 1].is_ascii_digit();
            let after = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if !(before && after) {
                return None;
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// `float(text)`: surrounding whitespace and `_` between digits allowed, `inf` and `nan`
/// in any case.
pub fn parse_float(text: &str) -> Option<f64> {
    plain_decimal(text.as_bytes()).or_else(|| any_float(text))
}

/// [`parse_float`] of a text given as bytes (`None` when they are not UTF-8): a plain
/// decimal is read without looking at them as text.
#[inline]
pub fn parse_float_bytes(bytes: &[u8]) -> Option<f64> {
    plain_decimal(bytes).or_else(|| any_float(core::str::from_utf8(bytes).ok()?))
}

/// [`parse_float`] of whatever `float()` takes.
fn any_float(text: &str) -> Option<f64> {
    let s = strip_underscores(text.trim_matches(is_space))?;
    let lower = s.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if lower.len() - unsigned.len() > 1 {
        return None;
    }
    if matches!(unsigned, "inf" | "infinity" | "nan") {
        return lower.parse().ok();
    }
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit() || b"+-.e".contains(&b)) {
        return None;
    }
    s.parse().ok()
}

/// `float(text)` for the commonest case, a plain decimal (`-`, digits with at most one `.`)
/// of at most 2^53 without its point and at most 22 digits after it: that integer divided by
/// a power of ten, both exact, so the division rounds once, correctly, as Python's reading
/// does. `None` for anything else.
pub fn plain_decimal(bytes: &[u8]) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ];
    // one digit (a trace's usual cost)
    if let [d @ b'0'..=b'9'] = bytes {
        return Some(f64::from(d - b'0'));
    }
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    if digits.len() <= 15 {
        // at most 15 digits: below 2^53 whatever they are, no check on the way; the whole
        // part, then what follows a point
        let (mut m, mut i) = (0u64, 0);
        while i < digits.len() {
            let d = digits[i].wrapping_sub(b'0');
            if d >= 10 {
                break;
            }
            m = m * 10 + u64::from(d);
            i += 1;
        }
        let whole = i;
        let mut after = 0;
        if i < digits.len() {
            if digits[i] != b'.' {
                return None;
            }
            after = digits.len() - i - 1;
            for &b in &digits[i + 1..] {
                let d = b.wrapping_sub(b'0');
                if d >= 10 {
                    return None;
                }
                m = m * 10 + u64::from(d);
            }
        }
        if whole + after == 0 {
            return None;
        }
        let x = m as f64 / POW10[after];
        return Some(if negative { -x } else { x });
    }
    let (mut m, mut seen, mut point) = (0u64, false, None);
    for (i, &b) in digits.iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(b - b'0');
                if m > 1 << 53 {
                    return None;
                }
                seen = true;
            }
            b'.' if point.is_none() => point = Some(i),
            _ => return None,
        }
    }
    let after = point.map_or(0, |p| digits.len() - p - 1);
    if !seen || after >= POW10.len() {
        return None;
    }
    let x = m as f64 / POW10[after];
    Some(if negative { -x } else { x })
}

/// [`plain_decimal`] of the first `len` bytes (1 to 8) of `word`, eight bytes of text with
/// the first in its lowest byte (the bytes after them are ignored): digits with at most one
/// `.` among them, read eight at a time. The integer the digits make and the power of ten it
/// is divided by are `plain_decimal`'s, so the result is its result, bit for bit. `None` for
/// anything else (a sign, say), which `plain_decimal` then reads.
#[inline(always)]
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub fn decimal_word(word: u64, len: usize) -> Option<f64> {
    const POW10: [f64; 8] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    debug_assert!((1..=8).contains(&len));
    // the high bit of each byte of the text
    let text = !LOW >> (64 - 8 * len);
    // a digit's byte becomes its value, any other byte 10 or more
    let value = word ^ (ONES * u64::from(b'0'));
    let not_digit = (((value & LOW) + ONES * (0x80 - 10)) | value) & text;
    // a point's byte becomes 0, any other byte something else
    let point = word ^ (ONES * u64::from(b'.'));
    let point = !(((point & LOW) + LOW) | point) & text;
    if not_digit != point || point & point.wrapping_sub(1) != 0 || len == usize::from(point != 0) {
        return None;
    }
    // the digits' values without the point, the first lowest, behind zeros to make eight
    let digits = value & (((text & !point) >> 7) * 0xff);
    let below = (point >> 7).wrapping_sub(1);
    let digits = (digits & below) | ((digits >> 8) & !below);
    let n = len - usize::from(point != 0);
    let mut m = digits << (8 * (8 - n));
    // pairs, then fours, then all eight: each step a multiply
    m = m.wrapping_mul(10).wrapping_add(m >> 8);
    m = ((m & 0x0000_00ff_0000_00ff)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((m >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32))))
        >> 32;
    let after = if point == 0 { 0 } else { len - 1 - point.trailing_zeros() as usize / 8 };
    Some(f64::from(m as u32) / POW10[after])
}

/// `int(text)` in base 10.
pub fn parse_int(text: &str) -> Option<i128> {
    let s = strip_underscores(text.trim_matches(is_space))?;
    let digits = s.strip_prefix(['+', '-']).unwrap_or(&s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUES: &[f64] = &[
        0.0,
        -0.0,
        0.125,
        0.375,
        2.5,
        0.5,
        1.5,
        62.5,
        2.675,
        1e16,
        1e15,
        1e-5,
        1e-4,
        0.00012345,
        123456789.0,
        0.30000000000000004,
        1e22,
        5e-324,
        999999.5,
        1234567.0,
        0.1666666666666666,
        59.94999999999999,
        300.0,
        -12.25,
        1.7976931348623157e308,
        123456.5,
    ];

    // Produced with Python 3.11.7:
    //   for x in VALUES: print(repr(x), '%g' % x, '%.1f' % x, '%.0f' % x, repr(round(x, 1)), repr(round(x, 2)))
    const PYTHON: &[(&str, &str, &str, &str, &str, &str)] = &[
        ("0.0", "0", "0.0", "0", "0.0", "0.0"),
        ("-0.0", "-0", "-0.0", "-0", "-0.0", "-0.0"),
        ("0.125", "0.125", "0.1", "0", "0.1", "0.12"),
        ("0.375", "0.375", "0.4", "0", "0.4", "0.38"),
        ("2.5", "2.5", "2.5", "2", "2.5", "2.5"),
        ("0.5", "0.5", "0.5", "0", "0.5", "0.5"),
        ("1.5", "1.5", "1.5", "2", "1.5", "1.5"),
        ("62.5", "62.5", "62.5", "62", "62.5", "62.5"),
        ("2.675", "2.675", "2.7", "3", "2.7", "2.67"),
        ("1e+16", "1e+16", "10000000000000000.0", "10000000000000000", "1e+16", "1e+16"),
        (
            "1000000000000000.0",
            "1e+15",
            "1000000000000000.0",
            "1000000000000000",
            "1000000000000000.0",
            "1000000000000000.0",
        ),
        ("1e-05", "1e-05", "0.0", "0", "0.0", "0.0"),
        ("0.0001", "0.0001", "0.0", "0", "0.0", "0.0"),
        ("0.00012345", "0.00012345", "0.0", "0", "0.0", "0.0"),
        ("123456789.0", "1.23457e+08", "123456789.0", "123456789", "123456789.0", "123456789.0"),
        ("0.30000000000000004", "0.3", "0.3", "0", "0.3", "0.3"),
        ("1e+22", "1e+22", "10000000000000000000000.0", "10000000000000000000000", "1e+22", "1e+22"),
        ("5e-324", "4.94066e-324", "0.0", "0", "0.0", "0.0"),
        ("999999.5", "1e+06", "999999.5", "1000000", "999999.5", "999999.5"),
        ("1234567.0", "1.23457e+06", "1234567.0", "1234567", "1234567.0", "1234567.0"),
        ("0.1666666666666666", "0.166667", "0.2", "0", "0.2", "0.17"),
        ("59.94999999999999", "59.95", "59.9", "60", "59.9", "59.95"),
        ("300.0", "300", "300.0", "300", "300.0", "300.0"),
        ("-12.25", "-12.25", "-12.2", "-12", "-12.2", "-12.25"),
        ("1.7976931348623157e+308", "1.79769e+308", "", "", "1.7976931348623157e+308", "1.7976931348623157e+308"),
        ("123456.5", "123456", "123456.5", "123456", "123456.5", "123456.5"),
    ];

    #[test]
    fn float_formatting_matches_python() {
        for (x, (repr, g, f1, f0, r1, r2)) in VALUES.iter().zip(PYTHON) {
            assert_eq!(float_repr(*x), *repr, "repr({x:e})");
            assert_eq!(format_g(*x), *g, "%g of {x:e}");
            if !f1.is_empty() {
                assert_eq!(format_f(*x, 1), *f1, "%.1f of {x:e}");
                assert_eq!(format_f(*x, 0), *f0, "%.0f of {x:e}");
            }
            assert_eq!(float_repr(round(*x, 1)), *r1, "round({x:e}, 1)");
            assert_eq!(float_repr(round(*x, 2)), *r2, "round({x:e}, 2)");
        }
    }

    #[test]
    fn dumps_matches_python() {
        // python3: print(json.dumps({"a": [1, 2.5, None], "b": [], "c": {}, "d": "é\"\u0001😀", "e": True}, indent=2))
        let v = PyValue::Dict(vec![
            ("a".into(), PyValue::List(vec![PyValue::Int(1), PyValue::Float(2.5), PyValue::None])),
            ("b".into(), PyValue::List(vec![])),
            ("c".into(), PyValue::Dict(vec![])),
            ("d".into(), PyValue::Str("é\"\u{1}😀".into())),
            ("e".into(), PyValue::Bool(true)),
        ]);
        let want = "{\n  \"a\": [\n    1,\n    2.5,\n    null\n  ],\n  \"b\": [],\n  \"c\": {},\n  \
                    \"d\": \"\\u00e9\\\"\\u0001\\ud83d\\ude00\",\n  \"e\": true\n}";
        assert_eq!(v.dumps(), want);
    }

    #[test]
    fn repr_matches_python() {
        // python3: repr("it's"), repr('say "hi"'), repr("a\\b\n"), repr([1, 'x', None, 2.0, {'k': True}])
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("say \"hi\""), "'say \"hi\"'");
        assert_eq!(str_repr("a\\b\n"), "'a\\\\b\\n'");
        let list = PyValue::List(vec![
            PyValue::Int(1),
            "x".into(),
            PyValue::None,
            PyValue::Float(2.0),
            PyValue::Dict(vec![("k".into(), PyValue::Bool(true))]),
        ]);
        assert_eq!(list.repr(), "[1, 'x', None, 2.0, {'k': True}]");
    }

    #[test]
    fn parsing_follows_python() {
        // python3: float(" 1_000.5 "), float("+.5"), float("1e3"), float("-INF"); int(" 0_7 ")
        assert_eq!(parse_float(" 1_000.5 "), Some(1000.5));
        assert_eq!(parse_float("+.5"), Some(0.5));
        assert_eq!(parse_float("1e3"), Some(1000.0));
        assert_eq!(parse_float("-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_int(" 0_7 "), Some(7));
        // python3: each of these raises ValueError
        for bad in ["", "abc", "1__0", "_1", "1_", "--1", "0x10", "1,5", "1 2"] {
            assert_eq!(parse_float(bad), None, "{bad:?}");
        }
        for bad in ["", "1.0", "1e3", "_1", "+"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4_000))]

            /// A plain decimal reads as Rust's correctly rounded parse does, or not at all.
            #[test]
            fn a_plain_decimal_reads_as_a_correctly_rounded_parse(
                text in "-?[0-9]{0,18}(\\.[0-9]{0,24})?",
            ) {
                let text = text.as_str();
                let read = plain_decimal(text.as_bytes());
                if let Some(x) = read {
                    prop_assert_eq!(x.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{}", text);
                }
                prop_assert_eq!(parse_float(text).map(f64::to_bits), text.parse::<f64>().ok().map(f64::to_bits));
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(20_000))]

            /// Eight bytes at a time read what `plain_decimal` reads, whatever bytes follow.
            #[test]
            fn a_word_reads_as_plain_decimal_reads(
                text in "[0-9]{1,4}\\.?[0-9]{0,3}|\\.?[0-9]{1,7}|[0-9]{1,7}\\.?|[0-9.]{1,8}|[0-9.+e_ a-]{1,8}",
                after in any::<[u8; 8]>(),
            ) {
                let len = text.len();
                prop_assume!((1..=8).contains(&len));
                let mut word = after;
                word[..len].copy_from_slice(text.as_bytes());
                let got = decimal_word(u64::from_le_bytes(word), len);
                let want = plain_decimal(text.as_bytes());
                if text.bytes().any(|b| b != b'.' && !b.is_ascii_digit()) {
                    prop_assert_eq!(got, None, "{}", text);
                } else {
                    prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{}", text);
                }
            }
        }

        proptest! {
            /// The cast's truncation is `f64::trunc`, to the bit (signed zeros too).
            #[test]
            fn trunc_is_the_libm_one(x in prop_oneof![any::<f64>(), -1.0e3..1.0e3f64, -1.0..1.0f64]) {
                prop_assert_eq!(trunc(x).to_bits(), x.trunc().to_bits());
            }
        }

        /// Every text of up to five bytes of digits, points and a few others, behind every
        /// kind of byte: read eight at a time, it is what `plain_decimal` reads, and only
        /// digits with at most one point (and at least one digit) read.
        #[test]
        fn every_short_text_reads_in_a_word_as_plain_decimal_reads_it() {
            let alphabet = b"0159.-+e_ /";
            let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
            for _ in 0..5 {
                let longer: Vec<Vec<u8>> = texts
                    .iter()
                    .filter(|t| t.len() == texts.last().map_or(0, Vec::len))
                    .flat_map(|t| alphabet.iter().map(move |&b| [t.as_slice(), &[b]].concat()))
                    .collect();
                texts.extend(longer);
            }
            let (mut read, mut refused) = (0, 0);
            for text in texts.iter().filter(|t| !t.is_empty()) {
                for fill in [b'0', b'.', b'9', 0x00, 0xff, b','] {
                    let mut word = [fill; 8];
                    word[..text.len()].copy_from_slice(text);
                    let got = decimal_word(u64::from_le_bytes(word), text.len());
                    let plain = text.iter().all(|&b| b == b'.' || b.is_ascii_digit())
                        && text.iter().filter(|&&b| b == b'.').count() <= 1
                        && text.iter().any(u8::is_ascii_digit);
                    if plain {
                        assert_eq!(got.map(f64::to_bits), plain_decimal(text).map(f64::to_bits), "{text:?}");
                        assert!(got.is_some());
                        read += 1;
                    } else {
                        assert_eq!(got, None, "{text:?}");
                        refused += 1;
                    }
                }
            }
            assert!(read > 1000 && refused > 1000, "{read} {refused}");
            // all eight bytes, the point anywhere or nowhere
            let all = |text: &[u8]| decimal_word(u64::from_le_bytes(text.try_into().unwrap()), 8);
            assert_eq!(all(b"99999999"), Some(99_999_999.0));
            assert_eq!(all(b"1234.567"), Some(1234.567));
            assert_eq!(all(b".1234567"), Some(0.1234567));
            assert_eq!(all(b"1234567."), Some(1_234_567.0));
            assert_eq!(all(b"0000.015"), Some(0.015));
            assert_eq!(all(b"12.34.56"), None);
        }

        #[test]
        fn every_digit_reads_as_itself() {
            for d in 0..10u8 {
                let text = [b'0' + d];
                assert_eq!(plain_decimal(&text), Some(f64::from(d)));
            }
        }
    }
}
