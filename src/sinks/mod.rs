//! Sinks: where incidents go besides the store and the metrics. Each sink runs on its own task
//! behind a bounded queue, so a slow receiver never stalls detection.

pub mod alertmanager;
