//! Reply encoding. One writer, two protocols: RESP3 types degrade to their
//! RESP2 forms (map → flat array, double → bulk string, null → `$-1`, …)
//! exactly as Valkey does, so command code writes each reply once.

/// The protocol a client negotiated with `HELLO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// Appends RESP frames to a byte buffer.
pub struct ReplyWriter<'a> {
    pub out: &'a mut Vec<u8>,
    pub proto: Protocol,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        ReplyWriter { out, proto }
    }
    /// `+OK`-style status line. `s` must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        todo!("{s}")
    }
    pub fn ok(&mut self) {
        self.simple("OK")
    }
    /// Error line; `msg` is the whole text after `-`, e.g. `ERR syntax error`
    /// or `WRONGTYPE Operation against ...`. CR/LF in it are replaced by spaces.
    pub fn error(&mut self, msg: &str) {
        todo!("{msg}")
    }
    pub fn int(&mut self, n: i64) {
        todo!("{n}")
    }
    pub fn bulk(&mut self, b: &[u8]) {
        todo!("{b:?}")
    }
    /// RESP3 `_`; RESP2 `$-1`.
    pub fn null(&mut self) {
        todo!()
    }
    /// RESP3 `_`; RESP2 `*-1` (null array, e.g. an EXEC aborted by WATCH).
    pub fn null_array(&mut self) {
        todo!()
    }
    pub fn array_len(&mut self, n: usize) {
        todo!("{n}")
    }
    /// RESP3 `%n`; RESP2 `*2n`.
    pub fn map_len(&mut self, n: usize) {
        todo!("{n}")
    }
    /// RESP3 `~n`; RESP2 `*n`.
    pub fn set_len(&mut self, n: usize) {
        todo!("{n}")
    }
    /// RESP3 `>n`; RESP2 `*n`.
    pub fn push_len(&mut self, n: usize) {
        todo!("{n}")
    }
    /// RESP3 `,` double; RESP2 bulk string. Formatted as Valkey does
    /// (`inf`, `-inf`, `nan`, shortest round-trip decimal, `1e+100` style exponents).
    pub fn double(&mut self, d: f64) {
        todo!("{d}")
    }
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        todo!("{b}")
    }
    /// RESP3 `=len\r\ntxt:...`; RESP2 bulk string. `format` is 3 bytes, e.g. `txt`.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        todo!("{format}{text:?}")
    }
    /// RESP3 `(`; RESP2 bulk string.
    pub fn big_number(&mut self, digits: &str) {
        todo!("{digits}")
    }
}
