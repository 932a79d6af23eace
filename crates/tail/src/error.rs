//! Errors that stop a [`crate::Tailer`] from starting.
//!
//! Errors met while running (a file vanished, a read failed, a checkpoint write hit a full disk)
//! are not here: they become [`crate::TailEvent::Error`] events, counters in
//! [`crate::TailStats`] and rate-limited log lines, and the tailer keeps going.

use std::path::PathBuf;

/// Why a tailer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// A setting is out of range (for example a zero `max_line_bytes`).
    #[error("invalid tailer setting {field}: {reason}")]
    Config { field: &'static str, reason: String },
    /// An include or exclude pattern does not parse.
    #[error("source {source_name}: invalid glob pattern {pattern:?}")]
    Pattern {
        source_name: String,
        pattern: String,
        #[source]
        error: glob::PatternError,
    },
    /// The checkpoint file exists but cannot be read (not merely corrupt).
    #[error("reading checkpoint file {path}")]
    CheckpointRead {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// The checkpoint file was written by a newer version of this crate; refusing to overwrite it.
    #[error("checkpoint file {path} has unsupported version {version:?}")]
    CheckpointVersion { path: PathBuf, version: String },
    /// The directory of the checkpoint file cannot be created.
    #[error("creating checkpoint directory {path}")]
    CheckpointDir {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
}
