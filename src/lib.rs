//! fsgauge: a filesystem benchmarking laboratory.
//!
//! The data flow (DESIGN.md): a plan or command line is expanded into run specs; the [`runner`]
//! builds a [`testbed`] for each, runs a [`workload`] whose phases are measured by [`measure`],
//! and writes one [`results`] document per run; [`report`] turns results into tables.

pub mod age;
pub mod atomic;
pub mod bounded;
pub mod calibrate;
pub mod choice;
pub mod cli;
pub mod dist;
pub mod error;
pub mod exercise;
pub mod findings;
pub mod layout;
pub mod measure;
pub mod outfile;
pub mod plan;
pub mod registry;
pub mod report;
pub mod results;
pub mod runner;
pub mod signals;
pub mod stats;
pub mod store;
pub mod study;
pub mod sys;
pub mod testbed;
pub mod text;
pub mod units;
pub mod workload;
