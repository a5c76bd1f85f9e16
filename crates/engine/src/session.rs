//! The execution half of a client (see docs/ARCHITECTURE.md): everything
//! about a client that commands read or change.
//! PLACEHOLDER fields; the engine-core helper owns this file.

use crate::ClientId;
use resp::Protocol;

pub struct Session {
    pub id: ClientId,
    /// Selected database index.
    pub db: usize,
    pub proto: Protocol,
    pub name: Option<Vec<u8>>,
    pub authenticated: bool,
}

impl Session {
    /// A fresh session: db 0, RESP2, no name. Stable API for tests.
    pub fn new(id: ClientId) -> Session {
        Session { id, db: 0, proto: Protocol::Resp2, name: None, authenticated: true }
    }
}
