//! Feed arbitrary bytes to the AOF command-file scanner as the loader
//! does, in pieces cut where the first input byte says, and check that it
//! never panics, that spans lie inside the piece scanned, that scanning in
//! pieces finds the same commands and the same end as scanning the whole
//! file at once, and that a clean end consumed everything.
#![no_main]

use libfuzzer_sys::fuzz_target;
use persist::aof::commands::{End, Scanner, parse_all};

fuzz_target!(|input: &[u8]| {
    let Some((&cut, data)) = input.split_first() else {
        return;
    };
    let whole = parse_all(data);
    let mut sc = Scanner::new(0);
    let mut buf: Vec<u8> = Vec::new();
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut fed = 0;
    let step = cut as usize % 64 + 1;
    let result = loop {
        let eof = fed == data.len();
        if !eof {
            let n = step.min(data.len() - fed);
            buf.extend_from_slice(&data[fed..fed + n]);
            fed += n;
        }
        let eof = fed == data.len();
        let (mut args, mut argc) = (Vec::new(), Vec::new());
        match sc.scan(&buf, eof, &mut args, &mut argc) {
            Err(e) => break Err(e),
            Ok(s) => {
                assert!(s.consumed <= buf.len());
                assert_eq!(args.len(), argc.iter().map(|&n| n as usize).sum::<usize>());
                let mut spans = args.iter();
                for n in argc {
                    assert!(n > 0);
                    cmds.push(
                        spans
                            .by_ref()
                            .take(n as usize)
                            .map(|sp| {
                                assert!(sp.end() <= s.consumed);
                                sp.slice(&buf).to_vec()
                            })
                            .collect(),
                    );
                }
                buf.drain(..s.consumed);
                if eof {
                    let end = sc.end(buf.len());
                    if end == End::Clean {
                        assert!(buf.is_empty());
                    }
                    break Ok(end);
                }
            }
        }
    };
    match (whole, result) {
        (Ok((all, end)), Ok(piece_end)) => {
            assert_eq!(all, cmds);
            assert_eq!(end, piece_end);
            if let End::Truncated { at, keep, .. } = end {
                assert!(keep <= at && at <= data.len() as u64);
            }
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("whole {a:?} vs pieces {b:?}"),
    }
});
