//! Signal dispositions set once at start-up (the handlers fsgauge installs for SIGINT and
//! SIGTERM are in `crate::base::signals`).

/// Restores the default action of SIGPIPE — end the process quietly — so `fsgauge ... | head`
/// behaves as Unix tools do instead of failing on the closed pipe. Call it before any thread
/// starts.
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL is a valid disposition and installs no handler code, so no
    // async-signal-safety question arises; signal(2) itself is thread-safe.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
