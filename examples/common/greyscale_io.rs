//! What the greyscale examples need around the pipeline: image files in, synthetic frames,
//! the per-pixel check against an f64 evaluation of the formula, and where the skel stage ran.

use std::path::{Path, PathBuf};

use super::Pixel;
use indicatif::ProgressBar;
use skel::{Backend, Matrix, Rgb8};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Errors of the examples' own, next to `skel::Error`.
pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// `WIDTHxHEIGHT`, both positive.
pub fn parse_size(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("expected WIDTHxHEIGHT such as 1920x1080, got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    if w == 0 || h == 0 {
        return Err(format!("frame size must be positive, got {s:?}"));
    }
    Ok((w, h))
}

/// The image files to process, in a stable order: directories are listed (png/jpg/jpeg,
/// sorted); no inputs means the sample photos (see [`sample_dir`]).
pub fn collect_images(inputs: &[PathBuf]) -> Res<Vec<PathBuf>> {
    let samples = [sample_dir()?];
    let inputs = if inputs.is_empty() {
        &samples[..]
    } else {
        inputs
    };
    let mut files = Vec::new();
    for p in inputs {
        let err = |e: std::io::Error| format!("input {}: {e}", p.display());
        if !std::fs::metadata(p).map_err(err)?.is_dir() {
            files.push(p.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in std::fs::read_dir(p).map_err(err)? {
            let path = entry.map_err(err)?.path();
            let ext = path.extension().and_then(|e| e.to_str());
            let ext = ext.map(str::to_ascii_lowercase);
            if path.is_file() && matches!(ext.as_deref(), Some("png" | "jpg" | "jpeg")) {
                found.push(path);
            }
        }
        if found.is_empty() {
            return Err(format!("no .png/.jpg/.jpeg images in {}", p.display()).into());
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Where the sample photos are: `$SKEL_DATA_DIR/images` when set, else the repository's
/// `examples/images`. The published crate leaves the photos out, so without either the
/// examples write a few generated colour images to a temporary directory and say so.
pub fn sample_dir() -> Res<PathBuf> {
    let data = std::env::var_os("SKEL_DATA_DIR").map(|d| Path::new(&d).join("images"));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/images");
    if let Some(dir) = data.or(repo.is_dir().then_some(repo)) {
        return Ok(dir);
    }
    let dir = std::env::temp_dir().join("skel-generated-images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (k, (w, h)) in [(640u32, 480u32), (512, 512), (800, 450)]
        .into_iter()
        .enumerate()
    {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            let ring = ((x as i64 - w as i64 / 2).pow(2) + (y as i64 - h as i64 / 2).pow(2)) / 997;
            image::Rgb([
                (x * 255 / w) as u8,
                (y * 255 / h) as u8,
                (ring * (k as i64 + 3)) as u8,
            ])
        });
        img.save(dir.join(format!("generated-{k}.png")))?;
    }
    eprintln!(
        "note: no sample photos (the published crate leaves them out): using generated images \
         in {}; pass --input <photos> or set SKEL_DATA_DIR to a directory with images/ in it \
         (the skel repository's examples/images holds the samples)",
        dir.display()
    );
    Ok(dir)
}

/// Decodes one image file to 8-bit RGB.
pub fn decode(path: &Path) -> Res<image::RgbImage> {
    let img = image::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(img.to_rgb8())
}

/// 8-bit sRGB to the pipeline's `Pixel` (0..1).
pub fn to_pixel(p: &image::Rgb<u8>) -> Pixel {
    let [r, g, b] = p.0.map(|c| f32::from(c) / 255.0);
    Pixel { r, g, b }
}

/// A `w`x`h` frame: the photo scaled to half the frame's height, tiled over it.
pub fn synthetic_image(path: &Path, w: u32, h: u32) -> Res<image::RgbImage> {
    let photo = decode(path)?;
    let th = (h / 2).max(1);
    let tw = u64::from(photo.width()) * u64::from(th) / u64::from(photo.height().max(1));
    let tw = tw.clamp(1, u64::from(u32::MAX)) as u32;
    let tile = image::imageops::resize(&photo, tw, th, image::imageops::FilterType::Triangle);
    Ok(image::RgbImage::from_fn(w, h, |x, y| {
        *tile.get_pixel(x % tw, y % th)
    }))
}

/// [`synthetic_image`] as the pipeline's `Pixel`s, row-major.
pub fn synthetic_base(path: &Path, w: u32, h: u32) -> Res<Vec<Pixel>> {
    Ok(synthetic_image(path, w, h)?
        .pixels()
        .map(to_pixel)
        .collect())
}

/// The grey formula evaluated straightforwardly in f64 from the 8-bit input.
pub fn grey_reference(r: u8, g: u8, b: u8) -> u8 {
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let y = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
    let c = if y <= 0.0031308 {
        12.92 * y
    } else {
        1.055 * y.powf(1.0 / 2.4) - 0.055
    };
    (c * 255.0).round_ties_even().clamp(0.0, 255.0) as u8
}

/// What `--check` found: pixels compared, wrong ones, the largest difference, examples.
#[derive(Default, Debug)]
pub struct Checked {
    pub pixels: u64,
    pub bad: u64,
    pub max_diff: u8,
    pub examples: Vec<String>,
}

impl Checked {
    /// Compares every `step`th pixel of frame `name` (`width` wide) with [`grey_reference`]:
    /// within 1 level, and r = g = b a whole number.
    pub fn frame(name: &str, width: u32, rgb: &[Pixel], out: &[Pixel], step: usize) -> Self {
        // The inputs are k/255 in f32, so this recovers the 8-bit value exactly.
        let to8 = |v: f32| (v * 255.0).round() as u8;
        let pixels = rgb.iter().zip(out);
        let pixels = pixels.map(|(s, got)| ([to8(s.r), to8(s.g), to8(s.b)], *got));
        Self::compare(name, width, pixels, step)
    }

    /// [`Checked::frame`] for 8-bit frames: the decoded pixels and the grey levels.
    pub fn frame8(name: &str, rgb: &Matrix<Rgb8>, grey: &Matrix<u8>) -> skel::Result<Self> {
        let level = |v: u8| Pixel {
            r: f32::from(v),
            g: f32::from(v),
            b: f32::from(v),
        };
        let pixels = rgb.try_as_slice()?.iter().zip(grey.try_as_slice()?);
        let pixels = pixels.map(|(&s, &v)| (<[u8; 3]>::from(s), level(v)));
        Ok(Self::compare(name, rgb.cols() as u32, pixels, 1))
    }

    fn compare(
        name: &str,
        width: u32,
        pixels: impl Iterator<Item = ([u8; 3], Pixel)>,
        step: usize,
    ) -> Self {
        let mut c = Checked::default();
        let width = width.max(1) as usize;
        for (i, (src, got)) in pixels.enumerate().step_by(step.max(1)) {
            let want = grey_reference(src[0], src[1], src[2]);
            let diff = (got.r.clamp(0.0, 255.0) as u8).abs_diff(want);
            c.max_diff = c.max_diff.max(diff);
            c.pixels += 1;
            if diff > 1 || got.r != got.g || got.g != got.b || got.r.fract() != 0.0 {
                c.bad += 1;
                if c.examples.len() < 10 {
                    let (x, y) = (i % width, i / width);
                    c.examples.push(format!(
                        "{name} pixel ({x}, {y}): {src:?} -> {got:?}, want {want}"
                    ));
                }
            }
        }
        c
    }

    /// Adds another frame's findings.
    pub fn add(&mut self, other: Checked) {
        self.pixels += other.pixels;
        self.bad += other.bad;
        self.max_diff = self.max_diff.max(other.max_diff);
        self.examples.extend(other.examples);
    }

    /// Prints the verdict; `false` when some pixels were wrong.
    pub fn print(&self) -> bool {
        let (n, max) = (self.pixels, self.max_diff);
        if self.bad == 0 {
            println!("check: ok, {n} pixels within 1 grey level of the f64 reference (max difference {max})");
            return true;
        }
        eprintln!("check: FAILED, {} of {n} pixels differ from the f64 reference by more than 1 level (max {max}):", self.bad);
        for e in self.examples.iter().take(10) {
            eprintln!("  {e}");
        }
        false
    }
}

/// Where the skel stage's calls ran and why: each call's last [`skel::tune::explain`] on
/// the default backend (`Backend::Auto`), noting once that a kernel compiles meanwhile.
#[derive(Default)]
pub struct Placed {
    last: Mutex<Vec<(&'static str, skel::tune::Explanation)>>,
    said_compiling: AtomicBool,
}

impl Placed {
    /// Called on the stage's thread right after the call `what` (explanations are per
    /// thread and per last call).
    pub fn note(&self, what: &'static str, backend: Backend, bar: &ProgressBar) {
        if backend != Backend::Auto {
            return;
        }
        let Some(why) = skel::tune::explain() else {
            return;
        };
        let compiling = why.reason.contains("compiling in the background");
        if compiling && !self.said_compiling.swap(true, Ordering::Relaxed) {
            let said = why.reason.split("; was:").next().unwrap_or_default();
            bar.suspend(|| println!("{what}: {said}; the device takes over once it is built"));
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.iter_mut().find(|(w, _)| *w == what) {
            Some(slot) => slot.1 = why,
            None => last.push((what, why)),
        }
    }

    /// One line: where each call ran last and why.
    pub fn line(&self, backend: Backend) -> String {
        if backend != Backend::Auto {
            return format!("{backend} (fixed by --backend or SKEL_BACKEND)");
        }
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_empty() {
            return "no call ran".into();
        }
        let each: Vec<String> = last
            .iter()
            .map(|(what, why)| format!("{what} on {} ({})", why.choice, why.reason))
            .collect();
        each.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_extremes_and_neutral_greys() {
        assert_eq!(grey_reference(0, 0, 0), 0);
        assert_eq!(grey_reference(255, 255, 255), 255);
        for v in [1u8, 10, 50, 128, 200, 254] {
            assert_eq!(grey_reference(v, v, v), v);
        }
    }

    #[test]
    fn userfn_matches_reference() {
        for (r, g, b) in [
            (0u8, 0u8, 0u8),
            (255, 0, 0),
            (0, 255, 0),
            (0, 0, 255),
            (12, 200, 99),
        ] {
            let px = to_pixel(&image::Rgb([r, g, b]));
            let out = super::super::grey::call(px, super::super::LUMA);
            assert!((out.r as u8).abs_diff(grey_reference(r, g, b)) <= 1);
        }
    }

    #[test]
    fn check_finds_wrong_pixels() {
        let rgb = [to_pixel(&image::Rgb([10, 20, 30])); 4];
        let want = f32::from(grey_reference(10, 20, 30));
        let mut out = [Pixel {
            r: want,
            g: want,
            b: want,
        }; 4];
        assert_eq!(Checked::frame("f", 2, &rgb, &out, 1).bad, 0);
        out[3].r += 3.0;
        let c = Checked::frame("f", 2, &rgb, &out, 1);
        assert_eq!((c.pixels, c.bad, c.max_diff), (4, 1, 3));
        assert!(c.examples[0].contains("pixel (1, 1)"), "{:?}", c.examples);
    }

    #[test]
    fn check_of_8bit_frames() {
        let rgb = vec![Rgb8::new(10, 20, 30), Rgb8::new(200, 100, 0)];
        let grey = vec![grey_reference(10, 20, 30), grey_reference(200, 100, 0)];
        let (rgb, wrong) = (
            Matrix::from_vec(2, 1, rgb).unwrap(),
            vec![grey[0], grey[1] + 2],
        );
        let grey = Matrix::from_vec(2, 1, grey).unwrap();
        assert_eq!(Checked::frame8("f", &rgb, &grey).unwrap().bad, 0);
        let c = Checked::frame8("f", &rgb, &Matrix::from_vec(2, 1, wrong).unwrap()).unwrap();
        assert_eq!((c.pixels, c.bad, c.max_diff), (2, 1, 2));
        assert!(c.examples[0].contains("pixel (0, 1)"), "{:?}", c.examples);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("640x480"), Ok((640, 480)));
        assert!(parse_size("640").is_err());
        assert!(parse_size("0x5").is_err());
    }
}
