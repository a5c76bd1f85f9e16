//! The seam between the IO layer and the engine: a batch of parsed commands
//! per client in, reply bytes out.

use crate::ClientId;
use crate::output::OutputClass;
use crate::table::table;
use resp::{ReplyBuf, Span};

/// A run of complete commands from one client, as the parser left them:
/// argument spans over one read buffer, grouped by command.
#[derive(Clone, Copy, Debug)]
pub struct CommandsView<'a> {
    /// The bytes the spans point into.
    pub data: &'a [u8],
    /// All arguments of all commands, in order.
    pub args: &'a [Span],
    /// Number of arguments of each command, in order; sums to `args.len()`.
    pub argc: &'a [u32],
    /// One [`CommandHint`] per command, from whoever parsed them, or empty:
    /// the engine then works them out itself.
    pub hints: &'a [CommandHint],
}

impl<'a> CommandsView<'a> {
    /// Iterate the commands, each as its argument slices.
    pub fn iter(&self) -> impl Iterator<Item = ArgvRef<'a>> + '_ {
        let mut at = 0usize;
        self.argc.iter().map(move |&n| {
            let spans = &self.args[at..at + n as usize];
            at += n as usize;
            ArgvRef {
                data: self.data,
                spans,
            }
        })
    }
}

/// What a command's own bytes say about it: its command-table entry and
/// the hash of its first key. The parser works it out while the bytes are
/// in its cache ([`CommandHint::of`]); in threaded mode that is the IO
/// thread, so the execution thread's prefetch pass reads these few bytes
/// per command instead of the request itself, which sits in another core's
/// cache. Pure: any thread may call [`CommandHint::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandHint {
    /// Command-table index of the top-level command, or `u32::MAX`.
    pub(crate) idx: u32,
    /// Hash of its first key ([`store::hash_key`]); 0 if it has none.
    pub(crate) key_hash: u64,
    /// The entry's `may_run_script`, read here while the entry is at hand.
    script: bool,
}

impl CommandHint {
    pub(crate) const UNKNOWN: u32 = u32::MAX;

    pub fn of(argv: ArgvRef<'_>) -> CommandHint {
        let idx = if argv.is_empty() {
            None
        } else {
            table().lookup(argv.get(0))
        };
        Self::with_entry(argv, idx)
    }

    /// [`CommandHint::of`], looking the name up through `names`: a
    /// parser keeps one per connection, so a pipeline of one command (16
    /// SETs) looks its name up in the table once, not per command.
    pub fn of_cached(argv: ArgvRef<'_>, names: &mut NameCache) -> CommandHint {
        let idx = if argv.is_empty() {
            None
        } else {
            names.lookup(argv.get(0))
        };
        Self::with_entry(argv, idx)
    }

    #[inline]
    fn with_entry(argv: ArgvRef<'_>, idx: Option<usize>) -> CommandHint {
        let table = table();
        let mut key_hash = 0;
        let mut script = false;
        if let Some(i) = idx {
            script = table.entries[i].may_run_script;
            let fk = table.entries[i].spec.first_key;
            if fk > 0 && (fk as usize) < argv.len() {
                key_hash = store::hash_key(argv.get(fk as usize));
            }
        }
        CommandHint {
            idx: idx.map_or(Self::UNKNOWN, |i| i as u32),
            key_hash,
            script,
        }
    }

    /// The hash of the command's first key, 0 if it has none.
    pub fn key_hash(&self) -> u64 {
        self.key_hash
    }

    /// The command may run a Lua script (EVAL and FCALL and their
    /// variants, and EXEC, whose transaction may hold them): threaded mode
    /// runs these on the execution thread only (see `crate::busy`).
    pub fn may_run_script(&self) -> bool {
        self.script
    }
}

/// The command name looked up last, as the client spelled it, and its
/// table entry ([`CommandHint::of_cached`]).
#[derive(Clone, Debug, Default)]
pub struct NameCache {
    name: [u8; NameCache::MAX],
    /// Bytes of `name` in use; 0: nothing cached.
    len: u8,
    /// Its table index, or [`CommandHint::UNKNOWN`].
    idx: u32,
}

impl NameCache {
    /// Longer names are looked up every time (every command name but a
    /// few subcommand-only ones fits).
    const MAX: usize = 16;

    /// The top-level command `name` (any case), as [`crate::table::Table::lookup`].
    #[inline]
    pub fn lookup(&mut self, name: &[u8]) -> Option<usize> {
        let len = self.len as usize;
        if len != 0 && name == &self.name[..len] {
            return (self.idx != CommandHint::UNKNOWN).then_some(self.idx as usize);
        }
        let idx = table().lookup(name);
        if !name.is_empty() && name.len() <= Self::MAX {
            self.name[..name.len()].copy_from_slice(name);
            self.len = name.len() as u8;
            self.idx = idx.map_or(CommandHint::UNKNOWN, |i| i as u32);
        }
        idx
    }
}

/// The arguments of one command.
#[derive(Clone, Copy, Debug)]
pub struct ArgvRef<'a> {
    pub data: &'a [u8],
    pub spans: &'a [Span],
}

impl<'a> ArgvRef<'a> {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.spans[i].slice(self.data)
    }
    /// The arguments in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Append `args` to `data` as one command's arguments, with their spans:
/// how a command is kept beyond its request buffer (a queued MULTI
/// command, a blocked one, a script's call).
pub fn pack_args<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    data: &mut Vec<u8>,
    spans: &mut Vec<Span>,
) {
    for a in args {
        spans.push(Span {
            start: data.len(),
            len: a.len(),
        });
        data.extend_from_slice(a);
    }
}

/// One client's share of a batch.
pub struct Job<'a> {
    pub client: ClientId,
    pub commands: CommandsView<'a>,
    /// Replies are appended here, in command order. Large string values
    /// go in by reference ([`ReplyBuf`]), not copied.
    pub out: &'a mut ReplyBuf,
    /// Set by the engine: close the connection once `out` is sent (QUIT,
    /// AUTH failures under protected mode, ...). Commands after the one that
    /// set it are not executed.
    pub close_after_reply: bool,
    /// Set by the engine: the client blocked (BLPOP, ...) on the last
    /// command counted in `executed`. Keep its later commands, unconsumed,
    /// and feed it nothing until [`crate::Event::Unblocked`].
    pub blocked: bool,
    /// Set by the engine: how many of `commands` were consumed. Less than
    /// all only when `blocked` (or closing, where the rest is dropped).
    pub executed: usize,
    /// Set by the engine: the client's `client-output-buffer-limit` class
    /// after these commands (only a client's own commands change it).
    pub output_class: OutputClass,
    /// Bytes read from this client since its last job, counted into its
    /// CLIENT LIST `tot-net-in` when the job runs (no separate session
    /// lookup to report them).
    pub bytes_in: u64,
    /// Set by the engine: the client still has to AUTH after these
    /// commands, for [`crate::Engine::limits_for`] (only a client's own
    /// commands change it).
    pub auth_required: bool,
    /// Set by the engine: the client speaks RESP3 after these commands
    /// (for replies the IO layer writes itself while a script is busy).
    pub resp3: bool,
    /// Set by the engine: the client is inside MULTI after these commands.
    pub in_multi: bool,
}

/// What the IO layer must do after a job ([`Job::outcome`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Close once the replies are out.
    pub close_after_reply: bool,
    /// The client blocked after this many commands.
    pub blocked_after: Option<usize>,
    /// The output buffer limit class to hold the client to from now on.
    pub output_class: OutputClass,
    /// The client still has to AUTH (its parser limits are tighter).
    pub auth_required: bool,
    /// The client speaks RESP3.
    pub resp3: bool,
    /// The client is inside MULTI.
    pub in_multi: bool,
}

impl<'a> Job<'a> {
    pub fn outcome(&self) -> Outcome {
        Outcome {
            close_after_reply: self.close_after_reply,
            blocked_after: self.blocked.then_some(self.executed),
            output_class: self.output_class,
            auth_required: self.auth_required,
            resp3: self.resp3,
            in_multi: self.in_multi,
        }
    }

    pub fn new(client: ClientId, commands: CommandsView<'a>, out: &'a mut ReplyBuf) -> Job<'a> {
        Job {
            client,
            commands,
            out,
            close_after_reply: false,
            blocked: false,
            executed: 0,
            output_class: OutputClass::Normal,
            bytes_in: 0,
            auth_required: false,
            resp3: false,
            in_multi: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_cache_answers_as_the_table_does() {
        let t = table();
        let mut names = NameCache::default();
        // Repeats (served from the cache), other spellings, unknown and
        // over-long names, in an order that changes the cached name.
        let long = [b'x'; 40];
        let seq: [&[u8]; 12] = [
            b"SET", b"SET", b"set", b"GET", b"nosuch", b"nosuch", b"GET", b"CLIENT", b"cluster",
            &long, &long, b"",
        ];
        for name in seq {
            assert_eq!(
                names.lookup(name),
                t.lookup(name),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn cached_hints_equal_uncached_ones() {
        let data = b"SETkeyvalGETkeyset";
        let span = |start, len| Span { start, len };
        let cmds: [&[Span]; 4] = [
            &[span(0, 3), span(3, 3), span(6, 3)],
            &[span(0, 3), span(3, 3), span(6, 3)],
            &[span(9, 3), span(3, 3)],
            &[span(15, 3), span(3, 3), span(6, 3)],
        ];
        let mut names = NameCache::default();
        for spans in cmds {
            let argv = ArgvRef { data, spans };
            assert_eq!(
                CommandHint::of_cached(argv, &mut names),
                CommandHint::of(argv)
            );
        }
    }
}
