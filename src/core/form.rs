//! Form decoding (`application/x-www-form-urlencoded`, and a query string read the same
//! way): `+` is a space and `%XX` its byte; a `%` without two hex digits stays as it is.

use alloc::borrow::Cow;
use alloc::vec::Vec;

/// `text` decoded as a form decoder reads a name or a value; borrowed when there is nothing
/// to decode.
pub(crate) fn decode(text: &str) -> Cow<'_, [u8]> {
    if !text.contains(['%', '+']) {
        return Cow::Borrowed(text.as_bytes());
    }
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match (b, bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                // Two hex digits make at most 255.
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            _ => {
                out.push(if b == b'+' { b' ' } else { b });
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_is_a_space_and_an_escape_its_byte_but_a_stray_percent_stays() {
        assert_eq!(&*decode("a+b%2Cc%2c"), b"a b,c,");
        assert_eq!(&*decode("%zz%4%"), b"%zz%4%");
        assert_eq!(&*decode("%ff"), &[0xff]);
        assert!(matches!(decode("plain"), Cow::Borrowed(_)));
    }
}
