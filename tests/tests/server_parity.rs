//! Server behaviours the Tcl suites of Redis 7.0 and of Valkey 8.1 found
//! apart from Valkey's (scripts/redis_tcl_suite.sh), checked through real
//! connections against Valkey 8.1 beside: what a client reads must be the
//! same.

use ringkv_e2e::raw::encode_str;
use ringkv_e2e::{Backend, Opts, Raw, Reply, e2e, info_field};

/// Run `steps` against a fresh server of `b` and one of Valkey 8.1 (DEBUG
/// enabled on both); the replies it returns must be the same.
fn same_as_valkeys(b: Backend, steps: impl Fn(&ringkv_e2e::Server) -> Vec<Reply>) {
    let start = |b: Backend| b.start(Opts::new().arg("enable-debug-command", "yes"));
    let (ours, valkeys) = (steps(&start(b)), steps(&start(Backend::Valkey)));
    assert!(
        ours == valkeys,
        "{b:?}:\n{ours:?}\nValkey 8.1:\n{valkeys:?}"
    );
}

e2e!(
    ringkv_only fn counters_and_replies_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            // Both ends from the end and crossed: nothing.
            c.cmd(&["SET", "s", "xxxx"]);
            seen.push(c.cmd(&["BITCOUNT", "s", "-6", "-7"]));
            seen.push(c.cmd(&["BITCOUNT", "s", "-6", "-15", "BIT"]));
            // RESETSTAT: counters restart, the memory peak stays.
            c.cmd(&["SAVE"]);
            let peak = |c: &mut Raw| {
                let info = c.cmd(&["INFO", "memory"]).text();
                info_field(&info, "used_memory_peak").parse::<u64>().unwrap()
            };
            let before = peak(&mut c);
            seen.push(c.cmd(&["CONFIG", "RESETSTAT"]));
            let info = c.cmd(&["INFO", "all"]).text();
            for field in ["rdb_saves", "lazyfreed_objects", "sync_full", "aof_rewrites"] {
                seen.push(Reply::Status(format!("{field}:{}", info_field(&info, field))));
            }
            assert!(peak(&mut c) >= before);
            // ACL SETUSER's arguments are all redacted in the slow log.
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
            c.cmd(&["SLOWLOG", "RESET"]);
            c.cmd(&["ACL", "SETUSER", "u", "on", ">secret"]);
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
            seen.extend(slow_log_commands(&mut c));
            seen
        });
    }
);

e2e!(
    ringkv_only fn reply_off_pause_and_flush_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut seen = Vec::new();
            // Subscribe confirmations come under CLIENT REPLY OFF.
            let mut s = srv.raw();
            s.send(&encode_str(&["CLIENT", "REPLY", "OFF"]));
            s.send(&encode_str(&["SUBSCRIBE", "ch"]));
            seen.push(s.read_reply());
            // A client held by CLIENT PAUSE is a blocked client.
            let mut admin = srv.raw();
            admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]);
            let mut w = srv.raw();
            w.send(&encode_str(&["SET", "k", "v"]));
            wait_blocked(&mut admin, "the SET to be held");
            let list = admin.cmd(&["CLIENT", "LIST"]).text();
            seen.push(Reply::Int(
                list.lines().filter(|l| l.contains("flags=b ") && l.contains("cmd=set ")).count() as i64,
            ));
            admin.cmd(&["CLIENT", "UNPAUSE"]);
            seen.push(w.read_reply());
            // FLUSHALL wakes a blocked XREADGROUP with NOGROUP.
            admin.cmd(&["XADD", "x", "1-1", "f", "v"]);
            admin.cmd(&["XGROUP", "CREATE", "x", "g", "$"]);
            let mut r = srv.raw();
            r.send(&encode_str(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "x", ">"]));
            wait_blocked(&mut admin, "XREADGROUP to block");
            seen.push(admin.cmd(&["FLUSHALL"]));
            seen.push(r.read_reply());
            seen
        });
    }
);

/// The arguments of every SLOWLOG entry, newest first (what redaction
/// shows).
/// Wait until one client is blocked (`what` names it for the timeout).
fn wait_blocked(c: &mut Raw, what: &str) {
    ringkv_e2e::within(10, what, || {
        let info = c.cmd(&["INFO", "clients"]).text();
        info_field(&info, "blocked_clients") == "1"
    });
}

fn slow_log_commands(c: &mut Raw) -> Vec<Reply> {
    match c.cmd(&["SLOWLOG", "GET"]) {
        Reply::Array(entries) => entries
            .into_iter()
            .map(|e| match e {
                Reply::Array(fields) => fields[3].clone(),
                other => other,
            })
            .collect(),
        other => vec![other],
    }
}

/// The fields of a CLIENT INFO line named in `names`, as one status.
fn client_fields(line: &str, names: &[&str]) -> Reply {
    let kept: Vec<&str> = line
        .split_whitespace()
        .filter(|f| names.iter().any(|n| f.split('=').next() == Some(*n)))
        .collect();
    Reply::Status(kept.join(" "))
}

e2e!(
    ringkv_only fn import_mode_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            seen.push(c.cmd(&["CLIENT", "IMPORT-SOURCE", "ON"]));
            seen.push(c.cmd(&["CONFIG", "SET", "import-mode", "yes"]));
            c.cmd(&["SET", "k", "1", "PX", "1"]);
            c.cmd(&["SET", "gone", "1", "PXAT", "1"]);
            std::thread::sleep(std::time::Duration::from_millis(20));
            // Hidden from ordinary clients, kept (no expiry at all).
            for q in [&["GET", "k"][..], &["TTL", "k"], &["DBSIZE"], &["EXISTS", "gone"]] {
                seen.push(c.cmd(q));
            }
            // An import source sees every key as live.
            seen.push(c.cmd(&["CLIENT", "IMPORT-SOURCE", "ON"]));
            seen.push(c.cmd(&["DEL", "gone"]));
            let info = c.cmd(&["CLIENT", "INFO"]).text();
            seen.push(client_fields(&info, &["flags"]));
            for q in [
                &["TTL", "k"][..],
                &["GET", "k"],
                &["INCR", "k"],
                &["RANDOMKEY"],
                &["KEYS", "k*"],
                &["SCAN", "0", "MATCH", "k", "COUNT", "1000"],
            ] {
                seen.push(c.cmd(q));
            }
            seen.push(c.cmd(&["CLIENT", "IMPORT-SOURCE", "OFF"]));
            seen.push(c.cmd(&["CONFIG", "SET", "import-mode", "no"]));
            seen.push(c.cmd(&["CLIENT", "IMPORT-SOURCE", "ON"]));
            ringkv_e2e::within(10, "active expiry to resume", || {
                c.cmd(&["DBSIZE"]) == Reply::Int(0)
            });
            seen
        });
    }
);

e2e!(
    ringkv_only fn valkey_81_suite_findings_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            // extended-redis-compatibility: HELLO and INFO say Redis.
            for on in ["yes", "no"] {
                c.cmd(&["CONFIG", "SET", "extended-redis-compatibility", on]);
                if let Reply::Array(kv) = c.cmd(&["HELLO", "2"]) {
                    seen.extend(kv.into_iter().take(4));
                }
                let info = c.cmd(&["INFO", "server"]).text();
                seen.push(Reply::Int(info.contains("redis_mode:standalone") as i64));
            }
            // CLIENT INFO counts commands once run (not itself, not one
            // refused or queued) and shows no consumed input.
            c.cmd(&["NOSUCH"]);
            c.cmd(&["MULTI"]);
            c.cmd(&["GET", "a"]);
            c.cmd(&["EXEC"]);
            c.cmd(&["EVAL", "redis.call('ping')", "0"]);
            let info = c.cmd(&["CLIENT", "INFO"]).text();
            seen.push(client_fields(&info, &["qbuf", "tot-cmds"]));
            // The user names ACL GETUSER and DELUSER name are secrets, and
            // so is the one for the primary.
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
            c.cmd(&["SLOWLOG", "RESET"]);
            c.cmd(&["ACL", "GETUSER", "someone"]);
            c.cmd(&["ACL", "DELUSER", "someone", "other"]);
            c.cmd(&["CONFIG", "SET", "primaryuser", "u"]);
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
            seen.extend(slow_log_commands(&mut c));
            // Writing back what CONFIG GET * said works.
            if let Reply::Array(kv) = c.cmd(&["CONFIG", "GET", "port"]) {
                seen.push(c.cmd(&["CONFIG", "SET", "port", &kv[1].text()]));
            }
            seen.push(c.cmd(&["CONFIG", "SET", "port", "1", "port", "2"]));
            seen.push(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "200%"]));
            // LMOVE is one change; LSET can convert a list either way.
            let changes = |c: &mut Raw| {
                let info = c.cmd(&["INFO", "persistence"]).text();
                info_field(&info, "rdb_changes_since_last_save").parse::<i64>().unwrap()
            };
            c.cmd(&["RPUSH", "src", "a", "b"]);
            let before = changes(&mut c);
            c.cmd(&["LMOVE", "src", "dst", "LEFT", "LEFT"]);
            c.cmd(&["LMOVE", "src", "dst", "LEFT", "LEFT"]);
            seen.push(Reply::Int(changes(&mut c) - before));
            c.cmd(&["CONFIG", "SET", "list-max-listpack-size", "3"]);
            c.cmd(&["RPUSH", "l", "a", "b", "c"]);
            c.cmd(&["LSET", "l", "0", "x"]);
            seen.push(c.cmd(&["OBJECT", "ENCODING", "l"]));
            c.cmd(&["CONFIG", "SET", "list-max-listpack-size", "-1"]);
            let big = "x".repeat(8192);
            c.cmd(&["RPUSH", "q", &big]);
            c.cmd(&["LSET", "q", "0", "c"]);
            seen.push(c.cmd(&["OBJECT", "ENCODING", "q"]));
            c.cmd(&["CONFIG", "SET", "list-max-listpack-size", "0"]);
            c.cmd(&["RPUSH", "z", "a"]);
            seen.push(c.cmd(&["OBJECT", "ENCODING", "z"]));
            c.cmd(&["RPUSH", "z", "b"]);
            seen.push(c.cmd(&["OBJECT", "ENCODING", "z"]));
            // Tracking prefixes collide in the order given, equal ones too.
            for args in [
                &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"][..],
                &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOO"],
            ] {
                seen.push(c.cmd(args));
            }
            // Scripts: DEBUG through SET-DISABLE-DENY-SCRIPTS, the libraries
            // walked, Valkey's bit.tohex fix, a big number's CR/LF.
            seen.push(c.cmd(&["EVAL", "return redis.call('debug', 'protocol', 'true')", "0"]));
            seen.push(c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]));
            seen.push(c.cmd(&["EVAL", "return redis.call('debug', 'protocol', 'true')", "0"]));
            seen.push(c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]));
            let walk = "local t = {} for k in pairs(os) do t[#t + 1] = k end return t";
            seen.push(c.cmd(&["EVAL", walk, "0"]));
            seen.push(c.cmd(&["EVAL", "return pairs(nil)", "0"]));
            seen.push(c.cmd(&["EVAL", "return bit.tohex(65535, -2147483648)", "0"]));
            seen.push(c.cmd(&["EVAL", "return {big_number='123\\r\\n123'}", "0"]));
            // HELLO names the availability zone once one is set.
            c.cmd(&["CONFIG", "SET", "availability-zone", "az1"]);
            if let Reply::Array(kv) = c.cmd(&["HELLO", "2"]) {
                seen.extend(kv.into_iter().skip(8));
            }
            c.cmd(&["CONFIG", "SET", "availability-zone", ""]);
            // EXEC of a queue that writes is refused as a write would be.
            let mut other = srv.raw();
            c.cmd(&["MULTI"]);
            c.cmd(&["INCR", "xx"]);
            other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
            seen.push(c.cmd(&["EXEC"]));
            seen.push(c.cmd(&["GET", "xx"]));
            seen.push(c.cmd(&["PING"]));
            other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
            // Valkey also answers Argument must be ON or OFF with a second
            // reply: this is the connection's last command.
            seen.push(c.cmd(&["PFDEBUG", "SIMD", "nope"]));
            seen
        });
    }
);

e2e!(
    ringkv_only fn own_pushes_and_expired_waits_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut seen = Vec::new();
            // A client's own pushes follow its command's reply.
            let mut c = srv.raw();
            c.cmd(&["HELLO", "3"]);
            c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
            c.send(&encode_str(&["SUBSCRIBE", "ch", "__keyspace@0__:k"]));
            seen.push(c.read_reply());
            seen.push(c.read_reply());
            for q in [&["PUBLISH", "ch", "hi"][..], &["SET", "k", "v"]] {
                c.send(&encode_str(q));
                seen.push(c.read_reply());
                seen.push(c.read_reply());
            }
            // A tracked key that a read finds expired is invalidated after
            // that read's reply.
            let mut t = srv.raw();
            t.cmd(&["HELLO", "3"]);
            t.cmd(&["CLIENT", "TRACKING", "ON"]);
            t.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            t.cmd(&["SET", "y", "1", "PX", "50"]);
            seen.push(t.cmd(&["GET", "y"]));
            std::thread::sleep(std::time::Duration::from_millis(100));
            seen.push(t.cmd(&["GET", "y"]));
            seen.push(t.read_reply());
            // A waiter's key that expired inside the transaction that
            // readied it serves nobody: the waiter's own lookup deletes it
            // and it waits on. SCAN expires what it meets.
            let mut w = srv.raw();
            w.send(&encode_str(&["BLPOP", "l", "0"]));
            wait_blocked(&mut t, "the BLPOP to block");
            t.cmd(&["MULTI"]);
            t.cmd(&["RPUSH", "l", "a"]);
            t.cmd(&["PEXPIRE", "l", "20"]);
            t.cmd(&["DEBUG", "SLEEP", "0.05"]);
            seen.push(t.cmd(&["EXEC"]));
            let info = t.cmd(&["INFO", "clients"]).text();
            seen.push(Reply::Status(info_field(&info, "blocked_clients")));
            seen.push(t.cmd(&["DBSIZE"]));
            t.cmd(&["SET", "s1", "v", "PX", "1"]);
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen.push(t.cmd(&["SCAN", "0", "COUNT", "100"]));
            seen.push(t.cmd(&["DBSIZE"]));
            let info = t.cmd(&["INFO", "stats"]).text();
            seen.push(Reply::Status(info_field(&info, "expired_keys")));
            // A key evicted before a command: its invalidation comes first.
            let mut v = srv.raw();
            v.cmd(&["HELLO", "3"]);
            v.cmd(&["CLIENT", "TRACKING", "ON"]);
            let info = v.cmd(&["INFO", "memory"]).text();
            let used = |f: &str| info_field(&info, f).parse::<u64>().unwrap();
            let limit = used("used_memory") - used("mem_not_counted_for_evict") + 100 * 1024;
            v.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
            v.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
            v.cmd(&["SETEX", "volatile-key", "10000", "x"]);
            v.cmd(&["GET", "volatile-key"]);
            v.cmd(&["SETBIT", "big-key", "1600000", "0"]);
            v.send(&encode_str(&["GETBIT", "big-key", "0"]));
            seen.push(v.read_reply());
            seen.push(v.read_reply());
            v.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
            seen
        });
    }
);

e2e!(
    ringkv_only fn no_touch_paused_randomkey_and_roles_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            // CLIENT NO-TOUCH: a GET leaves the idle time; TOUCH, also from
            // a script, resets it.
            c.cmd(&["SET", "k", "v"]);
            c.cmd(&["SET", "s", "v"]);
            std::thread::sleep(std::time::Duration::from_millis(2100));
            c.cmd(&["CLIENT", "NO-TOUCH", "ON"]);
            c.cmd(&["GET", "k"]);
            seen.push(Reply::Int((c.cmd(&["OBJECT", "IDLETIME", "k"]) != Reply::Int(0)) as i64));
            c.cmd(&["TOUCH", "k"]);
            c.cmd(&["EVAL", "return redis.call('TOUCH', KEYS[1])", "1", "s"]);
            seen.push(c.cmd(&["OBJECT", "IDLETIME", "k"]));
            seen.push(c.cmd(&["OBJECT", "IDLETIME", "s"]));
            c.cmd(&["CLIENT", "NO-TOUCH", "OFF"]);
            // Every key past its time while a pause stops expiry: RANDOMKEY
            // still answers, and deletes nothing. (Active expiry is off
            // until the pause: it could take them first on a busy machine.)
            c.cmd(&["FLUSHALL"]);
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            c.cmd(&["SET", "e1", "v", "PX", "1"]);
            c.cmd(&["SET", "e2", "v", "PX", "1"]);
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]);
            seen.push(Reply::Int(c.cmd(&["RANDOMKEY"]).text().starts_with('e') as i64));
            seen.push(c.cmd(&["DBSIZE"]));
            c.cmd(&["CLIENT", "UNPAUSE"]);
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
            // XREADGROUP's key counts as one that also wakes on deletion.
            c.cmd(&["XGROUP", "CREATE", "x", "g", "$", "MKSTREAM"]);
            let mut w = srv.raw();
            w.send(&encode_str(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "x", ">"]));
            wait_blocked(&mut c, "the XREADGROUP to block");
            let info = c.cmd(&["INFO", "clients"]).text();
            for f in ["total_blocking_keys", "total_blocking_keys_on_nokey"] {
                seen.push(Reply::Status(format!("{f}:{}", info_field(&info, f))));
            }
            // HELLO's role on a replica (of a port nobody listens on).
            c.cmd(&["REPLICAOF", "127.0.0.1", "1"]);
            if let Reply::Array(kv) = c.cmd(&["HELLO", "2"]) {
                seen.extend(kv.into_iter().skip(10).take(2));
            }
            c.cmd(&["REPLICAOF", "NO", "ONE"]);
            seen
        });
    }
);

e2e!(
    ringkv_only fn scripts_time_sort_and_stale_transactions_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            // TIME inside a script answers the script's start, as does TIME
            // inside a transaction (DEBUG SLEEP from a script as the Tcl
            // suite allows it).
            c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]);
            let both = c.cmd(&[
                "EVAL",
                "local a = redis.call('TIME') redis.call('DEBUG', 'SLEEP', 0.01) local b = redis.call('TIME') return {a[1] == b[1] and a[2] == b[2]}",
                "0",
            ]);
            seen.push(both);
            c.cmd(&["MULTI"]);
            c.cmd(&["TIME"]);
            c.cmd(&["DEBUG", "SLEEP", "0.01"]);
            c.cmd(&["TIME"]);
            if let Reply::Array(r) = c.cmd(&["EXEC"]) {
                seen.push(Reply::Int((r[0] == r[2]) as i64));
            }
            // SORT BY a constant hands a script a set in order.
            c.cmd(&["SADD", "myset", "b", "aa", "c", "a", "azz", "aaa"]);
            seen.push(c.cmd(&["EVAL", "return redis.call('SORT', KEYS[1], 'BY', '_')", "1", "myset"]));
            // A script that may write is refused up front for want of good
            // replicas; one that declares no writes, or no shebang, runs.
            c.cmd(&["SET", "x", "some value"]);
            c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
            for body in [
                "#!lua flags=no-writes\nreturn redis.call('get','x')",
                "return redis.call('get','x')",
                "#!lua\nreturn redis.call('get','x')",
                "return redis.call('set','x', 1)",
            ] {
                seen.push(c.cmd(&["EVAL", body, "1", "x"]));
            }
            // The SET the script called was refused: a rejected call.
            let stats = c.cmd(&["INFO", "commandstats"]).text();
            let set = stats.lines().find(|l| l.starts_with("cmdstat_set:")).unwrap_or("");
            seen.push(Reply::Status(
                set.split(',').find(|f| f.starts_with("rejected_calls=")).unwrap_or("").to_string(),
            ));
            c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
            // A stale replica refuses an EXEC whose queue holds a command
            // not allowed on stale data, even one queued before it was stale.
            c.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"]);
            let mut other = srv.raw();
            for cmds in [&["GET", "x"][..], &["PING"], &["INFO", "server"]] {
                c.cmd(&["MULTI"]);
                c.cmd(cmds);
                other.cmd(&["REPLICAOF", "127.0.0.1", "1"]);
                let r = c.cmd(&["EXEC"]);
                // INFO's text differs: whether EXEC ran is compared.
                seen.push(match r {
                    Reply::Array(_) => Reply::status("ran"),
                    other => other,
                });
                other.cmd(&["REPLICAOF", "NO", "ONE"]);
            }
            seen
        });
    }
);

e2e!(
    ringkv_only fn tracking_of_served_waiters_and_table_limit_and_slow_saves_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut rd = srv.raw();
            let mut seen = Vec::new();
            // A served BLMOVE's own invalidation of its destination follows
            // its reply.
            c.cmd(&["RPUSH", "list2{t}", "a"]);
            rd.cmd(&["HELLO", "3"]);
            seen.push(rd.cmd(&["CLIENT", "TRACKING", "on"]));
            seen.push(rd.cmd(&["LRANGE", "list2{t}", "0", "-1"]));
            rd.send(&encode_str(&["BLMOVE", "list1{t}", "list2{t}", "left", "left", "0"]));
            wait_blocked(&mut c, "the BLMOVE to block");
            seen.push(c.cmd(&["RPUSH", "list1{t}", "foo"]));
            seen.push(rd.read_reply());
            seen.push(rd.read_reply());
            // A lowered tracking-table-max-keys drops keys (telling their
            // readers) without waiting for another read.
            rd.cmd(&["MSET", "key1", "1", "key2", "2"]);
            seen.push(rd.cmd(&["MGET", "key1", "key2"]));
            seen.push(c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]));
            let dropped = match rd.read_reply() {
                Reply::Push(m) if m.len() == 2 => {
                    m[1] == Reply::Array(vec![Reply::bulk("key1")])
                        || m[1] == Reply::Array(vec![Reply::bulk("key2")])
                }
                _ => false,
            };
            seen.push(Reply::Bool(dropped));
            // With cron paused, the next command (any client's) drops them,
            // its own invalidation before its reply.
            c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
            rd.cmd(&["MGET", "key1", "key2"]);
            seen.push(c.cmd(&["DEBUG", "PAUSE-CRON", "1"]));
            c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
            rd.send(&encode_str(&["PING"]));
            seen.push(Reply::Bool(matches!(rd.read_reply(), Reply::Push(m) if m.len() == 2)));
            seen.push(rd.read_reply());
            seen.push(c.cmd(&["DEBUG", "PAUSE-CRON", "0"]));
            c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
            // A REDIRECT target that has QUIT is gone for the next write.
            let mut target = srv.raw();
            let target_id = target.cmd(&["CLIENT", "ID"]);
            let mut redirected = srv.raw();
            redirected.cmd(&["HELLO", "3"]);
            let id = target_id.text();
            redirected.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]);
            redirected.cmd(&["GET", "key9"]);
            seen.push(target.cmd(&["QUIT"]));
            c.cmd(&["SET", "key9", "v"]);
            seen.push(Reply::Bool(
                redirected.read_reply()
                    == Reply::Push(vec![Reply::bulk("tracking-redir-broken"), target_id]),
            ));
            // rdb-key-save-delay is slept after each key: a save of one key
            // lasts one delay.
            c.cmd(&["FLUSHALL"]);
            c.cmd(&["SET", "k", "v"]);
            c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
            seen.push(c.cmd(&["BGSAVE"]));
            std::thread::sleep(std::time::Duration::from_millis(300));
            let info = c.cmd(&["INFO", "persistence"]).text();
            seen.push(Reply::status(&info_field(&info, "rdb_bgsave_in_progress")));
            ringkv_e2e::within(10, "the save to end", || {
                let info = c.cmd(&["INFO", "persistence"]).text();
                info_field(&info, "rdb_bgsave_in_progress") == "0"
            });
            seen
        });
    }
);
