//! The server's settings, defined once: the flags of `fsgauge devices serve`, what the parent
//! that starts a server passes it ([`ServeArgs::to_argv`]), and what the server runs on. The
//! two settings users choose through the environment (`FSGAUGE_DEVICE_STORE`,
//! `FSGAUGE_DEVICE_TRANSPORT`) are flags read from it when not given, so a server started by a
//! run takes them from the run's environment, as before, and a bad one is refused at parsing
//! (exit 2) before anything is served.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use anyhow::Result;

use super::store::{memory_budget, STORE_ENV};
use crate::base::error::bad_input;
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
    #[arg(long, env = STORE_ENV)]
    pub store: Option<StoreChoice>,
    /// How requests reach the server: auto (the default: FUSE over io_uring where the kernel
    /// offers it, /dev/fuse where not), uring (FUSE over io_uring, turning on the kernel's
    /// enable_uring parameter where it is off) or dev (/dev/fuse).
    #[arg(long, env = TRANSPORT_ENV)]
    pub transport: Option<Transport>,
    /// Serve the image as the base of a copy-on-write overlay: opened read-only and never
    /// written, every write kept in the memory store, each 1 MiB chunk read from the image
    /// when first touched (a kept aged image, served without a copy).
    #[arg(long)]
    pub overlay: bool,
}

impl DiskArgs {
    /// The settings of a disk of `size` bytes of `profile`, `offset` bytes into the modelled
    /// disk, its bytes in `image`: modelled from the start, store and transport as the
    /// server's environment says, and the server held to `profile` as loaded now.
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
    pub fn transport(&self) -> Transport {
        self.transport.unwrap_or(Transport::Auto)
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
                    .map_err(|e| format!("{STORE_ENV}={v}: {e}")),
                None => Err(format!(
                    "{STORE_ENV}={v} is not a store: give memory, memory:SIZE (e.g. memory:2G) or file"
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

/// Which transport the server uses: `auto`, `uring` or `dev`.
pub const TRANSPORT_ENV: &str = "FSGAUGE_DEVICE_TRANSPORT";

/// The transport [`TRANSPORT_ENV`] asks for (None: not set), or what is wrong with it: for
/// whoever starts a server, to refuse a bad value before anything is made.
pub fn transport_from_env() -> Result<Option<Transport>, String> {
    match std::env::var(TRANSPORT_ENV) {
        Ok(v) => v.parse().map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(format!("{TRANSPORT_ENV}={v:?}: give auto, uring or dev"))
        }
    }
}

/// The module parameter that lets the kernel offer FUSE over io_uring.
pub const ENABLE_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// How a server takes its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// FUSE over io_uring where the kernel has it (the module parameter `enable_uring`
    /// turned on first where it is off, as root), /dev/fuse where not
    /// ([`super::ring::wanted`]).
    Auto,
    /// As [`Transport::Auto`], but saying so where the kernel has no such parameter.
    Uring,
    /// The FUSE threads reading /dev/fuse: a `read(2)` and a `writev(2)` per request.
    Dev,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        match v {
            "" | "auto" => Ok(Transport::Auto),
            "dev" => Ok(Transport::Dev),
            "uring" => Ok(Transport::Uring),
            _ => Err(format!(
                "{TRANSPORT_ENV}={v:?}: give auto (FUSE over io_uring where the kernel has it, turning on {}), uring (the same, saying so where the kernel has none) or dev (/dev/fuse)",
                ENABLE_PARAM
            )),
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Auto => "auto",
            Transport::Dev => "dev",
            Transport::Uring => "uring",
        })
    }
}

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
                transport: Some(Transport::Uring),
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
        plain.disk.transport = Some(Transport::Dev);
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
    fn a_bad_store_or_transport_is_refused_naming_its_variable() {
        let mut x = every_setting();
        x.disk.store = None;
        let mut argv = x.to_argv();
        argv.extend(["--store".into(), "disk".into()]);
        let e = parse(&argv).expect_err("no such store").to_string();
        assert!(
            e.contains("FSGAUGE_DEVICE_STORE=disk is not a store: give memory, memory:SIZE"),
            "{e}"
        );
        let e = "memory:lots".parse::<StoreChoice>().expect_err("no size");
        assert!(e.starts_with("FSGAUGE_DEVICE_STORE=memory:lots: "), "{e}");
        let e = "rdma".parse::<Transport>().expect_err("no such transport");
        assert!(
            e.contains("FSGAUGE_DEVICE_TRANSPORT=\"rdma\": give auto"),
            "{e}"
        );
        assert_eq!("memory:2M".parse(), Ok(StoreChoice::Memory(Some(2 << 20))));
    }
}
