//! The server's settings, defined once: the flags of `fsgauge devices serve`, what the parent
//! that starts a server passes it ([`ServeArgs::to_argv`]), and what the server runs on.
//! How a disk is served ([`Serving`]: its transport and its store) is a setting of the disk
//! like its profile, given by whoever describes the disk (a testbed's `device_transport` and
//! `device_store`); the server reads no environment for it. The two variables users set for
//! it (`FSGAUGE_DEVICE_TRANSPORT`, `FSGAUGE_DEVICE_STORE`) are a fallback read once where a
//! command describes its disks ([`Serving::from_env`]), and a bad one is refused there (exit
//! 2) before anything is made.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use anyhow::Result;

use super::store::{memory_budget, STORE_ENV};
use crate::base::error::bad_input;
use crate::device::transport::ring::ENABLE_PARAM;
use crate::device::{Profile, ProfileRef};

/// What `fsgauge devices serve` is given.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub disk: DiskArgs,
    /// An empty directory to mount on.
    #[arg(long)]
    pub mount: PathBuf,
}

/// The emulated disk a server serves: all of [`ServeArgs`] but where it is mounted (which
/// the parent makes when it starts the server).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct DiskArgs {
    /// The profile (name or file, with ablations), loaded when parsed.
    #[arg(long)]
    pub profile: ProfileRef,
    /// The profile's fingerprint as the process that starts the server loaded it: a server
    /// that loads another (its file changed since) refuses to serve it.
    #[arg(long)]
    pub profile_hash: Option<String>,
    /// The image holding the bytes; it must lie in a directory only root can change.
    #[arg(long)]
    pub image: PathBuf,
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
    /// Where the disk's bytes live: memory (the default: at most half the machine's memory),
    /// memory:SIZE (at most SIZE), or file (the image on the host disk, for comparisons).
    #[arg(long)]
    pub store: Option<StoreChoice>,
    /// How requests reach the server: auto (the default: FUSE over io_uring where the kernel
    /// offers it, /dev/fuse where not), uring (FUSE over io_uring, turning on the kernel's
    /// enable_uring parameter where it is off) or dev (/dev/fuse).
    #[arg(long)]
    pub transport: Option<TransportChoice>,
    /// Serve the image as the base of a copy-on-write overlay: opened read-only and never
    /// written, every write kept in the memory store, each 1 MiB chunk read from the image
    /// when first touched (a kept aged image, served without a copy).
    #[arg(long)]
    pub overlay: bool,
}

impl DiskArgs {
    /// The settings of a disk of `size` bytes of `profile`, `offset` bytes into the modelled
    /// disk, its bytes in `image`: modelled from the start, served the default way (see
    /// [`DiskArgs::served`]), and the server held to `profile` as loaded now.
    pub fn new(profile: ProfileRef, image: PathBuf, size: u64, offset: u64) -> DiskArgs {
        DiskArgs {
            profile_hash: Some(profile.profile().fingerprint()),
            profile,
            image,
            size,
            offset,
            modelled: true,
            store: None,
            transport: None,
            overlay: false,
        }
    }

    /// These settings, served as `s` says (its transport and store; the defaults where it
    /// names none).
    pub fn served(self, s: Serving) -> DiskArgs {
        DiskArgs {
            transport: s.transport,
            store: s.store,
            ..self
        }
    }

    /// The profile to serve: the one the starting process loaded. The server gets it by its
    /// reference and loads it again in its own process (the same program resolves a name
    /// to the same built-in profile, and the reference is what a result and the ledger
    /// record); a profile file edited in between would make the server model another disk
    /// than the result records, so its fingerprint must be the one the parent saw.
    pub fn checked_profile(&self) -> Result<&Profile> {
        let p = self.profile.profile();
        match &self.profile_hash {
            Some(h) if *h != p.fingerprint() => Err(bad_input(format!(
                "the device profile {} ({}) is not the one this run loaded: its parameters changed since; leave the profile file alone while a run uses it, and run again",
                self.profile,
                p.origin
            ))),
            _ => Ok(p),
        }
    }

    /// The memory budget of the store asked for; None for the file.
    pub fn store_budget(&self) -> Option<u64> {
        match self.store.unwrap_or(StoreChoice::Memory(None)) {
            StoreChoice::Memory(budget) => Some(budget.unwrap_or_else(memory_budget)),
            StoreChoice::File => None,
        }
    }

    /// How the server takes its requests (auto where not given).
    pub fn transport(&self) -> TransportChoice {
        self.transport.unwrap_or(TransportChoice::Auto)
    }
}

impl ServeArgs {
    /// The arguments after `fsgauge devices serve` that give the server these settings
    /// (parsing them gives these settings back).
    pub fn to_argv(&self) -> Vec<OsString> {
        let d = &self.disk;
        let mut argv: Vec<OsString> = vec![
            "--profile".into(),
            d.profile.as_str().into(),
            "--image".into(),
            d.image.clone().into(),
            "--size".into(),
            d.size.to_string().into(),
            "--offset".into(),
            d.offset.to_string().into(),
            "--mount".into(),
            self.mount.clone().into(),
        ];
        if let Some(h) = &d.profile_hash {
            argv.extend(["--profile-hash".into(), h.into()]);
        }
        if !d.modelled {
            argv.push("--model-off".into());
        }
        if let Some(s) = d.store {
            argv.extend(["--store".into(), s.to_string().into()]);
        }
        if let Some(t) = d.transport {
            argv.extend(["--transport".into(), t.to_string().into()]);
        }
        if d.overlay {
            argv.push("--overlay".into());
        }
        argv
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Serving {
    pub transport: Option<TransportChoice>,
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
    use clap::{Args, FromArgMatches};

    /// `devices serve`'s flags alone, parsed as the subcommand parses them.
    fn parse(argv: &[OsString]) -> Result<ServeArgs, clap::Error> {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true));
        ServeArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    fn every_setting() -> ServeArgs {
        ServeArgs {
            disk: DiskArgs {
                profile: "deskstar-7k250:seek=off".parse().expect("a profile"),
                profile_hash: Some("5eed".into()),
                image: "/proc/1/fd/7".into(),
                size: 1 << 30,
                offset: 100 << 30,
                modelled: false,
                store: Some(StoreChoice::Memory(Some(16 << 20))),
                transport: Some(TransportChoice::Uring),
                overlay: true,
            },
            mount: "/var/tmp/fsgauge/.fsgauge-0123".into(),
        }
    }

    #[test]
    fn the_argv_parses_back_to_the_settings() {
        let x = every_setting();
        assert_eq!(parse(&x.to_argv()).expect("parses"), x);
        let mut plain = x.clone();
        plain.disk.modelled = true;
        plain.disk.store = Some(StoreChoice::File);
        plain.disk.transport = Some(TransportChoice::Dev);
        plain.disk.overlay = false;
        assert_eq!(parse(&plain.to_argv()).expect("parses"), plain);
    }

    #[test]
    fn the_argv_gives_every_flag_of_devices_serve() {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let argv = every_setting().to_argv();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let flag = OsString::from(format!("--{long}"));
            assert!(argv.contains(&flag), "--{long} is not in {argv:?}");
        }
    }

    #[test]
    fn a_server_refuses_a_profile_file_changed_since_its_parent_loaded_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("mine.toml");
        let text = crate::device::profile::BUILTIN
            .iter()
            .find(|(n, _)| *n == "deskstar-7k250")
            .expect("built in")
            .1;
        std::fs::write(&file, text).expect("written");
        let reference = file.to_str().expect("a UTF-8 path").parse().expect("loads");
        let serve = ServeArgs {
            disk: DiskArgs::new(reference, "/proc/1/fd/3".into(), 1 << 30, 0),
            mount: "/var/tmp/fsgauge/.fsgauge-0".into(),
        };
        let unchanged = parse(&serve.to_argv()).expect("parses");
        assert_eq!(
            unchanged.disk.checked_profile().expect("the same").name,
            "deskstar-7k250"
        );
        std::fs::write(&file, text.replace("7200", "5400")).expect("edited");
        let changed = parse(&serve.to_argv()).expect("parses");
        let e = changed.disk.checked_profile().expect_err("another disk");
        assert_eq!(crate::base::error::exit_code(&e), 2);
        assert!(
            e.to_string()
                .contains("is not the one this run loaded: its parameters changed"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_store_or_transport_is_refused_naming_what_there_is() {
        let mut x = every_setting();
        x.disk.store = None;
        let mut argv = x.to_argv();
        argv.extend(["--store".into(), "disk".into()]);
        let e = parse(&argv).expect_err("no such store").to_string();
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
