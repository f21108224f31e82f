//! Run control shared by the workloads that move data (tio, clients): how long a phase runs and
//! where its workers run. One struct, both the command-line flags and the plan keys, flattened
//! into each workload's parameters.
//!
//! `time_based` is fio's `time_based`: the phase runs for the whole `--time`, wrapping around its
//! file or load, instead of stopping when the work is done. `cpus` pins the workers round-robin
//! (worker i on the i mod n-th CPU of the list), as fio's `cpus_allowed` with
//! `cpus_allowed_policy=split`; the placement follows from the list and is in the result's
//! parameters.

use std::fmt;
use std::str::FromStr;

use anyhow::Result;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::rate::{self, ByteRate, RateLimit, RatePer};
use crate::base::error::bad_input;
pub use crate::measure::SeriesSpec;
use std::time::Duration;

/// Run-control parameters (flags `--time-based`, `--cpus`, the rate limits; plan keys
/// `time_based`, `cpus`, `rate_iops`, `rate`, `rate_per`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default)]
// The rate flags, for `--rate-per`'s `requires`: either one (both together are refused by
// RateLimit::validate, with its own message).
#[command(group(clap::ArgGroup::new("rate_limit").args(["rate_iops", "rate"]).multiple(true)))]
pub struct RunControl {
    /// Run every phase for the whole --time, wrapping around the file or the load (fio's
    /// time_based), instead of stopping when the work is done. Needs --time.
    #[arg(long, help_heading = "Run control")]
    // Left out when off, so that results (and spec hashes) of runs without run control are
    // what they were before it existed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub time_based: bool,
    /// Pin the workers to these CPUs, round-robin (worker i on the i-th CPU of the list,
    /// modulo its length), e.g. 0,2-3.
    #[arg(long, value_name = "LIST", help_heading = "Run control")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    /// Issue at most N requests per second per worker (fio's rate_iops), on a fixed schedule:
    /// request k is due at start + k/N, and latency is also measured from that due time.
    // Fields of their own rather than a flattened struct: serde's deny_unknown_fields (of tio
    // and clients) does not see through a flatten within a flatten.
    #[arg(long, value_name = "N", value_parser = rate::iops, help_heading = "Run control")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_iops: Option<f64>,
    /// Move at most this many bytes per second per worker (fio's rate), e.g. 10M/s; a request
    /// is due when the bytes before it are.
    #[arg(long, value_name = "BYTES/s", help_heading = "Run control")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<ByteRate>,
    /// Whom --rate-iops/--rate apply to: worker (each worker gets the whole rate, as fio's jobs
    /// do) or run (split evenly over the workers).
    #[arg(
        long,
        value_name = "worker|run",
        default_value = "worker",
        requires = "rate_limit",
        help_heading = "Run control"
    )]
    #[serde(skip_serializing_if = "RatePer::is_worker")]
    pub rate_per: RatePer,
    /// Length of one interval of every phase's time series (operations, bytes and latency
    /// percentiles per interval; fio's log_avg_msec), e.g. 250ms [default: 1s].
    #[arg(long, value_name = "D", value_parser = super::params::seconds, help_heading = "Run control")]
    #[serde(
        default,
        deserialize_with = "crate::base::units::de_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub interval: Option<f64>,
    /// Warm-up left out of every figure (fio's ramp_time): the first D of each phase runs as
    /// usual but its operations, bytes and latencies are not counted (the series keeps them,
    /// marked as ramp). With --time-based the phase runs D + --time. A whole number of
    /// --interval.
    #[arg(long, value_name = "D", value_parser = super::params::seconds, help_heading = "Run control")]
    #[serde(
        default,
        deserialize_with = "crate::base::units::de_opt_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub ramp: Option<f64>,
}

impl RunControl {
    /// Checks the parameters against the workload's `time` cap and this machine's CPUs.
    pub fn validate(&self, time: Option<f64>) -> Result<()> {
        self.check(time, false)
    }

    /// As [`RunControl::validate`] for a load that runs for its `time` (clients): a ramp
    /// comes on top of the time rather than out of it.
    pub fn validate_load(&self, time: Option<f64>) -> Result<()> {
        self.check(time, true)
    }

    fn check(&self, time: Option<f64>, ramp_on_top: bool) -> Result<()> {
        if self.time_based && time.is_none() {
            return Err(bad_input(
                "--time-based needs --time D: how long every phase runs (e.g. --time 30s)",
            ));
        }
        if let Some(c) = &self.cpus {
            c.check()?;
        }
        self.rate().validate()?;
        self.series_spec(time.filter(|_| !ramp_on_top))?;
        Ok(())
    }

    /// The time series and ramp asked (`--interval`, `--ramp`), checked: an interval of 1 ms
    /// to 1 h, a ramp of whole intervals, and with a time cap a ramp shorter than it (unless
    /// time-based, where the phase runs ramp + time).
    pub fn series_spec(&self, time: Option<f64>) -> Result<SeriesSpec> {
        let interval = self.interval.unwrap_or(1.0);
        if !(0.001..=3600.0).contains(&interval) {
            return Err(crate::base::error::bad_param(
                "interval",
                format!("--interval {interval} s: give 1ms to 1h (e.g. 250ms, 1s, 10s)"),
            ));
        }
        let ramp = self.ramp.unwrap_or(0.0);
        if self.ramp.is_some() && ramp <= 0.0 {
            return Err(crate::base::error::bad_param(
                "ramp",
                format!("--ramp {ramp} s: give a warm-up longer than zero, or leave it out"),
            ));
        }
        let whole = (ramp / interval).round();
        if (ramp - whole * interval).abs() > 1e-6 * interval.max(1.0) {
            return Err(crate::base::error::bad_param(
                "ramp",
                format!(
                    "--ramp {} is not a whole number of --interval {}: the ramp ends at an interval boundary so that what it leaves out is exact; give e.g. --ramp {}",
                    crate::base::text::format_secs_unit(ramp),
                    crate::base::text::format_secs_unit(interval),
                    crate::base::text::format_secs_unit(whole.max(1.0) * interval)
                ),
            ));
        }
        if let Some(t) = time.filter(|_| !self.time_based && ramp > 0.0) {
            if ramp >= t {
                return Err(crate::base::error::bad_param(
                    "ramp",
                    format!(
                        "--ramp {} is not shorter than --time {}: nothing would be left to measure; make the ramp shorter, or add --time-based (the phase then runs ramp + time)",
                        crate::base::text::format_secs_unit(ramp),
                        crate::base::text::format_secs_unit(t)
                    ),
                ));
            }
        }
        Ok(SeriesSpec {
            interval: Duration::from_secs_f64(interval),
            ramp_intervals: whole as u32,
        })
    }

    /// The time cap of a phase: with --time-based and a ramp, the ramp comes on top.
    pub fn phase_time(&self, time: Option<f64>) -> Option<f64> {
        match (time, self.time_based, self.ramp) {
            (Some(t), true, Some(r)) => Some(t + r),
            _ => time,
        }
    }

    /// The rate limit asked (see [`rate`]).
    pub fn rate(&self) -> RateLimit {
        RateLimit {
            iops: self.rate_iops,
            bytes: self.rate,
            per: self.rate_per,
        }
    }

    /// Pins the calling thread, worker `i`, to its CPU until the guard is dropped (then the
    /// thread's earlier CPU set is restored: a single worker runs on the caller's thread).
    pub fn pin(&self, i: usize) -> Result<Option<Pinned>> {
        let Some(list) = &self.cpus else {
            return Ok(None);
        };
        let cpu = list.for_worker(i);
        let before = sched_getaffinity(Pid::from_raw(0))
            .map_err(|e| anyhow::anyhow!("reading the CPU affinity of worker {i}: {e}"))?;
        let mut set = CpuSet::new();
        set.set(cpu)
            .map_err(|e| bad_input(format!("--cpus: CPU {cpu} is out of range ({e})")))?;
        sched_setaffinity(Pid::from_raw(0), &set)
            .map_err(|e| bad_input(format!("--cpus: cannot pin worker {i} to CPU {cpu}: {e}")))?;
        Ok(Some(Pinned { before }))
    }
}

/// A worker pinned to a CPU; restores the thread's earlier CPU set when dropped.
pub struct Pinned {
    before: CpuSet,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.before);
    }
}

/// A CPU list: `0,2,4-7`. Order is kept (it is the round-robin order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// The CPU of worker `i`.
    pub fn for_worker(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }

    /// Every CPU of the list must be one this process may run on.
    fn check(&self) -> Result<()> {
        if self.0.is_empty() {
            return Err(bad_input("--cpus: the CPU list is empty"));
        }
        let allowed = sched_getaffinity(Pid::from_raw(0))
            .map_err(|e| anyhow::anyhow!("reading this process's CPU affinity: {e}"))?;
        let usable: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| allowed.is_set(c).unwrap_or(false))
            .collect();
        if let Some(bad) = self.0.iter().find(|c| !usable.contains(c)) {
            return Err(bad_input(format!(
                "--cpus: CPU {bad} does not exist or is not available to fsgauge; available: {}",
                CpuList(usable)
            )));
        }
        Ok(())
    }
}

impl FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let num = |t: &str| {
                t.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("{t:?} in CPU list {s:?} is not a CPU number"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("CPU range {part:?} runs backwards"));
                    }
                    out.extend(a..=b);
                }
                None => out.push(num(part)?),
            }
        }
        if out.is_empty() {
            return Err(format!("CPU list {s:?} is empty; give CPUs like 0,2-3"));
        }
        Ok(Self(out))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<usize>),
            One(usize),
            Text(String),
        }
        let list = match Raw::deserialize(d)? {
            Raw::List(v) => CpuList(v),
            Raw::One(c) => CpuList(vec![c]),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom)?,
        };
        if list.0.is_empty() {
            return Err(serde::de::Error::custom("the CPU list is empty"));
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_take_single_cpus_and_ranges_in_order() {
        assert_eq!("2,0-1".parse::<CpuList>(), Ok(CpuList(vec![2, 0, 1])));
        assert_eq!("3".parse::<CpuList>(), Ok(CpuList(vec![3])));
        assert!("".parse::<CpuList>().is_err());
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("x".parse::<CpuList>().is_err());
    }

    #[test]
    fn workers_go_round_robin() {
        let l = CpuList(vec![4, 6]);
        let got: Vec<usize> = (0..5).map(|i| l.for_worker(i)).collect();
        assert_eq!(got, [4, 6, 4, 6, 4]);
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_bad_input() {
        let e = CpuList(vec![CpuSet::count() - 1])
            .check()
            .expect_err("no such CPU");
        assert!(e.is::<crate::base::error::BadInput>(), "{e:#}");
        assert!(e.to_string().contains("does not exist"), "{e:#}");
    }

    #[test]
    fn time_based_needs_a_time() {
        let c = RunControl {
            time_based: true,
            ..Default::default()
        };
        assert!(c.validate(None).is_err());
        assert!(c.validate(Some(1.0)).is_ok());
    }

    #[test]
    fn pinning_holds_while_the_guard_lives_and_is_undone_after() {
        let allowed = sched_getaffinity(Pid::from_raw(0)).expect("affinity");
        let first = (0..CpuSet::count())
            .find(|&c| allowed.is_set(c).unwrap_or(false))
            .expect("some CPU");
        let c = RunControl {
            cpus: Some(CpuList(vec![first])),
            ..Default::default()
        };
        let g = c.pin(0).expect("pin").expect("a guard");
        let now = sched_getaffinity(Pid::from_raw(0)).expect("affinity");
        let set: Vec<usize> = (0..CpuSet::count())
            .filter(|&x| now.is_set(x).unwrap_or(false))
            .collect();
        assert_eq!(set, [first]);
        drop(g);
        assert_eq!(
            sched_getaffinity(Pid::from_raw(0)).expect("affinity"),
            allowed
        );
    }

    #[test]
    fn plan_keys_flatten_into_a_workload() {
        #[derive(Deserialize, Serialize)]
        struct W {
            x: u32,
            #[serde(flatten)]
            control: RunControl,
        }
        let w: W = toml::from_str("x = 1\ntime_based = true\ncpus = \"0-1\"").expect("parses");
        assert!(w.control.time_based);
        assert_eq!(w.control.cpus, Some(CpuList(vec![0, 1])));
        // Without run control, a workload's parameters are what they were before.
        let plain = serde_json::to_value(W {
            x: 1,
            control: RunControl::default(),
        })
        .expect("serializes");
        assert_eq!(plain, serde_json::json!({ "x": 1 }));
    }

    #[test]
    fn tio_and_clients_plans_take_the_keys_and_still_refuse_unknown_ones() {
        use crate::workload::clients::Clients;
        use crate::workload::tio::Tio;
        let t: Tio = toml::from_str("time = \"2s\"\ntime_based = true\ncpus = [0]").expect("tio");
        assert!(t.control.time_based);
        assert_eq!(t.control.cpus, Some(CpuList(vec![0])));
        let c: Clients = toml::from_str("time = \"2s\"\ncpus = \"0-1\"").expect("clients");
        assert_eq!(c.control.cpus, Some(CpuList(vec![0, 1])));
        let e = toml::from_str::<Tio>("time_base = true").expect_err("a misspelt key");
        assert!(e.to_string().contains("time_base"), "{e}");
        let e = toml::from_str::<Clients>("cpu = 1").expect_err("a misspelt key");
        assert!(e.to_string().contains("cpu"), "{e}");
    }

    #[test]
    fn rate_keys_parse_into_tio_and_clients_and_are_left_out_when_not_given() {
        use crate::workload::clients::Clients;
        use crate::workload::tio::Tio;
        let t: Tio = toml::from_str("rate = \"2M/s\"\nrate_per = \"run\"").expect("tio");
        assert_eq!(t.control.rate, Some(ByteRate(2 << 20)));
        assert_eq!(t.control.rate_per, RatePer::Run);
        let c: Clients = toml::from_str("rate_iops = 500").expect("clients");
        assert_eq!(c.control.rate().iops, Some(500.0));
        let t: Tio = serde_json::from_value(serde_json::json!({ "rate_iops": 1.5 })).expect("json");
        assert_eq!(t.control.rate_iops, Some(1.5));
        assert!(toml::from_str::<Tio>("rate = \"2X/s\"").is_err());
        let e = toml::from_str::<Tio>("rate_ops = 5").expect_err("a misspelt key");
        assert!(e.to_string().contains("rate_ops"), "{e}");
        assert_eq!(
            serde_json::to_value(RunControl::default()).expect("serializes"),
            serde_json::json!({})
        );
        // The command line's default is the plan's.
        let f: RunControl = crate::workload::params::from_flags(&[]).expect("no flags");
        assert_eq!(f, RunControl::default());
    }
}
