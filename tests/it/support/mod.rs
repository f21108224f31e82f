//! Shared helpers for command-line tests: running the binary with a private ledger and work
//! directory, skipping (with a printed reason) when the machine lacks root, loop devices or a
//! mkfs — except under CI (`CI` set), where a missing requirement fails the test instead.
#![allow(dead_code)] // helpers are shared; not every test uses each

use std::path::{Path, PathBuf};
use std::process::Command;

/// A private sandbox per test: its own ledger (FSGAUGE_STATE_DIR), work directory and results.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

/// The transport every emulated disk of the tests uses unless a test names one: /dev/fuse.
/// The FUSE-over-io_uring tests (device_uring) turn the kernel's switch on and back off; a
/// disk another test had started through the ring in between would fail once it is off.
/// Those tests name their transport (or unset it, for `auto`) on their own commands.
pub const TEST_TRANSPORT: &str = "dev";

/// `EmulatedDevice::start_in` served through [`TEST_TRANSPORT`], for tests that start a
/// server in their own process (a disk's transport is a setting of the disk: no test
/// process's environment or global reaches its server).
pub fn start_device(
    ledger: &Path,
    profile: &str,
    image: &Path,
    size: u64,
    offset: u64,
) -> anyhow::Result<fsgauge::device::EmulatedDevice> {
    use fsgauge::device::emulated::{EmulatedDevice, Start};
    use fsgauge::device::server::{DiskSettings, Serving};
    let serving = Serving {
        transport: Some(TEST_TRANSPORT.parse().map_err(anyhow::Error::msg)?),
        store: None,
    };
    EmulatedDevice::start_with(&Start {
        ledger_dir: Some(ledger),
        disk: DiskSettings::new(fsgauge::device::ProfileRef::new(profile)?, size, offset)
            .served(serving),
        image: image.to_path_buf(),
        role: "",
    })
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("fsgauge-test-")
            .tempdir_in("/var/tmp")
            .or_else(|_| tempfile::tempdir())
            .expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("work")).expect("work dir");
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    pub fn workdir(&self) -> PathBuf {
        self.path().join("work")
    }

    pub fn out(&self) -> PathBuf {
        self.path().join("results")
    }

    /// `fsgauge` with this sandbox's ledger, run in the sandbox (so that a default
    /// `--out fsgauge-results` lands there, not in the checkout).
    pub fn cmd(&self) -> Command {
        self.cmd_of(Path::new(env!("CARGO_BIN_EXE_fsgauge")))
    }

    /// [`Sandbox::cmd`] of the fsgauge binary at `exe` (a copy of it, say).
    pub fn cmd_of(&self, exe: &Path) -> Command {
        let mut c = Command::new(exe);
        c.current_dir(self.path());
        c.env("FSGAUGE_STATE_DIR", self.state());
        c.env("FSGAUGE_DEVICE_TRANSPORT", TEST_TRANSPORT);
        c
    }

    /// `fsgauge devices check ram` on a 64M disk with a 0.2 s time box: the check's quickest
    /// full run, for tests of its output; more arguments follow.
    pub fn quick_ram_check(&self) -> Command {
        let mut c = self.cmd();
        c.args([
            "devices",
            "check",
            "ram",
            "--size",
            "64M",
            "--seconds",
            "0.2",
        ]);
        c
    }

    /// `fsgauge` with the sandbox's ledger plus `--workdir` and `--out` appended after `args`
    /// (no `--workdir` with `--dir`, which refuses it: it builds no testbed).
    pub fn bench(&self, args: &[&str]) -> Command {
        self.bench_of(Path::new(env!("CARGO_BIN_EXE_fsgauge")), args)
    }

    /// [`Sandbox::bench`] of the fsgauge binary at `exe`.
    pub fn bench_of(&self, exe: &Path, args: &[&str]) -> Command {
        let mut c = self.cmd_of(exe);
        c.args(args);
        if !args.contains(&"--dir") {
            c.arg("--workdir").arg(self.workdir());
        }
        c.arg("--out").arg(self.out());
        c
    }

    /// The result files written to [`Sandbox::out`], by repetition.
    pub fn results(&self) -> Vec<fsgauge::results::RunResult> {
        let mut out: Vec<fsgauge::results::RunResult> = std::fs::read_dir(self.out())
            .unwrap()
            .map(|e| fsgauge::results::load(&e.unwrap().path()).unwrap())
            .collect();
        out.sort_by_key(|r| r.rep);
        out
    }

    /// Fails the test if anything of this sandbox is still mounted, attached or recorded.
    pub fn assert_clean(&self) {
        let leaks = leaks_under(self.path());
        assert!(leaks.is_empty(), "left behind: {leaks:#?}");
        let ledger = self.state().join("ledger");
        if ledger.exists() {
            let left: Vec<_> = std::fs::read_dir(&ledger)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            assert!(left.is_empty(), "ledger entries left: {left:?}");
        }
        let work = self.workdir();
        if work.exists() {
            let left: Vec<_> = std::fs::read_dir(&work)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            assert!(
                left.is_empty(),
                "files left in the work directory: {left:?}"
            );
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never let a failed test poison the machine: tear down what the ledger knows.
        if self.state().join("ledger").exists() {
            let _ = self.cmd().args(["testbed", "cleanup", "--all"]).output();
        }
    }
}

/// Mounts below `dir` and loop devices whose backing file is below `dir`.
pub fn leaks_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let d = dir.to_string_lossy().to_string();
    if let Ok(m) = std::fs::read_to_string("/proc/self/mountinfo") {
        for l in m.lines() {
            if let Some(mp) = l.split(' ').nth(4) {
                if mp.starts_with(&d) {
                    out.push(format!("mount {mp}"));
                }
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.filter_map(|e| e.ok()) {
            if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
                if b.trim().starts_with(&d)
                    || (b.contains("/dev/shm/fsgauge")
                        && b.contains(&std::process::id().to_string()))
                {
                    out.push(format!(
                        "{} -> {}",
                        e.file_name().to_string_lossy(),
                        b.trim()
                    ));
                }
            }
        }
    }
    out
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Skips a test with a printed reason (fails it under CI).
pub fn skip(reason: &str) -> bool {
    if in_ci() {
        panic!("CI must run every test, but: {reason}");
    }
    eprintln!("skipped: {reason}");
    false
}

/// True when root with loop devices; otherwise prints why the test is skipped.
pub fn have_root() -> bool {
    if !nix_is_root() {
        return skip("needs root (loop devices, mkfs, mount)");
    }
    if !Path::new("/dev/loop-control").exists() {
        return skip("needs /dev/loop-control (loop devices)");
    }
    true
}

/// Root and /dev/fuse, for emulated disks (their device server is a FUSE file).
pub fn have_fuse() -> bool {
    if !have_root() {
        return false;
    }
    if !Path::new("/dev/fuse").exists() {
        return skip("needs /dev/fuse");
    }
    true
}

/// True when root, loop devices and `mkfs.<kind>` are available.
pub fn have_fs(kind: &str) -> bool {
    if !have_root() {
        return false;
    }
    let prog = format!("mkfs.{kind}");
    let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"]
        .iter()
        .any(|d| Path::new(d).join(&prog).exists());
    if !found {
        return skip(&format!("needs {prog}"));
    }
    true
}

/// The fsgauge binary at a path that a private mount namespace with a /var/tmp of its own
/// still sees: the built one, or, when the checkout is under /var/tmp (which the namespace's
/// tmpfs hides), a copy of it in `dir` (a directory outside /var/tmp).
pub fn exe_outside_var_tmp(dir: &Path) -> String {
    let exe = Path::new(env!("CARGO_BIN_EXE_fsgauge"));
    let real = std::fs::canonicalize(exe).expect("the fsgauge binary");
    let var_tmp = std::fs::canonicalize("/var/tmp").unwrap_or_else(|_| "/var/tmp".into());
    if !real.starts_with(&var_tmp) {
        return exe.display().to_string();
    }
    let copy = dir.join("fsgauge");
    std::fs::copy(&real, &copy).expect("copying fsgauge out of /var/tmp");
    copy.display().to_string()
}

/// True when a program is on PATH; otherwise skips (or fails under CI).
pub fn have_program(name: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .chain(["/usr/sbin".into(), "/sbin".into()])
                .any(|d| d.join(name).is_file())
        })
        .unwrap_or(false);
    if !found {
        return skip(&format!("needs {name}"));
    }
    true
}

fn nix_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Parses stdout as JSON.
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The smallest testbed size the filesystem tests use: xfs needs 300M (its log and allocation
/// groups), the others 256M.
pub fn size_of(fs: &str) -> &'static str {
    if fs == "xfs" {
        "300M"
    } else {
        "256M"
    }
}

/// The phase called `name` of a result document (panics naming the phases there are).
pub fn phase<'a>(run: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {}", run["phases"]))
}

/// Checks a result document against the published schema (schema/fsgauge.run-1.schema.json).
pub fn assert_schema(doc: &serde_json::Value) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/fsgauge.run-1.schema.json"
    ))
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let v = jsonschema::validator_for(&schema).expect("the schema itself is valid");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "result does not match the schema: {errors:#?}"
    );
}

/// Asserts that a command was refused as bad input: exit code 2 and every needle in stderr.
pub fn assert_refused(out: &std::process::Output, what: &str, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}\nstderr: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{what}: stderr lacks {n:?}:\n{stderr}");
    }
}

/// Runs fsgauge with `args` (plus the sandbox's --workdir/--out), expects it refused as bad
/// input with every needle in stderr, and checks nothing was made: no result directory, no
/// testbed, ledger entry or work file.
pub fn refused(sb: &Sandbox, args: &[&str], needles: &[&str]) {
    let out = sb.bench(args).output().unwrap();
    assert_refused(&out, &format!("args {args:?}"), needles);
    assert!(
        !sb.out().exists(),
        "a result directory was made for bad input {args:?}"
    );
    sb.assert_clean();
}

/// Runs `fsgauge COMMAND… --quiet --dir DIR --out OUT ARGS…` and expects it refused as bad
/// input with `needle` in stderr (the refusal loops of the workload tests).
pub fn refused_in_dir(sb: &Sandbox, command: &[&str], dir: &Path, args: &[&str], needle: &str) {
    let out = sb
        .cmd()
        .args(command)
        .args(["--quiet", "--dir"])
        .arg(dir)
        .arg("--out")
        .arg(sb.out())
        .args(args)
        .output()
        .unwrap();
    assert_refused(&out, &format!("{args:?}"), &[needle]);
}

/// Runs `c` with a deadline; still running then is a hang: killed, and the test fails.
pub fn run_within(mut c: std::process::Command, secs: u64, what: &str) -> std::process::Output {
    let child = c
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = std::time::Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
            panic!(
                "{what}: still running after {:?} (it blocked)",
                t0.elapsed()
            );
        }
    }
}

/// A tmpfs the test mounts (as root) on a directory it makes, unmounted when dropped: a small
/// filesystem to fill, or to run out of inodes, whatever the machine's own disks hold.
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (`size=…,nr_inodes=…,mode=…`) on the new directory `dir`.
    pub fn mount(dir: &Path, options: &str) -> Self {
        std::fs::create_dir(dir).expect("the tmpfs's mount point");
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(options),
        )
        .unwrap_or_else(|e| panic!("mount -t tmpfs -o {options} {}: {e}", dir.display()));
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Its free bytes, as statvfs says.
    pub fn free(&self) -> u64 {
        let st = nix::sys::statvfs::statvfs(&self.dir).expect("statvfs of the tmpfs");
        st.blocks_available() as u64 * st.fragment_size() as u64
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: whatever a failed test left open on it, the mount goes now.
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// CPU pressure over a stretch of a test (PSI, /proc/pressure/cpu "some"): the share of its
/// wall time in which a runnable task waited for a CPU. A timing test asserts accuracy only on
/// a machine this quiet; on a busy one it prints its figures and says they were not asserted
/// (a test may not fail because the machine is busy).
pub struct Pressure {
    total_us: u64,
    t0: std::time::Instant,
}

/// CPU pressure share above which a machine counts as busy for timing assertions.
pub const BUSY_SHARE: f64 = 0.10;

fn cpu_pressure_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

impl Pressure {
    /// Starts counting (None where the kernel has no PSI).
    pub fn start() -> Option<Self> {
        Some(Self {
            total_us: cpu_pressure_us()?,
            t0: std::time::Instant::now(),
        })
    }

    /// The share of the wall time since [`Pressure::start`] under CPU pressure.
    pub fn share(&self) -> f64 {
        let now = cpu_pressure_us().unwrap_or(self.total_us);
        let wall = self.t0.elapsed().as_micros().max(1) as f64;
        now.saturating_sub(self.total_us) as f64 / wall
    }
}

/// Whether the machine was quiet enough since `p` started to assert `what`'s timing; prints
/// why not when it was busy. Without PSI, timing is asserted (as before PSI existed).
pub fn quiet_enough(p: &Option<Pressure>, what: &str) -> bool {
    let Some(p) = p else { return true };
    let share = p.share();
    if share > BUSY_SHARE {
        eprintln!(
            "{what}: the machine was busy (CPU pressure {:.0}% of the time, over {:.0}%): the figures above are printed, not asserted",
            share * 100.0,
            BUSY_SHARE * 100.0
        );
        return false;
    }
    true
}

/// `fsgauge` as the unprivileged user nobody (`setpriv`, a copy of the binary in the sandbox,
/// as the checkout may sit below a directory only root can enter), with a directory of the
/// sandbox nobody may write (`nobody-results`); `None` (skipped, a failure under CI) when
/// this is not root or setpriv is missing.
pub fn as_nobody(sb: &Sandbox) -> Option<(PathBuf, Command)> {
    use std::os::unix::fs::PermissionsExt;
    if !nix_is_root() {
        skip("needs root to switch to an unprivileged user");
        return None;
    }
    if !have_program("setpriv") {
        return None;
    }
    let out_dir = sb.path().join("nobody-results");
    std::fs::create_dir(&out_dir).expect("nobody's results directory");
    nix::unistd::chown(
        &out_dir,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .expect("chown to nobody");
    let bin = sb.path().join("fsgauge-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_fsgauge"), &bin).expect("a copy of fsgauge");
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o755))
        .expect("sandbox mode");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("binary mode");
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "env",
        "HOME=/tmp",
    ])
    .arg(&bin);
    Some((out_dir, cmd))
}
