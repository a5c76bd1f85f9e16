//! HyperLogLog: PFADD PFCOUNT PFMERGE, stored in Valkey's own string
//! format so a GET of the key gives bytes Valkey reads back (`hyperloglog.c`).
//!
//! ```text
//!   header (16 bytes)  "HYLL" | encoding: 0 dense, 1 sparse | 3 unused |
//!                      cached cardinality, 8 bytes little-endian; its top
//!                      bit set = stale
//!   dense              16384 registers × 6 bits, packed little-endian
//!   sparse             ZERO 00xxxxxx (1..64 zero registers)
//!                      XZERO 01xxxxxx yyyyyyyy (1..16384 zero registers)
//!                      VAL 1vvvvvxx (1..4 registers of value 1..32)
//! ```
//!
//! An element is hashed with MurmurHash64A (seed 0xadc83b19): the low 14
//! bits choose the register, the run of zero bits above them (plus one)
//! is its candidate value. Counts use Ertl's improved estimator, as Valkey
//! does, so PFCOUNT answers what Valkey answers for the same elements
//! (standard error 0.81%). A sparse HLL becomes dense when a register
//! passes 32 or it grows past `hll-sparse-max-bytes`. Sparse HLLs are
//! re-encoded whole on change (they are at most a few KiB); dense ones are
//! edited in place.

use crate::batch::ArgvRef;
use crate::cmd::strings::{
    WRONGTYPE, as_str, as_str_mut, bytes_of, lookup_read, lookup_write, notify_write, store,
    unshare,
};
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, spec};
use store::Str;

const GROUP: &str = "hyperloglog";

const PFADD_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::string("element").optional().multiple(),
];
const PFCOUNT_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0).multiple()];
const PFMERGE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("destkey", 0),
    ArgSpec::key("sourcekey", 1).optional().multiple(),
];

const PFCOUNT_NOTES: &str =
    "RW because it may change the internal representation of the key, and propagate to replicas";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        ..spec(
            GROUP,
            "pfadd",
            -2,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            &["write", "hyperloglog", "fast"],
            "2.8.9",
            "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
            "O(1) to add every element.",
            pfadd,
            PFADD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS)
            .range(-1, 1, 0)
            .notes(PFCOUNT_NOTES)],
        ..spec(
            GROUP,
            "pfcount",
            -2,
            READONLY | MAY_REPLICATE,
            (1, -1, 1),
            &["read", "hyperloglog", "slow"],
            "2.8.9",
            "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
            "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
            pfcount,
            PFCOUNT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::INSERT),
            KeySpec::index(2, kf::RO | kf::ACCESS).range(-1, 1, 0),
        ],
        ..spec(
            GROUP,
            "pfmerge",
            -2,
            WRITE | DENYOOM,
            (1, -1, 1),
            &["write", "hyperloglog", "slow"],
            "2.8.9",
            "Merges one or more HyperLogLog values into a single key.",
            "O(N) to merge N HyperLogLogs, but with high constant times.",
            pfmerge,
            PFMERGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(2, kf::RW | kf::ACCESS)],
        doc_flags: crate::command::doc_flags::SYSCMD,
        ..spec(
            GROUP,
            "pfdebug",
            3,
            WRITE | DENYOOM | ADMIN,
            (2, 2, 1),
            &["write", "hyperloglog", "admin", "slow", "dangerous"],
            "2.8.9",
            "Internal commands for debugging HyperLogLog values.",
            "N/A",
            pfdebug,
            PFDEBUG_ARGS,
        )
    },
    CommandSpec {
        doc_flags: crate::command::doc_flags::SYSCMD,
        ..spec(
            GROUP,
            "pfselftest",
            1,
            ADMIN,
            (0, 0, 0),
            &["hyperloglog", "admin", "slow", "dangerous"],
            "2.8.9",
            "An internal command for testing HyperLogLog values.",
            "N/A",
            pfselftest,
            &[],
        )
    },
];
const PFDEBUG_ARGS: &[ArgSpec] = &[ArgSpec::string("subcommand"), ArgSpec::key("key", 0)];

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
const BITS: usize = 6;
const HDR: usize = 16;
const DENSE_BYTES: usize = REGISTERS * BITS / 8;
const DENSE_SIZE: usize = HDR + DENSE_BYTES;
/// Largest register value the sparse VAL opcode holds.
const SPARSE_VAL_MAX: u8 = 32;
const INVALID: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// MurmurHash64A, as Valkey's HyperLogLog uses it (little-endian reads).
fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// (register, value) an element votes for.
fn pattern(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele, 0xadc8_3b19);
    let index = (h & (REGISTERS as u64 - 1)) as usize;
    // A sentinel bit bounds the run at 64 - P.
    let rest = (h >> P) | (1u64 << (64 - P));
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & 0x3f) as u8
}

fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let v = u16::from(v);
    regs[byte] &= !((0x3f_u16 << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if byte + 1 < regs.len() {
        regs[byte + 1] &= !((0x3f_u16 >> (8 - fb)) as u8);
        regs[byte + 1] |= (v >> (8 - fb)) as u8;
    }
}

#[derive(Debug)]
enum Bad {
    /// Not an HLL at all: WRONGTYPE's HLL variant.
    NotHll,
    /// An HLL header over a broken body.
    Corrupt,
}

/// Check the header (Valkey's `isHLLObjectOrReply`).
fn check(b: &[u8]) -> Result<bool, Bad> {
    if b.len() < HDR || &b[..4] != b"HYLL" || b[4] > 1 {
        return Err(Bad::NotHll);
    }
    let dense = b[4] == 0;
    if dense && b.len() != DENSE_SIZE {
        return Err(Bad::NotHll);
    }
    Ok(dense)
}

/// All registers of a (checked) HLL.
fn registers(b: &[u8]) -> Result<Vec<u8>, Bad> {
    let mut regs = vec![0u8; REGISTERS];
    if check(b)? {
        for (i, r) in regs.iter_mut().enumerate() {
            *r = dense_get(&b[HDR..], i);
        }
        return Ok(regs);
    }
    let mut at = HDR;
    let mut idx = 0usize;
    while at < b.len() {
        let op = b[at];
        if op & 0x80 != 0 {
            let v = ((op >> 2) & 0x1f) + 1;
            let run = usize::from(op & 0x3) + 1;
            if idx + run > REGISTERS {
                return Err(Bad::Corrupt);
            }
            regs[idx..idx + run].fill(v);
            idx += run;
            at += 1;
        } else if op & 0x40 != 0 {
            let Some(&lo) = b.get(at + 1) else {
                return Err(Bad::Corrupt);
            };
            idx += ((usize::from(op & 0x3f) << 8) | usize::from(lo)) + 1;
            at += 2;
        } else {
            idx += usize::from(op & 0x3f) + 1;
            at += 1;
        }
    }
    if idx != REGISTERS {
        return Err(Bad::Corrupt);
    }
    Ok(regs)
}

/// Sparse encoding of `regs`, or `None` if a register is too big for it.
fn encode_sparse(regs: &[u8], card: [u8; 8]) -> Option<Vec<u8>> {
    let mut out = header(1, card);
    let mut i = 0;
    while i < REGISTERS {
        let v = regs[i];
        let mut run = 1;
        while i + run < REGISTERS && regs[i + run] == v {
            run += 1;
        }
        if v == 0 {
            let mut left = run;
            while left > 0 {
                let n = left.min(REGISTERS);
                if n > 64 {
                    out.push(0x40 | ((n - 1) >> 8) as u8);
                    out.push(((n - 1) & 0xff) as u8);
                } else {
                    out.push((n - 1) as u8);
                }
                left -= n;
            }
        } else {
            if v > SPARSE_VAL_MAX {
                return None;
            }
            let mut left = run;
            while left > 0 {
                let n = left.min(4);
                out.push(0x80 | ((v - 1) << 2) | (n - 1) as u8);
                left -= n;
            }
        }
        i += run;
    }
    Some(out)
}

fn encode_dense(regs: &[u8], card: [u8; 8]) -> Vec<u8> {
    let mut out = header(0, card);
    out.resize(DENSE_SIZE, 0);
    for (i, &v) in regs.iter().enumerate() {
        if v != 0 {
            dense_set(&mut out[HDR..], i, v);
        }
    }
    out
}

fn header(encoding: u8, card: [u8; 8]) -> Vec<u8> {
    let mut h = Vec::with_capacity(HDR + 16);
    h.extend_from_slice(b"HYLL");
    h.extend_from_slice(&[encoding, 0, 0, 0]);
    h.extend_from_slice(&card);
    h
}

/// Cached-cardinality bytes marked stale.
const STALE: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 0x80];

/// The cached-cardinality bytes of `b` marked stale as Valkey's
/// `HLL_INVALIDATE_CACHE` marks them: the top bit set, the rest of the
/// old count left as it was (a new value's are [`STALE`]).
fn stale_card(b: &[u8]) -> [u8; 8] {
    let mut card = [0u8; 8];
    card.copy_from_slice(&b[8..HDR]);
    card[7] |= 0x80;
    card
}

/// Encode `regs` sparse when it fits (`dense` forces dense).
fn encode(regs: &[u8], dense: bool, max_sparse: u64, card: [u8; 8]) -> Vec<u8> {
    if !dense
        && let Some(s) = encode_sparse(regs, card)
        && s.len() as u64 <= max_sparse
    {
        return s;
    }
    encode_dense(regs, card)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator over a register histogram.
fn estimate(regs: &[u8]) -> u64 {
    let q = 64 - P as usize;
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[usize::from(r)] += 1;
    }
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    let alpha_inf = 0.5 / std::f64::consts::LN_2;
    (alpha_inf * m * m / z).round() as u64
}

/// The bytes of the string at `key`: `Ok(None)` missing, `Err` after an
/// error reply (other type, or not an HLL). `read` is Valkey's
/// lookupKeyRead (PFCOUNT, PFMERGE's inputs: hits, misses, `keymiss`),
/// else its lookupKeyWrite (PFADD, PFDEBUG).
fn load(ctx: &mut Ctx<'_>, key: &[u8], read: bool) -> Result<Option<Vec<u8>>, ()> {
    let h = ctx.key_hash(key);
    let db = ctx.session.db;
    let now = ctx.now_ms;
    let found = if read {
        lookup_read(ctx.srv, db, h, key, now)
    } else {
        lookup_write(&mut ctx.srv.keyspace.dbs[db], h, key, now)
    };
    let bytes = match found {
        None => return Ok(None),
        Some(e) => match as_str(e) {
            None => None,
            Some(s) => {
                let mut buf = [0u8; resp::num::I64_MAX_LEN];
                Some(bytes_of(s, &mut buf).to_vec())
            }
        },
    };
    match bytes {
        None => {
            ctx.reply.error(WRONGTYPE);
            Err(())
        }
        Some(b) if check(&b).is_err() => {
            ctx.reply.error(INVALID);
            Err(())
        }
        Some(b) => Ok(Some(b)),
    }
}

/// Registers of `b`, replying on corruption.
fn regs_or_reply(ctx: &mut Ctx<'_>, b: &[u8]) -> Result<Vec<u8>, ()> {
    registers(b).map_err(|e| {
        ctx.reply.error(match e {
            Bad::NotHll => INVALID,
            Bad::Corrupt => CORRUPT,
        })
    })
}

/// Replace the value at `key` with `bytes` (keeping its TTL).
fn save(ctx: &mut Ctx<'_>, key: &[u8], bytes: Vec<u8>) -> bool {
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    match lookup_write(db, h, key, now).and_then(as_str_mut) {
        Some(s) => {
            *unshare(s) = bytes;
            false
        }
        None => store(db, h, key, Str::Raw(bytes), now),
    }
}

fn written(ctx: &mut Ctx<'_>, key: &[u8], created: bool) {
    let db = ctx.session.db;
    ctx.touched(db, key);
    notify_write(ctx, created, "pfadd", key);
}

fn pfadd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Ok(old) = load(ctx, key, false) else {
        return;
    };
    let max_sparse = ctx.srv.config.hll_sparse_max_bytes;
    let created = old.is_none();
    let mut bytes = old.unwrap_or_else(|| encode_sparse(&[0; REGISTERS], [0; 8]).expect("zeros"));
    let card = stale_card(&bytes);
    let mut updated = false;
    if check(&bytes).is_ok_and(|dense| dense) {
        // Dense: in place.
        for i in 2..argv.len() {
            let (idx, v) = pattern(argv.get(i));
            if dense_get(&bytes[HDR..], idx) < v {
                dense_set(&mut bytes[HDR..], idx, v);
                updated = true;
            }
        }
    } else {
        let Ok(mut regs) = regs_or_reply(ctx, &bytes) else {
            return;
        };
        for i in 2..argv.len() {
            let (idx, v) = pattern(argv.get(i));
            if regs[idx] < v {
                regs[idx] = v;
                updated = true;
            }
        }
        if updated {
            bytes = encode(&regs, false, max_sparse, card);
        }
    }
    if updated || created {
        // A new key counts as an update, as in Valkey.
        bytes[8..HDR].copy_from_slice(&card);
        let created = save(ctx, key, bytes) || created;
        ctx.reply.int(1);
        written(ctx, key, created);
    } else {
        ctx.reply.int(0);
    }
}

fn pfcount(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() == 2 {
        let key = argv.get(1);
        let Ok(b) = load(ctx, key, true) else {
            return;
        };
        let Some(mut b) = b else {
            return ctx.reply.int(0);
        };
        if b[15] & 0x80 == 0 {
            let card = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
            return ctx.reply.int(card as i64);
        }
        let Ok(regs) = regs_or_reply(ctx, &b) else {
            return;
        };
        let card = estimate(&regs);
        // Valkey caches the count in the header: a write, as there.
        b[8..16].copy_from_slice(&card.to_le_bytes());
        save(ctx, key, b);
        let db = ctx.session.db;
        ctx.touched(db, key);
        return ctx.reply.int(card as i64);
    }
    let mut max = vec![0u8; REGISTERS];
    for i in 1..argv.len() {
        let Ok(b) = load(ctx, argv.get(i), true) else {
            return;
        };
        let Some(b) = b else { continue };
        let Ok(regs) = regs_or_reply(ctx, &b) else {
            return;
        };
        for (m, r) in max.iter_mut().zip(regs) {
            *m = (*m).max(r);
        }
    }
    ctx.reply.int(estimate(&max) as i64);
}

fn pfmerge(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    let mut card = STALE;
    // The destination is one of the inputs, as in Valkey.
    for i in 1..argv.len() {
        let Ok(b) = load(ctx, argv.get(i), true) else {
            return;
        };
        let Some(b) = b else { continue };
        if i == 1 {
            card = stale_card(&b);
        }
        dense |= b[4] == 0;
        let Ok(regs) = regs_or_reply(ctx, &b) else {
            return;
        };
        for (m, r) in max.iter_mut().zip(regs) {
            *m = (*m).max(r);
        }
    }
    let dst = argv.get(1);
    let bytes = encode(&max, dense, ctx.srv.config.hll_sparse_max_bytes, card);
    let created = save(ctx, dst, bytes);
    ctx.reply.ok();
    written(ctx, dst, created);
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key, as Valkey's: GETREG and
/// TODENSE leave the value dense.
fn pfdebug(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let sub = argv.get(1).to_ascii_lowercase();
    if sub == b"simd" {
        // Valkey 8.1's switch for its AVX2 register loops; ringkv's are
        // scalar, as Valkey's on a build without AVX2, which says so.
        let v = argv.get(2);
        return if v.eq_ignore_ascii_case(b"on") || v.eq_ignore_ascii_case(b"off") {
            ctx.reply.simple("disabled")
        } else {
            ctx.error("ERR Argument must be ON or OFF")
        };
    }
    let key = argv.get(2);
    let Ok(loaded) = load(ctx, key, false) else {
        return;
    };
    let Some(bytes) = loaded else {
        return ctx.error("ERR The specified key does not exist");
    };
    let dense = check(&bytes).is_ok_and(|d| d);
    match sub.as_slice() {
        b"getreg" | b"todense" => {
            let Ok(regs) = regs_or_reply(ctx, &bytes) else {
                return;
            };
            if !dense {
                let mut card = [0u8; 8];
                card.copy_from_slice(&bytes[8..16]);
                save(ctx, key, encode_dense(&regs, card));
                ctx.srv.persist.dirty += 1;
            }
            if sub == b"getreg" {
                ctx.reply.array_len(REGISTERS);
                for r in regs {
                    ctx.reply.int(i64::from(r));
                }
            } else {
                ctx.reply.int(i64::from(!dense));
            }
        }
        b"encoding" => ctx.reply.simple(if dense { "dense" } else { "sparse" }),
        b"decode" => {
            if dense {
                return ctx.error("ERR HLL encoding is not sparse");
            }
            match decode_sparse(&bytes) {
                Some(text) => ctx.reply.bulk(text.as_bytes()),
                None => ctx.error(CORRUPT),
            }
        }
        _ => ctx.error(&format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(argv.get(1))
        )),
    }
}

/// The opcodes of a sparse HLL as Valkey prints them: `z:len` (ZERO),
/// `Z:len` (XZERO), `v:value,len` (VAL).
fn decode_sparse(b: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    let mut at = HDR;
    while at < b.len() {
        let op = b[at];
        if op & 0x80 != 0 {
            parts.push(format!("v:{},{}", ((op >> 2) & 0x1f) + 1, (op & 0x3) + 1));
            at += 1;
        } else if op & 0x40 != 0 {
            let lo = *b.get(at + 1)?;
            parts.push(format!(
                "Z:{}",
                ((usize::from(op & 0x3f) << 8) | usize::from(lo)) + 1
            ));
            at += 2;
        } else {
            parts.push(format!("z:{}", (op & 0x3f) + 1));
            at += 1;
        }
    }
    Some(parts.join(" "))
}

/// PFSELFTEST: the register layout and the estimator checked on the spot
/// (Valkey's self test in spirit): every dense register set and read
/// back among random neighbours, sparse and dense encodings of random
/// registers decoding to the same registers, and the estimate of growing
/// sets within six standard errors.
fn pfselftest(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match selftest() {
        Ok(()) => ctx.reply.ok(),
        Err(msg) => ctx.error(&format!("TESTFAILED {msg}")),
    }
}

fn selftest() -> Result<(), String> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Dense registers: set all, read all.
    let mut want = vec![0u8; REGISTERS];
    let mut dense = vec![0u8; DENSE_BYTES];
    for (i, w) in want.iter_mut().enumerate() {
        *w = (next() % 64) as u8;
        dense_set(&mut dense, i, *w);
    }
    for (i, &w) in want.iter().enumerate() {
        if dense_get(&dense, i) != w {
            return Err(format!("Register error at {i}"));
        }
    }
    // Sparse and dense encodings of the same (small) registers.
    let small: Vec<u8> = (0..REGISTERS)
        .map(|_| {
            if next() % 8 == 0 {
                (next() % 32) as u8
            } else {
                0
            }
        })
        .collect();
    let sparse = encode_sparse(&small, STALE).ok_or("sparse encoding refused")?;
    for bytes in [sparse, encode_dense(&small, STALE)] {
        if registers(&bytes).map_err(|e| format!("{e:?}"))? != small {
            return Err("Sparse and dense encodings disagree".into());
        }
    }
    // The estimator.
    let relerr = 1.04 / f64::from(REGISTERS as u32).sqrt();
    let mut regs = vec![0u8; REGISTERS];
    let mut checkpoint = 1u64;
    for n in 1..=200_000u64 {
        let (idx, v) = pattern(&next().to_le_bytes());
        regs[idx] = regs[idx].max(v);
        if n == checkpoint {
            let est = estimate(&regs) as f64;
            let abserr = (est - n as f64).abs();
            // Small cardinalities are exact enough for a fixed slack.
            let maxerr = (relerr * 6.0 * n as f64).max(2.0);
            if abserr > maxerr {
                return Err(format!(
                    "Approximation error {abserr} at cardinality {n} (max {maxerr})"
                ));
            }
            checkpoint *= 10;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_reference_vectors() {
        // The element "a" lands where Valkey puts it (checked against
        // redis-server: PFADD h a; GET h shows VAL at this register).
        assert_eq!(murmur64a(b"", 0), 0);
        let (idx, v) = pattern(b"a");
        assert!(idx < REGISTERS && (1..=51).contains(&v));
    }

    #[test]
    fn sparse_dense_round_trip_and_estimate() {
        let mut regs = vec![0u8; REGISTERS];
        for i in 0..20_000u32 {
            let (idx, v) = pattern(&i.to_le_bytes());
            regs[idx] = regs[idx].max(v);
        }
        let s = encode_sparse(&regs, STALE).unwrap();
        assert_eq!(registers(&s).unwrap(), regs);
        let d = encode_dense(&regs, STALE);
        assert_eq!(d.len(), DENSE_SIZE);
        assert_eq!(registers(&d).unwrap(), regs);
        let est = estimate(&regs) as f64;
        assert!((est - 20_000.0).abs() / 20_000.0 < 0.03, "{est}");
        assert_eq!(estimate(&vec![0u8; REGISTERS]), 0);
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut s = encode_sparse(&vec![0u8; REGISTERS], STALE).unwrap();
        s.push(0x00);
        assert!(matches!(registers(&s), Err(Bad::Corrupt)));
        assert!(matches!(check(b"HYLL"), Err(Bad::NotHll)));
    }

    #[test]
    fn the_self_test_passes() {
        assert_eq!(selftest(), Ok(()));
    }
}
