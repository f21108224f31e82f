//! The server's settings, defined once: the emulated disk as whoever describes it hands it to
//! the device wing ([`DiskSettings`]: what the disk is, how it is served, whether its model
//! applies from the start), and what `fsgauge devices serve` decodes ([`ServeArgs`]: those
//! settings, plus the image the parent holds, the fingerprint of the profile it loaded, and
//! where to mount). The parent side writes them as the server's argv
//! ([`crate::device::emulated`]); the server only reads them back. Whether the modelled disk
//! holds the image is one rule ([`DiskSettings::model`]), asked by the testbed before
//! anything is made and by the server as it builds the model it runs.
//! How a disk is served ([`Serving`]: its transport and its store) is a setting of the disk
//! like its profile, given by whoever describes the disk (a testbed's `device_transport` and
//! `device_store`); the server reads no environment for it. The two variables users set for
//! it (`FSGAUGE_DEVICE_TRANSPORT`, `FSGAUGE_DEVICE_STORE`) are a fallback read once where a
//! command describes its disks ([`Serving::from_env`]), and a bad one is refused there (exit
//! 2) before anything is made.

use std::fmt;
use std::path::PathBuf;

use anyhow::Result;

use super::store::{memory_budget, STORE_ENV};
use crate::base::error::bad_input;
use crate::device::transport::ring::ENABLE_PARAM;
use crate::device::{DeviceModel, Profile, ProfileRef};

/// What `fsgauge devices serve` is given: the disk's settings, and what the parent that
/// starts the server adds to them.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub disk: DiskSettings,
    /// The profile's fingerprint as the process that starts the server loaded it: a server
    /// that loads another (its file changed since) refuses to serve it.
    #[arg(long)]
    pub profile_hash: Option<String>,
    /// The image holding the bytes; it must lie in a directory only root can change.
    #[arg(long)]
    pub image: PathBuf,
    /// An empty directory to mount on.
    #[arg(long)]
    pub mount: PathBuf,
}

/// An emulated disk, the one value its describer (a testbed, `devices check`) hands the
/// device wing: the profile and the image's place on it, how it is served, and whether its
/// model applies from the start. The server decodes the same settings.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct DiskSettings {
    /// The profile (name or file, with ablations), loaded when parsed.
    #[arg(long)]
    pub profile: ProfileRef,
    /// The emulated disk's size in bytes.
    #[arg(long)]
    pub size: u64,
    /// Where the image sits on the modelled disk, bytes.
    #[arg(long)]
    pub offset: u64,
    /// Start with the model off (requests at native speed until `model on` on the control
    /// pipe): set-up at native speed, measured phases modelled.
    #[arg(long = "model-off", action = clap::ArgAction::SetFalse)]
    pub modelled: bool,
    /// Serve the image as the base of a copy-on-write overlay: opened read-only and never
    /// written, every write kept in the memory store, each 1 MiB chunk read from the image
    /// when first touched (a kept aged image, served without a copy).
    #[arg(long)]
    pub overlay: bool,
    #[command(flatten)]
    pub serving: Serving,
}

/// Why a modelled disk cannot serve an image ([`DiskSettings::model`]); each side that asks
/// says it in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// The profile with its ablations makes no model (the model's own words).
    Profile(String),
    /// The image, at its offset, runs past the modelled disk's capacity.
    TooLarge,
}

impl DiskSettings {
    /// A disk of `size` bytes of `profile`, `offset` bytes into the modelled disk: modelled
    /// from the start and served the default way (see [`DiskSettings::served`]).
    pub fn new(profile: ProfileRef, size: u64, offset: u64) -> DiskSettings {
        DiskSettings {
            profile,
            size,
            offset,
            modelled: true,
            overlay: false,
            serving: Serving::default(),
        }
    }

    /// These settings, served as `s` says (its transport and store; the defaults where it
    /// names none).
    pub fn served(self, s: Serving) -> DiskSettings {
        DiskSettings { serving: s, ..self }
    }

    /// The model of this disk, placed at its offset, or why it cannot serve the image: the
    /// one rule that the describer checks before anything is made and the server applies
    /// as it builds the model it runs.
    pub fn model(&self) -> Result<DeviceModel, Misfit> {
        let model = DeviceModel::new(self.profile.profile(), &self.profile.ablations())
            .map_err(Misfit::Profile)?
            .with_offset(self.offset);
        if model.fits(self.size) {
            Ok(model)
        } else {
            Err(Misfit::TooLarge)
        }
    }

    /// The memory budget of the store asked for; None for the file.
    pub fn store_budget(&self) -> Option<u64> {
        match self.serving.store.unwrap_or(StoreChoice::Memory(None)) {
            StoreChoice::Memory(budget) => Some(budget.unwrap_or_else(memory_budget)),
            StoreChoice::File => None,
        }
    }

    /// How the server takes its requests (auto where not given).
    pub fn transport(&self) -> TransportChoice {
        self.serving.transport.unwrap_or(TransportChoice::Auto)
    }
}

impl ServeArgs {
    /// The profile to serve: the one the starting process loaded. The server gets it by its
    /// reference and loads it again in its own process (the same program resolves a name
    /// to the same built-in profile, and the reference is what a result and the ledger
    /// record); a profile file edited in between would make the server model another disk
    /// than the result records, so its fingerprint must be the one the parent saw.
    pub fn checked_profile(&self) -> Result<&Profile> {
        let p = self.disk.profile.profile();
        match &self.profile_hash {
            Some(h) if *h != p.fingerprint() => Err(bad_input(format!(
                "the device profile {} ({}) is not the one this run loaded: its parameters changed since; leave the profile file alone while a run uses it, and run again",
                self.disk.profile,
                p.origin
            ))),
            _ => Ok(p),
        }
    }
}

/// Where a server keeps the disk's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreChoice {
    /// In memory, up to the budget (None: half the machine's memory).
    Memory(Option<u64>),
    /// In the image on the host disk.
    File,
}

impl std::str::FromStr for StoreChoice {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        match v {
            "" | "memory" => Ok(StoreChoice::Memory(None)),
            "file" => Ok(StoreChoice::File),
            _ => match v.strip_prefix("memory:") {
                Some(size) => crate::base::units::parse_size(size)
                    .map(|b| StoreChoice::Memory(Some(b)))
                    .map_err(|e| format!("{v}: {e}")),
                None => Err(format!(
                    "{v} is not a store: give memory, memory:SIZE (e.g. memory:2G) or file"
                )),
            },
        }
    }
}

impl fmt::Display for StoreChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreChoice::Memory(None) => f.write_str("memory"),
            StoreChoice::Memory(Some(b)) => write!(f, "memory:{b}"),
            StoreChoice::File => f.write_str("file"),
        }
    }
}

/// The user's fallback for the transport of the disks a command describes: `auto`, `uring`
/// or `dev` ([`Serving::from_env`]).
pub const TRANSPORT_ENV: &str = "FSGAUGE_DEVICE_TRANSPORT";

/// How a disk is served, beside what it is: its transport and its store (None: the
/// defaults, `auto` and `memory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct Serving {
    /// How requests reach the server: auto (the default: FUSE over io_uring where the kernel
    /// offers it, /dev/fuse where not), uring (FUSE over io_uring, turning on the kernel's
    /// enable_uring parameter where it is off) or dev (/dev/fuse).
    #[arg(long)]
    pub transport: Option<TransportChoice>,
    /// Where the disk's bytes live: memory (the default: at most half the machine's memory),
    /// memory:SIZE (at most SIZE), or file (the image on the host disk, for comparisons).
    #[arg(long)]
    pub store: Option<StoreChoice>,
}

impl Serving {
    /// The user's fallback, [`TRANSPORT_ENV`] and [`STORE_ENV`], read where a command
    /// describes its disks (never by a server), or what is wrong with one (naming it): for
    /// whoever starts a server, to refuse a bad value before anything is made.
    pub fn from_env() -> Result<Serving, String> {
        fn var<T: std::str::FromStr<Err = String>>(name: &str) -> Result<Option<T>, String> {
            match std::env::var(name) {
                Ok(v) => v.parse().map(Some).map_err(|e| format!("{name}={e}")),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(v)) => Err(format!("{name}={v:?} is not text")),
            }
        }
        Ok(Serving {
            transport: var(TRANSPORT_ENV)?,
            store: var(STORE_ENV)?,
        })
    }

    /// These settings, with those they lack taken from `fallback`.
    pub fn or(self, fallback: Serving) -> Serving {
        Serving {
            transport: self.transport.or(fallback.transport),
            store: self.store.or(fallback.store),
        }
    }
}

/// How a server takes its requests (the transports themselves: [`crate::device::transport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// FUSE over io_uring where the kernel has it (the module parameter `enable_uring`
    /// turned on first where it is off, as root), /dev/fuse where not
    /// ([`crate::device::transport::ring::taken::wanted`]).
    Auto,
    /// As [`TransportChoice::Auto`], but saying so where the kernel has no such parameter.
    Uring,
    /// The FUSE threads reading /dev/fuse: a `read(2)` and a `writev(2)` per request.
    Dev,
}

impl std::str::FromStr for TransportChoice {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        match v {
            "" | "auto" => Ok(TransportChoice::Auto),
            "dev" => Ok(TransportChoice::Dev),
            "uring" => Ok(TransportChoice::Uring),
            _ => Err(format!(
                "{v:?}: give auto (FUSE over io_uring where the kernel has it, turning on {}), uring (the same, saying so where the kernel has none) or dev (/dev/fuse)",
                ENABLE_PARAM
            )),
        }
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Dev => "dev",
            TransportChoice::Uring => "uring",
        })
    }
}

/// Written in a plan (and a testbed's description) as its flag takes it: `"dev"`,
/// `"memory:2G"`.
macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_as_text!(TransportChoice);
serde_as_text!(StoreChoice);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args;

    #[test]
    fn a_bad_store_or_transport_is_refused_naming_what_there_is() {
        let e = "disk".parse::<StoreChoice>().expect_err("no such store");
        assert!(
            e.contains("disk is not a store: give memory, memory:SIZE"),
            "{e}"
        );
        let e = "memory:lots".parse::<StoreChoice>().expect_err("no size");
        assert!(e.starts_with("memory:lots: "), "{e}");
        let e = "rdma"
            .parse::<TransportChoice>()
            .expect_err("no such transport");
        assert!(e.contains("\"rdma\": give auto"), "{e}");
        assert_eq!("memory:2M".parse(), Ok(StoreChoice::Memory(Some(2 << 20))));
    }

    /// The one rule of whether a disk serves an image: the profile with its ablations makes a
    /// model, and the image at its offset ends within the modelled disk (`ram` holds any).
    #[test]
    fn a_disk_holds_the_image_only_within_its_capacity() {
        let disk = |p: &str, size: u64, offset: u64| {
            DiskSettings::new(p.parse().expect("a profile"), size, offset)
        };
        let cap = disk("st3500641as", 0, 0).profile.profile().capacity_bytes;
        assert!(disk("st3500641as", cap, 0).model().is_ok());
        assert_eq!(
            disk("st3500641as", cap - (1 << 30), 1 << 30)
                .model()
                .map(|_| ()),
            Ok(())
        );
        assert_eq!(
            disk("st3500641as", cap, 1).model().map(|_| ()),
            Err(Misfit::TooLarge)
        );
        assert!(disk("ram", u64::MAX / 2, u64::MAX / 2).model().is_ok());
    }

    #[test]
    fn a_server_reads_no_environment_for_how_it_serves() {
        // The variables are the command line's fallback (Serving::from_env), not the server's:
        // a server started without --transport or --store serves the default way, whatever
        // its environment says. (Its flags' help has no [env: ...]; a set variable would show
        // there.)
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        for arg in cmd.get_arguments() {
            assert!(
                arg.get_env().is_none(),
                "--{:?} reads the environment",
                arg.get_long()
            );
        }
    }

    #[test]
    fn serving_written_as_text_reads_back() {
        let s: StoreChoice = serde_json::from_str("\"memory:2M\"").expect("a store");
        assert_eq!(s, StoreChoice::Memory(Some(2 << 20)));
        let t: TransportChoice = serde_json::from_str("\"dev\"").expect("a transport");
        assert_eq!(serde_json::to_string(&t).expect("writes"), "\"dev\"");
        let e = serde_json::from_str::<TransportChoice>("\"rdma\"").expect_err("no such");
        assert!(e.to_string().contains("give auto"), "{e}");
        let fallback = Serving {
            transport: Some(TransportChoice::Uring),
            store: Some(StoreChoice::File),
        };
        let mine = Serving {
            transport: Some(TransportChoice::Dev),
            store: None,
        };
        assert_eq!(
            mine.or(fallback),
            Serving {
                transport: Some(TransportChoice::Dev),
                store: Some(StoreChoice::File)
            }
        );
    }
}
