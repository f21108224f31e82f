//! Studies: multi-testbed experiments that one workload run cannot express. [`append`] is the
//! fragmentation project's append test (seed study 3): age by round-robin appends, copy the
//! tree onto a fresh filesystem, and compare the two.

pub mod append;
