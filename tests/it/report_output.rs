//! `fsgauge report` and `fsgauge compare` on synthetic result files with hand-computed
//! figures. Needs no root.

use std::process::Command;

use crate::report_fixtures::*;
use fsgauge::results::DeviceDelta;

fn fsgauge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fsgauge"))
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `fsgauge report DIR --format FORMAT`, its stdout (the command must succeed).
fn report_as(dir: &std::path::Path, format: &str) -> String {
    ok(&fsgauge()
        .arg("report")
        .arg(dir)
        .args(["--format", format])
        .output()
        .unwrap())
}

#[test]
fn reports_are_byte_identical_when_made_again_from_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &tree_study());
    write_all(&res, &threads_study());
    for ext in ["html", "md", "csv", "json"] {
        let out = dir.path().join(format!("report.{ext}"));
        ok(&fsgauge()
            .arg("report")
            .arg(&res)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap());
        let first = std::fs::read(&out).unwrap();
        assert!(first.len() > 500, "{ext} report is too small");
        std::fs::remove_file(&out).unwrap();
        ok(&fsgauge()
            .arg("report")
            .arg(&res)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap());
        let second = std::fs::read(&out).unwrap();
        assert!(first == second, "{ext} report differs when made again");
    }
    // A report exported into the results directory is not taken for a result.
    let inside = res.join("report.json");
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&inside)
        .output()
        .unwrap());
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("--format")
        .arg("md")
        .output()
        .unwrap());
}

#[test]
fn csv_statistics_match_hand_computed_values() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &tree_study());
    let csv = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "csv"])
        .output()
        .unwrap());
    let row = csv
        .lines()
        .find(|l| l.starts_with("a,tree,create,1,elapsed,"))
        .unwrap_or_else(|| panic!("no elapsed row for a/create:\n{csv}"));
    let f: Vec<&str> = row.split(',').collect();
    let num = |i: usize| f[i].parse::<f64>().unwrap();
    // 10, 12, 14: mean 12, sd 2, cv 1/6, t(0.975, 2) = 4.302653; the interval of positive
    // figures is on the log scale: 12 · exp(± 4.302653 / 6 / √3) = 12 · exp(± 0.4140233).
    assert_eq!(f[6], "lower");
    assert_eq!(num(7), 3.0);
    assert!((num(8) - 12.0).abs() < 1e-9);
    assert!((num(9) - 2.0).abs() < 1e-9);
    assert!((num(10) - 2.0 / 12.0).abs() < 1e-9);
    assert!(
        (num(11) - 12.0 * (-0.4140233f64).exp()).abs() < 1e-5,
        "{row}"
    );
    assert!((num(12) - 12.0 * 0.4140233f64.exp()).abs() < 1e-5, "{row}");
    assert_eq!((num(13), num(14), num(15)), (10.0, 12.0, 14.0));
    // Throughput is a rate: its harmonic mean is there. 20 MiB in 10, 12, 14 s.
    let tp = csv
        .lines()
        .find(|l| l.starts_with("a,tree,create,1,mb_per_s,"))
        .unwrap();
    let mbs: Vec<f64> = [10.0, 12.0, 14.0]
        .iter()
        .map(|w| 20.0 * 1048576.0 / w / 1e6)
        .collect();
    let h = 3.0 / mbs.iter().map(|x| 1.0 / x).sum::<f64>();
    let got: f64 = tp.rsplit(',').next().unwrap().parse().unwrap();
    assert!((got - h).abs() < 1e-9, "{tp}");
}

#[test]
fn tables_show_the_study_forms() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &tree_study());
    write_all(dir.path(), &threads_study());
    let md = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "md", "--baseline", "a"])
        .output()
        .unwrap());
    // Elapsed (sys): a/create mean 12 s with 1 s sys; b 22 s with 2 s.
    assert!(
        md.contains("| tree dirs=2 | create |")
            || md.contains("| tree | create | 12.00 (1.00) | 22.00 (2.00) |"),
        "{md}"
    );
    assert!(
        md.contains("12.00 (1.00)") && md.contains("22.00 (2.00)"),
        "{md}"
    );
    // Throughput by threads with % change against the baseline: b is 1.5x a at every count.
    assert!(md.contains("### Throughput by threads"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| tio mode=seq-write") || (l.contains("| seq-write | 4 |")))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("+50.0%"), "{row}");
    assert!(md.contains("mean ± sd") || md.contains("± "), "{md}");
    assert!(
        md.contains("6.1.0-test") && md.contains("mkfs.ext4 -F /dev/loop9"),
        "environment missing: {md}"
    );
    let e = fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--baseline", "zz"])
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("a, b"),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
}

#[test]
fn html_is_one_self_contained_page_with_every_plot() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r");
    write_all(&res, &tree_study());
    write_all(&res, &threads_study());
    let out = dir.path().join("report.html");
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&out)
        .arg("--svg")
        .arg("--png")
        .output()
        .unwrap());
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("stylesheet"));
    let figures = html.matches("<figure class=\"plot\"").count();
    // bars: tree create, tree delete, 3 tio cells; threads line: 1; latency: 5; series: 4.
    assert!(figures >= 10, "only {figures} plots");
    for kind in [
        "id=\"bars-tree-create\"",
        "id=\"threads-",
        "id=\"latency-tree-create\"",
        "id=\"series-tree-create\"",
    ] {
        assert!(html.contains(kind), "missing {kind}");
    }
    // Every figure draws something: bars are filled rectangles, lines are polylines.
    for fig in html.split("<figure").skip(1) {
        assert!(
            fig.contains("<rect") || fig.contains("<polyline"),
            "empty figure: {}",
            &fig[..200.min(fig.len())]
        );
    }
    let files: Vec<_> = std::fs::read_dir(dir.path().join("report.plots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let svgs = files.iter().filter(|p| p.extension().unwrap() == "svg");
    assert_eq!(svgs.count(), figures);
    let pngs: Vec<_> = files
        .iter()
        .filter(|p| p.extension().unwrap() == "png")
        .collect();
    assert_eq!(pngs.len(), figures);
    for p in pngs {
        let img = image::open(p).unwrap().to_rgb8();
        assert!(img.width() >= 720 && img.height() == 360, "{}", p.display());
        let coloured = img
            .pixels()
            .filter(|px| px.0.iter().max().unwrap() - px.0.iter().min().unwrap() > 60)
            .count();
        assert!(
            coloured > 200,
            "{}: {coloured} coloured pixels",
            p.display()
        );
    }
}

#[test]
fn warnings_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut rs: Vec<_> = tree_study().into_iter().filter(|r| r.rep < 2).collect();
    for r in rs.iter_mut().filter(|r| r.testbed.label == "b") {
        r.testbed.loop_direct_io = Some(false);
        r.phases[0].wall_s *= 1.0 + r.rep as f64;
    }
    // A `read` run written before operations carried their declarations: its kind declares
    // today which of its operations read file data.
    let mut read = phase("walk", 1.0, 0.1, 10, 1 << 20, &[1000], &[10], 1);
    read.op_stats.insert(
        "file".into(),
        fsgauge::results::OpStats {
            count: 10,
            bytes: 1 << 20,
            primary: true,
            ..Default::default()
        },
    );
    rs.push(result("c", "read", serde_json::json!({}), 0, vec![read]));
    rs.last_mut().unwrap().conditions.cold = "none".into();
    write_all(dir.path(), &rs);
    let md = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "md"])
        .output()
        .unwrap());
    assert!(
        md.contains("have fewer than 3 repetitions") && md.contains("a · tree · create: 2"),
        "{md}"
    );
    assert!(md.contains("did not use direct I/O"), "{md}");
    assert!(
        md.contains("smaller than the memory available for the page cache"),
        "{md}"
    );
}

#[test]
fn high_variation_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let mut rs = tree_study();
    for r in rs.iter_mut() {
        r.phases[0].bytes_per_s *= 1.0 + r.rep as f64;
    }
    write_all(dir.path(), &rs);
    let md = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "md"])
        .output()
        .unwrap());
    assert!(
        md.contains("varies by") && md.contains("reps = \\\"auto\\\"")
            || md.contains("reps = \"auto\""),
        "{md}"
    );
}

#[test]
fn compare_reports_change_p_value_and_direction() {
    let dir = tempfile::tempdir().unwrap();
    let (base, new) = (dir.path().join("base"), dir.path().join("new"));
    let all = tree_study();
    write_all(
        &base,
        &all.iter()
            .filter(|r| r.testbed.label == "a")
            .cloned()
            .collect::<Vec<_>>(),
    );
    write_all(
        &new,
        &all.iter()
            .filter(|r| r.testbed.label == "b")
            .cloned()
            .collect::<Vec<_>>(),
    );
    let json = ok(&fsgauge()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--format", "json"])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "create" && r["metric"] == "elapsed")
        .unwrap();
    // 10,12,14 vs 20,22,24: t = 10 / sqrt(4/3 + 4/3) = 6.1237, df = 4, p = 0.003617.
    assert!(
        (row["change_pct"].as_f64().unwrap() - 83.333).abs() < 0.01,
        "{row}"
    );
    assert!(
        (row["p_value"].as_f64().unwrap() - 0.003617).abs() < 2e-5,
        "{row}"
    );
    assert_eq!(row["significance"], "**");
    assert_eq!(row["verdict"], "worse", "elapsed went up");
    let tp = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "create" && r["metric"] == "throughput")
        .unwrap();
    assert_eq!(tp["verdict"], "worse", "throughput went down");
    let del = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "delete" && r["metric"] == "elapsed")
        .unwrap();
    assert_eq!(del["verdict"], "same", "{del}");
    // The ratio new / base of the create times, 22 / 12, with an interval on the log scale:
    // positive, and symmetric around the ratio in ln (low · high = ratio²).
    let r = &row["ratio"];
    let (ratio, low, high) = (
        r["ratio"].as_f64().unwrap(),
        r["low"].as_f64().unwrap(),
        r["high"].as_f64().unwrap(),
    );
    assert!((ratio - 22.0 / 12.0).abs() < 1e-9, "{r}");
    assert!(1.0 < low && low < ratio && ratio < high, "{r}");
    assert!((low * high - ratio * ratio).abs() < 1e-9, "{r}");
    let table = ok(&fsgauge()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .output()
        .unwrap());
    assert!(
        table.contains("a → b")
            && table.contains("+83.3%")
            && table.contains("1.83× (")
            && table.contains("worse"),
        "{table}"
    );
    let md = ok(&fsgauge()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--format", "md"])
        .output()
        .unwrap());
    assert!(md.contains("| a → b | tree | create |"), "{md}");
}

#[test]
fn bad_report_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = fsgauge().arg("report").arg(dir.path()).output().unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("no fsgauge result files"));
    let junk = dir.path().join("x.json");
    std::fs::write(&junk, "{\"schema\": \"other/9\"}").unwrap();
    let e = fsgauge().arg("report").arg(&junk).output().unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("other/9"));
    let e = fsgauge()
        .arg("report")
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
}

/// Issue 41, item 12: a JSON document without a `schema` key in a results directory is not a
/// result, and is named in a warning rather than left out without a word (before, nothing was
/// said); the results beside it are reported as before, and a directory of nothing else says
/// what it held.
#[test]
fn a_json_file_without_a_schema_key_is_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &tree_study());
    let stray = res.join("notes.json");
    std::fs::write(&stray, "{\"kind\": \"notes\", \"items\": [1, 2]}").unwrap();
    let out = fsgauge().arg("report").arg(&res).output().unwrap();
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{} has no \"schema\" key, so it is not an fsgauge result and was left out",
            stray.display()
        )),
        "{stderr}"
    );
    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    std::fs::write(only.join("list.json"), "[1, 2, 3]").unwrap();
    let out = fsgauge().arg("report").arg(&only).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds no fsgauge result files")
            && stderr.contains("without a \"schema\" key:")
            && stderr.contains("list.json"),
        "{stderr}"
    );
}

#[test]
fn compare_picks_testbeds_out_of_one_results_directory() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &tree_study());
    let table = ok(&fsgauge()
        .arg("compare")
        .arg(dir.path())
        .arg(dir.path())
        .args(["--base-testbed", "a", "--new-testbed", "b"])
        .output()
        .unwrap());
    assert!(
        table.contains("a → b") && table.contains("+83.3%"),
        "{table}"
    );
    let e = fsgauge()
        .arg("compare")
        .arg(dir.path())
        .arg(dir.path())
        .args(["--base-testbed", "zz"])
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("testbeds: a, b"));
}

/// Aging results (one phase per usage checkpoint with its layout figures in `extra`) get the
/// fragmentation study's table: a row per checkpoint with usage, extents per file and layout
/// score, means over the repetitions.
#[test]
fn aging_checkpoints_get_a_block_layout_table() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let mut results = Vec::new();
    for rep in 0..2u32 {
        let mut phases = Vec::new();
        for (usage, extents, score) in [(25.0, 2.0, 0.9), (75.0, 8.0 + rep as f64 * 2.0, 0.5)] {
            let mut p = phase(
                &format!("age-{usage}"),
                1.0,
                0.1,
                100,
                1 << 20,
                &[1000],
                &[100],
                1,
            );
            p.extra.insert("usage_pct".into(), usage);
            p.extra.insert("extents_per_file".into(), extents);
            p.extra.insert("layout_score".into(), score);
            phases.push(p);
        }
        results.push(result(
            "ext2",
            "age",
            serde_json::json!({"mode": "append"}),
            rep,
            phases,
        ));
    }
    write_all(&res, &results);
    let md = dir.path().join("report.md");
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&md)
        .output()
        .unwrap());
    let text = std::fs::read_to_string(&md).unwrap();
    let at = text
        .find("### Block layout per phase")
        .expect("a block layout table");
    let table: Vec<&str> = text[at..]
        .lines()
        .filter(|l| l.starts_with("| ext2"))
        .take(2)
        .collect();
    assert_eq!(table.len(), 2, "{text}");
    assert!(
        table[0].contains("| 25.00 | 2.00 | 0.900 |"),
        "{}",
        table[0]
    );
    // Mean of 8 and 10 extents per file at 75%.
    assert!(
        table[1].contains("| 75.00 | 9.00 | 0.500 |"),
        "{}",
        table[1]
    );
    // And the fragmentation-against-usage plots, one line per testbed.
    let html = dir.path().join("report.html");
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("age: extents per file against usage"),
        "no usage plot"
    );
    assert!(
        page.contains("age: layout score against usage"),
        "no usage plot"
    );
    // Workloads without layout figures get no such table.
    let plain = dir.path().join("plain");
    write_all(&plain, &tree_study());
    let md2 = dir.path().join("plain.md");
    ok(&fsgauge()
        .arg("report")
        .arg(&plain)
        .arg("-o")
        .arg(&md2)
        .output()
        .unwrap());
    assert!(!std::fs::read_to_string(&md2)
        .unwrap()
        .contains("Block layout per phase"));
}

/// `fsgauge study append` results (rows per checkpoint under `layout.rows`) get the append
/// study's aged-vs-fresh table, with read speed of the aged tree as a share of the fresh copy's.
#[test]
fn append_study_results_get_the_aged_vs_fresh_table() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let mut results = Vec::new();
    for (rep, aged) in [(0u32, 200.0), (1, 400.0)] {
        let mut r = result(
            "ext2",
            "study-append",
            serde_json::json!({"append": 4096}),
            rep,
            vec![phase("age-75", 1.0, 0.1, 10, 1 << 20, &[1000], &[10], 1)],
        );
        r.layout = Some(serde_json::json!({"rows": [{
            "usage_target_pct": 75.0, "usage_pct": 74.5,
            "read_kbps_aged": aged, "read_kbps_fresh": 1200.0,
            "extents_per_file_aged": 90.0, "extents_per_file_fresh": 9.0,
        }]}));
        results.push(r);
    }
    write_all(&res, &results);
    let md = dir.path().join("report.md");
    ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&md)
        .output()
        .unwrap());
    let text = std::fs::read_to_string(&md).unwrap();
    let at = text
        .find("### Aged vs fresh copy")
        .expect("the aged vs fresh table");
    let row = text[at..]
        .lines()
        .find(|l| l.starts_with("| ext2"))
        .unwrap();
    // Mean aged read 300 KiB/s against 1200 fresh: 25%.
    assert!(row.contains("| 300.0 / 1200 | 25% |"), "{row}");
    assert!(row.contains("| 90.00 / 9.00 |"), "{row}");
}

#[test]
fn reports_lead_with_findings_made_from_the_result_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &tree_study_with_a_question());
    let report = |format: &str| report_as(&res, format);
    let json = report("json");
    assert_eq!(
        json,
        report("json"),
        "findings are a pure function of the results"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let f = &v["findings"][0];
    assert_eq!(f["question"]["id"], "create-time");
    assert_eq!(f["base_values"], serde_json::json!([10.0, 12.0, 14.0]));
    assert_eq!(f["variant_values"], serde_json::json!([20.0, 22.0, 24.0]));
    // Repetitions 0-2 of both sides pair up: the geometric mean of the per-pair ratios.
    let geo = (20.0f64 / 10.0 * 22.0 / 12.0 * 24.0 / 14.0).cbrt();
    assert!(
        (f["ratio"]["ratio"].as_f64().unwrap() - geo).abs() < 1e-9,
        "{f}"
    );
    assert_eq!(f["ratio"]["paired"], true, "{f}");
    assert!(f["ratio"]["low"].as_f64().unwrap() > 1.0, "{f}");
    assert_eq!(f["decision"], "larger");
    assert_eq!(f["agrees"], true);
    let sentence = f["sentence"].as_str().unwrap();
    assert!(
        sentence.starts_with("b has 1.85× the elapsed time of a in create (95% CI ")
            && sentence.contains("n = 3 pairs): b is worse; published 2.00×: same direction."),
        "{sentence}"
    );
    let md = report("md");
    let (findings, warnings) = (
        md.find("## Findings").unwrap(),
        md.find("## Tables").unwrap(),
    );
    assert!(findings < warnings, "{md}");
    assert!(
        md.contains("**Does b take longer to create the tree than a?** b has 1.85×"),
        "{md}"
    );
    let html = report("html");
    assert!(html.find("<h2>Findings</h2>").unwrap() < html.find("<h2>Tables</h2>").unwrap());
    assert!(html.contains("(published: a made-up study)"), "{html}");
    let text = report("table");
    assert!(text.contains("Findings\n  Does b take longer"), "{text}");
    // Results without questions have no findings section.
    let plain = dir.path().join("plain");
    write_all(&plain, &tree_study());
    let md = report_as(&plain, "md");
    assert!(!md.contains("Findings"), "{md}");
}

#[test]
fn a_phase_a_question_uses_that_lasts_under_a_second_names_the_scale_that_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = tree_study_with_a_question();
    for r in &mut all {
        r.phases[0].wall_s *= 0.02; // create: 0.20-0.28 s on a, 0.40-0.48 s on b
        r.study.as_mut().unwrap().scale = 0.5;
    }
    write_all(dir.path(), &all);
    let md = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "md"])
        .output()
        .unwrap());
    // a's mean is 0.24 s: 0.5 x 2 s / 0.24 s = 4.2, rounded up.
    assert!(
        md.contains("a · tree · create: the phase lasts 0.240 s, under 1 s, so it measures the machine more than the filesystem; --scale 5 would make it about 2 s"),
        "{md}"
    );
    // delete (1-3 s, and no question uses it) gets no such warning.
    assert!(!md.contains("delete: the phase lasts"), "{md}");
}

#[test]
fn journal_writes_show_as_a_multiple_of_the_journal_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = tree_study();
    for r in &mut all {
        r.testbed.journal = Some("ram:16M".into());
        // create writes 160 MiB to the journal (10x), delete 8 MiB (0.5x).
        r.phases[0].journal_device = Some(DeviceDelta {
            write_bytes: 160 << 20,
            ..Default::default()
        });
        r.phases[1].journal_device = Some(DeviceDelta {
            write_bytes: 8 << 20,
            ..Default::default()
        });
    }
    write_all(dir.path(), &all);
    let text = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "table"])
        .output()
        .unwrap());
    let table = &text[text.find("Journal writes").expect("a journal table")..];
    assert!(
        table.contains("create") && table.contains("10.0×"),
        "{table}"
    );
    assert!(
        table.contains("delete") && table.contains("0.500×"),
        "{table}"
    );
    // Without external journals there is no such table.
    let plain = dir.path().join("plain");
    write_all(&plain, &tree_study());
    let text = report_as(&plain, "table");
    assert!(!text.contains("Journal writes"), "{text}");
}

#[test]
fn a_report_names_the_environment_fields_that_differ_before_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let mut all = tree_study_with_a_question();
    for r in &mut all {
        let mut e = fsgauge::results::Environment::default();
        let ratio = if r.testbed.label == "a" { "20" } else { "10" };
        e.sysctl.insert("vm.dirty_ratio".into(), ratio.into());
        e.sysctl.insert("vm.swappiness".into(), "60".into());
        r.environment = Some(e);
    }
    write_all(&res, &all);
    let line = "vm.dirty_ratio: 10 (b); 20 (a)";
    let text = report_as(&res, "table");
    let at = text.find(&format!("these runs differ in:\n  {line}\n"));
    assert!(
        at.is_some_and(|at| at < text.find("Findings").unwrap()),
        "{text}"
    );
    assert!(!text.contains("vm.swappiness:"), "{text}");
    let md = report_as(&res, "md");
    assert!(
        md.find(&format!("- {line}")).unwrap() < md.find("## Findings").unwrap(),
        "{md}"
    );
    let html = report_as(&res, "html");
    assert!(
        html.find(&format!("<li>{line}</li>")).unwrap() < html.find("<h2>Findings</h2>").unwrap(),
        "{html}"
    );
    let json: serde_json::Value = serde_json::from_str(&report_as(&res, "json")).unwrap();
    assert_eq!(
        json["environment_differs"],
        serde_json::json!([{"field": "vm.dirty_ratio", "values": [["10", ["b"]], ["20", ["a"]]]}])
    );
    // Runs that agree say nothing about their environment up front.
    for r in &mut all {
        if let Some(e) = r.environment.as_mut() {
            e.sysctl.insert("vm.dirty_ratio".into(), "20".into());
        }
    }
    let same = dir.path().join("same");
    write_all(&same, &all);
    let text = report_as(&same, "table");
    assert!(!text.contains("differ in"), "{text}");
}

/// A finding whose compared phases ran on an emulated disk that fell behind its model is
/// still a finding (the disk's own clock stood still while it was behind): the lateness stays
/// in the record (the JSON) and in the report's one lateness table, not in the sentence.
#[test]
fn findings_keep_the_lateness_of_their_phases_in_the_record_not_the_sentence() {
    use fsgauge::results::device::ModelledIo;
    let with_lateness = |p99_on_b: f64| {
        let mut all = tree_study_with_a_question();
        for r in &mut all {
            let p99 = if r.testbed.label == "b" && r.rep == 1 {
                p99_on_b
            } else {
                0.05
            };
            for p in &mut r.phases {
                p.device_model = Some(ModelledIo {
                    lateness_p99_ms: p99,
                    lateness_max_ms: p99 * 2.0,
                    ..Default::default()
                });
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let res = dir.path().join("results");
        write_all(&res, &all);
        let json: serde_json::Value = serde_json::from_str(&report_as(&res, "json")).unwrap();
        (json["findings"][0].clone(), report_as(&res, "md"))
    };
    let (late, md) = with_lateness(2.5);
    let s = late["sentence"].as_str().unwrap();
    assert!(
        s.starts_with("b has 1.85× the elapsed time of a in create (95% CI "),
        "{s}"
    );
    assert!(
        !s.contains("fell behind") && !s.contains("not yet a finding"),
        "{s}"
    );
    assert_eq!(late["emulator_behind"][0]["phase"], "create");
    assert_eq!(
        md.matches("### Where the emulated disk fell behind its model")
            .count(),
        1,
        "{md}"
    );
    assert!(md.contains("| b | tree | create | 1 of 3 | 2.50 |"), "{md}");
    let (on_time, md) = with_lateness(0.3);
    assert!(on_time.get("emulator_behind").is_none(), "{on_time}");
    assert!(!md.contains("fell behind"), "{md}");
}

/// The same study on this machine and on an emulated disk: never pooled, each disk has its
/// finding; a table sets them side by side with the published figure, and the HTML report
/// opens with a forest plot of them (log axis, intervals, the published figure marked).
#[test]
fn findings_of_runs_on_different_disks_stand_side_by_side() {
    use fsgauge::results::device::DeviceModelInfo;
    let here = tree_study_with_a_question();
    let mut emulated = tree_study_with_a_question();
    for r in &mut emulated {
        r.testbed.device_model = Some(DeviceModelInfo {
            reference: "st3500641as".into(),
            profile: "st3500641as".into(),
            kind: "hdd".into(),
            ..Default::default()
        });
        r.spec_hash.push_str("-emulated");
        // A larger gap between a and b on the emulated disk.
        if r.testbed.label == "b" {
            for p in &mut r.phases {
                p.wall_s *= 1.5;
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &here);
    write_all(&res, &emulated);
    let json: serde_json::Value = serde_json::from_str(&report_as(&res, "json")).unwrap();
    let f = json["findings"].as_array().unwrap();
    assert_eq!(f.len(), 2, "one finding per disk: {json}");
    assert!(f[0].get("device").is_none());
    assert_eq!(f[1]["device"], "st3500641as");
    assert_eq!(
        f[0]["variant_values"],
        serde_json::json!([20.0, 22.0, 24.0])
    );
    assert_eq!(
        f[1]["variant_values"],
        serde_json::json!([30.0, 33.0, 36.0])
    );
    assert!(f[1]["sentence"]
        .as_str()
        .unwrap()
        .contains("on the emulated disk st3500641as"));
    let md = report_as(&res, "md");
    let table = md
        .find("### Findings by disk")
        .expect("the side-by-side table");
    let head = &md[table..];
    assert!(
        head.contains("| question | published | this machine | st3500641as |"),
        "{head}"
    );
    assert!(head.contains("| create-time | 2.00× | 1.85× ("), "{head}");
    let html = report_as(&res, "html");
    let forest = html
        .find("id=\"findings-forest\"")
        .expect("the forest plot");
    assert!(
        forest < html.find("Findings in numbers").unwrap(),
        "at the top"
    );
    let svg = &html[forest..];
    assert_eq!(svg.matches("class=\"row\"").count(), 2);
    assert!(svg.contains("class=\"published\"") && svg.contains("class=\"one\""));
    assert!(
        svg.contains("create-time · st3500641as") && svg.contains("create-time · this machine")
    );
    // A single disk's report has no side-by-side table.
    let only = tempfile::tempdir().unwrap();
    write_all(only.path(), &here);
    assert!(!report_as(only.path(), "md").contains("Findings by disk"));
}
