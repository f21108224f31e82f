//! Crash points: power cuts judged from the emulated drive's own cache. A campaign
//! (`campaign`) runs a workload on a disk that logs every write (`crate::device::writelog`),
//! chooses the cuts (`points`), has the testbed re-make the disk's state at each
//! (`crate::testbed::crashstate`) and checks it with the filesystem's checker
//! (`crate::testbed::fsck`) and the workload's own judge (the exerciser's
//! `crate::workload::exercise::durable`, the tree's `crate::workload::durable_tree`). The record
//! it writes is `crate::results::crash`; the disk's side is `crate::device::writelog` and the
//! crash file the server serves (`crate::device::server::crashfile`).

pub mod campaign;
pub mod points;
