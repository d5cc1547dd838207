//! The two pictures of a load run, as SVG next to its JSON: the latency histogram and replies
//! per second over the run (with messages sent per second for comparison).
//!
//! Must not: decide anything; it draws what the report already holds.

use std::path::Path;

use plotters::prelude::*;

use crate::telegram_load::Sample;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Latency histogram in millisecond buckets sized to cover up to the 99.9th percentile.
pub fn latency_histogram(path: &Path, title: &str, sorted_ms: &[f64]) -> Result<()> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = crate::telegram_load::percentile(sorted_ms, 0.999).max(1.0);
    let buckets = 60usize;
    let width = top / buckets as f64;
    let mut counts = vec![0u32; buckets + 1];
    for &ms in sorted_ms {
        counts[((ms / width) as usize).min(buckets)] += 1;
    }
    let tallest = counts.iter().copied().max().unwrap_or(1).max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0u32..buckets as u32 + 1).into_segmented(),
            0u32..tallest + tallest / 10 + 1,
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(format!(
            "latency, ms (bucket {width:.2} ms; last bucket ≥ p99.9 = {top:.1} ms)"
        ))
        .y_desc("replies")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                format!("{:.0}", *i as f64 * width)
            }
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    chart.draw_series(
        Histogram::vertical(&chart)
            .style(BLUE.mix(0.6).filled())
            .data(counts.iter().enumerate().map(|(i, c)| (i as u32, *c))),
    )?;
    root.present()?;
    Ok(())
}

/// Replies (and messages sent) per 250 ms bin, scaled to per second.
pub fn throughput(path: &Path, title: &str, samples: &[Sample]) -> Result<()> {
    const BIN: f64 = 0.25;
    let end = samples.iter().map(|s| s.done_s).fold(0.0, f64::max);
    let bins = (end / BIN).ceil() as usize + 1;
    let mut done = vec![0u32; bins];
    let mut sent = vec![0u32; bins];
    for s in samples {
        done[((s.done_s.max(0.0)) / BIN) as usize] += 1;
        sent[((s.sent_s.max(0.0) / BIN) as usize).min(bins - 1)] += 1;
    }
    let per_s = |v: &[u32]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, c)| (i as f64 * BIN, *c as f64 / BIN))
            .collect()
    };
    let (done, sent) = (per_s(&done), per_s(&sent));
    let top = done.iter().chain(&sent).map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..(bins as f64 * BIN), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first message")
        .y_desc("per second (250 ms bins)")
        .draw()?;
    chart
        .draw_series(LineSeries::new(done, &BLUE))?
        .label("replies")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(sent, &RED.mix(0.5)))?
        .label("messages sent")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.mix(0.5)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
