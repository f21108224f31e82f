//! How block requests reach the emulated disk's server and its replies go back: the seam
//! between the timing thread ([`crate::device::server`]'s `timing`), which knows the model and
//! when each reply is due, and the kernel's two ways of carrying FUSE requests.
//!
//! - [`dev`]: /dev/fuse, read by the FUSE session's threads (`fuser`), a `read(2)` and a
//!   `writev(2)` a request; they move each request's data at once and hand it over on a
//!   channel.
//! - [`ring`]: FUSE over io_uring (Linux 6.14+), the default where the kernel has it: the
//!   protocol ([`ring::Ring`], [`ring::abi`]; its system calls are in
//!   `base/sys/fuse_ring.rs`) and the server's side of it ([`ring::taken`]): for a modelled
//!   disk the timing thread takes the ring's entries itself and moves their data between
//!   replies.
//!
//! The timing thread sees a transport only through [`Transport`]: take the requests come,
//! wait for more until a deadline, do the transport's own work between replies, and send the
//! replies ([`Answer`]). Which transport a disk uses is a setting of the disk
//! ([`crate::device::server::DiskSettings::transport`]), chosen where the disk is described (a
//! testbed's `device_transport`, `devices check --transport`).

pub mod dev;
pub mod ring;

use std::collections::HashMap;
use std::time::Duration;

use crate::base::sys::Errno;
use crate::device::model::Request;

/// The emulated disk's name in the mount.
pub const DISK_NAME: &str = "disk";
/// The largest request the kernel sends (`fs.fuse.max_pages_limit` = 256 pages).
pub const MAX_REQUEST: usize = 1 << 20;

/// The answer to one request, in its transport's own form: a /dev/fuse reply
/// ([`dev::DevReply`]) or a ring entry ([`ring::Token`]).
pub trait Answer: Send {
    /// Sends the reply: `Ok(n)` (bytes read or written; a read's data is in the answer's
    /// buffer) or the error.
    fn answer(self, io: Result<usize, Errno>);
}

/// A request on its way through the server, with how its transport answers it (`R`).
pub struct Job<R> {
    pub req: Request,
    /// When it came, on the monotonic clock.
    pub arrival_ns: u64,
    /// The disk clock's pause when it came (the stops ended by then, as the timing thread
    /// last published it: [`crate::device::server::core::Core::arrived`]): the arrival's
    /// disk time is `arrival_ns − pause_ns`, however many stops end before the model has it.
    pub pause_ns: u64,
    pub reply: R,
    /// Bytes transferred with the store, or its error (once its data has moved).
    pub io: Result<usize, Errno>,
}

impl<R: Answer> Job<R> {
    /// Sends its reply (its data, or its error).
    pub fn answer(self) {
        self.reply.answer(self.io)
    }

    /// Fails it with `e`, whatever its data did.
    pub fn fail(self, e: Errno) {
        self.reply.answer(Err(e))
    }
}

/// A request the model has, with when its data had moved (its intake).
pub struct Held<R> {
    pub job: Job<R>,
    pub intake_ns: u64,
    /// Whether its data has moved (a ring request's moves after the model has it).
    pub moved: bool,
}

/// The requests the model has and that are not yet answered, by request id.
pub type Waiting<R> = HashMap<u64, Held<R>>;

/// A request just taken: for the model at once, its data moved already or not
/// (`moved`; see [`Transport::ready`]).
pub struct Came<R> {
    pub job: Job<R>,
    pub moved: bool,
}

/// One way requests reach the timing thread and replies leave it.
pub trait Transport {
    /// How a request of this transport is answered.
    type Reply: Answer;

    /// On the timing thread, before anything else: waits for the transport to be usable
    /// (the ring: until INIT has decided and its entries are registered).
    fn begin(&mut self) {}

    /// Hands over the requests taken since the last call and those come by now, without
    /// waiting, each for the model (`got`); one the model is off for is answered here, after
    /// every earlier request's data has moved (`waiting`).
    fn take(&mut self, got: &mut Vec<Came<Self::Reply>>, waiting: &mut Waiting<Self::Reply>);

    /// Sends the replies made so far, then waits for a request at most `timeout` (None: until
    /// one comes or the transport ends); what came is handed over by the next
    /// [`Transport::take`].
    fn wait(&mut self, timeout: Option<Duration>);

    /// Sends the replies made so far, without waiting.
    fn send(&mut self) {}

    /// Whether a request has come since the last [`Transport::take`] (no system call: for
    /// spinning until a reply is due).
    fn came(&mut self) -> bool;

    /// Whether requests may still come (false once the transport has ended).
    fn open(&self) -> bool;

    /// The transport's own work between replies (a ring request's data to move): does one
    /// piece of it and says whether there was any.
    fn work(&mut self, _waiting: &mut Waiting<Self::Reply>) -> bool {
        false
    }

    /// Before request `id`'s reply: its data (and every earlier request's) has moved.
    fn ready(&mut self, _id: u64, _waiting: &mut Waiting<Self::Reply>) {}

    /// Whether the server's second file, `crash` (crash states, `writelog`), can be reached
    /// while this transport carries the disk's requests.
    fn serves_crash_file(&self) -> bool;
}
