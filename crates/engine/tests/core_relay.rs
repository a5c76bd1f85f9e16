//! A replica's effects stream is its primary's stream, byte for byte
//! (what its own replicas get): the commands it applies from the link are
//! appended as they came, its own effects of them are not (they go only
//! to its AOF's stream, unit-tested in `effects.rs`), and its offset is
//! the primary's. Promoted, it emits its own effects again, after a
//! SELECT.

mod core_util;
use core_util::*;
use ringkv_engine::replication::{LinkEvent, LinkOptions, Links, PrimaryLink};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

type Queue = Arc<Mutex<VecDeque<LinkEvent>>>;

/// A link whose events the test pushes.
struct FakeLink(Queue);

impl PrimaryLink for FakeLink {
    fn poll(&mut self) -> Option<LinkEvent> {
        self.0.lock().unwrap().pop_front()
    }
    fn ready(&self) -> bool {
        !self.0.lock().unwrap().is_empty()
    }
    fn ack(&mut self, _offset: u64) {}
    fn applied(&mut self, _offset: u64) {}
    fn received(&self) -> u64 {
        0
    }
    fn last_io_ms(&self) -> i64 {
        0
    }
    fn transfer(&self) -> (i64, u64) {
        (-1, 0)
    }
}

struct FakeLinks(Queue);

impl Links for FakeLinks {
    fn connect(&mut self, _opts: LinkOptions) -> Box<dyn PrimaryLink> {
        Box::new(FakeLink(self.0.clone()))
    }
}

/// `bytes` (whole commands) as the link hands them over.
fn commands(bytes: &[u8]) -> LinkEvent {
    let (mut args, mut argc, mut one, mut at) = (Vec::new(), Vec::new(), Vec::new(), 0);
    while at < bytes.len() {
        one.clear();
        let resp::Parsed::Command { consumed, argc: n } =
            resp::parse_command(&bytes[at..], &resp::Limits::default(), &mut one).unwrap()
        else {
            panic!("incomplete")
        };
        args.extend(one.iter().map(|s| resp::Span {
            start: s.start + at,
            len: s.len,
        }));
        argc.push(n as u32);
        at += consumed;
    }
    LinkEvent::Commands {
        data: bytes.to_vec(),
        args,
        argc,
    }
}

fn stream_bytes(e: &mut ringkv_engine::Engine, r: &mut effects::Reader) -> Vec<u8> {
    e.commit_effects();
    let mut out = Vec::new();
    while let Some(s) = r.next_slice() {
        out.extend_from_slice(&s);
    }
    out
}

fn info_field(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId, name: &str) -> String {
    let info = bulk_text(&cmd(e, c, &["info", "replication"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_replica_relays_what_it_applies_verbatim_and_emits_its_own_effects_once_promoted() {
    let mut e = engine();
    let c = connect(&mut e);
    let q: Queue = Arc::default();
    e.set_links(Box::new(FakeLinks(q.clone())));
    let mut r = e.attach_effects();
    assert_eq!(cmd(&mut e, c, &["replicaof", "127.0.0.1", "9"]), "+OK\r\n");
    let id = "a".repeat(40);
    // A relative expiry and an INCRBYFLOAT: a primary would rewrite them,
    // a replica relays them as they came (its primary already did).
    let sent: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n\
        *3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
        *3\r\n$6\r\nEXPIRE\r\n$1\r\na\r\n$3\r\n100\r\n\
        *1\r\n$5\r\nMULTI\r\n\
        *3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nn\r\n$3\r\n1.5\r\n\
        *1\r\n$4\r\nEXEC\r\n\
        *1\r\n$4\r\nPING\r\n";
    {
        let mut q = q.lock().unwrap();
        q.push_back(LinkEvent::Continue {
            replid: Some(id.clone()),
        });
        q.push_back(commands(sent));
    }
    e.background_step();
    assert_eq!(stream_bytes(&mut e, &mut r), sent);
    assert_eq!(
        info_field(&mut e, c, "master_repl_offset"),
        sent.len().to_string()
    );
    assert_eq!(info_field(&mut e, c, "master_replid"), id);
    cmd(&mut e, c, &["select", "1"]);
    assert_eq!(bulk_text(&cmd(&mut e, c, &["get", "n"])), "1.5");
    // Promoted: its own writes go out, after a SELECT, at the offsets
    // that follow the primary's.
    assert_eq!(cmd(&mut e, c, &["replicaof", "no", "one"]), "+OK\r\n");
    assert_eq!(info_field(&mut e, c, "master_replid2"), id);
    assert_eq!(
        info_field(&mut e, c, "second_repl_offset"),
        (sent.len() + 1).to_string()
    );
    cmd(&mut e, c, &["set", "b", "2"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![v(&["SELECT", "1"]), v(&["set", "b", "2"])]
    );
    let after: usize = info_field(&mut e, c, "master_repl_offset").parse().unwrap();
    assert!(after > sent.len(), "{after}");
}
