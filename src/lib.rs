//! fsgauge: a filesystem benchmarking laboratory.
//!
//! The data flow (ARCHITECTURE.md): a plan or command line is expanded into runs
//! ([`lab::plan`]); the [`lab::runner`] builds a [`testbed`] for each (with an emulated
//! [`device`] under it when asked), runs a [`workload`] whose phases are measured by [`measure`],
//! and writes one [`results`] document per run; [`analysis`] turns results into findings and the
//! one document [`cli`] prints. Each folder is a layer and uses only those below it (README,
//! "Layout of the code").

pub mod analysis;
pub mod base;
pub mod cli;
pub mod device;
pub mod dist;
pub mod host;
pub mod lab;
pub mod layout;
pub mod measure;
pub mod results;
pub mod testbed;
pub mod workload;
