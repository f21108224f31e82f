//! Rules of the code that the compiler does not check, read from the sources under src/.
//!
//! `unsafe` lives only where the README's "Layout of the code" says: in `sys` and the two ioctl
//! modules. (That every unsafe block carries a `// SAFETY:` comment is clippy's
//! `undocumented_unsafe_blocks`, denied in Cargo.toml.)

use std::path::{Path, PathBuf};

/// Where `unsafe` may appear: a directory (ending in `/`) or a file, relative to the crate root.
const UNSAFE_ALLOWED: &[&str] = &["src/sys/", "src/layout/sys.rs", "src/testbed/loopdev.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// `src` with comments, string literals and character literals blanked out (newlines kept, so
/// line numbers stay right). Lifetimes and labels are left alone.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, ' ');
                    i += 1;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, ' ');
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
                if depth == 0 {
                    break;
                }
            }
        } else if c[i] == 'r'
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
        {
            // A raw string r"..." or r#"..."# (also br"..."): ends at a quote followed by as
            // many hashes as it opened with.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a) or a label.
            let mut j = i + 1;
            if c.get(j) == Some(&'\\') {
                j += 1;
            }
            j += 1;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                blank(&mut out, ch);
            }
            i = j + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The 1-based line numbers where the keyword `unsafe` occurs in code (not in comments,
/// strings or identifiers such as `unsafe_op`).
fn unsafe_lines(src: &str) -> Vec<usize> {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    code_only(src)
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices("unsafe").any(|(at, _)| {
                let b = line.as_bytes();
                let end = at + "unsafe".len();
                (at == 0 || !ident(b[at - 1])) && (end >= b.len() || !ident(b[end]))
            })
        })
        .map(|(n, _)| n + 1)
        .collect()
}

fn allowed(relative: &str) -> bool {
    UNSAFE_ALLOWED.iter().any(|a| {
        if a.ends_with('/') {
            relative.starts_with(a)
        } else {
            relative == *a
        }
    })
}

#[test]
fn unsafe_appears_only_in_sys_and_the_ioctl_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under src/",
        files.len()
    );
    let mut found = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .expect("under the crate root")
            .to_string_lossy()
            .replace('\\', "/");
        if allowed(&relative) {
            continue;
        }
        let src = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        found.extend(
            unsafe_lines(&src)
                .into_iter()
                .map(|n| format!("{relative}:{n}")),
        );
    }
    assert!(
        found.is_empty(),
        "`unsafe` outside {UNSAFE_ALLOWED:?} (README, \"Layout of the code\": put it behind a \
         small safe function in src/sys/, or, for a new ioctl module, add it to the README \
         sentence and to UNSAFE_ALLOWED in tests/it/code_rules.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn every_allowed_place_exists_and_the_readme_names_the_ioctl_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for a in UNSAFE_ALLOWED {
        assert!(
            root.join(a).exists(),
            "{a} is allowed unsafe code but does not exist"
        );
    }
    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    for module in ["`layout::sys`", "`testbed::loopdev`"] {
        assert!(
            readme.contains(module),
            "the README's layout table should name {module} as an ioctl module"
        );
    }
}

#[test]
fn the_scanner_sees_unsafe_code_and_not_unsafe_words() {
    let src = r####"fn a() {
    // unsafe in a comment
    let s = "unsafe in a string \" still unsafe";
    let r = r#"unsafe "in" a raw string"#;
    let c = '"'; let q = '\''; let life: &'static str = "x";
    /* unsafe /* nested */ unsafe */
    let unsafe_name = 1;
    unsafe { libc::close(3) };
}
unsafe impl Send for X {}
"####;
    assert_eq!(unsafe_lines(src), vec![8, 10]);
    assert_eq!(code_only(src).lines().count(), src.lines().count());
}

#[test]
fn the_allowed_list_matches_whole_files_and_directories() {
    assert!(allowed("src/sys/mmap.rs"));
    assert!(allowed("src/layout/sys.rs"));
    assert!(!allowed("src/layout/ext.rs"));
    assert!(!allowed("src/sysfoo.rs"));
    assert!(!allowed("src/exercise/engine.rs"));
}

/// Every `.rs` file under src/ but unit-test modules of their own (`tests.rs`), with its path
/// relative to the crate root and its text up to its unit tests (`#[cfg(test)]`).
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .iter()
        .filter(|p| !p.ends_with("tests.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let cut = text.find("#[cfg(test)]").unwrap_or(text.len());
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            (rel, text[..cut].to_string())
        })
        .collect()
}

/// An emulated disk has one constructor, `testbed::device::disk::start` (server and loop
/// device together): nothing else starts a server or attaches its loop device, so a testbed's
/// disks and the disk `devices check` measures are made the same way.
#[test]
fn an_emulated_disk_is_made_in_one_place() {
    let mut found = Vec::new();
    for (rel, text) in sources() {
        if rel == "src/testbed/device/emulated.rs" || rel == "src/testbed/device/disk.rs" {
            continue;
        }
        for (n, line) in code_only(&text).lines().enumerate() {
            if line.contains("EmulatedDevice::start") || line.contains(".attach_loop(") {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "an emulated disk made outside testbed::device::disk::start:\n{}",
        found.join("\n")
    );
}

/// The lateness limit is declared once (`results::device::LATE_NS`): one `const LATE_*` with
/// a figure, and no message or comparison that writes the figure out again.
#[test]
fn the_lateness_limit_is_declared_once() {
    let mut literal = Vec::new();
    let mut spelt = Vec::new();
    for (rel, text) in sources() {
        for (n, line) in code_only(&text).lines().enumerate() {
            let l = line.trim();
            if l.contains("const LATE_")
                && l.split('=')
                    .nth(1)
                    .is_some_and(|v| v.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            {
                literal.push(format!("{rel}:{}: {l}", n + 1));
            }
            if l.contains("p99_ms > 0.") || l.contains("p99_ms >= 0.") {
                spelt.push(format!("{rel}:{}: {l}", n + 1));
            }
        }
        for (n, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with("//") && line.contains("0.5 ms") {
                spelt.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert_eq!(
        literal.len(),
        1,
        "the limit's declarations with a figure: {literal:#?}"
    );
    assert!(
        literal[0].starts_with("src/results/device.rs:"),
        "{literal:?}"
    );
    assert!(
        spelt.is_empty(),
        "the limit written out again:\n{}",
        spelt.join("\n")
    );
}

/// Calibration sits above the testbed: `testbed` holds no check, fit or read pairs and never
/// names `calibrate`.
#[test]
fn the_testbed_holds_no_calibration() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for gone in ["check.rs", "fit.rs", "fit", "pairs.rs", "bench_target.rs"] {
        let p = root.join("src/testbed/device").join(gone);
        assert!(
            !p.exists(),
            "{} is calibration: it belongs in src/calibrate",
            p.display()
        );
    }
    let up: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| {
            rel.starts_with("src/testbed/") && code_only(text).contains("crate::calibrate")
        })
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        up.is_empty(),
        "the testbed reaches up into calibrate: {up:?}"
    );
}
