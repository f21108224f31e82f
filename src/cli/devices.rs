//! `fsgauge devices list|show|check|fit`: the device profiles an emulated testbed can use, each
//! parameter with its source, and what the model expects of the drive; the micro-benchmarks
//! that hold a device against the model, and the fit of a profile to a device.

use std::fmt::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::OutputArgs;
use crate::analysis::report::output::listing;
use crate::base::error::bad_input;
use crate::device::calibrate::check::CheckOptions;
use crate::device::calibrate::target::TargetSpec;
use crate::device::profile::{self, Kind, Params, Profile};
use crate::device::{expectations, load_ref, Ablations, Expectations};
use crate::lab::runner::params::Seed;

#[derive(Debug, Args)]
pub struct DevicesCmd {
    #[command(subcommand)]
    pub command: DevicesSub,
}

#[derive(Debug, Subcommand)]
pub enum DevicesSub {
    /// List the built-in profiles: name, kind, capacity, rpm, average seek, description.
    List {
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Print a profile's every parameter with its source, and what the model expects of the
    /// drive: average seek, rotational latency, QD1 random 4K reads over the whole disk and over
    /// its first 1%, sequential rates at the outer and inner zones.
    ///
    /// PROFILE is a built-in name (`fsgauge devices list`) or the path of a TOML file in the
    /// same format: to describe your own drive, start from `fsgauge devices show st3500641as
    /// --toml > mydisk.toml` (name, kind = "hdd" | "ssd" | "ram", description, and under
    /// [parameters] one `key = { value = ..., source = "..." }` per parameter), edit the
    /// figures and their sources, and check it with `fsgauge devices show ./mydisk.toml`.
    /// Errors name file:line:column.
    ///
    /// Ablations after a colon switch parts of the model off, to see which part of the disk
    /// carries an effect: `st3500641as:seek=off`, `:rotation=off`, `:cache=off` (no
    /// read-ahead, writes go through), `:constant=12ms` (every request takes 12 ms, one at a
    /// time; at most 10s, and alone); combine the others with commas, each once and only of a
    /// part the profile has (`ram` has none but constant=).
    Show {
        /// A built-in profile's name or a profile file's path, optionally with `:ablations`.
        profile: String,
        /// Print the profile's TOML text instead (to copy and edit into your own profile).
        #[arg(long, conflicts_with_all = ["json", "format"])]
        toml: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Measure a device against the model: QD1 random 4K reads over the whole stroke and over
    /// its first 1%, sequential 1M reads at the outer and inner zones, the seek curve (4K read
    /// pairs at 12 distances from one cylinder to the whole stroke) and same-track read pairs
    /// (the rotational wait, and the revolution it gives), and with `--write` a write + flush
    /// rate; each for `--seconds`. Prints measured vs modelled, the demerit of the random-read
    /// service times, and the emulator's lateness p50/p99/max: as a table, or in any
    /// `--format` (json, csv, md, html), on stdout or to `-o FILE`.
    ///
    /// TARGET is a profile (emulated: a server is started on a sparse image in a private
    /// directory under /var/tmp/fsgauge, as large as the profile's capacity or `--size`) or a
    /// block device `/dev/X`, read only (compared with `--profile` if given; read pairs are
    /// then placed on its tracks and cylinders, else by bytes). The emulated disk is served
    /// through the transport FSGAUGE_DEVICE_TRANSPORT names (auto, uring or dev; default auto)
    /// with its bytes where FSGAUGE_DEVICE_STORE says (memory, memory:SIZE or file; default
    /// memory), read here and passed to the server.
    Check {
        /// A profile (name or file, with `:ablations`) or a block device /dev/X.
        target: String,
        /// The emulated disk's size (default: the profile's capacity; 8GiB for `ram`).
        #[arg(long)]
        size: Option<String>,
        /// Where the emulated disk starts on the modelled one.
        #[arg(long, default_value = "0")]
        offset: String,
        /// Time box of each micro-benchmark, seconds.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Also measure 4K write + flush (emulated devices only: a real device is only read).
        #[arg(long)]
        write: bool,
        /// The profile a real device is compared with.
        #[arg(long)]
        profile: Option<String>,
        /// After the micro-benchmarks, run this shell command with FSGAUGE_DEVICE set to the
        /// device (and FSGAUGE_SERVER_PID to the server's pid), e.g. fio; its requests count
        /// in the server's lateness and CPU figures, printed after it.
        #[arg(long)]
        run: Option<String>,
        #[command(flatten)]
        seed: Seed,
        /// Write the check here, in the `--format` given or else the one the file's extension
        /// names (html, md, csv, json; else the table) [default: stdout].
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Derive a rotating disk's profile from measurements: rpm from same-track read pairs,
    /// track-to-track, average and full-stroke seek from the seek curve, outer and inner zone
    /// rates from sequential reads, command overhead from the shortest reads.
    ///
    /// It runs the `devices check` micro-benchmarks (six, each for `--seconds`: about
    /// 6 × seconds plus a few seconds to start an emulated disk; 5 s each gives about 35 s) and
    /// prints the fitted profile as a profile file. Parameters that reads cannot measure
    /// (heads, zones, switch times, cache, link, queue) are copied from a template, and every
    /// value's source says which it is.
    ///
    /// TARGET is a block device `/dev/X` (read only; the template and track placement come
    /// from `--profile`, default deskstar-7k250) or a profile name: its emulated disk is
    /// measured and the fitted figures are compared with the profile's own (how the fit is
    /// validated).
    ///
    /// Save it with `--out mydisk.toml`, check it with `fsgauge devices show ./mydisk.toml`,
    /// and use it wherever a profile goes: `--device-model ./mydisk.toml`,
    /// `fsgauge devices check ./mydisk.toml`.
    Fit {
        /// A block device /dev/X or a profile (name or file).
        target: String,
        /// Time box of each micro-benchmark, seconds (more gives a steadier fit).
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Write the fitted profile to this file (atomically) as well as printing it.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// The fitted profile's name (default: fitted-TARGET).
        #[arg(long)]
        name: Option<String>,
        /// For a real device: the profile to take the unmeasured parameters from, and to place
        /// read pairs by (default: deskstar-7k250).
        #[arg(long)]
        profile: Option<String>,
        /// The emulated disk's size (default: the profile's capacity).
        #[arg(long)]
        size: Option<String>,
        #[command(flatten)]
        seed: Seed,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The emulated-device server (started by fsgauge itself, not for direct use).
    #[command(hide = true)]
    Serve(crate::device::server::ServeArgs),
}

/// The seed of `devices check` and `fit` when none is given: one, rather than the clock's, so
/// that a check (which records no result, so no seed) picks the same requests every time.
const CHECK_SEED: u64 = 1;

pub fn run(c: DevicesCmd) -> Result<ExitCode> {
    match c.command {
        DevicesSub::List { out } => list(&out),
        DevicesSub::Show { profile, toml, out } => {
            if toml {
                show_toml(&profile)
            } else {
                show(&profile, &out)
            }
        }
        DevicesSub::Check {
            target,
            size,
            offset,
            seconds,
            write,
            profile,
            run,
            seed,
            output,
            out,
        } => check::run(
            &TargetSpec {
                target: &target,
                size: size.as_deref(),
                offset: &offset,
                profile: profile.as_deref(),
                run: run.as_deref(),
            },
            &CheckOptions {
                seconds,
                write,
                seed: seed.value.unwrap_or(CHECK_SEED),
            },
            &out,
            output.as_deref(),
        ),
        DevicesSub::Fit {
            target,
            seconds,
            out,
            name,
            profile,
            size,
            seed,
            output,
        } => fit::run(
            &TargetSpec {
                target: &target,
                size: size.as_deref(),
                offset: "0",
                profile: profile.as_deref(),
                run: None,
            },
            &CheckOptions {
                seconds,
                write: false,
                seed: seed.value.unwrap_or(CHECK_SEED),
            },
            name.as_deref(),
            out.as_deref(),
            &output,
        ),
        DevicesSub::Serve(args) => {
            crate::device::server::serve(&args)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn hdd_figures(p: &Profile) -> (String, String) {
    match &p.params {
        Params::Hdd(h) => (format!("{}", h.rpm), format!("{:.1}", h.average_seek_ms)),
        _ => ("-".into(), "-".into()),
    }
}

fn capacity(p: &Profile) -> String {
    match p.kind {
        Kind::Ram => "-".into(),
        _ => format!("{:.1} GB", p.capacity_bytes as f64 / 1e9),
    }
}

fn list(out: &OutputArgs) -> Result<ExitCode> {
    let all = profile::builtins()?;
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|p| {
            let (rpm, seek) = hdd_figures(p);
            vec![
                p.name.clone(),
                p.kind.to_string(),
                capacity(p),
                rpm,
                seek,
                p.description.clone(),
            ]
        })
        .collect();
    let headers = [
        "name",
        "kind",
        "capacity",
        "rpm",
        "avg seek ms",
        "description",
    ];
    let mut w = [0usize; 6];
    for r in rows.iter().chain(std::iter::once(
        &headers.iter().map(|h| h.to_string()).collect(),
    )) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        format!(
            "{:<a$}  {:<b$}  {:>c$}  {:>d$}  {:>e$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            a = w[0],
            b = w[1],
            c = w[2],
            d = w[3],
            e = w[4]
        )
    };
    let head: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut text = line(&head);
    for r in &rows {
        text.push_str(&line(r));
    }
    text.push_str("\n(`fsgauge devices show NAME` prints every parameter with its source and the model's expectations; a profile file's path works wherever a name does)\n");
    let data: Vec<serde_json::Value> = all
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "kind": p.kind,
                "capacity_bytes": p.capacity_bytes,
                "rpm": match &p.params { Params::Hdd(h) => Some(h.rpm), _ => None },
                "average_seek_ms": match &p.params { Params::Hdd(h) => Some(h.average_seek_ms), _ => None },
                "description": p.description,
            })
        })
        .collect();
    out.print(listing("fsgauge devices", &data, text, &headers, rows)?)?;
    Ok(ExitCode::SUCCESS)
}

fn show_toml(reference: &str) -> Result<ExitCode> {
    let (p, _) = load_ref(reference)?;
    match profile::BUILTIN
        .iter()
        .find(|(n, _)| p.origin == "built-in" && *n == p.name)
    {
        Some((_, text)) => print!("{text}"),
        None => print!(
            "{}",
            crate::base::bounded::read_text(
                std::path::Path::new(&p.origin),
                crate::base::bounded::PROFILE_LIMIT,
                "device profiles",
                "devices show --toml",
            )?
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn show(reference: &str, out: &OutputArgs) -> Result<ExitCode> {
    let (p, abl) = load_ref(reference)?;
    let e = expectations(&p, &abl).map_err(|m| bad_input(format!("profile {}: {m}", p.name)))?;
    let doc = serde_json::json!({
        "profile": p,
        "fingerprint": p.fingerprint(),
        "ablations": abl.to_string(),
        "expectations": e,
    });
    let rows: Vec<Vec<String>> = p
        .sourced
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.value.clone(),
                s.unit.clone(),
                s.source.clone(),
            ]
        })
        .collect();
    out.print(listing(
        &format!("device profile {}", p.name),
        &doc,
        show_text(&p, &abl, &e),
        &["parameter", "value", "unit", "source"],
        rows,
    )?)?;
    Ok(ExitCode::SUCCESS)
}

fn show_text(p: &Profile, abl: &Ablations, e: &Expectations) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}, {}): {}",
        p.name, p.kind, p.origin, p.description
    );
    if !abl.is_none() {
        let _ = writeln!(s, "ablations: {abl}");
    }
    let _ = writeln!(s, "fingerprint: {}", p.fingerprint());
    if !p.sourced.is_empty() {
        let _ = writeln!(s);
        let wn = p.sourced.iter().map(|v| v.name.len()).max().unwrap_or(0);
        let wv = p
            .sourced
            .iter()
            .map(|v| v.value.len() + 1 + v.unit.len())
            .max()
            .unwrap_or(0);
        let _ = writeln!(s, "{:<wn$}  {:<wv$}  source", "parameter", "value");
        for v in &p.sourced {
            let val = if v.unit.is_empty() {
                v.value.clone()
            } else {
                format!("{} {}", v.value, v.unit)
            };
            let _ = writeln!(s, "{:<wn$}  {:<wv$}  {}", v.name, val, v.source);
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "expected of the model (computed from the parameters):");
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2} ms"));
    let rate = |v: Option<f64>| v.map_or("unbounded".to_string(), |x| format!("{x:.1} MB/s"));
    let mut lines: Vec<(&str, String)> = Vec::new();
    if p.kind == Kind::Hdd && abl.constant_ns.is_none() {
        lines.push(("average seek, all cylinder pairs", ms(e.average_seek_ms)));
        lines.push(("average seek, random blocks", ms(e.random_block_seek_ms)));
        lines.push(("average rotational latency", ms(e.rotational_latency_ms)));
    }
    lines.push((
        "QD1 random 4K read, whole disk",
        ms(Some(e.qd1_random_4k_read_ms)),
    ));
    lines.push((
        "QD1 random 4K read, first 1%",
        ms(Some(e.qd1_random_4k_read_1pct_ms)),
    ));
    lines.push(("sequential 1M reads, outer zone", rate(e.outer_mb_s)));
    lines.push(("sequential 1M reads, inner zone", rate(e.inner_mb_s)));
    let w = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in lines {
        let _ = writeln!(s, "  {k:<w$}  {v:>12}");
    }
    if let (Some(c), Some((so, si)), Some(b)) =
        (e.cylinders, e.sectors_per_track, e.seek_boundary_cylinders)
    {
        let heads = match &p.params {
            Params::Hdd(h) => h.heads,
            _ => 0,
        };
        let _ = writeln!(
            s,
            "  geometry: {c} cylinders x {heads} heads, {so} to {si} sectors per track; seek ∝ √distance up to {b:.0} cylinders, linear beyond"
        );
    }
    s
}

mod check;
mod fit;
