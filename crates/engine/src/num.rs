//! Number parsing and formatting with Valkey's exact rules: `string2ll`
//! integers, `string2d` doubles, and the x87 `long double` arithmetic that
//! INCRBYFLOAT does (`string2ld`, `+`, `ld2string` human mode).
//!
//! Valkey's INCRBYFLOAT works in 80-bit long doubles (64-bit mantissa,
//! 15-bit exponent) and prints them with `%.17Lf`. Doing the same in `f64`
//! shows its rounding: `0.1 + 0.2` would print `0.30000000000000004` where
//! Valkey prints `0.3`, and `1e308 + 1e308` would overflow where Valkey
//! prints 309 digits. So [`LongDouble`] emulates the format in software:
//! correctly rounded parsing, round-half-even addition and exact decimal
//! printing, which is what glibc's `strtold`/`printf` give Valkey.

use std::cmp::Ordering;

/// Parse a strict decimal i64 as Valkey's `string2ll` does (no spaces, no
/// '+', no leading zeros except "0", no "-0", at most 20 bytes); `None` if
/// not, including on overflow.
#[inline]
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    resp::num::parse_i64(b)
}

/// Parse a double as Valkey's `string2d` does (`strtod` over the whole
/// argument): no leading space, nothing left over, no NaN, and an overflow
/// to ±inf or an underflow to zero is an error. `inf`/`infinity` (any case,
/// optional sign), `1e3`, `.5`, `5.` and hex floats (`0x1p3`) are accepted.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let (neg, body) = split_sign(b)?;
    if is_inf_word(body) {
        return Some(if neg {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if is_hex_prefix(body) {
        // Rare enough that rounding through the 64-bit mantissa first is fine.
        return LongDouble::parse(b)
            .and_then(|ld| ld.to_f64())
            .filter(|d| d.is_finite());
    }
    let dec = scan_decimal(body)?;
    let s = std::str::from_utf8(b).ok()?;
    let d: f64 = s.parse().ok()?;
    if d.is_infinite() || (d == 0.0 && dec.nonzero) {
        return None; // ERANGE
    }
    Some(d)
}

/// `strtold` skips leading space, but Valkey then rejects the argument.
fn split_sign(b: &[u8]) -> Option<(bool, &[u8])> {
    let (&first, rest) = b.split_first()?;
    match first {
        b'-' => Some((true, rest)),
        b'+' => Some((false, rest)),
        b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' => None,
        _ => Some((false, b)),
    }
}

fn is_inf_word(b: &[u8]) -> bool {
    b.eq_ignore_ascii_case(b"inf") || b.eq_ignore_ascii_case(b"infinity")
}

fn is_hex_prefix(b: &[u8]) -> bool {
    b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x'
}

/// A decimal literal, `digits[.digits][(e|E)[sign]digits]`, split up.
struct Decimal<'a> {
    int: &'a [u8],
    frac: &'a [u8],
    exp: i64,
    /// Some digit is not zero.
    nonzero: bool,
}

/// Scan the whole of `b` as a decimal literal (no sign); `None` if any of
/// it is not part of one, as `strtold` would leave it unconsumed.
fn scan_decimal(b: &[u8]) -> Option<Decimal<'_>> {
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let n_int = digits(b);
    let int = &b[..n_int];
    let mut at = n_int;
    let mut frac: &[u8] = &[];
    if b.get(at) == Some(&b'.') {
        let n = digits(&b[at + 1..]);
        frac = &b[at + 1..at + 1 + n];
        at += 1 + n;
    }
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut exp: i64 = 0;
    if at < b.len() {
        if b[at] | 0x20 != b'e' {
            return None;
        }
        let mut e = &b[at + 1..];
        let neg = match e.first() {
            Some(b'-') => {
                e = &e[1..];
                true
            }
            Some(b'+') => {
                e = &e[1..];
                false
            }
            _ => false,
        };
        if e.is_empty() || digits(e) != e.len() {
            return None;
        }
        for &c in e {
            // Saturate: anything this large is out of range either way.
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        }
        if neg {
            exp = -exp;
        }
    }
    let nonzero = int.iter().chain(frac).any(|&c| c != b'0');
    Some(Decimal {
        int,
        frac,
        exp,
        nonzero,
    })
}

/// Longest argument `string2ld` accepts (`MAX_LONG_DOUBLE_CHARS`).
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;
/// Exponent of the least significant mantissa bit, for subnormals and the
/// smallest normal (2^-16382 = 2^63 * 2^-16445).
const EMIN: i64 = -16445;
/// Largest such exponent: the maximum is (2^64-1) * 2^16320.
const EMAX: i64 = 16320;

/// An x87 80-bit extended-precision value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LongDouble {
    /// `(-1)^neg * mant * 2^exp`; `mant` has its top bit set unless the
    /// value is zero or subnormal (then `exp == EMIN`).
    Finite {
        neg: bool,
        mant: u64,
        exp: i64,
    },
    Inf {
        neg: bool,
    },
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble::Finite {
        neg: false,
        mant: 0,
        exp: EMIN,
    };

    /// Exact, as `(long double)(long)n` is.
    pub fn from_i64(n: i64) -> LongDouble {
        round_pack(n < 0, u128::from(n.unsigned_abs()), 0, false)
    }

    /// Valkey's `string2ld`: `strtold` over the whole argument (correctly
    /// rounded, decimal or hex), rejecting leading space, leftovers, NaN,
    /// overflow to infinity and underflow to zero. `inf` is accepted.
    pub fn parse(b: &[u8]) -> Option<LongDouble> {
        if b.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        let (neg, body) = split_sign(b)?;
        if is_inf_word(body) {
            return Some(LongDouble::Inf { neg });
        }
        let v = if is_hex_prefix(body) {
            parse_hex(neg, &body[2..])?
        } else {
            parse_dec(neg, &scan_decimal(body)?)?
        };
        match v {
            LongDouble::Inf { .. } => None,
            _ => Some(v),
        }
    }

    /// Sign, mantissa and exponent; infinity as the largest finite value
    /// (only called on finite values).
    fn parts(self) -> (bool, u64, i64) {
        match self {
            LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
            LongDouble::Inf { neg } => (neg, u64::MAX, EMAX),
        }
    }

    pub fn is_finite(&self) -> bool {
        matches!(self, LongDouble::Finite { .. })
    }

    /// IEEE addition, rounding half to even. A NaN (inf - inf) comes back
    /// as `None`.
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        let (a, b) = match (self, other) {
            (LongDouble::Inf { neg: x }, LongDouble::Inf { neg: y }) if x != y => return None,
            (i @ LongDouble::Inf { .. }, _) | (_, i @ LongDouble::Inf { .. }) => return Some(i),
            (a, b) => (a, b),
        };
        let (na, ma, ea) = a.parts();
        let (nb, mb, eb) = b.parts();
        if mb == 0 {
            // x + 0 = x, except -0 + +0 = +0.
            return Some(if ma == 0 {
                LongDouble::Finite {
                    neg: na && nb,
                    mant: 0,
                    exp: EMIN,
                }
            } else {
                a
            });
        }
        if ma == 0 {
            return Some(b);
        }
        // Put the larger exponent first, then line both up 63 bits above
        // the smaller one's position: no sum can pass 2^128.
        let ((na, ma, ea), (nb, mb, eb)) = if ea >= eb {
            ((na, ma, ea), (nb, mb, eb))
        } else {
            ((nb, mb, eb), (na, ma, ea))
        };
        let x = u128::from(ma) << 63;
        let diff = (ea - eb) as u128;
        let (y, sticky) = if diff >= 127 {
            (0, true)
        } else {
            let full = u128::from(mb) << 63;
            let y = full >> diff;
            (y, (y << diff) != full)
        };
        let e = ea - 63;
        if na == nb {
            return Some(round_pack(na, x + y, e, sticky));
        }
        // The true y is y + (a fraction) when sticky: borrow one unit and
        // keep the fraction as the sticky bit of the difference.
        let (neg, m) = match x.cmp(&y) {
            Ordering::Greater => (na, x - y - u128::from(sticky)),
            Ordering::Less => (nb, y - x),
            Ordering::Equal => return Some(LongDouble::ZERO),
        };
        Some(round_pack(neg, m, e, sticky))
    }

    /// The nearest `f64` (for [`parse_f64`] of hex literals); `None` when
    /// a nonzero value underflows to zero.
    fn to_f64(self) -> Option<f64> {
        let (neg, mant, exp) = match self {
            LongDouble::Inf { neg } => {
                return Some(if neg { -f64::INFINITY } else { f64::INFINITY });
            }
            LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
        };
        let mut d = mant as f64;
        let mut e = exp;
        // Scale in steps so no factor over- or underflows on its own.
        while e != 0 && d != 0.0 && d.is_finite() {
            let step = e.clamp(-1000, 1000);
            d *= 2f64.powi(step as i32);
            e -= step;
        }
        if d == 0.0 && mant != 0 {
            return None;
        }
        Some(if neg { -d } else { d })
    }

    /// `ld2string(.., LD_STR_HUMAN)`: `%.17Lf`, then trailing zeros and a
    /// trailing '.' removed, and `-0` printed as `0`. Appends to `out`.
    pub fn write_human(&self, out: &mut Vec<u8>) {
        let (neg, mant, exp) = match *self {
            LongDouble::Inf { neg } => {
                out.extend_from_slice(if neg { b"-inf" } else { b"inf" });
                return;
            }
            LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
        };
        let start = out.len();
        if neg {
            out.push(b'-');
        }
        const SCALE: u128 = 100_000_000_000_000_000; // 10^17
        if exp >= 0 {
            // An integer: every fractional digit is zero.
            let mut big = Big::from_u128(u128::from(mant));
            big.shl(exp as usize);
            big.write_decimal(out);
        } else {
            // mant * 10^17 < 2^121: scale, then shift right rounding half
            // to even as glibc's printf does in the default rounding mode.
            let n = u128::from(mant) * SCALE;
            let s = (-exp) as u32;
            let q = if s >= 122 {
                0
            } else {
                let q = n >> s;
                let rem = n & ((1u128 << s) - 1);
                let half = 1u128 << (s - 1);
                if rem > half || (rem == half && q & 1 == 1) {
                    q + 1
                } else {
                    q
                }
            };
            let int = q / SCALE;
            let frac = (q % SCALE) as u64;
            let mut digits = [0u8; resp::num::I64_MAX_LEN];
            out.extend_from_slice(resp::num::fmt_u64(int as u64, &mut digits));
            if frac != 0 {
                let f = format!("{frac:017}");
                out.push(b'.');
                out.extend_from_slice(f.trim_end_matches('0').as_bytes());
            }
        }
        if &out[start..] == b"-0" {
            out.truncate(start);
            out.push(b'0');
        }
    }

    /// [`Self::write_human`] into a new vector.
    pub fn to_human(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        self.write_human(&mut v);
        v
    }
}

/// Round `m * 2^e` (plus less than one unit more if `sticky`) to a 64-bit
/// mantissa, half to even, with subnormals and overflow to infinity.
fn round_pack(neg: bool, m: u128, e: i64, sticky: bool) -> LongDouble {
    if m == 0 {
        return LongDouble::Finite {
            neg,
            mant: 0,
            exp: EMIN,
        };
    }
    let bits = i64::from(128 - m.leading_zeros());
    let target = (e + bits - 64).max(EMIN);
    let shift = target - e;
    let (mant, exp) = if shift <= 0 {
        ((m << (-shift)) as u64, target)
    } else {
        let (q, rem_cmp) = if shift > 128 {
            (0u128, Ordering::Less)
        } else {
            let q = if shift == 128 { 0 } else { m >> shift };
            let low = if shift == 128 {
                m
            } else {
                m & ((1u128 << shift) - 1)
            };
            let half = 1u128 << (shift - 1);
            let c = match low.cmp(&half) {
                Ordering::Equal if sticky => Ordering::Greater,
                c => c,
            };
            (q, c)
        };
        let q = match rem_cmp {
            Ordering::Greater => q + 1,
            Ordering::Equal if q & 1 == 1 => q + 1,
            _ => q,
        };
        if q >> 64 != 0 {
            (1u64 << 63, target + 1)
        } else {
            (q as u64, target)
        }
    };
    if exp > EMAX {
        return LongDouble::Inf { neg };
    }
    LongDouble::Finite { neg, mant, exp }
}

/// Round a big integer times `2^e` to a long double.
fn round_big(neg: bool, big: &Big, e: i64) -> LongDouble {
    let bits = big.bit_len();
    if bits <= 128 {
        return round_pack(neg, big.low_u128(), e, false);
    }
    let sh = bits - 128;
    let top = big.shr(sh).low_u128();
    round_pack(neg, top, e + sh as i64, big.any_low_bits(sh))
}

/// `None` when a nonzero literal rounds to zero (ERANGE); infinity is
/// passed up for the caller to reject.
fn parse_dec(neg: bool, d: &Decimal<'_>) -> Option<LongDouble> {
    if !d.nonzero {
        return Some(LongDouble::Finite {
            neg,
            mant: 0,
            exp: EMIN,
        });
    }
    // Significant digits only: value = digits * 10^k.
    let all = d.int.iter().chain(d.frac).copied();
    let lead = all.clone().take_while(|&c| c == b'0').count();
    let sig: Vec<u8> = all.skip(lead).collect();
    let trail = sig.iter().rev().take_while(|&&c| c == b'0').count();
    let sig = &sig[..sig.len() - trail];
    let k = d.exp - d.frac.len() as i64 + trail as i64;
    let nd = sig.len() as i64;
    // 10^(nd+k-1) <= value < 10^(nd+k); the range is about 3.6e-4951 to
    // 1.19e4932, so far outside it no arithmetic is needed.
    if nd + k - 1 > 4940 {
        return Some(LongDouble::Inf { neg });
    }
    if nd + k < -4960 {
        return None;
    }
    let mut big = Big::from_decimal(sig);
    let v = if k >= 0 {
        big.mul_pow10(k as u32);
        round_big(neg, &big, 0)
    } else {
        let mut m = Big::from_u128(1);
        m.mul_pow10((-k) as u32);
        // Scale one side so the quotient has 66 or 67 bits: 64 for the
        // mantissa, the rest and the remainder for rounding.
        let s = m.bit_len() as i64 - big.bit_len() as i64 + 66;
        if s >= 0 {
            big.shl(s as usize);
        } else {
            m.shl((-s) as usize);
        }
        let (q, rem_nonzero) = big.div_small_quotient(&m);
        round_pack(neg, q, -s, rem_nonzero)
    };
    match v {
        LongDouble::Finite { mant: 0, .. } => None,
        v => Some(v),
    }
}

/// Hex float after the `0x`: hex digits, optional fraction, optional
/// binary exponent `p[sign]digits`.
fn parse_hex(neg: bool, b: &[u8]) -> Option<LongDouble> {
    let hex = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_hexdigit()).count();
    let n_int = hex(b);
    let mut at = n_int;
    let mut frac: &[u8] = &[];
    if b.get(at) == Some(&b'.') {
        let n = hex(&b[at + 1..]);
        frac = &b[at + 1..at + 1 + n];
        at += 1 + n;
    }
    let n_frac = frac.len();
    if n_int + n_frac == 0 {
        return None;
    }
    let mut exp: i64 = 0;
    if at < b.len() {
        if b[at] | 0x20 != b'p' {
            return None;
        }
        let mut e = &b[at + 1..];
        let eneg = match e.first() {
            Some(b'-') => {
                e = &e[1..];
                true
            }
            Some(b'+') => {
                e = &e[1..];
                false
            }
            _ => false,
        };
        if e.is_empty() || !e.iter().all(u8::is_ascii_digit) {
            return None;
        }
        for &c in e {
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        }
        if eneg {
            exp = -exp;
        }
    }
    let mut big = Big::default();
    let mut nonzero = false;
    for &c in b[..n_int].iter().chain(frac) {
        let v = (c as char).to_digit(16).unwrap_or(0);
        nonzero |= v != 0;
        big.mul_small(16);
        big.add_small(v);
    }
    if !nonzero {
        return Some(LongDouble::Finite {
            neg,
            mant: 0,
            exp: EMIN,
        });
    }
    let e = exp - 4 * n_frac as i64;
    let bits = big.bit_len() as i64;
    if e + bits > EMAX + 64 + 1 {
        return Some(LongDouble::Inf { neg });
    }
    if e + bits < EMIN - 2 {
        return None;
    }
    match round_big(neg, &big, e) {
        LongDouble::Finite { mant: 0, .. } => None,
        v => Some(v),
    }
}

/// Just enough of an unsigned big integer for exact conversions: base 2^32
/// limbs, least significant first, no leading zero limbs.
#[derive(Clone, Default, Debug)]
struct Big {
    limbs: Vec<u32>,
}

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut limbs = Vec::new();
        while v != 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big { limbs }
    }
    fn from_decimal(digits: &[u8]) -> Big {
        let mut b = Big::default();
        for chunk in digits.chunks(9) {
            let mut v = 0u32;
            for &c in chunk {
                v = v * 10 + u32::from(c - b'0');
            }
            b.mul_small(10u32.pow(chunk.len() as u32));
            b.add_small(v);
        }
        b
    }
    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }
    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.limbs {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
        self.trim();
    }
    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.limbs {
            if carry == 0 {
                return;
            }
            let v = u64::from(*l) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }
    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_small(1_000_000_000);
            n -= 9;
        }
        self.mul_small(10u32.pow(n));
    }
    fn bit_len(&self) -> usize {
        match self.limbs.last() {
            None => 0,
            Some(&top) => self.limbs.len() * 32 - top.leading_zeros() as usize,
        }
    }
    fn bit(&self, i: usize) -> bool {
        self.limbs
            .get(i / 32)
            .is_some_and(|&l| (l >> (i % 32)) & 1 == 1)
    }
    fn low_u128(&self) -> u128 {
        self.limbs
            .iter()
            .take(4)
            .enumerate()
            .fold(0, |acc, (i, &l)| acc | u128::from(l) << (32 * i))
    }
    fn any_low_bits(&self, n: usize) -> bool {
        let full = n / 32;
        self.limbs[..full.min(self.limbs.len())]
            .iter()
            .any(|&l| l != 0)
            || (!n.is_multiple_of(32)
                && self
                    .limbs
                    .get(full)
                    .is_some_and(|&l| l << (32 - n % 32) != 0))
    }
    fn shl(&mut self, n: usize) {
        if self.limbs.is_empty() {
            return;
        }
        let (words, bits) = (n / 32, n % 32);
        if bits != 0 {
            let mut carry = 0u32;
            for l in &mut self.limbs {
                let v = *l;
                *l = (v << bits) | carry;
                carry = v >> (32 - bits);
            }
            if carry != 0 {
                self.limbs.push(carry);
            }
        }
        self.limbs.splice(0..0, std::iter::repeat_n(0, words));
    }
    fn shr(&self, n: usize) -> Big {
        let (words, bits) = (n / 32, n % 32);
        if words >= self.limbs.len() {
            return Big::default();
        }
        let src = &self.limbs[words..];
        let mut limbs: Vec<u32> = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let hi = if bits == 0 {
                0
            } else {
                src.get(i + 1).map_or(0, |&h| h << (32 - bits))
            };
            limbs.push((l >> bits) | hi);
        }
        let mut b = Big { limbs };
        b.trim();
        b
    }
    fn cmp(&self, other: &Big) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }
    /// `self -= other`; requires `self >= other`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, l) in self.limbs.iter_mut().enumerate() {
            let v = i64::from(*l) - i64::from(other.limbs.get(i).copied().unwrap_or(0)) - borrow;
            if v < 0 {
                *l = (v + (1 << 32)) as u32;
                borrow = 1;
            } else {
                *l = v as u32;
                borrow = 0;
            }
        }
        self.trim();
    }
    /// `self / d` (which must fit in 128 bits) and whether a remainder is left.
    fn div_small_quotient(&self, d: &Big) -> (u128, bool) {
        let nb = self.bit_len();
        let db = d.bit_len();
        if nb < db {
            return (0, !self.limbs.is_empty());
        }
        // The top db-1 bits are below d: start the long division there.
        let qbits = nb - db + 1;
        let mut r = self.shr(qbits);
        let mut q = 0u128;
        for i in (0..qbits).rev() {
            r.shl(1);
            if self.bit(i) {
                if r.limbs.is_empty() {
                    r.limbs.push(1);
                } else {
                    r.limbs[0] |= 1;
                }
            }
            q <<= 1;
            if r.cmp(d) != Ordering::Less {
                r.sub_assign(d);
                q |= 1;
            }
        }
        (q, !r.limbs.is_empty())
    }
    fn write_decimal(&self, out: &mut Vec<u8>) {
        let mut b = self.clone();
        let mut chunks: Vec<u32> = Vec::new();
        while !b.limbs.is_empty() {
            let mut rem = 0u64;
            for l in b.limbs.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            b.trim();
            chunks.push(rem as u32);
        }
        match chunks.split_last() {
            None => out.push(b'0'),
            Some((top, rest)) => {
                out.extend_from_slice(top.to_string().as_bytes());
                for c in rest.iter().rev() {
                    out.extend_from_slice(format!("{c:09}").as_bytes());
                }
            }
        }
    }
}

/// Lower-case hex of `bytes`, as ACL shows a password's hash and DEBUG
/// DIGEST prints a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(s: &str) -> LongDouble {
        LongDouble::parse(s.as_bytes()).unwrap_or_else(|| panic!("{s}"))
    }
    fn human(v: LongDouble) -> String {
        String::from_utf8(v.to_human()).unwrap()
    }
    fn sum(a: &str, b: &str) -> String {
        human(ld(a).checked_add(ld(b)).unwrap())
    }

    #[test]
    fn string2ld_accepts_and_rejects_like_strtold() {
        for ok in [
            "0",
            "-0",
            "1",
            "+1",
            ".5",
            "5.",
            "1e3",
            "1E+3",
            "1e-3",
            "inf",
            "-INF",
            "Infinity",
            "0x10",
            "0x.8p1",
            "0X1P-3",
            "1e-4940",
            "00012.500",
        ] {
            assert!(LongDouble::parse(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "", " 1", "1 ", "\t1", "abc", "nan", "-nan", "1e", "1e+", ".", "e5", "0x", "0xg",
            "1e5000", "-1e5000", "1e-5000", "1\u{0}2", "--1", "1.2.3", "infinit", "0x1p",
        ] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        // MAX_LONG_DOUBLE_CHARS counts the terminating NUL.
        let mut long = b"0.".to_vec();
        long.resize(5119, b'1');
        assert!(LongDouble::parse(&long).is_some());
        long.push(b'1');
        assert_eq!(LongDouble::parse(&long), None);
    }

    #[test]
    fn human_format_matches_valkey() {
        // Expected strings are Valkey's (x87 long double) replies.
        assert_eq!(sum("0", "0.1"), "0.1");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("10", "10.5"), "20.5");
        assert_eq!(sum("5.0e3", "2.0e2"), "5200");
        assert_eq!(sum("3.0e3", "2.0e3"), "5000");
        assert_eq!(sum("4", "0.3333333333333333"), "4.3333333333333333");
        assert_eq!(sum("1.5e-7", "0.1"), "0.10000015");
        assert_eq!(sum("0", "1.5e-7"), "0.00000015");
        assert_eq!(sum("0", "1e-5"), "0.00001");
        assert_eq!(sum("0", "-1e-30"), "0");
        assert_eq!(sum("0", "-0.0"), "0");
        assert_eq!(sum("0", "1e20"), "100000000000000000000");
        assert_eq!(sum("0x10", "1"), "17");
        assert_eq!(sum("17", "0x1p-3"), "17.125");
        assert_eq!(sum("-2.5", "1"), "-1.5");
        assert_eq!(sum("1", "-1"), "0");
        assert_eq!(sum("0", "1e-4940"), "0");
        assert_eq!(
            sum("0", "1e308"),
            "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048"
        );
        assert!(
            sum("1e308", "1e308").starts_with("19999999999999999999337175931169129132112019969483")
        );
        assert!(human(ld("1e4000")).starts_with("9999999999999999999965463873099623784932"));
        assert_eq!(human(ld("1e4000")).len(), 4000);
        let one_third = ld("1")
            .checked_add(ld("0.33333333333333333333333"))
            .unwrap();
        assert_eq!(human(one_third), "1.33333333333333333");
    }

    #[test]
    fn addition_rounds_and_overflows() {
        let max = ld("1.18973149535723176502e4932");
        assert_eq!(max.checked_add(max), Some(LongDouble::Inf { neg: false }));
        assert_eq!(ld("inf").checked_add(ld("-inf")), None, "inf - inf is NaN");
        assert_eq!(
            ld("inf").checked_add(ld("1")),
            Some(LongDouble::Inf { neg: false })
        );
        // Far apart: the small one only rounds.
        assert_eq!(sum("1e30", "1e-30"), "1000000000000000000024696061952");
        assert_eq!(sum("1e30", "-1e-30"), "1000000000000000000024696061952");
        assert_eq!(sum("0x1p-16445", "0"), "0");
        assert_eq!(LongDouble::parse(b"0x1p-16446"), None);
        assert_eq!(
            sum("123456789.123456789", "0.000000000000000001"),
            "123456789.12345678899873747"
        );
        // 2^64 + 1 is not representable: half to even gives 2^64.
        assert_eq!(sum("18446744073709551616", "1"), "18446744073709551616");
        assert_eq!(sum("18446744073709551616", "3"), "18446744073709551620");
        for n in [0i64, 1, -1, i64::MAX, i64::MIN, 1 << 53] {
            let mut expect = Vec::new();
            expect.extend_from_slice(n.to_string().as_bytes());
            assert_eq!(LongDouble::from_i64(n).to_human(), expect);
        }
    }

    #[test]
    fn string2d_rules() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-.5"), Some(-0.5));
        assert_eq!(parse_f64(b"+1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"5."), Some(5.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0e999"), Some(0.0));
        assert_eq!(parse_f64(b"1e-310"), Some(1e-310));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"1e400",
            b"1e-400",
            b"abc",
            b"1e",
            b".",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"007"), None);
    }
}
