//! Arbitrary bytes as a config file (valkey.conf): it loads or is
//! refused with a reason, never a panic; and what loads, written out by
//! CONFIG REWRITE (its `user` lines as the server writes them), loads
//! again to the same settings and users.
#![no_main]

use engine::acl::Acl;
use engine::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match Config::parse_file_text(text, "fuzz.conf") {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.reason.is_empty());
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("ringkv-fuzz-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("rewritten.conf");
    let _ = std::fs::remove_file(&path);
    let users = |c: &Config| -> Vec<String> {
        let mut acl = Acl::new();
        for u in &c.users {
            acl.declare(u);
        }
        acl.users_sorted().iter().map(|u| u.describe()).collect()
    };
    config
        .rewrite(&path, &users(&config))
        .expect("CONFIG REWRITE writes its file");
    let rewritten = std::fs::read_to_string(&path).expect("read the rewritten file");
    let again = Config::parse_file_text(&rewritten, "rewritten.conf")
        .unwrap_or_else(|e| panic!("the rewritten file does not load: {e:?}\n{rewritten}"));
    assert_eq!(users(&again), users(&config), "users after a rewrite:\n{rewritten}");
    for name in Config::names().filter(|n| *n != "dir") {
        assert_eq!(again.get(name), config.get(name), "{name} after a rewrite:\n{rewritten}");
    }
});
