//! The lab: plans and presets expanded into run specs (`plan`), one run from testbed to result
//! (`runner`), multi-step studies (`study`), and crash-point campaigns (`crash`).

pub mod crash;
pub mod plan;
pub mod runner;
pub mod study;
