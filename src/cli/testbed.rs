//! `fsgauge testbed create|list|destroy|cleanup` (and `images|snapshot|restore`, in
//! [`super::images`]).

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::{OutputArgs, TestbedArgs};
use crate::analysis::report::document::Page;
use crate::analysis::report::output::listing;
use crate::base::error::bad_input;
use crate::base::units::format_size;
use crate::{
    host::ledger,
    testbed::{cleanup, destroy_by_name, Testbed},
};

#[derive(Debug, Subcommand)]
// One command value per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum TestbedCmd {
    /// Build a testbed and leave it mounted; prints its mount point and device.
    ///
    /// Example: fsgauge testbed create --fs ext4 --fs-size 2G --mkfs-opts "-O ^extent"
    /// --mount-opts data=writeback,nodelalloc --journal ram:64M
    Create(CreateArgs),
    /// List the testbeds and leftovers recorded in the ledger.
    List {
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Unmount, detach and delete a testbed made by `testbed create`.
    Destroy {
        /// Name shown by `testbed create` and `testbed list`.
        name: String,
    },
    /// List the aged-image cache and the testbeds' snapshots, or remove cache entries.
    ///
    /// Kept images come from `fsgauge age --keep-image NAME` and plans with `[age] keep_image
    /// = true`; they live in STATE/images ($FSGAUGE_STATE_DIR, else /var/lib/fsgauge).
    /// Example: fsgauge testbed images --prune --older-than 7d
    Images(super::images::ImagesArgs),
    /// Snapshot a persistent testbed (from `testbed create`): it is unmounted, its image
    /// copied sparsely beside its files (HOME/snapshots/SNAP.img) and mounted again.
    ///
    /// The snapshot goes when the testbed is destroyed; taking one of an existing name
    /// replaces it. Not for a testbed on --device or with an external journal.
    Snapshot {
        /// Name shown by `testbed create` and `testbed list`.
        name: String,
        /// Name of the snapshot [default: snap].
        #[arg(long = "as", value_name = "SNAP")]
        snap: Option<String>,
    },
    /// Restore a persistent testbed to a snapshot: unmounted, the snapshot copied back over
    /// its image, mounted again. What was written since the snapshot is gone.
    Restore {
        /// Name shown by `testbed create` and `testbed list`.
        name: String,
        /// The snapshot [default: snap].
        snap: Option<String>,
    },
    /// Remove everything a killed run left behind (mounts, loop devices, images, cgroups).
    ///
    /// Also a killed --dir run's directory (fsgauge-KIND-PID-REP). A damaged ledger file is
    /// skipped with a warning that says how to remove it.
    Cleanup {
        /// Also destroy persistent testbeds (from `testbed create`) and those of live runs.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    /// Name of the testbed [default: LABEL-N].
    #[arg(long)]
    pub name: Option<String>,
    /// --format json prints the testbed as JSON (name, mountpoint, device, journal device,
    /// and the testbed record); --quiet leaves out the warnings' notes.
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(cmd: TestbedCmd) -> Result<ExitCode> {
    match cmd {
        TestbedCmd::Create(a) => create(a),
        TestbedCmd::List { out } => list(&out),
        TestbedCmd::Images(a) => super::images::images(a),
        TestbedCmd::Snapshot { name, snap } => super::images::take(&name, snap.as_deref()),
        TestbedCmd::Restore { name, snap } => super::images::restore(&name, snap.as_deref()),
        TestbedCmd::Destroy { name } => {
            let missing = destroy_by_name(&name)?;
            if missing.is_empty() {
                println!("destroyed {name}");
            } else {
                println!("destroyed {name}, except {} thing(s) it made that could not be found (see the warnings)", missing.len());
            }
            for e in &missing {
                eprintln!("warning: {name}: {e:#}");
            }
            Ok(ExitCode::SUCCESS)
        }
        TestbedCmd::Cleanup { all } => {
            let r = cleanup(all)?;
            for n in &r.removed {
                let missing = r.missing.iter().filter(|(m, _)| m == n).count();
                let gone: Vec<String> = r
                    .gone
                    .iter()
                    .filter(|(m, _)| m == n)
                    .map(|(_, p)| p.display().to_string())
                    .collect();
                if !gone.is_empty() && missing == 0 {
                    println!(
                        "cleaned up {n}: its run directory {} was already gone (nothing was removed there; its ledger record is dropped)",
                        gone.join(", ")
                    );
                } else if missing == 0 {
                    println!("removed {n}");
                } else {
                    println!("removed what could be found of {n}; {missing} thing(s) it made were not found (see the warnings)");
                }
            }
            for (n, e) in &r.missing {
                eprintln!("warning: {n}: {e:#}");
            }
            for n in &r.skipped_live {
                println!("kept {n} (persistent or its run is alive; --all removes it)");
            }
            for (n, e) in &r.failed {
                eprintln!("failed to remove {n}: {e:#}");
            }
            for d in &r.damaged {
                eprintln!("warning: {}", d.warning());
            }
            if r.removed.is_empty() && r.failed.is_empty() && r.damaged.is_empty() {
                println!("nothing to clean up");
            }
            Ok(if r.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}

fn create(a: CreateArgs) -> Result<ExitCode> {
    if a.testbed.dir.is_some() {
        return Err(bad_input(
            "testbed create builds a filesystem; --dir does not apply",
        ));
    }
    let spec = a.testbed.spec()?.ok_or_else(|| {
        bad_input("testbed create needs --fs KIND (ext2, ext3, ext4, xfs, btrfs)")
    })?;
    crate::testbed::check_persistable(&spec)?;
    crate::base::signals::install();
    let tb = match a.name {
        Some(name) => {
            ledger::check_name(&name).map_err(|e| bad_input(format!("--name: {e:#}")))?;
            Testbed::create_named(&spec, &name, false)?
        }
        None => create_labelled(&spec)?,
    };
    let name = tb.name().to_string();
    let info = tb.info();
    let (mountpoint, device) = (tb.mountpoint().to_path_buf(), tb.device().to_path_buf());
    let journal_device = tb.journal_device().map(|p| p.to_path_buf());
    let warnings = tb.warnings();
    // Stopped before it is handed over: it goes, as in any interrupted run.
    crate::base::signals::check()?;
    // Its name is printed before it is handed over to the ledger: whenever the testbed
    // outlives this process, its user has been told what to destroy. Printing that fails
    // (a reader closed the pipe) ends here, and the testbed goes with this process.
    let mut text = format!("name:        {name}\n");
    text.push_str(&format!("mountpoint:  {}\n", mountpoint.display()));
    text.push_str(&format!("device:      {}\n", device.display()));
    if let Some(j) = &journal_device {
        text.push_str(&format!("journal:     {}\n", j.display()));
    }
    text.push_str(&format!("filesystem:  {}\n", spec.describe()));
    text.push_str(&format!("mkfs:        {}\n", info.mkfs_args.join(" ")));
    text.push_str(&format!("destroy with: fsgauge testbed destroy {name}\n"));
    let journal = journal_device.as_ref().map(|j| j.display().to_string());
    let rows = vec![vec![
        name.clone(),
        mountpoint.display().to_string(),
        device.display().to_string(),
        journal.clone().unwrap_or_default(),
        spec.describe(),
        info.mkfs_args.join(" "),
    ]];
    let page = Page::new(
        format!("testbed {name}"),
        &serde_json::json!({
            "name": name,
            "mountpoint": mountpoint,
            "device": device,
            "journal_device": journal_device,
            "testbed": info,
        }),
    )?
    .text(text)
    .table(crate::base::text::Table {
        title: String::new(),
        label_columns: 6,
        note: String::new(),
        headers: [
            "name",
            "mountpoint",
            "device",
            "journal",
            "filesystem",
            "mkfs",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    });
    {
        use std::io::Write;
        let bytes = crate::analysis::report::export::render(&page.into(), a.out.format())?;
        let mut out = std::io::stdout().lock();
        out.write_all(&bytes)
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::anyhow!("printing testbed {name}: {e}; it is torn down"))?;
    }
    tb.keep()?;
    crate::base::signals::test_pause("kept");
    crate::base::signals::note_kept(format!(
        "testbed {name} was made and kept: `fsgauge testbed destroy {name}` removes it"
    ));
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds a testbed named `LABEL-N` with the first N free: a name that another `testbed
/// create` takes meanwhile (the ledger entry is made exclusively) moves on to the next.
fn create_labelled(spec: &crate::testbed::TestbedSpec) -> Result<Testbed> {
    let scan = ledger::scan()?;
    for d in &scan.damaged {
        eprintln!("warning: {}", d.warning());
    }
    let taken = scan.taken_names();
    let mut tries = 0;
    for n in (1..).map(|i| format!("{}-{i}", spec.label)) {
        if taken.contains(&n) {
            continue;
        }
        match Testbed::create_named(spec, &n, false) {
            Err(e) if e.is::<ledger::NameTaken>() && tries < 1000 => tries += 1,
            other => return other,
        }
    }
    unreachable!("an unbounded range of names ends only by returning")
}

fn list(out: &OutputArgs) -> Result<ExitCode> {
    let scan = ledger::scan()?;
    for d in &scan.damaged {
        eprintln!("warning: {}", d.warning());
    }
    let entries = scan.entries;
    let rows: Vec<Vec<String>> = entries.iter().map(entry_row).collect();
    let text = if entries.is_empty() {
        "no testbeds\n".to_string()
    } else {
        let mut text = format!(
            "{:<24} {:<26} {:<6} {:>6} {:<12} mountpoint\n",
            "name", "owner", "fs", "size", "device"
        );
        for r in &rows {
            text.push_str(&format!(
                "{:<24} {:<26} {:<6} {:>6} {:<12} {}\n",
                r[0], r[1], r[2], r[3], r[4], r[5]
            ));
        }
        text
    };
    out.print(listing(
        "fsgauge testbeds",
        &entries_json(&entries),
        text,
        &LIST_HEADERS,
        rows,
    )?)?;
    Ok(ExitCode::SUCCESS)
}

const LIST_HEADERS: [&str; 6] = ["name", "owner", "fs", "size", "device", "mountpoint"];

/// One ledger entry in [`LIST_HEADERS`] order.
fn entry_row(e: &ledger::LedgerEntry) -> Vec<String> {
    let d = &e.details;
    let owner = if e.persistent() {
        "persistent".to_string()
    } else if e.owner_alive() {
        format!("pid {}", e.owner_pid)
    } else {
        format!("dead pid {} (cleanup)", e.owner_pid)
    };
    let text = |key: &str| {
        d.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("-")
            .to_string()
    };
    vec![
        e.name.clone(),
        owner,
        text("fs"),
        d.get("size")
            .and_then(|v| v.as_u64())
            .map_or("-".into(), format_size),
        text("device"),
        // A run's directory in a `--dir` has no mount point; show the directory instead.
        d.get("mountpoint")
            .or_else(|| d.get("dir"))
            .and_then(|v| v.as_str())
            .unwrap_or("-")
            .to_string(),
    ]
}

fn entries_json(entries: &[ledger::LedgerEntry]) -> Vec<serde_json::Value> {
    entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "persistent": e.persistent(),
                "owner_pid": e.owner_pid,
                "owner_alive": e.owner_alive(),
                "created_at": e.created_at,
                "details": e.details,
                "resources": e.resources,
            })
        })
        .collect()
}
