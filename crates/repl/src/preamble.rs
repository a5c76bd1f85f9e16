//! What a primary answers before its stream, as the replica reads it: the
//! reply to PSYNC and the header of the RDB transfer. Pure functions of
//! the lines read, so that garbage from a primary is a clear error and
//! never a panic (fuzzed: fuzz/fuzz_targets/repl_preamble.rs).

/// The RDB marker of a diskless transfer is this long.
pub const EOF_MARK_LEN: usize = 40;

/// The primary's answer to PSYNC.
#[derive(Debug, PartialEq, Eq)]
pub enum PsyncReply<'a> {
    /// `+FULLRESYNC <replid> <offset>`: an RDB follows.
    FullResync { replid: &'a str, offset: u64 },
    /// `+CONTINUE [<replid>]`: the stream goes on from our offset (with a
    /// new id after a failover, PSYNC2).
    Continue { replid: Option<&'a str> },
}

/// Read the reply line to PSYNC.
pub fn parse_psync_reply(line: &str) -> Result<PsyncReply<'_>, String> {
    if let Some(rest) = line.strip_prefix("+FULLRESYNC") {
        let mut it = rest.split_whitespace();
        return match (it.next(), it.next().and_then(|o| o.parse::<u64>().ok())) {
            (Some(replid), Some(offset)) => Ok(PsyncReply::FullResync { replid, offset }),
            _ => Err(format!("bad FULLRESYNC reply '{line}'")),
        };
    }
    if let Some(rest) = line.strip_prefix("+CONTINUE") {
        let replid = rest.split_whitespace().next();
        return Ok(PsyncReply::Continue { replid });
    }
    Err(format!("Unexpected reply to PSYNC from master: {line}"))
}

/// How the RDB transfer ends.
#[derive(Debug, PartialEq, Eq)]
pub enum TransferSize {
    /// `$<len>`: exactly this many bytes.
    Bytes(u64),
    /// `$EOF:<mark>`: until these 40 bytes (diskless).
    UntilMark(Vec<u8>),
}

/// Read the line that opens the RDB transfer.
pub fn parse_transfer_header(line: &str) -> Result<TransferSize, String> {
    let Some(spec) = line.strip_prefix('$') else {
        return Err(format!(
            "Bad protocol from MASTER, the first byte is not '$': '{line}'"
        ));
    };
    if let Some(mark) = spec.strip_prefix("EOF:")
        && mark.len() == EOF_MARK_LEN
    {
        return Ok(TransferSize::UntilMark(mark.as_bytes().to_vec()));
    }
    spec.parse::<u64>()
        .map(TransferSize::Bytes)
        .map_err(|_| format!("Bad RDB length from MASTER: '{line}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psync_replies() {
        let id = "8371445ee0a2b5d4b0e6f6dd2d57e6a4b8c16b83";
        assert_eq!(
            parse_psync_reply(&format!("+FULLRESYNC {id} 1234")),
            Ok(PsyncReply::FullResync {
                replid: id,
                offset: 1234
            })
        );
        assert_eq!(
            parse_psync_reply("+CONTINUE"),
            Ok(PsyncReply::Continue { replid: None })
        );
        assert_eq!(
            parse_psync_reply(&format!("+CONTINUE {id}")),
            Ok(PsyncReply::Continue { replid: Some(id) })
        );
        for bad in [
            "+FULLRESYNC",
            "+FULLRESYNC id",
            "+FULLRESYNC id -1",
            "-NOMASTERLINK x",
            "",
        ] {
            assert!(parse_psync_reply(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn transfer_headers() {
        let mark = "a".repeat(EOF_MARK_LEN);
        assert_eq!(parse_transfer_header("$0"), Ok(TransferSize::Bytes(0)));
        assert_eq!(parse_transfer_header("$175"), Ok(TransferSize::Bytes(175)));
        assert_eq!(
            parse_transfer_header(&format!("$EOF:{mark}")),
            Ok(TransferSize::UntilMark(mark.clone().into_bytes()))
        );
        for bad in [
            "175",
            "$-1",
            "$",
            "$EOF:short",
            "$12x",
            &format!("$EOF:{mark}b"),
        ] {
            assert!(parse_transfer_header(bad).is_err(), "{bad}");
        }
    }
}
