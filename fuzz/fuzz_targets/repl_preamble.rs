//! Arbitrary bytes as the lines a primary sends before its stream: the
//! reply to PSYNC, then the RDB transfer's header. Each must parse or be
//! refused, never panic, and what parses must read back the same when
//! written out again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use repl::preamble::{PsyncReply, TransferSize, parse_psync_reply, parse_transfer_header};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (first, second) = text.split_once('\n').unwrap_or((&text, ""));
    match parse_psync_reply(first) {
        Ok(PsyncReply::FullResync { replid, offset }) => {
            let again = format!("+FULLRESYNC {replid} {offset}");
            assert_eq!(
                parse_psync_reply(&again),
                Ok(PsyncReply::FullResync { replid, offset })
            );
        }
        Ok(PsyncReply::Continue { replid }) => {
            let again = format!("+CONTINUE {}", replid.unwrap_or(""));
            assert_eq!(parse_psync_reply(&again), Ok(PsyncReply::Continue { replid }));
        }
        Err(e) => assert!(!e.is_empty()),
    }
    match parse_transfer_header(second) {
        Ok(TransferSize::Bytes(n)) => {
            assert_eq!(parse_transfer_header(&format!("${n}")), Ok(TransferSize::Bytes(n)));
        }
        Ok(TransferSize::UntilMark(mark)) => assert_eq!(mark.len(), repl::preamble::EOF_MARK_LEN),
        Err(e) => assert!(!e.is_empty()),
    }
});
