//! The GPU thread: opens the backend, polls every GPU on an interval, waits for driver events
//! between polls, and publishes the results.
//!
//! It is a dedicated std thread, never a task on the async runtime, because every backend call
//! blocks (NVML is synchronous FFI and can stall for seconds on a failing GPU). Its outputs:
//!
//! - a `tokio::sync::watch` channel holding the latest [`GpuSnapshot`]: only the newest reading
//!   matters, and `/metrics` renders it without ever calling the driver;
//! - a bounded `tokio::sync::mpsc` channel of [`GpuEvent`]s: Xids are rare and must not be lost,
//!   so a full channel makes the thread wait (and it still notices a stop request while waiting).
//!
//! When the driver is missing the thread logs one warning, publishes `nvml_up = false` and retries
//! with backoff (1 s doubling up to 5 min); the rest of the daemon never notices.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, watch};

use crate::backend::{GpuBackend, GpuError};
use crate::fake::FakeBackend;
use crate::nvml::NvmlBackend;
use crate::procs::{comm, PodResolver};
use crate::{Backend, GpuConfig, GpuEvent, GpuInfo, GpuSample, GpuSnapshot, GpuState};

/// Events buffered between the GPU thread and its consumer before the thread waits.
pub const EVENT_CAPACITY: usize = 64;
/// Longest single wait for a driver event; bounds how long a stop request takes to be seen.
const WAIT_SLICE: Duration = Duration::from_millis(200);
/// First retry delay after the backend could not be opened.
const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Longest retry delay.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Shortest time between polls, whatever the config says (a zero interval would spin).
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// What [`spawn`] returns: the two output channels and the way to stop the thread.
#[derive(Debug)]
pub struct GpuHandle {
    /// The latest snapshot; starts as "down" until the first poll.
    pub snapshot: watch::Receiver<Arc<GpuSnapshot>>,
    /// Xid and lost-GPU events, in the order they happened. Closed (`recv` gives `None`) when the
    /// backend is `none` or the thread has stopped.
    pub events: mpsc::Receiver<GpuEvent>,
    /// Stops the thread; dropping it also asks the thread to stop.
    pub stop: GpuStop,
}

/// Stops the GPU thread.
#[derive(Debug)]
pub struct GpuStop {
    flag: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GpuStop {
    /// Asks the thread to stop and waits for it at most `within` (it checks every 200 ms, so about
    /// that is enough unless the driver itself is stuck). Returns true when the thread ended; on
    /// false it is left behind, blocked in the driver, and ends with the process.
    pub fn stop(mut self, within: Duration) -> bool {
        self.flag.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else {
            return true;
        };
        let deadline = Instant::now() + within;
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        thread.join().is_ok()
    }
}

impl Drop for GpuStop {
    fn drop(&mut self) {
        self.flag.store(true, Ordering::SeqCst);
    }
}

type Opener = Box<dyn FnMut() -> Result<Box<dyn GpuBackend>, GpuError> + Send>;

/// Starts the GPU thread for `config`. With `Backend::None` no thread starts: the snapshot says
/// `nvml_up = false` and the event channel is closed.
pub fn spawn(config: GpuConfig) -> GpuHandle {
    let fake_file = config.fake_file.clone();
    let opener: Opener = match config.backend {
        Backend::None => return idle_handle(),
        Backend::Nvml => Box::new(|| Ok(Box::new(NvmlBackend::open()?) as Box<dyn GpuBackend>)),
        Backend::Fake => Box::new(move || {
            FakeBackend::from_file(&fake_file)
                .map(|b| Box::new(b) as Box<dyn GpuBackend>)
                .map_err(|e| GpuError::Unavailable {
                    reason: e.to_string(),
                })
        }),
    };
    spawn_opener(config, opener)
}

/// Starts the GPU thread over a backend that is already open (tests, benchmarks). If the backend
/// later reports [`GpuError::Unavailable`], the thread publishes `nvml_up = false` and stays so.
pub fn spawn_with_backend(config: GpuConfig, backend: Box<dyn GpuBackend>) -> GpuHandle {
    let mut once = Some(backend);
    spawn_opener(
        config,
        Box::new(move || {
            once.take().ok_or_else(|| GpuError::Unavailable {
                reason: "the backend given to spawn_with_backend went away".to_owned(),
            })
        }),
    )
}

fn idle_handle() -> GpuHandle {
    let (_, snapshot) = watch::channel(Arc::new(GpuSnapshot::down(Backend::None.as_str())));
    let (_, events) = mpsc::channel(1);
    GpuHandle {
        snapshot,
        events,
        stop: GpuStop {
            flag: Arc::new(AtomicBool::new(true)),
            thread: None,
        },
    }
}

fn spawn_opener(config: GpuConfig, opener: Opener) -> GpuHandle {
    let name = config.backend.as_str();
    let (snap_tx, snapshot) = watch::channel(Arc::new(GpuSnapshot::down(name)));
    let (event_tx, events) = mpsc::channel(EVENT_CAPACITY);
    let flag = Arc::new(AtomicBool::new(false));
    let worker = Worker {
        resolver: PodResolver::new(config.proc_root.clone(), config.pod_log_root.clone()),
        config,
        snap_tx,
        event_tx,
        stop: Arc::clone(&flag),
        lost: HashSet::new(),
    };
    let thread = std::thread::Builder::new()
        .name("gpu".to_owned())
        .spawn(move || worker.run(opener));
    let thread = match thread {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(error = %e, "Cannot start the GPU thread; GPU metrics are off.");
            None
        }
    };
    GpuHandle {
        snapshot,
        events,
        stop: GpuStop { flag, thread },
    }
}

struct Worker {
    config: GpuConfig,
    resolver: PodResolver,
    snap_tx: watch::Sender<Arc<GpuSnapshot>>,
    event_tx: mpsc::Sender<GpuEvent>,
    stop: Arc<AtomicBool>,
    /// Indexes of GPUs already reported lost, so `GpuEvent::Lost` is sent once per loss.
    lost: HashSet<u32>,
}

impl Worker {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps `d` in short steps; false when a stop was requested meanwhile.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        while !self.stopped() {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            std::thread::sleep((deadline - now).min(WAIT_SLICE));
        }
        false
    }

    fn publish_down(&self) {
        self.snap_tx
            .send_replace(Arc::new(GpuSnapshot::down(self.config.backend.as_str())));
    }

    fn run(mut self, mut open: Opener) {
        let mut delay = INITIAL_BACKOFF;
        let mut warned = false;
        let mut last_lost_warning: Option<Instant> = None;
        while !self.stopped() {
            match open() {
                Ok(mut backend) => {
                    if warned {
                        tracing::info!(
                            backend = backend.name(),
                            "The GPU backend is available again."
                        );
                    }
                    warned = false;
                    delay = INITIAL_BACKOFF;
                    let Err(e) = self.serve(backend.as_mut()) else {
                        return;
                    };
                    // Rate-limited: a driver that keeps failing must not flood the log.
                    if last_lost_warning.is_none_or(|t: Instant| t.elapsed() >= MAX_BACKOFF) {
                        tracing::warn!(backend = backend.name(), error = %e, "The GPU backend went away; reopening it.");
                        last_lost_warning = Some(Instant::now());
                    }
                    self.publish_down();
                    drop(backend);
                    if !self.sleep(INITIAL_BACKOFF) {
                        return;
                    }
                }
                Err(e) => {
                    if !warned {
                        self.warn_unavailable(&e);
                        warned = true;
                    } else {
                        tracing::debug!(error = %e, retry_in = ?delay, "The GPU backend is still unavailable.");
                    }
                    self.publish_down();
                    if !self.sleep(delay) {
                        return;
                    }
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    fn warn_unavailable(&self, e: &GpuError) {
        let reason = match e {
            GpuError::Unavailable { reason } => reason.clone(),
            other => other.to_string(),
        };
        match self.config.backend {
            Backend::Fake => tracing::warn!(
                backend = "fake",
                "The fake GPU script cannot be used ({reason}); GPU metrics are off, the rest of the daemon keeps running."
            ),
            _ => tracing::warn!(
                backend = "nvml",
                "NVML is not available ({reason}); GPU metrics are off, the rest of the daemon keeps running. Retrying with backoff."
            ),
        }
    }

    /// Polls and waits for events until stopped (Ok) or until the backend goes away (Err).
    fn serve(&mut self, backend: &mut dyn GpuBackend) -> Result<(), GpuError> {
        let interval = self.config.poll_interval.max(MIN_POLL_INTERVAL);
        let mut next_poll = Instant::now();
        while !self.stopped() {
            let now = Instant::now();
            if now >= next_poll {
                let mut snapshot = poll_once(backend);
                if !snapshot.nvml_up {
                    return Err(GpuError::Unavailable {
                        reason: "the driver stopped answering".to_owned(),
                    });
                }
                self.enrich(&mut snapshot);
                self.snap_tx.send_replace(Arc::new(snapshot));
                next_poll += interval;
                if next_poll <= now {
                    next_poll = now + interval;
                }
            }
            let wait = next_poll
                .saturating_duration_since(Instant::now())
                .min(WAIT_SLICE);
            match backend.wait_event(wait) {
                Ok(Some(event)) => self.send(event),
                Ok(None) => {}
                Err(e @ GpuError::Unavailable { .. }) => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "Waiting for GPU events failed.");
                    self.sleep(wait);
                }
            }
        }
        Ok(())
    }

    /// Adds pod attribution and process names, and sends `Lost` for newly lost GPUs.
    fn enrich(&mut self, snapshot: &mut GpuSnapshot) {
        for gpu in &mut snapshot.gpus {
            self.resolver.attribute(&mut gpu.processes);
            for p in gpu.processes.iter_mut().filter(|p| p.name.is_none()) {
                p.name = comm(&self.config.proc_root, p.pid);
            }
        }
        let lost_now: Vec<_> = snapshot
            .gpus
            .iter()
            .filter(|g| g.lost && !self.lost.contains(&g.id.index))
            .map(|g| g.id.clone())
            .collect();
        self.lost = snapshot
            .gpus
            .iter()
            .filter(|g| g.lost)
            .map(|g| g.id.index)
            .collect();
        for gpu in lost_now {
            tracing::warn!(gpu = gpu.index, uuid = %gpu.uuid, pci_bus_id = %gpu.pci_bus_id, "The GPU is lost: it no longer answers the driver.");
            self.send(GpuEvent::Lost {
                gpu,
                at: snapshot.taken_at,
            });
        }
    }

    /// Delivers an event, waiting while the channel is full but giving up on a stop request or a
    /// closed channel. (Equivalent to `blocking_send`, except that it cannot hang a stop.)
    fn send(&self, mut event: GpuEvent) {
        loop {
            match self.event_tx.try_send(event) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full(back)) => {
                    if self.stopped() {
                        return;
                    }
                    event = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// Reads every GPU once: identity, info, sample and processes (without pod attribution). A lost
/// GPU is marked `lost` with an empty sample and the others are still read. When the driver
/// itself is unavailable the snapshot has `nvml_up = false` and no GPUs.
pub fn poll_once(backend: &mut dyn GpuBackend) -> GpuSnapshot {
    let taken_at = SystemTime::now();
    let start = Instant::now();
    let name = backend.name();
    let down = |e: &GpuError| {
        tracing::debug!(error = %e, "The GPU backend is unavailable.");
        GpuSnapshot::down(name)
    };
    let devices = match backend.devices() {
        Ok(d) => d,
        Err(e) => return down(&e),
    };
    let mut gpus = Vec::with_capacity(devices.len());
    for id in devices {
        let info = match backend.info(&id) {
            Ok(info) => info,
            Err(e @ GpuError::Unavailable { .. }) => return down(&e),
            Err(_) => GpuInfo::default(),
        };
        let (sample, lost) = match backend.sample(&id) {
            Ok(s) => (s, false),
            Err(GpuError::Lost { .. }) => (GpuSample::default(), true),
            Err(e @ GpuError::Unavailable { .. }) => return down(&e),
            Err(e) => {
                tracing::debug!(gpu = id.index, error = %e, "Reading the GPU failed.");
                (GpuSample::default(), false)
            }
        };
        let processes = if lost {
            Vec::new()
        } else {
            match backend.processes(&id) {
                Ok(p) => p,
                Err(e @ GpuError::Unavailable { .. }) => return down(&e),
                Err(_) => Vec::new(),
            }
        };
        gpus.push(GpuState {
            id,
            info,
            sample,
            processes,
            lost,
        });
    }
    GpuSnapshot {
        nvml_up: true,
        backend: name,
        gpus,
        taken_at,
        collect_duration: start.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeClock, FakeScript};
    use std::path::Path;

    fn shipped_script() -> FakeScript {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fake-gpus.yaml");
        FakeScript::from_file(&path).unwrap()
    }

    fn fast_config() -> GpuConfig {
        GpuConfig {
            poll_interval: Duration::from_millis(20),
            ..GpuConfig::new(Backend::Fake)
        }
    }

    async fn wait_for(
        rx: &mut watch::Receiver<Arc<GpuSnapshot>>,
        pred: impl Fn(&GpuSnapshot) -> bool,
    ) -> Arc<GpuSnapshot> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let s = Arc::clone(&rx.borrow_and_update());
                if pred(&s) {
                    return s;
                }
                rx.changed().await.unwrap();
            }
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn thread_publishes_snapshots_and_delivers_xid_then_lost() {
        let clock = FakeClock::manual();
        let backend = FakeBackend::with_clock(shipped_script(), clock.clone());
        let mut handle = spawn_with_backend(fast_config(), Box::new(backend));
        let s = wait_for(&mut handle.snapshot, |s| s.nvml_up).await;
        assert_eq!(s.backend, "fake");
        assert_eq!(s.gpus.len(), 2);

        clock.set(Duration::from_secs(20));
        let ev = tokio::time::timeout(Duration::from_secs(10), handle.events.recv())
            .await
            .unwrap()
            .unwrap();
        match ev {
            GpuEvent::Xid { gpu, xid, pid, .. } => {
                assert_eq!((gpu.index, xid, pid), (1, 79, Some(4243)));
            }
            other => panic!("expected the scripted Xid, got {other:?}"),
        }

        clock.set(Duration::from_secs(25));
        let ev = tokio::time::timeout(Duration::from_secs(10), handle.events.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(ev, GpuEvent::Lost { ref gpu, .. } if gpu.index == 1),
            "{ev:?}"
        );
        let s = wait_for(&mut handle.snapshot, |s| s.gpus.iter().any(|g| g.lost)).await;
        assert!(!s.gpus[0].lost && s.gpus[1].lost);

        let t = Instant::now();
        assert!(handle.stop.stop(Duration::from_secs(1)));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn nvml_without_a_driver_reports_down_quickly() {
        if crate::nvml::library_present() {
            eprintln!("notice: libnvidia-ml is present here; the no-driver path is not exercised");
            return;
        }
        let t = Instant::now();
        let mut handle = spawn(GpuConfig::new(Backend::Nvml));
        // The thread publishes "down" after its first failed open; the initial value is also
        // down, so wait for the first change.
        tokio::time::timeout(Duration::from_secs(5), handle.snapshot.changed())
            .await
            .unwrap()
            .unwrap();
        let s = Arc::clone(&handle.snapshot.borrow());
        assert!(!s.nvml_up);
        assert!(s.gpus.is_empty());
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(handle.stop.stop(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn none_backend_starts_nothing() {
        let mut handle = spawn(GpuConfig::new(Backend::None));
        assert!(!handle.snapshot.borrow().nvml_up);
        assert_eq!(handle.snapshot.borrow().backend, "none");
        assert!(handle.events.recv().await.is_none());
        assert!(handle.stop.stop(Duration::from_millis(10)));
    }

    #[tokio::test]
    async fn bad_fake_script_reports_down() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, "gpus: 3\n").unwrap();
        let config = GpuConfig {
            fake_file: path,
            ..fast_config()
        };
        let mut handle = spawn(config);
        tokio::time::timeout(Duration::from_secs(5), handle.snapshot.changed())
            .await
            .unwrap()
            .unwrap();
        assert!(!handle.snapshot.borrow().nvml_up);
        assert!(handle.stop.stop(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn processes_are_attributed_to_pods_from_proc_and_pod_logs() {
        const UID: &str = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";
        let dir = tempfile::tempdir().unwrap();
        let proc_pid = dir.path().join("proc/4242");
        std::fs::create_dir_all(&proc_pid).unwrap();
        std::fs::write(
            proc_pid.join("cgroup"),
            format!(
                "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-abcdef0123456789.scope\n",
                UID.replace('-', "_")
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join(format!("pods/ml_trainer-0_{UID}/trainer")))
            .unwrap();
        let config = GpuConfig {
            proc_root: dir.path().join("proc"),
            pod_log_root: dir.path().join("pods"),
            ..fast_config()
        };
        let clock = FakeClock::manual();
        clock.set(Duration::from_secs(10));
        let backend = FakeBackend::with_clock(shipped_script(), clock);
        let mut handle = spawn_with_backend(config, Box::new(backend));
        let s = wait_for(&mut handle.snapshot, |s| s.nvml_up).await;
        let p = &s.gpus[0].processes[0];
        assert_eq!(p.pid, 4242);
        let pod = p.pod.as_ref().unwrap();
        assert_eq!(
            (pod.namespace.as_str(), pod.pod.as_str()),
            ("ml", "trainer-0")
        );
        assert_eq!(pod.container.as_deref(), Some("trainer"));
        assert_eq!(s.gpus[1].processes[0].pod, None);
        assert!(handle.stop.stop(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn backend_that_goes_away_turns_nvml_up_off() {
        struct Vanishing(FakeBackend, u32);
        impl GpuBackend for Vanishing {
            fn name(&self) -> &'static str {
                "fake"
            }
            fn devices(&mut self) -> Result<Vec<crate::GpuId>, GpuError> {
                self.1 += 1;
                if self.1 > 1 {
                    return Err(GpuError::Unavailable {
                        reason: "driver unloaded".into(),
                    });
                }
                self.0.devices()
            }
            fn info(&mut self, gpu: &crate::GpuId) -> Result<GpuInfo, GpuError> {
                self.0.info(gpu)
            }
            fn sample(&mut self, gpu: &crate::GpuId) -> Result<GpuSample, GpuError> {
                self.0.sample(gpu)
            }
            fn wait_event(&mut self, t: Duration) -> Result<Option<GpuEvent>, GpuError> {
                self.0.wait_event(t)
            }
            fn processes(
                &mut self,
                gpu: &crate::GpuId,
            ) -> Result<Vec<crate::GpuProcess>, GpuError> {
                self.0.processes(gpu)
            }
        }
        let backend = Vanishing(
            FakeBackend::with_clock(shipped_script(), FakeClock::manual()),
            0,
        );
        let mut handle = spawn_with_backend(fast_config(), Box::new(backend));
        wait_for(&mut handle.snapshot, |s| s.nvml_up).await;
        let s = wait_for(&mut handle.snapshot, |s| !s.nvml_up).await;
        assert!(s.gpus.is_empty());
        assert!(handle.stop.stop(Duration::from_secs(1)));
    }

    #[test]
    fn poll_once_marks_the_lost_gpu_and_reads_the_other() {
        let clock = FakeClock::manual();
        let mut backend = FakeBackend::with_clock(shipped_script(), clock.clone());
        clock.set(Duration::from_secs(30));
        let s = poll_once(&mut backend);
        assert!(s.nvml_up);
        assert!(!s.gpus[0].lost);
        assert!(s.gpus[0].sample.utilization_ratio.is_some());
        assert!(s.gpus[1].lost);
        assert_eq!(s.gpus[1].sample, GpuSample::default());
        assert!(s.gpus[1].processes.is_empty());
    }
}
