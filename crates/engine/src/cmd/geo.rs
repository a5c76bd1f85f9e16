//! Geospatial commands over sorted sets: GEOADD GEODIST GEOHASH GEOPOS,
//! GEORADIUS GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
//! GEOSEARCHSTORE, with Valkey 8's replies and errors (`geo.c`).
//!
//! A point is a member whose score is its 52-bit geohash
//! ([`crate::geohash`]). GEOADD is ZADD of the encoded points, and goes to
//! the effects stream as that ZADD, as Valkey propagates it. A search scans
//! the score spans of up to 9 cells and keeps what is inside the shape.

use super::zsets::{Z_NX, Z_XX, store_result, zadd_pairs};
use super::{NOT_INT, SYNTAX_ERR, WrongType, lookup_typed};
use crate::batch::ArgvRef;
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::key_flags as kf;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, doc_flags, spec};
use crate::geohash::{self, Extent, LAT_MAX, LAT_MIN, LONG_MAX, LONG_MIN, Shape};
use crate::num::{parse_f64, parse_i64};
use resp::{Protocol, ReplyWriter};
use store::Value;
use store::types::ZSet;
use store::types::zset::ScoreRange;

// ---- Argument specs (Valkey 8's command JSON, for COMMAND DOCS) ----

const KEY: ArgSpec = ArgSpec::key("key", 0);
const UNIT: ArgSpec = ArgSpec::oneof(
    "unit",
    &[
        ArgSpec::pure_token("m", "M"),
        ArgSpec::pure_token("km", "KM"),
        ArgSpec::pure_token("ft", "FT"),
        ArgSpec::pure_token("mi", "MI"),
    ],
);
const WITHCOORD: ArgSpec = ArgSpec::pure_token("withcoord", "WITHCOORD").optional();
const WITHDIST: ArgSpec = ArgSpec::pure_token("withdist", "WITHDIST").optional();
const WITHHASH: ArgSpec = ArgSpec::pure_token("withhash", "WITHHASH").optional();
const COUNT_BLOCK: ArgSpec = ArgSpec::block(
    "count-block",
    &[
        ArgSpec::integer("count").token("COUNT"),
        ArgSpec::pure_token("any", "ANY").optional(),
    ],
)
.optional();
const COUNT_BLOCK_SINCE: ArgSpec = ArgSpec::block(
    "count-block",
    &[
        ArgSpec::integer("count").token("COUNT"),
        ArgSpec::pure_token("any", "ANY").since("6.2.0").optional(),
    ],
)
.optional();
const ORDER: ArgSpec = ArgSpec::oneof(
    "order",
    &[
        ArgSpec::pure_token("asc", "ASC"),
        ArgSpec::pure_token("desc", "DESC"),
    ],
)
.optional();
const STORE: ArgSpec = ArgSpec::oneof(
    "store",
    &[
        ArgSpec::key("storekey", 1).token("STORE").display("key"),
        ArgSpec::key("storedistkey", 2)
            .token("STOREDIST")
            .display("key"),
    ],
)
.optional();
const FROM: ArgSpec = ArgSpec::oneof(
    "from",
    &[
        ArgSpec::string("member").token("FROMMEMBER"),
        ArgSpec::block(
            "fromlonlat",
            &[ArgSpec::double("longitude"), ArgSpec::double("latitude")],
        )
        .token("FROMLONLAT"),
    ],
);
const BY: ArgSpec = ArgSpec::oneof(
    "by",
    &[
        ArgSpec::block(
            "circle",
            &[ArgSpec::double("radius").token("BYRADIUS"), UNIT],
        ),
        ArgSpec::block(
            "box",
            &[
                ArgSpec::double("width").token("BYBOX"),
                ArgSpec::double("height"),
                UNIT,
            ],
        ),
    ],
);

const GEOADD_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::oneof(
        "condition",
        &[
            ArgSpec::pure_token("nx", "NX"),
            ArgSpec::pure_token("xx", "XX"),
        ],
    )
    .since("6.2.0")
    .optional(),
    ArgSpec::pure_token("change", "CH")
        .since("6.2.0")
        .optional(),
    ArgSpec::block(
        "data",
        &[
            ArgSpec::double("longitude"),
            ArgSpec::double("latitude"),
            ArgSpec::string("member"),
        ],
    )
    .multiple(),
];
const GEODIST_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("member1"),
    ArgSpec::string("member2"),
    UNIT.optional(),
];
const MEMBERS_ARGS: &[ArgSpec] = &[KEY, ArgSpec::string("member").optional().multiple()];
const GEORADIUS_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::double("longitude"),
    ArgSpec::double("latitude"),
    ArgSpec::double("radius"),
    UNIT,
    WITHCOORD,
    WITHDIST,
    WITHHASH,
    COUNT_BLOCK_SINCE,
    ORDER,
    STORE,
];
const GEORADIUS_RO_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::double("longitude"),
    ArgSpec::double("latitude"),
    ArgSpec::double("radius"),
    UNIT,
    WITHCOORD,
    WITHDIST,
    WITHHASH,
    COUNT_BLOCK_SINCE,
    ORDER,
];
const GEORADIUSBYMEMBER_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("member"),
    ArgSpec::double("radius"),
    UNIT,
    WITHCOORD,
    WITHDIST,
    WITHHASH,
    COUNT_BLOCK,
    ORDER,
    STORE,
];
const GEORADIUSBYMEMBER_RO_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("member"),
    ArgSpec::double("radius"),
    UNIT,
    WITHCOORD,
    WITHDIST,
    WITHHASH,
    COUNT_BLOCK,
    ORDER,
];
const GEOSEARCH_ARGS: &[ArgSpec] = &[
    KEY,
    FROM,
    BY,
    ORDER,
    COUNT_BLOCK,
    WITHCOORD,
    WITHDIST,
    WITHHASH,
];
const GEOSEARCHSTORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("destination", 0),
    ArgSpec::key("source", 1),
    FROM,
    BY,
    ORDER,
    COUNT_BLOCK,
    ArgSpec::pure_token("storedist", "STOREDIST").optional(),
];

const GROUP: &str = "geo";
const ONE: (i32, i32, i32) = (1, 1, 1);
const READ: &[&str] = &["read", "geo", "slow"];
const WRITE_CAT: &[&str] = &["write", "geo", "slow"];
const SEARCH_CX: &str = "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.";
const GEOSEARCH_CX: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape";

const READ_KEY: KeySpec = KeySpec::index(1, kf::RO | kf::ACCESS);
const RADIUS_HISTORY: &[(&str, &str)] = &[
    ("6.2.0", "Added the `ANY` option for `COUNT`."),
    ("7.0.0", "Added support for uppercase unit names."),
];
const UNITS_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added support for uppercase unit names.")];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("6.2.0", "Added the `CH`, `NX` and `XX` options.")],
        ..spec(
            GROUP,
            "geoadd",
            -5,
            WRITE | DENYOOM,
            ONE,
            WRITE_CAT,
            "3.2.0",
            "Adds one or more members to a geospatial index. The key is created if it doesn't exist.",
            "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
            geoadd,
            GEOADD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        ..spec(
            GROUP,
            "geodist",
            -4,
            READONLY,
            ONE,
            READ,
            "3.2.0",
            "Returns the distance between two members of a geospatial index.",
            "O(1)",
            geodist,
            GEODIST_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        ..spec(
            GROUP,
            "geohash",
            -2,
            READONLY,
            ONE,
            READ,
            "3.2.0",
            "Returns members from a geospatial index as geohash strings.",
            "O(1) for each member requested.",
            geohash_cmd,
            MEMBERS_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        ..spec(
            GROUP,
            "geopos",
            -2,
            READONLY,
            ONE,
            READ,
            "3.2.0",
            "Returns the longitude and latitude of members from a geospatial index.",
            "O(1) for each member requested.",
            geopos,
            MEMBERS_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            READ_KEY,
            KeySpec::keyword("STORE", 6, kf::OW | kf::UPDATE),
            KeySpec::keyword("STOREDIST", 6, kf::OW | kf::UPDATE),
        ],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument"),
        history: RADIUS_HISTORY,
        ..spec(
            GROUP,
            "georadius",
            -6,
            WRITE | DENYOOM,
            ONE,
            WRITE_CAT,
            "3.2.0",
            "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
            SEARCH_CX,
            georadius,
            GEORADIUS_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`GEOSEARCH` with the `BYRADIUS` argument"),
        history: RADIUS_HISTORY,
        ..spec(
            GROUP,
            "georadius_ro",
            -6,
            READONLY,
            ONE,
            READ,
            "3.2.10",
            "Returns members from a geospatial index that are within a distance from a coordinate.",
            SEARCH_CX,
            georadius_ro,
            GEORADIUS_RO_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            READ_KEY,
            KeySpec::keyword("STORE", 5, kf::OW | kf::UPDATE),
            KeySpec::keyword("STOREDIST", 5, kf::OW | kf::UPDATE),
        ],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some(
            "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments",
        ),
        history: RADIUS_HISTORY,
        ..spec(
            GROUP,
            "georadiusbymember",
            -5,
            WRITE | DENYOOM,
            ONE,
            WRITE_CAT,
            "3.2.0",
            "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
            SEARCH_CX,
            georadiusbymember,
            GEORADIUSBYMEMBER_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments"),
        history: RADIUS_HISTORY,
        ..spec(
            GROUP,
            "georadiusbymember_ro",
            -5,
            READONLY,
            ONE,
            READ,
            "3.2.10",
            "Returns members from a geospatial index that are within a distance from a member.",
            SEARCH_CX,
            georadiusbymember_ro,
            GEORADIUSBYMEMBER_RO_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        history: UNITS_HISTORY,
        ..spec(
            GROUP,
            "geosearch",
            -7,
            READONLY,
            ONE,
            READ,
            "6.2.0",
            "Queries a geospatial index for members inside an area of a box or a circle.",
            GEOSEARCH_CX,
            geosearch,
            GEOSEARCH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS),
        ],
        history: UNITS_HISTORY,
        ..spec(
            GROUP,
            "geosearchstore",
            -8,
            WRITE | DENYOOM,
            (1, 2, 1),
            WRITE_CAT,
            "6.2.0",
            "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
            GEOSEARCH_CX,
            geosearchstore,
            GEOSEARCHSTORE_ARGS,
        )
    },
];

// ---- Helpers -----------------------------------------------------------------

fn pick_zset(v: &mut Value) -> Option<&mut ZSet> {
    match v {
        Value::ZSet(z) => Some(z),
        _ => None,
    }
}

/// The sorted set at `key` for reading (`lookupKeyRead` + `checkType`).
fn read_zset<'s>(ctx: &'s mut Ctx<'_>, key: &[u8]) -> Result<Option<&'s mut ZSet>, WrongType> {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    lookup_typed(ctx.srv, db, key, h, ctx.now_ms, true, pick_zset)
}

/// `getDoubleFromObjectOrReply`: `Err` after replying `msg` (or Valkey's
/// default message).
fn double_arg(ctx: &mut Ctx<'_>, arg: &[u8], msg: Option<&str>) -> Result<f64, ()> {
    parse_f64(arg).ok_or_else(|| ctx.error(msg.unwrap_or("ERR value is not a valid float")))
}

/// `extractLongLatOrReply`: `[long, lat]` within Valkey's limits.
fn lonlat_arg(ctx: &mut Ctx<'_>, long: &[u8], lat: &[u8]) -> Result<[f64; 2], ()> {
    let x = double_arg(ctx, long, None)?;
    let y = double_arg(ctx, lat, None)?;
    if !(LONG_MIN..=LONG_MAX).contains(&x) || !(LAT_MIN..=LAT_MAX).contains(&y) {
        ctx.error(&format!(
            "ERR invalid longitude,latitude pair {},{}",
            c_fixed(x, 6),
            c_fixed(y, 6)
        ));
        return Err(());
    }
    Ok([x, y])
}

/// `extractUnitOrReply`: meters per unit.
fn unit_arg(ctx: &mut Ctx<'_>, unit: &[u8]) -> Result<f64, ()> {
    let m = [
        (&b"m"[..], 1.0),
        (b"km", 1000.0),
        (b"ft", 0.3048),
        (b"mi", 1609.34),
    ]
    .iter()
    .find(|(u, _)| unit.eq_ignore_ascii_case(u))
    .map(|&(_, m)| m);
    m.ok_or_else(|| ctx.error("ERR unsupported unit provided. please use M, KM, FT, MI"))
}

/// `extractDistanceOrReply`: (radius, meters per unit).
fn radius_arg(ctx: &mut Ctx<'_>, radius: &[u8], unit: &[u8]) -> Result<(f64, f64), ()> {
    let r = double_arg(ctx, radius, Some("ERR need numeric radius"))?;
    if r < 0.0 {
        ctx.error("ERR radius cannot be negative");
        return Err(());
    }
    Ok((r, unit_arg(ctx, unit)?))
}

/// `extractBoxOrReply`: (width, height, meters per unit).
fn box_arg(ctx: &mut Ctx<'_>, w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), ()> {
    let w = double_arg(ctx, w, Some("ERR need numeric width"))?;
    let h = double_arg(ctx, h, Some("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        ctx.error("ERR height or width cannot be negative");
        return Err(());
    }
    Ok((w, h, unit_arg(ctx, unit)?))
}

/// C's `printf("%.<digits>f")`: Rust's fixed formatting is exact too, so
/// the digits agree (`inf`, `-inf` and `nan` as glibc spells them).
fn c_fixed(d: f64, digits: usize) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    format!("{d:.digits$}")
}

/// Digits of `v` (decimal) into the end of `buf`; the start index.
fn digits_into(buf: &mut [u8], mut v: u128) -> usize {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return at;
        }
    }
}

/// Write `q / 10^frac` with `frac` decimals (`frac` > 0), `-` first when
/// `neg`, into `out`.
fn fixed_into(out: &mut Vec<u8>, neg: bool, q: u128, frac: u32) {
    let scale = 10u128.pow(frac);
    let mut buf = [0u8; 40];
    if neg {
        out.push(b'-');
    }
    let at = digits_into(&mut buf, q / scale);
    out.extend_from_slice(&buf[at..]);
    out.push(b'.');
    let at = digits_into(&mut buf, q % scale);
    let width = buf.len() - at;
    out.extend(std::iter::repeat_n(b'0', frac as usize - width));
    out.extend_from_slice(&buf[at..]);
}

/// `addReplyDoubleDistance`: Valkey's `fixedpoint_d2string` with 4 digits,
/// the value scaled by 10^4 and rounded half to even (`llrint`).
fn fmt_distance(d: f64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    if d == 0.0 {
        out.extend_from_slice(b"0.0000");
        return out;
    }
    let v = (d * 10000.0).round_ties_even() as i64;
    fixed_into(&mut out, v < 0, u128::from(v.unsigned_abs()), 4);
    out
}

fn reply_distance(r: &mut ReplyWriter<'_>, d: f64) {
    r.bulk(&fmt_distance(d));
}

/// `|d|` times 10^17, rounded half to even, computed exactly: `d` is
/// m·2^e with m < 2^53, and m·10^17 < 2^110 fits in a u128. `None` when
/// |d| >= 2^53 (never a coordinate).
fn scaled_1e17(d: f64) -> Option<u128> {
    let bits = d.abs().to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0x7ff {
        return None;
    }
    let (m, e) = if exp == 0 {
        (bits & ((1 << 52) - 1), -1074)
    } else {
        ((bits & ((1 << 52) - 1)) | (1 << 52), exp - 1075)
    };
    if e >= 0 {
        return None;
    }
    let prod = u128::from(m) * 10u128.pow(17);
    let k = (-e) as u32;
    if k > 111 {
        return Some(0); // below 2^-1 after scaling
    }
    let q = prod >> k;
    let rem = prod & ((1u128 << k) - 1);
    let half = 1u128 << (k - 1);
    Some(if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    })
}

/// Valkey's `ld2string(.., LD_STR_HUMAN)` of a double: `%.17Lf`, trailing
/// zeros and a bare dot dropped, `-0` printed as `0`.
fn fmt_coordinate(d: f64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    match scaled_1e17(d) {
        Some(q) => fixed_into(&mut out, d.is_sign_negative() && q != 0, q, 17),
        None => out.extend_from_slice(format!("{d:.17}").as_bytes()),
    }
    if out.contains(&b'.') {
        while out.last() == Some(&b'0') {
            out.pop();
        }
        if out.last() == Some(&b'.') {
            out.pop();
        }
    }
    if out == b"-0" {
        out = b"0".to_vec();
    }
    out
}

/// `addReplyHumanLongDouble`: a bulk string in RESP2, a double in RESP3.
fn reply_coordinate(r: &mut ReplyWriter<'_>, d: f64) {
    let s = fmt_coordinate(d);
    if r.proto == Protocol::Resp3 {
        let mut frame = Vec::with_capacity(s.len() + 3);
        frame.push(b',');
        frame.extend_from_slice(&s);
        frame.extend_from_slice(b"\r\n");
        r.raw(&frame);
    } else {
        r.bulk(&s);
    }
}

// ---- GEOADD GEODIST GEOHASH GEOPOS ---------------------------------------------

fn geoadd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let (mut nx, mut xx) = (false, false);
    let mut at = 2;
    while at < argv.len() {
        let o = argv.get(at);
        if o.eq_ignore_ascii_case(b"nx") {
            nx = true;
        } else if o.eq_ignore_ascii_case(b"xx") {
            xx = true;
        } else if !o.eq_ignore_ascii_case(b"ch") {
            break;
        }
        at += 1;
    }
    let rest = argv.len() - at;
    // Zero triples is ZADD's syntax error.
    if rest == 0 || !rest.is_multiple_of(3) || (xx && nx) {
        return ctx.error(SYNTAX_ERR);
    }
    let mut pairs = Vec::with_capacity(rest / 3);
    for t in (at..argv.len()).step_by(3) {
        let Ok([x, y]) = lonlat_arg(ctx, argv.get(t), argv.get(t + 1)) else {
            return;
        };
        // Inside the limits a point always encodes.
        let bits = geohash::encode_wgs84(x, y).unwrap_or(0);
        pairs.push((bits as f64, argv.get(t + 2)));
    }
    let ch = (2..at).any(|i| argv.get(i).eq_ignore_ascii_case(b"ch"));
    let flags = if nx { Z_NX } else { 0 } | if xx { Z_XX } else { 0 };
    if zadd_pairs(ctx, key, flags, ch, &pairs) {
        // Replicas and the AOF get the ZADD that GEOADD became.
        let scores: Vec<String> = pairs.iter().map(|p| (p.0 as u64).to_string()).collect();
        let mut out: Vec<&[u8]> = Vec::with_capacity(at + 2 * pairs.len());
        out.push(b"zadd");
        out.extend((1..at).map(|i| argv.get(i)));
        for (s, p) in scores.iter().zip(&pairs) {
            out.push(s.as_bytes());
            out.push(p.1);
        }
        ctx.propagate(&out);
    }
}

fn geodist(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut to_m = 1.0;
    if argv.len() == 5 {
        let Ok(m) = unit_arg(ctx, argv.get(4)) else {
            return;
        };
        to_m = m;
    } else if argv.len() > 5 {
        return ctx.error(SYNTAX_ERR);
    }
    let z = match read_zset(ctx, argv.get(1)) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => return ctx.reply.null(),
        Ok(Some(z)) => z,
    };
    let (Some(s1), Some(s2)) = (z.score(argv.get(2)), z.score(argv.get(3))) else {
        return ctx.reply.null();
    };
    let [x1, y1] = geohash::decode_score(s1);
    let [x2, y2] = geohash::decode_score(s2);
    reply_distance(&mut ctx.reply, geohash::distance(x1, y1, x2, y2) / to_m);
}

fn geohash_cmd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let z = match lookup_typed(ctx.srv, db, key, h, ctx.now_ms, true, pick_zset) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(z) => z,
    };
    let r = &mut ctx.reply;
    r.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        match z.as_ref().and_then(|z| z.score(argv.get(i))) {
            Some(s) => r.bulk(&geohash::geohash_string(s)),
            None => r.null(),
        }
    }
}

fn geopos(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let z = match lookup_typed(ctx.srv, db, key, h, ctx.now_ms, true, pick_zset) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(z) => z,
    };
    let r = &mut ctx.reply;
    r.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        match z.as_ref().and_then(|z| z.score(argv.get(i))) {
            Some(s) => {
                let [x, y] = geohash::decode_score(s);
                r.array_len(2);
                reply_coordinate(r, x);
                reply_coordinate(r, y);
            }
            None => r.null_array(),
        }
    }
}

// ---- The searches ------------------------------------------------------------------

/// Which search command runs (Valkey's `RADIUS_*` / `GEOSEARCH*` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO]: centre and radius at fixed positions.
    Coords {
        store_ok: bool,
    },
    /// GEORADIUSBYMEMBER[_RO].
    Member {
        store_ok: bool,
    },
    Search,
    SearchStore,
}

impl Form {
    fn store_ok(self) -> bool {
        matches!(
            self,
            Form::Coords { store_ok: true } | Form::Member { store_ok: true }
        )
    }
    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }
}

/// One point found: the distance in meters until the reply converts it.
struct Found<'z> {
    member: &'z [u8],
    score: f64,
    dist: f64,
    xy: [f64; 2],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

fn georadius(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::Coords { store_ok: true });
}

fn georadius_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::Coords { store_ok: false });
}

fn georadiusbymember(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::Member { store_ok: true });
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::Member { store_ok: false });
}

fn geosearch(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::Search);
}

fn geosearchstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    search_generic(ctx, argv, Form::SearchStore);
}

/// The points of `z` inside `shape`, scanning the 9 cells in Valkey's
/// order (`membersOfAllNeighbors`); stops at `limit` found (0 = all).
fn members_in_shape<'z>(z: &'z ZSet, shape: &Shape, limit: usize) -> Vec<Found<'z>> {
    let cells = geohash::search_cells(shape);
    let mut found = Vec::new();
    let mut last = 0;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        // With a huge radius adjacent cells can be the same one.
        if last != 0 && *cell == cells[last] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_span();
        let (lo, hi) = z.score_span(&ScoreRange {
            min,
            min_ex: false,
            max,
            max_ex: true,
        });
        for (member, score) in z.range(lo, hi, false) {
            let xy = geohash::decode_score(score);
            if let Some(dist) = shape.contains(xy[0], xy[1]) {
                found.push(Found {
                    member,
                    score,
                    dist,
                    xy,
                });
            }
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
        last = i;
    }
    found
}

/// Everything after the source key: the options, the shape, the output.
struct Query<'a> {
    shape: Shape,
    store: Option<&'a [u8]>,
    storedist: bool,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    sort: Sort,
    any: bool,
    count: usize,
}

/// `georadiusGeneric`, from the key lookup to the reply or the store.
fn search_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, form: Form) {
    let src = argv.get(if form == Form::SearchStore { 2 } else { 1 });
    // The source first: WRONGTYPE comes before any argument error.
    let exists = match read_zset(ctx, src) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(z) => z.is_some(),
    };
    let Ok(q) = parse_query(ctx, argv, form, exists) else {
        return;
    };
    let db = ctx.session.db;
    let h = ctx.key_hash(src);
    // Read without counting a second keyspace hit.
    let z = ctx.srv.keyspace.dbs[db]
        .peek(h, src)
        .and_then(|e| match e.value() {
            store::ValueRef::ZSet(z) => Some(z),
            _ => None,
        });
    let Some(z) = z else {
        return match q.store {
            Some(dst) => store_result(ctx, dst, Vec::new(), ""),
            None => ctx.reply.array_len(0),
        };
    };
    let mut found = members_in_shape(z, &q.shape, if q.any { q.count } else { 0 });
    let sort = if q.count != 0 && q.sort == Sort::None && !q.any {
        // COUNT means the nearest ones.
        Sort::Asc
    } else {
        q.sort
    };
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if q.count != 0 {
        found.truncate(q.count);
    }
    let conv = q.shape.conversion;
    if let Some(dst) = q.store {
        let pairs: Vec<(Vec<u8>, f64)> = found
            .iter()
            .map(|f| {
                let s = if q.storedist { f.dist / conv } else { f.score };
                (f.member.to_vec(), s)
            })
            .collect();
        let n = pairs.len();
        let event = if form.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        store_result(ctx, dst, pairs, event);
        ctx.changed_elements(n);
        return;
    }
    let opts = usize::from(q.withdist) + usize::from(q.withhash) + usize::from(q.withcoord);
    let r = &mut ctx.reply;
    r.array_len(found.len());
    for f in &found {
        if opts != 0 {
            r.array_len(opts + 1);
        }
        r.bulk(f.member);
        if q.withdist {
            reply_distance(r, f.dist / conv);
        }
        if q.withhash {
            r.int(f.score as i64);
        }
        if q.withcoord {
            r.array_len(2);
            reply_coordinate(r, f.xy[0]);
            reply_coordinate(r, f.xy[1]);
        }
    }
}

/// The arguments after the source key, with Valkey's errors in Valkey's
/// order. `exists`: whether the source key exists (a missing one skips the
/// member lookups, as in Valkey).
fn parse_query<'a>(
    ctx: &mut Ctx<'_>,
    argv: ArgvRef<'a>,
    form: Form,
    exists: bool,
) -> Result<Query<'a>, ()> {
    let mut q = Query {
        shape: Shape {
            xy: [0.0, 0.0],
            extent: Extent::Radius(0.0),
            conversion: 1.0,
        },
        store: None,
        storedist: false,
        withdist: false,
        withhash: false,
        withcoord: false,
        sort: Sort::None,
        any: false,
        count: 0,
    };
    let src = argv.get(if form == Form::SearchStore { 2 } else { 1 });
    let base = match form {
        Form::Coords { .. } => {
            q.shape.xy = lonlat_arg(ctx, argv.get(2), argv.get(3))?;
            let (r, conv) = radius_arg(ctx, argv.get(4), argv.get(5))?;
            q.shape.extent = Extent::Radius(r);
            q.shape.conversion = conv;
            6
        }
        Form::Member { .. } => {
            if exists {
                q.shape.xy = member_xy(ctx, src, argv.get(2))?;
                let (r, conv) = radius_arg(ctx, argv.get(3), argv.get(4))?;
                q.shape.extent = Extent::Radius(r);
                q.shape.conversion = conv;
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            q.store = Some(argv.get(1));
            3
        }
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let search = form.is_search();
    let n = argv.len();
    let mut i = base;
    while i < n {
        let a = argv.get(i);
        let left = n - i - 1; // arguments after this one
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        if is(b"withdist") {
            q.withdist = true;
        } else if is(b"withhash") {
            q.withhash = true;
        } else if is(b"withcoord") {
            q.withcoord = true;
        } else if is(b"any") {
            q.any = true;
        } else if is(b"asc") {
            q.sort = Sort::Asc;
        } else if is(b"desc") {
            q.sort = Sort::Desc;
        } else if is(b"count") && left >= 1 {
            let Some(c) = parse_i64(argv.get(i + 1)) else {
                ctx.error(NOT_INT);
                return Err(());
            };
            if c <= 0 {
                ctx.error("ERR COUNT must be > 0");
                return Err(());
            }
            q.count = c as usize;
            i += 1;
        } else if (is(b"store") || is(b"storedist")) && left >= 1 && form.store_ok() {
            q.store = Some(argv.get(i + 1));
            q.storedist = is(b"storedist");
            i += 1;
        } else if is(b"storedist") && form == Form::SearchStore {
            q.storedist = true;
        } else if is(b"frommember") && left >= 1 && search && !fromloc {
            if exists {
                q.shape.xy = member_xy(ctx, src, argv.get(i + 1))?;
            }
            frommember = true;
            i += 1;
        } else if is(b"fromlonlat") && left >= 2 && search && !frommember {
            q.shape.xy = lonlat_arg(ctx, argv.get(i + 1), argv.get(i + 2))?;
            fromloc = true;
            i += 2;
        } else if is(b"byradius") && left >= 2 && search && !bybox {
            let (r, conv) = radius_arg(ctx, argv.get(i + 1), argv.get(i + 2))?;
            q.shape.extent = Extent::Radius(r);
            q.shape.conversion = conv;
            byradius = true;
            i += 2;
        } else if is(b"bybox") && left >= 3 && search && !byradius {
            let (w, h, conv) = box_arg(ctx, argv.get(i + 1), argv.get(i + 2), argv.get(i + 3))?;
            q.shape.extent = Extent::Box {
                width: w,
                height: h,
            };
            q.shape.conversion = conv;
            bybox = true;
            i += 3;
        } else {
            ctx.error(SYNTAX_ERR);
            return Err(());
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoord) {
        ctx.error(&format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if form == Form::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        ));
        return Err(());
    }
    let name = String::from_utf8_lossy(argv.get(0));
    if search && !(frommember || fromloc) {
        ctx.error(&format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
        return Err(());
    }
    if search && !(byradius || bybox) {
        ctx.error(&format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
        return Err(());
    }
    if q.any && q.count == 0 {
        ctx.error("ERR the ANY argument requires COUNT argument");
        return Err(());
    }
    Ok(q)
}

/// `longLatFromMember`: the point of `member` in the source set.
fn member_xy(ctx: &mut Ctx<'_>, src: &[u8], member: &[u8]) -> Result<[f64; 2], ()> {
    let db = ctx.session.db;
    let h = ctx.key_hash(src);
    let score = ctx.srv.keyspace.dbs[db]
        .peek(h, src)
        .and_then(|e| match e.value() {
            store::ValueRef::ZSet(z) => z.score(member),
            _ => None,
        });
    match score {
        Some(s) => Ok(geohash::decode_score(s)),
        None => {
            ctx.error("ERR could not decode requested zset member");
            Err(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_with_four_rounded_digits() {
        assert_eq!(fmt_distance(0.0), b"0.0000");
        assert_eq!(fmt_distance(166274.15156960033), b"166274.1516");
        assert_eq!(fmt_distance(0.00004), b"0.0000");
        assert_eq!(fmt_distance(12.5), b"12.5000");
        assert_eq!(fmt_distance(0.0123), b"0.0123");
    }

    #[test]
    fn coordinates_print_as_printf_17_decimals_trimmed() {
        // The exact formatter against Rust's exact (and slower) one.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = (x >> 11) as f64 / (1u64 << 53) as f64 * 360.0 - 180.0;
            let mut want = format!("{d:.17}");
            let t = want.trim_end_matches('0').trim_end_matches('.').len();
            want.truncate(t);
            assert_eq!(String::from_utf8(fmt_coordinate(d)).unwrap(), want, "{d:e}");
        }
        assert_eq!(fmt_coordinate(180.0), b"180");
        assert_eq!(fmt_coordinate(-0.0), b"0");
        assert_eq!(fmt_coordinate(-1e-30), b"0");
        assert_eq!(fmt_coordinate(0.5), b"0.5");
        assert_eq!(fmt_coordinate(-85.05112877999999), b"-85.05112877999998489");
        assert_eq!(fmt_coordinate(13.361389338970184), b"13.36138933897018433");
        for d in [5e-18, 1.5e-17, 4.9e-18, 2.5e-17, 1e-300, 123.456] {
            let mut want = format!("{d:.17}");
            let t = want.trim_end_matches('0').trim_end_matches('.').len();
            want.truncate(t);
            assert_eq!(String::from_utf8(fmt_coordinate(d)).unwrap(), want, "{d:e}");
        }
    }

    #[test]
    fn c_fixed_matches_printf() {
        assert_eq!(c_fixed(200.0, 6), "200.000000");
        assert_eq!(c_fixed(f64::INFINITY, 6), "inf");
        assert_eq!(c_fixed(-1.5, 6), "-1.500000");
    }
}
