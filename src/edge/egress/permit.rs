//! The id of a permit handed to the app: which budget holds it (this isolate's or the
//! fleet's) and the 128-bit secret it was sealed with
//! ([`Gate::seal`](super::gate::Gate::seal)). The secret is drawn from a cryptographic source
//! by the caller, so an id cannot be guessed from another (`DELETE` of a guessed id frees
//! nothing), and it is the only handle on the permit from outside the edge.
//!
//! ```text
//! i0f3c9a1e5b7d2c4a6e8f0b1d3c5a7e9f1     i: this isolate's budget, then 32 hex digits
//! f…                                     f: the fleet's (the provider's Durable Object)
//! ```

use alloc::string::String;
use core::fmt::{self, Write};

/// A permit's id, as the app holds it.
///
/// # Examples
/// ```
/// use sluicegate::egress::permit::PermitId;
/// let id = PermitId { fleet: false, secret: 0xabc };
/// assert_eq!(id.to_string(), "i00000000000000000000000000000abc");
/// assert_eq!(PermitId::parse(&id.to_string()), Some(id));
/// assert_eq!(PermitId::parse("i490"), None, "a number is not an id");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PermitId {
    /// Held by the provider's Durable Object (`scope: "fleet"`), not this isolate.
    pub fleet: bool,
    /// The secret it was sealed with.
    pub secret: u128,
}

impl PermitId {
    /// Read an id: `i` or `f`, then exactly 32 hex digits (either case).
    pub fn parse(id: &str) -> Option<PermitId> {
        let (scope, hex) = (id.get(..1)?, id.get(1..)?);
        let fleet = match scope {
            "i" => false,
            "f" => true,
            _ => return None,
        };
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(PermitId { fleet, secret: u128::from_str_radix(hex, 16).ok()? })
    }

    /// The secret as 32 lower-case hex digits (what crosses to a Durable Object).
    pub fn secret_hex(&self) -> String {
        let mut out = String::with_capacity(32);
        let _ = write!(out, "{:032x}", self.secret);
        out
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:032x}", if self.fleet { 'f' } else { 'i' }, self.secret)
    }
}

/// A secret as [`PermitId::secret_hex`] writes it, read back: exactly 32 hex digits.
pub fn secret_from_hex(hex: &str) -> Option<u128> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn an_id_names_its_budget_and_its_whole_secret() {
        let id = PermitId { fleet: true, secret: u128::MAX };
        assert_eq!(id.to_string(), "fffffffffffffffffffffffffffffffff");
        assert_eq!(PermitId::parse(&id.to_string()), Some(id));
        assert_eq!(PermitId::parse(&"F".repeat(33)), None, "the scope is a lower-case letter");
        let upper = "iABCDEF0123456789ABCDEF0123456789";
        assert_eq!(PermitId::parse(upper).map(|id| id.secret), Some(0xabcdef0123456789abcdef0123456789));
        assert_eq!(secret_from_hex(&id.secret_hex()), Some(u128::MAX));
    }

    #[test]
    fn anything_but_a_whole_id_is_refused() {
        for bad in [
            "",
            "i",
            "i489",
            "x00000000000000000000000000000001",
            "i0000000000000000000000000000001",
            "i000000000000000000000000000000001",
            "i+0000000000000000000000000000001",
            "i0000000000000000000000000000000g",
            "i 0000000000000000000000000000001",
            "é0000000000000000000000000000000",
        ] {
            assert_eq!(PermitId::parse(bad), None, "{bad:?}");
        }
        assert_eq!(secret_from_hex("+0000000000000000000000000000001"), None);
    }
}
