//! Alertmanager push client of assertwatch: keeps the daemon's active alerts, pushes them to one
//! or more Alertmanagers over API v2 (`POST /api/v2/alerts`), re-sends them periodically,
//! resolves them, and retries with capped exponential backoff when a receiver is down.
//!
//! # Overview
//! - [`Alert`]: what the daemon wants Alertmanager to see (labels, annotations, times, link).
//! - [`AlertmanagerConfig`]: receivers (several = an HA cluster, each gets every alert), timing,
//!   bounds, credentials and TLS.
//! - [`Notifier::spawn`] starts one task per receiver and returns a [`NotifierHandle`], whose
//!   [`fire`](NotifierHandle::fire), [`resolve`](NotifierHandle::resolve) and
//!   [`shutdown`](NotifierHandle::shutdown) never wait on the network.
//! - [`Metrics`]: `assertwatch_alerts_{sent,failed,dropped}_total` and `assertwatch_alerts_active`.
//!
//! # Example
//! ```no_run
//! use std::time::SystemTime;
//! use assertwatch_alertmanager::{Alert, AlertmanagerConfig, Metrics, Notifier};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = prometheus::Registry::new();
//! let config = AlertmanagerConfig {
//!     urls: vec!["http://127.0.0.1:9093".into()],
//!     ..AlertmanagerConfig::default()
//! };
//! let (notifier, task) = Notifier::spawn(config, Metrics::register(&registry)?)?;
//! let alert = Alert::new(SystemTime::now())
//!     .label("alertname", "CudaDeviceAssert")
//!     .label("node", "gpu-07")
//!     .annotation("summary", "index out of bounds in IndexKernel.cu:92");
//! notifier.fire("incident-42".into(), alert);
//! // ... later
//! notifier.resolve("incident-42");
//! notifier.shutdown();
//! task.await?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod alert;
mod config;
mod limits;
mod metrics;
mod notifier;
mod queue;
mod receiver;
mod transport;

pub use alert::Alert;
pub use config::{
    AlertmanagerConfig, Auth, ConfigError, TlsConfig, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF,
    DEFAULT_QUEUE_CAPACITY, DEFAULT_RESEND_INTERVAL, DEFAULT_RESOLVE_AFTER,
    DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_TIMEOUT,
};
pub use limits::{
    is_valid_label_name, truncate_utf8, DEFAULT_MAX_ANNOTATION_BYTES, MAX_LABEL_VALUE_BYTES,
    TRUNCATION_MARKER,
};
pub use metrics::{
    DropReason, Metrics, ALERTS_ACTIVE, ALERTS_DROPPED_TOTAL, ALERTS_FAILED_TOTAL,
    ALERTS_SENT_TOTAL,
};
pub use notifier::{Notifier, NotifierHandle};
