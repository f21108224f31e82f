//! FUSE over io_uring against /dev/fuse, measured (not a test: it asserts nothing and its
//! figures depend on the machine). A 1 GiB RAM disk served by this process through a loop
//! device: fio 4K random reads (io_uring engine, direct) at QD1 and QD32,
//! `FSGAUGE_URING_BENCH_SECONDS` (10) each, the transports interleaved
//! (`FSGAUGE_URING_BENCH_UNPINNED=1` adds the ring with its threads free to run on any CPU);
//! prints IOPS, mean latency and the server's CPU per request (this process's, which is the
//! server's and an idle main thread's). One round takes 4 runs; run it again for repeats.
//! Needs root, /dev/fuse, loop devices, fio and a kernel with `CONFIG_FUSE_IO_URING`:
//! `sudo cargo bench --bench uring_transport`.
#![allow(clippy::unwrap_used)] // a benchmark fails loudly

#[path = "../tests/it/ram_disk.rs"]
mod ram_disk;

use std::path::Path;

use ram_disk::{attach, Param, Ram, Served};

fn main() {
    if let Some(missing) = missing() {
        eprintln!("uring_transport: not measured: {missing}");
        return;
    }
    let Some(_param) = Param::set(true) else {
        eprintln!(
            "uring_transport: not measured: cannot set {}",
            ram_disk::PARAM
        );
        return;
    };
    let seconds: u32 = std::env::var("FSGAUGE_URING_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let ram = Ram::zeroed(1 << 30);
    for (i, b) in ram.0.write().unwrap().iter_mut().enumerate() {
        *b = (i / 4096) as u8 ^ (i as u8);
    }
    let unpinned = std::env::var_os("FSGAUGE_URING_BENCH_UNPINNED").is_some();
    let transports: &[Option<bool>] = if unpinned {
        &[None, Some(true), Some(false)]
    } else {
        &[None, Some(true)]
    };
    for qd in [1u32, 32] {
        for &ring in transports {
            let dir = tempfile::Builder::new()
                .prefix("fsgauge-uring-bench-")
                .tempdir_in("/var/tmp")
                .expect("a temporary directory");
            let s = Served::start_with(dir.path(), ram.clone(), ring, u64::MAX);
            let l = attach(&s);
            let cpu0 = own_cpu_us();
            let (iops, lat, n) = fio(l.path(), qd, seconds);
            let cpu = own_cpu_us() - cpu0;
            let via = s.data_requests();
            l.detach().unwrap();
            drop(s);
            println!(
                "transport {:14} QD{qd:<2}: {iops:8.0} IOPS, mean latency {lat:6.1} us, server CPU {:5.1} us/request ({n} requests, {via} through the ring)",
                match ring {
                    None => "dev",
                    Some(true) => "uring",
                    Some(false) => "uring-unpinned",
                },
                cpu / n as f64
            );
        }
    }
}

/// What the benchmark needs and this machine lacks, if anything.
fn missing() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root");
    }
    if !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        return Some("needs /dev/fuse and loop devices");
    }
    if !Path::new(ram_disk::PARAM).exists() {
        return Some("needs a kernel with CONFIG_FUSE_IO_URING");
    }
    let fio = std::process::Command::new("fio").arg("--version").output();
    if !fio.is_ok_and(|o| o.status.success()) {
        return Some("needs fio");
    }
    None
}

/// One fio run on the loop device: (IOPS, mean completion latency µs, requests).
fn fio(dev: &Path, qd: u32, seconds: u32) -> (f64, f64, u64) {
    let out = std::process::Command::new("fio")
        .args([
            "--name=randread",
            &format!("--filename={}", dev.display()),
            "--ioengine=io_uring",
            "--direct=1",
            "--rw=randread",
            "--bs=4k",
            &format!("--iodepth={qd}"),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--output-format=json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &j["jobs"][0]["read"];
    (
        r["iops"].as_f64().unwrap(),
        r["lat_ns"]["mean"].as_f64().unwrap() / 1000.0,
        r["total_ios"].as_u64().unwrap(),
    )
}

/// This process's CPU time (user + system), µs.
fn own_cpu_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 of stat(5), counted from field 3 here.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    ticks as f64 * 1e6 / hz
}
