//! The machine a run ran on, recorded in every result.

use serde::{Deserialize, Serialize};

/// Facts about the host that change results: kernel, CPUs, memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HostInfo {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPUs this process may run on.
    pub cpus: u32,
    /// MemTotal, bytes.
    pub memory: u64,
}

impl HostInfo {
    pub fn current() -> Self {
        let uts = nix::sys::utsname::uname().ok();
        Self {
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
            kernel: uts
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            memory: crate::base::sys::proc::meminfo("MemTotal").unwrap_or(0),
        }
    }
}
