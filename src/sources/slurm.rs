//! Slurm job attribution: which job, step, array task and user an incident belongs to.
//!
//! Slurm leaves three traces, read in this order:
//! - a process's cgroup: `proctrack/cgroup` and `task/cgroup` put every job process under
//!   `…/job_<id>/step_<step>/…` (cgroup v1: `/slurm_<node>/uid_<uid>/job_<id>/step_<step>`, or
//!   `/slurm/uid_<uid>/…`; cgroup v2: `…/slurmstepd.scope/job_<id>/step_<step>/…`);
//! - a process's environment: `SLURM_JOB_ID`, `SLURM_STEP_ID`, `SLURM_ARRAY_JOB_ID`,
//!   `SLURM_ARRAY_TASK_ID`, `SLURM_JOB_USER` (sbatch(1) and srun(1), "OUTPUT ENVIRONMENT
//!   VARIABLES"), readable by root;
//! - a training log's file name: the job's output file, by default `slurm-%j.out` or
//!   `slurm-%A_%a.out` for array jobs (sbatch(1), "filename pattern"), or configured patterns.
//!
//! Everything here parses text it is given (pure, fuzzable); the two `/proc` readers are thin.

use crate::model::SlurmRef;
use std::path::Path;

/// Longest `/proc/<pid>/cgroup` or `environ` read (the kernel caps environ at 128 KiB by default
/// for argv+envp; more is not a process's environment).
const MAX_PROC_READ: u64 = 256 << 10;

/// An output file name pattern compiled to a matcher.
#[derive(Debug, Clone)]
pub struct OutputPattern {
    re: regex::Regex,
}

impl OutputPattern {
    /// Compiles a pattern with Slurm's `%` tokens: `%j` job id, `%A` array master job id, `%a`
    /// array task id, `%u` user, `%x` job name, `%N` node, `%s` step, `%%` a literal `%`. The
    /// pattern matches the file's name (not its directory).
    ///
    /// # Errors
    /// An unknown token, or a pattern that names no job id (`%j` or `%A`).
    pub fn compile(pattern: &str) -> Result<OutputPattern, String> {
        let mut re = String::from("^");
        let mut chars = pattern.chars();
        let mut has_job = false;
        while let Some(c) = chars.next() {
            if c != '%' {
                re.push_str(&regex::escape(&c.to_string()));
                continue;
            }
            match chars.next() {
                Some('j') => {
                    re.push_str(r"(?P<job>[0-9]{1,20})");
                    has_job = true;
                }
                Some('A') => {
                    re.push_str(r"(?P<array_job>[0-9]{1,20})");
                    has_job = true;
                }
                Some('a') => re.push_str(r"(?P<task>[0-9]{1,10})"),
                Some('u') => re.push_str(r"(?P<user>[A-Za-z0-9._-]{1,64})"),
                Some('x') => re.push_str(r"[^/]{1,200}?"),
                Some('N') => re.push_str(r"[A-Za-z0-9._-]{1,128}"),
                Some('s') => re.push_str(r"(?P<step>[0-9]{1,10}|batch|extern)"),
                Some('%') => re.push('%'),
                Some(t) => {
                    return Err(format!(
                    "{pattern:?}: %{t} is not a Slurm filename token (use %j %A %a %u %x %N %s %%)"
                ))
                }
                None => return Err(format!("{pattern:?} ends with a lone %")),
            }
        }
        if !has_job {
            return Err(format!("{pattern:?} names no job id (%j or %A)"));
        }
        re.push('$');
        regex::Regex::new(&re)
            .map(|re| OutputPattern { re })
            .map_err(|e| format!("{pattern:?}: {e}"))
    }

    /// The job named by the file name of `path`, if it matches.
    pub fn attribute(&self, path: &Path) -> Option<SlurmRef> {
        let name = path.file_name()?.to_str()?;
        let c = self.re.captures(name)?;
        let get = |k: &str| c.name(k).map(|m| m.as_str().to_owned());
        let task = get("task");
        // For an array job the file names the master job id (%A) and the task (%a).
        let job = get("job").or_else(|| get("array_job"))?;
        Some(SlurmRef {
            slurm_job_id: Some(job),
            slurm_step: get("step"),
            slurm_array_job_id: get("array_job"),
            slurm_array_task: task,
            slurm_user: get("user"),
        })
    }
}

/// The first pattern that matches `path`'s file name.
pub fn attribute_log(patterns: &[OutputPattern], path: &Path) -> Option<SlurmRef> {
    patterns.iter().find_map(|p| p.attribute(path))
}

/// The job and step in `/proc/<pid>/cgroup` text, with the uid where the v1 layout names it.
pub fn parse_cgroup(text: &str) -> Option<(SlurmRef, Option<u32>)> {
    for line in text.lines() {
        // hierarchy-id:controllers:path
        let path = line.splitn(3, ':').nth(2)?;
        let mut job = None;
        let mut step = None;
        let mut uid = None;
        for seg in path.split('/') {
            if let Some(j) = seg.strip_prefix("job_") {
                if !j.is_empty() && j.len() <= 20 && j.bytes().all(|b| b.is_ascii_digit()) {
                    job = Some(j.to_owned());
                }
            } else if let Some(s) = seg.strip_prefix("step_") {
                if !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    step = Some(s.to_owned());
                }
            } else if let Some(u) = seg.strip_prefix("uid_") {
                uid = u.parse().ok();
            }
        }
        if let Some(j) = job {
            return Some((
                SlurmRef {
                    slurm_job_id: Some(j),
                    slurm_step: step,
                    ..Default::default()
                },
                uid,
            ));
        }
    }
    None
}

/// The Slurm variables in a NUL-separated `/proc/<pid>/environ`.
pub fn parse_environ(bytes: &[u8]) -> Option<SlurmRef> {
    let mut r = SlurmRef::default();
    let clean = |v: &[u8], max: usize| -> Option<String> {
        let s = std::str::from_utf8(v).ok()?;
        (!s.is_empty()
            && s.len() <= max
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
        .then(|| s.to_owned())
    };
    for var in bytes.split(|b| *b == 0) {
        let Some(eq) = var.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (k, v) = (&var[..eq], &var[eq + 1..]);
        match k {
            b"SLURM_JOB_ID" => r.slurm_job_id = clean(v, 20),
            b"SLURM_STEP_ID" => r.slurm_step = clean(v, 16),
            b"SLURM_ARRAY_JOB_ID" => r.slurm_array_job_id = clean(v, 20),
            b"SLURM_ARRAY_TASK_ID" => r.slurm_array_task = clean(v, 10),
            b"SLURM_JOB_USER" => r.slurm_user = clean(v, 64),
            _ => {}
        }
    }
    r.slurm_job_id.is_some().then_some(r)
}

fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    f.take(MAX_PROC_READ).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// The Slurm job of process `pid`: its cgroup first, then its environment (which also gives the
/// array task and the user). `proc_root` is `/proc` outside tests.
pub fn attribute_pid(proc_root: &Path, pid: u32) -> Option<SlurmRef> {
    let dir = proc_root.join(pid.to_string());
    let from_cgroup =
        read_bounded(&dir.join("cgroup")).and_then(|b| parse_cgroup(&String::from_utf8_lossy(&b)));
    let from_env = read_bounded(&dir.join("environ")).and_then(|b| parse_environ(&b));
    match (from_cgroup, from_env) {
        (Some((mut c, uid)), env) => {
            if let Some(e) = env.filter(|e| e.slurm_job_id == c.slurm_job_id) {
                c.slurm_array_job_id = e.slurm_array_job_id;
                c.slurm_array_task = e.slurm_array_task;
                c.slurm_user = e.slurm_user;
                c.slurm_step = c.slurm_step.or(e.slurm_step);
            }
            if c.slurm_user.is_none() {
                c.slurm_user = uid.and_then(user_name);
            }
            Some(c)
        }
        (None, env) => env,
    }
}

/// The user name of `uid` from the system user database.
pub fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
}

/// The job of a training log: its file name, and the file's owner as the user when the name
/// does not say.
pub fn attribute_log_file(patterns: &[OutputPattern], path: &Path) -> Option<SlurmRef> {
    use std::os::unix::fs::MetadataExt;
    let mut r = attribute_log(patterns, path)?;
    if r.slurm_user.is_none() {
        r.slurm_user = std::fs::metadata(path)
            .ok()
            .and_then(|m| user_name(m.uid()));
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pats(p: &[&str]) -> Vec<OutputPattern> {
        p.iter()
            .map(|p| OutputPattern::compile(p).unwrap())
            .collect()
    }

    #[test]
    fn default_output_names() {
        let p = pats(&crate::config::slurm::DEFAULT_LOG_PATTERNS);
        let r = attribute_log(&p, Path::new("/home/u/run/slurm-4242.out")).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("4242"));
        assert_eq!(r.slurm_array_task, None);
        let r = attribute_log(&p, Path::new("slurm-100_7.out")).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("100"));
        assert_eq!(r.slurm_array_job_id.as_deref(), Some("100"));
        assert_eq!(r.slurm_array_task.as_deref(), Some("7"));
        assert!(attribute_log(&p, Path::new("train.log")).is_none());
        assert!(attribute_log(&p, Path::new("slurm-12.out.bak")).is_none());
    }

    #[test]
    fn configured_patterns_with_user_and_name() {
        let p = pats(&["%x-%u-%j.log"]);
        let r = attribute_log(&p, Path::new("llama-alice-77.log")).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("77"));
        assert_eq!(r.slurm_user.as_deref(), Some("alice"));
        assert!(OutputPattern::compile("run-%q.log").is_err());
        assert!(OutputPattern::compile("no-job.log").is_err());
        assert!(OutputPattern::compile("trailing-%").is_err());
    }

    #[test]
    fn cgroup_v1_and_v2_layouts() {
        // cgroup v1 with proctrack/cgroup: the prefix carries the node name.
        let v1 = "12:memory:/slurm_node1/uid_0/job_31/step_0/task_0\n11:cpuset:/slurm_node1/uid_0/job_31/step_0\n";
        let (r, uid) = parse_cgroup(v1).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("31"));
        assert_eq!(r.slurm_step.as_deref(), Some("0"));
        assert_eq!(uid, Some(0));
        let v2 = "0::/system.slice/slurmstepd.scope/job_9001/step_batch/user/task_0\n";
        let (r, uid) = parse_cgroup(v2).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("9001"));
        assert_eq!(r.slurm_step.as_deref(), Some("batch"));
        assert_eq!(uid, None);
        assert!(parse_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n").is_none());
    }

    #[test]
    fn environment_variables() {
        let env = b"PATH=/bin\0SLURM_JOB_ID=55\0SLURM_STEP_ID=2\0SLURM_ARRAY_JOB_ID=50\0SLURM_ARRAY_TASK_ID=5\0SLURM_JOB_USER=bob\0";
        let r = parse_environ(env).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("55"));
        assert_eq!(r.slurm_step.as_deref(), Some("2"));
        assert_eq!(r.slurm_array_task.as_deref(), Some("5"));
        assert_eq!(r.slurm_user.as_deref(), Some("bob"));
        assert!(parse_environ(b"PATH=/bin\0").is_none());
        // Values that are not ids are not taken.
        assert!(parse_environ(b"SLURM_JOB_ID=1;rm -rf /\0").is_none());
    }

    #[test]
    fn a_fake_proc_tree() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("123");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("cgroup"),
            "4:pids:/slurm/uid_0/job_8/step_1/task_0\n",
        )
        .unwrap();
        std::fs::write(p.join("environ"), b"SLURM_JOB_ID=8\0SLURM_JOB_USER=carol\0").unwrap();
        let r = attribute_pid(dir.path(), 123).unwrap();
        assert_eq!(r.slurm_job_id.as_deref(), Some("8"));
        assert_eq!(r.slurm_step.as_deref(), Some("1"));
        assert_eq!(r.slurm_user.as_deref(), Some("carol"));
        assert!(attribute_pid(dir.path(), 999).is_none());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,300}", b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_cgroup(&s);
            let _ = parse_environ(&b);
            for p in [&s] {
                if let Ok(pat) = OutputPattern::compile(p) {
                    let _ = pat.attribute(Path::new(&s));
                }
            }
        }
    }
}
