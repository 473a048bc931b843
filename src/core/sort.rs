//! One small in-place sort for the code that ships in the browser's `.wasm`: a heapsort,
//! O(n log n) with no extra memory, whose code is a few hundred bytes per type where the
//! standard library's sorts are a few KB each. Not stable.

/// Sorts `v` so that no element is `less` than one before it.
pub(crate) fn sort_by<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let sift = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[root], &v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    };
    let n = v.len();
    for i in (0..n / 2).rev() {
        sift(v, i, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn sorts_like_the_standard_library() {
        let mut x: u64 = 7;
        for len in 0..200usize {
            let mut v: Vec<u64> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (x >> 33) % 50
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_unstable();
            sort_by(&mut v, |a, b| a < b);
            assert_eq!(v, expected, "length {len}");
        }
    }
}
