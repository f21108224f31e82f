//! The emulated disk's own clock: it runs with the wall (monotonic) clock while the emulator
//! keeps up, and stops while it is behind, so that a host that cannot keep real time (a 2-core
//! virtual machine whose host steals time, a kernel without preemption holding the timing
//! thread off its CPU) delays the emulated world instead of changing what it sees.
//!
//! # Definition
//! Disk time is `D(t) = t − P(t)`, `t` the wall time and `P` the pause so far, which only
//! grows. The model ([`super::DeviceModel`]) lives on disk time alone: requests arrive, the
//! drive takes commands and completes them at disk times, and a wall time is `disk + P` (the
//! model's completion `done` is due on the wall at `done + P`).
//!
//! The clock stops when a reply goes out late: a reply due at wall time `w = done + P` that
//! leaves at `r > w` stopped the clock over `[w, r)`: `P` grows by `L = r − w`, one stop. During
//! a stop disk time stands at `done` (the drive does nothing: no rotation, no destaging, no
//! seek), and from `r` on it runs again, `L` further behind the wall. Every later completion is
//! due `L` later on the wall; one stall makes one reply late, not the queue behind it.
//!
//! A request's arrival is mapped to disk time as a host that kept time would have sent it:
//! `arrival − P(arrival)`, with `P(arrival)` the pause of the stops that had ended by then
//! ("the pause so far"), which the thread that stamps the arrival reads with it, from the
//! pause the timing thread publishes before each late reply leaves ([`DiskClock::arrival`]):
//! exact however many stops end before the model has the request (a FUSE thread held off
//! its CPU with a request while a deep queue's replies go out). A request that comes after a late reply (the host reacting to it)
//! comes as long after the reply's disk time as it did after the reply on the wall. One that
//! comes during a stop cannot depend on the reply being held (it has not left): another
//! thread of the host, running on its own, sent it as long after its own last reply as on a
//! host that kept time, so it keeps the pause from before the stop and lands in the disk's
//! future by up to the stop's length, where the drive finds it after the stop, as it would
//! have. Time a request spends inside the server before the model has it (its data copy, a
//! FUSE thread held off the CPU) is not disk time either: the drive starts it at its
//! arrival's disk time, and if its reply is late for it, that lateness stops the clock like
//! any other. What the clock cannot give back is a choice a queue policy made while a
//! request was still in the server: a drive that took another command first (or sat idle)
//! because the request had not reached the model yet stays so (a FIFO drive, the 2005
//! profiles', loses only the idle time, which the late reply then stops the clock for).
//!
//! Every late reply stops the clock, however little late (a wake-up 20 µs late is 20 µs the
//! host did not keep): the pause is the sum of the replies' lateness past the earlier stops,
//! which is 0 where every reply was on time, and a phase's disk time (wall − its pause) is
//! what the modelled drive would have taken as far as the phase waited on it.
//!
//! Cost: O(1) per request (a comparison and an addition per reply, a subtraction per
//! arrival, one u64 carried with each request in flight), no system call, no allocation.

/// The disk's clock against the wall clock (both ns on the monotonic clock).
#[derive(Debug, Clone, Default)]
pub struct DiskClock {
    pause_ns: u64,
    stops: u64,
}

impl DiskClock {
    /// How far disk time is behind the wall, ns.
    pub fn pause_ns(&self) -> u64 {
        self.pause_ns
    }

    /// How many times the clock stopped.
    pub fn stops(&self) -> u64 {
        self.stops
    }

    /// When disk time `disk` (now or later) comes on the wall.
    pub fn wall(&self, disk: u64) -> u64 {
        disk.saturating_add(self.pause_ns)
    }

    /// Disk time now, at wall time `wall` (at or after the last stop's end).
    pub fn disk(&self, wall: u64) -> u64 {
        wall.saturating_sub(self.pause_ns)
    }

    /// The disk time of an arrival at wall time `wall`, when the pause was `pause_then`
    /// (the stops ended by then; a request that came during a stop has the pause before it,
    /// and lands in the disk's future by as long as it came after the stop began).
    pub fn arrival(wall: u64, pause_then: u64) -> u64 {
        wall.saturating_sub(pause_then)
    }

    /// A reply due at disk time `done` left at wall time `replied`: when it was late, the
    /// clock stood still from its due time until then. Returns the pause it added (0: none).
    pub fn replied(&mut self, done: u64, replied: u64) -> u64 {
        let due = self.wall(done);
        if replied <= due {
            return 0;
        }
        let late = replied - due;
        self.pause_ns += late;
        self.stops += 1;
        late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_that_never_stopped_is_the_wall() {
        let mut c = DiskClock::default();
        assert_eq!((c.disk(123), c.wall(123)), (123, 123));
        assert_eq!(DiskClock::arrival(123, c.pause_ns()), 123);
        assert_eq!(c.replied(1_000, 1_000), 0);
        assert_eq!(c.replied(2_000, 1_500), 0, "an early reply stops nothing");
        assert_eq!((c.pause_ns(), c.stops()), (0, 0));
    }

    #[test]
    fn a_late_reply_stops_the_clock_from_its_due_time_until_it_left() {
        let mut c = DiskClock::default();
        assert_eq!(c.replied(10_000, 15_000), 5_000);
        assert_eq!((c.pause_ns(), c.stops()), (5_000, 1));
        // Arrivals before the stop or during it (sent by a thread the late reply had not
        // reached yet) carry the pause before it; after it: 5 µs behind.
        assert_eq!(DiskClock::arrival(9_000, 0), 9_000);
        assert_eq!(DiskClock::arrival(12_000, 0), 12_000);
        assert_eq!(c.disk(15_000), 10_000);
        assert_eq!(c.disk(16_000), 11_000);
        // A completion at disk 12 µs is due at wall 17 µs; replied then, it stops nothing.
        assert_eq!(c.wall(12_000), 17_000);
        assert_eq!(c.replied(12_000, 17_000), 0);
        assert_eq!(c.replied(20_000, 30_000), 5_000);
        assert_eq!((c.pause_ns(), c.stops()), (10_000, 2));
        assert_eq!(c.disk(31_000), 21_000);
    }

    #[test]
    fn an_arrival_keeps_its_pause_however_many_stops_end_before_it_is_mapped() {
        // A request comes at wall 13 µs, after one stop of 5 µs, and is held (a FUSE thread
        // off its CPU) while 20 more replies go out late, each stopping the clock.
        let mut c = DiskClock::default();
        c.replied(10_000, 15_000);
        let (came, pause_then) = (16_000, c.pause_ns());
        for i in 0..20u64 {
            let done = c.disk(100_000 + i * 10_000);
            assert_eq!(c.replied(done, c.wall(done) + 1_000), 1_000);
        }
        assert_eq!((c.pause_ns(), c.stops()), (25_000, 21));
        // Its disk time is 11 µs whenever it is mapped: the stops after it do not move it.
        assert_eq!(DiskClock::arrival(came, pause_then), 11_000);
    }
}
