//! Every workload kind by name, for plan files and presets: a workload's parameters are its
//! serde struct (defaults filled in, unknown fields refused), so a plan's `[[workload]]` table
//! and the command-line flags name the same things.

pub mod sweep;

use anyhow::Result;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde::de::DeserializeOwned;

use crate::results::tables::KindTables;
use crate::results::{RunResult, WorkloadInfo};
use crate::workload::params::ScaleClass;
use crate::workload::Workload;

/// A registered workload kind.
pub struct WorkloadKind {
    /// Name in `fsgauge bench NAME` and in plans (`kind = "NAME"`).
    pub name: &'static str,
    /// One line for listings.
    pub about: &'static str,
    /// Builds the workload from its parameters (without `kind`).
    pub build: fn(serde_json::Value) -> Result<Box<dyn Workload>, BuildError>,
    /// `fsgauge bench NAME`. Kinds without it have commands of their own (`fsgauge age`,
    /// `read`, `exercise`), which flatten the same parameter struct into their flags.
    pub bench: Option<Bench>,
    /// How its parameters react to `--scale` where they differ from every kind's (see
    /// `plan::scale`).
    pub scales: &'static [(&'static str, ScaleClass)],
    /// The kind's own tables of its results (`bench` prints them; `report` adds them to its
    /// tables), defined in the kind's module; `bench` prints the phase table when absent.
    pub tables: Option<KindTables>,
}

/// How a kind is run by `fsgauge bench NAME`.
#[derive(Clone, Copy)]
pub struct Bench {
    /// Adds the kind's flags to its subcommand.
    pub args: fn(Command) -> Command,
    /// Reads the kind's parameters back from the parsed flags.
    pub from_args: fn(&ArgMatches) -> Result<Box<dyn Workload>, clap::Error>,
    /// Runs as one job over the ranks of `mpirun` (with `--features mpi`); kinds without it
    /// refuse to run under mpirun.
    pub distributed: bool,
    /// The sweep as CSV (written next to the results, and `--csv` prints it).
    pub csv: Option<fn(&[RunResult]) -> String>,
}

/// Parameters that do not make a workload of the kind: what is wrong, and the parameter at
/// fault (its plan-file name) when the deserializer was inside one.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct BuildError {
    /// The parameter (top-level key) the error is in.
    pub field: Option<String>,
    pub msg: String,
}

fn build<T: Workload + DeserializeOwned + 'static>(
    v: serde_json::Value,
) -> Result<Box<dyn Workload>, BuildError> {
    serde_path_to_error::deserialize::<_, T>(v)
        .map(|w| Box::new(w) as Box<dyn Workload>)
        .map_err(|e| BuildError {
            field: e.path().iter().find_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            }),
            msg: e.into_inner().to_string(),
        })
}

fn from_args<W: Workload + From<A> + 'static, A: FromArgMatches>(
    m: &ArgMatches,
) -> Result<Box<dyn Workload>, clap::Error> {
    A::from_arg_matches(m).map(|a| Box::new(W::from(a)) as Box<dyn Workload>)
}

impl WorkloadKind {
    /// A kind usable from plans.
    const fn plan<T: Workload + DeserializeOwned + 'static>(
        name: &'static str,
        about: &'static str,
    ) -> Self {
        Self {
            name,
            about,
            build: build::<T>,
            bench: None,
            scales: &[],
            tables: None,
        }
    }

    /// A kind usable from plans and as `fsgauge bench NAME`, its flags the struct's own.
    const fn bench<T: Workload + DeserializeOwned + Args + FromArgMatches + 'static>(
        name: &'static str,
        about: &'static str,
    ) -> Self {
        Self::bench_as::<T, T>(name, about)
    }

    /// As [`Self::bench`], for a workload whose flags are the form `A` it is resolved from.
    const fn bench_as<
        T: Workload + DeserializeOwned + From<A> + 'static,
        A: Args + FromArgMatches + 'static,
    >(
        name: &'static str,
        about: &'static str,
    ) -> Self {
        Self {
            bench: Some(Bench {
                args: A::augment_args,
                from_args: from_args::<T, A>,
                distributed: false,
                csv: None,
            }),
            ..Self::plan::<T>(name, about)
        }
    }

    /// Runs over all ranks of an MPI job.
    const fn distributed(mut self) -> Self {
        if let Some(b) = &mut self.bench {
            b.distributed = true;
        }
        self
    }

    /// Its parameters scale so (where they differ from every kind's).
    const fn scales(mut self, scales: &'static [(&'static str, ScaleClass)]) -> Self {
        self.scales = scales;
        self
    }

    /// Its results show as these tables (in `bench` and `report`), and its sweep as this CSV.
    const fn tables(mut self, tables: KindTables, csv: Option<fn(&[RunResult]) -> String>) -> Self {
        self.tables = Some(tables);
        if let Some(b) = &mut self.bench {
            b.csv = csv;
        }
        self
    }
}

/// Every kind, one line each: adding a workload is its file and its line here.
static KINDS: &[WorkloadKind] = &[
    WorkloadKind::bench::<crate::workload::tree::Tree>(
        "tree",
        "low-memory study: mkdir + one open/write/close per file, then rm -rf",
    )
    .scales(crate::workload::tree::SCALES),
    WorkloadKind::bench_as::<crate::workload::fdtree::Fdtree, crate::workload::fdtree::FdtreeSpec>(
        "fdtree",
        "journal-size study: fdtree's dir create, file create, file remove, dir remove",
    )
    .scales(&[("levels", crate::workload::params::ScaleClass::Levels)])
    .distributed(),
    WorkloadKind::bench::<crate::workload::interleave::Interleave>(
        "interleave",
        "inode-reservation study: files created round-robin across dirs, cold rm -rf",
    )
    .scales(crate::workload::interleave::SCALES),
    WorkloadKind::bench::<crate::workload::create::Create>(
        "create",
        "fs_mark-style small-file creation rate, latency per syscall",
    )
    .distributed(),
    WorkloadKind::bench::<crate::workload::tio::Tio>(
        "tio",
        "block-reservation study: threaded I/O (tiobench), threads x mode x block",
    )
    .distributed()
    .tables(
        crate::workload::tio::table::TABLES,
        Some(crate::workload::tio::table::sweep_csv),
    ),
    WorkloadKind::bench::<crate::workload::clients::Clients>(
        "clients",
        "block-reservation study: N clients replaying a dbench loadfile or a file-server mix",
    )
    .distributed()
    .tables(
        crate::workload::clients::table::TABLES,
        Some(crate::workload::clients::table::csv),
    ),
    WorkloadKind::plan::<crate::workload::age::Age>(
        "age",
        "fragmentation study: age to usage checkpoints (fill, round-robin append, churn)",
    )
    .tables(crate::workload::age::workload::VIEWS, None),
    WorkloadKind::plan::<crate::workload::age::append::Append>(
        "append",
        "fragmentation study: append-aged tree vs a fresh copy on a twin filesystem, read and layout",
    ),
    WorkloadKind::plan::<crate::workload::readtest::ReadTest>(
        "read",
        "fragmentation study: read the tree in walk, random and block order; stat rate",
    ),
    WorkloadKind::plan::<crate::workload::exercise::Exercise>(
        "exercise",
        "integrity exerciser (fsx-like): random operations verified against a model",
    ),
];

/// All kinds, one line each.
/// The tables every workload kind registered for its results.
pub fn kind_tables() -> Vec<KindTables> {
    KINDS.iter().filter_map(|k| k.tables).collect()
}

pub fn kinds() -> &'static [WorkloadKind] {
    KINDS
}

/// Looks a kind up by name.
pub fn find(name: &str) -> Option<&'static WorkloadKind> {
    kinds().iter().find(|k| k.name == name)
}

/// What a result records of its workload: kind, parameters, and what the workload declares —
/// its figures, sweep axes, the parameter counting its workers, the parameters that are sizes
/// — so that reports read these from the result and infer nothing from a name. The one place
/// a run's [`WorkloadInfo`] is made.
pub fn workload_info(wl: &dyn Workload) -> WorkloadInfo {
    let params = wl.params();
    WorkloadInfo {
        kind: wl.kind().into(),
        metrics: wl.metrics().to_vec(),
        sweep_axes: Some(wl.sweep_axes().iter().map(|a| a.to_string()).collect()),
        line_axis: wl.line_axis().map(str::to_string),
        size_params: Some(find(wl.kind()).map_or_else(Vec::new, |k| size_params(k, &params))),
        params,
    }
}

/// The parameters of a kind that are sizes in bytes: those its parameter struct reads from
/// size text (`"1K"` becomes 1024, through `units::Size` or `units::de_size`). Derived from
/// the struct's own deserializers, so no list of names can drift from its field types.
fn size_params(kind: &WorkloadKind, params: &serde_json::Value) -> Vec<String> {
    let Some(map) = params.as_object() else {
        return Vec::new();
    };
    let (one_k, list) = (serde_json::json!(1024), serde_json::json!([1024]));
    map.keys()
        .filter(|k| {
            let mut probe = map.clone();
            probe.insert(k.to_string(), serde_json::json!("1K"));
            (kind.build)(serde_json::Value::Object(probe))
                .ok()
                .and_then(|w| w.params().get(k.as_str()).cloned())
                .is_some_and(|v| v == one_k || v == list)
        })
        .cloned()
        .collect()
}

/// Gives results written before declarations were recorded the declarations their kind makes
/// today: without `workload.metrics`, its figures' declarations; without `sweep_axes`, its
/// sweep axes, the parameter counting its workers and its size parameters; with no operation
/// declared as reading file data, the reading operations of its kind. So reports of old
/// result files show units, directions, sizes, thread lines and cache warnings too. A kind that is no longer
/// known, or parameters that no longer build, leave the result as it is (its figures are then
/// shown with no direction claimed, its parameters as plain values, no line drawn along one).
pub fn declare_missing_metrics(results: &mut [crate::results::RunResult]) {
    for r in results.iter_mut().filter(|r| {
        r.workload.metrics.is_empty() || r.workload.sweep_axes.is_none() || !declares_reads(r)
    }) {
        let built = find(&r.workload.kind).and_then(|k| {
            let params = match r.workload.params.as_object() {
                Some(_) => r.workload.params.clone(),
                None => serde_json::json!({}),
            };
            (k.build)(params)
                .or_else(|_| (k.build)(serde_json::json!({})))
                .ok()
        });
        if let Some(w) = built {
            let today = workload_info(w.as_ref());
            if r.workload.metrics.is_empty() {
                r.workload.metrics = today.metrics;
            }
            if r.workload.sweep_axes.is_none() {
                r.workload.sweep_axes = today.sweep_axes;
                r.workload.line_axis = today.line_axis;
                r.workload.size_params = today.size_params;
            }
            if !declares_reads(r) {
                let reading: Vec<&str> = w
                    .op_kinds()
                    .into_iter()
                    .filter(|o| o.reads)
                    .map(|o| o.name)
                    .collect();
                for (name, s) in r.phases.iter_mut().flat_map(|p| p.op_stats.iter_mut()) {
                    s.reads = reading.contains(&name.as_str());
                }
            }
        }
    }
}

/// Whether any operation of the run is declared as reading file data (results written before
/// operations carried that declaration have none).
fn declares_reads(r: &RunResult) -> bool {
    r.phases
        .iter()
        .any(|p| p.op_stats.values().any(|s| s.reads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_from_parameters_with_defaults_and_refuses_unknown_fields() {
        let tree = find("tree").unwrap();
        let w = (tree.build)(serde_json::json!({"dirs": 2, "file_size": "4K"})).unwrap();
        assert_eq!(w.params()["dirs"], 2);
        assert_eq!(w.params()["file_size"], 4096);
        assert_eq!(w.params()["files"], 10);
        let e = (tree.build)(serde_json::json!({"dirz": 2})).err().unwrap();
        assert!(e.to_string().contains("dirz"), "{e}");
        assert_eq!(e.field.as_deref(), Some("dirz"));
        let e = (tree.build)(serde_json::json!({"files": "ten"}))
            .err()
            .unwrap();
        assert_eq!(e.field.as_deref(), Some("files"), "{e}");
        assert!(find("nope").is_none());
    }

    #[test]
    fn declared_fields_scale_and_others_stay() {
        use crate::lab::plan::scale::apply;
        let p = serde_json::json!({"dirs": 14, "files": 10, "file_size": "4M", "block": "1M"});
        let s = apply("fdtree", &p, 2.5);
        assert_eq!(s["files"], 25);
        assert_eq!(apply("tree", &p, 2.5)["files"], 10);
        assert_eq!(s["file_size"], 10 << 20);
        assert_eq!(s["dirs"], 14);
        assert_eq!(s["block"], "1M");
        let i = apply(
            "interleave",
            &serde_json::json!({"dirs": 100, "files": 14}),
            0.5,
        );
        assert_eq!(
            (i["dirs"].as_u64(), i["files"].as_u64()),
            (Some(50), Some(14))
        );
        let tiny = apply(
            "fdtree",
            &serde_json::json!({"files": 1, "file_size": 4096}),
            0.01,
        );
        assert_eq!(
            (tiny["files"].as_u64(), tiny["file_size"].as_u64()),
            (Some(1), Some(4096))
        );
    }

    #[test]
    fn sizes_are_the_parameters_read_as_sizes_and_old_results_get_todays_declarations() {
        let info = |kind: &str, params: serde_json::Value| {
            workload_info((find(kind).unwrap().build)(params).unwrap().as_ref())
        };
        let tio = info("tio", serde_json::json!({"threads": [1, 4]}));
        let mut sizes = tio.size_params.clone().unwrap();
        sizes.sort();
        assert_eq!(sizes, ["block", "file_size"]);
        assert_eq!(tio.line_axis.as_deref(), Some("threads"));
        assert_eq!(
            tio.sweep_axes.as_deref(),
            Some(&["block".to_string(), "threads".into(), "mode".into()][..])
        );
        let tree = info("tree", serde_json::json!({}));
        assert!(tree.is_size("file_size"), "{tree:?}");
        assert!(!tree.is_size("files") && !tree.is_size("dirs"), "{tree:?}");
        assert_eq!(tree.line_axis, None);
        assert_eq!(
            info("clients", serde_json::json!({})).line_axis.as_deref(),
            Some("clients")
        );

        // A result written before the declarations were recorded.
        let mut old: RunResult = serde_json::from_value(serde_json::json!({
            "schema": crate::results::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
            "testbed": crate::results::TestbedInfo::default(),
            "workload": {"kind": "tio", "params": {"threads": 4, "block": 4096}},
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "none"},
            "phases": [], "errors": []
        }))
        .unwrap();
        let op = |name: &str| {
            let mut p: crate::results::PhaseResult = serde_json::from_value(serde_json::json!({
                "name": format!("p-{name}"), "wall_s": 1.0, "user_s": 0.0, "sys_s": 0.0,
                "ops": 1, "bytes": 1, "ops_per_s": 1.0, "bytes_per_s": 1.0,
                "latency": crate::results::LatencySummary::default(), "device": null,
                "series": []
            }))
            .unwrap();
            let stats = crate::results::OpStats {
                primary: true,
                ..Default::default()
            };
            p.op_stats.insert(name.into(), stats);
            p
        };
        old.phases = vec![op("write"), op("read")];
        declare_missing_metrics(std::slice::from_mut(&mut old));
        assert_eq!(old.workload.line_axis.as_deref(), Some("threads"));
        assert!(old.workload.is_size("block"));
        assert!(!old.workload.metrics.is_empty());
        let reads: Vec<bool> = old
            .phases
            .iter()
            .map(|p| p.op_stats.values().any(|s| s.reads))
            .collect();
        assert_eq!(
            reads,
            [false, true],
            "tio declares its read operation as reading"
        );
    }

    /// The kind's workload from a command line (`fsgauge bench KIND ARGS…`).
    fn from_flags(kind: &WorkloadKind, args: &[&str]) -> Box<dyn Workload> {
        let b = kind.bench.expect("a bench kind");
        let m = (b.args)(Command::new(kind.name).no_binary_name(true))
            .try_get_matches_from(args)
            .unwrap();
        (b.from_args)(&m).unwrap()
    }

    #[test]
    fn flags_and_plan_tables_give_the_same_parameters() {
        for k in kinds().iter().filter(|k| k.bench.is_some()) {
            let flags = from_flags(k, &[]).params();
            let plan = (k.build)(serde_json::json!({})).unwrap().params();
            assert_eq!(flags, plan, "{}: defaults", k.name);
        }
        let cases: [(&str, &[&str], serde_json::Value); 4] = [
            (
                "tio",
                &[
                    "--threads",
                    "1, 8",
                    "--mode",
                    "randread",
                    "--block",
                    "4K,1M",
                    "--time",
                    "30s",
                    "--no-latency",
                    "--fresh-fs",
                    "off",
                ],
                serde_json::json!({"threads": [1, 8], "mode": "randread", "block": ["4K", "1M"], "time": "30s", "latency": false, "fresh_fs": false}),
            ),
            (
                "clients",
                &["--clients", "1,4,8", "--loops", "3"],
                serde_json::json!({"clients": [1, 4, 8], "loops": 3, "time": null}),
            ),
            (
                "fdtree",
                &[
                    "--scenario",
                    "small-deep",
                    "--levels",
                    "2",
                    "--file-size",
                    "8K",
                ],
                serde_json::json!({"scenario": "small-deep", "levels": 2, "file_size": "8K"}),
            ),
            (
                "tree",
                &["--dirs", "3", "--file-size", "64K", "--fsync", "file"],
                serde_json::json!({"dirs": 3, "file_size": "64K", "fsync": "file"}),
            ),
        ];
        for (name, args, table) in cases {
            let k = find(name).unwrap();
            assert_eq!(
                from_flags(k, args).params(),
                (k.build)(table).unwrap().params(),
                "{name}"
            );
        }
        // Without --loops, clients run 60 s, from flags as from plans.
        assert_eq!(
            from_flags(find("clients").unwrap(), &[]).params()["time"],
            60.0
        );
    }
}
