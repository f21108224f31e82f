//! The environment a run ran in, beyond [`super::HostInfo`]: the settings that most often
//! explain why the same benchmark gave a different number on another day or machine — the vm
//! sysctls that govern writeback and reclaim, the block queue of the device under test and of
//! the loop device's backing device, the CPU and its frequency governor, the mkfs and kernel
//! module versions, the kernel command line, and the exact fsgauge build. Collected once per
//! run, outside measured phases, from /proc and /sys (plus one `mkfs -V`).
//!
//! [`env_diff`] names the fields that differ between two sets of results, so that `compare`
//! can show the likely explanation before the numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::{RunResult, TestbedInfo};

/// vm sysctls that change filesystem results (writeback thresholds and timing, reclaim).
const VM_SYSCTLS: &[&str] = &[
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_bytes",
    "dirty_background_bytes",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
    "dirtytime_expire_seconds",
    "swappiness",
    "vfs_cache_pressure",
    "min_free_kbytes",
    "watermark_scale_factor",
    "overcommit_memory",
    "overcommit_ratio",
    "zone_reclaim_mode",
    "page-cluster",
];

/// Everything recorded about the environment of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Environment {
    /// sysctls by their dotted name (`vm.dirty_ratio`), value as the kernel prints it.
    pub sysctl: BTreeMap<String, String>,
    /// The queue of the block device under test.
    pub device: Option<BlockQueue>,
    /// The queue of the block device holding the loop device's backing file (loop testbeds on a
    /// block-device filesystem; absent on tmpfs).
    pub backing_device: Option<BlockQueue>,
    /// The loop device's own report of direct I/O on its backing file (`/sys/block/loopN/loop/dio`).
    pub loop_dio: Option<bool>,
    /// CPU model name (/proc/cpuinfo).
    pub cpu_model: String,
    /// cpufreq scaling governors in use (several only when CPUs differ); absent without cpufreq.
    pub cpu_governor: Option<String>,
    /// First line of the version output of the mkfs that made the filesystem.
    pub mkfs_version: Option<String>,
    /// Kernel modules' versions (`/sys/module/X/version`) of the filesystem and the loop
    /// driver, where the kernel exports one.
    pub modules: BTreeMap<String, String>,
    /// The kernel command line.
    pub kernel_cmdline: String,
    /// The fsgauge build.
    pub build: BuildInfo,
    /// The nice the run's threads had: -20, which a run takes from the default 0 so that other
    /// work on the machine takes less of its CPU, or the one it was started under. Absent in
    /// results written before fsgauge recorded it (they ran at the nice they were started at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// The kernel threads of the testbed's filesystem by name (`jbd2/loop3-8`,
    /// `xfsaild/loop3`) and their nice while the run held it: a run at a raised nice gives them
    /// its own. Empty without a block device, on btrfs, and in results written before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_threads: BTreeMap<String, i32>,
}

/// Settings of one block device's request queue (/sys/block/DEV/queue).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct BlockQueue {
    /// Kernel name of the whole device (`loop3`, `vda`).
    pub name: String,
    /// The I/O scheduler in use.
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub rotational: Option<bool>,
    pub read_ahead_kb: Option<u64>,
    pub max_sectors_kb: Option<u64>,
}

/// The fsgauge build that made a result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct BuildInfo {
    pub version: String,
    /// `git rev-parse HEAD` at build time, or `unknown` outside a git checkout.
    pub commit: String,
    /// The checkout had uncommitted changes to tracked files.
    pub dirty: bool,
}

impl BuildInfo {
    pub fn current() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("FSGAUGE_GIT_COMMIT").to_string(),
            dirty: env!("FSGAUGE_GIT_DIRTY") == "true",
        }
    }
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

impl Environment {
    /// Reads the environment of a run on `testbed` (call it while the testbed exists).
    pub fn collect(testbed: &TestbedInfo) -> Self {
        Self::collect_under(Path::new("/"), testbed)
    }

    /// [`Self::collect`] with /proc and /sys looked up under `root` (tests use a fake tree).
    fn collect_under(root: &Path, testbed: &TestbedInfo) -> Self {
        let sysctl = VM_SYSCTLS
            .iter()
            .filter_map(|k| {
                read_trim(root.join("proc/sys/vm").join(k)).map(|v| (format!("vm.{k}"), v))
            })
            .collect();
        let dev_name = testbed
            .device
            .as_deref()
            .and_then(|d| Path::new(d).file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let device = dev_name
            .as_deref()
            .and_then(|n| whole_device(&root.join("sys/class/block").join(n)))
            .map(|d| BlockQueue::read(&d));
        let loop_dir = dev_name
            .as_deref()
            .filter(|n| n.starts_with("loop"))
            .map(|n| root.join("sys/block").join(n).join("loop"));
        let loop_dio = loop_dir
            .as_ref()
            .and_then(|d| read_trim(d.join("dio")))
            .map(|v| v == "1");
        let backing_device = loop_dir
            .as_ref()
            .and_then(|d| read_trim(d.join("backing_file")))
            .and_then(|f| backing_block_dir(root, Path::new(&f)))
            .map(|d| BlockQueue::read(&d));
        let mut modules = BTreeMap::new();
        for m in [testbed.fs.as_str(), "loop"] {
            if m.is_empty() {
                continue;
            }
            if let Some(v) = read_trim(root.join("sys/module").join(m).join("version")) {
                modules.insert(m.to_string(), v);
            }
        }
        Self {
            sysctl,
            device,
            backing_device,
            loop_dio,
            cpu_model: cpu_model(
                &fs::read_to_string(root.join("proc/cpuinfo")).unwrap_or_default(),
            ),
            cpu_governor: cpu_governor(&root.join("sys/devices/system/cpu")),
            mkfs_version: if testbed.mkfs_args.is_empty() {
                None
            } else {
                mkfs_version(&testbed.fs)
            },
            modules,
            kernel_cmdline: read_trim(root.join("proc/cmdline")).unwrap_or_default(),
            build: BuildInfo::current(),
            nice: None,
            kernel_threads: dev_name
                .as_deref()
                .map(|n| crate::base::sys::proc::fs_threads(&root.join("proc"), n))
                .unwrap_or_default()
                .into_iter()
                .map(|t| (t.name, t.nice))
                .collect(),
        }
    }

    /// With the nice the run's threads had.
    pub fn with_nice(self, nice: i32) -> Self {
        Self {
            nice: Some(nice),
            ..self
        }
    }
}

impl BlockQueue {
    /// Reads the queue of the whole device whose sysfs directory is `dir`.
    fn read(dir: &Path) -> Self {
        let q = dir.join("queue");
        let num = |a: &str| read_trim(q.join(a)).and_then(|v| v.parse().ok());
        Self {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            scheduler: read_trim(q.join("scheduler")).map(|s| selected_scheduler(&s)),
            nr_requests: num("nr_requests"),
            rotational: num("rotational").map(|v: u64| v != 0),
            read_ahead_kb: num("read_ahead_kb"),
            max_sectors_kb: num("max_sectors_kb"),
        }
    }
}

/// The scheduler the kernel marks as in use: `[mq-deadline] none` → `mq-deadline`.
fn selected_scheduler(s: &str) -> String {
    s.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or(s)
        .to_string()
}

/// The sysfs directory of the whole device behind a block device's sysfs link (a partition's
/// queue settings are its disk's).
fn whole_device(link: &Path) -> Option<PathBuf> {
    let dir = fs::canonicalize(link).ok()?;
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir)
    }
}

/// The sysfs directory of the block device holding `file` (none on tmpfs, btrfs's anonymous
/// devices and other filesystems without one).
fn backing_block_dir(root: &Path, file: &Path) -> Option<PathBuf> {
    let file = file.to_string_lossy();
    let file = file.strip_suffix(" (deleted)").unwrap_or(&file);
    let dev = fs::metadata(file).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return None;
    }
    whole_device(&root.join(format!("sys/dev/block/{major}:{minor}")))
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Model" | "cpu model").then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// The distinct cpufreq governors of all CPUs, joined with `,`.
fn cpu_governor(cpu_dir: &Path) -> Option<String> {
    let govs: BTreeSet<String> = fs::read_dir(cpu_dir)
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix("cpu")
                    .is_some_and(|d| d.parse::<u32>().is_ok())
            })
        })
        .filter_map(|e| read_trim(e.path().join("cpufreq/scaling_governor")))
        .collect();
    (!govs.is_empty()).then(|| govs.into_iter().collect::<Vec<_>>().join(","))
}

/// The first line of the version output of the mkfs for `fs` (mke2fs prints it on stderr).
fn mkfs_version(fs: &str) -> Option<String> {
    let (prog, flag) = match fs {
        "ext2" | "ext3" | "ext4" => ("mke2fs", "-V"),
        "xfs" => ("mkfs.xfs", "-V"),
        "btrfs" => ("mkfs.btrfs", "--version"),
        _ => return None,
    };
    let out = Command::new(prog).arg(flag).output().ok()?;
    let text = [out.stdout, out.stderr].concat();
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// One environment field that differs between two sets of results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Difference {
    /// The field (`vm.dirty_ratio`, `kernel`, `device.scheduler`).
    pub field: String,
    /// Its distinct values in the base set.
    pub base: Vec<String>,
    /// Its distinct values in the new set.
    pub new: Vec<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} → {}",
            self.field,
            self.base.join(", "),
            self.new.join(", ")
        )
    }
}

/// One environment field whose value is not the same in every run of a set: each value, with
/// the testbeds whose runs had it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Spread {
    /// The field (`mkfs`, `vm.dirty_ratio`, `kernel`).
    pub field: String,
    /// Each distinct value and the testbed labels of the runs that had it.
    pub values: Vec<(String, Vec<String>)>,
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(v, tbs)| format!("{v} ({})", tbs.join(", ")))
            .collect();
        write!(f, "{}: {}", self.field, parts.join("; "))
    }
}

/// The environment fields whose values differ among `results` (a report's runs), each value
/// with the testbeds that had it. Only the runs that recorded a field are compared on it: a
/// result from before the field was recorded adds no value of its own.
pub fn env_spread(results: &[RunResult]) -> Vec<Spread> {
    let mut seen: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for r in results {
        for (k, v) in env_fields(r) {
            seen.entry(k)
                .or_default()
                .entry(v)
                .or_default()
                .insert(r.testbed.label.clone());
        }
    }
    seen.into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|(field, values)| Spread {
            field,
            values: values
                .into_iter()
                .map(|(v, tbs)| (v, tbs.into_iter().collect()))
                .collect(),
        })
        .collect()
}

/// "these runs differ in:", then one item a line, indented, and a blank line; empty for no
/// items. What `compare` and the text report print before their numbers.
pub fn differ_text<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut s = String::from("these runs differ in:\n");
    for d in items {
        s.push_str(&format!("  {d}\n"));
    }
    s.push('\n');
    s
}

/// The comparable environment fields of one result, by name. Names of devices that change
/// from run to run (`loop3`) are left out; their settings are in.
pub fn env_fields(r: &RunResult) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("kernel".to_string(), r.host.kernel.clone());
    m.insert("hostname".to_string(), r.host.hostname.clone());
    m.insert("cpus".to_string(), r.host.cpus.to_string());
    m.insert("memory".to_string(), r.host.memory.to_string());
    m.insert("fsgauge".to_string(), r.tool.version.clone());
    let Some(e) = &r.environment else {
        return m;
    };
    let mut commit = e.build.commit.clone();
    if e.build.dirty {
        commit.push_str(" (dirty)");
    }
    m.insert("fsgauge.commit".into(), commit);
    m.extend(e.sysctl.clone());
    for (prefix, q) in [("device", &e.device), ("backing_device", &e.backing_device)] {
        let Some(q) = q else { continue };
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                m.insert(format!("{prefix}.{k}"), v);
            }
        };
        if prefix == "backing_device" {
            put("name", Some(q.name.clone()));
        }
        put("scheduler", q.scheduler.clone());
        put("nr_requests", q.nr_requests.map(|v| v.to_string()));
        put("rotational", q.rotational.map(|v| v.to_string()));
        put("read_ahead_kb", q.read_ahead_kb.map(|v| v.to_string()));
        put("max_sectors_kb", q.max_sectors_kb.map(|v| v.to_string()));
    }
    if let Some(d) = e.loop_dio {
        m.insert("loop.dio".into(), d.to_string());
    }
    m.insert("cpu_model".into(), e.cpu_model.clone());
    if let Some(g) = &e.cpu_governor {
        m.insert("cpu_governor".into(), g.clone());
    }
    if let Some(v) = &e.mkfs_version {
        m.insert("mkfs".into(), v.clone());
    }
    for (k, v) in &e.modules {
        m.insert(format!("module.{k}"), v.clone());
    }
    m.insert("kernel_cmdline".into(), e.kernel_cmdline.clone());
    m
}

/// The environment fields whose values differ between the base and the new results. A field
/// recorded on one side only (results from before it was recorded) is not a difference.
pub fn env_diff(base: &[RunResult], new: &[RunResult]) -> Vec<Difference> {
    let values = |rs: &[RunResult]| {
        let mut v: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in rs {
            for (k, x) in env_fields(r) {
                v.entry(k).or_default().insert(x);
            }
        }
        v
    };
    let (b, n) = (values(base), values(new));
    b.into_iter()
        .filter_map(|(field, bv)| {
            let nv = n.get(&field)?;
            (&bv != nv).then(|| Difference {
                field,
                base: bv.into_iter().collect(),
                new: nv.iter().cloned().collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().expect("a relative path under root")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    #[test]
    fn scheduler_in_brackets_is_the_one_in_use() {
        assert_eq!(
            selected_scheduler("none [mq-deadline] kyber"),
            "mq-deadline"
        );
        assert_eq!(selected_scheduler("[none] mq-deadline"), "none");
        assert_eq!(selected_scheduler("none"), "none");
    }

    #[test]
    fn collects_sysctls_queue_cpu_and_cmdline_from_a_fake_tree() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path();
        write(root, "proc/sys/vm/dirty_ratio", "20\n");
        write(root, "proc/sys/vm/swappiness", "60\n");
        write(root, "proc/cmdline", "quiet mitigations=off\n");
        write(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Test CPU 9000\n",
        );
        write(
            root,
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "performance\n",
        );
        write(
            root,
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "performance\n",
        );
        write(
            root,
            "sys/devices/virtual/block/loop7/queue/scheduler",
            "[none] mq-deadline\n",
        );
        write(
            root,
            "sys/devices/virtual/block/loop7/queue/nr_requests",
            "128\n",
        );
        write(
            root,
            "sys/devices/virtual/block/loop7/queue/rotational",
            "0\n",
        );
        write(
            root,
            "sys/devices/virtual/block/loop7/queue/read_ahead_kb",
            "128\n",
        );
        write(
            root,
            "sys/devices/virtual/block/loop7/queue/max_sectors_kb",
            "1280\n",
        );
        write(root, "sys/block/loop7/loop/dio", "1\n");
        fs::create_dir_all(root.join("sys/class/block")).expect("mkdir");
        std::os::unix::fs::symlink(
            root.join("sys/devices/virtual/block/loop7"),
            root.join("sys/class/block/loop7"),
        )
        .expect("symlink");
        let tb = TestbedInfo {
            fs: "ext4".into(),
            device: Some("/dev/loop7".into()),
            ..Default::default()
        };
        let e = Environment::collect_under(root, &tb);
        assert_eq!(
            e.sysctl.get("vm.dirty_ratio").map(String::as_str),
            Some("20")
        );
        assert_eq!(
            e.sysctl.get("vm.swappiness").map(String::as_str),
            Some("60")
        );
        assert!(!e.sysctl.contains_key("vm.dirty_bytes"));
        assert_eq!(e.kernel_cmdline, "quiet mitigations=off");
        assert_eq!(e.cpu_model, "Test CPU 9000");
        assert_eq!(e.cpu_governor.as_deref(), Some("performance"));
        assert_eq!(e.loop_dio, Some(true));
        let q = e.device.expect("the loop device's queue");
        assert_eq!(q.name, "loop7");
        assert_eq!(q.scheduler.as_deref(), Some("none"));
        assert_eq!(q.nr_requests, Some(128));
        assert_eq!(q.rotational, Some(false));
        assert_eq!(q.read_ahead_kb, Some(128));
        assert_eq!(q.max_sectors_kb, Some(1280));
        // No backing_file in the fake tree, and no mkfs command line: neither is made up.
        assert_eq!(e.backing_device, None);
        assert_eq!(e.mkfs_version, None);
    }

    #[test]
    fn a_partition_reports_its_disks_queue() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path();
        write(root, "sys/devices/pci/block/sda/queue/rotational", "1\n");
        write(root, "sys/devices/pci/block/sda/sda1/partition", "1\n");
        let q = whole_device(&root.join("sys/devices/pci/block/sda/sda1"))
            .map(|d| BlockQueue::read(&d))
            .expect("the disk");
        assert_eq!(q.name, "sda");
        assert_eq!(q.rotational, Some(true));
    }

    #[test]
    fn the_real_backing_device_of_a_file_is_found_when_it_has_one() {
        // /proc/self/exe lives on some filesystem; when that has a block device, its queue is
        // found under /sys/dev/block.
        let exe = fs::read_link("/proc/self/exe").expect("own executable");
        let dev = fs::metadata(&exe).expect("stat").dev();
        let found = backing_block_dir(Path::new("/"), &exe);
        if libc::major(dev) == 0 {
            assert_eq!(found, None);
        } else {
            let d = found.expect("a block device directory");
            assert!(d.join("queue").is_dir(), "{} has no queue", d.display());
        }
    }

    fn with_env(kernel: &str, dirty_ratio: &str) -> RunResult {
        let mut e = Environment::default();
        e.sysctl.insert("vm.dirty_ratio".into(), dirty_ratio.into());
        e.sysctl.insert("vm.swappiness".into(), "60".into());
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": super::super::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": kernel, "cpus": 2, "memory": 1},
            "testbed": TestbedInfo::default(), "workload": {"kind": "x", "params": {}},
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "none"},
            "phases": [], "errors": []
        }))
        .expect("a minimal result");
        r.environment = Some(e);
        r
    }

    #[test]
    fn diff_names_the_fields_that_differ_and_only_those() {
        let base = [with_env("6.18.4", "20"), with_env("6.18.4", "20")];
        let new = [with_env("6.18.44", "10")];
        let d = env_diff(&base, &new);
        let lines: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["kernel 6.18.4 → 6.18.44", "vm.dirty_ratio 20 → 10"]);
        assert!(env_diff(&base, &base).is_empty());
    }

    #[test]
    fn spread_names_each_differing_value_with_its_testbeds() {
        let on = |label: &str, kernel: &str, ratio: &str| {
            let mut r = with_env(kernel, ratio);
            r.testbed.label = label.into();
            r
        };
        let runs = [
            on("a", "6.18.4", "20"),
            on("a", "6.18.4", "20"),
            on("b", "6.18.4", "10"),
            on("c", "6.18.4", "10"),
        ];
        let lines: Vec<String> = env_spread(&runs).iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["vm.dirty_ratio: 10 (b, c); 20 (a)"]);
        assert!(env_spread(&runs[..2]).is_empty());
        // A run from before the environment was recorded adds no value and hides none.
        let mut old = on("d", "6.18.4", "5");
        old.environment = None;
        let with_old = [runs[0].clone(), runs[2].clone(), old];
        let lines: Vec<String> = env_spread(&with_old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(lines, ["vm.dirty_ratio: 10 (b); 20 (a)"]);
    }

    #[test]
    fn a_field_recorded_on_one_side_only_is_no_difference() {
        let mut old = with_env("6.1", "20");
        old.environment = None;
        let d = env_diff(&[old], &[with_env("6.1", "10")]);
        assert!(d.is_empty(), "{d:?}");
    }
}
