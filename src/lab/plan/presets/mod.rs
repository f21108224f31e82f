//! Built-in presets: one plan per seed study (ARCHITECTURE.md, "Seed studies"; docs/, studies 1–5), scaled down to run in
//! minutes on a 2-core machine and grown to the original sizes with `--scale`. Each is a TOML
//! plan embedded in the binary; an as-published preset `extends` its seed preset and states
//! only what it changes, and `fsgauge presets show NAME` prints any preset whole (resolved,
//! [`Preset::plan_text`]): exactly what runs, for a user to copy and edit.
//!
//! A preset is runnable only when every workload kind it uses is registered in this build
//! ([`crate::workload::registry`]); the others are listed with the kinds they wait for.

use crate::workload::registry;

#[cfg(test)]
mod expanded;

/// One built-in plan.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    /// Which seed study it is, one line.
    pub about: &'static str,
    /// The plan as written: it may extend another preset ([`Preset::plan_text`] is it whole).
    pub toml: &'static str,
    /// Minutes a run at the default scale took on the machine class the presets are sized
    /// for (a 2-core VM, loop devices on a virtio disk), measured with `reps = "auto"`; for an
    /// as-published preset not yet run in full here, estimated from measured runs of its
    /// workloads on its emulated disk (its header's "Expected time" says which).
    pub minutes: f64,
}

/// The preset NAME, its plan the file `NAME.toml` beside this module.
macro_rules! preset {
    ($name:literal, $minutes:literal, $about:literal) => {
        Preset {
            name: $name,
            about: $about,
            toml: include_str!(concat!($name, ".toml")),
            minutes: $minutes,
        }
    };
}

/// Every preset, in the order of the seed studies.
pub const PRESETS: &[Preset] = &[
    preset!("quick", 0.9, "what does journaling file data cost ext4? fsynced small files on ext4 data=ordered vs data=journal (xfs, btrfs alongside when installed), about a minute (what `fsgauge run` runs)"),
    preset!("lowmem", 9.1, "study 1, low-memory create/delete: do delayed allocation and extents cut write and delete times under a memory limit? ext4 data=ordered/writeback x extents x delalloc"),
    preset!("reservation", 5.3, "study 2, block reservation: with concurrent writers, does delayed allocation (reservation's modern form) raise sequential write throughput and keep files contiguous? tio and clients on ext4 with and without delalloc"),
    preset!("fragmentation", 13.9, "study 3, fragmentation: do aged files read slower than a fresh copy? round-robin appends to 75% of 6G on ext2, ext4, xfs; read speed and layout of both trees"),
    preset!("inode-interleave", 5.2, "study 4, inode reservation: does interleaved creation make a cold rm -rf slower than grouped creation? ext4 data modes, ext2, ext3"),
    preset!("journal-size", 17.2, "study 5, journal size: does a larger journal speed up deep-tree removal? fdtree's four scenarios with an external RAM journal of 16M to 1G"),
    preset!("lowmem-as-published", 14.0, "study 1 as published: the lowmem questions timed without sync as the study's `time` did, on an emulated Deskstar 7K250-class disk with barrier=0"),
    preset!("reservation-as-published", 10.0, "study 2 as published: the reservation questions on an emulated Deskstar 7K250-class disk with barrier=0, a fresh filesystem per run"),
    preset!("fragmentation-as-published", 20.0, "study 3 as published: the fragmentation questions on an emulated Deskstar 7K250-class disk, 4K round-robin appends (the study's smallest) to 75% of 320M filesystems"),
    preset!("inode-interleave-as-published", 17.0, "study 4 as published: the inode-interleave questions, 2000 x 14 files (the study: 9890) on an emulated Deskstar 7K250-class disk with barrier=0, rm -rf after a remount"),
    preset!("journal-size-as-published", 3.0, "study 5 as published: the journal-size questions on an emulated Seagate ST3500641AS (the study's disk), fdtree's deep tree of 4K files with its phases back to back without a sync, as fdtree runs them"),
];

/// The suffix of a seed preset's as-published form: the seed's disk (emulated), its method,
/// its filesystem size and its mount options where they can be had (see each one's header).
pub const AS_PUBLISHED: &str = "-as-published";

/// Looks a preset up by name.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    /// The whole plan, to copy, run and edit: the preset's file, or, when it extends another
    /// preset, that one with its changes merged in, under its own opening comments.
    pub fn plan_text(&self) -> anyhow::Result<String> {
        crate::lab::plan::resolved_text(self.toml, &self.source())
    }

    /// The workload kinds the preset uses, in order of first use.
    pub fn kinds(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let Ok(table) = self.plan_text().map(|t| t.parse::<toml::Table>()) else {
            return out;
        };
        let Ok(table) = table else {
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

/// The preset `name` as a plan that extends it finds it: its name in messages and its text;
/// else the presets there are.
pub(crate) fn lookup(name: &str) -> Result<(String, String), String> {
    find(name)
        .map(|p| (p.source(), p.toml.to_string()))
        .ok_or_else(|| {
            PRESETS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        })
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

    fn parse_with(p: &Preset, device_model: Option<&str>) -> crate::lab::plan::Plan {
        let opts = crate::lab::plan::ParseOptions {
            workdir: Some(std::env::temp_dir()),
            device_model: device_model.map(|d| d.parse().unwrap()),
            ..Default::default()
        };
        crate::lab::plan::parse(p.toml, &p.source(), &opts).unwrap()
    }

    /// Every seed preset has an as-published form, which asks the base preset's questions
    /// (with their published figures) on a device model that loads, with fdtree's phases run
    /// as a run of fdtree has them.
    #[test]
    fn every_seed_preset_has_an_as_published_form_on_a_disk_that_loads() {
        let seeds = [
            "lowmem",
            "reservation",
            "fragmentation",
            "inode-interleave",
            "journal-size",
        ];
        let published: Vec<&Preset> = PRESETS
            .iter()
            .filter(|p| p.name.ends_with(AS_PUBLISHED))
            .collect();
        assert_eq!(published.len(), seeds.len());
        for seed in seeds {
            let base = find(seed).unwrap();
            let p = find(&format!("{seed}{AS_PUBLISHED}")).unwrap();
            assert!(p.runnable(), "{}", p.name);
            let (plan, base_plan) = (parse_with(p, None), parse_with(base, None));
            assert_eq!(plan.name, p.name);
            // The same questions, each read from the as-published form's own workloads (its
            // trees may be the study's where the base preset has its own).
            let questions = |pl: &crate::lab::plan::Plan| -> Vec<crate::results::Question> {
                pl.questions
                    .iter()
                    .map(|q| crate::results::Question {
                        workload: None,
                        ..q.question.clone()
                    })
                    .collect()
            };
            assert_eq!(questions(&plan), questions(&base_plan), "{}", p.name);
            for t in &plan.testbeds {
                let m = t.spec.device_model.as_ref().unwrap_or_else(|| {
                    panic!("{}: testbed {} has no device_model", p.name, t.spec.label)
                });
                let profile = m.profile.profile();
                let disk = if seed == "journal-size" {
                    "st3500641as"
                } else {
                    "deskstar-7k250"
                };
                assert_eq!(profile.name, disk, "{} {}", p.name, t.spec.label);
                // Study 5's journal was on RAM: only the main device is modelled.
                assert!(t.spec.journal_device_model.is_none());
                assert!(!t.spec.mount_opts.contains("nobarrier"), "{}", p.name);
                if t.spec.fs.is_ext() && seed != "journal-size" && t.spec.fs.name() != "ext2" {
                    assert!(t.spec.mount_opts.contains("barrier=0"), "{}", p.name);
                }
            }
            // fdtree's phases back to back without a sync, as a run of fdtree has them.
            for w in plan.workloads.iter().filter(|w| w.kind == "fdtree") {
                assert_eq!(w.workload.params()["fsync"], "last", "{}", p.name);
            }
            assert!(p.toml.starts_with("# Seed study"), "{}: a header", p.name);
            // It states only what it changes of its seed preset.
            assert!(
                p.toml.contains(&format!("\nextends = \"{seed}\"\n")),
                "{}",
                p.name
            );
            assert!(p.toml.contains("Departures, and why:"), "{}", p.name);
            assert!(p.toml.contains("Expected time:"), "{}", p.name);
        }
    }

    /// `--device-model` (ParseOptions::device_model) puts every testbed of a preset on that
    /// disk, keeping each one's offset; a disk the filesystem does not fit on at its offset is
    /// refused, naming the flag.
    #[test]
    fn device_model_overrides_every_testbed() {
        for name in ["journal-size", "lowmem-as-published"] {
            let p = find(name).unwrap();
            let plan = parse_with(p, Some("ram:constant=1ms"));
            assert!(!plan.testbeds.is_empty());
            for t in &plan.testbeds {
                let m = t.spec.device_model.as_ref().unwrap();
                assert_eq!(m.profile.as_str(), "ram:constant=1ms", "{name}");
                assert_eq!(m.offset, 0);
                assert!(t.spec.describe().ends_with(" disk=ram:constant=1ms"));
            }
        }
        let text = "name = \"x\"\n[[testbed]]\nfs = \"ext4\"\nfs_size = \"1G\"\ndevice_model = \"st3500641as\"\ndevice_offset = \"300G\"\n[[workload]]\nkind = \"tree\"\nfiles = 1\nfile_size = \"4K\"\n";
        let opts = |d: &str| crate::lab::plan::ParseOptions {
            workdir: Some(std::env::temp_dir()),
            device_model: Some(d.parse().unwrap()),
            ..Default::default()
        };
        // 300G into a 500 GB disk fits; into a 250 GB one it does not.
        let plan = crate::lab::plan::parse(text, "x.toml", &opts("st3500641as:seek=off")).unwrap();
        let m = plan.testbeds[0].spec.device_model.clone().unwrap();
        assert_eq!(
            (m.profile.as_str(), m.offset),
            ("st3500641as:seek=off", 300 << 30)
        );
        let e = crate::lab::plan::parse(text, "x.toml", &opts("deskstar-7k250")).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("does not fit on deskstar-7k250") && e.contains("device_offset"),
            "{e}"
        );
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
        let opts = crate::lab::plan::ParseOptions {
            scale: None,
            workdir: Some(std::env::temp_dir()),
            ..Default::default()
        };
        let runs = |text: &str| {
            let plan = crate::lab::plan::parse(text, "reservation", &opts).unwrap();
            let mut out: Vec<(String, u32, String)> = crate::lab::plan::matrix(&plan)
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

    /// The `[[testbed]]` setting lines (labels aside) of `toml` that appear in two or more of
    /// its testbeds: what its `[testbed_defaults]` could say once.
    fn restated(toml: &str) -> usize {
        let mut testbeds: Vec<Vec<&str>> = Vec::new();
        let mut inside = false;
        for line in toml.lines().map(str::trim) {
            if line.starts_with('[') {
                inside = line == "[[testbed]]";
                if inside {
                    testbeds.push(Vec::new());
                }
            } else if let Some(t) = testbeds.last_mut().filter(|_| inside) {
                let key = line.split('=').next().unwrap_or_default().trim();
                if line.contains('=') && !line.starts_with('#') && key != "label" {
                    t.push(line);
                }
            }
        }
        let in_how_many = |line: &str| testbeds.iter().filter(|t| t.contains(&line)).count();
        testbeds
            .iter()
            .flatten()
            .filter(|l| in_how_many(l) >= 2)
            .count()
    }

    /// Presets say a setting their testbeds share once, in `[testbed_defaults]`: at most 19 of
    /// their testbeds' setting lines are restated across the testbeds of one file (119 were).
    #[test]
    fn presets_state_shared_testbed_settings_once() {
        let two = "[[testbed]]\nlabel = \"a\"\nfs = \"ext4\"\n\n[[testbed]]\nlabel = \"b\"\nfs = \"ext4\" \n";
        assert_eq!(
            restated(two),
            1 + 1 - 1 + 1,
            "a line in two testbeds counts twice"
        );
        let per_file: Vec<(&str, usize)> =
            PRESETS.iter().map(|p| (p.name, restated(p.toml))).collect();
        let total: usize = per_file.iter().map(|(_, n)| n).sum();
        assert!(total < 20, "{total} restated testbed lines: {per_file:?}");
    }
}
