//! The lab: plans and presets expanded into run specs (`plan`), one run from testbed to result
//! (`runner`), multi-step studies (`study`), crash-point campaigns (`crash`), a plan's matrix
//! over a Slurm job array (`fleet`), and the results store that indexes result files across
//! machines and answers `history` (`store`).

pub mod crash;
pub mod fleet;
pub mod plan;
pub mod runner;
pub mod store;
pub mod study;
