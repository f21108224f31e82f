//! Where a run's crash points are cut: which requests of the emulated disk's write log
//! a power cut comes just after.
//!
//! A cut is a request index in reply order (see `device`'s crash states): the drive
//! has answered every request up to it and none after. `random` draws N of the writes, FUA
//! writes and flushes with the run's seed (the same seed, the same log: the same cuts);
//! `flushes` takes the flushes (N of them spread evenly over the run when there are more),
//! the instants a journal commits; `--crash-at K` is one given cut (replaying a failure).

use anyhow::Result;
use rand::seq::index::sample;
use rand::SeedableRng;

use crate::base::error::bad_input;
use crate::base::units::Size;
use crate::results::crash::CrashCache;
use crate::testbed::TestbedSpec;

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

/// The crash-point settings of a run: the run settings' `crash_*` flags and plan keys
/// (declared in `runner::params::RunSettings`, see there for their help).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CrashArgs {
    /// `--crash-points N`: cuts to check (0 or absent: none).
    pub crash_points: Option<u32>,
    /// `--crash-choose`: random unless said.
    pub crash_choose: Option<CutChoice>,
    /// `--crash-cache`: random unless said.
    pub crash_cache: Option<CrashCache>,
    /// `--crash-at K`: the first (or only) cut.
    pub crash_at: Option<u64>,
    /// `--crash-log-limit`: the most the write log keeps on disk; what fits unless said.
    pub crash_log_limit: Option<Size>,
    /// `--crash-shutdown`: one state, made by the kernel's shutdown, in place of cuts.
    pub shutdown: bool,
}

impl CrashArgs {
    /// Whether crash points (cuts of the emulated disk's write log) are asked for.
    pub fn on(&self) -> bool {
        self.crash_points.is_some_and(|n| n > 0) || self.crash_at.is_some()
    }

    /// Whether the run's crash states are judged: cuts, or the kernel's shutdown.
    pub fn judged(&self) -> bool {
        self.on() || self.shutdown
    }

    /// How the cuts are chosen (random unless said).
    pub fn choice(&self) -> CutChoice {
        self.crash_choose.unwrap_or_default()
    }

    /// What a cut keeps of the cache (random unless said).
    pub fn cache(&self) -> CrashCache {
        self.crash_cache.unwrap_or_default()
    }

    /// The write log's limit in bytes, if said (else what fits in the free space beside the
    /// image, see `Testbed::start_crash_log`).
    pub fn log_limit(&self) -> Option<u64> {
        self.crash_log_limit.map(Size::bytes)
    }

    /// The cuts to check among the log's.
    pub fn cuts(&self, cands: &[Candidate], seed: u64) -> Result<Vec<u64>> {
        if let Some(k) = self.crash_at {
            if !cands.iter().any(|c| c.index == k) {
                anyhow::bail!(crate::base::error::bad_input(format!(
                    "--crash-at {k}: this run's write log has no request {k} (it has {} cuts); the run may have written differently from the one that named it",
                    cands.len()
                )));
            }
            let n = self.crash_points.unwrap_or(1).max(1) as usize;
            return Ok(cands
                .iter()
                .map(|c| c.index)
                .filter(|&i| i >= k)
                .take(n)
                .collect());
        }
        let n = self.crash_points.unwrap_or(0) as usize;
        Ok(choose(cands, n, self.choice(), seed))
    }
}

/// Whether the crash states `crash` asks for can be made where the run goes (bad input
/// otherwise, before anything is made): cuts of an emulated disk's write log, or the kernel's
/// shutdown. `testbed` is the testbed fsgauge builds for the run, `None` under `--dir`.
pub(crate) fn admissible(testbed: Option<&TestbedSpec>, crash: &CrashArgs) -> Result<()> {
    not_applying(crash)?;
    if crash.on() {
        cuts_admissible(testbed, crash)?;
    }
    if crash.shutdown {
        shutdown_admissible(testbed, crash)?;
    }
    Ok(())
}

/// The settings of cuts given without cuts: bad input, as every flag that does not apply.
fn not_applying(crash: &CrashArgs) -> Result<()> {
    if crash.on() {
        return Ok(());
    }
    let given = [
        ("--crash-cache", crash.crash_cache.is_some()),
        ("--crash-choose", crash.crash_choose.is_some()),
        ("--crash-log-limit", crash.crash_log_limit.is_some()),
    ];
    match given.iter().find(|(_, g)| *g) {
        Some((flag, _)) => Err(bad_input(format!(
            "{flag} (plan key `{}`) applies to crash points only: add --crash-points N (or --crash-at K), or leave {flag} out",
            flag.trim_start_matches("--").replace('-', "_")
        ))),
        None => Ok(()),
    }
}

/// A crash by the kernel's shutdown needs a testbed fsgauge builds, of a filesystem that has
/// the shutdown ioctl, and its checker; it replaces cuts, never joins them (a plan could name
/// both).
fn shutdown_admissible(testbed: Option<&TestbedSpec>, crash: &CrashArgs) -> Result<()> {
    let Some(spec) = testbed else {
        return Err(bad_input("--crash-shutdown shuts down a testbed fsgauge builds (--fs KIND), never a filesystem it did not make (--dir)"));
    };
    if crash.on() {
        return Err(bad_input("--crash-shutdown replaces the cuts of --crash-points/--crash-at: give one or the other"));
    }
    if !crate::testbed::shutdown::supported(spec.fs) {
        return Err(bad_input(format!(
            "--crash-shutdown: {} has no shutdown ioctl on this kernel; use ext2/ext3/ext4 or xfs, or --crash-points on an emulated disk",
            spec.fs
        )));
    }
    checker_installed(spec, "--crash-shutdown")
}

/// The filesystem's checker is installed, or why `flag` cannot run.
fn checker_installed(spec: &TestbedSpec, flag: &str) -> Result<()> {
    let checker = crate::testbed::fsck::checker_args(spec.fs, std::path::Path::new(""));
    if crate::base::sys::proc::find_program(&checker[0]).is_none() {
        return Err(bad_input(format!(
            "{flag} on {} needs its checker `{}`, which is not installed; install {}",
            spec.fs,
            checker[0],
            spec.fs.package()
        )));
    }
    Ok(())
}

/// Crash points need a testbed fsgauge builds, on an emulated disk (its server keeps the
/// write log) with no external journal (a second device would not lose power with it), the
/// filesystem's checker, and room for the log beside the image (a limit given is checked
/// against the free space there less the image; again when the log starts).
fn cuts_admissible(testbed: Option<&TestbedSpec>, crash: &CrashArgs) -> Result<()> {
    // The flag the user gave: `--crash-at K` alone is named as itself.
    let flag = if crash.crash_points.is_some_and(|n| n > 0) {
        "--crash-points"
    } else {
        "--crash-at"
    };
    let Some(spec) = testbed else {
        return Err(bad_input(format!("{flag} needs a testbed fsgauge builds on an emulated disk: --fs KIND with --device-model PROFILE, not --dir")));
    };
    if spec.device_model.is_none() {
        return Err(bad_input(format!("{flag} needs an emulated disk: its server keeps the write log and knows what the drive's cache held; add --device-model PROFILE (e.g. deskstar-7k250)")));
    }
    if spec.journal.is_some() {
        return Err(bad_input("--crash-points cuts the power of the emulated disk only: an external journal (--journal) would not lose it at the same instant; leave --journal out"));
    }
    checker_installed(spec, "--crash-points")?;
    let Some(limit) = crash.log_limit() else {
        return Ok(());
    };
    let at = crate::testbed::room::nearest_existing(&spec.workdir);
    let free = crate::testbed::room::free_space(&at).unwrap_or(0);
    if limit.saturating_add(spec.size) > free {
        return Err(bad_input(format!(
            "--crash-log-limit {}: the write log is kept beside the {} image in {}, which has {} free; give a smaller limit, or leave it out for what fits",
            crate::base::units::format_bytes_human(limit as f64),
            crate::base::units::format_bytes_human(spec.size as f64),
            crate::testbed::room::describe(&at),
            crate::base::units::format_bytes_human(free as f64)
        )));
    }
    Ok(())
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

    fn given() -> Vec<Candidate> {
        (1..=20)
            .map(|i| Candidate {
                index: i,
                flush: i % 5 == 0,
            })
            .collect()
    }

    #[test]
    fn a_given_cut_is_checked_alone_or_with_the_next_ones() {
        let a = CrashArgs {
            crash_at: Some(7),
            ..Default::default()
        };
        assert!(a.on());
        assert_eq!(a.cuts(&given(), 1).unwrap(), [7]);
        let b = CrashArgs {
            crash_points: Some(3),
            ..a
        };
        assert_eq!(b.cuts(&given(), 1).unwrap(), [7, 8, 9]);
        let missing = CrashArgs {
            crash_at: Some(99),
            ..Default::default()
        };
        let e = missing.cuts(&given(), 1).unwrap_err().to_string();
        assert!(e.contains("no request 99"), "{e}");
        assert_eq!(
            crate::base::error::exit_code(&missing.cuts(&given(), 1).unwrap_err()),
            2
        );
    }

    #[test]
    fn no_crash_points_unless_asked() {
        assert!(!CrashArgs::default().on());
        let z = CrashArgs {
            crash_points: Some(0),
            ..Default::default()
        };
        assert!(!z.on());
    }

    #[test]
    fn unsaid_settings_take_their_defaults() {
        let a = CrashArgs::default();
        assert_eq!(a.choice(), CutChoice::Random);
        assert_eq!(a.cache(), CrashCache::Random);
        assert_eq!(a.log_limit(), None);
    }
}
