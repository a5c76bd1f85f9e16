//! `list-compress-depth` against Valkey 8.1: a list made under a depth
//! keeps all but that many nodes at each end LZF-compressed, takes a
//! fraction of the memory, and answers every list command, DUMP (its
//! nodes cut where Valkey cuts them) and DEBUG DIGEST-VALUE as Valkey's
//! does, also after DEBUG RELOAD.

use ringkv_e2e::{Backend, Opts, Raw, Reply, e2e};

/// Log-like elements: compressible, as the lists people compress are.
fn item(i: usize) -> String {
    format!(
        "{{\"id\":{i},\"kind\":\"page-view\",\"path\":\"/products/{}\"}}",
        i % 97
    )
}

const ITEMS: usize = 20_000;

fn fill(c: &mut Raw, key: &str) {
    let items: Vec<String> = (0..ITEMS).map(item).collect();
    for (k, chunk) in items.chunks(1000).enumerate() {
        let mut args = vec!["RPUSH", key];
        args.extend(chunk.iter().map(String::as_str));
        assert_eq!(c.cmd(&args), Reply::Int((k as i64 + 1) * 1000));
    }
}

/// The DEBUG OBJECT fields that say how a list is laid out.
fn layout(c: &mut Raw, key: &str) -> Vec<String> {
    let line = c.cmd(&["DEBUG", "OBJECT", key]).text();
    line.split(' ')
        .filter(|f| f.starts_with("encoding:") || f.starts_with("ql_"))
        .map(str::to_string)
        .collect()
}

fn usage(c: &mut Raw, key: &str) -> i64 {
    match c.cmd(&["MEMORY", "USAGE", key]) {
        Reply::Int(n) => n,
        other => panic!("MEMORY USAGE {key}: {other:?}"),
    }
}

struct Run {
    replies: Vec<Reply>,
    plain_bytes: i64,
    packed_bytes: i64,
}

fn run(b: Backend) -> Run {
    let srv = b.start(Opts::new().arg("enable-debug-command", "yes"));
    let mut c = srv.raw();
    fill(&mut c, "plain");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "list-compress-depth", "1"]),
        Reply::status("OK")
    );
    fill(&mut c, "packed");
    let (plain_bytes, packed_bytes) = (usage(&mut c, "plain"), usage(&mut c, "packed"));
    let mut replies = Vec::new();
    let mut ask = |c: &mut Raw, args: &[&str]| replies.push(c.cmd(args));
    // The list made before the depth was set keeps its own (none).
    for key in ["plain", "packed"] {
        let fields = layout(&mut c, key);
        assert!(
            fields.iter().any(|f| f.starts_with("ql_compressed:")),
            "{fields:?}"
        );
        ask(&mut c, &["ECHO", &fields.join(" ")]);
    }
    // Nodes end where Valkey's end, so the bytes are Valkey's (before and
    // after the edits below).
    ask(&mut c, &["DUMP", "packed"]);
    let (mid, late) = (item(9000), item(15_000));
    for args in [
        &["LINDEX", "packed", "10000"][..],
        &["LRANGE", "packed", "5000", "5010"],
        &["LPOS", "packed", &late, "RANK", "2", "COUNT", "3"],
        &["LSET", "packed", "7000", "changed"],
        &["LINSERT", "packed", "BEFORE", &mid, "inserted"],
        &["LREM", "packed", "-5", &item(12_000)],
        &["LREM", "packed", "0", &item(3)],
        &["LTRIM", "packed", "100", "-100"],
        &["RPOPLPUSH", "packed", "packed"],
        &["LMOVE", "packed", "packed", "LEFT", "RIGHT"],
        &["LPOP", "packed", "300"],
        &["LLEN", "packed"],
        &["LRANGE", "packed", "0", "-1"],
        &["DEBUG", "DIGEST-VALUE", "packed", "plain"],
        &["DUMP", "packed"],
        // Without rdbcompression the compressed nodes are still LZF (as
        // the nodes hold them), the others not.
        &["CONFIG", "SET", "rdbcompression", "no"],
        &["DUMP", "packed"],
        &["DUMP", "plain"],
    ] {
        ask(&mut c, args);
    }
    let line = c.cmd(&["DEBUG", "OBJECT", "packed"]).text();
    let size = line.split(' ').find(|f| f.starts_with("serializedlength:"));
    ask(&mut c, &["ECHO", size.expect("serializedlength")]);
    ask(&mut c, &["CONFIG", "SET", "rdbcompression", "yes"]);
    // Loaded back under the depth set now, both lists compress.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::status("OK"));
    for key in ["plain", "packed"] {
        let fields = layout(&mut c, key);
        ask(&mut c, &["ECHO", &fields.join(" ")]);
    }
    ask(&mut c, &["LRANGE", "packed", "0", "-1"]);
    ask(&mut c, &["DEBUG", "DIGEST-VALUE", "packed", "plain"]);
    let reloaded = usage(&mut c, "plain");
    assert!(
        reloaded * 2 < plain_bytes,
        "{b:?}: reloaded under depth 1: {reloaded} bytes, {plain_bytes} before"
    );
    Run {
        replies,
        plain_bytes,
        packed_bytes,
    }
}

e2e!(
    ringkv_only fn compressed_lists_answer_as_valkeys_in_less_memory(b) {
        let (ours, valkeys) = (run(b), run(Backend::Valkey));
        for (i, (a, v)) in ours.replies.iter().zip(&valkeys.replies).enumerate() {
            assert!(a == v, "{b:?}: reply {i}:\n{a:?}\nValkey 8.1:\n{v:?}");
        }
        assert_eq!(ours.replies.len(), valkeys.replies.len());
        let (plain, packed) = (ours.plain_bytes, ours.packed_bytes);
        assert!(packed * 3 < plain, "{b:?}: {packed} bytes compressed, {plain} not");
        // Within a quarter of Valkey's: the compressed bytes are LZF of
        // the same elements, packed a little differently.
        let theirs = valkeys.packed_bytes;
        assert!(
            packed * 4 < theirs * 5,
            "{b:?}: {packed} bytes compressed, Valkey 8.1 {theirs}"
        );
        eprintln!(
            "{b:?}: {ITEMS} elements: {plain} bytes, {packed} compressed; Valkey 8.1: {} and {theirs}",
            valkeys.plain_bytes
        );
    }
);

/// The layout fields of `key` (encoding, node count) as DEBUG OBJECT
/// shows them.
fn nodes(c: &mut Raw, key: &str) -> String {
    layout(c, key)
        .into_iter()
        .filter(|f| f.starts_with("encoding:") || f.starts_with("ql_nodes:"))
        .collect::<Vec<_>>()
        .join(" ")
}

e2e!(
    ringkv_only fn pushes_pops_and_trims_cut_nodes_where_valkey_does(b) {
        // Random pushes (of elements of random lengths and of integers, so
        // that nodes end at bytes as well as counts), pops, trims, removals, inserts and
        // sets on both servers: after each, the encoding and the node count
        // must agree.
        let ours = b.start(Opts::new().arg("enable-debug-command", "yes"));
        let theirs = Backend::Valkey.start(Opts::new().arg("enable-debug-command", "yes"));
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let mut rng = ringkv_e2e::Rng::new(48);
        // The last round makes the 300-byte elements plain nodes of their
        // own (Valkey's packed threshold, lowered by DEBUG).
        for (fill, plain_from) in [("4", "0"), ("-1", "0"), ("-1", "100")] {
            for c in [&mut a, &mut v] {
                c.cmd(&["DEL", "l"]);
                c.cmd(&["CONFIG", "SET", "list-max-listpack-size", fill]);
                let r = c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", plain_from]);
                assert_eq!(r, Reply::status("OK"));
            }
            for step in 0..400 {
                let n = 1 + rng.below(5) as usize;
                // Integers too (not among plain nodes, see below): a
                // listpack holds them in 1 to 9 bytes, which is what
                // decides where a node of them ends.
                let elems: Vec<String> = (0..n)
                    .map(|_| match rng.below(if plain_from == "0" { 6 } else { 4 }) {
                        0..=3 => {
                            let len = [1, 10, 60, 300][rng.below(4) as usize];
                            format!("{step}-{}", "e".repeat(len))
                        }
                        4 => (rng.below(9000) as i64 - 4500).to_string(),
                        _ => ((rng.next_u64() >> rng.below(64)) as i64).to_string(),
                    })
                    .collect();
                let count = (1 + rng.below(6)).to_string();
                let len = match a.cmd(&["LLEN", "l"]) {
                    Reply::Int(n) => n as u64,
                    other => panic!("LLEN: {other:?}"),
                };
                let index = rng.below(len.max(1)).to_string();
                let pivot = match a.cmd(&["LINDEX", "l", &index]) {
                    Reply::Bulk(p) => String::from_utf8(p).unwrap(),
                    _ => "none".to_string(),
                };
                let mut args: Vec<&str> = Vec::new();
                match rng.below(10) {
                    0 | 1 => args.extend(["RPUSH", "l"]),
                    2 => args.extend(["LPUSH", "l"]),
                    3 => args.extend(["LPOP", "l", &count]),
                    4 => args.extend(["RPOP", "l", &count]),
                    5 => args.extend(["LTRIM", "l", "1", "-2"]),
                    6 => args.extend(["LREM", "l", "0", &elems[0]]),
                    7 => args.extend(["LINSERT", "l", "BEFORE", &pivot, &elems[0]]),
                    8 => args.extend(["LINSERT", "l", "AFTER", &pivot, &elems[0]]),
                    _ if len > 0 => args.extend(["LSET", "l", &index, &elems[0]]),
                    _ => args.extend(["RPUSH", "l"]),
                }
                if args.len() == 2 {
                    args.extend(elems.iter().map(String::as_str));
                }
                let (ra, rv) = (a.cmd(&args), v.cmd(&args));
                assert!(ra == rv, "fill {fill} step {step} {args:?}: {ra:?} / {rv:?}");
                if a.cmd(&["EXISTS", "l"]) == Reply::Int(1) {
                    let (la, lv) = (nodes(&mut a, "l"), nodes(&mut v, "l"));
                    assert!(la == lv, "fill {fill} step {step} {args:?}: {la} / Valkey 8.1 {lv}");
                    // The very bytes, integers in their compact form. Not
                    // with plain nodes: a single large element left alone
                    // in a packed node (by pops, trims, conversion) stays
                    // packed in Valkey and is written plain by ringkv.
                    if plain_from == "0" {
                        let (da, dv) = (a.cmd(&["DUMP", "l"]), v.cmd(&["DUMP", "l"]));
                        assert!(da == dv, "fill {fill} step {step} {args:?}: DUMP differs");
                    }
                }
            }
        }
    }
);
