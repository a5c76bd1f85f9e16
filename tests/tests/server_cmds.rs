//! Server and connection commands through the `redis` crate (and a raw socket
//! where the connection's fate matters).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use ringkv_e2e::v::{arr, bulk, err, int, int_of, nil, ok, status, strings, text};
use ringkv_e2e::{Opts, Reply, e2e, q, query};

const NOT_INT: &str = "ERR value is not an integer or out of range";

e2e!(
    fn select_swapdb_flush_dbsize(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET a 0"), ok());
        assert_eq!(q(c, "SELECT 1"), ok());
        assert_eq!(q(c, "GET a"), nil());
        assert_eq!(q(c, "MSET a 1 b 1"), ok());
        assert_eq!(q(c, "DBSIZE"), int(2));
        assert_eq!(q(c, "SELECT 15"), ok());
        assert_eq!(q(c, "SELECT 16"), err("ERR DB index is out of range"));
        assert_eq!(q(c, "SELECT -1"), err("ERR DB index is out of range"));
        assert_eq!(q(c, "SELECT x"), err(NOT_INT));
        assert_eq!(q(c, "SWAPDB 0 1"), ok());
        assert_eq!(q(c, "SELECT 0"), ok());
        assert_eq!(q(c, "GET a"), bulk("1"));
        assert_eq!(q(c, "DBSIZE"), int(2));
        assert_eq!(q(c, "SWAPDB 0 16"), err("ERR DB index is out of range"));
        assert_eq!(q(c, "SWAPDB 0 y"), err("ERR invalid second DB index"));
        assert_eq!(q(c, "SWAPDB x 1"), err("ERR invalid first DB index"));
        assert_eq!(q(c, "SWAPDB 3 3"), ok());
        // Another connection on db 1 sees the swapped data.
        let c2 = &mut srv.client();
        assert_eq!(q(c2, "SELECT 1"), ok());
        assert_eq!(q(c2, "GET a"), bulk("0"));
        assert_eq!(q(c, "FLUSHDB"), ok());
        assert_eq!(q(c, "DBSIZE"), int(0));
        assert_eq!(q(c2, "DBSIZE"), int(1));
        assert_eq!(q(c, "MSET x 1 y 2"), ok());
        assert_eq!(q(c, "FLUSHDB ASYNC"), ok());
        assert_eq!(q(c, "DBSIZE"), int(0));
        assert_eq!(q(c, "FLUSHDB BOGUS"), err("ERR syntax error"));
        assert_eq!(q(c, "SET x 1"), ok());
        assert_eq!(q(c, "FLUSHALL SYNC"), ok());
        assert_eq!(q(c2, "DBSIZE"), int(0));
        assert_eq!(q(c, "SET x 1"), ok());
        assert_eq!(q(c2, "SET x 1"), ok());
        assert_eq!(q(c, "FLUSHALL ASYNC"), ok());
        assert_eq!(q(c, "DBSIZE"), int(0));
        assert_eq!(q(c2, "DBSIZE"), int(0));
        assert_eq!(q(c, "FLUSHALL"), ok());
    }
);

e2e!(
    fn client_name_id_list_info(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "CLIENT GETNAME"), nil());
        assert_eq!(q(c, "CLIENT SETNAME conn-one"), ok());
        assert_eq!(q(c, "CLIENT GETNAME"), bulk("conn-one"));
        assert_eq!(
            query(c, &["CLIENT", "SETNAME", "has space"]),
            err("ERR Client names cannot contain spaces, newlines or special characters.")
        );
        let id = int_of(&q(c, "CLIENT ID"));
        assert!(id > 0);
        let c2 = &mut srv.client();
        assert!(int_of(&q(c2, "CLIENT ID")) > id, "client ids increase");
        let list = text(&q(c, "CLIENT LIST"));
        let me = list
            .lines()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap_or_else(|| panic!("CLIENT LIST lacks id={id}:\n{list}"));
        for field in ["addr=127.0.0.1:", "laddr=127.0.0.1:", "fd=", "name=conn-one", "age=", "idle=", "db=0", "cmd=client|list", "resp=2"] {
            assert!(me.contains(field), "CLIENT LIST line lacks {field}: {me}");
        }
        assert!(list.lines().count() >= 2);
        let info = text(&q(c, "CLIENT INFO"));
        assert!(info.starts_with(&format!("id={id} ")), "{info}");
        assert!(info.contains("cmd=client|info"), "{info}");
        assert_eq!(q(c, "CLIENT SETNAME"), err("ERR wrong number of arguments for 'client|setname' command"));
        // CLIENT SETINFO and NO-TOUCH arrived in Redis 7.2 / Valkey; Debian's
        // 7.0 lacks them.
        if !b.is_redis() {
            assert_eq!(q(c, "CLIENT SETINFO LIB-NAME mylib"), ok());
            assert_eq!(q(c, "CLIENT SETINFO LIB-VER 1.2"), ok());
            assert!(text(&q(c, "CLIENT INFO")).contains("lib-name=mylib lib-ver=1.2"));
            assert_eq!(
                q(c, "CLIENT SETINFO BOGUS x"),
                err("ERR Unrecognized option 'BOGUS'")
            );
            assert_eq!(q(c, "CLIENT NO-TOUCH on"), ok());
            assert_eq!(q(c, "CLIENT NO-TOUCH maybe"), err("ERR syntax error"));
        }
        assert_eq!(q(c, "CLIENT NO-EVICT on"), ok());
        assert_eq!(q(c, "CLIENT NO-EVICT maybe"), err("ERR syntax error"));
        assert_eq!(
            q(c, "CLIENT BOGUS"),
            err("ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.")
        );
        // An empty name clears it.
        assert_eq!(query(c, &["CLIENT", "SETNAME", ""]), ok());
        assert_eq!(q(c, "CLIENT GETNAME"), nil());
    }
);

e2e!(
    fn client_kill(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut victim = srv.raw();
        let vid = match victim.cmd(&["CLIENT", "ID"]) {
            Reply::Int(i) => i,
            o => panic!("{o:?}"),
        };
        assert_eq!(query(c, &["CLIENT", "KILL", "ID", &vid.to_string()]), int(1));
        victim.expect_closed();
        assert_eq!(q(c, "CLIENT KILL ID 999999"), int(0));
        assert_eq!(q(c, "CLIENT KILL 1.2.3.4:5"), err("ERR No such client"));
        // Old form: by address.
        let mut v2 = srv.raw();
        assert_eq!(v2.cmd(&["PING"]), Reply::status("PONG"));
        let addr = v2.stream.local_addr().unwrap().to_string();
        assert_eq!(query(c, &["CLIENT", "KILL", &addr]), ok());
        v2.expect_closed();
        // Killing yourself with SKIPME no leaves you connected? No: it closes you.
        let mut v3 = srv.raw();
        assert_eq!(v3.cmd(&["CLIENT", "SETNAME", "victim3"]), Reply::status("OK"));
        let addr3 = v3.stream.local_addr().unwrap().to_string();
        assert_eq!(query(c, &["CLIENT", "KILL", "ADDR", &addr3, "SKIPME", "yes"]), int(1));
        v3.expect_closed();
        // Valkey 8.1: a non-number where the ids start is a syntax error.
        let id_err = if b.is_redis() {
            "ERR client-id should be greater than 0"
        } else {
            "ERR syntax error"
        };
        assert_eq!(q(c, "CLIENT KILL ID abc"), err(id_err));
        assert_eq!(q(c, "PING"), status("PONG"));
    }
);

e2e!(
    fn config_get_set(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG GET maxclients"), arr(vec![bulk("maxclients"), bulk("10000")]));
        assert_eq!(q(c, "CONFIG SET maxclients 500"), ok());
        assert_eq!(q(c, "CONFIG GET maxclients"), arr(vec![bulk("maxclients"), bulk("500")]));
        assert_eq!(q(c, "CONFIG GET nosuch"), arr(vec![]));
        assert_eq!(
            q(c, "CONFIG GET port"),
            arr(vec![bulk("port"), bulk(&srv.port.to_string())])
        );
        assert_eq!(q(c, "CONFIG GET databases"), arr(vec![bulk("databases"), bulk("16")]));
        assert_eq!(
            q(c, "CONFIG SET nosuch 1"),
            err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
        );
        assert_eq!(
            q(c, "CONFIG SET maxclients abc"),
            err("ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer")
        );
        assert_eq!(
            q(c, "CONFIG SET databases 4"),
            err("ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config")
        );
        // Several at once, memory units, and the glob form of GET.
        assert_eq!(q(c, "CONFIG SET timeout 30 hz 20"), ok());
        assert_eq!(q(c, "CONFIG GET timeout"), arr(vec![bulk("timeout"), bulk("30")]));
        assert_eq!(q(c, "CONFIG SET client-query-buffer-limit 2mb"), ok());
        assert_eq!(
            q(c, "CONFIG GET client-query-buffer-limit"),
            arr(vec![bulk("client-query-buffer-limit"), bulk("2097152")])
        );
        assert_eq!(q(c, "CONFIG SET loglevel warning"), ok());
        // Valkey (and Redis >= 7.2) added the `nothing` level.
        let levels = if b.is_redis() { "debug, verbose, notice, warning" } else { "debug, verbose, notice, warning, nothing" };
        assert_eq!(
            q(c, "CONFIG SET loglevel loud"),
            Err(format!("ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: {levels}"))
        );
        let got = strings(&q(c, "CONFIG GET max*"));
        let names: Vec<&String> = got.iter().step_by(2).collect();
        assert!(names.iter().any(|n| *n == "maxclients"), "{names:?}");
        assert!(names.iter().any(|n| *n == "maxmemory"), "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("max")), "{names:?}");
        let two = strings(&q(c, "CONFIG GET timeout hz"));
        assert_eq!(two.len(), 4);
        assert_eq!(q(c, "CONFIG RESETSTAT"), ok());
        assert_eq!(
            q(c, "CONFIG REWRITE"),
            err("ERR The server is running without a config file")
        );
    }
);

e2e!(
    fn command_count_info_docs_list(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let n = int_of(&q(c, "COMMAND COUNT"));
        assert!(n >= 60, "COMMAND COUNT {n}");
        let info = q(c, "COMMAND INFO get set nosuch").unwrap();
        let Value::Array(items) = info else { panic!("{info:?}") };
        assert_eq!(items.len(), 3);
        let Value::Array(get) = &items[0] else { panic!("{:?}", items[0]) };
        assert!(get.len() >= 10, "COMMAND INFO entry has {} fields", get.len());
        assert_eq!(get[0], Value::BulkString(b"get".to_vec()));
        assert_eq!(get[1], Value::Int(2));
        assert!(matches!(&get[2], Value::Array(f) if f.contains(&Value::SimpleString("readonly".into()))), "flags {:?}", get[2]);
        assert_eq!(&get[3..6], &[Value::Int(1), Value::Int(1), Value::Int(1)]);
        let Value::Array(set) = &items[1] else { panic!() };
        assert_eq!(set[1], Value::Int(-3));
        assert_eq!(items[2], Value::Nil);
        let docs = q(c, "COMMAND DOCS get").unwrap();
        let Value::Array(d) = docs else { panic!("{docs:?}") };
        assert_eq!(d.len(), 2);
        assert_eq!(d[0], Value::BulkString(b"get".to_vec()));
        let Value::Array(fields) = &d[1] else { panic!("{:?}", d[1]) };
        let names: Vec<String> = strings(&Ok(Value::Array(fields.iter().step_by(2).cloned().collect())));
        for f in ["summary", "since", "group", "complexity", "arguments"] {
            assert!(names.iter().any(|n| n == f), "COMMAND DOCS get lacks {f}: {names:?}");
        }
        let list = strings(&q(c, "COMMAND LIST"));
        // COMMAND LIST also names subcommands (`config|get`); COUNT does not.
        assert_eq!(list.iter().filter(|x| !x.contains('|')).count() as i64, n);
        assert!(list.iter().any(|x| x == "config|get"), "COMMAND LIST lacks config|get");
        for cmd in ["get", "set", "scan", "config", "client", "hello"] {
            assert!(list.iter().any(|x| x == cmd), "COMMAND LIST lacks {cmd}");
        }
        let full = q(c, "COMMAND").unwrap();
        assert!(matches!(full, Value::Array(ref a) if a.len() as i64 == n));
    }
);

e2e!(
    fn auth_requirepass(b) {
        let srv = b.start(Opts::new().arg("requirepass", "s3cret"));
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["GET", "x"]), Reply::err("NOAUTH Authentication required."));
        assert_eq!(raw.cmd(&["PING"]), Reply::err("NOAUTH Authentication required."));
        assert_eq!(
            raw.cmd(&["AUTH", "wrong"]),
            Reply::err("WRONGPASS invalid username-password pair or user is disabled.")
        );
        assert_eq!(
            raw.cmd(&["AUTH", "default", "wrong"]),
            Reply::err("WRONGPASS invalid username-password pair or user is disabled.")
        );
        assert_eq!(
            raw.cmd(&["AUTH", "a", "b", "c"]),
            Reply::err("ERR syntax error")
        );
        assert_eq!(raw.cmd(&["AUTH", "s3cret"]), Reply::status("OK"));
        assert_eq!(raw.cmd(&["SET", "x", "1"]), Reply::status("OK"));
        let mut raw2 = srv.raw();
        assert_eq!(raw2.cmd(&["AUTH", "default", "s3cret"]), Reply::status("OK"));
        assert_eq!(raw2.cmd(&["GET", "x"]), Reply::bulk("1"));
        // The redis crate with a password in the URL.
        let mut con = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", srv.port))
            .unwrap()
            .get_connection()
            .unwrap();
        assert_eq!(query(&mut con, &["GET", "x"]), bulk("1"));
        // Without a password configured.
        let open = b.server();
        let mut r = open.raw();
        assert_eq!(
            r.cmd(&["AUTH", "x"]),
            Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
        );
    }
);

e2e!(
    fn ping_echo_time_debug_sleep(b) {
        let srv = b.start(Opts::new().arg("enable-debug-command", "yes"));
        let c = &mut srv.client();
        assert_eq!(q(c, "PING"), status("PONG"));
        assert_eq!(q(c, "PING hello"), bulk("hello"));
        assert_eq!(q(c, "PING a b"), err("ERR wrong number of arguments for 'ping' command"));
        assert_eq!(query(c, &["ECHO", "hi there"]), bulk("hi there"));
        assert_eq!(q(c, "ECHO"), err("ERR wrong number of arguments for 'echo' command"));
        let t = strings(&q(c, "TIME"));
        assert_eq!(t.len(), 2);
        let secs: u64 = t[0].parse().unwrap();
        let micros: u64 = t[1].parse().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(secs.abs_diff(now) <= 2, "TIME {secs} vs {now}");
        assert!(micros < 1_000_000);
        assert_eq!(q(c, "DEBUG SLEEP 0"), ok());
        let start = std::time::Instant::now();
        assert_eq!(q(c, "DEBUG SLEEP 0.2"), ok());
        assert!(start.elapsed() >= Duration::from_millis(190));
        // In RESP3, a subscribed-style PING is not in scope; PING in RESP3 is a
        // simple string too.
        let c3 = &mut srv.client_resp3();
        assert_eq!(q(c3, "PING"), status("PONG"));
    }
);

e2e!(
    fn debug_refused_by_default(b) {
        let srv = b.server();
        let mut raw = srv.raw();
        let r = raw.cmd(&["DEBUG", "SLEEP", "0"]);
        let Reply::Error(e) = r else { panic!("DEBUG allowed by default: {r:?}") };
        assert!(e.starts_with("ERR DEBUG command not allowed."), "{e}");
    }
);

e2e!(
    fn quit_and_reset(b) {
        let srv = b.server();
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["SELECT", "3"]), Reply::status("OK"));
        assert_eq!(raw.cmd(&["CLIENT", "SETNAME", "n"]), Reply::status("OK"));
        assert!(matches!(raw.cmd(&["HELLO", "3"]), Reply::Map(_)));
        assert_eq!(raw.cmd(&["RESET"]), Reply::status("RESET"));
        assert_eq!(raw.cmd(&["CLIENT", "GETNAME"]), Reply::Nil);
        raw.send(b"GET nope\r\n");
        assert_eq!(raw.read_line(), "$-1", "RESET returns to RESP2");
        assert_eq!(raw.cmd(&["SET", "k", "db0"]), Reply::status("OK"));
        assert_eq!(raw.cmd(&["QUIT"]), Reply::status("OK"));
        raw.expect_closed();
        let c = &mut srv.client();
        assert_eq!(q(c, "GET k"), bulk("db0"));
        // Commands after QUIT in the same pipeline are not executed.
        let mut raw = srv.raw();
        raw.send(b"QUIT\r\nSET after 1\r\n");
        assert_eq!(raw.read_line(), "+OK");
        raw.expect_closed();
        assert_eq!(q(c, "EXISTS after"), int(0));
    }
);

e2e!(
    fn info_sections_and_stats(b) {
        let srv = b.server();
        let c = &mut srv.client();
        // Start from zero: the client library's own hello may have counted.
        assert_eq!(q(c, "CONFIG RESETSTAT"), ok());
        assert_eq!(q(c, "SET a 1"), ok());
        assert_eq!(q(c, "GET a"), bulk("1"));
        assert_eq!(q(c, "GET nope"), nil());
        let _ = q(c, "INCR a x");
        let _ = q(c, "NOSUCHCMD");
        let all = text(&q(c, "INFO all"));
        for s in ["# Server", "# Clients", "# Memory", "# Stats", "# CPU", "# Keyspace", "# Commandstats", "# Errorstats"] {
            assert!(all.contains(s), "INFO all lacks {s}");
        }
        assert!(all.contains("\r\n"), "INFO lines end in CRLF");
        let stats = text(&q(c, "INFO stats"));
        for f in ["total_connections_received:", "total_commands_processed:", "instantaneous_ops_per_sec:", "keyspace_hits:1", "keyspace_misses:1", "rejected_connections:0", "expired_keys:0", "total_net_input_bytes:", "total_error_replies:"] {
            assert!(stats.contains(f), "INFO stats lacks {f}:\n{stats}");
        }
        let cs = text(&q(c, "INFO commandstats"));
        assert!(cs.contains("cmdstat_set:calls=1,usec="), "{cs}");
        assert!(cs.contains("cmdstat_get:calls=2,"), "{cs}");
        assert!(cs.contains("rejected_calls=1"), "INCR arity error is a rejected call: {cs}");
        let es = text(&q(c, "INFO errorstats"));
        assert!(es.contains("errorstat_ERR:count=2"), "{es}");
        let ks = text(&q(c, "INFO keyspace"));
        assert!(ks.contains("db0:keys=1,expires=0,avg_ttl=0"), "{ks}");
        let two = text(&q(c, "INFO server clients"));
        assert!(two.contains("# Server") && two.contains("# Clients") && !two.contains("# Memory"));
        let cpu = text(&q(c, "INFO cpu"));
        assert!(cpu.contains("used_cpu_sys:") && cpu.contains("used_cpu_user:"), "{cpu}");
        let mem = text(&q(c, "INFO memory"));
        for f in ["used_memory:", "used_memory_human:", "used_memory_rss:", "maxmemory:0", "mem_fragmentation_ratio:"] {
            assert!(mem.contains(f), "INFO memory lacks {f}");
        }
        let srvinfo = text(&q(c, "INFO server"));
        assert!(srvinfo.contains(&format!("tcp_port:{}", srv.port)));
        assert!(srvinfo.contains(&format!("process_id:{}", srv.pid().unwrap())));
        assert!(srvinfo.contains("redis_version:"), "clients read redis_version");
        assert_eq!(q(c, "CONFIG RESETSTAT"), ok());
        let cs = text(&q(c, "INFO commandstats"));
        assert!(!cs.contains("cmdstat_set:"), "{cs}");
    }
);

/// CLIENT LIST's and KILL's filters as Valkey 8.1 answers them: errors
/// word for word, and how many clients match.
fn client_filter_answers(srv: &ringkv_e2e::Server) -> Vec<String> {
    let mut me = srv.raw();
    let _other = srv.raw();
    let mut out = Vec::new();
    let filters: &[&[&str]] = &[
        &["ID", "abc"],
        &["ID", "0"],
        &["ID"],
        &["TYPE", "foo"],
        &["MAXAGE", "0"],
        &["MAXAGE", "x"],
        &["SKIPME", "maybe"],
        &["USER", "nobody"],
        &["USER", "default"],
        &["ADDR", "1.2.3.4:5"],
        &["TYPE", "normal", "SKIPME", "yes"],
        &["TYPE", "normal", "SKIPME", "no"],
        &["MAXAGE", "100"],
        &["FOO", "bar"],
    ];
    let kills: &[&[&str]] = &[
        &["ID", "abc"],
        &["ID", "0"],
        &["TYPE", "foo"],
        &["MAXAGE", "0"],
        &["MAXAGE", "x"],
        &["SKIPME", "maybe"],
        &["USER", "nobody"],
        &["ADDR", "1.2.3.4:5"],
        &["FOO", "bar"],
        &["ID", "999999", "888888"],
    ];
    let runs = filters
        .iter()
        .map(|f| ("LIST", f))
        .chain(kills.iter().map(|f| ("KILL", f)));
    for (verb, f) in runs {
        let mut args = vec!["CLIENT", verb];
        args.extend_from_slice(f);
        let r = match me.cmd(&args) {
            ringkv_e2e::Reply::Error(e) => e,
            ringkv_e2e::Reply::Int(n) => format!("killed {n}"),
            other => format!("{} clients", other.text().lines().count()),
        };
        out.push(format!("{args:?} -> {r}"));
    }
    out
}

e2e!(
    ringkv_only fn client_list_and_kill_filters_answer_as_valkey(b) {
        let ours = client_filter_answers(&b.server());
        let theirs = client_filter_answers(&ringkv_e2e::Backend::Valkey.server());
        assert_eq!(ours, theirs);
    }
);

/// One command of LATENCY HISTOGRAM: its name, calls, and (µs, calls at
/// or below) buckets.
type CommandHistogram = (String, i64, Vec<(i64, i64)>);

/// LATENCY HISTOGRAM's reply in RESP3, sorted by command.
fn latency_histograms(c: &mut ringkv_e2e::Raw, names: &[&str]) -> Vec<CommandHistogram> {
    let mut args = vec!["LATENCY", "HISTOGRAM"];
    args.extend_from_slice(names);
    let Reply::Map(commands) = c.cmd(&args) else {
        panic!("not a map");
    };
    let int = |r: &Reply| match r {
        Reply::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    let mut out: Vec<_> = commands
        .into_iter()
        .map(|(name, body)| {
            let Reply::Map(fields) = body else {
                panic!("not a map: {body:?}");
            };
            assert_eq!(fields[0].0, Reply::bulk("calls"));
            assert_eq!(fields[1].0, Reply::bulk("histogram_usec"));
            let Reply::Map(buckets) = &fields[1].1 else {
                panic!("buckets not a map");
            };
            let buckets = buckets.iter().map(|(k, v)| (int(k), int(v))).collect();
            (name.text(), int(&fields[0].1), buckets)
        })
        .collect();
    out.sort();
    out
}

e2e!(
    ringkv_only fn latency_statistics_read_as_valkeys(b) {
        // The same commands on both servers: the same commands and calls
        // in LATENCY HISTOGRAM, buckets from the same series, and the same
        // INFO latencystats lines (durations aside).
        let ours = b.server();
        let theirs = ringkv_e2e::Backend::Valkey.server();
        let script: &[&[&str]] = &[
            &["SET", "k", "v"],
            &["SET", "k", "w"],
            &["GET", "k"],
            &["CONFIG", "GET", "hz"],
            &["MULTI"],
            &["INCR", "n"],
            &["INCR", "n"],
            &["EXEC"],
            &["BLPOP", "empty", "0.01"],
            &["CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.99 100"],
        ];
        // Bucket bounds: the last nanosecond two significant figures
        // hold with 2^(10+k) (its bucket is 2^(3+k) wide), in µs.
        let series: Vec<i64> = (0..20).map(|k| ((1i64 << (10 + k)) + (1 << (3 + k)) - 1) / 1000).collect();
        let mut seen = Vec::new();
        for srv in [&ours, &theirs] {
            let mut c = srv.raw();
            c.cmd(&["HELLO", "3"]);
            for cmd in script {
                c.cmd(cmd);
            }
            let hists = latency_histograms(&mut c, &["set", "get", "config", "incr", "exec", "blpop", "nosuch"]);
            for (name, calls, buckets) in &hists {
                // Cumulative counts that end at the calls; bucket bounds
                // from Valkey's series (1, 2, 4, 8, 16, 33, 66, 132 µs ...).
                assert_eq!(buckets.last().map(|b| b.1), Some(*calls), "{name}");
                assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{name}");
                assert!(buckets.iter().all(|&(us, _)| series.contains(&us)), "{name}: {buckets:?}");
            }
            let summary: Vec<(String, i64)> = hists.into_iter().map(|(n, calls, _)| (n, calls)).collect();
            let Reply::Verbatim(_, info) = c.cmd(&["INFO", "latencystats"]) else {
                panic!("INFO not verbatim");
            };
            let mut lines: Vec<String> = String::from_utf8(info)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("latency_percentiles_usec_hello") && !l.starts_with("latency_percentiles_usec_latency"))
                .map(|l| {
                    // Keep the names, drop the durations.
                    l.split(',')
                        .map(|kv| kv.split('=').next().unwrap().to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            lines.sort();
            seen.push((summary, lines));
        }
        assert_eq!(seen[0], seen[1]);
    }
);

e2e!(
    ringkv_only fn the_latency_monitor_answers_as_valkeys(b) {
        let opts = || {
            Opts::new()
                .arg("enable-debug-command", "yes")
                .arg("latency-monitor-threshold", "5")
        };
        let ours = b.start(opts());
        let theirs = ringkv_e2e::Backend::Valkey.start(opts());
        let mut seen = Vec::new();
        for srv in [&ours, &theirs] {
            let mut c = srv.raw();
            assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Reply::Array(vec![]));
            c.cmd(&["DEBUG", "SLEEP", "0.02"]);
            c.cmd(&["DEBUG", "SLEEP", "0"]);
            let Reply::Array(events) = c.cmd(&["LATENCY", "LATEST"]) else {
                panic!("LATEST not an array");
            };
            // One event, `command`: its time, latest, max, sum and count.
            let shape: Vec<(String, usize)> = events
                .iter()
                .map(|e| match e {
                    Reply::Array(f) => (f[0].text(), f.len()),
                    other => panic!("{other:?}"),
                })
                .collect();
            let Reply::Array(f) = &events[0] else { unreachable!() };
            let int = |r: &Reply| match r {
                Reply::Int(n) => *n,
                other => panic!("{other:?}"),
            };
            assert!(int(&f[2]) >= 20 && int(&f[3]) >= 20 && int(&f[5]) == 1, "{f:?}");
            let Reply::Array(history) = c.cmd(&["LATENCY", "HISTORY", "command"]) else {
                panic!("HISTORY not an array");
            };
            let resets = (c.cmd(&["LATENCY", "RESET", "nosuch"]), c.cmd(&["LATENCY", "RESET"]));
            seen.push((shape, history.len(), resets));
        }
        assert_eq!(seen[0], seen[1]);
    }
);

/// Sleeps until `past_ms` into the server's next second (by its TIME).
fn sleep_to_next_second(c: &mut ringkv_e2e::Raw, past_ms: u64) {
    let Reply::Array(t) = c.cmd(&["TIME"]) else {
        panic!("TIME not an array");
    };
    let us: u64 = t[1].text().parse().unwrap();
    std::thread::sleep(Duration::from_micros(1_000_000 - us + past_ms * 1000));
}

/// LATENCY GRAPH command read in one second of the server's clock (tried
/// at most 3 times): the graph's text and that second.
fn graph_in_one_second(c: &mut ringkv_e2e::Raw) -> (String, i64) {
    let secs = |c: &mut ringkv_e2e::Raw| match c.cmd(&["TIME"]) {
        Reply::Array(t) => t[0].text().parse::<i64>().unwrap(),
        other => panic!("{other:?}"),
    };
    for _ in 0..3 {
        let before = secs(c);
        let graph = c.cmd(&["LATENCY", "GRAPH", "command"]);
        assert!(matches!(graph, Reply::Bulk(_)), "{graph:?}");
        if secs(c) == before {
            return (graph.text(), before);
        }
    }
    panic!("no LATENCY GRAPH within one second in 3 tries");
}

e2e!(
    ringkv_only fn latency_graph_and_doctor_read_as_valkeys(b) {
        // The same spikes on both servers, a second apart: each graph
        // agrees with its server's HISTORY and LATEST (header, one column
        // per sample, the highest at the top, the lowest on the floor,
        // each labelled with its age), and both graphs and DOCTOR reports
        // have the same shape.
        let opts = || {
            Opts::new()
                .arg("enable-debug-command", "yes")
                .arg("latency-monitor-threshold", "1")
        };
        let ours = b.start(opts());
        let theirs = ringkv_e2e::Backend::Valkey.start(opts());
        let mut seen = Vec::new();
        for srv in [&ours, &theirs] {
            let mut c = srv.raw();
            let help = c.cmd(&["LATENCY", "HELP"]);
            // The first commands of a new server may be slow on a loaded
            // machine: what they recorded goes.
            assert!(matches!(c.cmd(&["LATENCY", "RESET"]), Reply::Int(_)));
            let quiet = c.cmd(&["LATENCY", "DOCTOR"]).text();
            assert!(quiet.starts_with("No latency spike"), "{quiet}");
            // (An event neither server has: on a loaded machine any
            // command may already have taken a millisecond.)
            let none = c.cmd(&["LATENCY", "GRAPH", "fork"]);
            assert_eq!(none, Reply::err("ERR No samples available for event 'fork'"));
            for ms in ["0.02", "0.06", "0.04"] {
                sleep_to_next_second(&mut c, 50);
                c.cmd(&["DEBUG", "SLEEP", ms]);
            }
            let (graph, now) = graph_in_one_second(&mut c);
            let Reply::Array(history) = c.cmd(&["LATENCY", "HISTORY", "command"]) else {
                panic!("HISTORY not an array");
            };
            let samples: Vec<(i64, i64)> = history
                .iter()
                .map(|s| match s {
                    Reply::Array(f) => (f[0].text().parse().unwrap(), f[1].text().parse().unwrap()),
                    other => panic!("{other:?}"),
                })
                .collect();
            let Reply::Array(latest) = c.cmd(&["LATENCY", "LATEST"]) else {
                panic!("LATEST not an array");
            };
            let all_time = latest
                .iter()
                .find_map(|e| match e {
                    Reply::Array(f) if f[0].text() == "command" => Some(f[3].text()),
                    _ => None,
                })
                .expect("command in LATEST");
            let high = samples.iter().map(|s| s.1).max().unwrap();
            let low = samples.iter().map(|s| s.1).min().unwrap();

            let lines: Vec<&str> = graph.lines().collect();
            assert_eq!(
                lines[0],
                format!("command - high {high} ms, low {low} ms (all time high {all_time} ms)")
            );
            assert_eq!(lines[1], "-".repeat(80));
            let n = samples.len();
            assert!(lines[2..7].iter().all(|l| l.len() == n), "{graph}");
            assert_eq!(lines[6], " ".repeat(n), "an empty row before the labels");
            let column = |j: usize| -> String { lines[2..6].iter().map(|l| &l[j..=j]).collect() };
            let top = samples.iter().position(|s| s.1 == high).unwrap();
            let floor = samples.iter().position(|s| s.1 == low).unwrap();
            assert!(column(top).starts_with('#'), "{graph}");
            assert_eq!(column(floor), "   _", "{graph}");
            // Ages under a minute are labelled in seconds.
            let labels: Vec<String> = samples.iter().map(|s| format!("{}s", now - s.0)).collect();
            assert!(samples.iter().all(|s| now - s.0 < 60));
            let label_rows: Vec<String> = (0..labels.iter().map(String::len).max().unwrap())
                .map(|k| labels.iter().map(|l| l.chars().nth(k).unwrap_or(' ')).collect())
                .collect();
            assert_eq!(lines[7..], label_rows, "{graph}");
            assert_eq!(
                c.cmd(&["LATENCY", "GRAPH", "COMMAND"]),
                Reply::err("ERR No samples available for event 'COMMAND'")
            );

            let report = c.cmd(&["LATENCY", "DOCTOR"]).text();
            assert!(report.starts_with("Latency spikes"), "{report}");
            let stats = format!("command: {n} latency spikes (average ");
            let line = report.lines().find(|l| l.contains(&stats)).unwrap_or_else(|| panic!("{report}"));
            assert!(line.ends_with(&format!("Worst all time event {all_time}ms.")), "{line}");
            // The three sleeps are spikes of their own; a loaded machine may
            // add one (either server), so the count is not compared.
            assert!(n >= 3, "{graph}");
            seen.push((help, report.contains("CONFIG SET slowlog-log-slower-than 1000")));
        }
        assert_eq!(seen[0], seen[1]);
    }
);

/// INFO stats counters as numbers.
fn stat(c: &mut ringkv_e2e::Raw, name: &str) -> u64 {
    info_num(c, "stats", name)
}

fn info_num(c: &mut ringkv_e2e::Raw, section: &str, name: &str) -> u64 {
    let info = c.cmd(&["INFO", section]).text();
    let v = ringkv_e2e::info_field(&info, name);
    v.parse().unwrap_or_else(|_| panic!("{name}:{v}"))
}

e2e!(
    ringkv_only fn eventloop_counters_move_as_valkeys(b) {
        // The same steps on both servers, the same assertions on each: a
        // command's time is in both sums, an idle server's cron is a
        // cycle, RESETSTAT starts the counters again.
        let opts = || Opts::new().arg("enable-debug-command", "yes");
        let ours = b.start(opts());
        let theirs = ringkv_e2e::Backend::Valkey.start(opts());
        for srv in [&ours, &theirs] {
            let c = &mut srv.raw();
            let who = if std::ptr::eq(srv, &ours) { "ringkv" } else { "valkey" };
            let cycles = stat(c, "eventloop_cycles");
            let (all, cmd) = (
                stat(c, "eventloop_duration_sum"),
                stat(c, "eventloop_duration_cmd_sum"),
            );
            assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.05"]), Reply::status("OK"));
            assert!(stat(c, "eventloop_cycles") >= cycles + 2, "{who}");
            let all2 = stat(c, "eventloop_duration_sum");
            let cmd2 = stat(c, "eventloop_duration_cmd_sum");
            assert!(cmd2 >= cmd + 50_000, "{who}: cmd {cmd} -> {cmd2}");
            assert!(all2 >= all + 50_000, "{who}: all {all} -> {all2}");
            assert!(all2 >= cmd2, "{who}: all {all2} < cmd {cmd2}");
            assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Reply::status("OK"));
            assert!(stat(c, "eventloop_cycles") < cycles + 2, "{who}");
            assert!(stat(c, "eventloop_duration_cmd_sum") < 50_000, "{who}");
            // Cron runs `hz` (10) times a second on an idle server; the
            // rate is a mean over the samples of the last 1.6 s.
            std::thread::sleep(Duration::from_millis(600));
            let rate = stat(c, "instantaneous_eventloop_cycles_per_sec");
            assert!((1..1000).contains(&rate), "{who}: {rate} cycles/s");
            let each = stat(c, "instantaneous_eventloop_duration_usec");
            assert!(each < 100_000, "{who}: {each} µs per cycle");
        }
        // Every command's first key is prefetched in batches before it
        // runs (Valkey does so only with IO threads).
        let c = &mut ours.raw();
        let (batches, entries) = (
            stat(c, "io_threaded_total_prefetch_batches"),
            stat(c, "io_threaded_total_prefetch_entries"),
        );
        let mut req = Vec::new();
        for i in 0..64 {
            req.extend(ringkv_e2e::raw::encode_str(&["GET", &format!("k{i}")]));
        }
        c.send(&req);
        for _ in 0..64 {
            assert_eq!(c.read_reply(), Reply::Nil);
        }
        assert!(stat(c, "io_threaded_total_prefetch_batches") > batches);
        // The INFO commands between are keyless.
        assert_eq!(stat(c, "io_threaded_total_prefetch_entries"), entries + 64);
        assert_eq!(stat(c, "io_threaded_freed_objects"), 0);
    }
);

e2e!(
    ringkv_only fn info_debug_section_as_valkeys(b) {
        // The same steps and assertions on both servers.
        let opts = || Opts::new().arg("enable-debug-command", "yes");
        let ours = b.start(opts());
        let theirs = ringkv_e2e::Backend::Valkey.start(opts());
        let fields = [
            "eventloop_duration_aof_sum",
            "eventloop_duration_cron_sum",
            "eventloop_duration_max",
            "eventloop_cmd_per_cycle_max",
        ];
        for srv in [&ours, &theirs] {
            let c = &mut srv.raw();
            let who = if std::ptr::eq(srv, &ours) { "ringkv" } else { "valkey" };
            let debug = |c: &mut ringkv_e2e::Raw, name| info_num(c, "debug", name);
            // Only by name: not in ALL or EVERYTHING.
            for all in ["ALL", "EVERYTHING"] {
                let text = c.cmd(&["INFO", all]).text();
                assert!(!text.contains("# Debug"), "{who} {all}");
                assert!(!text.contains("eventloop_duration_max"), "{who} {all}");
            }
            let text = c.cmd(&["INFO", "debug", "keyspace"]).text();
            let names: Vec<&str> = text
                .lines()
                .filter_map(|l| l.split_once(':').map(|(n, _)| n))
                .filter(|n| n.starts_with("eventloop"))
                .collect();
            assert_eq!(names, fields, "{who}");
            assert!(text.find("# Keyspace") < text.find("# Debug"), "{who}: {text}");

            assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.05"]), Reply::status("OK"));
            assert!(debug(c, "eventloop_duration_max") >= 50_000, "{who}");
            // One write of 64 commands is read and run in one cycle.
            let mut req = Vec::new();
            for _ in 0..64 {
                req.extend(ringkv_e2e::raw::encode_str(&["PING"]));
            }
            c.send(&req);
            for _ in 0..64 {
                assert_eq!(c.read_reply(), Reply::status("PONG"));
            }
            let per_cycle = debug(c, "eventloop_cmd_per_cycle_max");
            assert!((32..=65).contains(&per_cycle), "{who}: {per_cycle}");
            // Cron runs 10 times a second on an idle server.
            let cron = debug(c, "eventloop_duration_cron_sum");
            std::thread::sleep(Duration::from_millis(600));
            assert!(debug(c, "eventloop_duration_cron_sum") > cron, "{who}");

            assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Reply::status("OK"));
            assert!(debug(c, "eventloop_duration_max") < 50_000, "{who}");
            assert!(debug(c, "eventloop_cmd_per_cycle_max") < 32, "{who}");

            // Under `appendfsync always` a write waits for the file on
            // the loop's thread, and that time is the AOF's.
            c.cmd(&["CONFIG", "SET", "appendfsync", "always"]);
            assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "yes"]), Reply::status("OK"));
            ringkv_e2e::within(10, "the AOF rewrite to finish", || {
                let p = c.cmd(&["INFO", "persistence"]).text();
                ringkv_e2e::info_field(&p, "aof_rewrite_in_progress") == "0"
                    && ringkv_e2e::info_field(&p, "aof_rewrite_scheduled") == "0"
            });
            let aof = debug(c, "eventloop_duration_aof_sum");
            for i in 0..20 {
                assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), Reply::status("OK"));
            }
            assert!(debug(c, "eventloop_duration_aof_sum") > aof, "{who}");
        }
    }
);
