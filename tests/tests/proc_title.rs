//! `set-proc-title` and `proc-title-template`: what `ps` shows for the
//! server (`/proc/PID/cmdline`), as Valkey 8.1 shows it for itself — the
//! same steps run against Valkey as the oracle.

use ringkv_e2e::{Backend, Opts, Reply, Server, e2e};

/// The command line as `ps` shows it: the text before the first NUL (a
/// title is one string; the original arguments are several).
fn title(srv: &Server) -> String {
    let raw = std::fs::read(format!("/proc/{}/cmdline", srv.pid().unwrap())).unwrap();
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

fn title_follows_the_template_and_the_port(b: Backend) {
    let bin = b.binary().display().to_string();
    let srv = b.server();
    let mut c = srv.raw();
    assert_eq!(title(&srv), format!("{bin} 127.0.0.1:{}", srv.port));

    let template = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}";
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "proc-title-template", template]),
        Reply::status("OK")
    );
    let p = srv.port;
    assert_eq!(title(&srv), format!("TEST {bin} 127.0.0.1:{p} {p} 0  -"));

    // Valkey's validation: unknown variables, an open brace, or nothing
    // left once expanded with an empty title.
    for bad in ["{invalid-var}", "{title", "{unixsocket}", " {title} "] {
        let r = c.cmd(&["CONFIG", "SET", "proc-title-template", bad]);
        assert!(
            r.text().contains("template format is invalid"),
            "{bad}: {r:?}"
        );
    }
    assert_eq!(title(&srv), format!("TEST {bin} 127.0.0.1:{p} {p} 0  -"));

    // A new port: the title follows it.
    let port = ringkv_e2e::server::free_port();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &port.to_string()]),
        Reply::status("OK")
    );
    assert_eq!(
        title(&srv),
        format!("TEST {bin} 127.0.0.1:{port} {port} 0  -")
    );
    // Longer than the arguments it replaces: it takes the environment's
    // room too, up to Valkey's 255 bytes.
    let long = format!("{{title}} {}", "x".repeat(400));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "proc-title-template", &long]),
        Reply::status("OK")
    );
    let mut want = format!("{bin} {}", "x".repeat(400));
    want.truncate(255);
    assert_eq!(title(&srv), want);
}

e2e!(
    fn the_process_title_follows_the_template_and_the_port(b) {
        title_follows_the_template_and_the_port(b);
    }
);

#[test]
fn valkey_shows_the_same_titles() {
    title_follows_the_template_and_the_port(Backend::Valkey);
}

fn title_only_when_asked(b: Backend) {
    let bin = b.binary().display().to_string();
    let srv = b.start(Opts::new().arg("set-proc-title", "no"));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", srv.pid().unwrap())).unwrap();
    let args: Vec<&[u8]> = cmdline.split(|&x| x == 0).collect();
    assert_eq!(args[0], bin.as_bytes());
    assert!(args.contains(&&b"--set-proc-title"[..]), "{args:?}");
    // As Valkey: setting the template writes the title all the same.
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "proc-title-template",
            "{title} port {port}"
        ]),
        Reply::status("OK")
    );
    assert_eq!(title(&srv), format!("{bin} port {}", srv.port));
}

e2e!(
    fn without_set_proc_title_the_arguments_stay_until_the_template_is_set(b) {
        title_only_when_asked(b);
    }
);

#[test]
fn valkey_keeps_its_arguments_the_same_way() {
    title_only_when_asked(Backend::Valkey);
}
