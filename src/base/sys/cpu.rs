//! The processor's time-stamp counter, for the cheapest clock a latency histogram can use
//! (`measure::clock` calibrates it against CLOCK_MONOTONIC and checks it is invariant).

/// The time-stamp counter (`RDTSC`); 0 where the processor has none that fsgauge reads.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads a counter and has no preconditions on x86_64 (every x86_64 processor
    // has it; the intrinsic is unsafe only because all of core::arch is).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The time-stamp counter (`RDTSC`); 0 where the processor has none that fsgauge reads.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn rdtsc() -> u64 {
    0
}
