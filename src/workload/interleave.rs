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

use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::time::Instant;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::names::{
    check_inodes, close, create_at, digits, fs_error, mkdir_at, open_dir, write_all, NameBuf,
};
use super::tree::remove_tree_contents;
use super::{ColdMode, RunContext, Workload};
use crate::error::bad_input;
use crate::measure::OpDef;
use crate::results::MetricDef;

/// The order files are created in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// File 1 in every directory, then file 2 in every directory, … (the study's order).
    Interleaved,
    /// All files of directory 1, then all of directory 2, … (for comparison).
    Grouped,
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "interleaved" => Ok(Self::Interleaved),
            "grouped" => Ok(Self::Grouped),
            _ => Err(format!("unknown order {s:?}; use interleaved or grouped")),
        }
    }
}

/// Parameters of the interleave workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Interleave {
    /// Directories under the workload root.
    pub dirs: u64,
    /// Files in each directory.
    pub files: u64,
    /// Size of each file, bytes (the study did not say; empty files by default).
    #[serde(deserialize_with = "crate::units::de_size")]
    pub file_size: u64,
    /// Creation order.
    pub order: Order,
    /// How the cache is made cold before the removal (the study rebooted).
    pub remove_cold: ColdMode,
    /// Write the tree as found on disk after file_create (before removal) to this file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_list: Option<std::path::PathBuf>,
}

impl Default for Interleave {
    fn default() -> Self {
        Self {
            dirs: 9890,
            files: 14,
            file_size: 0,
            order: Order::Interleaved,
            remove_cold: ColdMode::Remount,
            tree_list: None,
        }
    }
}

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
            let root_fd = open_dir(&root)?;
            let mut name = NameBuf::new();
            for d in 0..dirs {
                if rec.should_stop() {
                    rec.check()?;
                }
                name.clear().push_str("d").push_num(d, dw);
                let t0 = Instant::now();
                mkdir_at(root_fd.as_raw_fd(), name.as_cstr()).map_err(|e| {
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
                let root_fd = open_dir(&root)?;
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
                        let fd = create_at(root_fd.as_raw_fd(), name.as_cstr())
                            .map_err(|e| fs_error("create", &shown(&name), e))?;
                        let mut left = size;
                        let mut t = t0;
                        while left > 0 {
                            let n = left.min(buf.len() as u64) as usize;
                            write_all(fd, &buf[..n], |w| {
                                t = rec.record(write, t, w as u64);
                            })
                            .map_err(|e| {
                                let _ = close(fd);
                                fs_error("write", &shown(&name), e)
                            })?;
                            left -= n as u64;
                        }
                        close(fd).map_err(|e| fs_error("close", &shown(&name), e))?;
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
            let root_fd = open_dir(&root)?;
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
        if self.dirs == 0 || self.files == 0 {
            return Err(bad_input(format!(
                "--dirs {} --files {}: both must be 1 or more",
                self.dirs, self.files
            )));
        }
        if self.total_files() > 1 << 40 {
            return Err(bad_input(format!(
                "--dirs {} × --files {} is more files than any filesystem holds",
                self.dirs, self.files
            )));
        }
        if self.remove_cold != ColdMode::None && !nix::unistd::geteuid().is_root() {
            return Err(bad_input(format!(
                "--remove-cold {} needs root; run as root or use --remove-cold none",
                self.remove_cold.name()
            )));
        }
        Ok(())
    }

    fn space_needed(&self) -> u64 {
        // A block and an inode (512 bytes, xfs's size) per directory; data in 4 KiB blocks and
        // an inode per file.
        let per_file = self.file_size.div_ceil(4096) * 4096 + 512;
        self.dirs
            .saturating_mul(4096 + 512)
            .saturating_add(self.total_files().saturating_mul(per_file))
    }

    fn memory_needed(&self) -> u64 {
        self.file_size.min(1 << 20) + (2 << 20)
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
        check_inodes(ctx.root(), self.dirs + self.total_files(), "interleave")?;
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
