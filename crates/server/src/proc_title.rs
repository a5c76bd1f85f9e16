//! Writing the process title over the process's own argument strings, as
//! Valkey's setproctitle does on Linux: `ps` and `/proc/PID/cmdline` read
//! that memory, so the title shows there.
//!
//! The room is the argument strings and, right after them, the
//! environment's strings. [`init`] moves the environment to the heap
//! first (so nothing reads it from there any more) and notes the room;
//! [`set`] clears it and writes the title, with Valkey's marks where the
//! title ends before `argv[0]`'s old NUL (a `.` there) or right on it (a
//! space). The kernel shows the argument area, the title and NULs, as it
//! shows Valkey's. The bytes go through
//! `/proc/self/mem`, so a wrong address is an error, never a stray write.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// The argument area: where it starts, where `argv[0]`'s NUL is (as an
/// offset), where the arguments end, and where the room ends.
struct Room {
    start: u64,
    argv0_nul: usize,
    args_end: u64,
    end: u64,
}

static ROOM: OnceLock<Room> = OnceLock::new();

/// Valkey's setproctitle keeps at most this much of a title.
const MAX_TITLE: usize = 255;

/// Note the room for a title. Call first thing in `main`, before the
/// server starts a thread and after the arguments were read (they are
/// overwritten).
pub fn init() {
    let Some(room) = find_room() else {
        return;
    };
    if room.end > room.args_end {
        let vars: Vec<_> = std::env::vars_os().collect();
        for (name, value) in vars {
            if name.as_encoded_bytes().contains(&b'=') {
                continue; // not a name set_var takes
            }
            // SAFETY: no thread of the server exists yet (see above), and the
            // one jemalloc may have started before `main` read its options
            // then, so nothing reads the environment while it changes.
            // Setting a variable puts a copy on the heap in place of the
            // string in the room.
            unsafe { std::env::set_var(name, value) };
        }
    }
    let _ = ROOM.set(room);
}

/// The argument strings' bounds from /proc/self/stat (fields 48–51:
/// arg_start, arg_end, env_start, env_end); the environment counts only
/// where it follows the arguments.
fn find_room() -> Option<Room> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which may hold spaces: field 3 on.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let field = |n: usize| fields.get(n - 3).copied().filter(|&v| v != 0);
    let (start, args_end) = (field(48)?, field(49)?);
    let end = match (field(50), field(51)) {
        (Some(env_start), Some(env_end)) if env_start == args_end => env_end,
        _ => args_end,
    };
    let argv0_nul = std::env::args_os().next()?.len();
    (args_end > start + argv0_nul as u64).then_some(Room {
        start,
        argv0_nul,
        args_end,
        end,
    })
}

/// Show `title` (its first 255 bytes) as the process's command line;
/// false if it could not be written (no room noted, or /proc/self/mem
/// refused).
pub fn set(title: &str) -> bool {
    let Some(room) = ROOM.get() else {
        return false;
    };
    let len = (room.end - room.start) as usize;
    let mut bytes = vec![0u8; len];
    let shown = title.len().min(MAX_TITLE).min(len - 1);
    bytes[..shown].copy_from_slice(&title.as_bytes()[..shown]);
    // Where the title ends against `argv[0]`'s NUL, as Valkey's
    // setproctitle marks it.
    let nul = room.argv0_nul;
    if shown < nul {
        bytes[nul] = b'.';
    } else if shown == nul && nul + 1 < len {
        bytes[nul] = b' ';
    }
    let Ok(mut mem) = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
    else {
        return false;
    };
    let done = mem.write_all_at(&bytes, room.start).is_ok();
    done && mem.flush().is_ok()
}
