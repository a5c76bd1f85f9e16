//! DEBUG: the subcommands tools and client test suites use, answering as
//! Valkey 8.1's. DIGEST and DIGEST-VALUE compute Valkey's very digest
//! (crate::digest), so datasets can be compared across the two servers;
//! ERROR and PROTOCOL give clients the replies they test their parsers
//! with. Subcommands that inspect Valkey's own structures (LISTPACK,
//! QUICKLIST, SDSLEN, HTSTATS, ...) or crash the server on purpose are
//! not here.

use crate::batch::ArgvRef;
use crate::command::Ctx;
use crate::config::Allowed;
use crate::digest;
use crate::log;

pub(super) fn debug(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let allowed = match ctx.srv.config.enable_debug_command {
        Allowed::Yes => true,
        Allowed::Local => ctx.session.peer.is_none_or(|p| crate::is_local(p.ip())),
        Allowed::No => false,
    };
    if !allowed {
        ctx.error(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        );
        return;
    }
    let sub = argv.get(1).to_ascii_lowercase();
    match (sub.as_slice(), argv.len()) {
        (b"sleep", 3) => {
            let secs: f64 = std::str::from_utf8(argv.get(2))
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0.0);
            if secs > 0.0 && secs.is_finite() {
                // As Valkey: the whole server sleeps (tests use it for that).
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            }
            ctx.reply.ok();
        }
        (b"set-active-expire", 3) => {
            ctx.srv.active_expire_enabled = argv.get(2) != b"0";
            ctx.reply.ok();
        }
        (b"pause-cron", 3) => {
            // Valkey reads it with atoi: anything but a number is 0.
            ctx.srv.cron_paused = crate::num::parse_i64(argv.get(2)).is_some_and(|n| n != 0);
            ctx.reply.ok();
        }
        (b"set-disable-deny-scripts", 3) => {
            ctx.srv.script_deny_disabled = argv.get(2) != b"0";
            ctx.reply.ok();
        }
        (b"object", 3 | 4) => {
            let fast = argv.len() == 4 && argv.get(3).eq_ignore_ascii_case(b"fast");
            debug_object(ctx, argv.get(2), fast)
        }
        (b"populate", 3..=5) => debug_populate(ctx, argv),
        (b"reload", _) => debug_reload(ctx, argv),
        (b"quicklist-packed-threshold", 3) => {
            let bytes = std::str::from_utf8(argv.get(2))
                .ok()
                .and_then(crate::config::parse_memory)
                .and_then(|n| u64::try_from(n).ok());
            match bytes {
                Some(n) if store::types::list::set_packed_threshold(n) => ctx.reply.ok(),
                _ => ctx.error(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                ),
            }
        }
        (b"loadaof", 2) => match crate::aof::reload(ctx.srv, ctx.now_ms) {
            Ok(()) => ctx.reply.ok(),
            Err(e) => ctx.error(&e),
        },
        (b"digest", 2) => {
            let d = digest::dataset(ctx.srv.keyspace.dbs.iter());
            ctx.reply.simple(&crate::num::hex(&d));
        }
        (b"digest-value", _) => {
            ctx.reply.array_len(argv.len() - 2);
            for i in 2..argv.len() {
                let key = argv.get(i);
                let mut d = digest::Digest::default();
                // As Valkey: a key past its time that is still held counts.
                if let Some(e) = ctx.db().peek(store::hash_key(key), key) {
                    digest::add_value(&mut d, e);
                }
                ctx.reply.simple(&crate::num::hex(&d));
            }
        }
        (b"error", 3) => {
            ctx.srv.stats.error_is_data = true;
            ctx.reply.error(&String::from_utf8_lossy(argv.get(2)));
        }
        (b"log", 3) => {
            log::warning(&format!(
                "DEBUG LOG: {}",
                String::from_utf8_lossy(argv.get(2))
            ));
            ctx.reply.ok();
        }
        (b"protocol", 3) => debug_protocol(ctx, argv.get(2)),
        (b"change-repl-id", 2) => {
            log::notice("Changing replication IDs after receiving DEBUG change-repl-id");
            ctx.srv.repl.change_id();
            ctx.reply.ok();
        }
        (b"help", 2) => super::reply_help(ctx, "DEBUG", HELP),
        _ => super::subcommand_syntax_error(&mut ctx.reply, argv),
    }
}

const HELP: &[&str] = &[
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a RESP protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate error replies.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key> [fast]",
    "    Show low level info about `key` and associated value.",
    "    Some fields of the default behavior may be time consuming to fetch,",
    "    and `fast` can be passed to avoid fetching them.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cache friendliness of the keys may be degraded.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the keys are expired only on access).",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
];

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE].
fn debug_reload(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut opts = crate::persist::ReloadOptions {
        save: true,
        flush: true,
        merge: false,
    };
    for i in 2..argv.len() {
        let o = argv.get(i);
        if o.eq_ignore_ascii_case(b"merge") {
            opts.merge = true;
        } else if o.eq_ignore_ascii_case(b"noflush") {
            opts.flush = false;
        } else if o.eq_ignore_ascii_case(b"nosave") {
            opts.save = false;
        } else {
            return ctx
                .error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
        }
    }
    match crate::persist::debug_reload(ctx.srv, ctx.now_ms, opts) {
        Ok(()) => ctx.reply.ok(),
        Err(e) => ctx.error(&e),
    }
}

/// DEBUG PROTOCOL <type>: Valkey's sample reply of each RESP type.
fn debug_protocol(ctx: &mut Ctx<'_>, name: &[u8]) {
    let r = &mut ctx.reply;
    match name.to_ascii_lowercase().as_slice() {
        b"string" => r.bulk(b"Hello World"),
        b"integer" => r.int(12345),
        // Valkey's sample value, not π.
        #[allow(clippy::approx_constant)]
        b"double" => r.double(3.141),
        b"bignum" => r.big_number("1234567999999999999999999999999999999"),
        b"null" => r.null(),
        b"array" => {
            r.array_len(3);
            (0..3).for_each(|i| r.int(i));
        }
        b"set" => {
            r.set_len(3);
            (0..3).for_each(|i| r.int(i));
        }
        b"map" => {
            r.map_len(3);
            for i in 0..3 {
                r.int(i);
                r.boolean(i == 1);
            }
        }
        b"attrib" => {
            if ctx.session.proto == resp::Protocol::Resp3 {
                r.attribute_len(1);
                r.bulk(b"key-popularity");
                r.array_len(2);
                r.bulk(b"key:123");
                r.int(90);
            }
            r.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            if ctx.session.proto != resp::Protocol::Resp3 {
                return ctx.error("ERR RESP2 is not supported by this command");
            }
            // Valkey delivers a push made while a command runs after the
            // command's own reply.
            r.bulk(b"Some real reply following the push reply");
            r.push_len(2);
            r.bulk(b"server-cpu-usage");
            r.int(42);
        }
        b"true" => r.boolean(true),
        b"false" => r.boolean(false),
        b"verbatim" => r.verbatim("txt", b"This is a verbatim\nstring"),
        _ => ctx.error(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// DEBUG POPULATE: keys `<prefix>:<n>` holding `value:<n>` (cut or padded
/// with zero bytes to `size`), skipping keys that exist, as Valkey.
fn debug_populate(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let count = crate::num::parse_i64(argv.get(2));
    let size = if argv.len() == 5 {
        crate::num::parse_i64(argv.get(4))
    } else {
        Some(0)
    };
    let (Some(count), Some(size)) = (count, size) else {
        return ctx.error(super::NOT_INT);
    };
    if count < 0 {
        return ctx.error("ERR count can't be negative");
    }
    let prefix = if argv.len() >= 4 { argv.get(3) } else { b"key" };
    let now = ctx.now_ms;
    let db = ctx.db();
    let mut key = Vec::new();
    let mut val = Vec::new();
    for n in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(n.to_string().as_bytes());
        let h = store::hash_key(&key);
        if db.peek(h, &key).is_some() {
            continue;
        }
        val.clear();
        val.extend_from_slice(format!("value:{n}").as_bytes());
        if size > 0 {
            val.resize(size as usize, 0);
        }
        crate::cmd::strings::store_arg(db, h, &key, &val, None, now);
    }
    ctx.reply.ok();
}

/// DEBUG OBJECT: Valkey's line. `serializedlength` is the value's size in
/// an RDB file (compressed as `rdbcompression` says), left out with
/// `fast`; `lru` and the LFU fields read the same 24 access bits, as
/// Valkey's do, whichever policy stamped them.
fn debug_object(ctx: &mut Ctx<'_>, key: &[u8], fast: bool) {
    let hash = store::hash_key(key);
    let now = ctx.now_ms;
    let compress = ctx.srv.config.rdbcompression;
    let decay = ctx.srv.config.lfu_decay_time;
    let fill = ctx.srv.config.encoding.list_max_listpack_size;
    let Some(e) = ctx.db().peek(hash, key) else {
        return ctx.error("ERR no such key");
    };
    let mut line = format!(
        "Value at:0x{:x} refcount:1 encoding:{}",
        e as *const _ as usize,
        e.encoding()
    );
    if !fast {
        let len = rdb::payload::serialized_len(e.value(), compress);
        line.push_str(&format!(" serializedlength:{len}"));
    }
    let access = e.access();
    line.push_str(&format!(
        " lru:{access} lru_seconds_idle:{} lfu_freq:{} lfu_access_time_minutes:{}",
        e.idle_ms(now) / 1000,
        e.lfu_counter(now, decay),
        access >> 8
    ));
    if let store::ValueRef::List(l) = e.value()
        && e.encoding() == "quicklist"
    {
        // As Valkey's, `ql_compressed` says whether the list was made to
        // compress (a depth), not whether a node is compressed now.
        line.push_str(&format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{fill} ql_compressed:{}",
            l.nodes(),
            l.len() as f64 / l.nodes() as f64,
            u8::from(l.compress_depth().is_some_and(|d| d > 0)),
        ));
        if !fast {
            let size = rdb::object::quicklist_bytes(l);
            line.push_str(&format!(" ql_uncompressed_size:{size}"));
        }
    }
    ctx.reply.simple(&line);
}
