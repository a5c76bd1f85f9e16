//! MIGRATE's sockets: blocking TCP connections to other servers, kept by
//! `host:port` for the next MIGRATE (see `engine::migrate`). Only the
//! thread that runs the engine touches them, inside a MIGRATE or cron.

use engine::migrate::{MAX_CACHED, MigrateLink, Migrator};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A reply line longer than this is a target speaking another protocol.
const MAX_LINE: usize = 64 * 1024;

#[derive(Default)]
pub struct MigrateSockets {
    links: HashMap<String, Link>,
}

struct Link {
    sock: TcpStream,
    /// Bytes read past the last line returned.
    buf: Vec<u8>,
    db: Option<i64>,
    last_use: Instant,
    /// The socket's read and write timeouts as last set: a MIGRATE uses
    /// one, so each is set once per connection rather than per line.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl Link {
    fn apply_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        if self.read_timeout != Some(t) {
            self.sock.set_read_timeout(Some(t))?;
            self.read_timeout = Some(t);
        }
        Ok(())
    }

    fn apply_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        if self.write_timeout != Some(t) {
            self.sock.set_write_timeout(Some(t))?;
            self.write_timeout = Some(t);
        }
        Ok(())
    }
}

impl Migrator for MigrateSockets {
    fn connect(
        &mut self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> io::Result<&mut dyn MigrateLink> {
        let name = format!("{host}:{port}");
        if !self.links.contains_key(&name) {
            if self.links.len() >= MAX_CACHED {
                // Valkey closes a random one; any will do.
                if let Some(k) = self.links.keys().next().cloned() {
                    self.links.remove(&k);
                }
            }
            let addr = (host, port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
            let sock = TcpStream::connect_timeout(&addr, timeout)?;
            sock.set_nodelay(true)?;
            let link = Link {
                sock,
                buf: Vec::new(),
                db: None,
                last_use: Instant::now(),
                read_timeout: None,
                write_timeout: None,
            };
            self.links.insert(name.clone(), link);
        }
        let link = self.links.get_mut(&name).expect("inserted above");
        link.last_use = Instant::now();
        Ok(link)
    }

    fn close(&mut self, host: &str, port: u16) {
        self.links.remove(&format!("{host}:{port}"));
    }

    fn close_idle(&mut self, idle: Duration) {
        self.links.retain(|_, l| l.last_use.elapsed() <= idle);
    }

    fn cached(&self) -> usize {
        self.links.len()
    }
}

impl MigrateLink for Link {
    fn db(&self) -> Option<i64> {
        self.db
    }

    fn set_db(&mut self, db: Option<i64>) {
        self.db = db;
    }

    fn send(&mut self, bytes: &[u8], timeout: Duration) -> io::Result<()> {
        self.apply_write_timeout(timeout)?;
        self.sock.write_all(bytes)
    }

    fn read_line(&mut self, timeout: Duration) -> io::Result<Vec<u8>> {
        self.apply_read_timeout(timeout)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buf.len() > MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reply line too long",
                ));
            }
            if Instant::now() >= deadline {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let mut chunk = [0u8; 4096];
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                // A signal is not the target failing: wait out the rest
                // of the timeout (a failure would be retried, a timeout not).
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
