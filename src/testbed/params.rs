//! The settings of a testbed, declared once. [`TestbedParams`] derives both `clap::Args` (the
//! testbed flags of `bench`, `testbed create`, `age`, `exercise` and `study append`, its doc
//! comments their `--help` text) and serde (a plan's `[[testbed]]` table). Its defaults are
//! written once, in the `#[arg(default_value…)]` attributes, and serde fills absent plan keys
//! from them, as the workload parameter structs do (`workload::params`).
//!
//! A plan key is its flag's name with `_` for `-` (`--fs-size` is `fs_size`); the keys plans
//! used before (`size`, `mkfs`, `mount`) are kept as aliases. What says *which* testbed
//! (`--fs`, `--label`, `--device`, `--dir`) and what only a plan has (`optional`, a testbed's
//! own `mem_limit`) is not here: those are read next to these settings.
//!
//! `run` takes `--workdir` and `--device-model` for every testbed of its plan: it takes them
//! from this declaration ([`crate::cli::common::declared`]), not from one of its own. They stay
//! fields of [`TestbedParams`] rather than one-flag types like `--seed`, because clap puts in a
//! struct's group ([`GROUP`], which `--dir` refuses) only the flags it declares itself.

use std::path::PathBuf;

use clap::{Args, Command, FromArgMatches};
use serde::{Deserialize, Serialize};

use super::device::server::{Serving, StoreChoice, TransportChoice, TRANSPORT_ENV};
use super::device::{ModelDuring, ProfileRef};
use super::spec::{Backing, FsKind, ImageAlloc, ImageStart, JournalSpec, ModelSpec, TestbedInput};
use crate::base::error::bad_param;
use crate::base::units::Size;

/// Every setting of how a testbed is built, with its default and help text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Testbed (where it runs)")]
pub struct TestbedParams {
    /// Size of the filesystem (image size), e.g. 2G.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "2G",
        allow_hyphen_values = true
    )]
    #[serde(alias = "size")]
    pub fs_size: Size,
    /// Extra mkfs arguments, e.g. "-O ^extent -I 256".
    #[arg(
        long,
        value_name = "OPTS",
        allow_hyphen_values = true,
        default_value = ""
    )]
    #[serde(alias = "mkfs")]
    pub mkfs_opts: String,
    /// Mount options, e.g. "data=writeback,nodelalloc".
    #[arg(long, value_name = "OPTS", default_value = "")]
    #[serde(alias = "mount")]
    pub mount_opts: String,
    /// External journal (ext3/ext4 journal device, xfs log device): ram:SIZE on a RAM disk or
    /// file:SIZE on an image file, e.g. ram:64M. At least 1024 filesystem blocks for ext3/ext4
    /// (4M with the default 4K blocks, 1M with -b 1024), 64M for xfs; btrfs has none.
    #[arg(long, value_name = "ram:SIZE|file:SIZE")]
    #[serde(with = "journal_text", skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalSpec>,
    /// Put the image in a file on disk or on a RAM disk (tmpfs).
    #[arg(long, value_name = "file|ram", default_value = "file")]
    pub backing: Backing,
    /// How the image file's blocks are allocated on the host: full (all of them before mkfs,
    /// so the host's allocator never runs in a measured phase) or sparse (only what mkfs and
    /// the workload write). Sparse lets a filesystem have a whole drive's size, e.g. --fs-size
    /// 465G with --device-model st3500641as, on a host with far less free space; the room it
    /// needs is then estimated from the workload. On a plain loop device what mkfs zeroes
    /// (ext4's inode tables, 1/64 of the size) is allocated too; an emulated disk punches it
    /// out, and its server's lateness shows what the host's allocation cost.
    #[arg(long, value_name = "full|sparse", default_value = "full")]
    pub image_alloc: ImageAlloc,
    /// Directory for images and mount points [default: /var/tmp/fsgauge, /dev/shm/fsgauge for
    /// ram]. `run` takes it for every testbed of the plan, over each [[testbed]]'s workdir.
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// Direct I/O from the loop device to its image, so the host's page cache stays out of the
    /// figures.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    #[serde(deserialize_with = "de_on_off")]
    pub loop_direct_io: bool,
    /// Serve the image through an emulated disk that completes each block request when this
    /// device profile says the drive would: a built-in profile (`fsgauge devices list`, e.g. a
    /// seed study's drive, deskstar-7k250 or st3500641as) or a profile file, with ablations
    /// after a colon, e.g. deskstar-7k250:seek=off,cache=off. Image testbeds only. The image
    /// keeps the bytes; the modelled disk may be larger (see --device-offset). Every result
    /// records the disk (testbed.device_model). `run` takes it for every testbed of the plan,
    /// over each [[testbed]]'s device_model (its device_offset and device_model_during stay);
    /// --dry-run shows it per testbed (disk=...), and without --out the results go to
    /// fsgauge-results-PROFILE, apart from runs on other disks.
    #[arg(long, value_name = "PROFILE[:ABLATIONS]")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model: Option<ProfileRef>,
    /// Where the filesystem starts on the emulated disk (--device-model, required with it),
    /// e.g. 0 for the outer zone or 400G near the inner end of a 500 GB drive: its place sets
    /// the zone's transfer rate and the seek distances [default: 0].
    #[arg(long, value_name = "SIZE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_offset: Option<Size>,
    /// When the device model (--device-model, required with it) applies: phases (the measured
    /// run; mkfs, aging and the other set-up run at native speed) or always (set-up too, as on
    /// the real disk) [default: phases].
    #[arg(long, value_name = "phases|always")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model_during: Option<ModelDuring>,
    /// Serve the external journal (--journal) through an emulated disk of this profile too,
    /// e.g. ram to see its requests, or a second drive's profile.
    #[arg(long, value_name = "PROFILE[:ABLATIONS]")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_device_model: Option<ProfileRef>,
    /// How a run whose aging is kept in the image cache (--keep-image, [age] keep_image)
    /// starts from the kept image: copy (its own copy of the image, under a loop device or the
    /// emulated disk; a plain loop device measures exactly as a fresh one) or overlay (served
    /// by the device server as a copy-on-write overlay over the kept image, which is never
    /// written: no copy, so a start costs about a tenth; on a plain testbed the server has the
    /// `ram` profile, and every request then costs what a `ram` disk costs, the server's own
    /// time, recorded in the result's testbed.device_model; testbed.aged_image.from says
    /// image-overlay). Not with --device or --journal, and `overlay` only with --keep-image
    /// [default: copy, overlay with --device-model].
    #[arg(long, value_name = "copy|overlay")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_start: Option<ImageStart>,
    /// How the block requests of the testbed's emulated disks (--device-model,
    /// --journal-device-model, --image-start overlay) reach their server: auto (FUSE over
    /// io_uring where the kernel has it, turning on its enable_uring parameter as root;
    /// /dev/fuse where not), uring (the same, saying so where the kernel has none) or dev
    /// (/dev/fuse, about twice the server's CPU per request; the only way to the crash file,
    /// so --crash-points chooses it) [default: FSGAUGE_DEVICE_TRANSPORT, else auto].
    #[arg(long, value_name = "auto|uring|dev")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_transport: Option<TransportChoice>,
    /// Where the testbed's emulated disks keep their bytes: memory (at most half the
    /// machine's memory), memory:SIZE (at most SIZE; a write past it fails, naming the store)
    /// or file (the image on the host disk, for comparisons) [default: FSGAUGE_DEVICE_STORE,
    /// else memory].
    #[arg(long, value_name = "memory[:SIZE]|file")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_store: Option<StoreChoice>,
}

impl Default for TestbedParams {
    /// The command line's defaults: what a testbed gets when no flag (no plan key) is given.
    fn default() -> Self {
        let cmd = Self::augment_args(Command::new("defaults").no_binary_name(true));
        let m = cmd
            .try_get_matches_from(std::iter::empty::<String>())
            .expect("every testbed setting has a default or is optional");
        Self::from_arg_matches(&m).expect("the defaults are values of their own types")
    }
}

/// The plan key of a field named by a [`crate::base::error::bad_param`] of [`super::TestbedSpec`]
/// (`size`, `mkfs`, ...): the keys a plan may write it under, the flag's name first.
pub fn plan_keys(field: &str) -> &'static [&'static str] {
    match field {
        "size" | "fs_size" => &["fs_size", "size"],
        "mkfs" | "mkfs_opts" => &["mkfs_opts", "mkfs"],
        "mount" | "mount_opts" => &["mount_opts", "mount"],
        "journal" => &["journal"],
        "backing" => &["backing"],
        "image_alloc" => &["image_alloc"],
        "workdir" => &["workdir"],
        "loop_direct_io" => &["loop_direct_io"],
        "device_model" => &["device_model"],
        "device_offset" => &["device_offset"],
        "device_model_during" => &["device_model_during"],
        "journal_device_model" => &["journal_device_model"],
        "image_start" => &["image_start"],
        "device_transport" => &["device_transport"],
        "device_store" => &["device_store"],
        _ => &[],
    }
}

/// The clap id of the filesystem size (`--device` conflicts with it).
pub const SIZE_ID: &str = "fs_size";
/// The clap group of every testbed flag (clap names a flattened struct's group after it):
/// `--dir` conflicts with it, so a new setting is refused with `--dir` too.
pub const GROUP: &str = "TestbedParams";
/// The plan key (and flag) of the filesystem size, for messages that tell how to change it.
pub const SIZE_KEY: &str = "fs_size";
/// The flag of the filesystem size, for messages that tell how to change it.
pub const SIZE_FLAG: &str = "--fs-size";

impl TestbedParams {
    /// What [`super::TestbedSpec::build`] takes, with what says which testbed: the kind, its
    /// label and a block device to format instead of an image. Settings of the emulated disk
    /// given without one are refused ([`Self::model`]).
    pub fn input(
        &self,
        fs: FsKind,
        label: Option<String>,
        device: Option<PathBuf>,
    ) -> anyhow::Result<TestbedInput> {
        Ok(TestbedInput {
            fs,
            size: self.fs_size.bytes(),
            mkfs: self.mkfs_opts.clone(),
            mount: self.mount_opts.clone(),
            journal: self.journal,
            backing: self.backing,
            image_alloc: self.image_alloc,
            workdir: self.workdir.clone(),
            loop_direct_io: self.loop_direct_io,
            device_model: self.model()?,
            journal_device_model: self.journal_device_model.clone(),
            image_start: self.image_start,
            serving: self.serving()?,
            device,
            label,
        })
    }

    /// How the testbed's emulated disks are served: as given, the rest from the user's
    /// fallback in the environment ([`Serving::from_env`], read here where the testbed is
    /// described, and only for a testbed that has an emulated disk: a bad value is refused
    /// before anything is made).
    fn serving(&self) -> anyhow::Result<Serving> {
        let mine = Serving {
            transport: self.device_transport,
            store: self.device_store,
        };
        let served = self.device_model.is_some()
            || self.journal_device_model.is_some()
            || self.image_start == Some(ImageStart::Overlay);
        if !served {
            return Ok(mine);
        }
        let env = Serving::from_env().map_err(|e| {
            let field = if e.starts_with(TRANSPORT_ENV) {
                "device_transport"
            } else {
                "device_store"
            };
            bad_param(
                field,
                format!("{e} (the emulated disk's server takes it from the environment where the testbed does not say; give --{} instead)", field.replace('_', "-")),
            )
        })?;
        Ok(mine.or(env))
    }

    /// The emulated disk, its place on it and when it applies. `--device-offset` and
    /// `--device-model-during` (plan keys `device_offset`, `device_model_during`) say these of
    /// a `--device-model`: without one they would do nothing, and are refused (bad input at
    /// their plan key), the flag and the plan key alike.
    fn model(&self) -> anyhow::Result<Option<ModelSpec>> {
        let Some(profile) = self.device_model.clone() else {
            if let Some(o) = self.device_offset {
                return Err(bad_param(
                    "device_offset",
                    format!(
                        "--device-offset {o} places the filesystem on an emulated disk, but there is none: add --device-model PROFILE (in a plan, device_model = \"PROFILE\", e.g. \"st3500641as\"), or leave --device-offset out"
                    ),
                ));
            }
            if let Some(d) = self.device_model_during {
                return Err(bad_param(
                    "device_model_during",
                    format!(
                        "--device-model-during {d} says when the emulated disk of --device-model applies, but there is none (it does not apply to --journal-device-model alone): add --device-model PROFILE (in a plan, device_model = \"PROFILE\"), or leave --device-model-during out"
                    ),
                ));
            }
            return Ok(None);
        };
        Ok(Some(ModelSpec {
            profile,
            offset: self.device_offset.map_or(0, Size::bytes),
            during: self.device_model_during.unwrap_or_default(),
        }))
    }
}

/// `--loop-direct-io on|off`.
fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{s:?} is not on or off")),
    }
}

/// A switch in a plan: `true`/`false`, or the flag's `"on"`/`"off"`.
fn de_on_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        B(bool),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::B(b) => Ok(b),
        Raw::S(s) => on_off(&s).map_err(serde::de::Error::custom),
    }
}

/// A journal in a plan is written as the flag takes it: `"ram:64M"`.
mod journal_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::testbed::spec::JournalSpec;

    pub fn serialize<S: Serializer>(j: &Option<JournalSpec>, s: S) -> Result<S::Ok, S::Error> {
        match j {
            Some(j) => s.serialize_str(&j.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<JournalSpec>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(t) => t.parse().map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_flags_defaults() {
        let d = TestbedParams::default();
        assert_eq!(d.fs_size.bytes(), 2 << 30);
        assert!(d.loop_direct_io);
        assert_eq!(d.backing, Backing::File);
        let from_empty: TestbedParams = toml::from_str("").expect("an empty table");
        assert_eq!(from_empty, d);
    }

    #[test]
    fn old_plan_keys_are_aliases() {
        let old: TestbedParams =
            toml::from_str("size = \"1G\"\nmkfs = \"-N 9\"\nmount = \"noatime\"").expect("old");
        let new: TestbedParams =
            toml::from_str("fs_size = \"1G\"\nmkfs_opts = \"-N 9\"\nmount_opts = \"noatime\"")
                .expect("new");
        assert_eq!(old, new);
        assert_eq!(new.fs_size.bytes(), 1 << 30);
    }

    #[test]
    fn a_disk_s_transport_and_store_are_its_settings_from_the_plan() {
        let p: TestbedParams = toml::from_str(
            "device_model = \"ram\"\ndevice_transport = \"dev\"\ndevice_store = \"memory:16M\"",
        )
        .expect("reads");
        let i = p.input(FsKind::Ext4, None, None).expect("an input");
        assert_eq!(i.serving.transport, Some(TransportChoice::Dev));
        assert_eq!(i.serving.store, Some(StoreChoice::Memory(Some(16 << 20))));
        let back: TestbedParams =
            toml::from_str(&toml::to_string(&p).expect("writes")).expect("reads back");
        assert_eq!(back, p);
        let e = toml::from_str::<TestbedParams>("device_transport = \"rdma\"")
            .expect_err("no such transport")
            .to_string();
        assert!(e.contains("\"rdma\": give auto"), "{e}");
        assert_eq!(plan_keys("device_transport"), ["device_transport"]);
        assert_eq!(plan_keys("device_store"), ["device_store"]);
        // Without an emulated disk they serve nothing, and the environment is not read.
        let plain = TestbedParams::default().input(FsKind::Ext4, None, None);
        assert_eq!(plain.expect("an input").serving, Serving::default());
    }

    #[test]
    fn a_written_plan_table_reads_back() {
        let p: TestbedParams =
            toml::from_str("journal = \"ram:64M\"\nloop_direct_io = \"off\"").expect("reads");
        let back: TestbedParams =
            toml::from_str(&toml::to_string(&p).expect("writes")).expect("reads back");
        assert_eq!(p, back);
        assert!(!back.loop_direct_io);
    }
}
