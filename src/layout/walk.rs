//! The parallel tree walk behind `fsgauge frag`: worker threads take directories from a shared
//! stack, read each directory in readdir order (so inter-file locality is judged in directory
//! order), and map every regular file: from the filesystem's own structures where it can
//! ([`super::ext`], ext2/3/4 with a readable device: the files' inodes are read in batches,
//! without opening the files), else with [`super::scan::map_file`] (FIEMAP).
//!
//! It is built to survive real trees: entries that vanish, permission errors, special files and
//! symlinks are counted, never fatal; directories are remembered by (device, inode) so a bind
//! mount that loops back is visited once; mount points and other filesystems are not entered
//! unless asked. Memory stays flat: per thread one summary builder and one top-K list, plus the
//! stack of directories still to read and the set of directories seen.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use anyhow::Result;

use super::ext::{ExtReader, Odd, OndiskMap};
use super::metrics::{FileLayout, LayoutSummary, SummaryBuilder};
use super::scan::{layout_from_ondisk, map_file, FsRules};
use super::sys::magic;
use crate::base::error::bad_input;
use crate::base::sys::dirstream::{DirStream, EntryType};

/// How a tree is walked.
#[derive(Debug, Clone)]
pub struct WalkOptions {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Enter mount points and other filesystems below the starting paths.
    pub cross_mounts: bool,
    /// Worst files kept in the summary.
    pub top: usize,
    /// Build each file's path (needed for per-file output).
    pub paths: bool,
    /// How block maps are read.
    pub method: ScanMethod,
}

crate::choice! {
    /// How the walk reads block maps.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ScanMethod("method") {
        /// From the on-disk structures where the filesystem allows it (ext2/3/4 with a readable
        /// block device), else FIEMAP.
        #[default]
        Auto = "auto",
        /// FIEMAP for every file (FIBMAP where FIEMAP is missing).
        Fiemap = "fiemap",
        /// From the on-disk structures; a starting path where that is impossible is an error.
        /// Single files whose inode looks odd are still mapped with FIEMAP (and noted).
        Ondisk = "ondisk",
    }
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            // Twice the CPUs: on a cold cache each file waits for its inode to be read, and more
            // threads keep the device busy; on a warm cache the extra threads cost little.
            threads: (2 * std::thread::available_parallelism().map_or(2, |n| n.get())).clamp(4, 16),
            cross_mounts: false,
            top: 10,
            paths: false,
            method: ScanMethod::Auto,
        }
    }
}

/// Receives every file as it is mapped (from any worker thread).
pub type FileSink<'a> = &'a (dyn Fn(&FileLayout) + Sync);

struct Job {
    path: PathBuf,
    /// The device of the starting path this directory was reached from.
    root_dev: u64,
    /// The directory's own (device, inode).
    key: (u64, u64),
}

/// A regular file found by readdir, waiting for its inode to be read from disk.
struct Pending {
    name: std::ffi::CString,
    ino: u64,
}

/// Files whose inodes are read together (bounds memory in huge directories).
const CHUNK: usize = 4096;

struct Queue {
    jobs: Vec<Job>,
    busy: usize,
    failed: bool,
}

struct Shared<'a> {
    queue: Mutex<Queue>,
    ready: Condvar,
    seen: Mutex<HashSet<(u64, u64)>>,
    opts: &'a WalkOptions,
    sink: Option<FileSink<'a>>,
    /// On-disk readers by device (or why there is none; noted once).
    readers: Mutex<HashMap<u64, Result<Arc<ExtReader>, String>>>,
    /// Directories (device, inode) with a mount point in them: their files are opened (FIEMAP)
    /// so that a file mounted over an entry is seen as the mount, not the file below it.
    mount_parents: HashSet<(u64, u64)>,
}

impl<'a> Shared<'a> {
    /// The state the workers share: an empty queue, and (unless FIEMAP alone is used) the
    /// directories holding mount points.
    fn new(opts: &'a WalkOptions, sink: Option<FileSink<'a>>) -> Self {
        Shared {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                busy: 0,
                failed: false,
            }),
            ready: Condvar::new(),
            seen: Mutex::new(HashSet::new()),
            opts,
            sink,
            readers: Mutex::new(HashMap::new()),
            mount_parents: if opts.method == ScanMethod::Fiemap {
                HashSet::new()
            } else {
                mount_parents()
            },
        }
    }
}

/// The (device, inode) of the directory holding each mount point of this process.
fn mount_parents() -> HashSet<(u64, u64)> {
    let mut out = HashSet::new();
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return out;
    };
    for line in text.lines() {
        let Some(mp) = line.split(' ').nth(4) else {
            continue;
        };
        let mp = unescape_octal(mp);
        let Some(parent) = Path::new(OsStr::from_bytes(&mp)).parent() else {
            continue;
        };
        let Ok(c) = std::ffi::CString::new(parent.as_os_str().as_bytes()) else {
            continue;
        };
        if let Ok(st) = statx_follow(&c) {
            out.insert((dev_of(&st), st.stx_ino));
        }
    }
    out
}

/// Undoes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
fn unescape_octal(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn statx_follow(path: &CStr) -> io::Result<libc::statx> {
    crate::base::sys::statx(libc::AT_FDCWD, path, libc::AT_NO_AUTOMOUNT, libc::STATX_INO)
        .map_err(|e| io::Error::from_raw_os_error(e as i32))
}

fn statx_nofollow(dirfd: libc::c_int, name: &CStr) -> io::Result<libc::statx> {
    crate::base::sys::statx(
        dirfd,
        name,
        libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT,
        libc::STATX_TYPE | libc::STATX_INO | libc::STATX_SIZE,
    )
    .map_err(|e| io::Error::from_raw_os_error(e as i32))
}

fn dev_of(st: &libc::statx) -> u64 {
    libc::makedev(st.stx_dev_major, st.stx_dev_minor)
}

fn is_mount_root(st: &libc::statx) -> bool {
    st.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0
        && st.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0
}

fn kind_of(mode: u32) -> u32 {
    mode & libc::S_IFMT
}

/// Walks `paths` (directories or regular files) and summarizes every regular file below them.
/// `sink`, when given, sees every file as it is mapped.
pub fn scan_tree(
    paths: &[PathBuf],
    opts: &WalkOptions,
    sink: Option<FileSink<'_>>,
) -> Result<LayoutSummary> {
    let shared = Shared::new(opts, sink);
    let mut total = SummaryBuilder::new(opts.top);
    let mut worker0 = Worker::new(&shared);
    for p in paths {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| bad_input(format!("{}: path contains a NUL byte", p.display())))?;
        let st = statx_nofollow(libc::AT_FDCWD, &c)
            .map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
        let kind = kind_of(st.stx_mode as u32);
        let root_reader = worker0.root_reader(p, &c, &st)?;
        match kind {
            libc::S_IFDIR => {
                let key = (dev_of(&st), st.stx_ino);
                if shared.seen.lock().expect("seen set lock").insert(key) {
                    shared.queue.lock().expect("queue lock").jobs.push(Job {
                        path: p.clone(),
                        root_dev: dev_of(&st),
                        key,
                    });
                }
            }
            libc::S_IFREG => {
                worker0.b.new_directory();
                match root_reader {
                    // The path was resolved (mounts crossed) by statx: its inode is the file.
                    Some(r) => {
                        worker0.pending.push(Pending {
                            name: c.clone(),
                            ino: st.stx_ino,
                        });
                        worker0.flush(&r, None, Path::new(""), (dev_of(&st), dev_of(&st)), true);
                    }
                    None => worker0.file(libc::AT_FDCWD, &c, p, dev_of(&st), true),
                }
            }
            libc::S_IFLNK => {
                return Err(bad_input(format!(
                    "{} is a symbolic link; give the path it points to",
                    p.display()
                )))
            }
            _ => {
                return Err(bad_input(format!(
                    "{} is neither a directory nor a regular file",
                    p.display()
                )))
            }
        }
    }
    for b in run_workers(&shared, worker0)? {
        total.merge(b);
    }
    let mut s = total.finish();
    s.method = opts.method.name().to_string();
    Ok(s)
}

/// Runs `worker0` and `opts.threads - 1` more workers over the queued directories until the
/// queue is empty; returns each worker's summary, or an error where one of them panicked.
fn run_workers<'s, 'a>(
    shared: &'s Shared<'a>,
    mut worker0: Worker<'s, 'a>,
) -> Result<Vec<SummaryBuilder>> {
    let threads = shared.opts.threads.max(1);
    let results: Vec<SummaryBuilder> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut w = Worker::new(shared);
                    w.run();
                    w.b
                })
            })
            .collect();
        worker0.run();
        let mut out = vec![std::mem::take(&mut worker0.b)];
        for h in handles {
            match h.join() {
                Ok(b) => out.push(b),
                Err(_) => {
                    shared.queue.lock().expect("queue lock").failed = true;
                }
            }
        }
        out
    });
    if shared.queue.lock().expect("queue lock").failed {
        anyhow::bail!("a scanning thread panicked");
    }
    Ok(results)
}

/// Opens a directory or regular file for fstatfs/syncfs (never blocks on a FIFO, never follows
/// a symlink).
fn open_quietly(path: &CStr) -> io::Result<OwnedFd> {
    crate::base::sys::open(
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
        0,
    )
    .map_err(|e| io::Error::from_raw_os_error(e as i32))
}

struct Worker<'s, 'a> {
    shared: &'s Shared<'a>,
    b: SummaryBuilder,
    rules: HashMap<u64, FsRules>,
    /// Files of the current directory waiting for their inodes to be read.
    pending: Vec<Pending>,
    /// Inode-table read buffer, reused.
    buf: Vec<u8>,
}

impl<'s, 'a> Worker<'s, 'a> {
    fn new(shared: &'s Shared<'a>) -> Self {
        Self {
            shared,
            b: SummaryBuilder::new(shared.opts.top),
            rules: HashMap::new(),
            pending: Vec::new(),
            buf: Vec::new(),
        }
    }

    /// The filesystem rules of device `dev`, learnt from `fd` the first time.
    fn rules_for(&mut self, dev: u64, fd: BorrowedFd<'_>) -> io::Result<FsRules> {
        if let Some(r) = self.rules.get(&dev) {
            return Ok(*r);
        }
        let r = FsRules::probe(fd)?;
        self.rules.insert(dev, r);
        Ok(r)
    }

    /// The on-disk reader of device `dev` (`fd`: any open file or directory on it), opened the
    /// first time any thread asks (which syncs that filesystem once); the error says why there
    /// is none. Filesystems other than ext2/3/4 are refused without a note in `auto` mode.
    fn reader_for(&mut self, dev: u64, fd: BorrowedFd<'_>) -> Result<Arc<ExtReader>, String> {
        let mut readers = self.shared.readers.lock().expect("readers lock");
        if let Some(r) = readers.get(&dev) {
            return r.clone();
        }
        let r = match self.rules_for(dev, fd) {
            Err(e) => Err(format!("statfs: {e}")),
            Ok(rules) if rules.magic != magic::EXT => Err(format!(
                "{}: the on-disk reader knows ext2/3/4 only",
                rules.name()
            )),
            Ok(_) => ExtReader::open(fd, dev).map(Arc::new),
        };
        if let Err(e) = &r {
            let ext = self.rules.get(&dev).is_some_and(|r| r.magic == magic::EXT);
            if ext || self.shared.opts.method == ScanMethod::Ondisk {
                self.b.note_method(format!(
                    "device {}:{}: {e}; FIEMAP used",
                    libc::major(dev),
                    libc::minor(dev)
                ));
            }
        }
        readers.insert(dev, r.clone());
        r
    }

    /// Maps the pending files (one directory's, in readdir order) from their on-disk inodes,
    /// falling back to FIEMAP for any inode that does not look right, and adds them in order.
    /// `dev` is the directory's device, `root_dev` that of the starting path it was reached
    /// from (they differ only with --cross-mounts). `dir_fd` is the open directory, `None`
    /// for a file named on the command line (resolved from the working directory).
    fn flush(
        &mut self,
        reader: &ExtReader,
        dir_fd: Option<BorrowedFd<'_>>,
        dir: &Path,
        (dev, root_dev): (u64, u64),
        top_level: bool,
    ) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let inos: Vec<u64> = pending.iter().map(|p| p.ino).collect();
        let mut maps: Vec<Option<Result<OndiskMap, Odd>>> = Vec::new();
        maps.resize_with(pending.len(), || None);
        reader.map_inodes(&inos, &mut self.buf, |i, m| maps[i] = Some(m));
        let dirfd = dir_fd.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        let rules = match dir_fd {
            None => self.rules.get(&dev).copied(),
            Some(d) => self.rules_for(dev, d).ok(),
        };
        for (p, m) in pending.iter().zip(maps) {
            let child = || dir.join(OsStr::from_bytes(p.name.to_bytes()));
            match (m, rules) {
                (Some(Ok(m)), Some(rules)) => {
                    let fl = layout_from_ondisk(&m, &rules);
                    self.accept(fl, child);
                }
                (m, _) => {
                    let path = child();
                    let mapped_before = self.b.mapped_files();
                    self.file(dirfd, &p.name, &path, root_dev, top_level);
                    // A file that is gone by now was deleted during the scan: counted as
                    // vanished, not worth a note.
                    if let (Some(Err(why)), true) = (m, self.b.mapped_files() > mapped_before) {
                        self.b.note_method(format!(
                            "{}: on-disk inode {} not used ({why}); FIEMAP used",
                            path.display(),
                            p.ino
                        ));
                    }
                }
            }
        }
        self.pending = pending;
        self.pending.clear();
    }

    /// Counts one mapped file (building its path only when someone needs it).
    fn accept(&mut self, mut fl: FileLayout, path: impl FnOnce() -> PathBuf) {
        if self.shared.opts.paths || self.b.wants_worst(&fl) {
            fl.path = path().display().to_string();
        }
        if let Some(sink) = self.shared.sink {
            sink(&fl);
        }
        self.b.add(&fl);
    }

    fn run(&mut self) {
        loop {
            let job = {
                let mut q = self.shared.queue.lock().expect("queue lock");
                loop {
                    if let Some(j) = q.jobs.pop() {
                        q.busy += 1;
                        break Some(j);
                    }
                    if q.busy == 0 || q.failed {
                        break None;
                    }
                    q = self.shared.ready.wait(q).expect("queue lock");
                }
            };
            let Some(job) = job else {
                self.shared.ready.notify_all();
                return;
            };
            let found = self.directory(&job);
            let mut q = self.shared.queue.lock().expect("queue lock");
            q.busy -= 1;
            let more = !found.is_empty();
            q.jobs.extend(found);
            let done = q.busy == 0 && q.jobs.is_empty();
            drop(q);
            if more || done {
                self.shared.ready.notify_all();
            }
        }
    }

    fn count_error(&mut self, path: &Path, what: &str, e: &io::Error) {
        let sk = &mut self.b.skipped;
        if e.kind() == io::ErrorKind::Unsupported {
            if sk.unsupported == 0 {
                sk.note(format!("{}: {what}: {e}", path.display()));
            }
            sk.unsupported += 1;
            return;
        }
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESTALE) => sk.vanished += 1,
            Some(libc::EACCES) | Some(libc::EPERM) => {
                sk.permission_denied += 1;
                sk.note(format!("{}: {what}: {e}", path.display()));
            }
            Some(libc::ELOOP) => sk.symlinks += 1,
            Some(libc::ENXIO) | Some(libc::ENODEV) => sk.special_files += 1,
            _ => {
                sk.errors += 1;
                sk.note(format!("{}: {what}: {e}", path.display()));
            }
        }
    }

    /// The on-disk reader for root path `p` (`c`, statx'ed as `st`), where the method reads
    /// on disk and `p` is a directory or regular file; with `--method ondisk`, a reader that
    /// cannot be had is refused now, before scanning.
    fn root_reader(
        &mut self,
        p: &Path,
        c: &CStr,
        st: &libc::statx,
    ) -> Result<Option<Arc<ExtReader>>> {
        let method = self.shared.opts.method;
        let kind = kind_of(st.stx_mode as u32);
        if method == ScanMethod::Fiemap || !matches!(kind, libc::S_IFDIR | libc::S_IFREG) {
            return Ok(None);
        }
        let r = open_quietly(c)
            .map_err(|e| format!("opening: {e}"))
            .and_then(|fd| self.reader_for(dev_of(st), fd.as_fd()));
        match r {
            Ok(r) => Ok(Some(r)),
            Err(e) if method == ScanMethod::Ondisk => Err(bad_input(format!(
                "--method ondisk: {}: {e} (--method auto falls back to FIEMAP)",
                p.display()
            ))),
            Err(_) => Ok(None),
        }
    }

    /// Opens directory `job` (never following a symlink): its descriptor, for *at() calls,
    /// and a stream reading its entries from a second descriptor; `None`, the error counted,
    /// where it cannot be opened or read.
    fn open_directory(&mut self, job: &Job) -> Option<(OwnedFd, DirStream)> {
        let c = std::ffi::CString::new(job.path.as_os_str().as_bytes()).ok()?;
        let fd = match crate::base::sys::open(
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                let e = io::Error::from_raw_os_error(e as i32);
                self.count_error(&job.path, "opening directory", &e);
                return None;
            }
        };
        // A second descriptor for the stream, so `fd` stays usable for *at() calls.
        let dup = match fd.try_clone() {
            Ok(d) => d,
            Err(e) => {
                self.count_error(&job.path, "reading directory", &e);
                return None;
            }
        };
        match DirStream::new(dup) {
            Ok(d) => Some((fd, d)),
            Err(e) => {
                self.count_error(&job.path, "reading directory", &io::Error::from(e));
                None
            }
        }
    }

    /// Reads one directory; returns the subdirectories to walk.
    fn directory(&mut self, job: &Job) -> Vec<Job> {
        let mut subdirs = Vec::new();
        let Some((fd, mut dir)) = self.open_directory(job) else {
            return subdirs;
        };
        let dirfd = fd.as_raw_fd();
        self.b.new_directory();
        let reader = if self.shared.opts.method == ScanMethod::Fiemap
            || self.shared.mount_parents.contains(&job.key)
        {
            None
        } else {
            self.reader_for(job.key.0, fd.as_fd()).ok()
        };
        while let Some(ent) = dir.next_with_ino() {
            let (name, kind, ino) = match ent {
                Ok(e) => e,
                Err(e) => {
                    self.count_error(&job.path, "reading directory", &io::Error::from(e));
                    break;
                }
            };
            let nb = name.to_bytes();
            match kind {
                EntryType::File => match &reader {
                    Some(r) => self.queue_file(r, fd.as_fd(), job, name, ino),
                    None => {
                        let child = job.path.join(OsStr::from_bytes(nb));
                        self.file(dirfd, name, &child, job.root_dev, false);
                    }
                },
                EntryType::Dir => {
                    let child = job.path.join(OsStr::from_bytes(nb));
                    if let Some(j) = self.subdir(dirfd, name, child, job.root_dev) {
                        subdirs.push(j);
                    }
                }
                EntryType::Symlink => self.b.skipped.symlinks += 1,
                EntryType::Other => self.b.skipped.special_files += 1,
                EntryType::Unknown => {
                    let child = job.path.join(OsStr::from_bytes(nb));
                    match statx_nofollow(dirfd, name) {
                        Ok(st) => match kind_of(st.stx_mode as u32) {
                            libc::S_IFREG => match &reader {
                                Some(r) if dev_of(&st) == job.key.0 && !is_mount_root(&st) => {
                                    self.queue_file(r, fd.as_fd(), job, name, st.stx_ino)
                                }
                                _ => self.file(dirfd, name, &child, job.root_dev, false),
                            },
                            libc::S_IFDIR => {
                                if let Some(j) = self.subdir(dirfd, name, child, job.root_dev) {
                                    subdirs.push(j);
                                }
                            }
                            libc::S_IFLNK => self.b.skipped.symlinks += 1,
                            _ => self.b.skipped.special_files += 1,
                        },
                        Err(e) => self.count_error(&child, "stat", &e),
                    }
                }
            }
        }
        if let Some(r) = &reader {
            self.flush(
                r,
                Some(fd.as_fd()),
                &job.path,
                (job.key.0, job.root_dev),
                false,
            );
        }
        drop(fd);
        // Depth-first keeps the stack short; reversed so directories are taken in readdir order.
        subdirs.reverse();
        subdirs
    }

    /// Queues a regular file for the on-disk reader; a full batch is mapped at once.
    fn queue_file(
        &mut self,
        reader: &ExtReader,
        dir_fd: BorrowedFd<'_>,
        job: &Job,
        name: &CStr,
        ino: u64,
    ) {
        self.pending.push(Pending {
            name: name.to_owned(),
            ino,
        });
        if self.pending.len() >= CHUNK {
            self.flush(
                reader,
                Some(dir_fd),
                &job.path,
                (job.key.0, job.root_dev),
                false,
            );
        }
    }

    fn subdir(
        &mut self,
        dirfd: libc::c_int,
        name: &CStr,
        path: PathBuf,
        root_dev: u64,
    ) -> Option<Job> {
        let st = match statx_nofollow(dirfd, name) {
            Ok(st) => st,
            Err(e) => {
                self.count_error(&path, "stat", &e);
                return None;
            }
        };
        if kind_of(st.stx_mode as u32) != libc::S_IFDIR {
            // Replaced since the directory was read.
            self.b.skipped.vanished += 1;
            return None;
        }
        let dev = dev_of(&st);
        if !self.shared.opts.cross_mounts && (dev != root_dev || is_mount_root(&st)) {
            self.b.skipped.other_mounts += 1;
            return None;
        }
        if !self
            .shared
            .seen
            .lock()
            .expect("seen set lock")
            .insert((dev, st.stx_ino))
        {
            self.b.skipped.loops += 1;
            return None;
        }
        Some(Job {
            path,
            root_dev,
            key: (dev, st.stx_ino),
        })
    }

    fn file(
        &mut self,
        dirfd: libc::c_int,
        name: &CStr,
        path: &Path,
        root_dev: u64,
        top_level: bool,
    ) {
        // O_NONBLOCK: if the entry was replaced by a FIFO since readdir, open must not hang.
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
        let fd = match crate::base::sys::open_at(dirfd, name, flags, 0) {
            Ok(fd) => fd,
            Err(e) => {
                self.count_error(path, "open", &io::Error::from_raw_os_error(e as i32));
                return;
            }
        };
        let st = match crate::base::sys::fstat(fd.as_fd()) {
            Ok(st) => st,
            Err(e) => {
                self.count_error(path, "stat", &io::Error::from_raw_os_error(e as i32));
                return;
            }
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            self.b.skipped.special_files += 1;
            return;
        }
        #[allow(clippy::unnecessary_cast)]
        let dev = st.st_dev as u64;
        if !top_level && !self.shared.opts.cross_mounts && dev != root_dev {
            // A file bind-mounted from elsewhere.
            self.b.skipped.other_mounts += 1;
            return;
        }
        let rules = match self.rules_for(dev, fd.as_fd()) {
            Ok(r) => r,
            Err(e) => {
                self.count_error(path, "statfs", &e);
                return;
            }
        };
        match map_file(fd.as_fd(), st.st_size as u64, &rules) {
            Ok(fl) => self.accept(fl, || path.to_path_buf()),
            Err(e) => self.count_error(path, "reading the block map", &e),
        }
    }
}
