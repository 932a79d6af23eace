//! Bounded reading of line-oriented bytes in large chunks that end on line boundaries.
//!
//! The reader lives in the tail crate, beside the tailer's own pass over files, so that one rule
//! decides where an over-long line is cut for every source: see [`assertwatch_tail::ChunkReader`].

pub use assertwatch_tail::{Chunk, ChunkReader};
