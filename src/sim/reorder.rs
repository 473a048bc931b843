//! The reorder window: the rows of a trace that is out of time order by a few seconds (logs
//! merged from several servers) put back in order while it is read, holding only the rows
//! of the last few seconds.
//!
//! A row may come up to the window before the newest row read before it; one further back is
//! refused (the caller then sorts the whole trace). Rows are held until they lie more than
//! the window before the newest row read, then come out by time and, within one instant, in
//! the order they were read: the order a stable sort of the whole trace by time gives. They
//! are let out in steps, each time the newest time has moved half a window on: all those
//! from before the newest time less the window at once, so all the rows of an instant come
//! out together, and any row still to come lies after them.
//!
//! Memory: every row held lies within one and a half windows of the newest row read, so what
//! is held is bounded by the rows of that much trace time, however long the trace.

use super::queue::time_key;
use super::traffic::Request;
use std::collections::VecDeque;

/// The reorder window used when none is given, in seconds of trace time: a few times the
/// skew of merged logs (a few seconds), and at a thousand rows a second a few thousand rows
/// held (under a MiB).
pub const DEFAULT_REORDER_WINDOW_S: f64 = 10.0;

/// A row held back, ordered by time, then by the order it was read.
#[derive(Clone, Copy, Debug)]
struct Held {
    key: u128,
    row: Request,
}

impl Held {
    fn new(row: Request, seq: u64) -> Self {
        Held { key: u128::from(time_key(row.t)) << 64 | u128::from(seq), row }
    }
}

/// A row of the run, and where it was read (its key is worked out only when late rows are
/// merged with it).
#[derive(Clone, Copy, Debug)]
struct InRun {
    row: Request,
    seq: u64,
}

/// Rows in, rows out in time order, held for up to a window of trace time.
///
/// A row at or after every row before it (all of a trace in time order) is appended to a
/// queue that is in order by construction; only rows that step back are set aside, unsorted,
/// and sorted when they are released (a few thousand at a time), then merged with the queue.
#[derive(Debug)]
pub(super) struct Reorder {
    window: f64,
    /// How far the newest time moves on between releases (half the window).
    step: f64,
    /// Rows read at or after the newest row before them: in order.
    run: VecDeque<InRun>,
    /// Rows read after a later row, in the order read.
    late: Vec<Held>,
    /// The rows of `late` being released.
    due: Vec<Held>,
    /// The latest time read.
    newest: f64,
    /// The next release is when the newest time less the window reaches this.
    next: f64,
    seq: u64,
}

impl Reorder {
    /// Holds rows for `window` seconds (not negative; infinite holds the whole trace).
    pub(super) fn new(window: f64) -> Self {
        debug_assert!(window >= 0.0, "a reorder window is not negative");
        Reorder {
            window,
            step: window / 2.0,
            run: VecDeque::new(),
            late: Vec::new(),
            due: Vec::new(),
            newest: f64::NEG_INFINITY,
            next: if window.is_finite() { f64::NEG_INFINITY } else { f64::INFINITY },
            seq: 0,
        }
    }

    /// Takes a row, appending to `out` the rows it lets out, in order (either none or those
    /// of whole instants). False, taking nothing, for a row more than the window before the
    /// newest row read.
    #[inline]
    pub(super) fn push(&mut self, row: Request, out: &mut Vec<Request>) -> bool {
        let seq = self.seq;
        self.seq += 1;
        if row.t >= self.newest {
            self.newest = row.t;
            self.run.push_back(InRun { row, seq });
            let horizon = row.t - self.window;
            if horizon >= self.next {
                self.release(horizon, out);
                self.next = horizon + self.step;
            }
        } else if row.t >= self.newest - self.window {
            // every row let out lies before the newest time less the window, then or now
            self.late.push(Held::new(row, seq));
        } else {
            return false;
        }
        true
    }

    /// Appends every row still held to `out`, in order.
    pub(super) fn finish(&mut self, out: &mut Vec<Request>) {
        self.release(f64::INFINITY, out);
    }

    /// Appends to `out`, in order, the rows held from before `horizon`.
    fn release(&mut self, horizon: f64, out: &mut Vec<Request>) {
        let due = &mut self.due;
        due.clear();
        self.late.retain(|h| {
            let keep = h.row.t >= horizon;
            if !keep {
                due.push(*h);
            }
            keep
        });
        // the run's rows from before the horizon (the run is in time order)
        let n = self.run.partition_point(|r| r.row.t < horizon);
        if due.is_empty() {
            out.extend(self.run.range(..n).map(|r| r.row));
            self.run.drain(..n);
            return;
        }
        due.sort_unstable_by_key(|h| h.key);
        let mut due = due.iter().peekable();
        for first in self.run.drain(..n) {
            let key = Held::new(first.row, first.seq).key;
            while let Some(d) = due.next_if(|d| d.key < key) {
                out.push(d.row);
            }
            out.push(first.row);
        }
        out.extend(due.map(|d| d.row));
    }

    /// How many rows are held.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.run.len() + self.late.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, client: u32) -> Request {
        Request { t, client, endpoint: 0, cost: 1.0 }
    }

    /// The rows out (time, client) until one is refused, the most held at once, and the
    /// number of the row refused.
    fn through(window: f64, rows: &[(f64, u32)]) -> (Vec<(f64, u32)>, usize, Option<usize>) {
        let mut reorder = Reorder::new(window);
        let (mut out, mut most) = (Vec::new(), 0);
        for (i, &(t, c)) in rows.iter().enumerate() {
            if !reorder.push(row(t, c), &mut out) {
                return (out.iter().map(|r| (r.t, r.client)).collect(), most, Some(i));
            }
            most = most.max(reorder.held());
        }
        reorder.finish(&mut out);
        (out.iter().map(|r| (r.t, r.client)).collect(), most, None)
    }

    /// What each push (and then the finish) lets out, each in a group of its own.
    fn releases(window: f64, rows: &[(f64, u32)]) -> Vec<Vec<(f64, u32)>> {
        let mut reorder = Reorder::new(window);
        let mut groups = Vec::new();
        for &(t, c) in rows {
            let mut out = Vec::new();
            assert!(reorder.push(row(t, c), &mut out), "{t} refused");
            groups.push(out.iter().map(|r| (r.t, r.client)).collect::<Vec<_>>());
        }
        let mut out = Vec::new();
        reorder.finish(&mut out);
        groups.push(out.iter().map(|r| (r.t, r.client)).collect());
        groups.retain(|g| !g.is_empty());
        groups
    }

    #[test]
    fn rows_come_out_as_a_stable_sort_by_time_whole_instants_at_a_time() {
        // in order (with and without late rows among them), instants of one to four rows,
        // rows at the very time a release stops before, and -0.0 with 0.0
        let in_order: Vec<(f64, u32)> = (0..2_000u32).map(|i| (f64::from(i / 3 + i / 5) / 4.0, i)).collect();
        let at_horizons = [(0.0, 0), (2.0, 1), (3.0, 2), (4.0, 3), (2.0, 4), (2.0, 5), (6.0, 6), (4.0, 7), (8.0, 8)];
        let jittered: Vec<(f64, u32)> =
            (0..2_000u32).map(|i| (f64::from(i) / 10.0 + f64::from(i * 7919 % 20) / 10.0, i)).collect();
        let zeros = [(-0.0, 0), (0.0, 1), (-0.0, 2), (1.0, 3), (0.0, 4), (2.0, 5), (2.0, 6)];
        for (rows, windows) in [
            (&in_order[..], &[0.0, 0.25, 1.0, 3.0, f64::INFINITY][..]),
            (&at_horizons, &[2.0, 4.0]),
            (&jittered, &[2.0, 3.0, 7.5]),
            (&zeros, &[1.0, 2.0]),
        ] {
            // (a stable sort: -0.0 and 0.0 are one instant, its rows as read)
            let mut want = rows.to_vec();
            want.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
            for &window in windows {
                let groups = releases(window, rows);
                assert_eq!(groups.concat(), want, "window {window}");
                for pair in groups.windows(2) {
                    let (last, next) = (pair[0].last().unwrap().0, pair[1][0].0);
                    assert!(last < next, "an instant split: {last} then {next}, window {window}");
                }
            }
        }
    }

    #[test]
    fn rows_within_the_window_come_out_by_time_then_as_read() {
        let rows = [(1.0, 0), (3.0, 1), (2.0, 2), (3.0, 3), (1.5, 4), (2.0, 5), (6.0, 6), (4.5, 7)];
        let (out, _, refused) = through(5.0, &rows);
        let want = [(1.0, 0), (1.5, 4), (2.0, 2), (2.0, 5), (3.0, 1), (3.0, 3), (4.5, 7), (6.0, 6)];
        assert_eq!((out.as_slice(), refused), (want.as_slice(), None));
    }

    #[test]
    fn only_the_rows_of_one_and_a_half_windows_are_held() {
        // 10 rows a second for 1,000 s, each moved later by up to 1.9 s
        let rows: Vec<(f64, u32)> =
            (0..10_000u32).map(|i| (f64::from(i) / 10.0 + f64::from(i * 7919 % 20) / 10.0, i)).collect();
        let (out, most, refused) = through(3.0, &rows);
        assert_eq!((out.len(), refused), (rows.len(), None));
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
        // those within 4.5 s of the newest, whose times were moved up to 1.9 s
        assert!(most <= 10 * 7, "held {most}");
    }

    #[test]
    fn a_row_more_than_the_window_back_is_refused() {
        // after 5.0, 4.0 is fine and 3.9 is not
        let (out, _, refused) = through(1.0, &[(1.0, 0), (5.0, 1), (4.5, 2), (4.0, 3), (3.9, 4), (6.0, 5)]);
        assert_eq!((out.as_slice(), refused), ([(1.0, 0)].as_slice(), Some(4)));
        // even when nothing after it is out yet
        let (out, _, refused) = through(10.0, &[(3.0, 0), (12.0, 1), (1.5, 2)]);
        assert_eq!((out.as_slice(), refused), ([].as_slice(), Some(2)));
        // a window of 0 holds the rows of one instant
        let (out, most, refused) = through(0.0, &[(1.0, 0), (1.0, 1), (2.0, 2), (2.0, 3)]);
        assert_eq!((out.as_slice(), most, refused), ([(1.0, 0), (1.0, 1), (2.0, 2), (2.0, 3)].as_slice(), 2, None));
        let (_, _, refused) = through(0.0, &[(1.0, 0), (2.0, 1), (2.0, 2), (1.0, 3)]);
        assert_eq!(refused, Some(3));
    }

    #[test]
    fn minus_zero_and_zero_are_one_instant_and_an_infinite_window_holds_everything() {
        let (out, most, refused) = through(f64::INFINITY, &[(0.0, 0), (-0.0, 1), (3.0, 2), (-1.0, 3), (0.0, 4)]);
        assert_eq!(out.iter().map(|r| r.1).collect::<Vec<_>>(), [3, 0, 1, 4, 2]);
        assert_eq!((most, refused), (5, None));
    }
}
