//! The sink interface from outside the crate: a toy sink defined here, in the test alone, is
//! added to the real daemon's assembly with one line and receives every incident.

use assertwatch::app::{self, RunOptions};
use assertwatch::lifecycle::Exit;
use assertwatch::sinks::{Change, IncidentEvent, IncidentSink};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Toy(Arc<Mutex<Vec<Seen>>>);

/// (change, incident id, category, still open)
type Seen = (Change, i64, String, bool);

impl IncidentSink for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        if let Ok(mut v) = self.0.lock() {
            v.push((
                event.change,
                event.record.id,
                event.record.incident.category.clone(),
                event.record.open,
            ));
        }
    }
}

fn block(n: u64) -> String {
    let filler: String = (0..60).map(|i| format!("step {n}{i} loss 0.5\n")).collect();
    format!(
        "{filler}../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{n},0,0], thread: [0,0,0] Assertion `index out of bounds` failed.\n\
         RuntimeError: CUDA error: device-side assert triggered\n"
    )
}

#[test]
fn a_toy_sink_receives_every_incident() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = format!(
        "listen: \"127.0.0.1:{port}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: none\nincidents:\n  quiet_period: 200ms\ntailing:\n  rescan_interval: 100ms\n"
    );
    let cfg = assertwatch::config::parse(&yaml, Some("test"), dir.path()).unwrap();
    let toy = Toy::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let opts = RunOptions {
        extra_sinks: Some(Box::new({
            let toy = toy.clone();
            move |sinks| sinks.add(toy, 64)
        })),
        stop: stop.clone(),
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let daemon = rt.spawn(app::run(cfg, opts));
    let mut f = std::fs::File::create(dir.path().join("logs/train.log")).unwrap();
    for n in 1..=3 {
        f.write_all(block(n).as_bytes()).unwrap();
    }
    f.sync_all().unwrap();
    let opened = || {
        toy.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, ..)| *c == Change::Opened)
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while opened() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.cancel();
    let exit = rt.block_on(daemon).unwrap().unwrap();
    assert_eq!(exit, Exit::Stopped);
    let seen = toy.0.lock().unwrap().clone();
    let opened: Vec<_> = seen.iter().filter(|(c, ..)| *c == Change::Opened).collect();
    assert_eq!(opened.len(), 3, "{seen:?}");
    assert!(opened
        .iter()
        .all(|(_, id, cat, _)| *id > 0 && cat == "index_out_of_bounds"));
    // Every incident also completed, and the sink saw that too (the last ones at shutdown).
    for (_, id, _, _) in &opened {
        assert!(
            seen.iter().any(|(_, i, _, open)| i == id && !open),
            "incident {id} never seen closed: {seen:?}"
        );
    }
}
