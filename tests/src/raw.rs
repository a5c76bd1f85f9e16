//! A raw-socket RESP client: sends exact bytes and reads exact replies, so the
//! tests see the wire format (RESP3 types, error lines, connection closes) rather
//! than a client library's interpretation of it. Deliberately independent of the
//! server's own `resp` crate, so a shared bug cannot hide itself.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// One reply as it appeared on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP2 `$-1` / `*-1`.
    Nil,
    Array(Vec<Reply>),
    /// RESP3 `_`.
    Null,
    /// RESP3 `,` as its text (so formatting is compared exactly).
    Double(String),
    Bool(bool),
    BigNum(String),
    Verbatim(String, Vec<u8>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Push(Vec<Reply>),
}

impl Reply {
    pub fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }
    pub fn status(s: &str) -> Reply {
        Reply::Status(s.to_string())
    }
    pub fn err(s: &str) -> Reply {
        Reply::Error(s.to_string())
    }
    /// The bytes of a bulk/status/verbatim reply as text.
    pub fn text(&self) -> String {
        match self {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Status(s) | Reply::Error(s) | Reply::Double(s) | Reply::BigNum(s) => s.clone(),
            Reply::Int(i) => i.to_string(),
            other => panic!("not a text reply: {other:?}"),
        }
    }
}

#[derive(Debug)]
pub struct Raw {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// Encodes a command as a RESP multibulk request.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub fn encode_str(args: &[&str]) -> Vec<u8> {
    let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    encode(&v)
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: Vec::new(),
            pos: 0,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("raw send");
    }

    /// Sends a request and reads its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(&encode_str(args));
        self.read_reply()
    }

    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        self.send(&encode(args));
        self.read_reply()
    }

    fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let old = self.buf.len();
        self.buf.resize(old + 64 * 1024, 0);
        let r = self.stream.read(&mut self.buf[old..]);
        let n = *r.as_ref().unwrap_or(&0);
        self.buf.truncate(old + n);
        r
    }

    fn need(&mut self, n: usize) {
        while self.buf.len() - self.pos < n {
            match self.fill() {
                Ok(0) => panic!(
                    "connection closed while reading a reply (have {:?})",
                    String::from_utf8_lossy(&self.buf[self.pos..])
                ),
                Ok(_) => {}
                Err(e) => panic!("read error while waiting for a reply: {e}"),
            }
        }
    }

    /// One `\r\n`-terminated line, without the terminator.
    pub fn read_line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf[self.pos..].windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[self.pos..self.pos + i]).into_owned();
                self.pos += i + 2;
                return line;
            }
            let have = self.buf.len() - self.pos;
            self.need(have + 1);
        }
    }

    /// Reads exactly `n` bytes.
    pub fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        if self.buf.len() - self.pos >= n {
            let v = self.buf[self.pos..self.pos + n].to_vec();
            self.pos += n;
            return v;
        }
        let mut v = self.buf[self.pos..].to_vec();
        self.buf.clear();
        self.pos = 0;
        let have = v.len();
        v.resize(n, 0);
        self.stream
            .read_exact(&mut v[have..])
            .expect("read bulk body");
        v
    }

    pub fn read_reply(&mut self) -> Reply {
        let line = self.read_line();
        let (t, rest) = line.split_at(1.min(line.len()));
        let num = |s: &str| -> i64 {
            s.parse()
                .unwrap_or_else(|_| panic!("bad length/integer {line:?}"))
        };
        match t {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(num(rest)),
            "_" => Reply::Null,
            "," => Reply::Double(rest.to_string()),
            "(" => Reply::BigNum(rest.to_string()),
            "#" => Reply::Bool(rest == "t"),
            "$" | "=" => {
                let n = num(rest);
                if n < 0 {
                    return Reply::Nil;
                }
                let mut body = self.read_exact_bytes(n as usize + 2);
                assert_eq!(&body[n as usize..], b"\r\n", "bulk not terminated by CRLF");
                body.truncate(n as usize);
                if t == "=" {
                    let fmt = String::from_utf8_lossy(&body[..3]).into_owned();
                    Reply::Verbatim(fmt, body[4..].to_vec())
                } else {
                    Reply::Bulk(body)
                }
            }
            "*" | "~" | ">" => {
                let n = num(rest);
                if n < 0 {
                    return Reply::Nil;
                }
                let items = (0..n).map(|_| self.read_reply()).collect();
                match t {
                    "*" => Reply::Array(items),
                    "~" => Reply::Set(items),
                    _ => Reply::Push(items),
                }
            }
            "%" => {
                let n = num(rest);
                Reply::Map(
                    (0..n)
                        .map(|_| (self.read_reply(), self.read_reply()))
                        .collect(),
                )
            }
            _ => panic!("unknown reply type in line {line:?}"),
        }
    }

    /// True when the server closed the connection (EOF or reset) within the
    /// timeout, after any bytes already buffered. Bytes that arrive instead of
    /// EOF make it fail with what they were.
    pub fn closed_within(&mut self, timeout: Duration) -> Result<(), String> {
        if self.pos < self.buf.len() {
            return Err(format!(
                "unexpected data instead of close: {:?}",
                String::from_utf8_lossy(&self.buf[self.pos..])
            ));
        }
        let deadline = Instant::now() + timeout;
        self.stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let r = loop {
            let mut b = [0u8; 4096];
            match self.stream.read(&mut b) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    break Err(format!(
                        "unexpected data instead of close: {:?}",
                        String::from_utf8_lossy(&b[..n])
                    ));
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break Ok(()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if Instant::now() > deadline {
                        break Err(format!("connection still open after {timeout:?}"));
                    }
                }
                Err(e) => break Err(format!("read error: {e}")),
            }
        };
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        r
    }

    /// Asserts the server closes the connection (bounded wait).
    pub fn expect_closed(&mut self) {
        if let Err(e) = self.closed_within(Duration::from_secs(10)) {
            panic!("{e}");
        }
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
