//! `history` draws the history on the terminal and in Markdown too (HTML has its SVG): a row
//! per group with its mean and its 95% interval as a bar on one shared scale, the change
//! outside the noise flagged as the table flags it; `--ascii` draws it without box-drawing
//! characters. Byte for byte against `report_fixtures/golden/history-kernels.*`
//! (`FSGAUGE_BLESS=1` writes the new output after a deliberate change).

use fsgauge::results::RunResult;

use crate::report_fixtures::{phase, result, write_all};
use crate::support::Sandbox;

/// Five runs on `kernel` of a tree workload whose create phase does about `ops_per_s` (±1%).
fn runs(kernel: &str, day: u32, ops_per_s: f64) -> Vec<RunResult> {
    (0..5u32)
        .map(|rep| {
            let ops = (ops_per_s * 10.0 * (1.0 + 0.01 * (rep as f64 - 2.0))) as u64;
            let mut r = result(
                "xfs",
                "tree",
                serde_json::json!({"dirs": 2, "files": 10}),
                rep,
                vec![phase("file_create", 10.0, 1.0, ops, 0, &[1000], &[1], 1)],
            );
            r.host.kernel = kernel.into();
            r.started_at = format!("2026-01-{day:02}T00:00:{rep:02}Z");
            r
        })
        .collect()
}

#[test]
fn history_draws_its_intervals_as_text_bars_with_the_change_flagged() {
    let sb = Sandbox::new();
    for (i, (k, ops)) in [("6.1.0", 1000.0), ("6.6.0", 1003.0), ("6.8.0", 700.0)]
        .into_iter()
        .enumerate()
    {
        write_all(&sb.path().join(k), &runs(k, i as u32 + 1, ops));
    }
    let db = sb.path().join("store.sqlite");
    let db = db.to_str().unwrap();
    let out = sb
        .cmd()
        .args(["store", "add", "6.1.0", "6.6.0", "6.8.0", "--store", db])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/report_fixtures/golden");
    let bless = std::env::var_os("FSGAUGE_BLESS").is_some();
    let mut differ = Vec::new();
    for (name, extra) in [
        ("table", vec!["--format", "table"]),
        ("md", vec!["--format", "md"]),
        ("ascii", vec!["--format", "table", "--ascii"]),
    ] {
        let out = sb
            .cmd()
            .args(["history", "ops_per_s", "--where", "phase=file_create"])
            .args(&extra)
            .args(["--store", db])
            .env_remove("FSGAUGE_STORE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // The figure comes before the table, one bar per kernel, one flag (on 6.8.0).
        let figure = &text[..text.find("first run").unwrap()];
        let (point, left) = if name == "ascii" {
            ("o", "|")
        } else {
            ("●", "├")
        };
        let bars: Vec<&str> = figure.lines().filter(|l| l.starts_with("6.")).collect();
        assert_eq!(bars.len(), 3, "{text}");
        assert!(
            bars.iter().all(|l| l.contains(point) && l.contains(left)),
            "{text}"
        );
        assert!(
            bars[2].contains("* worse") && !bars[1].contains('*'),
            "{text}"
        );
        if name == "ascii" {
            assert!(!figure.chars().any(|c| "├┤─●└┘".contains(c)), "{text}");
        }
        if name == "md" {
            assert!(text.starts_with("```text\n"), "{text}");
        }
        let file = golden.join(format!("history-kernels.{name}"));
        if bless {
            std::fs::write(&file, &out.stdout).unwrap();
            continue;
        }
        let want = std::fs::read(&file).unwrap_or_default();
        if want != out.stdout {
            differ.push(format!("{name} differs from {}:\n{text}", file.display()));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}
