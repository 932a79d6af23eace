//! Small filesystem helpers shared by everything that persists state.
//!
//! Atomic writes and their recovery live in the tail crate, whose checkpoints use them too, so
//! that every state file follows one procedure: see [`assertwatch_tail::persist`].

pub use assertwatch_tail::persist::atomic_write;
