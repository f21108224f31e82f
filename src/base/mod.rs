//! The base layer: system primitives and the file rules every other layer follows — syscalls on
//! owned descriptors and the one way to reach a path (`sys`), atomic writes (`atomic`), the one
//! reader of input files (`bounded`), where `-o` goes (`outfile`), signals and child processes,
//! tables and units of text, the closed sets of values a flag takes (`choice`), and the error
//! types that carry exit codes. It uses nothing above it.

pub mod atomic;
pub mod bounded;
pub mod choice;
pub mod error;
pub mod outfile;
pub mod signals;
pub mod sys;
pub mod text;
pub mod units;
