//! `frag` takes `--quiet` and every format of the one exporter, as every other command does
//! (the walk over every command's `--help` is `output_formats::every_command_that_prints_…`);
//! a kind's own tables show in `report`. Needs no root.

use crate::support::Sandbox;

#[test]
fn frag_takes_quiet_and_every_format() {
    let sb = Sandbox::new();
    let tree = sb.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("a"), vec![7u8; 10_000]).unwrap();
    let run = |args: &[&str]| {
        let out = sb.cmd().arg("frag").args(args).arg(&tree).output().unwrap();
        assert!(out.status.success(), "frag {args:?}: {out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (table, _) = run(&["--quiet"]);
    assert!(table.contains("files"), "{table}");
    let (json, _) = run(&["-q", "--json", "--method", "fiemap"]);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["summary"]["files"], 1, "{json}");
    let (csv, _) = run(&["--format", "csv", "--quiet"]);
    assert!(csv.starts_with("metric,value\nfiles,1\n"), "{csv}");
    let (md, _) = run(&["--format", "md"]);
    assert!(
        md.starts_with("| metric | value |\n| --- | ---: |\n| files | 1 |"),
        "{md}"
    );
    let (html, _) = run(&["--format", "html"]);
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("<td class=\"l\">files</td>"),
        "{html}"
    );
}

/// tio registers its sweep tables with its kind: `report` shows them beside its own tables,
/// and a report of other kinds does not.
#[test]
fn report_shows_the_tables_a_kind_registered() {
    use crate::report_fixtures::{phase, result, tree_study, write_all};
    let dir = tempfile::tempdir().unwrap();
    let (tio, tree) = (dir.path().join("tio"), dir.path().join("tree"));
    let mut runs = Vec::new();
    for (label, mb) in [("a", 100.0), ("b", 150.0)] {
        for rep in 0..2u32 {
            let bytes = (mb * 1e6) as u64;
            let p = phase(
                "seqwrite-4K-t2",
                1.0,
                0.1,
                bytes / 4096,
                bytes,
                &[1000, 2000],
                &[10],
                2,
            );
            runs.push(result(label, "tio", serde_json::json!({}), rep, vec![p]));
        }
    }
    write_all(&tio, &runs);
    write_all(&tree, &tree_study());
    let report = |d: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
            .arg("report")
            .arg(d)
            .args(["--format", "table"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = report(&tio);
    assert!(text.contains("seqwrite 4K: MB/s (10^6 bytes/s)"), "{text}");
    assert!(text.contains("MB/CPU-s"), "the detail table: {text}");
    let text = report(&tree);
    assert!(!text.contains("MB/s (10^6 bytes/s)"), "{text}");
}

/// Reports and comparisons of the fixture results, byte for byte as fsgauge printed them
/// before every command went through the one exporter (the files in
/// `report_fixtures/golden` were written by that fsgauge, main at eb034bc). A deliberate
/// change of a report's output rewrites them: `FSGAUGE_BLESS=1` writes the new output.
#[test]
fn reports_and_comparisons_print_as_before_the_one_exporter() {
    use crate::report_fixtures::{threads_study, tree_study, write_all};
    let dir = tempfile::tempdir().unwrap();
    let all = tree_study();
    let side = |l: &str| -> Vec<_> {
        all.iter()
            .filter(|r| r.testbed.label == l)
            .cloned()
            .collect()
    };
    write_all(&dir.path().join("tree"), &all);
    write_all(&dir.path().join("threads"), &threads_study());
    write_all(&dir.path().join("base"), &side("a"));
    write_all(&dir.path().join("new"), &side("b"));
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/report_fixtures/golden");
    let bless = std::env::var_os("FSGAUGE_BLESS").is_some();
    let mut differ = Vec::new();
    for format in ["table", "md", "csv"] {
        let d = dir.path();
        let runs = [
            ("report-tree", vec![d.join("tree")]),
            ("report-threads", vec![d.join("threads")]),
            ("compare-tree", vec![d.join("base"), d.join("new")]),
        ];
        for (name, paths) in runs {
            let cmd = name.split('-').next().unwrap();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
                .arg(cmd)
                .args(&paths)
                .args(["--format", format])
                .output()
                .unwrap();
            assert!(out.status.success(), "{name} {format}: {out:?}");
            let file = golden.join(format!("{name}.{format}"));
            if bless {
                std::fs::write(&file, &out.stdout).unwrap();
                continue;
            }
            let want = std::fs::read(&file).unwrap();
            if want != out.stdout {
                differ.push(format!(
                    "{name} --format {format} differs from {}:\n{}",
                    file.display(),
                    String::from_utf8_lossy(&out.stdout)
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}

/// A result with modelled phases (an ext4 testbed on an emulated st3500641as), written by
/// fsgauge at 6225677, before the device server's statistics were made of `measure`'s
/// histograms (only its recorded kernel command line replaced, which no report shows): it loads and saves back unchanged (the disk clock's pause, recorded since, reads 0), its device histograms read back through
/// `measure`'s decoder with the figures the file states, and its reports print byte for byte
/// as that fsgauge printed them (`report-modelled.*`, written by it).
#[test]
fn results_with_modelled_phases_load_and_render_as_before() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/report_fixtures/golden");
    let dir = golden.join("modelled");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let r = fsgauge::results::load(&file).unwrap();
    let mut saved = serde_json::to_value(&r).unwrap();
    // The disk clock's pause (recorded since) reads back as 0 from a file written before it.
    for p in saved["phases"].as_array_mut().unwrap() {
        if let Some(m) = p.get_mut("device_model").and_then(|m| m.as_object_mut()) {
            assert_eq!(m.remove("pause_ns"), Some(0.into()));
            assert_eq!(m.remove("pauses"), Some(0.into()));
        }
    }
    assert_eq!(saved, stored);
    let m = r
        .phases
        .iter()
        .find_map(|p| p.device_model.as_ref())
        .expect("a modelled phase");
    assert_eq!(m.requests(), 9);
    for (what, h) in [
        ("service", &m.service_ns),
        ("response", &m.response_ns),
        ("size", &m.size_bytes),
        ("emulator", &m.emulator_ns),
    ] {
        let back = fsgauge::measure::decode_text(&h.hdr).unwrap_or_else(|| panic!("{what}"));
        assert_eq!(back.len(), h.count, "{what}");
        assert_eq!(back.value_at_quantile(0.99) as f64, h.p99, "{what}");
        assert_eq!(back.max() as f64, h.max, "{what}");
    }
    let mut differ = Vec::new();
    for format in ["table", "md", "csv"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
            .arg("report")
            .arg(&dir)
            .args(["--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "report {format}: {out:?}");
        let want = std::fs::read(golden.join(format!("report-modelled.{format}"))).unwrap();
        if want != out.stdout {
            differ.push(format!(
                "report --format {format} differs:\n{}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}
