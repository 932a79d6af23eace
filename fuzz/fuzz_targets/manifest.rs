//! The debug-state manifest parser (untrusted: written by the training job, read by the daemon,
//! which runs processes from it). Any bytes must give a manifest or a `ManifestError` with a
//! bounded reason code, never a panic; whatever is accepted keeps its argv a list with whole
//! placeholders only.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    match assertwatch_repro::manifest::parse(data, Path::new("/fuzz/manifest.json")) {
        Ok((_manifest, _warnings, _created)) => {}
        Err(e) => {
            let reason = e.reason();
            assert!(!reason.is_empty() && reason.len() <= 32, "{reason}");
        }
    }
});
