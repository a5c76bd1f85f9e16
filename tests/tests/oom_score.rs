//! `oom-score-adj`: the server's `/proc/PID/oom_score_adj` follows the
//! directives and its role (primary, replica), relative to the score it
//! started with or absolute, and goes back to that score with `no` — so
//! that the kernel's OOM killer takes a replica before a primary.

use ringkv_e2e::v::ok;
use ringkv_e2e::{Opts, e2e, q, query};

fn score(srv: &ringkv_e2e::Server) -> i32 {
    let pid = srv.pid().expect("a running server");
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

e2e!(
    fn the_oom_score_follows_the_directives_and_the_role(b) {
        let srv = b.start(Opts::new().arg("oom-score-adj-values", "10 20 30"));
        // Inherited from the test process: what `relative` adds to.
        let base = score(&srv);
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG SET oom-score-adj yes"), ok());
        assert_eq!(score(&srv), base + 10);
        assert_eq!(query(c, &["CONFIG", "SET", "oom-score-adj-values", "15 20 30"]), ok());
        assert_eq!(score(&srv), base + 15);
        // A replica takes the second value, a primary again the first.
        assert_eq!(q(c, "REPLICAOF 127.0.0.1 1"), ok());
        assert_eq!(score(&srv), base + 20);
        assert_eq!(q(c, "REPLICAOF NO ONE"), ok());
        assert_eq!(score(&srv), base + 15);
        assert_eq!(q(c, "CONFIG SET oom-score-adj absolute"), ok());
        assert_eq!(score(&srv), 15);
        assert_eq!(q(c, "CONFIG SET oom-score-adj no"), ok());
        assert_eq!(score(&srv), base);
    }
);

e2e!(
    fn a_replica_started_with_the_directive_has_its_score_at_once(b) {
        let primary = b.server();
        let srv = b.start(
            Opts::new()
                .arg("oom-score-adj", "absolute")
                .arg("oom-score-adj-values", "5 300 800")
                .arg("replicaof", &format!("127.0.0.1 {}", primary.port)),
        );
        assert_eq!(score(&srv), 300);
    }
);
