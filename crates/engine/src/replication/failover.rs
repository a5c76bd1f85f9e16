//! FAILOVER: this primary hands over to one of its replicas and follows
//! it, with no write lost in between (Valkey's coordinated failover).
//!
//! ```text
//!  FAILOVER [TO host port [FORCE]] [TIMEOUT ms]
//!    │ writes wait (pause::start_failover); no PING goes into the stream
//!    ▼
//!  WaitForSync ── a replica (the target, or the first one) ACKed our
//!    │            whole stream, or TIMEOUT passed with FORCE
//!    ▼
//!  InProgress ─── REPLICAOF target; its link's PSYNC says FAILOVER, and
//!    │            the target promotes itself and continues us
//!    ▼ +CONTINUE / +FULLRESYNC
//!  done: writes go on (against a replica now: -READONLY)
//!
//!  aborted (FAILOVER ABORT; TIMEOUT without FORCE; the target refused
//!  the PSYNC): writes go on, and a server already turned replica is a
//!  primary again (under a new id); a link that fails otherwise is
//!  retried, writes still paused
//! ```
//!
//! The target's side is PSYNC's (`primary::psync`): a replica asked
//! `PSYNC <its replid> <offset> FAILOVER` becomes a primary first.

use crate::log;
use crate::server::Server;

/// Where a FAILOVER is (INFO `master_failover_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stage {
    #[default]
    None,
    /// Writes paused, waiting for a replica to have the whole stream.
    WaitForSync,
    /// Following the target, whose PSYNC answer ends it.
    InProgress,
}

/// The FAILOVER under way.
#[derive(Debug, Default)]
pub struct Failover {
    pub stage: Stage,
    /// `TO host port`, or the replica that caught up first.
    target: Option<(String, u16)>,
    /// Unix ms at which `TIMEOUT` passes.
    end_ms: Option<i64>,
    force: bool,
}

/// FAILOVER's arguments.
#[derive(Debug, Default)]
pub struct Request {
    pub to: Option<(String, u16)>,
    pub force: bool,
    pub timeout_ms: Option<i64>,
}

impl Failover {
    /// INFO's word for the stage.
    pub fn state_word(&self) -> &'static str {
        match self.stage {
            Stage::None => "no-failover",
            Stage::WaitForSync => "waiting-for-sync",
            Stage::InProgress => "failover-in-progress",
        }
    }

    /// A FAILOVER is under way (no PINGs go to replicas, no replica may
    /// sync with us).
    pub fn active(&self) -> bool {
        self.stage != Stage::None
    }

    /// The link to the target must ask `PSYNC ... FAILOVER`.
    pub fn in_progress(&self) -> bool {
        self.stage == Stage::InProgress
    }

    fn target_name(&self) -> String {
        match &self.target {
            Some((h, p)) => format!("{h}:{p}"),
            None => "any replica".to_string(),
        }
    }
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms]: checked in Valkey's
/// order, with its errors; the work goes on in [`step`].
pub fn start(srv: &mut Server, req: Request, now_ms: i64) -> Result<(), String> {
    if srv.repl.failover.active() {
        return Err("ERR FAILOVER already in progress.".into());
    }
    if srv.repl.is_replica() {
        return Err("ERR FAILOVER is not valid when server is a replica.".into());
    }
    let replicas = &srv.repl.feeds.replicas;
    if replicas.is_empty() {
        return Err("ERR FAILOVER requires connected replicas.".into());
    }
    if req.force && (req.timeout_ms.is_none() || req.to.is_none()) {
        return Err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.".into(),
        );
    }
    if let Some((host, port)) = &req.to {
        let Some(r) = replicas.iter().find(|r| r.is_at(host, *port)) else {
            return Err("ERR FAILOVER target HOST and PORT is not a replica.".into());
        };
        if r.state() != "online" {
            return Err("ERR FAILOVER target replica is not online.".into());
        }
        log::notice(&format!("FAILOVER requested to {host}:{port}."));
    } else {
        log::notice("FAILOVER requested to any replica.");
    }
    srv.repl.failover = Failover {
        stage: Stage::WaitForSync,
        target: req.to,
        end_ms: req.timeout_ms.map(|t| now_ms.saturating_add(t)),
        force: req.force,
    };
    crate::pause::start_failover(srv);
    Ok(())
}

/// FAILOVER ABORT. The error is Valkey's reply.
pub fn abort_command(srv: &mut Server) -> Result<(), String> {
    if !srv.repl.failover.active() {
        return Err("ERR No failover in progress.".into());
    }
    abort(srv, "Failover manually aborted");
    Ok(())
}

/// The failover ends without handing over: a server already following
/// the target is a primary again.
pub fn abort(srv: &mut Server, why: &str) {
    let f = std::mem::take(&mut srv.repl.failover);
    if f.stage == Stage::None {
        return;
    }
    log::notice(&format!("FAILOVER to {} aborted: {why}", f.target_name()));
    if f.stage == Stage::InProgress {
        super::replica::unset_primary(srv);
    }
    crate::pause::end_failover(srv);
}

/// The target answered our PSYNC with a refusal: abort. (A link that
/// fails before any answer is retried as a replica's link is, until
/// FAILOVER ABORT, as in Valkey.)
pub fn refused(srv: &mut Server) {
    if srv.repl.failover.in_progress() {
        abort(srv, "Failover target rejected psync request");
    }
}

/// The target answered our PSYNC: it is the primary, we follow it.
pub fn handed_over(srv: &mut Server) {
    if srv.repl.failover.in_progress() {
        srv.repl.failover = Failover::default();
        crate::pause::end_failover(srv);
    }
}

/// Every loop iteration while waiting: hand over once a replica has the
/// whole stream (Valkey's updateFailoverStatus, run before each sleep).
pub fn step(srv: &mut Server, now_ms: i64) {
    if srv.repl.failover.stage != Stage::WaitForSync {
        return;
    }
    let f = &srv.repl.failover;
    if f.end_ms.is_some_and(|end| now_ms >= end) {
        // FORCE comes with a target (checked by `start`).
        return match (f.force, f.target.clone()) {
            (true, Some(target)) => {
                log::notice(&format!(
                    "FAILOVER to {} time out exceeded, failing over.",
                    f.target_name()
                ));
                hand_over(srv, target, now_ms)
            }
            _ => abort(srv, "Replica never caught up before timeout"),
        };
    }
    let ours = super::master_offset(srv);
    let caught_up = srv.repl.feeds.replicas.iter().find(|r| {
        let acked = r.feed.as_ref().is_some_and(|feed| feed.ack().0 == ours);
        acked && f.target.as_ref().is_none_or(|(h, p)| r.is_at(h, *p))
    });
    let Some(r) = caught_up else {
        return;
    };
    let target = (r.ip.clone(), r.port);
    log::notice(&format!(
        "Failover target {}:{} is synced, failing over.",
        target.0, target.1
    ));
    hand_over(srv, target, now_ms);
}

/// Follow the target; its link asks `PSYNC ... FAILOVER`.
fn hand_over(srv: &mut Server, (host, port): (String, u16), now_ms: i64) {
    srv.repl.failover.target = Some((host.clone(), port));
    srv.repl.failover.stage = Stage::InProgress;
    super::replica::set_primary(srv, &host, port, now_ms);
}
