//! SORT and SORT_RO over lists, sets and sorted sets, with Valkey 8's
//! options, ordering rules, replies and errors (`sort.c`): BY (a pattern
//! with `*`, `*->field` for a hash field, or a constant for "no sort"),
//! LIMIT, GET (`#` and patterns, repeatable), ASC/DESC, ALPHA, and (SORT
//! only) STORE, which writes the result as a list.
//!
//! Ordering as in Valkey: numeric sorting breaks ties by comparing the
//! elements' bytes, so it is deterministic; with "no sort" a list or a
//! sorted set keeps its own order (reversed by DESC), and a set with
//! STORE is sorted ALPHA so the stored list does not depend on the set's
//! hash order. The sort is stable, which is what glibc's `qsort` (a merge
//! sort) gives Valkey for the ties ALPHA BY leaves.

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::cmd::strings::{WRONGTYPE, as_str, bytes_of};
use crate::command::flags::*;
use crate::command::key_flags as kf;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, notify, spec};
use crate::num::parse_i64;
use crate::server::c_str;
use std::cmp::Ordering;
use store::types::List;
use store::types::list::End;
use store::{Entry, Value, ValueRef};

const ORDER: ArgSpec = ArgSpec::oneof(
    "order",
    &[
        ArgSpec::pure_token("asc", "ASC"),
        ArgSpec::pure_token("desc", "DESC"),
    ],
)
.optional();
const BY: ArgSpec = ArgSpec::key_pattern("by-pattern", 1)
    .token("BY")
    .display("pattern")
    .optional();
const LIMIT: ArgSpec = ArgSpec::block(
    "limit",
    &[ArgSpec::integer("offset"), ArgSpec::integer("count")],
)
.token("LIMIT")
.optional();
const GET: ArgSpec = ArgSpec::key_pattern("get-pattern", 1)
    .token("GET")
    .display("pattern")
    .optional()
    .multiple()
    .multiple_token();
const ALPHA: ArgSpec = ArgSpec::pure_token("sorting", "ALPHA").optional();

const SORT_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    BY,
    LIMIT,
    GET,
    ORDER,
    ALPHA,
    ArgSpec::key("destination", 2).token("STORE").optional(),
];
const SORT_RO_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), BY, LIMIT, GET, ORDER, ALPHA];

const CX: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

/// The sorted key, then the keys BY and GET patterns name (known only
/// from the sorted values); SORT adds its STORE destination.
const SORTED_KEY: KeySpec = KeySpec::index(1, kf::RO | kf::ACCESS);
const PATTERN_KEYS: KeySpec = KeySpec::unknown(kf::RO | kf::ACCESS).notes(
    "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
);
const STORE_KEY: KeySpec = KeySpec::unknown(kf::OW | kf::UPDATE).notes(
    "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array",
);

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[SORTED_KEY, PATTERN_KEYS, STORE_KEY],
        getkeys: Some(sort_keys),
        ..spec(
            "generic",
            "sort",
            -2,
            WRITE | DENYOOM,
            (1, 1, 1),
            &["write", "set", "sortedset", "list", "slow", "dangerous"],
            "1.0.0",
            "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
            CX,
            sort,
            SORT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[SORTED_KEY, PATTERN_KEYS],
        getkeys: Some(sort_ro_keys),
        ..spec(
            "generic",
            "sort_ro",
            -2,
            READONLY,
            (1, 1, 1),
            &["read", "set", "sortedset", "list", "slow", "dangerous"],
            "7.0.0",
            "Returns the sorted elements of a list, a set, or a sorted set.",
            CX,
            sort_ro,
            SORT_RO_ARGS,
        )
    },
];

/// COMMAND GETKEYS for SORT (Valkey's `sortGetKeys`): the sorted key and
/// the destination of the last STORE. Options are skipped with their
/// arguments (LIMIT 2, BY and GET 1), everything else one at a time, so a
/// STORE's destination is itself read as an option, as in Valkey.
fn sort_keys(argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let mut keys = vec![(1, kf::RO | kf::ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let arg = argv[i];
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"by") || arg.eq_ignore_ascii_case(b"get") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|pos| (pos, kf::OW | kf::UPDATE)));
    Some(keys)
}

/// COMMAND GETKEYS for SORT_RO (Valkey's `sortROGetKeys`): the sorted key.
fn sort_ro_keys(_argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    Some(vec![(1, kf::RO | kf::ACCESS)])
}

fn sort(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    sort_generic(ctx, argv, false);
}

fn sort_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    sort_generic(ctx, argv, true);
}

/// The options, as `sortCommandGeneric` parses them.
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    /// `LIMIT offset count`; count -1 = no limit.
    limit: (i64, i64),
    by: Option<&'a [u8]>,
    /// BY without a `*`: keep the elements' own order.
    dontsort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// `full_key_access`: the client may read any key (Valkey refuses BY and
/// GET patterns otherwise: they read keys no key spec names).
fn parse_opts<'a>(
    argv: ArgvRef<'a>,
    readonly: bool,
    full_key_access: &dyn Fn() -> bool,
) -> Result<Opts<'a>, &'static str> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit: (0, -1),
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < argv.len() {
        let a = argv.get(j);
        let left = argv.len() - j - 1;
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        if is(b"asc") {
            o.desc = false;
        } else if is(b"desc") {
            o.desc = true;
        } else if is(b"alpha") {
            o.alpha = true;
        } else if is(b"limit") && left >= 2 {
            let start = parse_i64(argv.get(j + 1)).ok_or(NOT_INT)?;
            let count = parse_i64(argv.get(j + 2)).ok_or(NOT_INT)?;
            o.limit = (start, count);
            j += 2;
        } else if !readonly && is(b"store") && left >= 1 {
            o.store = Some(argv.get(j + 1));
            j += 1;
        } else if is(b"by") && left >= 1 {
            let p = argv.get(j + 1);
            o.by = Some(p);
            // A pattern without '*' names no per-element key: no sorting.
            if !c_str(p).contains(&b'*') {
                o.dontsort = true;
            } else if !full_key_access() {
                return Err("ERR BY option of SORT denied due to insufficient ACL permissions.");
            }
            j += 1;
        } else if is(b"get") && left >= 1 {
            if !full_key_access() {
                return Err("ERR GET option of SORT denied due to insufficient ACL permissions.");
            }
            o.gets.push(argv.get(j + 1));
            j += 1;
        } else {
            return Err(SYNTAX_ERR);
        }
        j += 1;
    }
    Ok(o)
}

/// What to sort, in Valkey's loading order, and whether it was a set.
enum Source {
    Missing,
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    /// In score order (Valkey's skiplist order).
    ZSet(Vec<Vec<u8>>),
}

fn load_source(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Source, ()> {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let found = ctx.srv.keyspace.dbs[db].get_read(h, key, ctx.now_ms);
    // A key of another type is a hit too: Valkey counts the lookup before
    // it checks the type.
    super::count_read(
        &mut ctx.srv.stats,
        Some(&mut ctx.srv.keymisses),
        found.is_some(),
        db,
        key,
    );
    let src = match found.as_ref().map(|e| e.value()) {
        None => Source::Missing,
        Some(ValueRef::List(l)) => {
            Source::List(l.iter().map(std::borrow::Cow::into_owned).collect())
        }
        Some(ValueRef::Set(s)) => Source::Set(s.iter().map(|m| m.to_vec()).collect()),
        Some(ValueRef::ZSet(z)) => Source::ZSet(z.iter().map(|(m, _)| m.to_vec()).collect()),
        Some(_) => return Err(()),
    };
    if matches!(src, Source::ZSet(_)) {
        // Valkey converts a sorted set it sorts to a skiplist for good.
        if let Some(Value::ZSet(z)) = ctx.srv.keyspace.dbs[db]
            .get(h, key, ctx.now_ms)
            .and_then(|e| e.boxed_mut())
        {
            z.convert_to_tree();
        }
    }
    Ok(src)
}

/// `lookupKeyByPattern`: `#` is the element itself; otherwise the first
/// `*` is replaced by the element and the key read as a string, or (with
/// `->field` after the `*`) as a hash field. `None` when missing, of
/// another type, or when the pattern has no `*`.
fn lookup_by_pattern(ctx: &mut Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    let pat = c_str(pattern);
    if pat == b"#" {
        return Some(elem.to_vec());
    }
    let star = pat.iter().position(|&c| c == b'*')?;
    // A hash field: the first "->" after the '*' with something after it.
    let field = pat[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < pat.len());
    // The key: prefix, element, the rest of the whole argument up to the
    // field's arrow (Valkey measures the postfix on the full length).
    let end = match field {
        Some(f) => f,
        None => pattern.len(),
    };
    let field_name = field.map(|f| &pattern[f + 2..]);
    let mut key = Vec::with_capacity(end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..end]);

    let db = ctx.session.db;
    let h = store::hash_key(&key);
    let found = ctx.srv.keyspace.dbs[db].get_read(h, &key, ctx.now_ms);
    super::count_read(
        &mut ctx.srv.stats,
        Some(&mut ctx.srv.keymisses),
        found.is_some(),
        db,
        &key,
    );
    let e = found?;
    match field_name {
        Some(f) => match e.value() {
            ValueRef::Hash(hash) => hash.get(f).map(<[u8]>::to_vec),
            _ => None,
        },
        None => {
            let s = as_str(e)?;
            let mut buf = [0u8; resp::num::I64_MAX_LEN];
            Some(bytes_of(s, &mut buf).to_vec())
        }
    }
}

/// C's `strtod` as SORT uses it: the whole string (up to a NUL) must be a
/// number; an empty string is 0; NaN and out-of-range values are errors.
fn sort_score(b: &[u8]) -> Option<f64> {
    let s = c_str(b);
    if s.is_empty() {
        return Some(0.0);
    }
    let lead = s
        .iter()
        .take_while(|&&c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count();
    let t = std::str::from_utf8(&s[lead..]).ok()?;
    let d: f64 = t.parse().ok()?;
    let is_inf_word = t
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase()
        .starts_with("inf");
    if d.is_nan() || (d.is_infinite() && !is_inf_word) {
        return None;
    }
    // An underflow (digits that are not all zero reading as 0) is ERANGE.
    if d == 0.0
        && t.bytes()
            .take_while(|c| !matches!(c, b'e' | b'E'))
            .any(|c| matches!(c, b'1'..=b'9'))
    {
        return None;
    }
    Some(d)
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    /// ALPHA BY: the value sorted by (`None` when the key is missing).
    cmp: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, readonly: bool) {
    let user = ctx.session.user;
    let acl = &ctx.srv.acl;
    // Asked only when BY or GET needs it.
    let full_key_access = || {
        !acl.restricted(user) || {
            let name: &[u8] = if readonly { b"sort_ro" } else { b"sort" };
            let entry = crate::table::table()
                .lookup_original(name)
                .unwrap_or_default();
            let args: Vec<&[u8]> = argv.iter().collect();
            acl.full_key_access(user, entry, &args)
        }
    };
    let mut o = match parse_opts(argv, readonly, &full_key_access) {
        Ok(o) => o,
        Err(e) => return ctx.error(e),
    };
    let src = match load_source(ctx, argv.get(1)) {
        Ok(s) => s,
        Err(()) => return ctx.error(WRONGTYPE),
    };
    // A set in its hash order is not a stable result to store or to hand
    // a script: sort it.
    if o.dontsort && matches!(src, Source::Set(_)) && (o.store.is_some() || ctx.srv.in_script) {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let (elems, ordered) = match src {
        Source::Missing => (Vec::new(), true),
        Source::List(v) | Source::ZSet(v) => (v, true),
        Source::Set(v) => (v, false),
    };
    let n = elems.len() as i64;
    // Valkey's LIMIT sanitising.
    let mut start = o.limit.0.clamp(0, n);
    let count = o.limit.1.clamp(-1, n);
    let mut end = if count < 0 { n } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    if end >= n {
        end = n - 1;
    }

    let mut items: Vec<Item> = if o.dontsort && ordered {
        // The elements' own order (DESC walks it backwards), LIMIT applied.
        let it: Box<dyn Iterator<Item = Vec<u8>>> = if o.desc {
            Box::new(elems.into_iter().rev())
        } else {
            Box::new(elems.into_iter())
        };
        let take = if end >= start {
            (end - start + 1) as usize
        } else {
            0
        };
        let v = it
            .skip(start.max(0) as usize)
            .take(take)
            .map(|elem| Item {
                elem,
                score: 0.0,
                cmp: None,
            })
            .collect();
        end -= start;
        start = 0;
        v
    } else {
        elems
            .into_iter()
            .map(|elem| Item {
                elem,
                score: 0.0,
                cmp: None,
            })
            .collect()
    };

    if !o.dontsort {
        let mut conversion_error = false;
        for it in items.iter_mut() {
            // The value to sort by: the element, or what BY points at (a
            // missing one sorts as 0, or first with ALPHA).
            let by = match o.by {
                Some(p) => match lookup_by_pattern(ctx, p, &it.elem) {
                    Some(v) => Some(v),
                    None => continue,
                },
                None => None,
            };
            if o.alpha {
                it.cmp = by;
            } else {
                match sort_score(by.as_deref().unwrap_or(&it.elem)) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        if conversion_error {
            return ctx.error("ERR One or more scores can't be converted into double");
        }
        let (alpha, by_pattern, desc) = (o.alpha, o.by.is_some(), o.desc);
        // As Valkey: ALPHA collates (strcoll in `locale-collate`), but
        // compares bytes when the result is stored.
        let srv = &*ctx.srv;
        let alpha_cmp = |x: &[u8], y: &[u8]| {
            if o.store.is_some() {
                x.cmp(y)
            } else {
                srv.collate(x, y)
            }
        };
        items.sort_by(|a, b| {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.elem.cmp(&b.elem))
            } else if by_pattern {
                match (&a.cmp, &b.cmp) {
                    (Some(x), Some(y)) => alpha_cmp(x, y),
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                }
            } else {
                alpha_cmp(&a.elem, &b.elem)
            };
            if desc { c.reverse() } else { c }
        });
    }

    let range = if end >= start {
        start as usize..(end + 1) as usize
    } else {
        0..0
    };
    let selected = &items[range];
    let outputlen = if o.gets.is_empty() {
        selected.len()
    } else {
        o.gets.len() * selected.len()
    };
    let Some(dst) = o.store else {
        ctx.reply.array_len(outputlen);
        for it in selected {
            if o.gets.is_empty() {
                ctx.reply.bulk(&it.elem);
            }
            for g in &o.gets {
                match lookup_by_pattern(ctx, g, &it.elem) {
                    Some(v) => ctx.reply.bulk(&v),
                    None => ctx.reply.null(),
                }
            }
        }
        return;
    };
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(outputlen);
    for it in selected {
        if o.gets.is_empty() {
            out.push(it.elem.clone());
        }
        for g in &o.gets {
            out.push(lookup_by_pattern(ctx, g, &it.elem).unwrap_or_default());
        }
    }
    store_list(ctx, dst, out);
}

/// STORE: replace `dst` with the list `items`, or delete it when empty;
/// reply with the count.
fn store_list(ctx: &mut Ctx<'_>, dst: &[u8], items: Vec<Vec<u8>>) {
    let db = ctx.session.db;
    let h = ctx.key_hash(dst);
    let n = items.len();
    if n == 0 {
        let d = &mut ctx.srv.keyspace.dbs[db];
        if d.get(h, dst, ctx.now_ms).is_some() {
            d.delete(h, dst);
            ctx.touched(db, dst);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return ctx.reply.int(0);
    }
    let lim = ctx.srv.config.encoding;
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let mut list = List::new();
    list.push(End::Right, &refs, &lim);
    super::set_key(ctx, h, dst, Entry::new(Value::List(list)));
    ctx.reply.int(n as i64);
    ctx.notify(notify::LIST, "sortstore", dst);
    ctx.touched(db, dst);
    ctx.changed_elements(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_strtod_over_the_whole_string() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b" 1.5"), Some(1.5));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b"3\0junk"), Some(3.0));
        assert_eq!(sort_score(b"1e999"), None);
        assert_eq!(sort_score(b"1e-999"), None);
        assert_eq!(sort_score(b"0e5"), Some(0.0));
        assert_eq!(sort_score(b"nan"), None);
        assert_eq!(sort_score(b"12a"), None);
    }

    fn keys_of(line: &str) -> Vec<(usize, u16)> {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let spec = COMMANDS
            .iter()
            .find(|c| c.name.as_bytes() == argv[0])
            .unwrap();
        crate::getkeys::command_keys(spec, &argv)
    }

    #[test]
    fn getkeys_finds_the_last_store_past_the_options_arguments() {
        const SRC: (usize, u16) = (1, kf::RO | kf::ACCESS);
        let dst = |pos| (pos, kf::OW | kf::UPDATE);
        assert_eq!(keys_of("sort k"), [SRC]);
        assert_eq!(keys_of("sort k LIMIT 0 1 store d"), [SRC, dst(6)]);
        assert_eq!(keys_of("sort k STORE a STORE b"), [SRC, dst(5)]);
        // A STORE without a destination, or one that is an option's
        // argument, names no key.
        assert_eq!(keys_of("sort k STORE"), [SRC]);
        assert_eq!(keys_of("sort k GET store d"), [SRC]);
        assert_eq!(keys_of("sort k LIMIT store x STORE d"), [SRC, dst(6)]);
        // The destination is read as an option too, as Valkey's loop does.
        assert_eq!(keys_of("sort k store limit 1 2"), [SRC, dst(3)]);
        assert_eq!(keys_of("sort k store by d"), [SRC, dst(3)]);
        // SORT_RO never stores.
        assert_eq!(keys_of("sort_ro k STORE d"), [SRC]);
    }
}
