//! How Cake starts: with the user's session, without anyone at a terminal
//! (a systemd user unit for a headless worker, `cake worker
//! --install-service`, and the XDG autostart entry behind the window's
//! **Start at login**), and once per user (a second launch shows the first
//! window).

pub mod autostart;
pub mod single_instance;
pub mod systemd;

use std::path::PathBuf;

/// The user's configuration folder: `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| crate::files::paths::home_dir().join(".config"))
}

/// Which file an `Exec` command line is written into: both read
/// double-quoted words and double `%`, but escape differently inside quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecSyntax {
    /// A freedesktop desktop entry (`\"`, `` \` ``, `\$`, `\\`, and every
    /// backslash doubled again by the key-file format).
    DesktopEntry,
    /// A systemd unit's `ExecStart=` (`\"`, `\\`; `$` written `$$`).
    Systemd,
}

/// Quotes one argument for an `Exec` line, only when it needs quotes.
pub fn quote_exec_argument(argument: &str, syntax: ExecSyntax) -> String {
    let plain = !argument.is_empty() && argument.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c));
    if plain {
        return argument.to_string();
    }
    let mut quoted = String::from("\"");
    for c in argument.chars() {
        match (c, syntax) {
            ('%', _) => quoted.push_str("%%"),
            ('$', ExecSyntax::Systemd) => quoted.push_str("$$"),
            ('"' | '\\', ExecSyntax::Systemd) => {
                quoted.push('\\');
                quoted.push(c);
            }
            ('"' | '`' | '$', ExecSyntax::DesktopEntry) => {
                quoted.push_str("\\\\");
                quoted.push(c);
            }
            ('\\', ExecSyntax::DesktopEntry) => quoted.push_str("\\\\\\\\"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A whole `Exec` command line: the program, then its arguments.
pub fn exec_line(executable: &std::path::Path, arguments: &[String], syntax: ExecSyntax) -> String {
    std::iter::once(executable.to_string_lossy().into_owned())
        .chain(arguments.iter().cloned())
        .map(|argument| quote_exec_argument(&argument, syntax))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_arguments_are_quoted_only_when_needed() {
        use ExecSyntax::{DesktopEntry, Systemd};
        assert_eq!(quote_exec_argument("--port", Systemd), "--port");
        assert_eq!(quote_exec_argument("my worker", Systemd), "\"my worker\"");
        assert_eq!(quote_exec_argument("a\"b\\c", Systemd), r#""a\"b\\c""#);
        assert_eq!(quote_exec_argument("100%$HOME", Systemd), "\"100%%$$HOME\"");
        assert_eq!(quote_exec_argument("", Systemd), "\"\"");
        assert_eq!(quote_exec_argument("a\"b\\c", DesktopEntry), r#""a\\"b\\\\c""#);
        assert_eq!(quote_exec_argument("100%$HOME", DesktopEntry), r#""100%%\\$HOME""#);
        let line = exec_line(std::path::Path::new("/usr/bin/cake"), &["worker".into(), "den pc".into()], Systemd);
        assert_eq!(line, "/usr/bin/cake worker \"den pc\"");
    }
}
