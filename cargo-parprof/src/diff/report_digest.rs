//! What a comparison reads of a run's `report.json`, typed: only the fields it uses, so that
//! the rest of the report may grow without the comparison noticing, and a field it needs that
//! is missing or of the wrong type is one clear error when the run is loaded, not a figure
//! silently taken as absent in the middle of a comparison.

use serde::Deserialize;

/// The fields of a run's report that a comparison reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ReportDigest {
    #[serde(default)]
    pub target: TargetDigest,
    /// A criterion benchmark's iterations (criterion hooked); absent otherwise.
    #[serde(default)]
    pub bench: Option<BenchDigest>,
    pub probes: Vec<ProbeDigest>,
    pub regions: Vec<RegionDigest>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct TargetDigest {
    #[serde(default)]
    pub name: String,
    /// When the run started, in ms since the Unix epoch; absent in runs recorded before it
    /// was kept.
    #[serde(default)]
    pub started_unix_ms: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct BenchDigest {
    #[serde(default)]
    pub measured_iterations: Option<f64>,
    #[serde(default)]
    pub warm_up_iterations: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ProbeDigest {
    pub name: String,
    pub active_ns: f64,
    pub calls: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RegionDigest {
    pub name: String,
    pub elapsed_ns: f64,
    pub instances: f64,
    /// How the region's work entered the pool (`join`, `iterator`, …); absent for old runs.
    #[serde(default)]
    pub kind: Option<String>,
    /// Where an implicit region was entered; absent for a `parallel_region!`.
    #[serde(default)]
    pub call_site: Option<CallSiteDigest>,
    #[serde(default)]
    pub diagnoses: Vec<DiagnosisDigest>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CallSiteDigest {
    pub function: String,
    #[serde(default)]
    pub file: String,
    /// 0 when unknown (no debug information).
    #[serde(default)]
    pub line: u32,
    #[serde(default)]
    pub caller: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct DiagnosisDigest {
    pub code: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_fields_it_needs_and_ignores_the_rest() {
        let digest: ReportDigest = serde_json::from_value(json!({
            "schema": "parprof-report/1",
            "target": {"name": "app", "kind": "bin", "args": []},
            "probes": [{"name": "app::f", "active_ns": 10, "calls": 2, "elapsed_ns": 12}],
            "regions": [{
                "name": "app::sort (src/lib.rs:27, from run)",
                "elapsed_ns": 100,
                "instances": 1,
                "kind": "join",
                "call_site": {"function": "app::sort", "file": "src/lib.rs", "line": 27, "caller": "app::run"},
                "diagnoses": [{"code": "too_fine_granularity", "evidence": {}}],
                "tasks": 9,
            }],
        }))
        .unwrap();
        assert_eq!(digest.target.name, "app");
        assert!(digest.bench.is_none() && digest.target.started_unix_ms.is_none());
        assert_eq!(digest.probes[0].active_ns, 10.0);
        let region = &digest.regions[0];
        assert_eq!(region.call_site.as_ref().unwrap().line, 27);
        assert_eq!(region.diagnoses[0].code, "too_fine_granularity");
    }

    #[test]
    fn a_figure_of_the_wrong_type_is_refused() {
        let damaged = json!({
            "probes": [{"name": "f", "active_ns": "ten", "calls": 1}],
            "regions": [],
        });
        assert!(serde_json::from_value::<ReportDigest>(damaged).is_err());
    }
}
