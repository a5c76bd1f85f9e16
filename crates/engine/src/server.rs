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

impl Stats {
    pub fn record_error(&mut self, msg: &str) {
        let _ = msg;
    }
}
