//! Command groups. Each module exports `pub const COMMANDS: &[CommandSpec]`.

pub mod keys;
pub mod strings;
