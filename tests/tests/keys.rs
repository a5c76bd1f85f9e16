//! Keyspace commands through the `redis` crate.

use std::collections::BTreeSet;

use ringkv_e2e::v::{arr, bulk, err, int, int_of, nil, ok, status, strings};
use ringkv_e2e::{e2e, q, query};

const NOT_INT: &str = "ERR value is not an integer or out of range";

e2e!(
    fn del_unlink_exists_touch(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "MSET a 1 b 2 c 3 d 4"), ok());
        assert_eq!(q(c, "EXISTS a b nope a"), int(3));
        assert_eq!(q(c, "DEL a nope a"), int(1));
        assert_eq!(q(c, "UNLINK b c nope"), int(2));
        assert_eq!(q(c, "EXISTS a b c"), int(0));
        assert_eq!(q(c, "TOUCH d d nope"), int(2));
        assert_eq!(q(c, "DEL"), err("ERR wrong number of arguments for 'del' command"));
        assert_eq!(q(c, "DBSIZE"), int(1));
    }
);

e2e!(
    fn expire_options(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "EXPIRE nope 100"), int(0));
        assert_eq!(q(c, "SET k v"), ok());
        // No TTL counts as infinite: GT never applies, LT does.
        assert_eq!(q(c, "EXPIRE k 100 XX"), int(0));
        assert_eq!(q(c, "EXPIRE k 100 GT"), int(0));
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "EXPIRE k 100 NX"), int(1));
        assert_eq!(q(c, "EXPIRE k 200 NX"), int(0));
        assert_eq!(q(c, "EXPIRE k 200 XX"), int(1));
        assert_eq!(q(c, "EXPIRE k 100 GT"), int(0));
        assert_eq!(q(c, "EXPIRE k 300 GT"), int(1));
        assert_eq!(q(c, "EXPIRE k 400 LT"), int(0));
        assert_eq!(q(c, "EXPIRE k 50 LT"), int(1));
        assert!((49..=50).contains(&int_of(&q(c, "TTL k"))));
        assert_eq!(q(c, "PERSIST k"), int(1));
        assert_eq!(q(c, "EXPIRE k 50 LT"), int(1));
        assert_eq!(q(c, "EXPIRE k 10 nx"), int(0));
        let both = "ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(q(c, "EXPIRE k 10 NX XX"), err(both));
        assert_eq!(q(c, "EXPIRE k 10 NX GT"), err(both));
        assert_eq!(
            q(c, "EXPIRE k 10 GT LT"),
            err("ERR GT and LT options at the same time are not compatible")
        );
        assert_eq!(q(c, "EXPIRE k 10 BOGUS"), err("ERR Unsupported option BOGUS"));
        assert_eq!(q(c, "EXPIRE k abc"), err(NOT_INT));
        assert_eq!(
            q(c, "EXPIRE k 9223372036854775807"),
            err("ERR invalid expire time in 'expire' command")
        );
        assert_eq!(
            q(c, "PEXPIRE k 9223372036854775807"),
            err("ERR invalid expire time in 'pexpire' command")
        );
        // A non-positive TTL deletes the key right away.
        assert_eq!(q(c, "EXPIRE k 0"), int(1));
        assert_eq!(q(c, "EXISTS k"), int(0));
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "PEXPIRE k -1"), int(1));
        assert_eq!(q(c, "EXISTS k"), int(0));
    }
);

e2e!(
    fn expireat_ttl_persist(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "TTL nope"), int(-2));
        assert_eq!(q(c, "PTTL nope"), int(-2));
        assert_eq!(q(c, "EXPIRETIME nope"), int(-2));
        assert_eq!(q(c, "PEXPIRETIME nope"), int(-2));
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "PTTL k"), int(-1));
        assert_eq!(q(c, "EXPIRETIME k"), int(-1));
        assert_eq!(q(c, "PEXPIRETIME k"), int(-1));
        assert_eq!(q(c, "PERSIST k"), int(0));
        assert_eq!(q(c, "PERSIST nope"), int(0));
        assert_eq!(q(c, "EXPIREAT k 4102444800"), int(1));
        assert_eq!(q(c, "EXPIRETIME k"), int(4102444800));
        assert_eq!(q(c, "PEXPIRETIME k"), int(4102444800000));
        assert_eq!(q(c, "PEXPIREAT k 4102444800123"), int(1));
        assert_eq!(q(c, "PEXPIRETIME k"), int(4102444800123));
        assert_eq!(q(c, "EXPIRETIME k"), int(4102444800));
        assert_eq!(q(c, "EXPIREAT k 4102444900 LT"), int(0));
        assert_eq!(q(c, "EXPIREAT k 4102444900 GT"), int(1));
        assert_eq!(q(c, "PERSIST k"), int(1));
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "EXPIREAT k 1"), int(1));
        assert_eq!(q(c, "EXISTS k"), int(0));
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "PEXPIRE k 100000"), int(1));
        assert!((99_000..=100_000).contains(&int_of(&q(c, "PTTL k"))));
        assert_eq!(q(c, "TTL k"), int(100));
    }
);

e2e!(
    fn type_rename_renamenx(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "TYPE nope"), status("none"));
        assert_eq!(q(c, "SET a 1"), ok());
        assert_eq!(q(c, "TYPE a"), status("string"));
        assert_eq!(q(c, "RENAME nope x"), err("ERR no such key"));
        assert_eq!(q(c, "RENAMENX nope x"), err("ERR no such key"));
        assert_eq!(q(c, "EXPIRE a 100"), int(1));
        assert_eq!(q(c, "RENAME a b"), ok());
        assert_eq!(q(c, "EXISTS a"), int(0));
        assert_eq!(q(c, "GET b"), bulk("1"));
        assert!((99..=100).contains(&int_of(&q(c, "TTL b"))), "RENAME keeps the TTL");
        assert_eq!(q(c, "RENAME b b"), ok());
        assert_eq!(q(c, "SET c 3"), ok());
        assert_eq!(q(c, "RENAMENX b c"), int(0));
        assert_eq!(q(c, "RENAMENX b d"), int(1));
        assert_eq!(q(c, "RENAME d c"), ok());
        assert_eq!(q(c, "GET c"), bulk("1"));
        assert_eq!(q(c, "RENAMENX c c"), int(0));
        assert_eq!(q(c, "DBSIZE"), int(1));
    }
);

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

e2e!(
    fn keys_patterns(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "KEYS *"), arr(vec![]));
        for k in ["hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "a[b", "x?y"] {
            assert_eq!(query(c, &["SET", k, "1"]), ok());
        }
        let keys = |c: &mut redis::Connection, p: &str| sorted(strings(&query(c, &["KEYS", p])));
        assert_eq!(keys(c, "h?llo"), ["h*llo", "hallo", "hello", "hxllo"]);
        assert_eq!(keys(c, "h*llo"), ["h*llo", "hallo", "heeeello", "hello", "hllo", "hxllo"]);
        assert_eq!(keys(c, "h[ae]llo"), ["hallo", "hello"]);
        assert_eq!(keys(c, "h[^e]llo"), ["h*llo", "hallo", "hxllo"]);
        assert_eq!(keys(c, "h[a-b]llo"), ["hallo"]);
        assert_eq!(keys(c, "h\\*llo"), ["h*llo"]);
        assert_eq!(keys(c, "a\\[b"), ["a[b"]);
        assert_eq!(keys(c, "x\\?y"), ["x?y"]);
        assert_eq!(keys(c, "nomatch*"), Vec::<String>::new());
        assert_eq!(keys(c, "*").len(), 8);
        assert_eq!(keys(c, "HELLO"), Vec::<String>::new());
    }
);

/// Runs SCAN to completion and returns every key seen (deduplicated).
fn scan_all(c: &mut redis::Connection, extra: &[&str]) -> BTreeSet<String> {
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    for _ in 0..100_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let r = query(c, &args).unwrap();
        let redis::Value::Array(parts) = r else {
            panic!("SCAN reply {r:?}")
        };
        assert_eq!(parts.len(), 2);
        let redis::Value::BulkString(next) = &parts[0] else {
            panic!("cursor {:?}", parts[0])
        };
        let next = String::from_utf8(next.clone()).unwrap();
        seen.extend(strings(&Ok(parts[1].clone())));
        if next == "0" {
            return seen;
        }
        cursor = next;
    }
    panic!("SCAN did not finish");
}

e2e!(
    fn scan_match_count_type(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut p = redis::pipe();
        for i in 0..600 {
            p.cmd("SET").arg(format!("user:{i}")).arg(i).ignore();
            p.cmd("SET").arg(format!("other:{i}")).arg(i).ignore();
        }
        let () = p.query(c).unwrap();
        let all = scan_all(c, &[]);
        assert_eq!(all.len(), 1200);
        let users = scan_all(c, &["MATCH", "user:*", "COUNT", "37"]);
        assert_eq!(users.len(), 600);
        assert!(users.iter().all(|k| k.starts_with("user:")));
        let few = scan_all(c, &["MATCH", "user:1?", "COUNT", "1000"]);
        assert_eq!(few.len(), 10);
        assert_eq!(scan_all(c, &["TYPE", "string", "COUNT", "100"]).len(), 1200);
        assert_eq!(scan_all(c, &["TYPE", "list"]).len(), 0);
        assert_eq!(scan_all(c, &["MATCH", "other:*", "TYPE", "string"]).len(), 600);
        assert_eq!(q(c, "SCAN 0 COUNT 0"), err("ERR syntax error"));
        assert_eq!(q(c, "SCAN 0 COUNT abc"), err(NOT_INT));
        assert_eq!(q(c, "SCAN 0 BOGUS x"), err("ERR syntax error"));
        assert_eq!(q(c, "SCAN abc"), err("ERR invalid cursor"));
        // Keys written during a scan don't make it lose the ones that stay.
        let mut cursor = "0".to_string();
        let mut seen = BTreeSet::new();
        let mut round = 0;
        loop {
            let r = query(c, &["SCAN", &cursor, "COUNT", "50"]).unwrap();
            let redis::Value::Array(parts) = r else { panic!() };
            let redis::Value::BulkString(next) = &parts[0] else { panic!() };
            cursor = String::from_utf8(next.clone()).unwrap();
            seen.extend(strings(&Ok(parts[1].clone())));
            for j in 0..100 {
                let _ = query(c, &["SET", &format!("new:{round}:{j}"), "x"]);
            }
            round += 1;
            if cursor == "0" || round > 10_000 {
                break;
            }
        }
        assert!(all.is_subset(&seen), "SCAN during growth missed keys present throughout");
    }
);

e2e!(
    fn randomkey(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "RANDOMKEY"), nil());
        assert_eq!(q(c, "SET only 1"), ok());
        assert_eq!(q(c, "RANDOMKEY"), bulk("only"));
        assert_eq!(q(c, "SET second 1"), ok());
        for _ in 0..20 {
            let k = q(c, "RANDOMKEY");
            assert!(k == bulk("only") || k == bulk("second"), "{k:?}");
        }
    }
);

e2e!(
    fn copy_and_move_between_dbs(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET a v EX 100"), ok());
        assert_eq!(q(c, "COPY nope b"), int(0));
        assert_eq!(q(c, "COPY a b"), int(1));
        assert_eq!(q(c, "GET b"), bulk("v"));
        assert!(int_of(&q(c, "TTL b")) > 90, "COPY copies the TTL");
        assert_eq!(q(c, "SET b other"), ok());
        assert_eq!(q(c, "COPY a b"), int(0));
        assert_eq!(q(c, "GET b"), bulk("other"));
        assert_eq!(q(c, "COPY a b REPLACE"), int(1));
        assert_eq!(q(c, "GET b"), bulk("v"));
        assert_eq!(q(c, "COPY a a"), err("ERR source and destination objects are the same"));
        assert_eq!(q(c, "COPY a a DB 1"), int(1));
        assert_eq!(q(c, "COPY a x DB 99"), err("ERR DB index is out of range"));
        assert_eq!(q(c, "COPY a x DB abc"), err(NOT_INT));
        assert_eq!(q(c, "COPY a x BOGUS"), err("ERR syntax error"));
        assert_eq!(q(c, "MOVE b 2"), int(1));
        assert_eq!(q(c, "EXISTS b"), int(0));
        assert_eq!(q(c, "MOVE nope 2"), int(0));
        assert_eq!(q(c, "SET b again"), ok());
        assert_eq!(q(c, "MOVE b 2"), int(0), "MOVE refuses to overwrite");
        assert_eq!(q(c, "GET b"), bulk("again"));
        assert_eq!(q(c, "MOVE b 0"), err("ERR source and destination objects are the same"));
        assert_eq!(q(c, "MOVE b 16"), err("ERR DB index is out of range"));
        assert_eq!(q(c, "MOVE b x"), err(NOT_INT));
        assert_eq!(q(c, "SELECT 1"), ok());
        assert_eq!(q(c, "GET a"), bulk("v"));
        assert!(int_of(&q(c, "TTL a")) > 90);
        assert_eq!(q(c, "SELECT 2"), ok());
        assert_eq!(q(c, "GET b"), bulk("v"));
        assert!(int_of(&q(c, "TTL b")) > 90, "MOVE keeps the TTL");
    }
);

e2e!(
    fn object_subcommands(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET n 12345"), ok());
        assert_eq!(q(c, "OBJECT ENCODING n"), bulk("int"));
        assert_eq!(q(c, "SET s hello"), ok());
        assert_eq!(q(c, "OBJECT ENCODING s"), bulk("embstr"));
        assert_eq!(query(c, &["SET", "r", &"x".repeat(45)]), ok());
        assert_eq!(q(c, "OBJECT ENCODING r"), bulk("raw"));
        // The key shares the object: 3 + 38 bytes fit, 3 + 39 do not.
        assert_eq!(query(c, &["SET", "e38", &"x".repeat(38)]), ok());
        assert_eq!(q(c, "OBJECT ENCODING e38"), bulk("embstr"));
        assert_eq!(query(c, &["SET", "r39", &"x".repeat(39)]), ok());
        assert_eq!(q(c, "OBJECT ENCODING r39"), bulk("raw"));
        assert_eq!(q(c, "APPEND s x"), int(6));
        assert_eq!(q(c, "OBJECT ENCODING s"), bulk("raw"));
        assert_eq!(q(c, "SET big 12345678901234567890"), ok());
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("embstr"));
        assert_eq!(q(c, "INCR n"), int(12346));
        assert_eq!(q(c, "OBJECT ENCODING n"), bulk("int"));
        assert_eq!(q(c, "OBJECT ENCODING nope"), nil());
        assert!(int_of(&q(c, "OBJECT REFCOUNT s")) >= 1);
        assert_eq!(q(c, "OBJECT REFCOUNT nope"), nil());
        assert!((0..=5).contains(&int_of(&q(c, "OBJECT IDLETIME s"))));
        assert_eq!(
            q(c, "OBJECT FREQ s"),
            err(
                "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust."
            )
        );
        assert_eq!(
            q(c, "OBJECT BOGUS s"),
            err("ERR unknown subcommand 'BOGUS'. Try OBJECT HELP.")
        );
    }
);

e2e!(
    fn keys_created_without_a_lookup_are_idle_from_their_command(b) {
        // MSET, SUNIONSTORE and COPY create keys without looking them up:
        // seconds after the server's last lookup, they still start idle.
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET src v"), ok());
        assert_eq!(q(c, "SADD s m"), int(1));
        std::thread::sleep(std::time::Duration::from_millis(3100));
        assert_eq!(q(c, "MSET a 1 b 2"), ok());
        assert_eq!(q(c, "SUNIONSTORE u s"), int(1));
        assert_eq!(q(c, "COPY src dst"), int(1));
        for key in ["a", "b", "u", "dst"] {
            let idle = int_of(&query(c, &["OBJECT", "IDLETIME", key]));
            assert!(idle <= 1, "{key} idle {idle} s at once");
        }
    }
);
