//! Reply encoding. One writer, two protocols: RESP3 types degrade to their
//! RESP2 forms (map → flat array, double → bulk string, null → `$-1`, …)
//! exactly as Valkey does, so command code writes each reply once.
//!
//! Nothing here allocates beyond growing `out`: integers and doubles are
//! formatted on the stack ([`crate::num`]).

use crate::num::{self, DOUBLE_MAX_LEN, I64_MAX_LEN};
use crate::replybuf::{Refs, ReplyBuf, SharedBytes};

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
    /// Where large values go by reference; `None`: they are copied into
    /// `out` (output kept outside a client's reply buffer).
    refs: Option<&'a mut Refs>,
    pub proto: Protocol,
}

impl<'a> ReplyWriter<'a> {
    /// A writer that copies everything into `out`.
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        ReplyWriter {
            out,
            refs: None,
            proto,
        }
    }
    /// A writer into a client's reply buffer: [`ReplyWriter::bulk_shared`]
    /// adds a reference instead of copying.
    pub fn for_buf(buf: &'a mut ReplyBuf, proto: Protocol) -> Self {
        let (out, refs) = buf.parts();
        ReplyWriter {
            out,
            refs: Some(refs),
            proto,
        }
    }
    fn resp3(&self) -> bool {
        self.proto == Protocol::Resp3
    }
    /// `<prefix><n>\r\n`.
    #[inline]
    fn header(&mut self, prefix: u8, n: u64) {
        let mut tmp = [0u8; I64_MAX_LEN];
        let digits = num::fmt_u64(n, &mut tmp);
        self.out.reserve(digits.len() + 3);
        self.out.push(prefix);
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(b"\r\n");
    }
    /// A line whose CR/LF are replaced by spaces so it cannot break framing.
    fn line(&mut self, prefix: u8, s: &[u8]) {
        self.out.reserve(s.len() + 3);
        self.out.push(prefix);
        let at = self.out.len();
        self.out.extend_from_slice(s);
        for b in &mut self.out[at..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        self.out.extend_from_slice(b"\r\n");
    }
    /// `+OK`-style status line. `s` must not contain CR or LF (they are
    /// replaced by spaces if it does).
    pub fn simple(&mut self, s: &str) {
        self.line(b'+', s.as_bytes());
    }
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }
    /// Error line; `msg` is the whole text after `-`, e.g. `ERR syntax error`
    /// or `WRONGTYPE Operation against ...`. CR/LF in it are replaced by spaces.
    /// A leading `-` in `msg` is not doubled.
    pub fn error(&mut self, msg: &str) {
        let m = msg.strip_prefix('-').unwrap_or(msg);
        self.line(b'-', m.as_bytes());
    }
    pub fn int(&mut self, n: i64) {
        let mut tmp = [0u8; I64_MAX_LEN];
        let digits = num::fmt_i64(n, &mut tmp);
        self.out.reserve(digits.len() + 3);
        self.out.push(b':');
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(b"\r\n");
    }
    pub fn bulk(&mut self, b: &[u8]) {
        self.out.reserve(b.len() + 16);
        self.header(b'$', b.len() as u64);
        self.out.extend_from_slice(b);
        self.out.extend_from_slice(b"\r\n");
    }
    /// A bulk string of a shared value: by reference when writing into a
    /// [`ReplyBuf`], else copied.
    pub fn bulk_shared(&mut self, data: &SharedBytes) {
        if self.refs.is_none() {
            return self.bulk(data);
        }
        self.header(b'$', data.len() as u64);
        if let Some(refs) = self.refs.as_deref_mut() {
            refs.push(self.out.len(), data);
        }
        self.out.extend_from_slice(b"\r\n");
    }
    /// Just the `$len\r\n` of a bulk string, for a caller that appends the
    /// payload and its trailing CRLF itself (or sends them by reference).
    pub fn bulk_header(&mut self, len: usize) {
        self.header(b'$', len as u64);
    }
    /// Bulk string of `n` in decimal (Valkey's `addReplyBulkLongLong`).
    pub fn bulk_from_int(&mut self, n: i64) {
        let mut tmp = [0u8; I64_MAX_LEN];
        let digits = num::fmt_i64(n, &mut tmp);
        self.header(b'$', digits.len() as u64);
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(b"\r\n");
    }
    /// One bulk string made of `parts` concatenated.
    pub fn bulk_parts(&mut self, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.out.reserve(len + 16);
        self.header(b'$', len as u64);
        for p in parts {
            self.out.extend_from_slice(p);
        }
        self.out.extend_from_slice(b"\r\n");
    }
    /// RESP3 `_`; RESP2 `$-1`.
    pub fn null(&mut self) {
        let s: &[u8] = if self.resp3() { b"_\r\n" } else { b"$-1\r\n" };
        self.out.extend_from_slice(s);
    }
    /// RESP3 `_`; RESP2 `*-1` (null array, e.g. an EXEC aborted by WATCH).
    pub fn null_array(&mut self) {
        let s: &[u8] = if self.resp3() { b"_\r\n" } else { b"*-1\r\n" };
        self.out.extend_from_slice(s);
    }
    pub fn array_len(&mut self, n: usize) {
        self.header(b'*', n as u64);
    }
    /// RESP3 `%n`; RESP2 `*2n`.
    pub fn map_len(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'%', n as u64);
        } else {
            self.header(b'*', 2 * n as u64);
        }
    }
    /// RESP3 `~n`; RESP2 `*n`.
    pub fn set_len(&mut self, n: usize) {
        let p = if self.resp3() { b'~' } else { b'*' };
        self.header(p, n as u64);
    }
    /// RESP3 `>n`; RESP2 `*n`.
    pub fn push_len(&mut self, n: usize) {
        let p = if self.resp3() { b'>' } else { b'*' };
        self.header(p, n as u64);
    }
    /// RESP3 `|n` attribute header (n key/value pairs, then the value it
    /// annotates). RESP2 has no attributes: the caller must not send them.
    pub fn attribute_len(&mut self, n: usize) {
        self.header(b'|', n as u64);
    }
    /// RESP3 `,` double; RESP2 bulk string. Formatted as Valkey does
    /// (`inf`, `-inf`, `nan`, shortest round-trip decimal, `1e+100` style exponents).
    pub fn double(&mut self, d: f64) {
        let mut tmp = [0u8; DOUBLE_MAX_LEN];
        let s = num::fmt_double(d, &mut tmp);
        if self.resp3() {
            self.out.push(b',');
            self.out.extend_from_slice(s);
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s);
        }
    }
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        let s: &[u8] = match (self.resp3(), b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.out.extend_from_slice(s);
    }
    /// RESP3 `=len\r\ntxt:...`; RESP2 bulk string. `format` is 3 bytes, e.g. `txt`.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if !self.resp3() {
            self.bulk(text);
            return;
        }
        let mut f = [b' '; 3];
        for (d, s) in f.iter_mut().zip(format.bytes()) {
            *d = s;
        }
        self.out.reserve(text.len() + 20);
        self.header(b'=', text.len() as u64 + 4);
        self.out.extend_from_slice(&f);
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }
    /// RESP3 `(`; RESP2 bulk string.
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3() {
            self.line(b'(', digits.as_bytes());
        } else {
            // CR/LF become spaces here too, as Valkey maps them before
            // either form (a script's `big_number` may hold anything).
            let d: Vec<u8> = digits
                .bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            self.bulk(&d);
        }
    }
    /// Bytes that are already a complete RESP frame (shared replies).
    pub fn raw(&mut self, frame: &[u8]) {
        self.out.extend_from_slice(frame);
    }
    /// An array of bulk strings.
    pub fn array_of_bulks<T: AsRef<[u8]>>(&mut self, items: &[T]) {
        self.array_len(items.len());
        for i in items {
            self.bulk(i.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(proto: Protocol, f: impl FnOnce(&mut ReplyWriter)) -> String {
        let mut out = Vec::new();
        f(&mut ReplyWriter::new(&mut out, proto));
        String::from_utf8(out).unwrap()
    }
    use Protocol::{Resp2, Resp3};

    #[test]
    fn scalars() {
        assert_eq!(w(Resp2, |r| r.ok()), "+OK\r\n");
        assert_eq!(w(Resp2, |r| r.simple("PONG")), "+PONG\r\n");
        assert_eq!(w(Resp2, |r| r.int(-42)), ":-42\r\n");
        assert_eq!(w(Resp2, |r| r.int(i64::MIN)), ":-9223372036854775808\r\n");
        assert_eq!(w(Resp2, |r| r.bulk(b"")), "$0\r\n\r\n");
        assert_eq!(w(Resp2, |r| r.bulk(b"hello")), "$5\r\nhello\r\n");
        assert_eq!(w(Resp2, |r| r.bulk_from_int(-12)), "$3\r\n-12\r\n");
        assert_eq!(
            w(Resp2, |r| r.bulk_parts(&[b"ab", b"", b"cde"])),
            "$5\r\nabcde\r\n"
        );
    }

    #[test]
    fn errors_are_one_line_with_one_dash() {
        assert_eq!(
            w(Resp2, |r| r.error("ERR syntax error")),
            "-ERR syntax error\r\n"
        );
        assert_eq!(w(Resp3, |r| r.error("-WRONGTYPE x")), "-WRONGTYPE x\r\n");
        assert_eq!(w(Resp2, |r| r.error("ERR a\r\nb")), "-ERR a  b\r\n");
        assert_eq!(w(Resp2, |r| r.simple("a\nb")), "+a b\r\n");
    }

    #[test]
    fn resp2_downgrades() {
        assert_eq!(w(Resp2, |r| r.null()), "$-1\r\n");
        assert_eq!(w(Resp2, |r| r.null_array()), "*-1\r\n");
        assert_eq!(w(Resp2, |r| r.map_len(3)), "*6\r\n");
        assert_eq!(w(Resp2, |r| r.set_len(2)), "*2\r\n");
        assert_eq!(w(Resp2, |r| r.push_len(3)), "*3\r\n");
        assert_eq!(w(Resp2, |r| r.boolean(true)), ":1\r\n");
        assert_eq!(w(Resp2, |r| r.boolean(false)), ":0\r\n");
        assert_eq!(w(Resp2, |r| r.double(1.5)), "$3\r\n1.5\r\n");
        assert_eq!(w(Resp2, |r| r.double(f64::INFINITY)), "$3\r\ninf\r\n");
        assert_eq!(w(Resp2, |r| r.verbatim("txt", b"hi")), "$2\r\nhi\r\n");
        assert_eq!(w(Resp2, |r| r.big_number("123")), "$3\r\n123\r\n");
        assert_eq!(w(Resp2, |r| r.big_number("1\r\n2")), "$4\r\n1  2\r\n");
        assert_eq!(w(Resp3, |r| r.big_number("1\r\n2")), "(1  2\r\n");
    }

    #[test]
    fn resp3_types() {
        assert_eq!(w(Resp3, |r| r.null()), "_\r\n");
        assert_eq!(w(Resp3, |r| r.null_array()), "_\r\n");
        assert_eq!(w(Resp3, |r| r.map_len(3)), "%3\r\n");
        assert_eq!(w(Resp3, |r| r.set_len(2)), "~2\r\n");
        assert_eq!(w(Resp3, |r| r.push_len(3)), ">3\r\n");
        assert_eq!(w(Resp3, |r| r.boolean(true)), "#t\r\n");
        assert_eq!(w(Resp3, |r| r.boolean(false)), "#f\r\n");
        assert_eq!(w(Resp3, |r| r.double(3.0)), ",3\r\n");
        assert_eq!(w(Resp3, |r| r.double(-0.0)), ",-0\r\n");
        assert_eq!(w(Resp3, |r| r.double(f64::NAN)), ",nan\r\n");
        assert_eq!(w(Resp3, |r| r.double(1e300)), ",1e+300\r\n");
        assert_eq!(w(Resp3, |r| r.verbatim("txt", b"hi")), "=6\r\ntxt:hi\r\n");
        assert_eq!(w(Resp3, |r| r.big_number("-123")), "(-123\r\n");
        assert_eq!(w(Resp3, |r| r.array_len(0)), "*0\r\n");
        assert_eq!(
            w(Resp3, |r| r.array_of_bulks(&["a", "bc"])),
            "*2\r\n$1\r\na\r\n$2\r\nbc\r\n"
        );
    }

    #[test]
    fn bulk_shared_by_reference_or_copied() {
        let v: SharedBytes = std::sync::Arc::from(&b"hello"[..]);
        let mut buf = ReplyBuf::new();
        {
            let mut w = ReplyWriter::for_buf(&mut buf, Resp3);
            w.bulk_shared(&v);
            w.int(1);
        }
        assert!(buf.has_refs());
        assert_eq!(buf.bytes, b"$5\r\n\r\n:1\r\n");
        assert_eq!(buf.to_vec(), b"$5\r\nhello\r\n:1\r\n");
        assert_eq!(buf.len(), 15);
        assert_eq!(w(Resp2, |r| r.bulk_shared(&v)), "$5\r\nhello\r\n");
    }
}
