//! The integrity exerciser (`fsgauge exercise`): fsx done fast, replayable, and across
//! remounts.
//!
//! Seed study 2 (ext3 block reservation) ran the fsx exerciser for a whole weekend next to
//! its benchmarks, because a faster allocator is worth nothing if it loses data. This module
//! brings that check in: random operations on a file (reads, writes past EOF, mmap reads and
//! writes, truncates, the fallocate modes, fsync, copy_file_range, reflink clones), each one
//! checked against an in-memory model of the file ([`model`]), from a seeded stream
//! ([`ops`]) that a replay log reproduces exactly ([`replay`]). [`engine`] runs one
//! exerciser; [`run`] runs several as a measured workload with remounts in between, and
//! [`report`] says what went wrong, where, and what the file should have held. [`minimize`]
//! cuts a failing log down to the steps its failure needs.
//!
//! The operation mix, the sizes (256 KiB files, 64 KiB operations) and the checks (every read
//! compared, the size checked with fstat and lseek(SEEK_END) after every operation, zeros past
//! EOF in mapped pages) follow fsx from xfstests (`ltp/fsx.c`), so runs can be compared.

pub mod crash;
pub mod durable;
pub mod engine;
pub mod minimize;
pub mod model;
pub mod ops;
pub mod replay;
pub mod report;
pub mod run;
pub mod spec;

pub use engine::{Config, Exerciser, Step};
pub use ops::{Op, OpKind};
pub use replay::ReplayLog;
pub use report::{Failure, FailureKind};
pub use spec::Exercise;
