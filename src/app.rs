//! Daemon assembly: configuration → components → tasks, and the shutdown sequence.
//!
//! Phases, as in linkerd's `main`: validate the configuration (no side effects) → build (state
//! dir, store, listener) → spawn (tailer, kernel reader, pipeline, HTTP) → wait for a signal →
//! drain within a deadline. Reload (SIGHUP or a change of the config file) validates the new
//! file first: an invalid one is logged and counted and the running configuration stays; a valid
//! one drains this process (checkpoints and store flushed) and re-executes the binary in place —
//! same pid, so systemd and the kubelet see one continuous service, and every component starts
//! from the new configuration with no half-applied state.

use crate::cli::{LogFormat, EXIT_USAGE};
use crate::config::{self, Config};
use crate::detect::DetectorSet;
use crate::http::{self, HttpState};
use crate::incidents::pipeline::{AlertSink, Pipeline};
use crate::incidents::store::Store;
use crate::lifecycle::{sd_notify, watchdog_interval, Readiness};
use crate::metrics::Metrics;
use crate::sources::kmsg::reader as kreader;
use anyhow::Context;
use assertwatch_tail::{TailConfig, TailSource, Tailer};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the drain after SIGTERM may take before the process exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// `assertwatch run`.
pub fn main(
    config_path: Option<PathBuf>,
    log_format: LogFormat,
    web_config: Option<PathBuf>,
) -> ExitCode {
    init_tracing(log_format);
    let cfg = match &config_path {
        Some(p) => config::load(p),
        None => config::default_config(),
    };
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            crate::cli::print_config_error(&e);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(w) = &web_config {
        if let Err(e) = assertwatch_web::validate_web_config_file(w) {
            eprintln!("assertwatch: invalid web config: {e:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
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
    match rt.block_on(run(cfg, config_path.clone(), web_config)) {
        Ok(Exit::Stopped) => ExitCode::SUCCESS,
        Ok(Exit::Reload) => {
            drop(rt);
            reexec()
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "The daemon could not start.");
            eprintln!("assertwatch: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing(fmt: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match fmt {
        LogFormat::Json => b.json().try_init(),
        LogFormat::Text => b.try_init(),
    };
}

/// Replaces this process image with the same binary and arguments (reload).
fn reexec() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(&args[0]));
    // The only process spawn outside the repro runner: exec of our own binary, argv unchanged.
    #[allow(clippy::disallowed_methods)]
    let err = std::process::Command::new(exe).args(&args[1..]).exec();
    eprintln!("assertwatch: reload failed, cannot re-execute: {err}");
    ExitCode::from(1)
}

enum Exit {
    Stopped,
    Reload,
}

async fn run(
    cfg: Config,
    config_path: Option<PathBuf>,
    web_config: Option<PathBuf>,
) -> anyhow::Result<Exit> {
    // Build: state dir, store, detectors, listener. Failures here exit 1 with the reason.
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("creating state_dir {}", cfg.state_dir.display()))?;
    let store = Arc::new(Store::open(&cfg.state_dir).context("opening the incident store")?);
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

    // GPUs: a dedicated thread polls the backend and publishes snapshots; the collector renders
    // the latest one at scrape time and never calls NVML itself.
    let mut gcfg = assertwatch_gpu::GpuConfig::new(match cfg.gpu.backend {
        config::GpuBackendKind::Nvml => assertwatch_gpu::Backend::Nvml,
        config::GpuBackendKind::Fake => assertwatch_gpu::Backend::Fake,
        config::GpuBackendKind::None => assertwatch_gpu::Backend::None,
    });
    gcfg.fake_file = cfg.gpu.fake_file.clone();
    gcfg.poll_interval = cfg.gpu.poll_interval;
    let gpu = assertwatch_gpu::spawn(gcfg);
    let probes = assertwatch_gpu::ProbeMetrics::default();
    let collector = assertwatch_gpu::GpuCollector::new(gpu.snapshot.clone(), probes.clone())
        .context("creating the GPU collector")?;
    metrics
        .registry
        .register(Box::new(collector))
        .context("registering the GPU collector")?;
    let assertwatch_gpu::GpuHandle {
        snapshot: gpu_snapshot,
        events: mut gpu_events,
        stop: gpu_stop,
    } = gpu;

    let mut tcfg = TailConfig::new(
        cfg.logs
            .iter()
            .map(|l| {
                let mut s = TailSource::new(l.name.clone(), l.paths.clone());
                s.exclude = l.exclude.clone();
                s
            })
            .collect(),
        cfg.state_dir.join("checkpoints.json"),
    );
    tcfg.rescan_interval = cfg.tailing.rescan_interval;
    tcfg.max_open_files = cfg.tailing.max_open_files;
    tcfg.read_bytes_per_pass = cfg.tailing.read_bytes_per_pass;
    tcfg.max_line_bytes = cfg.max_line_bytes;
    tcfg.start_at_end = cfg.tailing.start_at_end;
    tcfg.checkpoint_interval = cfg.tailing.checkpoint_interval;
    tcfg.poll_interval = cfg.tailing.poll_interval;
    let tailer = Tailer::new(tcfg).context("starting the log tailer")?;
    let acks = tailer.ack_handle();
    let tail_stats = tailer.stats();
    // Each event holds at most read_bytes_per_pass of data, so this bounds the bytes in flight.
    let (tail_tx, mut tail_rx) = mpsc::channel(8);
    let (kern_tx, mut kern_rx) = mpsc::channel::<kreader::KernelBatch>(16);
    let sources_stop = shutdown.child_token();
    let tail_task = {
        let stop = sources_stop.clone();
        let acks = acks.clone();
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

    // Alertmanager: a background task per receiver; the handle never blocks the pipeline.
    let (notifier, notifier_task) = match &cfg.alertmanager {
        Some(am) => {
            let m = assertwatch_alertmanager::Metrics::register(&metrics.registry)
                .context("registering alert metrics")?;
            let (h, t) = assertwatch_alertmanager::Notifier::spawn(
                crate::sinks::alertmanager::client_config(am),
                m,
            )
            .context("starting the Alertmanager client")?;
            (Some(h), Some(t))
        }
        None => (None, None),
    };

    // Reproduction: replays run on their own task; results come back to the pipeline.
    let (repro_tx, mut repro_done_rx) = if cfg.repro.enabled {
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
        )
        .map_err(|e| anyhow::anyhow!("repro.modes: {e}"))?;
        let (jtx, jrx) = mpsc::channel(crate::actions::repro::QUEUE);
        let (dtx, drx) = mpsc::channel(16);
        tokio::spawn(crate::actions::repro::run(
            runner,
            cfg.repro.max_concurrent as usize,
            jrx,
            dtx,
        ));
        (Some(jtx), Some(drx))
    } else {
        (None, None)
    };

    // The pipeline task owns detection and incident state; see incidents::pipeline.
    let heartbeat = Arc::new(AtomicU64::new(0));
    let (drain_tx, mut drain_rx) = tokio::sync::oneshot::channel::<()>();
    let pipeline_task = {
        let mut p = Pipeline::new(
            &cfg,
            det.clone(),
            store.clone(),
            metrics.clone(),
            Some(acks),
        )
        .with_gpus(gpu_snapshot.clone());
        if let Some(tx) = repro_tx {
            p = p.with_repro(tx);
        }
        if let (Some(h), Some(am)) = (&notifier, &cfg.alertmanager) {
            let host = if cfg.listen.ip().is_unspecified() {
                cfg.node_name.clone()
            } else {
                cfg.listen.ip().to_string()
            };
            let api = format!("http://{host}:{}", cfg.listen.port());
            p = p.with_alerts(AlertSink::new(
                h.clone(),
                am.runbook_base_url.clone(),
                api,
                am.resolve_after,
            ));
        }
        let hb = heartbeat.clone();
        let checkpoint_errors = metrics.checkpoint_errors.clone();
        let state_dir = cfg.state_dir.clone();
        let retention = cfg.retention.clone();
        let checkpoint_every = cfg.tailing.checkpoint_interval;
        let latch = latch.clone();
        tokio::spawn(async move {
            drop(latch);
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            let mut last_prune = tokio::time::Instant::now();
            let mut last_kck = tokio::time::Instant::now();
            let mut kernel_open = true;
            let mut tail_open = true;
            let mut gpu_open = true;
            let mut last_probe: std::collections::HashMap<u32, tokio::time::Instant> =
                Default::default();
            while tail_open || kernel_open {
                tokio::select! {
                    // Drain: persist and acknowledge what was processed, then stop consuming;
                    // events still queued are re-read after the restart (never acknowledged).
                    _ = &mut drain_rx => break,
                    ev = tail_rx.recv(), if tail_open => match ev {
                        Some(ev) => p.on_tail(ev),
                        None => tail_open = false,
                    },
                    b = kern_rx.recv(), if kernel_open => match b {
                        Some(b) => p.on_kernel(b),
                        None => kernel_open = false,
                    },
                    g = gpu_events.recv(), if gpu_open => match g {
                        Some(g) => p.on_gpu(g),
                        None => gpu_open = false,
                    },
                    Some(done) = async { match repro_done_rx.as_mut() { Some(r) => r.recv().await, None => std::future::pending().await } } => p.on_repro(done),
                    _ = tick.tick() => {
                        hb.fetch_add(1, Ordering::Relaxed);
                        p.tick();
                        // The tailer counts its checkpoint write failures; mirror them.
                        let failed = tail_stats.checkpoint_write_errors.load(Ordering::Relaxed);
                        let shown = checkpoint_errors.get();
                        if failed > shown {
                            checkpoint_errors.inc_by(failed - shown);
                        }
                        // A hardware- or driver-blamed Xid: check the GPU directly (at most every
                        // 10 minutes per GPU), off the runtime's threads.
                        for idx in std::mem::take(&mut p.probe_requests) {
                            if last_probe.get(&idx).is_some_and(|t| t.elapsed() < Duration::from_secs(600)) {
                                continue;
                            }
                            last_probe.insert(idx, tokio::time::Instant::now());
                            let probes = probes.clone();
                            tokio::task::spawn_blocking(move || {
                                let t = std::time::Instant::now();
                                match assertwatch_gpu::probe::probe(idx, Duration::from_secs(60)) {
                                    Ok(r) => {
                                        tracing::info!(gpu = idx, ok = r.ok, error = ?r.error, "GPU health probe after an Xid.");
                                        probes.record(&r);
                                    }
                                    Err(e) => {
                                        tracing::warn!(gpu = idx, error = %e, "GPU health probe could not run.");
                                        probes.record_failure(idx, t.elapsed());
                                    }
                                }
                            });
                        }
                        if last_prune.elapsed() > Duration::from_secs(60) {
                            p.prune(retention.max_age, retention.max_count, retention.max_store_bytes);
                            last_prune = tokio::time::Instant::now();
                        }
                        if last_kck.elapsed() >= checkpoint_every {
                            save_kernel_checkpoint(&state_dir, &p);
                            last_kck = tokio::time::Instant::now();
                        }
                    }
                }
            }
            p.finish();
            save_kernel_checkpoint(&state_dir, &p);
        })
    };

    // The API and page carry incident excerpts (user data): on a non-loopback address they are
    // served only behind basic auth, or when explicitly exposed.
    let authenticated = match &web_config {
        Some(w) => assertwatch_web::load_web_config(w)
            .map(|c| !c.basic_auth_users.is_empty())
            .unwrap_or(false),
        None => false,
    };
    let api_open = cfg.listen.ip().is_loopback() || authenticated || cfg.expose_api;
    if !api_open {
        tracing::info!(listen = %cfg.listen, "The incidents API and page are off on this non-loopback address (no basic auth configured); /metrics and health endpoints are served.");
    }
    let http_state = HttpState {
        api_open,
        metrics: metrics.clone(),
        store: store.clone(),
        readiness: readiness.clone(),
        node: cfg.node_name.clone(),
        gpu_summary: {
            let snap = gpu_snapshot.clone();
            Arc::new(move || {
                let s = snap.borrow().clone();
                s.gpus
                    .iter()
                    .map(|g| http::GpuRow {
                        index: g.id.index,
                        name: g.info.name.clone().unwrap_or_default(),
                        uuid: g.id.uuid.clone(),
                        status: if g.lost { "lost".into() } else { "ok".into() },
                    })
                    .collect()
            })
        },
    };
    let http_stop = shutdown.clone();
    let http_task = tokio::spawn(async move {
        let app = http::router(http_state);
        // Plain HTTP without a web config; TLS, client certificates and basic auth (with
        // /metrics, /healthz and /readyz exempt by default) with one. See docs/security.md.
        let stop = async move { http_stop.cancelled().await };
        if let Err(e) = assertwatch_web::serve(listener, app, web_config, stop).await {
            tracing::error!(error = %format!("{e:#}"), "The HTTP listener failed.");
        }
    });
    drop(latch);
    metrics.up.set(1);
    if let Some(user) = &cfg.run_as {
        // Everything that needs root is open now (the listener, the kernel log once its source is
        // ready); give the state dir to the user and drop to it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !readiness.is_ready() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        crate::privilege::drop_to(user, &cfg.state_dir).context("dropping privileges (run_as)")?;
        tracing::info!(user = %user.name, uid = user.uid, gid = user.gid, "Dropped privileges.");
    }
    tracing::info!(listen = %cfg.listen, state_dir = %cfg.state_dir.display(), logs = cfg.logs.len(), kernel_log = cfg.kernel_log.is_some(), node = %cfg.node_name, "assertwatch started.");

    // systemd: READY=1 once every source has started, then watchdog pings while the pipeline lives.
    {
        let readiness = readiness.clone();
        let hb = heartbeat.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            while !readiness.is_ready() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            sd_notify("READY=1");
            let Some(every) = watchdog_interval() else {
                return;
            };
            let mut last = u64::MAX;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every / 2) => {}
                }
                let now = hb.load(Ordering::Relaxed);
                if now != last {
                    sd_notify("WATCHDOG=1");
                    last = now;
                }
            }
        });
    }

    let exit = wait_for_signal(config_path.as_deref(), &metrics).await;
    sd_notify(match exit {
        Exit::Reload => "RELOADING=1",
        Exit::Stopped => "STOPPING=1",
    });
    tracing::info!("Draining: stopping sources, flushing incidents and checkpoints.");
    let _ = drain_tx.send(());
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        let _ = pipeline_task.await;
        // Only now do the sources stop: their final checkpoint includes the last acknowledgements.
        sources_stop.cancel();
        let _ = tail_task.await;
    })
    .await;
    sources_stop.cancel();
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(1), http_task).await;
    let _ = tokio::task::spawn_blocking(move || gpu_stop.stop(Duration::from_secs(1))).await;
    if let (Some(h), Some(t)) = (notifier, notifier_task) {
        h.shutdown();
        let _ = tokio::time::timeout(Duration::from_secs(6), t).await;
    }
    if let Some(t) = kernel_thread {
        // The reader notices the token within ~100 ms.
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    match drained {
        Ok(()) => tracing::info!("Shutdown completed."),
        Err(_) => {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "Drain did not finish in time; exiting anyway (unacknowledged data is re-read on the next start).")
        }
    }
    Ok(exit)
}

fn save_kernel_checkpoint(state_dir: &Path, p: &Pipeline) {
    if let Some(ck) = &p.kernel_checkpoint_to_save() {
        if let Ok(bytes) = serde_json::to_vec(ck) {
            if let Err(e) =
                crate::fsutil::atomic_write(&kreader::checkpoint_path(state_dir), &bytes)
            {
                tracing::debug!(error = %e, "Kernel log checkpoint write failed.");
            }
        }
    }
}

/// Waits for SIGTERM/SIGINT (stop) or a valid reload (SIGHUP or config file change).
async fn wait_for_signal(path: Option<&Path>, metrics: &Metrics) -> Exit {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    let mut last_mtime = path.and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    let mut poll = tokio::time::interval(Duration::from_secs(2));
    loop {
        let mut want_reload = false;
        tokio::select! {
            _ = async { if let Some(s) = term.as_mut() { s.recv().await } else { std::future::pending().await } } => return Exit::Stopped,
            _ = async { if let Some(s) = int.as_mut() { s.recv().await } else { std::future::pending().await } } => return Exit::Stopped,
            _ = async { if let Some(s) = hup.as_mut() { s.recv().await } else { std::future::pending().await } } => want_reload = true,
            _ = poll.tick() => {
                if let Some(p) = path {
                    let m = std::fs::metadata(p).and_then(|m| m.modified()).ok();
                    if m.is_some() && m != last_mtime {
                        last_mtime = m;
                        want_reload = true;
                    }
                }
            }
        }
        if !want_reload {
            continue;
        }
        let Some(p) = path else {
            tracing::info!("Reload requested, but the daemon runs on the embedded default configuration; nothing to reload.");
            continue;
        };
        match config::load(p) {
            Ok(_) => {
                metrics.config_reloads.with_label_values(&["success"]).inc();
                tracing::info!(config = %p.display(), "Configuration changed and is valid; reloading.");
                return Exit::Reload;
            }
            Err(e) => {
                metrics.config_reloads.with_label_values(&["failure"]).inc();
                metrics.config_reload_ok.set(0);
                tracing::error!(config = %p.display(), error = %e, "The new configuration is invalid; keeping the running one.");
            }
        }
    }
}
