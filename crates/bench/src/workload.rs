//! What to send: the built-in tests and `--` templates, pre-encoded.
//!
//! Every command is encoded to RESP once, at start-up, with fixed-width holes
//! for its keys and data. Issuing a request is one `extend_from_slice` into
//! the connection's send buffer plus writing 12 digits into each key hole,
//! so the hot path neither formats nor allocates.
//!
//! Values are a function of the key: the first bytes of a value are the
//! key's digits, the rest `x`. That is what lets `--verify` check a GET
//! against the SET that wrote the key, even one from an earlier run.

use crate::keygen::KeyGen;

/// Width of a key number: `key:000000012345`, as redis-benchmark writes
/// `__rand_int__`, so both tools hit the same keys.
pub const KEY_DIGITS: usize = 12;

/// The `-t` tests, in redis-benchmark's spelling.
pub const TEST_NAMES: &[&str] = &[
    "ping", "set", "get", "incr", "lpush", "rpop", "sadd", "hset", "zadd", "mset", "mixed",
];

/// Default `-t`: everything except `mixed`, as redis-benchmark does.
pub const DEFAULT_TESTS: &[&str] = &[
    "ping", "set", "get", "incr", "lpush", "rpop", "sadd", "hset", "zadd", "mset",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Hole {
    Key,
    Data,
}

/// One pre-encoded command with holes.
#[derive(Clone, Debug)]
pub struct Template {
    /// Label for stats (upper-case command name, `SET`, `GET`...).
    pub name: String,
    bytes: Vec<u8>,
    holes: Vec<(usize, Hole)>,
    /// Reply is the value of the (single) key: `--verify` checks it.
    pub reads_value: bool,
    /// Writes the value of the (single) key: `--verify` remembers it.
    pub writes_value: bool,
}

/// Data-hole width; the rest of the value comes from the template bytes.
fn data_prefix(data_size: usize) -> usize {
    data_size.min(KEY_DIGITS)
}

fn write_digits(dst: &mut [u8], mut k: u64) {
    for b in dst.iter_mut().rev() {
        *b = b'0' + (k % 10) as u8;
        k /= 10;
    }
}

/// The value this tool stores under key `k` (used by tests and `--verify`).
pub fn value_for_key(k: u64, data_size: usize) -> Vec<u8> {
    let mut v = vec![b'x'; data_size];
    fill_value(&mut v, k);
    v
}

fn fill_value(dst: &mut [u8], k: u64) {
    let mut digits = [0u8; KEY_DIGITS];
    write_digits(&mut digits, k);
    let n = data_prefix(dst.len());
    dst[..n].copy_from_slice(&digits[KEY_DIGITS - n..]);
}

/// Whether `got` is what [`value_for_key`] gives, without allocating.
pub fn value_matches(got: &[u8], k: u64, data_size: usize) -> bool {
    if got.len() != data_size {
        return false;
    }
    let mut digits = [0u8; KEY_DIGITS];
    write_digits(&mut digits, k);
    let n = data_prefix(data_size);
    got[..n] == digits[KEY_DIGITS - n..] && got[n..].iter().all(|&b| b == b'x')
}

impl Template {
    /// Build from arguments in which `__rand_key__`/`__rand_int__` stand for a
    /// key number and `__data__` for a value of `data_size` bytes.
    pub fn from_args<S: AsRef<str>>(args: &[S], data_size: usize) -> Result<Self, String> {
        let Some(first) = args.first() else {
            return Err("empty command template".into());
        };
        let name = first.as_ref().to_ascii_uppercase();
        let mut bytes = Vec::new();
        let mut holes = Vec::new();
        bytes.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        let mut keys = 0;
        for a in args {
            let pieces = split_placeholders(a.as_ref());
            let len: usize = pieces
                .iter()
                .map(|p| match p {
                    Piece::Text(t) => t.len(),
                    Piece::Key => KEY_DIGITS,
                    Piece::Data => data_size,
                })
                .sum();
            bytes.extend_from_slice(format!("${len}\r\n").as_bytes());
            for p in pieces {
                match p {
                    Piece::Text(t) => bytes.extend_from_slice(t.as_bytes()),
                    Piece::Key => {
                        holes.push((bytes.len(), Hole::Key));
                        keys += 1;
                        bytes.extend_from_slice(&[b'0'; KEY_DIGITS]);
                    }
                    Piece::Data => {
                        holes.push((bytes.len(), Hole::Data));
                        bytes.extend(std::iter::repeat_n(b'x', data_size));
                    }
                }
            }
            bytes.extend_from_slice(b"\r\n");
        }
        let single_key = keys == 1 && args.len() >= 2;
        Ok(Template {
            reads_value: single_key && name == "GET" && args.len() == 2,
            writes_value: single_key
                && name == "SET"
                && args.len() == 3
                && args[2].as_ref() == "__data__",
            name,
            bytes,
            holes,
        })
    }

    /// Append one request to `out`; the key of the first key hole (or
    /// `u64::MAX` if there is none) is returned, for `--verify`.
    #[inline]
    pub fn emit(&self, out: &mut Vec<u8>, keys: &mut KeyGen, data_size: usize, seq: u64) -> u64 {
        let base = out.len();
        out.extend_from_slice(&self.bytes);
        let mut first = u64::MAX;
        // A data hole takes the value of the key just before it (MSET
        // pairs), or the request number if no key precedes it (LPUSH).
        let mut last = seq;
        for &(off, hole) in &self.holes {
            let at = base + off;
            match hole {
                Hole::Key => {
                    let k = keys.next_key();
                    write_digits(&mut out[at..at + KEY_DIGITS], k);
                    if first == u64::MAX {
                        first = k;
                    }
                    last = k;
                }
                Hole::Data => fill_value(&mut out[at..at + data_size], last),
            }
        }
        first
    }

    /// The encoded template (holes filled with zeros and `x`).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

enum Piece<'a> {
    Text(&'a str),
    Key,
    Data,
}

fn split_placeholders(mut s: &str) -> Vec<Piece<'_>> {
    const MARKS: [(&str, Piece<'static>); 3] = [
        ("__rand_key__", Piece::Key),
        ("__rand_int__", Piece::Key),
        ("__data__", Piece::Data),
    ];
    let mut out = Vec::new();
    loop {
        let next = MARKS
            .iter()
            .filter_map(|(m, p)| s.find(m).map(|i| (i, m.len(), p)))
            .min_by_key(|&(i, _, _)| i);
        match next {
            None => {
                if !s.is_empty() {
                    out.push(Piece::Text(s));
                }
                return out;
            }
            Some((i, len, p)) => {
                if i > 0 {
                    out.push(Piece::Text(&s[..i]));
                }
                out.push(match p {
                    Piece::Key => Piece::Key,
                    _ => Piece::Data,
                });
                s = &s[i + len..];
            }
        }
    }
}

/// What one test run sends: one template, or SET and GET in a ratio.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Test name for reports (`get`, `mixed`, `custom`...).
    pub name: String,
    pub templates: Vec<Template>,
    /// For each template, how many of every `sum(weights)` requests use it.
    weights: Vec<u32>,
    period: u32,
}

impl Workload {
    pub fn single(name: &str, t: Template) -> Self {
        Workload {
            name: name.into(),
            templates: vec![t],
            weights: vec![1],
            period: 1,
        }
    }

    /// A built-in `-t` test.
    pub fn builtin(test: &str, data_size: usize, ratio: (u32, u32)) -> Result<Self, String> {
        let t = |args: &[&str]| Template::from_args(args, data_size);
        let key = "key:__rand_key__";
        let w = match test {
            "ping" => Workload::single(test, t(&["PING"])?),
            "set" => Workload::single(test, t(&["SET", key, "__data__"])?),
            "get" => Workload::single(test, t(&["GET", key])?),
            "incr" => Workload::single(test, t(&["INCR", "counter:__rand_key__"])?),
            "lpush" => Workload::single(test, t(&["LPUSH", "mylist", "__data__"])?),
            "rpop" => Workload::single(test, t(&["RPOP", "mylist"])?),
            "sadd" => Workload::single(test, t(&["SADD", "myset", "element:__rand_key__"])?),
            "hset" => Workload::single(
                test,
                t(&["HSET", "myhash", "element:__rand_key__", "__data__"])?,
            ),
            "zadd" => Workload::single(test, t(&["ZADD", "myzset", "0", "element:__rand_key__"])?),
            "mset" => {
                let mut args = vec!["MSET"];
                for _ in 0..10 {
                    args.extend([key, "__data__"]);
                }
                Workload::single(test, t(&args)?)
            }
            "mixed" => {
                let (s, g) = ratio;
                if s + g == 0 {
                    return Err("--ratio 0:0 sends nothing".into());
                }
                Workload {
                    name: test.into(),
                    templates: vec![t(&["SET", key, "__data__"])?, t(&["GET", key])?],
                    weights: vec![s, g],
                    period: s + g,
                }
            }
            other => {
                return Err(format!(
                    "unknown test {other:?}; known: {}",
                    TEST_NAMES.join(",")
                ));
            }
        };
        Ok(w)
    }

    /// Which template request number `seq` uses: a fixed interleave, so the
    /// ratio holds exactly over every `period` requests.
    #[inline]
    pub fn pick(&self, seq: u64) -> usize {
        if self.period == 1 {
            return 0;
        }
        let mut r = (seq % self.period as u64) as u32;
        for (i, &w) in self.weights.iter().enumerate() {
            if r < w {
                return i;
            }
            r -= w;
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keygen::KeyPattern;

    #[test]
    fn set_template_encodes_resp_with_key_and_value() {
        let t = Template::from_args(&["SET", "key:__rand_key__", "__data__"], 16).unwrap();
        let mut keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 42);
        let mut out = Vec::new();
        let k = t.emit(&mut out, &mut keys, 16, 0);
        assert_eq!(k, 42);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n$16\r\n000000000042xxxx\r\n"
        );
        assert!(t.writes_value && !t.reads_value);
        let parsed = resp::value::parse_value(&out).unwrap().unwrap();
        assert_eq!(parsed.1, out.len());
    }

    #[test]
    fn short_values_keep_the_low_digits() {
        assert_eq!(value_for_key(1234, 3), b"234");
        assert!(value_matches(b"234", 1234, 3));
        assert!(!value_matches(b"235", 1234, 3));
        assert!(!value_matches(b"234x", 1234, 3));
        assert!(value_matches(&value_for_key(7, 100), 7, 100));
    }

    #[test]
    fn mset_pairs_value_with_its_key() {
        let w = Workload::builtin("mset", 12, (1, 1)).unwrap();
        let mut keys = KeyGen::new(KeyPattern::Sequential, 1000, 0, 5);
        let mut out = Vec::new();
        w.templates[0].emit(&mut out, &mut keys, 12, 0);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with(
            "*21\r\n$4\r\nMSET\r\n$16\r\nkey:000000000005\r\n$12\r\n000000000005\r\n"
        ));
        assert!(s.contains("key:000000000014\r\n$12\r\n000000000014\r\n"));
    }

    #[test]
    fn mixed_ratio_interleaves_exactly() {
        let w = Workload::builtin("mixed", 3, (1, 3)).unwrap();
        let picks: Vec<usize> = (0..8).map(|i| w.pick(i)).collect();
        assert_eq!(picks, [0, 1, 1, 1, 0, 1, 1, 1]);
        assert_eq!(w.templates[0].name, "SET");
        assert_eq!(w.templates[1].name, "GET");
        assert!(w.templates[1].reads_value);
    }

    #[test]
    fn custom_placeholders_inside_arguments() {
        let t = Template::from_args(&["hset", "h:__rand_int__", "f", "__data__"], 2).unwrap();
        assert_eq!(t.name, "HSET");
        assert_eq!(
            t.bytes(),
            b"*4\r\n$4\r\nhset\r\n$14\r\nh:000000000000\r\n$1\r\nf\r\n$2\r\nxx\r\n"
        );
        assert!(Template::from_args::<&str>(&[], 2).is_err());
        assert!(Workload::builtin("nope", 3, (1, 1)).is_err());
    }
}
