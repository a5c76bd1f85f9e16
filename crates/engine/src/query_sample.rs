//! What the log shows of a client's query buffer after a protocol error
//! (Valkey's setProtocolError sample), taken by the IO layer before it
//! drops the input.

/// What Valkey's protocol-error log line shows of a query buffer: all of
/// it under 128 bytes, else its first and last 64.
#[derive(Clone, Debug, Default)]
pub struct QuerySample {
    bytes: Vec<u8>,
    total: usize,
}

impl QuerySample {
    const SHOWN: usize = 128;

    /// The sample of `unparsed`, the bytes left from the command that
    /// failed to parse on.
    pub fn of(unparsed: &[u8]) -> QuerySample {
        let total = unparsed.len();
        let bytes = if total < Self::SHOWN {
            unparsed.to_vec()
        } else {
            let half = Self::SHOWN / 2;
            [&unparsed[..half], &unparsed[total - half..]].concat()
        };
        QuerySample { bytes, total }
    }

    /// As Valkey prints it: quoted, cut at a NUL as its C string is, and
    /// every unprintable byte a `.`.
    pub fn shown(&self) -> String {
        let text = |b: &[u8]| {
            let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
            b.iter()
                .map(|&c| {
                    if (0x20..0x7f).contains(&c) {
                        c as char
                    } else {
                        '.'
                    }
                })
                .collect::<String>()
        };
        if self.total == 0 {
            return String::new();
        }
        if self.total < Self::SHOWN {
            return format!("'{}'", text(&self.bytes));
        }
        let half = Self::SHOWN / 2;
        format!(
            "'{}' (... more {} bytes ...) '{}'",
            text(&self.bytes[..half]),
            self.total - Self::SHOWN,
            text(&self.bytes[half..])
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_whole_long_input_its_ends_unprintables_as_dots() {
        assert_eq!(QuerySample::of(b"").shown(), "");
        assert_eq!(QuerySample::of(b"*2\r\n$x\r\n").shown(), "'*2..$x..'");
        assert_eq!(QuerySample::of(b"ab\0cd").shown(), "'ab'");
        let long: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
        let s = QuerySample::of(&long).shown();
        let (head, tail) = (
            String::from_utf8(long[..64].to_vec()).unwrap(),
            String::from_utf8(long[236..].to_vec()).unwrap(),
        );
        assert_eq!(s, format!("'{head}' (... more 172 bytes ...) '{tail}'"));
    }
}
