//! The exerciser's judge of a crash state (`--crash-points`): each exerciser's file, read back
//! from the mounted state, against its durability record ([`super::durable`]): what was made
//! durable by the cut must be there exactly, a range written since may hold any version written
//! since, and nothing else.
//!
//! Testing the judge ([`crate::workload::inject`], debug builds only): `FSGAUGE_CRASH_INJECT`
//! set to `corrupt:OFFSET` flips the byte at OFFSET of each file in the mounted crash state
//! before it is read, `truncate:SIZE` cuts each file to SIZE, and `forget` drops every second
//! durability point from the records.

use std::ffi::CString;
use std::os::fd::AsFd;

use anyhow::{Context, Result};

use super::durable::{judge, Class, Found, Record, Verdict};
use crate::base::sys::{Dir, Errno};
use crate::results::crash::CrashClass;
use crate::workload::inject::Inject;
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
                put_fault(i, d, name)?;
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

/// Puts fault `i` into `name` in `dir` (an absent file is left).
fn put_fault(i: Inject, dir: &Dir, name: &str) -> Result<()> {
    let c = CString::new(name).context("a file name with a NUL byte")?;
    match crate::base::sys::open_at(dir.raw(), &c, libc::O_RDWR | libc::O_CLOEXEC, 0) {
        Ok(fd) => i.apply_to(fd),
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => anyhow::bail!("opening {name} to inject a fault: {}", e.desc()),
    }
}
