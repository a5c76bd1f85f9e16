//! Bitmap commands on string values: SETBIT GETBIT BITCOUNT BITPOS BITOP
//! BITFIELD BITFIELD_RO, with Valkey 8's replies and errors (`bitops.c`).
//!
//! Bit 0 is the most significant bit of byte 0. Reads past the end of a
//! string see zeros; writes grow it with zero bytes (up to
//! `proto-max-bulk-len`). Reads borrow the stored bytes; only integer-
//! encoded strings are formatted first.

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::cmd::strings::{
    WRONGTYPE, as_str, as_str_mut, bytes_of, lookup_read, lookup_write, notify_write, store,
    unshare,
};
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, notify, spec};
use crate::num::parse_i64;
use store::Str;

const GROUP: &str = "bitmap";

const KEY: ArgSpec = ArgSpec::key("key", 0);
const UNIT: ArgSpec = ArgSpec::oneof(
    "unit",
    &[
        ArgSpec::pure_token("byte", "BYTE"),
        ArgSpec::pure_token("bit", "BIT"),
    ],
)
.optional();
const SETBIT_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("offset"), ArgSpec::integer("value")];
const GETBIT_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("offset")];
/// `[start [end [BYTE|BIT]]]` (Valkey 8 made `end` optional).
const RANGE_ARGS: ArgSpec = ArgSpec::block(
    "range",
    &[
        ArgSpec::integer("start"),
        ArgSpec::block("end-unit-block", &[ArgSpec::integer("end"), UNIT]).optional(),
    ],
)
.optional();
const BITCOUNT_ARGS: &[ArgSpec] = &[KEY, RANGE_ARGS];
const BITPOS_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("bit"), RANGE_ARGS];
const BITOP_ARGS: &[ArgSpec] = &[
    ArgSpec::oneof(
        "operation",
        &[
            ArgSpec::pure_token("and", "AND"),
            ArgSpec::pure_token("or", "OR"),
            ArgSpec::pure_token("xor", "XOR"),
            ArgSpec::pure_token("not", "NOT"),
        ],
    ),
    ArgSpec::key("destkey", 0),
    ArgSpec::key("key", 1).multiple(),
];
const BITFIELD_ARGS: &[ArgSpec] = &[KEY, ArgSpec::string("operation").optional().multiple()];
const BITFIELD_RO_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::block(
        "get-block",
        &[ArgSpec::string("encoding"), ArgSpec::integer("offset")],
    )
    .token("GET")
    .optional()
    .multiple(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            GROUP,
            "setbit",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            &["write", "bitmap", "slow"],
            "2.2.0",
            "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
            "O(1)",
            setbit,
            SETBIT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "getbit",
            3,
            READONLY | FAST,
            (1, 1, 1),
            &["read", "bitmap", "fast"],
            "2.2.0",
            "Returns a bit value by offset.",
            "O(1)",
            getbit,
            GETBIT_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::block(
                "range",
                &[
                    ArgSpec::integer("start"),
                    ArgSpec::block(
                        "end-unit-block",
                        &[
                            ArgSpec::integer("end"),
                            ArgSpec::oneof(
                                "unit",
                                &[
                                    ArgSpec::pure_token("byte", "BYTE"),
                                    ArgSpec::pure_token("bit", "BIT"),
                                ],
                            )
                            .since("7.0.0")
                            .optional(),
                        ],
                    )
                    .optional(),
                ],
            )
            .optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[
            ("7.0.0", "Added the `BYTE|BIT` option."),
            (
                "8.0.0",
                "`end` made optional; when called without argument the command reports the last BYTE.",
            ),
        ],
        ..spec(
            GROUP,
            "bitcount",
            -2,
            READONLY,
            (1, 1, 1),
            &["read", "bitmap", "slow"],
            "2.6.0",
            "Counts the number of set bits (population counting) in a string.",
            "O(N)",
            bitcount,
            BITCOUNT_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("bit"),
            ArgSpec::block(
                "range",
                &[
                    ArgSpec::integer("start"),
                    ArgSpec::block(
                        "end-unit-block",
                        &[
                            ArgSpec::integer("end"),
                            ArgSpec::oneof(
                                "unit",
                                &[
                                    ArgSpec::pure_token("byte", "BYTE"),
                                    ArgSpec::pure_token("bit", "BIT"),
                                ],
                            )
                            .since("7.0.0")
                            .optional(),
                        ],
                    )
                    .optional(),
                ],
            )
            .optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[("7.0.0", "Added the `BYTE|BIT` option.")],
        ..spec(
            GROUP,
            "bitpos",
            -3,
            READONLY,
            (1, 1, 1),
            &["read", "bitmap", "slow"],
            "2.8.7",
            "Finds the first set (1) or clear (0) bit in a string.",
            "O(N)",
            bitpos,
            BITPOS_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(2, kf::OW | kf::UPDATE),
            KeySpec::index(3, kf::RO | kf::ACCESS).range(-1, 1, 0),
        ],
        ..spec(
            GROUP,
            "bitop",
            -4,
            WRITE | DENYOOM,
            (2, -1, 1),
            &["write", "bitmap", "slow"],
            "2.6.0",
            "Performs bitwise operations on multiple strings, and stores the result.",
            "O(N)",
            bitop,
            BITOP_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::oneof(
                "operation",
                &[
                    ArgSpec::block(
                        "get-block",
                        &[ArgSpec::string("encoding"), ArgSpec::integer("offset")],
                    )
                    .token("GET"),
                    ArgSpec::block(
                        "write",
                        &[
                            ArgSpec::oneof(
                                "overflow-block",
                                &[
                                    ArgSpec::pure_token("wrap", "WRAP"),
                                    ArgSpec::pure_token("sat", "SAT"),
                                    ArgSpec::pure_token("fail", "FAIL"),
                                ],
                            )
                            .token("OVERFLOW")
                            .optional(),
                            ArgSpec::oneof(
                                "write-operation",
                                &[
                                    ArgSpec::block(
                                        "set-block",
                                        &[
                                            ArgSpec::string("encoding"),
                                            ArgSpec::integer("offset"),
                                            ArgSpec::integer("value"),
                                        ],
                                    )
                                    .token("SET"),
                                    ArgSpec::block(
                                        "incrby-block",
                                        &[
                                            ArgSpec::string("encoding"),
                                            ArgSpec::integer("offset"),
                                            ArgSpec::integer("increment"),
                                        ],
                                    )
                                    .token("INCRBY"),
                                ],
                            ),
                        ],
                    ),
                ],
            )
            .optional()
            .multiple(),
        ],
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE | kf::VARIABLE_FLAGS)
                .notes("This command allows both access and modification of the key"),
        ],
        getkeys: Some(bitfield_keys),
        ..spec(
            GROUP,
            "bitfield",
            -2,
            WRITE | DENYOOM,
            (1, 1, 1),
            &["write", "bitmap", "slow"],
            "3.2.0",
            "Performs arbitrary bitfield integer operations on strings.",
            "O(1) for each subcommand specified",
            bitfield,
            BITFIELD_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::block(
                "get-block",
                &[ArgSpec::string("encoding"), ArgSpec::integer("offset")],
            )
            .token("GET")
            .optional()
            .multiple()
            .multiple_token(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "bitfield_ro",
            -2,
            READONLY | FAST,
            (1, 1, 1),
            &["read", "bitmap", "fast"],
            "6.0.0",
            "Performs arbitrary read-only bitfield integer operations on strings.",
            "O(1) for each subcommand specified",
            bitfield_ro,
            BITFIELD_RO_ARGS,
        )
    },
];

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// Run `f` over the bytes of the string at `key` (empty when missing);
/// `Err` after replying WRONGTYPE.
fn with_bytes<R>(ctx: &mut Ctx<'_>, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<R, ()> {
    with_value(ctx, key, |b| f(b.unwrap_or(&[])))
}

/// [`with_bytes`], telling a missing key (`None`) from an empty string.
fn with_value<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, ()> {
    let h = ctx.key_hash(key);
    let db = ctx.session.db;
    let now = ctx.now_ms;
    match lookup_read(ctx.srv, db, h, key, now) {
        None => Ok(f(None)),
        Some(e) => match as_str(e) {
            None => {
                ctx.reply.error(WRONGTYPE);
                Err(())
            }
            Some(s) => {
                let mut buf = [0u8; resp::num::I64_MAX_LEN];
                Ok(f(Some(bytes_of(s, &mut buf))))
            }
        },
    }
}

/// Valkey's `lookupStringForBitCommand`: the string at `key` as editable
/// bytes at least `len` long (created or zero-extended). `Err` after
/// replying WRONGTYPE. The flags say the key was created, and that it was
/// created or grew (Valkey's `dirty`: a change even if no bit moves).
fn bytes_for_write<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &[u8],
    len: usize,
) -> Result<(&'c mut Vec<u8>, bool, bool), ()> {
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    let mut created = false;
    match lookup_write(db, h, key, now) {
        Some(e) if as_str(e).is_none() => {
            ctx.reply.error(WRONGTYPE);
            return Err(());
        }
        Some(_) => {}
        None => created = store(db, h, key, Str::Raw(Vec::new()), now),
    }
    let e = lookup_write(db, h, key, now).expect("present");
    let b = unshare(as_str_mut(e).expect("a string"));
    let grew = created || b.len() < len;
    if b.len() < len {
        b.resize(len, 0);
    }
    Ok((b, created, grew))
}

/// A bit offset argument; `bits` > 0 allows BITFIELD's `#N` form.
fn parse_offset(arg: &[u8], bits: u64, max_bulk: usize) -> Option<u64> {
    let (hash, digits) = match arg.first() {
        Some(b'#') if bits > 0 => (true, &arg[1..]),
        _ => (false, arg),
    };
    let v = parse_i64(digits)?;
    if v < 0 {
        return None;
    }
    let v = if hash {
        (v as u64).checked_mul(bits)?
    } else {
        v as u64
    };
    ((v >> 3) < max_bulk as u64).then_some(v)
}

fn get_bit(b: &[u8], off: u64) -> u64 {
    let byte = (off >> 3) as usize;
    b.get(byte)
        .map_or(0, |&x| u64::from((x >> (7 - (off & 7))) & 1))
}

fn set_bit(b: &mut [u8], off: u64, on: bool) {
    let byte = (off >> 3) as usize;
    let mask = 1u8 << (7 - (off & 7));
    if on {
        b[byte] |= mask;
    } else {
        b[byte] &= !mask;
    }
}

fn setbit(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(off) = parse_offset(argv.get(2), 0, ctx.srv.config.proto_max_bulk_len) else {
        return ctx.error(BAD_OFFSET);
    };
    let on = match argv.get(3) {
        b"1" => true,
        b"0" => false,
        _ => return ctx.error("ERR bit is not an integer or out of range"),
    };
    let Ok((b, created, grew)) = bytes_for_write(ctx, key, (off >> 3) as usize + 1) else {
        return;
    };
    let old = get_bit(b, off);
    set_bit(b, off, on);
    ctx.reply.int(old as i64);
    // A bit set to what it was changes nothing (not signalled, counted
    // nor propagated), as in Valkey.
    if grew || (old == 1) != on {
        let db = ctx.session.db;
        ctx.touched(db, key);
        notify_write(ctx, created, "setbit", key);
    }
}

fn getbit(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(off) = parse_offset(argv.get(2), 0, ctx.srv.config.proto_max_bulk_len) else {
        return ctx.error(BAD_OFFSET);
    };
    if let Ok(bit) = with_bytes(ctx, argv.get(1), |b| get_bit(b, off)) {
        ctx.reply.int(bit as i64);
    }
}

/// Start/end (inclusive) of a BITCOUNT/BITPOS range in units of `total`,
/// negative counting from the end; `None` for an empty range.
fn clamp_range(start: i64, end: i64, total: i64) -> Option<(i64, i64)> {
    let mut s = if start < 0 { total + start } else { start };
    let mut e = if end < 0 { total + end } else { end };
    if s < 0 {
        s = 0;
    }
    if e < 0 {
        e = 0;
    }
    if e >= total {
        e = total - 1;
    }
    (s <= e && total > 0).then_some((s, e))
}

/// Set bits in bit positions `first..=last`.
fn count_bits(b: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n: u64 = b[fb..=lb].iter().map(|x| u64::from(x.count_ones())).sum();
    // Remove the bits of the first and last bytes outside the range.
    if first & 7 != 0 {
        n -= u64::from((b[fb] >> (8 - (first & 7))).count_ones());
    }
    n -= u64::from((b[lb] & ((1u16 << (7 - (last & 7))) - 1) as u8).count_ones());
    n
}

/// BYTE or BIT in an optional argument.
fn parse_unit(argv: ArgvRef<'_>, at: usize) -> Result<bool, ()> {
    if at >= argv.len() {
        return Ok(false);
    }
    let u = argv.get(at);
    if u.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if u.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(())
    }
}

fn bitcount(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // BITCOUNT key [start [end [BYTE|BIT]]]: a start alone runs to the end.
    let range = match argv.len() {
        2 => None,
        3..=5 => {
            // Valkey's order: start, the unit, then end.
            let Some(s) = parse_i64(argv.get(2)) else {
                return ctx.error(NOT_INT);
            };
            let Ok(bit) = parse_unit(argv, 4) else {
                return ctx.error(SYNTAX_ERR);
            };
            let e = if argv.len() >= 4 {
                parse_i64(argv.get(3))
            } else {
                Some(-1)
            };
            let Some(e) = e else {
                return ctx.error(NOT_INT);
            };
            Some((s, e, bit))
        }
        _ => return ctx.error(SYNTAX_ERR),
    };
    let r = with_bytes(ctx, argv.get(1), |b| {
        let (first, last) = match range {
            None if b.is_empty() => return 0,
            None => (0, b.len() as u64 * 8 - 1),
            // Both ends counted from the end and crossed: empty before
            // clamping would make it one byte (Valkey's order).
            Some((s, e, _)) if s < 0 && e < 0 && s > e => return 0,
            Some((s, e, bit)) => {
                let total = if bit {
                    b.len() as i64 * 8
                } else {
                    b.len() as i64
                };
                match clamp_range(s, e, total) {
                    None => return 0,
                    Some((s, e)) if bit => (s as u64, e as u64),
                    Some((s, e)) => (s as u64 * 8, e as u64 * 8 + 7),
                }
            }
        };
        count_bits(b, first, last)
    });
    if let Ok(n) = r {
        ctx.reply.int(n as i64);
    }
}

fn bitpos(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let want = match parse_i64(argv.get(2)) {
        Some(0) => 0,
        Some(1) => 1,
        Some(_) => return ctx.error("ERR The bit argument must be 1 or 0."),
        None => return ctx.error(NOT_INT),
    };
    if argv.len() > 6 {
        return ctx.error(SYNTAX_ERR);
    }
    let start = if argv.len() > 3 {
        match parse_i64(argv.get(3)) {
            Some(v) => Some(v),
            None => return ctx.error(NOT_INT),
        }
    } else {
        None
    };
    // Valkey's order, as BITCOUNT's: start, the unit, then end.
    let Ok(bit_unit) = parse_unit(argv, 5) else {
        return ctx.error(SYNTAX_ERR);
    };
    let end = if argv.len() > 4 {
        match parse_i64(argv.get(4)) {
            Some(v) => Some(v),
            None => return ctx.error(NOT_INT),
        }
    } else {
        None
    };
    let r = with_value(ctx, argv.get(1), |b| -> i64 {
        // A missing key is an endless run of zeros; an empty string has
        // no bits at all.
        let Some(b) = b else {
            return if want == 1 { -1 } else { 0 };
        };
        let total = if bit_unit {
            b.len() as i64 * 8
        } else {
            b.len() as i64
        };
        let Some((s, e)) = clamp_range(start.unwrap_or(0), end.unwrap_or(-1), total) else {
            return -1;
        };
        let (first, last) = if bit_unit {
            (s as u64, e as u64)
        } else {
            (s as u64 * 8, e as u64 * 8 + 7)
        };
        let skip = if want == 1 { 0x00 } else { 0xff };
        let mut pos = first;
        while pos <= last {
            // Whole bytes that cannot hold the bit are skipped at once.
            if pos & 7 == 0 && pos + 7 <= last && b[(pos >> 3) as usize] == skip {
                pos += 8;
                continue;
            }
            if get_bit(b, pos) == want {
                return pos as i64;
            }
            pos += 1;
        }
        // Looking for a clear bit with no explicit end: the string is
        // taken as padded with zeros, so the answer is just past it.
        if want == 0 && end.is_none() {
            return last as i64 + 1;
        }
        -1
    });
    if let Ok(n) = r {
        ctx.reply.int(n);
    }
}

fn bitop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let op = argv.get(1);
    let op = if op.eq_ignore_ascii_case(b"and") {
        b'&'
    } else if op.eq_ignore_ascii_case(b"or") {
        b'|'
    } else if op.eq_ignore_ascii_case(b"xor") {
        b'^'
    } else if op.eq_ignore_ascii_case(b"not") {
        b'~'
    } else {
        return ctx.error(SYNTAX_ERR);
    };
    if op == b'~' && argv.len() != 4 {
        return ctx.error("ERR BITOP NOT must be called with a single source key.");
    }
    let dst = argv.get(2);
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(argv.len() - 3);
    for i in 3..argv.len() {
        match with_bytes(ctx, argv.get(i), <[u8]>::to_vec) {
            Ok(b) => srcs.push(b),
            Err(()) => return,
        }
    }
    let len = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![0u8; len];
    for (i, o) in out.iter_mut().enumerate() {
        let byte = |s: &Vec<u8>| s.get(i).copied().unwrap_or(0);
        *o = match op {
            b'~' => !byte(&srcs[0]),
            b'&' => srcs.iter().map(byte).fold(0xff, |a, x| a & x),
            b'|' => srcs.iter().map(byte).fold(0, |a, x| a | x),
            _ => srcs.iter().map(byte).fold(0, |a, x| a ^ x),
        };
    }
    let db = ctx.session.db;
    let h = ctx.key_hash(dst);
    let now = ctx.now_ms;
    let d = &mut ctx.srv.keyspace.dbs[db];
    if out.is_empty() {
        if d.get(h, dst, now).is_some() {
            d.delete(h, dst);
            ctx.touched(db, dst);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return ctx.reply.int(0);
    }
    let created = store(d, h, dst, Str::Raw(out), now);
    ctx.reply.int(len as i64);
    ctx.touched(db, dst);
    // Valkey names the event after what happened to the key, not the command.
    notify_write(ctx, created, "set", dst);
}

// ---- BITFIELD ----------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
enum Op {
    Get,
    Set(i64),
    Incr(i64),
}

#[derive(Clone, Copy)]
struct Field {
    op: Op,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

fn read_field(b: &[u8], offset: u64, bits: u32, signed: bool) -> i64 {
    let mut v: u64 = 0;
    for i in 0..u64::from(bits) {
        v = (v << 1) | get_bit(b, offset + i);
    }
    if signed && bits < 64 && v & (1 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

fn write_field(b: &mut [u8], offset: u64, bits: u32, v: i64) {
    let v = v as u64;
    for i in 0..u64::from(bits) {
        let on = (v >> (u64::from(bits) - 1 - i)) & 1 == 1;
        set_bit(b, offset + i, on);
    }
}

/// `old + incr` in the field's range under its overflow rule; `None` for
/// FAIL on overflow.
fn apply_overflow(old: i64, incr: i64, bits: u32, signed: bool, ow: Overflow) -> Option<i64> {
    let (min, max): (i128, i128) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    // Valkey reads an unsigned field's operand as a u64: SET u8 with -3
    // is a huge value (it saturates at the top, or wraps to 253).
    let base = if signed {
        i128::from(old)
    } else {
        i128::from(old as u64)
    };
    let sum = base + i128::from(incr);
    if (min..=max).contains(&sum) {
        return Some(sum as i64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum > max { max } else { min } as i64),
        Overflow::Wrap => {
            let span = 1i128 << bits;
            let mut w = sum.rem_euclid(span);
            if signed && w > max {
                w -= span;
            }
            Some(w as i64)
        }
    }
}

fn parse_type(t: &[u8]) -> Option<(bool, u32)> {
    let signed = match t.first() {
        Some(b'i' | b'I') => true,
        Some(b'u' | b'U') => false,
        _ => return None,
    };
    let bits = parse_i64(&t[1..])?;
    let ok = if signed {
        (1..=64).contains(&bits)
    } else {
        (1..=63).contains(&bits)
    };
    ok.then_some((signed, bits as u32))
}

fn bitfield_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, readonly: bool) {
    let max_bulk = ctx.srv.config.proto_max_bulk_len;
    let mut fields: Vec<Field> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argv.len() {
        let sub = argv.get(j);
        let remaining = argv.len() - j - 1;
        let kind = if sub.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            0
        } else if sub.eq_ignore_ascii_case(b"set") && remaining >= 3 {
            1
        } else if sub.eq_ignore_ascii_case(b"incrby") && remaining >= 3 {
            2
        } else if sub.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            let o = argv.get(j + 1);
            overflow = if o.eq_ignore_ascii_case(b"wrap") {
                Overflow::Wrap
            } else if o.eq_ignore_ascii_case(b"sat") {
                Overflow::Sat
            } else if o.eq_ignore_ascii_case(b"fail") {
                Overflow::Fail
            } else {
                return ctx.error("ERR Invalid OVERFLOW type specified");
            };
            j += 2;
            continue;
        } else {
            return ctx.error(SYNTAX_ERR);
        };
        let Some((signed, bits)) = parse_type(argv.get(j + 1)) else {
            return ctx.error(
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
            );
        };
        let Some(offset) = parse_offset(argv.get(j + 2), u64::from(bits), max_bulk) else {
            return ctx.error(BAD_OFFSET);
        };
        let op = match kind {
            0 => Op::Get,
            _ => {
                if readonly {
                    return ctx.error("ERR BITFIELD_RO only supports the GET subcommand");
                }
                let Some(v) = parse_i64(argv.get(j + 3)) else {
                    return ctx.error(NOT_INT);
                };
                if kind == 1 { Op::Set(v) } else { Op::Incr(v) }
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if kind == 0 { 3 } else { 4 };
    }
    let key = argv.get(1);
    let write_end = fields
        .iter()
        .filter(|f| !matches!(f.op, Op::Get))
        .map(|f| (f.offset + u64::from(f.bits) - 1) / 8 + 1)
        .max();
    let Some(len) = write_end else {
        // Reads only: no key is created.
        let r = with_bytes(ctx, key, |b| {
            fields
                .iter()
                .map(|f| read_field(b, f.offset, f.bits, f.signed))
                .collect::<Vec<_>>()
        });
        if let Ok(vals) = r {
            ctx.reply.array_len(vals.len());
            for v in vals {
                ctx.reply.int(v);
            }
        }
        return;
    };
    let Ok((b, created, grew)) = bytes_for_write(ctx, key, len as usize) else {
        return;
    };
    let mut out: Vec<Option<i64>> = Vec::with_capacity(fields.len());
    let mut changes = 0;
    for f in &fields {
        let old = read_field(b, f.offset, f.bits, f.signed);
        match f.op {
            Op::Get => out.push(Some(old)),
            Op::Set(v) => match apply_overflow(v, 0, f.bits, f.signed, f.overflow) {
                Some(nv) => {
                    write_field(b, f.offset, f.bits, nv);
                    // Valkey counts a write that changed the bits, or any
                    // write once the string was created or grew.
                    changes += usize::from(grew || nv != old);
                    out.push(Some(old));
                }
                None => out.push(None),
            },
            Op::Incr(inc) => match apply_overflow(old, inc, f.bits, f.signed, f.overflow) {
                Some(nv) => {
                    write_field(b, f.offset, f.bits, nv);
                    changes += usize::from(grew || nv != old);
                    out.push(Some(nv));
                }
                None => out.push(None),
            },
        }
    }
    let r = &mut ctx.reply;
    r.array_len(out.len());
    for v in out {
        match v {
            Some(v) => r.int(v),
            None => r.null(),
        }
    }
    if changes > 0 {
        let db = ctx.session.db;
        ctx.touched(db, key);
        ctx.changed_elements(changes);
        notify_write(ctx, created, "setbit", key);
    } else if created {
        // Created by writes that all failed (OVERFLOW FAIL): Valkey keeps
        // the key without counting a change.
        ctx.notify(notify::NEW, "new", key);
    }
}

fn bitfield(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bitfield_generic(ctx, argv, false);
}

fn bitfield_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bitfield_generic(ctx, argv, true);
}

/// BITFIELD with only GETs reads its key; anything else (SET, INCRBY, a
/// syntax error) may write it (Valkey's `bitfieldGetKeys`, for COMMAND
/// GETKEYSANDFLAGS).
fn bitfield_keys(argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let mut readonly = true;
    let mut i = 2;
    while i < argv.len() {
        let rest = argv.len() - i - 1;
        let arg = argv[i];
        if arg.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 1;
        } else {
            // SET / INCRBY, or a syntax error: assume a write.
            readonly = false;
            break;
        }
        i += 1;
    }
    let flags = if readonly {
        kf::RO | kf::ACCESS
    } else {
        kf::RW | kf::ACCESS | kf::UPDATE
    };
    Some(vec![(1, flags)])
}
