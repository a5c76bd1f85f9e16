//! CLIENT TRACKING in the engine: the table's bounds and counters, and
//! what disconnects and evictions leave behind (the wire format is
//! compared with Valkey's in tests/tests/tracking.rs).

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

fn info_field(e: &mut engine::Engine, c: engine::ClientId, name: &str) -> String {
    info_value(&bulk_text(&cmd(e, c, &["INFO", "everything"])), name)
}

#[test]
fn a_full_table_invalidates_its_oldest_keys_to_make_room() {
    let mut e = engine();
    let t = connect(&mut e);
    let w = connect(&mut e);
    cmd(&mut e, t, &["HELLO", "3"]);
    cmd(
        &mut e,
        w,
        &["CONFIG", "SET", "tracking-table-max-keys", "2"],
    );
    cmd(&mut e, t, &["CLIENT", "TRACKING", "ON"]);
    cmd(&mut e, t, &["MGET", "a", "b"]);
    assert_eq!(info_field(&mut e, w, "tracking_total_keys"), "2");
    // A third key pushes one out, with an invalidation for it.
    let reply = cmd(&mut e, t, &["GET", "c"]);
    assert!(
        reply.starts_with("_\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n"),
        "{reply:?}"
    );
    assert_eq!(info_field(&mut e, w, "tracking_total_keys"), "2");
    assert_eq!(info_field(&mut e, w, "tracking_total_items"), "2");
    assert_eq!(info_field(&mut e, w, "tracking_clients"), "1");
}

/// 1000 bytes per key (a model of used memory, so eviction is exact).
fn per_key(ks: &store::Keyspace) -> u64 {
    ks.dbs.iter().map(|d| d.len() as u64).sum::<u64>() * 1000
}

#[test]
fn evicted_keys_invalidate_and_gone_clients_leave_nothing_behind() {
    let mut e = engine();
    e.set_used_memory_model(per_key);
    let t = connect(&mut e);
    let w = connect(&mut e);
    cmd(&mut e, t, &["HELLO", "3"]);
    cmd(&mut e, t, &["CLIENT", "TRACKING", "ON"]);
    cmd(&mut e, w, &["SET", "k", "v"]);
    cmd(&mut e, t, &["GET", "k"]);
    cmd(
        &mut e,
        w,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    cmd(&mut e, w, &["CONFIG", "SET", "maxmemory", "500"]);
    cmd(&mut e, w, &["GET", "x"]);
    assert_eq!(
        output_for(&mut e, t),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
    );
    cmd(&mut e, w, &["CONFIG", "SET", "maxmemory", "0"]);
    let b = connect(&mut e);
    cmd(
        &mut e,
        b,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p"],
    );
    assert_eq!(info_field(&mut e, w, "tracking_total_prefixes"), "1");
    assert_eq!(info_field(&mut e, w, "tracking_clients"), "2");
    e.disconnect(b);
    e.disconnect(t);
    assert_eq!(info_field(&mut e, w, "tracking_total_prefixes"), "0");
    assert_eq!(info_field(&mut e, w, "tracking_clients"), "0");
    // Writes find nobody to tell.
    cmd(&mut e, w, &["SET", "p1", "v"]);
    assert_eq!(output_for(&mut e, b), "");
}

#[test]
fn a_read_only_script_tracks_what_it_reads_not_the_keys_it_declares() {
    let mut e = engine();
    let t = connect(&mut e);
    let w = connect(&mut e);
    cmd(&mut e, t, &["HELLO", "3"]);
    cmd(&mut e, t, &["CLIENT", "TRACKING", "ON"]);
    cmd(&mut e, t, &["EVAL_RO", "return 1", "1", "declared"]);
    cmd(
        &mut e,
        t,
        &["EVAL_RO", "return redis.call('GET', 'read')", "0"],
    );
    cmd(&mut e, w, &["MSET", "declared", "1", "read", "1"]);
    assert_eq!(
        output_for(&mut e, t),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nread\r\n"
    );
}

#[test]
fn broadcast_lists_keys_sorted_and_noloop_skips_only_the_last_writer() {
    let mut e = engine();
    let t = connect(&mut e);
    let w = connect(&mut e);
    cmd(&mut e, t, &["HELLO", "3"]);
    cmd(&mut e, t, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]);
    // One batch: one message, its keys in byte order (Valkey's radix tree).
    run_raw(
        &mut e,
        w,
        &encode(&[&["MSET", "c", "1", "a", "1", "b", "1"]]),
    );
    assert_eq!(
        output_for(&mut e, t),
        ">2\r\n$10\r\ninvalidate\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    // Both write `x` and `y` in one batch; the tracker writes `x` last, so
    // NOLOOP leaves out only `x`.
    let by_w = encode(&[&["SET", "x", "1"]]);
    let by_t = encode(&[&["SET", "x", "2"], &["SET", "y", "2"]]);
    let by_w_last = encode(&[&["SET", "y", "3"]]);
    run_jobs(&mut e, &[(w, &by_w), (t, &by_t), (w, &by_w_last)]);
    assert_eq!(
        output_for(&mut e, t),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ny\r\n"
    );
}
