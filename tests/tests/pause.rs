//! CLIENT PAUSE / UNPAUSE against the real binary: held commands wait
//! (they do not fail) and then run in order, reads go on during a WRITE
//! pause, UNPAUSE releases at once.

use ringkv_e2e::{Reply, e2e};
use std::time::{Duration, Instant};

e2e!(
    fn a_write_pause_holds_writes_and_their_followers_in_order(b) {
        let srv = b.server();
        let mut admin = srv.raw();
        let mut writer = srv.raw();
        let mut reader = srv.raw();
        assert_eq!(reader.cmd(&["SET", "k", "old"]), Reply::status("OK"));
        let t0 = Instant::now();
        assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "400", "WRITE"]), Reply::status("OK"));
        // A pipeline whose first command is a write: all of it waits.
        writer.send(&ringkv_e2e::raw::encode_str(&["SET", "k", "new"]));
        writer.send(&ringkv_e2e::raw::encode_str(&["GET", "k"]));
        writer.send(&ringkv_e2e::raw::encode_str(&["INCR", "n"]));
        // Reads of other clients go on meanwhile, and see the old value.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(reader.cmd(&["GET", "k"]), Reply::bulk("old"));
        assert!(t0.elapsed() < Duration::from_millis(350), "reads were held");
        assert_eq!(writer.read_reply(), Reply::status("OK"));
        assert!(t0.elapsed() >= Duration::from_millis(390), "{:?}", t0.elapsed());
        assert_eq!(writer.read_reply(), Reply::bulk("new"));
        assert_eq!(writer.read_reply(), Reply::Int(1));
    }
);

e2e!(
    fn unpause_releases_held_clients_at_once(b) {
        let srv = b.server();
        let mut admin = srv.raw();
        let mut writer = srv.raw();
        assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]), Reply::status("OK"));
        writer.send(&ringkv_e2e::raw::encode_str(&["LPUSH", "l", "x"]));
        std::thread::sleep(Duration::from_millis(100));
        let list = admin.cmd(&["CLIENT", "LIST"]).text();
        assert!(list.contains("flags=b "), "{list}");
        let t0 = Instant::now();
        assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), Reply::status("OK"));
        assert_eq!(writer.read_reply(), Reply::Int(1));
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(
            admin.cmd(&["CLIENT", "PAUSE", "-5"]),
            Reply::err("ERR timeout is negative")
        );
    }
);

e2e!(
    fn an_all_pause_holds_reads_too(b) {
        let srv = b.server();
        let mut admin = srv.raw();
        let mut reader = srv.raw();
        let t0 = Instant::now();
        assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "300", "ALL"]), Reply::status("OK"));
        assert_eq!(reader.cmd(&["PING"]), Reply::status("PONG"));
        assert!(t0.elapsed() >= Duration::from_millis(290), "{:?}", t0.elapsed());
    }
);
