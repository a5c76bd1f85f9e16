//! `server-cpulist`, `bio-cpulist`, `bgsave-cpulist`: each of ringkv's
//! threads runs on the CPUs of its role, as Valkey pins its main and IO
//! threads, bio threads and BGSAVE child (checked in /proc per thread).

use ringkv_e2e::{Opts, Reply, e2e};

/// `Cpus_allowed_list` of a /proc status file.
fn allowed(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// (thread name, CPUs it may run on) for every thread of `pid`.
fn threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let dir = t.path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue; // a thread that just ended
        };
        out.push((comm.trim().to_string(), allowed(&status)));
    }
    out
}

fn cpus_of(pid: u32, name: &str) -> Vec<String> {
    threads(pid)
        .into_iter()
        .filter(|(n, _)| n.starts_with(name))
        .map(|(_, c)| c)
        .collect()
}

/// Until the threads called `name` exist and all run on `cpus` (a thread
/// pins itself first thing, so one just started may not have yet).
fn pinned(pid: u32, name: &str, cpus: &str) {
    let mut seen = Vec::new();
    let done = (0..500).any(|_| {
        seen = cpus_of(pid, name);
        if !seen.is_empty() && seen.iter().all(|c| c == cpus) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        false
    });
    assert!(done, "{name}: {seen:?}, not on {cpus}");
}

e2e!(
    ringkv_only fn each_thread_runs_on_the_cpus_of_its_role(b) {
        let mine = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
        let cpus: Vec<&str> = mine.split(',').flat_map(|r| r.split('-')).collect();
        let (server, other) = (cpus[0], cpus[cpus.len() - 1]);
        if server == other {
            eprintln!("one CPU only ({mine}): nothing to tell apart");
            return;
        }
        let srv = b.start(
            Opts::new()
                .arg("server-cpulist", server)
                .arg("bio-cpulist", other)
                .arg("bgsave-cpulist", other)
                .arg("appendonly", "yes")
                .arg("rdb-key-save-delay", "20000")
                .arg("save", ""),
        );
        let pid = srv.pid().unwrap();
        let mut c = srv.raw();
        // The thread that runs commands (the main thread) and any IO thread.
        pinned(pid, "ringkv-server", server);
        for io in cpus_of(pid, "io-thread") {
            assert_eq!(io, server);
        }
        // Bio: the AOF's threads, and lazyfree once it has work.
        for name in ["aof-writer", "aof-bio"] {
            pinned(pid, name, other);
        }
        let members: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
        let mut sadd = vec!["SADD", "big"];
        sadd.extend(members.iter().map(String::as_str));
        assert_eq!(c.cmd(&sadd), Reply::Int(2000));
        assert_eq!(c.cmd(&["UNLINK", "big"]), Reply::Int(1));
        pinned(pid, "lazyfree", other);
        // BGSAVE's writer, kept running by the per-key delay.
        for i in 0..50 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(c.cmd(&["BGSAVE"]), Reply::status("Background saving started"));
        pinned(pid, "rdb-writer", other);
    }
);
