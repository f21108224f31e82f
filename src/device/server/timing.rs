//! The timing thread: it owns the [`DeviceModel`], whose clock is the disk's own
//! ([`DiskClock`]: the monotonic clock less the pauses the emulator's late replies made), and
//! knows the requests' transport only through its seam ([`Transport`]: /dev/fuse's FUSE
//! threads handing each request over, data moved, or the ring it takes itself). It takes
//! each request as its transport hands it over, submits it at
//! its arrival, lets the drive take the next command when [`DeviceModel::ready_at`] comes, and
//! replies to each request at its `done_ns` (an absolute sleep, then a short spin). It runs
//! at a higher real-time priority than the FUSE threads, so copying data never delays a
//! reply; it takes no lock another thread holds for long (the hand-over is a channel, the
//! bookkeeping a note to the stats thread), does no I/O but the replies, and allocates only
//! the entries of its maps. Every time the model gives or takes is on disk time, converted
//! at the edge: an arrival with [`DiskClock::disk`], a wake-up with [`DiskClock::wall`]; a
//! reply that leaves late stops the disk's clock for its lateness ([`DiskClock::replied`]),
//! so the replies behind it are due that much later on the wall, not late.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use std::sync::atomic::Ordering;

use super::core::{note_reply, Core};
use super::heldoff::HeldOff;
use super::records::Note;
use super::stall::Stalls;
use crate::base::sys::rt;
use crate::device::model::clock::DiskClock;
use crate::device::model::{CacheEvent, Dispatch, Op};
use crate::device::transport::{Answer, Came, Held, Transport, Waiting};
use crate::device::writelog::record::{Timed, WriteLog};
use crate::device::DeviceModel;

/// How long before a reply is due the timing thread asks to be woken, at most and at first:
/// about the 99th percentile of a SCHED_FIFO thread's wake-up delay on a busy 2-core virtual
/// machine (a C loop of absolute sleeps measured p50 24 µs, p99 53–62 µs).
const LEAD_MAX_NS: u64 = 60_000;
/// ... and at least (a wake-up is never quicker than this).
const LEAD_MIN_NS: u64 = 2_000;
/// Wake-up delays remembered to set the lead.
const RECENT: usize = 32;

/// When to wake before a deadline. A fixed lead long enough for the slowest wake-ups spins
/// most of it away on every reply (60 µs of CPU per request, on a machine of 2 cores the
/// workload needs); the lead here is the 75th percentile of the last [`RECENT`] wake-up
/// delays, so a reply is usually on time after a short spin, and otherwise late by the
/// difference to the slower wake-ups (tens of µs, recorded as lateness like any other).
struct Lead {
    recent: [u64; RECENT],
    seen: usize,
    /// The lead as of the last wake-up: worked out there, not on each of the timing loop's
    /// passes (several a request), which only read it.
    ns: u64,
}

impl Lead {
    fn new() -> Lead {
        Lead {
            recent: [LEAD_MAX_NS; RECENT],
            seen: 0,
            ns: LEAD_MAX_NS,
        }
    }

    fn ns(&self) -> u64 {
        self.ns
    }

    /// A sleep asked to end at `asked` ended at `woke`.
    fn woke(&mut self, asked: u64, woke: u64) {
        self.recent[self.seen % RECENT] = woke.saturating_sub(asked);
        self.seen += 1;
        let mut r = self.recent;
        r.sort_unstable();
        self.ns = r[RECENT * 3 / 4].clamp(LEAD_MIN_NS, LEAD_MAX_NS);
    }
}

/// What the timing thread keeps of its timed waits: the lead it wakes by, and when the
/// machine last held it off its CPU past a wake-up it asked for ([`HeldOff`]).
struct Watch {
    lead: Lead,
    held: HeldOff,
}

impl Watch {
    /// Before a timed wait: the thread's CPU time.
    fn before(&self) -> u64 {
        rt::thread_cpu_ns()
    }

    /// After a timed wait entered at `entered`, asked to end at `asked`, that began with
    /// `cpu` ns of thread CPU time: the span the machine held the thread off; the wait's end
    /// (returned).
    fn after(&mut self, entered: u64, asked: u64, cpu: u64) -> u64 {
        let woke = rt::monotonic_ns();
        let ran = rt::thread_cpu_ns().saturating_sub(cpu);
        self.held = HeldOff::of_wait(entered, asked, woke, ran);
        woke
    }
}

/// A reply is spun for (woken the lead before it, the rest spun) only when the lead is more
/// than this fraction of its modelled response time: a wake-up's delay (tens of µs on a busy
/// virtual machine) is then a visible part of the reply's time (a 40 µs hit in the drive's
/// cache). A reply of milliseconds (a seek) sleeps to its time instead: it is late by the
/// wake-up's delay, under 1% of its time, recorded as lateness like any other, and the CPU a
/// spin would take (most of the lead, on every request) stays with the workload.
const SPIN_WORTH: u64 = 100;

/// When the timing thread must next be awake: `at`, woken `lead` before it and spinning the
/// rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wake {
    at: u64,
    lead: u64,
}

/// The next wake-up: for the drive's next command at `ready_at` (the model decides on its own
/// clock, so waking late changes nothing: no lead), or for the first reply due (`done`, with
/// its modelled response time), whichever needs waking first.
fn next_wake(ready_at: Option<u64>, reply: Option<(u64, u64)>, lead_ns: u64) -> Option<Wake> {
    let cmd = ready_at.map(|at| Wake { at, lead: 0 });
    let reply = reply.map(|(at, response)| Wake {
        at,
        lead: if lead_ns.saturating_mul(SPIN_WORTH) > response {
            lead_ns
        } else {
            0
        },
    });
    match (cmd, reply) {
        (Some(c), Some(r)) => Some(if c.at < r.at.saturating_sub(r.lead) {
            c
        } else {
            r
        }),
        (c, r) => c.or(r),
    }
}

/// What the timing thread keeps between its passes.
struct Desk<R> {
    /// The requests the model has, until their replies.
    waiting: Waiting<R>,
    /// Replies due, earliest first: (done, id) on disk time.
    due: BinaryHeap<Reverse<(u64, u64)>>,
    /// The drive's commands taken and not yet answered, by id.
    taken: HashMap<u64, Dispatch>,
    /// The model's cache events for the write log, taken after each command (room made once).
    events: Vec<CacheEvent>,
    /// What the transport handed over, for the model (room made once).
    got: Vec<Came<R>>,
    clock: DiskClock,
    watch: Watch,
    stalls: Option<Stalls>,
}

/// Runs until the transport has ended and every request is answered.
pub fn run<T: Transport>(mut model: DeviceModel, mut t: T, core: &Core) {
    let log = &*core.log;
    let mut desk = Desk {
        waiting: Waiting::new(),
        due: BinaryHeap::new(),
        taken: HashMap::new(),
        events: Vec::with_capacity(1024),
        got: Vec::new(),
        clock: DiskClock::default(),
        watch: Watch {
            lead: Lead::new(),
            held: HeldOff::default(),
        },
        stalls: Stalls::from_env(),
    };
    t.begin();
    core.crash_file
        .store(t.serves_crash_file(), Ordering::Release);
    loop {
        // Every request come by now goes to the model before the drive takes its next
        // command at any time up to now: it chooses among all that had arrived.
        desk.take(&mut t, &mut model);
        let now = desk.clock.disk(rt::monotonic_ns());
        // Requests taken since the log started (it is on before they were handed over) have
        // their cache events recorded.
        if model.records_cache_events() != log.on() {
            model.record_cache_events(log.on());
        }
        desk.commands(&mut model, now, log);
        desk.reply_due(&mut t, &mut model, core);
        if t.work(&mut desk.waiting) {
            continue;
        }
        if !t.open() && desk.waiting.is_empty() {
            return;
        }
        let reply = desk.due.peek().map(|&Reverse((done, id))| {
            let arrival = desk.taken.get(&id).map_or(done, |d| d.arrival_ns);
            (desk.clock.wall(done), done.saturating_sub(arrival))
        });
        let ready_at = model.ready_at().map(|t| desk.clock.wall(t));
        let wake = next_wake(ready_at, reply, desk.watch.lead.ns());
        wait(&mut t, wake, &mut desk.watch);
    }
}

impl<R: Answer> Desk<R> {
    /// The requests the transport has taken, to the model on arrival.
    fn take<T: Transport<Reply = R>>(&mut self, t: &mut T, model: &mut DeviceModel) {
        t.take(&mut self.got, &mut self.waiting);
        let now = rt::monotonic_ns();
        for Came { job, moved } in self.got.drain(..) {
            model.submit(job.req, DiskClock::arrival(job.arrival_ns, job.pause_ns));
            let held = Held {
                job,
                intake_ns: now,
                moved,
            };
            self.waiting.insert(held.job.req.id, held);
        }
    }

    /// The drive takes commands as the model frees it, on the model's time, up to `now`.
    fn commands(&mut self, model: &mut DeviceModel, now: u64, log: &WriteLog) {
        while let Some(t) = model.ready_at() {
            if t > now {
                break;
            }
            match model.next(t) {
                Some(d) => {
                    self.due.push(Reverse((d.done_ns, d.id)));
                    self.taken.insert(d.id, d);
                    log_cache_events(model, log, &mut self.events, &self.clock);
                }
                None => break,
            }
        }
    }

    /// Replies to every request whose completion has come (on the wall: the disk's clock may
    /// have stopped at a reply before it).
    fn reply_due<T: Transport<Reply = R>>(
        &mut self,
        t: &mut T,
        model: &mut DeviceModel,
        core: &Core,
    ) {
        while let Some(&Reverse((done, id))) = self.due.peek() {
            if self.clock.wall(done) > rt::monotonic_ns() {
                break;
            }
            self.due.pop();
            t.ready(id, &mut self.waiting);
            let (Some(d), Some(h)) = (self.taken.remove(&id), self.waiting.remove(&id)) else {
                continue;
            };
            let stall_ns = self.stalls.as_mut().map_or(0, Stalls::next_ns);
            if stall_ns > 0 {
                self.stall(t, model, stall_ns);
            }
            answer(h, &d, core, &self.watch.held, &mut self.clock);
        }
    }
}

impl<R: Answer> Desk<R> {
    /// An injected stall ([`Stalls`]) of `ns` before a reply: the reply is held, and the
    /// drive's next commands with it (the loop does not come back to them), while the
    /// requests that come meanwhile are still taken, at their arrival. A stall that also
    /// stopped the intake would have a ring request that came during it stamped when the
    /// thread took it, at the stall's end, which the stopped clock maps to the stop's start:
    /// the host's work during the stall (other threads, not waiting on the held reply) would
    /// then cost no disk time, and a stalled phase would look faster on disk than a plain one
    /// (tio seqwrite at 8 threads: 0.944 of plain in one table). Taken at their arrival, they
    /// land where the clock's definition puts them: as long after the stop's start as they
    /// came after it, in the disk's future until the stop ends.
    fn stall<T: Transport<Reply = R>>(&mut self, t: &mut T, model: &mut DeviceModel, ns: u64) {
        let until = rt::monotonic_ns().saturating_add(ns);
        loop {
            let now = rt::monotonic_ns();
            if now >= until {
                return;
            }
            t.wait(Some(Duration::from_nanos(until - now)));
            self.take(t, model);
        }
    }
}

/// Waits on the transport for requests until `wake` (none: until one comes), the replies made
/// so far sent first: asleep until the lead before it, then spinning, still taking the
/// requests that come.
fn wait<T: Transport>(t: &mut T, wake: Option<Wake>, watch: &mut Watch) {
    let now = rt::monotonic_ns();
    watch.held = HeldOff::default();
    match wake {
        None => t.wait(None),
        Some(Wake { at: w, lead: ahead }) if w > now + ahead => {
            let asked = w - ahead;
            let cpu = watch.before();
            t.wait(Some(Duration::from_nanos(asked - now)));
            let woke = watch.after(now, asked, cpu);
            if woke >= asked {
                watch.lead.woke(asked, woke);
            }
        }
        Some(Wake { at: w, .. }) => {
            t.send();
            while !t.came() && rt::monotonic_ns() < w {
                std::hint::spin_loop();
            }
        }
    }
}

/// Hands the model's cache events since the last command to the write log (when it is on),
/// their times on the wall clock (the model's are disk time; the log is judged against the
/// exerciser's operations, timed on the wall). An event of the command just taken is at or
/// after the clock's last stop, so the pause now maps it.
fn log_cache_events(
    model: &mut DeviceModel,
    log: &WriteLog,
    events: &mut Vec<CacheEvent>,
    clock: &DiskClock,
) {
    if model.records_cache_events() {
        model.take_cache_events(events);
        for e in events.drain(..) {
            log.note(Timed::Cache(on_wall(e, clock)));
        }
    }
}

/// A cache event's time moved from disk time to the wall clock.
fn on_wall(e: CacheEvent, clock: &DiskClock) -> CacheEvent {
    match e {
        CacheEvent::Cached { .. } => e,
        CacheEvent::Media {
            id,
            lba,
            sectors,
            at_ns,
        } => CacheEvent::Media {
            id,
            lba,
            sectors,
            at_ns: clock.wall(at_ns),
        },
        CacheEvent::Destaged {
            lba,
            sectors,
            at_ns,
        } => CacheEvent::Destaged {
            lba,
            sectors,
            at_ns: clock.wall(at_ns),
        },
        CacheEvent::AllDestaged { at_ns } => CacheEvent::AllDestaged {
            at_ns: clock.wall(at_ns),
        },
    }
}

/// Replies to a request at its modelled completion (`d`, on disk time); its note goes to the
/// stats thread first, on the wall clock, with how much of its lateness the machine held the
/// thread off its CPU (`off`, the last timed wait's) and how long the reply, if late, stopped
/// the disk's clock. The write log keeps the wall clock (its cache events are mapped to it).
/// A stop's pause is published for the arrivals ([`Core::arrived`]) before the reply leaves,
/// so that a request sent in answer to it is mapped after the stop.
fn answer<R: Answer>(h: Held<R>, d: &Dispatch, core: &Core, off: &HeldOff, clock: &mut DiskClock) {
    let (rec, log) = (&core.rec, &*core.log);
    let Held { job, intake_ns, .. } = h;
    let len = if d.op == Op::Flush { 0 } else { job.req.len };
    let replied_ns = rt::monotonic_ns();
    let on_wall = clock.pause_ns();
    let paused_ns = clock.replied(d.done_ns, replied_ns);
    if paused_ns > 0 {
        core.pause_ns.store(clock.pause_ns(), Ordering::Release);
    }
    // The write log is on the wall clock, as the exerciser's operations it is judged against.
    note_reply(log, &job.req, d.done_ns + on_wall, replied_ns);
    let w = Dispatch {
        arrival_ns: d.arrival_ns + on_wall,
        start_ns: d.start_ns + on_wall,
        done_ns: d.done_ns + on_wall,
        ..*d
    };
    rec.note(Note::Answered {
        d: w,
        len,
        replied_ns,
        failed: job.io.is_err(),
        emulator_ns: intake_ns.saturating_sub(job.arrival_ns),
        held_off_ns: off.share(w.done_ns, replied_ns),
        paused_ns,
    });
    job.answer();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sys::Errno;
    use crate::device::model::Request;
    use crate::device::transport::Job;
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    /// What a request's answer said, in the order the answers left.
    type Said = Arc<Mutex<Vec<(u64, Result<usize, Errno>)>>>;

    struct Note {
        id: u64,
        said: Said,
    }

    impl Answer for Note {
        fn answer(self, io: Result<usize, Errno>) {
            self.said.lock().expect("not poisoned").push((self.id, io));
        }
    }

    /// A transport that brings a burst of requests, their data not yet moved (moved by
    /// `ready`, as the ring moves its own), then ends.
    struct Burst {
        to_come: VecDeque<Job<Note>>,
        /// Ids made ready, after `begin` (0).
        moved: Arc<Mutex<Vec<u64>>>,
    }

    impl Transport for Burst {
        type Reply = Note;
        fn begin(&mut self) {
            self.moved.lock().expect("not poisoned").push(0);
        }
        fn take(&mut self, got: &mut Vec<Came<Note>>, _waiting: &mut Waiting<Note>) {
            got.extend(self.to_come.drain(..).map(|job| Came { job, moved: false }));
        }
        fn wait(&mut self, timeout: Option<Duration>) {
            std::thread::sleep(timeout.unwrap_or_default());
        }
        fn came(&mut self) -> bool {
            !self.to_come.is_empty()
        }
        fn open(&self) -> bool {
            !self.to_come.is_empty()
        }
        fn ready(&mut self, id: u64, waiting: &mut Waiting<Note>) {
            let h = waiting
                .get_mut(&id)
                .expect("a reply is made ready while it waits");
            assert!(!h.moved, "request {id} made ready twice");
            h.moved = true;
            h.job.io = Ok(h.job.req.len as usize);
            self.moved.lock().expect("not poisoned").push(id);
        }
        fn serves_crash_file(&self) -> bool {
            false
        }
    }

    /// A server's core on a 1 MiB memory store (its directory kept while it is used), and
    /// its stats thread to join once the core is dropped.
    fn test_core() -> (Core, std::thread::JoinHandle<()>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let image = dir.path().join("image");
        std::fs::File::create(&image).expect("an image");
        let store = super::super::store::Store::open(&image, 1 << 20, Some(1 << 20), &mut |m| {
            panic!("{m}")
        })
        .expect("a memory store");
        let (rec, stats) = super::super::records::start(1 << 20).expect("the stats thread");
        let core = Core::new(
            Arc::new(store),
            1 << 20,
            false,
            Arc::new(AtomicBool::new(true)),
            rec,
            Arc::new(WriteLog::default()),
        );
        (core, stats, dir)
    }

    /// A drive answering every command in 200 µs.
    fn constant_model() -> DeviceModel {
        let (profile, abl) =
            crate::device::load_ref("deskstar-7k250:constant=200us").expect("a profile");
        DeviceModel::new(&profile, &abl).expect("a model")
    }

    #[test]
    fn the_timing_thread_answers_every_request_through_its_transport_after_it_is_ready() {
        let (core, stats, _dir) = test_core();
        let model = constant_model();
        let said = Said::default();
        let now = rt::monotonic_ns();
        let to_come = (1..=5u64)
            .map(|id| Job {
                req: Request::read(id, id * 4096, 4096),
                arrival_ns: now,
                pause_ns: 0,
                reply: Note {
                    id,
                    said: said.clone(),
                },
                io: Err(Errno::EIO),
            })
            .collect();
        let moved = Arc::new(Mutex::new(Vec::new()));
        let burst = Burst {
            to_come,
            moved: moved.clone(),
        };
        run(model, burst, &core);
        assert!(
            !core.crash_file.load(Ordering::Acquire),
            "the transport's word on the crash file is the server's"
        );
        let said = said.lock().expect("not poisoned").clone();
        // A constant-time drive takes its commands in arrival order: each answered once, with
        // what its data's move gave (never the EIO it came with).
        assert_eq!(said, (1..=5).map(|id| (id, Ok(4096))).collect::<Vec<_>>());
        assert_eq!(*moved.lock().expect("not poisoned"), vec![0, 1, 2, 3, 4, 5]);
        drop(core);
        stats.join().expect("the stats thread ends");
    }

    /// A transport as the ring: a request is stamped when the timing thread takes it. One
    /// comes at once; the other while the thread waits on the transport (`wait` ends after
    /// [`CAME_AFTER_NS`] at the earliest), and is taken at the next `take`.
    struct Ring {
        first: Option<Request>,
        second: Option<Request>,
        waited: bool,
        said: Said,
    }

    const CAME_AFTER_NS: u64 = 2_000_000;

    impl Ring {
        fn job(&self, req: Request) -> Came<Note> {
            let reply = Note {
                id: req.id,
                said: self.said.clone(),
            };
            let job = Job {
                req,
                arrival_ns: rt::monotonic_ns(),
                // No stop has been published while the test's requests come.
                pause_ns: 0,
                reply,
                io: Ok(4096),
            };
            Came { job, moved: true }
        }
    }

    impl Transport for Ring {
        type Reply = Note;
        fn take(&mut self, got: &mut Vec<Came<Note>>, _waiting: &mut Waiting<Note>) {
            if let Some(r) = self.first.take() {
                got.push(self.job(r));
            }
            if self.waited {
                if let Some(r) = self.second.take() {
                    got.push(self.job(r));
                }
            }
        }
        fn wait(&mut self, timeout: Option<Duration>) {
            let came = Duration::from_nanos(CAME_AFTER_NS);
            std::thread::sleep(timeout.map_or(came, |t| t.min(came)));
            self.waited = true;
        }
        fn came(&mut self) -> bool {
            self.first.is_some() || self.waited && self.second.is_some()
        }
        fn open(&self) -> bool {
            true
        }
        fn serves_crash_file(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_request_that_comes_during_an_injected_stall_is_taken_at_its_arrival() {
        let (core, stats, _dir) = test_core();
        let mut model = constant_model();
        let said = Said::default();
        let mut t = Ring {
            first: Some(Request::read(1, 0, 4096)),
            second: Some(Request::read(2, 4096, 4096)),
            waited: false,
            said: said.clone(),
        };
        let mut desk = Desk {
            waiting: Waiting::new(),
            due: BinaryHeap::new(),
            taken: HashMap::new(),
            events: Vec::new(),
            got: Vec::new(),
            clock: DiskClock::default(),
            watch: Watch {
                lead: Lead::new(),
                held: HeldOff::default(),
            },
            // Every reply stalled 5 ms.
            stalls: Some("5:100:1".parse().expect("valid stalls")),
        };
        desk.take(&mut t, &mut model);
        let now = desk.clock.disk(rt::monotonic_ns());
        desk.commands(&mut model, now + 1_000_000, &core.log);
        let &Reverse((done, _)) = desk.due.peek().expect("request 1 taken by the drive");
        std::thread::sleep(Duration::from_nanos(
            desk.clock.wall(done).saturating_sub(rt::monotonic_ns()),
        ));
        desk.reply_due(&mut t, &mut model, &core);
        assert_eq!(
            said.lock().expect("not poisoned").len(),
            1,
            "request 1 answered"
        );
        assert!(
            desk.clock.pause_ns() >= 5_000_000,
            "the stall stopped the clock"
        );
        // Request 2 came at least 2 ms into the stall, while the clock stood at request 1's
        // completion: taken then, it arrives on disk time as long after that completion
        // (taken only after the stall, it would arrive at the completion itself, the host's
        // time during the stall lost).
        assert_eq!(model.queued(), 1, "request 2 taken during the stall");
        let arrival = model.ready_at().expect("request 2 waits for the drive");
        assert!(
            arrival >= done + CAME_AFTER_NS,
            "arrival {arrival}, stop at {done}"
        );
        drop(desk);
        drop(core);
        stats.join().expect("the stats thread ends");
    }

    #[test]
    fn a_reply_is_spun_for_only_where_the_wake_up_delay_would_show_in_its_time() {
        let lead = 30_000;
        // A seek of 8 ms: asleep to its time.
        assert_eq!(
            next_wake(None, Some((10_000_000, 8_000_000)), lead),
            Some(Wake {
                at: 10_000_000,
                lead: 0
            })
        );
        // A 40 µs hit in the drive's cache: woken the lead before it, the rest spun.
        assert_eq!(
            next_wake(None, Some((1_040_000, 40_000)), lead),
            Some(Wake {
                at: 1_040_000,
                lead
            })
        );
        // The drive's next command needs no lead; the earlier wake-up wins.
        assert_eq!(
            next_wake(Some(1_020_000), Some((1_040_000, 40_000)), lead),
            Some(Wake {
                at: 1_040_000,
                lead
            }),
            "the reply's woken time (1.010 ms) comes before the command's"
        );
        assert_eq!(
            next_wake(Some(1_005_000), Some((1_040_000, 40_000)), lead),
            Some(Wake {
                at: 1_005_000,
                lead: 0
            })
        );
        assert_eq!(next_wake(None, None, lead), None);
    }

    #[test]
    fn the_lead_follows_the_slower_recent_wake_ups_within_its_bounds() {
        let mut l = Lead::new();
        assert_eq!(l.ns(), LEAD_MAX_NS, "before any wake-up: the longest lead");
        // 24 wake-ups 10 µs late and 8 of 30 µs: the 75th percentile is the slower ones' edge.
        for i in 0..RECENT {
            let late = if i % 4 == 0 { 30_000 } else { 10_000 };
            l.woke(1_000_000, 1_000_000 + late);
        }
        assert_eq!(l.ns(), 30_000);
        for _ in 0..RECENT {
            l.woke(1_000, 1_000);
        }
        assert_eq!(l.ns(), LEAD_MIN_NS);
        for _ in 0..RECENT {
            l.woke(0, 5_000_000);
        }
        assert_eq!(l.ns(), LEAD_MAX_NS);
    }
}
