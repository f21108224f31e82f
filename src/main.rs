use std::process::ExitCode;

fn main() -> ExitCode {
    match fsgauge::cli::main() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fsgauge: error: {err:#}");
            ExitCode::from(fsgauge::error::exit_code(&err))
        }
    }
}
