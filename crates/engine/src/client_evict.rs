//! `maxmemory-clients`: when the memory of all normal and pub/sub clients
//! together reaches the limit, the biggest are disconnected until it is
//! under again (Valkey's client eviction). The limit is bytes, or a
//! percentage of `maxmemory`, and never below 128 KiB (a smaller one would
//! leave no room to talk to the server at all). A client with CLIENT
//! NO-EVICT on, the link to this server's primary and the internal
//! clients are never evicted; replicas have left the client table.
//!
//! A client's memory here is CLIENT LIST's `tot-mem` plus its query
//! buffer (`qbuf`). Checked from the cron, `hz` times a second (Valkey
//! checks before every sleep, with running per-bucket totals); between two
//! checks the clients can go past the limit.

use crate::Event;
use crate::log;
use crate::server::Server;

/// Valkey's floor for the limit.
const MIN_LIMIT: u64 = 128 * 1024;

/// The limit in bytes; 0 when client eviction is off.
pub fn limit(srv: &Server) -> u64 {
    let setting = srv.config.maxmemory_clients;
    let bytes = if setting < 0 {
        // A percentage of maxmemory (none without maxmemory).
        if srv.config.maxmemory == 0 {
            return 0;
        }
        (srv.config.maxmemory as f64 * (-setting) as f64 / 100.0) as u64
    } else {
        setting as u64
    };
    if bytes == 0 { 0 } else { bytes.max(MIN_LIMIT) }
}

/// Disconnect the biggest evictable clients while all clients' memory is
/// at or over the limit.
pub fn evict_clients(srv: &mut Server) {
    let limit = limit(srv);
    if limit == 0 {
        return;
    }
    let mut total = 0u64;
    let mut candidates = Vec::new();
    for slot in srv.clients.map.values() {
        let Some(s) = slot.as_deref() else {
            // Running its command right now: a bare session.
            total += crate::session::Session::BASE_MEMORY;
            continue;
        };
        if s.close_asap {
            // On its way out (evicted or killed before): its memory goes.
            continue;
        }
        let mem = s.memory() + s.meter.input();
        total += mem;
        let internal = s.id == crate::replication::replica::PRIMARY_CLIENT
            || s.id == crate::aof::LOADING_CLIENT;
        if !s.no_evict && !internal {
            candidates.push((mem, s.id));
        }
    }
    if total < limit {
        return;
    }
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    let hide = srv.hides_user_data();
    for (mem, id) in candidates {
        if total < limit {
            break;
        }
        total -= mem;
        let now = srv.now_ms();
        let watch = srv.watches.state(id);
        let Some(s) = srv.clients.get_mut(id) else {
            continue;
        };
        s.close_asap = true;
        log::verbose(&format!(
            "Evicting client: {}",
            crate::cmd::client::client_line_logged(s, watch, now, hide)
        ));
        srv.stats.evicted_clients += 1;
        srv.events.push(Event::Close {
            client: id,
            flush: false,
        });
    }
}
