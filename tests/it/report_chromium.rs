//! The HTML report renders in headless Chromium with no console errors and with its plots
//! visible. Needs `chromium` (Debian package `chromium`); skipped with a reason when it is
//! missing, failed under CI.

use std::process::Command;

use crate::report_fixtures::*;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(c).is_file()))
        })
}

/// Pixels whose colour is clearly not grey (the palette of the bars and lines).
fn colored(img: &image::RgbImage, y0: u32, y1: u32) -> usize {
    let mut n = 0;
    for y in y0..y1.min(img.height()) {
        for x in 0..img.width() {
            let p = img.get_pixel(x, y).0;
            let (max, min) = (p.iter().max().unwrap(), p.iter().min().unwrap());
            if max - min > 60 {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn html_report_renders_in_headless_chromium_with_visible_plots() {
    let Some(browser) = chromium() else {
        assert!(crate::support::have_program("chromium"));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &tree_study());
    write_all(&res, &threads_study());
    let html = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("profile");
    let run = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1500,9000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(shot.exists(), "no screenshot; chromium said:\n{log}");
    for bad in [
        "Uncaught",
        ":CONSOLE(",
        "Failed to load resource",
        "Refused to",
    ] {
        assert!(
            !log.contains(bad),
            "console error ({bad}) while rendering:\n{log}"
        );
    }
    let img = image::open(&shot).unwrap().to_rgb8();
    if let Some(keep) = std::env::var_os("FSGAUGE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    // Plots come after the tables; the coloured bars and lines must be there in quantity
    // (a page of tables and text alone has almost none).
    let total = colored(&img, 0, img.height());
    assert!(
        total > 40_000,
        "only {total} coloured pixels: plots not drawn?"
    );
    // Each plot is 720 x 360: find the rows where the plots are and check every band of
    // plots has colour, so no plot is blank.
    let rows_with_colour = (0..img.height())
        .filter(|&y| colored(&img, y, y + 1) > 0)
        .count();
    assert!(
        rows_with_colour > 360 * 3,
        "coloured rows: {rows_with_colour}"
    );
}
