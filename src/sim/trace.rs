//! Recorded traffic: a CSV with a header naming `t,client[,endpoint][,cost]`, read the way
//! Python's `csv.DictReader` reads it (quoted fields, `""` escapes, blank lines skipped,
//! `\n`, `\r\n` or `\r` line ends, missing cells `None`, a repeated column's last cell wins).

use super::engine::Request;
use super::py;
use super::SimError;

/// Splits text into lines the way a file opened with `newline=""` yields them.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    core::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let mut end = start;
        while end < bytes.len() && bytes[end] != b'\n' && bytes[end] != b'\r' {
            end += 1;
        }
        if end < bytes.len() {
            end += if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') { 2 } else { 1 };
        }
        let line = &text[start..end];
        start = end;
        Some(line)
    })
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    StartRecord,
    StartField,
    InField,
    InQuotedField,
    QuoteInQuotedField,
    EatCrNl,
}

/// CSV records in the `excel` dialect, as `csv.reader` returns them (a blank line is `[]`).
pub fn records(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut state = State::StartRecord;
    for line in lines(text) {
        // `None` stands for the end of the line.
        for c in line.chars().map(Some).chain([None]) {
            let eol = c.is_none();
            let newline = matches!(c, Some('\n' | '\r'));
            if state == State::StartRecord {
                if eol {
                    out.push(core::mem::take(&mut fields));
                    continue;
                }
                if newline {
                    state = State::EatCrNl;
                    continue;
                }
                state = State::StartField;
            }
            match state {
                State::StartField | State::InField | State::QuoteInQuotedField if eol || newline => {
                    fields.push(core::mem::take(&mut field));
                    state = if eol { State::StartRecord } else { State::EatCrNl };
                }
                State::StartField if c == Some('"') => state = State::InQuotedField,
                State::StartField | State::InField | State::QuoteInQuotedField if c == Some(',') => {
                    fields.push(core::mem::take(&mut field));
                    state = State::StartField;
                }
                State::StartField | State::InField => {
                    field.extend(c);
                    state = State::InField;
                }
                State::InQuotedField => match c {
                    None => {}
                    Some('"') => state = State::QuoteInQuotedField,
                    Some(c) => field.push(c),
                },
                State::QuoteInQuotedField => {
                    // `""` is a quote; anything else after the closing quote is kept (not strict)
                    field.extend(c);
                    state = if c == Some('"') { State::InQuotedField } else { State::InField };
                }
                State::EatCrNl => {
                    if eol {
                        state = State::StartRecord;
                    }
                }
                State::StartRecord => unreachable!(),
            }
            if state == State::StartRecord {
                out.push(core::mem::take(&mut fields));
            }
        }
    }
    if state == State::InQuotedField || !field.is_empty() {
        fields.push(field);
        out.push(fields);
    }
    out
}

/// Parses a trace; `label` names it in errors (the reference uses the path).
pub fn parse_trace(label: &str, text: &str) -> Result<Vec<Request>, SimError> {
    let mut rows = records(text).into_iter();
    let header = rows.next().unwrap_or_default();
    let col = |name: &str| header.iter().rposition(|h| h == name);
    let (t_col, client_col, endpoint_col, cost_col) = (col("t"), col("client"), col("endpoint"), col("cost"));
    let mut reqs = Vec::new();
    for (n, row) in rows.filter(|row| !row.is_empty()).enumerate() {
        let bad = || SimError::Input(format!("{label} line {}: need t,client[,endpoint][,cost]", n + 2));
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).map(String::as_str);
        let t = py::parse_float(cell(t_col).ok_or_else(bad)?).ok_or_else(bad)?;
        let client = cell(client_col).ok_or_else(bad)?.trim_matches(py::is_space).to_string();
        let endpoint = match cell(endpoint_col) {
            Some(e) if !e.is_empty() => e,
            _ => "/",
        };
        let endpoint = endpoint.trim_matches(py::is_space).to_string();
        let cost = match cell(cost_col) {
            Some(c) if !c.is_empty() => py::parse_float(c).ok_or_else(bad)?,
            _ => 1.0,
        };
        if !t.is_finite() || !cost.is_finite() {
            return Err(SimError::Input(format!("{label} line {}: t and cost must be finite numbers", n + 2)));
        }
        reqs.push(Request { t, client, endpoint, cost });
    }
    Ok(reqs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter().map(|r| r.iter().map(|s| s.to_string()).collect()).collect()
    }

    #[test]
    fn reads_like_python_csv() {
        // python3: list(csv.reader(io.StringIO(TEXT, newline="")))
        let text = "t,client\r\n1,\"a,b\"\n\n2,\"x\"\"y\"z\r3,\"multi\nline\"\n4,q\"r\n \n5,\"open";
        let want = strs(&[
            &["t", "client"],
            &["1", "a,b"],
            &[],
            &["2", "x\"yz"],
            &["3", "multi\nline"],
            &["4", "q\"r"],
            &[" "],
            &["5", "open"],
        ]);
        assert_eq!(records(text), want);
    }
}
