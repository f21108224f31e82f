//! The batch script of a fleet run: task K of the array calls this same fsgauge binary (by its
//! absolute path) with the submitting command's arguments and `--block K --out DIR`, in the
//! submitting directory, and leaves an exit marker beside its log (`fleet-logs/block-K.exit`)
//! for `fsgauge status` where Slurm keeps no accounting. Written into the results directory and
//! kept there for the record.

use std::ffi::OsString;
use std::path::Path;

/// The submitting command's arguments a task repeats: all but the program and the flags of the
/// submission itself (`--on`, `--machines`, `--wait`, `--resume`, `--out`, `--dry-run`),
/// given either as `--flag VALUE` or `--flag=VALUE`.
pub fn task_args(argv: &[OsString]) -> Vec<OsString> {
    const WITH_VALUE: [&str; 3] = ["--on", "--machines", "--out"];
    const ALONE: [&str; 3] = ["--wait", "--resume", "--dry-run"];
    let mut out = Vec::new();
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if WITH_VALUE.contains(&s.as_ref()) {
            it.next();
            continue;
        }
        let with_eq = WITH_VALUE.iter().any(|f| s.starts_with(&format!("{f}=")));
        if with_eq || ALONE.contains(&s.as_ref()) {
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// One word for the shell, single-quoted.
pub fn quote(word: &std::ffi::OsStr) -> String {
    format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"))
}

/// The script's text.
pub fn text(binary: &Path, args: &[OsString], out: &Path, logs: &Path, plan: &str) -> String {
    let words: Vec<String> = std::iter::once(binary.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(quote)
        .collect();
    let name: String = plan
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!(
        r#"#!/bin/bash
# Written by `fsgauge run --on slurm`: task K of the array runs block K of plan {plan:?}
# (repetition K of every configuration, on one machine), writing results into
# {out_shown}. The results directory must be on a filesystem every node sees.
#SBATCH --job-name=fsgauge-{name}
#SBATCH --exclusive
set -u
signalled=0
trap 'signalled=1' TERM INT
{command} --block "$SLURM_ARRAY_TASK_ID" --out {out}
rc=$?
state=$rc
[ "$signalled" = 1 ] && state="cancelled $rc"
marker={logs}/block-"$SLURM_ARRAY_TASK_ID".exit
printf '%s\n' "$state" > "$marker.tmp" && mv -f "$marker.tmp" "$marker"
exit "$rc"
"#,
        out_shown = out.display(),
        command = words.join(" "),
        out = quote(out.as_os_str()),
        logs = quote(logs.as_os_str()),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn tasks_repeat_the_command_but_for_the_submission_flags() {
        let argv = args(&[
            "fsgauge",
            "run",
            "p.toml",
            "--on",
            "slurm:debug",
            "--machines=2",
            "--wait",
            "--scale",
            "0.5",
            "--out",
            "res",
            "--resume",
            "--on=slurm",
            "-q",
        ]);
        assert_eq!(
            task_args(&argv),
            args(&["run", "p.toml", "--scale", "0.5", "-q"])
        );
    }

    #[test]
    fn the_script_quotes_every_word() {
        let s = text(
            Path::new("/bin/fsgauge"),
            &args(&["run", "it's.toml"]),
            Path::new("/r d"),
            Path::new("/r d/fleet-logs"),
            "p",
        );
        assert!(
            s.contains(
                r#"'/bin/fsgauge' 'run' 'it'\''s.toml' --block "$SLURM_ARRAY_TASK_ID" --out '/r d'"#
            ),
            "{s}"
        );
        assert!(s.contains("#SBATCH --exclusive"), "{s}");
    }
}
