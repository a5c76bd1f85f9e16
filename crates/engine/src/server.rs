//! Server-wide state the commands share: keyspace, config, stats, events.
//! PLACEHOLDER fields; the engine-core helper owns this file.

use crate::{Config, Event, NetStats};
use store::Keyspace;

pub struct Server {
    pub keyspace: Keyspace,
    pub config: Config,
    pub stats: Stats,
    pub net: NetStats,
    pub events: Vec<Event>,
}

#[derive(Default)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
}

impl Server {
    /// A server with an empty keyspace of `config.databases` databases.
    /// Stable API: the command tests build their fixture with it.
    pub fn new(config: Config) -> Server {
        Server {
            keyspace: Keyspace::new(config.databases),
            config,
            stats: Stats::default(),
            net: NetStats::default(),
            events: Vec::new(),
        }
    }
}

impl Stats {
    pub fn record_error(&mut self, msg: &str) {
        let _ = msg;
    }
}
