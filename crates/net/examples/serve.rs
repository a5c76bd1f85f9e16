//! A bare server around `net::serve`, for trying the event loops without
//! the real binary: `cargo run -p ringkv-net --example serve -- --port 7000 --io-uring yes`.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match engine::Config::load(None, &args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bad config: {e:?}");
            std::process::exit(1);
        }
    };
    engine::log::init_from(&cfg);
    let handler = on_signal as extern "C" fn(libc::c_int);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
    let engine = engine::Engine::new(cfg, None);
    if let Err(e) = ringkv_net::serve(engine, &STOP) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
