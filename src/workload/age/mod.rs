//! Aging: conditioning a filesystem to a fullness and a fragmentation before it is measured —
//! agesystem of the journaling-filesystem fragmentation project (seed study 3) and
//! Geriatrix-style stable aging, reproducibly.
//!
//! * [`dist`] — file-size distributions (agrawal, impressions, loizides-1g, fixed, uniform,
//!   CSV files).
//! * [`shape`] — tree shapes N×C and directory-depth distributions.
//! * [`engine`] — the [`Ager`]: fill, append (with preallocation) and churn, checkpoints at
//!   usage percentages from statvfs, the manifest digest of the operation stream.
//! * [`workload`] — the `age` workload kind (`fsgauge age`, plans): a phase per checkpoint
//!   with its figures, plus the layout and free-space summary of each checkpoint.
//! * [`copy`] — copying a tree onto another filesystem (the append study's `cp -R`).
//! * [`kept`] — the append test's agings in the aged-image cache, per checkpoint.
//! * [`append`] — the append test (aged tree vs a fresh copy on a twin filesystem, per
//!   checkpoint): the plan kind `append` and the engine of `fsgauge study append`.

pub mod append;
pub mod copy;
pub mod dist;
pub mod engine;
mod kept;
pub mod shape;
pub mod workload;

pub use dist::SizeDist;
pub use engine::{pct_label, AgeMode, AgeParams, Ager, Checkpoint, DeleteOrder, AGE_OPS};
pub use shape::{DepthDist, TreeShape};
pub use workload::{
    check_checkpoints_reached, checkpoint_extra, layout_record, unreached_checkpoints, Age,
};
