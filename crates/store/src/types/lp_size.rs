//! What an element weighs in one of Valkey's listpacks: the sizes Valkey
//! judges its nodes by (a quicklist node's or a stream block's
//! `lpBytes`), so that ringkv's nodes end where Valkey's end. ringkv
//! stores the elements its own way; only the arithmetic is Valkey's.

/// Bytes an element of `encoded` bytes takes with its back-length.
fn with_backlen(encoded: usize) -> usize {
    encoded
        + match encoded {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        }
}

/// An integer element.
pub fn int_size(v: i64) -> usize {
    with_backlen(match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    })
}

/// A string element of `n` bytes, stored as a string.
pub fn str_size_of_len(n: usize) -> usize {
    with_backlen(match n {
        0..=63 => 1 + n,
        64..=4095 => 2 + n,
        _ => 5 + n,
    })
}

/// A string element, stored as an integer when it is one (Valkey's
/// listpack does so for every canonical decimal integer).
pub fn str_size(s: &[u8]) -> usize {
    match string_int(s) {
        Some(v) => int_size(v),
        None => str_size_of_len(s.len()),
    }
}

/// Valkey's `lpStringToInt64`: a canonical decimal integer.
pub fn string_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || neg) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_decimal_integers_only() {
        assert_eq!(string_int(b"123"), Some(123));
        assert_eq!(string_int(b"-5"), Some(-5));
        assert_eq!(string_int(b"0"), Some(0));
        assert_eq!(string_int(b"01"), None);
        assert_eq!(string_int(b"-0"), None);
        assert_eq!(string_int(b"+1"), None);
        assert_eq!(string_int(b"9223372036854775808"), None);
        assert_eq!(string_int(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn sizes_as_valkeys_listpack_encodes() {
        // 7-bit uint, 13-bit, 16, 24, 32 and 64-bit ints, each + 1 back-length byte.
        let ints = [
            (5, 2),
            (-1, 3),
            (4095, 3),
            (30000, 4),
            (8000000, 5),
            (2000000000, 6),
            (i64::MAX, 10),
        ];
        for (v, size) in ints {
            assert_eq!(str_size(v.to_string().as_bytes()), size, "{v}");
        }
        assert_eq!(str_size(b"abc"), 5);
        assert_eq!(str_size(&[b'x'; 100]), 100 + 2 + 1);
        assert_eq!(str_size(&[b'x'; 5000]), 5000 + 5 + 2);
        assert_eq!(str_size(b"007"), str_size_of_len(3));
    }
}
