//! Not a test: replays the commands in `$RINGKV_ORACLE_IN` (one per line,
//! words split on spaces, `''` = empty) through one engine client and writes
//! the raw replies to `$RINGKV_ORACLE_OUT`, to diff against redis-server.

#[path = "core_util.rs"]
mod util;

use util::*;

#[test]
#[ignore]
fn replay() {
    let (Ok(input), Ok(output)) = (
        std::env::var("RINGKV_ORACLE_IN"),
        std::env::var("RINGKV_ORACLE_OUT"),
    ) else {
        return;
    };
    let text = std::fs::read_to_string(input).unwrap();
    let mut e = engine();
    let c = connect(&mut e);
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line
            .split(' ')
            .map(|w| if w == "''" { "" } else { w })
            .collect();
        out.push_str(&format!("{line} => {:?}\n", cmd(&mut e, c, &words)));
    }
    std::fs::write(output, out).unwrap();
}
