//! List commands and the blocking list commands: replies (RESP2 and
//! RESP3), errors, encodings, wake-ups, fairness and timeouts.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

const WRONGTYPE: &str = WRONGTYPE_ERR;

fn delivered(e: &mut engine::Engine) -> Vec<(engine::ClientId, String)> {
    let mut v = Vec::new();
    e.drain_output(|id, b| v.push((id, String::from_utf8_lossy(b).into_owned())));
    v
}

#[test]
fn push_pop_range_index() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["LPUSH", "l", "x", "y"]), ":5\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "0", "-1"]),
        arr(&["y", "x", "a", "b", "c"])
    );
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "-2", "100"]),
        arr(&["b", "c"])
    );
    assert_eq!(cmd(&mut e, c, &["LRANGE", "l", "3", "1"]), "*0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "x", "1"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LINDEX", "l", "-1"]), bulk("c"));
    assert_eq!(cmd(&mut e, c, &["LINDEX", "l", "5"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["LLEN", "l"]), ":5\r\n");
    assert_eq!(cmd(&mut e, c, &["LPOP", "l"]), bulk("y"));
    assert_eq!(cmd(&mut e, c, &["RPOP", "l", "2"]), arr(&["c", "b"]));
    assert_eq!(cmd(&mut e, c, &["LPOP", "l", "0"]), "*0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LPOP", "l", "-1"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LPOP", "nokey"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["LPOP", "nokey", "2"]), "*-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LPOP", "l", "1", "2"]),
        "-ERR wrong number of arguments for 'lpop' command\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["RPOP", "l", "10"]), arr(&["a", "x"]));
    assert_eq!(cmd(&mut e, c, &["EXISTS", "l"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["LPUSHX", "l", "a"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "l"]), ":0\r\n");
    cmd(&mut e, c, &["HELLO", "3"]);
    assert_eq!(cmd(&mut e, c, &["LPOP", "nokey", "2"]), "_\r\n");
}

#[test]
fn set_insert_rem_trim_pos() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["LSET", "l", "0", "x"]),
        "-ERR no such key\r\n"
    );
    cmd(&mut e, c, &["RPUSH", "l", "a", "b", "a", "c", "a"]);
    assert_eq!(cmd(&mut e, c, &["LSET", "l", "-1", "z"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LSET", "l", "9", "z"]),
        "-ERR index out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LINSERT", "l", "BEFORE", "c", "q"]),
        ":6\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LINSERT", "l", "AFTER", "nope", "q"]),
        ":-1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LINSERT", "l", "MIDDLE", "c", "q"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LINSERT", "nokey", "AFTER", "c", "q"]),
        ":0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "0", "-1"]),
        arr(&["a", "b", "a", "q", "c", "z"])
    );
    assert_eq!(cmd(&mut e, c, &["LPOS", "l", "a"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["LPOS", "l", "a", "RANK", "2"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["LPOS", "l", "a", "RANK", "-1"]), ":2\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LPOS", "l", "a", "COUNT", "0"]),
        "*2\r\n:0\r\n:2\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LPOS", "l", "a", "COUNT", "0", "MAXLEN", "2"]),
        "*1\r\n:0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LPOS", "l", "nope"]), "$-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LPOS", "l", "a", "RANK", "0"]),
        "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LPOS", "l", "a", "COUNT", "-1"]),
        "-ERR COUNT can't be negative\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LPOS", "l", "a", "MAXLEN", "-1"]),
        "-ERR MAXLEN can't be negative\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LREM", "l", "-1", "a"]), ":1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "0", "-1"]),
        arr(&["a", "b", "q", "c", "z"])
    );
    assert_eq!(cmd(&mut e, c, &["LREM", "l", "0", "a"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["LTRIM", "l", "1", "-2"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "l", "0", "-1"]),
        arr(&["q", "c"])
    );
    assert_eq!(cmd(&mut e, c, &["LTRIM", "l", "5", "10"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "l"]), ":0\r\n");
}

#[test]
fn lmove_lmpop_and_encodings() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["RPUSH", "a", "1", "2", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "a", "b", "LEFT", "RIGHT"]),
        bulk("1")
    );
    assert_eq!(cmd(&mut e, c, &["RPOPLPUSH", "a", "b"]), bulk("3"));
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "b", "0", "-1"]),
        arr(&["3", "1"])
    );
    // Rotation on one key.
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "b", "b", "LEFT", "RIGHT"]),
        bulk("3")
    );
    assert_eq!(
        cmd(&mut e, c, &["LRANGE", "b", "0", "-1"]),
        arr(&["1", "3"])
    );
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "nokey", "b", "LEFT", "RIGHT"]),
        "$-1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "a", "b", "UP", "RIGHT"]),
        "-ERR syntax error\r\n"
    );
    cmd(&mut e, c, &["SET", "s", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "a", "s", "LEFT", "RIGHT"]),
        WRONGTYPE
    );
    assert_eq!(
        cmd(&mut e, c, &["LMOVE", "s", "a", "LEFT", "RIGHT"]),
        WRONGTYPE
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["LMPOP", "2", "nokey", "b", "RIGHT", "COUNT", "5"]
        ),
        "*2\r\n$1\r\nb\r\n*2\r\n$1\r\n3\r\n$1\r\n1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LMPOP", "1", "nokey", "LEFT"]), "*-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["LMPOP", "0", "a", "LEFT"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["LMPOP", "1", "a", "LEFT", "COUNT", "0"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["LMPOP", "1", "s", "LEFT"]), WRONGTYPE);
    // Encodings: listpack until list-max-listpack-size, back at half of
    // it once one node is left (Valkey 8.1 answers the same).
    cmd(&mut e, c, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
    cmd(&mut e, c, &["RPUSH", "e", "1", "2", "3", "4"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "e"]),
        bulk("listpack")
    );
    cmd(&mut e, c, &["RPUSH", "e", "5"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "e"]),
        bulk("quicklist")
    );
    cmd(&mut e, c, &["LPOP", "e", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "e"]),
        bulk("quicklist")
    );
    cmd(&mut e, c, &["LPOP", "e"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "e"]),
        bulk("listpack")
    );
    for words in [
        &["LPUSH", "s", "a"][..],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "1"],
        &["LINDEX", "s", "0"],
        &["LPOP", "s"],
        &["LPOS", "s", "a"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LSET", "s", "0", "a"],
        &["BLPOP", "s", "0"],
    ] {
        assert_eq!(cmd(&mut e, c, words), WRONGTYPE, "{words:?}");
    }
}

#[test]
fn blpop_wakes_first_blocked_first_and_times_out() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    assert_eq!(cmd(&mut e, a, &["BLPOP", "q1", "q2", "0"]), "");
    assert_eq!(cmd(&mut e, b, &["BRPOP", "q2", "0"]), "");
    assert_eq!(cmd(&mut e, w, &["RPUSH", "q2", "x"]), ":1\r\n");
    assert_eq!(delivered(&mut e), vec![(a, arr(&["q2", "x"]))]);
    assert_eq!(cmd(&mut e, w, &["RPUSH", "q2", "y", "z"]), ":2\r\n");
    assert_eq!(delivered(&mut e), vec![(b, arr(&["q2", "z"]))]);
    assert_eq!(cmd(&mut e, w, &["LRANGE", "q2", "0", "-1"]), arr(&["y"]));
    // Served at once when there is data.
    assert_eq!(cmd(&mut e, a, &["BLPOP", "q2", "0"]), arr(&["q2", "y"]));
    // Timeout: a null array.
    assert_eq!(cmd(&mut e, a, &["BLPOP", "q3", "0.01"]), "");
    std::thread::sleep(std::time::Duration::from_millis(30));
    e.expire_blocked();
    assert_eq!(delivered(&mut e), vec![(a, "*-1\r\n".to_string())]);
    assert_eq!(
        cmd(&mut e, a, &["BLPOP", "q3", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["BLPOP", "q3", "x"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
}

#[test]
fn blmove_and_brpoplpush_chain_and_multi() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    // a waits on src, b waits on dst: a's move feeds b.
    assert_eq!(
        cmd(&mut e, a, &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]),
        ""
    );
    assert_eq!(cmd(&mut e, b, &["BRPOPLPUSH", "dst", "final", "0"]), "");
    assert_eq!(cmd(&mut e, w, &["LPUSH", "src", "v"]), ":1\r\n");
    let got = delivered(&mut e);
    assert_eq!(got, vec![(a, bulk("v")), (b, bulk("v"))]);
    assert_eq!(cmd(&mut e, w, &["LRANGE", "final", "0", "-1"]), arr(&["v"]));
    assert_eq!(cmd(&mut e, w, &["EXISTS", "src", "dst"]), ":0\r\n");
    // Inside MULTI nothing blocks; a push in a transaction wakes after EXEC.
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["BLPOP", "m", "0"]);
    cmd(&mut e, a, &["BLMOVE", "m", "n", "LEFT", "LEFT", "0"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*2\r\n*-1\r\n$-1\r\n");
    assert_eq!(cmd(&mut e, a, &["BLPOP", "m", "0"]), "");
    cmd(&mut e, w, &["MULTI"]);
    cmd(&mut e, w, &["RPUSH", "m", "1", "2"]);
    cmd(&mut e, w, &["LPOP", "m"]);
    assert!(delivered(&mut e).is_empty());
    assert_eq!(cmd(&mut e, w, &["EXEC"]), "*2\r\n:2\r\n$1\r\n1\r\n");
    assert_eq!(delivered(&mut e), vec![(a, arr(&["m", "2"]))]);
    // BLMPOP with COUNT.
    assert_eq!(
        cmd(&mut e, b, &["BLMPOP", "0", "1", "mp", "LEFT", "COUNT", "2"]),
        ""
    );
    cmd(&mut e, w, &["RPUSH", "mp", "1", "2", "3"]);
    assert_eq!(
        delivered(&mut e),
        vec![(
            b,
            "*2\r\n$2\r\nmp\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n".to_string()
        )]
    );
}

#[test]
fn unblock_and_disconnect() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    assert_eq!(cmd(&mut e, a, &["BLPOP", "q", "0"]), "");
    assert_eq!(cmd(&mut e, b, &["BLPOP", "q", "0"]), "");
    e.disconnect(a);
    cmd(&mut e, w, &["RPUSH", "q", "x"]);
    assert_eq!(delivered(&mut e), vec![(b, arr(&["q", "x"]))]);
    assert_eq!(cmd(&mut e, b, &["BLPOP", "q", "0"]), "");
    let id = cmd(&mut e, b, &["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end();
    assert_eq!(cmd(&mut e, w, &["CLIENT", "UNBLOCK", id]), ":1\r\n");
    assert_eq!(delivered(&mut e), vec![(b, "*-1\r\n".to_string())]);
    assert_eq!(cmd(&mut e, w, &["CLIENT", "UNBLOCK", id]), ":0\r\n");
}

#[test]
fn a_waited_key_that_changes_type_keeps_the_client_blocked() {
    let mut e = engine();
    let a = connect(&mut e);
    let w = connect(&mut e);
    assert_eq!(cmd(&mut e, a, &["BLPOP", "k", "0"]), "");
    assert_eq!(cmd(&mut e, w, &["SET", "k", "string"]), "+OK\r\n");
    assert!(delivered(&mut e).is_empty());
    assert_eq!(cmd(&mut e, w, &["DEL", "k"]), ":1\r\n");
    assert_eq!(cmd(&mut e, w, &["RPUSH", "k", "v"]), ":1\r\n");
    assert_eq!(delivered(&mut e), vec![(a, arr(&["k", "v"]))]);
}

#[test]
fn a_flush_wakes_xreadgroup_with_nogroup_and_leaves_blpop_waiting() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    cmd(&mut e, w, &["XADD", "s", "1-1", "f", "v"]);
    cmd(&mut e, w, &["XGROUP", "CREATE", "s", "g", "$"]);
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ];
    assert_eq!(cmd(&mut e, a, &read), "");
    assert_eq!(cmd(&mut e, b, &["BLPOP", "q", "0"]), "");
    for flush in ["FLUSHALL", "FLUSHDB"] {
        assert_eq!(cmd(&mut e, w, &[flush]), "+OK\r\n");
        let nogroup =
            "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n";
        let got = delivered(&mut e);
        if flush == "FLUSHALL" {
            assert_eq!(got, vec![(a, nogroup.to_string())]);
        } else {
            assert_eq!(got, vec![]);
        }
    }
    // The served error counts as the command's (errorstats, failed_calls).
    let stats = cmd(&mut e, w, &["INFO", "all"]);
    assert!(stats.contains("errorstat_NOGROUP:count=1\r\n"), "{stats}");
    assert!(stats.contains("cmdstat_xreadgroup:calls=1,"), "{stats}");
    assert!(
        stats.contains(",rejected_calls=0,failed_calls=1\r\n"),
        "{stats}"
    );
    assert_eq!(cmd(&mut e, w, &["RPUSH", "q", "x"]), ":1\r\n");
    assert_eq!(delivered(&mut e), vec![(b, arr(&["q", "x"]))]);
}
