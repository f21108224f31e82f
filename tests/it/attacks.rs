//! The attacks of issue 22, made by an unprivileged local user (uid/gid 65534, nobody) against
//! root runs of fsgauge in places that user owns, raced many times:
//! - **workdir swap** (item 1): `--workdir` in a directory of the attacker's; when the run's
//!   directory there has its image (or its second image, the journal), the attacker renames
//!   the directory away and puts one of its own in its place, whose entries link to the victim
//!   file (images) and the victim directory (directories, `mnt`);
//! - **mounted rename** (item 4): the attacker renames the run's directory away while its
//!   filesystem is mounted;
//! - **`--dir` swap** (item 2): in a `--dir` of the attacker's, the run's directory is renamed
//!   away and replaced by a symlink to the victim directory, mid-create or mid-delete;
//! - **planted temporaries** (item 3): in an `--out` and a report's `-o` directory of the
//!   attacker's, the temporary names of the atomic writes (`.NAME.tmp-PID`, for predicted pids
//!   and for the run's own pid once it is known) and the result names (predicted from an
//!   earlier run with the same seed) are planted as symlinks to the victim file;
//! - **rename + SIGKILL + cleanup** (issue 29 item 7): once the testbed is mounted, the
//!   attacker renames the private directory in its `--workdir` (and, separately, root renames
//!   the testbed's directory in a work directory of root's) and plants a tree of the old names
//!   in its place; the run is SIGKILLed, and `testbed cleanup` must remove everything of the
//!   run wherever it was renamed to, and nothing that was planted.
//!
//! Every round has a root-only victim — a file (0600, random bytes) and a directory of files,
//! both in a 0700 root directory — which must stay byte-identical; nothing of the sandbox may
//! stay mounted or attached; fsgauge must not panic. A run may refuse a place the attacker owns
//! (exit 2 naming it) or work in it safely: both pass. The assertions are on behaviour only —
//! the run's directories are found by listing the attacker's directory, not by name.
//!
//! And the plants of issue 29, made once (no race): a directory link in an output path
//! (`-o`, `--out`, a plan read through it) and `/var/tmp/fsgauge` made a link to a victim
//! directory, in a private mount namespace with a /var/tmp of its own (fsgauge must refuse it
//! whatever `fs.protected_symlinks` says; it is 0 on the machines this runs on).
//!
//! The attacker is a thread of this test that has dropped its own credentials to nobody (the
//! kernel keeps credentials per thread; the raw system calls change only the calling one),
//! polling the directory it owns to hit the windows. Each attack runs a few rounds by default
//! (the whole file in about a minute); `FSGAUGE_SOAK=N` runs N rounds of each and prints the
//! figures (rounds, rounds whose attack hit its window before the run ended, failures).
//! `FSGAUGE_ATTACK_SEED` replays the random delays of a printed seed.
//!
//! Needs root, loop devices and mkfs.ext4 (skips with a printed reason otherwise; fails under
//! CI).

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::path_rules::{refused_with, results, stderr as err_of, within};
use crate::support::{have_fs, have_root, leaks_under, Sandbox};

const NOBODY: u32 = 65534;

/// Rounds per attack: `FSGAUGE_SOAK`, else `default`.
fn rounds(default: u32) -> u32 {
    std::env::var("FSGAUGE_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// The seed of an attack's random delays, printed so that a failure can be replayed.
fn seeded(attack: &str) -> ChaCha8Rng {
    let seed = std::env::var("FSGAUGE_ATTACK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{attack}: seed {seed} (replay with FSGAUGE_ATTACK_SEED={seed})");
    ChaCha8Rng::seed_from_u64(seed)
}

/// What the rounds of one attack came to.
struct Figures {
    attack: &'static str,
    rounds: u32,
    hits: u32,
    failures: Vec<String>,
}

impl Figures {
    fn new(attack: &'static str) -> Self {
        Self {
            attack,
            rounds: 0,
            hits: 0,
            failures: Vec::new(),
        }
    }

    fn add(&mut self, hit: bool, failures: Vec<String>) {
        self.rounds += 1;
        self.hits += u32::from(hit);
        let round = self.rounds;
        eprintln!(
            "{} round {round}: {}, {}",
            self.attack,
            if hit {
                "hit its window"
            } else {
                "missed its window"
            },
            if failures.is_empty() {
                "victims intact, nothing left".to_string()
            } else {
                format!("{} failure(s)", failures.len())
            }
        );
        self.failures
            .extend(failures.into_iter().map(|f| format!("round {round}: {f}")));
    }

    /// Prints the figures and fails with every failure.
    fn conclude(self) {
        let failed_rounds = {
            let mut r: Vec<&str> = self
                .failures
                .iter()
                .filter_map(|f| f.split(':').next())
                .collect();
            r.dedup();
            r.len()
        };
        eprintln!(
            "{}: {} round(s), {} hit the window before the run ended, {} failed",
            self.attack, self.rounds, self.hits, failed_rounds
        );
        assert!(
            self.failures.is_empty(),
            "{}: the attack worked:\n{}",
            self.attack,
            self.failures.join("\n")
        );
    }
}

/// One round's scene: a sandbox whose root the attacker may pass through, the attacker's own
/// directory, and the victims with what they held.
struct Scene {
    sb: Sandbox,
    att: PathBuf,
    victim_file: PathBuf,
    victim_dir: PathBuf,
    file_bytes: Vec<u8>,
    dir_before: BTreeMap<PathBuf, Vec<u8>>,
}

impl Scene {
    fn new(rng: &mut ChaCha8Rng) -> Self {
        let sb = Sandbox::new();
        // The attacker may pass through the sandbox to its own directory, and no further.
        std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let vault = sb.path().join("vault");
        std::fs::create_dir(&vault).unwrap();
        std::fs::set_permissions(&vault, std::fs::Permissions::from_mode(0o700)).unwrap();
        let victim_file = vault.join("secret.img");
        // Big enough for mkfs.ext4 and a journal device, so that a formatting shows.
        let mut file_bytes = vec![0u8; 8 << 20];
        rng.fill(&mut file_bytes[..]);
        std::fs::write(&victim_file, &file_bytes).unwrap();
        std::fs::set_permissions(&victim_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let victim_dir = vault.join("precious");
        std::fs::create_dir_all(victim_dir.join("sub")).unwrap();
        for (name, len) in [("a", 10), ("b.json", 4096), ("dir0", 1), ("sub/c", 70_000)] {
            let mut b = vec![0u8; len];
            rng.fill(&mut b[..]);
            std::fs::write(victim_dir.join(name), b).unwrap();
        }
        let att = sb.path().join("attacker");
        std::fs::create_dir(&att).unwrap();
        give_to_nobody(&att);
        let dir_before = snapshot(&victim_dir);
        Self {
            sb,
            att,
            victim_file,
            victim_dir,
            file_bytes,
            dir_before,
        }
    }

    /// A directory of the attacker's: owned by nobody, mode 0755.
    fn att_dir(&self, name: &str) -> PathBuf {
        let d = self.att.join(name);
        std::fs::create_dir(&d).unwrap();
        give_to_nobody(&d);
        d
    }

    fn cmd(&self) -> Command {
        let mut c = self.sb.cmd();
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// What the round broke: the victims changed, anything left mounted or attached, a
    /// panic or a death by signal. Tears down what was left, so the next round starts clean.
    fn check(&self, what: &str, out: &Output) -> Vec<String> {
        let mut failures = Vec::new();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0..=2) => {}
            Some(c) => failures.push(format!("{what}: exit {c}: {stderr}")),
            None => failures.push(format!("{what}: killed ({}): {stderr}", out.status)),
        }
        if stderr.contains("panicked") {
            failures.push(format!("{what}: panicked: {stderr}"));
        }
        match std::fs::symlink_metadata(&self.victim_file) {
            Ok(md) if md.is_file() => {
                let now = std::fs::read(&self.victim_file).unwrap_or_default();
                if now != self.file_bytes {
                    let head = String::from_utf8_lossy(&now[..now.len().min(60)]).into_owned();
                    failures.push(format!(
                        "{what}: the root-only victim file {} changed ({} bytes now, was {}; begins {head:?})",
                        self.victim_file.display(),
                        now.len(),
                        self.file_bytes.len()
                    ));
                }
                if md.mode() & 0o7777 != 0o600 || md.uid() != 0 {
                    failures.push(format!(
                        "{what}: the victim file's owner or mode changed ({} {:o})",
                        md.uid(),
                        md.mode() & 0o7777
                    ));
                }
            }
            other => failures.push(format!(
                "{what}: the root-only victim file {} is gone or no longer a file: {other:?}",
                self.victim_file.display()
            )),
        }
        let dir_now = snapshot(&self.victim_dir);
        if dir_now != self.dir_before {
            let before: Vec<_> = self.dir_before.keys().collect();
            let now: Vec<_> = dir_now.keys().collect();
            failures.push(format!(
                "{what}: the root-only victim directory {} changed: entries before {before:?}, now {now:?}",
                self.victim_dir.display()
            ));
        }
        // A run that ended has no ledger entry left (an entry gone while its mount stays
        // is caught by the leak check below).
        let ledger = self.sb.state().join("ledger");
        let entries: Vec<_> = std::fs::read_dir(&ledger)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        if !entries.is_empty() {
            failures.push(format!("{what}: ledger entries left: {entries:?}"));
        }
        let leaks = leaks_under(self.sb.path());
        if !leaks.is_empty() {
            failures.push(format!("{what}: left behind: {leaks:?}"));
            force_clean(self.sb.path());
        }
        failures
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // A failed round leaves nothing mounted or attached for the rounds after it.
        force_clean(self.sb.path());
    }
}

fn give_to_nobody(p: &Path) {
    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file below `dir` (not following symlinks) with its bytes; directories and symlinks
/// as markers, so that any entry made, removed or replaced shows.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            out.insert(d, b"<unreadable>".to_vec());
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
            match std::fs::symlink_metadata(&p) {
                Ok(md) if md.is_dir() => {
                    out.insert(rel, format!("<dir {:o}>", md.mode()).into_bytes());
                    todo.push(p);
                }
                Ok(md) if md.is_file() => {
                    out.insert(rel, std::fs::read(&p).unwrap_or_default());
                }
                Ok(_) => {
                    out.insert(rel, b"<other>".to_vec());
                }
                Err(_) => {}
            }
        }
    }
    out
}

/// Unmounts what is mounted below `root` and detaches loop devices whose backing file is
/// below it: only this test's sandbox, never anything else on the machine.
fn force_clean(root: &Path) {
    let r = root.to_string_lossy().to_string();
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(String::from))
        .filter(|mp| mp.starts_with(&r))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.filter_map(|e| e.ok()) {
            if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
                if b.trim().starts_with(&r) {
                    let dev = format!("/dev/{}", e.file_name().to_string_lossy());
                    let _ = Command::new("losetup").arg("-d").arg(&dev).output();
                }
            }
        }
    }
}

/// Drops the calling thread's credentials to nobody for good: supplementary groups, gid and
/// uid, real, effective and saved (the capabilities go with uid 0). Raw system calls, since
/// the C library's wrappers change every thread of the process.
fn become_nobody() {
    // SAFETY: plain system calls on the calling thread's credentials; no memory is passed
    // but a null list of zero groups.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()),
            0,
            "setgroups"
        );
        assert_eq!(
            libc::syscall(libc::SYS_setresgid, NOBODY, NOBODY, NOBODY),
            0,
            "setresgid"
        );
        assert_eq!(
            libc::syscall(libc::SYS_setresuid, NOBODY, NOBODY, NOBODY),
            0,
            "setresuid"
        );
        assert_eq!(libc::syscall(libc::SYS_geteuid), NOBODY as libc::c_long);
    }
}

/// The attacker: a thread running as nobody until `body` returns; `done` says the root run
/// has ended. Its result says whether it acted while the run was still going.
fn attacker<F>(victim: &Path, done: &Arc<AtomicBool>, body: F) -> JoinHandle<bool>
where
    F: FnOnce(&AtomicBool) -> bool + Send + 'static,
{
    let done = Arc::clone(done);
    let victim = victim.to_path_buf();
    std::thread::spawn(move || {
        become_nobody();
        // The attacker truly cannot touch the victim itself.
        assert!(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&victim)
                .is_err(),
            "the attacker thread can open the victim itself: the scene is wrong"
        );
        body(&done)
    })
}

/// Runs `child` to its end, telling the attacker when it is over.
fn finish(child: Child, done: &AtomicBool, att: JoinHandle<bool>) -> (Output, bool) {
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::SeqCst);
    let hit = att.join().expect("the attacker thread");
    (out, hit)
}

/// The directories in `dir` (not symlinks) whose names are not in `skip`.
fn dirs_in(dir: &Path, skip: &[String]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|e| !skip.contains(&e.file_name().to_string_lossy().to_string()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// An inotify instance watching for entries made (IN_CREATE, IN_MOVED_TO) in directories.
struct Inotify(std::os::fd::OwnedFd);

impl Inotify {
    fn new() -> Self {
        use std::os::fd::FromRawFd;
        // SAFETY: inotify_init1 returns a new descriptor (checked) that nothing else owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: as above.
        Self(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// Watches `dir` (a directory gone already is no error: the run may have moved on).
    fn add(&self, dir: &Path) {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: a valid descriptor and a NUL-terminated path that outlives the call.
        unsafe {
            libc::inotify_add_watch(
                self.0.as_raw_fd(),
                c.as_ptr(),
                libc::IN_CREATE | libc::IN_MOVED_TO,
            )
        };
    }

    /// Waits up to `limit` for an event, and drains what came.
    fn wait(&self, limit: Duration) {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let mut buf = [0u8; 4096];
        // SAFETY: one valid pollfd; a read into a buffer of the size given.
        unsafe {
            libc::poll(&mut p, 1, limit.as_millis() as libc::c_int);
            while libc::read(p.fd, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
        }
    }
}

fn spin() {
    std::thread::yield_now();
}

/// Whether the attacker may not look into `d` (fsgauge made it 0700): then it acts blind, at
/// a random moment, on the name it can see.
fn unreadable(d: &Path) -> bool {
    matches!(std::fs::read_dir(d), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Sleeps a random few tens of microseconds (0 half of the time): where in the window the
/// attacker lands.
fn jitter(rng: &mut ChaCha8Rng, max_us: u64) {
    if rng.gen_bool(0.5) {
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..=max_us)));
    }
}

/// Swaps the run directory `d` for one of the attacker's whose entries link to the victims:
/// every name the real one has (files to the victim file, directories to the victim
/// directory), and the names fsgauge's images and mount point had.
fn plant_twin(d: &Path, victim_file: &Path, victim_dir: &Path) -> std::io::Result<()> {
    // A directory the attacker cannot read (fsgauge's own, 0700) is swapped blind: the
    // names fsgauge's images and mount point would have.
    let mut names: Vec<(String, bool)> = std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.file_type().is_ok_and(|t| t.is_dir()),
            )
        })
        .collect();
    for (n, is_dir) in [("fs.img", false), ("journal.img", false), ("mnt", true)] {
        if !names.iter().any(|(m, _)| m == n) {
            names.push((n.to_string(), is_dir));
        }
    }
    let moved = d.with_file_name(format!(
        "{}.moved",
        d.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::rename(d, &moved)?;
    std::fs::create_dir(d)?;
    for (n, is_dir) in names {
        let target = if is_dir { victim_dir } else { victim_file };
        let _ = symlink(target, d.join(n));
    }
    Ok(())
}

/// Item 1: `--workdir` in the attacker's directory; when the run's directory there holds
/// `images` regular files, it is swapped for the attacker's twin.
fn workdir_swap(figures: &mut Figures, rng: &mut ChaCha8Rng, images: usize, extra: &[&str]) {
    let sc = Scene::new(rng);
    let wd = sc.att_dir("wd");
    let done = Arc::new(AtomicBool::new(false));
    let (vf, vd, w) = (sc.victim_file.clone(), sc.victim_dir.clone(), wd.clone());
    let delay = rng.gen_range(0..=20u64);
    let blind_ms = 120;
    let mut arng = ChaCha8Rng::seed_from_u64(rng.gen());
    let att = attacker(&sc.victim_file, &done, move |done| {
        // Woken by the kernel when an entry is made in the work directory or in a directory
        // made there, rather than by polling alone: the window is a millisecond or so.
        let watch = Inotify::new();
        watch.add(&w);
        let mut watched: Vec<PathBuf> = Vec::new();
        while !done.load(Ordering::SeqCst) {
            for d in dirs_in(&w, &[]) {
                if unreadable(&d) {
                    std::thread::sleep(Duration::from_millis(arng.gen_range(0..=blind_ms)));
                    let ok = plant_twin(&d, &vf, &vd).is_ok();
                    return ok && !done.load(Ordering::SeqCst);
                }
                if !watched.contains(&d) {
                    watch.add(&d);
                    watched.push(d.clone());
                }
                let files = std::fs::read_dir(&d)
                    .map(|rd| {
                        rd.filter_map(|e| e.ok())
                            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                            .count()
                    })
                    .unwrap_or(0);
                if files >= images {
                    jitter(&mut arng, delay);
                    let ok = plant_twin(&d, &vf, &vd).is_ok();
                    return ok && !done.load(Ordering::SeqCst);
                }
            }
            watch.wait(Duration::from_millis(5));
        }
        false
    });
    let child = sc
        .cmd()
        .args([
            "bench",
            "tree",
            "--quiet",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "2",
            "--files",
            "2",
            "--file-size",
            "4K",
        ])
        .args(extra)
        .arg("--workdir")
        .arg(&wd)
        .arg("--out")
        .arg(sc.sb.out())
        .spawn()
        .unwrap();
    let (out, hit) = finish(child, &done, att);
    let failures = sc.check(&format!("workdir swap at image {images}"), &out);
    figures.add(hit, failures);
}

/// Item 4: the run's directory in the attacker's `--workdir` is renamed away while its
/// filesystem is mounted.
fn mounted_rename(figures: &mut Figures, rng: &mut ChaCha8Rng) {
    let sc = Scene::new(rng);
    let wd = sc.att_dir("wd");
    let done = Arc::new(AtomicBool::new(false));
    let w = wd.clone();
    let delay = rng.gen_range(0..=20_000u64);
    let mut arng = ChaCha8Rng::seed_from_u64(rng.gen());
    let att = attacker(&sc.victim_file, &done, move |done| {
        let prefix = format!("{}/", w.display());
        while !done.load(Ordering::SeqCst) {
            let mounted = std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split(' ').nth(4).map(String::from))
                .find(|mp| mp.starts_with(&prefix));
            if let Some(mp) = mounted {
                jitter(&mut arng, delay);
                // The run's directory: the first component below the work directory.
                let first = mp[prefix.len()..]
                    .split('/')
                    .next()
                    .unwrap_or("")
                    .to_string();
                let d = w.join(&first);
                let ok = std::fs::rename(&d, w.join(format!("{first}.x"))).is_ok();
                return ok && !done.load(Ordering::SeqCst);
            }
            spin();
        }
        false
    });
    let child = sc
        .cmd()
        .args([
            "bench",
            "tree",
            "--quiet",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "2",
            "--files",
            "60",
            "--file-size",
            "16K",
            "--fsync",
            "file",
            "--workdir",
        ])
        .arg(&wd)
        .arg("--out")
        .arg(sc.sb.out())
        .spawn()
        .unwrap();
    let (out, hit) = finish(child, &done, att);
    let failures = sc.check("rename while mounted", &out);
    figures.add(hit, failures);
}

/// When in the run the `--dir` swap comes.
#[derive(Clone, Copy, Debug)]
enum When {
    Create,
    Delete,
}

/// Item 2: the run's directory in the attacker's `--dir` is renamed away and replaced by a
/// symlink to the victim directory.
fn dir_swap(figures: &mut Figures, rng: &mut ChaCha8Rng, when: When) {
    let sc = Scene::new(rng);
    let d = sc.att_dir("scratch");
    let done = Arc::new(AtomicBool::new(false));
    let (vd, w) = (sc.victim_dir.clone(), d.clone());
    let after = rng.gen_range(1..=30usize);
    let att = attacker(&sc.victim_file, &done, move |done| {
        let mut max_seen = 0usize;
        while !done.load(Ordering::SeqCst) {
            let Some(run) = dirs_in(&w, &[]).into_iter().next() else {
                spin();
                continue;
            };
            if unreadable(&run) {
                let ms = match when {
                    When::Create => after as u64 * 20,
                    When::Delete => 300 + after as u64 * 40,
                };
                std::thread::sleep(Duration::from_millis(ms));
                let name = run.file_name().unwrap_or_default().to_os_string();
                let mut moved = name.clone();
                moved.push(".x");
                let ok = std::fs::rename(&run, w.join(moved)).is_ok()
                    && symlink(&vd, w.join(&name)).is_ok();
                return ok && !done.load(Ordering::SeqCst);
            }
            // How far the run is: the entries of its first subdirectory.
            let n = dirs_in(&run, &[])
                .first()
                .and_then(|s| std::fs::read_dir(s).ok())
                .map_or(0, |rd| rd.count());
            max_seen = max_seen.max(n);
            let now = match when {
                When::Create => n >= after,
                When::Delete => max_seen > 0 && n + 1 < max_seen,
            };
            if now {
                let name = run.file_name().unwrap_or_default().to_os_string();
                let mut moved = name.clone();
                moved.push(".x");
                let ok = std::fs::rename(&run, w.join(moved)).is_ok()
                    && symlink(&vd, w.join(&name)).is_ok();
                return ok && !done.load(Ordering::SeqCst);
            }
            spin();
        }
        false
    });
    let child = sc
        .cmd()
        .args([
            "bench",
            "tree",
            "--quiet",
            "--dirs",
            "2",
            "--files",
            "200",
            "--file-size",
            "16K",
            "--fsync",
            "file",
            "--dir",
        ])
        .arg(&d)
        .arg("--out")
        .arg(sc.sb.out())
        .spawn()
        .unwrap();
    let (out, hit) = finish(child, &done, att);
    let failures = sc.check(&format!("--dir swap mid-{when:?}"), &out);
    figures.add(hit, failures);
}

/// The last pid the kernel handed out (for predicting the next ones).
fn last_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// `YYYYMMDDhhmmss` of a time, as result names begin.
fn stamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect()
}

/// Plants, in `dir`, symlinks to `victim` under every final name (stamps of the next
/// seconds) and its `.NAME.tmp-PID` for each pid.
fn plant_names(dir: &Path, suffixes: &[String], pids: &[u32], victim: &Path) {
    let t0 = SystemTime::now();
    for s in -1i64..20 {
        let t = if s < 0 {
            t0 - Duration::from_secs(1)
        } else {
            t0 + Duration::from_secs(s as u64)
        };
        let st = stamp(t);
        for suf in suffixes {
            let name = format!("{st}{suf}");
            let _ = symlink(victim, dir.join(&name));
            for pid in pids {
                let _ = symlink(victim, dir.join(format!(".{name}.tmp-{pid}")));
            }
        }
    }
}

/// Regular files (not symlinks) in `dir` that are JSON documents.
fn regular_json(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter(|e| {
                    std::fs::read(e.path())
                        .ok()
                        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                        .is_some_and(|v| v.is_object())
                })
                .count()
        })
        .unwrap_or(0)
}

/// The tree run of the `--out` attack: fixed seed, so its result names can be predicted.
const OUT_RUN: [&str; 13] = [
    "bench",
    "tree",
    "--dirs",
    "2",
    "--files",
    "5",
    "--file-size",
    "4K",
    "--seed",
    "5",
    "--reps",
    "2",
    "--dir",
];

/// Item 3, `--out`: result names predicted from an earlier run with the same seed, and the
/// temporaries of predicted pids, planted as symlinks to the victim before the run; the
/// run's own pid's planted as soon as it is known.
fn out_plant(figures: &mut Figures, rng: &mut ChaCha8Rng) {
    let sc = Scene::new(rng);
    let plain = sc.sb.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    // The prediction: a run with the same seed and place (the result name does not depend on
    // who runs it or where the results go).
    let cal = sc.sb.path().join("cal");
    let out = sc
        .cmd()
        .args(OUT_RUN)
        .arg(&plain)
        .arg("--out")
        .arg(&cal)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let suffixes: Vec<String> = std::fs::read_dir(&cal)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().chars().skip(14).collect())
        .collect();
    let dir = sc.att_dir("out");
    let done = Arc::new(AtomicBool::new(false));
    let (vf, w) = (sc.victim_file.clone(), dir.clone());
    let next = last_pid();
    let predicted: Vec<u32> = (next + 1..next + 40).collect();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let att = attacker(&sc.victim_file, &done, move |done| {
        plant_names(&w, &suffixes, &predicted, &vf);
        let _ = ready_tx.send(());
        // The run's own pid, once it is known: predicted, or planted now.
        let Ok(pid) = rx.recv() else { return false };
        if predicted.contains(&pid) {
            return true;
        }
        plant_names(&w, &suffixes, &[pid], &vf);
        !done.load(Ordering::SeqCst)
    });
    // The attacker plants ahead (the predicted pids), then the root run starts.
    let _ = ready_rx.recv();
    let child = sc
        .cmd()
        .args(OUT_RUN)
        .arg(&plain)
        .arg("--out")
        .arg(&dir)
        .spawn()
        .unwrap();
    let _ = tx.send(child.id());
    let (out, hit) = finish(child, &done, att);
    let mut failures = sc.check("--out planted", &out);
    if out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let claimed: usize = stderr
            .lines()
            .find(|l| l.contains(" result file(s) in "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let real = regular_json(&dir);
        if claimed != 2 || real < claimed {
            failures.push(format!(
                "--out planted: {claimed} result file(s) claimed for 2 repetitions, {real} regular result files in {} (measurements lost)",
                dir.display()
            ));
        }
    }
    figures.add(hit, failures);
}

/// Item 3, a report's `-o`: `.report.html.tmp-PID` of predicted pids, and of the report's own
/// pid as soon as it is known, planted as symlinks to the victim.
fn report_plant(figures: &mut Figures, rng: &mut ChaCha8Rng) {
    let sc = Scene::new(rng);
    let plain = sc.sb.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let results = sc.sb.path().join("results");
    let out = sc
        .cmd()
        .args(OUT_RUN)
        .arg(&plain)
        .arg("--out")
        .arg(&results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sc.att_dir("reports");
    let report = dir.join("report.html");
    let done = Arc::new(AtomicBool::new(false));
    let (vf, w) = (sc.victim_file.clone(), dir.clone());
    let next = last_pid();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let plant = move |pids: &[u32]| {
        for pid in pids {
            let _ = symlink(&vf, w.join(format!(".report.html.tmp-{pid}")));
        }
    };
    let predicted = next + 1..next + 200;
    let att = attacker(&sc.victim_file, &done, move |done| {
        plant(&predicted.clone().collect::<Vec<_>>());
        let _ = ready_tx.send(());
        let Ok(pid) = rx.recv() else { return false };
        if predicted.contains(&pid) {
            return true;
        }
        plant(&[pid]);
        !done.load(Ordering::SeqCst)
    });
    let _ = ready_rx.recv();
    let child = sc
        .cmd()
        .arg("report")
        .arg(&results)
        .arg("-o")
        .arg(&report)
        .spawn()
        .unwrap();
    let _ = tx.send(child.id());
    let (out, hit) = finish(child, &done, att);
    let mut failures = sc.check("report -o planted", &out);
    if out.status.success() {
        let ok = std::fs::symlink_metadata(&report).is_ok_and(|m| m.is_file() && m.len() > 0);
        if !ok {
            failures.push(format!(
                "report -o planted: exit 0 but {} is not a regular file of fsgauge's",
                report.display()
            ));
        }
    }
    figures.add(hit, failures);
}

/// Who renames the run's directory in the "rename + SIGKILL + cleanup" attack.
#[derive(Clone, Copy, Debug)]
enum Renamer {
    /// nobody, owner of the `--workdir`, renames the private directory fsgauge made in it.
    Owner,
    /// root renames the testbed's directory in a work directory of root's.
    Root,
}

/// Issue 29 item 7: once the testbed is mounted (held there by fsgauge's pause hook), the
/// run's directory is renamed and something planted under its old name (a directory whose
/// entries have the names fsgauge's had: the testbed's directory, its image with the
/// attacker's bytes, the mount point); the run is SIGKILLed, and `testbed cleanup` must
/// leave no loop device, mount, image or directory of the run, remove nothing that is not
/// what it made, and never say "removed" of what it left.
fn killed_after_rename(figures: &mut Figures, rng: &mut ChaCha8Rng, who: Renamer) {
    use std::io::{BufRead, BufReader};
    let sc = Scene::new(rng);
    let wd = match who {
        Renamer::Owner => sc.att_dir("wd"),
        Renamer::Root => sc.sb.workdir(),
    };
    let mut child = sc
        .cmd()
        .args([
            "bench",
            "tree",
            "--quiet",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "2",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--workdir",
        ])
        .arg(&wd)
        .arg("--out")
        .arg(sc.sb.out())
        // Held at the mount for as long as the attack takes (it is killed there).
        .env("FSGAUGE_TEST_PAUSE_AT", "mount")
        .env("FSGAUGE_TEST_PAUSE_MS", "600000")
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    for line in stderr.lines().map_while(Result::ok) {
        said.push_str(&line);
        said.push('\n');
        if line == "fsgauge: test pause at mount" {
            break;
        }
    }
    assert!(
        said.contains("test pause at mount"),
        "the run ended before its mount: {said}"
    );
    let home = format!("ext4-{pid}-0");
    let victim_bytes: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
    // The run's directory in the work directory, renamed, and the old name's planted tree.
    let plant = {
        let (wd, home, bytes) = (wd.clone(), home.clone(), victim_bytes.clone());
        move || -> (PathBuf, PathBuf) {
            let run = std::fs::read_dir(&wd)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| p.is_dir())
                .expect("the run's directory in the work directory");
            let name = run.file_name().unwrap().to_string_lossy().to_string();
            let renamed = wd.join(format!("{name}.renamed"));
            std::fs::rename(&run, &renamed).unwrap();
            // Under the private directory's old name, the testbed's names; under the
            // testbed's, its own.
            let old_home = if name == home {
                run.clone()
            } else {
                run.join(&home)
            };
            std::fs::create_dir_all(old_home.join("mnt")).unwrap();
            std::fs::write(old_home.join("fs.img"), &bytes).unwrap();
            (renamed, run)
        }
    };
    let (renamed, planted) = match who {
        Renamer::Owner => {
            let done = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            let att = attacker(&sc.victim_file, &done, move |_| {
                let _ = tx.send(plant());
                true
            });
            att.join().expect("the attacker thread");
            rx.recv().unwrap()
        }
        Renamer::Root => plant(),
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let snapshot_of_planted = snapshot(&planted);
    let out = sc.cmd().args(["testbed", "cleanup"]).output().unwrap();
    let what = format!("rename by {who:?} + SIGKILL + cleanup");
    let mut failures = sc.check(&what, &out);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() || !stdout.contains(&format!("removed {home}\n")) {
        failures.push(format!(
            "{what}: cleanup did not remove {home}: exit {:?}, stdout {stdout:?}, stderr {stderr:?}",
            out.status.code()
        ));
    }
    if stderr.contains("not found") {
        failures.push(format!("{what}: cleanup missed something: {stderr}"));
    }
    if renamed.exists() {
        let left: Vec<_> = walkdir(&renamed);
        failures.push(format!(
            "{what}: cleanup said {stdout:?} but left the renamed {}: {left:?}",
            renamed.display()
        ));
    }
    let planted_image = match who {
        Renamer::Owner => planted.join(&home).join("fs.img"),
        Renamer::Root => planted.join("fs.img"),
    };
    if snapshot(&planted) != snapshot_of_planted
        || std::fs::read(&planted_image).ok() != Some(victim_bytes)
    {
        failures.push(format!(
            "{what}: what was planted under the old name {} was touched",
            planted.display()
        ));
    }
    figures.add(true, failures);
}

/// Every path below `d`, for messages.
fn walkdir(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(p) = todo.pop() {
        if let Ok(rd) = std::fs::read_dir(&p) {
            for e in rd.filter_map(|e| e.ok()) {
                todo.push(e.path());
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn workdir_swapped_for_links_to_the_victim() {
    if !have_fs("ext4") {
        return;
    }
    let mut rng = seeded("workdir swap");
    let mut f = Figures::new("workdir swap (image, journal image)");
    let started = Instant::now();
    for _ in 0..rounds(2) {
        workdir_swap(&mut f, &mut rng, 1, &[]);
        workdir_swap(&mut f, &mut rng, 2, &["--journal", "file:8M"]);
    }
    eprintln!("workdir swap: {:.1} s", started.elapsed().as_secs_f64());
    f.conclude();
}

#[test]
fn workdir_renamed_while_mounted() {
    if !have_fs("ext4") {
        return;
    }
    let mut rng = seeded("mounted rename");
    let mut f = Figures::new("rename while mounted");
    for _ in 0..rounds(2) {
        mounted_rename(&mut f, &mut rng);
    }
    f.conclude();
}

#[test]
fn dir_swapped_for_a_symlink_to_the_victim() {
    if !have_root() {
        return;
    }
    let mut rng = seeded("--dir swap");
    let mut f = Figures::new("--dir swap (mid-create, mid-delete)");
    for _ in 0..rounds(2) {
        dir_swap(&mut f, &mut rng, When::Create);
        dir_swap(&mut f, &mut rng, When::Delete);
    }
    f.conclude();
}

#[test]
fn out_and_report_names_planted_as_symlinks_to_the_victim() {
    if !have_root() {
        return;
    }
    let mut rng = seeded("planted names");
    let mut f = Figures::new("planted temporaries (--out, report -o)");
    for _ in 0..rounds(2) {
        out_plant(&mut f, &mut rng);
        report_plant(&mut f, &mut rng);
    }
    f.conclude();
}

/// A root-only directory with a file in it, and a directory of nobody's with a link to it.
struct Planted {
    secret: PathBuf,
    user: PathBuf,
}

fn plant(sb: &Sandbox) -> Planted {
    let secret = sb.path().join("root-only");
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(secret.join("keep.txt"), b"root's\n").unwrap();
    let user = sb.path().join("home-nobody");
    std::fs::create_dir(&user).unwrap();
    std::os::unix::fs::chown(&user, Some(NOBODY), Some(NOBODY)).unwrap();
    // The sandbox is root's 0700: nobody needs to pass through it to its own directory.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let link = user.join("sub");
    symlink(&secret, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    Planted { secret, user }
}

// Item 2: a directory link planted by another user in an output path is refused, naming the
// link and its owner; the root-only directory stays as it was.
#[test]
fn a_directory_link_in_a_users_path_is_refused() {
    if !have_root() {
        return;
    }
    let sb = Sandbox::new();
    let res = results(&sb);
    let p = plant(&sb);
    let o = sb
        .cmd()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(p.user.join("sub/keep.txt"))
        .output()
        .unwrap();
    refused_with(&o, "report -o through the link", &["sub", "uid 65534"]);
    assert_eq!(
        std::fs::read(p.secret.join("keep.txt")).unwrap(),
        b"root's\n"
    );

    let dir = sb.path().join("tree2");
    std::fs::create_dir_all(&dir).unwrap();
    let o = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--quiet",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--out")
        .arg(p.user.join("sub"))
        .output()
        .unwrap();
    refused_with(&o, "--out through the link", &["sub", "uid 65534"]);
    let names: Vec<_> = std::fs::read_dir(&p.secret)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("keep.txt")],
        "written into the root-only directory"
    );
    // The same link as --dir (where the run makes its own directory and tree) and --workdir.
    let o = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--quiet",
        ])
        .arg("--dir")
        .arg(p.user.join("sub"))
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    refused_with(&o, "--dir through the link", &["sub", "uid 65534"]);
    if have_fs("ext4") {
        let o = sb
            .cmd()
            .args([
                "bench",
                "tree",
                "--fs",
                "ext4",
                "--fs-size",
                "64M",
                "--dirs",
                "1",
            ])
            .args(["--files", "2", "--file-size", "4K", "--quiet", "--workdir"])
            .arg(p.user.join("sub"))
            .arg("--out")
            .arg(sb.out())
            .output()
            .unwrap();
        refused_with(&o, "--workdir through the link", &["sub", "uid 65534"]);
    }
    // A --device named through a link of the user's (to a device node of root's): refused
    // before anything would be formatted.
    let disk = p.user.join("disk");
    symlink("/dev/null", &disk).unwrap();
    std::os::unix::fs::lchown(&disk, Some(NOBODY), Some(NOBODY)).unwrap();
    let o = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--destroy-data",
            "--quiet",
            "--device",
        ])
        .arg(&disk)
        .output()
        .unwrap();
    refused_with(&o, "--device through the link", &["disk", "uid 65534"]);
    let names: Vec<_> = std::fs::read_dir(&p.secret)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("keep.txt")],
        "made in the root-only directory"
    );
    // Read as input through the same link (a plan): refused, and nothing of the file shown.
    let o = sb
        .cmd()
        .arg("run")
        .arg(p.user.join("sub/keep.txt"))
        .arg("--dry-run")
        .output()
        .unwrap();
    refused_with(&o, "a plan through the link", &["uid 65534"]);
    assert!(!err_of(&o).contains("root's"), "{}", err_of(&o));
}

// Item 3: a /var/tmp/fsgauge that another user made a link (in a private mount namespace with
// its own /var/tmp, whatever fs.protected_symlinks says) is refused by every command that
// uses fsgauge's work directory, before anything is made, and no ledger entry is left.
#[test]
fn a_planted_var_tmp_fsgauge_link_is_refused() {
    if !have_root() || !have_fs("ext4") {
        return;
    }
    // The sandbox must not be below /var/tmp, which the namespace covers.
    let sb = tempfile::Builder::new()
        .prefix("fsgauge-test-ns-")
        .tempdir_in("/tmp")
        .unwrap();
    let victim = sb.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let state = sb.path().join("state");
    let exe = crate::support::exe_outside_var_tmp(sb.path());
    let protected = std::fs::read_to_string("/proc/sys/fs/protected_symlinks").unwrap_or_default();
    eprintln!("fs.protected_symlinks = {}", protected.trim());
    for cmd in [
        format!("{exe} bench tree --fs ext4 --fs-size 64M --dirs 1 --files 1 --file-size 4K --quiet --out {0}/out", sb.path().display()),
        format!("{exe} bench tree --fs ext4 --fs-size 64M --device-model ram --dirs 1 --files 1 --file-size 4K --quiet --out {0}/out", sb.path().display()),
        format!("{exe} devices check ram --seconds 0.2"),
    ] {
        let script = format!(
            "set -e; mount -t tmpfs -o mode=1777 fsgauge-test /var/tmp; \
             setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups ln -s {victim} /var/tmp/fsgauge; \
             set +e; {cmd}; rc=$?; ls -la /var/tmp/fsgauge/ >&2; exit $rc",
            victim = victim.display()
        );
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("FSGAUGE_STATE_DIR", &state);
        let o = within(c, 60, &cmd);
        refused_with(&o, &cmd, &["/var/tmp/fsgauge", "uid 65534"]);
        let left: Vec<_> = std::fs::read_dir(&victim)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{cmd}: made {left:?} in the link's target");
        let entries: Vec<_> = std::fs::read_dir(&state)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            entries.iter().all(|n| !n.to_string_lossy().ends_with(".json")),
            "{cmd}: ledger entries left: {entries:?}"
        );
    }
}

#[test]
fn renamed_then_killed_then_cleaned_up() {
    if !have_fs("ext4") {
        return;
    }
    let mut rng = seeded("rename + SIGKILL + cleanup");
    let mut f = Figures::new("rename + SIGKILL + cleanup (by the workdir's owner, by root)");
    for _ in 0..rounds(1) {
        killed_after_rename(&mut f, &mut rng, Renamer::Owner);
        killed_after_rename(&mut f, &mut rng, Renamer::Root);
    }
    f.conclude();
}
