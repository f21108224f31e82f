//! PNG copies of the plots (`fsgauge report --png`): the SVG is rasterised with resvg, which is
//! pure Rust (no cairo, no fontconfig); text uses the system's fonts when there are any
//! (DejaVu Sans or whatever sans-serif face is installed) and is left out when there are none,
//! while the bars and lines are drawn either way.

use anyhow::{anyhow, Context, Result};
use resvg::{tiny_skia, usvg};

/// Rasterises SVG documents; the font database is loaded once.
pub struct Rasterizer {
    opts: usvg::Options<'static>,
}

impl Default for Rasterizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Rasterizer {
    /// Loads the system fonts and maps the generic `sans-serif` family to an installed face.
    pub fn new() -> Self {
        let mut opts = usvg::Options::default();
        let db = opts.fontdb_mut();
        db.load_system_fonts();
        let sans = [
            "DejaVu Sans",
            "Liberation Sans",
            "Noto Sans",
            "FreeSans",
            "Arial",
        ]
        .into_iter()
        .find(|name| {
            db.faces()
                .any(|f| f.families.iter().any(|(fam, _)| fam == name))
        });
        if let Some(name) = sans {
            db.set_sans_serif_family(name);
        }
        Self { opts }
    }

    /// The PNG of an SVG document, at its own size.
    pub fn png(&self, svg: &str) -> Result<Vec<u8>> {
        let tree = usvg::Tree::from_str(svg, &self.opts).context("parsing the plot's SVG")?;
        let size = tree.size().to_int_size();
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .ok_or_else(|| anyhow!("plot of size {size:?} cannot be rasterised"))?;
        pixmap.fill(tiny_skia::Color::WHITE);
        resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
        pixmap.encode_png().context("encoding PNG")
    }
}
