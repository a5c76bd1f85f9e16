//! Numbers as `redis.call` passes them to commands: Valkey formats a Lua
//! number argument with `fpconv_dtoa` (grisu2 digits, plain or scientific
//! by its rules), not with Lua's lossy "%.14g". Here the digits are
//! Rust's shortest round-trip ones, which grisu2 matches but for rare
//! doubles where it emits a longer form. Written into a caller's buffer:
//! no allocation.

use std::fmt::Write;

/// A fixed buffer that `write!` can fill.
struct Buf<'a> {
    b: &'a mut [u8; 32],
    n: usize,
}

impl Write for Buf<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.n + s.len();
        if end > self.b.len() {
            return Err(std::fmt::Error);
        }
        self.b[self.n..end].copy_from_slice(s.as_bytes());
        self.n = end;
        Ok(())
    }
}

/// `d` as Valkey's `fpconv_dtoa` writes it, into `out`; the length.
pub fn dtoa(d: f64, out: &mut [u8; 32]) -> usize {
    let mut n = 0;
    let mut push = |out: &mut [u8; 32], c: u8| {
        out[n] = c;
        n += 1;
    };
    if d.is_sign_negative() {
        push(out, b'-');
    }
    if d == 0.0 {
        push(out, b'0');
        return n;
    }
    if d.is_nan() || d.is_infinite() {
        for &c in if d.is_nan() { b"nan" } else { b"inf" } {
            push(out, c);
        }
        return n;
    }
    // The shortest round-trip digits and their exponent.
    let mut sci = [0u8; 32];
    let mut w = Buf { b: &mut sci, n: 0 };
    if write!(w, "{:e}", d.abs()).is_err() {
        return n;
    }
    let len = w.n;
    let s = &sci[..len];
    let e_at = s.iter().position(|&c| c == b'e').unwrap_or(len);
    let mut digits = [0u8; 24];
    let mut nd = 0;
    for &c in &s[..e_at] {
        if c.is_ascii_digit() && nd < digits.len() {
            digits[nd] = c;
            nd += 1;
        }
    }
    let e10: i32 = std::str::from_utf8(&s[(e_at + 1).min(len)..])
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    let neg = d.is_sign_negative();
    let k = e10 - (nd as i32 - 1);
    let exp = (k + nd as i32 - 1).abs();
    // A plain integer. fpconv's grisu2 emits every digit of an integer
    // below 1e19 (1e18 prints whole, 1e19 as 1e+19), where the shortest
    // digits alone would switch to scientific sooner.
    if k >= 0 && (exp < nd as i32 + 7 || d.abs() < 1e19) {
        for &c in &digits[..nd] {
            push(out, c);
        }
        for _ in 0..k {
            push(out, b'0');
        }
        return n;
    }
    // A plain decimal.
    if k < 0 && (k > -7 || exp < 4) {
        let offset = nd as i32 + k;
        if offset <= 0 {
            push(out, b'0');
            push(out, b'.');
            for _ in 0..-offset {
                push(out, b'0');
            }
            for &c in &digits[..nd] {
                push(out, c);
            }
        } else {
            let offset = offset as usize;
            for &c in &digits[..offset] {
                push(out, c);
            }
            push(out, b'.');
            for &c in &digits[offset..nd] {
                push(out, c);
            }
        }
        return n;
    }
    // Scientific.
    let nd = nd.min(18 - usize::from(neg));
    push(out, digits[0]);
    if nd > 1 {
        push(out, b'.');
        for &c in &digits[1..nd] {
            push(out, c);
        }
    }
    push(out, b'e');
    push(out, if k + nd as i32 - 1 < 0 { b'-' } else { b'+' });
    let mut exp = exp;
    let mut cent = 0;
    if exp > 99 {
        cent = exp / 100;
        push(out, b'0' + cent as u8);
        exp -= cent * 100;
    }
    if exp > 9 {
        let dec = exp / 10;
        push(out, b'0' + dec as u8);
        exp -= dec * 10;
    } else if cent != 0 {
        push(out, b'0');
    }
    push(out, b'0' + (exp % 10) as u8);
    n
}

#[cfg(test)]
mod tests {
    use super::dtoa;

    fn s(d: f64) -> String {
        let mut b = [0u8; 32];
        let n = dtoa(d, &mut b);
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    #[test]
    fn as_valkey_8_1_formats_them() {
        // Each checked against valkey-server 8.1 (SET from a script, GET).
        assert_eq!(s(1e20), "1e+20");
        assert_eq!(s(0.1), "0.1");
        assert_eq!(s(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(s(123456789012345678.0), "123456789012345680");
        assert_eq!(s(9007199254740992.0), "9007199254740992");
        assert_eq!(s(1e-7), "1e-7");
        assert_eq!(s(1e21), "1e+21");
        assert_eq!(s(123.456), "123.456");
        assert_eq!(s(2f64.powi(63)), "9223372036854776000");
        assert_eq!(s(f64::INFINITY), "inf");
        assert_eq!(s(f64::NEG_INFINITY), "-inf");
        assert_eq!(s(1e15), "1000000000000000");
        assert_eq!(s(1e17), "100000000000000000");
        assert_eq!(s(5e-324), "5e-324");
        assert_eq!(s(100.0), "100");
        assert_eq!(s(-5.0), "-5");
        assert_eq!(s(1.5e300), "1.5e+300");
        assert_eq!(s(0.000001), "0.000001");
        assert_eq!(s(0.0), "0");
        assert_eq!(s(3.25), "3.25");
        assert_eq!(s(1e18), "1000000000000000000");
        assert_eq!(s(1e19), "1e+19");
        assert_eq!(s(1.5e19), "1.5e+19");
        assert_eq!(s(12345678901234567e3), "12345678901234567000");
        assert_eq!(s(1e-5), "0.00001");
        assert_eq!(s(1.5e-6), "1.5e-6");
        assert_eq!(s(0.00012345), "1.2345e-4");
        assert_eq!(s(123456.789e3), "123456789");
        assert_eq!(s(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(s(2.2250738585072014e-308), "2.2250738585072014e-308");
        assert_eq!(s(4e-320), "4e-320");
        assert_eq!(s(1234.567), "1234.567");
    }
}
