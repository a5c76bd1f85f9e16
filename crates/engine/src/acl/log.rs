//! ACL LOG: the refusals (commands, keys, channels, failed AUTH), newest
//! first, with Valkey's grouping: a refusal like one of the ten newest
//! entries, logged less than a minute ago (same reason, context, object
//! and user), counts on that entry instead of adding one.

use std::collections::VecDeque;

/// How long a refusal still counts on a matching entry (Valkey's
/// `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const GROUPING_MS: i64 = 60_000;
/// How many of the newest entries are looked at for a match (Valkey
/// bounds that work the same way).
const SCAN_FOR_MATCH: usize = 10;

/// Where the refused command came from (ACL LOG `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    /// A client's own command: inside MULTI or not.
    pub fn of(sess: &crate::session::Session) -> Context {
        if sess.multi.is_some() {
            Context::Multi
        } else {
            Context::Toplevel
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry of ACL LOG.
#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: &'static str,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// The client, as CLIENT LIST shows it, at the last refusal.
    pub client_info: String,
    pub entry_id: u64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// The log itself.
#[derive(Debug, Default)]
pub struct AclLog {
    /// Newest first.
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// One refusal, as [`AclLog::add`] takes it.
pub struct Refusal<'a> {
    pub reason: &'static str,
    pub context: Context,
    pub object: &'a [u8],
    pub username: &'a [u8],
    pub client_info: String,
}

impl AclLog {
    /// Logs a refusal at `now_ms`, keeping at most `max_len` entries.
    pub fn add(&mut self, r: Refusal<'_>, now_ms: i64, max_len: usize) {
        let matching = self.entries.iter().take(SCAN_FOR_MATCH).position(|e| {
            e.reason == r.reason
                && e.context == r.context
                && e.object == r.object
                && e.username == r.username
                && now_ms - e.updated_ms <= GROUPING_MS
        });
        if let Some(i) = matching {
            let mut e = self.entries.remove(i).expect("position is in range");
            e.count += 1;
            e.updated_ms = now_ms;
            e.client_info = r.client_info;
            self.entries.push_front(e);
        } else {
            self.entries.push_front(Entry {
                count: 1,
                reason: r.reason,
                context: r.context,
                object: r.object.to_vec(),
                username: r.username.to_vec(),
                client_info: r.client_info,
                entry_id: self.next_id,
                created_ms: now_ms,
                updated_ms: now_ms,
            });
            self.next_id += 1;
        }
        self.entries.truncate(max_len);
    }

    /// The newest `n` entries.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(n)
    }

    /// ACL LOG RESET (entry ids go on from where they were, as Valkey's).
    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(object: &'static [u8]) -> Refusal<'static> {
        Refusal {
            reason: "key",
            context: Context::Toplevel,
            object,
            username: b"u",
            client_info: String::new(),
        }
    }

    #[test]
    fn groups_alike_refusals_within_a_minute() {
        let mut log = AclLog::default();
        log.add(refusal(b"x"), 1_000, 128);
        log.add(refusal(b"y"), 2_000, 128);
        log.add(refusal(b"x"), 3_000, 128);
        let v: Vec<_> = log.newest(10).collect();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].object.as_slice(), v[0].count), (&b"x"[..], 2));
        assert_eq!(
            (v[0].entry_id, v[0].created_ms, v[0].updated_ms),
            (0, 1_000, 3_000)
        );
        log.add(refusal(b"x"), 3_000 + GROUPING_MS + 1, 128);
        assert_eq!(log.newest(10).count(), 3);
        log.add(refusal(b"z"), 70_000, 2);
        assert_eq!(log.newest(10).count(), 2);
    }
}
