//! Recorded traffic: a CSV with a header naming `t,client[,endpoint][,cost]`, read the way
//! Python's `csv.DictReader` reads it (quoted fields, `""` escapes, blank lines skipped,
//! `\n`, `\r\n` or `\r` line ends, missing cells `None`, a repeated column's last cell wins).

use super::engine::Traffic;
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

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    StartRecord,
    StartField,
    InField,
    InQuotedField,
    QuoteInQuotedField,
    EatCrNl,
}

/// The `excel` dialect's record parser, fed one line at a time (`csv.reader`'s state
/// machine). Field buffers are reused from record to record.
#[derive(Clone, Debug)]
struct Csv {
    state: State,
    field: String,
    fields: Vec<String>,
    n: usize,
}

impl Csv {
    fn new() -> Self {
        Csv { state: State::StartRecord, field: String::new(), fields: Vec::new(), n: 0 }
    }

    fn push_field(&mut self) {
        if self.n == self.fields.len() {
            self.fields.push(String::new());
        }
        core::mem::swap(&mut self.field, &mut self.fields[self.n]);
        self.field.clear();
        self.n += 1;
    }

    /// The last complete record.
    fn record(&self) -> &[String] {
        &self.fields[..self.n]
    }

    /// Feeds one line, its line end included; true when it completes a record (a blank line
    /// is an empty record). A line completes at most one record.
    fn line(&mut self, line: &str) -> bool {
        if self.state == State::StartRecord {
            self.n = 0;
            if !line.contains('"') {
                // No quotes: the fields are what lies between the commas.
                let body = line.strip_suffix('\n').unwrap_or(line);
                let body = body.strip_suffix('\r').unwrap_or(body);
                if !body.is_empty() {
                    for cell in body.split(',') {
                        self.field.push_str(cell);
                        self.push_field();
                    }
                }
                return true;
            }
        }
        let mut done = false;
        // `None` stands for the end of the line.
        for c in line.chars().map(Some).chain([None]) {
            let eol = c.is_none();
            let newline = matches!(c, Some('\n' | '\r'));
            if self.state == State::StartRecord {
                if eol {
                    return true;
                }
                if newline {
                    self.state = State::EatCrNl;
                    continue;
                }
                self.state = State::StartField;
            }
            match self.state {
                State::StartField | State::InField | State::QuoteInQuotedField if eol || newline => {
                    self.push_field();
                    self.state = if eol { State::StartRecord } else { State::EatCrNl };
                }
                State::StartField if c == Some('"') => self.state = State::InQuotedField,
                State::StartField | State::InField | State::QuoteInQuotedField if c == Some(',') => {
                    self.push_field();
                    self.state = State::StartField;
                }
                State::StartField | State::InField => {
                    self.field.extend(c);
                    self.state = State::InField;
                }
                State::InQuotedField => match c {
                    None => {}
                    Some('"') => self.state = State::QuoteInQuotedField,
                    Some(c) => self.field.push(c),
                },
                State::QuoteInQuotedField => {
                    // `""` is a quote; anything else after the closing quote is kept (not strict)
                    self.field.extend(c);
                    self.state = if c == Some('"') { State::InQuotedField } else { State::InField };
                }
                State::EatCrNl => {
                    if eol {
                        self.state = State::StartRecord;
                    }
                }
                State::StartRecord => unreachable!(),
            }
            if self.state == State::StartRecord {
                done = true;
            }
        }
        done
    }

    /// At the end of the input: true when an unfinished record remains (now complete).
    fn finish(&mut self) -> bool {
        if self.state == State::InQuotedField || !self.field.is_empty() {
            self.push_field();
            self.state = State::StartRecord;
            return true;
        }
        false
    }
}

/// CSV records in the `excel` dialect, as `csv.reader` returns them (a blank line is `[]`).
pub fn records(text: &str) -> Vec<Vec<String>> {
    let mut csv = Csv::new();
    let mut out = Vec::new();
    for line in lines(text) {
        if csv.line(line) {
            out.push(csv.record().to_vec());
        }
    }
    if csv.finish() {
        out.push(csv.record().to_vec());
    }
    out
}

/// One row of a trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row<'a> {
    /// Seconds.
    pub t: f64,
    /// Client name.
    pub client: &'a str,
    /// Endpoint (`/` when empty or absent).
    pub endpoint: &'a str,
    /// Cost (1 when empty or absent).
    pub cost: f64,
}

/// Reads a trace row by row from any buffered source, keeping one line in memory: a
/// CSV with a header naming `t,client[,endpoint][,cost]`, read as `csv.DictReader` reads it.
pub struct TraceReader<R> {
    src: R,
    label: String,
    csv: Csv,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    line: usize,
    /// Columns of t, client, endpoint, cost (the last of a repeated name).
    cols: Option<[Option<usize>; 4]>,
    rows: usize,
}

impl<R: std::io::BufRead> TraceReader<R> {
    /// A reader of `src`; `label` names it in errors (the reference uses the path).
    pub fn new(label: &str, src: R) -> Self {
        TraceReader {
            src,
            label: label.into(),
            csv: Csv::new(),
            buf: Vec::new(),
            pos: 0,
            eof: false,
            line: 0,
            cols: None,
            rows: 0,
        }
    }

    /// The next line (to its line end: `\n`, `\r\n` or `\r`), or `None` at the end.
    fn next_line(&mut self) -> Result<Option<(usize, usize)>, SimError> {
        if self.pos >= self.buf.len() {
            if self.eof {
                return Ok(None);
            }
            self.buf.clear();
            self.pos = 0;
            let n = self
                .src
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| SimError::Input(format!("{}: cannot read: {e}", self.label)))?;
            if n == 0 {
                self.eof = true;
                return Ok(None);
            }
        }
        let rest = &self.buf[self.pos..];
        let mut end = rest.iter().position(|&b| b == b'\r' || b == b'\n').map_or(rest.len(), |i| i + 1);
        if rest.get(end - 1) == Some(&b'\r') && rest.get(end) == Some(&b'\n') {
            end += 1;
        }
        let start = self.pos;
        self.pos += end;
        Ok(Some((start, start + end)))
    }

    /// The next complete CSV record, or `None` at the end.
    fn next_record(&mut self) -> Result<bool, SimError> {
        loop {
            let Some((a, b)) = self.next_line()? else {
                return Ok(self.csv.finish());
            };
            self.line += 1;
            let text = core::str::from_utf8(&self.buf[a..b])
                .map_err(|_| SimError::Input(format!("{} line {}: not UTF-8 text", self.label, self.line)))?;
            if self.csv.line(text) {
                return Ok(true);
            }
        }
    }

    /// The next row, or `None` at the end of the trace.
    ///
    /// # Errors
    /// A row without a readable `t` or `client`, or with a cost that is not a number, naming
    /// its line as the reference counts it.
    pub fn next_row(&mut self) -> Result<Option<Row<'_>>, SimError> {
        if self.cols.is_none() {
            let header = if self.next_record()? { self.csv.record() } else { &[] };
            let col = |name: &str| header.iter().rposition(|h| h == name);
            self.cols = Some([col("t"), col("client"), col("endpoint"), col("cost")]);
        }
        let [t_col, client_col, endpoint_col, cost_col] = self.cols.unwrap_or_default();
        loop {
            if !self.next_record()? {
                return Ok(None);
            }
            if !self.csv.record().is_empty() {
                break;
            }
        }
        self.rows += 1;
        let n = self.rows + 1;
        let label = &self.label;
        let row = self.csv.record();
        let bad = || SimError::Input(format!("{label} line {n}: need t,client[,endpoint][,cost]"));
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).map(String::as_str);
        let t = py::parse_float(cell(t_col).ok_or_else(bad)?).ok_or_else(bad)?;
        let client = cell(client_col).ok_or_else(bad)?.trim_matches(py::is_space);
        let endpoint = match cell(endpoint_col) {
            Some(e) if !e.is_empty() => e,
            _ => "/",
        };
        let endpoint = endpoint.trim_matches(py::is_space);
        let cost = match cell(cost_col) {
            Some(c) if !c.is_empty() => py::parse_float(c).ok_or_else(bad)?,
            _ => 1.0,
        };
        if !t.is_finite() || !cost.is_finite() {
            return Err(SimError::Input(format!("{label} line {n}: t and cost must be finite numbers")));
        }
        Ok(Some(Row { t, client, endpoint, cost }))
    }
}

/// Reads a whole trace into memory; `label` names it in errors.
pub fn parse_trace(label: &str, text: &str) -> Result<Traffic, SimError> {
    read_trace(TraceReader::new(label, text.as_bytes()))
}

/// Reads every row of a trace into memory.
pub fn read_trace<R: std::io::BufRead>(mut reader: TraceReader<R>) -> Result<Traffic, SimError> {
    let mut traffic = Traffic::default();
    while let Some(row) = reader.next_row()? {
        traffic.push(row.t, row.client, row.endpoint, row.cost);
    }
    Ok(traffic)
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
