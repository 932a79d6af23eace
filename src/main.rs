//! The `assertwatch` binary: parse arguments, run, exit. Everything else lives in the library.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = assertwatch::cli::Cli::parse();
    assertwatch::cli::run(cli)
}
