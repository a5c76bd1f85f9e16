//! End-to-end: the built `ringkv-bench` against a real redis-server
//! (Debian's, /usr/bin/redis-server) on a free loopback port, and against
//! ringkv when `RINGKV_SERVER_BIN` names its binary.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BENCH: &str = env!("CARGO_BIN_EXE_ringkv-bench");
const REDIS: &str = "/usr/bin/redis-server";

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(bin: &str) -> Option<Server> {
        if !std::path::Path::new(bin).exists() {
            eprintln!("skipping: {bin} not installed");
            return None;
        }
        let port = free_port();
        let child = Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server");
        let s = Server { child, port };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "server did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(s)
    }

    fn redis() -> Option<Server> {
        Server::start(REDIS)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn bench(port: u16, args: &[&str]) -> Output {
    let out = Command::new(BENCH)
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run ringkv-bench");
    eprintln!("stderr: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The number after `"key":` at or after `from` in a JSON document, and
/// where it ends. Good enough for the flat documents ringkv-bench prints.
fn num_at(json: &str, key: &str, from: usize) -> (f64, usize) {
    let pat = format!("\"{key}\":");
    let at = json[from..]
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {json}"))
        + from
        + pat.len();
    let end = json[at..].find([',', '}']).unwrap() + at;
    (
        json[at..end]
            .parse()
            .unwrap_or_else(|_| panic!("{key} is not a number in {json}")),
        end,
    )
}

fn num(json: &str, key: &str) -> f64 {
    num_at(json, key, 0).0
}

/// Each test's JSON object text, in order.
fn tests_of(json: &str) -> Vec<String> {
    json.split("{\"test\":")
        .skip(1)
        .map(|s| s.to_string())
        .collect()
}

fn assert_percentiles_ordered(t: &str) {
    let mut at = t.find("\"latency_us\":").expect("latency_us");
    let mut prev = 0.0;
    for k in [
        "p50_us",
        "p90_us",
        "p99_us",
        "p99.9_us",
        "p99.99_us",
        "max_us",
    ] {
        let (v, end) = num_at(t, k, at);
        assert!(v > 0.0 && v >= prev, "{k}={v} after {prev} in {t}");
        prev = v;
        at = end;
    }
}

fn set_get_verify(io: &str) {
    let Some(s) = Server::redis() else { return };
    let o = bench(
        s.port,
        &[
            "-t",
            "set,get",
            "-n",
            "3000",
            "-c",
            "10",
            "-P",
            "3",
            "--threads",
            "2",
            "-d",
            "40",
            "--keyspace",
            "3000",
            "--key-pattern",
            "sequential",
            "--verify",
            "--json",
            "--io-uring",
            io,
        ],
    );
    assert!(o.status.success(), "exit {:?}", o.status);
    let j = stdout(&o);
    let backend = if io == "yes" { "io_uring" } else { "epoll" };
    assert!(j.contains(&format!("\"io\":\"{backend}\"")), "{j}");
    let tests = tests_of(&j);
    assert_eq!(tests.len(), 2, "{j}");
    for t in &tests {
        assert_eq!(num(t, "requests"), 3000.0, "{t}");
        assert_eq!(num(t, "replies"), 3000.0);
        assert_eq!(num(t, "errors"), 0.0);
        assert_eq!(num(t, "lost"), 0.0);
        assert!(num(t, "rps") > 0.0);
        assert!(num(t, "server_cpu_us_per_request") > 0.0, "{t}");
        assert_percentiles_ordered(t);
    }
    assert!(tests[0].starts_with("\"set\""));
    assert!(tests[1].starts_with("\"get\""));
    // Sequential keys over exactly the keyspace: every GET finds its SET.
    assert_eq!(num(&tests[1], "checked"), 3000.0, "{}", tests[1]);
    assert_eq!(num(&tests[1], "mismatches"), 0.0);
}

#[test]
fn set_get_verify_io_uring() {
    set_get_verify("yes");
}

#[test]
fn set_get_verify_epoll() {
    set_get_verify("no");
}

#[test]
fn verify_reports_wrong_values() {
    let Some(s) = Server::redis() else { return };
    let fill = [
        "-t",
        "set",
        "-n",
        "200",
        "-c",
        "4",
        "--keyspace",
        "200",
        "--key-pattern",
        "sequential",
        "-q",
    ];
    assert!(
        bench(s.port, &[&fill[..], &["-d", "10"]].concat())
            .status
            .success()
    );
    // Same keys, but this run expects 20-byte values.
    let o = bench(
        s.port,
        &[
            "-t",
            "get",
            "-n",
            "200",
            "-c",
            "4",
            "-d",
            "20",
            "--keyspace",
            "200",
            "--verify",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "mismatches must fail the run");
    let j = stdout(&o);
    assert_eq!(num(&j, "mismatches"), 200.0, "{j}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--verify found 200 wrong values"));
}

#[test]
fn open_loop_paces_requests_and_reports_lateness() {
    let Some(s) = Server::redis() else { return };
    for io in ["yes", "no"] {
        let o = bench(
            s.port,
            &[
                "-t",
                "get",
                "-n",
                "400",
                "-c",
                "4",
                "--rate",
                "2000",
                "--json",
                "--io-uring",
                io,
            ],
        );
        assert!(o.status.success());
        let j = stdout(&o);
        assert_eq!(num(&j, "requests"), 400.0);
        assert_eq!(num(&j, "errors"), 0.0);
        // 400 requests at 2000/s: the last is due 0.1995 s after the first.
        let d = num(&j, "duration_s");
        assert!(d >= 0.19, "open loop finished in {d} s: not paced");
        assert!(j.contains("\"lateness_us\":{\"count\":400"), "{j}");
        assert_percentiles_ordered(&j);
    }
}

#[test]
fn error_replies_are_counted_by_message() {
    let Some(s) = Server::redis() else { return };
    let common = [
        "-n",
        "50",
        "-c",
        "2",
        "--keyspace",
        "5",
        "--key-pattern",
        "sequential",
        "--json",
    ];
    assert!(
        bench(
            s.port,
            &[&common[..], &["--", "SET", "k:__rand_key__", "v"]].concat()
        )
        .status
        .success()
    );
    let o = bench(
        s.port,
        &[&common[..], &["--", "LPUSH", "k:__rand_key__", "__data__"]].concat(),
    );
    assert!(o.status.success());
    let j = stdout(&o);
    assert!(j.contains("\"test\":\"lpush\""), "{j}");
    assert_eq!(num(&j, "errors"), 50.0);
    assert!(
        j.contains("\"WRONGTYPE Operation against a key holding the wrong kind of value\":50"),
        "{j}"
    );
}

#[test]
fn server_pid_cost_and_text_report() {
    let Some(s) = Server::redis() else { return };
    let pid = s.child.id().to_string();
    let o = bench(
        s.port,
        &["-t", "ping,incr,mset", "-n", "2000", "--server-pid", &pid],
    );
    assert!(o.status.success());
    let t = stdout(&o);
    for h in [
        "====== ping ======",
        "====== incr ======",
        "====== mset ======",
    ] {
        assert!(t.contains(h), "{t}");
    }
    assert!(t.contains("2000 requests in"));
    assert!(
        t.contains("server CPU:") && t.contains("/proc/PID/stat"),
        "{t}"
    );
    assert!(t.contains("errors: none"));
    // Not a terminal: no progress line.
    assert!(!t.contains('\r'));
}

#[test]
fn histogram_out_plot_and_plot_subcommand() {
    let Some(s) = Server::redis() else { return };
    let dir = std::env::temp_dir().join(format!("ringkv-bench-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.hgrm");
    let b = dir.join("b.hgrm");
    let svg = dir.join("run.svg");
    let o = bench(
        s.port,
        &[
            "-t",
            "mixed",
            "-n",
            "1000",
            "-q",
            "--histogram-out",
            a.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    let run_svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(run_svg.matches("<polyline").count(), 2, "SET and GET lines");
    assert!(run_svg.trim_end().ends_with("</svg>"));
    let o = bench(
        s.port,
        &[
            "-t",
            "get",
            "-n",
            "1000",
            "-q",
            "-P",
            "8",
            "--histogram-out",
            b.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    let table = std::fs::read_to_string(&a).unwrap();
    assert!(table.contains("#[Label = SET]") && table.contains("#[Label = GET]"));
    assert!(table.contains("Value     Percentile TotalCount 1/(1-Percentile)"));

    let cmp = dir.join("cmp.svg");
    let o = Command::new(BENCH)
        .args([
            "plot",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            cmp.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = std::fs::read_to_string(&cmp).unwrap();
    assert_eq!(c.matches("<polyline").count(), 3, "{c}");
    assert!(
        c.contains("data-label=\"a: SET\"") && c.contains("data-label=\"b: GET\""),
        "{c}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A "server" that accepts connections and never answers: every request
/// must time out, be reported lost, and the run must still end.
#[test]
fn silent_server_times_out_instead_of_hanging() {
    for io in ["yes", "no"] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let keep = std::thread::spawn(move || {
            let mut held = Vec::new();
            l.set_nonblocking(true).unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(20) && held.len() < 4 {
                if let Ok((s, _)) = l.accept() {
                    held.push(s);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            held
        });
        let t = Instant::now();
        let o = bench(
            port,
            &[
                "-t",
                "ping",
                "-n",
                "4",
                "-c",
                "2",
                "--timeout",
                "300ms",
                "--no-server-cpu",
                "--json",
                "--io-uring",
                io,
            ],
        );
        assert!(t.elapsed() < Duration::from_secs(15));
        assert!(o.status.success());
        let j = stdout(&o);
        assert_eq!(num(&j, "requests"), 4.0, "{j}");
        assert_eq!(num(&j, "replies"), 0.0);
        assert_eq!(num(&j, "lost"), 4.0);
        assert_eq!(num(&j, "connection_failures"), 4.0);
        assert!(String::from_utf8_lossy(&o.stderr).contains("no reply for 0.3 s (--timeout)"));
        drop(keep.join());
    }
}

/// The server goes away mid-run: reported on stderr, and the run ends with
/// an error once reconnecting fails, instead of hanging.
#[test]
fn server_death_is_reported_not_hung_on() {
    let Some(mut s) = Server::redis() else { return };
    let port = s.port;
    let t = Instant::now();
    let child = Command::new(BENCH)
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "get",
            "--duration",
            "20s",
            "-c",
            "4",
            "--timeout",
            "1s",
            "--no-server-cpu",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    s.stop();
    let o = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    // Killed server: EOF or a reset, depending on timing.
    assert!(
        err.contains("server closed the connection") || err.contains("Connection reset"),
        "{err}"
    );
    assert!(err.contains("reconnecting failed"), "{err}");
}

/// A server restart inside the timeout: connections come back and the run
/// completes every request.
#[test]
fn server_restart_reconnects() {
    let Some(mut s) = Server::redis() else { return };
    let port = s.port;
    let child = Command::new(BENCH)
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "ping",
            "--rate",
            "500",
            "-n",
            "1000",
            "-c",
            "2",
            "--timeout",
            "5s",
            "--no-server-cpu",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s.stop();
    let mut again = Command::new(REDIS)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let _ = again.kill();
    let _ = again.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j = stdout(&o);
    assert_eq!(num(&j, "requests"), 1000.0);
    assert!(num(&j, "reconnects") >= 1.0, "{j}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("reconnected"));
}

/// Against ringkv itself, when its binary is given.
#[test]
fn against_ringkv_when_available() {
    let Ok(bin) = std::env::var("RINGKV_SERVER_BIN") else {
        eprintln!("skipping: RINGKV_SERVER_BIN not set");
        return;
    };
    let Some(s) = Server::start(&bin) else { return };
    let o = bench(
        s.port,
        &[
            "-t",
            "set,get",
            "-n",
            "2000",
            "-c",
            "8",
            "-P",
            "4",
            "--keyspace",
            "2000",
            "--key-pattern",
            "sequential",
            "--verify",
            "--json",
        ],
    );
    assert!(o.status.success());
    let j = stdout(&o);
    for t in tests_of(&j) {
        assert_eq!(num(&t, "requests"), 2000.0);
        assert_eq!(num(&t, "errors"), 0.0, "{t}");
        assert_percentiles_ordered(&t);
    }
    assert_eq!(num(&j, "mismatches"), 0.0);
    let _ = std::io::stderr().flush();
}

/// `--duration`: issuing stops at the deadline and every request in flight
/// still gets its reply (none lost, no timeout).
#[test]
fn duration_run_drains_in_flight_requests() {
    let Some(s) = Server::redis() else { return };
    for io in ["yes", "no"] {
        let o = bench(
            s.port,
            &[
                "-t",
                "ping",
                "--duration",
                "300ms",
                "-c",
                "8",
                "-P",
                "4",
                "--timeout",
                "20s",
                "--json",
                "--io-uring",
                io,
            ],
        );
        assert!(o.status.success());
        let j = stdout(&o);
        assert!(num(&j, "requests") > 0.0);
        assert_eq!(num(&j, "requests"), num(&j, "replies"), "{j}");
        assert_eq!(num(&j, "lost"), 0.0, "{j}");
        assert!(num(&j, "duration_s") < 10.0, "waited for a timeout: {j}");
    }
}

/// `ringkv-bench evict ARGS` against `port`.
fn evict(port: u16, args: &[&str]) -> Output {
    let out = Command::new(BENCH)
        .args(["evict", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run ringkv-bench evict");
    eprintln!("stderr: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The text of the JSON object that follows `"key":`.
fn object_at<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\":{{"))
        .unwrap_or_else(|| panic!("no {key} in {json}"));
    let end = json[at..].find('}').unwrap() + at;
    &json[at..=end]
}

const SMALL_EVICT: &[&str] = &[
    "--maxmemory",
    "2mb",
    "--keyspace",
    "50000",
    "--warmup",
    "2",
    "--cycles",
    "3",
    "--cycle-requests",
    "5000",
    "-P",
    "100",
];

#[test]
fn evict_measures_hit_rate_beside_exact_simulations() {
    let Some(s) = Server::redis() else { return };
    let o = evict(
        s.port,
        &[SMALL_EVICT, &["--json", "--samples", "10"]].concat(),
    );
    assert!(o.status.success());
    let j = stdout(&o);
    assert!(j.contains("\"status\":\"ok\"") && j.contains("\"policy\":\"allkeys-lru\""));
    assert!(j.contains("\"maxmemory_samples\":\"10\""), "{j}");
    assert!(num(object_at(&j, "fill"), "evicted_keys") > 0.0);
    assert_eq!(j.matches("\"cycle\":").count(), 5);
    let server = num(object_at(&j, "server"), "hit_rate");
    let lru = num(object_at(&j, "lru"), "hit_rate");
    assert!(server > 0.1 && server < 1.0, "server hit rate {server}");
    assert!(lru > 0.1 && lru < 1.0, "exact LRU hit rate {lru}");
    let ratio = num(&j, "ratio");
    assert!((ratio - server / lru).abs() < 1e-3 && ratio > 0.5 && ratio < 1.5);
    // 3 measured cycles of 5000 GETs each.
    let total = num(object_at(&j, "server"), "hits") + num(object_at(&j, "server"), "misses");
    assert_eq!(total, 15000.0);
    assert_eq!(num(&j, "errors"), 0.0);

    let o = evict(
        s.port,
        &[SMALL_EVICT, &["--policy", "allkeys-lfu"]].concat(),
    );
    assert!(o.status.success());
    let t = stdout(&o);
    assert!(
        t.contains("policy allkeys-lfu") && t.contains("server ÷ exact LFU"),
        "{t}"
    );
}

#[test]
fn evict_same_seed_same_trace() {
    let Some(s) = Server::redis() else { return };
    let dir = std::env::temp_dir();
    let file = |n: &str| dir.join(format!("ringkv-evict-{}-{n}.txt", std::process::id()));
    let run = |seed: &str, n: &str| {
        let path = file(n);
        let o = evict(
            s.port,
            &[
                SMALL_EVICT,
                &[
                    "--seed",
                    seed,
                    "--trace-out",
                    path.to_str().unwrap(),
                    "--json",
                ],
            ]
            .concat(),
        );
        assert!(o.status.success());
        let t = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        t
    };
    let (a, b, c) = (run("5", "a"), run("5", "b"), run("6", "c"));
    assert_eq!(a.lines().count(), 25_000);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn evict_reports_a_server_that_never_evicts() {
    let Some(s) = Server::redis() else { return };
    // No limit: the fill writes the whole keyspace, sees no eviction, stops.
    let o = evict(
        s.port,
        &["--maxmemory", "0", "--keyspace", "20000", "--json"],
    );
    assert!(o.status.success());
    let j = stdout(&o);
    assert!(j.contains("\"status\":\"no_eviction\""), "{j}");
    assert!(j.contains("\"stop\":\"keyspace written\"") && j.contains("\"cycles\":[]"));
    // A keyspace too large to write in time: the fill timeout ends it.
    let t = Instant::now();
    let o = evict(s.port, &["--maxmemory", "0", "--fill-timeout", "300ms"]);
    assert!(o.status.success());
    assert!(t.elapsed() < Duration::from_secs(10));
    let text = stdout(&o);
    assert!(
        text.contains("stopped: fill-timeout") && text.contains("no eviction"),
        "{text}"
    );
}
