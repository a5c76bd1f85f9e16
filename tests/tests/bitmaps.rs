//! Bitmap commands against the real binary with binary-safe values
//! through the `redis` crate.

use ringkv_e2e::v::int;
use ringkv_e2e::{e2e, q};

e2e!(
    fn bitmaps_through_a_client(b) {
        let srv = b.server();
        let c = &mut srv.client();
        // A daily-active-users bitmap: users 3, 10 and 1000 were seen.
        for u in [3, 10, 1000] {
            assert_eq!(q(c, &format!("SETBIT dau {u} 1")), int(0));
        }
        assert_eq!(q(c, "BITCOUNT dau"), int(3));
        assert_eq!(q(c, "BITPOS dau 1"), int(3));
        assert_eq!(q(c, "GETBIT dau 1000"), int(1));
        assert_eq!(q(c, "STRLEN dau"), int(126));
        let raw: Vec<u8> = redis::cmd("GET").arg("dau").query(c).unwrap();
        assert_eq!(&raw[..2], &[0b0001_0000, 0b0010_0000]);
        assert_eq!(q(c, "SETBIT other 10 1"), int(0));
        assert_eq!(q(c, "BITOP AND both dau other"), int(126));
        assert_eq!(q(c, "BITCOUNT both"), int(1));
        let v: Vec<Option<i64>> = redis::cmd("BITFIELD")
            .arg("counters").arg("INCRBY").arg("u4").arg("#0").arg(9)
            .arg("OVERFLOW").arg("FAIL").arg("INCRBY").arg("u4").arg("#0").arg(9)
            .arg("GET").arg("u4").arg("#0")
            .query(c)
            .unwrap();
        assert_eq!(v, vec![Some(9), None, Some(9)]);
    }
);
