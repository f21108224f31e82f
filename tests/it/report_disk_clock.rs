//! `fsgauge report` of results whose emulated disk's clock stopped (the recorded result of an
//! ext4 testbed on an emulated st3500641as, `report_fixtures/golden/modelled`, with a pause and
//! lateness set on its `remove` phase): elapsed time and rates on the disk's clock, the wall
//! time and pause beside them, and one lateness table in place of a paragraph per phase, in
//! every format. Needs no root.

use fsgauge::analysis::report::model::fmt_num;

/// The fixture with its `remove` phase's disk clock stopped for a third of its wall time and
/// its disk late (p99 2.5 ms, 3 of 9 requests, 1 held off), and the paragraph such a run
/// used to write; written to `dir`. Returns the phase's op rate on the disk's clock.
fn paused_fixture(dir: &std::path::Path) -> f64 {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/report_fixtures/golden/modelled");
    let file = std::fs::read_dir(&golden)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let phase = doc["phases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "remove")
        .unwrap();
    let wall = phase["wall_s"].as_f64().unwrap();
    let ops = phase["ops"].as_u64().unwrap();
    let pause_ns = (wall * 1e9 / 3.0) as u64;
    let m = &mut phase["device_model"];
    m["pause_ns"] = pause_ns.into();
    m["pauses"] = 3.into();
    m["lateness_p99_ms"] = 2.5.into();
    m["late"] = 3.into();
    m["late_held_off"] = 1.into();
    doc["errors"] = serde_json::json!([
        "phase remove: the emulated disk fell behind its model (lateness p99 2.500 ms, max 3.000 ms, over 0.5 ms): the phase's times are too long by up to that much; run on a less loaded machine or a profile with longer service times"
    ]);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(file.file_name().unwrap()), doc.to_string()).unwrap();
    ops as f64 / (wall - pause_ns as f64 / 1e9)
}

fn report(dir: &std::path::Path, format: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("report")
        .arg(dir)
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(out.status.success(), "report {format}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const LATENESS: &str = "Where the emulated disk fell behind its model";

#[test]
fn a_paused_disk_reports_disk_time_rates_and_one_lateness_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("results");
    let rate = paused_fixture(&dir);
    // The recorded wall-clock rate was 6361 ops/s; on the disk's clock it is 1.5 times that.
    let shown = fmt_num(rate);
    assert_ne!(shown, "6361");

    let text = report(&dir, "table");
    assert!(
        text.contains(&format!(
            "interleave       remove  op rate (ops/s)    {shown} ± 0 (n=1)"
        )),
        "{text}"
    );
    assert!(
        text.contains("wall time (s)") && text.contains("disk clock pause (s)"),
        "{text}"
    );
    assert!(
        text.contains("times and rates are on the disk's clock"),
        "{text}"
    );
    assert_eq!(text.matches(LATENESS).count(), 1, "{text}");
    assert!(
        !text.contains("fell behind its model (lateness p99"),
        "{text}"
    );

    let md = report(&dir, "md");
    assert!(
        md.contains(&format!(
            "| interleave | remove | op rate (ops/s) | {shown} ± 0 (n=1) |"
        )),
        "{md}"
    );
    assert_eq!(md.matches(&format!("### {LATENESS}")).count(), 1, "{md}");
    assert!(
        md.contains("| ext4 | interleave | remove | 1 of 1 | 2.50 | 3/9 | 1 | 33.3% |"),
        "{md}"
    );
    assert!(!md.contains("fell behind its model (lateness p99"), "{md}");

    let html = report(&dir, "html");
    assert_eq!(html.matches(LATENESS).count(), 1, "{html}");
    assert!(!html.contains("fell behind its model (lateness p99"));

    let json: serde_json::Value = serde_json::from_str(&report(&dir, "json")).unwrap();
    let tables = json["tables"].as_array().unwrap();
    let late: Vec<_> = tables.iter().filter(|t| t["title"] == LATENESS).collect();
    assert_eq!(late.len(), 1, "{json}");
    assert_eq!(late[0]["rows"][0][7], "33.3%");
    let cell = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "remove")
        .unwrap();
    let metric = |k: &str| {
        cell["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["key"] == k)
            .unwrap_or_else(|| panic!("{k}: {cell}"))["summary"]["mean"]
            .as_f64()
            .unwrap()
    };
    assert!((metric("ops_per_s") - rate).abs() < 1e-6 * rate);
    assert!((metric("wall") - 1.5 * metric("elapsed")).abs() < 1e-9);
    assert!((metric("pause") - metric("wall") / 3.0).abs() < 1e-9);

    // CSV, the long form of the cells: the disk-time rate with the wall time and pause.
    let csv = report(&dir, "csv");
    let row = |key: &str| {
        csv.lines()
            .find(|l| l.contains(&format!(",remove,1,{key},")))
            .unwrap_or_else(|| panic!("{key}: {csv}"))
            .to_string()
    };
    assert!(row("ops_per_s").contains(&format!(",{rate},")), "{csv}");
    row("wall");
    row("pause");
}

/// The tree study with a question (does b take longer to create the tree than a?) whose b
/// runs' disk clock stood still for half of each create phase: on the wall clock b takes
/// twice as long, on the disk's clock about as long. The finding decides on the disk's clock,
/// says first that the clocks disagree and how long the clock stood still, and the findings
/// table carries the wall clock's ratio beside it.
#[test]
fn a_finding_on_a_paused_disk_states_both_clocks_in_every_format() {
    use crate::report_fixtures::{tree_study_with_a_question, write_all};
    use fsgauge::results::device::ModelledIo;
    let mut all = tree_study_with_a_question();
    for r in &mut all {
        let b = r.testbed.label == "b";
        for p in &mut r.phases {
            p.device_model = Some(ModelledIo {
                pause_ns: if b { (p.wall_s * 0.5e9) as u64 } else { 0 },
                ..Default::default()
            });
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("results");
    write_all(&dir, &all);
    let json: serde_json::Value = serde_json::from_str(&report(&dir, "json")).unwrap();
    let f = &json["findings"][0];
    assert_eq!(f["base_values"], serde_json::json!([10.0, 12.0, 14.0]));
    assert_eq!(f["variant_values"], serde_json::json!([10.0, 11.0, 12.0]));
    assert_eq!(
        f["wall"]["variant_values"],
        serde_json::json!([20.0, 22.0, 24.0])
    );
    assert_eq!(f["wall"]["decision"], "larger");
    let s = f["sentence"].as_str().unwrap();
    assert!(
        s.starts_with("the disk's clock and the wall clock decide differently (undecided on the disk's clock, larger on the wall clock)"),
        "{s}"
    );
    assert!(
        s.contains("; the emulated disk's clock stood still for 50% of a compared phase's wall time (worst: create on b, repetition "),
        "{s}"
    );
    assert!(
        s.contains(
            "b has 0.923× the elapsed time of a in create, on the disk's clock: undecided (95% CI "
        ),
        "{s}"
    );
    assert!(
        s.contains("; on the wall clock 1.85× (95% CI 1.52–2.24×, larger)"),
        "{s}"
    );
    let md = report(&dir, "md");
    assert!(md.contains(s), "the sentence in Markdown: {md}");
    assert!(
        md.contains("| question | baseline | variant | metric | ratio | 95% CI | wall clock | p |"),
        "{md}"
    );
    let text = report(&dir, "table");
    assert!(text.contains("wall clock"), "{text}");
    // Nothing fell behind its model (no lateness recorded): no lateness table.
    assert!(!text.contains(LATENESS), "{text}");
}
