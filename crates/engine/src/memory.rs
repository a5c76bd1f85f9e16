//! Where the memory goes: the figures INFO memory, MEMORY STATS and MEMORY
//! DOCTOR share (Valkey's `getMemoryOverheadData`).
//!
//! ```text
//!  used (allocator probe) = overhead + dataset
//!  overhead = startup + clients' buffers + every database's table overhead
//!             (+ replication, AOF, scripts: none in ringkv, reported 0)
//! ```
//!
//! Used memory is the probe's [`MemoryStats::used`], everything the process
//! allocated, whichever thread did: with `io-threads` > 1 the IO threads'
//! read buffers and rings come from the same allocator and are in it. The
//! clients' share (`mem_clients_normal`) is what CLIENT LIST shows as
//! `tot-mem` summed; whatever else the IO threads hold lands in the
//! dataset, as anything Valkey does not count elsewhere does.

use crate::server::{MemoryStats, Server};
use crate::session::Session;

/// Per-database overhead (MEMORY STATS `db.N`).
#[derive(Clone, Copy, Debug)]
pub struct DbOverhead {
    pub id: usize,
    /// The main table's own structure.
    pub main: u64,
    /// The volatile keys' index (the expiry heap).
    pub expires: u64,
}

/// One reading of the memory figures.
#[derive(Clone, Debug, Default)]
pub struct Overhead {
    pub alloc: MemoryStats,
    pub rss: u64,
    pub used: u64,
    pub peak: u64,
    pub startup: u64,
    pub clients_normal: u64,
    pub dbs: Vec<DbOverhead>,
    /// Databases whose table is resizing, and the bytes of the bucket
    /// arrays they leave (MEMORY STATS `db.dict.rehashing.count`,
    /// `overhead.db.hashtable.rehashing`).
    pub rehashing: u64,
    pub rehashing_bytes: u64,
    pub total: u64,
    pub keys: u64,
    pub dataset: u64,
    pub dataset_perc: f64,
    pub peak_perc: f64,
    pub bytes_per_key: u64,
}

/// `a / b`, 0 when there is nothing to divide by (Valkey would print
/// `nan` or `inf` there).
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl Overhead {
    /// Read the allocator and walk the clients and databases (O(clients +
    /// databases), not O(keys)). Raises the server's peak first, as INFO
    /// does in Valkey.
    pub fn read(srv: &mut Server) -> Overhead {
        let alloc = srv.memory();
        srv.note_used_memory(alloc.used);
        let used = alloc.used;
        let peak = srv.stats.peak_memory;
        let startup = srv.startup_memory;
        let clients_normal = clients_memory(srv);
        let mut total = startup + clients_normal;
        let mut dbs = Vec::new();
        let mut keys = 0u64;
        let (mut rehashing, mut rehashing_bytes) = (0, 0);
        for (id, db) in srv.keyspace.dbs.iter().enumerate() {
            if let Some(bytes) = db.table_rehashing() {
                rehashing += 1;
                rehashing_bytes += bytes as u64;
            }
            let main = db.table_overhead() as u64;
            // The expiry heap: the rest of the database's own structures.
            let expires = db.memory_usage() as u64 - main;
            if main == 0 && db.is_empty() {
                continue;
            }
            keys += db.len() as u64;
            total += main + expires;
            dbs.push(DbOverhead { id, main, expires });
        }
        let dataset = used.saturating_sub(total);
        // Valkey: net of the startup memory, and never a division by 0.
        let net = if used > startup { used - startup } else { 1 };
        Overhead {
            rss: crate::info::rss_bytes(),
            used,
            peak,
            startup,
            clients_normal,
            dbs,
            rehashing,
            rehashing_bytes,
            total,
            keys,
            dataset,
            dataset_perc: dataset as f64 * 100.0 / net as f64,
            peak_perc: ratio(used * 100, peak),
            bytes_per_key: dataset.checked_div(keys).unwrap_or(0),
            alloc,
        }
    }

    /// `allocator_frag_ratio`: as Valkey 8, allocated bytes plus the free
    /// regions inside small size classes' slabs over allocated bytes
    /// (active pages over allocated where the allocator cannot tell).
    pub fn allocator_frag(&self) -> f64 {
        ratio(
            self.alloc.allocated + self.allocator_frag_bytes().max(0) as u64,
            self.alloc.allocated,
        )
    }
    pub fn allocator_frag_bytes(&self) -> i64 {
        match self.alloc.frag_smallbins {
            Some(b) => b as i64,
            None => self.alloc.active as i64 - self.alloc.allocated as i64,
        }
    }
    /// `allocator_rss_ratio`: resident over active.
    pub fn allocator_rss(&self) -> f64 {
        ratio(self.alloc.resident, self.alloc.active)
    }
    pub fn allocator_rss_bytes(&self) -> i64 {
        self.alloc.resident as i64 - self.alloc.active as i64
    }
    /// `rss_overhead_ratio`: the process's RSS over the allocator's.
    pub fn rss_extra(&self) -> f64 {
        ratio(self.rss, self.alloc.resident)
    }
    pub fn rss_extra_bytes(&self) -> i64 {
        self.rss as i64 - self.alloc.resident as i64
    }
    /// `mem_fragmentation_ratio`: RSS over used memory (the total RSS
    /// overhead, named so for compatibility).
    pub fn total_frag(&self) -> f64 {
        ratio(self.rss, self.used)
    }
    pub fn total_frag_bytes(&self) -> i64 {
        self.rss as i64 - self.used as i64
    }
}

/// Valkey's `mem_clients_normal` (normal and pub/sub clients): each
/// session's [`Session::memory`], CLIENT LIST's `tot-mem`; one whose
/// command is running (taken out of the map meanwhile: the caller) counts
/// a bare session.
pub fn clients_memory(srv: &Server) -> u64 {
    srv.clients
        .map
        .values()
        .map(|s| s.as_deref().map_or(Session::BASE_MEMORY, Session::memory))
        .sum()
}

/// MEMORY DOCTOR's report (Valkey's `getMemoryDoctorReport`, with its
/// texts; ringkv has no replicas and no scripts, so those two checks never
/// fire).
pub fn doctor_report(srv: &mut Server) -> String {
    let mh = Overhead::read(srv);
    const MB: u64 = 1024 * 1024;
    if mh.used < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector \
                can't be used in these conditions. Please, leave for your mission on Earth and fill \
                it with some data. The new Sam and I will be back to our programming as soon as I \
                finished rebooting.\n"
            .to_string();
    }
    let big_peak = ratio(mh.peak, mh.used) > 1.5;
    let high_frag = mh.total_frag() > 1.4 && mh.total_frag_bytes() > (10 * MB) as i64;
    let high_alloc_frag = mh.allocator_frag() > 1.1 && mh.allocator_frag_bytes() > (10 * MB) as i64;
    let high_alloc_rss = mh.allocator_rss() > 1.1 && mh.allocator_rss_bytes() > (10 * MB) as i64;
    let high_proc_rss = mh.rss_extra() > 1.1 && mh.rss_extra_bytes() > (10 * MB) as i64;
    let clients = srv.clients.len().max(1) as u64;
    let big_client_buf = mh.clients_normal / clients > 200 * 1024;
    if !(big_peak
        || high_frag
        || high_alloc_frag
        || high_alloc_rss
        || high_proc_rss
        || big_client_buf)
    {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for \
                what occurs on this base.\n"
            .to_string();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Valkey instance memory implants:\n\n");
    if big_peak {
        s.push_str(
            " * Peak memory: In the past this instance used more than 150% the memory that is \
             currently using. The allocator is normally not able to release memory after a peak, \
             so you can expect to see a big fragmentation ratio, however this is actually harmless \
             and is only due to the memory peak, and if the Valkey instance Resident Set Size \
             (RSS) is currently bigger than expected, the memory will be used as soon as you fill \
             the Valkey instance with more data. If the memory peak was only occasional and you \
             want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the \
             only other option is to shutdown and restart the instance.\n\n",
        );
    }
    if high_frag {
        s.push_str(&format!(
            " * High total RSS: This instance has a memory fragmentation and RSS overhead greater \
             than 1.4 (this means that the Resident Set Size of the Valkey process is much larger \
             than the sum of the logical allocations Valkey performed). This problem is usually \
             due either to a large peak memory (check if there is a peak memory entry above in \
             the report) or may result from a workload that causes the allocator to fragment \
             memory a lot. If the problem is a large peak memory, then there is no issue. \
             Otherwise, make sure you are using the Jemalloc allocator and not the default libc \
             malloc. Note: The currently used allocator is \"{}\".\n\n",
            mh.alloc.allocator
        ));
    }
    if high_alloc_frag {
        s.push_str(
            " * High allocator fragmentation: This instance has an allocator external \
             fragmentation greater than 1.1. This problem is usually due either to a large peak \
             memory (check if there is a peak memory entry above in the report) or may result \
             from a workload that causes the allocator to fragment memory a lot. You can try \
             enabling 'activedefrag' config option.\n\n",
        );
    }
    if high_alloc_rss {
        s.push_str(
            " * High allocator RSS overhead: This instance has an RSS memory overhead is greater \
             than 1.1 (this means that the Resident Set Size of the allocator is much larger than \
             the sum what the allocator actually holds). This problem is usually due to a large \
             peak memory (check if there is a peak memory entry above in the report), you can try \
             the MEMORY PURGE command to reclaim it.\n\n",
        );
    }
    if high_proc_rss {
        s.push_str(
            " * High process RSS overhead: This instance has non-allocator RSS memory overhead is \
             greater than 1.1 (this means that the Resident Set Size of the Valkey process is much \
             larger than the RSS the allocator holds). This problem may be due to Lua scripts or \
             Modules.\n\n",
        );
    }
    if big_client_buf {
        s.push_str(
            " * Big client buffers: The clients output buffers in this instance are greater than \
             200K per client (on average). This may result from different causes, like Pub/Sub \
             clients subscribed to channels bot not receiving data fast enough, so that data \
             piles on the Valkey instance output buffer, or clients sending commands with large \
             replies or very large sequences of commands in the same pipeline. Please use the \
             CLIENT LIST command in order to investigate the issue if it causes problems in your \
             instance, or to understand better why certain clients are using a big amount of \
             memory.\n\n",
        );
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}
