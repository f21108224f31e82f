//! The write log and crash states of an [`EmulatedDevice`] (see
//! [`crate::device::writelog`] for what they are): start the log before the writes
//! to cut, read its summary (the cut candidates), set a crash state, and look at it through a
//! second loop device on the server's `crash` file. The campaign's order: start the log,
//! run, unmount the filesystem on the main loop device (the disk stays idle from then on),
//! then for each cut `set_crash_state` and check the crash loop device (checker, mount).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;

use super::EmulatedDevice;
use crate::base::sys::trust::FileId;
use crate::device::server::CRASH_NAME;
use crate::device::writelog::{CrashCache, CrashStateInfo, LogSummary};
use crate::host::ledger::Resource;
use crate::host::loopdev::flush_buffers;
use crate::host::loopdev::LoopDevice;

impl EmulatedDevice {
    /// Sends a write-log command; its answer, or the server's refusal as a bad-input error.
    fn ask_log(&mut self, command: &str) -> Result<String> {
        self.check()?;
        let answer = match self.channel.ask(command) {
            Ok(a) => a,
            Err(e) => return Err(self.died().context(format!("{e:#}"))),
        };
        match answer.strip_prefix("error: ") {
            Some(why) => Err(crate::base::error::bad_input(format!(
                "{} refused {command:?}: {why}",
                self.channel.what
            ))),
            None => Ok(answer),
        }
    }

    fn ask_json<T: DeserializeOwned>(&mut self, command: &str) -> Result<T> {
        let line = self.ask_log(command)?;
        serde_json::from_str(&line).with_context(|| {
            format!(
                "the answer {line:?} of {} to {command:?}",
                self.channel.what
            )
        })
    }

    /// Starts the server's write log, holding at most `limit` bytes of data and pre-images,
    /// kept in `file` (an empty regular file, which the server opens by this path: give it
    /// as `/proc/PID/fd/N` of a file this process holds) or, without one, in the server's
    /// memory; a log that reaches its limit stops and says so in its summary. A new log
    /// replaces the previous one and its crash state. What is in the drive's cache when it
    /// starts counts as on the media: start it after a flush (a sync of the filesystem).
    pub fn start_log(&mut self, limit: u64, file: Option<&Path>) -> Result<()> {
        let command = match file {
            Some(f) => {
                let f = f.to_str().filter(|f| !f.contains(char::is_whitespace));
                let f = f.context("the write log's file must have a path of words")?;
                format!("log start {limit} {f}")
            }
            None => format!("log start {limit}"),
        };
        match self.ask_log(&command)?.as_str() {
            "ok" => Ok(()),
            a => bail!("{} answered {a:?} to log start", self.channel.what),
        }
    }

    /// Stops logging (the log stays, for crash states; a later write to the disk makes them
    /// refused).
    pub fn stop_log(&mut self) -> Result<()> {
        match self.ask_log("log stop")?.as_str() {
            "ok" => Ok(()),
            a => bail!("{} answered {a:?} to log stop", self.channel.what),
        }
    }

    /// The write log's figures and its cut candidates.
    pub fn log_summary(&mut self) -> Result<LogSummary> {
        self.ask_json("log summary")
    }

    /// Serves the crash state at `cut` (an index of [`LogSummary::cuts`]) under `cache` and
    /// `seed` as the `crash` file, dropping the previous state and whatever was written to it;
    /// the crash loop device's buffer cache is dropped too, so no block of the previous state
    /// is read through it. The disk must have stayed idle since the log's last request, and
    /// nothing may be mounted on the crash loop device while the state changes under it.
    pub fn set_crash_state(
        &mut self,
        cut: u64,
        cache: CrashCache,
        seed: u64,
    ) -> Result<CrashStateInfo> {
        let info = self.ask_json(&format!("crash {cut} {cache} {seed}"))?;
        if let Some(l) = &self.crash_loop {
            flush_buffers(l.path())?;
        }
        Ok(info)
    }

    /// The crash file on the server's mount.
    pub fn crash_file(&self) -> PathBuf {
        self.mount.join(CRASH_NAME)
    }

    /// Attaches a second loop device to the crash file (direct I/O, as the main one),
    /// recorded in the ledger and detached with the device. Returns its path.
    pub fn attach_crash_loop(&mut self) -> Result<PathBuf> {
        if let Some(l) = &self.crash_loop {
            return Ok(l.path().to_path_buf());
        }
        let file = self.crash_file();
        let crash = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .with_context(|| {
                format!(
                    "opening the crash file {} (there is none with FSGAUGE_DEVICE_TRANSPORT=uring)",
                    file.display()
                )
            })?;
        let id = FileId::of(std::os::fd::AsFd::as_fd(&crash))
            .with_context(|| format!("stat {}", file.display()))?;
        self.ledger.record(Resource::Loop {
            image: file.clone(),
            backing: Some(id),
        })?;
        let l = LoopDevice::attach(&crash, &file, true).with_context(|| {
            format!(
                "attaching a loop device to the crash file {}",
                file.display()
            )
        })?;
        let path = l.path().to_path_buf();
        let direct = l.direct_io();
        self.crash_loop = Some(l);
        if !direct {
            bail!(
                "the loop device {} on {} does not do direct I/O: its reads would be cached apart from the crash state served",
                path.display(),
                file.display()
            );
        }
        Ok(path)
    }

    /// The crash loop device, once attached.
    pub fn crash_loop_device(&self) -> Option<&Path> {
        self.crash_loop.as_ref().map(|l| l.path())
    }
}
