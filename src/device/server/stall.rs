//! Injected stalls, a test hook for the disk's own clock ([`crate::device::model::clock`]):
//! `FSGAUGE_DEVICE_STALLS=MS:PERCENT:SEED` (read once when the server starts) holds the timing
//! thread for MS milliseconds (or `MIN-MAX`, uniform) before PERCENT% of its replies, chosen
//! by a generator seeded with SEED: a host that cannot keep time, on demand, to show that a
//! phase's disk time does not depend on it. The held thread still takes the requests that
//! come, at their arrival (the timing loop's `Desk::stall`): the stall is one late reply,
//! as the clock defines it, not a lost record of when the others came.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The variable that asks for stalls.
pub const STALLS_ENV: &str = "FSGAUGE_DEVICE_STALLS";

/// Stalls to inject, with their generator.
#[derive(Debug, Clone)]
pub struct Stalls {
    min_ns: u64,
    max_ns: u64,
    /// Of a million replies.
    per_million: u32,
    rng: ChaCha8Rng,
    /// Stalled so far: count and ns asked for.
    pub count: u64,
    pub total_ns: u64,
}

impl std::str::FromStr for Stalls {
    type Err = String;
    fn from_str(v: &str) -> Result<Stalls, String> {
        let bad = || {
            format!("{STALLS_ENV}={v:?}: give MS:PERCENT:SEED (e.g. 2-20:10:1, stalls of 2 to 20 ms before 10% of replies, seed 1)")
        };
        let [ms, pct, seed] = v.split(':').collect::<Vec<_>>()[..] else {
            return Err(bad());
        };
        let (lo, hi) = ms.split_once('-').unwrap_or((ms, ms));
        let ms = |x: &str| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|m| (0.0..=10_000.0).contains(m))
        };
        let (Some(lo), Some(hi)) = (ms(lo), ms(hi)) else {
            return Err(bad());
        };
        let pct = pct
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=100.0).contains(p));
        let (Some(pct), Ok(seed), true) = (pct, seed.trim().parse::<u64>(), lo <= hi) else {
            return Err(bad());
        };
        Ok(Stalls {
            min_ns: (lo * 1e6) as u64,
            max_ns: (hi * 1e6) as u64,
            per_million: (pct * 1e4).round() as u32,
            rng: ChaCha8Rng::seed_from_u64(seed),
            count: 0,
            total_ns: 0,
        })
    }
}

impl Stalls {
    /// The stalls the environment asks for (None: none, or a value it cannot read, said).
    pub fn from_env() -> Option<Stalls> {
        let v = std::env::var(STALLS_ENV).ok().filter(|v| !v.is_empty())?;
        match v.parse() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("fsgauge devices serve: {e}; no stalls injected");
                None
            }
        }
    }

    /// How long to stall before the next reply (0: not this one).
    pub fn next_ns(&mut self) -> u64 {
        if self.rng.gen_range(0..1_000_000) >= self.per_million {
            return 0;
        }
        let ns = self.rng.gen_range(self.min_ns..=self.max_ns);
        self.count += 1;
        self.total_ns += ns;
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_come_before_the_share_of_replies_asked_for_seeded() {
        let mut s: Stalls = "2-20:10:7".parse().expect("valid");
        let picks: Vec<u64> = (0..100_000).map(|_| s.next_ns()).collect();
        let n = picks.iter().filter(|&&x| x > 0).count();
        assert!((9_000..11_000).contains(&n), "{n} of 100,000");
        assert!(picks
            .iter()
            .all(|&x| x == 0 || (2_000_000..=20_000_000).contains(&x)));
        assert_eq!(s.count, n as u64);
        let mut again: Stalls = "2-20:10:7".parse().expect("valid");
        assert!(picks.iter().all(|&x| again.next_ns() == x), "seeded");
        for bad in ["", "5", "5:10", "x:10:1", "5:101:1", "20-2:10:1", "5:10:-1"] {
            assert!(bad.parse::<Stalls>().is_err(), "{bad:?}");
        }
        let none: Stalls = "5:0:1".parse().expect("valid");
        assert_eq!(none.per_million, 0);
    }
}
