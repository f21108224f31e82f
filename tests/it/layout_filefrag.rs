//! `fsgauge frag` against `filefrag` on real testbeds: ext4, ext4 without extents
//! (block-mapped), ext4 with inline data, ext2, ext3, xfs and btrfs, with trees fragmented on
//! purpose (round-robin appends with fsync, sparse files, preallocated files, 0-byte and
//! one-block files). Every file's extent count must equal filefrag's; on ext2/3/4 the on-disk
//! method (inode tables read from the device) must give every file the same record as FIEMAP.
//!
//! Needs root, loop devices, mkfs.ext4/xfs/btrfs and filefrag; skips with a reason otherwise.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Sandbox;

/// A testbed made with `fsgauge testbed create`, destroyed on drop.
struct Bed<'a> {
    sb: &'a Sandbox,
    name: String,
    mnt: PathBuf,
    device: PathBuf,
}

impl<'a> Bed<'a> {
    fn create(sb: &'a Sandbox, fs: &str, size: &str, mkfs_opts: &str) -> Self {
        let out = sb
            .cmd()
            .args([
                "testbed",
                "create",
                "--fs",
                fs,
                "--fs-size",
                size,
                "--mkfs-opts",
                mkfs_opts,
            ])
            .arg("--workdir")
            .arg(sb.workdir())
            .output()
            .expect("run fsgauge");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "testbed create failed: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
                .unwrap_or_else(|| panic!("no {k} in {text}"))
        };
        Bed {
            sb,
            name: field("name:"),
            mnt: PathBuf::from(field("mountpoint:")),
            device: PathBuf::from(field("device:")),
        }
    }
}

impl Drop for Bed<'_> {
    fn drop(&mut self) {
        let _ = self
            .sb
            .cmd()
            .args(["testbed", "destroy", &self.name])
            .output();
    }
}

fn write_all(path: &Path, data: &[u8]) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(data).expect("write");
}

/// fallocate worked, or the file cannot have it (block-mapped ext4 files: EOPNOTSUPP).
fn fallocate_ok(rc: i32) {
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "fallocate: {e}");
    }
}

/// Builds a tree fragmented on purpose below `root`.
pub fn fragmented_tree(root: &Path, block: usize) {
    let rr = root.join("roundrobin");
    std::fs::create_dir_all(&rr).expect("mkdir");
    let mut files: Vec<std::fs::File> = (0..6)
        .map(|i| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(rr.join(format!("f{i}")))
                .expect("open")
        })
        .collect();
    let piece = vec![b'r'; 2 * block];
    for _round in 0..30 {
        for f in &mut files {
            f.write_all(&piece).expect("append");
            f.sync_all().expect("fsync");
        }
    }
    // Sparse files: data islands with holes, and one truncated up to leave a trailing hole.
    let sp = root.join("sparse");
    std::fs::create_dir_all(&sp).expect("mkdir");
    for i in 1..=3u64 {
        let f = std::fs::File::create(sp.join(format!("s{i}"))).expect("create");
        for k in 0..6u64 {
            f.write_all_at(&vec![b's'; block * i as usize], k * 16 * block as u64 * i)
                .expect("pwrite");
        }
        f.set_len(100 * block as u64 * i).expect("truncate up");
    }
    // Far-apart blocks: on block-mapped ext2/3/4 they sit below the double- and triple-indirect
    // blocks (triple starts at 64.3 MiB with 1 KiB blocks, 4 GiB with 4 KiB blocks).
    let far = std::fs::File::create(sp.join("far")).expect("create");
    let triple = if block == 1024 {
        70 << 20
    } else {
        (4u64 << 30) + (200 << 20)
    };
    for at in [0u64, 30 << 20, triple] {
        far.write_all_at(&vec![b'f'; block], at)
            .expect("pwrite far");
    }
    // Preallocated files: fallocate, partly written; and one with KEEP_SIZE past EOF.
    let pa = root.join("prealloc");
    std::fs::create_dir_all(&pa).expect("mkdir");
    for i in 0..3u64 {
        let f = std::fs::File::create(pa.join(format!("p{i}"))).expect("create");
        // SAFETY: valid descriptor.
        let rc =
            unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, (64 * block as u64 * (i + 1)) as i64) };
        fallocate_ok(rc);
        f.write_all_at(&vec![b'p'; block], block as u64 * 3 * i)
            .expect("pwrite");
    }
    let f = std::fs::File::create(pa.join("keep-size")).expect("create");
    f.write_all_at(&vec![b'k'; block], 0).expect("pwrite");
    // SAFETY: valid descriptor.
    let rc = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            (32 * block) as i64,
        )
    };
    fallocate_ok(rc);
    // 0-byte, one-block and tiny files.
    let sm = root.join("small");
    std::fs::create_dir_all(&sm).expect("mkdir");
    for i in 0..4 {
        write_all(&sm.join(format!("empty{i}")), b"");
        write_all(&sm.join(format!("one{i}")), &vec![b'o'; block]);
        write_all(&sm.join(format!("tiny{i}")), b"hello");
    }
    // A larger file written in interleaved pieces with another (crosses indirect-block
    // boundaries on block-mapped files).
    let big = root.join("big");
    std::fs::create_dir_all(&big).expect("mkdir");
    let mut a = std::fs::File::create(big.join("a")).expect("create");
    let mut b = std::fs::File::create(big.join("b")).expect("create");
    let chunk = vec![b'b'; 64 * block];
    for _ in 0..8 {
        a.write_all(&chunk).expect("write");
        a.sync_all().expect("fsync");
        b.write_all(&chunk).expect("write");
        b.sync_all().expect("fsync");
    }
}

/// filefrag's extent count for every regular file below `root` (`extra` e.g. `-B`).
pub fn filefrag_counts(root: &Path, extra: &[&str]) -> BTreeMap<String, u64> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                files.push(e.path());
            }
        }
    }
    let out = Command::new("filefrag")
        .args(extra)
        .args(&files)
        .output()
        .expect("run filefrag");
    assert!(
        out.status.success(),
        "filefrag failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (path, rest) = line.rsplit_once(": ").expect("filefrag line");
        let n: u64 = rest
            .split_whitespace()
            .next()
            .expect("count")
            .parse()
            .expect("number");
        m.insert(path.to_string(), n);
    }
    assert_eq!(m.len(), files.len(), "filefrag reported every file");
    m
}

/// `fsgauge frag --per-file --format json` (streamed) → path → extents, plus the summary.
pub fn frag_counts(sb: &Sandbox, root: &Path) -> (BTreeMap<String, u64>, serde_json::Value) {
    let out = sb
        .cmd()
        .args(["frag", "--per-file", "--format", "json", "--threads", "2"])
        .arg(root)
        .output()
        .expect("run fsgauge frag");
    let doc = crate::support::json_of(&out);
    let mut m = BTreeMap::new();
    for f in doc["files"].as_array().expect("files array") {
        m.insert(
            f["path"].as_str().expect("path").to_string(),
            f["extents"].as_u64().expect("extents"),
        );
    }
    (m, doc["summary"].clone())
}

/// Every file's record from `fsgauge frag --per-file --format json --method METHOD`, by path,
/// and the summary.
fn records(
    sb: &Sandbox,
    root: &Path,
    method: &str,
) -> (BTreeMap<String, serde_json::Value>, serde_json::Value) {
    let out = sb
        .cmd()
        .args(["frag", "--per-file", "--format", "json", "--method", method])
        .arg(root)
        .output()
        .expect("run fsgauge frag");
    let doc = crate::support::json_of(&out);
    let mut m = BTreeMap::new();
    for f in doc["files"].as_array().expect("files array") {
        m.insert(f["path"].as_str().expect("path").to_string(), f.clone());
    }
    (m, doc["summary"].clone())
}

/// The on-disk method reads every file below `root` from the device and gives each the same
/// record as FIEMAP (size, allocated, extents, ideal, layout score, holes, flags, first and last
/// block, block-mapped) — all but the raw extent count, which the on-disk reader gives in the
/// merged form of a warm extent-status cache (never more than FIEMAP's). The summaries agree
/// too. Returns the on-disk records.
fn assert_methods_agree(
    sb: &Sandbox,
    root: &Path,
    what: &str,
) -> BTreeMap<String, serde_json::Value> {
    assert_methods_agree_but(sb, root, what, 0)
}

/// As [`assert_methods_agree`], with `fallbacks` files mapped by FIEMAP under `--method ondisk`.
fn assert_methods_agree_but(
    sb: &Sandbox,
    root: &Path,
    what: &str,
    fallbacks: u64,
) -> BTreeMap<String, serde_json::Value> {
    let (fiemap, fs) = records(sb, root, "fiemap");
    let (ondisk, os) = records(sb, root, "ondisk");
    assert_eq!(fs["method"], "fiemap");
    assert_eq!(os["method"], "ondisk");
    assert_eq!(fs["ondisk_files"].as_u64(), Some(0), "{what}: {fs}");
    let files = os["files"].as_u64().expect("files");
    assert_eq!(
        os["ondisk_files"].as_u64(),
        Some(files - fallbacks),
        "{what}: every file but {fallbacks} read on disk: {os}"
    );
    assert_eq!(os["fiemap_files"].as_u64(), Some(fallbacks), "{what}: {os}");
    assert_eq!(
        fiemap.keys().collect::<Vec<_>>(),
        ondisk.keys().collect::<Vec<_>>()
    );
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().expect("record");
        assert!(o.remove("method").is_some());
        o.remove("raw_extents");
        v
    };
    for (path, f) in &fiemap {
        let o = &ondisk[path];
        if fallbacks == 0 {
            assert_eq!(o["method"], "ondisk", "{path}");
        }
        assert_eq!(strip(f), strip(o), "{what}: {path}: FIEMAP vs on-disk");
        assert!(
            o["raw_extents"].as_u64() <= f["raw_extents"].as_u64(),
            "{what}: {path}: raw extents {} on disk, {} FIEMAP",
            o["raw_extents"],
            f["raw_extents"]
        );
    }
    let summary = |s: &serde_json::Value| {
        let mut s = s.clone();
        let o = s.as_object_mut().expect("summary");
        for k in [
            "method",
            "ondisk_files",
            "fiemap_files",
            "method_notes",
            "worst",
        ] {
            o.remove(k);
        }
        s
    };
    assert_eq!(summary(&fs), summary(&os), "{what}: summaries differ");
    ondisk
}

/// As a user who cannot read the block device, `auto` maps every file with FIEMAP and says
/// why; `ondisk` refuses with exit code 2 before scanning.
fn unprivileged_falls_back_to_fiemap(sb: &Sandbox, root: &Path, files: u64) {
    use std::os::unix::fs::PermissionsExt;
    // The path down to the testbed must be walkable for the unprivileged user.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let nobody = |method: &str| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_fsgauge"),
                "frag",
                "--format",
                "json",
                "--method",
                method,
            ])
            .arg(root)
            .output()
            .expect("setpriv")
    };
    let doc = crate::support::json_of(&nobody("auto"));
    let s = &doc["summary"];
    assert_eq!(s["files"].as_u64(), Some(files), "{s}");
    assert_eq!(s["ondisk_files"].as_u64(), Some(0), "{s}");
    assert_eq!(s["fiemap_files"].as_u64(), Some(files), "{s}");
    let notes = s["method_notes"].to_string();
    assert!(
        notes.contains("opening /dev/") && notes.contains("FIEMAP used"),
        "{notes}"
    );
    let out = nobody("ondisk");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--method ondisk") && err.contains("opening /dev/"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing scanned");
}

fn check(fs: &str, size: &str, mkfs_opts: &str, block: usize) {
    if !crate::support::have_fs(fs) || !crate::support::have_program("filefrag") {
        return;
    }
    let sb = Sandbox::new();
    {
        let bed = Bed::create(&sb, fs, size, mkfs_opts);
        let root = bed.mnt.join("tree");
        fragmented_tree(&root, block);
        if fs.starts_with("ext") {
            let recs = assert_methods_agree(&sb, &root, &format!("{fs} {mkfs_opts}"));
            let prealloc = &recs[root.join("prealloc/p0").to_str().expect("utf8")];
            if fs == "ext4" {
                assert_eq!(prealloc["flags"]["unwritten"], true, "{prealloc}");
                unprivileged_falls_back_to_fiemap(&sb, &root, recs.len() as u64);
            }
        } else {
            // Asked for on-disk reading where it cannot be done: refused, nothing scanned.
            let out = sb
                .cmd()
                .args(["frag", "--method", "ondisk"])
                .arg(&root)
                .output()
                .expect("run fsgauge frag");
            assert_eq!(out.status.code(), Some(2), "{fs}: --method ondisk");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("ext2/3/4 only"), "{fs}: {err}");
            let (_, auto) = records(&sb, &root, "auto");
            assert_eq!(auto["ondisk_files"].as_u64(), Some(0), "{fs}: {auto}");
            assert_eq!(auto["fiemap_files"], auto["files"], "{fs}: {auto}");
        }
        // filefrag without -s: make sure everything is placed first.
        nix::unistd::sync();
        let ours_before_theirs = frag_counts(&sb, &root);
        let theirs = filefrag_counts(&root, &[]);
        let (ours, summary) = ours_before_theirs;
        assert_eq!(
            ours, theirs,
            "{fs} {mkfs_opts}: extent counts differ from filefrag"
        );
        assert_eq!(summary["files"].as_u64(), Some(theirs.len() as u64));
        assert_eq!(
            summary["extents"].as_u64(),
            Some(theirs.values().sum::<u64>())
        );
        let max = theirs.values().max().copied().unwrap_or(0);
        assert!(
            max > 1,
            "{fs}: the tree should have fragmented files (max extents {max})"
        );
        assert!(
            theirs.values().any(|&n| n == 0),
            "{fs}: 0-byte files have no extents"
        );
        let _ = &bed.device;
    }
    sb.assert_clean();
}

#[test]
fn ext4_matches_filefrag() {
    check("ext4", "256M", "", 4096);
}

#[test]
fn ext3_matches_filefrag() {
    check("ext3", "256M", "-b 4096", 4096);
}

#[test]
fn ext2_matches_filefrag() {
    check("ext2", "256M", "-b 1024", 1024);
}

#[test]
fn ext4_inline_data_matches_filefrag() {
    if !crate::support::have_fs("ext4") || !crate::support::have_program("filefrag") {
        return;
    }
    let sb = Sandbox::new();
    {
        let bed = Bed::create(&sb, "ext4", "256M", "-O inline_data -I 256");
        let root = bed.mnt.join("tree");
        fragmented_tree(&root, 4096);
        let inl = root.join("inline");
        std::fs::create_dir_all(&inl).expect("mkdir");
        for n in [1usize, 40, 60, 100, 150] {
            write_all(&inl.join(format!("i{n}")), &vec![b'i'; n]);
        }
        write_all(&inl.join("empty"), b"");
        nix::unistd::sync();
        let recs = assert_methods_agree(&sb, &root, "ext4 inline_data");
        let small = &recs[inl.join("i40").to_str().expect("utf8")];
        assert_eq!(small["flags"]["inline"], true, "{small}");
        assert_eq!(small["extents"].as_u64(), Some(1), "{small}");
        assert_eq!(small["allocated"].as_u64(), Some(40), "{small}");
        let theirs = filefrag_counts(&root, &[]);
        let (ours, _) = frag_counts(&sb, &root);
        assert_eq!(
            ours, theirs,
            "ext4 inline_data: counts differ from filefrag"
        );
    }
    sb.assert_clean();
}

#[test]
fn ext4_block_mapped_matches_filefrag_fiemap_and_fibmap() {
    if !crate::support::have_fs("ext4") || !crate::support::have_program("filefrag") {
        return;
    }
    let sb = Sandbox::new();
    {
        let bed = Bed::create(&sb, "ext4", "256M", "-O ^extent,^64bit -b 1024");
        let root = bed.mnt.join("tree");
        fragmented_tree(&root, 1024);
        nix::unistd::sync();
        let recs = assert_methods_agree(&sb, &root, "ext4 ^extent");
        assert!(recs.values().all(|r| r["block_mapped"] == true));
        let (ours, summary) = frag_counts(&sb, &root);
        let theirs = filefrag_counts(&root, &[]);
        assert_eq!(
            ours, theirs,
            "block-mapped ext4: counts differ from filefrag"
        );
        assert_eq!(
            summary["block_mapped_files"].as_u64(),
            Some(theirs.len() as u64)
        );
        // The FIBMAP path against `filefrag -B`.
        let fib = filefrag_counts(&root, &["-B"]);
        for (path, want) in &fib {
            let fl = fsgauge::layout::scan_file_with(
                Path::new(path),
                fsgauge::layout::MapMethod::Fibmap,
            )
            .expect("FIBMAP scan");
            assert_eq!(
                fl.extents as u64, *want,
                "{path}: FIBMAP extents differ from filefrag -B"
            );
        }
        // A file written in one go crosses indirect-block boundaries but is not fragmented,
        // wherever ext4 put the indirect blocks.
        let one = root.join("oneshot");
        write_all(&one, &vec![b'x'; 600 * 1024]);
        nix::unistd::sync();
        let fl = fsgauge::layout::scan_file(&one).expect("scan");
        assert!(fl.block_mapped);
        let ff = Command::new("filefrag")
            .arg(&one)
            .output()
            .expect("filefrag");
        let ff = String::from_utf8_lossy(&ff.stdout).to_string();
        assert!(
            ff.contains(&format!(": {} extent", fl.extents)),
            "filefrag says {ff}, we {}",
            fl.extents
        );
        assert_eq!(
            fl.ideal_extents, fl.extents,
            "a file written at once is not fragmented"
        );
        assert_eq!(fl.layout_score, Some(1.0));
    }
    sb.assert_clean();
}

/// Files created and deleted while the on-disk reader scans are counted (or skipped as
/// vanished), never errors.
#[test]
fn ondisk_scan_survives_files_changing() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    {
        let bed = Bed::create(&sb, "ext4", "256M", "");
        let root = bed.mnt.join("churn");
        for d in 0..4 {
            std::fs::create_dir_all(root.join(format!("d{d}"))).expect("mkdir");
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let root = root.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let p = root.join(format!("d{}/f{}", i % 4, i % 500));
                    if i % 3 == 0 {
                        let _ = std::fs::remove_file(&p);
                    } else {
                        let _ = std::fs::write(&p, vec![b'c'; (i % 7) as usize * 1500]);
                    }
                    i += 1;
                }
            })
        };
        let mut scanned = 0;
        for _ in 0..15 {
            let out = sb
                .cmd()
                .args([
                    "frag",
                    "--format",
                    "json",
                    "--method",
                    "ondisk",
                    "--threads",
                    "2",
                ])
                .arg(&root)
                .output()
                .expect("run fsgauge frag");
            let doc = crate::support::json_of(&out);
            let s = &doc["summary"];
            assert_eq!(s["skipped"]["errors"].as_u64(), Some(0), "{s}");
            scanned += s["ondisk_files"].as_u64().expect("ondisk_files");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churn.join().expect("churn thread");
        assert!(scanned > 0, "files were read on disk");
    }
    sb.assert_clean();
}

/// The on-disk reader's safety nets, per file: an inode whose i_blocks does not match the map
/// it read (here a large xattr value kept in an xattr inode and charged to the file) is mapped
/// with FIEMAP and noted; a file with an ordinary xattr block is read on disk; in a directory
/// with a file mounted over one of its entries, files are opened (FIEMAP), so the mounted file
/// is mapped, not the one below it (readdir's inode). Every record equals FIEMAP's.
#[test]
fn ondisk_falls_back_per_file_where_the_inode_does_not_add_up() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    {
        let bed = Bed::create(&sb, "ext4", "256M", "-O ea_inode");
        let root = bed.mnt.join("tree");
        std::fs::create_dir_all(root.join("m")).expect("mkdir");
        for name in [
            "big-xattr",
            "xattr-block",
            "plain",
            "m/covered",
            "m/neighbour",
        ] {
            write_all(&root.join(name), &vec![b'x'; 5000]);
        }
        let set = |name: &str, key: &str, len: usize| {
            let path =
                std::ffi::CString::new(root.join(name).to_str().expect("utf8")).expect("path");
            let key = std::ffi::CString::new(key).expect("key");
            let value = vec![b'v'; len];
            // SAFETY: valid C strings and buffer.
            let rc = unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    key.as_ptr(),
                    value.as_ptr() as *const libc::c_void,
                    value.len(),
                    0,
                )
            };
            assert_eq!(rc, 0, "setxattr: {}", std::io::Error::last_os_error());
        };
        set("big-xattr", "user.big", 20_000);
        set("xattr-block", "user.small", 600);
        let elsewhere = bed.mnt.join("elsewhere");
        write_all(&elsewhere, b"mounted over an entry");
        let st = Command::new("mount")
            .arg("--bind")
            .arg(&elsewhere)
            .arg(root.join("m/covered"))
            .status()
            .expect("mount");
        assert!(st.success(), "bind mount");
        nix::unistd::sync();
        let result = std::panic::catch_unwind(|| {
            let recs = assert_methods_agree_but(&sb, &root, "ea_inode", 3);
            let rec = |n: &str| recs[root.join(n).to_str().expect("utf8")].clone();
            assert_eq!(rec("big-xattr")["method"], "fiemap");
            assert_eq!(rec("xattr-block")["method"], "ondisk");
            assert_eq!(rec("plain")["method"], "ondisk");
            assert_eq!(rec("m/neighbour")["method"], "fiemap");
            let covered = rec("m/covered");
            assert_eq!(covered["method"], "fiemap");
            assert_eq!(
                covered["size"].as_u64(),
                Some(21),
                "the mounted file: {covered}"
            );
            let (_, s) = records(&sb, &root, "ondisk");
            let notes = s["method_notes"].to_string();
            assert!(
                notes.contains("big-xattr") && notes.contains("i_blocks"),
                "{notes}"
            );
        });
        let _ = Command::new("umount").arg(root.join("m/covered")).status();
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
    sb.assert_clean();
}

#[test]
fn xfs_matches_filefrag() {
    check("xfs", "300M", "", 4096);
}

#[test]
fn btrfs_matches_filefrag() {
    check("btrfs", "256M", "", 4096);
}
