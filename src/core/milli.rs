//! Thousandths of a weighted call, the unit the browser client's pacer and the edge's egress
//! gate count weight in (Open-Meteo's weights are fractional, e.g. 1.5), and [`Milli`], one
//! written as a decimal.

use core::fmt;

/// Thousandths written as a decimal with integers only (`1500` → `1.5`, `1050` → `1.05`,
/// `2000` → `2`): formatting a float would weigh 16 KB of wasm.
///
/// # Examples
/// ```
/// use sluicegate::milli::Milli;
/// assert_eq!(Milli(1_500).to_string(), "1.5");
/// assert_eq!(Milli(1_050).to_string(), "1.05");
/// assert_eq!(Milli(7).to_string(), "0.007");
/// assert_eq!(Milli(2_000).to_string(), "2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Milli(pub u64);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        match frac {
            0 => write!(f, "{whole}"),
            _ if frac % 100 == 0 => write!(f, "{whole}.{}", frac / 100),
            _ if frac % 10 == 0 => write!(f, "{whole}.{:02}", frac / 10),
            _ => write!(f, "{whole}.{frac:03}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Milli;
    use alloc::string::ToString;

    #[test]
    fn thousandths_are_written_without_trailing_zeros() {
        for (milli, text) in [(0, "0"), (1, "0.001"), (10, "0.01"), (100, "0.1"), (1_500, "1.5"), (12_340, "12.34")] {
            assert_eq!(Milli(milli).to_string(), text);
        }
        assert_eq!(Milli(u64::MAX).to_string(), "18446744073709551.615");
    }
}
