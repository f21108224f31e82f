//! dbench's loadfile format (version 4, the `client.txt` the Debian dbench package installs in
//! /usr/share/dbench): one operation per line,
//!
//! ```text
//! [TIME] OPERATION ARG... STATUS
//! NTCreateX "\clients\client1\~dmtmp\WORD\CHAP10.DOC" 0x0 0x1 10006 NT_STATUS_OK
//! WriteX 10006 0 65536 65536 NT_STATUS_OK
//! ```
//!
//! Paths are quoted, use backslashes and name the client as `client1` (replaced by each
//! client's own name); numbers are C integers (`0x` hex, leading-0 octal); the last field is the
//! status the operation is expected to end with (`NT_STATUS_OK` or `0x0` for success, any other
//! `NT_STATUS_*` for an expected failure). A leading number is a timestamp (accepted; runs go as
//! fast as possible). Blank lines and `#` comments are skipped. Unlike dbench, which skips lines
//! it cannot use, fsgauge refuses a malformed line, or one using a handle that no earlier
//! `NTCreateX` opened (or that a `Close` closed), and names its line number, before any run.

use std::path::Path;

use anyhow::Result;

use crate::base::error::bad_input;

/// The operation kinds, under the names dbench prints in its results table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    NtCreateX,
    Close,
    Rename,
    Unlink,
    Deltree,
    Mkdir,
    Rmdir,
    Qpathinfo,
    Qfileinfo,
    Qfsinfo,
    Sfileinfo,
    Find,
    WriteX,
    ReadX,
    LockX,
    UnlockX,
    Flush,
    /// A pause of `params[0]` microseconds; not an operation (dbench does not count it).
    Sleep,
}

impl Kind {
    /// Every counted kind, in dbench's table order.
    pub const COUNTED: [Kind; 17] = [
        Kind::NtCreateX,
        Kind::Close,
        Kind::Rename,
        Kind::Unlink,
        Kind::Deltree,
        Kind::Mkdir,
        Kind::Rmdir,
        Kind::Qpathinfo,
        Kind::Qfileinfo,
        Kind::Qfsinfo,
        Kind::Sfileinfo,
        Kind::Find,
        Kind::WriteX,
        Kind::ReadX,
        Kind::LockX,
        Kind::UnlockX,
        Kind::Flush,
    ];

    /// The name in results (dbench's table name).
    pub fn name(self) -> &'static str {
        match self {
            Kind::NtCreateX => "NTCreateX",
            Kind::Close => "Close",
            Kind::Rename => "Rename",
            Kind::Unlink => "Unlink",
            Kind::Deltree => "Deltree",
            Kind::Mkdir => "Mkdir",
            Kind::Rmdir => "Rmdir",
            Kind::Qpathinfo => "Qpathinfo",
            Kind::Qfileinfo => "Qfileinfo",
            Kind::Qfsinfo => "Qfsinfo",
            Kind::Sfileinfo => "Sfileinfo",
            Kind::Find => "Find",
            Kind::WriteX => "WriteX",
            Kind::ReadX => "ReadX",
            Kind::LockX => "LockX",
            Kind::UnlockX => "UnlockX",
            Kind::Flush => "Flush",
            Kind::Sleep => "Sleep",
        }
    }

    /// The keyword in loadfiles, and how many paths and numbers follow it.
    fn from_keyword(k: &str) -> Option<(Kind, usize, usize)> {
        let r = match k.to_ascii_lowercase().as_str() {
            "ntcreatex" => (Kind::NtCreateX, 1, 3),
            "close" => (Kind::Close, 0, 1),
            "rename" => (Kind::Rename, 2, 0),
            "unlink" => (Kind::Unlink, 1, 1),
            "deltree" => (Kind::Deltree, 1, 0),
            "mkdir" => (Kind::Mkdir, 1, 0),
            "rmdir" => (Kind::Rmdir, 1, 0),
            "query_path_information" => (Kind::Qpathinfo, 1, 1),
            "query_file_information" => (Kind::Qfileinfo, 0, 2),
            "query_fs_information" => (Kind::Qfsinfo, 0, 1),
            "set_file_information" => (Kind::Sfileinfo, 0, 2),
            "find_first" => (Kind::Find, 1, 3),
            "writex" => (Kind::WriteX, 0, 4),
            "readx" => (Kind::ReadX, 0, 4),
            "lockx" => (Kind::LockX, 0, 3),
            "unlockx" => (Kind::UnlockX, 0, 3),
            "flush" => (Kind::Flush, 0, 1),
            "sleep" => (Kind::Sleep, 0, 1),
            _ => return None,
        };
        Some(r)
    }
}

/// One operation of a loadfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub kind: Kind,
    /// Line in the loadfile (or position in the built-in mix), for messages.
    pub line: u32,
    /// Path relative to the run directory, with `/`, naming the client as `client1`.
    pub path: Option<String>,
    pub path2: Option<String>,
    /// The numeric arguments in order (handle, offset, size, ... as the kind defines).
    pub params: [i64; 4],
    /// Whether the operation is expected to succeed.
    pub expect_ok: bool,
}

impl Op {
    /// An operation expected to succeed.
    pub fn new(kind: Kind, path: Option<&str>, path2: Option<&str>, params: &[i64]) -> Op {
        let mut p = [0i64; 4];
        for (d, s) in p.iter_mut().zip(params) {
            *d = *s;
        }
        Op {
            kind,
            line: 0,
            path: path.map(str::to_string),
            path2: path2.map(str::to_string),
            params: p,
            expect_ok: true,
        }
    }
}

/// Splits a line into tokens on spaces, keeping quoted strings (without the quotes) whole.
fn tokens(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut has = false;
    for c in line.chars() {
        match c {
            '"' => {
                in_quote = !in_quote;
                has = true;
            }
            ' ' | '\t' if !in_quote => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            _ => {
                cur.push(c);
                has = true;
            }
        }
    }
    if in_quote {
        return Err("a quoted path is not closed".into());
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

/// A C integer as strtol(…, 0) reads it: `0x1f`, `017`, `42`, `-1`.
pub fn parse_int(s: &str) -> Option<i64> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn expect_ok(status: &str) -> Option<bool> {
    if status == "NT_STATUS_OK" {
        Some(true)
    } else if status.starts_with("NT_STATUS_") {
        Some(false)
    } else if let Some(h) = status.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().map(|v| v == 0)
    } else {
        None
    }
}

/// Parses one line; `Ok(None)` for blank and comment lines.
pub fn parse_line(text: &str, line: u32) -> Result<Option<Op>, String> {
    let t = text.trim_end_matches(['\r', '\n']);
    let toks = tokens(t)?;
    if toks.is_empty() || toks[0].starts_with('#') {
        return Ok(None);
    }
    let mut toks: &[String] = &toks;
    if toks[0].starts_with(|c: char| c.is_ascii_digit()) {
        if toks[0].parse::<f64>().is_err() {
            return Err(format!(
                "{:?} is neither a timestamp nor an operation",
                toks[0]
            ));
        }
        toks = &toks[1..];
    }
    let Some(first) = toks.first() else {
        return Err("a timestamp without an operation".into());
    };
    if first.starts_with("SMB") {
        return Err("this is a dbench version 1 loadfile (SMB… lines); use a version 4 loadfile such as /usr/share/dbench/client.txt".into());
    }
    let Some((kind, npaths, nnums)) = Kind::from_keyword(first) else {
        return Err(format!(
            "unknown operation {first:?}; known: NTCreateX, Close, Rename, Unlink, Deltree, Mkdir, Rmdir, QUERY_PATH_INFORMATION, QUERY_FILE_INFORMATION, QUERY_FS_INFORMATION, SET_FILE_INFORMATION, FIND_FIRST, WriteX, ReadX, LockX, UnlockX, Flush, Sleep"
        ));
    };
    let args = &toks[1..];
    let Some((status, args)) = args.split_last() else {
        return Err(format!(
            "{first} has no status (e.g. NT_STATUS_OK) at the end"
        ));
    };
    let Some(ok) = expect_ok(status) else {
        return Err(format!(
            "{first}: the last field {status:?} is not a status (NT_STATUS_… or 0x…)"
        ));
    };
    if args.len() < npaths + nnums {
        return Err(format!(
            "{first} needs {npaths} path(s) and {nnums} number(s) before the status, found {} field(s)",
            args.len()
        ));
    }
    let mut op = Op::new(kind, None, None, &[]);
    op.line = line;
    op.expect_ok = ok;
    for (i, a) in args[..npaths].iter().enumerate() {
        let p = a.replace('\\', "/");
        if !p.starts_with('/') {
            return Err(format!(
                "{first}: path {a:?} does not start with a backslash"
            ));
        }
        if p.split('/').any(|c| c == "..") {
            return Err(format!(
                "{first}: path {a:?} climbs out of the run directory with .."
            ));
        }
        if i == 0 {
            op.path = Some(p);
        } else {
            op.path2 = Some(p);
        }
    }
    // Extra fields after the expected ones are allowed (dbench ignores them too).
    for (i, a) in args[npaths..npaths + nnums].iter().enumerate() {
        op.params[i] = parse_int(a)
            .ok_or_else(|| format!("{first}: field {} ({a:?}) is not a number", npaths + i + 2))?;
    }
    Ok(Some(op))
}

/// Parses a whole loadfile text; errors name the file and line.
pub fn parse(text: &str, name: &str) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i as u32 + 1;
        match parse_line(l, line) {
            Ok(Some(op)) => ops.push(op),
            Ok(None) => {}
            Err(e) => return Err(bad_input(format!("loadfile {name} line {line}: {e}"))),
        }
    }
    if !ops.iter().any(|o| o.kind != Kind::Sleep) {
        return Err(bad_input(format!("loadfile {name} has no operations")));
    }
    check_handles(&ops)
        .map_err(|(line, why)| bad_input(format!("loadfile {name} line {line}: {why}")))?;
    Ok(ops)
}

/// Whether `kind` acts on an open handle (its first number).
fn uses_handle(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Close
            | Kind::Qfileinfo
            | Kind::Sfileinfo
            | Kind::WriteX
            | Kind::ReadX
            | Kind::LockX
            | Kind::UnlockX
            | Kind::Flush
    )
}

/// Every handle an operation uses was opened before it by an NTCreateX expected to succeed
/// (its third number) and not closed since: the loadfile's own fault otherwise, found before
/// any run (a run would stop at that line as if the filesystem had failed). The line and why.
fn check_handles(ops: &[Op]) -> Result<(), (u32, String)> {
    let mut open: std::collections::HashMap<i64, u32> = std::collections::HashMap::new();
    for op in ops {
        if op.kind == Kind::NtCreateX && op.expect_ok {
            *open.entry(op.params[2]).or_default() += 1;
        } else if uses_handle(op.kind) {
            let h = op.params[0];
            let Some(n) = open.get_mut(&h).filter(|n| **n > 0) else {
                return Err((
                    op.line,
                    format!(
                        "{} uses handle {h}, which no NTCreateX before this line opened (or a Close closed); open it first or remove the line",
                        op.kind.name()
                    ),
                ));
            };
            if op.kind == Kind::Close {
                *n -= 1;
            }
        }
    }
    Ok(())
}

/// Reads and parses a loadfile.
pub fn load(path: &Path) -> Result<Vec<Op>> {
    let text = crate::base::bounded::read_text(
        path,
        crate::base::bounded::LOADFILE_LIMIT,
        "loadfiles",
        "--loadfile",
    )?;
    parse(&text, &path.display().to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_never_opened_is_refused_on_its_line() {
        let open = "NTCreateX \"\\a\" 0x0 0x2 7 NT_STATUS_OK\n";
        for (text, line, needle) in [
            (
                "WriteX 9 0 10 10 NT_STATUS_OK\n".to_string(),
                1,
                "WriteX uses handle 9",
            ),
            (
                format!("{open}Close 7 NT_STATUS_OK\nReadX 7 0 1 1 NT_STATUS_OK\n"),
                3,
                "ReadX uses handle 7",
            ),
            (
                "NTCreateX \"\\a\" 0x0 0x2 7 NT_STATUS_NO_SUCH_FILE\nFlush 7 NT_STATUS_OK\n"
                    .to_string(),
                2,
                "Flush uses handle 7",
            ),
        ] {
            let e = format!("{:#}", parse(&text, "l.txt").unwrap_err());
            assert!(
                e.starts_with(&format!("loadfile l.txt line {line}: {needle}")),
                "{e}"
            );
        }
        parse(
            &format!("{open}WriteX 7 0 10 10 NT_STATUS_OK\nClose 7 NT_STATUS_OK\n"),
            "l.txt",
        )
        .expect("opened, used, closed");
    }

    #[test]
    fn parses_dbench_lines() {
        let op = parse_line(
            r#"NTCreateX "\clients\client1\~dmtmp\WORD\CHAP10.DOC" 0x0 0x1 10006 NT_STATUS_OK"#,
            3,
        )
        .unwrap()
        .unwrap();
        assert_eq!(op.kind, Kind::NtCreateX);
        assert_eq!(
            op.path.as_deref(),
            Some("/clients/client1/~dmtmp/WORD/CHAP10.DOC")
        );
        assert_eq!(&op.params[..3], &[0, 1, 10006]);
        assert!(op.expect_ok);
        let op = parse_line(r#"Rename "\a b\x" "\y" NT_STATUS_OK"#, 1)
            .unwrap()
            .unwrap();
        assert_eq!(op.path.as_deref(), Some("/a b/x"));
        assert_eq!(op.path2.as_deref(), Some("/y"));
        let op = parse_line("12.5 WriteX 9938 65534 1 1 NT_STATUS_OK", 1)
            .unwrap()
            .unwrap();
        assert_eq!(op.params, [9938, 65534, 1, 1]);
        let op = parse_line(
            r#"QUERY_PATH_INFORMATION "\clients\client1\~dmtmp" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"#,
            1,
        )
        .unwrap()
        .unwrap();
        assert!(!op.expect_ok);
        assert!(parse_line("   ", 1).unwrap().is_none());
        assert!(parse_line("# comment", 1).unwrap().is_none());
        assert_eq!(parse_int("0x40"), Some(64));
        assert_eq!(parse_int("010"), Some(8));
    }

    #[test]
    fn malformed_lines_are_refused_with_their_number() {
        let text = "Close 1 NT_STATUS_OK\nFrobnicate 1 NT_STATUS_OK\n";
        let e = parse(text, "x.txt").unwrap_err().to_string();
        assert!(
            e.contains("x.txt line 2") && e.contains("Frobnicate"),
            "{e}"
        );
        for bad in [
            "WriteX 1 2 3 NT_STATUS_OK",
            "WriteX 1 2 3 4 OK",
            "ReadX 1 zero 3 4 NT_STATUS_OK",
            r#"Unlink "\x 0x6 NT_STATUS_OK"#,
            r#"Unlink "x" 6 NT_STATUS_OK"#,
            "SMBopenX foo",
        ] {
            assert!(parse_line(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_installed_dbench_loadfile_parses() {
        let p = Path::new("/usr/share/dbench/client.txt");
        if !p.exists() {
            eprintln!("skipped: dbench's client.txt is not installed");
            return;
        }
        let ops = load(p).unwrap();
        assert!(ops.len() > 400_000, "{}", ops.len());
        assert!(ops.iter().any(|o| o.kind == Kind::LockX));
    }
}
