//! UCI "Optical Recognition of Handwritten Digits" (the 8x8 copy shipped by scikit-learn).

use crate::io::{embedded_label, maybe_gunzip};
use crate::{DataSource, DatasetError, ImageDataset};

const DATASET: &str = "digits";

/// The embedded file, relative to the crate root.
pub const DIGITS_FILE: &str = "data/digits.csv.gz";

const DIGITS_GZ: &[u8] = include_bytes!("../data/digits.csv.gz");

/// Licence of the digits data.
pub const DIGITS_LICENCE: &str = "CC BY 4.0";

/// Attribution for the digits data.
pub const DIGITS_ATTRIBUTION: &str = "E. Alpaydin and C. Kaynak, \"Optical Recognition of Handwritten \
Digits\", UCI Machine Learning Repository, 1998, https://doi.org/10.24432/C50P49 \
(copy of the test set, as shipped in scikit-learn's sklearn/datasets/data/digits.csv.gz)";

/// Number of samples in the embedded file.
pub const DIGITS_SAMPLES: usize = 1797;
/// The shape of one digit, `[C, H, W]`.
pub const DIGITS_SAMPLE_SHAPE: [usize; 3] = [1, 8, 8];

/// The embedded UCI handwritten digits: 1797 images of `[1, 8, 8]` pixels, 10 classes.
///
/// Each pixel is a count of "on" pixels in a 4x4 block of the original 32x32 bitmap
/// (0..=16); it is divided by 16 so values lie in `[0, 1]`. Works fully offline.
pub fn digits() -> Result<ImageDataset, DatasetError> {
    let label = embedded_label(DIGITS_FILE);
    let csv = maybe_gunzip(DATASET, &label, DIGITS_GZ.to_vec())?;
    let (images, labels) =
        parse_digits_csv(&csv).map_err(|problem| DatasetError::Corrupt { dataset: DATASET, file: label, problem })?;
    Ok(ImageDataset {
        name: DATASET,
        images,
        labels,
        sample_shape: DIGITS_SAMPLE_SHAPE,
        num_classes: 10,
        source: DataSource::Embedded { file: DIGITS_FILE },
        licence: DIGITS_LICENCE,
        attribution: DIGITS_ATTRIBUTION,
    })
}

/// Parses headerless CSV rows of 64 pixels (0..=16) followed by a label (0..=9).
fn parse_digits_csv(csv: &[u8]) -> Result<(Vec<f32>, Vec<u8>), String> {
    let text = std::str::from_utf8(csv).map_err(|e| format!("not valid UTF-8: {e}"))?;
    let mut images = Vec::with_capacity(DIGITS_SAMPLES * 64);
    let mut labels = Vec::with_capacity(DIGITS_SAMPLES);
    for (line_no, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != 65 {
            return Err(format!(
                "line {line_no}: expected 65 comma-separated values (64 pixels and a label), found {}",
                fields.len()
            ));
        }
        for (col, field) in fields.iter().enumerate() {
            let value: u8 = field
                .trim()
                .parse()
                .map_err(|_| format!("line {line_no}, column {}: {field:?} is not an integer", col + 1))?;
            if col < 64 {
                if value > 16 {
                    return Err(format!("line {line_no}, column {}: pixel value {value} is outside 0..=16", col + 1));
                }
                images.push(f32::from(value) / 16.0);
            } else {
                if value > 9 {
                    return Err(format!("line {line_no}: label {value} is outside 0..=9"));
                }
                labels.push(value);
            }
        }
    }
    if labels.is_empty() {
        return Err("contains no samples".to_string());
    }
    Ok((images, labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_digits_are_complete_and_in_range() {
        let d = digits().expect("embedded digits load");
        assert_eq!(d.len(), DIGITS_SAMPLES);
        assert_eq!(d.num_classes, 10);
        assert_eq!(d.sample_shape, [1, 8, 8]);
        assert_eq!(d.features(), 64);
        assert_eq!(d.images.len(), DIGITS_SAMPLES * 64);
        assert!(d.images.iter().all(|&x| (0.0..=1.0).contains(&x)));
        assert_eq!(d.images.iter().cloned().fold(f32::MIN, f32::max), 1.0);
        assert_eq!(d.images.iter().cloned().fold(f32::MAX, f32::min), 0.0);
        // Every class is present, roughly 180 each (the UCI test set is nearly balanced).
        let counts = d.class_counts();
        assert_eq!(counts.iter().sum::<usize>(), DIGITS_SAMPLES);
        assert!(counts.iter().all(|&c| (170..=190).contains(&c)), "{counts:?}");
        // First row of the file is a zero: 0,0,5,13,9,1,0,0,...,0
        let (x, y) = d.sample(0);
        assert_eq!(y, 0);
        assert_eq!(&x[..4], &[0.0, 0.0, 5.0 / 16.0, 13.0 / 16.0]);
        assert_eq!(d.source.to_string(), "embedded:data/digits.csv.gz");
        let info = d.info();
        assert_eq!(info.licence, "CC BY 4.0");
        assert!(!info.synthetic);
    }

    #[test]
    fn corrupt_csv_rows_are_reported_with_line_numbers() {
        let good = vec!["0"; 64].join(",") + ",3";
        assert_eq!(parse_digits_csv(good.as_bytes()).map(|(_, y)| y), Ok(vec![3]));
        let short = format!("{good}\n1,2,3\n");
        let err = parse_digits_csv(short.as_bytes()).unwrap_err();
        assert!(err.starts_with("line 2: expected 65"), "{err}");
        let bad_pixel = good.replacen('0', "17", 1);
        let err = parse_digits_csv(bad_pixel.as_bytes()).unwrap_err();
        assert!(err.contains("pixel value 17"), "{err}");
        let bad_label = vec!["0"; 64].join(",") + ",10";
        assert!(parse_digits_csv(bad_label.as_bytes()).unwrap_err().contains("label 10"));
        let not_int = good.replacen('0', "x", 1);
        assert!(parse_digits_csv(not_int.as_bytes()).unwrap_err().contains("\"x\" is not an integer"));
        assert_eq!(parse_digits_csv(b"\n").unwrap_err(), "contains no samples");
    }
}
