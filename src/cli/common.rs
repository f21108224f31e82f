//! Flags shared by every command that runs a workload: where it runs (testbed flags or --dir)
//! and how runs are repeated, conditioned and reported.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use crate::analysis::report::document::Document;
use crate::analysis::report::output::{parse_format, render_results, OutputFormat, ResultViews};
use crate::base::error::bad_input;
use crate::lab::runner::params::{ResultsDir, RunParams, Seed};
use crate::lab::runner::{Outcome, Place, RunOptions};
use crate::results::RunResult;
use crate::testbed::{FsKind, TestbedParams, TestbedSpec};
use crate::workload::Workload;

/// Where the workload runs: a fresh testbed (`--fs`) or an existing directory (`--dir`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Testbed (where it runs)")]
pub struct TestbedArgs {
    /// Build a fresh filesystem of this kind for every run: ext2, ext3, ext4, xfs or btrfs.
    #[arg(long, value_name = "KIND", conflicts_with = "dir")]
    pub fs: Option<FsKind>,
    /// How the testbed is built: its size, mkfs and mount options, journal, backing, ...
    #[command(flatten)]
    pub params: TestbedParams,
    /// Format this block device instead of an image (destroys its data; needs --destroy-data).
    /// The device is the backing and its size the filesystem's: --fs-size and --backing do not
    /// apply.
    // Only flags given explicitly conflict: clap leaves defaults out of conflicts.
    #[arg(
        long,
        value_name = "DEV",
        requires = "destroy_data",
        conflicts_with_all = [crate::testbed::params::SIZE_ID, "backing"]
    )]
    pub device: Option<PathBuf>,
    /// Confirms that --device may be formatted.
    #[arg(long, requires = "device")]
    pub destroy_data: bool,
    /// Label for tables and result files [default: the filesystem kind].
    #[arg(long)]
    pub label: Option<String>,
    /// Whether the command keeps its aging in the image cache (`age --keep-image`): only then
    /// does `--image-start` apply. Set by the command, never a flag.
    #[arg(skip)]
    pub keeps_image: bool,
    /// Run on this existing directory instead of a fresh testbed. fsgauge builds nothing there,
    /// so the testbed flags (those of its size, mkfs and mount options, journal, backing,
    /// workdir, loop device, and --device) do not apply and are refused with it.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with_all = [crate::testbed::params::GROUP, "device", "destroy_data"]
    )]
    pub dir: Option<PathBuf>,
}

impl TestbedArgs {
    /// The testbed spec, when `--fs` was given.
    pub fn spec(&self) -> Result<Option<TestbedSpec>> {
        self.check_confirmations()?;
        let Some(fs) = self.fs else { return Ok(None) };
        TestbedSpec::build(
            self.params
                .input(fs, self.label.clone(), self.device.clone())?,
        )
        .map(Some)
    }

    /// Refuses flags that confirm or tune something the command does not do: `--destroy-data`
    /// without `--device`, `--image-start overlay` without `--keep-image`.
    fn check_confirmations(&self) -> Result<()> {
        if self.destroy_data && self.device.is_none() {
            return Err(bad_input(
                "--destroy-data only confirms that the --device DEV given with it may be formatted: give --device DEV, or leave --destroy-data out",
            ));
        }
        if self.params.image_start == Some(crate::testbed::ImageStart::Overlay) && !self.keeps_image
        {
            return Err(bad_input(
                "--image-start overlay says how a run starts from a kept aged image, and this command keeps none: give --keep-image NAME (fsgauge age), or leave --image-start out",
            ));
        }
        Ok(())
    }

    /// Where to run: the testbed or the directory; one of the two is required.
    pub fn place(&self) -> Result<Place> {
        self.check_confirmations()?;
        if let Some(spec) = self.spec()? {
            return Ok(Place::Testbed(spec));
        }
        match &self.dir {
            Some(d) => Ok(Place::Dir(d.clone())),
            None => Err(bad_input(
                "say where to run: --fs KIND (a fresh testbed, e.g. --fs ext4 --fs-size 2G) or --dir PATH (an existing directory)",
            )),
        }
    }
}

/// How runs are repeated, conditioned and reported: the run settings ([`RunParams`], shared
/// with `run` and a plan's top level) and the output.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub params: RunParams,
    #[command(flatten)]
    pub output: OutputArgs,
    /// How the run fits with the other processes of an MPI job: given by the command that
    /// starts the job (alone by default), never a flag.
    #[arg(skip)]
    pub coordinator: crate::dist::Coord,
}

/// The seed, the results directory and the output of a command that runs its own steps
/// rather than the run settings of [`RunArgs`] (`read`, `study append`): `--seed` and `--out`
/// as the run settings declare them.
#[derive(Debug, Clone, Args)]
pub struct StepArgs {
    #[command(flatten)]
    pub seed: Seed,
    #[command(flatten)]
    pub out: ResultsDir,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl StepArgs {
    /// --seed, else one from the clock.
    pub fn seed(&self) -> u64 {
        self.seed.or_clock()
    }
}

/// The flag `id` exactly as the settings struct `A` declares it (help, value name, parser,
/// default, heading): for a command that takes that one setting of `A` without the others, so
/// that the flag is still declared once.
pub fn declared<A: Args>(id: &str) -> clap::Arg {
    let cmd = A::augment_args(clap::Command::new("declared"));
    let arg = cmd.get_arguments().find(|a| a.get_id() == id).cloned();
    arg.unwrap_or_else(|| panic!("{} declares no flag {id}", std::any::type_name::<A>()))
}

/// How a command prints what it made: `--format`, with `--json` kept as its short form, and
/// whether it says anything besides them (`--quiet`). The only declaration of these flags:
/// every command that prints results or progress flattens it, and renders its document
/// through the one exporter ([`crate::analysis::report::export::render`]).
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Print JSON on stdout instead of the table (for results: the result document, or a list
    /// when there are several runs); short for --format json.
    #[arg(long)]
    pub json: bool,
    /// How the output is printed: table (the command's terminal table), json (the result
    /// documents, or the command's data), csv or md (for results one row per run and phase,
    /// every declared metric; for a listing, one row per entry), html (one self-contained
    /// page). `fsgauge report` has its own default: the -o file's extension, else html.
    #[arg(
        long,
        value_name = "table|json|csv|md|html",
        conflicts_with = "json",
        value_parser = parse_format
    )]
    pub format: Option<OutputFormat>,
    /// No progress and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl OutputArgs {
    /// --format, or json for --json, else the table.
    pub fn format(&self) -> OutputFormat {
        self.chosen().unwrap_or(OutputFormat::Table)
    }

    /// --format, or json for --json; `None` when neither was given.
    pub fn chosen(&self) -> Option<OutputFormat> {
        match (self.format, self.json) {
            (Some(f), _) => Some(f),
            (None, true) => Some(OutputFormat::Json),
            (None, false) => None,
        }
    }

    /// Prints a document in the chosen format on stdout.
    pub fn print(&self, doc: impl Into<Document>) -> Result<()> {
        crate::analysis::report::export::print(&doc.into(), self.format())
    }

    /// Nothing but the results goes out: --quiet, or a format made for machines.
    pub fn silent(&self) -> bool {
        self.quiet || self.format().is_machine()
    }
}

impl RunArgs {
    pub fn options(&self) -> RunOptions {
        self.params
            .options(self.output.silent(), self.coordinator.clone())
    }

    /// The place a workload runs on, admitted as a plan's testbed is ([`crate::lab::runner::admitted`]:
    /// an ext testbed short of inodes gets `-N`), its note printed as `run` prints a plan's.
    pub fn admit(&self, place: Place, wl: &dyn Workload) -> Result<Place> {
        let (place, note) = crate::lab::runner::admitted(&place, wl)?;
        if let Some(n) = note {
            if !self.output.silent() && !self.coordinator.is_secondary() {
                eprintln!("note: {n}");
            }
        }
        Ok(place)
    }

    /// The output format: --format, or json for --json, else the table.
    pub fn output(&self) -> OutputFormat {
        self.output.format()
    }

    /// Prints outcomes in the output format, and where the results went.
    pub fn print(
        &self,
        outcomes: &[Outcome],
        table: impl Fn(&[RunResult]) -> String,
    ) -> Result<()> {
        self.print_views(
            outcomes,
            &ResultViews {
                table: &table,
                csv: None,
            },
        )
    }

    /// [`Self::print`] with the command's own views of its results.
    pub fn print_views(&self, outcomes: &[Outcome], views: &ResultViews) -> Result<()> {
        let format = self.output();
        if self.coordinator.is_secondary() {
            return Ok(());
        }
        let results: Vec<RunResult> = outcomes.iter().map(|o| o.result.clone()).collect();
        print!("{}", render_results(&results, format, views, false)?);
        if !format.is_machine() {
            print_lateness(&results);
            for r in &results {
                for w in &r.errors {
                    eprintln!("warning: {w}");
                }
            }
        }
        if !self.output.quiet {
            for r in &results {
                print_crash(r);
            }
        }
        if !self.output.quiet && outcomes.iter().any(|o| o.path.is_some()) {
            eprintln!("{}", results_in(&self.params.out.dir, outcomes.len(), ""));
        }
        Ok(())
    }
}

/// How many failures a run's crash points show on the terminal (all are in the result).
const CRASH_FAILURES_SHOWN: usize = 3;

/// A run's crash points on stderr: the summary, then the first failures with their replay.
pub fn print_crash(r: &RunResult) {
    let Some(c) = &r.crash else {
        return;
    };
    if c.is_shutdown() {
        eprintln!("{} rep {}: {}", r.testbed.label, r.rep, c.summary());
    } else {
        eprintln!(
            "{} rep {}: {} ({:.0} states a minute, {:.1} ms to build one over a {} image)",
            r.testbed.label,
            r.rep,
            c.summary(),
            c.states_per_minute,
            c.build_ms_mean,
            crate::base::units::format_size(c.image_bytes)
        );
    }
    for f in c.failures.iter().take(CRASH_FAILURES_SHOWN) {
        let at = if c.is_shutdown() {
            "shutdown".to_string()
        } else {
            format!("cut {}", f.cut)
        };
        eprintln!("  {at} ({}): {}", f.class, f.detail.trim_end());
        eprintln!("  check it again: {}", f.replay);
    }
    if c.failures.len() > CRASH_FAILURES_SHOWN {
        eprintln!(
            "  ... {} more in the result's crash record",
            c.failures.len() - CRASH_FAILURES_SHOWN
        );
    }
}

/// Exit status 1 when any run's crash points found a failure (the measured system lost what
/// it promised), else success.
pub fn crash_status<'a>(
    results: impl IntoIterator<Item = &'a RunResult>,
) -> std::process::ExitCode {
    let failed = results
        .into_iter()
        .filter_map(|r| r.crash.as_ref())
        .any(|c| !c.failures.is_empty());
    if failed {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

/// "N result file(s) in OUT" of a command that wrote `total` results for OUT, counting only
/// what went there: those OUT could not take (saved in the fallback directory, see
/// [`crate::results::unsaved`]) are counted apart, with where they are. `more` goes right
/// after the count in OUT.
pub fn results_in(out: &Path, total: usize, more: &str) -> String {
    let elsewhere = crate::results::unsaved();
    let there = total.saturating_sub(elsewhere.len());
    let mut line = format!("{there} result file(s) in {}{more}", out.display());
    if !elsewhere.is_empty() {
        let mut dirs: Vec<String> = elsewhere
            .iter()
            .map(|u| {
                u.saved
                    .parent()
                    .map_or_else(|| ".".into(), |d| d.display().to_string())
            })
            .collect();
        dirs.dedup();
        line.push_str(&format!(
            "; {} saved in {} (see the warning above)",
            elsewhere.len(),
            dirs.join(", ")
        ));
    }
    line
}

/// Adds a tip saying what to do to clap's refusals of the testbed and rate flags that do not
/// go together (clap says which flags conflict, or which one is missing, but not why).
pub fn with_tips(mut err: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let named = |kind| match err.get(kind) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    };
    let args: Vec<String> = [ContextKind::InvalidArg, ContextKind::PriorArg]
        .into_iter()
        .flat_map(named)
        .collect();
    let has = |flag: &str| {
        args.iter().any(|a| {
            a == flag || a.starts_with(&format!("{flag} ")) || a.contains(&format!("{flag} <"))
        })
    };
    let tip = match err.kind() {
        ErrorKind::ArgumentConflict if has("--dir") && has("--fs") => Some(
            "--fs builds a fresh testbed and --dir measures an existing directory: give one of them",
        ),
        ErrorKind::ArgumentConflict if has("--dir") => Some(
            "--dir measures an existing directory, where fsgauge builds nothing: leave the testbed flags out, or build a testbed with --fs KIND instead of --dir",
        ),
        ErrorKind::ArgumentConflict if has("--device") => Some(
            "--device formats that block device as it is (its size is the filesystem's, and it is the backing): leave --fs-size and --backing out, or drop --device to build an image",
        ),
        ErrorKind::MissingRequiredArgument if has("--device") => Some(
            "--destroy-data only confirms that the --device DEV given with it may be formatted: give --device DEV, or leave --destroy-data out",
        ),
        ErrorKind::MissingRequiredArgument if has("--rate-iops") || has("--rate") => Some(
            "--rate-per says whom a rate applies to: give --rate-iops N or --rate BYTES/s with it, or leave --rate-per out",
        ),
        _ => None,
    };
    if let Some(t) = tip {
        err.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![t.to_string().into()]),
        );
    }
    err
}

/// The table of phases whose emulated disk fell behind its model, after a command's results
/// on the terminal (none when every disk kept up).
pub fn print_lateness(results: &[RunResult]) {
    if let Some(t) = crate::analysis::report::lateness::lateness_table(results) {
        println!("{}", crate::analysis::report::table::text(&t));
    }
}
