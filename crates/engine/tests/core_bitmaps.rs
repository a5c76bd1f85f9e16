//! Bitmap commands: bit order, ranges in bytes and bits, BITOP, BITFIELD
//! overflow rules and errors, byte for byte.

#[path = "core_util.rs"]
mod util;

use util::*;

#[test]
fn setbit_getbit_bit_order_and_growth() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["SETBIT", "b", "1", "1"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["SETBIT", "b", "7", "1"]), ":0\r\n");
    // Bit 0 is the top bit of byte 0: 0b0100_0001 = 'A'.
    assert_eq!(cmd(&mut e, c, &["GET", "b"]), "$1\r\nA\r\n");
    assert_eq!(cmd(&mut e, c, &["SETBIT", "b", "7", "0"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["GETBIT", "b", "1"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["GETBIT", "b", "1000"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["GETBIT", "nokey", "0"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["SETBIT", "b", "23", "1"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["STRLEN", "b"]), ":3\r\n");
    assert_eq!(
        cmd(&mut e, c, &["SETBIT", "b", "-1", "1"]),
        "-ERR bit offset is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SETBIT", "b", "4294967296", "1"]),
        "-ERR bit offset is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SETBIT", "b", "1", "2"]),
        "-ERR bit is not an integer or out of range\r\n"
    );
    cmd(&mut e, c, &["LPUSH", "l", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["SETBIT", "l", "1", "1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn bitcount_and_bitpos_ranges() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "s", "foobar"]);
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s"]), ":26\r\n");
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "0", "0"]), ":4\r\n");
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "1", "1"]), ":6\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITCOUNT", "s", "1", "1", "BYTE"]),
        ":6\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITCOUNT", "s", "5", "30", "BIT"]),
        ":17\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "-2", "-1"]), ":7\r\n");
    // Valkey 8: a start alone runs to the end.
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "0"]), ":26\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITCOUNT", "s", "0", "1", "BOTH"]),
        "-ERR syntax error\r\n"
    );
    cmd(&mut e, c, &["SETBIT", "q", "0", "1"]);
    for i in 1..12 {
        cmd(&mut e, c, &["SETBIT", "q", &i.to_string(), "1"]);
    }
    cmd(&mut e, c, &["SETBIT", "q", "23", "0"]);
    // q = ff f0 00
    assert_eq!(cmd(&mut e, c, &["BITPOS", "q", "0"]), ":12\r\n");
    assert_eq!(cmd(&mut e, c, &["BITPOS", "q", "1", "1"]), ":8\r\n");
    assert_eq!(cmd(&mut e, c, &["BITPOS", "q", "1", "2"]), ":-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITPOS", "q", "1", "7", "15", "BIT"]),
        ":7\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["BITPOS", "nokey", "0"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["BITPOS", "nokey", "1"]), ":-1\r\n");
    // All ones up to the end, no explicit end: the first clear bit is
    // the one past the string; with an explicit end there is none.
    cmd(&mut e, c, &["SETBIT", "full", "7", "1"]);
    for i in 0..7 {
        cmd(&mut e, c, &["SETBIT", "full", &i.to_string(), "1"]);
    }
    assert_eq!(cmd(&mut e, c, &["BITPOS", "full", "0"]), ":8\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITPOS", "full", "0", "0", "0"]),
        ":-1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITPOS", "full", "2"]),
        "-ERR The bit argument must be 1 or 0.\r\n"
    );
    cmd(&mut e, c, &["SET", "empty", ""]);
    assert_eq!(cmd(&mut e, c, &["BITPOS", "empty", "0"]), ":-1\r\n");
}

#[test]
fn bitop() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "a", "abc"]);
    cmd(&mut e, c, &["SET", "b", "a"]);
    assert_eq!(cmd(&mut e, c, &["BITOP", "AND", "d", "a", "b"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["GET", "d"]), "$3\r\na\u{0}\u{0}\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITOP", "OR", "d", "a", "nokey"]),
        ":3\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["GET", "d"]), "$3\r\nabc\r\n");
    assert_eq!(cmd(&mut e, c, &["BITOP", "XOR", "d", "a", "a"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["GET", "d"]), "$3\r\n\u{0}\u{0}\u{0}\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITOP", "NOT", "d", "a", "b"]),
        "-ERR BITOP NOT must be called with a single source key.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITOP", "NAND", "d", "a"]),
        "-ERR syntax error\r\n"
    );
    // An empty result deletes the destination.
    assert_eq!(cmd(&mut e, c, &["BITOP", "OR", "d", "nokey"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "d"]), ":0\r\n");
}

#[test]
fn bitfield_types_overflow_and_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "BITFIELD", "f", "SET", "u8", "0", "255", "GET", "u8", "0", "GET", "i8", "0"
            ]
        ),
        "*3\r\n:0\r\n:255\r\n:-1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD", "f", "INCRBY", "u8", "0", "10"]),
        "*1\r\n:9\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "1000"
            ]
        ),
        "*1\r\n:255\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1", "GET", "u8", "0"
            ]
        ),
        "*2\r\n$-1\r\n:255\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "BITFIELD", "f", "OVERFLOW", "SAT", "SET", "i4", "#1", "100", "GET", "i4", "#1"
            ]
        ),
        "*2\r\n:-1\r\n:7\r\n"
    );
    // An unsigned SET of a negative number is a huge value.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["BITFIELD", "g", "SET", "u8", "0", "-3", "GET", "u8", "0"]
        ),
        "*2\r\n:0\r\n:253\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD", "h", "GET", "i64", "0"]),
        "*1\r\n:0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "h"]), ":0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD", "f", "GET", "u64", "0"]),
        "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD", "f", "OVERFLOW", "MAYBE"]),
        "-ERR Invalid OVERFLOW type specified\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD", "f", "FETCH", "u8", "0"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD_RO", "f", "SET", "u8", "0", "1"]),
        "-ERR BITFIELD_RO only supports the GET subcommand\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BITFIELD_RO", "f", "GET", "u8", "0"]),
        "*1\r\n:247\r\n"
    );
}

#[test]
fn bitcount_of_a_crossed_range_from_the_end_is_zero() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "s", "xxxx"]);
    // Both ends negative and start past end: empty before clamping (as
    // Valkey); clamped, it would be byte 0 (4 bits).
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "-6", "-7"]), ":0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["BITCOUNT", "s", "-6", "-15", "BIT"]),
        ":0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["BITCOUNT", "s", "-6", "-1"]), ":16\r\n");
    assert_eq!(cmd(&mut e, c, &["BITPOS", "s", "1", "-6", "-7"]), ":1\r\n");
}
