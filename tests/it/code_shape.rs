//! The shape of the code, held to the limits the working rules state (issue 43): no source file
//! over 1,200 lines, at most 5 functions over 100 lines, at most 2 circles between the files
//! of src/ (read with `code_rules`' scanner). The function counter reads code as
//! `/work/tools`-style brace counting does: from a line that starts a `fn` to the line whose
//! `}` closes its body, comments and literals blanked.

use std::path::{Path, PathBuf};

use crate::code_rules::{code_only, file_circles, file_uses, rust_files};

const FILE_LINES_MAX: usize = 1200;
const FN_LINES: usize = 100;
const LONG_FNS_MAX: usize = 5;
const CIRCLES_MAX: usize = 2;

/// Every `.rs` file under src/ (unit tests included), relative to the crate root, with its text.
fn all_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// The name of the function a line of code starts, if it starts one.
fn starts_fn(line: &str) -> Option<&str> {
    let mut l = line.trim_start();
    if let Some(rest) = l.strip_prefix("pub") {
        l = rest.trim_start();
        if l.starts_with('(') {
            l = l[l.find(')')? + 1..].trim_start();
        }
    }
    for word in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        l = l.strip_prefix(word).unwrap_or(l).trim_start();
    }
    let rest = l.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    (end > 0).then(|| &rest[..end])
}

/// The functions of `code` (comments and literals blanked) longer than `limit` lines, from the
/// line that starts each to the line that closes its body: (lines, first line, name).
fn long_fns(code: &str, limit: usize) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = starts_fn(line) else {
            continue;
        };
        let (mut depth, mut started) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if started && depth == 0 {
                if j - i + 1 > limit {
                    out.push((j - i + 1, i + 1, name.to_string()));
                }
                break;
            }
            if !started && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

#[test]
fn no_source_file_is_over_1200_lines() {
    let long: Vec<String> = all_sources()
        .iter()
        .filter(|(_, text)| text.lines().count() > FILE_LINES_MAX)
        .map(|(rel, text)| format!("{rel}: {} lines", text.lines().count()))
        .collect();
    assert!(
        long.is_empty(),
        "files over {FILE_LINES_MAX} lines (split them by what they hold): {long:#?}"
    );
}

#[test]
fn at_most_five_functions_are_over_100_lines() {
    let mut long: Vec<String> = all_sources()
        .iter()
        .flat_map(|(rel, text)| {
            long_fns(&code_only(text), FN_LINES)
                .into_iter()
                .map(move |(n, at, name)| format!("{n} lines: {rel}:{at} {name}"))
        })
        .collect();
    long.sort();
    assert!(
        long.len() <= LONG_FNS_MAX,
        "{} functions over {FN_LINES} lines (at most {LONG_FNS_MAX}; extract well-named steps): {long:#?}",
        long.len()
    );
}

#[test]
fn the_function_counter_measures_bodies_and_skips_declarations() {
    let body = |n: usize| "    x();\n".repeat(n);
    let code = format!(
        "pub(crate) fn long(a: u32)\n    -> u32\n{{\n{}}}\nfn short() {{\n{}}}\ntrait T {{\n    fn decl(&self);\n}}\n",
        body(99),
        body(10)
    );
    // `long` runs from its first line to its closing brace: 2 + 1 + 99 + 1 lines.
    assert_eq!(long_fns(&code, 100), vec![(103, 1, "long".to_string())]);
    assert_eq!(long_fns(&code, 102).len(), 1);
    assert!(long_fns(&code, 103).is_empty());
    assert_eq!(starts_fn("    pub async fn go() {"), Some("go"));
    assert_eq!(starts_fn("    let f = fn_ptr;"), None);
}

#[test]
fn at_most_two_circles_between_the_files_of_src() {
    let circles = file_circles(&file_uses(), &[]);
    assert!(
        circles.len() <= CIRCLES_MAX,
        "{} circles between files (at most {CIRCLES_MAX}; move what both sides share below them): {circles:#?}",
        circles.len()
    );
}
