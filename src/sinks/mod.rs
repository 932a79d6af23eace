//! Sinks: everything that consumes incidents, behind one interface.
//!
//! The incident task publishes every stored change of an incident as an [`IncidentEvent`]. Each
//! sink runs on a task of its own behind a bounded queue; publishing never waits: a full queue
//! drops the event for that sink alone and counts it (`assertwatch_sink_dropped_total{sink}`), so
//! a slow receiver (an unreachable Alertmanager, a busy replay runner) never stalls detection.
//!
//! Adding a consumer is one file with an [`IncidentSink`] implementation and one
//! [`Sinks::add`] line where the daemon is assembled. Sinks never import the incident engine;
//! what they may send back (a replay result) goes through a channel they were given.

pub mod alertmanager;
pub mod kube_events;
pub mod metrics;
pub mod node_condition;
pub mod probe;
pub mod repro;
pub mod slurm;

use crate::metrics::Metrics;
use crate::model::IncidentRecord;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Events queued per sink unless the sink's configuration says otherwise.
pub const DEFAULT_QUEUE: usize = 256;

/// What happened to the incident in an [`IncidentEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// First stored version of a new incident (counted once). It may already be complete
    /// (`record.open` false) when all its lines arrived at once.
    Opened,
    /// More lines joined an open incident.
    Updated,
    /// The incident is complete; no further lines will join it (`record.open` is false).
    Closed,
    /// A replay result was attached.
    Replayed,
}

/// One stored change of one incident, as every sink sees it.
#[derive(Debug, Clone)]
pub struct IncidentEvent {
    pub change: Change,
    /// The record as stored: `id` and `time` are set.
    pub record: IncidentRecord,
    /// The GPU in NVML's terms (index, UUID, NVML's bus id), where the incident names one the
    /// GPU layer knows.
    pub gpu: Option<assertwatch_gpu::GpuId>,
}

impl IncidentEvent {
    /// Whether this is the first event of its incident.
    pub fn is_new(&self) -> bool {
        self.change == Change::Opened
    }
}

/// A consumer of incidents. Runs on its own task; may be slow (network, subprocesses) without
/// holding anything else back.
pub trait IncidentSink: Send + 'static {
    /// Stable snake_case name: the `sink` label of the sink metrics and the task's log field.
    fn name(&self) -> &'static str;

    /// Consumes one event. Errors are the sink's to count and log; the queue moves on.
    fn handle(&mut self, event: Arc<IncidentEvent>) -> impl Future<Output = ()> + Send;

    /// How often [`IncidentSink::tick`] runs; `None` (the default): never.
    fn tick_every(&self) -> Option<Duration> {
        None
    }

    /// Periodic work between events (deadlines, retries).
    fn tick(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Called once after the last event, at shutdown.
    fn finish(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

struct Outlet {
    name: &'static str,
    tx: mpsc::Sender<Arc<IncidentEvent>>,
    dropped: prometheus::IntCounter,
    /// Drops since the last warning (warnings are rate-limited; the counter has them all).
    unreported: u64,
    last_warned: Option<tokio::time::Instant>,
}

/// The fan-out from the incident task to every sink.
pub struct Sinks {
    outlets: Vec<Outlet>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    metrics: Metrics,
}

impl Sinks {
    pub fn new(metrics: Metrics) -> Self {
        Sinks {
            outlets: Vec::new(),
            tasks: Vec::new(),
            metrics,
        }
    }

    /// Starts `sink` on its own task behind a queue of `capacity` events.
    pub fn add<S: IncidentSink>(&mut self, sink: S, capacity: usize) {
        let name = sink.name();
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let delivered = self.metrics.sink_events.with_label_values(&[name]);
        let dropped = self.metrics.sink_dropped.with_label_values(&[name]);
        let task = tokio::spawn(drive(sink, rx, delivered));
        self.outlets.push(Outlet {
            name,
            tx,
            dropped,
            unreported: 0,
            last_warned: None,
        });
        self.tasks.push((name, task));
    }

    /// Names of the sinks, in the order they were added.
    pub fn names(&self) -> Vec<&'static str> {
        self.outlets.iter().map(|o| o.name).collect()
    }

    /// Hands `event` to every sink without waiting. A sink whose queue is full misses it (counted).
    pub fn publish(&mut self, event: IncidentEvent) {
        if self.outlets.is_empty() {
            return;
        }
        let event = Arc::new(event);
        for o in &mut self.outlets {
            match o.tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    o.dropped.inc();
                    o.unreported += 1;
                    let now = tokio::time::Instant::now();
                    if o.last_warned
                        .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10))
                    {
                        tracing::warn!(sink = o.name, dropped = o.unreported, "A sink is behind; incident changes for it were dropped (assertwatch_sink_dropped_total).");
                        o.unreported = 0;
                        o.last_warned = Some(now);
                    }
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    o.dropped.inc();
                }
            }
        }
    }

    /// Closes every queue and waits (up to `grace` in all) for the sinks to drain and finish.
    /// Returns the names of sinks that did not finish in time.
    pub async fn close(self, grace: Duration) -> Vec<&'static str> {
        drop(self.outlets);
        let deadline = tokio::time::Instant::now() + grace;
        let mut late = Vec::new();
        for (name, task) in self.tasks {
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                late.push(name);
            }
        }
        late
    }
}

async fn drive<S: IncidentSink>(
    mut sink: S,
    mut rx: mpsc::Receiver<Arc<IncidentEvent>>,
    delivered: prometheus::IntCounter,
) {
    let mut tick = sink.tick_every().map(|every| {
        let mut t = tokio::time::interval(every.max(Duration::from_millis(10)));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => {
                    sink.handle(ev).await;
                    delivered.inc();
                }
                None => break,
            },
            _ = async {
                match tick.as_mut() {
                    Some(t) => { t.tick().await; }
                    None => std::future::pending::<()>().await,
                }
            } => sink.tick().await,
        }
    }
    sink.finish().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Slow {
        seen: Arc<AtomicU64>,
        gate: Arc<tokio::sync::Semaphore>,
    }

    impl IncidentSink for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        async fn handle(&mut self, _event: Arc<IncidentEvent>) {
            if let Ok(p) = self.gate.acquire().await {
                p.forget();
            }
            self.seen.fetch_add(1, Ordering::Relaxed);
        }
    }

    struct Counting(Arc<AtomicU64>);

    impl IncidentSink for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        async fn handle(&mut self, _event: Arc<IncidentEvent>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn event() -> IncidentEvent {
        IncidentEvent {
            change: Change::Opened,
            record: crate::incidents::store::test_record(),
            gpu: None,
        }
    }

    #[tokio::test]
    async fn a_stuck_sink_drops_and_counts_while_others_receive_everything() {
        let metrics = Metrics::new();
        let mut sinks = Sinks::new(metrics.clone());
        let slow_seen = Arc::new(AtomicU64::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let fast_seen = Arc::new(AtomicU64::new(0));
        sinks.add(
            Slow {
                seen: slow_seen.clone(),
                gate: gate.clone(),
            },
            4,
        );
        sinks.add(Counting(fast_seen.clone()), 1024);
        let t = tokio::time::Instant::now();
        for _ in 0..100 {
            sinks.publish(event());
            tokio::task::yield_now().await;
        }
        // Publishing never waited for the stuck sink.
        assert!(t.elapsed() < Duration::from_secs(1));
        let dropped = metrics.sink_dropped.with_label_values(&["slow"]).get();
        assert!(dropped >= 95, "dropped {dropped}");
        gate.add_permits(1000);
        let late = sinks.close(Duration::from_secs(5)).await;
        assert!(late.is_empty());
        assert_eq!(fast_seen.load(Ordering::Relaxed), 100);
        assert_eq!(slow_seen.load(Ordering::Relaxed) + dropped, 100);
        assert_eq!(
            metrics.sink_events.with_label_values(&["counting"]).get(),
            100
        );
    }

    struct Ticking(Arc<AtomicU64>);

    impl IncidentSink for Ticking {
        fn name(&self) -> &'static str {
            "ticking"
        }
        async fn handle(&mut self, _event: Arc<IncidentEvent>) {}
        fn tick_every(&self) -> Option<Duration> {
            Some(Duration::from_millis(20))
        }
        async fn tick(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        async fn finish(&mut self) {
            self.0.fetch_add(1000, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn ticks_run_between_events_and_finish_runs_at_close() {
        let n = Arc::new(AtomicU64::new(0));
        let mut sinks = Sinks::new(Metrics::new());
        sinks.add(Ticking(n.clone()), 8);
        tokio::time::sleep(Duration::from_millis(150)).await;
        sinks.close(Duration::from_secs(1)).await;
        let v = n.load(Ordering::Relaxed);
        assert!(v >= 1002, "{v}");
    }
}
