//! Property tests: the request parser against the encoder, at every split
//! point of a pipeline, and the reply parsers against the reply writer.

use proptest::prelude::*;
use resp::{
    Limits, Parsed, Protocol, ReplyWriter, Resume, Span, Value, encode_command, parse_command,
    parse_command_mut, parse_command_resume, parse_value, value_len,
};
use ringkv_resp as resp;

fn argv() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..8)
}

/// One request as bytes on the wire plus the argv the server must see.
#[derive(Clone, Debug)]
struct Req {
    wire: Vec<u8>,
    argv: Vec<Vec<u8>>,
}

/// Quote `arg` for an inline line the way a careful client would.
fn quote_inline(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in arg {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

fn request() -> impl Strategy<Value = Req> {
    let word = "[A-Za-z0-9]{1,10}";
    prop_oneof![
        // multibulk, binary arguments
        argv().prop_map(|argv| {
            let mut wire = Vec::new();
            encode_command(&argv, &mut wire);
            Req { wire, argv }
        }),
        // plain inline words
        (prop::collection::vec(word, 1..5), any::<bool>()).prop_map(|(words, crlf)| {
            let mut wire = words.join(" ").into_bytes();
            wire.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            Req {
                wire,
                argv: words.into_iter().map(String::into_bytes).collect(),
            }
        }),
        // inline with a plain command name and quoted binary arguments
        (
            word,
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..4)
        )
            .prop_map(|(name, rest)| {
                let mut wire = name.clone().into_bytes();
                for a in &rest {
                    wire.push(b' ');
                    quote_inline(a, &mut wire);
                }
                wire.extend_from_slice(b"\r\n");
                let mut argv = vec![name.into_bytes()];
                argv.extend(rest);
                Req { wire, argv }
            }),
    ]
}

/// Parse every complete command at the front of `buf` (in place, on a
/// copy). Returns the argvs and the bytes consumed; panics on errors.
fn parse_all(buf: &[u8]) -> (Vec<Vec<Vec<u8>>>, usize) {
    let mut copy = buf.to_vec();
    let limits = Limits::default();
    let mut out = Vec::new();
    let mut at = 0;
    let mut args: Vec<Span> = Vec::new();
    loop {
        args.clear();
        match parse_command_mut(&mut copy[at..], &limits, &mut args).unwrap() {
            Parsed::Command { consumed, argc } => {
                assert!(consumed > 0 && at + consumed <= buf.len());
                assert_eq!(argc, args.len());
                let rest = &copy[at..];
                out.push(args.iter().map(|s| s.slice(rest).to_vec()).collect());
                at += consumed;
            }
            Parsed::Incomplete { need } => {
                if let Some(n) = need {
                    assert!(n > buf.len() - at, "need {n} at {at} of {}", buf.len());
                }
                return (out, at);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_parse_round_trip(argv in argv()) {
        let mut wire = Vec::new();
        encode_command(&argv, &mut wire);
        let mut args = Vec::new();
        let r = parse_command(&wire, &Limits::default(), &mut args).unwrap();
        prop_assert_eq!(r, Parsed::Command { consumed: wire.len(), argc: argv.len() });
        let got: Vec<Vec<u8>> = args.iter().map(|s| s.slice(&wire).to_vec()).collect();
        prop_assert_eq!(got, argv);
    }

    #[test]
    fn every_split_point(reqs in prop::collection::vec(request(), 1..6)) {
        let mut wire = Vec::new();
        let mut ends = Vec::new();
        for r in &reqs {
            wire.extend_from_slice(&r.wire);
            ends.push(wire.len());
        }
        let expected: Vec<Vec<Vec<u8>>> = reqs.iter().map(|r| r.argv.clone()).collect();
        let (all, consumed) = parse_all(&wire);
        prop_assert_eq!(consumed, wire.len());
        prop_assert_eq!(&all, &expected);
        for cut in 0..wire.len() {
            let (got, consumed) = parse_all(&wire[..cut]);
            // Exactly the commands that end inside the prefix come out.
            let complete = ends.iter().take_while(|&&e| e <= cut).count();
            prop_assert_eq!(got.len(), complete, "cut {}", cut);
            prop_assert_eq!(&got[..], &expected[..complete]);
            prop_assert_eq!(consumed, if complete == 0 { 0 } else { ends[complete - 1] });
        }
    }

    #[test]
    fn resume_fed_in_pieces_matches(reqs in prop::collection::vec(request(), 1..6), step in 1usize..40) {
        let mut wire = Vec::new();
        for r in &reqs {
            wire.extend_from_slice(&r.wire);
        }
        let expected: Vec<Vec<Vec<u8>>> = reqs.iter().map(|r| r.argv.clone()).collect();
        let mut copy = wire.clone();
        let mut resume = Resume::default();
        let (mut at, mut visible) = (0, 0);
        let mut got = Vec::new();
        let mut args = Vec::new();
        loop {
            args.clear();
            match parse_command_resume(&mut copy[at..visible], &Limits::default(), &mut args, &mut resume).unwrap() {
                Parsed::Command { consumed, argc } => {
                    prop_assert_eq!(argc, args.len());
                    let rest = &copy[at..];
                    got.push(args.iter().map(|s| s.slice(rest).to_vec()).collect::<Vec<_>>());
                    at += consumed;
                }
                Parsed::Incomplete { .. } => {
                    if visible == wire.len() {
                        break;
                    }
                    visible = (visible + step).min(wire.len());
                }
            }
        }
        prop_assert_eq!(at, wire.len());
        prop_assert_eq!(got, expected);
        prop_assert!(!resume.is_active());
    }

    #[test]
    fn shared_parser_agrees_or_asks_for_rewrite(reqs in prop::collection::vec(request(), 1..4)) {
        let mut wire = Vec::new();
        for r in &reqs {
            wire.extend_from_slice(&r.wire);
        }
        let limits = Limits::default();
        let mut at = 0;
        while at < wire.len() {
            let mut a1 = Vec::new();
            let mut a2 = Vec::new();
            let mut copy = wire[at..].to_vec();
            let r2 = parse_command_mut(&mut copy, &limits, &mut a2).unwrap();
            match parse_command(&wire[at..], &limits, &mut a1) {
                Ok(r1) => {
                    prop_assert_eq!(r1, r2);
                    prop_assert_eq!(&a1, &a2);
                }
                Err(e) => prop_assert_eq!(e.0.as_str(), resp::ProtocolError::NEEDS_REWRITE),
            }
            let Parsed::Command { consumed, .. } = r2 else { break };
            at += consumed;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut args = vec![Span::default()];
        let mut copy = buf.clone();
        if let Ok(Parsed::Command { consumed, argc }) =
            parse_command_mut(&mut copy, &Limits::default(), &mut args)
        {
            prop_assert!(consumed <= buf.len());
            prop_assert_eq!(args.len(), argc + 1);
            for s in &args[1..] {
                prop_assert!(s.end() <= consumed);
            }
        } else {
            prop_assert_eq!(args.len(), 1);
        }
        let _ = parse_value(&buf);
        let _ = value_len(&buf);
    }
}

// ------------------------------------------------------------- replies

/// A reply as command code would write it.
#[derive(Clone, Debug)]
enum R {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    NullArray,
    Array(Vec<R>),
    Map(Vec<(R, R)>),
    Set(Vec<R>),
    Push(Vec<R>),
    Double(f64),
    Bool(bool),
    Verbatim(Vec<u8>),
    Big(String),
}

fn reply() -> impl Strategy<Value = R> {
    let leaf = prop_oneof![
        "[ -~]{0,12}".prop_map(R::Simple),
        "[A-Z]{1,5} [ -~]{0,12}".prop_map(R::Error),
        any::<i64>().prop_map(R::Int),
        prop::collection::vec(any::<u8>(), 0..30).prop_map(R::Bulk),
        Just(R::Null),
        Just(R::NullArray),
        any::<f64>()
            .prop_filter("nan != nan", |d| !d.is_nan())
            .prop_map(R::Double),
        any::<bool>().prop_map(R::Bool),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(R::Verbatim),
        "-?[1-9][0-9]{0,40}".prop_map(R::Big),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(R::Array),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(R::Map),
            prop::collection::vec(inner.clone(), 0..5).prop_map(R::Set),
            prop::collection::vec(inner, 0..5).prop_map(R::Push),
        ]
    })
}

fn write(r: &R, w: &mut ReplyWriter) {
    match r {
        R::Simple(s) => w.simple(s),
        R::Error(s) => w.error(s),
        R::Int(n) => w.int(*n),
        R::Bulk(b) => w.bulk(b),
        R::Null => w.null(),
        R::NullArray => w.null_array(),
        R::Array(v) => {
            w.array_len(v.len());
            v.iter().for_each(|x| write(x, w));
        }
        R::Map(kv) => {
            w.map_len(kv.len());
            for (k, v) in kv {
                write(k, w);
                write(v, w);
            }
        }
        R::Set(v) => {
            w.set_len(v.len());
            v.iter().for_each(|x| write(x, w));
        }
        R::Push(v) => {
            w.push_len(v.len());
            v.iter().for_each(|x| write(x, w));
        }
        R::Double(d) => w.double(*d),
        R::Bool(b) => w.boolean(*b),
        R::Verbatim(t) => w.verbatim("txt", t),
        R::Big(d) => w.big_number(d),
    }
}

/// What a client decodes from `r` written in `proto`.
fn expected(r: &R, proto: Protocol) -> Value {
    let r3 = proto == Protocol::Resp3;
    let all = |v: &[R]| v.iter().map(|x| expected(x, proto)).collect::<Vec<_>>();
    match r {
        R::Simple(s) => Value::Simple(s.clone().into_bytes()),
        R::Error(s) => Value::Error(s.clone().into_bytes()),
        R::Int(n) => Value::Int(*n),
        R::Bulk(b) => Value::Bulk(b.clone()),
        R::Null | R::NullArray => Value::Null,
        R::Array(v) => Value::Array(all(v)),
        R::Map(kv) if r3 => Value::Map(
            kv.iter()
                .map(|(k, v)| (expected(k, proto), expected(v, proto)))
                .collect(),
        ),
        R::Map(kv) => Value::Array(
            kv.iter()
                .flat_map(|(k, v)| [expected(k, proto), expected(v, proto)])
                .collect(),
        ),
        R::Set(v) if r3 => Value::Set(all(v)),
        R::Push(v) if r3 => Value::Push(all(v)),
        R::Set(v) | R::Push(v) => Value::Array(all(v)),
        R::Double(d) if r3 => Value::Double(*d),
        R::Double(d) => {
            let mut tmp = [0u8; resp::num::DOUBLE_MAX_LEN];
            Value::Bulk(resp::num::fmt_double(*d, &mut tmp).to_vec())
        }
        R::Bool(b) if r3 => Value::Bool(*b),
        R::Bool(b) => Value::Int(i64::from(*b)),
        R::Verbatim(t) if r3 => Value::Verbatim {
            format: *b"txt",
            text: t.clone(),
        },
        R::Verbatim(t) => Value::Bulk(t.clone()),
        R::Big(d) if r3 => Value::BigNumber(d.clone().into_bytes()),
        R::Big(d) => Value::Bulk(d.clone().into_bytes()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn reply_writer_parse_value_round_trip(r in reply(), r3 in any::<bool>()) {
        let proto = if r3 { Protocol::Resp3 } else { Protocol::Resp2 };
        let mut out = Vec::new();
        write(&r, &mut ReplyWriter::new(&mut out, proto));
        let (v, n) = parse_value(&out).unwrap().expect("complete");
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(v.clone(), expected(&r, proto));
        prop_assert_eq!(value_len(&out), Ok(Some(n)));
        // Value::encode produces something both parsers read back identically.
        let mut re = Vec::new();
        v.encode(&mut re);
        prop_assert_eq!(parse_value(&re).unwrap(), Some((v, re.len())));
        for cut in 0..out.len() {
            prop_assert_eq!(parse_value(&out[..cut]), Ok(None));
            prop_assert_eq!(value_len(&out[..cut]), Ok(None));
        }
    }

    #[test]
    fn value_len_agrees_with_parse_value(buf in prop::collection::vec(
        prop_oneof![
            Just(b'*'), Just(b'%'), Just(b'$'), Just(b':'), Just(b'\r'), Just(b'\n'),
            Just(b'1'), Just(b'2'), Just(b'0'), Just(b'-'), Just(b'+'), Just(b'_'),
            Just(b'|'), Just(b'~'), Just(b'='), Just(b'#'), Just(b't'), Just(b','),
            any::<u8>(),
        ],
        0..60,
    )) {
        let a = parse_value(&buf);
        let b = value_len(&buf);
        match (&a, &b) {
            (Ok(Some((_, n))), Ok(Some(m))) => prop_assert_eq!(n, m),
            (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "parse_value {:?} vs value_len {:?} on {:?}", a, b, buf),
        }
    }
}
