//! The stream half of a client: bytes in, parsed argument spans, reply bytes
//! out. Socket-free, so both event loops share it and tests drive it with
//! plain byte slices.
//!
//! Life of the input side: bytes are appended to `rbuf`; [`Connection::parse`]
//! turns every complete command after `parsed` into spans (relative to
//! `rbuf`); the driver hands those spans to the engine as one `Job`; then
//! [`Connection::after_batch`] drops the executed bytes, keeping any partial
//! command at the front of `rbuf`.
//!
//! The output side is double-buffered: the engine appends to `out` while
//! `sending` is what the socket layer is writing (io_uring may read it at any
//! moment until the send completes, so it must not move or change). When
//! `sending` is drained the two swap; no reply byte is copied.
//!
//! A reply buffer may hold large values by reference ([`ReplyBuf`]): such a
//! buffer is sent as an iovec list (bytes, value, bytes, ...), and `sent`
//! counts bytes across all its segments, so a partial send resumes inside
//! whichever segment it stopped in. Once it is all sent its references are
//! moved to `spent`, for the driver to hand back to the thread that
//! allocated the values.

use crate::handoff::Request;
use engine::{ArgvRef, ClientId, CommandHint, CommandsView, Job, NameCache};
use resp::{Limits, Parsed, ProtocolError, ReplyBuf, Resume, SharedBytes, Span};
use std::os::fd::RawFd;

/// Most iovecs one sendmsg takes (the kernel's UIO_MAXIOV); what does not
/// fit goes with the next send.
const MAX_IOV: usize = 1024;

/// Point `iov` at `buf`'s wire content from byte `from` on, at most
/// [`MAX_IOV`] segments, for a sendmsg of a reply that holds values by
/// reference. Returns how many bytes the iovecs cover. They borrow `buf`'s
/// memory: it must stay unchanged until the send is done.
pub(crate) fn fill_iovecs(buf: &ReplyBuf, from: usize, iov: &mut Vec<libc::iovec>) -> usize {
    iov.clear();
    let mut covered = 0;
    buf.segments(from, |seg| {
        iov.push(libc::iovec {
            iov_base: seg.as_ptr() as *mut libc::c_void,
            iov_len: seg.len(),
        });
        covered += seg.len();
        iov.len() < MAX_IOV
    });
    covered
}

/// How reads are sized when the parser gives no hint.
pub(crate) const READ_CHUNK: usize = 16 * 1024;
/// A buffer that grew past this is given back as soon as it is emptied,
/// so one big request or reply does not pin memory for the connection's
/// life. Smaller ones are kept while the connection is busy, so its next
/// request of the same size allocates nothing, and freed once it has been
/// idle for a sweep interval ([`Connection::release_if_idle`]): idle
/// connections hold no buffers (Valkey 8 reads into one per thread, frees
/// a command's argv after it runs and shrinks idle clients' buffers from
/// its cron). Freeing them after every request cost a client taking 51 KB
/// LRANGE replies 9–12% more server CPU per request under epoll
/// (docs/BENCHMARKS.md §35.1).
const SHRINK_ABOVE: usize = 256 * 1024;

/// An emptied vector that grew past [`SHRINK_ABOVE`] bytes gives its
/// memory back.
pub(crate) fn release_if_grown<T>(v: &mut Vec<T>) {
    release_if_above(v, SHRINK_ABOVE);
}

/// An emptied vector whose capacity is more than `bytes` gives its memory
/// back.
fn release_if_above<T>(v: &mut Vec<T>, bytes: usize) {
    if v.is_empty() && v.capacity() * std::mem::size_of::<T>() > bytes {
        *v = Vec::new();
    }
}

/// [`release_if_above`] for a reply buffer (an empty one is all sent, so
/// no send reads it and `sent` is already 0).
fn release_reply_if_above(buf: &mut ReplyBuf, bytes: usize) {
    if buf.is_empty() && buf.capacity() > bytes {
        *buf = ReplyBuf::new();
    }
}

/// Why and how a connection is going away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    Open,
    /// Send what is queued, then close (QUIT, protocol error, peer EOF).
    AfterFlush,
    /// Close without waiting for output (CLIENT KILL, write error, limits).
    Now,
}

impl Closing {
    /// How the engine's `Close { flush }` event closes a connection.
    pub(crate) fn for_event(flush: bool) -> Closing {
        if flush {
            Closing::AfterFlush
        } else {
            Closing::Now
        }
    }
}

pub(crate) struct Connection {
    pub(crate) fd: RawFd,
    pub(crate) client: ClientId,
    /// Generation of the slot this connection occupies, so completions for
    /// an earlier occupant are recognized.
    pub(crate) generation: u32,
    rbuf: Vec<u8>,
    /// `rbuf[..parsed]` has been parsed into `args`/`argc`.
    parsed: usize,
    args: Vec<Span>,
    argc: Vec<u32>,
    /// Per parsed command, its table entry and key hash, worked out here
    /// while its bytes are hot (see [`CommandHint`]).
    hints: Vec<CommandHint>,
    /// The command name this connection sent last, looked up once for a
    /// pipeline of the same command.
    names: NameCache,
    /// Where each parsed command ends in `rbuf`, so a client that blocks
    /// mid-batch keeps the commands after it.
    ends: Vec<usize>,
    /// The engine blocked this client (BLPOP ...): parse nothing until it
    /// is unblocked.
    pub(crate) blocked: bool,
    resume: Resume,
    /// Skip parsing until `rbuf` holds this many bytes (a large bulk string
    /// is arriving).
    need: usize,
    /// Grow `rbuf` towards `need` at most up to this size (the client's
    /// query-buffer limit): `need` is only what the client claims.
    reserve_cap: usize,
    out: ReplyBuf,
    sending: ReplyBuf,
    /// Bytes of `sending` already sent (its referenced values counted).
    sent: usize,
    /// References of fully sent buffers, not yet handed back.
    spent: Vec<SharedBytes>,
    /// A protocol error found after the commands now parsed; it is replied
    /// to once they have run.
    error: Option<ProtocolError>,
    /// What the log shows of the input the error was found in.
    error_sample: engine::QuerySample,
    /// No further input is parsed (QUIT, protocol error, closing).
    input_closed: bool,
    /// The peer sent FIN (or the read side failed).
    pub(crate) peer_eof: bool,
    pub(crate) closing: Closing,
    /// Queued on the driver's dirty list (dedup).
    pub(crate) dirty: bool,
    /// Queued on the driver's flush list (dedup).
    pub(crate) flush_queued: bool,
    /// Queued on the driver's closing list (dedup).
    pub(crate) close_queued: bool,
    /// Threaded mode: a detached request is with the execution thread;
    /// nothing more is sent for this connection until its replies are back.
    in_flight: bool,
    /// Threaded mode: the parser limits and query-buffer cap the execution
    /// thread last gave for this client (they change with AUTH and CONFIG SET).
    pub(crate) limits: Option<(Limits, usize)>,
    /// The `client-output-buffer-limit` class the engine last gave for
    /// this client (it changes with SUBSCRIBE and UNSUBSCRIBE).
    pub(crate) out_class: engine::OutputClass,
    /// The client speaks RESP3 (as of its last request; for replies
    /// written here while a script is busy).
    pub(crate) resp3: bool,
    /// The client is inside MULTI (as of its last request).
    pub(crate) in_multi: bool,
    /// Where pending output bytes are published for CLIENT LIST `omem`.
    pub(crate) meter: Option<engine::ClientMeter>,
    /// Since when pending output has been over the soft limit.
    soft_since: Option<std::time::Instant>,
    /// Threaded mode: bytes read since the last request (CLIENT LIST
    /// `tot-net-in` is kept by the execution thread).
    pub(crate) unreported_in: u64,
    /// Threaded mode: the execution thread asked for this connection to be
    /// handed to another IO thread. Nothing more is parsed or sent here;
    /// once no request and no operation is in flight the backend lets go
    /// of the socket and the whole Connection travels on.
    pub(crate) moving: bool,
    /// With `moving`: the socket leaves the event loop altogether (a
    /// replica's feed thread takes it) instead of going to another IO
    /// thread.
    pub(crate) detaching: bool,
    // Backend state; the driver never looks at these.
    /// io_uring: a multishot recv is armed.
    pub(crate) recv_armed: bool,
    /// io_uring: a send reading `sending` is in the kernel's hands.
    /// epoll: EPOLLOUT is registered.
    pub(crate) send_busy: bool,
    /// `shutdown(2)` was called (io_uring: to end pending operations).
    pub(crate) shut: bool,
    /// epoll: the events currently registered.
    pub(crate) interest: u32,
    /// Input was taken or output sent since the last
    /// [`Connection::release_if_idle`].
    active: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("fd", &self.fd)
            .field("client", &self.client)
            .field("unparsed", &self.unparsed_len())
            .field("blocked", &self.blocked)
            .finish_non_exhaustive()
    }
}

/// What [`Connection::parse`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParseResult {
    /// Commands parsed so far this round (including earlier calls).
    pub commands: usize,
    /// Parsing stopped at the command cap with bytes left to look at.
    pub more: bool,
}

impl Connection {
    /// `meter`: where the client's buffered bytes are published (CLIENT
    /// LIST `omem`, `qbuf`), from [`engine::Engine::client_meter`].
    pub(crate) fn new(
        fd: RawFd,
        client: ClientId,
        generation: u32,
        meter: Option<engine::ClientMeter>,
    ) -> Connection {
        Connection {
            fd,
            client,
            generation,
            rbuf: Vec::new(),
            parsed: 0,
            args: Vec::new(),
            argc: Vec::new(),
            hints: Vec::new(),
            names: NameCache::default(),
            ends: Vec::new(),
            blocked: false,
            resume: Resume::default(),
            need: 0,
            reserve_cap: 0,
            out: ReplyBuf::new(),
            sending: ReplyBuf::new(),
            sent: 0,
            spent: Vec::new(),
            error: None,
            error_sample: Default::default(),
            input_closed: false,
            peer_eof: false,
            closing: Closing::Open,
            dirty: false,
            in_flight: false,
            limits: None,
            out_class: engine::OutputClass::Normal,
            resp3: false,
            in_multi: false,
            meter,
            soft_since: None,
            unreported_in: 0,
            moving: false,
            detaching: false,
            flush_queued: false,
            close_queued: false,
            recv_armed: false,
            send_busy: false,
            shut: false,
            active: false,
            interest: 0,
        }
    }

    /// Input is being ignored (the connection is on its way out).
    pub(crate) fn input_closed(&self) -> bool {
        self.input_closed || self.closing != Closing::Open
    }

    /// Append received bytes. Ignored once input is closed.
    pub(crate) fn push_input(&mut self, data: &[u8]) {
        if self.input_closed() {
            return;
        }
        let target = self.need.min(self.reserve_cap);
        if target > self.rbuf.len() {
            // A big bulk string is coming: size the buffer once instead of
            // doubling (and copying) it many times.
            self.rbuf.reserve(target - self.rbuf.len());
        }
        self.rbuf.extend_from_slice(data);
    }

    /// Whether input waits in the read buffer (a partial command, or
    /// commands not run yet), or a large argument is announced: a backend
    /// then reads straight into the buffer, and otherwise into a buffer of
    /// its own whose bytes it hands over with [`Connection::push_input`].
    pub(crate) fn has_pending_input(&self) -> bool {
        !self.rbuf.is_empty() || self.need > 0
    }

    /// The read buffer, for a backend that reads straight into its spare
    /// capacity; reserve with [`Connection::reserve_read`] first.
    pub(crate) fn read_buf(&mut self) -> &mut Vec<u8> {
        &mut self.rbuf
    }

    /// Make room for the next read and say how much to ask for: the rest of
    /// a large argument when the parser announced one (up to `cap`), else a
    /// regular chunk.
    pub(crate) fn reserve_read(&mut self, cap: usize) -> usize {
        let target = self.need.min(self.reserve_cap);
        let want = if target > self.rbuf.len() {
            (target - self.rbuf.len()).clamp(READ_CHUNK, cap.max(READ_CHUNK))
        } else {
            READ_CHUNK
        };
        self.rbuf.reserve(want);
        self.rbuf.capacity() - self.rbuf.len()
    }

    /// Bytes received but not yet parsed into a complete command (what
    /// `client-query-buffer-limit` is checked against).
    pub(crate) fn unparsed_len(&self) -> usize {
        self.rbuf.len() - self.parsed
    }

    /// The input a protocol error was found in, for the log (once).
    pub(crate) fn take_error_sample(&mut self) -> engine::QuerySample {
        std::mem::take(&mut self.error_sample)
    }

    /// Parse complete commands after the ones already parsed, at most
    /// `max_commands` in total this round. Stops at the first protocol error,
    /// which is kept for [`Connection::after_batch`]. `qbuf_limit` caps how
    /// far the read buffer is pre-grown for an announced large argument.
    pub(crate) fn parse(
        &mut self,
        limits: &Limits,
        max_commands: usize,
        qbuf_limit: usize,
    ) -> ParseResult {
        // A little over the limit, so reaching the limit is detected.
        self.reserve_cap = qbuf_limit.saturating_add(READ_CHUNK);
        let mut result = ParseResult {
            commands: self.argc.len(),
            more: false,
        };
        if self.input_closed()
            || self.blocked
            || self.error.is_some()
            || self.rbuf.len() < self.need
        {
            return result;
        }
        self.need = 0;
        while self.parsed < self.rbuf.len() {
            if result.commands >= max_commands {
                result.more = true;
                break;
            }
            let base = self.args.len();
            let at = self.parsed;
            match resp::parse_command_resume(
                &mut self.rbuf[at..],
                limits,
                &mut self.args,
                &mut self.resume,
            ) {
                Ok(Parsed::Command { consumed, argc }) => {
                    if argc > 0 {
                        for span in &mut self.args[base..] {
                            span.start += at;
                        }
                        self.argc.push(argc as u32);
                        self.hints.push(CommandHint::of_cached(
                            ArgvRef {
                                data: &self.rbuf,
                                spans: &self.args[base..],
                            },
                            &mut self.names,
                        ));
                        self.ends.push(at + consumed);
                        result.commands += 1;
                    }
                    self.parsed += consumed;
                }
                Ok(Parsed::Incomplete { need }) => {
                    if let Some(n) = need {
                        self.need = at + n;
                    }
                    break;
                }
                Err(e) => {
                    self.error = Some(e);
                    self.error_sample = engine::QuerySample::of(&self.rbuf[at..]);
                    self.input_closed = true;
                    break;
                }
            }
        }
        result
    }

    pub(crate) fn has_commands(&self) -> bool {
        !self.argc.is_empty()
    }

    /// One of the parsed commands may run a Lua script (which may turn
    /// busy).
    pub(crate) fn may_run_script(&self) -> bool {
        self.hints.iter().any(CommandHint::may_run_script)
    }

    /// A protocol error is waiting to be answered.
    pub(crate) fn has_error(&self) -> bool {
        self.error.is_some()
    }

    /// This connection's share of the batch.
    pub(crate) fn job(&mut self) -> Job<'_> {
        Job::new(
            self.client,
            CommandsView {
                data: &self.rbuf,
                args: &self.args,
                argc: &self.argc,
                hints: &self.hints,
            },
            &mut self.out,
        )
    }

    /// The parsed commands have run: drop their bytes, and settle what the
    /// engine or the parser decided. Returns the protocol error, if one is
    /// to be reported (its reply is already queued).
    pub(crate) fn after_batch(
        &mut self,
        close_after_reply: bool,
        blocked_after: Option<usize>,
    ) -> Option<ProtocolError> {
        if let Some(executed) = blocked_after {
            // Keep the commands after the blocking one, unparsed: they run
            // once the client is unblocked (and a protocol error after them
            // is found again then).
            self.parsed = executed
                .checked_sub(1)
                .and_then(|i| self.ends.get(i).copied())
                .unwrap_or(0);
            self.block();
        }
        self.args.clear();
        self.argc.clear();
        self.hints.clear();
        self.ends.clear();
        if self.parsed > 0 {
            self.rbuf.drain(..self.parsed);
            self.need = self.need.saturating_sub(self.parsed);
            self.parsed = 0;
        }
        self.settle(close_after_reply)
    }

    /// While a script is busy (see `engine::busy`): answer the parsed
    /// commands from `busy`, in order, up to the first that must wait
    /// for the script's end; that one and everything after it go back to
    /// being unparsed input (a protocol error after them is found again
    /// when they are parsed after the script). Returns true when input is
    /// left waiting.
    pub(crate) fn answer_busy(&mut self, busy: &engine::busy::BusyState) -> bool {
        let mut answered = 0;
        let mut quit = false;
        let mut at = 0;
        for &n in &self.argc {
            let argv = ArgvRef {
                data: &self.rbuf,
                spans: &self.args[at..at + n as usize],
            };
            at += n as usize;
            let who = engine::busy::BusyClient {
                id: self.client,
                resp3: self.resp3,
                in_multi: self.in_multi,
                subscribed: self.out_class == engine::OutputClass::Pubsub,
                authenticated: self.limits.is_some_and(|(l, _)| !l.unauthenticated),
            };
            match busy.answer(who, argv, &mut self.out) {
                engine::busy::BusyAnswer::Deferred => break,
                engine::busy::BusyAnswer::Replied => {}
                engine::busy::BusyAnswer::Authenticated => {
                    // The stricter pre-AUTH limits end here, as AUTH's
                    // reply from the engine would end them.
                    if let Some((l, _)) = &mut self.limits {
                        l.unauthenticated = false;
                    }
                }
                engine::busy::BusyAnswer::Multi(entered) => self.in_multi = entered,
                engine::busy::BusyAnswer::Close => {
                    quit = true;
                    break;
                }
            }
            answered += 1;
        }
        let waiting = answered < self.argc.len() || self.error.is_some();
        let done = answered
            .checked_sub(1)
            .and_then(|i| self.ends.get(i).copied())
            .unwrap_or(0);
        self.rbuf.drain(..done);
        self.parsed = 0;
        self.need = 0;
        self.resume.reset();
        self.args.clear();
        self.argc.clear();
        self.hints.clear();
        self.ends.clear();
        if self.error.take().is_some() {
            // Set by the parse that found it, not by a close.
            self.input_closed = false;
        }
        if quit {
            // As after the engine's QUIT: what followed it never runs.
            self.close_input();
            self.close(Closing::AfterFlush);
            return false;
        }
        waiting
    }

    fn block(&mut self) {
        self.blocked = true;
        self.resume.reset();
        self.error = None;
        self.input_closed = false;
    }

    /// Move the parsed commands out, for an execution thread: their bytes
    /// (the front of the read buffer, swapped out whole so nothing is
    /// copied but a partial command behind them), spans and ends, into
    /// `spare`, whose buffers (emptied) become the ones read into next.
    pub(crate) fn detach(&mut self, spare: &mut Request) {
        spare.data.clear();
        spare.data.extend_from_slice(&self.rbuf[self.parsed..]);
        std::mem::swap(&mut spare.data, &mut self.rbuf);
        spare.data.truncate(self.parsed);
        self.need = self.need.saturating_sub(self.parsed);
        self.parsed = 0;
        std::mem::swap(&mut spare.args, &mut self.args);
        std::mem::swap(&mut spare.argc, &mut self.argc);
        std::mem::swap(&mut spare.hints, &mut self.hints);
        std::mem::swap(&mut spare.ends, &mut self.ends);
        self.args.clear();
        self.argc.clear();
        self.hints.clear();
        self.ends.clear();
        self.in_flight = true;
    }

    /// The replies to a detached request came back: queue them, keep the
    /// commands after a blocking one (they go back in front of whatever
    /// arrived meanwhile), and settle as [`Connection::after_batch`] does.
    pub(crate) fn reattach(
        &mut self,
        req: &Request,
        out: &mut ReplyBuf,
        close_after_reply: bool,
        blocked_after: Option<usize>,
    ) -> Option<ProtocolError> {
        self.in_flight = false;
        self.append_output(out);
        if let Some(executed) = blocked_after
            && !self.input_closed()
        {
            let keep_from = executed
                .checked_sub(1)
                .and_then(|i| req.ends.get(i).copied())
                .unwrap_or(0);
            let kept = &req.data[keep_from..];
            self.rbuf.splice(0..0, kept.iter().copied());
            // Parsing starts over from the front once unblocked.
            self.need = 0;
            self.block();
        }
        self.settle(close_after_reply)
    }

    /// A detached request came back unrun: its commands are input again,
    /// in front of whatever arrived meanwhile, parsed afresh.
    pub(crate) fn unrun(&mut self, req: &Request, bytes_in: u64) {
        self.in_flight = false;
        self.rbuf.splice(0..0, req.data.iter().copied());
        self.parsed = 0;
        self.need = 0;
        self.resume.reset();
        self.unreported_in += bytes_in;
    }

    /// Settle into a new slot of another IO thread's loop: the socket's
    /// operations and queue marks belonged to the loop it left.
    pub(crate) fn arrive(&mut self, generation: u32) {
        self.generation = generation;
        self.moving = false;
        self.dirty = false;
        self.flush_queued = false;
        self.close_queued = false;
        self.recv_armed = false;
        self.send_busy = false;
        self.shut = false;
        self.interest = 0;
    }

    /// A request of this connection is with the execution thread.
    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight
    }

    fn settle(&mut self, close_after_reply: bool) -> Option<ProtocolError> {
        self.active = true;
        if self.need == 0 {
            release_if_grown(&mut self.rbuf);
            if self.rbuf.capacity() > SHRINK_ABOVE && self.rbuf.len() < READ_CHUNK {
                self.rbuf.shrink_to(READ_CHUNK);
            }
        }
        self.release_spans_above(SHRINK_ABOVE);
        if close_after_reply {
            // The engine stopped at the closing command; whatever followed
            // it is never run, not even a protocol error in it.
            self.error = None;
            self.close_input();
            self.close(Closing::AfterFlush);
            return None;
        }
        let err = self.error.take()?;
        self.out.extend_from_slice(&err.to_resp());
        self.close_input();
        self.close(Closing::AfterFlush);
        Some(err)
    }

    /// Stop taking input and free the read side's memory.
    pub(crate) fn close_input(&mut self) {
        self.input_closed = true;
        self.rbuf = Vec::new();
        self.args = Vec::new();
        self.argc = Vec::new();
        self.hints = Vec::new();
        self.ends = Vec::new();
        self.resume.reset();
        self.parsed = 0;
        self.need = 0;
    }

    /// Escalate the closing state (never downgrade `Now` to `AfterFlush`).
    pub(crate) fn close(&mut self, how: Closing) {
        if how == Closing::Now || self.closing == Closing::Open {
            self.closing = how;
        }
    }

    /// Append output the engine produced outside this client's batch
    /// (pub/sub messages, the reply that unblocks it).
    pub(crate) fn push_output(&mut self, bytes: &[u8]) {
        if self.closing != Closing::Now {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Queue a reply buffer: taken over whole (`out` gets the old, empty
    /// one back) when nothing is queued. Left in `out`, references and
    /// all, when the connection is closing now.
    pub(crate) fn append_output(&mut self, out: &mut ReplyBuf) {
        if self.closing == Closing::Now {
            return;
        }
        self.out.append(out);
    }

    /// [`Connection::push_output`] for an owned buffer: taken over whole
    /// (`bytes` gets the old, empty one back) when nothing is queued.
    pub(crate) fn append_bytes(&mut self, bytes: &mut Vec<u8>) {
        if self.closing == Closing::Now {
            return;
        }
        if self.out.is_empty() {
            std::mem::swap(&mut self.out.bytes, bytes);
        } else {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Closing after a flush, and something is still to go out (queued
    /// replies, or a request with the execution thread whose replies are
    /// wanted first).
    pub(crate) fn must_wait(&self) -> bool {
        self.closing == Closing::AfterFlush && (self.has_output() || self.in_flight)
    }

    /// Output is queued or in flight.
    pub(crate) fn has_output(&self) -> bool {
        self.sent < self.sending.len() || !self.out.is_empty()
    }

    /// What to send next: the sending buffer and how much of it has gone
    /// out. When the previous buffer is done, the engine's becomes the
    /// sending one. Its memory (bytes and referenced values) stays valid
    /// and unchanged until [`Connection::advance`] consumes it: the engine
    /// only ever appends to `out`.
    pub(crate) fn pending(&mut self) -> (&ReplyBuf, usize) {
        if self.sent == self.sending.len() {
            self.sending.take_refs(&mut self.spent);
            self.sending.clear();
            self.sent = 0;
            std::mem::swap(&mut self.out, &mut self.sending);
        }
        (&self.sending, self.sent)
    }

    /// The next bytes to send as one slice, when the sending buffer holds
    /// no references (the common case; else use [`Connection::pending`]).
    #[cfg(test)]
    pub(crate) fn pending_send(&mut self) -> &[u8] {
        let (buf, from) = self.pending();
        assert!(!buf.has_refs());
        &buf.bytes[from..]
    }

    /// `n` bytes of [`Connection::pending`] went out.
    pub(crate) fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.sending.len());
        if self.sent == self.sending.len() {
            self.sent = 0;
            self.sending.take_refs(&mut self.spent);
            self.sending.clear();
            release_reply_if_above(&mut self.sending, SHRINK_ABOVE);
        }
        self.active = true;
        self.publish_output_len();
    }

    /// The spans of parsed commands: a pipeline of 500 commands leaves
    /// 26 KB of them behind, a command of 100,000 arguments 1.6 MB.
    fn release_spans_above(&mut self, bytes: usize) {
        release_if_above(&mut self.args, bytes);
        release_if_above(&mut self.argc, bytes);
        release_if_above(&mut self.hints, bytes);
        release_if_above(&mut self.ends, bytes);
    }

    /// Called by the driver's sweep about once a second: a connection
    /// that took no input and sent nothing since the last call frees
    /// every buffer it kept emptied. One with a request at the execution
    /// thread, moving, or with a send in the kernel's hands is left alone
    /// (its buffers are not this thread's to drop now).
    pub(crate) fn release_if_idle(&mut self) {
        if std::mem::take(&mut self.active) || self.in_flight || self.moving || self.send_busy {
            return;
        }
        if self.need == 0 {
            release_if_above(&mut self.rbuf, 0);
        }
        self.release_spans_above(0);
        release_reply_if_above(&mut self.sending, 0);
        release_reply_if_above(&mut self.out, 0);
        self.publish_input_len();
    }

    /// [`Connection::pending`] for a send about to be issued, or `None`
    /// with nothing to send. From the moment the send is issued the client
    /// may read those bytes and ask CLIENT LIST (through another IO
    /// thread) before the send returns, so the meter stops counting them
    /// here, first. What a short send leaves is counted again by
    /// [`Connection::advance`]; a send that fails or is cancelled calls
    /// [`Connection::publish_output_len`].
    pub(crate) fn begin_send(&mut self) -> Option<(&ReplyBuf, usize)> {
        let (buf, from) = self.pending();
        if buf.len() == from {
            return None;
        }
        if let Some(m) = &self.meter {
            m.set_output(self.out.len());
        }
        // What `pending` returned, borrowed again after the meter's store.
        Some((&self.sending, self.sent))
    }

    /// Keep CLIENT LIST `omem` current (one store to a line only this
    /// thread writes).
    pub(crate) fn publish_output_len(&self) {
        if let Some(m) = &self.meter {
            m.set_output(self.output_len());
        }
    }

    /// Keep CLIENT LIST `qbuf`/`qbuf-free` current: input not parsed yet
    /// (a partial command, or commands waiting for their turn) and the
    /// read buffer's room.
    pub(crate) fn publish_input_len(&self) {
        if let Some(m) = &self.meter {
            m.set_input(self.unparsed_len(), self.rbuf.capacity() - self.rbuf.len());
        }
    }

    /// Bytes queued or being sent, referenced values counted as copied
    /// (what `client-output-buffer-limit` is checked against, less what
    /// fits Valkey's reply buffer: [`engine::output::OutputShape`]).
    pub(crate) fn output_len(&self) -> usize {
        self.out.len() + self.sending.len() - self.sent
    }

    /// Pending output is over the hard limit of the client's class, or
    /// has been over the soft limit for more than its seconds (Valkey's
    /// `checkClientOutputBufferLimits`, with the limits in force now).
    /// Called whenever output is added, so it also publishes the new
    /// pending length.
    pub(crate) fn over_output_limit(&mut self, limits: &engine::OutputLimits) -> bool {
        self.publish_output_len();
        let l = limits.get(self.out_class);
        if !l.is_set() {
            self.soft_since = None;
            return false;
        }
        // Valkey's `omem`: output that fits its reply buffer is not held
        // against the limit.
        let len = engine::output::OutputShape::of(self.output_len() as u64).list;
        if l.hard > 0 && len > l.hard {
            return true;
        }
        if l.soft > 0 && len > l.soft {
            let now = std::time::Instant::now();
            let since = *self.soft_since.get_or_insert(now);
            return now.duration_since(since) > std::time::Duration::from_secs(l.soft_seconds);
        }
        self.soft_since = None;
        false
    }

    /// Move out the references whose bytes have all been sent.
    pub(crate) fn take_spent(&mut self, into: &mut Vec<SharedBytes>) {
        into.append(&mut self.spent);
    }

    /// Move out every reference the connection holds, sent or not (it is
    /// going away, or its output is dropped). Not while a send is in the
    /// kernel's hands.
    /// Leaving the event loop (a replica's PSYNC): the output not sent yet
    /// and the input not parsed yet, as bytes, for whoever owns the
    /// socket next.
    pub(crate) fn take_leftovers(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut unsent = Vec::new();
        self.sending.segments(self.sent, |b| {
            unsent.extend_from_slice(b);
            true
        });
        self.out.segments(0, |b| {
            unsent.extend_from_slice(b);
            true
        });
        let unparsed = self.rbuf[self.parsed..].to_vec();
        (unsent, unparsed)
    }

    pub(crate) fn take_all_refs(&mut self, into: &mut Vec<SharedBytes>) {
        into.append(&mut self.spent);
        self.sending.take_refs(into);
        self.out.take_refs(into);
    }

    /// Hand the sending buffer over to be leaked: an operation the kernel
    /// never completed may still read it (its referenced values too).
    pub(crate) fn leak_sending(&mut self) {
        std::mem::forget(std::mem::take(&mut self.sending));
        self.sent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        Connection::new(-1, ClientId(1), 0, None)
    }

    /// Parsed commands as owned argv lists.
    fn commands(c: &mut Connection) -> Vec<Vec<Vec<u8>>> {
        let job = c.job();
        job.commands
            .iter()
            .map(|a| (0..a.len()).map(|i| a.get(i).to_vec()).collect())
            .collect()
    }

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    const INPUT: &[u8] =
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nPING\r\nECHO \"a b\"\n";

    fn expected() -> Vec<Vec<Vec<u8>>> {
        vec![
            v(&["SET", "k", "hello"]),
            v(&["PING"]),
            v(&["PING"]),
            v(&["ECHO", "a b"]),
        ]
    }

    /// Feed `chunks` one per round, running the batch after each, and
    /// collect every command seen.
    fn run(chunks: &[&[u8]]) -> Vec<Vec<Vec<u8>>> {
        let mut c = conn();
        let mut seen = Vec::new();
        for chunk in chunks {
            c.push_input(chunk);
            c.parse(&Limits::default(), usize::MAX, usize::MAX);
            seen.extend(commands(&mut c));
            assert!(c.after_batch(false, None).is_none());
        }
        assert_eq!(c.unparsed_len(), 0);
        seen
    }

    #[test]
    fn split_at_every_byte() {
        for cut in 0..=INPUT.len() {
            let got = run(&[&INPUT[..cut], &INPUT[cut..]]);
            assert_eq!(got, expected(), "cut at {cut}");
        }
    }

    #[test]
    fn split_at_every_pair_of_bytes() {
        for a in 0..=INPUT.len() {
            for b in a..=INPUT.len() {
                let got = run(&[&INPUT[..a], &INPUT[a..b], &INPUT[b..]]);
                assert_eq!(got, expected(), "cuts at {a} and {b}");
            }
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = INPUT.chunks(1).collect();
        assert_eq!(run(&chunks), expected());
    }

    #[test]
    fn deep_pipeline_in_one_read() {
        let mut buf = Vec::new();
        for i in 0..10_000 {
            resp::encode_command(&[b"GET".as_slice(), format!("k{i}").as_bytes()], &mut buf);
        }
        let mut c = conn();
        c.push_input(&buf);
        let r = c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(r.commands, 10_000);
        let cmds = commands(&mut c);
        assert_eq!(cmds[9_999], v(&["GET", "k9999"]));
        c.after_batch(false, None);
        assert_eq!(c.unparsed_len(), 0);
    }

    #[test]
    fn command_cap_leaves_the_rest() {
        let mut c = conn();
        c.push_input(b"PING\r\nPING\r\nPI");
        let r = c.parse(&Limits::default(), 1, usize::MAX);
        assert_eq!((r.commands, r.more), (1, true));
        c.after_batch(false, None);
        assert_eq!(c.unparsed_len(), 8);
        let r = c.parse(&Limits::default(), 1, usize::MAX);
        assert_eq!((r.commands, r.more), (1, true));
        c.after_batch(false, None);
        let r = c.parse(&Limits::default(), 1, usize::MAX);
        assert_eq!((r.commands, r.more), (0, false));
        c.push_input(b"NG\r\n");
        assert_eq!(c.parse(&Limits::default(), 1, usize::MAX).commands, 1);
    }

    #[test]
    fn large_bulk_waits_for_its_bytes() {
        let len = 1 << 20;
        let mut req = Vec::new();
        resp::encode_command(&[b"SET".as_slice(), b"k", &vec![b'x'; len]], &mut req);
        let mut c = conn();
        c.push_input(&req[..100]);
        assert_eq!(
            c.parse(&Limits::default(), usize::MAX, usize::MAX).commands,
            0
        );
        // The parser announced the size: the buffer is grown once.
        c.after_batch(false, None);
        c.push_input(&req[100..200]);
        assert!(c.read_buf().capacity() >= req.len() - 2);
        let mut at = 200;
        while at < req.len() {
            let end = (at + 7000).min(req.len());
            c.push_input(&req[at..end]);
            at = end;
            let r = c.parse(&Limits::default(), usize::MAX, usize::MAX);
            if at < req.len() {
                assert_eq!(r.commands, 0);
            } else {
                assert_eq!(r.commands, 1);
            }
            if r.commands == 0 {
                c.after_batch(false, None);
            }
        }
        let cmds = commands(&mut c);
        assert_eq!(cmds[0][2].len(), len);
        c.after_batch(false, None);
        assert!(c.read_buf().capacity() <= SHRINK_ABOVE);
    }

    #[test]
    fn parse_leaves_a_hint_per_command_and_detach_takes_them() {
        let mut c = conn();
        // Split mid-command: the hint comes with the complete command.
        c.push_input(b"GET user:1\r\nPING\r\n*3\r\n$3\r\nset\r\n$6\r\nuser:2");
        assert_eq!(
            c.parse(&Limits::default(), usize::MAX, usize::MAX).commands,
            2
        );
        c.push_input(b"\r\n$1\r\nv\r\n");
        assert_eq!(
            c.parse(&Limits::default(), usize::MAX, usize::MAX).commands,
            3
        );
        let job = c.job();
        let want: Vec<CommandHint> = job.commands.iter().map(CommandHint::of).collect();
        assert_eq!(job.commands.hints, &want[..]);
        let keys: Vec<u64> = want.iter().map(CommandHint::key_hash).collect();
        assert_eq!(
            keys,
            [store::hash_key(b"user:1"), 0, store::hash_key(b"user:2")]
        );
        // The hints travel with the request to the execution thread.
        let mut req = Request::default();
        c.detach(&mut req);
        assert_eq!(req.hints, want);
        assert!(c.job().commands.hints.is_empty());
    }

    #[test]
    fn protocol_error_after_good_commands() {
        let mut c = conn();
        c.push_input(b"PING\r\n*1\r\n$x\r\nPING\r\n");
        let r = c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(r.commands, 1);
        assert!(c.has_error());
        c.job().out.extend_from_slice(b"+PONG\r\n");
        let err = c.after_batch(false, None).expect("error reported");
        assert_eq!(err.message(), "invalid bulk length");
        assert_eq!(c.closing, Closing::AfterFlush);
        assert_eq!(
            c.pending_send(),
            b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
        );
        // Further input is ignored.
        c.push_input(b"PING\r\n");
        assert_eq!(
            c.parse(&Limits::default(), usize::MAX, usize::MAX).commands,
            0
        );
    }

    #[test]
    fn close_after_reply_drops_the_rest() {
        let mut c = conn();
        c.push_input(b"QUIT\r\nPING\r\n*x\r\n");
        c.parse(&Limits::default(), usize::MAX, usize::MAX);
        c.job().out.extend_from_slice(b"+OK\r\n");
        assert!(c.after_batch(true, None).is_none());
        assert_eq!(c.closing, Closing::AfterFlush);
        assert_eq!(c.pending_send(), b"+OK\r\n");
    }

    #[test]
    fn blocked_client_keeps_later_commands_until_unblocked() {
        let mut c = conn();
        // A protocol error after the commands must wait its turn too.
        c.push_input(b"BLPOP k 0\r\nPING\r\n*1\r\n$4\r\nECHO\r\n*x\r\n");
        c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(commands(&mut c).len(), 3);
        assert!(c.after_batch(false, Some(1)).is_none());
        assert!(c.blocked);
        assert!(!c.has_output());
        // Nothing is parsed while blocked, even as more arrives.
        c.push_input(b"PING\r\n");
        assert_eq!(
            c.parse(&Limits::default(), usize::MAX, usize::MAX).commands,
            0
        );
        c.blocked = false;
        c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(commands(&mut c), vec![v(&["PING"]), v(&["ECHO"])]);
        let err = c.after_batch(false, None).expect("error found again");
        assert!(
            err.message().contains("invalid multibulk length"),
            "{err:?}"
        );
    }

    #[test]
    fn output_double_buffering() {
        let mut c = conn();
        c.job().out.extend_from_slice(b"abcdef");
        assert_eq!(c.pending_send(), b"abcdef");
        // While "abcdef" is in flight the engine appends elsewhere.
        c.job().out.extend_from_slice(b"gh");
        c.advance(4);
        assert!(c.has_output());
        assert_eq!(c.pending_send(), b"ef");
        c.advance(2);
        assert_eq!(c.pending_send(), b"gh");
        c.advance(2);
        assert!(!c.has_output());
        assert_eq!(c.pending_send(), b"");
    }

    /// A client busy with large requests and replies keeps its emptied
    /// buffers from one request to the next; one that took no input and
    /// sent nothing between two sweeps gives them back.
    #[test]
    fn emptied_buffers_are_kept_while_busy_and_freed_once_idle() {
        let mut c = conn();
        let value = "x".repeat(50_000);
        let request = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{value}\r\n", value.len());
        let held = |c: &Connection| {
            (
                c.rbuf.capacity(),
                c.out.capacity().max(c.sending.capacity()),
                c.args.capacity() + c.argc.capacity() + c.hints.capacity() + c.ends.capacity(),
            )
        };
        for _ in 0..2 {
            c.push_input(request.as_bytes());
            c.parse(&Limits::default(), usize::MAX, usize::MAX);
            c.job().out.extend_from_slice(value.as_bytes());
            assert!(c.after_batch(false, None).is_none());
            let n = c.pending_send().len();
            c.advance(n);
            assert!(!c.has_output());
            let (read, reply, spans) = held(&c);
            assert!(
                read >= request.len() && reply >= value.len() && spans > 0,
                "{read} {reply} {spans}"
            );
            // The sweep between two requests: this one was active.
            c.release_if_idle();
            assert_eq!(held(&c), (read, reply, spans));
        }
        c.release_if_idle();
        assert_eq!(held(&c), (0, 0, 0));
    }

    #[test]
    fn empty_commands_are_consumed() {
        let mut c = conn();
        c.push_input(b"\r\n*0\r\n*-1\r\nPING\r\n");
        let r = c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(r.commands, 1);
        assert_eq!(commands(&mut c), vec![v(&["PING"])]);
    }

    #[test]
    fn inline_escapes_are_rewritten() {
        let mut c = conn();
        c.push_input(b"SET k \"a\\nb\"\r\n");
        c.parse(&Limits::default(), usize::MAX, usize::MAX);
        assert_eq!(commands(&mut c), vec![v(&["SET", "k", "a\nb"])]);
    }

    /// Queue "$10\r\n" [0123456789] "\r\n+OK\r\n$16\r\n" [A..P] "\r\n".
    fn queue_with_refs(c: &mut Connection, v1: &SharedBytes, v2: &SharedBytes) {
        let out = c.job().out;
        out.extend_from_slice(b"$10\r\n");
        out.push_shared(v1);
        out.extend_from_slice(b"\r\n+OK\r\n$16\r\n");
        out.push_shared(v2);
        out.extend_from_slice(b"\r\n");
    }

    #[test]
    fn partial_sends_resume_across_reference_segments() {
        let v1: SharedBytes = std::sync::Arc::from(&b"0123456789"[..]);
        let v2: SharedBytes = std::sync::Arc::from(&b"ABCDEFGHIJKLMNOP"[..]);
        let want: &[u8] = b"$10\r\n0123456789\r\n+OK\r\n$16\r\nABCDEFGHIJKLMNOP\r\n+PONG\r\n";
        // Every send size, so every cut point inside and between segments
        // is a resumption point.
        for step in 1..=want.len() {
            let mut c = conn();
            queue_with_refs(&mut c, &v1, &v2);
            let mut got = Vec::new();
            let mut appended = false;
            let mut spent = Vec::new();
            while c.has_output() {
                let (buf, from) = c.pending();
                let mut segs: Vec<Vec<u8>> = Vec::new();
                buf.segments(from, |s| {
                    segs.push(s.to_vec());
                    true
                });
                assert!(segs.iter().all(|s| !s.is_empty()));
                let flat = segs.concat();
                let n = step.min(flat.len());
                got.extend_from_slice(&flat[..n]);
                c.advance(n);
                c.take_spent(&mut spent);
                if !appended {
                    // The engine appends while the first buffer is out.
                    c.job().out.extend_from_slice(b"+PONG\r\n");
                    appended = true;
                }
            }
            assert_eq!(got, want, "send size {step}");
            assert_eq!(spent.len(), 2, "send size {step}");
        }
        assert_eq!(std::sync::Arc::strong_count(&v1), 1);
    }

    #[test]
    fn references_are_handed_back_not_dropped() {
        let v1: SharedBytes = std::sync::Arc::from(&b"0123456789"[..]);
        let v2: SharedBytes = std::sync::Arc::from(&b"ABCDEFGHIJKLMNOP"[..]);
        let mut c = conn();
        queue_with_refs(&mut c, &v1, &v2);
        let (buf, _) = c.pending();
        assert!(buf.has_refs());
        assert_eq!(buf.len(), 5 + 10 + 7 + 5 + 16 + 2);
        // Half sent, then the connection goes away: its references come
        // out for the driver to hand back, none is dropped with it.
        c.advance(20);
        let mut spent = Vec::new();
        c.take_spent(&mut spent);
        assert!(spent.is_empty(), "not all sent yet");
        c.take_all_refs(&mut spent);
        assert_eq!(spent.len(), 2);
        drop(c);
        assert_eq!(std::sync::Arc::strong_count(&v1), 2);
        drop(spent);
        assert_eq!(std::sync::Arc::strong_count(&v1), 1);
    }

    #[test]
    fn reattached_replies_with_references_are_queued_in_order() {
        let v: SharedBytes = std::sync::Arc::from(&b"vvvv"[..]);
        let mut c = conn();
        c.push_output(b"+first\r\n");
        let mut out = ReplyBuf::new();
        out.extend_from_slice(b"$4\r\n");
        out.push_shared(&v);
        out.extend_from_slice(b"\r\n");
        c.append_output(&mut out);
        assert!(out.is_empty());
        let (buf, from) = c.pending();
        assert_eq!(&buf.to_vec()[from..], b"+first\r\n$4\r\nvvvv\r\n");
    }
}
