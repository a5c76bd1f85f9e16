//! The logger writes Valkey-format lines to `logfile`, filtered by level.

use ringkv_engine::log::{self, Level};

#[test]
fn writes_filtered_lines_to_the_logfile() {
    let path = std::env::temp_dir().join(format!("ringkv-core-log-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    log::init(Level::Notice, path.to_str().unwrap());
    log::verbose("hidden");
    log::notice("shown");
    log::warning("also shown");
    assert!(!log::enabled(Level::Debug));
    log::set_level(Level::Nothing);
    log::warning("nothing is logged at 'nothing'");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let pid = std::process::id().to_string();
    for (line, (mark, msg)) in lines.iter().zip([("*", "shown"), ("#", "also shown")]) {
        let (p, rest) = line.split_once(":M ").unwrap();
        assert_eq!(p, pid);
        // "22 Nov 2026 13:42:03.123 * msg"
        let parts: Vec<&str> = rest.splitn(6, ' ').collect();
        assert_eq!(parts.len(), 6, "{line}");
        assert_eq!(parts[0].len(), 2);
        assert_eq!(parts[1].len(), 3);
        assert_eq!(parts[3].len(), 12, "{line}");
        assert_eq!(parts[4], mark);
        assert_eq!(parts[5], msg);
    }
    let _ = std::fs::remove_file(&path);
}
