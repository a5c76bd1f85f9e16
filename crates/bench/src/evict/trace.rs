//! The request trace of the eviction test: which key each GET asks for.
//!
//! The trace is a pure function of (distribution, keyspace, seed), so the
//! server run and the in-process simulations see the same keys, and a run
//! can be repeated exactly. Key 0 is the hottest in every distribution,
//! which is why the fill writes keys in ascending order.

use crate::keygen::{Rng, Zipf};
use std::fmt;

/// How key indexes are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Density ∝ (1 − k/N)^a over `0..N`: the skew of redis-cli's
    /// `--lru-test` (its `powerLawRand` with alpha 6.2, where the hottest
    /// 20% of keys take 80% of the requests). Drawn by inversion:
    /// k = ⌊N·(1 − v^(1/(a+1)))⌋ with v uniform in (0, 1].
    PowerLaw(f64),
    /// Zipf with exponent s over ranks 1..=N (key = rank − 1).
    Zipf(f64),
}

impl KeyDist {
    /// `powerlaw`, `powerlaw:A`, `zipf`, `zipf:S`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |a: Option<&str>, default: f64| -> Result<f64, String> {
            let Some(a) = a else { return Ok(default) };
            match a.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                _ => Err(format!("key distribution parameter must be > 0, got {a:?}")),
            }
        };
        match name {
            "powerlaw" => Ok(KeyDist::PowerLaw(num(arg, 6.2)?)),
            "zipf" => Ok(KeyDist::Zipf(num(arg, 0.99)?)),
            _ => Err(format!(
                "unknown key distribution {s:?} (powerlaw[:A], zipf[:S])"
            )),
        }
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::PowerLaw(a) => write!(f, "powerlaw:{a}"),
            KeyDist::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// An endless, seeded sequence of key indexes in `0..keyspace`.
#[derive(Clone, Debug)]
pub struct TraceGen {
    rng: Rng,
    n: u64,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    PowerLaw { inv_exp: f64 },
    Zipf(Zipf),
}

impl TraceGen {
    pub fn new(dist: KeyDist, keyspace: u64, seed: u64) -> Self {
        let n = keyspace.max(1);
        let kind = match dist {
            KeyDist::PowerLaw(a) => Kind::PowerLaw {
                inv_exp: 1.0 / (a + 1.0),
            },
            KeyDist::Zipf(s) => Kind::Zipf(Zipf::new(n, s)),
        };
        TraceGen {
            // The eviction trace gets its own stream, apart from the load
            // generator's per-thread seeds.
            rng: Rng::new(seed ^ 0x6576_6963_7421),
            n,
            kind,
        }
    }

    pub fn next_key(&mut self) -> u64 {
        match &self.kind {
            Kind::PowerLaw { inv_exp } => {
                let v = 1.0 - self.rng.next_f64(); // (0, 1]
                let x = 1.0 - v.powf(*inv_exp);
                // x < 1 in exact arithmetic; clamp the rounding.
                ((x * self.n as f64) as u64).min(self.n - 1)
            }
            Kind::Zipf(z) => z.sample(&mut self.rng) - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        for dist in [KeyDist::PowerLaw(6.2), KeyDist::Zipf(0.99)] {
            let take = |seed| {
                let mut g = TraceGen::new(dist, 100_000, seed);
                (0..1000).map(|_| g.next_key()).collect::<Vec<_>>()
            };
            assert_eq!(take(7), take(7));
            assert_ne!(take(7), take(8));
        }
    }

    #[test]
    fn powerlaw_follows_80_20_at_alpha_6_2() {
        let n = 100_000;
        let mut g = TraceGen::new(KeyDist::PowerLaw(6.2), n, 1);
        let draws = 200_000;
        let mut hot = 0;
        let mut top_half = 0;
        for _ in 0..draws {
            let k = g.next_key();
            assert!(k < n);
            hot += u64::from(k < n / 5);
            top_half += u64::from(k < n / 2);
        }
        // Share of the hottest fraction t is 1 − (1 − t)^(a + 1).
        let share = hot as f64 / draws as f64;
        let want = 1.0 - 0.8f64.powf(7.2);
        assert!((share - want).abs() < 0.005, "share {share} want {want}");
        let want_half = 1.0 - 0.5f64.powf(7.2);
        let half = top_half as f64 / draws as f64;
        assert!((half - want_half).abs() < 0.003, "{half} vs {want_half}");
    }

    #[test]
    fn zipf_keys_start_at_zero_and_stay_in_range() {
        let mut g = TraceGen::new(KeyDist::Zipf(1.0), 50, 3);
        let mut seen = [0u32; 50];
        for _ in 0..20_000 {
            seen[g.next_key() as usize] += 1;
        }
        assert!(seen[0] > seen[1] && seen[1] > seen[49], "{seen:?}");
    }

    #[test]
    fn parse_and_print() {
        assert_eq!(KeyDist::parse("powerlaw"), Ok(KeyDist::PowerLaw(6.2)));
        assert_eq!(KeyDist::parse("powerlaw:3"), Ok(KeyDist::PowerLaw(3.0)));
        assert_eq!(KeyDist::parse("zipf"), Ok(KeyDist::Zipf(0.99)));
        assert_eq!(KeyDist::parse("zipf:1.2"), Ok(KeyDist::Zipf(1.2)));
        assert!(KeyDist::parse("zipf:0").is_err());
        assert!(KeyDist::parse("uniform").is_err());
        assert_eq!(KeyDist::PowerLaw(6.2).to_string(), "powerlaw:6.2");
    }
}
