//! CPU time of the fsgauge process (all threads), from getrusage(RUSAGE_SELF). The seed studies
//! printed "elapsed (kernel)": kernel time is where a filesystem spends its CPU.

use nix::sys::resource::{getrusage, UsageWho};

/// User and system CPU seconds at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
}

impl CpuTimes {
    pub fn now() -> Self {
        match getrusage(UsageWho::RUSAGE_SELF) {
            Ok(r) => Self {
                user_s: tv(r.user_time()),
                sys_s: tv(r.system_time()),
            },
            Err(_) => Self::default(),
        }
    }

    /// CPU time spent since `earlier`.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
        }
    }
}

fn tv(t: nix::sys::time::TimeVal) -> f64 {
    t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6
}
