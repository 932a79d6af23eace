//! Daemon assembly: configuration → components → tasks, and the shutdown sequence.

use crate::cli::{LogFormat, EXIT_USAGE};
use std::path::PathBuf;
use std::process::ExitCode;

/// `assertwatch run`.
pub fn main(config: Option<PathBuf>, _log_format: LogFormat) -> ExitCode {
    let cfg = match &config {
        Some(p) => crate::config::load(p),
        None => crate::config::default_config(),
    };
    match cfg {
        Ok(_) => {
            eprintln!(
                "assertwatch: the daemon is not part of this build yet; use `assertwatch scan`."
            );
            ExitCode::from(1)
        }
        Err(e) => {
            crate::cli::print_config_error(&e);
            ExitCode::from(EXIT_USAGE)
        }
    }
}
