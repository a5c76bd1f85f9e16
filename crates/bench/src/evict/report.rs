//! The eviction test's results as a table for people and JSON for scripts.
//! Hit rates carry 4 decimals in text and 6 in JSON: the differences
//! between policies are often in the third.

use super::Outcome;
use super::args::EvictArgs;
use super::sim::Counts;
use crate::stats::json_str;
use std::fmt::Write as _;

fn rate_json(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
    } else {
        "null".into()
    }
}

fn counts_json(c: Counts) -> String {
    format!(
        "{{\"hits\":{},\"misses\":{},\"hit_rate\":{}}}",
        c.hits,
        c.misses,
        rate_json(c.rate())
    )
}

fn header(a: &EvictArgs, o: &Outcome) -> String {
    format!(
        "eviction test {}:{}: policy {}, maxmemory-samples {}, maxmemory {}; keyspace {} {}, {}-byte values, pipeline {}, seed {}",
        a.host,
        a.port,
        o.policy,
        o.samples,
        o.maxmemory,
        a.keyspace,
        a.key_dist,
        a.data_size,
        a.pipeline,
        a.seed
    )
}

pub fn text(a: &EvictArgs, o: &Outcome) -> String {
    let mut s = header(a, o);
    s.push('\n');
    let f = &o.fill;
    let _ = writeln!(
        s,
        "fill: {} keys SET in {:.2} s, stopped: {}; evicted_keys {}, DBSIZE {}, used_memory {}",
        f.keys,
        f.seconds,
        f.stop,
        f.evicted,
        f.dbsize,
        f.used_memory.map_or("?".into(), |m| m.to_string())
    );
    if !o.evicting() {
        let _ = writeln!(
            s,
            "no eviction: evicted_keys stayed 0 after {} keys (DBSIZE {}); no cycles run",
            f.keys, f.dbsize
        );
        return s;
    }
    let _ = writeln!(
        s,
        "{:>5} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}",
        "cycle",
        "phase",
        "GETs",
        "hits",
        "misses",
        "hit rate",
        "exact LRU",
        "exact LFU",
        "DBSIZE",
        "evicted",
        "GETs/s"
    );
    let sim = o.sim.as_ref();
    for (i, c) in o.cycles.iter().enumerate() {
        let sim_rate =
            |v: fn(&super::Sim) -> &Vec<Counts>| sim.map_or(f64::NAN, |s| v(s)[i].rate());
        let _ = writeln!(
            s,
            "{:>5} {:>7} {:>9} {:>9} {:>9} {:>9.4} {:>9.4} {:>9.4} {:>9} {:>8} {:>9.0}",
            i + 1,
            if c.warmup { "warm-up" } else { "" },
            c.requests,
            c.counts.hits,
            c.counts.misses,
            c.counts.rate(),
            sim_rate(|s| &s.lru),
            sim_rate(|s| &s.lfu),
            c.dbsize,
            c.evicted,
            c.requests as f64 / c.seconds
        );
    }
    let errors: u64 = o.cycles.iter().map(|c| c.get_errors + c.set_errors).sum();
    if let Some(e) = o.cycles.iter().find_map(|c| c.first_error.as_ref()) {
        let _ = writeln!(s, "{errors} error replies, first: {e}");
    }
    let t = o.server_total();
    let measured = o.cycles.iter().filter(|c| !c.warmup).count();
    let _ = writeln!(
        s,
        "overall ({measured} measured cycles): {} GETs, {} hits, {} misses, server hit rate {:.4}",
        t.hits + t.misses,
        t.hits,
        t.misses,
        t.rate()
    );
    if let Some(sim) = sim {
        let lru = o.sim_total(&sim.lru).rate();
        let lfu = o.sim_total(&sim.lfu).rate();
        let _ = writeln!(
            s,
            "exact simulation, capacity {} keys ({}): LRU {lru:.4}, LFU {lfu:.4}",
            sim.capacity, sim.capacity_source
        );
        let _ = writeln!(
            s,
            "server ÷ exact {}: {:.4}",
            if o.reference_is_lfu() { "LFU" } else { "LRU" },
            o.ratio().unwrap_or(f64::NAN)
        );
    }
    s
}

pub fn json(a: &EvictArgs, o: &Outcome) -> String {
    let mut s = format!(
        "{{\"test\":\"evict\",\"host\":{},\"port\":{},\"policy\":{},\"maxmemory_samples\":{},\"maxmemory\":{},\"keyspace\":{},\"key_dist\":{},\"data_size\":{},\"pipeline\":{},\"seed\":{},\"status\":{}",
        json_str(&a.host),
        a.port,
        json_str(&o.policy),
        json_str(&o.samples),
        json_str(&o.maxmemory),
        a.keyspace,
        json_str(&a.key_dist.to_string()),
        a.data_size,
        a.pipeline,
        a.seed,
        json_str(if o.evicting() { "ok" } else { "no_eviction" })
    );
    let f = &o.fill;
    let _ = write!(
        s,
        ",\"fill\":{{\"keys\":{},\"evicted_keys\":{},\"dbsize\":{},\"used_memory\":{},\"seconds\":{:.3},\"stop\":{}}}",
        f.keys,
        f.evicted,
        f.dbsize,
        f.used_memory.map_or("null".into(), |m| m.to_string()),
        f.seconds,
        json_str(f.stop)
    );
    s.push_str(",\"cycles\":[");
    for (i, c) in o.cycles.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"cycle\":{},\"warmup\":{},\"requests\":{},\"hits\":{},\"misses\":{},\"hit_rate\":{},\"get_errors\":{},\"set_errors\":{},\"dbsize\":{},\"evicted_keys\":{},\"seconds\":{:.3}",
            i + 1,
            c.warmup,
            c.requests,
            c.counts.hits,
            c.counts.misses,
            rate_json(c.counts.rate()),
            c.get_errors,
            c.set_errors,
            c.dbsize,
            c.evicted,
            c.seconds
        );
        if let Some(sim) = &o.sim {
            let _ = write!(
                s,
                ",\"sim_lru_hit_rate\":{},\"sim_lfu_hit_rate\":{}",
                rate_json(sim.lru[i].rate()),
                rate_json(sim.lfu[i].rate())
            );
        }
        s.push('}');
    }
    s.push(']');
    if o.evicting() {
        let errors: u64 = o.cycles.iter().map(|c| c.get_errors + c.set_errors).sum();
        let _ = write!(
            s,
            ",\"overall\":{{\"cycles\":{},\"server\":{},\"errors\":{errors},\"first_error\":{}}}",
            o.cycles.iter().filter(|c| !c.warmup).count(),
            counts_json(o.server_total()),
            o.cycles
                .iter()
                .find_map(|c| c.first_error.as_deref())
                .map_or("null".into(), json_str)
        );
    }
    if let Some(sim) = &o.sim {
        let _ = write!(
            s,
            ",\"sim\":{{\"capacity\":{},\"capacity_source\":{},\"lru\":{},\"lfu\":{},\"reference\":{},\"ratio\":{}}}",
            sim.capacity,
            json_str(sim.capacity_source),
            counts_json(o.sim_total(&sim.lru)),
            counts_json(o.sim_total(&sim.lfu)),
            json_str(if o.reference_is_lfu() { "lfu" } else { "lru" }),
            rate_json(o.ratio().unwrap_or(f64::NAN))
        );
    }
    s.push_str("}\n");
    s
}
