//! Seeded agent transcripts with planted facts (`planted`, its vocabulary in `planted_words`),
//! the facts a projection cites (`cites`), what a projection says beyond them (`residue`), and
//! the scorer that reads a projection's printed lines against the truth (`score`). Shared by
//! `examples/bench_fidelity.rs` and `tests/it/compaction_fidelity.rs`, so both measure the same
//! thing.

pub mod cites;
pub mod planted;
mod planted_words;
pub mod residue;
pub mod score;
