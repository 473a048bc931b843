//! Recorded traffic: a CSV with a header naming `t,client[,endpoint][,cost]`, read the way
//! Python's `csv.DictReader` reads it (quoted fields, `""` escapes, blank lines skipped,
//! `\n`, `\r\n` or `\r` line ends, missing cells `None`, a repeated column's last cell wins).

use super::names::Names;
use super::py;
use super::traffic::{Request, Traffic};
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

/// Reads a trace row by row from any source, keeping one block of it in memory: a CSV with
/// a header naming `t,client[,endpoint][,cost]`, read as `csv.DictReader` reads it. Lines
/// without quotes (nearly all of a log) are split in place, without copying.
pub struct TraceReader<R> {
    src: R,
    label: String,
    csv: Csv,
    buf: Vec<u8>,
    /// The unread part of `buf`.
    start: usize,
    end: usize,
    eof: bool,
    line: usize,
    /// The last record: in `buf` (`cells` ranges) or in `csv` (a line with quotes).
    in_buf: bool,
    cells: Vec<(usize, usize)>,
    /// Columns of t, client, endpoint, cost, ip.src, cf.colo.id and method (the last of a
    /// repeated name).
    cols: Option<[Option<usize>; 7]>,
    /// The `header:<name>` columns: each header's name (lower case) and column.
    header_cols: Vec<(String, usize)>,
    /// The columns of a row read by [`TraceReader::plain_row`], when it may read them.
    plain: Option<Plain>,
    rows: usize,
}

const BLOCK: usize = 1 << 16;

/// How many cells' bounds [`TraceReader::plain_row`] keeps: those of the first seven.
const CELLS: usize = 8;

/// The columns of a row without edge columns: t, the client (`ip.src` if there is one, else
/// `client`), endpoint and cost.
#[derive(Clone, Copy, Debug)]
struct Plain {
    t: usize,
    client: usize,
    endpoint: Option<usize>,
    cost: Option<usize>,
}

/// The bytes of `word` (eight, the first lowest) that may stop [`TraceReader::next_line`]'s
/// scan: each one's high bit set, every other bit clear. The bytes that stop it (`,` `"` `\n`
/// `\r` and non-ASCII ones) are all below `-` or from 0x80: those are the bytes marked, so a
/// few others are too (a space, `+`, a control byte), which the scan then passes over. A
/// byte's low seven bits plus 0x80 − `-` carry into its high bit exactly when they are `-`
/// or above (no carry crosses a byte).
#[inline(always)]
fn stops(word: u64) -> u64 {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = !LOW;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let at_least_dash = (word & LOW) + ONES * u64::from(0x80 - b'-');
    (!at_least_dash | word) & HIGH
}

/// A line found by [`TraceReader::next_line`].
struct Line {
    /// Where the line ends, after its `\n`, `\r\n` or lone `\r` (`None`: the input ends
    /// without one).
    stop: Option<usize>,
    /// Where its text ends.
    body_end: usize,
    /// Whether it has a `"`.
    quoted: bool,
    /// Whether it is all ASCII.
    ascii: bool,
}

impl<R: std::io::Read> TraceReader<R> {
    /// A reader of `src`; `label` names it in errors (the reference uses the path).
    pub fn new(label: &str, src: R) -> Self {
        TraceReader {
            src,
            label: label.into(),
            csv: Csv::new(),
            buf: vec![0; BLOCK],
            start: 0,
            end: 0,
            eof: false,
            line: 0,
            in_buf: false,
            cells: Vec::new(),
            cols: None,
            header_cols: Vec::new(),
            plain: None,
            rows: 0,
        }
    }

    /// Reads more of the source after what is unread; false at its end.
    fn refill(&mut self) -> Result<bool, SimError> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SimError::Input(format!("{}: cannot read: {e}", self.label))),
            }
        }
    }

    /// The next complete CSV record (false at the end), its cells in `cells` or `csv`.
    fn next_record(&mut self) -> Result<bool, SimError> {
        loop {
            let Line { stop, body_end, quoted, ascii } = self.next_line()?;
            let (line_start, line_end) = (self.start, stop.unwrap_or(self.end));
            if line_start == line_end {
                // the end of the input
                self.in_buf = false;
                return Ok(self.csv.finish());
            }
            self.start = line_end;
            self.line += 1;
            let not_utf8 = || SimError::Input(format!("{} line {}: not UTF-8 text", self.label, self.line));
            if !ascii {
                core::str::from_utf8(&self.buf[line_start..line_end]).map_err(|_| not_utf8())?;
            }
            if !quoted && self.csv.state == State::StartRecord {
                // the cells were split at the commas while looking for the line's end
                if body_end > line_start {
                    let last = self.cells.last().map_or(line_start, |&(_, comma)| comma + 1);
                    self.cells.push((last, body_end));
                }
                self.in_buf = true;
                return Ok(true);
            }
            let text = core::str::from_utf8(&self.buf[line_start..line_end]).map_err(|_| not_utf8())?;
            if self.csv.line(text) {
                self.in_buf = false;
                return Ok(true);
            }
        }
    }

    /// The next line from `start`, reading more of the source as needed (which moves the
    /// unread bytes, so the scan starts over after a read); its cells up to the last comma
    /// are left in `cells`. Only `,` `"` `\n` `\r` and non-ASCII bytes stop the scan, which
    /// looks for them eight bytes at a time ([`stops`]).
    fn next_line(&mut self) -> Result<Line, SimError> {
        'scan: loop {
            self.cells.clear();
            let start = self.start;
            let (mut cell, mut quoted, mut ascii) = (start, false, true);
            let mut i = start;
            while i < self.end {
                // the next eight bytes (the last few padded with zeros, which do not stop it)
                let (n, mut flags) = match self.buf[..self.end].get(i..i + 8) {
                    Some(word) => (8, stops(u64::from_le_bytes(word.try_into().expect("eight bytes")))),
                    None => {
                        // the last few, padded with zeros (which the mask then drops)
                        let n = self.end - i;
                        let mut word = [0u8; 8];
                        word[..n].copy_from_slice(&self.buf[i..self.end]);
                        (n, stops(u64::from_le_bytes(word)) & (u64::MAX >> (64 - 8 * n)))
                    }
                };
                while flags != 0 {
                    let j = i + flags.trailing_zeros() as usize / 8;
                    flags &= flags - 1;
                    match self.buf[j] {
                        b',' => {
                            self.cells.push((cell, j));
                            cell = j + 1;
                        }
                        b'"' => quoted = true,
                        b'\n' => return Ok(Line { stop: Some(j + 1), body_end: j, quoted, ascii }),
                        b'\r' => {
                            if j + 1 == self.end && !self.eof {
                                // a `\r` last: is a `\n` next?
                                self.refill()?;
                                continue 'scan;
                            }
                            let crlf = j + 1 < self.end && self.buf[j + 1] == b'\n';
                            return Ok(Line { stop: Some(j + 1 + usize::from(crlf)), body_end: j, quoted, ascii });
                        }
                        0x80.. => ascii = false,
                        // marked but stopping nothing (a space, say: see `stops`)
                        _ => {}
                    }
                }
                i += n;
            }
            if self.eof {
                return Ok(Line { stop: None, body_end: self.end, quoted, ascii });
            }
            // reads more, or finds the end (either way the bytes may move)
            self.refill()?;
        }
    }

    fn record_len(&self) -> usize {
        if self.in_buf {
            self.cells.len()
        } else {
            self.csv.record().len()
        }
    }

    /// Cell `i` of the last record (UTF-8: a line with anything else was refused, and a
    /// cell in `buf` ends at an ASCII byte).
    #[inline(always)]
    fn cell(&self, i: usize) -> Option<&[u8]> {
        if self.in_buf {
            self.cells.get(i).map(|&(a, b)| &self.buf[a..b])
        } else {
            self.csv.record().get(i).map(String::as_bytes)
        }
    }

    /// The next row as a request, its client and endpoint numbered in `clients` and
    /// `endpoints` (a name not seen before is added), or `None` at the end of the trace.
    ///
    /// Besides `t`, `client`, `endpoint` and `cost`, a row may say what the edge reads of
    /// it: `ip.src` (then the client is that address), `cf.colo.id`, `method` and
    /// `header:<name>` columns; the client's and endpoint's names then carry them
    /// ([`super::edge`]).
    ///
    /// # Errors
    /// A row without a readable `t` or client (`client` or `ip.src`), or with a cost that is
    /// not a number, naming its line as the reference counts it.
    pub fn next_request(&mut self, clients: &mut Names, endpoints: &mut Names) -> Result<Option<Request>, SimError> {
        if self.cols.is_none() {
            self.read_header()?;
        }
        // (not in wasm builds, which are built for size: any_row reads the same rows)
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(plain) = self.plain {
            if let Some(r) = self.plain_row(plain, clients, endpoints) {
                return Ok(Some(r));
            }
        }
        self.any_row(clients, endpoints)
    }

    /// Reads the header: the columns rows are read from.
    fn read_header(&mut self) -> Result<(), SimError> {
        let mut cols = [None; 7];
        if self.next_record()? {
            for i in 0..self.record_len() {
                let slot = match self.cell(i) {
                    Some(b"t") => 0,
                    Some(b"client") => 1,
                    Some(b"endpoint") => 2,
                    Some(b"cost") => 3,
                    Some(b"ip.src") => 4,
                    Some(b"cf.colo.id") => 5,
                    Some(b"method") => 6,
                    Some(name) if name.len() > 7 && name[..7].eq_ignore_ascii_case(b"header:") => {
                        let name = String::from_utf8_lossy(&name[7..]).trim().to_ascii_lowercase();
                        self.header_cols.retain(|(n, _)| *n != name);
                        self.header_cols.push((name, i));
                        continue;
                    }
                    _ => continue,
                };
                cols[slot] = Some(i);
            }
        }
        self.cols = Some(cols);
        let [t, client, endpoint, cost, ip, colo, method] = cols;
        self.plain = match (t, ip.or(client)) {
            (Some(t), Some(client))
                if colo.is_none()
                    && method.is_none()
                    && self.header_cols.is_empty()
                    && [Some(t), Some(client), endpoint, cost].iter().flatten().all(|&c| c < CELLS - 1) =>
            {
                Some(Plain { t, client, endpoint, cost })
            }
            _ => None,
        };
        Ok(())
    }

    /// The next row read straight from the buffer, when its line is plain: whole in the
    /// buffer (with at least eight bytes read from where its last eight-byte step starts),
    /// ending in `\n` or `\r\n`, without a quote, UTF-8, with a `t` and a client cell that
    /// read. Such a line is a record of the cells between its commas, read here as
    /// [`TraceReader::any_row`] reads it. `None`, having read nothing, for any other line (a
    /// blank one, the last one, one with an error), which `any_row` then reads.
    #[inline(never)]
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    fn plain_row(&mut self, plain: Plain, clients: &mut Names, endpoints: &mut Names) -> Option<Request> {
        if self.csv.state != State::StartRecord {
            return None;
        }
        let buf = &self.buf[..self.end];
        let line = PlainLine::split(buf, self.start)?;
        let cell = |col: usize| line.cell(buf, col);
        let t = cell(plain.t)?;
        let t = match buf.get(line.starts[plain.t]..line.starts[plain.t] + 8) {
            Some(word) if (1..=8).contains(&t.len()) => {
                py::decimal_word(u64::from_le_bytes(word.try_into().expect("eight bytes")), t.len())
            }
            _ => None,
        }
        .or_else(|| py::parse_float_bytes(t))?;
        let client = strip(cell(plain.client)?);
        let endpoint = endpoint_cell(plain.endpoint.and_then(cell));
        let cost = cost_cell(plain.cost.and_then(cell))?;
        if !t.is_finite() || !cost.is_finite() {
            return None;
        }
        // (UTF-8: the cells of a UTF-8 line are split at ASCII bytes)
        let client = clients.intern_utf8(client)?;
        let endpoint = endpoints.intern_utf8(endpoint)?;
        self.start = line.stop;
        self.line += 1;
        self.rows += 1;
        Some(Request { t, client, endpoint, cost })
    }

    /// [`TraceReader::next_request`] of any row, a line at a time.
    fn any_row(&mut self, clients: &mut Names, endpoints: &mut Names) -> Result<Option<Request>, SimError> {
        let [t_col, client_col, endpoint_col, cost_col, ip_col, colo_col, method_col] = self.cols.unwrap_or_default();
        loop {
            if !self.next_record()? {
                return Ok(None);
            }
            if self.record_len() > 0 {
                break;
            }
        }
        self.rows += 1;
        let n = self.rows + 1;
        let label = &self.label;
        let bad = || SimError::Input(format!("{label} line {n}: need t,client[,endpoint][,cost]"));
        let cell = |i: Option<usize>| i.and_then(|i| self.cell(i));
        let t = py::parse_float_bytes(cell(t_col).ok_or_else(bad)?).ok_or_else(bad)?;
        let client = strip(cell(ip_col.or(client_col)).ok_or_else(bad)?);
        let endpoint = endpoint_cell(cell(endpoint_col));
        let cost = cost_cell(cell(cost_col)).ok_or_else(bad)?;
        if !t.is_finite() || !cost.is_finite() {
            return Err(SimError::Input(format!("{label} line {n}: t and cost must be finite numbers")));
        }
        let not_utf8 = || SimError::Input(format!("{label} line {n}: not UTF-8 text"));
        if colo_col.is_none() && method_col.is_none() && self.header_cols.is_empty() {
            let client = clients.intern_utf8(client).ok_or_else(not_utf8)?;
            let endpoint = endpoints.intern_utf8(endpoint).ok_or_else(not_utf8)?;
            return Ok(Some(Request { t, client, endpoint, cost }));
        }
        // What the edge reads of the row, in its client's and endpoint's names.
        fn text(b: Option<&[u8]>, not_utf8: impl Fn() -> SimError) -> Result<Option<&str>, SimError> {
            b.map(|b| core::str::from_utf8(strip(b)).map_err(|_| not_utf8())).transpose()
        }
        let who = text(Some(client), not_utf8)?.unwrap_or_default();
        let colo = text(cell(colo_col), not_utf8)?;
        let mut headers = Vec::with_capacity(self.header_cols.len());
        for (name, col) in &self.header_cols {
            headers.push((name.as_str(), text(cell(Some(*col)), not_utf8)?.unwrap_or_default()));
        }
        let client = super::edge::client_name(who, colo, &headers);
        let method = text(cell(method_col), not_utf8)?;
        // What the edge reads must be what it could be sent: a method is a token, a path
        // starts with `/`.
        if let Some(m) = method.filter(|m| !m.is_empty() && !m.bytes().all(|b| b.is_ascii_alphabetic())) {
            return Err(SimError::Input(format!("{label} line {n}: method must be an HTTP method, got {m:?}")));
        }
        let path = text(Some(endpoint), not_utf8)?.unwrap_or("/");
        if !path.starts_with('/') {
            return Err(SimError::Input(format!(
                "{label} line {n}: endpoint must be a path starting with /, got {path:?}"
            )));
        }
        let endpoint = super::edge::endpoint_name(method, path);
        let client = clients.intern(&client);
        let endpoint = endpoints.intern(&endpoint);
        Ok(Some(Request { t, client, endpoint, cost }))
    }
}

/// A row's endpoint cell as the reference reads it: stripped, `/` when missing or empty.
#[inline(always)]
fn endpoint_cell(cell: Option<&[u8]>) -> &[u8] {
    match cell {
        Some(e) if !e.is_empty() => strip(e),
        _ => b"/",
    }
}

/// A row's cost cell as the reference reads it: 1 when missing or empty, else the number it
/// reads as (`None`: not a number).
#[inline(always)]
fn cost_cell(cell: Option<&[u8]>) -> Option<f64> {
    match cell {
        Some(c) if !c.is_empty() => py::parse_float_bytes(c),
        _ => Some(1.0),
    }
}

/// A plain line (see [`TraceReader::plain_row`]) split at its commas.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
struct PlainLine {
    /// Where cell `k` starts, and (less one) where it ends: `starts[k]..starts[k + 1] - 1`
    /// (kept for the first `CELLS - 1` cells).
    starts: [usize; CELLS],
    /// How many cells.
    cells: usize,
    /// Where the line ends, after its line end.
    stop: usize,
}

#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
impl PlainLine {
    /// The line from `start`, split, if it is plain: whole in `buf` (with eight bytes from
    /// where its last eight-byte step starts), ending in `\n` or `\r\n`, not blank, without
    /// a quote, UTF-8. Only `,` `"` `\n` `\r` and non-ASCII bytes stop the scan ([`stops`]).
    #[inline(never)]
    fn split(buf: &[u8], start: usize) -> Option<PlainLine> {
        let mut starts = [start; CELLS];
        let (mut cells, mut ascii, mut i) = (1, true, start);
        let (body_end, stop) = 'line: loop {
            let word = u64::from_le_bytes(buf.get(i..i + 8)?.try_into().expect("eight bytes"));
            let mut flags = stops(word);
            while flags != 0 {
                let at = flags.trailing_zeros() - 7;
                flags &= flags - 1;
                let j = i + at as usize / 8;
                let byte = (word >> at) as u8;
                if byte == b',' {
                    // (the cells after the first `CELLS - 1` all start in the last entry)
                    starts[cells.min(CELLS - 1)] = j + 1;
                    cells += 1;
                    continue;
                }
                match byte {
                    b'\n' => break 'line (j, j + 1),
                    b'\r' if buf.get(j + 1) == Some(&b'\n') => break 'line (j, j + 2),
                    b'"' | b'\r' => return None,
                    0x80.. => ascii = false,
                    // marked but stopping nothing (see `stops`)
                    _ => {}
                }
            }
            i += 8;
        };
        if body_end == start || (!ascii && core::str::from_utf8(&buf[start..stop]).is_err()) {
            return None;
        }
        starts[cells.min(CELLS - 1)] = body_end + 1;
        Some(PlainLine { starts, cells, stop })
    }

    /// Cell `col` (`None` past the last). `col` is one of [`Plain`]'s columns, all below
    /// `CELLS - 1`: a cell there is whole in `starts`.
    #[inline(always)]
    fn cell<'a>(&self, buf: &'a [u8], col: usize) -> Option<&'a [u8]> {
        if col >= self.cells {
            return None;
        }
        let bounds = self.starts.get(col..col + 2)?;
        buf.get(bounds[0]..bounds[1] - 1)
    }
}

/// `text.strip()`: nothing to strip from a text that starts and ends with a printable ASCII
/// character (nearly every name in a log).
#[inline(always)]
fn strip(text: &[u8]) -> &[u8] {
    let printable = |b: Option<&u8>| b.is_some_and(|b| (b'!'..=b'~').contains(b));
    if printable(text.first()) && printable(text.last()) {
        return text;
    }
    strip_any(text)
}

/// [`strip`] of a text that may need it (out of line).
#[inline(never)]
fn strip_any(text: &[u8]) -> &[u8] {
    match core::str::from_utf8(text) {
        Ok(text) => text.trim_matches(py::is_space).as_bytes(),
        Err(_) => text,
    }
}

/// Reads a whole trace into memory; `label` names it in errors.
pub fn parse_trace(label: &str, text: &str) -> Result<Traffic, SimError> {
    read_trace(TraceReader::new(label, text.as_bytes()))
}

/// Reads every row of a trace into memory.
pub fn read_trace<R: std::io::Read>(mut reader: TraceReader<R>) -> Result<Traffic, SimError> {
    let mut traffic = Traffic::default();
    while let Some(r) = reader.next_request(&mut traffic.clients, &mut traffic.endpoints)? {
        traffic.requests.push(r);
    }
    Ok(traffic)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes that stop [`TraceReader::next_line`]'s scan, one by one.
    const STOPS: [bool; 256] = {
        let mut stops = [false; 256];
        let mut b = 0x80;
        while b < 256 {
            stops[b] = true;
            b += 1;
        }
        stops[b',' as usize] = true;
        stops[b'"' as usize] = true;
        stops[b'\n' as usize] = true;
        stops[b'\r' as usize] = true;
        stops
    };

    /// A source that hands out one byte per read: every line straddles a refill.
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn rows<R: std::io::Read>(mut reader: TraceReader<R>) -> Vec<String> {
        let (mut clients, mut endpoints) = (Names::default(), Names::default());
        let mut out = Vec::new();
        loop {
            match reader.next_request(&mut clients, &mut endpoints) {
                Ok(Some(r)) => {
                    out.push(format!("{}|{}|{}|{}", r.t, clients.name(r.client), endpoints.name(r.endpoint), r.cost))
                }
                Ok(None) => return out,
                Err(e) => {
                    out.push(format!("error: {e}"));
                    return out;
                }
            }
        }
    }

    #[test]
    fn rows_read_the_same_whatever_the_reads_and_line_ends() {
        let text = "client,t,endpoint,cost\r\na,1,/x,2\rb,2,\"/y,z\",\n\n\"c\nd\",3,/q\r\n \t e ,4.5,,1_0\r\nf,5";
        let want = ["1|a|/x|2", "2|b|/y,z|1", "3|c\nd|/q|1", "4.5|e|/|10", "5|f|/|1"];
        assert_eq!(rows(TraceReader::new("t", text.as_bytes())), want);
        assert_eq!(rows(TraceReader::new("t", Trickle(text.as_bytes()))), want);
        let bad = "t,client\n1,a\n\nx,b\n";
        assert_eq!(
            rows(TraceReader::new("trace.csv", Trickle(bad.as_bytes())))[1],
            "error: trace.csv line 3: need t,client[,endpoint][,cost]"
        );
    }

    #[test]
    fn a_row_of_edge_columns_names_what_the_edge_reads_or_what_is_wrong() {
        let text = "t,ip.src,cf.colo.id,method,endpoint,header:X-Key\n1,198.51.100.1,AMS,post,/api/x,k 1\n2,198.51.100.2,,,/y,\n";
        assert_eq!(
            rows(TraceReader::new("t", text.as_bytes())),
            ["1|198.51.100.1 @ AMS x-key=k%201|POST /api/x|1", "2|198.51.100.2 @ SIM|/y|1"]
        );
        let bad = |row: &str| {
            rows(TraceReader::new("trace.csv", format!("t,ip.src,method,endpoint\n{row}\n").as_bytes())).pop()
        };
        assert_eq!(
            bad("1,198.51.100.1,G ET,/x").as_deref(),
            Some("error: trace.csv line 2: method must be an HTTP method, got \"G ET\"")
        );
        assert_eq!(
            bad("1,198.51.100.1,GET,api").as_deref(),
            Some("error: trace.csv line 2: endpoint must be a path starting with /, got \"api\"")
        );
    }

    /// The rows as [`rows`] gives them, read with [`TraceReader::plain_row`] where it reads a
    /// row (`plain`) or only ever a line at a time, and how many rows `plain_row` read.
    fn rows_read(text: &str, plain: bool) -> (Vec<String>, usize) {
        let mut reader = TraceReader::new("trace.csv", text.as_bytes());
        let (mut clients, mut endpoints) = (Names::default(), Names::default());
        let (mut out, mut fast) = (Vec::new(), 0);
        let show = |r: Request, c: &Names, e: &Names| {
            format!("{:?}|{}|{}|{:?}", r.t, c.name(r.client), e.name(r.endpoint), r.cost)
        };
        if let Err(e) = reader.read_header() {
            return (vec![format!("error: {e}")], 0);
        }
        loop {
            if let Some(cols) = reader.plain.filter(|_| plain) {
                if let Some(r) = reader.plain_row(cols, &mut clients, &mut endpoints) {
                    out.push(show(r, &clients, &endpoints));
                    fast += 1;
                    continue;
                }
            }
            match reader.any_row(&mut clients, &mut endpoints) {
                Ok(Some(r)) => out.push(show(r, &clients, &endpoints)),
                Ok(None) => return (out, fast),
                Err(e) => {
                    out.push(format!("error: {e}"));
                    return (out, fast);
                }
            }
        }
    }

    /// Reads `text` both ways: the same rows (and the same as [`TraceReader::next_request`]
    /// reads), of which `plain_row` read `fast`.
    fn same_both_ways(text: &str, fast: usize) -> Vec<String> {
        let (slow, none) = rows_read(text, false);
        let (quick, read) = rows_read(text, true);
        assert_eq!(none, 0);
        assert_eq!(quick, slow, "{text:?}");
        assert_eq!(read, fast, "rows read by plain_row in {text:?}");
        let shown = rows(TraceReader::new("trace.csv", text.as_bytes()));
        assert_eq!(shown.len(), slow.len());
        quick
    }

    /// Blank lines to end a text with, so that its rows lie eight bytes before its end.
    const PAD: &str = "\n\n\n\n\n\n\n\n";

    #[test]
    fn plain_lines_read_as_any_line_reads_them() {
        let cases: &[(&str, usize)] = &[
            // line ends: `\n` and `\r\n` read here, a lone `\r` a line at a time
            ("t,client,endpoint,cost\n0.015,mobile-app,/v2/orders,1\n1.5,b,/x,2.25\n", 2),
            ("t,client,endpoint,cost\r\n0.015,mobile-app,/v2/orders,1\r\n1.5,b,/x,2.25\r\n", 2),
            ("t,client,endpoint,cost\r0.015,mobile-app,/v2/orders,1\r1.5,b,/x,2.25\r", 0),
            // quotes anywhere: a line at a time
            ("t,client,endpoint,cost\n1,\"a,b\",/x,1\n2,a\"b,/x,1\n3,c,/y,1\n", 1),
            ("t,client\n1,\"multi\nline\"\n2,x\n", 1),
            // every cell empty, cells missing, cells beyond the header's
            ("t,client,endpoint,cost\n1,a,,\n2,b\n3,c,/z\n4,d,/q,1,extra,more,x,y,z,w\n", 4),
            ("t,client,endpoint,cost\n1,,,\n", 1),
            // blank lines between rows, none at the end
            ("t,client\n1,a\n\n\r\n2,b\n3,c", 2),
            // names to strip, long names, names differing in one byte, non-ASCII names
            ("t,client,endpoint\n1, a ,/x\n2,\ta\t,/x \n3,a,/x\n", 3),
            (
                "t,client,endpoint\n1,a-very-long-client-name-0001,/a/long/path/to/somewhere/1\n\
                 2,a-very-long-client-name-0002,/a/long/path/to/somewhere/2\n\
                 3,a-very-long-client-name-0001,/a/long/path/to/somewhere/1\n4,key-081,/v\n5,key-082,/v\n",
                5,
            ),
            ("t,client,endpoint\n1,caf\u{e9},/\u{e9}t\u{e9}\n2,\u{1f600},/x\n", 2),
            // numbers plain and not: a sign, an exponent, `_`, spaces, more than eight bytes
            ("t,client,cost\n-1.5,a,1\n1e3,a,0.5\n1_0,a,+2\n 7 ,a,1.\n123456789.25,a,.5\n0000.015,a,10\n", 6),
            // the header's columns anywhere, repeated (the last wins), ip.src as the client
            ("cost,endpoint,client,t\n2,/x,a,1\n,,b,2\n", 2),
            ("t,client,t,client\n1,a,2,b\n", 1),
            ("t,client,ip.src,endpoint\n1,a,198.51.100.7,/x\n2,b,,/y\n", 2),
            // columns past the seventh: a line at a time
            ("a,b,c,d,e,f,g,t,client\n,,,,,,,1,x\n", 0),
            ("t,b,c,d,e,f,client\n1,,,,,,x\n", 1),
        ];
        for &(text, fast) in cases {
            let end = if text.contains('\n') { "\n" } else { "\r" };
            let padded = format!("{text}{}{}", if text.ends_with(end) { "" } else { end }, PAD.replace('\n', end));
            same_both_ways(&padded, fast);
        }
    }

    #[test]
    fn rows_with_errors_are_left_to_the_line_reader_and_named_alike() {
        for (row, want) in [
            ("x,a,/x,1", "error: trace.csv line 3: need t,client[,endpoint][,cost]"),
            ("1,a,/x,y", "error: trace.csv line 3: need t,client[,endpoint][,cost]"),
            ("nan,a,/x,1", "error: trace.csv line 3: t and cost must be finite numbers"),
            ("1,a,/x,inf", "error: trace.csv line 3: t and cost must be finite numbers"),
            ("1e999,a,/x,1", "error: trace.csv line 3: t and cost must be finite numbers"),
            ("5", "error: trace.csv line 3: need t,client[,endpoint][,cost]"),
            (",,,", "error: trace.csv line 3: need t,client[,endpoint][,cost]"),
        ] {
            let text = format!("t,client,endpoint,cost\n1,a,/x,1\n{row}\n{PAD}");
            let out = same_both_ways(&text, 1);
            assert_eq!(out.last().map(String::as_str), Some(want), "{row}");
        }
        // a byte that is not UTF-8 in a line that is otherwise plain, in a cell read or not
        for at in [23, 26] {
            let mut bytes = format!("t,client,note\n1,a,x\n2,ab,yz\n{PAD}").into_bytes();
            bytes[at] = 0xc3;
            let mut reader = TraceReader::new("trace.csv", &bytes[..]);
            let (mut c, mut e) = (Names::default(), Names::default());
            assert!(reader.next_request(&mut c, &mut e).unwrap().is_some());
            let err = reader.next_request(&mut c, &mut e).unwrap_err();
            assert_eq!(err.to_string(), "trace.csv line 3: not UTF-8 text", "{at}");
        }
    }

    #[test]
    fn a_plain_line_is_read_whole_wherever_the_buffer_ends() {
        // lines of every length up to past a block, the block's end falling anywhere in them
        let mut text = String::from("t,client,endpoint,cost\n");
        for i in 0..5000 {
            let name = "n".repeat(i % 97);
            text.push_str(&format!("{}.{},c{name},/e{},{}\n", i, i % 1000, i % 7, i % 3));
        }
        let (slow, _) = rows_read(&text, false);
        let (quick, fast) = rows_read(&text, true);
        assert_eq!(quick, slow);
        assert!(fast > 4900, "{fast}");
        assert_eq!(rows(TraceReader::new("t", Trickle(text.as_bytes()))).len(), 5000);
    }

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

    #[test]
    fn stops_marks_every_byte_that_stops_the_scan_and_only_bytes_below_a_dash_or_not_ascii() {
        // every byte value at every position, behind and before bytes that stop and do not
        for fill in [b'a', 0x00, 0x01, 0x7f, b'0', b'+', b'-', b'.', 0x21, 0x0b, 0x0e, 0x80, 0xff, b',', b'\n'] {
            for b in 0..=255u8 {
                for at in 0..8 {
                    for after in [b'x', b',', 0xff, 0x00, 0x01, b'\n', b'"', b'-', b' '] {
                        let mut bytes = [fill; 8];
                        bytes[at] = b;
                        for x in &mut bytes[at + 1..] {
                            *x = after;
                        }
                        let marked = |want: &dyn Fn(u8) -> bool| {
                            bytes
                                .iter()
                                .enumerate()
                                .filter(|(_, &x)| want(x))
                                .fold(0u64, |m, (i, _)| m | 0x80 << (8 * i))
                        };
                        let got = stops(u64::from_le_bytes(bytes));
                        assert_eq!(got, marked(&|x| !(b'-'..0x80).contains(&x)), "{bytes:?}");
                        let stopping = marked(&|x| STOPS[usize::from(x)]);
                        assert_eq!(got & stopping, stopping, "{bytes:?}: every byte that stops is marked");
                    }
                }
            }
        }
    }

    #[test]
    fn bytes_marked_that_stop_nothing_stay_in_their_cell() {
        let text = "t,client,endpoint\n1,a b+c\t!,/x y\n2,\x01#$%&'()*,/z\n3, sp ,/ \n";
        let mut reader = TraceReader::new("trace.csv", text.as_bytes());
        let mut cells = Vec::new();
        while reader.next_record().unwrap() {
            cells.push(
                (0..reader.record_len())
                    .map(|i| String::from_utf8(reader.cell(i).unwrap().to_vec()).unwrap())
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(
            cells,
            [
                vec!["t", "client", "endpoint"],
                vec!["1", "a b+c\t!", "/x y"],
                vec!["2", "\x01#$%&'()*", "/z"],
                vec!["3", " sp ", "/ "],
            ]
        );
    }
}
