//! The known name a mistyped one most likely stands for, for the "did you mean" of an error
//! about a configuration field or a command: a slip (`rsp` for `rps`, `durration_s`), a
//! plural or another ending (`bursts`, `policy` for `policies`), or a name cut short or run
//! on (`window` for `window_s`, `simulate` for `sim`).
// Only the simulator (a `std` build) asks so far.
#![cfg_attr(not(feature = "std"), allow(dead_code))]

/// Words longer than this are only compared by their start (the edit distance is quadratic).
const LONGEST_COMPARED: usize = 64;

/// The name in `known` that `word` most likely stands for, if one is close enough (compared
/// byte by byte, ASCII case ignored: the names are ASCII, and Unicode's case tables would
/// cost the wasm builds about 10 KB):
///
/// - at most 2 edits away — a letter added, removed or changed, or two neighbours swapped —
///   and no more edits than half the word's letters (`id` is not `kind`);
/// - or the same start, 3 letters at least: one is the start of the other (`sim` and
///   `simulate`), or both share 4 first letters and differ only in their last 3 at most
///   (`policy` and `policies`).
///
/// The fewest edits win, then the longest shared start; a tie goes to the first in `known`.
///
/// ```text
/// rsp      in rate, rps, burst             → rps
/// simulate in check-rules, sim, replay     → sim
/// colour   in rate, burst                  → none
/// ```
pub(crate) fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let mut best: Option<((usize, usize), &'a str)> = None;
    for &name in known {
        let Some(score) = closeness(word.as_bytes(), name.as_bytes()) else { continue };
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, name));
        }
    }
    best.map(|(_, name)| name)
}

/// How close two words are, smaller being closer: (edits, or 3 for a shared start; the
/// letters not shared at the start), or `None` when they are not close.
fn closeness(a: &[u8], b: &[u8]) -> Option<(usize, usize)> {
    let shared = a.iter().zip(b).take_while(|(x, y)| x.eq_ignore_ascii_case(y)).count();
    let unshared = a.len().max(b.len()) - shared;
    if a.len() <= LONGEST_COMPARED && b.len() <= LONGEST_COMPARED {
        let edits = edits(a, b);
        if edits <= 2 && 2 * edits <= a.len() {
            return Some((edits, unshared));
        }
    }
    let one_starts_the_other = shared >= 3 && shared == a.len().min(b.len());
    let other_ending = shared >= 4 && a.len() - shared <= 3 && b.len() - shared <= 3;
    (one_starts_the_other || other_ending).then_some((3, unshared))
}

/// The edits from `a` to `b` (at most [`LONGEST_COMPARED`] bytes each, ASCII case ignored):
/// letters added, removed or changed, and neighbours swapped (the optimal string alignment
/// distance).
fn edits(a: &[u8], b: &[u8]) -> usize {
    let same = |x: u8, y: u8| x.eq_ignore_ascii_case(&y);
    // three rows of the table: two rows back (for a swap), the last one and this one
    let mut before = [0usize; LONGEST_COMPARED + 1];
    let mut last = [0usize; LONGEST_COMPARED + 1];
    let mut row = [0usize; LONGEST_COMPARED + 1];
    for (j, cell) in last.iter_mut().enumerate().take(b.len() + 1) {
        *cell = j;
    }
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let change = usize::from(!same(a[i - 1], b[j - 1]));
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + change);
            if i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]) {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        before = last;
        last = row;
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{edits, nearest};

    const POLICY: [&str; 6] = ["name", "algorithm", "rate", "burst", "limit", "window_s"];
    const CLIENT: [&str; 5] = ["name", "kind", "rps", "burst", "every_s"];

    fn bytes(s: &str) -> &[u8] {
        s.as_bytes()
    }

    #[test]
    fn edits_count_a_swap_of_neighbours_as_one() {
        assert_eq!(edits(bytes("rsp"), bytes("rps")), 1);
        assert_eq!(edits(bytes("durration_s"), bytes("duration_s")), 1);
        assert_eq!(edits(bytes("kitten"), bytes("sitting")), 3);
        assert_eq!(edits(bytes(""), bytes("abc")), 3);
        assert_eq!(edits(bytes("abc"), bytes("abc")), 0);
    }

    #[test]
    fn a_slip_a_plural_and_a_swap_find_the_name_meant() {
        assert_eq!(nearest("rsp", &CLIENT), Some("rps"));
        assert_eq!(nearest("bursts", &POLICY), Some("burst"));
        assert_eq!(nearest("durration_s", &["service", "duration_s", "seed"]), Some("duration_s"));
        assert_eq!(nearest("Rate", &POLICY), Some("rate"), "case is ignored");
        assert_eq!(nearest("RPS", &CLIENT), Some("rps"));
    }

    #[test]
    fn a_name_cut_short_or_run_on_finds_the_name_it_starts_or_ends_with() {
        assert_eq!(nearest("simulate", &["check-rules", "sim", "replay", "help"]), Some("sim"));
        assert_eq!(nearest("check", &["check-rules", "sim", "replay", "help"]), Some("check-rules"));
        assert_eq!(nearest("window", &POLICY), Some("window_s"));
        assert_eq!(nearest("policy", &["service", "policies", "clients"]), Some("policies"));
        assert_eq!(nearest("max_retry", &["max_retries", "retry"]), Some("max_retries"));
    }

    #[test]
    fn an_unrelated_or_too_short_word_finds_nothing() {
        assert_eq!(nearest("colour", &POLICY), None);
        assert_eq!(nearest("id", &CLIENT), None, "two edits make any two-letter word another");
        assert_eq!(nearest("x", &CLIENT), None);
        assert_eq!(nearest("", &CLIENT), None);
        assert_eq!(nearest("rps", &[]), None);
    }

    #[test]
    fn the_fewest_edits_win_and_a_tie_goes_to_the_first_name() {
        // "burs" is one edit from "burst", and the start of it; one edit wins over a start
        assert_eq!(nearest("burs", &["bursting", "burst"]), Some("burst"));
        assert_eq!(nearest("ab", &["ac", "ad"]), Some("ac"));
    }

    #[test]
    fn a_very_long_word_is_compared_by_its_start_only() {
        let long = "a".repeat(10_000);
        assert_eq!(nearest(&long, &POLICY), None);
        let run_on = alloc::format!("window_s{}", "x".repeat(100));
        assert_eq!(nearest(&run_on, &POLICY), Some("window_s"));
    }
}
