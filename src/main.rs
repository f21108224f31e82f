use std::process::ExitCode;

fn main() -> ExitCode {
    // `fsgauge ... | head` should end quietly, as Unix tools do, not panic on a closed pipe.
    // Output is printed only after testbeds are torn down, so dying here leaves nothing behind.
    fsgauge::base::sys::signal::default_sigpipe();
    // Before anything else: a Ctrl-C from here on unwinds through the testbed guards.
    fsgauge::base::signals::install();
    match fsgauge::cli::main() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fsgauge: error: {err:#}");
            ExitCode::from(fsgauge::base::error::exit_code(&err))
        }
    }
}
