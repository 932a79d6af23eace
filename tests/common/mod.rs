//! Shared helpers for integration tests: the real binary, temp dirs, the corpus, required tools.

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the `assertwatch` binary cargo built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_assertwatch"))
}

/// Runs the binary with `args` and optional stdin bytes.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(bin())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn assertwatch");
    if let Some(data) = stdin {
        let mut s = child.stdin.take().expect("stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = s.write_all(&data);
        });
    }
    child.wait_with_output().expect("wait assertwatch")
}

/// The shared real-world corpus (`$ASSERTWATCH_CORPUS`, else `../shared/corpus` beside the repo).
pub fn corpus_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ASSERTWATCH_CORPUS") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    p.is_dir().then_some(p)
}

/// True when running under CI, where a missing tool or fixture is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Finds `name` on PATH; under CI a missing tool panics, elsewhere the caller skips.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "{name} is required under CI=true but is not on PATH"
        );
        eprintln!("SKIP: {name} not found on PATH (set CI=true to make this a failure)");
    }
    found
}

/// Parses JSON Lines output.
pub fn jsonl(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// An HTTP client that returns 4xx/5xx as responses, not errors.
pub fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into()
}

/// GET `url`; returns (status, body), or (0, error text) when the connection fails.
pub fn get(url: &str) -> (u16, String) {
    match http().get(url).call() {
        Ok(mut r) => {
            let status = r.status().as_u16();
            (status, r.body_mut().read_to_string().unwrap_or_default())
        }
        Err(e) => (0, e.to_string()),
    }
}

/// A daemon that tails `./logs/*.log` in its working directory, with no GPU, short quiet period
/// and rescan interval, and its state in `./state`. `{port}` is replaced by [`Daemon::start`].
pub const TAIL_CONFIG: &str = r#"
listen: "127.0.0.1:{port}"
state_dir: ./state
logs:
  - name: jobs
    paths: ["./logs/*.log"]
gpu:
  backend: none
incidents:
  quiet_period: 300ms
tailing:
  rescan_interval: 200ms
  checkpoint_interval: 100ms
"#;

/// A running `assertwatch run` in a temp dir, killed on drop.
pub struct Daemon {
    pub child: std::process::Child,
    pub port: u16,
    pub dir: PathBuf,
    pub config: PathBuf,
}

impl Daemon {
    /// Writes `config_yaml` (with `{port}` replaced) into `dir/config.yaml` and starts the daemon
    /// with its working directory in `dir`. Waits until `/readyz` answers 200.
    pub fn start(dir: &Path, config_yaml: &str) -> Daemon {
        let port = free_port();
        let config = dir.join("config.yaml");
        std::fs::write(&config, config_yaml.replace("{port}", &port.to_string()))
            .expect("write config");
        Daemon::start_with(dir, &config, port)
    }

    pub fn start_with(dir: &Path, config: &Path, port: u16) -> Daemon {
        Daemon::start_with_env(dir, config, port, &[])
    }

    /// Like `start`, with extra environment variables for the daemon.
    pub fn start_env(dir: &Path, config_yaml: &str, env: &[(&str, &str)]) -> Daemon {
        let port = free_port();
        let config = dir.join("config.yaml");
        std::fs::write(&config, config_yaml.replace("{port}", &port.to_string()))
            .expect("write config");
        Daemon::start_with_env(dir, &config, port, env)
    }

    pub fn start_with_env(dir: &Path, config: &Path, port: u16, env: &[(&str, &str)]) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("daemon.log"))
            .expect("daemon log");
        let child = Command::new(bin())
            .args(["run", "--config"])
            .arg(config)
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("spawn daemon");
        let d = Daemon {
            child,
            port,
            dir: dir.to_path_buf(),
            config: config.to_path_buf(),
        };
        d.wait_ready();
        d
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if get(&self.url("/readyz")).0 == 200 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("daemon not ready; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    pub fn incidents(&self) -> Vec<serde_json::Value> {
        let (s, body) = get(&self.url("/api/v1/incidents?limit=1000"));
        assert_eq!(s, 200, "{body}");
        serde_json::from_str(&body).expect("incidents JSON")
    }

    pub fn metrics(&self) -> String {
        get(&self.url("/metrics")).1
    }

    /// Sum of the samples of `name` whose label set contains every `label="value"` in `labels`.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_value(&self.metrics(), name, labels)
    }

    /// Polls until `f` is true or `secs` pass; returns whether it became true.
    pub fn wait_for(&self, secs: u64, mut f: impl FnMut(&Daemon) -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < deadline {
            if f(self) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        false
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process by pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// SIGTERM and wait; returns the exit status and how long it took.
    pub fn stop(mut self) -> (std::process::ExitStatus, std::time::Duration) {
        let t = std::time::Instant::now();
        self.signal(libc::SIGTERM);
        let st = self.child.wait().expect("wait");
        (st, t.elapsed())
    }

    /// kill -9 and wait.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sums samples of metric `name` in exposition `text` matching `labels`.
pub fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut sum = 0.0;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        if labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        {
            if let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
                sum += v;
            }
        }
    }
    sum
}

/// A device-side assert block whose kernel line carries `n`, so every block is distinct.
pub fn assert_block(n: u64) -> String {
    format!(
        "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{n},0,0], thread: [0,0,0] Assertion `index out of bounds` failed.\n\
         ../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{n},0,0], thread: [1,0,0] Assertion `index out of bounds` failed.\n\
         Traceback (most recent call last):\n  File \"/job/train.py\", line 88, in <module>\n    loss.backward()\n\
         RuntimeError: CUDA error: device-side assert triggered\n\
         For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
    )
}

/// `count` ordinary training lines numbered from `start`.
pub fn ordinary(start: u64, count: u64) -> String {
    (start..start + count)
        .map(|i| format!("step {i} loss 0.{i:04} lr 3.0e-04 grad_norm 0.5\n"))
        .collect()
}
