//! The write log's side of the server: the `crash` file (a crash state built from the write
//! log, see [`crate::device::writelog`]) beside `disk`, and the control commands
//! `log start LIMIT_BYTES [FILE]`, `log stop`, `log summary` and `crash CUT CACHE SEED`. The crash
//! file answers at once, on the FUSE thread: no model applies to a checker's disk.
//! The crash file is reached through /dev/fuse only (the ring's namespace is the disk file
//! alone, [`crate::device::transport::Transport::serves_crash_file`]): a server on the ring
//! refuses `crash`, and a disk with crash states is served with the transport `dev`.

use fuser::{Errno as FuseErrno, ReplyData, ReplyEmpty, ReplyWrite};

use super::core::Core;
use crate::base::sys::Errno;
use crate::device::writelog::record::WriteLog;
use crate::device::writelog::CrashCache;

/// Why a server on the ring answers no `crash`.
pub(super) const NOT_ON_THE_RING: &str = "this server takes its requests through FUSE over io_uring, whose namespace is the disk file alone: there is no crash file; serve the disk with the transport dev (a testbed's device_transport = \"dev\", which crash points choose)";

/// The crash file's name in the mount.
pub const CRASH_NAME: &str = "crash";

fn errno(e: Errno) -> FuseErrno {
    FuseErrno::from_i32(e as i32)
}

/// The crash file's requests, answered on the FUSE thread that took them.
pub(super) trait CrashFile {
    fn crash_read(&self, offset: u64, size: u32, reply: ReplyData);
    fn crash_write(&self, offset: u64, data: &[u8], reply: ReplyWrite);
    fn crash_zero(&self, offset: u64, len: u64, reply: ReplyEmpty);
}

impl CrashFile for Core {
    /// Reads the crash state (the disk as it is before the first one is set).
    fn crash_read(&self, offset: u64, size: u32, reply: ReplyData) {
        let len = (size as usize).min(self.size.saturating_sub(offset) as usize);
        let mut buf = vec![0u8; len];
        let store = |b: &mut [u8], off: u64| self.store.read(b, off);
        let got = match self.log.crash_state() {
            Ok(Some(st)) => st.read(&mut buf, offset, &store),
            Ok(None) => store(&mut buf, offset).map(|_| ()),
            Err(e) => Err(e),
        };
        match got {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Writes to the crash state's private copy (refused before a crash state is set: the
    /// disk itself is not the checker's to change).
    fn crash_write(&self, offset: u64, data: &[u8], reply: ReplyWrite) {
        if offset.saturating_add(data.len() as u64) > self.size {
            return reply.error(FuseErrno::from_i32(libc::ENOSPC));
        }
        let store = |b: &mut [u8], off: u64| self.store.read(b, off);
        let done = match self.log.crash_state() {
            Ok(Some(st)) => st.write(data, offset, &store),
            Ok(None) => Err(Errno::EROFS),
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// A discard or zeroing of the crash file: zeros into the private copy.
    fn crash_zero(&self, offset: u64, len: u64, reply: ReplyEmpty) {
        let len = len.min(self.size.saturating_sub(offset));
        let zeros = vec![0u8; len.min(crate::device::transport::MAX_REQUEST as u64) as usize];
        let store = |b: &mut [u8], off: u64| self.store.read(b, off);
        let st = match self.log.crash_state() {
            Ok(Some(st)) => st,
            Ok(None) => return reply.error(errno(Errno::EROFS)),
            Err(e) => return reply.error(errno(e)),
        };
        let mut at = 0;
        while at < len {
            let n = (len - at).min(zeros.len() as u64);
            if let Err(e) = st.write(&zeros[..n as usize], offset + at, &store) {
                return reply.error(errno(e));
            }
            at += n;
        }
        reply.ok()
    }
}

/// Answers a write-log command (`log ...`, `crash ...`) for a disk of `size` bytes; None for
/// any other command.
pub(super) fn command(log: &WriteLog, line: &str, size: u64) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let answer = match words.as_slice() {
        ["log", "start", limit] => start(log, limit, None),
        ["log", "start", limit, file] => start(log, limit, Some(file)),
        ["log", "stop"] => {
            log.stop();
            "ok".to_string()
        }
        ["log", "summary"] => serde_json::to_string(&log.summary())
            .unwrap_or_else(|e| format!("error: encoding the log's summary: {e}")),
        ["crash", cut, cache, seed] => crash(log, cut, cache, seed, size),
        ["log", ..] | ["crash", ..] => format!(
            "error: {line:?}: use `log start LIMIT_BYTES [FILE]`, `log stop`, `log summary` or `crash CUT CACHE SEED`"
        ),
        _ => return None,
    };
    Some(answer)
}

/// `log start LIMIT [FILE]`: a log of at most LIMIT bytes of data and pre-images, kept in
/// FILE (a regular file the run made for it, given as `/proc/PID/fd/N` of the process that
/// holds it) or in memory.
fn start(log: &WriteLog, limit: &str, file: Option<&str>) -> String {
    let Some(limit) = limit.parse::<u64>().ok().filter(|&l| l > 0) else {
        return format!("error: the write log's limit {limit:?} is not a positive number of bytes");
    };
    let file = match file.map(open_log_file).transpose() {
        Ok(f) => f,
        Err(e) => return format!("error: {e}"),
    };
    match log.start(limit, file) {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("error: starting the write log: {e}"),
    }
}

/// Opens the write log's file: an existing regular file, read and written.
fn open_log_file(path: &str) -> Result<std::fs::File, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("opening the write log's file {path}: {e}"))?;
    match f.metadata() {
        Ok(m) if m.is_file() => Ok(f),
        Ok(_) => Err(format!("the write log's file {path} is not a regular file")),
        Err(e) => Err(format!("stat of the write log's file {path}: {e}")),
    }
}

fn crash(log: &WriteLog, cut: &str, cache: &str, seed: &str, size: u64) -> String {
    let Ok(cut) = cut.parse::<u64>() else {
        return format!("error: the cut {cut:?} is not a request index");
    };
    let cache: CrashCache = match cache.parse() {
        Ok(c) => c,
        Err(e) => return format!("error: {e}"),
    };
    let Ok(seed) = seed.parse::<u64>() else {
        return format!("error: the seed {seed:?} is not a number");
    };
    match log.set_crash(cut, cache, seed, size) {
        Ok(info) => serde_json::to_string(&info)
            .unwrap_or_else(|e| format!("error: encoding the crash state's figures: {e}")),
        Err(e) => format!("error: {e}"),
    }
}
