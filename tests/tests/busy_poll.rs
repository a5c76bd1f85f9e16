//! `io-busy-poll-us`: after input, the event loop keeps the CPU (polling)
//! for the window instead of sleeping; with 0, and once the window has
//! passed, the server sleeps between requests.

use ringkv_e2e::{Reply, e2e};
use std::time::{Duration, Instant};

/// CPU time of every thread of `pid` so far (schedstat: ns on the CPU).
fn cpu_ns(pid: u32) -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = t.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    total
}

/// Server CPU while a client sends a PING every 5 ms for 400 ms.
fn cpu_under_sparse_pings(pid: u32, c: &mut ringkv_e2e::Raw) -> Duration {
    let before = cpu_ns(pid);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(400) {
        assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"));
        std::thread::sleep(Duration::from_millis(5));
    }
    Duration::from_nanos(cpu_ns(pid) - before)
}

e2e!(
    fn the_loop_polls_for_the_window_after_input_and_sleeps_otherwise(b) {
        let srv = b.server();
        let pid = srv.pid().unwrap();
        let mut c = srv.raw();
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "io-busy-poll-us"]),
            Reply::Array(vec![Reply::bulk("io-busy-poll-us"), Reply::bulk("0")])
        );
        let sleeping = cpu_under_sparse_pings(pid, &mut c);
        assert!(sleeping < Duration::from_millis(100), "off, yet {sleeping:?} of CPU");

        // 10 ms windows overlap the 5 ms gaps: the loop never sleeps.
        assert_eq!(c.cmd(&["CONFIG", "SET", "io-busy-poll-us", "10000"]), Reply::status("OK"));
        // Taken by the loops at the next cron tick (hz 10).
        std::thread::sleep(Duration::from_millis(250));
        let polling = cpu_under_sparse_pings(pid, &mut c);
        // Most of the 400 ms on an idle machine; other tests' load may take
        // a share of the CPU.
        assert!(
            polling > Duration::from_millis(60) && polling > 4 * sleeping,
            "on, {polling:?} of CPU (off: {sleeping:?})"
        );

        // No input: past the window the server sleeps.
        std::thread::sleep(Duration::from_millis(50));
        let before = cpu_ns(pid);
        std::thread::sleep(Duration::from_millis(400));
        let idle = Duration::from_nanos(cpu_ns(pid) - before);
        assert!(idle < Duration::from_millis(60), "idle, yet {idle:?} of CPU");

        assert_eq!(
            c.cmd(&["CONFIG", "SET", "io-busy-poll-us", "10001"]),
            Reply::err(
                "ERR CONFIG SET failed (possibly related to argument 'io-busy-poll-us') - argument must be between 0 and 10000 inclusive"
            )
        );
    }
);
