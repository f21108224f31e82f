//! The emulated-device server (needs root, loop devices and /dev/fuse): requests through a
//! loop device on its FUSE file take the modelled drive's time, teardown leaves nothing, and a
//! killed server fails requests (naming itself) instead of hanging them.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsgauge::device::{expectations, load_ref, DeviceModel, EmulatedDevice, Request};
use rand::{Rng, SeedableRng};

use crate::support::{have_fuse, Sandbox};

const PROFILE: &str = "deskstar-7k250";

/// A device on a sparse image in the sandbox, as large as the profile's disk.
fn start(sb: &Sandbox) -> (EmulatedDevice, u64) {
    let (p, _) = load_ref(PROFILE).unwrap();
    let size = p.capacity_bytes / 4096 * 4096;
    let image = sb.path().join("image");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(size)
        .unwrap();
    let ledger = sb.state().join("ledger");
    let dev = crate::support::start_device(&ledger, PROFILE, &image, size, 0).unwrap();
    (dev, size)
}

/// A device started in `sb` with its loop device attached and opened for direct I/O.
fn start_direct(sb: &Sandbox) -> (EmulatedDevice, std::fs::File) {
    let (mut dev, _) = start(sb);
    let loop_dev = dev.attach_loop().unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&loop_dev)
        .unwrap();
    (dev, f)
}

fn aligned(len: usize) -> Vec<u8> {
    // O_DIRECT wants 4096-aligned memory: over-allocate and slice.
    vec![0u8; len + 4096]
}

fn pread_direct(f: &std::fs::File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    let shift = buf.as_ptr().align_offset(4096);
    let b = &mut buf[shift..shift + 4096];
    std::os::unix::fs::FileExt::read_at(f, b, off)
}

fn loop_backing(dev: &Path) -> Option<String> {
    let name = dev.file_name()?.to_str()?;
    std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn mounted(path: &Path) -> bool {
    let p = path.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(p.as_str()))
}

#[test]
fn random_4k_reads_through_the_loop_device_take_the_modelled_time() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (mut dev, size) = start(&sb);
    let loop_dev = dev.attach_loop().unwrap();
    assert_eq!(
        std::fs::read_to_string(format!(
            "/sys/block/{}/queue/rotational",
            loop_dev.file_name().unwrap().to_string_lossy()
        ))
        .unwrap()
        .trim(),
        "1",
        "an HDD profile's loop device is rotational"
    );
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&loop_dev)
        .unwrap();
    let mut buf = aligned(4096);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // Warm-up: the first request finds the heads at cylinder 0.
    pread_direct(&f, &mut buf, 0).unwrap();
    let before = dev.stats().unwrap();
    let n = 300;
    let offsets: Vec<u64> = (0..n)
        .map(|_| rng.gen_range(0..size / 4096) * 4096)
        .collect();
    let pressure = crate::support::Pressure::start();
    let t0 = Instant::now();
    for &off in &offsets {
        assert_eq!(pread_direct(&f, &mut buf, off).unwrap(), 4096);
    }
    let mean_ms = t0.elapsed().as_secs_f64() * 1e3 / n as f64;
    let d = dev.stats().unwrap().delta(&before).unwrap();
    assert_eq!(d.counts.reads, n, "every read reached the server once");
    assert_eq!(d.counts.bytes_read, n * 4096);
    // Never before the model's completion: replying early would still give the right mean
    // at QD1 (the next request waits for the modelled drive) but wrong response times.
    assert_eq!(
        d.counts.early, 0,
        "requests answered before their modelled completion"
    );
    // The model's own time for the same requests (after the same warm-up read), one after
    // another: no sampling error between the two, only the rotational phase each arrival
    // meets (uniform either way: about 1% on the mean of 300).
    let (p, a) = load_ref(PROFILE).unwrap();
    let mut model = DeviceModel::new(&p, &a).unwrap();
    let mut now = model.service(Request::read(0, 0, 4096), 0).done_ns;
    let mut total = 0u64;
    for (i, &off) in offsets.iter().enumerate() {
        let d = model.service(Request::read(i as u64 + 1, off, 4096), now);
        total += d.response_ns();
        now = d.done_ns;
    }
    let want = total as f64 / 1e6 / n as f64;
    let expected = expectations(&p, &a).unwrap().qd1_random_4k_read_ms;
    let l = d.lateness();
    eprintln!(
        "QD1 random 4K: measured {mean_ms:.3} ms, model {want:.3} ms for the same requests ({:+.1}%; the model's expectation {expected:.3} ms); lateness p50 {:.3} p99 {:.3} max {:.3} ms",
        (mean_ms / want - 1.0) * 100.0,
        l.p50_ms,
        l.p99_ms,
        l.max_ms
    );
    // Never faster than the model (less 4% for the rotational phases): a server that answers
    // early is broken. Slower by the path through the loop device's kernel worker and FUSE,
    // which the server cannot see: 0.3 ms (+2.5%) in a release build on a quiet 2-core VM,
    // 2 ms (+17%) in a debug build at load 8; +25% still catches a server that adds a seek or
    // a turn.
    let err = mean_ms / want - 1.0;
    // Never early, busy or not; the upper bound only on a quiet machine (a busy one delays
    // the kernel's side of the path, which no emulator can make up).
    assert!(
        err > -0.04,
        "measured mean {mean_ms:.3} ms is below the model's {want:.3} ms"
    );
    let quiet = crate::support::quiet_enough(&pressure, "QD1 random 4K against the model");
    assert!(
        !quiet || (-0.04..0.25).contains(&err),
        "measured mean {mean_ms:.3} ms vs model {want:.3} ms for the same requests ({:+.1}%)",
        err * 100.0
    );
    // The goal is 0.5 ms; this shared 2-core VM under other tests' load reaches it only when
    // quiet, so the test holds a bound that still catches a server that sleeps wrong or
    // answers a request late by a seek.
    assert!(
        !quiet || l.p99_ms < 5.0,
        "lateness p99 {:.3} ms on a quiet machine",
        l.p99_ms
    );
    drop(f);
    dev.stop().unwrap();
    sb.assert_clean();
}

#[test]
fn teardown_leaves_no_mount_loop_device_or_process() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (mut dev, _) = start(&sb);
    let loop_dev = dev.attach_loop().unwrap();
    let file: PathBuf = dev.file().to_path_buf();
    let mount = dev.mount().to_path_buf();
    let pid = dev.server_pid();
    assert!(mounted(&mount), "the server mounted {}", mount.display());
    assert_eq!(
        loop_backing(&loop_dev).as_deref(),
        Some(file.to_str().unwrap())
    );
    drop(dev);
    assert!(!mounted(&mount), "{} still mounted", mount.display());
    assert!(!mount.exists(), "mount directory {} left", mount.display());
    assert_ne!(
        loop_backing(&loop_dev).as_deref(),
        Some(file.to_str().unwrap()),
        "{} still attached",
        loop_dev.display()
    );
    assert!(
        fsgauge::host::ledger::process_start_time(pid).is_none(),
        "server pid {pid} still running"
    );
    sb.assert_clean();
}

#[test]
fn a_killed_server_fails_reads_naming_itself_instead_of_hanging() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (mut dev, _) = start(&sb);
    let loop_dev = dev.attach_loop().unwrap();
    let pid = dev.server_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = loop_dev.clone();
    std::thread::spawn(move || {
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path);
        let r = f.and_then(|f| {
            let _ = f.as_raw_fd();
            let mut buf = aligned(4096);
            pread_direct(&f, &mut buf, 1 << 30)
        });
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a read from a killed server's device must fail, not hang");
    assert!(
        r.is_err(),
        "read from a killed server's device succeeded: {r:?}"
    );
    let e = format!("{:#}", dev.check().unwrap_err());
    assert!(
        e.contains("device server") && e.contains(&pid.to_string()) && e.contains(PROFILE),
        "{e}"
    );
    let mount = dev.mount().to_path_buf();
    drop(dev);
    assert!(!mounted(&mount), "{} still mounted", mount.display());
    sb.assert_clean();
}

/// The ledger entries left in `dir` (none when it does not exist).
fn entries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A start that fails after its ledger entry was written takes the entry away again: a
/// server that refuses its disk (larger than the profile's drive) is a set-up failure (exit
/// 2), and a ledger whose filesystem has no inode left for the entry's next update (the
/// entry itself made, then nothing more: the start fails before any server runs) leaves no
/// empty `device-PID-N.json` behind.
#[test]
fn a_failed_start_leaves_no_ledger_entry() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (p, _) = load_ref(PROFILE).unwrap();
    let image = sb.path().join("image");
    std::fs::File::create(&image).unwrap();
    let ledger = sb.state().join("ledger");
    let beyond = p.capacity_bytes;
    let e = crate::support::start_device(&ledger, PROFILE, &image, 1 << 20, beyond)
        .expect_err("a disk placed past the profile's end");
    let msg = format!("{e:#}");
    assert!(
        msg.contains("did not start") && msg.contains("exited"),
        "{msg}"
    );
    assert_eq!(fsgauge::base::error::exit_code(&e), 2, "{msg}");
    assert_eq!(entries(&ledger), Vec::<PathBuf>::new());

    // Three inodes: the tmpfs's root, the ledger directory and the entry.
    let fs =
        crate::support::Tmpfs::mount(&sb.path().join("ledgerfs"), "size=1M,nr_inodes=3,mode=0700");
    let ledger = fs.path().join("ledger");
    let e = crate::support::start_device(&ledger, PROFILE, &image, 1 << 20, 0)
        .expect_err("no room in the ledger after the entry");
    let msg = format!("{e:#}");
    assert!(msg.contains("updating ledger"), "{msg}");
    assert_eq!(entries(&ledger), Vec::<PathBuf>::new(), "{msg}");
    drop(fs);
    sb.assert_clean();
}

/// Each server thread, by name, with its scheduling policy and real-time priority
/// (/proc/PID/task/TID/stat fields 41 and 40).
fn thread_policies(pid: u32) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let comm = std::fs::read_to_string(t.join("comm")).unwrap();
        let stat = std::fs::read_to_string(t.join("stat")).unwrap();
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        // rest[0] is field 3: field N is rest[N - 3].
        let prio: u32 = rest[40 - 3].parse().unwrap();
        let policy: u32 = rest[41 - 3].parse().unwrap();
        out.push((comm.trim().to_string(), policy, prio));
    }
    out
}

/// The timing thread outranks the FUSE threads (completing a request on time comes before
/// copying another's data), both are real-time, and the bookkeeping runs at normal priority.
#[test]
fn the_timing_thread_outranks_the_fuse_threads_and_bookkeeping_is_not_real_time() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (dev, _) = start(&sb);
    // A thread names itself once it runs (std sets the name from inside the new thread), and
    // sets its policy after that; the FUSE session starts its workers as requests come: on a
    // busy machine the stats thread may not have run, the timing thread may be named but not
    // yet real-time, and one FUSE thread may be all there is when the server says it is
    // ready. Wait (up to a minute) until all of them are there and settled.
    let settled = |t: &[(String, u32, u32)]| {
        t.iter().any(|(n, _, _)| n == "device-stats")
            && t.iter().filter(|(n, _, _)| n.starts_with("fuser-")).count() >= 2
            && t.iter()
                .any(|(n, p, _)| n == "device-timing" && *p == libc::SCHED_FIFO as u32)
    };
    let mut threads = thread_policies(dev.server_pid());
    let t0 = std::time::Instant::now();
    while !settled(&threads) && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        threads = thread_policies(dev.server_pid());
    }
    let of = |name: &str| -> Vec<(u32, u32)> {
        threads
            .iter()
            .filter(|(n, _, _)| n.starts_with(name))
            .map(|&(_, p, r)| (p, r))
            .collect()
    };
    const FIFO: u32 = libc::SCHED_FIFO as u32;
    const OTHER: u32 = libc::SCHED_OTHER as u32;
    let timing = of("device-timing");
    assert_eq!(timing.len(), 1, "{threads:?}");
    let fuse = of("fuser-");
    assert!(fuse.len() >= 2, "{threads:?}");
    assert_eq!(timing[0].0, FIFO, "{threads:?}");
    for (policy, prio) in &fuse {
        assert_eq!(*policy, FIFO, "{threads:?}");
        assert!(
            timing[0].1 > *prio,
            "timing thread not above a FUSE thread: {threads:?}"
        );
    }
    assert_eq!(of("device-stats"), vec![(OTHER, 0)], "{threads:?}");
    drop(dev);
    sb.assert_clean();
}

/// The disk's bytes live in the server's memory: what is written through the loop device
/// (across the store's 1 MiB chunks) reads back, the rest of the disk reads as zeros, and a
/// discard (BLKDISCARD: the loop device punches the range) makes a range read as zeros.
#[test]
fn written_data_reads_back_and_a_discard_zeroes_it() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (dev, f) = start_direct(&sb);
    let len = 3 << 20;
    let mut buf = aligned(len);
    let shift = buf.as_ptr().align_offset(4096);
    for (i, b) in buf[shift..shift + len].iter_mut().enumerate() {
        *b = (i % 253) as u8 + 1;
    }
    let at: u64 = (7 << 20) - 8192; // crosses three chunk boundaries
    std::os::unix::fs::FileExt::write_all_at(&f, &buf[shift..shift + len], at).unwrap();
    let mut back = aligned(len + 8192);
    let s2 = back.as_ptr().align_offset(4096);
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut back[s2..s2 + len + 8192], at - 4096)
        .unwrap();
    let back = &back[s2..s2 + len + 8192];
    assert!(
        back[..4096].iter().all(|&b| b == 0),
        "before the write: zeros"
    );
    assert!(
        back[4096..4096 + len] == buf[shift..shift + len],
        "the data read back"
    );
    assert!(
        back[4096 + len..].iter().all(|&b| b == 0),
        "after the write: zeros"
    );
    // Discard the middle MiB (BLKDISCARD = _IO(0x12, 119)).
    let range: [u64; 2] = [8 << 20, 1 << 20];
    // SAFETY: BLKDISCARD reads two u64s from the pointer, which lives across the call.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), 0x1277, range.as_ptr()) };
    assert_eq!(rc, 0, "BLKDISCARD: {}", std::io::Error::last_os_error());
    let mut after = aligned(1 << 20);
    let s3 = after.as_ptr().align_offset(4096);
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut after[s3..s3 + (1 << 20)], 8 << 20).unwrap();
    assert!(
        after[s3..s3 + (1 << 20)].iter().all(|&b| b == 0),
        "discarded range reads zeros"
    );
    drop(f);
    drop(dev);
    sb.assert_clean();
}

/// Before a cold phase the run lets each emulated drive finish its write cache
/// ([`EmulatedDevice::settle`], a flush through its loop device), so that the phase starts on
/// an idle drive however long the host's cache drop took. 64 blocks written without a flush,
/// 64 MiB apart, wait in the drive's write cache (about half a second of seeks to destage):
/// read back at once, from the last (the drive destages in elevator order up from its heads,
/// so a read going up meets the destage at every block), many are hits in that cache; after
/// a settle, none is. The counts are the server's own, so a busy machine changes nothing.
#[test]
fn settling_a_drive_empties_its_write_cache() {
    if !have_fuse() {
        return;
    }
    const BLOCKS: u64 = 64;
    let sb = Sandbox::new();
    let (mut dev, f) = start_direct(&sb);
    let mut buf = aligned(2 * 4096);
    let shift = buf.as_ptr().align_offset(4096);
    buf[shift..shift + 4096].fill(7);
    // Whatever udev reads of a new device comes first.
    std::thread::sleep(Duration::from_millis(500));
    let hits_read_back = |dev: &mut EmulatedDevice, base: u64, settle: bool| -> u64 {
        let at = |i: u64| base + i * (64 << 20);
        for i in 0..BLOCKS {
            std::os::unix::fs::FileExt::write_all_at(&f, &buf[shift..shift + 4096], at(i)).unwrap();
        }
        if settle {
            dev.settle().unwrap();
        }
        let before = dev.stats().unwrap().counts.cache_hits;
        let mut back = aligned(2 * 4096);
        let s = back.as_ptr().align_offset(4096);
        for i in (0..BLOCKS).rev() {
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut back[s..s + 4096], at(i)).unwrap();
            assert_eq!(back[s], 7, "the data read back");
        }
        dev.stats().unwrap().counts.cache_hits - before
    };
    let at_once = hits_read_back(&mut dev, 1 << 20, false);
    assert!(
        at_once >= 8,
        "read at once, the drive still held them: {at_once} of {BLOCKS} hits"
    );
    assert_eq!(
        hits_read_back(&mut dev, 2 << 20, true),
        0,
        "settled, the drive has destaged them all"
    );
    drop(f);
    drop(dev);
    sb.assert_clean();
}
