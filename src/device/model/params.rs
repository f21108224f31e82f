//! The parameters the drive models run on, as a profile gives them ([`crate::device::profile`]
//! reads and checks them from its file): here, below both the profile and the models, so that
//! a model takes its parameters without reaching up to the file format, and the profile checks
//! its figures against the model's geometry ([`super::hdd::Geometry`]) one way down.

/// The order in which a drive picks its next request among several outstanding ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    /// Arrival order: a drive without command queueing (SATA drives under 2005's libata).
    Fifo,
    /// Ascending block order from the head, wrapping to the lowest (an elevator).
    Clook,
    /// Shortest positioning time first (seek + rotation) among the oldest `sptf_window`.
    Sptf,
}

/// Parameters of a rotating disk, in the units of the profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HddParams {
    pub rpm: f64,
    pub heads: u32,
    pub zones: u32,
    pub outer_mb_s: f64,
    pub inner_mb_s: f64,
    pub track_to_track_ms: f64,
    pub average_seek_ms: f64,
    pub full_stroke_ms: f64,
    pub write_settle_ms: f64,
    pub head_switch_ms: f64,
    pub cylinder_switch_ms: f64,
    pub overhead_ms: f64,
    pub link_mb_s: f64,
    pub cache_bytes: u64,
    pub cache_segments: u32,
    pub read_ahead: bool,
    pub write_cache: bool,
    pub queue: QueuePolicy,
    pub sptf_window: u32,
}

impl HddParams {
    /// The parameters from their figures, `num` giving each by its name in the profile's
    /// declaration (`profile::HDD_PARAMS`)
    /// (counts truncated to whole numbers), unchecked.
    pub fn from_figures(
        mut num: impl FnMut(&str) -> f64,
        read_ahead: bool,
        write_cache: bool,
        queue: QueuePolicy,
    ) -> Self {
        HddParams {
            rpm: num("rpm"),
            heads: num("heads") as u32,
            zones: num("zones") as u32,
            outer_mb_s: num("outer_mb_s"),
            inner_mb_s: num("inner_mb_s"),
            track_to_track_ms: num("track_to_track_ms"),
            average_seek_ms: num("average_seek_ms"),
            full_stroke_ms: num("full_stroke_ms"),
            write_settle_ms: num("write_settle_ms"),
            head_switch_ms: num("head_switch_ms"),
            cylinder_switch_ms: num("cylinder_switch_ms"),
            overhead_ms: num("overhead_ms"),
            link_mb_s: num("link_mb_s"),
            cache_bytes: num("cache_bytes") as u64,
            cache_segments: num("cache_segments") as u32,
            read_ahead,
            write_cache,
            queue,
            sptf_window: num("sptf_window") as u32,
        }
    }
}
