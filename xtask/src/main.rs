//! `cargo xtask …`: dataset preparation, synthetic data generation and the benchmarks.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = xtask::Cli::parse();
    match xtask::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
