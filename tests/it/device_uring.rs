//! FUSE over io_uring for the device server (needs root, loop devices and /dev/fuse; the
//! ring tests need a kernel with `CONFIG_FUSE_IO_URING`): a RAM disk served through the ring
//! reads back through a loop device what was written to it, with every data request counted
//! on the ring; where the kernel does not offer the ring, the same disk is served through
//! /dev/fuse. `benches/uring_transport.rs` measures both transports with fio.
//!
//! The tests set /sys/module/fuse/parameters/enable_uring for their run and put it back as
//! they found it; they run one at a time (other FUSE servers are not affected: the parameter
//! only lets the kernel offer the ring to a server that asks).

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::ram_disk::{attach, Param, Ram, Served, PARAM};
use crate::support::{have_fuse, skip, Sandbox};

/// The tests here flip a module parameter: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// For a ring test: one at a time, the module parameter set to `on` (put back on drop);
/// None, said, where the kernel has no ring or the parameter cannot be set.
fn ring_param(on: bool) -> Option<(Param, std::sync::MutexGuard<'static, ()>)> {
    if !Path::new(PARAM).exists() {
        skip("needs a kernel with CONFIG_FUSE_IO_URING");
        return None;
    }
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(param) = Param::set(on) else {
        skip("cannot set /sys/module/fuse/parameters/enable_uring");
        return None;
    };
    // The parameter is put back before the lock is let go (fields drop in order).
    Some((param, one))
}

/// Writes a pattern through the loop device (O_DIRECT, 4K and 1M requests) and reads it back.
fn pattern_round_trip(dev: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let mut buf = vec![0u8; (2 << 20) + 4096];
    let shift = buf.as_ptr().align_offset(4096);
    let block = &mut buf[shift..shift + (1 << 20)];
    let pattern = |off: u64, b: &mut [u8]| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = ((off as usize + i) / 4096 * 7 + i % 251) as u8;
        }
    };
    for (off, len) in [(0u64, 4096usize), (12 << 20, 1 << 20), (40 << 20, 8192)] {
        pattern(off, &mut block[..len]);
        f.write_all_at(&block[..len], off).unwrap();
    }
    f.sync_all().unwrap();
    for (off, len) in [(0u64, 4096usize), (12 << 20, 1 << 20), (40 << 20, 8192)] {
        block[..len].fill(0);
        f.read_exact_at(&mut block[..len], off).unwrap();
        let mut want = vec![0u8; len];
        pattern(off, &mut want);
        assert!(
            block[..len] == want[..],
            "{len} bytes at {off} read back as written"
        );
    }
}

#[test]
fn a_ram_disk_served_through_the_ring_reads_back_what_was_written() {
    if !have_fuse() {
        return;
    }
    let Some(_param) = ring_param(true) else {
        return;
    };
    let sb = Sandbox::new();
    let s = Served::start(sb.path(), Ram::zeroed(64 << 20), true);
    let l = attach(&s);
    pattern_round_trip(l.path());
    let through_ring = s.data_requests();
    let namespace = s
        .counts
        .as_ref()
        .map_or(0, |c| c.other.load(Ordering::Relaxed));
    l.detach().unwrap();
    // Once the ring is up the kernel sends it every request but FORGET and INTERRUPT: the
    // loop device's open of the disk file (its lookup, open, getattr) came through it too.
    assert!(
        namespace >= 2,
        "namespace requests through the ring: {namespace}"
    );
    assert_eq!(
        *s.asked.lock().unwrap(),
        Some(true),
        "INIT asked for the ring"
    );
    // 3 writes, a flush, 3 reads at least (the loop device may split none of them).
    assert!(
        through_ring >= 7,
        "the data requests went through the ring: {through_ring}"
    );
}

#[test]
fn a_request_the_server_drops_fails_with_eio_instead_of_hanging() {
    use std::os::unix::fs::OpenOptionsExt;
    if !have_fuse() {
        return;
    }
    let Some(_param) = ring_param(true) else {
        return;
    };
    let sb = Sandbox::new();
    let s = Served::start_with(sb.path(), Ram::zeroed(64 << 20), Some(true), 32 << 20);
    let l = attach(&s);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(l.path())
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let shift = buf.as_ptr().align_offset(4096);
    let block = &mut buf[shift..shift + 4096];
    f.read_exact_at(block, 0).unwrap();
    let e = f.read_exact_at(block, 40 << 20).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    drop(f);
    l.detach().unwrap();
}

#[test]
fn without_the_ring_on_offer_the_disk_is_served_through_dev_fuse() {
    if !have_fuse() {
        return;
    }
    let Some(_param) = ring_param(false) else {
        return;
    };
    let sb = Sandbox::new();
    let s = Served::start(sb.path(), Ram::zeroed(64 << 20), true);
    let l = attach(&s);
    pattern_round_trip(l.path());
    l.detach().unwrap();
    assert_eq!(*s.asked.lock().unwrap(), Some(false), "INIT did not ask");
    assert_eq!(s.data_requests(), 0, "nothing went through the ring");
    let _ = std::io::stderr().flush();
}

/// The server's threads as the `--run` script below finds them after 16 direct 4K writes,
/// a flush and 16 direct 4K reads (read back and compared): one line per thread, its name
/// and voluntary context switches; and the nanoseconds the 33 requests took.
const THREADS_AFTER_IO: &str = r#"
set -e
dd if=/dev/urandom of="$OUT/pattern" bs=4096 count=16 status=none
t0=$(date +%s%N)
dd if="$OUT/pattern" of="$FSGAUGE_DEVICE" bs=4096 seek=100 oflag=direct conv=fsync status=none
dd if="$FSGAUGE_DEVICE" of="$OUT/back" bs=4096 skip=100 count=16 iflag=direct status=none
t1=$(date +%s%N)
echo $((t1 - t0)) > "$OUT/elapsed"
cmp "$OUT/pattern" "$OUT/back"
for t in /proc/$FSGAUGE_SERVER_PID/task/*; do
  echo "$(cat "$t/comm") $(sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$t/status")" >> "$OUT/threads"
done
"#;

/// Voluntary context switches of the server's threads whose names start with `prefix`.
/// `devices check PROFILE` on a 64M disk with a 0.2 s time box, running `script` with `$OUT`
/// a new directory of the sandbox (returned) and `FSGAUGE_DEVICE_TRANSPORT` set to
/// `transport` (None: unset, the default `auto`).
fn check_running(
    sb: &Sandbox,
    profile: &str,
    transport: Option<&str>,
    script: &str,
) -> (std::process::Command, PathBuf) {
    let out = sb.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let mut c = sb.cmd();
    c.env_remove("FSGAUGE_DEVICE_TRANSPORT");
    if let Some(t) = transport {
        c.env("FSGAUGE_DEVICE_TRANSPORT", t);
    }
    c.env("OUT", &out)
        .args([
            "devices",
            "check",
            profile,
            "--size",
            "64M",
            "--seconds",
            "0.2",
        ])
        .args(["--run", script]);
    (c, out)
}

fn switches(threads: &str, prefix: &str) -> Vec<u64> {
    threads
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, n)| n.trim().parse().unwrap())
        .collect()
}

/// Who took a disk's requests.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Taker {
    /// A thread per CPU on the ring (a disk that answers at once).
    RingThreads,
    /// The timing thread on the ring (a modelled disk).
    TimingThread,
    /// The FUSE threads, on /dev/fuse.
    DevFuse,
}

#[test]
fn the_device_server_takes_the_ring_where_the_kernel_offers_it() {
    if !have_fuse() {
        return;
    }
    // (profile, FSGAUGE_DEVICE_TRANSPORT, enable_uring before, who takes the requests, what
    // the server says). A modelled disk (a constant 1 ms, answered by the timing thread) has
    // its ring taken by the timing thread itself.
    let cases = [
        ("ram", Some("uring"), true, Taker::RingThreads, None),
        ("ram:constant=1ms", None, true, Taker::TimingThread, None),
        // auto turns the kernel's switch on (root), as uring does.
        (
            "ram:constant=1ms",
            None,
            false,
            Taker::TimingThread,
            Some("turned on FUSE over io_uring"),
        ),
        // dev keeps /dev/fuse, with the switch on.
        ("ram:constant=1ms", Some("dev"), true, Taker::DevFuse, None),
        (
            "ram",
            Some("uring"),
            false,
            Taker::RingThreads,
            Some("turned on FUSE over io_uring"),
        ),
    ];
    for (profile, transport, on, taker, says) in cases {
        let Some(_param) = ring_param(on) else {
            return;
        };
        let what = format!("{profile} with {transport:?}, enable_uring {on}");
        let sb = Sandbox::new();
        let (c, out) = check_running(&sb, profile, transport, THREADS_AFTER_IO);
        let done = crate::support::run_within(c, 120, "devices check with the ring");
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{what}: {err}");
        match says {
            Some(m) => assert!(err.contains(m), "{what}: says {m:?}: {err}"),
            None => assert!(!err.contains("through /dev/fuse"), "{what}: {err}"),
        }
        let threads = std::fs::read_to_string(out.join("threads")).unwrap();
        let ring_threads = switches(&threads, "fuse-ring-").iter().sum::<u64>();
        let timing = switches(&threads, "device-timing").iter().sum::<u64>();
        let fuse = switches(&threads, "fuser-").iter().sum::<u64>();
        // 16 writes, a flush and 16 reads, each its own request at QD1.
        let took = match taker {
            Taker::RingThreads => ring_threads,
            Taker::TimingThread => timing,
            Taker::DevFuse => fuse,
        };
        assert!(took >= 33, "{what}: {taker:?} took the requests: {threads}");
        if taker == Taker::TimingThread {
            assert_eq!(ring_threads, 0, "{what}: no ring threads: {threads}");
            assert!(fuse < 33, "{what}: not the FUSE threads: {threads}");
        }
        if profile.contains("constant=1ms") {
            // Each request took its modelled millisecond at least, and the model counted it.
            let ns: u64 = std::fs::read_to_string(out.join("elapsed"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert!(ns >= 33_000_000, "{what}: 33 requests in {ns} ns");
            let line = err
                .lines()
                .find(|l| l.starts_with("--run:"))
                .unwrap_or_else(|| panic!("{what}: no --run line: {err}"));
            let n: u64 = line
                .trim_start_matches("--run:")
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(n >= 33, "{what}: the model counted {n} requests: {line}");
        }
        sb.assert_clean();
    }
}

/// A transport the server does not know is refused as its flags are parsed (exit 2), whether
/// the server is given it (`--transport`) or a command that describes a disk reads it from
/// the user's variable (`devices check`); a server reads no environment for it.
#[test]
fn a_transport_the_server_does_not_know_is_refused() {
    let sb = Sandbox::new();
    let serve = |more: &[&str]| {
        let mut c = sb.cmd();
        c.env("FSGAUGE_DEVICE_TRANSPORT", "rdma").args([
            "devices",
            "serve",
            "--profile",
            "ram",
            "--size",
            "1048576",
            "--offset",
            "0",
            "--image",
        ]);
        c.arg(sb.path().join("image"))
            .arg("--mount")
            .arg(sb.path().join("mnt"));
        c.args(more);
        c.output().unwrap()
    };
    let done = serve(&["--transport", "rdma"]);
    assert_eq!(done.status.code(), Some(2), "bad input");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        err.contains("\"rdma\": give auto")
            && err.contains("uring")
            && err.contains("dev (/dev/fuse)"),
        "{err}"
    );
    // Without --transport the variable is not the server's: it refuses the bad store it is
    // given, and says nothing of the transport.
    let done = serve(&["--store", "disk"]);
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        !err.contains("rdma"),
        "the server read the environment: {err}"
    );
    let done = sb
        .quick_ram_check()
        .env("FSGAUGE_DEVICE_TRANSPORT", "rdma")
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(2), "bad input");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        err.contains("FSGAUGE_DEVICE_TRANSPORT=\"rdma\": give auto"),
        "{err}"
    );
    sb.assert_clean();
}

#[test]
fn a_testbed_on_a_modelled_disk_runs_through_the_ring() {
    if !have_fuse() || !crate::support::have_fs("ext4") {
        return;
    }
    let Some(_param) = ring_param(true) else {
        return;
    };
    // The default transport (auto) with the kernel offering the ring: the timing thread
    // takes the disk's requests; a cold remove reads the tree back through the model.
    let sb = Sandbox::new();
    let mut c = sb.bench(&[
        "bench",
        "interleave",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--device-model",
        "deskstar-7k250:cache=off",
        "--dirs",
        "10",
        "--files",
        "20",
        "--cold",
        "drop",
        "--quiet",
    ]);
    c.env_remove("FSGAUGE_DEVICE_TRANSPORT");
    let done = crate::support::run_within(c, 300, "a modelled testbed through the ring");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(!err.contains("/dev/fuse"), "through the ring: {err}");
    let runs = sb.results();
    assert_eq!(runs.len(), 1);
    let remove = runs[0]
        .phases
        .iter()
        .find(|p| p.name == "remove")
        .expect("remove");
    let d = remove.device_model.as_ref().expect("a record of the phase");
    assert!(d.counts.reads > 0, "{d:?}");
    assert_eq!(d.counts.unmodelled, 0, "the phase is modelled: {d:?}");
    assert_eq!(d.counts.early, 0, "no reply before its time: {d:?}");
    assert!(d.service_ns.mean > 1e6, "a seek and a rotation each: {d:?}");
    // The result says which transport served the disk; the switch was on before the run.
    let info = runs[0].testbed.device_model.as_ref().expect("the model");
    assert_eq!(info.transport, "ring", "{info:?}");
    assert!(!info.enable_uring_set_by_run, "{info:?}");
    sb.assert_clean();
}

/// fio at QD16 with mixed request sizes, then a read-back check.
const MIXED_VERIFY: &str = r#"
set -e
fio --name=mixed --filename="$FSGAUGE_DEVICE" --direct=1 --ioengine=libaio --iodepth=16 \
  --rw=randwrite --bsrange=4k-1m --size=48m --verify=crc32c --verify_fatal=1 --do_verify=1 \
  --randseed=7 --output-format=terse > "$OUT/fio" 2>&1
dd if=/dev/urandom of="$OUT/pattern" bs=1M count=2 status=none
dd if="$OUT/pattern" of="$FSGAUGE_DEVICE" bs=1M seek=50 oflag=direct status=none
dd if="$OUT/pattern" of="$FSGAUGE_DEVICE" bs=4096 count=1 seek=12928 oflag=direct status=none
cp "$OUT/pattern" "$OUT/expect"
dd if="$OUT/pattern" of="$OUT/expect" bs=4096 count=1 seek=128 conv=notrunc status=none
dd if="$FSGAUGE_DEVICE" of="$OUT/back" bs=1M skip=50 count=2 iflag=direct status=none
cmp "$OUT/expect" "$OUT/back"
"#;

#[test]
fn a_modelled_disk_through_the_ring_reads_back_every_byte_of_mixed_writes_at_qd16() {
    if !have_fuse() || !crate::support::have_program("fio") {
        skip("needs /dev/fuse and fio");
        return;
    }
    let Some(_param) = ring_param(true) else {
        return;
    };
    // A modelled disk (every request 100 µs), so the timing thread takes the ring and moves
    // the data of writes from 4 KiB to 1 MiB, 16 at a time, in the order they came, between
    // its replies; fio checks every block it wrote, and a 4 KiB write over the middle of a
    // 1 MiB one reads back after it.
    let sb = Sandbox::new();
    let (c, out) = check_running(&sb, "ram:constant=100us", None, MIXED_VERIFY);
    let done = crate::support::run_within(c, 300, "fio verify through the ring");
    let err = String::from_utf8_lossy(&done.stderr);
    let fio = std::fs::read_to_string(out.join("fio")).unwrap_or_default();
    assert!(done.status.success(), "{err}\nfio: {fio}");
    assert!(
        !err.contains("through /dev/fuse"),
        "through the ring: {err}"
    );
    sb.assert_clean();
}

/// A run that turns the machine's `enable_uring` on says so in its result, with the ring as
/// the disk's transport.
#[test]
fn a_result_says_the_run_turned_the_ring_on() {
    if !have_fuse() || !crate::support::have_fs("ext4") {
        return;
    }
    let Some(_param) = ring_param(false) else {
        return;
    };
    let sb = Sandbox::new();
    let mut c = sb.bench(&[
        "bench",
        "interleave",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--device-model",
        "deskstar-7k250",
        "--dirs",
        "2",
        "--files",
        "5",
        "--cold",
        "none",
        "--quiet",
    ]);
    c.env_remove("FSGAUGE_DEVICE_TRANSPORT");
    let done = crate::support::run_within(c, 300, "a run turning the ring on");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let runs = sb.results();
    let info = runs[0].testbed.device_model.as_ref().expect("the model");
    assert_eq!(info.transport, "ring", "{info:?}");
    assert!(info.enable_uring_set_by_run, "{info:?}");
    sb.assert_clean();
}
