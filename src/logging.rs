//! The daemon's own log: structured events on stderr, as text or JSON.
//!
//! Colour codes only when stderr is a terminal: under journald, in a file or in `kubectl logs`
//! they would be noise in every line (`NO_COLOR` turns them off on a terminal too, per
//! no-color.org). The level comes from `RUST_LOG` (default `info`).

use std::io::IsTerminal;

/// Whether log lines get ANSI colours: stderr is a terminal and `NO_COLOR` is unset or empty.
pub fn use_colour(stderr_is_tty: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_tty && no_color.is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber; `json` selects one JSON object per line. A second call does
/// nothing (tests start the daemon more than once per process).
pub fn init(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    // Err only when a subscriber is already installed: keep that one.
    let _ = if json {
        b.json().try_init()
    } else {
        b.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None));
        assert!(!use_colour(true, Some(std::ffi::OsStr::new("1"))));
        assert!(use_colour(true, Some(std::ffi::OsStr::new(""))));
    }
}
