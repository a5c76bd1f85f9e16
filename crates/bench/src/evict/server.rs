//! The server side of the eviction test, over one blocking connection that
//! pipelines a batch of requests and then reads their replies, as
//! redis-cli's `--lru-test` does: set-up, the fill, and the cycles.

use super::args::EvictArgs;
use super::sim::{Counts, batch_sizes};
use super::trace::TraceGen;
use crate::sys::{Blocking, Target};
use crate::workload::KEY_DIGITS;
use resp::value::Value;
use std::time::{Duration, Instant};

/// The fill phase: SETs of keys 0, 1, 2, … until the server evicts.
#[derive(Clone, Debug, Default)]
pub struct Fill {
    /// Keys written: key 0 .. keys-1.
    pub keys: u64,
    /// `evicted_keys` when the fill stopped (0: the server never evicted).
    pub evicted: u64,
    pub dbsize: u64,
    pub used_memory: Option<u64>,
    pub seconds: f64,
    /// Why it stopped: "evicting", "keyspace written", "fill-max-keys", "fill-timeout".
    pub stop: &'static str,
}

/// One cycle of GETs (and SETs for their misses).
#[derive(Clone, Debug, Default)]
pub struct Cycle {
    pub warmup: bool,
    /// GETs sent (the cycle's slice of the trace).
    pub requests: u64,
    pub counts: Counts,
    /// Error replies to GET and to SET (the first message is kept).
    pub get_errors: u64,
    pub set_errors: u64,
    pub first_error: Option<String>,
    /// DBSIZE and `evicted_keys` growth at the cycle's end.
    pub dbsize: u64,
    pub evicted: u64,
    pub seconds: f64,
}

pub struct Client {
    conn: Blocking,
    value: Vec<u8>,
    out: Vec<u8>,
    evicted_seen: u64,
}

fn text_of(v: Value) -> Result<String, String> {
    match v {
        Value::Bulk(b) | Value::Simple(b) | Value::Verbatim { text: b, .. } => {
            Ok(String::from_utf8_lossy(&b).into_owned())
        }
        Value::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// `field:value` from INFO text.
pub fn info_field(info: &str, field: &str) -> Option<u64> {
    info.lines().find_map(|l| {
        l.trim_end()
            .strip_prefix(field)?
            .strip_prefix(':')?
            .parse()
            .ok()
    })
}

fn push_key(out: &mut Vec<u8>, k: u64) {
    out.extend_from_slice(b"$16\r\nkey:");
    let at = out.len();
    out.resize(at + KEY_DIGITS, b'0');
    let mut k = k;
    for b in out[at..].iter_mut().rev() {
        *b = b'0' + (k % 10) as u8;
        k /= 10;
    }
    out.extend_from_slice(b"\r\n");
}

impl Client {
    pub fn connect(a: &EvictArgs) -> Result<Self, String> {
        let target = Target {
            host: a.host.clone(),
            port: a.port,
            auth: a.auth.clone(),
            resp: None,
            timeout: a.timeout,
        };
        let mut value = format!("${}\r\n", a.data_size).into_bytes();
        value.resize(value.len() + a.data_size as usize, b'v');
        value.extend_from_slice(b"\r\n");
        Ok(Client {
            conn: Blocking::connect(&target)?,
            value,
            out: Vec::new(),
            evicted_seen: 0,
        })
    }

    fn ok(&mut self, args: &[&str]) -> Result<(), String> {
        text_of(self.conn.call(args)?)
            .map(drop)
            .map_err(|e| format!("{}: {e}", args.join(" ")))
    }

    /// CONFIG SET the policy, memory limit and samples, then FLUSHALL.
    pub fn setup(&mut self, a: &EvictArgs) -> Result<(), String> {
        // Limit 0 first, so that emptying the server cannot evict.
        self.ok(&["CONFIG", "SET", "maxmemory", "0"])?;
        self.ok(&["FLUSHALL"])?;
        self.ok(&["CONFIG", "SET", "maxmemory-policy", &a.policy])?;
        if let Some(s) = a.samples {
            self.ok(&["CONFIG", "SET", "maxmemory-samples", &s.to_string()])?;
        }
        self.ok(&["CONFIG", "SET", "maxmemory", &a.maxmemory])?;
        self.evicted_seen = self.evicted()?;
        Ok(())
    }

    /// One CONFIG GET value, or "?" if the server will not say.
    pub fn config(&mut self, name: &str) -> String {
        match self.conn.call(&["CONFIG", "GET", name]) {
            Ok(Value::Array(v)) if v.len() == 2 => {
                text_of(v[1].clone()).unwrap_or_else(|_| "?".into())
            }
            Ok(Value::Map(v)) if v.len() == 1 => {
                text_of(v[0].1.clone()).unwrap_or_else(|_| "?".into())
            }
            _ => "?".into(),
        }
    }

    pub fn info(&mut self, section: &str) -> Result<String, String> {
        text_of(self.conn.call(&["INFO", section])?).map_err(|e| format!("INFO: {e}"))
    }

    /// `evicted_keys` (0 where INFO has no such field: a server without
    /// eviction).
    pub fn evicted(&mut self) -> Result<u64, String> {
        Ok(info_field(&self.info("stats")?, "evicted_keys").unwrap_or(0))
    }

    pub fn dbsize(&mut self) -> Result<u64, String> {
        match self.conn.call(&["DBSIZE"])? {
            Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(format!("DBSIZE: unexpected reply {other:?}")),
        }
    }

    /// Send SETs for `keys`; returns error replies (and the first message).
    fn set_batch(&mut self, keys: &[u64], first_error: &mut Option<String>) -> Result<u64, String> {
        self.out.clear();
        for &k in keys {
            self.out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
            push_key(&mut self.out, k);
            self.out.extend_from_slice(&self.value);
        }
        self.conn.send(&self.out)?;
        let mut errors = 0;
        for _ in keys {
            if let Value::Error(e) = self.conn.read_reply()? {
                errors += 1;
                first_error.get_or_insert_with(|| String::from_utf8_lossy(&e).into_owned());
            }
        }
        Ok(errors)
    }

    /// SET keys 0, 1, 2, … in pipelined batches until `evicted_keys`
    /// grows, the keyspace (or --fill-max-keys) is written, or
    /// --fill-timeout passes. Bounded either way, so a server that never
    /// evicts is reported, not waited on.
    pub fn fill(&mut self, a: &EvictArgs) -> Result<Fill, String> {
        let t0 = Instant::now();
        let limit = a.fill_max_keys.unwrap_or(a.keyspace).min(a.keyspace);
        let mut keys: Vec<u64> = Vec::with_capacity(a.pipeline as usize);
        let mut fill = Fill::default();
        let mut first_error = None;
        let stop = loop {
            if fill.keys >= limit {
                break if limit == a.keyspace {
                    "keyspace written"
                } else {
                    "fill-max-keys"
                };
            }
            if t0.elapsed() >= a.fill_timeout {
                break "fill-timeout";
            }
            keys.clear();
            keys.extend(fill.keys..limit.min(fill.keys + a.pipeline as u64));
            if self.set_batch(&keys, &mut first_error)? > 0 {
                return Err(format!(
                    "SET failed while filling: {}",
                    first_error.unwrap_or_default()
                ));
            }
            fill.keys += keys.len() as u64;
            // One INFO per batch: the fill stops within one batch of the
            // first eviction.
            fill.evicted = self.evicted()?.saturating_sub(self.evicted_seen);
            if fill.evicted > 0 {
                break "evicting";
            }
        };
        fill.stop = stop;
        fill.seconds = t0.elapsed().as_secs_f64();
        fill.dbsize = self.dbsize()?;
        fill.used_memory = info_field(&self.info("memory")?, "used_memory");
        self.evicted_seen += fill.evicted;
        Ok(fill)
    }

    /// One cycle: batches of GETs drawn from `keys` (appended to `trace`),
    /// each followed by SETs of the keys it missed, until
    /// --cycle-requests GETs or --cycle-time.
    pub fn cycle(
        &mut self,
        a: &EvictArgs,
        keys: &mut TraceGen,
        trace: &mut Vec<u64>,
        warmup: bool,
    ) -> Result<Cycle, String> {
        let t0 = Instant::now();
        let mut c = Cycle {
            warmup,
            ..Cycle::default()
        };
        let mut missed = Vec::with_capacity(a.pipeline as usize);
        for b in batch_sizes(a.cycle_requests as usize, a.pipeline as usize) {
            let from = trace.len();
            self.out.clear();
            for _ in 0..b {
                let k = keys.next_key();
                trace.push(k);
                self.out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
                push_key(&mut self.out, k);
            }
            self.conn.send(&self.out)?;
            missed.clear();
            for &k in &trace[from..] {
                match self.conn.read_reply()? {
                    Value::Null => {
                        c.counts.misses += 1;
                        missed.push(k);
                    }
                    Value::Error(e) => {
                        c.get_errors += 1;
                        c.first_error
                            .get_or_insert_with(|| String::from_utf8_lossy(&e).into_owned());
                    }
                    _ => c.counts.hits += 1,
                }
            }
            if !missed.is_empty() {
                c.set_errors += self.set_batch(&missed, &mut c.first_error)?;
            }
            c.requests += b as u64;
            if a.rate > 0 {
                // Hold the cap: this cycle's GETs so far should have taken
                // requests / rate seconds.
                let due = Duration::from_secs_f64(c.requests as f64 / a.rate as f64);
                if let Some(ahead) = due.checked_sub(t0.elapsed()) {
                    std::thread::sleep(ahead);
                }
            }
            if t0.elapsed() >= a.cycle_time {
                break;
            }
        }
        c.seconds = t0.elapsed().as_secs_f64();
        c.dbsize = self.dbsize()?;
        let evicted = self.evicted()?;
        c.evicted = evicted.saturating_sub(self.evicted_seen);
        self.evicted_seen = evicted;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_twelve_digits() {
        let mut out = Vec::new();
        push_key(&mut out, 42);
        assert_eq!(out, b"$16\r\nkey:000000000042\r\n");
    }

    #[test]
    fn info_fields() {
        let info = "# Stats\r\nevicted_keys:17\r\nevicted_clients:0\r\n";
        assert_eq!(info_field(info, "evicted_keys"), Some(17));
        assert_eq!(info_field(info, "evicted"), None);
        assert_eq!(info_field(info, "keyspace_hits"), None);
    }
}
