//! What the log says first about the running server: ringkv's logo when
//! the log is a terminal (or `always-show-logo yes`), else Valkey's one
//! line `Running mode=standalone, port=N.`, as Valkey's serverAsciiArt
//! decides.

use engine::log::{self, Level};
use std::io::IsTerminal;

pub fn show(config: &engine::Config) {
    let yes = |name: &str| config.get(name).as_deref() == Some("yes");
    let to_terminal =
        !yes("syslog-enabled") && config.logfile.is_empty() && std::io::stdout().is_terminal();
    let port = config.port;
    if !(to_terminal || yes("always-show-logo")) {
        log::notice(&format!("Running mode=standalone, port={port}."));
        return;
    }
    let version = env!("CARGO_PKG_VERSION");
    let pid = std::process::id();
    log::raw(
        Level::Notice,
        &format!(
            r"
          .-''''''-.
        .'  .----.  '.        ringkv {version} 64 bit
       /  .'      '.  \
      |  |   ring   |  |      Running in standalone mode
      |  |    kv    |  |      Port: {port}
       \  '.      .'  /       PID: {pid}
        '.  '----'  .'
          '-......-'          Valkey protocol, io_uring and epoll

"
        ),
    );
}
