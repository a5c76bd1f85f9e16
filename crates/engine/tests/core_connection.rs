//! Connection-level behaviour through `execute_batch`, with Valkey's exact
//! reply bytes (checked against redis-server 7.0 / Valkey 8 source).

#[path = "core_util.rs"]
mod util;

use engine::{ClientId, CommandHint, CommandsView, Config, Event, Job};
use ringkv_engine as engine;
use util::*;

#[test]
fn ping_echo_and_case_insensitive_lookup() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut e, c, &["pInG", "hi"]), "$2\r\nhi\r\n");
    assert_eq!(
        cmd(&mut e, c, &["ping", "a", "b"]),
        "-ERR wrong number of arguments for 'ping' command\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["ECHO", ""]), "$0\r\n\r\n");
}

#[test]
fn unknown_command_arity_and_subcommand_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["foo", "a", "b"]),
        "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["foo"]),
        "-ERR unknown command 'foo', with args beginning with: \r\n"
    );
    // The argument list is cut near 128 bytes, as Valkey does.
    let long = "x".repeat(200);
    let r = cmd(&mut e, c, &["foo", &long, "b"]);
    assert_eq!(
        r,
        format!(
            "-ERR unknown command 'foo', with args beginning with: '{}' \r\n",
            "x".repeat(128)
        )
    );
    assert_eq!(
        cmd(&mut e, c, &["echo"]),
        "-ERR wrong number of arguments for 'echo' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config"]),
        "-ERR wrong number of arguments for 'config' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "foo"]),
        "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["Client", "x"]),
        "-ERR unknown subcommand 'x'. Try CLIENT HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "port"]),
        "-ERR wrong number of arguments for 'config|set' command\r\n"
    );
    // Errors are counted by kind, and rejected calls per command.
    let info = bulk_text(&cmd(&mut e, c, &["info", "errorstats", "commandstats"]));
    assert!(info.contains("errorstat_ERR:count=8\r\n"), "{info}");
    assert!(
        info.contains(
            "cmdstat_echo:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
        ),
        "{info}"
    );
    assert!(info.contains("cmdstat_config|set:calls=0,"), "{info}");
    assert!(!info.contains("cmdstat_foo"), "{info}");
    // A command that runs and fails counts as a failed call.
    cmd(&mut e, c, &["ping", "a", "b"]);
    let info = bulk_text(&cmd(&mut e, c, &["info", "commandstats"]));
    assert!(info.contains("cmdstat_ping:calls=1,"), "{info}");
    assert!(
        info.contains("rejected_calls=0,failed_calls=1\r\n"),
        "{info}"
    );
}

#[test]
fn pipeline_runs_in_order_in_one_batch() {
    let mut e = engine();
    let c = connect(&mut e);
    let input = encode(&[&["ping"], &["echo", "1"], &["select", "2"], &["echo", "2"]]);
    let (out, close) = run_raw(&mut e, c, &input);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "+PONG\r\n$1\r\n1\r\n+OK\r\n$1\r\n2\r\n"
    );
    assert!(!close);
    // Inline commands parse to the same thing.
    let (out, _) = run_raw(&mut e, c, b"PING\r\necho hello\r\n");
    assert_eq!(out, b"+PONG\r\n$5\r\nhello\r\n");
}

#[test]
fn quit_stops_the_job_and_asks_to_close() {
    let mut e = engine();
    let c = connect(&mut e);
    let input = encode(&[&["ping"], &["quit"], &["ping"]]);
    let (out, close) = run_raw(&mut e, c, &input);
    assert_eq!(out, b"+PONG\r\n+OK\r\n");
    assert!(close);
}

#[test]
fn select_and_swapdb() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["select", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["select", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["select", "-1"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["select", "15"]), "+OK\r\n");
    assert_eq!(e.server().clients.get(c).unwrap().db, 15);
    assert_eq!(
        cmd(&mut e, c, &["swapdb", "x", "1"]),
        "-ERR invalid first DB index\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["swapdb", "0", "x"]),
        "-ERR invalid second DB index\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["swapdb", "0", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    // SWAPDB really swaps: put a key in db 1 and see it in db 0.
    let hash = store::hash_key(b"k");
    e.server_mut().keyspace.dbs[1].insert(
        hash,
        b"k",
        store::Entry::new(store::Value::Str(store::Str::from_bytes(b"v"))),
        0,
    );
    assert_eq!(cmd(&mut e, c, &["select", "0"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["swapdb", "0", "1"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":1\r\n");
    let info = bulk_text(&cmd(&mut e, c, &["info", "keyspace"]));
    assert_eq!(info, "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n");
    assert_eq!(cmd(&mut e, c, &["flushall", "async"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["flushdb", "now"]), "-ERR syntax error\r\n");
}

#[test]
fn hello_negotiates_resp3_and_reports_the_server() {
    let mut e = engine();
    let c = connect(&mut e);
    let r = cmd(&mut e, c, &["HELLO", "3"]);
    assert_eq!(
        r,
        format!(
            "%7\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n8.1.8\r\n$5\r\nproto\r\n:3\r\n\
             $2\r\nid\r\n:{}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n\
             $7\r\nmodules\r\n*0\r\n",
            c.0
        )
    );
    // RESP3 now: a null is `_`.
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "_\r\n");
    let r = cmd(&mut e, c, &["hello", "2", "setname", "bob"]);
    assert!(r.starts_with("*14\r\n"), "{r}");
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "$3\r\nbob\r\n");
    assert_eq!(
        cmd(&mut e, c, &["hello", "4"]),
        "-NOPROTO unsupported protocol version\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["hello", "x"]),
        "-ERR Protocol version is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["hello", "3", "setname"]),
        "-ERR Syntax error in HELLO option 'setname'\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["hello", "3", "setname", "a b"]),
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    );
    // Without a password configured, HELLO AUTH default <anything> works.
    assert!(cmd(&mut e, c, &["hello", "3", "auth", "default", "x"]).starts_with("%7\r\n"));
    assert_eq!(
        cmd(&mut e, c, &["hello", "3", "auth", "alice", "x"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["reset"]), "+RESET\r\n");
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "$-1\r\n");
}

fn with_password() -> engine::Engine {
    let mut cfg = Config::default();
    cfg.set_many(&[(b"requirepass", b"sekret")]).unwrap();
    engine_with(cfg)
}

#[test]
fn auth_flows() {
    let mut e = with_password();
    let c = connect(&mut e);
    assert!(e.auth_required(c));
    assert!(e.client_limits(c).0.unauthenticated);
    // Unknown command and arity errors come before NOAUTH, as in Valkey.
    assert_eq!(
        cmd(&mut e, c, &["foo"]),
        "-ERR unknown command 'foo', with args beginning with: \r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["echo"]),
        "-ERR wrong number of arguments for 'echo' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["ping"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert!(
        cmd(&mut e, c, &["hello", "3"])
            .starts_with("-NOAUTH HELLO must be called with the client already authenticated")
    );
    assert_eq!(
        cmd(&mut e, c, &["auth", "nope"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["auth", "a", "b", "c"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["auth", "default", "sekret"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["ping"]), "+PONG\r\n");
    assert!(!e.auth_required(c));
    // RESET logs the client out again.
    assert_eq!(cmd(&mut e, c, &["reset"]), "+RESET\r\n");
    assert_eq!(
        cmd(&mut e, c, &["ping"]),
        "-NOAUTH Authentication required.\r\n"
    );
    // HELLO AUTH authenticates and switches protocol in one go.
    let r = cmd(&mut e, c, &["hello", "3", "auth", "default", "sekret"]);
    assert!(r.starts_with("%7\r\n"), "{r}");
    assert_eq!(cmd(&mut e, c, &["auth", "sekret"]), "+OK\r\n");

    // No password configured: single-argument AUTH is an error.
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["auth", "x"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["auth", "default", "x"]), "+OK\r\n");
}

/// A job reports the client's AUTH state after its commands, so the IO
/// layer gets the parser limits from `limits_for` without looking the
/// client up; and the input bytes it carries count in `tot-net-in`.
#[test]
fn job_reports_auth_state_and_counts_its_input() {
    let mut e = with_password();
    let c = connect(&mut e);
    let (_, outcome) = run_job(&mut e, c, &encode(&[&["ping"]]));
    assert!(outcome.auth_required);
    let (limits, qbuf) = e.limits_for(outcome.auth_required);
    let (looked_up, looked_up_qbuf) = e.client_limits(c);
    assert_eq!(limits.unauthenticated, looked_up.unauthenticated);
    assert_eq!(qbuf, looked_up_qbuf);
    assert!(limits.unauthenticated);
    assert_eq!(qbuf, 1 << 20);
    let (_, outcome) = run_job(&mut e, c, &encode(&[&["auth", "sekret"]]));
    assert!(!outcome.auth_required);
    let (limits, qbuf) = e.limits_for(outcome.auth_required);
    let (looked_up, looked_up_qbuf) = e.client_limits(c);
    assert_eq!(limits.unauthenticated, looked_up.unauthenticated);
    assert_eq!(qbuf, looked_up_qbuf);
    assert!(!limits.unauthenticated);
    assert_eq!(qbuf, e.query_buffer_limit());

    let before = e.server().clients.get(c).unwrap().net_input_bytes;
    let input = encode(&[&["ping"]]);
    let (mut args, mut argc) = (Vec::new(), Vec::new());
    parse_all(&input, &mut args, &mut argc);
    let mut out = resp::ReplyBuf::new();
    let view = CommandsView {
        data: &input,
        args: &args,
        argc: &argc,
        hints: &[],
    };
    let mut job = Job::new(c, view, &mut out);
    job.bytes_in = 1234;
    e.execute_batch(std::slice::from_mut(&mut job));
    assert_eq!(out.to_vec(), b"+PONG\r\n");
    let after = e.server().clients.get(c).unwrap().net_input_bytes;
    assert_eq!(after - before, 1234);
}

#[test]
fn maxclients_is_enforced() {
    let mut cfg = Config::default();
    cfg.set_many(&[(b"maxclients", b"2")]).unwrap();
    let mut e = engine_with(cfg);
    let a = connect(&mut e);
    let _b = connect(&mut e);
    let err = e.connect(info("127.0.0.1:1")).unwrap_err();
    assert_eq!(err, b"-ERR max number of clients reached\r\n");
    e.disconnect(a);
    assert!(e.connect(info("127.0.0.1:1")).is_ok());
    let c = e.connect(info("127.0.0.1:2"));
    assert!(c.is_err());
    let stats = bulk_text(&cmd(&mut e, _b, &["info", "stats"]));
    assert!(stats.contains("rejected_connections:2\r\n"), "{stats}");
    assert!(
        stats.contains("total_connections_received:3\r\n"),
        "{stats}"
    );
}

#[test]
fn protected_mode_denies_remote_peers_without_password() {
    let mut e = engine();
    let err = e.connect(info("10.0.0.1:5555")).unwrap_err();
    let text = String::from_utf8(err).unwrap();
    assert!(text.starts_with("-DENIED Running in protected mode because protected mode is enabled and no password is set for the default user."), "{text}");
    assert!(text.ends_with("the server to start accepting connections from the outside.\r\n"));
    assert!(!text[..text.len() - 2].contains('\n'));
    assert!(e.connect(info("127.0.0.1:5555")).is_ok());
    assert!(e.connect(info("127.5.6.7:5555")).is_ok());
    assert!(e.connect(info("[::1]:5555")).is_ok());
    assert!(e.connect(info("[::ffff:127.0.0.1]:5555")).is_ok());
    assert!(e.connect(info("[2001:db8::1]:5555")).is_err());

    // A password, or protected-mode no, lets them in.
    let mut e = with_password();
    assert!(e.connect(info("10.0.0.1:5555")).is_ok());
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "protected-mode", "no"]),
        "+OK\r\n"
    );
    assert!(e.connect(info("10.0.0.1:5555")).is_ok());
}

#[test]
fn unknown_or_gone_clients_are_skipped() {
    let mut e = engine();
    let c = connect(&mut e);
    e.disconnect(c);
    let input = encode(&[&["ping"]]);
    let (out, _) = run_raw(&mut e, c, &input);
    assert!(out.is_empty());
}

#[test]
fn several_clients_in_one_batch_keep_their_own_state() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let in_a = encode(&[
        &["select", "3"],
        &["client", "setname", "alice"],
        &["client", "getname"],
    ]);
    let in_b = encode(&[&["client", "getname"], &["ping"]]);
    let mut args_a = Vec::new();
    let mut argc_a = Vec::new();
    parse_all(&in_a, &mut args_a, &mut argc_a);
    let mut args_b = Vec::new();
    let mut argc_b = Vec::new();
    parse_all(&in_b, &mut args_b, &mut argc_b);
    let hints_b = CommandsView {
        data: &in_b,
        args: &args_b,
        argc: &argc_b,
        hints: &[],
    }
    .iter()
    .map(CommandHint::of)
    .collect::<Vec<_>>();
    let (mut out_a, mut out_b) = (resp::ReplyBuf::new(), resp::ReplyBuf::new());
    let view_a = CommandsView {
        data: &in_a,
        args: &args_a,
        argc: &argc_a,
        // No hints: the engine works them out.
        hints: &[],
    };
    let view_b = CommandsView {
        data: &in_b,
        args: &args_b,
        argc: &argc_b,
        hints: &hints_b,
    };
    let mut jobs = [
        Job::new(a, view_a, &mut out_a),
        Job::new(b, view_b, &mut out_b),
    ];
    e.execute_batch(&mut jobs);
    assert_eq!(out_a.to_vec(), b"+OK\r\n+OK\r\n$5\r\nalice\r\n");
    assert_eq!(out_b.to_vec(), b"$-1\r\n+PONG\r\n");
    assert_eq!(e.server().clients.get(a).unwrap().db, 3);
    assert_eq!(e.server().clients.get(b).unwrap().db, 0);
}

fn parse_all(input: &[u8], args: &mut Vec<resp::Span>, argc: &mut Vec<u32>) {
    let mut at = 0;
    while at < input.len() {
        let before = args.len();
        match resp::parse_command(&input[at..], &resp::Limits::default(), args).unwrap() {
            resp::Parsed::Command { consumed, argc: n } => {
                for s in &mut args[before..] {
                    s.start += at;
                }
                argc.push(n as u32);
                at += consumed;
            }
            _ => panic!(),
        }
    }
}

#[test]
fn maxmemory_clients_evicts_the_biggest_clients_first() {
    let mut e = engine();
    let (big, bigger, exempt, small) = (
        connect(&mut e),
        connect(&mut e),
        connect(&mut e),
        connect(&mut e),
    );
    let closes = |e: &mut engine::Engine| -> Vec<ClientId> {
        e.cron();
        events(e)
            .into_iter()
            .filter_map(|ev| match ev {
                Event::Close { client, .. } => Some(client),
                _ => None,
            })
            .collect()
    };
    e.client_meter(big).unwrap().set_output(600 << 10);
    e.client_meter(bigger).unwrap().set_input(900 << 10, 0);
    e.client_meter(exempt).unwrap().set_output(800 << 10);
    assert_eq!(
        cmd(&mut e, exempt, &["client", "no-evict", "on"]),
        "+OK\r\n"
    );
    // Off by default.
    assert_eq!(closes(&mut e), []);
    // 1 MB: the biggest clients go until the rest (the exempt one's
    // memory counts too) is under it.
    cmd(
        &mut e,
        small,
        &["config", "set", "maxmemory-clients", "1mb"],
    );
    assert_eq!(closes(&mut e), [bigger, big]);
    let stats = bulk_text(&cmd(&mut e, small, &["info", "stats"]));
    assert!(stats.contains("\r\nevicted_clients:2\r\n"), "{stats}");
    // Each only once.
    assert_eq!(closes(&mut e), []);
    // A percentage of maxmemory, and never under 128 KiB.
    let mut e = engine();
    let (c, heavy) = (connect(&mut e), connect(&mut e));
    e.client_meter(heavy).unwrap().set_output(200 << 10);
    cmd(&mut e, c, &["config", "set", "maxmemory-clients", "1%"]);
    assert_eq!(closes(&mut e), [], "no maxmemory: no percentage");
    cmd(&mut e, c, &["config", "set", "maxmemory", "100mb"]);
    assert_eq!(closes(&mut e), [], "1% of 100 MB is more");
    cmd(&mut e, c, &["config", "set", "maxmemory-clients", "1000"]);
    assert_eq!(closes(&mut e), [heavy], "over the 128 KiB floor");
}

#[test]
fn idle_timeout_closes_clients_from_cron() {
    let mut cfg = Config::default();
    cfg.set_many(&[(b"timeout", b"10")]).unwrap();
    let mut e = engine_with(cfg);
    let t0 = 1_800_000_000_000;
    e.pin_clock(Some(t0));
    let a = connect(&mut e);
    let b = connect(&mut e);
    e.pin_clock(Some(t0 + 8_000));
    assert_eq!(cmd(&mut e, b, &["ping"]), "+PONG\r\n");
    e.pin_clock(Some(t0 + 10_500));
    e.cron();
    assert_eq!(
        events(&mut e),
        vec![Event::Close {
            client: a,
            flush: false
        }]
    );
    // Reported once only.
    e.cron();
    assert!(events(&mut e).is_empty());
    e.pin_clock(Some(t0 + 18_001));
    e.cron();
    assert_eq!(
        events(&mut e),
        vec![Event::Close {
            client: b,
            flush: false
        }]
    );
}

#[test]
fn shutdown_emits_an_event_and_stops_the_batch() {
    let mut e = engine();
    let c = connect(&mut e);
    let input = encode(&[
        &["shutdown", "nosave", "save"],
        &["shutdown", "abort"],
        &["shutdown", "save"],
        &["ping"],
    ]);
    let (out, close) = run_raw(&mut e, c, &input);
    assert_eq!(
        out,
        b"-ERR syntax error\r\n-ERR No shutdown in progress.\r\n"
    );
    assert!(close);
    assert_eq!(events(&mut e), vec![Event::Shutdown]);
    let mut e = engine();
    e.shutdown_requested();
    e.shutdown_requested();
    assert_eq!(events(&mut e), vec![Event::Shutdown]);
}

#[test]
fn client_ids_are_never_reused() {
    let mut e = engine();
    let a = connect(&mut e);
    e.disconnect(a);
    let b = connect(&mut e);
    assert!(b > a);
    assert_eq!(cmd(&mut e, b, &["client", "id"]), format!(":{}\r\n", b.0));
    let _ = ClientId(0);
}
