//! The process title `ps` shows (`set-proc-title`,
//! `proc-title-template`): the engine expands Valkey's template from the
//! configuration; writing it over the process's argument area is the
//! server crate's (a hook, [`SetProcTitle`]), so the engine stays free of
//! process memory.
//!
//! As Valkey: the title is set at start when `set-proc-title` is yes,
//! again after CONFIG SET moves the listeners, and on every CONFIG SET of
//! the template whatever `set-proc-title` says (Valkey's apply function
//! does not look at it).

use crate::Config;

/// Writes the process title; false when it could not.
pub type SetProcTitle = fn(&str) -> bool;

/// The template's variables for one server.
pub struct Vars<'a> {
    /// `{title}`: the program as it was run (`argv[0]`).
    pub title: &'a str,
    pub config: &'a Config,
    /// `{config-file}`: its absolute path; `-` without one.
    pub config_file: Option<&'a str>,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        let c = self.config;
        Some(match name {
            "title" => self.title.to_string(),
            "listen-addr" if c.port != 0 => {
                let host = c.bind.first().map(String::as_str).unwrap_or("*");
                format!("{host}:{}", c.port)
            }
            "listen-addr" => format!("unixsocket:{}", c.get("unixsocket").unwrap_or_default()),
            // No cluster or sentinel mode.
            "server-mode" => String::new(),
            "config-file" => self.config_file.unwrap_or("-").to_string(),
            "port" => c.port.to_string(),
            // No TLS.
            "tls-port" => "0".to_string(),
            "unixsocket" => c.get("unixsocket").unwrap_or_default(),
            _ => return None,
        })
    }
}

/// The title for `template`, trimmed of spaces at both ends; `None` for a
/// template Valkey's expansion (sdstemplate) rejects: an unknown
/// variable, or a `{` left open. `{{` is a literal `{`; a `}` outside a
/// variable is itself.
pub fn expand(template: &str, vars: &Vars<'_>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(tail) = after.strip_prefix('{') {
            out.push('{');
            rest = tail;
            continue;
        }
        if after.is_empty() {
            return None;
        }
        let close = after.find('}')?;
        out.push_str(&vars.get(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Valkey's validateProcTitleTemplate: the template expands, with an
/// empty title, to something.
pub fn valid(template: &str, config: &Config) -> bool {
    let vars = Vars {
        title: "",
        config,
        config_file: None,
    };
    expand(template, &vars).is_some_and(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Config {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Config::load(None, &args).unwrap()
    }

    #[test]
    fn templates_expand_as_valkey_expands_them() {
        let c = config(&["--port", "7000", "--bind", "127.0.0.1", "::1"]);
        let vars = Vars {
            title: "/usr/bin/ringkv-server",
            config: &c,
            config_file: Some("/etc/valkey.conf"),
        };
        let cases = [
            (
                "{title} {listen-addr} {server-mode}",
                "/usr/bin/ringkv-server 127.0.0.1:7000",
            ),
            (
                "TEST {port} {tls-port} {config-file}",
                "TEST 7000 0 /etc/valkey.conf",
            ),
            ("{{x}}", "{x}}"),
            ("a}", "a}"),
            ("  x {server-mode} ", "x"),
        ];
        for (template, want) in cases {
            assert_eq!(expand(template, &vars).as_deref(), Some(want), "{template}");
        }
        for bad in ["{x}", "{title", "a {", "{port"] {
            assert_eq!(expand(bad, &vars), None, "{bad}");
        }
        let unix = config(&["--port", "0", "--unixsocket", "/tmp/s.sock"]);
        let vars = Vars {
            title: "t",
            config: &unix,
            config_file: None,
        };
        assert_eq!(
            expand("{title} {listen-addr} {config-file} {unixsocket}", &vars).as_deref(),
            Some("t unixsocket:/tmp/s.sock - /tmp/s.sock")
        );
    }

    #[test]
    fn a_template_is_valid_when_it_leaves_something_with_an_empty_title() {
        let c = config(&[]);
        for ok in [
            "{title} {listen-addr} {server-mode}",
            "abc",
            "{port}",
            "{{x}}",
            "a}",
            "}}",
            "{config-file}",
        ] {
            assert!(valid(ok, &c), "{ok}");
        }
        for bad in [
            "",
            "  ",
            "{title}",
            " {title} ",
            "{server-mode}",
            "{x}",
            "{title",
            "{unixsocket}",
        ] {
            assert!(!valid(bad, &c), "{bad}");
        }
        let unix = config(&["--unixsocket", "/tmp/s.sock"]);
        assert!(valid("{unixsocket}", &unix));
    }
}
