//! Daemon assembly: a validated configuration → components → spawned tasks → drain.
//!
//! Phases, as in linkerd's `main`: the caller has validated the configuration (no side effects)
//! → build (state dir, store and its writer thread, listener, GPU thread, tailer) → spawn (sources,
//! the incident task with its sinks, HTTP) → wait for a stop or a reload → drain within a
//! deadline. Nothing here does the work of a component; each line wires one. A reload drains
//! this process and re-executes the binary in place (see `lifecycle`).

use crate::config::{self, Config};
use crate::detect::DetectorSet;
use crate::http::{self, HttpState};
use crate::incidents::correlate::Correlator;
use crate::incidents::limits::FloodLimits;
use crate::incidents::recorder::{Recorder, Retention};
use crate::incidents::store::{Store, StoreWriter, WriterConfig};
use crate::incidents::streams::{SourceSettings, StreamTable};
use crate::incidents::task::{IncidentTask, Inputs, KernelCheckpointing};
use crate::incidents::Engine;
use crate::lifecycle::{self, sd_notify, Exit, Readiness};
use crate::metrics::Metrics;
use crate::sinks::{self, Sinks};
use crate::sources::kmsg::reader as kreader;
use anyhow::Context;
use assertwatch_tail::{TailConfig, TailSource, Tailer};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the drain after SIGTERM may take before the process exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long the sinks get to drain their queues after the incident task stopped.
const SINK_GRACE: Duration = Duration::from_secs(6);

/// Sinks added by the embedding program (or a test) beside the configured ones.
pub type SinkHook = Box<dyn FnOnce(&mut Sinks) + Send>;

/// What `run` needs besides the configuration.
#[derive(Default)]
pub struct RunOptions {
    /// The file the configuration came from (watched for reloads); `None`: the embedded one.
    pub config_path: Option<PathBuf>,
    pub web_config: Option<PathBuf>,
    pub extra_sinks: Option<SinkHook>,
    /// Cancelling it stops the daemon like SIGTERM.
    pub stop: CancellationToken,
}

/// `assertwatch run` with a validated configuration: the runtime, the daemon, a reload.
pub fn main(cfg: Config, opts: RunOptions) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("assertwatch: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cfg, opts)) {
        Ok(Exit::Stopped) => ExitCode::SUCCESS,
        Ok(Exit::Reload) => {
            drop(rt);
            lifecycle::reexec()
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "The daemon could not start.");
            eprintln!("assertwatch: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn gpu_config(cfg: &Config) -> assertwatch_gpu::GpuConfig {
    let mut g = assertwatch_gpu::GpuConfig::new(match cfg.gpu.backend {
        config::GpuBackendKind::Nvml => assertwatch_gpu::Backend::Nvml,
        config::GpuBackendKind::Fake => assertwatch_gpu::Backend::Fake,
        config::GpuBackendKind::None => assertwatch_gpu::Backend::None,
    });
    g.fake_file = cfg.gpu.fake_file.clone();
    g.poll_interval = cfg.gpu.poll_interval;
    g
}

fn tail_config(cfg: &Config) -> TailConfig {
    let sources = cfg
        .logs
        .iter()
        .map(|l| {
            let mut s = TailSource::new(l.name.clone(), l.paths.clone());
            s.exclude = l.exclude.clone();
            s
        })
        .collect();
    let mut t = TailConfig::new(sources, cfg.state_dir.join("checkpoints.json"));
    t.rescan_interval = cfg.tailing.rescan_interval;
    t.max_open_files = cfg.tailing.max_open_files;
    t.read_bytes_per_pass = cfg.tailing.read_bytes_per_pass;
    t.max_line_bytes = cfg.max_line_bytes;
    t.start_at_end = cfg.tailing.start_at_end;
    t.checkpoint_interval = cfg.tailing.checkpoint_interval;
    t.poll_interval = cfg.tailing.poll_interval;
    t
}

/// This daemon's URL as alerts link to it.
fn api_base(cfg: &Config) -> String {
    let host = if cfg.listen.ip().is_unspecified() {
        cfg.node_name.clone()
    } else {
        cfg.listen.ip().to_string()
    };
    format!("http://{host}:{}", cfg.listen.port())
}

/// Runs the daemon until a stop or a reload, then drains.
///
/// # Errors
/// When a component cannot be built (state dir, store, listener, detectors, tailer, …).
pub async fn run(cfg: Config, opts: RunOptions) -> anyhow::Result<Exit> {
    let RunOptions {
        config_path,
        web_config,
        extra_sinks,
        stop,
    } = opts;

    // Build.
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("creating state_dir {}", cfg.state_dir.display()))?;
    let store = Store::open(&cfg.state_dir).context("opening the incident store")?;
    let (writer, writer_thread) =
        StoreWriter::spawn(store, &WriterConfig::default()).context("starting the store writer")?;
    let reader = Arc::new(
        Store::open_read_only(&cfg.state_dir).context("opening the incident store for reading")?,
    );
    let metrics = Metrics::new();
    metrics.set_max_series(cfg.max_series_per_family);
    let det = Arc::new(
        DetectorSet::new(cfg.rules.clone(), cfg.detect_options()).context("building detectors")?,
    );
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let (readiness, latch) = Readiness::new();
    let shutdown = CancellationToken::new();
    let sources_stop = shutdown.child_token();

    // GPUs: a dedicated thread polls the backend and publishes snapshots; the collector renders
    // the latest one at scrape time and never calls NVML itself.
    let gpu = assertwatch_gpu::spawn(gpu_config(&cfg));
    let probes = assertwatch_gpu::ProbeMetrics::default();
    let collector = assertwatch_gpu::GpuCollector::new(gpu.snapshot.clone(), probes.clone())
        .context("creating the GPU collector")?;
    metrics
        .registry
        .register(Box::new(collector))
        .context("registering the GPU collector")?;
    let assertwatch_gpu::GpuHandle {
        snapshot: gpu_snapshot,
        events: gpu_events,
        stop: gpu_stop,
    } = gpu;

    // Sources. Each tail event holds at most read_bytes_per_pass bytes: the queue bounds memory.
    let tailer = Tailer::new(tail_config(&cfg)).context("starting the log tailer")?;
    let acks = tailer.ack_handle();
    crate::metrics::mirror_counter(
        tailer.stats(),
        metrics.checkpoint_errors.clone(),
        shutdown.clone(),
    );
    let (tail_tx, tail_rx) = mpsc::channel(8);
    let (kern_tx, kern_rx) = mpsc::channel::<kreader::KernelBatch>(16);
    let tail_task = {
        let (stop, acks) = (sources_stop.clone(), acks.clone());
        tokio::spawn(async move {
            if let Err(e) = tailer.run(tail_tx, acks, stop).await {
                tracing::error!(error = %format!("{e:#}"), "The log tailer stopped.");
            }
        })
    };
    let kernel_thread = match &cfg.kernel_log {
        Some(k) => {
            let l = latch.clone();
            Some(
                kreader::spawn(
                    k.path.clone(),
                    k.lookback,
                    cfg.state_dir.clone(),
                    cfg.max_line_bytes,
                    kern_tx,
                    sources_stop.clone(),
                    Box::new(move || drop(l)),
                )
                .context("starting the kernel log reader")?,
            )
        }
        None => {
            drop(kern_tx);
            None
        }
    };

    // Sinks: every consumer of incidents, each on its own task behind a bounded queue.
    let mut sinks = Sinks::new(metrics.clone());
    sinks.add(
        sinks::metrics::MetricsSink::new(metrics.clone()),
        sinks::DEFAULT_QUEUE,
    );
    sinks.add(
        sinks::probe::ProbeSink::new(probes.clone()),
        sinks::DEFAULT_QUEUE,
    );
    let (health, health_rx) = crate::health::sink::HealthSink::new(
        cfg.state_dir.clone(),
        metrics.clone(),
        Some(gpu_snapshot.clone()),
        probes.clone(),
    );
    sinks.add(health, sinks::DEFAULT_QUEUE);
    if cfg.slurm.enabled {
        let scontrol = Arc::new(sinks::slurm::ScontrolCli {
            program: cfg.slurm.scontrol.clone(),
            work_dir: cfg.state_dir.join("slurm"),
        });
        let sink = sinks::slurm::SlurmNodeSink::new(
            cfg.slurm.clone(),
            health_rx.clone(),
            scontrol,
            metrics.clone(),
            &cfg.state_dir,
        );
        sinks.add(sink, sinks::DEFAULT_QUEUE);
    }
    let notifier = match &cfg.alertmanager {
        Some(am) => {
            let m = assertwatch_alertmanager::Metrics::register(&metrics.registry)
                .context("registering alert metrics")?;
            let (handle, task) = assertwatch_alertmanager::Notifier::spawn(
                sinks::alertmanager::client_config(am),
                m,
            )
            .context("starting the Alertmanager client")?;
            let sink = sinks::alertmanager::AlertSink::new(
                handle.clone(),
                am.runbook_base_url.clone(),
                api_base(&cfg),
                am.resolve_after,
            );
            sinks.add(sink, sinks::DEFAULT_QUEUE);
            Some((handle, task))
        }
        None => None,
    };
    // The Kubernetes API (`kubernetes.enabled`): this node's pod cache for attribution, the
    // failing pods captured for replays as pods, and the Events and node-condition sinks.
    let kube_api = sinks::kube_events::connect(&cfg, &metrics.registry).await?;
    let pods = kube_api.as_ref().map(|api| {
        let attr = crate::incidents::pods::PodAttribution::default();
        let (cache, client, node) = (attr.cache.clone(), api.client(), cfg.node_name.clone());
        tokio::spawn(async move { cache.run(client, &node).await });
        attr
    });
    let replays = if cfg.repro.enabled {
        let m = assertwatch_repro::Metrics::from_handles(
            metrics.repro_runs.clone(),
            metrics.repro_duration.clone(),
            &metrics.registry,
        )
        .context("registering reproduction metrics")?;
        let runner = crate::actions::repro::runner(
            &cfg.repro,
            &cfg.state_dir,
            m,
            probes.clone(),
            Some(gpu_snapshot.clone()),
        );
        let (jobs_tx, jobs_rx) = mpsc::channel(crate::actions::repro::QUEUE);
        let (done_tx, done_rx) = mpsc::channel(16);
        let kube_replays = match (&kube_api, &pods) {
            (Some(api), Some(attr)) if cfg.repro.kubernetes.enabled => {
                Some(Arc::new(crate::actions::kube_replay::KubeReplays::new(
                    api.clone(),
                    attr.captured.clone(),
                    cfg.repro.kubernetes.clone(),
                    cfg.node_name.clone(),
                )))
            }
            _ => None,
        };
        tokio::spawn(crate::actions::repro::run(
            runner,
            cfg.repro.max_concurrent as usize,
            jobs_rx,
            done_tx.clone(),
            kube_replays,
        ));
        sinks.add(
            sinks::repro::ReplaySink::new(jobs_tx, done_tx, metrics.clone()),
            sinks::DEFAULT_QUEUE,
        );
        Some(done_rx)
    } else {
        None
    };
    // Kubernetes Events and the GPU node condition (`kubernetes:`). The condition clears when
    // the GPU health model says the GPU recovered, never on a timer.
    let recovery =
        sinks::kube_events::add_kube_sinks(&mut sinks, &cfg, &metrics.registry, kube_api)
            .context("starting the Kubernetes sinks")?;
    if let Some(handle) = recovery {
        sinks::node_condition::follow_health(handle, health_rx.clone());
    }
    if let Some(hook) = extra_sinks {
        hook(&mut sinks);
    }

    // The incident task: the only owner of incident state.
    let heartbeat = Arc::new(AtomicU64::new(0));
    let task = IncidentTask {
        engine: Engine::new(cfg.engine.clone()),
        streams: StreamTable::new(
            det,
            metrics.clone(),
            Some(acks),
            cfg.logs
                .iter()
                .map(|l| SourceSettings {
                    name: l.name.clone(),
                    format: l.format,
                })
                .collect(),
            cfg.max_line_bytes,
            cfg.slurm
                .log_patterns
                .iter()
                .filter_map(|p| crate::sources::slurm::OutputPattern::compile(p).ok())
                .collect(),
        ),
        limits: FloodLimits::new(
            cfg.retention.max_per_minute,
            cfg.logs
                .iter()
                .filter_map(|l| l.max_incidents_per_minute.map(|m| (l.name.clone(), m)))
                .collect(),
        ),
        correlator: Correlator::new(
            i64::try_from(cfg.retention.correlation_window.as_millis()).unwrap_or(i64::MAX),
        ),
        recorder: Recorder::new(
            writer,
            metrics.clone(),
            Retention {
                max_age: cfg.retention.max_age,
                max_count: cfg.retention.max_count,
                max_store_bytes: cfg.retention.max_store_bytes,
            },
        ),
        sinks,
        metrics: metrics.clone(),
        node: cfg.node_name.clone(),
        gpus: Some(gpu_snapshot.clone()),
        kernel_checkpoints: KernelCheckpointing {
            state_dir: cfg.state_dir.clone(),
            every: cfg.tailing.checkpoint_interval,
        },
        heartbeat: heartbeat.clone(),
        proc_root: PathBuf::from("/proc"),
        slurm_by_pid: Default::default(),
        pods,
    };
    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    let incident_task = tokio::spawn(task.run(Inputs {
        tail: tail_rx,
        kernel: kern_rx,
        gpu: gpu_events,
        replays,
        drain: drain_rx,
    }));

    // HTTP: /metrics, health, and (where allowed) the incidents API and page.
    let authenticated = match &web_config {
        Some(w) => assertwatch_web::load_web_config(w)
            .map(|c| !c.basic_auth_users.is_empty())
            .unwrap_or(false),
        None => false,
    };
    let api_open = http::api_allowed(cfg.listen, authenticated, cfg.expose_api);
    if !api_open {
        tracing::info!(listen = %cfg.listen, "The incidents API and page are off on this non-loopback address (no basic auth configured); /metrics and health endpoints are served.");
    }
    let http_state = HttpState {
        api_open,
        metrics: metrics.clone(),
        store: reader,
        readiness: readiness.clone(),
        node: cfg.node_name.clone(),
        gpu_summary: http::gpu_rows(gpu_snapshot.clone(), health_rx.clone()),
    };
    let http_task = {
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let app = http::router(http_state);
            // TLS, client certificates and basic auth with a web config; see docs/security.md.
            let stopped = async move { stop.cancelled().await };
            if let Err(e) = assertwatch_web::serve(listener, app, web_config, stopped).await {
                tracing::error!(error = %format!("{e:#}"), "The HTTP listener failed.");
            }
        })
    };
    drop(latch);
    metrics.up.set(1);
    if let Some(user) = &cfg.run_as {
        // Everything that needs root is open now; give the state dir to the user and drop to it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !readiness.is_ready() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        crate::privilege::drop_to(user, &cfg.state_dir).context("dropping privileges (run_as)")?;
        tracing::info!(user = %user.name, uid = user.uid, gid = user.gid, "Dropped privileges.");
    }
    tracing::info!(listen = %cfg.listen, state_dir = %cfg.state_dir.display(), logs = cfg.logs.len(), kernel_log = cfg.kernel_log.is_some(), node = %cfg.node_name, "assertwatch started.");
    lifecycle::spawn_watchdog(readiness.clone(), heartbeat, shutdown.clone());

    // Wait, then drain: the incident task stores and acknowledges what it processed; only then
    // do the sources stop, so their final checkpoints include the last acknowledgements.
    let exit = lifecycle::wait_for_exit(config_path.as_deref(), &metrics, &stop).await;
    sd_notify(match exit {
        Exit::Reload => "RELOADING=1",
        Exit::Stopped => "STOPPING=1",
    });
    tracing::info!("Draining: stopping sources, flushing incidents and checkpoints.");
    let _ = drain_tx.send(());
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        let sinks = incident_task.await.ok();
        sources_stop.cancel();
        let _ = tail_task.await;
        sinks
    })
    .await;
    sources_stop.cancel();
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(1), http_task).await;
    let _ = tokio::task::spawn_blocking(move || gpu_stop.stop(Duration::from_secs(1))).await;
    let finished = matches!(drained, Ok(Some(_)));
    match drained {
        Ok(Some(sinks)) => {
            let late = sinks.close(SINK_GRACE).await;
            if !late.is_empty() {
                tracing::warn!(sinks = ?late, "Some sinks did not drain in time.");
            }
        }
        _ => {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "Drain did not finish in time; exiting anyway (unacknowledged data is re-read on the next start).")
        }
    }
    if let Some((handle, task)) = notifier {
        handle.shutdown();
        let _ = tokio::time::timeout(SINK_GRACE, task).await;
    }
    if let Some(t) = kernel_thread {
        // The reader notices the token within ~100 ms.
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    if finished {
        // The writer thread ends once the incident task, its last user, is gone.
        let _ = tokio::task::spawn_blocking(move || writer_thread.join()).await;
        tracing::info!("Shutdown completed.");
    }
    Ok(exit)
}
