//! The exerciser's settings: its parameters (the flags of `fsgauge exercise` and a plan's
//! fields of kind `exercise`), their checks, the configuration each exerciser is made with, the
//! phase's meter, and the failure report both a run ([`super::run`]) and a replay
//! ([`super::replay`]) end with.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::engine::{Config, Exerciser};
use super::ops::OpKind;
use super::ops::MAX_FILE_LEN;
use super::report::Failure;
use crate::base::error::{bad_input, bad_param, SystemFailure};
use crate::base::units::Overflow;
use crate::measure::{OpDef, PhaseMeter};
use crate::results::MetricDef;
use crate::workload::{params, RunContext};

/// The exerciser's parameters: the flags of `fsgauge exercise` (their doc comments are the
/// help) and the plan fields of kind `exercise` (absent ones take the flags' defaults).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Exerciser")]
pub struct Exercise {
    /// The file: a name inside the workload directory, or a path (containing a `/`) used as
    /// it is (created or truncated; left in place). With --procs P, `.0` ... `.P-1` is
    /// appended.
    #[arg(long, value_name = "NAME", default_value = "exercise.dat")]
    pub file: String,
    /// Operations per exerciser [default: 100000, or unlimited with --time].
    #[arg(long, value_name = "N")]
    pub ops: Option<u64>,
    /// Run for this long, e.g. 30s, 10m, 1h (with --ops: whichever ends first).
    #[arg(long, value_name = "DURATION", value_parser = params::seconds)]
    #[serde(deserialize_with = "crate::base::units::de_opt_seconds")]
    pub time: Option<f64>,
    /// The file never grows past this (fsx -l).
    #[arg(long, value_name = "SIZE", default_value = "256K", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub max_len: u64,
    /// Longest single operation (fsx -o).
    #[arg(long, value_name = "SIZE", default_value = "64K", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub max_op_len: u64,
    /// P exercisers at once, each on its own file (threads).
    #[arg(long, value_name = "P", default_value_t = 1)]
    pub procs: u32,
    /// O_DIRECT, with every offset and length a multiple of the block size (the mmap and
    /// dontcache operations are turned off, as with fsx -Z -R -W).
    #[arg(long)]
    pub direct: bool,
    /// Before every operation that moves EOF, write garbage past EOF into the EOF page
    /// through a mapping; the filesystem must zero it when the file grows (fsx -e 1).
    #[arg(long)]
    pub pollute_eof: bool,
    /// Leave these operations out, e.g. --no fsync,fdatasync,clone. Operations: read, write,
    /// read-dontcache, write-dontcache, mapread, mapwrite, truncate, falloc, punch, zero,
    /// collapse, insert, fsync, fdatasync, syncfs, copy, clone.
    #[arg(long, value_name = "OPS", value_delimiter = ',')]
    pub no: Vec<OpKind>,
    /// Weights of operation kinds in the mix, e.g. --weights read=4,fsync=0 (each kind is
    /// picked in proportion to its weight); kinds not named weigh 1, 0 leaves a kind out.
    // A plan gives them as a table (`weights = { read = 4 }`); named twice on the command
    // line, a kind's last weight counts.
    #[arg(long, value_name = "KIND=N,...", value_parser = weight, value_delimiter = ',')]
    #[serde(with = "weights_table")]
    pub weights: Vec<(OpKind, u32)>,
    /// Every K operations (per exerciser), unmount and mount the testbed, drop caches, and
    /// verify every file whole against its model (needs --fs).
    // In plans and results 0 means never (as no value does).
    #[arg(long, value_name = "K")]
    #[serde(with = "every_or_zero")]
    pub remount_every: Option<u64>,
    /// Write a replay log per exerciser into DIR (exercise-W.log); on a mismatch also the
    /// report and the expected file image. DIR is checked before the run (a directory you can
    /// write, or one that can be made, not on /proc or /sys).
    #[arg(long, value_name = "DIR")]
    pub log: Option<PathBuf>,
    /// Re-run exactly the steps of a replay log (from --log). Without --fs/--dir it runs on a
    /// fresh testbed like the one the log was recorded on.
    #[arg(long, value_name = "LOG")]
    pub replay: Option<PathBuf>,
    /// Testing the exerciser: after operation N of exerciser 0, flip the byte at OFFSET
    /// through a second descriptor (N:OFFSET; repeatable).
    #[arg(long, value_name = "N:OFFSET", value_parser = inject, hide = true)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<(u64, u64)>,
    /// Where each exerciser's durability record goes (a crash campaign sets it; not a flag or
    /// a plan key, and not part of the parameters).
    #[arg(skip)]
    #[serde(skip)]
    pub durable: Option<super::durable::Sink>,
    /// Run for the whole --time whatever --ops says (fio's time_based): the exercisers go on
    /// until the time is up. Needs --time.
    #[arg(long, help_heading = "Run control")]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub time_based: bool,
    /// Length of one interval of the time series (operations, bytes, latency percentiles per
    /// interval), e.g. 250ms [default: 1s].
    #[arg(long, value_name = "D", value_parser = params::seconds, help_heading = "Run control")]
    #[serde(
        deserialize_with = "crate::base::units::de_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub interval: Option<f64>,
    /// Warm-up left out of every figure (fio's ramp_time), a whole number of --interval; with
    /// --time-based the phase runs the ramp plus --time. The model checks every operation,
    /// ramp or not.
    #[arg(long, value_name = "D", value_parser = params::seconds, help_heading = "Run control")]
    #[serde(
        deserialize_with = "crate::base::units::de_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub ramp: Option<f64>,
}

impl Default for Exercise {
    fn default() -> Self {
        params::defaults()
    }
}

/// `--weights read=2`: one kind's weight.
fn weight(item: &str) -> Result<(OpKind, u32), String> {
    let (k, n) = item
        .split_once('=')
        .ok_or_else(|| format!("{item:?} is not KIND=N, e.g. read=2"))?;
    let k: OpKind = k.parse()?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("weight {n:?} of {k} is not a whole number"))?;
    if n > 1000 {
        return Err(format!("weight {n} of {k} is over 1000"));
    }
    Ok((k, n))
}

/// `--inject N:OFFSET`.
fn inject(s: &str) -> Result<(u64, u64), String> {
    let (n, off) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not N:OFFSET"))?;
    let n = n
        .parse()
        .map_err(|_| format!("{n:?} is not an operation number"))?;
    let off = crate::base::units::parse_size(off).map_err(|e| e.to_string())?;
    Ok((n, off))
}

/// The weights as a plan's table and a result's object (kind → weight, each kind once, the
/// last given counting), from the flags' list.
mod weights_table {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::OpKind;

    pub fn serialize<S: Serializer>(w: &[(OpKind, u32)], s: S) -> Result<S::Ok, S::Error> {
        w.iter().copied().collect::<BTreeMap<_, _>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(OpKind, u32)>, D::Error> {
        Ok(BTreeMap::<OpKind, u32>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

/// `remount_every` in plans and results: a count, 0 for never (the flag's absence).
mod every_or_zero {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(k: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(k.unwrap_or(0))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(Some(u64::deserialize(d)?).filter(|&k| k > 0))
    }
}

/// Operations per exerciser when neither `ops` nor `time` is given.
pub const DEFAULT_OPS: u64 = 100_000;

const EXTRA_OPS: [OpDef; 2] = [OpDef::secondary("remount"), OpDef::secondary("verify")];

fn op_defs() -> Vec<OpDef> {
    let mut v: Vec<OpDef> = OpKind::ALL
        .iter()
        .map(|k| OpDef::primary(k.name()))
        .collect();
    v.extend(EXTRA_OPS);
    v
}

/// Starts the `exercise` phase's meter on the target's devices, with no progress line of its
/// own.
pub(super) fn start_meter(ctx: &RunContext) -> PhaseMeter {
    PhaseMeter::start(
        "exercise",
        &op_defs(),
        &ctx.target().devices(),
        None,
        &crate::measure::Progress::hidden(),
    )
    .with_series(ctx.series())
}

impl Exercise {
    /// The error of an estimate over 64 bits, naming the parameters it is made of.
    pub(super) fn overflow(&self, what: &'static str) -> impl Fn() -> Overflow {
        Overflow::of(
            "exercise",
            what,
            format!(
                "--procs {} --max-len {} --max-op-len {}",
                self.procs, self.max_len, self.max_op_len
            ),
            "--procs, --max-len or --max-op-len",
        )
    }

    /// The run control the exerciser takes (time-based, interval, ramp), as tio's.
    pub fn run_control(&self) -> crate::workload::control::RunControl {
        crate::workload::control::RunControl {
            time_based: self.time_based,
            interval: self.interval,
            ramp: self.ramp,
            ..Default::default()
        }
    }

    /// Operations per exerciser (`u64::MAX` when only a time limit applies).
    pub fn op_limit(&self) -> u64 {
        if self.time_based {
            return u64::MAX;
        }
        match (self.ops, self.time) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => DEFAULT_OPS,
        }
    }

    /// The file of exerciser `w`.
    pub fn file_path(&self, root: &Path, w: u32) -> PathBuf {
        let base = if self.file.contains('/') {
            PathBuf::from(&self.file)
        } else {
            root.join(&self.file)
        };
        if self.procs > 1 {
            let mut s = base.into_os_string();
            s.push(format!(".{w}"));
            PathBuf::from(s)
        } else {
            base
        }
    }

    /// The weight given to operation kind `k`, if any (the last one given).
    pub(super) fn weight_of(&self, k: OpKind) -> Option<u32> {
        self.weights
            .iter()
            .rev()
            .find(|&&(kind, _)| kind == k)
            .map(|&(_, n)| n)
    }

    pub(super) fn config(&self, seed: u64, w: u32) -> Config {
        Config {
            max_len: self.max_len,
            max_op_len: self.max_op_len,
            direct: self.direct,
            pollute_eof: self.pollute_eof,
            kinds: OpKind::ALL
                .into_iter()
                .filter(|k| !self.no.contains(k))
                .map(|k| (k, self.weight_of(k).unwrap_or(1)))
                .filter(|&(_, w)| w > 0)
                .collect(),
            seed: worker_seed(seed, w),
            // Room for every operation of a run with a limit (a timed run's vector grows).
            record: self
                .durable
                .as_ref()
                .map(|_| self.op_limit().min(1 << 20) as usize),
        }
    }
}

/// Exerciser `w`'s seed: the run's seed for the first, a fixed derivation for the others.
pub fn worker_seed(seed: u64, w: u32) -> u64 {
    seed.wrapping_add(u64::from(w).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The figures this workload records in a phase's `extra`.
pub(super) const METRICS: &[MetricDef] = &[
    MetricDef::count("remounts", "remounts", ""),
    MetricDef::count("full_verifications", "full verifications", ""),
    MetricDef::count("procs", "processes", ""),
    MetricDef::count("kinds_turned_off", "operation kinds turned off", ""),
    MetricDef::count("seed", "seed", ""),
    MetricDef::count("replayed_steps", "replayed steps", ""),
];

impl Exercise {
    /// The checks of the parameters alone, wherever they come from: the flags, a plan's
    /// `[[workload]]`, and the `# params` header of a replay log ([`ReplayLog::parse`]), so
    /// that each limit is defined once. Reads no file (a log's header names no log).
    pub fn check_settings(&self) -> Result<()> {
        if self.procs == 0 {
            return Err(bad_param("procs", "--procs must be 1 or more"));
        }
        if self.max_len == 0 || self.max_op_len == 0 {
            let field = if self.max_len == 0 {
                "max_len"
            } else {
                "max_op_len"
            };
            return Err(bad_param(
                field,
                "--max-len and --max-op-len must be at least 1 byte",
            ));
        }
        if self.max_len > MAX_FILE_LEN {
            return Err(bad_param(
                "max_len",
                format!(
                    "--max-len {} is over {}; the model keeps the whole file in memory",
                    crate::base::units::format_size(self.max_len),
                    crate::base::units::format_size(MAX_FILE_LEN)
                ),
            ));
        }
        if self.max_op_len > self.max_len {
            return Err(bad_param("max_op_len", format!(
                "--max-op-len {} is larger than --max-len {}; an operation cannot be longer than the file may grow",
                self.max_op_len, self.max_len
            )));
        }
        if self.direct {
            for (flag, v) in [
                ("--max-len", self.max_len),
                ("--max-op-len", self.max_op_len),
            ] {
                if v % 512 != 0 {
                    return Err(bad_input(format!(
                        "{flag} {v} is not a multiple of the block size; with --direct (O_DIRECT) every offset and length must be, e.g. {flag} {}",
                        (v / 4096).max(1) * 4096
                    )));
                }
            }
        }
        if self.direct && self.pollute_eof {
            return Err(bad_param(
                "pollute_eof",
                "--pollute-eof writes through mmap and does not go with --direct",
            ));
        }
        if self.no.contains(&OpKind::Write) || self.weight_of(OpKind::Write) == Some(0) {
            return Err(bad_param(
                "no",
                "--no write: writes cannot be turned off (without them there is nothing to verify)",
            ));
        }
        if self.file.is_empty() || self.file.ends_with('/') {
            return Err(bad_param(
                "file",
                format!("--file {:?} is not a file name", self.file),
            ));
        }
        if self.ops == Some(0) {
            return Err(bad_param("ops", "--ops must be 1 or more"));
        }
        if self.remount_every == Some(0) {
            return Err(bad_param(
                "remount_every",
                "--remount-every must be 1 or more",
            ));
        }
        if let Some(t) = self.time {
            if t.is_nan() || t <= 0.0 {
                return Err(bad_param("time", "--time must be longer than zero"));
            }
        }
        self.run_control().validate(self.time)?;
        Ok(())
    }
}

/// Prints the report, saves it with the expected image under `--log`, and makes the error.
pub(super) fn report_failure(
    f: &Failure,
    w: usize,
    ex: &Exerciser,
    log_dir: Option<&Path>,
    procs: usize,
) -> anyhow::Error {
    let who = if procs > 1 {
        format!(" (exerciser {w})")
    } else {
        String::new()
    };
    eprint!("{}", f.render());
    let saved = match log_dir {
        Some(dir) => {
            let stem = format!("exercise-{w}");
            match f.save(dir, &stem, ex.model().content()) {
                Ok(()) => format!(
                    "; report, replay log and expected image in {} ({stem}.report.txt, {stem}.log, {stem}.expected.img); re-run with: fsgauge exercise --replay {}",
                    dir.display(),
                    dir.join(format!("{stem}.log")).display()
                ),
                Err(e) => format!("; saving the report failed: {e:#}"),
            }
        }
        None => "; run with --log DIR to keep a replay log and the expected image".into(),
    };
    anyhow::Error::new(SystemFailure(format!("{}{who}{saved}", f.headline())))
}
