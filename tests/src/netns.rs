//! A "remote" host for tests: a network namespace joined to this one by a
//! veth pair, `<prefix>.1` on our side and `<prefix>.2` inside. Needs root
//! and iproute2; [`Netns::available`] says whether a test can make one.

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// One namespace at a time: tests of one binary run in parallel, and each
/// variant uses the same names and addresses.
pub static NETNS: Mutex<()> = Mutex::new(());

pub struct Netns {
    name: String,
    prefix: String,
}

impl Netns {
    /// Root and `ip` are here (else the caller skips, saying why).
    pub fn available() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        root && run(&["ip", "-V"]).is_ok()
    }

    /// `name` with `<prefix>.2/24` inside, `<prefix>.1/24` on our end.
    pub fn create(name: &str, prefix: &str) -> Result<Netns, String> {
        let _ = run(&["ip", "netns", "del", name]);
        run(&["ip", "netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
            prefix: prefix.to_string(),
        };
        let host = format!("{name}h");
        let peer = format!("{name}p");
        let (ours, theirs) = (format!("{prefix}.1/24"), format!("{prefix}.2/24"));
        run(&[
            "ip", "link", "add", &host, "type", "veth", "peer", "name", &peer,
        ])?;
        run(&["ip", "link", "set", &peer, "netns", name])?;
        run(&["ip", "addr", "add", &ours, "dev", &host])?;
        run(&["ip", "link", "set", &host, "up"])?;
        ns.exec(&["ip", "addr", "add", &theirs, "dev", &peer])?;
        ns.exec(&["ip", "link", "set", &peer, "up"])?;
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Our end of the veth pair (for `tc`, or to take the link down).
    pub fn host_veth(&self) -> String {
        format!("{}h", self.name)
    }

    /// Our address as the namespace sees it.
    pub fn host_addr(&self) -> String {
        format!("{}.1", self.prefix)
    }

    /// The namespace's own address.
    pub fn inner_addr(&self) -> String {
        format!("{}.2", self.prefix)
    }

    /// Run a command inside the namespace and wait for it.
    pub fn exec(&self, args: &[&str]) -> Result<String, String> {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Start a long-running command inside the namespace.
    pub fn spawn(&self, args: &[&str], log: std::fs::File) -> std::io::Result<Child> {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    }

    /// redis-cli from inside the namespace to `host:port` (10 s at most).
    pub fn cli(&self, host: &str, port: u16, args: &[&str]) -> String {
        let p = port.to_string();
        let mut full = vec!["timeout", "10", "redis-cli", "-h", host, "-p", &p];
        full.extend_from_slice(args);
        self.exec(&full).unwrap_or_else(|e| e)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, which takes the peer.
        let _ = run(&["ip", "netns", "del", &self.name]);
        let _ = run(&["ip", "link", "del", &format!("{}h", self.name)]);
    }
}

/// Run a command; its output (stdout then stderr), or the same as the error.
pub fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}
