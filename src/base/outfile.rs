//! The one way fsgauge writes a file the user named (`report -o`, `compare -o`, `devices fit
//! --out`, `--tree-list`): resolved and checked before any work, written atomically after.
//!
//! - `-` (and `/dev/stdout`, `/dev/stderr`, `/dev/fd/1`, `/dev/fd/2`) is that stream.
//! - Any other path is reached as [`crate::base::sys::chase`] reaches it (another user's link leads
//!   only to what that user owns); its directory must exist, be on a real filesystem (not
//!   `/proc` or `/sys`) and take a new file (probed by making one); the name must be absent or
//!   a regular file. A device node, FIFO, socket or directory at the name is refused (exit 2):
//!   an output is never renamed over one, so `-o /dev/null` cannot destroy `/dev/null`.
//! - The file is written through the directory's held descriptor ([`OutDir::replace`]): a
//!   temporary file, fsync, rename over the name.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::base::atomic::OutDir;
use crate::base::bounded::kind_of;
use crate::base::error::bad_input;

/// A resolved output: a standard stream, or a name in a directory held open.
#[derive(Debug)]
pub enum OutFile {
    /// Standard output (`stderr` false) or standard error.
    Stream { stderr: bool, shown: PathBuf },
    /// The file `name` in `dir`.
    File {
        dir: OutDir,
        name: String,
        shown: PathBuf,
    },
}

/// Is `path` one of the names of a standard stream: Some(false) for stdout, Some(true) for
/// stderr.
fn stream_of(path: &Path) -> Option<bool> {
    match path.to_str()? {
        "-" | "/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1" => Some(false),
        "/dev/stderr" | "/dev/fd/2" | "/proc/self/fd/2" => Some(true),
        _ => None,
    }
}

impl OutFile {
    /// Resolves `path`, named by `flag` (`-o`, `--out`, …) in messages, and checks that it can
    /// be written, before any work; every refusal is bad input (exit 2) and leaves nothing.
    pub fn resolve(path: &Path, flag: &str) -> Result<OutFile> {
        if let Some(stderr) = stream_of(path) {
            return Ok(OutFile::Stream {
                stderr,
                shown: path.to_path_buf(),
            });
        }
        let shown = path.display();
        let refuse = |why: String| bad_input(format!("{flag} {shown}: {why}; nothing was done"));
        let c = crate::base::sys::chase::chase(path, crate::base::sys::chase::Opts::FOLLOW)
            .map_err(|e| refuse(format!("{e:#}")))?;
        let name = match (c.rest.as_slice(), c.st) {
            ([], _) => {
                return Err(refuse(format!(
                    "{} is a directory; give a file name in it",
                    c.dir_path.display()
                )))
            }
            ([name], Some(st)) if st.st_mode & libc::S_IFMT != libc::S_IFREG => {
                return Err(refuse(format!(
                    "{} is {}; fsgauge writes to a regular file, or to standard output with `-`, and never replaces anything else",
                    c.path().display(),
                    kind_of(st.st_mode)
                )))
            }
            ([name], _) => name,
            ([first, ..], _) => {
                return Err(refuse(format!(
                    "the directory {} does not exist; make it first or choose another place",
                    c.dir_path.join(first).display()
                )))
            }
        };
        let name = name
            .to_str()
            .ok_or_else(|| refuse("the file name is not UTF-8".into()))?
            .to_string();
        let dir = OutDir::from_chased(&c).map_err(|e| refuse(format!("{e:#}")))?;
        if let Some(what) = dir.kernel_interface() {
            return Err(refuse(format!(
                "{} is on {what}, a kernel interface, not a place for files; choose a directory on a real filesystem",
                c.dir_path.display()
            )));
        }
        dir.probe().map_err(|e| {
            refuse(format!(
                "no file can be made in {} ({e:#}); choose a directory you can write",
                c.dir_path.display()
            ))
        })?;
        Ok(OutFile::File {
            dir,
            name,
            shown: path.to_path_buf(),
        })
    }

    /// The path as the user gave it.
    pub fn shown(&self) -> &Path {
        match self {
            OutFile::Stream { shown, .. } | OutFile::File { shown, .. } => shown,
        }
    }

    /// Whether this is a standard stream rather than a file.
    pub fn is_stream(&self) -> bool {
        matches!(self, OutFile::Stream { .. })
    }

    /// Writes `bytes`: to the stream, or atomically in place of the file.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            OutFile::Stream { stderr, shown } => {
                let r = if *stderr {
                    std::io::stderr().lock().write_all(bytes)
                } else {
                    let mut out = std::io::stdout().lock();
                    out.write_all(bytes).and_then(|()| out.flush())
                };
                r.with_context(|| format!("writing to {}", shown.display()))
            }
            OutFile::File { dir, name, shown } => dir
                .replace(name, bytes)
                .with_context(|| format!("writing {}", shown.display())),
        }
    }

    /// A directory beside the file, named after it with `ext` for its extension
    /// (`report.html` → `report.plots`), made when missing; `None` for a stream.
    pub fn sibling_dir(&self, ext: &str) -> Result<Option<OutDir>> {
        let OutFile::File { dir, name, .. } = self else {
            return Ok(None);
        };
        let sub = Path::new(name).with_extension(ext);
        let sub = sub.to_str().context("a UTF-8 name")?;
        dir.subdir(sub).map(Some)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn devices_fifos_directories_and_missing_directories_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (p, needle) in [
            (PathBuf::from("/dev/full"), "a character device"),
            (PathBuf::from("/dev/null"), "a character device"),
            (fifo.clone(), "a FIFO"),
            (t.path().to_path_buf(), "is a directory"),
            (t.path().join("missing/r.html"), "does not exist"),
            (PathBuf::from("/proc/self/status"), "kernel interface"),
        ] {
            let e = OutFile::resolve(&p, "-o").unwrap_err();
            let msg = format!("{e:#}");
            assert!(msg.contains(needle), "{}: {msg}", p.display());
            assert_eq!(crate::base::error::exit_code(&e), 2, "{msg}");
        }
        let md = std::fs::metadata("/dev/full").unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(
            &md.file_type()
        ));
        assert!(OutFile::resolve(Path::new("-"), "-o").unwrap().is_stream());
        assert!(OutFile::resolve(Path::new("/dev/stdout"), "-o")
            .unwrap()
            .is_stream());
    }

    #[test]
    fn a_file_is_replaced_through_a_link_of_ones_own() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real.html");
        std::fs::write(&real, b"old").unwrap();
        let link = t.path().join("link.html");
        std::os::unix::fs::symlink("real.html", &link).unwrap();
        let o = OutFile::resolve(&link, "-o").unwrap();
        o.write(b"new").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let d = o.sibling_dir("plots").unwrap().unwrap();
        assert_eq!(
            d.path(),
            t.path().canonicalize().unwrap().join("real.plots")
        );
    }
}
