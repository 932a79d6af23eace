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
        }
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
    fn linked_xids_are_blamed_on_the_application_unless_hardware() {
        let x13 = inc(Kind::Xid, Some(13), None);
        assert_eq!(blame_with_links(&x13, true), Blame::Application);
        let x79 = inc(Kind::Xid, Some(79), None);
        assert_eq!(blame_with_links(&x79, true), x79.blame);
        assert_eq!(blame_with_links(&x13, false), x13.blame);
    }
}
