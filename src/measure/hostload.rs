//! What the machine did beside a phase: the share of all CPU time the hypervisor stole
//! (`/proc/stat`'s steal) and the share of the phase's wall time some runnable task waited for
//! a CPU (`/proc/pressure/cpu`, PSI `some`). A timing result is read against these: on a
//! shared VM a phase can be slower because the host or a neighbour took the CPU, not because
//! of the filesystem.

use std::time::Instant;

use crate::results::HostLoad;

/// The counters at a phase's start.
#[derive(Debug, Clone, Copy)]
pub struct LoadMark {
    at: Instant,
    stat: Option<(u64, u64)>,
    pressure_us: Option<u64>,
}

impl LoadMark {
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            stat: std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| steal_and_total(&s)),
            pressure_us: std::fs::read_to_string("/proc/pressure/cpu")
                .ok()
                .and_then(|s| some_total_us(&s)),
        }
    }

    /// The load from `self` to now; `None` when the kernel tells neither.
    pub fn since(&self) -> Option<HostLoad> {
        load_between(self, &Self::now())
    }
}

fn load_between(a: &LoadMark, b: &LoadMark) -> Option<HostLoad> {
    let steal = match (a.stat, b.stat) {
        (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
            Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
        }
        _ => None,
    };
    let wall_us = b.at.duration_since(a.at).as_micros() as f64;
    let pressure = match (a.pressure_us, b.pressure_us) {
        (Some(p0), Some(p1)) if wall_us > 0.0 => {
            Some((p1.saturating_sub(p0) as f64 / wall_us).min(1.0))
        }
        _ => None,
    };
    (steal.is_some() || pressure.is_some()).then_some(HostLoad {
        steal,
        cpu_pressure: pressure,
    })
}

/// Steal and the sum of all fields of `/proc/stat`'s first (`cpu`) line, in ticks.
fn steal_and_total(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?;
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
    // in user and nice, so the total stops at steal.
    let v: Vec<u64> = it.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    (v.len() == 8).then(|| (v[7], v.iter().sum()))
}

/// `total=` of the `some` line of `/proc/pressure/cpu`, microseconds.
fn some_total_us(psi: &str) -> Option<u64> {
    psi.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn steal_is_a_share_of_every_tick_and_pressure_of_the_wall() {
        assert_eq!(
            steal_and_total("cpu  100 5 50 800 10 1 2 32 7 0\ncpu0 1 2 3\n"),
            Some((32, 1000))
        );
        assert_eq!(
            some_total_us(
                "some avg10=1.00 avg60=2.00 avg300=3.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
            Some(123456)
        );
        let t = Instant::now();
        let a = LoadMark {
            at: t,
            stat: Some((32, 1000)),
            pressure_us: Some(1_000_000),
        };
        let b = LoadMark {
            at: t + Duration::from_secs(2),
            stat: Some((52, 2000)),
            pressure_us: Some(1_500_000),
        };
        let l = load_between(&a, &b).expect("both counters");
        assert!((l.steal.unwrap() - 0.02).abs() < 1e-12);
        assert!((l.cpu_pressure.unwrap() - 0.25).abs() < 1e-12);
        let none = LoadMark {
            at: t,
            stat: None,
            pressure_us: None,
        };
        assert!(load_between(&none, &none).is_none());
    }
}
