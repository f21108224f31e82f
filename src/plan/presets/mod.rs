//! Built-in presets: one plan per seed study (DESIGN.md, studies 1–5), scaled down to run in
//! minutes on a 2-core machine and grown to the original sizes with `--scale`. Each is a TOML
//! plan embedded in the binary, so `fsgauge presets show NAME` prints exactly what runs and a
//! user can copy and edit it.
//!
//! A preset is runnable only when every workload kind it uses is registered in this build
//! ([`crate::registry`]); the others are listed with the kinds they wait for.

use crate::registry;

/// One built-in plan.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    /// Which seed study it is, one line.
    pub about: &'static str,
    /// The plan.
    pub toml: &'static str,
    /// Minutes a run at the default scale took on the machine class the presets are sized
    /// for (a 2-core VM, loop devices on a virtio disk), measured with `reps = "auto"`.
    pub minutes: f64,
}

/// Every preset, in the order of the seed studies.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "quick",
        about: "what does journaling file data cost ext4? fsynced small files on ext4 data=ordered vs data=journal (xfs, btrfs alongside when installed), about a minute (what `fsgauge run` runs)",
        toml: include_str!("quick.toml"),
        minutes: 0.9,
    },
    Preset {
        name: "lowmem",
        about: "study 1, low-memory create/delete: do delayed allocation and extents cut write and delete times under a memory limit? ext4 data=ordered/writeback x extents x delalloc",
        toml: include_str!("lowmem.toml"),
        minutes: 9.1,
    },
    Preset {
        name: "reservation",
        about: "study 2, block reservation: with concurrent writers, does delayed allocation (reservation's modern form) raise sequential write throughput and keep files contiguous? tio and clients on ext4 with and without delalloc",
        toml: include_str!("reservation.toml"),
        minutes: 5.3,
    },
    Preset {
        name: "fragmentation",
        about: "study 3, fragmentation: do aged files read slower than a fresh copy? round-robin appends to 75% of 6G on ext2, ext4, xfs; read speed and layout of both trees",
        toml: include_str!("fragmentation.toml"),
        minutes: 13.9,
    },
    Preset {
        name: "inode-interleave",
        about: "study 4, inode reservation: does interleaved creation make a cold rm -rf slower than grouped creation? ext4 data modes, ext2, ext3",
        toml: include_str!("inode-interleave.toml"),
        minutes: 5.2,
    },
    Preset {
        name: "journal-size",
        about: "study 5, journal size: does a larger journal speed up deep-tree removal? fdtree's four scenarios with an external RAM journal of 16M to 1G",
        toml: include_str!("journal-size.toml"),
        minutes: 17.2,
    },
    Preset {
        name: "lowmem-as-published",
        about: "study 1 as published: the lowmem questions timed without sync as the study's `time` did, on an emulated Deskstar 7K250-class disk with barrier=0",
        toml: include_str!("lowmem-as-published.toml"),
        minutes: 15.0,
    },
    Preset {
        name: "reservation-as-published",
        about: "study 2 as published: the reservation questions on an emulated Deskstar 7K250-class disk with barrier=0, a fresh filesystem per run",
        toml: include_str!("reservation-as-published.toml"),
        minutes: 15.0,
    },
    Preset {
        name: "fragmentation-as-published",
        about: "study 3 as published: the fragmentation questions on the study's 1G filesystems on an emulated Deskstar 7K250-class disk, 64K round-robin appends",
        toml: include_str!("fragmentation-as-published.toml"),
        minutes: 20.0,
    },
    Preset {
        name: "inode-interleave-as-published",
        about: "study 4 as published: the inode-interleave questions with the study's 9890 x 14 files on an emulated Deskstar 7K250-class disk with barrier=0, rm -rf after a remount",
        toml: include_str!("inode-interleave-as-published.toml"),
        minutes: 20.0,
    },
    Preset {
        name: "journal-size-as-published",
        about: "study 5 as published: the journal-size questions on an emulated Seagate ST3500641AS (the study's disk), fdtree phases timed without a sync as fdtree times them and the writeback as sync phases of their own",
        toml: include_str!("journal-size-as-published.toml"),
        minutes: 15.0,
    },
];

/// Looks a preset up by name.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    /// The workload kinds the preset uses, in order of first use.
    pub fn kinds(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let Ok(table) = self.toml.parse::<toml::Table>() else {
            return out;
        };
        if let Some(toml::Value::Array(ws)) = table.get("workload") {
            for w in ws {
                if let Some(k) = w.get("kind").and_then(|k| k.as_str()) {
                    if !out.iter().any(|o| o == k) {
                        out.push(k.to_string());
                    }
                }
            }
        }
        out
    }

    /// Kinds the preset needs that this build does not have.
    pub fn missing_kinds(&self) -> Vec<String> {
        self.kinds()
            .into_iter()
            .filter(|k| registry::find(k).is_none())
            .collect()
    }

    /// Whether every workload kind of the preset is registered here.
    pub fn runnable(&self) -> bool {
        self.missing_kinds().is_empty()
    }

    /// The source name used in error messages.
    pub fn source(&self) -> String {
        format!("preset {}", self.name)
    }
}

/// Presets that can run in this build.
pub fn runnable() -> Vec<&'static Preset> {
    PRESETS.iter().filter(|p| p.runnable()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_kinds_are_read() {
        let mut names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PRESETS.len());
        assert_eq!(find("lowmem").unwrap().kinds(), vec!["tree"]);
        assert!(find("quick").unwrap().runnable());
        assert!(find("nope").is_none());
    }

    /// Every preset says how long it takes, and fits the 20 minutes a study may take here.
    #[test]
    fn every_preset_has_a_measured_time_within_twenty_minutes() {
        for p in PRESETS {
            assert!(
                p.minutes > 0.0 && p.minutes <= 20.0,
                "{}: {} min",
                p.name,
                p.minutes
            );
        }
    }

    /// The reservation preset lists one tio and one clients entry whose sweeps expand into a
    /// run per cell (threads, clients), each on a fresh filesystem with its own spec hash, as
    /// when every cell is written as an entry of its own (so `--resume` finds either form).
    #[test]
    fn reservation_sweeps_expand_to_one_run_per_cell() {
        let preset = find("reservation").unwrap();
        let head = &preset.toml[..preset.toml.find("[[workload]]").unwrap()];
        let mut listed = head.to_string();
        for threads in [1, 4, 8] {
            listed.push_str(&format!(
                "[[workload]]\nkind = \"tio\"\nthreads = {threads}\nmode = \"seqwrite\"\nblock = \"4K\"\nfile_size = \"768M\"\nfsync = \"end\"\n\n"
            ));
        }
        for clients in [1, 4, 8] {
            listed.push_str(&format!(
                "[[workload]]\nkind = \"clients\"\nclients = {clients}\ntime = \"5s\"\n\n"
            ));
        }
        let opts = crate::plan::ParseOptions {
            scale: None,
            workdir: Some(std::env::temp_dir()),
            ..Default::default()
        };
        let runs = |text: &str| {
            let plan = crate::plan::parse(text, "reservation", &opts).unwrap();
            let mut out: Vec<(String, u32, String)> = crate::plan::matrix(&plan)
                .runs
                .iter()
                .map(|r| {
                    (
                        plan.testbeds[r.testbed].spec.label.clone(),
                        r.rep,
                        r.hash.clone(),
                    )
                })
                .collect();
            out.sort();
            out
        };
        assert_eq!(preset.toml.matches("[[workload]]").count(), 2);
        let (now, before) = (runs(preset.toml), runs(&listed));
        // reps = "auto" starts with 3: 2 testbeds x 6 cells x 3.
        assert_eq!(before.len(), 2 * 6 * 3);
        assert_eq!(now, before);
    }
}
