//! The write-effects stream: every change the execution thread makes,
//! as RESP commands, in one append-only sequence of bytes that any number
//! of readers (the AOF thread; later the replication backlog and the IO
//! threads sending it) follow without copying it.
//!
//! This crate owns the memory of the stream and the one protocol between
//! its writer and its readers. It must not know what the bytes mean
//! (commands, databases, MULTI are the engine's) nor where they go (files
//! are `ringkv-persist`'s, sockets `ringkv-net`'s).
//!
//! # Design
//!
//! ```text
//!   Writer (execution thread)                 Readers (any thread)
//!   ─────────────────────────                 ────────────────────
//!   append ──► tail block [published | written, not yet visible | free]
//!   publish ─► tail.len = written (Release)   next(): bytes up to len
//!   tail full ─► new block, old.next = it     (Acquire), then follow next
//!
//!   Block 0 ──next──► Block 1 ──next──► Block 2 (tail)
//!     ▲ a slow reader's Arc keeps it         ▲ the writer's Arc
//! ```
//!
//! * A [`Block`] is [`BLOCK_SIZE`] bytes allocated once and never moved.
//!   Bytes below its published length never change again, so a reader may
//!   hand out `&[u8]` into them ([`Slice`], which holds the block's `Arc`)
//!   while the writer fills the rest: the two never touch the same bytes.
//! * Blocks are shared, not copied: a reader holds an `Arc` on the block
//!   it is in, and each block holds the next, so a block is freed when the
//!   last reader has moved past it. A reader that never moves keeps every
//!   later block alive: the consumer bounds how far behind it may fall.
//! * Publication is explicit ([`Writer::publish`]): the engine writes a
//!   whole execution unit (a command's effects, a MULTI ... EXEC) and makes
//!   it visible at once, so a reader never sees part of a unit unless the
//!   unit is larger than a block (then the block boundary is published as
//!   it fills, and the unit completes with the next publish).
//! * Offsets are the number of bytes since the stream began (Valkey's
//!   replication offset counts the same way); a block records the offset
//!   of its first byte.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Bytes per block: large enough that a block costs one allocation per
/// hundreds of small writes, small enough to be a cheap unit to share.
pub const BLOCK_SIZE: usize = 16 * 1024;

/// A fixed-size piece of the stream.
pub struct Block {
    /// Stream offset of `buf[0]`.
    start: u64,
    /// Bytes `buf[..len]` are published and immutable.
    len: AtomicUsize,
    /// Left uninitialized until the writer fills it: zeroing it would cost
    /// a `calloc`, which jemalloc serves for this size by giving the pages
    /// back to the kernel (madvise) and faulting them in again, ~5 µs per
    /// block (hundreds of small writes).
    buf: Box<[UnsafeCell<MaybeUninit<u8>>]>,
    /// The block after this one (an `Arc` turned into a raw pointer), set
    /// once by the writer after this block's final `len` is published.
    next: AtomicPtr<Block>,
}

// SAFETY: the buffer is written only by the one `Writer`, and only at
// indices at or above the published `len`; readers only read below the
// `len` they loaded with Acquire, which the writer stored with Release
// after writing those bytes. So no byte is ever read and written at once.
unsafe impl Sync for Block {}
// SAFETY: a block owns its buffer and its `next` Arc; nothing in it is
// tied to a thread.
unsafe impl Send for Block {}

impl Block {
    fn new(start: u64) -> Arc<Block> {
        let buf: Box<[UnsafeCell<MaybeUninit<u8>>]> = (0..BLOCK_SIZE)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        Arc::new(Block {
            start,
            len: AtomicUsize::new(0),
            buf,
            next: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// Stream offset of the block's first byte.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The published bytes.
    fn published(&self) -> &[u8] {
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: `buf[..len]` was fully written (so initialized) before
        // `len` was stored with Release (see `Writer::publish`) and is never
        // written again; `UnsafeCell<MaybeUninit<u8>>` has the layout of `u8`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr() as *const u8, len) }
    }

    fn has_next(&self) -> bool {
        !self.next.load(Ordering::Acquire).is_null()
    }

    fn next(&self) -> Option<Arc<Block>> {
        let p = self.next.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` in `Writer::grow` and this
        // block owns that reference until it is dropped (we hold `&self`),
        // so the count is at least one while we add ours.
        unsafe {
            Arc::increment_strong_count(p);
            Some(Arc::from_raw(p))
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // Free the chain iteratively: a long run of blocks nobody else
        // holds would otherwise drop recursively, one frame per block.
        let mut p = std::mem::replace(self.next.get_mut(), std::ptr::null_mut());
        while !p.is_null() {
            // SAFETY: `p` is the reference this block (or the previous one
            // in this loop) owned, from `Arc::into_raw`.
            let next = unsafe { Arc::from_raw(p) };
            match Arc::try_unwrap(next) {
                Ok(mut b) => p = std::mem::replace(b.next.get_mut(), std::ptr::null_mut()),
                Err(_) => break,
            }
        }
    }
}

/// The one writer of a stream (the execution thread).
pub struct Writer {
    tail: Arc<Block>,
    /// Bytes written into `tail` (published or not).
    fill: usize,
}

impl Writer {
    /// A stream whose first byte will have offset `start`.
    pub fn new(start: u64) -> Writer {
        Writer {
            tail: Block::new(start),
            fill: 0,
        }
    }

    /// Append bytes; they become visible at the next [`Writer::publish`]
    /// (or as their block fills up).
    #[inline]
    pub fn append(&mut self, bytes: &[u8]) {
        // The common case, inlined into the engine's encoder: the bytes fit
        // the tail (a command's pieces are appended one by one).
        if bytes.len() <= BLOCK_SIZE - self.fill {
            self.copy_in(bytes);
        } else {
            self.append_across(bytes);
        }
    }

    #[cold]
    fn append_across(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.fill == BLOCK_SIZE {
                self.grow();
            }
            let n = bytes.len().min(BLOCK_SIZE - self.fill);
            self.copy_in(&bytes[..n]);
            bytes = &bytes[n..];
        }
    }

    /// `bytes` (which fit) into the tail at `fill`.
    #[inline]
    fn copy_in(&mut self, bytes: &[u8]) {
        debug_assert!(bytes.len() <= BLOCK_SIZE - self.fill);
        let dst = UnsafeCell::raw_get(self.tail.buf[self.fill..].as_ptr()) as *mut u8;
        // SAFETY: `buf[fill..fill + len]` is in bounds (checked by every
        // caller) and above the published length, so no reader looks at it,
        // and only this writer writes; the source is a separate slice.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        self.fill += bytes.len();
    }

    /// Make everything appended so far visible to readers.
    pub fn publish(&mut self) {
        self.tail.len.store(self.fill, Ordering::Release);
    }

    /// The offset after the last byte appended (published or not).
    pub fn offset(&self) -> u64 {
        self.tail.start + self.fill as u64
    }

    /// The offset after the last byte published.
    pub fn published(&self) -> u64 {
        self.tail.start + self.tail.len.load(Ordering::Relaxed) as u64
    }

    /// Forget what was appended since the last publish (a unit that must
    /// not be emitted after all).
    pub fn discard_unpublished(&mut self) {
        self.fill = self.tail.len.load(Ordering::Relaxed);
    }

    /// A reader that starts at the published end: it sees what is
    /// published from now on.
    pub fn reader(&self) -> Reader {
        Reader {
            block: self.tail.clone(),
            pos: self.tail.len.load(Ordering::Relaxed),
        }
    }

    /// The tail is full: publish it whole and chain a new one.
    fn grow(&mut self) {
        self.publish();
        let next = Block::new(self.offset());
        let raw = Arc::into_raw(next.clone()) as *mut Block;
        // Release: a reader that sees `next` also sees the final `len`.
        self.tail.next.store(raw, Ordering::Release);
        self.tail = next;
        self.fill = 0;
    }
}

/// A position in the stream that moves forward over published bytes.
#[derive(Clone)]
pub struct Reader {
    block: Arc<Block>,
    pos: usize,
}

impl Reader {
    /// The offset of the next byte this reader will see.
    pub fn offset(&self) -> u64 {
        self.block.start + self.pos as u64
    }

    /// Move forward to `offset`, which must be published: a copy of a
    /// reader that holds history (the replication backlog) serves a
    /// reader that continues from a later point. False (and the reader
    /// moved as far as it could) when `offset` is past what is published.
    pub fn skip_to(&mut self, offset: u64) -> bool {
        loop {
            let start = self.block.start;
            let len = self.block.published().len() as u64;
            if offset < start + self.pos as u64 {
                return false;
            }
            if offset <= start + len {
                self.pos = (offset - start) as usize;
                return true;
            }
            let Some(next) = self.block.next() else {
                self.pos = len as usize;
                return false;
            };
            self.block = next;
            self.pos = 0;
        }
    }

    /// The next run of published bytes (at most to the end of a block),
    /// or `None` if the reader has seen everything published.
    pub fn next_slice(&mut self) -> Option<Slice> {
        loop {
            let len = self.block.published().len();
            if self.pos < len {
                let s = Slice {
                    block: self.block.clone(),
                    start: self.pos,
                    end: len,
                };
                self.pos = len;
                return Some(s);
            }
            let next = self.block.next()?;
            // The block is sealed once it has a successor; its last bytes
            // may have been published after `len` was read above.
            if self.pos < self.block.published().len() {
                continue;
            }
            self.block = next;
            self.pos = 0;
        }
    }

    /// Whether [`Reader::next_slice`] may find bytes (cheap enough for
    /// every loop iteration: it may say yes for a next block with none
    /// published yet).
    pub fn has_pending(&self) -> bool {
        self.pos < self.block.published().len() || self.block.has_next()
    }

    /// Published bytes not yet seen (walks the chain: for reports, not
    /// per request).
    pub fn pending(&self) -> u64 {
        let mut n = self.block.published().len() - self.pos;
        let mut b = self.block.next();
        while let Some(block) = b {
            n += block.published().len();
            b = block.next();
        }
        n as u64
    }
}

/// Published stream bytes, kept alive by a reference on their block.
#[derive(Clone)]
pub struct Slice {
    block: Arc<Block>,
    start: usize,
    end: usize,
}

impl Slice {
    /// Bytes of no stream, held the same way (a full sync's RDB buffer,
    /// kept alive while a zero-copy send of it is in flight). Offset 0.
    pub fn from_vec(bytes: Vec<u8>) -> Slice {
        let end = bytes.len();
        let raw = Box::into_raw(bytes.into_boxed_slice());
        // SAFETY: `UnsafeCell<MaybeUninit<u8>>` has the layout of `u8`, so
        // the boxed slice is reinterpreted with its length and allocation
        // intact.
        let buf = unsafe { Box::from_raw(raw as *mut [UnsafeCell<MaybeUninit<u8>>]) };
        let block = Arc::new(Block {
            start: 0,
            len: AtomicUsize::new(end),
            buf,
            next: AtomicPtr::new(std::ptr::null_mut()),
        });
        Slice {
            block,
            start: 0,
            end,
        }
    }

    /// Stream offset of the first byte.
    pub fn offset(&self) -> u64 {
        self.block.start + self.start as u64
    }
    /// The same bytes from `at` on (relative to this slice).
    pub fn split_from(&self, at: usize) -> Slice {
        Slice {
            block: self.block.clone(),
            start: (self.start + at).min(self.end),
            end: self.end,
        }
    }
    /// The first `n` bytes.
    pub fn truncate(&self, n: usize) -> Slice {
        Slice {
            block: self.block.clone(),
            start: self.start,
            end: (self.start + n).min(self.end),
        }
    }
}

impl std::ops::Deref for Slice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `start..end` lies below a published length of this block
        // (see `Reader::next_slice`), so the bytes are written (initialized)
        // and immutable.
        unsafe {
            std::slice::from_raw_parts(
                (self.block.buf.as_ptr() as *const u8).add(self.start),
                self.end - self.start,
            )
        }
    }
}

#[cfg(test)]
mod tests;
