//! Store queries: `--where KEY=VALUE,...` parsed and checked, turned into one SQL statement
//! that both backends run; the answers are checked against the files they came from, so that a
//! result whose file changed or vanished since it was indexed is named, never served.

use anyhow::Result;

use crate::base::error::bad_input;

use super::schema::{BELOW, KEYS};

/// One run (and, for a metric query, one figure) that matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub run_id: String,
    pub path: String,
    pub file_size: i64,
    pub file_mtime_ns: i64,
    pub started_at: String,
    pub kernel: String,
    pub commit: Option<String>,
    pub version: String,
    pub hostname: String,
    pub testbed: String,
    pub workload: String,
    pub phase: String,
    pub value: Option<f64>,
    /// The machine's CPU steal and CPU pressure (of the figure's phase in a metric's
    /// history; of a run, the most of any phase), the other
    /// processes' cache drops and the attempts set aside: `None` where not known.
    pub steal: Option<f64>,
    pub cpu_pressure: Option<f64>,
    pub foreign_cache_drops: Option<i64>,
    pub set_aside: Option<i64>,
}

/// `--where` conditions: (key, value), every one must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub terms: Vec<(String, String)>,
}

impl Filter {
    /// Parses `KEY=VALUE[,KEY=VALUE…]` items (each `--where` may hold several); a key names a
    /// column ([`KEYS`]) or a workload parameter (`threads=8`).
    pub fn parse(items: &[String]) -> Result<Self> {
        let mut terms = Vec::new();
        for item in items {
            for part in item.split(',').filter(|p| !p.trim().is_empty()) {
                let Some((k, v)) = part.split_once('=') else {
                    return Err(bad_input(format!(
                        "--where {part:?}: not KEY=VALUE; keys: {} (or a workload parameter, e.g. threads=8); e.g. --where fs=xfs,phase=file_remove",
                        key_names()
                    )));
                };
                let (k, v) = (k.trim(), v.trim());
                if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(bad_input(format!(
                        "--where {part:?}: the key {k:?} is not a name; keys: {} (or a workload parameter)",
                        key_names()
                    )));
                }
                if terms.iter().any(|(t, _): &(String, String)| t == k) {
                    return Err(bad_input(format!(
                        "--where: {k} is given twice; a key takes one value"
                    )));
                }
                terms.push((k.to_string(), checked_value(part, k, v)?));
            }
        }
        Ok(Self { terms })
    }

    /// The value given for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The SQL conditions (`AND`-joined, `?` placeholders) and their values.
    fn sql(&self, with_metric: bool) -> (String, Vec<String>) {
        let mut conds = Vec::new();
        let mut args = Vec::new();
        for (k, v) in &self.terms {
            if let Some((_, col, _)) = BELOW.iter().find(|(name, _, _)| name == k) {
                let table = if with_metric { "ph" } else { "r" };
                // Bound as text and cast in SQL: both backends take every value as text.
                conds.push(format!(
                    "{table}.{col} < CAST(CAST(? AS TEXT) AS DOUBLE PRECISION)"
                ));
                args.push(v.clone());
                continue;
            }
            match KEYS.iter().find(|(name, _, _)| name == k) {
                Some((name, col, _)) if COUNTS.contains(name) => {
                    conds.push(format!("CAST({col} AS TEXT) = ?"));
                    args.push(v.clone());
                }
                Some((_, "m.phase", _)) if !with_metric => {
                    conds.push(
                        "EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.run_id AND m.phase = ?)"
                            .to_string(),
                    );
                    args.push(v.clone());
                }
                Some((_, col, _)) => {
                    conds.push(format!("{col} = ?"));
                    args.push(v.clone());
                }
                None => {
                    conds.push(
                        "EXISTS (SELECT 1 FROM params p WHERE p.run_id = r.run_id AND p.key = ? AND p.value = ?)"
                            .to_string(),
                    );
                    args.push(k.clone());
                    args.push(v.clone());
                }
            }
        }
        (conds.join(" AND "), args)
    }
}

/// The keys whose column is a count: their value must be a whole number.
const COUNTS: &[&str] = &["foreign_cache_drops", "set_aside"];

/// The value of a count key as the store writes it (`007` is `7`), of a bound as given; a
/// value that is not a number where one is needed is refused.
fn checked_value(part: &str, k: &str, v: &str) -> Result<String> {
    if COUNTS.contains(&k) {
        return v.parse::<u64>().map(|n| n.to_string()).map_err(|_| {
            bad_input(format!(
                "--where {part:?}: {k} counts, so give a whole number (e.g. {k}=0 for runs nothing disturbed)"
            ))
        });
    }
    if BELOW.iter().any(|(name, _, _)| *name == k) && !v.parse::<f64>().is_ok_and(f64::is_finite) {
        return Err(bad_input(format!(
            "--where {part:?}: {k} bounds a share of the machine's time, so give a number (e.g. {k}=0.05 for under 5%)"
        )));
    }
    Ok(v.to_string())
}

/// The column keys, for messages.
pub fn key_names() -> String {
    KEYS.iter()
        .chain(BELOW)
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

const HIT_COLUMNS: &str = "r.run_id, r.path, r.file_size, r.file_mtime_ns, r.started_at, r.kernel, r.git_commit, r.version, r.hostname, r.testbed, r.workload";

/// What disturbed a run, after the phase and value of [`HIT_COLUMNS`].
const LOAD_COLUMNS: &str = "r.steal, r.cpu_pressure, r.foreign_cache_drops, r.set_aside";

/// What disturbed a figure: its phase's load, then the run's cache drops and attempts.
const PHASE_LOAD_COLUMNS: &str = "ph.steal, ph.cpu_pressure, r.foreign_cache_drops, r.set_aside";

/// The query of one metric's figures under a filter, oldest run first, each with its
/// phase's load.
pub fn metric_sql(metric: &str, f: &Filter) -> (String, Vec<String>) {
    let (conds, mut args) = f.sql(true);
    let mut sql = format!(
        "SELECT {HIT_COLUMNS}, m.phase, m.value, {PHASE_LOAD_COLUMNS} FROM runs r JOIN metrics m ON m.run_id = r.run_id LEFT JOIN phases ph ON ph.run_id = m.run_id AND ph.phase = m.phase WHERE m.metric = ?"
    );
    let mut all = vec![metric.to_string()];
    all.append(&mut args);
    if !conds.is_empty() {
        sql.push_str(" AND ");
        sql.push_str(&conds);
    }
    sql.push_str(" ORDER BY r.started_at, r.run_id, m.phase");
    (sql, all)
}

/// The query of the runs under a filter (for `compare` and `report`), oldest first.
pub fn runs_sql(f: &Filter) -> (String, Vec<String>) {
    let (conds, args) = f.sql(false);
    let mut sql = format!(
        "SELECT {HIT_COLUMNS}, '' AS phase, CAST(NULL AS DOUBLE PRECISION) AS value, {LOAD_COLUMNS} FROM runs r"
    );
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds);
    }
    sql.push_str(" ORDER BY r.started_at, r.run_id");
    (sql, args)
}

/// Splits hits into those whose file is as it was indexed and the files that changed or
/// vanished since (each named once, with what happened).
pub fn check_files(hits: Vec<Hit>) -> (Vec<Hit>, Vec<String>) {
    let mut fresh = Vec::with_capacity(hits.len());
    let mut stale: Vec<String> = Vec::new();
    let mut seen: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    for h in hits {
        let ok = *seen.entry(h.path.clone()).or_insert_with(|| {
            let now = super::index::fingerprint(std::path::Path::new(&h.path));
            let why = match now {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("vanished"),
                Err(_) => Some("cannot be read"),
                Ok(f) if f != (h.file_size, h.file_mtime_ns) => Some("changed"),
                Ok(_) => None,
            };
            if let Some(why) = why {
                stale.push(format!(
                    "{} {why} since it was indexed: left out (fsgauge store add its directory again, or store rebuild)",
                    h.path
                ));
            }
            why.is_none()
        });
        if ok {
            fresh.push(h);
        }
    }
    (fresh, stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_refuses_malformed_ones() {
        let f = Filter::parse(&["fs=xfs,phase=file_remove".into(), "threads=8".into()])
            .expect("parses");
        assert_eq!(f.get("fs"), Some("xfs"));
        assert_eq!(f.get("threads"), Some("8"));
        for bad in [
            "fs",
            "=x",
            "fs=a,fs=b",
            "f s=x",
            "set_aside=x",
            "steal_below=much",
        ] {
            assert!(Filter::parse(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_parameter_key_is_looked_up_in_params() {
        let f = Filter::parse(&["threads=8,kernel=6.1".into()]).expect("parses");
        let (sql, args) = metric_sql("ops_per_s", &f);
        assert!(sql.contains("p.key = ? AND p.value = ?"), "{sql}");
        assert!(sql.contains("r.kernel = ?"), "{sql}");
        assert_eq!(args, ["ops_per_s", "threads", "8", "6.1"]);
    }

    #[test]
    fn load_keys_compare_as_text_and_bound_from_above() {
        let f = Filter::parse(&["set_aside=00,steal_below=0.05".into()]).expect("parses");
        let (sql, args) = metric_sql("ops_per_s", &f);
        assert!(sql.contains("CAST(r.set_aside AS TEXT) = ?"), "{sql}");
        assert!(
            sql.contains("ph.steal < CAST(CAST(? AS TEXT) AS DOUBLE PRECISION)"),
            "{sql}"
        );
        assert_eq!(args, ["ops_per_s", "0", "0.05"]);
    }
}
