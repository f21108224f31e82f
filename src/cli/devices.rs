//! `fsgauge devices list|show`: the device profiles an emulated testbed can use, each parameter
//! with its source, and what the model expects of the drive.

use std::fmt::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::OutputArgs;
use crate::error::bad_input;
use crate::report::output::listing;
use crate::testbed::device::profile::{self, Kind, Params, Profile};
use crate::testbed::device::{expectations, load_ref, Ablations, Expectations};

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
    /// time); combine them with commas.
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
    /// its first 1%, sequential 1M reads at the outer and inner zones (and with `--write` a
    /// write + flush rate), each for `--seconds`; print measured vs modelled, the demerit of
    /// the random-read service times, and the emulator's lateness p50/p99/max.
    ///
    /// TARGET is a profile (emulated: a server is started on a sparse image in a private
    /// temporary directory, as large as the profile's capacity or `--size`) or a block device
    /// `/dev/X`, read only (compared with `--profile` if given).
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
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// The emulated-device server (started by fsgauge itself, not for direct use).
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        profile: String,
        #[arg(long)]
        image: std::path::PathBuf,
        #[arg(long)]
        size: u64,
        #[arg(long)]
        offset: u64,
        #[arg(long)]
        mount: std::path::PathBuf,
        /// Start with the model off (requests at native speed until `model on`).
        #[arg(long)]
        model_off: bool,
    },
}

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
            out,
        } => check::run(
            &target,
            size.as_deref(),
            &offset,
            profile.as_deref(),
            run.as_deref(),
            &crate::testbed::device::check::CheckOptions {
                seconds,
                write,
                seed,
            },
            &out,
        ),
        DevicesSub::Serve {
            profile,
            image,
            size,
            offset,
            mount,
            model_off,
        } => {
            crate::testbed::device::server::serve(&crate::testbed::device::server::ServeArgs {
                profile,
                image,
                size,
                offset,
                mount,
                modelled: !model_off,
            })?;
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
            std::fs::read_to_string(&p.origin)
                .map_err(|e| bad_input(format!("cannot read {}: {e}", p.origin)))?
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

/// `devices check`: sets the target up (an emulated device on a private sparse image, or a
/// real device read-only), runs the micro-benchmarks, prints the comparison.
mod check {
    use std::path::Path;
    use std::process::ExitCode;

    use anyhow::{Context, Result};

    use super::OutputArgs;
    use crate::error::bad_input;
    use crate::report::output::OutputFormat;
    use crate::testbed::device::check::{self, CheckOptions, CheckReport, Target};
    use crate::testbed::device::profile::Kind;
    use crate::testbed::device::{load_ref, EmulatedDevice};
    use crate::testbed::ledger::{Ledger, Resource};
    use crate::units::parse_size;
    use std::os::unix::fs::DirBuilderExt;

    const RAM_DEFAULT: u64 = 8 << 30;

    #[allow(clippy::too_many_arguments)]
    pub fn run(
        target: &str,
        size: Option<&str>,
        offset: &str,
        profile: Option<&str>,
        run_cmd: Option<&str>,
        opts: &CheckOptions,
        out: &OutputArgs,
    ) -> Result<ExitCode> {
        if !(opts.seconds > 0.0 && opts.seconds <= 3600.0) {
            return Err(bad_input(format!(
                "--seconds {} is out of range: give 0 < seconds <= 3600",
                opts.seconds
            )));
        }
        let report = if target.starts_with("/dev/") {
            if opts.write {
                return Err(bad_input(format!(
                    "--write is refused on the real device {target}: `devices check` only reads real devices; check an emulated one (a profile name) to measure writes"
                )));
            }
            let dev = Path::new(target);
            let model = match profile {
                Some(p) => {
                    let (p, a) = load_ref(p)?;
                    Some((p, a, 0))
                }
                None => None,
            };
            let t = Target {
                device: dev.to_path_buf(),
                size: check::device_size(dev)?,
                model,
                server: None,
            };
            let r = check::run(t, target, opts)?;
            if let Some(cmd) = run_cmd {
                run_command(cmd, dev, None)?;
            }
            r
        } else {
            emulated(target, size, offset, run_cmd, opts)?
        };
        print_report(&report, out)?;
        Ok(ExitCode::SUCCESS)
    }

    fn emulated(
        reference: &str,
        size: Option<&str>,
        offset: &str,
        run_cmd: Option<&str>,
        opts: &CheckOptions,
    ) -> Result<CheckReport> {
        let (profile, abl) = load_ref(reference)?;
        let offset =
            parse_size(offset).map_err(|e| bad_input(format!("--offset {offset}: {e}")))?;
        let size = match size {
            Some(s) => parse_size(s).map_err(|e| bad_input(format!("--size {s}: {e}")))?,
            None if profile.kind == Kind::Ram || profile.capacity_bytes == 0 => RAM_DEFAULT,
            None => profile.capacity_bytes.saturating_sub(offset),
        } / 4096
            * 4096;
        // A private directory (0700, root's) for the sparse image, in the ledger so that
        // `testbed cleanup` removes it after a SIGKILL.
        let mut ledger = Ledger::begin(&format!("device-check-{}", std::process::id()), false)?;
        let dir = std::env::temp_dir().join(format!("fsgauge-check-{}", std::process::id()));
        ledger.record(Resource::Dir {
            path: dir.clone(),
            id: None,
        })?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating the private directory {}", dir.display()))?;
        let image = dir.join("image");
        ledger.record(Resource::Image {
            path: image.clone(),
            id: None,
        })?;
        let f = std::fs::File::create(&image)
            .with_context(|| format!("creating the device image {}", image.display()))?;
        f.set_len(size).with_context(|| {
            format!(
                "making the sparse device image {} of {size} bytes (give a smaller --size?)",
                image.display()
            )
        })?;
        drop(f);
        let r = with_image(reference, &image, size, offset, profile, abl, run_cmd, opts);
        let errs = ledger.release_all();
        let report = r?;
        if let Some(e) = errs.into_iter().next() {
            return Err(e);
        }
        Ok(report)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_image(
        reference: &str,
        image: &Path,
        size: u64,
        offset: u64,
        profile: crate::testbed::device::Profile,
        abl: crate::testbed::device::Ablations,
        run_cmd: Option<&str>,
        opts: &CheckOptions,
    ) -> Result<CheckReport> {
        let mut dev = EmulatedDevice::start(reference, image, size, offset)?;
        let loop_dev = dev.attach_loop()?;
        check::settle();
        let server_pid = dev.server_pid();
        let t = Target {
            device: loop_dev.clone(),
            size,
            model: Some((profile, abl, offset)),
            server: Some(&mut dev),
        };
        let mut report = check::run(t, reference, opts)?;
        if let Some(cmd) = run_cmd {
            let before = dev.stats()?;
            let cpu0 = crate::sys::rt::process_cpu_seconds(server_pid);
            run_command(cmd, &loop_dev, Some(server_pid))?;
            let d = dev
                .stats()?
                .delta(&before)
                .map_err(|m| anyhow::anyhow!("device server stats: {m}"))?;
            let cpu1 = crate::sys::rt::process_cpu_seconds(server_pid);
            let l = d.lateness();
            let cpu = match (cpu0, cpu1) {
                (Some(a), Some(b)) if d.requests() > 0 => (b - a) * 1e6 / d.requests() as f64,
                _ => f64::NAN,
            };
            let cpu_opt = cpu.is_finite().then_some(cpu);
            eprintln!(
                "--run: {} requests; lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; server CPU {:.1} µs per request",
                d.requests(),
                l.p50_ms,
                l.p99_ms,
                l.max_ms,
                cpu
            );
            report.benches.push(check::Bench {
                name: format!("--run {}", cmd.split_whitespace().next().unwrap_or("")),
                unit: "requests",
                measured: d.requests() as f64,
                modelled: None,
                error: None,
                requests: d.requests(),
                demerit: None,
                lateness: Some(l),
                server_cpu_us_per_request: cpu_opt,
            });
        }
        dev.stop()?;
        Ok(report)
    }

    fn run_command(cmd: &str, dev: &Path, pid: Option<u32>) -> Result<()> {
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(cmd).env("FSGAUGE_DEVICE", dev);
        if let Some(pid) = pid {
            c.env("FSGAUGE_SERVER_PID", pid.to_string());
        }
        let st = c
            .status()
            .with_context(|| format!("running --run {cmd:?}"))?;
        if !st.success() {
            anyhow::bail!("--run {cmd:?} failed ({st})");
        }
        Ok(())
    }

    fn print_report(r: &CheckReport, out: &OutputArgs) -> Result<()> {
        if out.format() == OutputFormat::Json {
            println!("{}", serde_json::to_string_pretty(r)?);
            return Ok(());
        }
        println!(
            "{} on {} ({:.1} GB){}",
            r.profile.as_deref().unwrap_or("no model"),
            r.device.display(),
            r.size_bytes as f64 / 1e9,
            if r.target.starts_with("/dev/") {
                ", read only"
            } else {
                ", emulated"
            }
        );
        let w = r
            .benches
            .iter()
            .map(|b| b.name.chars().count())
            .max()
            .unwrap_or(0);
        println!(
            "{:<w$}  {:>10}  {:>10}  {:>7}  {:>8}  {:>7}  {:>22}",
            "benchmark", "measured", "modelled", "error", "demerit", "n", "lateness p50/p99/max ms"
        );
        for b in &r.benches {
            let f = |v: f64| {
                if b.unit == "ms" {
                    format!("{v:.3} ms")
                } else if b.unit == "MB/s" {
                    format!("{v:.1} MB/s")
                } else {
                    format!("{v:.0}")
                }
            };
            println!(
                "{:<w$}  {:>10}  {:>10}  {:>7}  {:>8}  {:>7}  {:>22}",
                b.name,
                f(b.measured),
                b.modelled.map_or("-".into(), f),
                b.error
                    .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
                b.demerit
                    .map_or("-".into(), |d| format!("{:.1}%", d * 100.0)),
                b.requests,
                b.lateness.map_or("-".into(), |l| format!(
                    "{:.3}/{:.3}/{:.3}",
                    l.p50_ms, l.p99_ms, l.max_ms
                )),
            );
        }
        if let Some(l) = r.lateness {
            println!(
                "server: {} requests, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, {} over 0.5 ms{}",
                l.requests,
                l.p50_ms,
                l.p99_ms,
                l.max_ms,
                l.late,
                r.server_cpu_us_per_request
                    .map_or(String::new(), |c| format!("; CPU {c:.1} µs per request"))
            );
            if l.p99_ms > 0.5 {
                println!("warning: lateness p99 {:.3} ms is over 0.5 ms: the emulator could not keep up with the model on this machine; timings are not the modelled drive's", l.p99_ms);
            }
        }
        Ok(())
    }
}
