//! Configuration in valkey.conf syntax: parsing, CONFIG GET/SET/REWRITE.
//! PLACEHOLDER: the engine helper fills this in.

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub databases: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { bind: vec!["*".into(), "-::*".into()], port: 6379, databases: 16 }
    }
}

/// A directive that could not be applied: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: Option<String>,
    pub line: usize,
    pub reason: String,
}
