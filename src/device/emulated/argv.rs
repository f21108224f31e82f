//! The parent's side of the server's settings: [`ServeArgs`] written as the argv of
//! `fsgauge devices serve`. The server only decodes them (its flags,
//! [`crate::device::server::args`]); writing them is the starting process's part, here beside
//! the spawn that passes them.

use std::ffi::OsString;

use crate::device::server::ServeArgs;

/// The arguments after `fsgauge devices serve` that give the server `serve` (parsing them as
/// the server does gives `serve` back).
pub fn server_argv(serve: &ServeArgs) -> Vec<OsString> {
    let d = &serve.disk;
    let mut argv: Vec<OsString> = vec![
        "--profile".into(),
        d.profile.as_str().into(),
        "--image".into(),
        serve.image.clone().into(),
        "--size".into(),
        d.size.to_string().into(),
        "--offset".into(),
        d.offset.to_string().into(),
        "--mount".into(),
        serve.mount.clone().into(),
    ];
    if let Some(h) = &serve.profile_hash {
        argv.extend(["--profile-hash".into(), h.into()]);
    }
    if !d.modelled {
        argv.push("--model-off".into());
    }
    if let Some(s) = d.serving.store {
        argv.extend(["--store".into(), s.to_string().into()]);
    }
    if let Some(t) = d.serving.transport {
        argv.extend(["--transport".into(), t.to_string().into()]);
    }
    if d.overlay {
        argv.push("--overlay".into());
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::server::{DiskSettings, Serving, StoreChoice, TransportChoice};
    use clap::{Args, FromArgMatches};

    /// `devices serve`'s flags alone, parsed as the subcommand parses them.
    fn parse(argv: &[OsString]) -> Result<ServeArgs, clap::Error> {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true));
        ServeArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    fn every_setting() -> ServeArgs {
        ServeArgs {
            disk: DiskSettings {
                profile: "deskstar-7k250:seek=off".parse().expect("a profile"),
                size: 1 << 30,
                offset: 100 << 30,
                modelled: false,
                overlay: true,
                serving: Serving {
                    store: Some(StoreChoice::Memory(Some(16 << 20))),
                    transport: Some(TransportChoice::Uring),
                },
            },
            profile_hash: Some("5eed".into()),
            image: "/proc/1/fd/7".into(),
            mount: "/var/tmp/fsgauge/.fsgauge-0123".into(),
        }
    }

    #[test]
    fn the_argv_parses_back_to_the_settings() {
        let x = every_setting();
        assert_eq!(parse(&server_argv(&x)).expect("parses"), x);
        let mut plain = x.clone();
        plain.disk.modelled = true;
        plain.disk.serving.store = Some(StoreChoice::File);
        plain.disk.serving.transport = Some(TransportChoice::Dev);
        plain.disk.overlay = false;
        assert_eq!(parse(&server_argv(&plain)).expect("parses"), plain);
    }

    #[test]
    fn the_argv_gives_every_flag_of_devices_serve() {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let argv = server_argv(&every_setting());
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
        let reference: crate::device::ProfileRef =
            file.to_str().expect("a UTF-8 path").parse().expect("loads");
        let serve = ServeArgs {
            profile_hash: Some(reference.profile().fingerprint()),
            disk: DiskSettings::new(reference, 1 << 30, 0),
            image: "/proc/1/fd/3".into(),
            mount: "/var/tmp/fsgauge/.fsgauge-0".into(),
        };
        let unchanged = parse(&server_argv(&serve)).expect("parses");
        assert_eq!(
            unchanged.checked_profile().expect("the same").name,
            "deskstar-7k250"
        );
        std::fs::write(&file, text.replace("7200", "5400")).expect("edited");
        let changed = parse(&server_argv(&serve)).expect("parses");
        let e = changed.checked_profile().expect_err("another disk");
        assert_eq!(crate::base::error::exit_code(&e), 2);
        assert!(
            e.to_string()
                .contains("is not the one this run loaded: its parameters changed"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_store_is_refused_as_the_server_decodes_it_naming_what_there_is() {
        let mut x = every_setting();
        x.disk.serving.store = None;
        let mut argv = server_argv(&x);
        argv.extend(["--store".into(), "disk".into()]);
        let e = parse(&argv).expect_err("no such store").to_string();
        assert!(
            e.contains("disk is not a store: give memory, memory:SIZE"),
            "{e}"
        );
    }
}
