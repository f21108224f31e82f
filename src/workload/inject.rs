//! The fault tests put into a crash state before it is judged (debug builds only, as
//! `signals::test_pause`), for every judge alike (the exerciser's and the tree workloads'):
//! `FSGAUGE_CRASH_INJECT` set to `corrupt:OFFSET` flips the byte at OFFSET of a durable file,
//! `truncate:SIZE` cuts it to SIZE, and `forget` has the judge drop durability points from its
//! record: a corruption or a cut of durable data must be found at its file and offset, and
//! forgetting a promise must never make a failure.

use std::os::fd::{AsFd, OwnedFd};

use anyhow::Result;

/// One fault, from `FSGAUGE_CRASH_INJECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    Corrupt(u64),
    Truncate(u64),
    Forget,
}

impl Inject {
    /// From `FSGAUGE_CRASH_INJECT`, in debug builds only.
    pub fn from_env() -> Option<Inject> {
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

    /// Puts the fault into the file open (read-write) at `fd`; a file too short for it is
    /// left as it is, and `Forget` changes no file.
    pub fn apply_to(self, fd: OwnedFd) -> Result<()> {
        let f = std::fs::File::from(fd);
        let size = f.metadata()?.len();
        match self {
            Inject::Corrupt(off) if off < size => {
                let mut b = [0u8; 1];
                crate::base::sys::pread(f.as_fd(), &mut b, off)
                    .map_err(|e| anyhow::anyhow!("pread: {}", e.desc()))?;
                b[0] ^= 0xff;
                crate::base::sys::pwrite(f.as_fd(), &b, off)
                    .map_err(|e| anyhow::anyhow!("pwrite: {}", e.desc()))?;
            }
            Inject::Truncate(len) if len < size => f.set_len(len)?,
            _ => {}
        }
        Ok(())
    }
}
