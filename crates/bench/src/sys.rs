//! Thin syscall helpers: the clock, CPU accounting, and blocking
//! connections used outside the hot path (connect + handshake, INFO).

use resp::value::{Value, parse_value};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{IntoRawFd, RawFd};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC in ns. A vDSO call (~20 ns), taken once per send batch
/// and once per receive batch, not per request.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// user + system CPU of this whole process (all threads), in µs.
pub fn self_cpu_us() -> u64 {
    // SAFETY: an all-zero rusage is a valid value; getrusage only writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// utime + stime of process `pid` from /proc (clock ticks → µs).
pub fn proc_cpu_us(pid: u32) -> Result<u64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The command name may hold spaces or ')': fields start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("malformed /proc stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')' field 3 (state) is index 0, so utime (14) is 11 and stime (15) is 12.
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or("malformed /proc stat")
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok((ticks(11)? + ticks(12)?) * 1_000_000 / hz)
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub auth: Option<String>,
    pub resp: Option<u8>,
    pub timeout: Duration,
}

/// A blocking connection for set-up and INFO, with read/write timeouts.
/// The eviction test also pipelines through it ([`Blocking::send`] many
/// requests, then [`Blocking::read_reply`] as many times).
pub struct Blocking {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed: replies of a pipeline are consumed by
    /// moving this offset, not by shifting the buffer once per reply.
    start: usize,
}

impl Blocking {
    /// Connect, retrying refused connections until `timeout`, then run the
    /// handshake (HELLO / AUTH).
    pub fn connect(t: &Target) -> Result<Self, String> {
        let start = Instant::now();
        let addrs: Vec<_> = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}:{}: {e}", t.host, t.port))?
            .collect();
        let mut last_err = String::from("no address");
        loop {
            for a in &addrs {
                match TcpStream::connect_timeout(a, t.timeout) {
                    Ok(stream) => {
                        stream.set_nodelay(true).map_err(|e| e.to_string())?;
                        stream
                            .set_read_timeout(Some(t.timeout))
                            .map_err(|e| e.to_string())?;
                        stream
                            .set_write_timeout(Some(t.timeout))
                            .map_err(|e| e.to_string())?;
                        let mut c = Blocking {
                            stream,
                            buf: Vec::new(),
                            start: 0,
                        };
                        c.handshake(t)?;
                        return Ok(c);
                    }
                    Err(e) => last_err = e.to_string(),
                }
            }
            if start.elapsed() >= t.timeout {
                return Err(format!(
                    "cannot connect to {}:{}: {last_err}",
                    t.host, t.port
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn handshake(&mut self, t: &Target) -> Result<(), String> {
        let reply = match (t.resp, &t.auth) {
            (Some(v), Some(pw)) => {
                Some(self.call(&["HELLO", &v.to_string(), "AUTH", "default", pw])?)
            }
            (Some(v), None) => Some(self.call(&["HELLO", &v.to_string()])?),
            (None, Some(pw)) => Some(self.call(&["AUTH", pw])?),
            (None, None) => None,
        };
        if let Some(Value::Error(e)) = reply {
            return Err(format!(
                "handshake refused: {}",
                String::from_utf8_lossy(&e)
            ));
        }
        Ok(())
    }

    /// Send one command and read its reply.
    pub fn call(&mut self, args: &[&str]) -> Result<Value, String> {
        let mut out = Vec::new();
        resp::encode_command(args, &mut out);
        self.send(&out)?;
        self.read_reply()
    }

    /// Write already-encoded requests (any number of them).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .map_err(|e| format!("send: {e}"))
    }

    /// Read the next reply.
    pub fn read_reply(&mut self) -> Result<Value, String> {
        loop {
            let pending = &self.buf[self.start..];
            if let Some((v, n)) = parse_value(pending).map_err(|e| format!("bad reply: {e}"))? {
                self.start += n;
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                return Ok(v);
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("connection closed by server".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Hand over the socket, non-blocking, for the event loop.
    pub fn into_fd(self) -> Result<RawFd, String> {
        if self.start != self.buf.len() {
            return Err("unexpected bytes after handshake".into());
        }
        self.stream
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        Ok(self.stream.into_raw_fd())
    }
}

/// `INFO` fields that say what the server spent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerCpu {
    pub cpu_us: u64,
    pub commands: Option<u64>,
}

/// Parse `used_cpu_user`, `used_cpu_sys` (seconds) and
/// `total_commands_processed` out of an INFO reply.
pub fn parse_info_cpu(info: &str) -> Option<ServerCpu> {
    let mut user = None;
    let mut sys = None;
    let mut commands = None;
    for line in info.lines() {
        let line = line.trim_end();
        if let Some(v) = line.strip_prefix("used_cpu_user:") {
            user = v.parse::<f64>().ok();
        } else if let Some(v) = line.strip_prefix("used_cpu_sys:") {
            sys = v.parse::<f64>().ok();
        } else if let Some(v) = line.strip_prefix("total_commands_processed:") {
            commands = v.parse::<u64>().ok();
        }
    }
    Some(ServerCpu {
        cpu_us: ((user? + sys?) * 1e6).round() as u64,
        commands,
    })
}

pub fn info_cpu(c: &mut Blocking) -> Result<ServerCpu, String> {
    let text = match c.call(&["INFO", "all"])? {
        Value::Bulk(b) | Value::Verbatim { text: b, .. } => {
            String::from_utf8_lossy(&b).into_owned()
        }
        Value::Error(e) => return Err(format!("INFO: {}", String::from_utf8_lossy(&e))),
        other => return Err(format!("INFO: unexpected reply {other:?}")),
    };
    parse_info_cpu(&text).ok_or_else(|| "INFO has no used_cpu_user/used_cpu_sys".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_cpu_fields() {
        let info = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\nused_cpu_sys_children:9\r\n# Stats\r\ntotal_commands_processed:42\r\n";
        assert_eq!(
            parse_info_cpu(info),
            Some(ServerCpu {
                cpu_us: 1_750_000,
                commands: Some(42)
            })
        );
        assert_eq!(parse_info_cpu("used_cpu_user:1\r\n"), None);
    }

    #[test]
    fn own_cpu_and_proc_stat_agree_roughly() {
        let t = now_ns();
        let mut x = 0u64;
        while now_ns() - t < 30_000_000 {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(self_cpu_us() >= 10_000);
        let mine = proc_cpu_us(std::process::id()).unwrap();
        assert!(mine >= 10_000, "{mine}");
        assert!(proc_cpu_us(u32::MAX).is_err());
    }
}
