//! Rules of the code that the compiler does not check, read from the sources under src/.
//!
//! `unsafe` lives only where the README's "Layout of the code" says: in `sys` and the two ioctl
//! modules. (That every unsafe block carries a `// SAFETY:` comment is clippy's
//! `undocumented_unsafe_blocks`, denied in Cargo.toml.)

use std::path::{Path, PathBuf};

/// Where `unsafe` may appear: a directory (ending in `/`) or a file, relative to the crate root.
const UNSAFE_ALLOWED: &[&str] = &["src/base/sys/", "src/layout/sys.rs", "src/host/loopdev.rs"];

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
pub(crate) fn code_only(src: &str) -> String {
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
         small safe function in src/base/sys/, or, for a new ioctl module, add it to the README \
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
    for module in ["`layout::sys`", "`host::loopdev`"] {
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
    assert!(allowed("src/base/sys/mmap.rs"));
    assert!(allowed("src/layout/sys.rs"));
    assert!(!allowed("src/layout/ext.rs"));
    assert!(!allowed("src/sysfoo.rs"));
    assert!(!allowed("src/workload/exercise/engine.rs"));
}

/// Every `.rs` file under src/ but unit-test modules of their own (`tests.rs`), with its path
/// relative to the crate root and its text up to its unit tests (`#[cfg(test)]`).
pub(crate) fn sources() -> Vec<(String, String)> {
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

/// An emulated disk has one constructor, `device::disk::start` (server and loop
/// device together): nothing else starts a server or attaches its loop device, so a testbed's
/// disks and the disk `devices check` measures are made the same way.
#[test]
fn an_emulated_disk_is_made_in_one_place() {
    let mut found = Vec::new();
    for (rel, text) in sources() {
        if rel == "src/device/emulated.rs" || rel == "src/device/disk.rs" {
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
        "an emulated disk made outside device::disk::start:\n{}",
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
        let p = root.join("src/device").join(gone);
        assert!(
            !p.exists(),
            "{} is calibration: it belongs in src/device/calibrate",
            p.display()
        );
    }
    let up: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| {
            rel.starts_with("src/testbed/") && code_only(text).contains("crate::device::calibrate")
        })
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        up.is_empty(),
        "the testbed reaches up into calibrate: {up:?}"
    );
}

/// The module a file under src/ defines, as its path from the crate root (`src/a/b.rs` and
/// `src/a/b/mod.rs` are `["a", "b"]`; `lib.rs` and `main.rs` the root, `[]`).
fn module_of(rel: &str) -> Vec<String> {
    let inner = rel
        .strip_prefix("src/")
        .and_then(|r| r.strip_suffix(".rs"))
        .unwrap_or_else(|| panic!("{rel} is not a .rs file under src/"));
    let mut segs: Vec<String> = inner.split('/').map(str::to_string).collect();
    if segs.last().is_some_and(|s| s == "mod")
        || (segs.len() == 1 && ["lib", "main"].contains(&segs[0].as_str()))
    {
        segs.pop();
    }
    segs
}

/// One path that a file names (`crate::a::b::C`, `super::d`, a `use` tree expanded), with the
/// 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
struct Named {
    path: Vec<String>,
    line: usize,
}

/// Every path in `code` (comments and strings already blanked by [`code_only`]) that starts at
/// `crate::`, `$crate::`, `super::`, `self::` or one of `children::` (the modules the file
/// declares, which a `mod.rs` names bare); `use` trees (`a::{b, c::{d, e}}`) are expanded into
/// one path each.
fn named_paths(code: &str, children: &[String]) -> Vec<Named> {
    let c: Vec<char> = code.chars().collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
        }
        let starts_word = ident(c[i]) && (i == 0 || !(ident(c[i - 1]) || c[i - 1] == ':'));
        if !starts_word {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < c.len() && ident(c[j]) {
            j += 1;
        }
        let word: String = c[i..j].iter().collect();
        let root = ["crate", "super", "self"].contains(&word.as_str()) || children.contains(&word);
        if root && c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
            let mut k = i;
            let mut paths = Vec::new();
            use_tree(&c, &mut k, Vec::new(), &mut paths);
            out.extend(paths.into_iter().map(|path| Named { path, line }));
            line += c[i..k.max(i)].iter().filter(|&&ch| ch == '\n').count();
            i = k.max(j);
        } else {
            i = j;
        }
    }
    out
}

/// Parses one path or `use` tree at `c[*i..]` below `prefix` into `out`.
fn use_tree(c: &[char], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_ws = |i: &mut usize| {
        while *i < c.len() && c[*i].is_whitespace() {
            *i += 1;
        }
    };
    skip_ws(i);
    match c.get(*i) {
        Some('{') => {
            *i += 1;
            loop {
                skip_ws(i);
                match c.get(*i) {
                    None => return,
                    Some('}') => {
                        *i += 1;
                        return;
                    }
                    Some(',') => *i += 1,
                    Some(_) => {
                        let before = *i;
                        use_tree(c, i, prefix.clone(), out);
                        // `x as y` and anything else the tree does not name: skip to the next
                        // item of this group.
                        while *i < c.len() && !matches!(c[*i], ',' | '}' | '{') {
                            *i += 1;
                        }
                        if *i == before {
                            *i += 1;
                        }
                    }
                }
            }
        }
        Some('*') => {
            *i += 1;
            out.push(prefix);
        }
        _ => {
            let start = *i;
            while *i < c.len() && (c[*i].is_alphanumeric() || c[*i] == '_') {
                *i += 1;
            }
            if *i == start {
                out.push(prefix);
                return;
            }
            let seg: String = c[start..*i].iter().collect();
            let mut path = prefix;
            if seg != "self" || path.is_empty() {
                path.push(seg);
            }
            if c.get(*i) == Some(&':') && c.get(*i + 1) == Some(&':') {
                *i += 2;
                use_tree(c, i, path, out);
            } else {
                out.push(path);
            }
        }
    }
}

/// The file module that `path`, named in module `from`, leads into: the deepest module of
/// `modules` along it.
fn resolve(from: &[String], path: &[String], modules: &[Vec<String>]) -> Vec<String> {
    let mut cur: Vec<String> = from.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") | Some("$crate") => {
            cur.clear();
            rest = &rest[1..];
        }
        _ => {
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        cur.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
    }
    let mut best = cur.clone();
    for seg in rest {
        cur.push(seg.clone());
        if modules.contains(&cur) {
            best = cur.clone();
        } else {
            break;
        }
    }
    best
}

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            Some(name.to_string())
        })
        .collect()
}

/// One file's uses: from its module to the file module each named path leads into (itself
/// left out), with the line that names it.
pub(crate) struct Uses {
    rel: String,
    module: Vec<String>,
    to: Vec<(Vec<String>, usize)>,
}

/// The uses of every file under src/ (up to its unit tests).
pub(crate) fn file_uses() -> Vec<Uses> {
    let files = sources();
    let modules: Vec<Vec<String>> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    files
        .iter()
        .map(|(rel, text)| {
            let module = module_of(rel);
            let code = code_only(text);
            let mut to: Vec<(Vec<String>, usize)> = named_paths(&code, &declared_children(&code))
                .into_iter()
                .map(|n| {
                    let path: Vec<String> = match n.path.first().map(String::as_str) {
                        Some("crate") | Some("super") | Some("self") => n.path,
                        _ => std::iter::once("self".to_string()).chain(n.path).collect(),
                    };
                    (resolve(&module, &path, &modules), n.line)
                })
                .filter(|(m, _)| *m != module)
                .collect();
            to.dedup_by(|a, b| a.0 == b.0);
            Uses {
                rel: rel.clone(),
                module,
                to,
            }
        })
        .collect()
}

#[test]
fn use_paths_are_read_as_rust_reads_them() {
    let code = "use crate::a::{b::{c, d as e}, self, f::*};\nuse super::super::g;\n\
                fn x() { crate::h::i(); let y = kid::Z; $crate::j::k!(); }\npub(crate) fn z() {}";
    let named: Vec<(String, usize)> = named_paths(code, &["kid".to_string()])
        .into_iter()
        .map(|n| (n.path.join("::"), n.line))
        .collect();
    assert_eq!(
        named,
        [
            ("crate::a::b::c", 1),
            ("crate::a::b::d", 1),
            ("crate::a", 1),
            ("crate::a::f", 1),
            ("super::super::g", 2),
            ("crate::h::i", 3),
            ("kid::Z", 3),
            ("crate::j::k", 3),
        ]
        .map(|(p, l)| (p.to_string(), l))
    );
    let m = |s: &str| -> Vec<String> {
        s.split("::")
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    let modules = [m("a"), m("a::b"), m("a::b::c"), m("d")];
    assert_eq!(
        resolve(&m("a::b::c"), &m("super::super::super::d::X"), &modules),
        m("d")
    );
    assert_eq!(
        resolve(&m("d"), &m("crate::a::b::Y::new"), &modules),
        m("a::b")
    );
    assert_eq!(
        resolve(&m("a"), &m("self::b::c::f"), &modules),
        m("a::b::c")
    );
    assert_eq!(module_of("src/a/b/mod.rs"), m("a::b"));
    assert_eq!(module_of("src/a/b.rs"), m("a::b"));
    assert_eq!(module_of("src/lib.rs"), m(""));
    assert_eq!(
        declared_children("mod a;\npub mod b;\npub(crate) mod c;\nmod tests {"),
        ["a", "b", "c"]
    );
}

/// The README's statement of the layers ("Layout of the code"): each top-level module with its
/// rank, (row, group). A module may use another of a later row (dependencies point down the
/// table), or of a later group of its own row (`a`, `b` → `c`: `a` and `b` may use `c`).
fn stated_layers(readme: &str) -> Vec<(String, (usize, usize))> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Layout of the code"))
        .expect("the README has a section \"Layout of the code\"");
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .collect();
    let mut ranks = Vec::new();
    for (row, line) in rows.iter().enumerate() {
        let cell = line.split('|').nth(2).expect("a row of three cells");
        for (group, names) in cell.split('→').enumerate() {
            for name in names.split(',') {
                let name = name.trim().trim_matches('`');
                assert!(
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "the layer table's modules cell should be `a`, `b` → `c`; read {cell:?}"
                );
                ranks.push((name.to_string(), (row, group)));
            }
        }
    }
    ranks
}

/// The uses of one top-level module by another that the stated layers do not allow, each with
/// the file and line of its first use.
fn layer_breaches(ranks: &[(String, (usize, usize))], uses: &[Uses]) -> Vec<String> {
    let rank = |m: &str| ranks.iter().find(|(n, _)| n == m).map(|(_, r)| *r);
    let mut breaches: Vec<(String, String, String)> = Vec::new();
    for u in uses {
        let Some(from) = u.module.first() else {
            continue; // lib.rs and main.rs
        };
        for (to, line) in &u.to {
            let Some(to) = to.first() else { continue };
            if to == from || breaches.iter().any(|(a, b, _)| a == from && b == to) {
                continue;
            }
            if let (Some(a), Some(b)) = (rank(from), rank(to)) {
                if b <= a {
                    breaches.push((from.clone(), to.clone(), format!("{}:{line}", u.rel)));
                }
            }
        }
    }
    breaches
        .into_iter()
        .map(|(a, b, at)| format!("{a} → {b} (first at {at})"))
        .collect()
}

/// The README's module table is the one statement of which top-level module may use which:
/// every top-level module of src/ is in it once, and every `crate::…`/`super::…` path of the
/// code points down the table (or along an arrow of its row).
#[test]
fn the_code_keeps_the_layers_the_readme_states() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    let ranks = stated_layers(&readme);
    assert!(
        (8..=12).contains(&ranks.len()),
        "the layer table should list the handful of folders src/ is made of, one per row; it lists {}",
        ranks.len()
    );
    let uses = file_uses();
    let mut tops: Vec<String> = uses
        .iter()
        .filter_map(|u| u.module.first().cloned())
        .collect();
    tops.sort();
    tops.dedup();
    let mut stated: Vec<String> = ranks.iter().map(|(n, _)| n.clone()).collect();
    stated.sort();
    assert_eq!(
        tops, stated,
        "the README's layer table should list every top-level module of src/ once"
    );
    let breaches = layer_breaches(&ranks, &uses);
    assert!(
        breaches.is_empty(),
        "uses the README's layer table (\"Layout of the code\") does not allow; move the code \
         down to where it belongs, or state the edge in the table and why:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn a_use_up_or_sideways_is_a_breach() {
    let ranks = stated_layers(
        "\n## Layout of the code\n\n| layer | modules | what |\n| --- | --- | --- |\n\
         | top | `a` | x |\n| middle | `b`, `c` → `d` | y |\n| bottom | `e` | z |\n",
    );
    let use_of = |from: &str, to: &str| Uses {
        rel: format!("src/{from}.rs"),
        module: vec![from.to_string()],
        to: vec![(vec![to.to_string(), "x".to_string()], 7)],
    };
    let down = [
        use_of("a", "b"),
        use_of("b", "d"),
        use_of("d", "e"),
        use_of("c", "e"),
    ];
    assert!(layer_breaches(&ranks, &down).is_empty());
    let wrong = [use_of("e", "a"), use_of("b", "c"), use_of("d", "b")];
    assert_eq!(
        layer_breaches(&ranks, &wrong),
        [
            "e → a (first at src/e.rs:7)",
            "b → c (first at src/b.rs:7)",
            "d → b (first at src/d.rs:7)"
        ]
    );
}

/// The circles among the file modules under `within` (a module path): groups of two or more
/// files each of which uses, through the others, every other. A module using its own
/// submodules is left out: a `mod.rs` declares and re-exports its children, and that is the
/// module, not a circle between files.
pub(crate) fn file_circles(uses: &[Uses], within: &[String]) -> Vec<Vec<String>> {
    let inside = |m: &[String]| m.len() > within.len() && m.starts_with(within);
    let nodes: Vec<&Uses> = uses.iter().filter(|u| inside(&u.module)).collect();
    let index = |m: &[String]| nodes.iter().position(|u| u.module == m);
    let edges: Vec<Vec<usize>> = nodes
        .iter()
        .map(|u| {
            u.to.iter()
                .filter(|(t, _)| inside(t) && !t.starts_with(&u.module))
                .filter_map(|(t, _)| index(t))
                .collect()
        })
        .collect();
    let reach = |from: usize| {
        let mut seen = vec![false; nodes.len()];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &m in &edges[n] {
                if !seen[m] {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reached: Vec<Vec<bool>> = (0..nodes.len()).map(reach).collect();
    let mut circles: Vec<Vec<String>> = Vec::new();
    for (a, from_a) in reached.iter().enumerate() {
        let mut circle: Vec<String> = (0..nodes.len())
            .filter(|&b| from_a[b] && reached[b][a])
            .map(|b| nodes[b].module.join("::"))
            .collect();
        circle.sort();
        if circle.len() > 1 && !circles.contains(&circle) {
            circles.push(circle);
        }
    }
    circles.sort();
    circles
}

/// No circle between the files of src/testbed/, src/device/ and src/host/: above all, the ledger knows no module that
/// records into it (they use the ledger, it does not use them back), and a disk profile is
/// read one way down to the model (the model's parameters sit below both, in
/// `device::model::params`).
#[test]
fn the_testbed_files_form_no_circle() {
    let known: Vec<Vec<String>> = Vec::new();
    let uses = file_uses();
    let mut circles = file_circles(&uses, &["testbed".to_string()]);
    circles.extend(file_circles(&uses, &["device".to_string()]));
    circles.extend(file_circles(&uses, &["host".to_string()]));
    assert_eq!(
        circles, known,
        "circles between the files of src/testbed/ (each file uses the others through the \
         rest); the ledger must not use what records into it"
    );
}

#[test]
fn a_circle_between_files_is_found_and_a_module_using_its_children_is_not() {
    let m = |s: &str| -> Vec<String> { s.split("::").map(str::to_string).collect() };
    let file = |from: &str, to: &[&str]| Uses {
        rel: String::new(),
        module: m(from),
        to: to.iter().map(|t| (m(t), 1)).collect(),
    };
    let uses = [
        file("t", &["t::a", "t::b", "t::c"]),
        file("t::a", &["t::b", "t"]),
        file("t::b", &["t::c"]),
        file("t::c", &["t::a"]),
        file("t::d", &["t::a", "u"]),
        file("u", &["t::d"]),
    ];
    assert_eq!(
        file_circles(&uses, &m("t")),
        [["t::a", "t::b", "t::c"].map(String::from).to_vec()]
    );
}

/// The unpredictable name of a private directory or file (`.fsgauge-…-<hex>`) is made in one
/// place, `sys::trust::private_name`, so every private entry has the shape cleanup and the
/// attack tests know.
#[test]
fn the_private_name_is_made_in_one_place() {
    let mut found = Vec::new();
    for (rel, text) in sources() {
        if rel == "src/base/sys/trust.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if line.contains("format!(\".fsgauge-") {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "private names made outside sys::trust::private_name:\n{}",
        found.join("\n")
    );
}

/// The calls through which fsgauge reaches and changes paths on a held directory.
const PATH_CALLS: &[&str] = &[
    "openat",
    "fstat",
    "fstatat",
    "mkdirat",
    "unlinkat",
    "fchmod",
    "statx",
    "fdopendir",
    "readdir64",
];

/// Each path call has one wrapper: `sys` makes it once (`libc::NAME(` in one place), and
/// nothing outside `sys` makes it another way (nix's `fstatat`, `mkdirat`, `unlinkat`,
/// `fchmod`, `sys::stat::fstat`, `nix::dir`), so `sys::Dir`, `sys::trust`, `sys::chase`, the
/// run directories, cleanup and the layout walk all go through the same call with the same
/// errors.
#[test]
fn each_path_call_has_one_wrapper() {
    let mut made = Vec::new();
    let mut around = Vec::new();
    for (rel, text) in sources() {
        for (n, line) in code_only(&text).lines().enumerate() {
            let at = format!("{rel}:{}: {}", n + 1, line.trim());
            for call in PATH_CALLS {
                if line.contains(&format!("libc::{call}(")) {
                    made.push((call.to_string(), at.clone()));
                }
            }
            let nix_way = [
                "fstatat(",
                "mkdirat(",
                "unlinkat(",
                "stat::fchmod",
                "stat::fstat",
                "nix::dir",
            ];
            if !rel.starts_with("src/base/sys/") && nix_way.iter().any(|w| line.contains(w)) {
                around.push(at);
            }
        }
    }
    for call in PATH_CALLS {
        let places: Vec<&String> = made
            .iter()
            .filter(|(c, _)| c == call)
            .map(|(_, at)| at)
            .collect();
        assert_eq!(
            places.len(),
            1,
            "libc::{call} should be called in one place: {places:#?}"
        );
        assert!(places[0].starts_with("src/base/sys/"), "{places:?}");
    }
    assert!(
        around.is_empty(),
        "path calls made around sys's wrappers (use sys::stat_at, mkdir_at, unlink_at, fchmod, \
         fstat):\n{}",
        around.join("\n")
    );
}

/// The longest a row of the README's commands table may be: the command and what it is for, on
/// one line; the detail is in `--help` and in docs/.
const COMMAND_ROW_MAX: usize = 200;

/// The README's section `## NAME`, up to the next section.
fn readme_section<'a>(readme: &'a str, name: &str) -> &'a str {
    readme
        .split("\n## ")
        .find(|s| s.starts_with(name))
        .unwrap_or_else(|| panic!("the README has no section {name:?}"))
}

/// The rows of the README's commands table (its header and rule left out).
fn command_rows(readme: &str) -> Vec<&str> {
    readme_section(readme, "Commands\n")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .collect()
}

/// The README's commands table has one short line per command, and every command fsgauge has
/// (`fsgauge --help`) is in it.
#[test]
fn the_commands_table_is_one_short_line_per_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    let rows = command_rows(&readme);
    assert!(
        rows.len() > 10,
        "the commands table has {} rows",
        rows.len()
    );
    let long: Vec<String> = rows
        .iter()
        .filter(|r| r.chars().count() > COMMAND_ROW_MAX)
        .map(|r| {
            format!(
                "{} characters: {}…",
                r.chars().count(),
                r.chars().take(60).collect::<String>()
            )
        })
        .collect();
    assert!(
        long.is_empty(),
        "rows of the README's commands table over {COMMAND_ROW_MAX} characters (move the detail \
         to the command's --help or to docs/):\n{}",
        long.join("\n")
    );
    use clap::CommandFactory;
    for cmd in fsgauge::cli::Cli::command().get_subcommands() {
        let name = format!("`fsgauge {}", cmd.get_name());
        assert!(
            rows.iter().any(|r| r.starts_with(&format!("| {name}"))),
            "the commands table has no row for {name}`"
        );
    }
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens, punctuation dropped.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The relative links of a Markdown text (`[text](target)`, web addresses left out).
fn relative_links(md: &str) -> Vec<String> {
    md.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &md[at + 2..];
            let target = &rest[..rest.find(')')?];
            (!target.contains("://") && !target.starts_with("mailto:")).then(|| target.to_string())
        })
        .collect()
}

/// The links of `md` (the file `file`) that lead nowhere: to a missing file, or to an anchor no
/// heading of the target makes.
fn broken_links(file: &Path, md: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for link in relative_links(md) {
        let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            file.parent().expect("a file has a directory").join(path)
        };
        let Ok(text) = std::fs::read_to_string(&target) else {
            broken.push(format!("{}: {link} (no such file)", file.display()));
            continue;
        };
        let anchors: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .map(|h| anchor_of(h.trim_start_matches('#')))
            .collect();
        if !anchor.is_empty() && !anchors.iter().any(|a| a == anchor) {
            broken.push(format!(
                "{}: {link} (no heading makes #{anchor})",
                file.display()
            ));
        }
    }
    broken
}

/// Every link of the README and of docs/ resolves (file and heading), the README's commands
/// table links the studies' pages, and every built-in preset has its study's page.
#[test]
fn the_readme_and_docs_links_resolve_and_every_preset_has_a_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("reading docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() > 5, "docs/ holds {} pages", docs.len());
    pages.extend(docs.iter().cloned());
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("reading a page");
        broken.extend(broken_links(page, &text));
    }
    assert!(
        broken.is_empty(),
        "links that lead nowhere:\n{}",
        broken.join("\n")
    );

    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    let table_links: Vec<String> = command_rows(&readme)
        .iter()
        .flat_map(|r| relative_links(r))
        .collect();
    assert!(
        table_links.iter().any(|l| l.starts_with("docs/")),
        "the commands table links no page of docs/: {table_links:?}"
    );
    let index =
        std::fs::read_to_string(root.join("docs/README.md")).expect("reading docs/README.md");
    for page in &docs {
        let name = page
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a page name");
        assert!(
            name == "README.md" || relative_links(&index).iter().any(|l| l == name),
            "docs/README.md does not link {name}"
        );
    }
    let all_docs: String = docs
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("a page"))
        .collect();
    let presets: Vec<String> = std::fs::read_dir(root.join("src/lab/plan/presets"))
        .expect("reading the presets")
        .filter_map(|e| {
            let p = e.expect("a preset entry").path();
            (p.extension()? == "toml").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    assert!(presets.len() > 5, "found {} presets", presets.len());
    for preset in presets {
        assert!(
            all_docs.contains(&format!("`{preset}`")),
            "no page of docs/ names the preset `{preset}`"
        );
    }
}

#[test]
fn links_and_anchors_are_read_as_github_makes_them() {
    assert_eq!(anchor_of(" How a finding reads"), "how-a-finding-reads");
    assert_eq!(
        anchor_of("Study 4: inode interleaving"),
        "study-4-inode-interleaving"
    );
    assert_eq!(
        relative_links("see [a](docs/a.md#x), [b](https://e.org/b) and [c](#plans)"),
        ["docs/a.md#x", "#plans"]
    );
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("p.md");
    std::fs::write(&page, "# P\n## Plans\n").unwrap();
    let md = "[ok](#plans) [gone](q.md) [no](#nowhere) [self](p.md#p)";
    assert_eq!(
        broken_links(&page, md),
        [
            format!("{}: q.md (no such file)", page.display()),
            format!("{}: #nowhere (no heading makes #nowhere)", page.display()),
        ]
    );
}

/// The folders whose size computations feed memory handed to the kernel or to `unsafe` code
/// (issue 41 item 2: `len.max(4096).next_multiple_of(4096)` in `AlignedBuf` wrapped to 0 in a
/// release build, with the slice still claiming `len` bytes).
const CHECKED_SIZES: &[&str] = &["src/base/sys/", "src/workload/exercise/"];

/// Rounding up to a multiple without the checked form, in the code (not comments or strings)
/// of `src`: the lines.
fn unchecked_rounding(src: &str) -> Vec<usize> {
    let code = code_only(src);
    code.lines()
        .enumerate()
        .filter(|(_, l)| {
            l.match_indices("next_multiple_of(")
                .any(|(at, _)| !l[..at].ends_with("checked_"))
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn sizes_in_sys_and_the_exerciser_round_up_only_checked() {
    let mut found = Vec::new();
    for (rel, text) in sources() {
        if CHECKED_SIZES.iter().any(|d| rel.starts_with(d)) {
            for line in unchecked_rounding(&text) {
                found.push(format!("{rel}:{line}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "next_multiple_of without checked_ (it wraps to 0 in a release build; use checked_next_multiple_of and refuse the size): {found:?}"
    );
}

#[test]
fn the_rounding_scanner_sees_code_and_not_comments() {
    assert_eq!(
        unchecked_rounding("let s = len.next_multiple_of(4096);"),
        vec![1]
    );
    assert!(unchecked_rounding("let s = len.checked_next_multiple_of(4096)?;").is_empty());
    assert!(
        unchecked_rounding("// len.next_multiple_of(4096)\nlet a = \"next_multiple_of(\";")
            .is_empty()
    );
}

/// `ls src` is the architecture: at most 12 folders (the layers) besides `main.rs` and `lib.rs`,
/// no top-level file beside them (so no `x.rs` beside a folder `x/`); the README's
/// layer table has one short row per folder.
#[test]
fn src_is_a_handful_of_folders_and_the_layer_rows_are_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut entries: Vec<String> = std::fs::read_dir(root.join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "main.rs" && n != "lib.rs")
        .collect();
    entries.sort();
    assert!(
        entries.len() <= 12,
        "src/ lists {} entries: {entries:?}",
        entries.len()
    );
    let files: Vec<&String> = entries.iter().filter(|n| n.ends_with(".rs")).collect();
    assert!(
        files.is_empty(),
        "top-level files beside the layer folders: {files:?}"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Layout of the code"))
        .expect("the README has a section \"Layout of the code\"");
    let long: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with('|') && l.chars().count() > 200)
        .collect();
    assert!(
        long.is_empty(),
        "layer table rows over 200 characters: {long:#?}"
    );
}
