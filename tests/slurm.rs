//! Against a real one-node Slurm cluster (munged, slurmctld and slurmd started here on
//! localhost, from a generated slurm.conf in a temp dir): a job's device-side assert names the
//! job and its user; an Xid 79 scripted through the fake GPU drains the node with the reason in
//! `sinfo -R`, and the node is resumed once the GPU is back — only because assertwatch drained
//! it; a node drained by hand stays drained; `assertwatch health` exits 1 and 0 accordingly.
//! Every process started here is stopped by its pid.
//!
//! Needs root and Debian's `slurmctld`, `slurmd`, `slurm-client` and `munge`. Outside CI a
//! missing piece skips with the reason; under `CI=true` it fails.

// The test starts real daemons; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bin, in_ci, Daemon};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program on PATH or in the sbin directories (root's daemons live there).
fn find(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn skip_or_fail(why: &str) {
    assert!(!in_ci(), "{why} (required under CI=true)");
    eprintln!("SKIP: {why}");
}

/// Children stopped by pid when the test ends, whatever happens.
struct Procs(Vec<(String, Child)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (name, c) in self.0.iter_mut().rev() {
            // SAFETY-free: signal our own child by its pid, then reap it.
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !matches!(c.try_wait(), Ok(Some(_))) {
                eprintln!("{name} did not stop on SIGTERM; killing it");
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    node: String,
}

impl Cluster {
    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(find(prog).unwrap_or_else(|| PathBuf::from(prog)));
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn out(&self, prog: &str, args: &[&str]) -> String {
        let o = self.cmd(prog).args(args).output().expect(prog);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn state(&self) -> String {
        self.out("sinfo", &["-h", "-n", &self.node, "-o", "%T"])
            .trim()
            .to_owned()
    }

    fn reason(&self) -> String {
        self.out("sinfo", &["-R", "-h", "-n", &self.node, "-o", "%E"])
            .trim()
            .to_owned()
    }

    fn wait(&self, secs: u64, what: &str, mut f: impl FnMut(&Cluster) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if f(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "timed out waiting for {what}: state {:?}, reason {:?}",
            self.state(),
            self.reason()
        );
    }
}

fn free_port() -> u16 {
    common::free_port()
}

fn start_cluster(dir: &Path, procs: &mut Procs) -> Cluster {
    let node = String::from_utf8_lossy(
        &Command::new("hostname")
            .arg("-s")
            .output()
            .expect("hostname")
            .stdout,
    )
    .trim()
    .to_owned();
    let munge_dir = dir.join("munge");
    for d in ["state", "spool", "log"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let status = Command::new("install")
        .args(["-d", "-o", "munge", "-g", "munge", "-m", "0755"])
        .arg(&munge_dir)
        .status()
        .expect("install");
    assert!(status.success());
    let sock = munge_dir.join("munge.sock");
    let munged = Command::new(find("runuser").expect("runuser"))
        .args(["-u", "munge", "--"])
        .arg(find("munged").expect("munged"))
        .arg("-F")
        .arg("-f")
        .arg(format!("--socket={}", sock.display()))
        .arg(format!(
            "--pid-file={}",
            munge_dir.join("munged.pid").display()
        ))
        .arg(format!(
            "--log-file={}",
            munge_dir.join("munged.log").display()
        ))
        .arg(format!("--seed-file={}", munge_dir.join("seed").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("munged");
    procs.0.push(("munged".into(), munged));
    let t = Instant::now();
    while !sock.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let d = dir.display();
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=assertwatch\nSlurmctldHost={node}\nSlurmctldPort={}\nSlurmdPort={}\n\
             AuthType=auth/munge\nAuthInfo=socket={}\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\nReturnToService=2\nMpiDefault=none\n\
             NodeName={node} CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
            sock.display()
        ),
    )
    .unwrap();
    let c = Cluster {
        dir: dir.to_path_buf(),
        conf,
        node,
    };
    for prog in ["slurmctld", "slurmd"] {
        let child = c
            .cmd(prog)
            .args(["-D", "-f"])
            .arg(&c.conf)
            .stdout(std::fs::File::create(dir.join(format!("log/{prog}.out"))).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect(prog);
        procs.0.push((prog.into(), child));
    }
    c.wait(30, "the node to come up idle", |c| c.state() == "idle");
    c
}

fn health(dir: &Path) -> (i32, String) {
    let o = Command::new(bin())
        .args(["health", "--config", "config.yaml"])
        .current_dir(dir)
        .output()
        .expect("health");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).trim().to_owned(),
    )
}

/// Xid 79 at `xid_at`, then (as on a real node) the driver reports the GPU lost a second
/// later, until it is back at `back_at`.
fn fake_gpu(xid_at: u64, back_at: u64) -> String {
    let lost_at = xid_at + 1;
    format!(
        "gpus:\n  - index: 0\n    uuid: GPU-00000000-0000-0000-0000-0000000000aa\n    pci_bus_id: \"00000000:B3:00.0\"\n    name: NVIDIA H100 80GB HBM3\n    lost_at: {lost_at}s\n    back_at: {back_at}s\nevents:\n  - {{ at: {xid_at}s, gpu: 0, xid: 79 }}\n"
    )
}

fn config(c: &Cluster, jobs: &Path) -> String {
    format!(
        "listen: \"127.0.0.1:{{port}}\"\nstate_dir: ./state\nlogs:\n  - name: slurm\n    paths: [\"{}/slurm-*.out\"]\n\
         gpu:\n  backend: fake\n  fake_file: ./fake.yaml\n  poll_interval: 200ms\nincidents:\n  quiet_period: 300ms\n\
         tailing:\n  rescan_interval: 200ms\nslurm:\n  enabled: true\n  resume: true\n  node_name: {}\n  scontrol: {}\n",
        jobs.display(),
        c.node,
        find("scontrol").expect("scontrol").display()
    )
}

#[test]
fn jobs_are_named_and_unhealthy_gpus_drain_the_node() {
    for tool in [
        "slurmctld",
        "slurmd",
        "sbatch",
        "scontrol",
        "sinfo",
        "munged",
        "runuser",
    ] {
        if find(tool).is_none() {
            return skip_or_fail(&format!("{tool} is not installed"));
        }
    }
    // SAFETY-free read of our own uid.
    if nix_uid() != 0 {
        return skip_or_fail("the Slurm test needs root (munged runs as the munge user)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut procs = Procs(Vec::new());
    let c = start_cluster(&dir.join("cluster"), &mut procs);
    let jobs = dir.join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    let work = dir.join("daemon");
    std::fs::create_dir_all(&work).unwrap();
    // The Xid comes late enough for the job part to finish first.
    std::fs::write(work.join("fake.yaml"), fake_gpu(12, 22)).unwrap();
    let conf = c.conf.display().to_string();
    let d = Daemon::start_env(&work, &config(&c, &jobs), &[("SLURM_CONF", &conf)]);
    let t0 = Instant::now();

    // 1. A job prints a device-side assert to slurm-<id>.out and fails.
    let out = c.out(
        "sbatch",
        &[
            "--parsable",
            &format!("--chdir={}", jobs.display()),
            "--wrap",
            "echo '../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion `index out of bounds` failed.'; echo 'RuntimeError: CUDA error: device-side assert triggered'; exit 1",
        ],
    );
    let job_id = out.trim().split(';').next().unwrap_or("").to_owned();
    assert!(!job_id.is_empty(), "sbatch printed no job id");
    let named = d.wait_for(20, |d| {
        d.incidents()
            .iter()
            .any(|i| i["kind"] == "device_assert" && i["slurm_job_id"] == job_id.as_str())
    });
    assert!(named, "no incident named job {job_id}; log:\n{}", d.log());
    let inc = d
        .incidents()
        .into_iter()
        .find(|i| i["slurm_job_id"] == job_id.as_str())
        .unwrap();
    assert_eq!(inc["slurm_user"], "root", "{inc}");
    assert_eq!(health(&work).0, 0, "healthy before the Xid");
    assert!(
        t0.elapsed() < Duration::from_secs(12),
        "the job part took too long for the script"
    );

    // 2. Xid 79 (scripted at 12 s): the node drains with our reason.
    c.wait(30, "the node to drain", |c| c.state().contains("drain"));
    // Whichever evidence the daemon saw first (the Xid line, or NVML reporting the GPU lost a
    // moment later) names the GPU in the reason.
    let reason = c.reason();
    assert!(
        reason.starts_with("assertwatch: Xid 79 on GPU 0")
            || reason.starts_with("assertwatch: lost (NVML) on GPU 0"),
        "{reason}"
    );
    let (code, why) = health(&work);
    assert_eq!(code, 1, "{why}");
    assert!(why.contains("GPU 0 (0000:b3:00) unhealthy"), "{why}");

    // 3. The GPU is back at 22 s: assertwatch drained the node, so it resumes it.
    c.wait(40, "the node to return to idle", |c| c.state() == "idle");
    assert_eq!(health(&work).0, 0);
    drop(d);

    // 4. A node drained by hand stays drained through another Xid and its recovery.
    let status = c
        .cmd("scontrol")
        .args([
            "update",
            &format!("NodeName={}", c.node),
            "State=DRAIN",
            "Reason=maintenance by hand",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(work.join("fake.yaml"), fake_gpu(2, 6)).unwrap();
    let d = Daemon::start_env(&work, &config(&c, &jobs), &[("SLURM_CONF", &conf)]);
    let went_bad = d.wait_for(20, |_| health(&work).0 == 1);
    assert!(went_bad, "the second Xid was not seen; log:\n{}", d.log());
    let back = d.wait_for(30, |_| health(&work).0 == 0);
    assert!(back, "the GPU did not recover; log:\n{}", d.log());
    std::thread::sleep(Duration::from_secs(3));
    assert!(c.state().contains("drain"), "state {}", c.state());
    assert_eq!(c.reason(), "maintenance by hand");
    drop(d);
    let _ = &c.dir;
}

fn nix_uid() -> u32 {
    // /proc/self/status: "Uid:\treal\teffective\t…"
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}
