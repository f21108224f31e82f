//! `fsgauge frag`: block layout and fragmentation of trees, and free-space fragmentation of a
//! filesystem. Parsing and printing only; the work is in [`crate::layout`].

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Result;
use clap::Args;

use super::common::OutputArgs;
use crate::analysis::report::document::Page;
use crate::analysis::report::output::{csv_field, md_header, md_row, OutputFormat as Format};
use crate::base::error::bad_input;
use crate::base::text::Table;
use crate::base::units::format_bytes_human;
use crate::layout::metrics::{FlagCounts, Skipped};
use crate::layout::{self, FileLayout, FreeSpace, LayoutSummary, ScanMethod, WalkOptions};

crate::choice! {
    /// Orders of the per-file list.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SortKey("sort key") {
        /// Most extents first.
        Extents = "extents",
        /// Largest first.
        Size = "size",
        /// By path.
        Path = "path",
    }
}

/// Reads the extent map of every regular file below PATH... (on ext2/3/4 from the filesystem's
/// own inode tables and extent trees; elsewhere FIEMAP with FIEMAP_FLAG_SYNC, FIBMAP where
/// FIEMAP is missing; see --method), counts extents as filefrag does, and reports the
/// fragmentation metrics: extents per file, fragmentation factor, layout score, fragmented
/// files, internal fragmentation, inter-file locality, and the worst files.
///
/// With --free MOUNTPOINT, also (or only) the free-space fragmentation of that filesystem, as
/// e2freefrag reports it.
#[derive(Debug, Args)]
pub struct FragCmd {
    /// Directories or files to scan.
    #[arg(value_name = "PATH", required_unless_present = "free")]
    pub paths: Vec<PathBuf>,
    /// List every file: size, allocated, extents, ideal extents, layout score, holes, flags.
    #[arg(long)]
    pub per_file: bool,
    /// --format table, json, csv, md or html; --quiet says nothing on stderr besides errors
    /// and warnings.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Scanning threads [default: twice the number of CPUs, 4 to 16].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Sort the per-file list (holds the whole list in memory; without it files stream out in
    /// scan order).
    #[arg(long, value_name = "extents|size|path", requires = "per_file")]
    pub sort: Option<SortKey>,
    /// Worst files to show (by extents) [default: 10]; with --per-file --sort, also the number
    /// of files listed.
    #[arg(long, value_name = "K")]
    pub top: Option<usize>,
    /// Report the free-space fragmentation of the filesystem at MOUNTPOINT.
    #[arg(long, value_name = "MOUNTPOINT")]
    pub free: Option<PathBuf>,
    /// Enter mount points and other filesystems below PATH.
    #[arg(long)]
    pub cross_mounts: bool,
    /// How block maps are read. auto: on ext2/3/4, after one syncfs (which places delayed
    /// allocations, as FIEMAP_FLAG_SYNC would), read the inodes found by the directory walk
    /// straight from the block device's inode tables, with their extent trees or indirect
    /// blocks — no file is opened, which is why it is fast; it needs read access to the device
    /// (root). Elsewhere (other filesystems, a device that cannot be read), and for any inode
    /// that does not look like the regular file the walk found, FIEMAP is used. fiemap: open
    /// every file and ask the kernel (FIEMAP with FIEMAP_FLAG_SYNC), as filefrag does. ondisk:
    /// as auto, but a PATH whose filesystem cannot be read on disk is an error. Both give the
    /// same extent counts and metrics; the summary says how many files each method mapped.
    #[arg(long, value_name = "auto|fiemap|ondisk", default_value = "auto")]
    pub method: ScanMethod,
}

const CSV_HEADER: &str =
    "path,size,allocated,extents,ideal_extents,layout_score,holes,flags,method";

/// A file's figures, in [`CSV_HEADER`] order.
fn file_fields(f: &FileLayout) -> Vec<String> {
    vec![
        f.path.clone(),
        f.size.to_string(),
        f.allocated.to_string(),
        f.extents.to_string(),
        f.ideal_extents.to_string(),
        f.layout_score.map_or(String::new(), |v| format!("{v:.4}")),
        f.holes.to_string(),
        f.flags.names().join("|"),
        f.method.name().to_string(),
    ]
}

fn csv_row(f: &FileLayout) -> String {
    let fields: Vec<String> = file_fields(f).iter().map(|v| csv_field(v)).collect();
    fields.join(",")
}

fn md_file_header() -> String {
    let headers: Vec<&str> = CSV_HEADER.split(',').collect();
    md_header(&headers, 1)
}

fn table_row(f: &FileLayout) -> String {
    format!(
        "{:>8} {:>6} {:>12} {:>12} {:>6} {:>5}  {:<16} {}",
        f.extents,
        f.ideal_extents,
        f.size,
        f.allocated,
        f.layout_score.map_or("-".into(), |v| format!("{v:.3}")),
        f.holes,
        {
            let n = f.flags.names().join(",");
            if n.is_empty() {
                "-".into()
            } else {
                n
            }
        },
        f.path
    )
}

const TABLE_HEADER: &str =
    " extents  ideal         size    allocated     LS holes  flags            path";

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The summary as a table.
pub fn summary_table(s: &LayoutSummary, paths: &[PathBuf]) -> String {
    let mut o = String::new();
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let _ = writeln!(o, "layout of {}", names.join(", "));
    for (k, v) in summary_rows(s) {
        let _ = writeln!(o, "  {k:<24}{v}");
    }
    let _ = writeln!(o, "  {:<24}{}", "maps read with", maps_read_with(s));
    for n in &s.method_notes {
        let _ = writeln!(o, "  {:<24}{n}", "");
    }
    let flags = flagged_files(&s.flags);
    if !flags.is_empty() {
        let _ = writeln!(o, "  {:<24}{}", "files with flags", flags.join(", "));
    }
    write_extents(&mut o, s);
    write_skipped(&mut o, &s.skipped);
    o
}

/// The summary's figures, a (name, value) row each.
fn summary_rows(s: &LayoutSummary) -> Vec<(&'static str, String)> {
    vec![
        ("files", s.files.to_string()),
        (
            "bytes",
            format!(
                "{} (with blocks {}, allocated {})",
                format_bytes_human(s.bytes as f64),
                format_bytes_human(s.data_bytes as f64),
                format_bytes_human(s.allocated_bytes as f64)
            ),
        ),
        (
            "extents",
            format!(
                "{} (ideal {}); per file mean {}, max {}",
                s.extents,
                s.ideal_extents,
                s.extents_per_file_mean
                    .map_or("-".into(), |m| format!("{m:.2}")),
                s.extents_per_file_max
            ),
        ),
        (
            "fragmentation factor",
            format!("{}  (sum(E - I) / sum(E))", num(s.fragmentation_factor)),
        ),
        (
            "layout score",
            format!(
                "{}  (over {} files of 2+ blocks)",
                num(s.layout_score),
                s.layout_score_files
            ),
        ),
        (
            "fragmented files",
            format!(
                "{} = {} of files, {} of bytes",
                s.fragmented_files,
                pct(s.fragmented_files_share),
                pct(s.fragmented_bytes_share)
            ),
        ),
        ("internal fragmentation", pct(s.internal_fragmentation)),
        (
            "inter-file locality",
            format!(
                "{} within 0 blocks, {} within 256 blocks ({} pairs in directory order)",
                pct(s.locality.share_within_0),
                pct(s.locality.share_within_256),
                s.locality.pairs
            ),
        ),
    ]
}

/// How the block maps were read: how many files by each method.
fn maps_read_with(s: &LayoutSummary) -> String {
    let mut methods = String::new();
    if s.ondisk_files > 0 {
        let _ = write!(methods, "on-disk inodes {}, ", s.ondisk_files);
    }
    let _ = write!(methods, "FIEMAP {}", s.fiemap_files);
    if s.fibmap_files > 0 {
        let _ = write!(methods, ", FIBMAP {}", s.fibmap_files);
    }
    if s.block_mapped_files > 0 {
        let _ = write!(
            methods,
            "; {} block-mapped (indirect) files",
            s.block_mapped_files
        );
    }
    if !s.method.is_empty() {
        let _ = write!(methods, " (--method {})", s.method);
    }
    methods
}

/// The extent flags some files have, `name count` each.
fn flagged_files(f: &FlagCounts) -> Vec<String> {
    [
        ("inline", f.inline),
        ("unwritten", f.unwritten),
        ("shared", f.shared),
        ("encoded", f.encoded),
        ("encrypted", f.encrypted),
        ("delalloc", f.delalloc),
        ("unknown", f.unknown),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| format!("{k} {n}"))
    .collect()
}

/// The extents-per-file histogram and the files with the most extents.
fn write_extents(o: &mut String, s: &LayoutSummary) {
    if !s.extents_histogram.is_empty() {
        let _ = writeln!(o, "\nextents per file   files");
        for b in &s.extents_histogram {
            let _ = writeln!(o, "  {:>10}  {:>9}", b.extents, b.files);
        }
    }
    if !s.worst.is_empty() {
        let _ = writeln!(o, "\nworst {} files by extents", s.worst.len());
        let _ = writeln!(o, "{TABLE_HEADER}");
        for w in &s.worst {
            let _ = writeln!(o, "{}", table_row(w));
        }
    }
}

/// What the scan passed over, and why.
fn write_skipped(o: &mut String, sk: &Skipped) {
    if sk.total() > 0 {
        let mut parts = Vec::new();
        for (n, what) in [
            (sk.vanished, "vanished during the scan"),
            (sk.permission_denied, "permission denied"),
            (sk.special_files, "special files"),
            (sk.symlinks, "symlinks (not followed)"),
            (sk.other_mounts, "mount points not crossed (--cross-mounts)"),
            (sk.loops, "directories seen twice (bind-mount loops)"),
            (
                sk.unsupported,
                "files without a block map (no FIEMAP/FIBMAP on their filesystem)",
            ),
            (sk.errors, "errors"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let _ = writeln!(o, "\nskipped: {}", parts.join(", "));
        for m in &sk.messages {
            let _ = writeln!(o, "  {m}");
        }
    }
}

/// The free-space report as a table, in e2freefrag's layout.
pub fn free_table(f: &FreeSpace) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "free space of {} ({}, read with {})",
        f.path, f.fs, f.method
    );
    let _ = writeln!(o, "  block size               {} bytes", f.block_size);
    let _ = writeln!(
        o,
        "  free                     {} of {} blocks ({}), {}",
        f.free_blocks,
        f.total_blocks,
        if f.total_blocks > 0 {
            format!(
                "{:.1}%",
                f.free_blocks as f64 * 100.0 / f.total_blocks as f64
            )
        } else {
            "-".into()
        },
        format_bytes_human(f.free_bytes as f64)
    );
    if let Some(u) = f.unallocated_bytes {
        let _ = writeln!(
            o,
            "  not allocated to chunks  {}",
            format_bytes_human(u as f64)
        );
    }
    let _ = writeln!(o, "  free extents             {}", f.free_extents);
    let _ = writeln!(
        o,
        "  largest free extent      {} ({} of free space)",
        format_bytes_human(f.largest_free_extent as f64),
        pct(f.largest_free_share)
    );
    let _ = writeln!(
        o,
        "  mean free extent         {}",
        format_bytes_human(f.mean_free_extent)
    );
    let _ = writeln!(
        o,
        "  free extents per GiB     {}",
        f.free_extents_per_gib
            .map_or("-".into(), |v| format!("{v:.1}"))
    );
    let _ = writeln!(
        o,
        "\n  Extent Size Range :  Free extents   Free Blocks  Percent"
    );
    for b in &f.histogram {
        let _ = writeln!(
            o,
            "  {:>17} :  {:>12}  {:>12}  {:>6.2}%",
            b.range, b.extents, b.blocks, b.percent
        );
    }
    o
}

const FREE_HEADER: [&str; 6] = [
    "range",
    "from_bytes",
    "to_bytes",
    "free_extents",
    "free_blocks",
    "percent",
];

fn free_rows(f: &FreeSpace) -> Vec<Vec<String>> {
    f.histogram
        .iter()
        .map(|b| {
            vec![
                b.range.to_string(),
                b.from_bytes.to_string(),
                b.to_bytes.to_string(),
                b.extents.to_string(),
                b.blocks.to_string(),
                format!("{:.2}", b.percent),
            ]
        })
        .collect()
}

fn free_csv(f: &FreeSpace) -> String {
    let mut o = FREE_HEADER.join(",") + "\n";
    for row in free_rows(f) {
        let fields: Vec<String> = row.iter().map(|v| csv_field(v)).collect();
        let _ = writeln!(o, "{}", fields.join(","));
    }
    o
}

fn summary_csv(s: &LayoutSummary) -> String {
    let mut o = String::from("metric,value\n");
    for (k, v) in summary_pairs(s) {
        let _ = writeln!(o, "{k},{}", csv_field(&v));
    }
    o
}

/// The summary's figures under their CSV names.
fn summary_pairs(s: &LayoutSummary) -> Vec<(&'static str, String)> {
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    vec![
        ("files", s.files.to_string()),
        ("bytes", s.bytes.to_string()),
        ("data_bytes", s.data_bytes.to_string()),
        ("allocated_bytes", s.allocated_bytes.to_string()),
        ("extents", s.extents.to_string()),
        ("ideal_extents", s.ideal_extents.to_string()),
        ("extents_per_file_mean", opt(s.extents_per_file_mean)),
        ("extents_per_file_max", s.extents_per_file_max.to_string()),
        ("fragmentation_factor", opt(s.fragmentation_factor)),
        ("layout_score", opt(s.layout_score)),
        ("fragmented_files", s.fragmented_files.to_string()),
        ("fragmented_files_share", opt(s.fragmented_files_share)),
        ("fragmented_bytes_share", opt(s.fragmented_bytes_share)),
        ("internal_fragmentation", opt(s.internal_fragmentation)),
        ("locality_pairs", s.locality.pairs.to_string()),
        ("locality_within_0", opt(s.locality.share_within_0)),
        ("locality_within_256", opt(s.locality.share_within_256)),
        ("skipped", s.skipped.total().to_string()),
        ("method", s.method.clone()),
        ("ondisk_files", s.ondisk_files.to_string()),
        ("fiemap_files", s.fiemap_files.to_string()),
        ("fibmap_files", s.fibmap_files.to_string()),
    ]
}

fn sort_files(files: &mut [FileLayout], key: SortKey) {
    match key {
        SortKey::Extents => {
            files.sort_by(|a, b| b.extents.cmp(&a.extents).then(a.path.cmp(&b.path)))
        }
        SortKey::Size => files.sort_by(|a, b| b.size.cmp(&a.size).then(a.path.cmp(&b.path))),
        SortKey::Path => files.sort_by(|a, b| a.path.cmp(&b.path)),
    }
}

/// Runs `fsgauge frag`.
pub fn run(c: FragCmd) -> Result<ExitCode> {
    let format = c.out.format();
    check(&c)?;
    let stdout = std::io::stdout();
    let out = Mutex::new(BufWriter::with_capacity(1 << 16, stdout));
    let mut summary = None;
    let mut collected: Vec<FileLayout> = Vec::new();
    if !c.paths.is_empty() {
        summary = Some(scan(&c, format, &out, &mut collected)?);
    }
    if let Some(key) = c.sort {
        sort_files(&mut collected, key);
        if let Some(k) = c.top {
            collected.truncate(k);
        }
    }
    let free = free_space(&c)?;
    let mut w = out.into_inner().expect("stdout lock");
    w.flush()?;
    drop(w);
    let streamed = c.per_file && c.sort.is_none() && !c.paths.is_empty();
    let page = page(
        &c,
        summary.as_ref(),
        &collected,
        free.as_ref(),
        streamed && format == Format::Json,
    )?;
    crate::analysis::report::export::print(&page.into(), format)?;
    // The output above says it in its own format; the exit status and stderr say it too, so
    // that a script that keeps only stdout or only stderr is not left guessing.
    if let (Some(Err(e)), Some(m)) = (&free, &c.free) {
        return Err(bad_input(format!("--free {}: {e}", m.display())));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses what `frag` cannot do before it starts: no threads, a PATH that does not exist, a
/// --free that is not a directory.
fn check(c: &FragCmd) -> Result<()> {
    if c.threads == Some(0) {
        return Err(bad_input("--threads must be 1 or more"));
    }
    for p in &c.paths {
        if std::fs::symlink_metadata(p).is_err() {
            return Err(bad_input(format!(
                "{}: no such file or directory",
                p.display()
            )));
        }
    }
    if let Some(m) = &c.free {
        if !m.is_dir() {
            return Err(bad_input(format!(
                "--free {}: not a directory",
                m.display()
            )));
        }
    }
    Ok(())
}

/// The walk's options from the command's flags.
fn walk_options(c: &FragCmd) -> WalkOptions {
    let mut opts = WalkOptions::default();
    if let Some(t) = c.threads {
        opts.threads = t;
    }
    opts.cross_mounts = c.cross_mounts;
    opts.top = c.top.unwrap_or(10);
    opts.paths = c.per_file;
    opts.method = c.method;
    opts
}

/// Scans the paths and returns their summary. With --per-file and no --sort, every file is
/// written to `out` as the walk finds it, between the list's header and its end; with --sort,
/// the files are kept in `collected` to be sorted.
fn scan(
    c: &FragCmd,
    format: Format,
    out: &Mutex<BufWriter<std::io::Stdout>>,
    collected: &mut Vec<FileLayout>,
) -> Result<LayoutSummary> {
    let opts = walk_options(c);
    let sorted = c.per_file && c.sort.is_some();
    let stream = c.per_file && !sorted;
    let first = Mutex::new(true);
    if stream {
        let mut w = out.lock().expect("stdout lock");
        match format {
            Format::Table | Format::Html => writeln!(w, "{TABLE_HEADER}")?,
            Format::Csv => writeln!(w, "{CSV_HEADER}")?,
            Format::Md => write!(w, "{}", md_file_header())?,
            Format::Json => write!(w, "{{\"files\": [")?,
        }
    }
    let keep = Mutex::new(collected);
    let sink = |f: &FileLayout| {
        if sorted {
            keep.lock().expect("list lock").push(f.clone());
            return;
        }
        let mut w = out.lock().expect("stdout lock");
        let _ = match format {
            Format::Table | Format::Html => writeln!(w, "{}", table_row(f)),
            Format::Csv => writeln!(w, "{}", csv_row(f)),
            Format::Md => write!(w, "{}", md_row(&file_fields(f))),
            Format::Json => {
                let mut fst = first.lock().expect("flag lock");
                let sep = if *fst { "\n" } else { ",\n" };
                *fst = false;
                write!(w, "{sep}{}", serde_json::to_string(f).unwrap_or_default())
            }
        };
    };
    let s = if c.per_file {
        layout::scan_tree(&c.paths, &opts, Some(&sink))?
    } else {
        layout::scan_tree(&c.paths, &opts, None)?
    };
    if stream {
        let mut w = out.lock().expect("stdout lock");
        match format {
            Format::Json => write!(w, "\n],")?,
            _ => writeln!(w)?,
        }
    }
    Ok(s)
}

/// The free space of --free's filesystem: none without --free, and the reason as text where
/// the filesystem cannot say (the page shows it, then `frag` fails).
fn free_space(c: &FragCmd) -> Result<Option<Result<FreeSpace, String>>> {
    Ok(match &c.free {
        Some(m) => match layout::free_space(m) {
            Ok(f) => Some(Ok(f)),
            Err(e) if e.is::<layout::Unsupported>() => Some(Err(format!("{e:#}"))),
            Err(e) => return Err(e),
        },
        None => None,
    })
}

/// What `frag` shows after the streamed per-file list (if any): the sorted list, the summary
/// and the free space, as one page. `json_continues` says the streamed JSON list of files is
/// already out, so the document continues that object.
fn page(
    c: &FragCmd,
    summary: Option<&LayoutSummary>,
    files: &[FileLayout],
    free: Option<&Result<FreeSpace, String>>,
    json_continues: bool,
) -> Result<Page> {
    let mut doc = serde_json::Map::new();
    let paths: Vec<String> = c.paths.iter().map(|p| p.display().to_string()).collect();
    doc.insert("paths".into(), serde_json::to_value(paths)?);
    if let Some(s) = summary {
        doc.insert("summary".into(), serde_json::to_value(s)?);
    }
    if c.sort.is_some() {
        doc.insert("files".into(), serde_json::to_value(files)?);
    }
    match free {
        Some(Ok(f)) => {
            doc.insert("free_space".into(), serde_json::to_value(f)?);
        }
        Some(Err(e)) => {
            doc.insert("free_space".into(), serde_json::json!({ "error": e }));
        }
        None => {}
    }
    let mut page = Page::new("fsgauge frag", &serde_json::Value::Object(doc))?;
    if json_continues {
        page.json = page.json.trim_start_matches('{').to_string();
    }
    let table = |headers: &[&str], rows: Vec<Vec<String>>| Table {
        title: String::new(),
        label_columns: 1,
        note: String::new(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    };
    let (mut text, mut csv) = (String::new(), String::new());
    if c.sort.is_some() {
        let headers: Vec<&str> = CSV_HEADER.split(',').collect();
        page.tables
            .push(table(&headers, files.iter().map(file_fields).collect()));
        text.push_str(&format!("{TABLE_HEADER}\n"));
        csv.push_str(&format!("{CSV_HEADER}\n"));
        for f in files {
            text.push_str(&format!("{}\n", table_row(f)));
            csv.push_str(&format!("{}\n", csv_row(f)));
        }
        text.push('\n');
        csv.push('\n');
    }
    if let Some(s) = summary {
        let rows = summary_pairs(s)
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect();
        page.tables.push(table(&["metric", "value"], rows));
        text.push_str(&summary_table(s, &c.paths));
        csv.push_str(&summary_csv(s));
    }
    match free {
        Some(Ok(f)) => {
            page.tables.push(table(&FREE_HEADER, free_rows(f)));
            if summary.is_some() {
                text.push('\n');
            }
            text.push_str(&free_table(f));
            csv.push_str(&format!("\n{}", free_csv(f)));
        }
        Some(Err(e)) => {
            page.tables
                .push(table(&["free space"], vec![vec![e.clone()]]));
            text.push_str(&format!("free space: {e}\n"));
            csv.push_str(&format!("\nfree space: {e}\n"));
        }
        None => {}
    }
    Ok(page.text(text).csv(Some(csv)))
}
