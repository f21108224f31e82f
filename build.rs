//! Build-time provenance: the git commit fsgauge was built from, and whether the tree had
//! uncommitted changes, so every result can name the exact code that made it. Outside a git
//! checkout (a release tarball) the commit is "unknown".

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // Rebuild when the sources change (they may make the tree dirty) and when the commit moves.
    for p in ["src", "build.rs", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={p}");
    }
    let commit = git(&["rev-parse", "HEAD"]);
    if commit.is_some() {
        let mut watched = vec![
            git(&["rev-parse", "--git-path", "HEAD"]),
            git(&["rev-parse", "--git-path", "index"]),
            git(&["rev-parse", "--git-path", "packed-refs"]),
        ];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(git(&["rev-parse", "--git-path", &branch]));
        }
        for p in watched.into_iter().flatten() {
            if Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    let dirty = commit.is_some()
        && git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=FSGAUGE_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rustc-env=FSGAUGE_GIT_DIRTY={dirty}");
}
