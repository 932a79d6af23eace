//! Early wake-ups from inotify (through the `notify` crate). Events are hints only: a create,
//! remove or rename asks for a rescan, any other change for a read pass. The periodic rescan and
//! the poll of open files remain the ground truth, because inotify misses events on some
//! filesystems and in some containers, overflows its queue, and runs out of watches. This is
//! where we part with Vector, which polls only.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use notify::event::ModifyKind;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

use crate::ratelimit::RateLimit;

/// The inotify side of the tailer; without a watcher it does nothing.
pub(crate) struct Wake {
    watcher: Option<RecommendedWatcher>,
    notify: Arc<Notify>,
    rescan: Arc<AtomicBool>,
    watched: HashSet<PathBuf>,
}

impl Wake {
    /// Starts the watcher. If inotify cannot be initialised (no kernel support, instance limit),
    /// logs one warning and returns a `Wake` that never fires.
    pub(crate) fn new(rl: &mut RateLimit) -> Self {
        let notify = Arc::new(Notify::new());
        let rescan = Arc::new(AtomicBool::new(false));
        let (n, r) = (notify.clone(), rescan.clone());
        let handler = move |res: notify::Result<notify::Event>| {
            match res {
                Ok(ev) => match ev.kind {
                    EventKind::Access(_) => return,
                    EventKind::Create(_)
                    | EventKind::Remove(_)
                    | EventKind::Modify(ModifyKind::Name(_))
                    | EventKind::Any
                    | EventKind::Other => r.store(true, Ordering::Relaxed),
                    EventKind::Modify(_) => {}
                },
                // Queue overflow and friends: we may have missed a create.
                Err(_) => r.store(true, Ordering::Relaxed),
            }
            n.notify_one();
        };
        let watcher = match notify::recommended_watcher(handler) {
            Ok(w) => Some(w),
            Err(error) => {
                if rl.allow("notify_init").is_some() {
                    tracing::warn!(%error, "File notifications are unavailable; relying on polling.");
                }
                None
            }
        };
        Self {
            watcher,
            notify,
            rescan,
            watched: HashSet::new(),
        }
    }

    /// Adds watches for the roots not yet watched. Roots that do not exist yet are retried at the
    /// next call; failures (for example the inotify watch limit) are logged rate-limited.
    pub(crate) fn watch_roots(&mut self, roots: &[(PathBuf, bool)], rl: &mut RateLimit) {
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        for (root, recursive) in roots {
            if self.watched.contains(root) || !Path::new(root).is_dir() {
                continue;
            }
            let mode = if *recursive {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match w.watch(root, mode) {
                Ok(()) => {
                    self.watched.insert(root.clone());
                }
                Err(error) => {
                    if let Some(suppressed) = rl.allow("notify_watch") {
                        tracing::warn!(path = %root.display(), %error, suppressed,
                            "Cannot watch directory for changes; relying on polling.");
                    }
                }
            }
        }
    }

    /// Whether an event since the last call asked for a rescan.
    pub(crate) fn take_rescan(&self) -> bool {
        self.rescan.swap(false, Ordering::Relaxed)
    }

    /// Completes when an event arrives (or one arrived since the last wait).
    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }
}
