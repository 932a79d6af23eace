//! The one place in assertwatch that starts child processes for replays.
//!
//! A replay runs code and data a training job wrote, so the child gets as little as possible:
//! an argv list executed directly (`execve`, never a shell), an environment built from nothing,
//! its own process group (so a timeout kills the whole tree by pgid, never by name), the job's
//! uid/gid instead of the daemon's root, `PR_SET_NO_NEW_PRIVS`, and resource limits set between
//! `fork` and `exec`: `RLIMIT_CORE=0`, `RLIMIT_NOFILE`, `RLIMIT_FSIZE`. There is deliberately no
//! `RLIMIT_AS`: CUDA processes reserve very large virtual ranges, and one report cites exhausting
//! a 128 TB limit (pytorch/pytorch#192269, via reproduction.md (d)). Memory is limited only
//! through a cgroup, here an optional `systemd-run --scope -p MemoryMax=…` wrapper.
//!
//! Output is drained by one thread per pipe into files capped at a byte limit; bytes past the cap
//! are read and counted, not written, so a chatty child can neither fill the disk nor block on
//! a full pipe. On timeout the group gets SIGTERM, then SIGKILL after a grace period, and the
//! module checks `/proc` until no live process of the group is left.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The user and group a replay runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Per-process limits applied with `setrlimit` in the child before `exec`. Each is lowered to the
/// given value, never raised above the daemon's own hard limit.
#[derive(Debug, Clone, Copy)]
pub struct ResourceLimits {
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// `RLIMIT_FSIZE`: the largest file the child may write, in bytes.
    pub file_size: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            open_files: 4096,
            file_size: 1 << 30,
        }
    }
}

/// Run the child inside a transient systemd scope with a memory limit (cgroup v2 `memory.max`).
#[derive(Debug, Clone)]
pub struct MemoryScope {
    /// Path of `systemd-run`.
    pub systemd_run: PathBuf,
    /// `MemoryMax=` in bytes.
    pub memory_max: u64,
}

/// Everything needed to start one child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Program and arguments; `argv[0]` is executed as is (an absolute path, or looked up in the
    /// child's `PATH`).
    pub argv: Vec<String>,
    /// The complete environment of the child.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// `None` runs the child as the daemon's own user.
    pub identity: Option<Identity>,
    pub limits: ResourceLimits,
    pub memory_scope: Option<MemoryScope>,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
    /// Bytes kept per stream; the rest is counted and dropped.
    pub output_cap: u64,
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// One captured stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct Captured {
    /// Bytes the child wrote.
    pub bytes: u64,
    /// Bytes kept in the file.
    pub kept: u64,
    pub truncated: bool,
}

/// What happened to a child.
#[derive(Debug, Clone)]
pub struct ChildReport {
    pub pid: u32,
    /// `None` only if the child could not be reaped.
    pub exit: Option<Exit>,
    /// The timeout expired and the group was killed.
    pub timed_out: bool,
    pub duration: Duration,
    pub stdout: Captured,
    pub stderr: Captured,
    /// Live processes of the group still present after the kill sequence (0 when all is well).
    pub survivors: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("empty argv")]
    EmptyArgv,
    #[error("cannot create the capture file {}", path.display())]
    Capture {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start {program}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

/// Lowers one limit (soft and hard) to `value`, capped at the current hard limit so an
/// unprivileged child never asks for more than it has. Runs between fork and exec: only
/// async-signal-safe calls, no allocation.
fn lower_limit(resource: Resource, value: u64) -> io::Result<()> {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(resource, &mut cur) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let v = (value as libc::rlim_t).min(cur.rlim_max);
    let new = libc::rlimit {
        rlim_cur: v,
        rlim_max: v,
    };
    // SAFETY: as above.
    if unsafe { libc::setrlimit(resource, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn build_command(spec: &ChildSpec) -> Result<Command, ProcessError> {
    let (program, args) = spec.argv.split_first().ok_or(ProcessError::EmptyArgv)?;
    let mut full: Vec<String> = Vec::new();
    let mut switch_in_child = spec.identity;
    if let Some(scope) = &spec.memory_scope {
        // systemd-run --scope runs the command itself, in the caller's environment, after moving
        // into the scope; --uid/--gid work in scope mode since systemd commit 4de33e7f (2014).
        full.push(scope.systemd_run.to_string_lossy().into_owned());
        full.extend(["--scope", "--quiet", "--collect", "-p"].map(String::from));
        full.push(format!("MemoryMax={}", scope.memory_max));
        if let Some(id) = spec.identity {
            full.push(format!("--uid={}", id.uid));
            full.push(format!("--gid={}", id.gid));
            switch_in_child = None; // systemd-run (still root) switches; we must not drop first.
        }
        full.push("--".into());
    }
    full.push(program.clone());
    full.extend(args.iter().cloned());
    let (program, args) = full.split_first().ok_or(ProcessError::EmptyArgv)?;

    // The single sanctioned spawn site (root clippy.toml bans Command::new elsewhere): argv list,
    // empty environment, own process group, limits below.
    #[allow(clippy::disallowed_methods)]
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(id) = switch_in_child {
        // std's `uid` "will also trigger a call to setgroups(0, NULL)" when no groups were given,
        // dropping root's supplementary groups (Rust std CommandExt docs, cited in
        // reproduction.md (d)); `groups(&[])` itself is not stable yet.
        cmd.uid(id.uid).gid(id.gid);
    }
    let limits = spec.limits;
    // SAFETY: the closure runs in the forked child before exec; it only calls getrlimit,
    // setrlimit and prctl, which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            lower_limit(libc::RLIMIT_CORE, 0)?;
            lower_limit(libc::RLIMIT_NOFILE, limits.open_files)?;
            lower_limit(libc::RLIMIT_FSIZE, limits.file_size)?;
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

fn create_capture(path: &Path) -> Result<File, ProcessError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| ProcessError::Capture {
            path: path.to_path_buf(),
            source,
        })
}

/// Copies `pipe` into `file`, keeping at most `cap` bytes and counting the rest.
fn drain(mut pipe: impl Read, mut file: File, cap: u64) -> Captured {
    let mut c = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut write_ok = true;
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        c.bytes += n as u64;
        let room = cap.saturating_sub(c.kept) as usize;
        let keep = room.min(n);
        if keep > 0 && write_ok {
            write_ok = file.write_all(&buf[..keep]).is_ok();
            c.kept += keep as u64;
        }
    }
    c.truncated = c.bytes > c.kept;
    let _ = file.flush();
    c
}

fn spawn_drain<R: Read + Send + 'static>(
    pipe: Option<R>,
    file: File,
    cap: u64,
) -> mpsc::Receiver<Captured> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let c = match pipe {
            Some(p) => drain(p, file, cap),
            None => Captured::default(),
        };
        let _ = tx.send(c);
    });
    rx
}

/// Starts the child described by `spec`, waits for it (or kills its group at the timeout) and
/// returns what happened. Blocking; call it from a blocking thread.
///
/// # Errors
/// Only when the child could not be started at all; everything after that is in the report.
pub fn run(spec: &ChildSpec) -> Result<ChildReport, ProcessError> {
    let out_file = create_capture(&spec.stdout_path)?;
    let err_file = create_capture(&spec.stderr_path)?;
    let mut cmd = build_command(spec)?;
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: spec.argv.first().cloned().unwrap_or_default(),
        source,
    })?;
    let pid = child.id();
    let pgid = pid as i32; // process_group(0): the child leads a group with its own pid
    let out_rx = spawn_drain(child.stdout.take(), out_file, spec.output_cap);
    let err_rx = spawn_drain(child.stderr.take(), err_file, spec.output_cap);

    let deadline = started + spec.timeout;
    let mut exit = wait_until(&mut child, deadline);
    let mut timed_out = false;
    if exit.is_none() {
        timed_out = true;
        exit = kill_group(&mut child, pgid, spec.grace);
    }
    // Whatever the child left behind in its group (background children) goes too.
    let survivors = reap_group(pgid);
    let duration = started.elapsed();
    // A descendant that left the group (setsid) may still hold a pipe; do not wait for it forever.
    let collect =
        |rx: mpsc::Receiver<Captured>| rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
    let stdout = collect(out_rx);
    let stderr = collect(err_rx);
    Ok(ChildReport {
        pid,
        exit,
        timed_out,
        duration,
        stdout,
        stderr,
        survivors,
    })
}

fn to_exit(status: std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<Exit> {
    let mut pause = Duration::from_millis(5);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(to_exit(status)),
            Ok(None) => {}
            Err(_) => return None,
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// SIGTERM to the group, then SIGKILL after `grace`; reaps the leader.
fn kill_group(child: &mut Child, pgid: i32, grace: Duration) -> Option<Exit> {
    signal_group(pgid, libc::SIGTERM);
    let exit = wait_until(child, Instant::now() + grace);
    if exit.is_some() && group_members(pgid).is_empty() {
        return exit;
    }
    signal_group(pgid, libc::SIGKILL);
    exit.or_else(|| child.wait().ok().map(to_exit))
}

fn signal_group(pgid: i32, sig: i32) {
    if pgid <= 1 {
        return; // never signal "every process" or init's group by accident
    }
    // SAFETY: killpg has no memory-safety preconditions; ESRCH (group gone) is fine.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Kills what is left of the group and waits (up to 2 s) until `/proc` shows no live member.
/// Returns the number of live members still present.
fn reap_group(pgid: i32) -> usize {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let live = group_members(pgid);
        if live.is_empty() {
            return 0;
        }
        signal_group(pgid, libc::SIGKILL);
        if Instant::now() >= until {
            return live.len();
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Fields of `/proc/<pid>/stat` after the command name (which may contain spaces and parens).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Live (not zombie) processes whose process group is `pgid`, from `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    proc_table()
        .into_iter()
        .filter(|(_, p)| p.pgrp == pgid && p.state != 'Z' && p.state != 'X')
        .map(|(pid, _)| pid)
        .collect()
}

struct ProcInfo {
    state: char,
    pgrp: i32,
}

fn proc_table() -> HashMap<i32, ProcInfo> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(f) = stat_fields(&text) else {
            continue;
        };
        let (Some(state), Some(pgrp)) = (
            f.first().and_then(|s| s.chars().next()),
            f.get(2).and_then(|s| s.parse().ok()),
        ) else {
            continue;
        };
        out.insert(pid, ProcInfo { state, pgrp });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let f = stat_fields("123 (a) b) (c) S 1 123 123 0 -1").unwrap();
        assert_eq!(f[0], "S");
        assert_eq!(f[2], "123");
    }

    #[test]
    fn systemd_scope_wraps_argv_and_moves_the_uid_switch() {
        let spec = ChildSpec {
            argv: vec!["/usr/bin/python3".into(), "-V".into()],
            env: vec![],
            cwd: "/".into(),
            identity: Some(Identity {
                uid: 1001,
                gid: 1002,
            }),
            limits: ResourceLimits::default(),
            memory_scope: Some(MemoryScope {
                systemd_run: "/usr/bin/systemd-run".into(),
                memory_max: 1 << 30,
            }),
            stdout_path: "/dev/null".into(),
            stderr_path: "/dev/null".into(),
            output_cap: 0,
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
        };
        let cmd = build_command(&spec).unwrap();
        assert_eq!(cmd.get_program(), "/usr/bin/systemd-run");
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--scope",
                "--quiet",
                "--collect",
                "-p",
                "MemoryMax=1073741824",
                "--uid=1001",
                "--gid=1002",
                "--",
                "/usr/bin/python3",
                "-V"
            ]
        );
    }
}
