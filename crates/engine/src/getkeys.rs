//! The key-spec interpreter: which arguments of a command are keys, read
//! from its [`KeySpec`]s the way Valkey's `getKeysUsingKeySpecs` reads
//! them (COMMAND GETKEYS / GETKEYSANDFLAGS), and the legacy
//! (first, last, step) triple COMMAND INFO derives from them.
//!
//! Only COMMAND uses this; the engine's WATCH, keyspace events and
//! tracking keep the specs' first/last/step fields.

use crate::command::{BeginSearch, CommandSpec, FindKeys, KeySpec, key_flags};

/// A key's position in argv (0 = the command name) and its key-spec flags.
pub type KeyRef = (usize, u16);

/// The keys the specs name in `argv` (argv[0] is the command), skipping
/// `not_key` specs; `None` when a spec does not fit the arguments (its
/// keyword count is not a number, its range runs past the end) or is
/// incomplete, as Valkey's interpreter fails then.
pub fn from_specs(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<KeyRef>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.flags & key_flags::NOT_KEY != 0 {
            continue;
        }
        let first = match spec.begin {
            BeginSearch::Index(pos) => pos as i64,
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => match find_keyword(argv, keyword, start_from) {
                Some(at) => at + 1,
                // No keyword, no keys from this spec.
                None => continue,
            },
            BeginSearch::Unknown => return None,
        };
        let (first, last, step) = match spec.find {
            FindKeys::Range {
                last_key,
                key_step,
                limit,
            } => {
                let last = if last_key >= 0 {
                    first + last_key as i64
                } else if limit == 0 {
                    argc + last_key as i64
                } else {
                    // Only the first 1/limit of what follows (Valkey asserts
                    // last_key == -1 here).
                    first + ((argc - first) / limit as i64 + last_key as i64)
                };
                (first, last, key_step as i64)
            }
            FindKeys::Keynum {
                keynum_idx,
                first_key,
                key_step,
            } => {
                let at = first + keynum_idx as i64;
                if at >= argc {
                    return None;
                }
                let numkeys = crate::num::parse_i64(argv[at as usize]).filter(|&n| n >= 0)?;
                let first = first + first_key as i64;
                (first, first + numkeys - 1, key_step as i64)
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc || step <= 0 {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step;
        }
        if spec.flags & key_flags::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// Index of the first argument equal to `keyword` (any case), searching
/// forwards from `start_from` (as Valkey, never the last argument, which
/// could not be followed by a key), or backwards from `argc + start_from`
/// when it is negative; never argv[0].
fn find_keyword(argv: &[&[u8]], keyword: &str, start_from: i32) -> Option<i64> {
    let argc = argv.len() as i64;
    let hit = |i: &i64| argv[*i as usize].eq_ignore_ascii_case(keyword.as_bytes());
    if start_from > 0 {
        (start_from as i64..argc - 1).find(hit)
    } else {
        let start = argc + start_from as i64;
        if start >= argc {
            return None;
        }
        (1..=start).rev().find(hit)
    }
}

/// Does COMMAND GETKEYS apply to the command at all (Valkey's
/// `doesCommandHaveKeys`)?
pub fn has_keys(spec: &CommandSpec) -> bool {
    spec.getkeys.is_some()
        || spec
            .key_specs
            .iter()
            .any(|k| k.flags & key_flags::NOT_KEY == 0)
}

/// The keys of one invocation, as COMMAND GETKEYS reports them (Valkey's
/// `getKeysFromCommandWithSpecs`): the key specs when they are reliable,
/// else the command's own function; empty when neither finds keys.
pub fn command_keys(spec: &CommandSpec, argv: &[&[u8]]) -> Vec<KeyRef> {
    let all = spec.key_specs.iter().fold(0, |f, k| f | k.flags);
    let real_keys = spec
        .key_specs
        .iter()
        .any(|k| k.flags & key_flags::NOT_KEY == 0);
    if real_keys
        && all & key_flags::VARIABLE_FLAGS == 0
        && let Some(keys) = from_specs(spec.key_specs, argv)
    {
        return keys;
    }
    if let Some(f) = spec.getkeys {
        return f(argv).unwrap_or_default();
    }
    lenient_keynum(spec.key_specs, argv).unwrap_or_default()
}

/// When a keynum spec fails, Valkey falls back to the command's own
/// function, which for every numkeys command is `genericGetKeys`: the count
/// read with `atoi` (so "2abc" counts 2), at least one key, the
/// destination (a fixed single-key spec before the count) last, and no
/// flags.
fn lenient_keynum(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<KeyRef>> {
    let (count_at, first, step) = specs.iter().find_map(|k| match (k.begin, k.find) {
        (
            BeginSearch::Index(pos),
            FindKeys::Keynum {
                keynum_idx,
                first_key,
                key_step,
            },
        ) => Some((pos + keynum_idx, pos + first_key, key_step.max(1))),
        _ => None,
    })?;
    let store = specs.iter().find_map(|k| match (k.begin, k.find) {
        (BeginSearch::Index(pos), FindKeys::Range { last_key: 0, .. }) => Some(pos as usize),
        _ => None,
    });
    let argc = argv.len() as i64;
    let num = atoi(argv.get(count_at as usize)?);
    if num < 1 || num > (argc - first as i64) / step as i64 {
        return None;
    }
    let mut keys: Vec<KeyRef> = (0..num)
        .map(|i| ((first as i64 + i * step as i64) as usize, 0))
        .collect();
    keys.extend(store.map(|p| (p, 0)));
    Some(keys)
}

/// C's `atoi`: leading blanks, a sign, then digits up to the first other
/// byte; 0 when there are none.
fn atoi(b: &[u8]) -> i64 {
    let mut i = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    for &c in b[i..].iter().take_while(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((c - b'0') as i64);
    }
    if neg { -n } else { n }
}

/// COMMAND INFO's (first key, last key, step) and whether the command has
/// movable keys, derived from the key specs as Valkey's
/// `populateCommandLegacyRangeSpec` does: the consecutive plain index
/// ranges merged; any other spec makes the keys movable.
pub fn legacy_range(specs: &[KeySpec]) -> (i32, i32, i32, bool) {
    let plain = |k: &KeySpec| match (k.begin, k.find) {
        (
            BeginSearch::Index(pos),
            FindKeys::Range {
                last_key, key_step, ..
            },
        ) => Some((pos, last_key, key_step)),
        _ => None,
    };
    let incomplete = |k: &KeySpec| k.flags & key_flags::INCOMPLETE != 0;
    if let [one] = specs
        && let Some((pos, last_key, key_step)) = plain(one)
    {
        let last = if last_key >= 0 {
            pos + last_key
        } else {
            last_key
        };
        return (pos, last, key_step, incomplete(one));
    }
    let mut movable = false;
    let (mut first, mut last, mut prev_last) = (i32::MAX, 0i32, 0i32);
    for k in specs {
        let Some((pos, last_key, key_step)) = plain(k) else {
            movable = true;
            continue;
        };
        if key_step != 1 || (prev_last != 0 && prev_last != pos - 1) {
            movable = true;
            continue;
        }
        movable |= incomplete(k);
        first = first.min(pos);
        let abs = if last_key >= 0 {
            last_key + pos
        } else {
            last_key
        };
        // Valkey compares as unsigned, so a negative (to the end) wins.
        last = (last as u32).max(abs as u32) as i32;
        prev_last = last;
    }
    if first == i32::MAX {
        return (0, 0, 0, movable);
    }
    (first, last, 1, movable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::key_flags::*;

    fn argv(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }
    fn positions(specs: &[KeySpec], line: &str) -> Option<Vec<usize>> {
        from_specs(specs, &argv(line)).map(|k| k.into_iter().map(|(p, _)| p).collect())
    }

    #[test]
    fn index_and_range() {
        let one = [KeySpec::index(1, RO | ACCESS)];
        assert_eq!(positions(&one, "get k"), Some(vec![1]));
        // MSET: every other argument to the end.
        let pairs = [KeySpec::index(1, OW | UPDATE).range(-1, 2, 0)];
        assert_eq!(positions(&pairs, "mset a 1 b 2"), Some(vec![1, 3]));
        // BLPOP: all but the last (the timeout).
        let blpop = [KeySpec::index(1, RW | ACCESS | DELETE).range(-2, 1, 0)];
        assert_eq!(positions(&blpop, "blpop a b c 0"), Some(vec![1, 2, 3]));
        assert_eq!(positions(&blpop, "blpop 0"), None);
        // A range past the end is a syntax error, not fewer keys.
        let two = [KeySpec::index(1, RW).range(1, 1, 0)];
        assert_eq!(positions(&two, "rename a"), None);
    }

    #[test]
    fn range_with_limit_takes_a_share_of_the_rest() {
        // XREAD-style: keys are the first half of what follows STREAMS.
        let streams = [KeySpec::keyword("STREAMS", 1, RO | ACCESS).range(-1, 1, 2)];
        assert_eq!(
            positions(&streams, "xread COUNT 2 STREAMS a b c 0 0 0"),
            Some(vec![4, 5, 6])
        );
    }

    #[test]
    fn keynum_counts_the_keys() {
        let eval = [KeySpec::index(2, RW | ACCESS | UPDATE).keynum(0, 1, 1)];
        assert_eq!(positions(&eval, "eval s 2 a b x"), Some(vec![3, 4]));
        assert_eq!(positions(&eval, "eval s 3 a b"), None);
        assert_eq!(positions(&eval, "eval s -1 a"), None);
        assert_eq!(positions(&eval, "eval s x a"), None);
        // No keys is not a range Valkey accepts: the caller falls back.
        assert_eq!(positions(&eval, "eval s 0"), None);
        // ZUNIONSTORE: a destination, then numkeys sources.
        let zu = [
            KeySpec::index(1, OW | UPDATE),
            KeySpec::index(2, RO | ACCESS).keynum(0, 1, 1),
        ];
        assert_eq!(
            positions(&zu, "zunionstore d 2 a b WEIGHTS 1 2"),
            Some(vec![1, 3, 4])
        );
    }

    #[test]
    fn keyword_search_forwards_and_backwards() {
        let store = [
            KeySpec::index(1, RO | ACCESS),
            KeySpec::keyword("STORE", 1, OW | UPDATE),
        ];
        assert_eq!(
            positions(&store, "sort k LIMIT 0 1 store d"),
            Some(vec![1, 6])
        );
        // No keyword: that spec names no key.
        assert_eq!(positions(&store, "sort k"), Some(vec![1]));
        // From the end backwards: the last STORE counts.
        let last = [KeySpec::keyword("STORE", -2, OW | UPDATE)];
        assert_eq!(positions(&last, "cmd store a store b"), Some(vec![4]));
        assert_eq!(positions(&last, "cmd store a x b"), Some(vec![2]));
    }

    #[test]
    fn a_failed_keynum_spec_falls_back_to_valkeys_lenient_count() {
        let zu = [
            KeySpec::index(1, OW | UPDATE),
            KeySpec::index(2, RO | ACCESS).keynum(0, 1, 1),
        ];
        assert_eq!(positions(&zu, "zunionstore d 2abc a b"), None);
        assert_eq!(
            lenient_keynum(&zu, &argv("zunionstore d 2abc a b")),
            Some(vec![(3, 0), (4, 0), (1, 0)])
        );
        assert_eq!(lenient_keynum(&zu, &argv("zunionstore d 0 a")), None);
        assert_eq!(lenient_keynum(&zu, &argv("zunionstore d 3 a b")), None);
    }

    #[test]
    fn not_key_and_incomplete_specs() {
        let channels = [KeySpec::index(1, NOT_KEY).range(-1, 1, 0)];
        assert_eq!(positions(&channels, "ssubscribe a b"), Some(vec![]));
        let partial = [KeySpec::index(1, RO | INCOMPLETE)];
        assert_eq!(positions(&partial, "cmd a"), None);
    }

    #[test]
    fn legacy_range_from_specs() {
        let get = [KeySpec::index(1, RO)];
        assert_eq!(legacy_range(&get), (1, 1, 1, false));
        let mset = [KeySpec::index(1, OW).range(-1, 2, 0)];
        assert_eq!(legacy_range(&mset), (1, -1, 2, false));
        let lmove = [KeySpec::index(1, RW), KeySpec::index(2, RW)];
        assert_eq!(legacy_range(&lmove), (1, 2, 1, false));
        let zu = [KeySpec::index(1, OW), KeySpec::index(2, RO).keynum(0, 1, 1)];
        assert_eq!(legacy_range(&zu), (1, 1, 1, true));
        let eval = [KeySpec::index(2, RW).keynum(0, 1, 1)];
        assert_eq!(legacy_range(&eval), (0, 0, 0, true));
        assert_eq!(legacy_range(&[]), (0, 0, 0, false));
    }
}
