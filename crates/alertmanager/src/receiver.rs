//! One task per Alertmanager URL: waits for queued changes or the re-send tick, delivers in
//! batches, backs off after failures, and makes one bounded final flush on shutdown.
//!
//! Receivers share nothing but the active set, so a member of an HA pair that is down (and
//! backing off) never delays the other. While a receiver backs off, its queue keeps coalescing
//! changes; nothing is lost, and the retry carries the latest state of every key.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::{interval_at, sleep, timeout, Instant, MissedTickBehavior};

use crate::config::AlertmanagerConfig;
use crate::metrics::DropReason;
use crate::queue::{Batch, Shared};
use crate::transport::{error_chain, Transport};

/// The timing part of the configuration, copied into each receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    pub resend_interval: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub shutdown_timeout: Duration,
}

impl Schedule {
    pub(crate) fn from_config(config: &AlertmanagerConfig) -> Self {
        Self {
            resend_interval: config.resend_interval,
            initial_backoff: config.initial_backoff,
            max_backoff: config.max_backoff,
            shutdown_timeout: config.shutdown_timeout,
        }
    }
}

/// Exponential backoff: `initial`, `2 × initial`, `4 × initial` ... capped at `max`.
///
/// No jitter: each node has one notifier and HA members are retried independently, so there is
/// no herd of synchronised clients on one node to spread out, and a fixed schedule is testable.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial.min(max),
        }
    }

    /// The delay before the next attempt; doubles the one after it.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    pub(crate) fn reset(&mut self) {
        self.next = self.initial.min(self.max);
    }
}

/// Whether the receiver loop goes on.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Shutdown,
}

pub(crate) struct Receiver<T> {
    pub index: usize,
    pub label: String,
    pub transport: T,
    pub shared: Arc<Shared>,
    pub schedule: Schedule,
    pub shutdown: watch::Receiver<bool>,
}

impl<T: Transport> Receiver<T> {
    pub(crate) async fn run(self) {
        let period = self.schedule.resend_interval;
        let mut resend = interval_at(Instant::now() + period, period);
        resend.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut backoff = Backoff::new(self.schedule.initial_backoff, self.schedule.max_backoff);
        let shared = Arc::clone(&self.shared);
        let mut shutdown = self.shutdown.clone();
        loop {
            if *shutdown.borrow_and_update() {
                break;
            }
            tokio::select! {
                biased;
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                () = shared.wake[self.index].notified() => {}
                _ = resend.tick() => shared.queue_all_active(self.index, SystemTime::now()),
            }
            if self.deliver(&mut backoff, &mut shutdown).await == Flow::Shutdown {
                break;
            }
        }
        self.final_flush().await;
    }

    /// Sends batches until the queue is empty, retrying failures with backoff.
    async fn deliver(&self, backoff: &mut Backoff, shutdown: &mut watch::Receiver<bool>) -> Flow {
        let metrics = &self.shared.metrics;
        let mut failing = false;
        loop {
            if *shutdown.borrow() {
                return Flow::Shutdown;
            }
            let batch = self.shared.take_batch(self.index, SystemTime::now());
            if batch.alerts.is_empty() {
                return Flow::Continue;
            }
            let Batch { entries, alerts } = batch;
            let count = alerts.len();
            // A push in flight is abandoned on shutdown (and its alerts put back) so that the
            // final flush, not a slow receiver, decides how long shutdown takes.
            let outcome = tokio::select! {
                outcome = self.transport.post(alerts) => outcome,
                _ = shutdown.changed() => {
                    self.shared.put_back(self.index, entries);
                    return Flow::Shutdown;
                }
            };
            match outcome {
                Ok(()) => {
                    metrics.sent(&self.label);
                    if failing {
                        tracing::info!(receiver = %self.label, "Alertmanager reachable again.");
                        failing = false;
                    }
                    backoff.reset();
                }
                Err(err) if err.is_retryable() => {
                    metrics.failed(&self.label);
                    self.shared.put_back(self.index, entries);
                    let delay = backoff.next_delay();
                    if failing {
                        tracing::debug!(receiver = %self.label, error = %error_chain(&err), ?delay,
                            "Alert push failed again; retrying.");
                    } else {
                        tracing::warn!(receiver = %self.label, error = %error_chain(&err), ?delay,
                            "Alert push failed; alerts are kept and retried.");
                        failing = true;
                    }
                    tokio::select! {
                        () = sleep(delay) => {}
                        _ = shutdown.changed() => return Flow::Shutdown,
                    }
                }
                Err(err) => {
                    metrics.failed(&self.label);
                    metrics.dropped(DropReason::Rejected, count as u64);
                    tracing::warn!(receiver = %self.label, error = %error_chain(&err), alerts = count,
                        "Alertmanager refused alerts; they are not retried.");
                }
            }
        }
    }

    /// One attempt per remaining batch, bounded by `shutdown_timeout` in all.
    async fn final_flush(&self) {
        let flush = async {
            loop {
                let batch = self.shared.take_batch(self.index, SystemTime::now());
                if batch.alerts.is_empty() {
                    return;
                }
                match self.transport.post(batch.alerts).await {
                    Ok(()) => self.shared.metrics.sent(&self.label),
                    Err(err) => {
                        self.shared.metrics.failed(&self.label);
                        tracing::warn!(receiver = %self.label, error = %error_chain(&err),
                            "Final alert flush failed.");
                        return;
                    }
                }
            }
        };
        if timeout(self.schedule.shutdown_timeout, flush)
            .await
            .is_err()
        {
            tracing::warn!(receiver = %self.label, "Final alert flush ran out of time.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(4));
        let delays: Vec<u128> = (0..7).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 4000, 4000, 4000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(500));
    }

    #[test]
    fn backoff_never_overflows() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..200 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Duration::MAX);
    }
}
