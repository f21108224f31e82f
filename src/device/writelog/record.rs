//! The server's write log (see the design note in [`super`]). The threads that move a
//! request's data log it where they move it: a FUSE thread (or, with the FUSE ring, the
//! timing thread, the only one that moves a ring request's data) copies a write's data and
//! the first pre-image of its sectors under the log's lock, together with the store's write,
//! so the log's order is the store's. For its replies and the model's cache events the timing
//! thread takes no lock: it pushes them on a bounded lock-free queue, taken into the log by
//! whoever next holds the lock (only when the queue is full does it take a lock of its own,
//! held for a push). With the FUSE ring, the timing thread moves a logged write's data under
//! the log's lock like a FUSE thread would; the control thread holds that lock for a summary
//! or a crash state's build (milliseconds), which the caller asks for with the disk idle.
//! While the log is off a request costs one atomic load and, for a write, one atomic add.
//! The copies go into the log's buffer ([`super::data`]), written out to its file by the same
//! thread when full (one `pwrite` of 1 MiB); with the FUSE ring that thread is the timing
//! thread, whose crash file is not served anyway (runs with crash points use /dev/fuse).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_queue::ArrayQueue;

use super::cut::{self, Entry, LogView, Replied};
use super::data::{Blob, LogData};
use super::overlay::CrashState;
use super::{CacheEvent, CrashCache, CrashStateInfo, CutCandidate, EntryKind, LogSummary};
use crate::base::sys::Errno;
use crate::device::model::SECTOR;

/// The disk's bytes as the log reads and changes them: the server's store
/// (`server::store::Store`), given by the server, so that the log stays below it.
pub trait Media {
    /// Fills all of `buf` from `off` (past the end: zeros).
    fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno>;
    /// Writes all of `data` at `off`.
    fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno>;
    /// Frees or zeroes `len` bytes at `off` (`mode` as `fallocate(2)`).
    fn zero(&self, mode: i32, off: u64, len: u64) -> Result<(), Errno>;
}

/// What the timing thread tells the log.
#[derive(Debug, Clone, Copy)]
pub enum Timed {
    Replied(Replied),
    Cache(CacheEvent),
}

/// Replies and events the queue holds between two takes.
const QUEUE: usize = 64 * 1024;
/// Bytes of memory counted for a request's index entry, and for a reply or a cache event.
const ENTRY_COST: u64 = 128;
const EVENT_COST: u64 = 48;
/// The most memory the log's index may take (its entries, replies and cache events, counted
/// as above): a log that would pass it stops, as at its limit. About 1.5 million requests.
pub const INDEX_LIMIT: u64 = 256 << 20;

#[derive(Default)]
struct State {
    started: bool,
    active: bool,
    /// Why the log stopped before it was told to (its limit, its index's, its file failing):
    /// no crash state is built from it then.
    stopped: Option<String>,
    limit: u64,
    index_limit: u64,
    /// The log's bytes (data and pre-images) and where they are kept.
    data: Option<LogData>,
    in_file: bool,
    /// Bytes of memory the index is counted at.
    index_bytes: u64,
    entries: Vec<Entry>,
    ids: HashMap<u64, usize>,
    replies: Vec<Replied>,
    events: Vec<CacheEvent>,
    undo: BTreeMap<u64, Blob>,
    undo_bytes: u64,
    write_bytes: u64,
    /// Disk writes counted when the log started, and those it took since.
    writes_at_start: u64,
    logged_writes: u64,
}

impl State {
    /// Stops the log for `why` (it no longer holds every write).
    fn stop_for(&mut self, why: String, on: &AtomicBool) {
        self.stopped.get_or_insert(why);
        self.active = false;
        on.store(false, Ordering::Release);
    }

    /// The log's bytes so far.
    fn bytes(&self) -> u64 {
        self.data.as_ref().map_or(0, LogData::len)
    }

    /// Counts `bytes` more of the log's bytes and `index` more of its index against their
    /// limits; false (and the log stopped, saying why) when they do not fit.
    fn room(&mut self, bytes: u64, index: u64, on: &AtomicBool) -> bool {
        if self.bytes().saturating_add(bytes) > self.limit {
            let why = format!("the write log reached its limit of {} bytes", self.limit);
            self.stop_for(why, on);
            return false;
        }
        if self.index_bytes.saturating_add(index) > self.index_limit {
            let why = format!(
                "the write log's index in memory reached its limit of {} bytes ({} requests)",
                self.index_limit,
                self.entries.len()
            );
            self.stop_for(why, on);
            return false;
        }
        self.index_bytes += index;
        true
    }
}

/// The server's write log and the crash state it serves.
pub struct WriteLog {
    on: AtomicBool,
    /// Writes and zeroings of the disk since the server started, logged or not.
    disk_writes: AtomicU64,
    queue: ArrayQueue<Timed>,
    overflow: Mutex<Vec<Timed>>,
    state: Mutex<State>,
    served: Mutex<Option<Arc<CrashState>>>,
}

impl Default for WriteLog {
    fn default() -> Self {
        WriteLog {
            on: AtomicBool::new(false),
            disk_writes: AtomicU64::new(0),
            queue: ArrayQueue::new(QUEUE),
            overflow: Mutex::new(Vec::new()),
            state: Mutex::new(State::default()),
            served: Mutex::new(None),
        }
    }
}

/// The sector runs of [s0, s1) that no pre-image in `undo` covers.
fn gaps(undo: &BTreeMap<u64, Blob>, s0: u64, s1: u64) -> Vec<(u64, u64)> {
    let end_of = |a: u64, d: &Blob| a + d.len / SECTOR;
    let mut at = undo
        .range(..s0)
        .next_back()
        .map_or(s0, |(&a, d)| end_of(a, d).max(s0));
    let mut out = Vec::new();
    for (&a, d) in undo.range(s0..s1) {
        if a > at {
            out.push((at, a));
        }
        at = at.max(end_of(a, d));
    }
    if at < s1 {
        out.push((at, s1));
    }
    out
}

impl WriteLog {
    /// Whether requests are being logged (read on every request, without a lock).
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Tells the log of a reply or a cache event (the timing thread's side: no wait).
    pub fn note(&self, t: Timed) {
        if let Err(t) = self.queue.push(t) {
            self.overflow
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(t);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.take_timed(&mut st);
        st
    }

    fn take_timed(&self, st: &mut State) {
        while let Some(t) = self.queue.pop() {
            self.take_one(st, t);
        }
        let over = std::mem::take(&mut *self.overflow.lock().unwrap_or_else(|p| p.into_inner()));
        for t in over {
            self.take_one(st, t);
        }
    }

    fn take_one(&self, st: &mut State, t: Timed) {
        if !st.started || st.stopped.is_some() {
            return;
        }
        match t {
            Timed::Replied(r) if st.ids.contains_key(&r.id) => {
                if st.room(0, EVENT_COST, &self.on) {
                    st.replies.push(r);
                }
            }
            Timed::Replied(_) => {}
            Timed::Cache(e) => {
                if st.room(0, EVENT_COST, &self.on) {
                    st.events.push(e);
                }
            }
        }
    }

    /// Starts a new log of at most `limit` bytes of data and pre-images, kept in `file`
    /// (emptied first) or, without one, in memory; the previous log and its crash state go.
    /// Its index in memory holds at most [`INDEX_LIMIT`] bytes.
    pub fn start(&self, limit: u64, file: Option<File>) -> std::io::Result<()> {
        self.start_with(limit, INDEX_LIMIT, file)
    }

    /// [`WriteLog::start`] with an index limit of `index_limit` bytes.
    pub fn start_with(
        &self,
        limit: u64,
        index_limit: u64,
        file: Option<File>,
    ) -> std::io::Result<()> {
        let in_file = file.is_some();
        let data = match file {
            Some(f) => LogData::in_file(f)?,
            None => LogData::in_memory()?,
        };
        let mut st = self.lock();
        *self.served.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *st = State {
            started: true,
            active: true,
            limit,
            index_limit,
            data: Some(data),
            in_file,
            writes_at_start: self.disk_writes.load(Ordering::Acquire),
            ..State::default()
        };
        self.on.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops logging; the log stays for crash states.
    pub fn stop(&self) {
        let mut st = self.lock();
        st.active = false;
        self.on.store(false, Ordering::Release);
    }

    /// Logs an entry (its pre-images read from `store` first, then `payload`, its data) if
    /// there is room; the entry's index, or None when the log is off or full, or its file
    /// failed.
    fn log(
        &self,
        st: &mut State,
        store: &impl Media,
        mut e: Entry,
        payload: Option<&[u8]>,
    ) -> Option<usize> {
        if !st.active {
            return None;
        }
        let (s0, s1) = (e.offset / SECTOR, (e.offset + e.len).div_ceil(SECTOR));
        let missing = gaps(&st.undo, s0, s1);
        let undo: u64 = missing.iter().map(|(a, b)| (b - a) * SECTOR).sum();
        let data = payload.map_or(0, |d| d.len() as u64);
        if !st.room(data + undo, ENTRY_COST, &self.on) {
            return None;
        }
        match self.append(st, store, &missing, payload) {
            Ok((blob, failed)) => {
                e.data = blob;
                e.failed |= failed;
            }
            Err(err) => {
                let why = format!("writing the write log failed: {err}");
                st.stop_for(why, &self.on);
                return None;
            }
        }
        st.undo_bytes += undo;
        st.write_bytes += data;
        st.ids.insert(e.id, st.entries.len());
        st.entries.push(e);
        Some(st.entries.len() - 1)
    }

    /// Appends the pre-images of the `missing` sector runs (read from `store`) and `payload`
    /// to the log's bytes: where the payload is, and whether a pre-image could not be read
    /// (kept as zeros then).
    fn append(
        &self,
        st: &mut State,
        store: &impl Media,
        missing: &[(u64, u64)],
        payload: Option<&[u8]>,
    ) -> std::io::Result<(Option<Blob>, bool)> {
        let Some(data) = st.data.as_mut() else {
            return Err(std::io::Error::other("the log was not started"));
        };
        let mut failed = false;
        let mut pres = Vec::with_capacity(missing.len());
        for &(a, b) in missing {
            let blob = data.append_with(((b - a) * SECTOR) as usize, |pre| {
                if store.read(pre, a * SECTOR).is_err() {
                    pre.fill(0);
                    failed = true;
                }
            })?;
            pres.push((a, blob));
        }
        let blob = payload.map(|p| data.append(p)).transpose()?;
        st.undo.extend(pres);
        Ok((blob, failed))
    }

    /// Writes `data` at `offset` to `store`, logged (its data copied) when the log is on.
    pub fn write(
        &self,
        store: &impl Media,
        id: u64,
        data: &[u8],
        offset: u64,
        arrival_ns: u64,
    ) -> Result<usize, Errno> {
        self.disk_writes.fetch_add(1, Ordering::AcqRel);
        if !self.on() {
            return store.write(data, offset);
        }
        let mut st = self.lock();
        let e = Entry {
            id,
            kind: EntryKind::Write,
            offset,
            len: data.len() as u64,
            data: None,
            arrival_ns,
            failed: false,
        };
        let logged = self.log(&mut st, store, e, Some(data));
        let io = store.write(data, offset);
        if let Some(i) = logged {
            st.logged_writes += 1;
            st.entries[i].failed |= io.is_err();
        }
        io
    }

    /// Zeroes (discards) `len` bytes at `offset` of `store` (`mode` as `fallocate(2)`),
    /// logged when the log is on; a zeroing is not modelled, so its reply is now.
    pub fn zero(
        &self,
        store: &impl Media,
        id: u64,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.disk_writes.fetch_add(1, Ordering::AcqRel);
        if !self.on() {
            return store.zero(mode, offset, len);
        }
        let now = crate::base::sys::rt::monotonic_ns();
        let mut st = self.lock();
        let e = Entry {
            id,
            kind: EntryKind::Zero,
            offset,
            len,
            data: None,
            arrival_ns: now,
            failed: false,
        };
        let logged = self.log(&mut st, store, e, None);
        let io = store.zero(mode, offset, len);
        if let Some(i) = logged {
            st.logged_writes += 1;
            st.entries[i].failed |= io.is_err();
            let r = Replied {
                id,
                done_ns: now,
                reply_ns: crate::base::sys::rt::monotonic_ns(),
            };
            self.note(Timed::Replied(r));
        }
        io
    }

    /// Logs a cache flush arrived at `arrival_ns`.
    pub fn flush(&self, store: &impl Media, id: u64, arrival_ns: u64) {
        if !self.on() {
            return;
        }
        let mut st = self.lock();
        let e = Entry {
            id,
            kind: EntryKind::Flush,
            offset: 0,
            len: 0,
            data: None,
            arrival_ns,
            failed: false,
        };
        self.log(&mut st, store, e, None);
    }

    /// The log's figures and cut candidates.
    pub fn summary(&self) -> LogSummary {
        let st = self.lock();
        let count = |k: EntryKind| st.entries.iter().filter(|e| e.kind == k).count() as u64;
        let cuts = st
            .replies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let e = &st.entries[*st.ids.get(&r.id)?];
                Some(CutCandidate {
                    index: i as u64,
                    reply_ns: r.reply_ns,
                    done_ns: r.done_ns,
                    kind: e.kind,
                    offset: e.offset,
                    bytes: e.len,
                })
            })
            .collect();
        LogSummary {
            on: st.active,
            limit_bytes: st.limit,
            bytes: st.bytes(),
            limit_reached: st.stopped.is_some(),
            stopped: st.stopped.clone(),
            in_file: st.in_file,
            file_bytes: st.data.as_ref().map_or(0, LogData::allocated),
            index_bytes: st.index_bytes,
            index_limit_bytes: st.index_limit,
            requests: st.entries.len() as u64,
            writes: count(EntryKind::Write),
            flushes: count(EntryKind::Flush),
            fua: count(EntryKind::Fua),
            zeroes: count(EntryKind::Zero),
            write_bytes: st.write_bytes,
            undo_bytes: st.undo_bytes,
            cache_events: st.events.len() as u64,
            replied: st.replies.len() as u64,
            outside_log: self.outside(&st),
            unaligned: st
                .entries
                .iter()
                .filter(|e| e.offset % SECTOR != 0 || e.len % SECTOR != 0)
                .count() as u64,
            cuts,
        }
    }

    fn outside(&self, st: &State) -> u64 {
        let all = self.disk_writes.load(Ordering::Acquire) - st.writes_at_start;
        all.saturating_sub(st.logged_writes)
    }

    /// Builds the crash state at `cut` and serves it from now on (`image_bytes`: the disk's
    /// size, for the figures). An error says why none can be built.
    pub fn set_crash(
        &self,
        cut: u64,
        cache: CrashCache,
        seed: u64,
        image_bytes: u64,
    ) -> Result<CrashStateInfo, String> {
        let mut st = self.lock();
        if !st.started {
            return Err(
                "no write log: start one (`log start LIMIT_BYTES`) before the writes to cut".into(),
            );
        }
        if let Some(why) = &st.stopped {
            return Err(format!("{why} and stopped there: a crash state from it would miss later writes; start it again with a larger limit (--crash-log-limit), or with more free space where it is kept"));
        }
        let Some(data) = st.data.as_mut() else {
            return Err("the write log has no bytes".into());
        };
        if let Err(e) = data.flush() {
            let why = format!("writing the write log failed: {e}");
            st.stop_for(why.clone(), &self.on);
            return Err(why);
        }
        let reader = data.reader();
        let outside = self.outside(&st);
        if outside > 0 {
            return Err(format!("the disk was written {outside} times outside the write log (after it stopped): the store no longer matches the log; start the log again"));
        }
        let view = LogView {
            entries: &st.entries,
            replies: &st.replies,
            events: &st.events,
            undo: &st.undo,
        };
        let t0 = Instant::now();
        let b = cut::build(view, cut, cache, seed).map_err(|e| e.to_string())?;
        let build_ns = t0.elapsed().as_nanos() as u64;
        let info = CrashStateInfo {
            cut,
            reply_ns: b.reply_ns,
            done_ns: b.done_ns,
            cache,
            seed,
            dirty_bytes: b.dirty_bytes,
            cache_kept_bytes: b.kept_bytes,
            cache_lost_bytes: b.lost_bytes,
            bytes_mapped: b.bytes_mapped,
            zero_bytes_mapped: b.zero_bytes_mapped,
            sectors_considered: b.sectors_considered,
            pieces: b.overlay.pieces.len() as u64,
            build_ns,
            image_bytes,
        };
        let state = CrashState::new(
            b.overlay,
            Some(reader),
            self.disk_writes.load(Ordering::Acquire),
        );
        *self.served.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(state));
        Ok(info)
    }

    /// The crash state served: None before the first; Err(EIO) once the disk was written
    /// after it was set (the store changed under it).
    pub fn crash_state(&self) -> Result<Option<Arc<CrashState>>, Errno> {
        let served = self
            .served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match served {
            Some(s) if s.disk_writes_at != self.disk_writes.load(Ordering::Acquire) => {
                Err(Errno::EIO)
            }
            s => Ok(s),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::base::sys::mem_image::MemImage;

    /// The server's memory store, as the log sees it.
    struct Mem(MemImage);

    impl Mem {
        fn open(path: &std::path::Path, size: u64) -> Mem {
            let f = std::fs::File::open(path).unwrap();
            Mem(MemImage::load(&f, size, size).unwrap())
        }
    }

    impl Media for Mem {
        fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
            self.0.read(buf, off)
        }
        fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
            self.0.write(data, off)
        }
        fn zero(&self, _mode: i32, off: u64, len: u64) -> Result<(), Errno> {
            self.0.zero(off, len)
        }
    }

    fn store(dir: &tempfile::TempDir) -> Mem {
        let path = dir.path().join("image");
        std::fs::File::create(&path).unwrap();
        Mem::open(&path, 1 << 20)
    }

    fn replied(log: &WriteLog, id: u64, at: u64) {
        log.note(Timed::Replied(Replied {
            id,
            done_ns: at,
            reply_ns: at,
        }));
    }

    #[test]
    fn the_log_keeps_writes_pre_images_and_replies_and_builds_a_state_from_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        store.write(&[9u8; 8192], 0).unwrap();
        let log = WriteLog::default();
        log.write(&store, 1, &[5u8; 512], 0, 0).unwrap();
        log.start(1 << 20, None).unwrap();
        log.write(&store, 2, &[1u8; 4096], 0, 10).unwrap();
        log.write(&store, 3, &[2u8; 8192], 2048, 20).unwrap();
        log.flush(&store, 4, 30);
        replied(&log, 99, 5);
        for (id, at) in [(2, 15), (3, 25), (4, 35)] {
            replied(&log, id, at);
        }
        let s = log.summary();
        assert_eq!(
            (s.writes, s.flushes, s.replied, s.outside_log),
            (2, 1, 3, 0)
        );
        assert_eq!((s.write_bytes, s.undo_bytes), (4096 + 8192, 4096 + 6144));
        assert_eq!(s.cuts[0].offset, 0);
        assert_eq!((s.cuts[1].kind, s.cuts[1].bytes), (EntryKind::Write, 8192));
        let info = log.set_crash(0, CrashCache::LoseAll, 0, 1 << 20).unwrap();
        assert_eq!((info.done_ns, info.image_bytes), (15, 1 << 20));
        let st = log.crash_state().unwrap().unwrap();
        let mut buf = vec![0u8; 12 * 512];
        st.read(&mut buf, 0, &|b, off| store.read(b, off)).unwrap();
        let bytes: Vec<u8> = buf.chunks(512).map(|c| c[0]).collect();
        // Write 2 (cut 0) shows, write 3 over sectors 4 to 19 does not: write 2's data and
        // the pre-images do (the write before the log counts as there).
        assert_eq!(bytes, [1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9]);
        assert_eq!(
            info.bytes_mapped,
            2048 + 8192,
            "sectors 0 to 3 from write 2's data (mapped, not left to the store), 4 to 19 from the pre-images"
        );
        // A write outside the log makes the state stale and refuses the next one.
        log.stop();
        log.write(&store, 5, &[3u8; 512], 0, 40).unwrap();
        assert_eq!(log.crash_state().unwrap_err(), Errno::EIO);
        let e = log
            .set_crash(0, CrashCache::LoseAll, 0, 1 << 20)
            .unwrap_err();
        assert!(e.contains("written 1 times outside the write log"), "{e}");
    }

    #[test]
    fn a_log_past_its_limit_stops_and_refuses_crash_states() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let log = WriteLog::default();
        log.start(2 * 4096 + 4096, None).unwrap();
        log.write(&store, 1, &[1u8; 4096], 0, 0).unwrap();
        assert!(log.on());
        log.write(&store, 2, &[2u8; 4096], 4096, 0).unwrap();
        assert!(!log.on(), "the second write did not fit");
        let mut back = [0u8; 4096];
        store.read(&mut back, 4096).unwrap();
        assert_eq!(back, [2u8; 4096], "the write itself is served");
        let s = log.summary();
        assert!(s.limit_reached && !s.on);
        assert_eq!((s.writes, s.bytes), (1, 2 * 4096));
        assert!(s.stopped.unwrap().contains("its limit of 12288 bytes"));
        let e = log
            .set_crash(0, CrashCache::KeepAll, 0, 1 << 20)
            .unwrap_err();
        assert!(e.contains("reached its limit of"), "{e}");
    }

    /// The same requests into `log` over a store of its own: 6 MiB of overlapping writes (more
    /// than the index takes by far), flushes and a zeroing; their replies and no model.
    fn requests(log: &WriteLog, store: &Mem) {
        store.write(&[7u8; 1 << 20], 0).unwrap();
        let mut id = 0;
        for round in 0..12u64 {
            for k in 0..4u64 {
                id += 1;
                let data = vec![(round * 4 + k) as u8; 128 * 1024];
                let off = ((round * 37 + k * 300) % 1800) * 512;
                log.write(store, id, &data, off, id).unwrap();
                replied(log, id, id * 10);
            }
            id += 1;
            if round % 5 == 4 {
                log.zero(store, id, 0, round * 4096, 8192).unwrap();
            } else {
                log.flush(store, id, id);
                replied(log, id, id * 10);
            }
        }
    }

    #[test]
    fn a_log_kept_in_a_file_builds_the_same_states_as_one_in_memory_and_keeps_its_bytes_there() {
        let dir = tempfile::tempdir().unwrap();
        let (mem_dir, file_dir) = (dir.path().join("m"), dir.path().join("f"));
        std::fs::create_dir(&mem_dir).unwrap();
        std::fs::create_dir(&file_dir).unwrap();
        let open = |d: &std::path::Path| {
            let path = d.join("image");
            std::fs::File::create(&path).unwrap();
            Mem::open(&path, 2 << 20)
        };
        let (mem_store, file_store) = (open(&mem_dir), open(&file_dir));
        let (in_mem, in_file) = (WriteLog::default(), WriteLog::default());
        in_mem.start(1 << 30, None).unwrap();
        let path = file_dir.join("write.log");
        let file = std::fs::File::create_new(&path).unwrap();
        // An index budget far below the log's bytes: only the index is in memory.
        in_file.start_with(1 << 30, 64 * 1024, Some(file)).unwrap();
        requests(&in_mem, &mem_store);
        requests(&in_file, &file_store);
        let (m, f) = (in_mem.summary(), in_file.summary());
        assert!(!f.limit_reached, "{:?}", f.stopped);
        assert!(f.in_file && !m.in_file);
        assert!(f.bytes > 6 << 20, "{} bytes logged", f.bytes);
        assert!(
            f.index_bytes < 64 * 1024,
            "{} bytes of index",
            f.index_bytes
        );
        assert!(f.bytes >= 40 * f.index_bytes);
        assert_eq!(
            (f.cuts.len(), f.bytes, f.requests),
            (m.cuts.len(), m.bytes, m.requests)
        );
        for cut in [0, 1, 17, 30, f.cuts.len() as u64 - 1] {
            for cache in [CrashCache::LoseAll, CrashCache::KeepAll] {
                let a = in_mem.set_crash(cut, cache, 3, 2 << 20).unwrap();
                let b = in_file.set_crash(cut, cache, 3, 2 << 20).unwrap();
                assert_eq!((a.bytes_mapped, a.pieces), (b.bytes_mapped, b.pieces));
                let read = |log: &WriteLog, store: &Mem| {
                    let st = log.crash_state().unwrap().unwrap();
                    let mut buf = vec![0u8; 2 << 20];
                    st.read(&mut buf, 0, &|b, off| store.read(b, off)).unwrap();
                    buf
                };
                assert!(
                    read(&in_mem, &mem_store) == read(&in_file, &file_store),
                    "cut {cut} {cache}: the states differ"
                );
            }
        }
        // The bytes are in the file, written out before the state was built.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), f.bytes);
    }

    #[test]
    fn a_log_whose_index_outgrows_its_budget_stops_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let log = WriteLog::default();
        log.start_with(1 << 30, 3 * ENTRY_COST, None).unwrap();
        for id in 1..=4 {
            log.write(&store, id, &[1u8; 512], id * 512, 0).unwrap();
        }
        let s = log.summary();
        assert!(s.limit_reached && !s.on && s.writes == 3, "{s:?}");
        assert!(s
            .stopped
            .unwrap()
            .contains("index in memory reached its limit"));
        let e = log
            .set_crash(0, CrashCache::LoseAll, 0, 1 << 20)
            .unwrap_err();
        assert!(e.contains("would miss later writes"), "{e}");
    }

    #[test]
    fn gaps_are_the_sectors_no_pre_image_covers() {
        let mut undo: BTreeMap<u64, Blob> = BTreeMap::new();
        undo.insert(
            4,
            Blob {
                at: 0,
                len: 4 * 512,
            },
        );
        undo.insert(10, Blob { at: 0, len: 512 });
        assert_eq!(gaps(&undo, 0, 16), [(0, 4), (8, 10), (11, 16)]);
        assert_eq!(gaps(&undo, 5, 7), []);
        assert_eq!(gaps(&undo, 6, 9), [(8, 9)]);
    }
}
