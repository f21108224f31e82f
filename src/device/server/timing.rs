//! The timing thread: it owns the [`DeviceModel`], whose clock is the disk's own
//! ([`DiskClock`]: the monotonic clock less the pauses the emulator's late replies made). It
//! takes each request as the FUSE threads hand it over (data already moved), submits it at
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
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use super::heldoff::HeldOff;
use super::records::{Note, Recorder};
use super::stall::Stalls;
use super::{reply, ring, Job, Pool};
use crate::base::sys::rt;
use crate::device::model::clock::DiskClock;
use crate::device::model::{CacheEvent, Dispatch, Op};
use crate::device::uring::{Incoming, Taker};
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

/// A request the model has, with when its data had moved (its intake).
struct Held {
    job: Job,
    intake_ns: u64,
    /// Whether its data has moved (a ring request's moves after the model has it).
    moved: bool,
}

/// What the ring has brought in and not yet done, in the order it came: a request's data to
/// move, or a discard to apply after every earlier request's data.
enum Pending {
    Data(u64),
    Discard(ring::Discard),
}

/// Moves the pending ring requests' data in order, until request `until` has moved (None: all
/// of them).
fn move_until(
    backlog: &mut VecDeque<Pending>,
    waiting: &mut HashMap<u64, Held>,
    fs: &super::DiskFs,
    until: Option<u64>,
) {
    while let Some(p) = backlog.pop_front() {
        match p {
            Pending::Data(id) => {
                if let Some(h) = waiting.get_mut(&id) {
                    ring::move_data(fs, &mut h.job);
                    h.moved = true;
                    h.intake_ns = rt::monotonic_ns();
                }
                if until == Some(id) {
                    return;
                }
            }
            Pending::Discard(d) => d.apply(fs),
        }
    }
}

/// Runs until every FUSE thread's sender is gone, the ring (when it takes one) has ended,
/// and every request is answered.
pub fn run(
    mut model: DeviceModel,
    rx: Receiver<Job>,
    rec: Recorder,
    log: &WriteLog,
    pool: &Pool,
    taken: Option<ring::Taken>,
) {
    // The model's cache events for the write log, taken after each command (room made once).
    let mut events = Vec::with_capacity(1024);
    let mut waiting: HashMap<u64, Held> = HashMap::new();
    let mut due: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut taken_ids: HashMap<u64, Dispatch> = HashMap::new();
    let mut open = true;
    let mut watch = Watch {
        lead: Lead::new(),
        held: HeldOff::default(),
    };
    // The ring, once registered; requests come through /dev/fuse where it is not used.
    let mut ring = taken.and_then(|mut t| t.taker.begin().then_some(t));
    let mut incoming = Vec::new();
    let mut backlog: VecDeque<Pending> = VecDeque::new();
    let mut clock = DiskClock::default();
    let mut stalls = Stalls::from_env();
    let take =
        |job: Job, model: &mut DeviceModel, waiting: &mut HashMap<u64, Held>, clock: &DiskClock| {
            let intake_ns = rt::monotonic_ns();
            model.submit(job.req, clock.disk(job.arrival_ns));
            waiting.insert(
                job.req.id,
                Held {
                    job,
                    intake_ns,
                    moved: true,
                },
            );
        };
    loop {
        // The ring's requests taken since the last pass go to the model at once, as they
        // arrived; their data moves later, in order, between replies (a burst of 1 MiB writes
        // is milliseconds of copying, which must not hold up a reply due meanwhile).
        if let Some(r) = &ring {
            admit(
                r,
                &mut incoming,
                &mut model,
                &mut waiting,
                &mut backlog,
                &clock,
            );
        }
        let now = clock.disk(rt::monotonic_ns());
        // Every request handed over by now goes to the model before the drive takes its next
        // command at any time up to now: it chooses among all that had arrived.
        while open {
            match rx.try_recv() {
                Ok(job) => take(job, &mut model, &mut waiting, &clock),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        // Requests taken since the log started (it is on before they were handed over) have
        // their cache events recorded.
        if model.records_cache_events() != log.on() {
            model.record_cache_events(log.on());
        }
        // The drive takes commands as the model frees it, on the model's time.
        while let Some(t) = model.ready_at() {
            if t > now {
                break;
            }
            match model.next(t) {
                Some(d) => {
                    due.push(Reverse((d.done_ns, d.id)));
                    taken_ids.insert(d.id, d);
                    log_cache_events(&mut model, log, &mut events, &clock);
                }
                None => break,
            }
        }
        // Reply to every request whose completion has come (on the wall: the disk's clock may
        // have stopped at a reply before it).
        while let Some(&Reverse((done, id))) = due.peek() {
            if clock.wall(done) > rt::monotonic_ns() {
                break;
            }
            due.pop();
            if let Some(r) = &ring {
                if waiting.get(&id).is_some_and(|h| !h.moved) {
                    move_until(&mut backlog, &mut waiting, &r.fs, Some(id));
                }
            }
            let (Some(d), Some(h)) = (taken_ids.remove(&id), waiting.remove(&id)) else {
                continue;
            };
            if let Some(s) = &mut stalls {
                s.before_reply();
            }
            answer(h, &d, &rec, log, pool, &watch.held, &mut clock);
        }
        if let Some(r) = &mut ring {
            if !r.taker.live() {
                move_until(&mut backlog, &mut waiting, &r.fs, None);
                ring = None;
            } else if !backlog.is_empty() {
                move_one(r, &mut backlog, &mut waiting, &mut incoming);
                continue;
            }
        }
        if !open && waiting.is_empty() && ring.is_none() {
            return;
        }
        let reply = due.peek().map(|&Reverse((done, id))| {
            let arrival = taken_ids.get(&id).map_or(done, |d| d.arrival_ns);
            (clock.wall(done), done.saturating_sub(arrival))
        });
        let ready_at = model.ready_at().map(|t| clock.wall(t));
        let wake = next_wake(ready_at, reply, watch.lead.ns());
        if let Some(r) = &mut ring {
            ring_wait(&mut r.taker, wake, &mut watch, &mut incoming);
            continue;
        }
        match next_arrival(&rx, wake, open, &mut watch) {
            Ok(job) => take(job, &mut model, &mut waiting, &clock),
            Err(RecvTimeoutError::Disconnected) => open = false,
            Err(RecvTimeoutError::Timeout) => {}
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

/// Takes the ring's requests in as they arrived (`incoming`, taken just now): each goes to the
/// model at once and its data into the backlog (answered at once, its data moved first,
/// where the model is off).
fn admit(
    r: &ring::Taken,
    incoming: &mut Vec<Incoming>,
    model: &mut DeviceModel,
    waiting: &mut HashMap<u64, Held>,
    backlog: &mut VecDeque<Pending>,
    clock: &DiskClock,
) {
    let now = rt::monotonic_ns();
    for i in incoming.drain(..) {
        match ring::admit(&r.fs, i, now) {
            ring::Admitted::Job(mut job) if !r.fs.is_modelled() => {
                move_until(backlog, waiting, &r.fs, None);
                ring::move_data(&r.fs, &mut job);
                let _ = r.fs.route(job);
            }
            ring::Admitted::Job(job) => {
                let id = job.req.id;
                model.submit(job.req, clock.disk(job.arrival_ns));
                let held = Held {
                    job,
                    intake_ns: now,
                    moved: false,
                };
                waiting.insert(id, held);
                backlog.push_back(Pending::Data(id));
            }
            ring::Admitted::Discard(d) => backlog.push_back(Pending::Discard(d)),
            ring::Admitted::Answered => {}
        }
    }
}

/// One request's data (or discard) from the backlog, between looks at the replies due: the
/// replies made so far leave first, and the requests come meanwhile are taken (no wait).
fn move_one(
    r: &mut ring::Taken,
    backlog: &mut VecDeque<Pending>,
    waiting: &mut HashMap<u64, Held>,
    incoming: &mut Vec<Incoming>,
) {
    let first = match backlog.front() {
        Some(Pending::Data(id)) => Some(*id),
        _ => None,
    };
    if let Err(e) = r.taker.flush() {
        eprintln!("fsgauge devices serve: submitting to the FUSE ring failed: {e}");
    }
    match first {
        Some(_) => move_until(backlog, waiting, &r.fs, first),
        None => {
            if let Some(Pending::Discard(d)) = backlog.pop_front() {
                d.apply(&r.fs);
            }
        }
    }
    if let Err(e) = r.taker.poll(incoming) {
        eprintln!("fsgauge devices serve: polling the FUSE ring failed: {e}");
    }
}

/// Waits on the ring for requests until `wake` (none: until one comes), the replies made so
/// far submitted first: asleep until the lead before it, then spinning, still taking the
/// requests that come.
fn ring_wait(
    taker: &mut Taker,
    wake: Option<Wake>,
    watch: &mut Watch,
    incoming: &mut Vec<Incoming>,
) {
    let now = rt::monotonic_ns();
    watch.held = HeldOff::default();
    let failed = match wake {
        None => taker.wait(incoming, None),
        Some(Wake { at: w, lead: ahead }) if w > now + ahead => {
            let asked = w - ahead;
            let cpu = watch.before();
            let got = taker.wait(incoming, Some(Duration::from_nanos(asked - now)));
            let woke = watch.after(now, asked, cpu);
            if woke >= asked {
                watch.lead.woke(asked, woke);
            }
            got
        }
        Some(Wake { at: w, .. }) => {
            let mut got = taker.flush();
            while got.is_ok() && incoming.is_empty() && rt::monotonic_ns() < w {
                got = taker.poll(incoming);
                std::hint::spin_loop();
            }
            got
        }
    };
    if let Err(e) = failed {
        // Only a dead ring fails here; its entries end with the connection.
        eprintln!("fsgauge devices serve: waiting on the FUSE ring failed: {e}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits for the next request until `wake` (none: for ever): asleep until the lead before it,
/// then spinning, still taking arrivals.
fn next_arrival(
    rx: &Receiver<Job>,
    wake: Option<Wake>,
    open: bool,
    watch: &mut Watch,
) -> Result<Job, RecvTimeoutError> {
    let now = rt::monotonic_ns();
    watch.held = HeldOff::default();
    match wake {
        None if open => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        None => Err(RecvTimeoutError::Disconnected),
        Some(Wake { at: w, lead: ahead }) if w > now + ahead && open => {
            let asked = w - ahead;
            let cpu = watch.before();
            let got = rx.recv_timeout(Duration::from_nanos(asked - now));
            let woke = watch.after(now, asked, cpu);
            if let Err(RecvTimeoutError::Timeout) = got {
                watch.lead.woke(asked, woke);
            }
            got
        }
        Some(Wake { at: w, .. }) => {
            while rt::monotonic_ns() < w {
                if open {
                    match rx.try_recv() {
                        Ok(j) => return Ok(j),
                        Err(TryRecvError::Disconnected) => {
                            return Err(RecvTimeoutError::Disconnected)
                        }
                        Err(TryRecvError::Empty) => {}
                    }
                }
                std::hint::spin_loop();
            }
            Err(RecvTimeoutError::Timeout)
        }
    }
}

/// Replies to a request at its modelled completion (`d`, on disk time); its note goes to the
/// stats thread first, on the wall clock, with how much of its lateness the machine held the
/// thread off its CPU (`off`, the last timed wait's) and how long the reply, if late, stopped
/// the disk's clock. The write log keeps the wall clock (its cache events are mapped to it).
fn answer(
    h: Held,
    d: &Dispatch,
    rec: &Recorder,
    log: &WriteLog,
    pool: &Pool,
    off: &HeldOff,
    clock: &mut DiskClock,
) {
    let Held { job, intake_ns, .. } = h;
    let len = if d.op == Op::Flush { 0 } else { job.req.len };
    let replied_ns = rt::monotonic_ns();
    let on_wall = clock.pause_ns();
    let paused_ns = clock.replied(d.done_ns, replied_ns);
    // The write log is on the wall clock, as the exerciser's operations it is judged against.
    super::note_reply(log, &job.req, d.done_ns + on_wall, replied_ns);
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
    reply(job, pool);
}

#[cfg(test)]
mod tests {
    use super::*;

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
