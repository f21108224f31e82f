//! fsgauge's own memory does not grow with the number of files: peak RSS stays under 32 MiB
//! for a tree of 1,000,000 empty files (on tmpfs, so the test takes seconds, not minutes).

use crate::support::{json_of, skip, Sandbox};

#[test]
fn a_million_empty_files_fit_in_32_mib() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        skip("no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["bench", "tree", "--dir"])
        .arg(dir.path())
        .args([
            "--dirs",
            "1000",
            "--files",
            "1000",
            "--file-size",
            "0",
            "--fsync",
            "none",
            "--json",
            "--quiet",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let doc = json_of(&out);
    let create = &doc["phases"][0];
    assert_eq!(create["op_stats"]["create"]["count"], 1_000_000);
    assert_eq!(doc["phases"][1]["op_stats"]["unlink"]["count"], 1_000_000);
    let rss = doc["tool_peak_rss"].as_u64().unwrap();
    assert!(rss > 0 && rss < 32 << 20, "peak RSS {rss} bytes");
}
