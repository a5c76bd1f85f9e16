//! The sorted_set commands (issue 4; being built).

use crate::command::CommandSpec;

pub const COMMANDS: &[CommandSpec] = &[];
