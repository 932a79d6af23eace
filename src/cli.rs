//! Command-line definitions and dispatch. Each subcommand's work lives in its own module; this
//! file parses arguments, maps results to exit codes and nothing else.

use crate::config;
use crate::detect::{sxid as sxid_catalog, xid_catalog, DetectorSet};
use crate::scan::{self, OutputFormat, ScanOptions, StreamHint};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status for a bad configuration or bad usage.
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "assertwatch",
    version,
    about = "Explains CUDA device-side asserts and NVIDIA Xid errors on GPU nodes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the node daemon (embedded default configuration without --config).
    Run {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
        /// TLS and basic-auth settings in the Prometheus exporter-toolkit format
        /// (see docs/security.md).
        #[arg(long = "web.config.file", value_name = "FILE")]
        web_config: Option<PathBuf>,
    },
    /// Validate a configuration file; prints every problem, exit 2 if there is one.
    CheckConfig { file: PathBuf },
    /// GPU health of this node as the daemon last saw it (for Slurm's HealthCheckProgram and
    /// node health checks): exit 0 when every GPU is healthy, 1 with a one-line reason otherwise.
    Health {
        /// The daemon's configuration (for its state_dir); the embedded default without it.
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = HealthFormat::Text)]
        format: HealthFormat,
    },
    /// One-shot detection over files or stdin (`-`), one record per incident.
    Scan {
        #[arg(long, value_enum, default_value_t = StreamArg::Auto)]
        stream: StreamArg,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
        /// Use the detection settings and rules of this configuration.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Cut lines longer than this many bytes (default from config, else 1 MiB).
        #[arg(long)]
        max_line_bytes: Option<usize>,
        /// Files to scan; `-` reads stdin.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Check a GPU directly through the CUDA driver: context, copy, a kernel with a known answer.
    /// Exit 0 healthy, 1 failed, 3 no CUDA driver.
    Probe {
        /// CUDA device number (the daemon probes by NVML index under CUDA_DEVICE_ORDER=PCI_BUS_ID).
        #[arg(long, default_value_t = 0)]
        gpu: u32,
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
    },
    /// Replay one saved step by hand, through the same runner the daemon uses, and print the result.
    Replay {
        #[arg(long)]
        manifest: PathBuf,
        #[arg(long, value_enum, default_value_t = ModeArg::Cpu)]
        mode: ModeArg,
        /// Take limits, timeout and interpreter from this configuration's `repro:` section.
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
    },
    /// Kubernetes: see what the daemon would create.
    Kube {
        #[command(subcommand)]
        command: KubeCommand,
    },
    /// Show NVIDIA's catalog entry for an Xid and what to do about it.
    ExplainXid {
        xid: u32,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
    },
    /// Show what is known about an NVSwitch SXid and what to do about it.
    ExplainSxid {
        sxid: u32,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum HealthFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum KubeCommand {
    /// Print the Pod that would replay a recorded step of a failing pod's container, or exit 2
    /// naming why it would be refused. Dropped privileges are listed on stderr.
    ReplayPod {
        /// The failing Pod as the API returns it (JSON or YAML, with status); `-` reads stdin.
        #[arg(long)]
        pod: PathBuf,
        #[arg(long)]
        container: String,
        /// The step's manifest.json as the job saw it (inside the container).
        #[arg(long, conflicts_with_all = ["debug_state", "rank"])]
        manifest_path: Option<PathBuf>,
        /// Instead of a manifest: the recorder's root directory as the job saw it; the harness
        /// replays the newest complete step this pod recorded there. Without either option,
        /// the pod's `assertwatch.io/debug-state` annotation names the directory.
        #[arg(long)]
        debug_state: Option<PathBuf>,
        /// With a debug-state directory: the rank whose step to replay.
        #[arg(long)]
        rank: Option<u64>,
        #[arg(long, value_enum)]
        mode: ModeArg,
        /// Pin to this node instead of the pod's spec.nodeName.
        #[arg(long)]
        node: Option<String>,
        /// The replay pod's activeDeadlineSeconds (default from config, else 10m).
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<std::time::Duration>,
        #[arg(long, value_enum, default_value_t = PodFormat::Yaml)]
        format: PodFormat,
        /// Take the namespace allow-list and sizes from this configuration's `repro.kubernetes`
        /// (without it every namespace is allowed: this command only prints).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Incident id: labels and names the pod.
        #[arg(long)]
        incident: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PodFormat {
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StreamArg {
    Auto,
    TrainingLog,
    KernelLog,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    SyncGpu,
    Cpu,
    Sanitizer,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Text,
    Jsonl,
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run {
            config,
            log_format,
            web_config,
        } => cmd_run(config, log_format, web_config),
        Command::CheckConfig { file } => match config::load(&file) {
            Ok(_) => {
                println!("{}: OK", file.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                print_config_error(&e);
                ExitCode::from(EXIT_USAGE)
            }
        },
        Command::Scan {
            stream,
            format,
            config,
            max_line_bytes,
            files,
        } => cmd_scan(stream, format, config, max_line_bytes, &files),
        Command::ExplainXid { xid, format } => cmd_explain(xid, format),
        Command::Health { config, format } => cmd_health(config, format),
        Command::ExplainSxid { sxid, format } => cmd_explain_sxid(sxid, format),
        Command::Kube {
            command:
                KubeCommand::ReplayPod {
                    pod,
                    container,
                    manifest_path,
                    debug_state,
                    rank,
                    mode,
                    node,
                    timeout,
                    format,
                    config,
                    incident,
                },
        } => cmd_kube_replay_pod(KubeReplayPodArgs {
            pod,
            container,
            manifest_path,
            debug_state,
            rank,
            mode: mode.into(),
            node,
            timeout,
            format,
            config,
            incident,
        }),
        Command::Probe {
            gpu,
            timeout,
            format,
        } => cmd_probe(gpu, timeout, format),
        Command::Replay {
            manifest,
            mode,
            config,
            format,
        } => cmd_replay(&manifest, mode, config, format),
    }
}

/// `assertwatch run`: validates the configuration (exit 2 naming every bad field), then runs.
fn cmd_run(
    config_path: Option<PathBuf>,
    log_format: LogFormat,
    web_config: Option<PathBuf>,
) -> ExitCode {
    crate::logging::init(log_format == LogFormat::Json);
    let cfg = match load_or_default(config_path.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(w) = &web_config {
        if let Err(e) = assertwatch_web::validate_web_config_file(w) {
            eprintln!("assertwatch: invalid web config: {e:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    crate::app::main(
        cfg,
        crate::app::RunOptions {
            config_path,
            web_config,
            ..Default::default()
        },
    )
}

/// `assertwatch health`: reads the saved GPU health under the configured state_dir.
fn cmd_health(config_path: Option<PathBuf>, format: HealthFormat) -> ExitCode {
    let cfg = match load_or_default(config_path.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let v = crate::health::check::check(&cfg.state_dir);
    match format {
        HealthFormat::Text => println!("{}", v.reason),
        HealthFormat::Json => match serde_json::to_string(&v) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("assertwatch: {e}");
                return ExitCode::from(1);
            }
        },
    }
    if v.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The configuration at `path`, or the embedded default; a bad one is printed (every issue)
/// and becomes exit status 2.
fn load_or_default(path: Option<&std::path::Path>) -> Result<config::Config, ExitCode> {
    let cfg = match path {
        Some(p) => config::load(p),
        None => config::default_config(),
    };
    cfg.map_err(|e| {
        print_config_error(&e);
        ExitCode::from(EXIT_USAGE)
    })
}

/// Prints each configuration issue on its own line.
pub fn print_config_error(e: &config::ConfigError) {
    let src = e.source_name.as_deref().unwrap_or("configuration");
    eprintln!("assertwatch: invalid configuration in {src}:");
    for i in &e.issues {
        eprintln!("  {i}");
    }
}

fn cmd_scan(
    stream: StreamArg,
    format: FormatArg,
    cfg: Option<PathBuf>,
    max_line: Option<usize>,
    files: &[String],
) -> ExitCode {
    let (det, engine, cfg_max) = match cfg {
        Some(p) => match config::load(&p) {
            Ok(c) => {
                let det = match DetectorSet::new(c.rules.clone(), c.detect_options()) {
                    Ok(d) => d,
                    Err(e) => {
                        eprintln!("assertwatch: {e:#}");
                        return ExitCode::from(EXIT_USAGE);
                    }
                };
                (det, c.engine.clone(), c.max_line_bytes)
            }
            Err(e) => {
                print_config_error(&e);
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => (
            DetectorSet::builtin(),
            crate::incidents::EngineConfig::default(),
            assertwatch_tail::DEFAULT_MAX_LINE_BYTES,
        ),
    };
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let opts = ScanOptions {
        stream: match stream {
            StreamArg::Auto => StreamHint::Auto,
            StreamArg::TrainingLog => StreamHint::TrainingLog,
            StreamArg::KernelLog => StreamHint::KernelLog,
        },
        output: match format {
            FormatArg::Text => OutputFormat::Text { color },
            FormatArg::Jsonl => OutputFormat::Jsonl,
        },
        max_line_bytes: max_line.unwrap_or(cfg_max).max(64),
        engine,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let result = scan::run(files, &det, &opts, &mut out).and_then(|s| {
        out.flush()?;
        Ok(s)
    });
    match result {
        Ok(s) => {
            if s.stats.truncated_lines > 0 || s.stats.malformed_lines > 0 {
                eprintln!(
                    "assertwatch: {} lines cut at {} bytes, {} lines not in the detected format (read as plain text)",
                    s.stats.truncated_lines, opts.max_line_bytes, s.stats.malformed_lines
                );
            }
            if s.unreadable > 0 {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            }
        }
        // `scan … | head` closes the pipe early; that is success, not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("assertwatch: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn cmd_explain(xid: u32, format: FormatArg) -> ExitCode {
    let entry = xid_catalog::lookup(xid);
    let value = serde_json::json!({
        "xid": xid,
        "in_catalog": entry.is_some(),
        "name": entry.map(|e| e.short_name.as_str()),
        "description": entry.map(|e| e.description.as_str()),
        "typical_cause": entry.map(|e| e.typical_cause.as_str()),
        "recommended_action": entry.map(|e| e.recommended_action.as_str()),
        "category": xid_catalog::category(xid),
        "blame": xid_catalog::blame(xid).as_str(),
        "needs_drain": xid_catalog::needs_drain(xid),
        "action": entry.map(|e| e.action.as_str()),
        "out_of_service": entry.map(|e| match e.out_of_service {
            Some(true) => "yes",
            Some(false) => "no",
            None => "decided by the line",
        }),
        "decision": entry.map(|e| e.decision.as_str()),
        "hint": xid_catalog::hint(xid),
        "source": entry.map(|e| e.source_url.as_str()),
    });
    match format {
        FormatArg::Jsonl => println!("{value}"),
        FormatArg::Text => match entry {
            Some(e) => {
                println!("Xid {xid}: {}", e.short_name);
                println!("  description:        {}", e.description);
                println!("  typical cause:      {}", e.typical_cause);
                println!("  NVIDIA's action:    {}", e.recommended_action);
                println!("  blame:              {}", xid_catalog::blame(xid));
                println!(
                    "  drain the GPU:      {}",
                    match e.out_of_service {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "decided by each line (see the incident's hint)",
                    }
                );
                println!(
                    "  action:             {} ({})",
                    e.action.as_str(),
                    e.decision
                );
                println!("  what to do:         {}", xid_catalog::hint(xid));
                println!("  source:             {}", e.source_url);
            }
            None => {
                println!("Xid {xid} is not in NVIDIA's Xid catalog (it lists 1-173 as of the catalog built into this binary).");
                println!("  what to do:         {}", xid_catalog::hint(xid));
            }
        },
    }
    ExitCode::SUCCESS
}

fn cmd_explain_sxid(sxid: u32, format: FormatArg) -> ExitCode {
    let entry = sxid_catalog::lookup(sxid);
    let action = sxid_catalog::decide(sxid, None);
    let value = serde_json::json!({
        "sxid": sxid,
        "in_catalog": entry.is_some(),
        "mnemonic": entry.map(|e| e.mnemonic.as_str()),
        "name": entry.map(|e| e.name.as_str()),
        "fm_class": entry.map(|e| e.class.as_str()),
        "action": action.as_str(),
        "category": sxid_catalog::category(sxid),
        "blame": "hardware",
        "needs_drain": sxid_catalog::needs_drain(sxid),
        "hint": sxid_catalog::hint(sxid, None),
        "source": entry.map(|e| e.source.as_str()),
    });
    match format {
        FormatArg::Jsonl => println!("{value}"),
        FormatArg::Text => match entry {
            Some(e) => {
                println!("SXid {sxid}: {} ({})", e.name, e.mnemonic);
                println!("  Fabric Manager class: {}", e.class.as_str());
                println!("  action:               {}", action.as_str());
                println!(
                    "  drain the node:       {}",
                    match action {
                        sxid_catalog::SxidAction::FromLine => "if the line says Fatal",
                        a if a.takes_out_of_service() => "yes",
                        _ => "no",
                    }
                );
                println!("  blame:                hardware");
                println!("  what to do:           {}", sxid_catalog::hint(sxid, None));
                println!("  source:               {}", e.source);
            }
            None => {
                println!("SXid {sxid} is not defined by the NVSwitch driver this catalog was built from.");
                println!("  what to do:           {}", sxid_catalog::hint(sxid, None));
            }
        },
    }
    ExitCode::SUCCESS
}

/// Exit status of `probe` when no CUDA driver can be loaded.
pub const EXIT_NO_DRIVER: u8 = 3;

fn cmd_probe(gpu: u32, timeout: std::time::Duration, format: FormatArg) -> ExitCode {
    use assertwatch_gpu::{probe, ProbeError};
    match probe::probe(gpu, timeout) {
        Ok(r) => {
            let phases: Vec<serde_json::Value> = r
                .phases
                .iter()
                .map(
                    |p| serde_json::json!({ "phase": p.name, "seconds": p.duration.as_secs_f64() }),
                )
                .collect();
            match format {
                FormatArg::Jsonl => println!(
                    "{}",
                    serde_json::json!({
                        "gpu": r.gpu, "name": r.name, "uuid": r.uuid, "pci_bus_id": r.pci_bus_id,
                        "ok": r.ok, "duration_seconds": r.duration.as_secs_f64(),
                        "mismatches": r.mismatches, "error": r.error, "phases": phases,
                    })
                ),
                FormatArg::Text => {
                    println!(
                        "GPU {gpu}: {} — {} in {:.1} ms",
                        r.name.as_deref().unwrap_or("unknown"),
                        if r.ok { "healthy" } else { "FAILED" },
                        r.duration.as_secs_f64() * 1e3
                    );
                    for p in &r.phases {
                        println!(
                            "  {:<12} {:>9.3} ms",
                            p.name,
                            p.duration.as_secs_f64() * 1e3
                        );
                    }
                    if let Some(e) = &r.error {
                        println!("  error: {e}");
                    }
                }
            }
            if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(ProbeError::NoDriver { reason }) => {
            eprintln!("assertwatch: no CUDA driver: {reason}");
            ExitCode::from(EXIT_NO_DRIVER)
        }
        Err(e) => {
            eprintln!("assertwatch: probe of GPU {gpu} failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn cmd_replay(
    manifest: &std::path::Path,
    mode: ModeArg,
    cfg: Option<PathBuf>,
    format: FormatArg,
) -> ExitCode {
    let cfg = match cfg
        .as_deref()
        .map(config::load)
        .unwrap_or_else(config::default_config)
    {
        Ok(c) => c,
        Err(e) => {
            print_config_error(&e);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut repro = cfg.repro.clone();
    repro.enabled = true;
    let metrics = match assertwatch_repro::Metrics::new(&prometheus::Registry::new()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("assertwatch: {e}");
            return ExitCode::from(1);
        }
    };
    let runner = crate::actions::repro::runner(
        &repro,
        &cfg.state_dir,
        metrics,
        assertwatch_gpu::ProbeMetrics::default(),
        None,
    );
    let mode = match mode {
        ModeArg::SyncGpu => assertwatch_repro::Mode::SyncGpu,
        ModeArg::Cpu => assertwatch_repro::Mode::Cpu,
        ModeArg::Sanitizer => assertwatch_repro::Mode::Sanitizer,
    };
    let r = runner.replay_manifest(manifest, mode);
    let value = serde_json::to_value(&r).unwrap_or_default();
    match format {
        FormatArg::Jsonl => println!("{value}"),
        FormatArg::Text => {
            println!("outcome:    {}", value["outcome"].as_str().unwrap_or("?"));
            if let Some(reason) = value["reason"].as_str() {
                println!("reason:     {reason}");
            }
            if let Some(f) = &r.python_frame {
                println!("failing at: {f}");
            }
            if let Some(e) = value.get("exception").filter(|e| !e.is_null()) {
                println!(
                    "exception:  {}: {}",
                    e["type"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                );
            }
            if let Some(k) = value.get("kernel_assertion").filter(|k| !k.is_null()) {
                println!("kernel:     {k}");
            }
            println!("duration:   {:.1} s", r.duration.as_secs_f64());
        }
    }
    match value["outcome"].as_str() {
        Some("harness_error") => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

impl From<ModeArg> for assertwatch_repro::Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::SyncGpu => assertwatch_repro::Mode::SyncGpu,
            ModeArg::Cpu => assertwatch_repro::Mode::Cpu,
            ModeArg::Sanitizer => assertwatch_repro::Mode::Sanitizer,
        }
    }
}

struct KubeReplayPodArgs {
    pod: PathBuf,
    container: String,
    manifest_path: Option<PathBuf>,
    debug_state: Option<PathBuf>,
    rank: Option<u64>,
    mode: assertwatch_repro::Mode,
    node: Option<String>,
    timeout: Option<std::time::Duration>,
    format: PodFormat,
    config: Option<PathBuf>,
    incident: Option<String>,
}

/// `assertwatch kube replay-pod`: the replay pod the daemon would create, exit 2 on a refusal.
fn cmd_kube_replay_pod(a: KubeReplayPodArgs) -> ExitCode {
    use std::io::Read;
    let mut opts = match &a.config {
        Some(p) => match config::load(p) {
            Ok(c) => c.repro.kubernetes.replay_options(),
            Err(e) => {
                print_config_error(&e);
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => assertwatch_kube::ReplayPodOptions {
            namespaces: vec!["*".to_owned()],
            ..Default::default()
        },
    };
    opts.node = a.node;
    opts.incident_id = a.incident;
    if let Some(t) = a.timeout {
        opts.deadline = t;
    }
    let text = if a.pod.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(&a.pod)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("assertwatch: cannot read {}: {e}", a.pod.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let failing = match assertwatch_kube::parse_pod(&text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("assertwatch: refused (bad_input): {}: {e}", a.pod.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let step = match (a.manifest_path, a.debug_state) {
        (Some(m), _) => assertwatch_kube::StepRef::Manifest(m),
        (None, dir) => {
            let Some(dir) =
                dir.or_else(|| assertwatch_kube::replay_pod::annotated_debug_state(&failing))
            else {
                eprintln!(
                    "assertwatch: refused (bad_input): give --manifest-path or --debug-state; the pod has no {} annotation",
                    assertwatch_kube::replay_pod::ANNOTATION_DEBUG_STATE
                );
                return ExitCode::from(EXIT_USAGE);
            };
            assertwatch_kube::StepRef::Under {
                dir,
                rank: a.rank,
                before: None,
            }
        }
    };
    let replay =
        match assertwatch_kube::replay_pod_for(&failing, &a.container, &step, a.mode, &opts) {
            Ok(p) => p,
            Err(r) => {
                eprintln!("assertwatch: refused ({}): {r}", r.reason());
                return ExitCode::from(EXIT_USAGE);
            }
        };
    let dropped = assertwatch_kube::replay_pod::dropped_privileges(&replay);
    if !dropped.is_empty() {
        eprintln!(
            "assertwatch: not carried into the replay (the failing pod had them): {}",
            dropped.join(", ")
        );
    }
    let out = match a.format {
        PodFormat::Json => serde_json::to_string_pretty(&replay)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        PodFormat::Yaml => serde_yaml::to_string(&replay).map_err(|e| e.to_string()),
    };
    match out {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("assertwatch: cannot write the pod: {e}");
            ExitCode::from(1)
        }
    }
}
