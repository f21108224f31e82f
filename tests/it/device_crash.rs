//! Crash states of an emulated disk (needs root, loop devices, /dev/fuse, mkfs.ext4 and
//! e2fsck): the server's write log, a crash state served as its second file, and a second
//! loop device on it; ext4 comes back from a power cut with what it fsynced, the drive's
//! cache choice shows in the figures and the bytes, a log over its limit says so, a crash
//! state maps no more than the log holds, and nothing is left behind.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use fsgauge::device::writelog::{CrashCache, LogSummary};
use fsgauge::device::EmulatedDevice;
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use crate::support::{have_fs, have_fuse, have_program, Sandbox};

const PROFILE: &str = "deskstar-7k250";
const MIB: u64 = 1 << 20;

/// A modelled disk (model on from the start) of `size` bytes on a sparse image.
fn start(sb: &Sandbox, size: u64) -> EmulatedDevice {
    let image = sb.path().join("image");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(size)
        .unwrap();
    let ledger = sb.state().join("ledger");
    crate::support::start_device(&ledger, PROFILE, &image, size, 0).unwrap()
}

fn run(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"))
}

fn ok(cmd: &str, args: &[&str]) {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A mount, unmounted when dropped (a failing test leaves none).
struct Mounted(PathBuf);

impl Mounted {
    fn new(dev: &Path, at: &Path) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        ok("mount", &[&dev.to_string_lossy(), &at.to_string_lossy()]);
        Mounted(at.to_path_buf())
    }

    fn unmount(self) {
        ok("umount", &[&self.0.to_string_lossy()]);
        std::mem::forget(self);
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = run("umount", &["-l", &self.0.to_string_lossy()]);
    }
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// The SHA-256 of a whole file, read afresh (FUSE drops its page cache at each open).
fn digest(path: &Path) -> Vec<u8> {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; MIB as usize];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return h.finalize().to_vec();
        }
        h.update(&buf[..n]);
    }
}

fn loops_backed_by(file: &Path) -> Vec<String> {
    let out = run("losetup", &["-a"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&*file.to_string_lossy()))
        .map(str::to_string)
        .collect()
}

fn mounted(path: &Path) -> bool {
    let p = path.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(p.as_str()))
}

/// After the device is dropped: no loop device on its files, no mount, no ledger entry.
fn assert_gone(sb: &Sandbox, disk: &Path, crash: &Path, mount: &Path) {
    assert_eq!(loops_backed_by(disk), Vec::<String>::new());
    assert_eq!(loops_backed_by(crash), Vec::<String>::new());
    assert!(
        !mounted(mount),
        "the server's mount {} is left",
        mount.display()
    );
    sb.assert_clean();
}

/// The file at `path` holds exactly `want`.
fn assert_file(path: &Path, want: &[u8], what: &str) {
    let got = std::fs::read(path).unwrap_or_else(|e| panic!("{what}: {}: {e}", path.display()));
    assert_eq!(got.len(), want.len(), "{what}: size of {}", path.display());
    assert!(
        got == want,
        "{what}: {} differs from what was written",
        path.display()
    );
}

/// The last cut whose reply left by `t_ns`.
fn last_cut_by(s: &LogSummary, t_ns: u64) -> u64 {
    s.cuts
        .iter()
        .filter(|c| c.reply_ns <= t_ns)
        .map(|c| c.index)
        .max()
        .expect("a cut before the time")
}

#[test]
fn ext4_on_a_crash_state_keeps_what_it_fsynced_and_the_cache_choice_shows() {
    if !have_fs("ext4") || !have_fuse() || !have_program("e2fsck") {
        return;
    }
    let sb = Sandbox::new();
    let size = 256 * MIB;
    let mut dev = start(&sb, size);
    let (disk_file, crash_file, server_mount) = (
        dev.file().to_path_buf(),
        dev.crash_file(),
        dev.mount().to_path_buf(),
    );
    let main = dev.attach_loop().unwrap();
    let main_s = main.to_string_lossy().to_string();
    ok(
        "mkfs.ext4",
        &["-F", "-q", "-E", "nodiscard,lazy_itable_init=1", &main_s],
    );
    let mnt = sb.path().join("mnt");
    let fs = Mounted::new(&main, &mnt);
    ok("sync", &["-f", &mnt.to_string_lossy()]);
    dev.start_log(64 * MIB, None).unwrap();
    let (a, b) = (random_bytes(1, 768 * 1024), random_bytes(2, 512 * 1024));
    let mut fa = std::fs::File::create(mnt.join("a")).unwrap();
    fa.write_all(&a).unwrap();
    fa.sync_all().unwrap();
    let fsynced_ns = monotonic_ns();
    drop(fa);
    std::fs::write(mnt.join("b"), &b).unwrap();
    fs.unmount();
    let s = dev.log_summary().unwrap();
    assert!(!s.limit_reached && s.on, "{s:?}");
    assert!(s.writes > 0 && s.flushes > 0, "{s:?}");
    assert!(s.write_bytes >= (a.len() + b.len()) as u64, "{s:?}");
    assert_eq!(s.replied, s.cuts.len() as u64);
    assert_eq!((s.outside_log, s.unaligned), (0, 0));
    assert!(
        s.cuts.iter().any(|c| c.reply_ns > fsynced_ns),
        "the unmount's writes come after the fsync"
    );

    let crash = dev.attach_crash_loop().unwrap();
    let crash_s = crash.to_string_lossy().to_string();
    let cmnt = sb.path().join("crash-mnt");
    // Just after the fsync returned: the journal brings the file back, whatever the cache did.
    let at_fsync = last_cut_by(&s, fsynced_ns);
    for (cache, seed) in [(CrashCache::LoseAll, 0), (CrashCache::Random, 7)] {
        let info = dev.set_crash_state(at_fsync, cache, seed).unwrap();
        assert_eq!((info.cut, info.cache, info.seed), (at_fsync, cache, seed));
        let m = Mounted::new(&crash, &cmnt);
        assert_file(&cmnt.join("a"), &a, &format!("cut {at_fsync} {cache}"));
        m.unmount();
        ok("e2fsck", &["-fn", &crash_s]);
    }
    // After the unmount: clean without a journal to replay, and both files there.
    let last = s.replied - 1;
    let info = dev.set_crash_state(last, CrashCache::LoseAll, 0).unwrap();
    assert_eq!(
        info.dirty_bytes, 0,
        "the unmount flushed the cache: {info:?}"
    );
    ok("e2fsck", &["-fn", &crash_s]);
    let m = Mounted::new(&crash, &cmnt);
    assert_file(&cmnt.join("a"), &a, "last cut");
    assert_file(&cmnt.join("b"), &b, "last cut");
    m.unmount();
    // Where the cache held unflushed writes, keep-all and lose-all differ by exactly them.
    let dirty = (0..s.replied)
        .find(|&k| {
            dev.set_crash_state(k, CrashCache::KeepAll, 0)
                .unwrap()
                .dirty_bytes
                > 0
        })
        .expect("a cut with writes in the drive's cache");
    let keep = dev.set_crash_state(dirty, CrashCache::KeepAll, 0).unwrap();
    let keep_digest = digest(&crash_file);
    let lose = dev.set_crash_state(dirty, CrashCache::LoseAll, 0).unwrap();
    let lose_digest = digest(&crash_file);
    assert_eq!(keep.cache_kept_bytes, keep.dirty_bytes);
    assert_eq!(
        (lose.cache_lost_bytes, lose.cache_kept_bytes),
        (keep.dirty_bytes, 0)
    );
    assert_ne!(
        keep_digest, lose_digest,
        "the kept cache's bytes show in the crash state"
    );
    drop(dev);
    assert_gone(&sb, &disk_file, &crash_file, &server_mount);
}

/// Direct-I/O writes of `blocks` 4 KiB blocks of `byte` through `dev`, from block `first`.
fn write_blocks(dev: &Path, first: u64, blocks: u64, byte: u8) {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let shift = buf.as_ptr().align_offset(4096);
    let block = &mut buf[shift..shift + 4096];
    block.fill(byte);
    for i in 0..blocks {
        f.write_all_at(block, (first + i) * 4096).unwrap();
    }
    f.sync_all().unwrap();
}

#[test]
fn a_crash_state_maps_no_more_than_the_log_and_a_later_disk_write_fails_it() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let size = 1024 * MIB;
    let mut dev = start(&sb, size);
    let (disk_file, crash_file, server_mount) = (
        dev.file().to_path_buf(),
        dev.crash_file(),
        dev.mount().to_path_buf(),
    );
    let main = dev.attach_loop().unwrap();
    write_blocks(&main, 0, 64, 0xAA);
    dev.start_log(16 * MIB, None).unwrap();
    write_blocks(&main, 32, 256, 0xBB);
    let s = dev.log_summary().unwrap();
    assert!(s.write_bytes >= 256 * 4096, "{s:?}");
    let info = dev
        .set_crash_state(s.replied - 1, CrashCache::LoseAll, 0)
        .unwrap();
    assert_eq!(info.image_bytes, size);
    assert!(info.build_ns > 0, "the build time is reported: {info:?}");
    assert!(
        info.bytes_mapped <= s.write_bytes + s.undo_bytes,
        "mapped {} bytes, the log holds {} + {}",
        info.bytes_mapped,
        s.write_bytes,
        s.undo_bytes
    );
    assert!(
        info.bytes_mapped < size / 100,
        "no copy of the image: {info:?}"
    );
    // The log's last reply is the final flush: everything is on the media, and every sector
    // written during the log is mapped from the log (the store is no witness of its order).
    assert_eq!(info.dirty_bytes, 0, "{info:?}");
    assert_eq!(info.bytes_mapped, info.sectors_considered * 512, "{info:?}");
    // Before the log's first write replied: the pre-images, 256 blocks of them.
    let first_write = s.cuts.iter().find(|c| c.bytes > 0).unwrap().index;
    let info = dev
        .set_crash_state(first_write, CrashCache::LoseAll, 0)
        .unwrap();
    assert!(info.bytes_mapped >= 255 * 4096, "{info:?}");
    assert!(
        info.bytes_mapped <= s.write_bytes + s.undo_bytes,
        "{info:?}"
    );
    let crash = std::fs::File::open(&crash_file).unwrap();
    let mut block = vec![0u8; 4096];
    crash.read_exact_at(&mut block, 40 * 4096).unwrap();
    assert!(
        block.iter().all(|&b| b == 0xAA),
        "the pre-image of block 40"
    );
    crash.read_exact_at(&mut block, 200 * 4096).unwrap();
    assert!(
        block.iter().all(|&b| b == 0),
        "block 200 was never written before"
    );
    drop(crash);
    // The disk written under the crash state, outside the log: the crash file's reads fail
    // rather than mix the two, and no crash state is built any more.
    dev.stop_log().unwrap();
    write_blocks(&main, 1000, 1, 0xCC);
    let crash = std::fs::File::open(&crash_file).unwrap();
    let err = crash.read_exact_at(&mut block, 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    drop(crash);
    let err = dev.set_crash_state(0, CrashCache::LoseAll, 0).unwrap_err();
    assert!(
        format!("{err:#}").contains("outside the write log"),
        "{err:#}"
    );
    drop(dev);
    assert_gone(&sb, &disk_file, &crash_file, &server_mount);
}

#[test]
fn a_write_log_over_its_limit_says_so_and_builds_no_crash_state() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let mut dev = start(&sb, 64 * MIB);
    let main = dev.attach_loop().unwrap();
    dev.start_log(64 * 1024, None).unwrap();
    write_blocks(&main, 0, 64, 0x11);
    let s = dev.log_summary().unwrap();
    assert!(s.limit_reached && !s.on, "{s:?}");
    assert_eq!(s.limit_bytes, 64 * 1024);
    assert!(s.bytes <= s.limit_bytes, "{s:?}");
    assert!(s.writes < 64, "the log stopped at its limit: {s:?}");
    let err = dev.set_crash_state(0, CrashCache::LoseAll, 0).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("reached its limit of 65536 bytes"), "{msg}");
    assert!(
        err.downcast_ref::<fsgauge::base::error::BadInput>()
            .is_some(),
        "a refusal is bad input: {msg}"
    );
    drop(dev);
    sb.assert_clean();
}

/// Set for the child process of the SIGKILL test: the sandbox it works in.
const CHILD_ENV: &str = "FSGAUGE_TEST_CRASH_LOOP_CHILD";

/// Not a test of its own: the child of the SIGKILL test (run only with [`CHILD_ENV`] set).
/// Starts a device with both loop devices, says where they are, and waits to be killed.
#[test]
fn crash_loop_child_for_the_sigkill_test() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    // Crash states need /dev/fuse (through the ring there is no crash file): start_device
    // serves the disk through the tests' transport, dev.
    let image = dir.join("image");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    let ledger = dir.join("state").join("ledger");
    let mut dev = crate::support::start_device(&ledger, PROFILE, &image, 64 * MIB, 0).unwrap();
    dev.attach_loop().unwrap();
    dev.start_log(MIB, None).unwrap();
    let crash = dev.attach_crash_loop().unwrap();
    // Past the test harness's capture of println!, which --nocapture does not always lift.
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "crash-loop {} {}",
        crash.display(),
        dev.crash_file().display()
    )
    .unwrap();
    out.flush().unwrap();
    drop(out);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[test]
fn testbed_cleanup_removes_the_crash_loop_a_sigkill_left() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "device_crash::crash_loop_child_for_the_sigkill_test",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, sb.path())
        .env("CI", "")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let (crash_loop, crash_file) = loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "the child ended before attaching its crash loop");
        // The harness's "test NAME ... " comes first on the same line.
        if let Some(at) = line.find("crash-loop ") {
            let rest = line[at + "crash-loop ".len()..].trim();
            let (l, f) = rest.split_once(' ').unwrap();
            break (PathBuf::from(l), PathBuf::from(f));
        }
    };
    assert_eq!(
        loops_backed_by(&crash_file).len(),
        1,
        "{}",
        crash_loop.display()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let out = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    assert!(
        out.status.success(),
        "cleanup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(loops_backed_by(&crash_file), Vec::<String>::new());
    assert!(!mounted(crash_file.parent().unwrap()));
    sb.assert_clean();
}
