//! Small filesystem helpers shared by everything that persists state.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary sibling file, fsync, rename, fsync of the
/// directory. A crash leaves either the old or the new content, never a torn file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
