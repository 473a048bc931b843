//! The edge's decisions counted for its operator: per minute and per subject (a rule, a
//! tenant, an upstream or egress budget, a check made before the body is read), how many
//! requests were admitted, refused, admitted while the subject's store had failed (failed
//! open) and shed, with the identities it refused most; and how many a rule would have
//! refused where its refusal is not enforced (a shadow rule, or a key outside its enforced
//! share), counted apart from its refusals.
//!
//! The identities are a space-saving top-k ([`TopK`]) of [`SKETCH_SIZE`] counters: a flood
//! of invented keys replaces the smallest counter again and again and never grows it, and
//! any identity refused more than `1 / SKETCH_SIZE` of a subject's refusals is in it (its
//! count overstated by at most its `error`).
//!
//! An isolate records each decision into its [`Recorder`] (no allocation for a subject it has
//! already counted in this batch) and hands a [`Batch`] to one store every [`FLUSH_MS`] or
//! [`FLUSH_DECISIONS`] decisions, whichever comes first ([`Recorder::due`]); a batch that could
//! not be delivered goes back into the recorder ([`Recorder::restore`]) or, past its bounds,
//! is counted as lost. The store ([`Minutes`]) merges batches into minutes, keeps the last
//! [`RETENTION_MINUTES`] and answers queries ([`Minutes::query`]). Nothing here reads a clock:
//! every call takes the time in ms since the epoch.

use crate::edge::pipeline::reply::quoted;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use core::hash::{BuildHasher, Hash, Hasher};
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use serde_json::Value;

/// A minute, in ms.
pub const MINUTE_MS: u64 = 60_000;
/// How many minutes the store keeps: 24 h.
pub const RETENTION_MINUTES: u64 = 24 * 60;
/// The counters of a subject's top refused identities in one minute.
pub const SKETCH_SIZE: usize = 16;
/// How many of them a query shows.
pub const TOP_SHOWN: usize = 10;
/// The subjects one minute (and one batch) counts by name; the rest of a kind are counted
/// together as [`OTHER`].
pub const MAX_SUBJECTS: usize = 64;
/// The longest identity kept, in bytes (a longer one is cut at a character boundary).
pub const IDENTITY_BYTES: usize = 64;
/// A recorder's batch is due this long after its first decision…
pub const FLUSH_MS: u64 = 5_000;
/// …or after this many decisions.
pub const FLUSH_DECISIONS: u32 = 1_000;
/// The name the subjects past [`MAX_SUBJECTS`] are counted under.
pub const OTHER: &str = "(other)";

/// What a subject is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A rule of the rules file, by its id.
    Rule,
    /// A tenant, by name.
    Tenant,
    /// An upstream budget or an egress provider's, by id.
    Budget,
    /// A check made before the body is read: `address`, `isolate` or a source's id.
    PreRead,
}

impl Kind {
    /// Its name, as the stats say it.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Rule => "rule",
            Kind::Tenant => "tenant",
            Kind::Budget => "budget",
            Kind::PreRead => "pre_read",
        }
    }

    /// The kind a name stands for.
    pub fn from_name(name: &str) -> Option<Kind> {
        [Kind::Rule, Kind::Tenant, Kind::Budget, Kind::PreRead].into_iter().find(|k| k.name() == name)
    }
}

/// What one subject did with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted (counted, and within its limit).
    Admitted,
    /// Refused (`429`, or the check's own status).
    Refused,
    /// Admitted without its count: its store failed and it fails open.
    FailedOpen,
    /// Shed: its budget had no room within its wait (`503`).
    Shed,
    /// Admitted by a rule whose refusal is not enforced for this request (`"enforce"`), that
    /// would have refused it: a shadow refusal. Not a refusal: the request went on.
    WouldRefuse,
}

impl Outcome {
    /// Its name, as the data points say it.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Refused => "refused",
            Outcome::FailedOpen => "failed_open",
            Outcome::Shed => "shed",
            Outcome::WouldRefuse => "would_refuse",
        }
    }
}

/// One decision as a Workers Analytics Engine data point (`analytics.dataset`): `blob1` the
/// subject's kind, `blob2` its name, `blob3` the outcome, `blob4` the colo; `double1` 1 (one
/// request, to sum with `_sample_interval`), `double2` the wait a refusal gave (or a shadow
/// refusal would have given), in seconds;
/// `index1`, the sampling key, is the identity's keyed hash (the Worker's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataPoint<'a> {
    /// Kind, name, outcome and colo.
    pub blobs: [&'a str; 4],
    /// 1, and the wait in seconds (0 unless refused with one).
    pub doubles: [f64; 2],
}

/// The data point of one decision of `kind` `name` at `colo` (`""` unknown), refused with
/// `wait` when it was refused.
pub fn data_point<'a>(
    kind: Kind,
    name: &'a str,
    outcome: Outcome,
    colo: &'a str,
    wait: crate::core::time::Span,
) -> DataPoint<'a> {
    DataPoint { blobs: [kind.name(), name, outcome.name(), colo], doubles: [1.0, wait.as_nanos() as f64 / 1e9] }
}

/// An identity in a [`TopK`]: refused `count` times, overstated by at most `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hitter {
    /// The identity as counted (an address, IPv6 by its /64), or its keyed hash.
    pub identity: String,
    /// How often it was refused (at most `error` too many).
    pub count: u64,
    /// How much `count` may overstate: the count of the identity it replaced.
    pub error: u64,
}

/// The identities counted most: at most [`SKETCH_SIZE`] counters (space-saving).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopK {
    hitters: Vec<Hitter>,
}

impl TopK {
    /// Counts `identity` `n` times.
    pub fn offer(&mut self, identity: &str, n: u64) {
        self.add(identity, n, 0);
    }

    fn add(&mut self, identity: &str, n: u64, error: u64) {
        let identity = cut(identity, IDENTITY_BYTES);
        if let Some(h) = self.hitters.iter_mut().find(|h| h.identity == identity) {
            h.count = h.count.saturating_add(n);
            h.error = h.error.saturating_add(error);
        } else if self.hitters.len() < SKETCH_SIZE {
            self.hitters.push(Hitter { identity: identity.into(), count: n, error });
        } else if let Some(least) = self.hitters.iter_mut().min_by_key(|h| h.count) {
            // The smallest counter takes the newcomer, keeping its count as the newcomer's
            // error: the string's room is reused (every identity is at most IDENTITY_BYTES).
            let floor = least.count;
            least.identity.clear();
            least.identity.push_str(identity);
            least.count = floor.saturating_add(n);
            least.error = floor.saturating_add(error);
        }
    }

    /// Adds `other`'s counts (their errors carried over).
    pub fn merge(&mut self, other: &TopK) {
        for h in &other.hitters {
            self.add(&h.identity, h.count, h.error);
        }
    }

    /// The `n` counted most, most first (ties by identity).
    pub fn top(&self, n: usize) -> Vec<Hitter> {
        // At most SKETCH_SIZE counters: placed in order one by one (no sort's code to ship).
        let mut all: Vec<Hitter> = Vec::with_capacity(self.hitters.len());
        for h in &self.hitters {
            let at = all.iter().position(|x| (h.count, &x.identity) > (x.count, &h.identity)).unwrap_or(all.len());
            all.insert(at, h.clone());
        }
        all.truncate(n);
        all
    }

    /// How many counters it holds (at most [`SKETCH_SIZE`]).
    pub fn len(&self) -> usize {
        self.hitters.len()
    }

    /// Whether it has counted nothing.
    pub fn is_empty(&self) -> bool {
        self.hitters.is_empty()
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// One subject's counts over a span (a minute, a batch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests admitted.
    pub admitted: u64,
    /// Requests refused.
    pub refused: u64,
    /// Requests admitted while the subject's store had failed.
    pub failed_open: u64,
    /// Requests shed.
    pub shed: u64,
    /// Requests a rule would have refused, were its refusal enforced (shadow refusals).
    pub would_refuse: u64,
    /// The identities refused most.
    pub top_refused: TopK,
}

impl Tally {
    /// Counts one decision; a refusal's `identity` joins the top refused.
    pub fn add(&mut self, outcome: Outcome, identity: Option<&str>) {
        match outcome {
            Outcome::Admitted => self.admitted += 1,
            Outcome::FailedOpen => self.failed_open += 1,
            Outcome::Shed => self.shed += 1,
            Outcome::WouldRefuse => self.would_refuse += 1,
            Outcome::Refused => {
                self.refused += 1;
                if let Some(identity) = identity {
                    self.top_refused.offer(identity, 1);
                }
            }
        }
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Tally) {
        self.admitted = self.admitted.saturating_add(other.admitted);
        self.refused = self.refused.saturating_add(other.refused);
        self.failed_open = self.failed_open.saturating_add(other.failed_open);
        self.shed = self.shed.saturating_add(other.shed);
        self.would_refuse = self.would_refuse.saturating_add(other.would_refuse);
        self.top_refused.merge(&other.top_refused);
    }

    /// Every decision it counts.
    pub fn decisions(&self) -> u64 {
        self.admitted
            .saturating_add(self.refused)
            .saturating_add(self.failed_open)
            .saturating_add(self.shed)
            .saturating_add(self.would_refuse)
    }
}

/// One subject's counts in one minute, as a batch carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The minute's start, ms since the epoch.
    pub minute: u64,
    /// What the subject is.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its counts.
    pub tally: Tally,
}

/// What an isolate hands its store: the rows it counted, and the decisions it could not keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The counted rows.
    pub rows: Vec<Row>,
    /// Decisions counted nowhere (a recorder or store past its bounds, a batch that could not
    /// be delivered again).
    pub lost: u64,
}

impl Batch {
    /// The batch as JSON: `{"lost": n, "rows": [[minute, kind, name, admitted, refused,
    /// failed_open, shed, [[identity, count, error], …], would_refuse], …]}` (a row without
    /// `would_refuse`, as written before it was counted, is read as 0).
    pub fn to_json(&self) -> String {
        let mut out = alloc::format!("{{\"lost\":{},\"rows\":[", self.lost);
        for (i, row) in self.rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "[{},", row.minute);
            write_row(&mut out, row.kind, &row.name, &row.tally);
            out.push(']');
        }
        out.push_str("]}");
        out
    }

    /// A batch from its JSON, or what is wrong with it.
    pub fn from_json(text: &str) -> Result<Batch, String> {
        let bad =
            || String::from("not a stats batch: expected {\"lost\": n, \"rows\": [[minute, kind, name, counts…], …]}");
        let value: Value = serde_json::from_str(text).map_err(|e| alloc::format!("not a stats batch: {e}"))?;
        let lost = value.get("lost").and_then(Value::as_u64).ok_or_else(bad)?;
        let mut rows = Vec::new();
        for row in value.get("rows").and_then(Value::as_array).ok_or_else(bad)? {
            let cells = row.as_array().filter(|c| c.len() >= 8).ok_or_else(bad)?;
            let minute = cells[0].as_u64().ok_or_else(bad)?;
            let (kind, name, tally) = read_row(&cells[1..]).ok_or_else(bad)?;
            rows.push(Row { minute, kind, name, tally });
        }
        Ok(Batch { rows, lost })
    }

    /// Every decision its rows count.
    pub fn decisions(&self) -> u64 {
        self.rows.iter().map(|r| r.tally.decisions()).sum()
    }
}

/// Writes `kind, name, admitted, refused, failed_open, shed, [[identity, count, error], …],
/// would_refuse` (`would_refuse` last: the seven cells before it are what a row held before
/// shadow refusals were counted, and a stored minute of those still reads).
fn write_row(out: &mut String, kind: Kind, name: &str, t: &Tally) {
    let _ =
        write!(out, "\"{}\",{},{},{},{},{},[", kind.name(), quoted(name), t.admitted, t.refused, t.failed_open, t.shed);
    for (i, h) in t.top_refused.hitters.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "[{},{},{}]", quoted(&h.identity), h.count, h.error);
    }
    let _ = write!(out, "],{}", t.would_refuse);
}

/// Reads what [`write_row`] wrote, or a row of the seven cells written before `would_refuse`
/// was counted (read as 0).
fn read_row(cells: &[Value]) -> Option<(Kind, String, Tally)> {
    let (cells, would_refuse) = match cells {
        [seven @ .., would_refuse] if seven.len() == 7 => (seven, would_refuse.as_u64()?),
        seven => (seven, 0),
    };
    let [kind, name, admitted, refused, failed_open, shed, top] = cells else { return None };
    let mut tally = Tally {
        admitted: admitted.as_u64()?,
        refused: refused.as_u64()?,
        failed_open: failed_open.as_u64()?,
        shed: shed.as_u64()?,
        would_refuse,
        top_refused: TopK::default(),
    };
    for hitter in top.as_array()? {
        let [identity, count, error] = hitter.as_array()?.as_slice() else { return None };
        tally.top_refused.add(identity.as_str()?, count.as_u64()?, error.as_u64()?);
    }
    Some((Kind::from_name(kind.as_str()?)?, name.as_str()?.into(), tally))
}

/// The minute `now_ms` falls in (its start).
pub const fn minute_of(now_ms: u64) -> u64 {
    now_ms - now_ms % MINUTE_MS
}

struct Slot {
    minute: u64,
    kind: Kind,
    name: String,
    tally: Tally,
}

/// An isolate's counts since its last batch.
pub struct Recorder {
    slots: HashTable<Slot>,
    hasher: FixedState,
    first_ms: Option<u64>,
    decisions: u32,
    lost: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            slots: HashTable::new(),
            hasher: FixedState::with_seed(0x57a7),
            first_ms: None,
            decisions: 0,
            lost: 0,
        }
    }
}

impl Recorder {
    fn hash(&self, minute: u64, kind: Kind, name: &str) -> u64 {
        let mut h = self.hasher.build_hasher();
        minute.hash(&mut h);
        kind.hash(&mut h);
        name.hash(&mut h);
        h.finish()
    }

    /// Counts one decision of `kind` `name` at `now_ms`; a refusal counts its `identity`.
    pub fn record(&mut self, now_ms: u64, kind: Kind, name: &str, outcome: Outcome, identity: Option<&str>) {
        self.first_ms.get_or_insert(now_ms);
        self.decisions = self.decisions.saturating_add(1);
        let minute = minute_of(now_ms);
        if let Some(tally) = self.tally(minute, kind, name) {
            tally.add(outcome, identity);
        } else {
            self.lost += 1;
        }
    }

    /// The tally of `kind` `name` in `minute`: made when there is room, else the kind's
    /// [`OTHER`] (`None` when even that has no room).
    fn tally(&mut self, minute: u64, kind: Kind, name: &str) -> Option<&mut Tally> {
        let name = cut(name, IDENTITY_BYTES);
        let full = self.slots.len() >= MAX_SUBJECTS;
        let name = if full && self.find(minute, kind, name).is_none() { OTHER } else { name };
        let hash = self.hash(minute, kind, name);
        let hasher = self.hasher;
        let rehash = move |s: &Slot| {
            let mut h = hasher.build_hasher();
            s.minute.hash(&mut h);
            s.kind.hash(&mut h);
            s.name.as_str().hash(&mut h);
            h.finish()
        };
        let same = |s: &Slot| s.minute == minute && s.kind == kind && s.name == name;
        if self.slots.find(hash, same).is_none() {
            // Past the bounds, each kind's OTHER still gets a slot in each minute a batch spans
            // (four kinds in two minutes: a batch goes at the first request 5 s after it began).
            if self.slots.len() >= MAX_SUBJECTS + 4 * 2 {
                return None;
            }
            self.slots.insert_unique(hash, Slot { minute, kind, name: name.into(), tally: Tally::default() }, rehash);
        }
        self.slots.find_mut(hash, same).map(|s| &mut s.tally)
    }

    fn find(&self, minute: u64, kind: Kind, name: &str) -> Option<&Slot> {
        self.slots.find(self.hash(minute, kind, name), |s| s.minute == minute && s.kind == kind && s.name == name)
    }

    /// Whether a batch is due at `now_ms`: [`FLUSH_MS`] after its first decision, or after
    /// [`FLUSH_DECISIONS`] decisions.
    pub fn due(&self, now_ms: u64) -> bool {
        self.decisions >= FLUSH_DECISIONS || self.first_ms.is_some_and(|first| now_ms.saturating_sub(first) >= FLUSH_MS)
    }

    /// Whether it holds nothing to hand over.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.lost == 0
    }

    /// Its counts as a batch, and it starts afresh.
    pub fn take(&mut self) -> Batch {
        let rows =
            self.slots.drain().map(|s| Row { minute: s.minute, kind: s.kind, name: s.name, tally: s.tally }).collect();
        let batch = Batch { rows, lost: self.lost };
        self.first_ms = None;
        self.decisions = 0;
        self.lost = 0;
        batch
    }

    /// Takes back a batch that could not be delivered (it goes with the next one); what no
    /// longer fits is counted as lost.
    pub fn restore(&mut self, batch: &Batch, now_ms: u64) {
        self.first_ms.get_or_insert(now_ms);
        self.lost = self.lost.saturating_add(batch.lost);
        for row in &batch.rows {
            match self.tally(row.minute, row.kind, &row.name) {
                Some(tally) => tally.merge(&row.tally),
                None => self.lost = self.lost.saturating_add(row.tally.decisions()),
            }
        }
    }

    /// How many subjects it holds (at most [`MAX_SUBJECTS`] and each kind's [`OTHER`]).
    pub fn subjects(&self) -> usize {
        self.slots.len()
    }
}

/// The subjects an answer names, each kind's [`OTHER`] aside: the rest are counted under it.
pub const MAX_ANSWERED: usize = 256;

/// One subject's tally in a minute of the store.
struct Entry {
    kind: Kind,
    name: String,
    tally: Tally,
}

/// The store's minutes: every subject's tally, for the last [`RETENTION_MINUTES`], oldest
/// first (each minute's subjects in the order they came; at most [`MAX_SUBJECTS`] and each
/// kind's [`OTHER`]).
#[derive(Default)]
pub struct Minutes {
    minutes: Vec<(u64, Vec<Entry>)>,
    lost: u64,
}

impl Minutes {
    /// The oldest minute kept at `now_ms`.
    pub const fn oldest_kept(now_ms: u64) -> u64 {
        minute_of(now_ms).saturating_sub((RETENTION_MINUTES - 1) * MINUTE_MS)
    }

    /// Adds a batch at `now_ms` and answers the minutes it changed (to be written down). Rows
    /// older than the retention, or more than a minute ahead of `now_ms`, are counted as lost.
    pub fn merge(&mut self, batch: &Batch, now_ms: u64) -> Vec<u64> {
        let oldest = Self::oldest_kept(now_ms);
        let newest = minute_of(now_ms) + MINUTE_MS;
        self.lost = self.lost.saturating_add(batch.lost);
        let mut changed = Vec::new();
        for row in &batch.rows {
            if row.minute < oldest || row.minute > newest || row.minute % MINUTE_MS != 0 {
                self.lost = self.lost.saturating_add(row.tally.decisions());
                continue;
            }
            let entries = self.minute_mut(row.minute);
            let name = cut(&row.name, IDENTITY_BYTES);
            let Some(entry) = entry_of(entries, row.kind, name) else {
                self.lost = self.lost.saturating_add(row.tally.decisions());
                continue;
            };
            entry.merge(&row.tally);
            if !changed.contains(&row.minute) {
                changed.push(row.minute);
            }
        }
        changed
    }

    /// The entries of `minute`, made when it has none.
    fn minute_mut(&mut self, minute: u64) -> &mut Vec<Entry> {
        let at = match self.minutes.binary_search_by_key(&minute, |(m, _)| *m) {
            Ok(at) => at,
            Err(at) => {
                self.minutes.insert(at, (minute, Vec::new()));
                at
            }
        };
        &mut self.minutes[at].1
    }

    fn entries(&self, minute: u64) -> Option<&[Entry]> {
        let at = self.minutes.binary_search_by_key(&minute, |(m, _)| *m).ok()?;
        Some(&self.minutes[at].1)
    }

    /// Drops the minutes past the retention at `now_ms`, and answers them (to be deleted).
    pub fn prune(&mut self, now_ms: u64) -> Vec<u64> {
        let oldest = Self::oldest_kept(now_ms);
        let past = self.minutes.partition_point(|(m, _)| *m < oldest);
        self.minutes.drain(..past).map(|(m, _)| m).collect()
    }

    /// One minute as JSON, for its store (`None` when it has no counts): `[[kind, name,
    /// counts…], …]`.
    pub fn minute_json(&self, minute: u64) -> Option<String> {
        let mut out = String::from("[");
        for (i, e) in self.entries(minute)?.iter().enumerate() {
            out.push_str(if i > 0 { ",[" } else { "[" });
            write_row(&mut out, e.kind, &e.name, &e.tally);
            out.push(']');
        }
        out.push(']');
        Some(out)
    }

    /// Reads back a minute [`Minutes::minute_json`] wrote (a minute it cannot read is left
    /// out, and says why).
    pub fn load_minute(&mut self, minute: u64, json: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(json).map_err(|e| alloc::format!("minute {minute}: {e}"))?;
        let rows = value.as_array().ok_or_else(|| alloc::format!("minute {minute}: not a list of rows"))?;
        let mut read = Vec::with_capacity(rows.len());
        for row in rows {
            let cells = row.as_array().map(Vec::as_slice).unwrap_or_default();
            read.push(
                read_row(cells).ok_or_else(|| alloc::format!("minute {minute}: a row is not [kind, name, counts…]"))?,
            );
        }
        let entries = self.minute_mut(minute);
        for (kind, name, tally) in read {
            if let Some(entry) = entry_of(entries, kind, &name) {
                entry.merge(&tally);
            }
        }
        Ok(())
    }

    /// The decisions counted nowhere, since the store started.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// How many minutes it holds.
    pub fn len(&self) -> usize {
        self.minutes.len()
    }

    /// Whether it holds no minute.
    pub fn is_empty(&self) -> bool {
        self.minutes.is_empty()
    }

    /// The subjects of the minutes from `since_ms` to `until_ms` (whole minutes), those named
    /// `name` alone when given: each with its counts per minute and over the span.
    pub fn query(&self, since_ms: u64, until_ms: u64, name: Option<&str>) -> Stats {
        // Subjects by kind and name, placed in order as they come (no sort's code to ship).
        let mut out: Vec<SubjectStats> = Vec::new();
        let from = self.minutes.partition_point(|(m, _)| *m < minute_of(since_ms));
        for (minute, entries) in self.minutes[from..].iter().take_while(|(m, _)| *m <= until_ms) {
            for e in entries.iter().filter(|e| name.is_none_or(|n| n == e.name)) {
                let named = out.iter().filter(|s| s.name != OTHER).count() < MAX_ANSWERED;
                let subject = if named || out.iter().any(|s| s.kind == e.kind && s.name == e.name) {
                    e.name.as_str()
                } else {
                    OTHER
                };
                let at = match out.iter().position(|s| (s.kind, s.name.as_str()) >= (e.kind, subject)) {
                    Some(at) if out[at].kind == e.kind && out[at].name == subject => at,
                    found => {
                        let at = found.unwrap_or(out.len());
                        out.insert(
                            at,
                            SubjectStats {
                                kind: e.kind,
                                name: subject.into(),
                                total: MinuteStats::default(),
                                minutes: Vec::new(),
                            },
                        );
                        at
                    }
                };
                let s = &mut out[at];
                match s.minutes.last_mut().filter(|m| m.minute == *minute) {
                    Some(m) => m.add(&e.tally),
                    None => s.minutes.push(MinuteStats::of(*minute, &e.tally)),
                }
                s.total.add(&e.tally);
            }
        }
        Stats {
            since: minute_of(since_ms),
            until: until_ms,
            minute_ms: MINUTE_MS,
            retention_minutes: RETENTION_MINUTES,
            lost: self.lost,
            subjects: out,
        }
    }
}

/// The tally of `kind` `name` among `entries`: made when there is room, else the kind's
/// [`OTHER`] (`None` when even that has no room).
fn entry_of<'e>(entries: &'e mut Vec<Entry>, kind: Kind, name: &str) -> Option<&'e mut Tally> {
    let at = match entries.iter().position(|e| e.kind == kind && e.name == name) {
        Some(at) => at,
        None if entries.len() < MAX_SUBJECTS => {
            entries.push(Entry { kind, name: name.into(), tally: Tally::default() });
            entries.len() - 1
        }
        None => match entries.iter().position(|e| e.kind == kind && e.name == OTHER) {
            Some(at) => at,
            None if entries.len() < MAX_SUBJECTS + 4 => {
                entries.push(Entry { kind, name: OTHER.into(), tally: Tally::default() });
                entries.len() - 1
            }
            None => return None,
        },
    };
    Some(&mut entries[at].tally)
}

/// A query's answer (`GET /__sluicegate/stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// The first minute it covers (ms since the epoch).
    pub since: u64,
    /// Its end (ms since the epoch).
    pub until: u64,
    /// A minute, in ms.
    pub minute_ms: u64,
    /// How many minutes the store keeps.
    pub retention_minutes: u64,
    /// Decisions counted nowhere since the store started.
    pub lost: u64,
    /// Each subject with counts in the span, by kind and name.
    pub subjects: Vec<SubjectStats>,
}

/// One subject's counts in a query's span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectStats {
    /// What it is.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its counts over the span (the top refused merged from its minutes').
    pub total: MinuteStats,
    /// Its counts in each minute it has any, oldest first.
    pub minutes: Vec<MinuteStats>,
}

/// Counts over a minute (or a span).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MinuteStats {
    /// The minute's start (ms since the epoch); 0 for a span's total.
    pub minute: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests refused.
    pub refused: u64,
    /// Requests admitted while the store had failed.
    pub failed_open: u64,
    /// Requests shed.
    pub shed: u64,
    /// Requests a rule would have refused, were its refusal enforced (shadow refusals).
    pub would_refuse: u64,
    /// The identities refused most, most first (at most [`TOP_SHOWN`]).
    pub top_refused: Vec<Hitter>,
    sketch: TopK,
}

impl MinuteStats {
    fn of(minute: u64, tally: &Tally) -> MinuteStats {
        MinuteStats {
            minute,
            admitted: tally.admitted,
            refused: tally.refused,
            failed_open: tally.failed_open,
            shed: tally.shed,
            would_refuse: tally.would_refuse,
            top_refused: tally.top_refused.top(TOP_SHOWN),
            sketch: tally.top_refused.clone(),
        }
    }

    fn add(&mut self, tally: &Tally) {
        self.admitted = self.admitted.saturating_add(tally.admitted);
        self.refused = self.refused.saturating_add(tally.refused);
        self.failed_open = self.failed_open.saturating_add(tally.failed_open);
        self.shed = self.shed.saturating_add(tally.shed);
        self.would_refuse = self.would_refuse.saturating_add(tally.would_refuse);
        self.sketch.merge(&tally.top_refused);
        self.top_refused = self.sketch.top(TOP_SHOWN);
    }
}

impl Stats {
    /// The answer as JSON: `{"since", "until", "minute_ms", "retention_minutes", "lost",
    /// "subjects": [{"kind", "name", "total": counts, "minutes": [{"minute", counts…}]}]}`,
    /// counts being `"admitted", "refused", "failed_open", "shed", "would_refuse",
    /// "top_refused": [{"identity", "count"[, "error"]}]`.
    pub fn to_json(&self) -> String {
        let mut out = alloc::format!(
            "{{\"since\":{},\"until\":{},\"minute_ms\":{},\"retention_minutes\":{},\"lost\":{},\"subjects\":[",
            self.since,
            self.until,
            self.minute_ms,
            self.retention_minutes,
            self.lost
        );
        for (i, s) in self.subjects.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"kind\":\"{}\",\"name\":{},\"total\":", s.kind.name(), quoted(&s.name));
            s.total.write(&mut out);
            out.push_str(",\"minutes\":[");
            for (j, m) in s.minutes.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                m.write(&mut out);
            }
            out.push_str("]}");
        }
        out.push_str("]}");
        out
    }
}

impl MinuteStats {
    fn write(&self, out: &mut String) {
        out.push('{');
        if self.minute != 0 {
            let _ = write!(out, "\"minute\":{},", self.minute);
        }
        let _ = write!(
            out,
            "\"admitted\":{},\"refused\":{},\"failed_open\":{},\"shed\":{},\"would_refuse\":{},\"top_refused\":[",
            self.admitted, self.refused, self.failed_open, self.shed, self.would_refuse
        );
        for (i, h) in self.top_refused.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"identity\":{},\"count\":{}", quoted(&h.identity), h.count);
            if h.error > 0 {
                let _ = write!(out, ",\"error\":{}", h.error);
            }
            out.push('}');
        }
        out.push_str("]}");
    }
}

#[cfg(test)]
mod tests;
