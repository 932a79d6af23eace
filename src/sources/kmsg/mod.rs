//! The kernel log: parsing of `/dev/kmsg` records (the daemon's reader builds on this).

pub mod reader;
pub mod record;
