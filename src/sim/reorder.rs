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
    run: VecDeque<Held>,
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
        let held = Held::new(row, self.seq);
        self.seq += 1;
        if row.t >= self.newest {
            self.newest = row.t;
            self.run.push_back(held);
            let horizon = row.t - self.window;
            if horizon >= self.next {
                self.release(horizon, out);
                self.next = horizon + self.step;
            }
        } else if row.t >= self.newest - self.window {
            // every row let out lies before the newest time less the window, then or now
            self.late.push(held);
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
        due.sort_unstable_by_key(|h| h.key);
        let mut due = due.iter().peekable();
        while let Some(first) = self.run.front().filter(|h| h.row.t < horizon) {
            while let Some(d) = due.next_if(|d| d.key < first.key) {
                out.push(d.row);
            }
            out.push(first.row);
            self.run.pop_front();
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
