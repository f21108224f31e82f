//! The lab: plans and presets expanded into run specs (`plan`), one run from testbed to result
//! (`runner`), multi-step studies (`study`), crash-point campaigns (`crash`), and the
//! results store that indexes result files across machines and answers `history` (`store`).

pub mod crash;
pub mod plan;
pub mod runner;
pub mod store;
pub mod study;
