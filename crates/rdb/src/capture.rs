//! The save side's two halves: [`Capture`] (execution thread: cheap copies
//! as tokens) and [`Encoder`] (writer thread: tokens to RDB bytes + CRC).

use store::Entry;

/// Which access opcode to write before each key, as Valkey does by
/// `maxmemory-policy`: IDLE (seconds) under an LRU policy, FREQ under LFU,
/// neither otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessWrite {
    None,
    Lru,
    Lfu { decay_time: u32 },
}

/// Tokens for part of an RDB stream.
#[derive(Default, Debug, Clone)]
pub struct Capture {
    buf: Vec<u8>,
}

impl Capture {
    pub fn new() -> Capture {
        Capture::default()
    }
    /// Bytes held (for chunking).
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn clear(&mut self) {
        self.buf.clear()
    }
    /// AUX field.
    pub fn aux(&mut self, key: &[u8], value: &[u8]) {
        let _ = (key, value);
        todo!("helper W")
    }
    pub fn select_db(&mut self, db: u64) {
        let _ = db;
        todo!("helper W")
    }
    pub fn resize_db(&mut self, size: u64, expires: u64) {
        let _ = (size, expires);
        todo!("helper W")
    }
    /// One key as Valkey's `rdbSaveKeyValuePair`: EXPIRETIME_MS if it has
    /// one, IDLE/FREQ per `access`, the type byte, the key, the value in
    /// the encoding Valkey would write for its current encoding.
    pub fn key(&mut self, e: &Entry, now_ms: i64, access: AccessWrite) {
        let _ = (e, now_ms, access);
        todo!("helper W")
    }
}

/// Turns captures into RDB bytes, keeping the running CRC64.
#[derive(Debug)]
pub struct Encoder {
    crc: u64,
    compress: bool,
    checksum: bool,
}

impl Encoder {
    /// `compress`: `rdbcompression` (LZF for strings over 20 bytes);
    /// `checksum`: `rdbchecksum` (without it the trailer is 0).
    pub fn new(compress: bool, checksum: bool) -> Encoder {
        Encoder {
            crc: 0,
            compress,
            checksum,
        }
    }
    /// `REDIS0011`.
    pub fn header(&mut self, out: &mut Vec<u8>) {
        let _ = (out, self.crc, self.compress, self.checksum);
        todo!("helper W")
    }
    /// Append the bytes for `cap` to `out`.
    pub fn feed(&mut self, cap: &Capture, out: &mut Vec<u8>) {
        let _ = (cap, out);
        todo!("helper W")
    }
    /// EOF opcode and the checksum.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("helper W")
    }
}
