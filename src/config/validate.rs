//! `RawConfig` → `Config`: every semantic check, all issues gathered before failing.
//!
//! Messages name the field, the value and what would be accepted, e.g.
//! `incidents.quiet_period (line 12): "5" is not a duration; write it like "30s" or "5m"`.

use super::raw::*;
use super::*;
use crate::detect::{required_literals, UserRule};
use crate::model::{Blame, Kind};
use assertwatch_alertmanager as am;
use assertwatch_repro::runner as repro_defaults;
use assertwatch_repro::Mode;
use assertwatch_tail as tail;

struct Issues<'t> {
    text: &'t str,
    list: Vec<ConfigIssue>,
}

impl Issues<'_> {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let path = path.into();
        let line = locate(self.text, &path);
        self.list.push(ConfigIssue {
            path,
            line,
            message: message.into(),
        });
    }
}

/// Finds the YAML line of a field path like `logs[1].format` by walking the text in order.
/// A heuristic (YAML has no spans in serde), good for the block style configs are written in.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    let mut segs: Vec<(String, Option<usize>)> = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((k, rest)) => segs.push((k.to_owned(), rest.trim_end_matches(']').parse().ok())),
            None => segs.push((part.to_owned(), None)),
        }
    }
    // Count line breaks the way the YAML parser does (CR LF, LF, or a bare CR), so both agree.
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = normalized.lines().collect();
    let mut i = 0usize;
    let mut min_indent = 0usize;
    let mut found = None;
    for (key, idx) in segs {
        let mut hit = None;
        while i < lines.len() {
            let l = lines[i];
            let indent = l.len() - l.trim_start().len();
            let t = l.trim_start().trim_start_matches("- ");
            if indent >= min_indent && (t.starts_with(&format!("{key}:")) || t == key) {
                hit = Some(i);
                break;
            }
            i += 1;
        }
        let h = hit?;
        found = Some(h + 1);
        let indent = lines[h].len() - lines[h].trim_start().len();
        min_indent = indent + 1;
        i = h + 1;
        if let Some(n) = idx {
            // Skip to the n-th list item below the key.
            let mut count = 0usize;
            let mut item = None;
            while i < lines.len() {
                let l = lines[i];
                let ind = l.len() - l.trim_start().len();
                if !l.trim().is_empty() && ind < min_indent && !l.trim_start().starts_with('-') {
                    break;
                }
                if l.trim_start().starts_with("- ") || l.trim() == "-" {
                    if count == n {
                        item = Some(i);
                        break;
                    }
                    count += 1;
                }
                i += 1;
            }
            let it = item?;
            found = Some(it + 1);
            min_indent = lines[it].len() - lines[it].trim_start().len();
            // Keys of the item may sit on the dash line itself.
            i = it;
        }
    }
    found
}

/// Parses `10s`, `5m`, `1h30m`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|_| format!("{s:?} is not a duration; write it like \"30s\", \"5m\" or \"250ms\""))
}

/// Parses a byte size: a plain integer or `64KiB`, `1MiB`, `1GiB`, `1MB`.
pub fn parse_size(v: &serde_yaml::Value) -> Result<usize, String> {
    if let Some(n) = v.as_u64() {
        return usize::try_from(n).map_err(|_| format!("{n} is too large"));
    }
    let Some(s) = v.as_str() else {
        return Err("expected a size such as 1048576 or \"1MiB\"".into());
    };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size; write it like \"1MiB\" or 1048576"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "KB" | "K" | "kB" => 1_000,
        "MB" | "M" => 1_000_000,
        "GB" | "G" => 1_000_000_000,
        u => {
            return Err(format!(
                "{s:?} has an unknown unit {u:?}; use B, KiB, MiB, GiB, KB, MB or GB"
            ))
        }
    };
    n.checked_mul(mult)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn dur(iss: &mut Issues<'_>, path: &str, v: &Option<String>, default: Duration) -> Duration {
    match v {
        None => default,
        Some(s) => match parse_duration(s) {
            Ok(d) => d,
            Err(m) => {
                iss.add(path, m);
                default
            }
        },
    }
}

/// Resolves `p` against the config file's directory, then the working directory, so every path
/// the daemon hands on (to the tailer, the store, replay children with another working
/// directory) is absolute.
fn resolve(base: &Path, p: &str) -> PathBuf {
    let pb = PathBuf::from(p);
    let joined = if pb.is_absolute() || base.as_os_str().is_empty() {
        pb
    } else {
        base.join(pb)
    };
    if joined.is_absolute() {
        return joined;
    }
    let abs = std::env::current_dir()
        .map(|d| d.join(&joined))
        .unwrap_or(joined);
    // Drop `.` components so paths read cleanly in the API and logs.
    abs.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

fn resolve_glob(base: &Path, p: &str) -> String {
    resolve(base, p).to_string_lossy().into_owned()
}

fn valid_snake(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && s.as_bytes()[0].is_ascii_lowercase()
}

/// Resolves `name` or `uid:gid` to numeric ids (names through the system user database).
fn resolve_user(spec: &str) -> Result<RunAs, String> {
    if let Some((u, g)) = spec.split_once(':') {
        let uid = u
            .parse()
            .map_err(|_| format!("{spec:?}: write a user name or uid:gid"))?;
        let gid = g
            .parse()
            .map_err(|_| format!("{spec:?}: write a user name or uid:gid"))?;
        return Ok(RunAs {
            uid,
            gid,
            name: spec.to_owned(),
        });
    }
    // getpwnam_r through nix: reentrant, so a reload validating the file while other threads
    // run is safe too.
    match nix::unistd::User::from_name(spec) {
        Ok(Some(u)) => Ok(RunAs {
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            name: spec.to_owned(),
        }),
        Ok(None) => Err(format!("no user {spec:?} on this system")),
        Err(e) => Err(format!("{spec:?}: cannot read the user database: {e}")),
    }
}

pub fn validate(raw: RawConfig, text: &str, base: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let mut iss = Issues {
        text,
        list: Vec::new(),
    };

    let listen = match raw.listen {
        None => DEFAULT_LISTEN,
        Some(listen_s) => match listen_s.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => {
                iss.add("listen", format!("{listen_s:?} is not an address; write it like \"127.0.0.1:9949\" or \"0.0.0.0:9949\""));
                DEFAULT_LISTEN
            }
        },
    };
    let state_dir = resolve(base, raw.state_dir.as_deref().unwrap_or(DEFAULT_STATE_DIR));
    let node_name = raw
        .node_name
        .or_else(|| std::env::var("NODE_NAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());

    let mut logs = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, l) in raw.logs.into_iter().enumerate() {
        let p = format!("logs[{i}]");
        let name = l.name.unwrap_or_default();
        if !valid_snake(&name.replace('-', "_")) {
            iss.add(format!("{p}.name"), format!("{name:?} must be a short name of lowercase letters, digits, '-' or '_' (it becomes the `source` metric label)"));
        } else if !names.insert(name.clone()) {
            iss.add(
                format!("{p}.name"),
                format!("{name:?} is used by another log source"),
            );
        }
        if l.paths.is_empty() {
            iss.add(
                format!("{p}.paths"),
                "at least one path or glob is required",
            );
        }
        for (j, g) in l.paths.iter().chain(l.exclude.iter()).enumerate() {
            if let Err(e) = glob::Pattern::new(g) {
                iss.add(
                    format!("{p}.paths[{j}]"),
                    format!("{g:?} is not a valid glob: {e}"),
                );
            }
        }
        let format = match l.format.as_deref() {
            None => Format::Auto,
            Some(f) => match Format::parse(f) {
                Some(Format::Kmsg) | None => {
                    iss.add(
                        format!("{p}.format"),
                        format!("{f:?} is not a log format; use auto, plain, cri or docker-json"),
                    );
                    Format::Auto
                }
                Some(x) => x,
            },
        };
        logs.push(LogSource {
            name,
            paths: l.paths.iter().map(|g| resolve_glob(base, g)).collect(),
            exclude: l.exclude.iter().map(|g| resolve_glob(base, g)).collect(),
            format,
            max_incidents_per_minute: l.max_incidents_per_minute,
        });
    }

    let kernel_log = match raw.kernel_log {
        None => None,
        Some(k) => match k.path {
            None => {
                iss.add("kernel_log.path", "a path is required (\"/dev/kmsg\" or a file like /var/log/kern.log); omit kernel_log to disable it");
                None
            }
            Some(path) => Some(KernelLogConfig {
                path: resolve(base, &path),
                lookback: k
                    .lookback
                    .as_ref()
                    .map(|_| dur(&mut iss, "kernel_log.lookback", &k.lookback, Duration::ZERO)),
            }),
        },
    };

    let g = raw.gpu.unwrap_or(RawGpu {
        backend: None,
        fake_file: None,
        poll_interval: None,
    });
    let backend = match g.backend.as_deref().unwrap_or("nvml") {
        "nvml" => GpuBackendKind::Nvml,
        "fake" => GpuBackendKind::Fake,
        "none" => GpuBackendKind::None,
        other => {
            iss.add(
                "gpu.backend",
                format!("{other:?} is not a GPU backend; use nvml, fake or none"),
            );
            GpuBackendKind::None
        }
    };
    let gpu_defaults = assertwatch_gpu::GpuConfig::default();
    let fake_file = match g.fake_file.as_deref() {
        Some(f) => resolve(base, f),
        None => resolve(base, &gpu_defaults.fake_file.to_string_lossy()),
    };
    let poll_interval = dur(
        &mut iss,
        "gpu.poll_interval",
        &g.poll_interval,
        gpu_defaults.poll_interval,
    );
    if poll_interval < MIN_GPU_POLL_INTERVAL {
        iss.add(
            "gpu.poll_interval",
            format!(
                "must be at least {}",
                humantime::format_duration(MIN_GPU_POLL_INTERVAL)
            ),
        );
    }

    let r = raw.repro.unwrap_or(RawRepro {
        enabled: None,
        roots: Vec::new(),
        modes: Vec::new(),
        timeout: None,
        max_per_hour: None,
        max_concurrent: None,
        python: None,
        allow_root_jobs: None,
        kubernetes: None,
    });
    let mut kube_problems = Vec::new();
    let kubernetes_cfg =
        super::kubernetes::validate_kubernetes(raw.kubernetes, base, &mut kube_problems);
    let repro_kubernetes = super::kubernetes::validate_repro_kubernetes(
        r.kubernetes,
        kubernetes_cfg.enabled,
        &mut kube_problems,
    );
    for (path, message) in kube_problems {
        iss.add(path, message);
    }
    let modes = if r.modes.is_empty() {
        repro_defaults::DEFAULT_MODES.to_vec()
    } else {
        let mut modes = Vec::with_capacity(r.modes.len());
        for (i, m) in r.modes.iter().enumerate() {
            match m.parse::<Mode>() {
                Ok(m) => modes.push(m),
                Err(e) => iss.add(format!("repro.modes[{i}]"), e),
            }
        }
        modes
    };
    let repro = ReproConfig {
        enabled: r.enabled.unwrap_or(false),
        roots: r.roots.iter().map(|g| resolve_glob(base, g)).collect(),
        modes,
        timeout: dur(
            &mut iss,
            "repro.timeout",
            &r.timeout,
            repro_defaults::DEFAULT_TIMEOUT,
        ),
        max_per_hour: r
            .max_per_hour
            .unwrap_or(repro_defaults::DEFAULT_MAX_PER_HOUR),
        max_concurrent: r
            .max_concurrent
            .unwrap_or(repro_defaults::DEFAULT_MAX_CONCURRENT as u32)
            .max(1),
        python: r.python.as_deref().map(|p| resolve(base, p)),
        allow_root_jobs: r.allow_root_jobs.unwrap_or(false),
        kubernetes: repro_kubernetes,
    };

    let alertmanager = raw.alertmanager.map(|a| {
        let mut urls = a.urls.clone();
        if let Some(u) = &a.url {
            urls.insert(0, u.clone());
        }
        if urls.is_empty() {
            iss.add(
                "alertmanager.url",
                "give url or urls, or omit alertmanager to disable alerts",
            );
        }
        for (i, u) in urls.iter().enumerate() {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                iss.add(
                    format!("alertmanager.urls[{i}]"),
                    format!("{u:?} must start with http:// or https://"),
                );
            }
        }
        let read_secret = |iss: &mut Issues<'_>, field: &str, f: &str| -> String {
            match std::fs::read_to_string(resolve(base, f)) {
                Ok(t) => t.trim_end_matches(['\n', '\r']).to_owned(),
                Err(e) => {
                    iss.add(
                        format!("alertmanager.{field}"),
                        format!("cannot read {f:?}: {e}"),
                    );
                    String::new()
                }
            }
        };
        let auth = match (&a.username, &a.password_file, &a.bearer_token_file) {
            (Some(u), Some(pf), None) => AlertAuth::Basic {
                username: u.clone(),
                password: read_secret(&mut iss, "password_file", pf),
            },
            (None, None, Some(tf)) => AlertAuth::Bearer {
                token: read_secret(&mut iss, "bearer_token_file", tf),
            },
            (None, None, None) => AlertAuth::None,
            (Some(_), None, _) => {
                iss.add(
                    "alertmanager.password_file",
                    "username needs password_file (the password is not written in the config)",
                );
                AlertAuth::None
            }
            _ => {
                iss.add(
                    "alertmanager.bearer_token_file",
                    "use either username/password_file or bearer_token_file, not both",
                );
                AlertAuth::None
            }
        };
        AlertmanagerConfig {
            auth,
            tls_ca_file: a.tls_ca_file.as_deref().map(|f| resolve(base, f)),
            tls_cert_file: a.tls_cert_file.as_deref().map(|f| resolve(base, f)),
            tls_key_file: a.tls_key_file.as_deref().map(|f| resolve(base, f)),
            tls_insecure_skip_verify: a.tls_insecure_skip_verify.unwrap_or(false),
            urls,
            resend_interval: dur(
                &mut iss,
                "alertmanager.resend_interval",
                &a.resend_interval,
                am::DEFAULT_RESEND_INTERVAL,
            ),
            resolve_after: dur(
                &mut iss,
                "alertmanager.resolve_after",
                &a.resolve_after,
                am::DEFAULT_RESOLVE_AFTER,
            ),
            timeout: dur(
                &mut iss,
                "alertmanager.timeout",
                &a.timeout,
                am::DEFAULT_TIMEOUT,
            ),
            queue_capacity: a.queue_capacity.unwrap_or(am::DEFAULT_QUEUE_CAPACITY),
            runbook_base_url: a
                .runbook_base_url
                .unwrap_or_else(|| DEFAULT_RUNBOOK_BASE_URL.into()),
        }
    });

    let mut rules = Vec::new();
    for (i, r) in raw.rules.into_iter().enumerate() {
        let p = format!("rules[{i}]");
        let name = r.name.unwrap_or_default();
        if !valid_snake(&name) {
            iss.add(
                format!("{p}.name"),
                format!("{name:?} must be snake_case (lowercase letters, digits, '_')"),
            );
        }
        let kind = match r.kind.as_deref().map(Kind::parse) {
            Some(Some(k)) => k,
            other => {
                iss.add(format!("{p}.kind"), format!("{:?} is not a kind; use one of device_assert, cuda_error, oom, nccl_error, numeric, xid, sxid", r.kind.as_deref().unwrap_or("")));
                let _ = other;
                Kind::CudaError
            }
        };
        let category = r.category.unwrap_or_else(|| "unknown".into());
        if !valid_snake(&category) {
            iss.add(
                format!("{p}.category"),
                format!("{category:?} must be snake_case"),
            );
        }
        let blame = match Blame::parse(r.blame.as_deref().unwrap_or("unknown")) {
            Some(b) => b,
            None => {
                iss.add(
                    format!("{p}.blame"),
                    "use application, hardware, driver or unknown",
                );
                Blame::Unknown
            }
        };
        let Some(pattern) = r.pattern else {
            iss.add(format!("{p}.pattern"), "a regular expression is required");
            continue;
        };
        let regex = match regex::Regex::new(&pattern) {
            Ok(re) => re,
            Err(e) => {
                iss.add(
                    format!("{p}.pattern"),
                    format!("not a valid regular expression: {e}"),
                );
                continue;
            }
        };
        let literals = if r.contains.is_empty() {
            match required_literals(&pattern) {
                Some(l) => l,
                None => {
                    iss.add(format!("{p}.pattern"), "no literal text of 3+ characters can be derived from this pattern for the fast prefilter; add `contains: [\"...\"]` with text every match contains");
                    continue;
                }
            }
        } else {
            for (j, c) in r.contains.iter().enumerate() {
                if c.len() < 3 {
                    iss.add(
                        format!("{p}.contains[{j}]"),
                        "each literal needs at least 3 characters",
                    );
                }
            }
            r.contains.clone()
        };
        rules.push(UserRule {
            name,
            regex,
            literals,
            kind,
            category,
            blame,
            hint: r.hint.unwrap_or_else(|| {
                "Matched a site rule; see the rule's owner for what to do.".into()
            }),
        });
    }

    let d = raw.detection.unwrap_or(RawDetection {
        max_line_bytes: None,
        min_loss_scale: None,
        follow_lines: None,
    });
    let max_line_bytes = match &d.max_line_bytes {
        None => tail::DEFAULT_MAX_LINE_BYTES,
        Some(v) => match parse_size(v) {
            Ok(n) if (tail::MIN_MAX_LINE_BYTES..=tail::MAX_MAX_LINE_BYTES).contains(&n) => n,
            Ok(n) => {
                iss.add(
                    "detection.max_line_bytes",
                    format!(
                        "{n} is out of range; use {} bytes to {}MiB",
                        tail::MIN_MAX_LINE_BYTES,
                        tail::MAX_MAX_LINE_BYTES >> 20
                    ),
                );
                tail::DEFAULT_MAX_LINE_BYTES
            }
            Err(m) => {
                iss.add("detection.max_line_bytes", m);
                tail::DEFAULT_MAX_LINE_BYTES
            }
        },
    };

    let inc = raw.incidents.unwrap_or(RawIncidents {
        gap_lines: None,
        quiet_period: None,
        xid_window: None,
        correlation_window: None,
        excerpt_lines: None,
        max_age: None,
        max_count: None,
        max_store_bytes: None,
        max_per_minute: None,
    });
    let mut engine = EngineConfig::default();
    engine.gap_lines = inc.gap_lines.unwrap_or(engine.gap_lines);
    engine.quiet_ms = dur(
        &mut iss,
        "incidents.quiet_period",
        &inc.quiet_period,
        Duration::from_millis(engine.quiet_ms),
    )
    .as_millis() as u64;
    engine.xid_window_ms = dur(
        &mut iss,
        "incidents.xid_window",
        &inc.xid_window,
        Duration::from_millis(engine.xid_window_ms),
    )
    .as_millis() as u64;
    if let Some(n) = inc.excerpt_lines {
        if n == 0 || n > MAX_EXCERPT_LINES {
            iss.add(
                "incidents.excerpt_lines",
                format!("use 1 to {MAX_EXCERPT_LINES}"),
            );
        } else {
            engine.excerpt_lines = n;
        }
    }
    let retention = RetentionConfig {
        max_age: dur(&mut iss, "incidents.max_age", &inc.max_age, DEFAULT_MAX_AGE),
        max_count: inc.max_count.unwrap_or(DEFAULT_MAX_COUNT),
        max_store_bytes: match &inc.max_store_bytes {
            None => DEFAULT_MAX_STORE_BYTES,
            Some(v) => parse_size(v).map(|n| n as u64).unwrap_or_else(|m| {
                iss.add("incidents.max_store_bytes", m);
                DEFAULT_MAX_STORE_BYTES
            }),
        },
        max_per_minute: inc
            .max_per_minute
            .unwrap_or(DEFAULT_MAX_INCIDENTS_PER_MINUTE),
        correlation_window: dur(
            &mut iss,
            "incidents.correlation_window",
            &inc.correlation_window,
            DEFAULT_CORRELATION_WINDOW,
        ),
    };

    let t = raw.tailing.unwrap_or(RawTailing {
        rescan_interval: None,
        max_open_files: None,
        checkpoint_interval: None,
        read_bytes_per_pass: None,
        start_at: None,
        poll_interval: None,
    });
    let tailing = TailingConfig {
        rescan_interval: dur(
            &mut iss,
            "tailing.rescan_interval",
            &t.rescan_interval,
            tail::DEFAULT_RESCAN_INTERVAL,
        ),
        max_open_files: t.max_open_files.unwrap_or(tail::DEFAULT_MAX_OPEN_FILES),
        checkpoint_interval: dur(
            &mut iss,
            "tailing.checkpoint_interval",
            &t.checkpoint_interval,
            tail::DEFAULT_CHECKPOINT_INTERVAL,
        ),
        poll_interval: dur(
            &mut iss,
            "tailing.poll_interval",
            &t.poll_interval,
            tail::DEFAULT_POLL_INTERVAL,
        ),
        read_bytes_per_pass: match &t.read_bytes_per_pass {
            None => tail::DEFAULT_READ_BYTES_PER_PASS,
            Some(v) => parse_size(v).unwrap_or_else(|m| {
                iss.add("tailing.read_bytes_per_pass", m);
                tail::DEFAULT_READ_BYTES_PER_PASS
            }),
        },
        start_at_end: match t.start_at.as_deref() {
            None | Some("beginning") => false,
            Some("end") => true,
            Some(o) => {
                iss.add("tailing.start_at", format!("{o:?}: use beginning or end"));
                false
            }
        },
    };
    if tailing.max_open_files == 0 {
        iss.add("tailing.max_open_files", "must be at least 1");
    }

    let max_series_per_family = raw
        .limits
        .and_then(|l| l.max_series_per_family)
        .unwrap_or(DEFAULT_MAX_SERIES_PER_FAMILY);
    if max_series_per_family == 0 {
        iss.add("limits.max_series_per_family", "must be at least 1");
    }
    let run_as = match raw.run_as.as_deref() {
        None => None,
        Some(spec) => match resolve_user(spec) {
            Ok(r) => Some(r),
            Err(m) => {
                iss.add("run_as", m);
                None
            }
        },
    };

    let slurm = super::slurm::validate(raw.slurm, &mut |path, message| iss.add(path, message));
    if !iss.list.is_empty() {
        return Err(iss.list);
    }
    Ok(Config {
        slurm,
        expose_api: raw.http.and_then(|h| h.expose_api).unwrap_or(false),
        max_series_per_family,
        run_as,
        kubernetes: kubernetes_cfg,
        listen,
        state_dir,
        node_name,
        logs,
        kernel_log,
        gpu: GpuConfig {
            backend,
            fake_file,
            poll_interval,
        },
        repro,
        alertmanager,
        rules,
        max_line_bytes,
        min_loss_scale: d.min_loss_scale.unwrap_or(DEFAULT_MIN_LOSS_SCALE),
        follow_lines: d.follow_lines.unwrap_or(DEFAULT_FOLLOW_LINES),
        engine,
        retention,
        tailing,
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn issues(yaml: &str) -> Vec<ConfigIssue> {
        match parse(yaml, None, Path::new("")) {
            Ok(_) => Vec::new(),
            Err(e) => e.issues,
        }
    }

    #[test]
    fn default_config_is_valid() {
        crate::config::default_config().unwrap();
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let i = issues("listen: \"127.0.0.1:1\"\nlogs:\n  - name: jobs\n    pathz: [a]\n");
        assert_eq!(i.len(), 1);
        assert!(i[0].message.contains("pathz"), "{i:?}");
        assert_eq!(i[0].line, Some(4));
    }

    #[test]
    fn every_bad_field_is_reported() {
        let i = issues("listen: nowhere\nincidents:\n  quiet_period: \"5\"\nlogs:\n  - name: jobs\n    paths: [\"/x/*.log\"]\n    format: xml\n");
        let paths: Vec<_> = i.iter().map(|x| (x.path.as_str(), x.line)).collect();
        assert_eq!(
            paths,
            vec![
                ("listen", Some(1)),
                ("logs[0].format", Some(7)),
                ("incidents.quiet_period", Some(3))
            ]
        );
    }

    #[test]
    fn line_numbers_agree_with_the_yaml_parser_on_bare_cr() {
        let i = issues("listen: \"127.0.0.1:1\"\rincidents:\r  quiet_period: soon\r");
        assert_eq!(i[0].line, Some(3), "{i:?}");
    }

    #[test]
    fn user_rule_needs_a_literal() {
        let i = issues("rules:\n  - name: r\n    pattern: \".*\"\n    kind: cuda_error\n");
        assert_eq!(i[0].path, "rules[0].pattern");
        assert_eq!(i[0].line, Some(3));
    }

    #[test]
    fn repro_modes_are_typed_once() {
        let c = parse("repro:\n  modes: [cpu, sanitizer]\n", None, Path::new("")).unwrap();
        assert_eq!(c.repro.modes, vec![Mode::Cpu, Mode::Sanitizer]);
        let i = issues("repro:\n  modes:\n    - cpu\n    - gpu\n");
        assert_eq!((i[0].path.as_str(), i[0].line), ("repro.modes[1]", Some(4)));
        assert!(i[0].message.contains("\"gpu\" is not a mode"), "{i:?}");
    }

    #[test]
    fn omitted_settings_take_the_owning_crates_defaults() {
        let c = parse(
            "alertmanager:\n  url: http://am:9093\nrepro:\n  enabled: false\n",
            None,
            Path::new(""),
        )
        .unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN);
        assert_eq!(c.max_line_bytes, tail::DEFAULT_MAX_LINE_BYTES);
        assert_eq!(c.tailing.poll_interval, tail::DEFAULT_POLL_INTERVAL);
        assert_eq!(
            c.tailing.read_bytes_per_pass,
            tail::DEFAULT_READ_BYTES_PER_PASS
        );
        assert_eq!(c.repro.modes, repro_defaults::DEFAULT_MODES.to_vec());
        assert_eq!(c.repro.timeout, repro_defaults::DEFAULT_TIMEOUT);
        let a = c.alertmanager.unwrap();
        assert_eq!(a.resolve_after, am::DEFAULT_RESOLVE_AFTER);
        assert_eq!(a.queue_capacity, am::DEFAULT_QUEUE_CAPACITY);
        assert_eq!(
            c.gpu.poll_interval,
            assertwatch_gpu::GpuConfig::default().poll_interval
        );
    }

    #[test]
    fn max_line_bytes_out_of_range_names_the_field() {
        let i = issues("detection:\n  max_line_bytes: 100\n");
        assert_eq!(i[0].path, "detection.max_line_bytes");
        assert!(i[0].message.contains("use 256 bytes to 64MiB"), "{i:?}");
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size(&serde_yaml::Value::from("1MiB")), Ok(1 << 20));
        assert!(parse_size(&serde_yaml::Value::from("1XB")).is_err());
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    }
}
