//! Expiry as a client sees it: lazily on access, and actively in the
//! background for keys nobody touches.

use std::time::{Duration, Instant};

use ringkv_e2e::v::{bulk, int, int_of, nil, ok, text};
use ringkv_e2e::{e2e, info_field, q};

e2e!(
    fn lazy_expiry_on_access(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v PX 50"), ok());
        assert_eq!(q(c, "SET k2 v PX 50"), ok());
        assert_eq!(q(c, "SET k3 v PX 50"), ok());
        assert_eq!(q(c, "SET keep v"), ok());
        assert_eq!(q(c, "GET k"), bulk("v"));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(q(c, "GET k"), nil());
        assert_eq!(q(c, "EXISTS k2"), int(0));
        assert_eq!(q(c, "TTL k3"), int(-2));
        assert_eq!(q(c, "APPEND k3 x"), int(1), "APPEND on an expired key starts fresh");
        assert_eq!(q(c, "TTL k3"), int(-1));
        assert_eq!(q(c, "GET keep"), bulk("v"));
    }
);

e2e!(
    fn active_expiry_of_untouched_keys(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut p = redis::pipe();
        for i in 0..1000 {
            p.cmd("SET").arg(format!("e:{i}")).arg("v").arg("PX").arg(100).ignore();
        }
        p.cmd("SELECT").arg(3).ignore();
        for i in 0..100 {
            p.cmd("SET").arg(format!("e3:{i}")).arg("v").arg("PX").arg(100).ignore();
        }
        p.cmd("SET").arg("stays3").arg("v").ignore();
        p.cmd("SELECT").arg(0).ignore();
        p.cmd("SET").arg("stays").arg("v").ignore();
        let () = p.query(c).unwrap();
        // DBSIZE does not touch keys, so only the active cycle can shrink it.
        let start = Instant::now();
        let mut n = int_of(&q(c, "DBSIZE"));
        assert!(n > 1, "keys expired before the check started");
        while n > 1 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(50));
            n = int_of(&q(c, "DBSIZE"));
        }
        assert_eq!(n, 1, "active expiry left {} of 1000 expired keys after 2 s", n - 1);
        let stats = text(&q(c, "INFO stats"));
        let expired: i64 = info_field(&stats, "expired_keys").parse().unwrap();
        assert!(expired >= 1000, "expired_keys:{expired}");
        // The other database is swept too.
        let start = Instant::now();
        assert_eq!(q(c, "SELECT 3"), ok());
        let mut n3 = int_of(&q(c, "DBSIZE"));
        while n3 > 1 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(50));
            n3 = int_of(&q(c, "DBSIZE"));
        }
        assert_eq!(n3, 1);
        let ks = text(&q(c, "INFO keyspace"));
        assert!(ks.contains("db0:keys=1,expires=0"), "{ks}");
        assert!(ks.contains("db3:keys=1,expires=0"), "{ks}");
    }
);

e2e!(
    fn expire_then_overwrite_and_persist(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v PX 80"), ok());
        assert_eq!(q(c, "PERSIST k"), int(1));
        assert_eq!(q(c, "SET j v PX 80"), ok());
        assert_eq!(q(c, "SET j w"), ok());
        assert_eq!(q(c, "SET i 1 PX 80"), ok());
        assert_eq!(q(c, "INCR i"), int(2), "INCR keeps the TTL");
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(q(c, "GET k"), bulk("v"));
        assert_eq!(q(c, "GET j"), bulk("w"));
        assert_eq!(q(c, "GET i"), nil());
        let ks = text(&q(c, "INFO keyspace"));
        assert!(ks.contains("db0:keys=2,expires=0"), "{ks}");
    }
);
