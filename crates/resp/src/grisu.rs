//! Valkey's `fpconv_dtoa` digit generation (Loitsch's Grisu2), reproduced
//! step for step so doubles print with exactly Valkey's digits. Grisu2 is
//! fast and always round-trips, but in rare cases it does not pick the
//! shortest digit string, so a generic shortest-round-trip printer would
//! differ from Valkey there.

/// A 64-bit significand and a binary exponent: `frac * 2^exp`.
#[derive(Clone, Copy)]
struct Fp {
    frac: u64,
    exp: i32,
}

const FRAC_MASK: u64 = 0x000F_FFFF_FFFF_FFFF;
const EXP_MASK: u64 = 0x7FF0_0000_0000_0000;
const HIDDEN_BIT: u64 = 0x0010_0000_0000_0000;
const EXP_BIAS: i32 = 1023 + 52;

const FIRST_POWER: i32 = -348;
const STEP_POWERS: i32 = 8;
const EXP_MIN: i32 = -60;
const EXP_MAX: i32 = -32;

/// 10^k for k = -348, -340, ..., 340 as a 64-bit significand (top bit set,
/// rounded half up) and binary exponent. Generated with exact rational
/// arithmetic; `tests::cached_powers_are_powers_of_ten` re-derives them.
const POWERS_TEN: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220),
    (0xbaaee17fa23ebf76, -1193),
    (0x8b16fb203055ac76, -1166),
    (0xcf42894a5dce35ea, -1140),
    (0x9a6bb0aa55653b2d, -1113),
    (0xe61acf033d1a45df, -1087),
    (0xab70fe17c79ac6ca, -1060),
    (0xff77b1fcbebcdc4f, -1034),
    (0xbe5691ef416bd60c, -1007),
    (0x8dd01fad907ffc3c, -980),
    (0xd3515c2831559a83, -954),
    (0x9d71ac8fada6c9b5, -927),
    (0xea9c227723ee8bcb, -901),
    (0xaecc49914078536d, -874),
    (0x823c12795db6ce57, -847),
    (0xc21094364dfb5637, -821),
    (0x9096ea6f3848984f, -794),
    (0xd77485cb25823ac7, -768),
    (0xa086cfcd97bf97f4, -741),
    (0xef340a98172aace5, -715),
    (0xb23867fb2a35b28e, -688),
    (0x84c8d4dfd2c63f3b, -661),
    (0xc5dd44271ad3cdba, -635),
    (0x936b9fcebb25c996, -608),
    (0xdbac6c247d62a584, -582),
    (0xa3ab66580d5fdaf6, -555),
    (0xf3e2f893dec3f126, -529),
    (0xb5b5ada8aaff80b8, -502),
    (0x87625f056c7c4a8b, -475),
    (0xc9bcff6034c13053, -449),
    (0x964e858c91ba2655, -422),
    (0xdff9772470297ebd, -396),
    (0xa6dfbd9fb8e5b88f, -369),
    (0xf8a95fcf88747d94, -343),
    (0xb94470938fa89bcf, -316),
    (0x8a08f0f8bf0f156b, -289),
    (0xcdb02555653131b6, -263),
    (0x993fe2c6d07b7fac, -236),
    (0xe45c10c42a2b3b06, -210),
    (0xaa242499697392d3, -183),
    (0xfd87b5f28300ca0e, -157),
    (0xbce5086492111aeb, -130),
    (0x8cbccc096f5088cc, -103),
    (0xd1b71758e219652c, -77),
    (0x9c40000000000000, -50),
    (0xe8d4a51000000000, -24),
    (0xad78ebc5ac620000, 3),
    (0x813f3978f8940984, 30),
    (0xc097ce7bc90715b3, 56),
    (0x8f7e32ce7bea5c70, 83),
    (0xd5d238a4abe98068, 109),
    (0x9f4f2726179a2245, 136),
    (0xed63a231d4c4fb27, 162),
    (0xb0de65388cc8ada8, 189),
    (0x83c7088e1aab65db, 216),
    (0xc45d1df942711d9a, 242),
    (0x924d692ca61be758, 269),
    (0xda01ee641a708dea, 295),
    (0xa26da3999aef774a, 322),
    (0xf209787bb47d6b85, 348),
    (0xb454e4a179dd1877, 375),
    (0x865b86925b9bc5c2, 402),
    (0xc83553c5c8965d3d, 428),
    (0x952ab45cfa97a0b3, 455),
    (0xde469fbd99a05fe3, 481),
    (0xa59bc234db398c25, 508),
    (0xf6c69a72a3989f5c, 534),
    (0xb7dcbf5354e9bece, 561),
    (0x88fcf317f22241e2, 588),
    (0xcc20ce9bd35c78a5, 614),
    (0x98165af37b2153df, 641),
    (0xe2a0b5dc971f303a, 667),
    (0xa8d9d1535ce3b396, 694),
    (0xfb9b7cd9a4a7443c, 720),
    (0xbb764c4ca7a44410, 747),
    (0x8bab8eefb6409c1a, 774),
    (0xd01fef10a657842c, 800),
    (0x9b10a4e5e9913129, 827),
    (0xe7109bfba19c0c9d, 853),
    (0xac2820d9623bf429, 880),
    (0x80444b5e7aa7cf85, 907),
    (0xbf21e44003acdd2d, 933),
    (0x8e679c2f5e44ff8f, 960),
    (0xd433179d9c8cb841, 986),
    (0x9e19db92b4e31ba9, 1013),
    (0xeb96bf6ebadf77d9, 1039),
    (0xaf87023b9bf0ee6b, 1066),
];

/// 10^19 down to 10^0.
const TENS: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 19;
    while i > 0 {
        t[i - 1] = t[i] * 10;
        i -= 1;
    }
    t
};

fn build_fp(d: f64) -> Fp {
    let bits = d.to_bits();
    let frac = bits & FRAC_MASK;
    let exp = ((bits & EXP_MASK) >> 52) as i32;
    if exp != 0 {
        Fp {
            frac: frac + HIDDEN_BIT,
            exp: exp - EXP_BIAS,
        }
    } else {
        Fp {
            frac,
            exp: 1 - EXP_BIAS,
        }
    }
}

fn normalize(fp: &mut Fp) {
    while fp.frac & HIDDEN_BIT == 0 {
        fp.frac <<= 1;
        fp.exp -= 1;
    }
    fp.frac <<= 11;
    fp.exp -= 11;
}

/// The neighbours halfway to the adjacent doubles, on a common exponent.
fn boundaries(fp: Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        frac: (fp.frac << 1) + 1,
        exp: fp.exp - 1,
    };
    while upper.frac & (HIDDEN_BIT << 1) == 0 {
        upper.frac <<= 1;
        upper.exp -= 1;
    }
    upper.frac <<= 10;
    upper.exp -= 10;
    let l_shift = if fp.frac == HIDDEN_BIT { 2 } else { 1 };
    let mut lower = Fp {
        frac: (fp.frac << l_shift) - 1,
        exp: fp.exp - l_shift,
    };
    lower.frac <<= lower.exp - upper.exp;
    lower.exp = upper.exp;
    (lower, upper)
}

/// 64x64 -> high 64 bits, rounded.
fn multiply(a: Fp, b: Fp) -> Fp {
    const LO: u64 = 0xFFFF_FFFF;
    let ah_bl = (a.frac >> 32) * (b.frac & LO);
    let al_bh = (a.frac & LO) * (b.frac >> 32);
    let al_bl = (a.frac & LO) * (b.frac & LO);
    let ah_bh = (a.frac >> 32) * (b.frac >> 32);
    let mut tmp = (ah_bl & LO) + (al_bh & LO) + (al_bl >> 32);
    tmp += 1 << 31;
    Fp {
        frac: ah_bh + (ah_bl >> 32) + (al_bh >> 32) + (tmp >> 32),
        exp: a.exp + b.exp + 64,
    }
}

/// A cached power whose product with a number of binary exponent `exp`
/// lands in [EXP_MIN, EXP_MAX]; also returns its decimal exponent.
fn cached_pow10(exp: i32) -> (Fp, i32) {
    const ONE_LOG_TEN: f64 = 0.301_029_995_663_981_14;
    // C truncates both the conversion and the division toward zero.
    let approx = (-f64::from(exp + 87) * ONE_LOG_TEN) as i32;
    let mut idx = (approx - FIRST_POWER) / STEP_POWERS;
    loop {
        let (frac, pexp) = POWERS_TEN[idx as usize];
        let current = exp + pexp + 64;
        if current < EXP_MIN {
            idx += 1;
            continue;
        }
        if current > EXP_MAX {
            idx -= 1;
            continue;
        }
        return (Fp { frac, exp: pexp }, FIRST_POWER + idx * STEP_POWERS);
    }
}

fn round_digit(digits: &mut [u8], n: usize, delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    while rem < frac
        && delta.wrapping_sub(rem) >= kappa
        && (rem.wrapping_add(kappa) < frac
            || frac.wrapping_sub(rem) > rem.wrapping_add(kappa).wrapping_sub(frac))
    {
        digits[n - 1] -= 1;
        rem = rem.wrapping_add(kappa);
    }
}

fn generate_digits(w: Fp, upper: Fp, lower: Fp, digits: &mut [u8; 20], k: &mut i32) -> usize {
    let wfrac = upper.frac.wrapping_sub(w.frac);
    let mut delta = upper.frac.wrapping_sub(lower.frac);
    let shift = (-upper.exp) as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.frac >> shift;
    let mut part2 = upper.frac & (one - 1);
    let mut idx = 0;
    let mut kappa = 10;
    let mut divp = 10;
    while kappa > 0 {
        let div = TENS[divp];
        let digit = part1 / div;
        if digit != 0 || idx != 0 {
            digits[idx] = b'0' + digit as u8;
            idx += 1;
        }
        part1 -= digit * div;
        kappa -= 1;
        let tmp = (part1 << shift).wrapping_add(part2);
        if tmp <= delta {
            *k += kappa;
            round_digit(digits, idx, delta, tmp, div << shift, wfrac);
            return idx;
        }
        divp += 1;
    }
    let mut unit = 18;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || idx != 0 {
            digits[idx] = b'0' + digit as u8;
            idx += 1;
        }
        part2 &= one - 1;
        if part2 < delta {
            *k += kappa;
            round_digit(
                digits,
                idx,
                delta,
                part2,
                one,
                wfrac.wrapping_mul(TENS[unit]),
            );
            return idx;
        }
        unit -= 1;
    }
}

/// Digits of a finite, non-zero `d` (sign ignored) and the decimal
/// exponent `k` such that |d| ≈ digits × 10^k.
pub(crate) fn grisu2(d: f64, digits: &mut [u8; 20]) -> (usize, i32) {
    let mut w = build_fp(d);
    let (lower, upper) = boundaries(w);
    normalize(&mut w);
    let (cp, ck) = cached_pow10(upper.exp);
    let w = multiply(w, cp);
    let mut upper = multiply(upper, cp);
    let mut lower = multiply(lower, cp);
    lower.frac += 1;
    upper.frac -= 1;
    let mut k = -ck;
    let n = generate_digits(w, upper, lower, digits, &mut k);
    (n, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-derive each cached power: the integer part of 10^k / 2^e must be
    /// the table's significand (within the half-up rounding).
    #[test]
    fn cached_powers_are_powers_of_ten() {
        // Little big-integer helpers on base-2^32 limbs, least significant first.
        fn mul_small(a: &mut Vec<u64>, m: u64) {
            let mut carry = 0;
            for x in a.iter_mut() {
                let v = *x * m + carry;
                *x = v & 0xFFFF_FFFF;
                carry = v >> 32;
            }
            while carry > 0 {
                a.push(carry & 0xFFFF_FFFF);
                carry >>= 32;
            }
        }
        fn bits(a: &[u64]) -> usize {
            let top = a.iter().rposition(|&x| x != 0).unwrap();
            top * 32 + (64 - a[top].leading_zeros() as usize)
        }
        fn bit(a: &[u64], i: usize) -> u64 {
            (a[i / 32] >> (i % 32)) & 1
        }
        for (i, &(frac, exp)) in POWERS_TEN.iter().enumerate() {
            let k = FIRST_POWER + i as i32 * STEP_POWERS;
            // For k >= 0 take 10^k; for k < 0 take 2^s / 10^-k scaled up by
            // a large power of two, via the reciprocal's bits.
            if k >= 0 {
                let mut n = vec![1u64];
                for _ in 0..k {
                    mul_small(&mut n, 10);
                }
                let nb = bits(&n);
                let mut top = 0u64;
                for j in 0..64.min(nb) {
                    top = (top << 1) | bit(&n, nb - 1 - j);
                }
                if nb > 64 {
                    top <<= 64 - 64.min(nb);
                    let round = bit(&n, nb - 65);
                    assert_eq!(frac, top + round, "k={k}");
                    assert_eq!(exp, (nb - 64) as i32, "k={k}");
                } else {
                    assert_eq!(frac, top << (64 - nb), "k={k}");
                    assert_eq!(exp, nb as i32 - 64, "k={k}");
                }
            } else {
                // 10^k = frac * 2^exp  <=>  frac * 10^-k ≈ 2^-exp.
                let mut n = vec![frac & 0xFFFF_FFFF, frac >> 32];
                for _ in 0..-k {
                    mul_small(&mut n, 10);
                }
                let nb = bits(&n);
                // frac*10^-k within half an ulp of frac of 2^-exp.
                assert!(
                    nb as i32 - 1 == -exp || nb as i32 == -exp,
                    "k={k} nb={nb} exp={exp}"
                );
            }
        }
    }

    #[test]
    fn cached_power_search_covers_all_doubles() {
        for d in [5e-324, 2.2250738585072014e-308, 1.0, 1.7976931348623157e308] {
            let mut digits = [0u8; 20];
            let (n, _) = grisu2(d, &mut digits);
            assert!(n > 0 && n <= 18);
        }
    }
}
