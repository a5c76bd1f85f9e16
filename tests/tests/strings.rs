//! String commands through the `redis` crate: options, reply types, and
//! Valkey's exact error strings.

use ringkv_e2e::v::{self, arr, bulk, err, int, int_of, nil, ok};
use ringkv_e2e::{e2e, q, query};

const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

e2e!(
    fn get_set_basic(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "GET k"), nil());
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "GET k"), bulk("v"));
        assert_eq!(query(c, &["SET", "bin", "a\0b\r\nc"]), ok());
        assert_eq!(q(c, "GET bin"), bulk("a\0b\r\nc"));
        assert_eq!(query(c, &["SET", "", ""]), ok());
        assert_eq!(query(c, &["GET", ""]), bulk(""));
        assert_eq!(q(c, "SET k"), err("ERR wrong number of arguments for 'set' command"));
        assert_eq!(q(c, "GET"), err("ERR wrong number of arguments for 'get' command"));
        assert_eq!(q(c, "GET a b"), err("ERR wrong number of arguments for 'get' command"));
        assert_eq!(q(c, "SET k v BOGUS"), err(SYNTAX));
    }
);

e2e!(
    fn set_nx_xx_get(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v1 XX"), nil());
        assert_eq!(q(c, "GET k"), nil());
        assert_eq!(q(c, "SET k v1 NX"), ok());
        assert_eq!(q(c, "SET k v2 NX"), nil());
        assert_eq!(q(c, "GET k"), bulk("v1"));
        assert_eq!(q(c, "SET k v2 XX"), ok());
        assert_eq!(q(c, "GET k"), bulk("v2"));
        assert_eq!(q(c, "SET k v NX XX"), err(SYNTAX));
        assert_eq!(q(c, "SET k v3 GET"), bulk("v2"));
        assert_eq!(q(c, "SET new v GET"), nil());
        assert_eq!(q(c, "GET new"), bulk("v"));
        // NX with GET: set when absent (replies nil), untouched when present
        // (replies the old value).
        assert_eq!(q(c, "SET nxget a NX GET"), nil());
        assert_eq!(q(c, "SET nxget b NX GET"), bulk("a"));
        assert_eq!(q(c, "GET nxget"), bulk("a"));
        assert_eq!(q(c, "SET absent b XX GET"), nil());
        assert_eq!(q(c, "EXISTS absent"), int(0));
        // Options are case-insensitive.
        assert_eq!(q(c, "set k v4 xx get"), bulk("v3"));
    }
);

e2e!(
    fn set_expiry_options(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v EX 100"), ok());
        assert!((99..=100).contains(&int_of(&q(c, "TTL k"))));
        assert_eq!(q(c, "SET k v PX 100000"), ok());
        assert!((99_000..=100_000).contains(&int_of(&q(c, "PTTL k"))));
        // KEEPTTL keeps it, a plain SET clears it.
        assert_eq!(q(c, "SET k v2 KEEPTTL"), ok());
        assert!(int_of(&q(c, "PTTL k")) > 90_000);
        assert_eq!(q(c, "SET k v3"), ok());
        assert_eq!(q(c, "TTL k"), int(-1));
        let now = int_of(&q(c, "TIME").map(|t| match t {
            redis::Value::Array(a) => match &a[0] {
                redis::Value::BulkString(s) => redis::Value::Int(String::from_utf8_lossy(s).parse().unwrap()),
                o => panic!("{o:?}"),
            },
            o => panic!("{o:?}"),
        }));
        assert_eq!(query(c, &["SET", "k", "v", "EXAT", &(now + 200).to_string()]), ok());
        assert!((198..=200).contains(&int_of(&q(c, "TTL k"))));
        assert_eq!(q(c, "EXPIRETIME k"), int(now + 200));
        assert_eq!(query(c, &["SET", "k", "v", "PXAT", &((now + 300) * 1000).to_string()]), ok());
        assert_eq!(q(c, "PEXPIRETIME k"), int((now + 300) * 1000));
        // A time in the past deletes the key.
        assert_eq!(q(c, "SET k v PXAT 1"), ok());
        assert_eq!(q(c, "EXISTS k"), int(0));
        assert_eq!(q(c, "SET k v EX 0"), err("ERR invalid expire time in 'set' command"));
        assert_eq!(q(c, "SET k v EX -5"), err("ERR invalid expire time in 'set' command"));
        assert_eq!(q(c, "SET k v PX 0"), err("ERR invalid expire time in 'set' command"));
        assert_eq!(q(c, "SET k v EXAT 0"), err("ERR invalid expire time in 'set' command"));
        assert_eq!(
            q(c, "SET k v EX 9223372036854775807"),
            err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(q(c, "SET k v EX abc"), err(NOT_INT));
        assert_eq!(q(c, "SET k v EX 1.5"), err(NOT_INT));
        assert_eq!(q(c, "SET k v EX"), err(SYNTAX));
        assert_eq!(q(c, "SET k v EX 10 PX 100"), err(SYNTAX));
        assert_eq!(q(c, "SET k v EX 10 KEEPTTL"), err(SYNTAX));
        assert_eq!(q(c, "EXISTS k"), int(0));
        // A repeated option is accepted; the last one wins.
        assert_eq!(q(c, "SET k v EX 10 EX 500"), ok());
        assert!((499..=500).contains(&int_of(&q(c, "TTL k"))));
    }
);

e2e!(
    fn setnx_setex_psetex(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SETNX k a"), int(1));
        assert_eq!(q(c, "SETNX k b"), int(0));
        assert_eq!(q(c, "GET k"), bulk("a"));
        assert_eq!(q(c, "SETEX k 100 b"), ok());
        assert_eq!(q(c, "GET k"), bulk("b"));
        assert!((99..=100).contains(&int_of(&q(c, "TTL k"))));
        assert_eq!(q(c, "SETEX k 0 b"), err("ERR invalid expire time in 'setex' command"));
        assert_eq!(q(c, "SETEX k x b"), err(NOT_INT));
        assert_eq!(q(c, "PSETEX k 5000 c"), ok());
        assert!((4000..=5000).contains(&int_of(&q(c, "PTTL k"))));
        assert_eq!(q(c, "PSETEX k -1 c"), err("ERR invalid expire time in 'psetex' command"));
        assert_eq!(q(c, "SETEX k 10"), err("ERR wrong number of arguments for 'setex' command"));
    }
);

e2e!(
    fn getex_getdel_getset(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "GETEX nope"), nil());
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "GETEX k"), bulk("v"));
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "GETEX k EX 100"), bulk("v"));
        assert!((99..=100).contains(&int_of(&q(c, "TTL k"))));
        assert_eq!(q(c, "GETEX k PX 50000"), bulk("v"));
        assert!((49_000..=50_000).contains(&int_of(&q(c, "PTTL k"))));
        assert_eq!(q(c, "GETEX k PERSIST"), bulk("v"));
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "GETEX k EXAT 4102444800"), bulk("v"));
        assert_eq!(q(c, "EXPIRETIME k"), int(4102444800));
        assert_eq!(q(c, "GETEX k PXAT 4102444800000"), bulk("v"));
        assert_eq!(q(c, "GETEX k EX 10 PX 10"), err(SYNTAX));
        assert_eq!(q(c, "GETEX k PERSIST EX 10"), err(SYNTAX));
        assert_eq!(q(c, "GETEX k EX 0"), err("ERR invalid expire time in 'getex' command"));
        assert_eq!(q(c, "GETEX k EX abc"), err(NOT_INT));
        assert_eq!(q(c, "GETEX k BOGUS"), err(SYNTAX));
        assert_eq!(q(c, "GETDEL k"), bulk("v"));
        assert_eq!(q(c, "GETDEL k"), nil());
        assert_eq!(q(c, "EXISTS k"), int(0));
        assert_eq!(q(c, "GETSET k a"), nil());
        assert_eq!(q(c, "SET k a EX 100"), ok());
        assert_eq!(q(c, "GETSET k b"), bulk("a"));
        // GETSET drops the TTL like SET does.
        assert_eq!(q(c, "TTL k"), int(-1));
        assert_eq!(q(c, "GET k"), bulk("b"));
    }
);

e2e!(
    fn mget_mset_msetnx(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "MSET a 1 b 2 c 3"), ok());
        assert_eq!(q(c, "MGET a b nope c"), arr(vec![bulk("1"), bulk("2"), nil(), bulk("3")]));
        assert_eq!(q(c, "MSET a 1 b"), err("ERR wrong number of arguments for 'mset' command"));
        assert_eq!(q(c, "MSET"), err("ERR wrong number of arguments for 'mset' command"));
        assert_eq!(q(c, "MSETNX a 9 d 4"), int(0));
        assert_eq!(q(c, "EXISTS d"), int(0));
        assert_eq!(q(c, "MSETNX d 4 e 5"), int(1));
        assert_eq!(q(c, "MGET d e a"), arr(vec![bulk("4"), bulk("5"), bulk("1")]));
        // Later duplicates win.
        assert_eq!(q(c, "MSET x 1 x 2"), ok());
        assert_eq!(q(c, "GET x"), bulk("2"));
        assert_eq!(q(c, "MGET"), err("ERR wrong number of arguments for 'mget' command"));
    }
);

e2e!(
    fn incr_decr_family(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "INCR n"), int(1));
        assert_eq!(q(c, "INCRBY n 10"), int(11));
        assert_eq!(q(c, "DECR n"), int(10));
        assert_eq!(q(c, "DECRBY n 15"), int(-5));
        assert_eq!(q(c, "INCRBY n -5"), int(-10));
        assert_eq!(q(c, "GET n"), bulk("-10"));
        assert_eq!(q(c, "SET n 9223372036854775807"), ok());
        assert_eq!(q(c, "INCR n"), err("ERR increment or decrement would overflow"));
        assert_eq!(q(c, "INCRBY n 1"), err("ERR increment or decrement would overflow"));
        assert_eq!(q(c, "SET n -9223372036854775808"), ok());
        assert_eq!(q(c, "DECR n"), err("ERR increment or decrement would overflow"));
        assert_eq!(q(c, "DECRBY n 1"), err("ERR increment or decrement would overflow"));
        assert_eq!(
            q(c, "DECRBY n -9223372036854775808"),
            err("ERR decrement would overflow")
        );
        assert_eq!(q(c, "GET n"), bulk("-9223372036854775808"));
        for bad in ["abc", "1.5", " 1", "1 ", "01", "+1", "", "9223372036854775808"] {
            assert_eq!(query(c, &["SET", "s", bad]), ok());
            assert_eq!(q(c, "INCR s"), err(NOT_INT), "INCR on {bad:?}");
        }
        assert_eq!(q(c, "INCRBY n abc"), err(NOT_INT));
        assert_eq!(q(c, "SET z 0"), ok());
        assert_eq!(q(c, "INCRBY z -0"), err(NOT_INT));
        assert_eq!(q(c, "INCR"), err("ERR wrong number of arguments for 'incr' command"));
    }
);

e2e!(
    fn incrbyfloat_formatting(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "INCRBYFLOAT f 10.5"), bulk("10.5"));
        assert_eq!(q(c, "INCRBYFLOAT f 0.1"), bulk("10.6"));
        assert_eq!(q(c, "INCRBYFLOAT f -5"), bulk("5.6"));
        assert_eq!(q(c, "SET f 5.0e3"), ok());
        assert_eq!(q(c, "INCRBYFLOAT f 2.0e2"), bulk("5200"));
        assert_eq!(q(c, "GET f"), bulk("5200"));
        assert_eq!(q(c, "SET f 3"), ok());
        assert_eq!(q(c, "INCRBYFLOAT f 1.0"), bulk("4"));
        assert_eq!(q(c, "INCRBYFLOAT f 0.3333333333333333"), bulk("4.3333333333333333"));
        assert_eq!(q(c, "INCRBYFLOAT g 1e-5"), bulk("0.00001"));
        assert_eq!(q(c, "INCRBYFLOAT h 1e20"), bulk("100000000000000000000"));
        assert_eq!(q(c, "INCRBYFLOAT i -0.0"), bulk("0"));
        assert_eq!(q(c, "SET s abc"), ok());
        assert_eq!(q(c, "INCRBYFLOAT s 1"), err("ERR value is not a valid float"));
        assert_eq!(q(c, "INCRBYFLOAT f abc"), err("ERR value is not a valid float"));
        assert_eq!(q(c, "INCRBYFLOAT f inf"), err("ERR increment would produce NaN or Infinity"));
        assert_eq!(q(c, "INCRBYFLOAT f nan"), err("ERR value is not a valid float"));
        assert_eq!(q(c, "GET f"), bulk("4.3333333333333333"));
    }
);

e2e!(
    fn append_strlen(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "APPEND k hello"), int(5));
        assert_eq!(query(c, &["APPEND", "k", " world"]), int(11));
        assert_eq!(q(c, "GET k"), bulk("hello world"));
        assert_eq!(q(c, "STRLEN k"), int(11));
        assert_eq!(q(c, "STRLEN nope"), int(0));
        assert_eq!(q(c, "SET n 42"), ok());
        assert_eq!(q(c, "STRLEN n"), int(2));
        assert_eq!(q(c, "APPEND n 1"), int(3));
        assert_eq!(q(c, "INCR n"), int(422));
    }
);

e2e!(
    fn getrange_setrange(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(query(c, &["SET", "s", "This is a string"]), ok());
        assert_eq!(q(c, "GETRANGE s 0 3"), bulk("This"));
        assert_eq!(q(c, "GETRANGE s -3 -1"), bulk("ing"));
        assert_eq!(q(c, "GETRANGE s 0 -1"), bulk("This is a string"));
        assert_eq!(q(c, "GETRANGE s 10 100"), bulk("string"));
        assert_eq!(q(c, "GETRANGE s 5 3"), bulk(""));
        assert_eq!(q(c, "GETRANGE s -100 3"), bulk("This"));
        assert_eq!(q(c, "GETRANGE s 100 200"), bulk(""));
        assert_eq!(q(c, "GETRANGE nope 0 -1"), bulk(""));
        assert_eq!(q(c, "GETRANGE s a 1"), err(NOT_INT));
        assert_eq!(q(c, "SET n 12345"), ok());
        assert_eq!(q(c, "GETRANGE n 1 -2"), bulk("234"));
        assert_eq!(q(c, "SETRANGE s 10 STRING"), int(16));
        assert_eq!(q(c, "GET s"), bulk("This is a STRING"));
        assert_eq!(q(c, "SETRANGE pad 3 ab"), int(5));
        assert_eq!(q(c, "GET pad"), bulk("\0\0\0ab"));
        assert_eq!(query(c, &["SETRANGE", "empty", "5", ""]), int(0));
        assert_eq!(q(c, "EXISTS empty"), int(0));
        assert_eq!(query(c, &["SETRANGE", "s", "100", ""]), int(16));
        assert_eq!(q(c, "SETRANGE s -1 x"), err("ERR offset is out of range"));
        assert_eq!(
            q(c, "SETRANGE s 536870912 x"),
            err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        );
        assert_eq!(q(c, "SETRANGE n 0 9"), int(5));
        assert_eq!(q(c, "GET n"), bulk("92345"));
    }
);

e2e!(
    fn commands_are_case_insensitive_and_unknown_rejected(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "sEt K V"), ok());
        assert_eq!(q(c, "get K"), bulk("V"));
        assert_eq!(q(c, "get k"), nil());
        assert_eq!(
            q(c, "NOSUCH a b"),
            err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")
        );
        let _ = v::text(&q(c, "PING x"));
    }
);

e2e!(
    ringkv_only fn set_ifeq_replies_as_valkey(b) {
        // SET IFEQ is Valkey 8.1's: random SETs with and without it, the
        // same on both servers, every reply and the values compared.
        let ours = b.server();
        let theirs = ringkv_e2e::server::Backend::Valkey.server();
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let mut rng = ringkv_e2e::Rng::new(25);
        let keys = ["k1", "k2", "k3", "list"];
        let values = ["a", "b", "10", "010", "-3", ""];
        let options: &[&[&str]] = &[
            &[], &["GET"], &["NX"], &["XX"], &["KEEPTTL"], &["PX", "100000"],
            &["EX", "0"], &["IFEQ"], &["BOGUS"],
        ];
        assert_eq!(a.cmd(&["RPUSH", "list", "a"]), v.cmd(&["RPUSH", "list", "a"]));
        for _ in 0..600 {
            let mut cmd = vec!["SET", *rng.pick(&keys), *rng.pick(&values)];
            if rng.below(3) > 0 {
                cmd.extend(["IFEQ", *rng.pick(&values)]);
            }
            for _ in 0..rng.below(3) {
                let opt: &[&str] = rng.pick::<&[&str]>(options);
                cmd.extend_from_slice(opt);
            }
            assert_eq!(a.cmd(&cmd), v.cmd(&cmd), "{cmd:?}");
        }
        for k in keys {
            for c in [&["TYPE", k][..], &["GET", k], &["PTTL", k]] {
                let (x, y) = (a.cmd(c), v.cmd(c));
                // PTTL may be a few ms apart; only its sign must agree.
                if c[0] == "PTTL" {
                    assert_eq!(format!("{x:?}").contains('-'), format!("{y:?}").contains('-'), "{c:?}");
                } else {
                    assert_eq!(x, y, "{c:?}");
                }
            }
        }
    }
);

e2e!(
    ringkv_only fn embstr_depends_on_the_key_as_in_valkey(b) {
        // Valkey 8.1 embeds the key in the object beside a short value:
        // whether a string is `embstr` depends on both lengths, and on an
        // expire for long keys. Lengths around each edge, on both servers.
        let ours = b.server();
        let theirs = ringkv_e2e::server::Backend::Valkey.server();
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let mut raws = 0;
        for key_len in [0, 1, 20, 31, 32, 33, 39, 40, 41, 42, 60] {
            let key = "k".repeat(key_len);
            for value_len in [0, 1, 2, 7, 8, 9, 10, 11, 12, 19, 20, 21, 22, 39, 40, 41, 42, 44, 45] {
                let value = "x".repeat(value_len);
                let writes: [&[&str]; 3] = [
                    &["SET", &key, &value],
                    &["SET", &key, &value, "EX", "100"],
                    &["EXPIRE", &key, "100"],
                ];
                for (i, _) in writes.iter().enumerate() {
                    for c in [&mut a, &mut v] {
                        c.cmd(&["DEL", &key]);
                        for w in &writes[..=i] {
                            if !(i == 2 && w.len() == 5) {
                                c.cmd(w);
                            }
                        }
                    }
                    let enc = ["OBJECT", "ENCODING", key.as_str()];
                    let theirs = v.cmd(&enc);
                    raws += usize::from(theirs == ringkv_e2e::Reply::bulk("raw"));
                    assert_eq!(a.cmd(&enc), theirs, "key {key_len} B, value {value_len} B, step {i}");
                }
            }
        }
        assert!(raws > 100, "{raws}");
    }
);
