//! An error reply to a client that never reads one: the primary's link on
//! a replica, or the AOF's loading client. Valkey's afterErrorReply
//! for those: the reply is dropped as usual, but logged as CRITICAL and
//! counted (INFO `unexpected_error_replies`), since it means the replica
//! or the loaded file now differs from what wrote the stream; and under
//! `propagation-error-behavior panic` (`panic-on-replicas`: replicas
//! only) the server stops rather than go on with a dataset that
//! diverged.

use crate::{ClientId, Server, aof, log, replication, table};

/// Valkey logs at most this much of the error.
const MAX_LOGGED: usize = 4096;

/// `reply` (an error reply, `-` first) went to `client`, which is the
/// primary's link or the AOF loader, after running `cmd`.
pub fn unexpected_reply(srv: &mut Server, client: ClientId, reply: &[u8], cmd: Option<usize>) {
    let from_aof = client == aof::LOADING_CLIENT;
    let (from, to) = if from_aof {
        ("server", "AOF-loading-client")
    } else {
        ("replica", "primary")
    };
    // As Valkey logs it: an ERR without its code (it was added to the
    // message), any other error whole.
    let line = reply.strip_prefix(b"-ERR ").unwrap_or(reply);
    let end = line
        .iter()
        .position(|&b| b == b'\r')
        .unwrap_or(line.len())
        .min(MAX_LOGGED);
    let name = cmd.map_or("<unknown>", |i| table::table().entries[i].fullname.as_str());
    log::warning(&format!(
        "== CRITICAL == This {from} is sending an error to its {to}: '{}' after processing the command '{name}'",
        String::from_utf8_lossy(&line[..end])
    ));
    srv.stats.unexpected_error_replies += 1;
    let behavior = srv.config.get("propagation-error-behavior");
    let behavior = behavior.as_deref().unwrap_or("ignore");
    let stop = if from_aof {
        behavior == "panic"
    } else {
        client == replication::PRIMARY_CLIENT
            && srv.config.replica_read_only
            && matches!(behavior, "panic" | "panic-on-replicas")
    };
    if stop {
        // The server crate's panic hook writes the bug report and aborts.
        panic!(
            "This {from} panicked sending an error to its {to} after processing the command '{name}'"
        );
    }
}
