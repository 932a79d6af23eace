//! GPU layer of assertwatch (work in progress).
