//! Correlation: links a job's failure with the application-class Xid it caused.
//!
//! A device-side assert in a job's log and an Xid 13/31/43/… in the kernel log for the same pid,
//! close in time, are one failure seen twice. Each new incident is compared with the recent ones
//! on this node: a job error (device assert, CUDA error) pairs with an Xid that the catalog does
//! not blame on hardware, and where both carry a pid the pids must match. Linked incidents list
//! each other in `related`, and the Xid is then blamed on the application. Time is an argument.

use crate::detect::xid_catalog;
use crate::model::{Blame, Incident, Kind};
use std::collections::{HashMap, VecDeque};

/// Root causes remembered per training job for cascades.
const MAX_ROOTS: usize = 256;
/// A follow-on failure this long after its job's root cause still belongs to it: NCCL's
/// watchdog default is 10 minutes (`TORCH_NCCL_*` timeouts: ProcessGroupNCCL's 600 s default),
/// so the other ranks time out up to that long after one rank died.
pub const CASCADE_WINDOW_MS: i64 = 15 * 60 * 1000;

/// Recent incidents kept for pairing; the oldest goes first.
const MAX_RECENT: usize = 512;
/// Incidents whose links are remembered (for later updates of the same incident).
const MAX_LINKED: usize = 4096;

#[derive(Debug, Clone)]
struct Recent {
    id: i64,
    kind: Kind,
    xid: Option<u32>,
    pid: Option<u32>,
    at_ms: i64,
}

/// See the module docs.
#[derive(Debug)]
pub struct Correlator {
    window_ms: i64,
    recent: VecDeque<Recent>,
    related: HashMap<i64, Vec<i64>>,
    /// Per training job: its root-cause incident (id, blame, time).
    roots: HashMap<String, (i64, Blame, i64)>,
    /// Follow-on incident → its root cause.
    caused_by: HashMap<i64, i64>,
}

/// Failures that make the other ranks of a distributed job fail after them.
fn is_root_cause(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::DeviceAssert | Kind::CudaError | Kind::Numeric | Kind::Oom
    )
}

/// The training job an incident belongs to, as one key: the Slurm job, else the Kubernetes pod
/// set (namespace and pod name without its last `-` part: the replica index or hash that tells
/// the ranks of one job apart), else the directory of the log file (ranks of one run writing
/// side by side). `None` for incidents without a job (kernel log, NVML).
pub fn training_job(
    slurm_job: Option<&str>,
    namespace: Option<&str>,
    pod: Option<&str>,
    workload: Option<(&str, &str)>,
    log_path: Option<&str>,
) -> Option<String> {
    if let Some(j) = slurm_job {
        return Some(format!("slurm:{j}"));
    }
    // The pod's top controller (from the pod cache) names the job exactly.
    if let (Some(ns), Some(_), Some((kind, name))) = (namespace, pod, workload) {
        return Some(format!("k8s:{ns}/{kind}/{name}"));
    }
    if let (Some(ns), Some(pod)) = (namespace, pod) {
        let set = pod.rsplit_once('-').map_or(pod, |(head, _)| head);
        return Some(format!("k8s:{ns}/{set}"));
    }
    let dir = std::path::Path::new(log_path?).parent()?.to_str()?;
    (!dir.is_empty()).then(|| format!("dir:{dir}"))
}

fn is_app_xid(kind: Kind, xid: Option<u32>) -> bool {
    kind == Kind::Xid && xid.is_some_and(|x| xid_catalog::blame(x) != Blame::Hardware)
}

fn is_job_error(kind: Kind) -> bool {
    matches!(kind, Kind::DeviceAssert | Kind::CudaError)
}

impl Correlator {
    pub fn new(window_ms: i64) -> Self {
        Correlator {
            window_ms,
            recent: VecDeque::new(),
            related: HashMap::new(),
            roots: HashMap::new(),
            caused_by: HashMap::new(),
        }
    }

    /// The root cause of follow-on incident `id`, if it is one.
    pub fn caused_by(&self, id: i64) -> Option<i64> {
        self.caused_by.get(&id).copied()
    }

    /// Records a new incident of `job` at `now_ms`. A root-cause failure becomes its job's root
    /// cause; an NCCL/distributed failure of a job whose root cause is recent is a follow-on:
    /// returns that root cause's id and blame.
    pub fn cascade(
        &mut self,
        id: i64,
        inc: &Incident,
        job: Option<&str>,
        now_ms: i64,
    ) -> Option<(i64, Blame)> {
        let job = job?;
        if inc.kind == Kind::NcclError {
            let &(root, blame, at) = self.roots.get(job)?;
            if now_ms - at > CASCADE_WINDOW_MS || root == id {
                return None;
            }
            if self.caused_by.len() >= MAX_LINKED {
                self.caused_by.clear();
            }
            self.caused_by.insert(id, root);
            return Some((root, blame));
        }
        if is_root_cause(inc.kind) {
            let fresh = self
                .roots
                .get(job)
                .is_none_or(|(_, _, at)| now_ms - at > CASCADE_WINDOW_MS);
            // The first failure of a job is its root cause; later ones within the window are not.
            if fresh {
                if self.roots.len() >= MAX_ROOTS {
                    let oldest = self
                        .roots
                        .iter()
                        .min_by_key(|(_, v)| v.2)
                        .map(|(k, _)| k.clone());
                    if let Some(k) = oldest {
                        self.roots.remove(&k);
                    }
                }
                self.roots.insert(job.to_owned(), (id, inc.blame, now_ms));
            }
        }
        None
    }

    /// Ids linked with incident `id` so far.
    pub fn related(&self, id: i64) -> Vec<i64> {
        self.related.get(&id).cloned().unwrap_or_default()
    }

    /// Records the new incident `id` seen at `now_ms` and returns the recent incidents it pairs
    /// with (already recorded as related both ways).
    pub fn link(&mut self, id: i64, inc: &Incident, now_ms: i64) -> Vec<i64> {
        while self
            .recent
            .front()
            .is_some_and(|r| now_ms - r.at_ms > self.window_ms)
        {
            self.recent.pop_front();
        }
        let job = is_job_error(inc.kind);
        let app_xid = is_app_xid(inc.kind, inc.xid);
        let links: Vec<i64> = self
            .recent
            .iter()
            .filter(|r| {
                let pair = (job && is_app_xid(r.kind, r.xid)) || (app_xid && is_job_error(r.kind));
                let pid_ok = match (inc.pid, r.pid) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                pair && pid_ok
            })
            .map(|r| r.id)
            .collect();
        if self.related.len() >= MAX_LINKED {
            self.related.clear();
        }
        for other in &links {
            self.related.entry(id).or_default().push(*other);
            self.related.entry(*other).or_default().push(id);
        }
        if self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(Recent {
            id,
            kind: inc.kind,
            xid: inc.xid,
            pid: inc.pid,
            at_ms: now_ms,
        });
        links
    }
}

/// The blame of an incident that has correlated partners: an Xid linked with a job error is the
/// job's doing unless the catalog says hardware.
pub fn blame_with_links(inc: &Incident, linked: bool) -> Blame {
    if linked
        && inc.kind == Kind::Xid
        && xid_catalog::blame(inc.xid.unwrap_or(0)) != Blame::Hardware
    {
        Blame::Application
    } else {
        inc.blame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(kind: Kind, xid: Option<u32>, pid: Option<u32>) -> Incident {
        let mut i = crate::incidents::store::test_record().incident;
        i.kind = kind;
        i.xid = xid;
        i.pid = pid;
        i
    }

    #[test]
    fn an_assert_pairs_with_an_application_xid_of_the_same_pid() {
        let mut c = Correlator::new(120_000);
        assert!(c
            .link(1, &inc(Kind::DeviceAssert, None, Some(42)), 0)
            .is_empty());
        assert_eq!(
            c.link(2, &inc(Kind::Xid, Some(43), Some(42)), 1_000),
            vec![1]
        );
        assert_eq!(c.related(1), vec![2]);
        assert_eq!(c.related(2), vec![1]);
    }

    #[test]
    fn other_pids_hardware_xids_and_old_incidents_do_not_pair() {
        let mut c = Correlator::new(120_000);
        c.link(1, &inc(Kind::DeviceAssert, None, Some(42)), 0);
        assert!(c.link(2, &inc(Kind::Xid, Some(43), Some(7)), 1).is_empty());
        assert!(c.link(3, &inc(Kind::Xid, Some(79), None), 2).is_empty());
        assert!(c
            .link(4, &inc(Kind::Xid, Some(13), None), 200_000)
            .is_empty());
    }

    #[test]
    fn nccl_failures_after_a_jobs_assert_follow_from_it() {
        let mut c = Correlator::new(120_000);
        let job = Some("slurm:42");
        let mut assert = inc(Kind::DeviceAssert, None, None);
        assert.blame = Blame::Application;
        assert!(c.cascade(1, &assert, job, 0).is_none());
        let nccl = inc(Kind::NcclError, None, None);
        assert_eq!(
            c.cascade(2, &nccl, job, 120_000),
            Some((1, Blame::Application))
        );
        assert_eq!(c.caused_by(2), Some(1));
        // Another job, or too late, or no job: not a follow-on.
        assert!(c.cascade(3, &nccl, Some("slurm:43"), 120_000).is_none());
        assert!(c.cascade(4, &nccl, job, CASCADE_WINDOW_MS + 1).is_none());
        assert!(c.cascade(5, &nccl, None, 1).is_none());
        // A second assert of the same job within the window does not replace the root cause.
        assert!(c.cascade(6, &assert, job, 10).is_none());
        assert_eq!(c.cascade(7, &nccl, job, 20), Some((1, Blame::Application)));
    }

    #[test]
    fn training_job_keys() {
        assert_eq!(
            training_job(Some("7"), Some("ns"), Some("p-0"), None, None).as_deref(),
            Some("slurm:7")
        );
        assert_eq!(
            training_job(
                None,
                Some("ml"),
                Some("llama-worker-3"),
                None,
                Some("/var/log/pods/x/0.log")
            )
            .as_deref(),
            Some("k8s:ml/llama-worker")
        );
        // With the pod's workload known (the pod cache), the workload names the job.
        assert_eq!(
            training_job(
                None,
                Some("ml"),
                Some("llama-worker-3"),
                Some(("PyTorchJob", "llama")),
                None
            )
            .as_deref(),
            Some("k8s:ml/PyTorchJob/llama")
        );
        assert_eq!(
            training_job(None, None, None, None, Some("/runs/r1/rank3.log")).as_deref(),
            Some("dir:/runs/r1")
        );
        assert_eq!(training_job(None, None, None, None, None), None);
    }

    #[test]
    fn linked_xids_are_blamed_on_the_application_unless_hardware() {
        let x13 = inc(Kind::Xid, Some(13), None);
        assert_eq!(blame_with_links(&x13, true), Blame::Application);
        let x79 = inc(Kind::Xid, Some(79), None);
        assert_eq!(blame_with_links(&x79, true), x79.blame);
        assert_eq!(blame_with_links(&x13, false), x13.blame);
    }
}
