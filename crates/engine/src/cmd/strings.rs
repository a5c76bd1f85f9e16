use crate::command::CommandSpec;

pub const COMMANDS: &[CommandSpec] = &[];
