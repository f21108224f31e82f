//! The exerciser's judge of a crash state (`--crash-points`): each exerciser's file, read back
//! from the mounted state, against its durability record ([`super::durable`]): what was made
//! durable by the cut must be there exactly, a range written since may hold any version written
//! since, and nothing else.
//!
//! Testing the judge (debug builds only, as `signals::test_pause`): `FSGAUGE_CRASH_INJECT`
//! set to `corrupt:OFFSET` flips the byte at OFFSET of each file in the mounted crash state
//! before it is read, `truncate:SIZE` cuts each file to SIZE, and `forget` drops every second
//! durability point from the records: a corruption or a cut of durable data must be found at
//! its file and offset, and forgetting a promise must never make a failure.

use std::ffi::CString;
use std::os::fd::AsFd;

use anyhow::{Context, Result};

use super::durable::{judge, Class, Found, Record, Verdict};
use crate::results::crash::CrashClass;
use crate::sys::{Dir, Errno};
use crate::workload::CrashVerifier;

/// The judge of the crash states of a run whose exercisers left `records`, each on the file
/// `names[w]` inside the workload directory.
pub fn verifier(mut records: Vec<(String, Record)>) -> CrashVerifier {
    let inject = Inject::from_env();
    if inject == Some(Inject::Forget) {
        for (_, r) in &mut records {
            for e in r.events.iter_mut().filter(|e| e.durable).skip(1).step_by(2) {
                e.durable = false;
            }
        }
    }
    Box::new(move |cut_ns, root| {
        let dir = match Dir::open(root) {
            Ok(d) => Some(d),
            // The workload directory itself is gone: every file is absent.
            Err(Errno::ENOENT) => None,
            Err(e) => anyhow::bail!("opening {}: {}", root.display(), e.desc()),
        };
        let mut out = Vec::new();
        for (name, rec) in &records {
            if let (Some(d), Some(i)) = (&dir, inject) {
                i.apply(d, name)?;
            }
            let bytes = match &dir {
                Some(d) => read_whole(d, name, rec.max_len)
                    .with_context(|| format!("reading {name} in {}", root.display()))?,
                None => None,
            };
            let found = bytes.as_deref().map_or(Found::Absent, Found::File);
            let verdict = judge(rec, cut_ns, found)
                .with_context(|| format!("judging {name} at the cut ({cut_ns} ns)"))?;
            if let Some((class, text)) = finding(name, &verdict) {
                out.push((class, text));
            }
        }
        Ok(out)
    })
}

/// The class and words of a failed verdict.
fn finding(name: &str, v: &Verdict) -> Option<(CrashClass, String)> {
    let m = v.failure()?;
    let class = match m.class {
        Class::LostDurableData => CrashClass::LostDurable,
        Class::ForeignData => CrashClass::Foreign,
    };
    // The record names the file by the pinned path it was reached through; the state's name
    // is the one a reader can find.
    let text = m.render().replace(&m.file.display().to_string(), name);
    Some((class, text))
}

/// The whole file `name` in `dir` (None: it does not exist), read up to `max_len` bytes and one
/// more (a file grown past what the exerciser ever wrote is judged on its size).
fn read_whole(dir: &Dir, name: &str, max_len: u64) -> Result<Option<Vec<u8>>> {
    let c = CString::new(name).context("a file name with a NUL byte")?;
    let f = match dir.open_read(&c) {
        Ok(f) => f,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => anyhow::bail!("open: {}", e.desc()),
    };
    let cap = usize::try_from(max_len)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let mut buf = vec![0u8; cap];
    let got = super::engine::pread_all(f.as_fd(), &mut buf, 0, 0)
        .map_err(|e| anyhow::anyhow!("pread: {}", e.desc()))?;
    buf.truncate(got);
    Ok(Some(buf))
}

/// A fault the tests put into a crash state (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inject {
    Corrupt(u64),
    Truncate(u64),
    Forget,
}

impl Inject {
    /// From `FSGAUGE_CRASH_INJECT`, in debug builds only.
    fn from_env() -> Option<Inject> {
        if !cfg!(debug_assertions) {
            return None;
        }
        let v = std::env::var("FSGAUGE_CRASH_INJECT").ok()?;
        let (kind, arg) = v.split_once(':').unwrap_or((v.as_str(), ""));
        let n = arg.parse::<u64>().ok();
        match kind {
            "corrupt" => n.map(Inject::Corrupt),
            "truncate" => n.map(Inject::Truncate),
            "forget" => Some(Inject::Forget),
            _ => None,
        }
    }

    /// Puts the fault into `name` in `dir` (a file too short for it, or absent, is left).
    fn apply(self, dir: &Dir, name: &str) -> Result<()> {
        let c = CString::new(name).context("a file name with a NUL byte")?;
        let fd = match crate::sys::open_at(dir.raw(), &c, libc::O_RDWR | libc::O_CLOEXEC, 0) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => anyhow::bail!("opening {name} to inject a fault: {}", e.desc()),
        };
        let f = std::fs::File::from(fd);
        let size = f.metadata()?.len();
        match self {
            Inject::Corrupt(off) if off < size => {
                let mut b = [0u8; 1];
                crate::sys::pread(f.as_fd(), &mut b, off)
                    .map_err(|e| anyhow::anyhow!("pread: {}", e.desc()))?;
                b[0] ^= 0xff;
                crate::sys::pwrite(f.as_fd(), &b, off)
                    .map_err(|e| anyhow::anyhow!("pwrite: {}", e.desc()))?;
            }
            Inject::Truncate(len) if len < size => f.set_len(len)?,
            _ => {}
        }
        Ok(())
    }
}
