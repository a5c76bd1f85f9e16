//! Key index generators: which key of `0..keyspace` the next request uses.
//!
//! Each worker thread owns one generator, so nothing here is shared or
//! locked, and drawing a key costs a few arithmetic operations and no
//! allocation. The random source is a seeded SplitMix64, so a run (and a
//! test) is reproducible from `--seed`.

use std::fmt;

/// SplitMix64: tiny, fast, and good enough for load generation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-high; the tiny bias for huge `n`
    /// does not matter for choosing keys).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// What `--key-pattern` asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyPattern {
    Uniform,
    Sequential,
    /// Zipf with this exponent: rank 1 (key 0) is the hottest.
    Zipf(f64),
    /// Normal around the middle of the keyspace; `None` means σ = keyspace / 6.
    Gaussian(Option<f64>),
}

impl KeyPattern {
    /// `uniform`, `sequential`, `zipf`, `zipf:S`, `gaussian`, `gaussian:SD`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |a: &str| -> Result<f64, String> {
            let v: f64 = a
                .parse()
                .map_err(|_| format!("bad number {a:?} in key pattern"))?;
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(format!("key pattern parameter must be > 0, got {a}"))
            }
        };
        match (name, arg) {
            ("uniform", None) => Ok(KeyPattern::Uniform),
            ("sequential", None) => Ok(KeyPattern::Sequential),
            ("zipf", None) => Ok(KeyPattern::Zipf(0.99)),
            ("zipf", Some(a)) => Ok(KeyPattern::Zipf(num(a)?)),
            ("gaussian", None) => Ok(KeyPattern::Gaussian(None)),
            ("gaussian", Some(a)) => Ok(KeyPattern::Gaussian(Some(num(a)?))),
            _ => Err(format!(
                "unknown key pattern {s:?} (uniform, sequential, zipf[:S], gaussian[:SD])"
            )),
        }
    }
}

impl fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPattern::Uniform => write!(f, "uniform"),
            KeyPattern::Sequential => write!(f, "sequential"),
            KeyPattern::Zipf(s) => write!(f, "zipf:{s}"),
            KeyPattern::Gaussian(None) => write!(f, "gaussian"),
            KeyPattern::Gaussian(Some(sd)) => write!(f, "gaussian:{sd}"),
        }
    }
}

/// A per-thread source of key indexes in `0..keyspace`.
#[derive(Clone, Debug)]
pub struct KeyGen {
    rng: Rng,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Uniform {
        n: u64,
    },
    Sequential {
        n: u64,
        next: u64,
    },
    Zipf(Zipf),
    Gaussian {
        n: u64,
        mean: f64,
        sd: f64,
        spare: Option<f64>,
    },
}

impl KeyGen {
    /// `start` is where a sequential walk begins (threads start at disjoint
    /// offsets so that together they cover the keyspace once per `n`
    /// requests); the other patterns ignore it.
    pub fn new(pattern: KeyPattern, keyspace: u64, seed: u64, start: u64) -> Self {
        let n = keyspace.max(1);
        let kind = match pattern {
            KeyPattern::Uniform => Kind::Uniform { n },
            KeyPattern::Sequential => Kind::Sequential { n, next: start % n },
            KeyPattern::Zipf(s) => Kind::Zipf(Zipf::new(n, s)),
            KeyPattern::Gaussian(sd) => Kind::Gaussian {
                n,
                mean: n as f64 / 2.0,
                sd: sd.unwrap_or(n as f64 / 6.0),
                spare: None,
            },
        };
        KeyGen {
            rng: Rng::new(seed),
            kind,
        }
    }

    pub fn next_key(&mut self) -> u64 {
        match &mut self.kind {
            Kind::Uniform { n } => self.rng.below(*n),
            Kind::Sequential { n, next } => {
                let k = *next;
                *next += 1;
                if *next == *n {
                    *next = 0;
                }
                k
            }
            Kind::Zipf(z) => z.sample(&mut self.rng) - 1,
            Kind::Gaussian { n, mean, sd, spare } => loop {
                let z = match spare.take() {
                    Some(z) => z,
                    None => {
                        // Box–Muller gives two normals; keep the second.
                        let u1 = 1.0 - self.rng.next_f64(); // (0, 1]: ln is finite
                        let u2 = self.rng.next_f64();
                        let r = (-2.0 * u1.ln()).sqrt();
                        let t = std::f64::consts::TAU * u2;
                        *spare = Some(r * t.sin());
                        r * t.cos()
                    }
                };
                let k = (*mean + z * *sd).floor();
                // Redraw outside the keyspace instead of clamping, so the
                // ends do not pile up.
                if k >= 0.0 && k < *n as f64 {
                    break k as u64;
                }
            },
        }
    }
}

/// Zipf over ranks `1..=n` with exponent `s`, by rejection-inversion
/// (Hörmann & Derflinger, 1996): O(1) per draw and no table, so a keyspace
/// of 10^9 costs nothing to set up.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Self {
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(z.n + 0.5);
        z.cut = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        z
    }

    /// The density, x^-s.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// An antiderivative of `h`, written so that s = 1 is not a special case.
    fn big_h(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (y * (1.0 - self.s)).max(-1.0);
        (log1p_over_x(t) * y).exp()
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.big_h(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// (e^x − 1) / x, accurate near 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x / 2.0 * (1.0 + x / 3.0)
    }
}

/// ln(1 + x) / x, accurate near 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x / 3.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut g = KeyGen::new(KeyPattern::Uniform, 10, 7, 0);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let k = g.next_key();
            assert!(k < 10, "key {k} outside keyspace");
            seen[k as usize] += 1;
        }
        // Each bucket expects 1000; 800 is > 6σ away.
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }

    #[test]
    fn sequential_starts_at_offset_and_wraps() {
        let mut g = KeyGen::new(KeyPattern::Sequential, 5, 1, 3);
        let got: Vec<u64> = (0..7).map(|_| g.next_key()).collect();
        assert_eq!(got, [3, 4, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn zipf_rank_frequencies_follow_the_power_law() {
        let s = 1.0;
        let n = 1000;
        let mut g = KeyGen::new(KeyPattern::Zipf(s), n, 42, 0);
        let draws = 200_000;
        let mut count = vec![0u64; n as usize];
        for _ in 0..draws {
            let k = g.next_key();
            assert!(k < n);
            count[k as usize] += 1;
        }
        // Expected share of rank r: r^-s / H(n, s).
        let norm: f64 = (1..=n).map(|r| (r as f64).powf(-s)).sum();
        for r in [1u64, 2, 3, 10] {
            let expect = draws as f64 * (r as f64).powf(-s) / norm;
            let got = count[(r - 1) as usize] as f64;
            assert!(
                (got - expect).abs() < expect * 0.05,
                "rank {r}: got {got}, expected {expect:.0}"
            );
        }
        // Hot keys come first: rank 1 about twice rank 2, ten times rank 10.
        assert!(count[0] > count[1] && count[1] > count[9] && count[9] > count[500]);
    }

    #[test]
    fn zipf_with_other_exponents_stays_in_range() {
        for s in [0.5, 0.99, 1.5, 3.0] {
            let mut g = KeyGen::new(KeyPattern::Zipf(s), 7, 3, 0);
            let mut seen = [0u32; 7];
            for _ in 0..10_000 {
                seen[g.next_key() as usize] += 1;
            }
            assert!(seen[0] > seen[6], "s={s}: {seen:?}");
        }
    }

    #[test]
    fn gaussian_mean_and_sd() {
        let n = 1_000_000;
        let mut g = KeyGen::new(KeyPattern::Gaussian(None), n, 9, 0);
        let draws = 100_000;
        let xs: Vec<f64> = (0..draws).map(|_| g.next_key() as f64).collect();
        let mean = xs.iter().sum::<f64>() / draws as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws as f64;
        let sd = var.sqrt();
        let want_sd = n as f64 / 6.0;
        assert!((mean - n as f64 / 2.0).abs() < 2_000.0, "mean {mean}");
        // Redrawing the 0.27% outside ±3σ shrinks σ by ~1.3%.
        assert!(
            (sd - want_sd).abs() < want_sd * 0.03,
            "sd {sd} want {want_sd}"
        );
        assert!(xs.iter().all(|&x| x >= 0.0 && x < n as f64));
    }

    #[test]
    fn patterns_parse_and_print() {
        assert_eq!(KeyPattern::parse("zipf:1.2"), Ok(KeyPattern::Zipf(1.2)));
        assert_eq!(KeyPattern::parse("zipf"), Ok(KeyPattern::Zipf(0.99)));
        assert_eq!(
            KeyPattern::parse("gaussian:10"),
            Ok(KeyPattern::Gaussian(Some(10.0)))
        );
        assert_eq!(KeyPattern::parse("sequential"), Ok(KeyPattern::Sequential));
        assert!(KeyPattern::parse("zipf:-1").is_err());
        assert!(KeyPattern::parse("pareto").is_err());
        assert_eq!(KeyPattern::Zipf(1.2).to_string(), "zipf:1.2");
    }

    #[test]
    fn same_seed_same_keys() {
        let mut a = KeyGen::new(KeyPattern::Zipf(0.9), 1000, 5, 0);
        let mut b = KeyGen::new(KeyPattern::Zipf(0.9), 1000, 5, 0);
        for _ in 0..100 {
            assert_eq!(a.next_key(), b.next_key());
        }
    }
}
