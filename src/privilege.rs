//! Dropping root: after the daemon has opened what needs root (the listener, `/dev/kmsg`), it
//! becomes the configured `run_as` user, so a bug reachable from log text cannot act as root.
//!
//! Order per setuid(2)/setgroups(2): supplementary groups first, then the gid, then the uid (after
//! setuid the process could no longer change the others). glibc applies these calls to every
//! thread of the process (its `setxid` broadcast), which matters because the runtime's threads
//! exist already. Afterwards, a check that root cannot be regained.

use crate::config::RunAs;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("giving {path} to uid {uid}")]
    Chown {
        path: String,
        uid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("{call} failed")]
    Call {
        call: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("still able to regain root after dropping to uid {0}")]
    NotDropped(u32),
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) -> Result<(), PrivilegeError> {
    let err = |p: &Path, e| PrivilegeError::Chown {
        path: p.display().to_string(),
        uid,
        source: e,
    };
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| err(dir, e))?;
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).map_err(|e| err(dir, e))?.flatten() {
            let p = entry.path();
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                chown_tree(&p, uid, gid)?;
            } else {
                std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).map_err(|e| err(&p, e))?;
            }
        }
    }
    Ok(())
}

/// Gives `state_dir` to `user` and drops to it. A no-op when not running as root.
pub fn drop_to(user: &RunAs, state_dir: &Path) -> Result<(), PrivilegeError> {
    use nix::unistd::{geteuid, setgid, setgroups, setuid, Gid, Uid};
    let call = |call: &'static str| {
        move |e: nix::errno::Errno| PrivilegeError::Call {
            call,
            source: e.into(),
        }
    };
    if !geteuid().is_root() {
        return Ok(());
    }
    chown_tree(state_dir, user.uid, user.gid)?;
    let gid = Gid::from_raw(user.gid);
    setgroups(&[gid]).map_err(call("setgroups"))?;
    setgid(gid).map_err(call("setgid"))?;
    setuid(Uid::from_raw(user.uid)).map_err(call("setuid"))?;
    if user.uid != 0 && setuid(Uid::from_raw(0)).is_ok() {
        return Err(PrivilegeError::NotDropped(user.uid));
    }
    Ok(())
}
