//! The checks behind `tio`'s `validate`, one per group of related options, so every bad
//! combination is refused (exit 2, naming the option) before any file is made.

use anyhow::Result;

use super::{uring, Engine, Tio};
use crate::base::error::bad_param;
use crate::base::units::format_size;

impl Tio {
    /// Refuses `--latency-probe` and `--rate`/`--rate-iops` unless the engine is psync with
    /// latency recording on (and, for the rate limits, without the latency probe).
    pub(super) fn check_latency_and_rate(&self) -> Result<()> {
        if self.latency_probe && (self.engine != Engine::Psync || !self.latency) {
            return Err(bad_param(
                "latency_probe",
                "--latency-probe works with --engine psync and latency recording on",
            ));
        }
        if self.control.rate().is_set() {
            let flag = if self.control.rate_iops.is_some() {
                "rate_iops"
            } else {
                "rate"
            };
            let clash = if self.engine != Engine::Psync {
                Some("--engine psync (one request in flight per thread)")
            } else if !self.latency {
                Some("latency recording on (leave out --no-latency)")
            } else if self.latency_probe {
                Some("no --latency-probe")
            } else {
                None
            };
            if let Some(needs) = clash {
                return Err(bad_param(
                    flag,
                    format!("--{} limits work with {needs}", flag.replace('_', "-")),
                ));
            }
        }
        Ok(())
    }

    /// Refuses an empty `--threads`, `--mode` or `--block` list and thread counts outside
    /// 1 to 4096.
    pub(super) fn check_sweep_values(&self) -> Result<()> {
        if self.threads.is_empty() || self.mode.is_empty() || self.block.is_empty() {
            let field = match (self.threads.is_empty(), self.mode.is_empty()) {
                (true, _) => "threads",
                (_, true) => "mode",
                _ => "block",
            };
            return Err(bad_param(
                field,
                "--threads, --mode and --block need at least one value each",
            ));
        }
        if let Some(&t) = self.threads.iter().find(|&&t| t == 0 || t > 4096) {
            return Err(bad_param(
                "threads",
                format!("--threads {t}: use 1 to 4096 threads"),
            ));
        }
        Ok(())
    }

    /// Refuses a block size `b` (bytes) that is not a multiple of 512, is over 64 MiB, is larger
    /// than `--file-size`, or does not divide `--file-size`.
    pub(super) fn check_block(&self, b: u64) -> Result<()> {
        if b < 512 || b % 512 != 0 {
            return Err(bad_param(
                "block",
                format!(
                    "--block {}: a block must be a multiple of 512 bytes (e.g. 4K, 128K)",
                    format_size(b)
                ),
            ));
        }
        if b > (64 << 20) {
            return Err(bad_param(
                "block",
                format!("--block {}: at most 64M per request", format_size(b)),
            ));
        }
        if b > self.file_size {
            return Err(bad_param(
                "block",
                format!(
                    "--block {} is larger than --file-size {}; each thread needs at least one block",
                    format_size(b),
                    format_size(self.file_size)
                ),
            ));
        }
        if self.file_size % b != 0 {
            return Err(bad_param(
                "file_size",
                format!(
                    "--file-size {} is not a whole number of {} blocks",
                    format_size(self.file_size),
                    format_size(b)
                ),
            ));
        }
        Ok(())
    }

    /// Refuses `--iodepth` outside 1 to 4096, and above 1 with the psync engine.
    pub(super) fn check_iodepth(&self) -> Result<()> {
        if self.iodepth == 0 || self.iodepth > 4096 {
            return Err(bad_param(
                "iodepth",
                format!("--iodepth {}: use 1 to 4096", self.iodepth),
            ));
        }
        if self.engine == Engine::Psync && self.iodepth > 1 {
            return Err(bad_param(
                "iodepth",
                format!(
                    "--iodepth {} needs --engine io_uring (psync has one request in flight per thread)",
                    self.iodepth
                ),
            ));
        }
        Ok(())
    }

    /// With `--engine io_uring` and no `--engine-fallback`, refuses a kernel that will not set
    /// up a ring of `--iodepth` entries.
    pub(super) fn check_engine(&self) -> Result<()> {
        if self.engine == Engine::IoUring && !self.engine_fallback {
            if let Err(e) = uring::kernel_check(self.iodepth) {
                return Err(bad_param("engine", format!(
                    "--engine io_uring: {e}; use --engine psync, or add --engine-fallback to use psync when io_uring is refused"
                )));
            }
        }
        Ok(())
    }
}
