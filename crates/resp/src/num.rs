//! Number <-> text conversions with Valkey's exact rules, shared by the
//! parser (lengths), the reply writer (integers, doubles) and the engine
//! (argument parsing, reply formatting). Only [`fmt_g`] allocates.

/// Longest decimal form of an `i64` (`-9223372036854775808`).
pub const I64_MAX_LEN: usize = 20;

/// Longest text [`fmt_double`] produces (`-1.2345678901234567e-308` is 24).
pub const DOUBLE_MAX_LEN: usize = 32;

/// Parse a signed decimal integer exactly as Valkey's `string2ll` does:
/// an optional `-`, then either a lone `0` or a digit 1-9 followed by
/// digits; no `+`, no spaces, no leading zeros, no `-0`, and at most 20
/// characters. Anything else (including overflow) is `None`.
#[inline]
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > I64_MAX_LEN {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &c in rest {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Write `n` in decimal into the end of `buf`; returns the digits.
#[inline]
pub fn fmt_i64(n: i64, buf: &mut [u8; I64_MAX_LEN]) -> &[u8] {
    let mut i = put_digits_before(n.unsigned_abs(), buf);
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Write `n` in decimal into the end of `buf`; returns the digits.
#[inline]
pub fn fmt_u64(n: u64, buf: &mut [u8; I64_MAX_LEN]) -> &[u8] {
    let i = put_digits_before(n, buf);
    &buf[i..]
}

/// How many decimal digits `n` has.
#[inline]
pub fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Write `n`'s decimal digits so that they end where `buf` ends, a byte at
/// a time; returns where they start. `buf` must have room for them.
#[inline]
pub fn put_digits_before(mut n: u64, buf: &mut [u8]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

/// C's `printf("%.*g", precision, d)`: `precision` significant digits
/// (0 counts as 1), plain notation for exponents in [-4, precision),
/// otherwise `d.ddde+XX`, trailing zeros dropped; `nan`, `inf`, `-inf`.
/// (Lua's number format is `%.14g`, ZSCAN's scores are `%.17g`.)
pub fn fmt_g(d: f64, precision: usize) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if d.is_infinite() {
        return if d < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = precision.max(1);
    let sci = format!("{d:.*e}", p - 1);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i64 = exp.parse().expect("exponent digits");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i64 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        trim(&format!("{d:.*}", (p as i64 - 1 - exp) as usize))
    }
}

/// Format a double as Valkey's `d2string` does (the text of RESP3 `,`
/// replies and of RESP2 double bulk strings, and of sorted-set scores):
/// `nan`, `inf`, `-inf`, `0`, `-0`; integral values within ±2^62 as plain
/// integers; everything else as `fpconv_dtoa` lays it out: plain notation
/// for exponents in roughly [-7, 21), otherwise `d.ddde+XX` / `d.ddde-XX`.
///
/// Digits come from the same Grisu2 steps as Valkey's `fpconv_dtoa`
/// (the private `grisu` module), so they match Valkey even where Grisu2 is not the
/// shortest representation; the text always parses back to `d`.
pub fn fmt_double(d: f64, buf: &mut [u8; DOUBLE_MAX_LEN]) -> &[u8] {
    if d.is_nan() {
        return copy_into(buf, b"nan");
    }
    if d.is_infinite() {
        return copy_into(buf, if d < 0.0 { b"-inf" } else { b"inf" });
    }
    if d == 0.0 {
        return copy_into(buf, if d.is_sign_negative() { b"-0" } else { b"0" });
    }
    // Valkey's double2ll: the integer fast path for |d| <= LLONG_MAX/2.
    const LIM: f64 = (i64::MAX / 2) as f64;
    if (-LIM..=LIM).contains(&d) {
        let ll = d as i64;
        if ll as f64 == d {
            let mut tmp = [0u8; I64_MAX_LEN];
            let s = fmt_i64(ll, &mut tmp);
            return copy_into(buf, s);
        }
    }
    let mut digits = [0u8; 20];
    let (ndigits, k) = crate::grisu::grisu2(d, &mut digits);
    let neg = d < 0.0;
    let mut out = StackWriter::<DOUBLE_MAX_LEN>::new();
    if neg {
        out.push(b'-');
    }
    emit_digits(&digits[..ndigits], k, neg, &mut out);
    let len = out.len;
    buf[..len].copy_from_slice(&out.buf[..len]);
    &buf[..len]
}

/// fpconv's layout of `digits * 10^k` (the rules of `emit_digits`).
fn emit_digits(digits: &[u8], k: i32, neg: bool, out: &mut StackWriter<DOUBLE_MAX_LEN>) {
    let nd = digits.len() as i32;
    let exp = (k + nd - 1).abs();
    if k >= 0 && exp < nd + 7 {
        out.extend(digits);
        for _ in 0..k {
            out.push(b'0');
        }
        return;
    }
    if k < 0 && (k > -7 || exp < 4) {
        let offset = nd - k.abs();
        if offset <= 0 {
            out.extend(b"0.");
            for _ in 0..-offset {
                out.push(b'0');
            }
            out.extend(digits);
        } else {
            let offset = offset as usize;
            out.extend(&digits[..offset]);
            out.push(b'.');
            out.extend(&digits[offset..]);
        }
        return;
    }
    let nd = digits.len().min(18 - usize::from(neg));
    out.push(digits[0]);
    if nd > 1 {
        out.push(b'.');
        out.extend(&digits[1..nd]);
    }
    out.push(b'e');
    out.push(if k + nd as i32 - 1 < 0 { b'-' } else { b'+' });
    let mut e = exp;
    let mut cent = 0;
    if e > 99 {
        cent = e / 100;
        out.push(b'0' + cent as u8);
        e -= cent * 100;
    }
    if e > 9 {
        out.push(b'0' + (e / 10) as u8);
        e %= 10;
    } else if cent != 0 {
        out.push(b'0');
    }
    out.push(b'0' + e as u8);
}

fn copy_into<'a>(buf: &'a mut [u8; DOUBLE_MAX_LEN], s: &[u8]) -> &'a [u8] {
    buf[..s.len()].copy_from_slice(s);
    &buf[..s.len()]
}

/// A fixed-size byte sink so formatting needs no heap.
struct StackWriter<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackWriter<N> {
    fn new() -> Self {
        StackWriter {
            buf: [0; N],
            len: 0,
        }
    }
    fn push(&mut self, b: u8) {
        if self.len < N {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }
    fn extend(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(x: f64) -> String {
        let mut b = [0u8; DOUBLE_MAX_LEN];
        String::from_utf8(fmt_double(x, &mut b).to_vec()).unwrap()
    }

    #[test]
    fn g_format_matches_printf() {
        // Expected texts are glibc printf's.
        let cases: &[(f64, usize, &str)] = &[
            (0.1, 17, "0.10000000000000001"),
            (1.5, 17, "1.5"),
            (3.0, 17, "3"),
            (-2.0, 17, "-2"),
            (0.0, 17, "0"),
            (-0.0, 14, "-0"),
            (1e100, 17, "1e+100"),
            (1e17, 17, "1e+17"),
            (1e16, 17, "10000000000000000"),
            (0.0001, 17, "0.0001"),
            (0.00001, 17, "1.0000000000000001e-05"),
            (f64::INFINITY, 17, "inf"),
            (f64::NEG_INFINITY, 14, "-inf"),
            (1.0 / 3.0, 14, "0.33333333333333"),
            (1.0 / 3.0, 3, "0.333"),
            (123456789012345678.0, 14, "1.2345678901235e+17"),
            (100.0, 1, "1e+02"),
            (2.5, 1, "2"),
            (0.5, 0, "0.5"),
            (1e-5, 14, "1e-05"),
            (99999.5, 5, "1e+05"),
        ];
        for &(x, p, want) in cases {
            assert_eq!(fmt_g(x, p), want, "%.{p}g of {x}");
        }
    }

    #[test]
    fn parse_i64_follows_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"123"), Some(123));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn fmt_i64_extremes() {
        let mut b = [0u8; I64_MAX_LEN];
        assert_eq!(fmt_i64(i64::MIN, &mut b), b"-9223372036854775808");
        assert_eq!(fmt_i64(0, &mut b), b"0");
        assert_eq!(fmt_i64(-7, &mut b), b"-7");
        assert_eq!(fmt_i64(i64::MAX, &mut b), b"9223372036854775807");
        assert_eq!(fmt_u64(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn decimal_len_is_the_length_fmt_u64_writes() {
        let mut b = [0u8; I64_MAX_LEN];
        for n in [
            0,
            9,
            10,
            99,
            100,
            999_999,
            1_000_000,
            u64::MAX / 10,
            u64::MAX,
        ] {
            assert_eq!(decimal_len(n), fmt_u64(n, &mut b).len(), "{n}");
        }
    }

    #[test]
    fn doubles_format_like_valkey() {
        // Expected strings are what Valkey 7.2+/8 replies for ZSCORE / RESP3 doubles.
        let cases: &[(f64, &str)] = &[
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-3.0, "-3"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (-0.25, "-0.25"),
            (2.71, "2.71"),
            (1e-5, "0.00001"),
            (1.5e-7, "1.5e-7"),
            (1e-7, "1e-7"),
            (1e20, "1e+20"),
            (1e18, "1000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (4611686018427387904.0, "4611686018427387904"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (123456.789, "123456.789"),
            (0.30000000000000004, "0.30000000000000004"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
        ];
        for &(x, want) in cases {
            assert_eq!(d(x), want, "{x:e}");
        }
    }

    /// Grisu2 always round-trips and is never shorter than the shortest
    /// representation; it matches it for the vast majority of values.
    #[test]
    fn grisu_digits_round_trip_on_random_bits() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut longer = 0;
        let n = 200_000;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if !v.is_finite() {
                continue;
            }
            let s = d(v);
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{s}");
            if v.fract() == 0.0 && v.abs() <= (i64::MAX / 2) as f64 {
                continue; // Valkey's integer path, not Grisu
            }
            // Significant digits, without leading or trailing zeros.
            let digits = |t: &str| {
                let m: String = t
                    .split('e')
                    .next()
                    .unwrap()
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect();
                m.trim_start_matches('0').trim_end_matches('0').len()
            };
            let shortest = format!("{v:e}");
            assert!(digits(&s) >= digits(&shortest), "{s} vs {shortest}");
            if digits(&s) > digits(&shortest) {
                longer += 1;
            }
        }
        assert!(longer < n / 100, "{longer} of {n} longer than shortest");
    }

    #[test]
    fn doubles_round_trip() {
        let mut x = 1.0e-300f64;
        while x < 1e300 {
            for v in [x, -x, x * 1.2345678901234567] {
                let s = d(v);
                assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
            }
            x *= 7.3;
        }
    }
}
