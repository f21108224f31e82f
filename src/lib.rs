//! fsgauge: a filesystem benchmarking laboratory.
//!
//! The data flow (DESIGN.md): a plan or command line is expanded into run specs; the [`runner`]
//! builds a [`testbed`] for each, runs a [`workload`] whose phases are measured by [`measure`],
//! and writes one [`results`] document per run; [`report`] turns results into tables.

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
