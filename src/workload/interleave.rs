//! `interleave`: the inode-reservation study (seed study 4, ext4 2007). Many directories
//! (9890) get a few files each (14), created round-robin: file 1 in every directory, then
//! file 2 in every directory, and so on, so that the inodes of different directories
//! interleave in the inode table. Then the cache is made cold (the study rebooted; here a
//! remount by default) and the whole tree is removed the way `rm -rf` does (read each
//! directory, unlink its entries, rmdir it) — the operation whose time the study compared
//! (16–18 min on ext3/ext4 versus 8 min with the reservation patch).
//!
//! `--order grouped` creates all of one directory's files before the next, for comparison.
//! Phases: `dir_create`, `file_create`, `remove`. Names are generated, never stored, and every
//! file is created by path from the root's descriptor (`d0042/f07`), so memory and open
//! descriptors stay flat however many directories there are.

use std::time::Instant;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::names::{check_counts, check_inodes, digits, tree_space, write_size, NameBuf};
use super::tree::remove_tree_contents;
use super::{ColdMode, RunContext, Workload};
use crate::base::error::{bad_input, bad_param};
use crate::base::sys::{fs_error, Dir};
use crate::base::units::Overflow;
use crate::measure::OpDef;
use crate::results::MetricDef;

crate::choice! {
    /// The order files are created in.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Order("order") {
        /// File 1 in every directory, then file 2 in every directory, … (the study's order).
        Interleaved = "interleaved",
        /// All files of directory 1, then all of directory 2, … (for comparison).
        Grouped = "grouped",
    }
}

/// The inode-reservation study: make --dirs directories, create --files files in each
/// round-robin (file 1 everywhere, then file 2, …), make the cache cold, and time removing
/// the tree as rm -rf does. Phases dir_create, file_create, remove.
///
/// The study's sizes are the defaults: 9890 directories × 14 files = 138460 files. The
/// study rebooted after each operation: --cold applies between dir_create and
/// file_create, --remove-cold before the removal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct Interleave {
    /// Directories under the workload directory.
    #[arg(long, default_value_t = 9890)]
    pub dirs: u64,
    /// Files in each directory.
    #[arg(long, default_value_t = 14)]
    pub files: u64,
    /// Size of every file (the study did not say; empty by default).
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = super::params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub file_size: u64,
    /// interleaved: file 1 in every directory, then file 2 in every directory, … (the study);
    /// grouped: all files of one directory before the next.
    #[arg(
        long,
        value_name = "interleaved|grouped",
        default_value = "interleaved",
        value_parser = super::params::item::<Order>
    )]
    pub order: Order,
    /// How the cache is made cold before the timed removal (the study rebooted): remount
    /// (testbeds only), drop (sync + drop_caches) or none.
    #[arg(long, value_name = "remount|drop|none", default_value = "remount")]
    pub remove_cold: ColdMode,
    /// Write the tree as found on disk after file_create (one line per entry:
    /// `d<TAB>path` or `f<TAB>size<TAB>path`, relative to the workload directory) to FILE.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_list: Option<std::path::PathBuf>,
}

impl Default for Interleave {
    fn default() -> Self {
        super::params::defaults()
    }
}

/// Under `--scale` the inode-interleave study's 9890 directories are its amount of work; the
/// 14 files per directory stay.
pub const SCALES: &[(&str, super::params::ScaleClass)] = &[
    ("dirs", super::params::ScaleClass::Count),
    ("files", super::params::ScaleClass::Fixed),
];

const DIR_CREATE_OPS: [OpDef; 1] = [OpDef::primary("mkdir")];
const FILE_CREATE_OPS: [OpDef; 2] = [OpDef::primary("create"), OpDef::secondary("write")];
const REMOVE_OPS: [OpDef; 2] = [OpDef::primary("unlink"), OpDef::primary("rmdir")];

impl Interleave {
    /// Files in the tree.
    pub fn total_files(&self) -> u64 {
        self.dirs.saturating_mul(self.files)
    }

    fn widths(&self) -> (usize, usize) {
        (digits(self.dirs - 1), digits(self.files - 1))
    }

    /// Name of directory `d` (zero-padded to the width of the largest index).
    pub fn dir_name(&self, d: u64) -> String {
        format!("d{d:0w$}", w = self.widths().0)
    }

    /// Name of file `f` in its directory.
    pub fn file_name(&self, f: u64) -> String {
        format!("f{f:0w$}", w = self.widths().1)
    }

    fn dir_create(&self, ctx: &mut RunContext) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let (dw, _) = self.widths();
        let dirs = self.dirs;
        let phase = ctx.phase("dir_create", &DIR_CREATE_OPS, Some(dirs), 1, |_, rec| {
            let mkdir = rec.op("mkdir");
            let root_fd = Dir::open_path(&root)?;
            let mut name = NameBuf::new();
            for d in 0..dirs {
                if rec.should_stop() {
                    rec.check()?;
                }
                name.clear().push_str("d").push_num(d, dw);
                let t0 = Instant::now();
                root_fd.mkdir(name.as_cstr()).map_err(|e| {
                    fs_error("mkdir", &format!("{}/{}", root.display(), name.as_str()), e)
                })?;
                rec.record(mkdir, t0, 0);
            }
            Ok(())
        })?;
        phase.extra.insert("dirs".into(), dirs as f64);
        Ok(())
    }

    fn file_create(&self, ctx: &mut RunContext) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let (dw, fw) = self.widths();
        let (dirs, files, size, order) = (self.dirs, self.files, self.file_size, self.order);
        let buf = vec![0u8; size.min(1 << 20) as usize];
        let phase = ctx.phase(
            "file_create",
            &FILE_CREATE_OPS,
            Some(self.total_files()),
            1,
            |_, rec| {
                let (create, write) = (rec.op("create"), rec.op("write"));
                let root_fd = Dir::open_path(&root)?;
                let mut name = NameBuf::new();
                let (outer, inner) = match order {
                    Order::Interleaved => (files, dirs),
                    Order::Grouped => (dirs, files),
                };
                for a in 0..outer {
                    for b in 0..inner {
                        if rec.should_stop() {
                            rec.check()?;
                        }
                        let (d, f) = match order {
                            Order::Interleaved => (b, a),
                            Order::Grouped => (a, b),
                        };
                        name.clear()
                            .push_str("d")
                            .push_num(d, dw)
                            .push_str("/f")
                            .push_num(f, fw);
                        let shown = |n: &NameBuf| format!("{}/{}", root.display(), n.as_str());
                        let t0 = Instant::now();
                        let fd = root_fd
                            .create(name.as_cstr())
                            .map_err(|e| fs_error("create", &shown(&name), e))?;
                        write_size(rec, write, &fd, &buf, size, t0)
                            .map_err(|e| fs_error("write", &shown(&name), e))?;
                        fd.close()
                            .map_err(|e| fs_error("close", &shown(&name), e))?;
                        rec.record(create, t0, 0);
                    }
                }
                Ok(())
            },
        )?;
        phase
            .extra
            .insert("files".into(), self.total_files() as f64);
        Ok(())
    }

    fn remove(&self, ctx: &mut RunContext) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let expected = self.dirs + self.total_files();
        let phase = ctx.phase("remove", &REMOVE_OPS, Some(expected), 1, |_, rec| {
            let root_fd = Dir::open_path(&root)?;
            remove_tree_contents(rec, &root_fd, &root.display().to_string())
        })?;
        let (unlinked, removed) = (
            phase.op_stats.get("unlink").map_or(0, |s| s.count),
            phase.op_stats.get("rmdir").map_or(0, |s| s.count),
        );
        phase.extra.insert("files".into(), unlinked as f64);
        phase.extra.insert("dirs".into(), removed as f64);
        Ok(())
    }
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[
    MetricDef::count("dirs", "directories", ""),
    MetricDef::count("files", "files", ""),
];

impl Workload for Interleave {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "interleave"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        check_counts(self.dirs, self.files)?;
        if self.total_files() > 1 << 40 {
            return Err(bad_param(
                "dirs",
                format!(
                    "--dirs {} × --files {} is more files than any filesystem holds",
                    self.dirs, self.files
                ),
            ));
        }
        if self.remove_cold != ColdMode::None && !nix::unistd::geteuid().is_root() {
            return Err(bad_param(
                "remove_cold",
                format!(
                    "--remove-cold {} needs root; run as root or use --remove-cold none",
                    self.remove_cold.name()
                ),
            ));
        }
        Ok(())
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        let over = Overflow::of(
            "interleave",
            "space estimate",
            format!(
                "--dirs {} --files {} --file-size {}",
                self.dirs, self.files, self.file_size
            ),
            "--dirs, --files or --file-size",
        );
        // A block and an inode (512 bytes, xfs's size) per directory; data in 4 KiB blocks and
        // an inode per file.
        tree_space(self.dirs, self.files, self.file_size, 512).ok_or_else(over)
    }

    fn inodes_needed(&self) -> u64 {
        self.dirs.saturating_add(self.total_files())
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        Ok(self.file_size.min(1 << 20) + (2 << 20))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        if self.remove_cold == ColdMode::Remount {
            if let super::Target::Dir(p) = ctx.target() {
                return Err(bad_input(format!(
                    "--remove-cold remount needs a testbed fsgauge builds (--fs KIND); {} is an existing directory, use --remove-cold drop or none",
                    p.display()
                )));
            }
        }
        check_inodes(ctx.root(), self.inodes_needed(), "interleave")?;
        self.dir_create(ctx)?;
        ctx.make_cold()?;
        self.file_create(ctx)?;
        ctx.layout_point()?;
        if let Some(out) = &self.tree_list {
            super::fdtree::write_tree_list(ctx.root(), out)?;
        }
        ctx.make_cold_with(self.remove_cold)?;
        self.remove(ctx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn orders_have_one_set_of_names_and_a_refusal_that_lists_them() {
        crate::base::choice::testing::one_set_of_names::<Order>();
        assert_eq!(
            "random".parse::<Order>().unwrap_err(),
            "unknown order \"random\"; use interleaved or grouped"
        );
    }

    #[test]
    fn defaults_are_the_studys_and_names_are_padded() {
        let w = Interleave::default();
        assert_eq!(w.total_files(), 138460);
        assert_eq!(w.dir_name(42), "d0042");
        assert_eq!(w.file_name(7), "f07");
        assert_eq!(w.params()["order"], "interleaved");
        assert_eq!(w.params()["remove_cold"], "remount");
        let g: Interleave =
            serde_json::from_value(serde_json::json!({"order": "grouped", "dirs": 3})).unwrap();
        assert_eq!((g.order, g.dirs, g.files), (Order::Grouped, 3, 14));
        assert_eq!(g.dir_name(2), "d2");
    }

    #[test]
    fn refuses_zero_counts() {
        for (d, f) in [(0, 14), (9890, 0)] {
            let w = Interleave {
                dirs: d,
                files: f,
                ..Default::default()
            };
            let e = w.validate().unwrap_err();
            assert!(e.to_string().contains("1 or more"), "{e}");
        }
    }
}
