//! Where a run's crash points are cut: which requests of the emulated disk's write log
//! a power cut comes just after.
//!
//! A cut is a request index in reply order (see `testbed::device`'s crash states): the drive
//! has answered every request up to it and none after. `random` draws N of the writes, FUA
//! writes and flushes with the run's seed (the same seed, the same log: the same cuts);
//! `flushes` takes the flushes (N of them spread evenly over the run when there are more),
//! the instants a journal commits; `--crash-at K` is one given cut (replaying a failure).

use rand::seq::index::sample;
use rand::SeedableRng;

crate::choice! {
    /// How the crash points are chosen among the log's requests.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum CutChoice("crash point choice") {
        /// N requests drawn at random (seeded) among the writes and flushes.
        #[default]
        Random = "random",
        /// The flushes: every one, or N spread evenly over the run.
        Flushes = "flushes",
    }
}

/// One request a cut may come after: its index in reply order, and whether it was a flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub index: u64,
    pub flush: bool,
}

/// The cuts: `n` of `cands` chosen as `choice` says with `seed`, in reply order, each once.
pub fn choose(cands: &[Candidate], n: usize, choice: CutChoice, seed: u64) -> Vec<u64> {
    let pool: Vec<u64> = match choice {
        CutChoice::Random => cands.iter().map(|c| c.index).collect(),
        CutChoice::Flushes => cands.iter().filter(|c| c.flush).map(|c| c.index).collect(),
    };
    let mut cuts: Vec<u64> = if n >= pool.len() {
        pool
    } else {
        match choice {
            CutChoice::Random => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xc4a5_c4a5);
                sample(&mut rng, pool.len(), n)
                    .into_iter()
                    .map(|i| pool[i])
                    .collect()
            }
            // Evenly spread: the i-th of n at (i + 1/2) n-ths of the way.
            CutChoice::Flushes => (0..n)
                .map(|i| pool[(2 * i + 1) * pool.len() / (2 * n)])
                .collect(),
        }
    };
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(n: u64) -> Vec<Candidate> {
        (0..n)
            .map(|i| Candidate {
                index: i * 3 + 1,
                flush: i % 4 == 3,
            })
            .collect()
    }

    #[test]
    fn random_cuts_are_distinct_candidates_in_order_and_the_seed_decides_them() {
        let c = cands(1000);
        let a = choose(&c, 50, CutChoice::Random, 7);
        assert_eq!(a.len(), 50);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.iter().all(|i| c.iter().any(|x| x.index == *i)));
        assert_eq!(a, choose(&c, 50, CutChoice::Random, 7));
        assert_ne!(a, choose(&c, 50, CutChoice::Random, 8));
    }

    #[test]
    fn flush_cuts_are_flushes_spread_over_the_run() {
        let c = cands(1000);
        let flushes: Vec<u64> = c.iter().filter(|x| x.flush).map(|x| x.index).collect();
        assert_eq!(choose(&c, 10_000, CutChoice::Flushes, 1), flushes);
        let ten = choose(&c, 10, CutChoice::Flushes, 1);
        assert_eq!(ten.len(), 10);
        assert!(ten.iter().all(|i| flushes.contains(i)));
        // The first in the first tenth, the last in the last.
        assert!(ten[0] < flushes[flushes.len() / 10]);
        assert!(ten[9] > flushes[flushes.len() * 9 / 10]);
    }

    #[test]
    fn asking_for_more_cuts_than_requests_takes_them_all() {
        let c = cands(5);
        assert_eq!(choose(&c, 100, CutChoice::Random, 3), [1, 4, 7, 10, 13]);
        assert!(choose(&[], 3, CutChoice::Random, 3).is_empty());
    }
}
