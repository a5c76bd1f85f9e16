//! `oom-score-adj`: the process's `/proc/self/oom_score_adj`, as Valkey
//! sets it — so that under memory pressure the kernel's OOM killer picks
//! a replica before a primary. The engine decides what the score should
//! be ([`engine::OomScore`], from the directives and the role); this
//! module owns the file and the score the process had before the server
//! first changed it, which `relative` adds to and `no` restores.

use engine::{OomScore, log};
use std::sync::Mutex;

/// The score before the server first changed it, while it has changed it.
static BASE: Mutex<Option<i32>> = Mutex::new(None);

const PATH: &str = "/proc/self/oom_score_adj";

/// Apply `want`; false if the file could not be read or written (logged
/// with Valkey's words).
pub fn apply(want: OomScore) -> bool {
    let mut base = BASE.lock().unwrap_or_else(|e| e.into_inner());
    let value = match want {
        OomScore::Leave => match base.take() {
            Some(b) => b,
            None => return true,
        },
        OomScore::Relative(v) | OomScore::Absolute(v) => {
            let b = match *base {
                Some(b) => b,
                None => match read() {
                    Ok(b) => *base.insert(b),
                    Err(e) => {
                        log::warning(&format!("Unable to read oom_score_adj: {e}"));
                        return false;
                    }
                },
            };
            let v = if matches!(want, OomScore::Relative(_)) {
                v + b
            } else {
                v
            };
            v.clamp(-1000, 1000)
        }
    };
    match std::fs::write(PATH, format!("{value}\n")) {
        Ok(()) => true,
        Err(e) => {
            log::warning(&format!("Unable to write oom_score_adj: {e}"));
            false
        }
    }
}

fn read() -> std::io::Result<i32> {
    let text = std::fs::read_to_string(PATH)?;
    Ok(text.trim().parse().unwrap_or(0))
}
