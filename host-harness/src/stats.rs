//! Medians and spreads of repeated measurements.

use serde_json::{Value, json};

/// A summary of repeated measurements.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Middle value.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// How many measurements.
    pub n: usize,
}

impl Summary {
    /// Summarises `values`; all zero when there are none.
    pub fn of(values: &[f64]) -> Summary {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let last = sorted.len().saturating_sub(1);
            sorted
                .get((last as f64 * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        Summary {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
            min: at(0.0),
            max: at(1.0),
            mean: sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
            n: sorted.len(),
        }
    }

    /// `median (p10..p90)` with `unit`, scaled by `scale`.
    pub fn show(&self, scale: f64, unit: &str) -> String {
        format!(
            "{} {unit} ({}..{})",
            short(self.median * scale),
            short(self.p10 * scale),
            short(self.p90 * scale)
        )
    }

    /// Reads what [`Summary::json`] wrote; missing fields are zero, a
    /// missing median or count is `None`.
    pub fn from_json(v: &Value) -> Option<Summary> {
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        Some(Summary {
            median: v["median"].as_f64()?,
            p10: f("p10"),
            p90: f("p90"),
            min: f("min"),
            max: f("max"),
            mean: f("mean"),
            n: usize::try_from(v["n"].as_u64()?).ok()?,
        })
    }

    /// For results.json.
    pub fn json(&self) -> Value {
        json!({
            "median": self.median, "p10": self.p10, "p90": self.p90,
            "min": self.min, "max": self.max, "mean": self.mean, "n": self.n,
        })
    }
}

/// A number with three significant digits.
pub fn short(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}
