//! The exerciser on real testbeds. Needs root, loop devices and mkfs.ext4 / mkfs.xfs /
//! mkfs.btrfs (each test skips with a reason without them, and fails under CI).
//!
//! - No false alarms: 20,000 operations with remounts every 5,000 on ext4, xfs and btrfs,
//!   with every operation the filesystem supports; the unsupported ones are the ones the
//!   filesystem really lacks.
//! - Corruption written straight into the image while the testbed is unmounted (at the file's
//!   physical block, found with FIEMAP) is reported by the verification after the remount,
//!   at the right offset.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use crate::support::Sandbox;
use fsgauge::workload::exercise::{Config, Exerciser, FailureKind, Op, OpKind, Step};
use fsgauge::{
    host::mount,
    testbed::{Testbed, TestbedSpec},
};

fn clean_run(fs: &str, size: &str, expect_off: &[&str], extra: &[&str]) {
    if !crate::support::have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let mut args = vec![
        "exercise",
        "--fs",
        fs,
        "--fs-size",
        size,
        "--ops",
        "20000",
        "--remount-every",
        "5000",
        "--seed",
        "5",
        "--json",
    ];
    args.extend(extra);
    let o = sb.bench(&args).output().unwrap();
    let v = crate::support::json_of(&o);
    let p = &v["phases"][0];
    assert_eq!(p["name"], "exercise");
    assert_eq!(p["ops"], 20000);
    assert_eq!(p["extra"]["remounts"], 4.0);
    assert_eq!(p["extra"]["full_verifications"], 4.0);
    assert_eq!(v["testbed"]["fs"], fs);
    let warnings: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    let off_line = warnings
        .iter()
        .find(|w| w.starts_with("turned off"))
        .cloned()
        .unwrap_or_default();
    for kind in OpKind::ALL {
        let name = kind.name();
        let count = p["op_stats"][name]["count"].as_u64().unwrap();
        let turned_off = off_line.contains(&format!("{name}: "));
        // RWF_DONTCACHE depends on the kernel (6.14+) and the filesystem: either is right.
        let kernel_dependent = matches!(kind, OpKind::ReadDontcache | OpKind::WriteDontcache);
        if !kernel_dependent {
            assert_eq!(
                turned_off,
                expect_off.contains(&name),
                "{fs}: {name} turned off? {off_line:?}"
            );
        }
        if turned_off || extra.contains(&name) {
            assert_eq!(count, 0, "{fs}: {name} is off but ran");
        } else {
            assert!(count > 500, "{fs}: only {count} {name} operations");
        }
    }
    sb.assert_clean();
}

#[test]
fn ext4_runs_clean_across_remounts() {
    clean_run("ext4", "256M", &["clone"], &[]);
}

#[test]
fn xfs_runs_clean_across_remounts() {
    clean_run("xfs", "300M", &[], &[]);
}

#[test]
fn btrfs_runs_clean_across_remounts() {
    clean_run("btrfs", "256M", &["collapse", "insert"], &[]);
}

#[test]
fn direct_io_runs_clean_and_aligned() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let log = sb.path().join("log");
    let o = sb
        .bench(&[
            "exercise",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--mkfs-opts=-b 4096",
            "--ops",
            "4000",
            "--direct",
            "--procs",
            "2",
            "--remount-every",
            "2000",
            "--log",
            log.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v = crate::support::json_of(&o);
    assert_eq!(v["phases"][0]["ops"], 8000);
    assert_eq!(v["phases"][0]["extra"]["remounts"], 2.0);
    assert_eq!(
        v["phases"][0]["extra"]["full_verifications"], 4.0,
        "2 files x 2 rounds"
    );
    let errors = v["errors"].to_string();
    assert!(errors.contains("mapread: off with --direct"), "{errors}");
    for w in 0..2 {
        let text = std::fs::read_to_string(log.join(format!("exercise-{w}.log"))).unwrap();
        let mut n = 0;
        for l in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("remount"))
        {
            let op: Op = l.split_once(' ').unwrap().1.parse().unwrap();
            assert_eq!(op.off % 4096, 0, "{l}");
            assert_eq!(op.len % 4096, 0, "{l}");
            assert!(
                !matches!(op.kind, OpKind::MapRead | OpKind::MapWrite),
                "{l}"
            );
            n += 1;
        }
        assert_eq!(n, 4000);
    }
    sb.assert_clean();
}

/// Library-level testbeds set this process's ledger directory: one at a time.
static LEDGER_ENV: Mutex<()> = Mutex::new(());

/// Clears this process's ledger directory again when a test ends (also when it fails).
struct Unset;

impl Drop for Unset {
    fn drop(&mut self) {
        fsgauge::host::ledger::set_state_dir(None);
    }
}

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_FLAG_SYNC: u32 = 1;
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
const FIEMAP_EXTENT_ENCODED: u32 = 0x8;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped: u32,
    count: u32,
    reserved: u32,
    extents: [FiemapExtent; 64],
}

/// The device byte offset holding file byte `off`, from FIEMAP (after syncing the file).
fn physical_offset(path: &Path, off: u64) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let mut m = Fiemap {
        start: 0,
        length: u64::MAX,
        flags: FIEMAP_FLAG_SYNC,
        mapped: 0,
        count: 64,
        reserved: 0,
        extents: [FiemapExtent::default(); 64],
    };
    // SAFETY: FS_IOC_FIEMAP with a buffer for 64 extents, as count says.
    let r = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), FS_IOC_FIEMAP, &mut m) };
    assert_eq!(r, 0, "FIEMAP: {}", std::io::Error::last_os_error());
    let e = m.extents[..m.mapped as usize]
        .iter()
        .find(|e| e.logical <= off && off < e.logical + e.length)
        .unwrap_or_else(|| panic!("no extent holds offset {off}"));
    let bad = FIEMAP_EXTENT_UNKNOWN
        | FIEMAP_EXTENT_DELALLOC
        | FIEMAP_EXTENT_ENCODED
        | FIEMAP_EXTENT_UNWRITTEN
        | FIEMAP_EXTENT_DATA_INLINE;
    assert_eq!(e.flags & bad, 0, "extent flags {:#x}", e.flags);
    e.physical + (off - e.logical)
}

fn corruption_while_unmounted(fs: &str, size: u64) {
    if !crate::support::have_fs(fs) {
        return;
    }
    let _g = LEDGER_ENV.lock().unwrap_or_else(|p| p.into_inner());
    let sb = Sandbox::new();
    // In-process: setting FSGAUGE_STATE_DIR would leak into every child other tests start.
    fsgauge::host::ledger::set_state_dir(Some(sb.state()));
    let _unset = Unset;
    let mut spec = TestbedSpec::new(fs.parse().unwrap(), size);
    spec.workdir = sb.workdir();
    let mut tb = Testbed::create(&spec).unwrap();
    let path = tb.mountpoint().join("f");
    let cfg = Config {
        max_len: 256 << 10,
        max_op_len: 64 << 10,
        direct: false,
        pollute_eof: false,
        kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
        seed: 99,
        record: None,
    };
    let mut ex = Exerciser::create(&path, cfg, None).unwrap();
    for _ in 0..1000 {
        if let Err(f) = ex.step() {
            panic!("false alarm on {fs}:\n{}", f.render());
        }
    }
    // Fresh data at the start of the file, on disk.
    ex.apply(Op::new(OpKind::Write, 0, 64 << 10)).unwrap();
    ex.apply(Op::new(OpKind::Fsync, 0, 0)).unwrap();
    let target = 12_345u64;
    let phys = physical_offset(&path, target);
    let expected = ex.model().content()[target as usize];
    ex.close().unwrap();

    mount::unmount(tb.mountpoint()).unwrap();
    {
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(tb.device())
            .unwrap();
        let mut b = [0u8];
        dev.read_exact_at(&mut b, phys).unwrap();
        assert_eq!(b[0], expected, "FIEMAP points at the file's byte");
        dev.write_all_at(&[!expected], phys).unwrap();
        dev.sync_all().unwrap();
    }
    tb.remount().unwrap();
    ex.reopen(Step::Remount(ex.ops_done())).unwrap();
    let f = ex.verify_all().unwrap_err();
    match &f.kind {
        FailureKind::Data {
            offset,
            run,
            expected: e,
            found,
            ..
        } => {
            assert_eq!(*offset, target, "{}", f.render());
            assert_eq!(*run, 1);
            assert_eq!(e[0], expected);
            assert_eq!(found[0], !expected);
        }
        k => panic!("unexpected failure {k:?}"),
    }
    assert!(f.op.is_none(), "found by the full verification");
    assert!(f
        .render()
        .contains(&format!("offset {target:#x} ({target})")));
    ex.close().unwrap();
    drop(ex);
    tb.destroy().unwrap();
    sb.assert_clean();
}

#[test]
fn ext4_corruption_written_while_unmounted_is_found_at_its_offset() {
    corruption_while_unmounted("ext4", 256 << 20);
}

#[test]
fn xfs_corruption_written_while_unmounted_is_found_at_its_offset() {
    corruption_while_unmounted("xfs", 300 << 20);
}

/// The durability record on a real filesystem: the file read back after a clean remount
/// passes the judge at a cut after the last operation, and one byte overwritten through the
/// mount fails it, named at its offset as lost durable data.
#[test]
fn ext4_file_after_a_clean_remount_passes_the_durability_judge_and_a_changed_byte_fails() {
    use fsgauge::workload::exercise::durable::{judge, Class, Found, Problem, Verdict, What};
    if !crate::support::have_fs("ext4") {
        return;
    }
    let _g = LEDGER_ENV.lock().unwrap_or_else(|p| p.into_inner());
    let sb = Sandbox::new();
    fsgauge::host::ledger::set_state_dir(Some(sb.state()));
    let _unset = Unset;
    let mut spec = TestbedSpec::new("ext4".parse().unwrap(), 256 << 20);
    spec.workdir = sb.workdir();
    let mut tb = Testbed::create(&spec).unwrap();
    let path = tb.mountpoint().join("f");
    let cfg = Config {
        max_len: 256 << 10,
        max_op_len: 64 << 10,
        direct: false,
        pollute_eof: false,
        kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
        seed: 11,
        record: Some(2000),
    };
    let mut ex = Exerciser::create(&path, cfg, None).unwrap();
    for _ in 0..2000 {
        if let Err(f) = ex.step() {
            panic!("false alarm on ext4:\n{}", f.render());
        }
    }
    ex.close().unwrap();
    tb.remount().unwrap();
    ex.reopen(Step::Remount(ex.ops_done())).unwrap();
    ex.close().unwrap();
    let rec = ex.take_record().unwrap();
    assert_eq!(
        rec.events.len(),
        2002,
        "set-up, 2000 operations, the remount"
    );
    let last = *rec.events.last().unwrap();
    assert_eq!((last.what, last.durable), (What::Remount(2000), true));
    let found = std::fs::read(&path).unwrap();
    assert_eq!(found.len() as u64, ex.model().size());
    assert_eq!(
        judge(&rec, last.end_ns, Found::File(&found)).unwrap(),
        Verdict::Pass {
            durable_point: Some(What::Remount(2000)),
            versions: 1
        }
    );
    let target = found.len() as u64 / 3;
    {
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[!found[target as usize]], target).unwrap();
    }
    let changed = std::fs::read(&path).unwrap();
    let v = judge(&rec, last.end_ns, Found::File(&changed)).unwrap();
    let m = v.failure().unwrap();
    assert_eq!(m.class, Class::LostDurableData, "{}", m.render());
    match &m.problem {
        Problem::Data { offset, run, .. } => assert_eq!((*offset, *run), (target, 1)),
        p => panic!("{p:?}"),
    }
    assert!(
        m.headline()
            .contains(&format!("1 wrong byte(s) at offset {target:#x} ({target})")),
        "{}",
        m.headline()
    );
    drop(ex);
    tb.destroy().unwrap();
    sb.assert_clean();
}
